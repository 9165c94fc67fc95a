"""llmops.sglang.sglang_ready: the readiness wait of the sglang_server role (replaces files/sglang_wait_ready.py).

A real HTTP server on 127.0.0.1 answers from a scripted list of statuses (the last one repeats) and records the
Authorization header of every request; ``systemctl show`` is a stand-in (AnsibleModule.run_command) that returns one
recorded answer per call (the last repeats). Every expected value below is written out by hand.
"""
from __future__ import annotations

import http.server
import json
import socket
import threading

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import sglang_ready

UNIT = "sglang-test.service"


class _Scripted(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        srv = self.server
        srv.seen.append((self.path, self.headers.get("Authorization")))
        status = srv.statuses[min(len(srv.seen) - 1, len(srv.statuses) - 1)]
        if srv.want_auth is not None and self.headers.get("Authorization") != srv.want_auth:
            status = 401
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Scripted)
    srv.seen, srv.statuses, srv.want_auth = [], [200], None
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _show(active, sub, restarts):
    return (0, "ActiveState=%s\nSubState=%s\nNRestarts=%d\n" % (active, sub, restarts), "")


def run(mocker, capsys, args, shows=None):
    """Run the module; returns (exit code, result dict, the argv of every run_command call)."""
    answers = list(shows or [_show("active", "running", 0)])
    calls = []

    def run_command(argv, *a, **kw):
        calls.append(argv)
        return answers[min(len(calls) - 1, len(answers) - 1)]

    mocker.patch.object(basic.AnsibleModule, "run_command", side_effect=run_command)
    full = dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)
    full.setdefault("ready_interval", 0.05)
    with patch_module_args(full):
        with pytest.raises(SystemExit) as exc:
            sglang_ready.main()
    out = capsys.readouterr().out
    return exc.value.code, json.loads(out), calls, out


def test_503_then_200_is_ready(mocker, capsys, server):
    server.statuses = [503, 503, 200]
    url = "http://127.0.0.1:%d" % server.server_address[1]
    rc, res, calls, _unused = run(mocker, capsys, {"url": url, "unit": UNIT, "ready_timeout": 30})
    assert rc == 0 and res["ready"] is True and res["changed"] is False
    assert res["reason"] == "GET %s/health answered 200" % url
    assert res["polls"] == 3 and res["status_counts"] == {"503": 2, "200": 1}
    assert (res["last_status"], res["last_error"]) == (200, "")
    assert (res["active_state"], res["sub_state"], res["restarts"]) == ("active", "running", 0)
    assert [p for p, _a in server.seen] == ["/health", "/health", "/health"]
    assert [a for _p, a in server.seen] == [None, None, None]           # no key given: no header
    # one read before the first poll, one after each of the 3 polls
    assert calls == [["systemctl", "show", UNIT, "--property=ActiveState", "--property=SubState", "--property=NRestarts"]] * 4


def test_a_failed_unit_stops_the_wait_at_once(mocker, capsys, server):
    server.statuses = [503]
    url = "http://127.0.0.1:%d" % server.server_address[1]
    shows = [_show("activating", "start", 0), _show("failed", "failed", 0)]
    rc, res, calls, _unused = run(mocker, capsys, {"url": url, "unit": UNIT, "ready_timeout": 60}, shows)
    assert rc == 1 and res["failed"] is True and res["ready"] is False
    assert res["msg"] == res["reason"] == "the unit sglang-test.service failed (ActiveState=failed, SubState=failed)"
    assert res["polls"] == 1 and len(calls) == 2                          # not the 60 s timeout
    assert (res["last_status"], res["last_error"]) == (503, "Service Unavailable")
    assert (res["active_state"], res["sub_state"], res["restarts"]) == ("failed", "failed", 0)


def _closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_a_crash_loop_is_counted_from_the_restarts_before_the_wait(mocker, capsys):
    # NRestarts 5 before the wait (earlier crashes do not count), then 6, 7, 8: 3 restarts while waiting > max_restarts 2
    shows = [_show("activating", "auto-restart", n) for n in (5, 6, 7, 8)]
    url = "http://127.0.0.1:%d" % _closed_port()
    rc, res, calls, _unused = run(mocker, capsys, {"url": url, "unit": UNIT, "ready_timeout": 60, "max_restarts": 2}, shows)
    assert rc == 1 and res["ready"] is False
    assert res["reason"] == "the unit sglang-test.service restarted 3 times while waiting (crash loop; more than 2 allowed)"
    assert res["polls"] == 3 and res["status_counts"] == {"-1": 3}
    assert res["last_status"] is None                                      # no HTTP answer: null, as the role prints "nothing"
    assert "Connection refused" in res["last_error"] and "urlopen" not in res["last_error"]
    assert (res["active_state"], res["sub_state"], res["restarts"]) == ("activating", "auto-restart", 3)


