"""plugins/module_utils/_server/log_source.py: the one reader of a server's log, on the recorded SGLang 0.5.9 log
(tests/fixtures/sglang/qwen35-122b-mtp-tp4-v0.5.9.log, 48 lines from 2026-11-20 09:14:02 to 09:16:41); the expected
lines, bytes and commands are counted by hand from that file."""
from __future__ import annotations

import datetime

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._server import log_source as L

LOG = "qwen35-122b-mtp-tp4-v0.5.9.log"


class FakeModule(object):
    """get_bin_path / run_command stand-in: records the argv, answers ``answer`` = (rc, stdout, stderr)."""

    def __init__(self, answer=(0, "", ""), binary="/usr/bin/journalctl"):
        self.answer = answer
        self.binary = binary
        self.calls = []

    def get_bin_path(self, name):
        return self.binary

    def run_command(self, cmd, check_rc=False, environ_update=None):
        self.calls.append((cmd, environ_update))
        return self.answer


def params(**kw):
    p = dict((name, opt.get("default")) for name, opt in L.LOG_ARGUMENT_SPEC.items())
    p.update(kw)
    return p


@pytest.fixture
def log_text(fixtures_dir):
    return (fixtures_dir / "sglang" / LOG).read_text()


@pytest.mark.parametrize("value,expected", [
    (None, None), ("", None), ("90m", ("relative", 5400)), ("2h", ("relative", 7200)), ("1d", ("relative", 86400)),
    ("2026-11-20 09:14", ("absolute", "2026-11-20 09:14:00")), ("2026-11-20T09:14:05", ("absolute", "2026-11-20 09:14:05")),
])
def test_parse_since_forms(value, expected):
    assert L.parse_since(value) == expected


def test_parse_since_refuses_other_text_naming_the_option():
    with pytest.raises(ValueError, match=r"log_since='yesterday' is not a duration like 30m"):
        L.parse_since("yesterday")


def test_window_start_is_local_time_text():
    now = datetime.datetime(2026, 11, 20, 10, 16, 41)
    assert L.window_start(("relative", 3600), now) == "2026-11-20 09:16:41"
    assert L.window_start(("absolute", "2026-11-20 09:00:00"), now) == "2026-11-20 09:00:00"
    assert L.window_start(None, now) is None


def test_commands_of_each_source():
    assert L.command(params(log_source="journald"), "/bin/journalctl", ("relative", 1800)) == [
        "/bin/journalctl", "--no-pager", "-o", "short-iso", "-u", "sglang-server.service", "-n", "100000", "--since", "-1800s"]
    assert L.command(params(log_source="podman", log_max_lines=50), "/bin/podman", ("absolute", "2026-11-20 09:00:00")) == [
        "/bin/podman", "logs", "--tail", "50", "--since", "2026-11-20T09:00:00", "sglang-server"]
    assert L.command(params(log_source="docker", log_container="sglang"), "/bin/docker", None) == [
        "/bin/docker", "logs", "--tail", "100000", "sglang"]


def test_file_window_by_sglang_timestamps(fixtures_dir):
    text, info = L.read_log(FakeModule(), params(log_source="file", log_path=str(fixtures_dir / "sglang" / LOG),
                                                 log_since="2026-11-20 09:16:40"))
    # lines 45-48 are stamped 09:16:40 (prefill, decode) and 09:16:41 (decode, the chat request)
    assert info["status"] == "ok" and info["since"] == "2026-11-20 09:16:40"
    assert info["lines"] == 48 and info["lines_in_window"] == 4 and info["truncated"] is False
    assert text.splitlines()[0].startswith("[2026-11-20 09:16:40 TP0] Prefill batch")
    assert text.splitlines()[-1].endswith('"POST /v1/chat/completions HTTP/1.1" 200 OK')


def test_file_max_bytes_keeps_the_newest_whole_lines(fixtures_dir, tmp_path, log_text):
    last_two = "".join(log_text.splitlines(True)[-2:])
    budget = len(last_two.encode()) + 5             # 5 bytes of line 46 come along and are cut at its end
    text, info = L.read_log(FakeModule(), params(log_source="file", log_path=str(fixtures_dir / "sglang" / LOG),
                                                 log_max_bytes=budget))
    assert text == last_two
    assert info["truncated"] is True and info["lines"] == 2 and info["bytes"] == len(last_two.encode())


def test_journald_reads_stdout_only_with_the_window(log_text):
    module = FakeModule((0, log_text, "journal noise on stderr"))
    text, info = L.read_log(module, params(log_source="journald", log_since="30m", log_max_lines=500))
    assert text == log_text and info["status"] == "ok" and info["rc"] == 0
    (cmd, env), = module.calls
    assert cmd[-4:] == ["-n", "500", "--since", "-1800s"] and env == {"LC_ALL": "C", "LANGUAGE": "C"}


def test_container_logs_join_stdout_and_stderr(log_text):
    module = FakeModule((0, "uvicorn stdout line", log_text), binary="/usr/bin/podman")
    text, info = L.read_log(module, params(log_source="podman", log_container="sglang"))
    assert text == "uvicorn stdout line\n" + log_text
    assert info["lines"] == 49 and info["command"][-1] == "sglang"


def test_failures_are_returned_not_raised():
    text, info = L.read_log(FakeModule((1, "", "Error: No such container: nope"), binary="/usr/bin/docker"),
                            params(log_source="docker", log_container="nope"))
    assert text == "" and info["status"] == "error" and info["msg"].endswith("exited 1: Error: No such container: nope")
    text, info = L.read_log(FakeModule(binary=None), params(log_source="journald"))
    assert info["status"] == "error" and info["msg"].startswith("journalctl is not installed on this host (log_source=journald)")
    text, info = L.read_log(FakeModule(), params(log_source="file", log_path="/nonexistent/sglang.log"))
    assert info["status"] == "error" and info["msg"].startswith("cannot read log_path=/nonexistent/sglang.log:")
    text, info = L.read_log(FakeModule(), params())
    assert (text, info["status"]) == ("", "skipped")


def test_check_log_options_names_option_value_and_fix():
    assert L.check_log_options(params()) == []
    assert L.check_log_options(params(log_source="journald", log_unit="")) == [
        "log_source=journald needs log_unit (the systemd unit to read); set it or use log_source=none"]
    assert L.check_log_options(params(log_source="file")) == [
        "log_source=file needs log_path (the log file to read); set it or use log_source=none"]
    assert L.check_log_options(params(log_max_bytes=0, log_since="soon")) == [
        "log_since='soon' is not a duration like 30m, 2h, 900s, 1d or a local time like '2026-11-20 09:14:00'; set it to one of "
        "those forms or leave it unset", "log_max_bytes=0 must be at least 1"]


def test_log_argument_spec_copies_and_changes_a_default():
    spec = L.log_argument_spec(log_since="1h")
    assert spec["log_since"]["default"] == "1h" and "default" not in L.LOG_ARGUMENT_SPEC["log_since"]
    with pytest.raises(KeyError):
        L.log_argument_spec(log_window="1h")
