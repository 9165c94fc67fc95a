"""production_concurrency: /metrics read through the collection's SGLang client (api_key, validate_certs, timeout) and
the server log through the one log reader; fetch_url and run_command are mocked, inputs are the recorded fixtures
(tests/fixtures/sglang: metrics-mtp.prom has sglang:num_running_reqs 1.0 and sglang:num_queue_reqs 0.0 on one series;
the 0.5.9 log has two rank-0 Decode lines, each with #running-req: 1 and #queue-req: 0)."""
from __future__ import annotations

import json

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils._server import client as sglang_api
from ansible_collections.llmops.sglang.plugins.modules import production_concurrency

SECRET = "sk-unit-FAKE-77"


class FakeResp(object):
    def __init__(self, body):
        self.body = body.encode("utf-8")

    def read(self):
        return self.body


@pytest.fixture
def sg(fixtures_dir):
    return fixtures_dir / "sglang"


def run(mocker, capsys, args, metrics=(200, ""), run_command=(0, "", ""), bin_path="/usr/bin/journalctl"):
    calls = []

    def fetch(module, url, data=None, headers=None, method=None, timeout=None, use_proxy=True):
        calls.append({"url": url, "headers": headers, "timeout": timeout, "validate_certs": module.params["validate_certs"]})
        status, body = metrics
        if status != 200:
            return None, {"status": status, "msg": "HTTP Error %d" % status, "body": body.encode(), "url": url}
        return FakeResp(body), {"status": 200, "msg": "OK", "url": url}

    mocker.patch.object(sglang_api, "fetch_url", side_effect=fetch)
    mocker.patch.object(basic.AnsibleModule, "get_bin_path", return_value=bin_path)
    rc = mocker.patch.object(basic.AnsibleModule, "run_command", return_value=run_command)
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            production_concurrency.main()
    return json.loads(capsys.readouterr().out), calls, rc


def test_metrics_are_read_with_the_api_key_and_tls_settings(mocker, capsys, sg):
    out, calls, _rc = run(mocker, capsys, {"url": "https://gpu1:30000", "api_key": SECRET, "validate_certs": False, "duration": 0,
                                           "timeout": 7, "levels": [1, 4]}, metrics=(200, (sg / "metrics-mtp.prom").read_text()))
    assert not out.get("failed"), out.get("msg")
    (call,) = calls                                      # duration 0: one read
    assert call["url"] == "https://gpu1:30000/metrics" and call["timeout"] == 7.0
    assert call["headers"]["Authorization"] == "Bearer " + SECRET and call["validate_certs"] is False
    dist = out["distribution"]
    assert dist["samples"] == 1 and dist["running"]["p50"] == 1 and dist["queue"]["max"] == 0
    assert out["weights"] == {"1": 1.0}                  # one sample x 1 running request, nearest level 1
    assert out["window"]["source"] == "metrics" and out["queue_time_mean_s"] is None
    assert SECRET not in json.dumps(out)


def test_metrics_404_names_the_fix(mocker, capsys):
    out, calls, _rc = run(mocker, capsys, {"duration": 0}, metrics=(404, '{"detail": "Not Found"}'))
    assert out["failed"] and "answered 404: the server was started without --enable-metrics" in out["msg"]
    assert "sglang_server_enable_metrics: true" in out["msg"]


def test_journal_decode_lines_through_the_log_reader(mocker, capsys, sg):
    log = (sg / "qwen35-122b-mtp-tp4-v0.5.9.log").read_text()
    journal = "".join("2026-11-20T09:16:41+0000 gpu1 sglang-server[812]: " + line for line in log.splitlines(True))
    out, calls, rc = run(mocker, capsys, {"log_source": "journald", "log_since": "2h", "levels": [1, 4, 16]}, run_command=(0, journal, ""))
    assert not out.get("failed"), out.get("msg")
    assert calls == []                                   # a log source reads no HTTP
    assert rc.call_args[0][0] == ["/usr/bin/journalctl", "--no-pager", "-o", "short-iso", "-u", "sglang-server.service", "-n",
                                  "100000", "--since", "-7200s"]
    dist = out["distribution"]
    assert dist["samples"] == 2 and dist["histogram"] == {"1": 2} and dist["running"]["max"] == 1
    assert out["weights"] == {"1": 2.0}                  # two samples x 1 running request
    assert out["window"]["samples_read"] == 2 and out["window"]["lines"] == 48 and out["window"]["truncated"] is False
    assert out["summary"] == ("running requests over 2 samples: p50 1.0, p90 1.0, p99 1.0, max 1; queue p90 0.0, max 0, "
                              "queued in 0 % of samples")


def test_the_older_source_option_still_works(mocker, capsys, sg):
    log = (sg / "qwen35-122b-mtp-tp4-v0.5.9.log").read_text()
    out, _calls, rc = run(mocker, capsys, {"source": "podman", "log_since": "2026-11-20 09:00"}, run_command=(0, "", log),
                          bin_path="/usr/bin/podman")
    assert not out.get("failed"), out.get("msg")
    assert rc.call_args[0][0] == ["/usr/bin/podman", "logs", "--tail", "100000", "--since", "2026-11-20T09:00:00", "sglang-server"]
    assert out["window"]["source"] == "podman" and out["distribution"]["samples"] == 2


@pytest.mark.parametrize("args,fragment", [
    ({"source": "metrics", "log_source": "journald"}, "source=metrics and log_source=journald name two different sources"),
    ({"log_source": "file"}, "log_source=file needs log_path"),
    ({"log_source": "journald", "log_since": "lately"}, "log_since='lately' is not a duration"),
    ({"url": "gpu1:30000"}, "url='gpu1:30000' is not an SGLang base URL"),
    ({"levels": [0, 4]}, "levels=[0, 4]: every level must be a concurrency >= 1"),
])
def test_bad_options_fail_before_any_read(mocker, capsys, args, fragment):
    out, calls, rc = run(mocker, capsys, args)
    assert out["failed"] and fragment in out["msg"], out["msg"]
    assert calls == [] and rc.call_count == 0


def test_a_failed_log_read_fails_with_the_reader_message(mocker, capsys):
    out, _calls, _rc = run(mocker, capsys, {"log_source": "docker", "log_container": "nope"},
                           run_command=(1, "", "Error: No such container: nope"), bin_path="/usr/bin/docker")
    assert out["failed"] and out["msg"].startswith("cannot read the server log: /usr/bin/docker logs --tail 100000 --since 3600s nope exited 1")