def test_two_restarts_are_tolerated_with_max_restarts_2(mocker, capsys, server):
    server.statuses = [503, 503, 200]
    shows = [_show("activating", "auto-restart", n) for n in (0, 1, 2, 2)]
    url = "http://127.0.0.1:%d" % server.server_address[1]
    rc, res, _calls, _unused = run(mocker, capsys, {"url": url, "unit": UNIT, "ready_timeout": 30, "max_restarts": 2}, shows)
    assert rc == 0 and res["ready"] is True and res["restarts"] == 2


def test_the_api_key_is_read_from_the_secret_file_and_shown_nowhere(mocker, capsys, server, tmp_path):
    # the role's secret file quotes a value with a space, a quote and a $ as "..." with backslash escapes
    secret = tmp_path / "sglang.secret.env"
    secret.write_text('# written by the role\nHF_TOKEN=hf-other\nSGLANG_SERVER_API_KEY="sk-a \\"b\\" \\$c"\n')
    server.statuses, server.want_auth = [200], 'Bearer sk-a "b" $c'
    url = "http://127.0.0.1:%d" % server.server_address[1]
    rc, res, _calls, out = run(mocker, capsys, {"url": url, "api_key_file": str(secret)})
    assert rc == 0 and res["ready"] is True, res
    assert server.seen == [("/health", 'Bearer sk-a "b" $c')]
    assert 'sk-a' not in out and "api_key" not in res
    # without a unit nothing is watched and systemctl is never run
    assert (res["active_state"], res["sub_state"], res["restarts"]) == ("unknown", "", 0)


def test_a_wrong_key_is_not_retried(mocker, capsys, server, tmp_path):
    secret = tmp_path / "s.env"
    secret.write_text("SGLANG_SERVER_API_KEY=wrong\n")
    server.want_auth = "Bearer right"
    url = "http://127.0.0.1:%d" % server.server_address[1]
    rc, res, _calls, out = run(mocker, capsys, {"url": url, "api_key_file": str(secret), "ready_timeout": 60})
    assert rc == 1 and res["polls"] == 1 and res["last_status"] == 401
    assert res["reason"].startswith("readiness: %s/health answered HTTP 401, which is not retried" % url)
    assert "wrong" not in out.replace('"wrong"', "")  # the key itself is masked


def test_a_missing_key_file_sends_no_key(mocker, capsys, server, tmp_path):
    url = "http://127.0.0.1:%d" % server.server_address[1]
    rc, res, _calls, _unused = run(mocker, capsys, {"url": url, "api_key_file": str(tmp_path / "absent.env")})
    assert rc == 0 and server.seen == [("/health", None)]


def test_not_ready_in_time(mocker, capsys, server):
    server.statuses = [503]
    url = "http://127.0.0.1:%d" % server.server_address[1]
    rc, res, _calls, _unused = run(mocker, capsys, {"url": url, "ready_timeout": 0})
    # ready_timeout 0 polls once: 0 + 0.05 s interval > 0 s
    assert rc == 1 and res["reason"] == "not ready within 0 s (1 polls, statuses {'503': 1})"
    assert res["polls"] == 1 and res["last_status"] == 503


@pytest.mark.parametrize("args, msg", [
    ({"ready_interval": 0}, "ready_interval=0.0 must be greater than 0; give the seconds between two polls, e.g. 5"),
    ({"ready_timeout": -1}, "ready_timeout=-1.0 is negative; give the seconds to wait, 0 or more (0 polls once)"),
    ({"max_restarts": -1}, "max_restarts=-1 is negative; give the restarts tolerated while waiting, 0 or more"),
    ({"path": "health"}, "path='health' does not start with '/'; give the endpoint path, e.g. /health"),
    ({"url": "127.0.0.1:30000"}, "url='127.0.0.1:30000' is not an SGLang base URL (need http:// or https:// and a host); "
                                 "give one like http://127.0.0.1:30000"),
])
def test_bad_options_are_refused_before_any_poll(mocker, capsys, args, msg):
    rc, res, calls, _unused = run(mocker, capsys, args)
    assert rc == 1 and res["msg"] == msg and calls == []


def test_api_key_and_api_key_file_exclude_each_other(mocker, capsys, tmp_path):
    rc, res, _calls, _unused = run(mocker, capsys, {"api_key": "sk-test-123", "api_key_file": str(tmp_path / "s.env")})
    assert rc == 1 and res["msg"] == "parameters are mutually exclusive: api_key|api_key_file"


def test_an_unreadable_key_file_is_named(mocker, capsys, tmp_path):
    rc, res, _calls, _unused = run(mocker, capsys, {"api_key_file": str(tmp_path)})   # a directory: open() fails
    assert rc == 1 and res["msg"].startswith("api_key_file=%s cannot be read (" % tmp_path)
