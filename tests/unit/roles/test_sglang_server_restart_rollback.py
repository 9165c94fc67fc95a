"""sglang_server: a start/restart that fails itself (before any readiness check) rolls back like a failed readiness check.

The role's tasks/restart.yml runs on the controller (local connection) with stand-ins on PATH: a ``systemctl`` that
refuses to start a unit whose file holds ``BAD`` (as systemd does when an ExecStartPre such as the image pull fails)
and logs every call, and a ``journalctl``. A stub HTTP server answers ``/health`` for the rolled-back server. The
expected messages and the restored file content are written out by hand.
"""
from __future__ import annotations

import http.server
import os
import stat
import threading

import pytest

from test_role_rendering import REF_GPU, facts, role_task, run_tasks

FAKE_SYSTEMCTL = """#!/bin/sh
# stand-in systemctl: state in $FAKE_STATE, unit file $FAKE_UNIT_FILE, every call appended to $FAKE_LOG
echo "$*" >> "$FAKE_LOG"
case "$1" in
  daemon-reload) exit 0 ;;
  is-enabled) echo enabled; exit 0 ;;
  is-active) cat "$FAKE_STATE"; exit 0 ;;
  show) printf 'Id=%s\\nLoadState=loaded\\nActiveState=%s\\nSubState=running\\nNRestarts=0\\nUnitFileState=enabled\\n' "$2" "$(cat "$FAKE_STATE")"
        exit 0 ;;
  start|restart)
    if grep -q BAD "$FAKE_UNIT_FILE"; then
      echo "Job for $2 failed because the control process exited with error code." >&2
      echo failed > "$FAKE_STATE"; exit 1
    fi
    echo active > "$FAKE_STATE"; exit 0 ;;
esac
exit 0
"""
FAKE_JOURNALCTL = "#!/bin/sh\necho 'ExecStartPre: podman pull: connection refused (stand-in journal)'\n"


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture()
def health_port():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def _stand_ins(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("systemctl", FAKE_SYSTEMCTL), ("journalctl", FAKE_JOURNALCTL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    (tmp_path / "state").write_text("inactive\n")
    return {"PATH": "%s:%s" % (bin_dir, os.environ["PATH"]), "FAKE_STATE": str(tmp_path / "state"),
            "FAKE_UNIT_FILE": str(tmp_path / "unit.service"), "FAKE_LOG": str(tmp_path / "calls.log")}


def _restart(tmp_path, port, rollback_possible):
    (tmp_path / "unit.service").write_text("[Service]\nExecStartPre=BAD pull\n")   # the new unit, written by main.yml
    (tmp_path / "unit.service.bak").write_text("[Service]\nExecStart=good\n")      # template's backup of the previous one
    (tmp_path / "secret.env").write_text("SGLANG_SERVER_API_KEY=\n")
    task = role_task("sglang_server", "restart.yml")
    task["vars"] = {
        "sglang_server__unit": "sglang-test.service", "sglang_server__unit_file": str(tmp_path / "unit.service"),
        "sglang_server__secret_env_file": str(tmp_path / "secret.env"), "sglang_server__unit_stat": {"stat": {"exists": True}},
        "sglang_server__backups": [{"backup": str(tmp_path / "unit.service.bak"), "dest": str(tmp_path / "unit.service")}],
        "sglang_server__rollback_possible": rollback_possible, "sglang_server_port": port, "sglang_server_ready_delay": 1,
        "sglang_server_ready_timeout": 20,
    }
    rc, text = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [task], extra_env=_stand_ins(tmp_path))[:2]
    return rc, " ".join(text.split()), (tmp_path / "calls.log").read_text().splitlines()


def test_a_failed_start_restores_and_restarts_the_previous_configuration(tmp_path, health_port):
    rc, flat, calls = _restart(tmp_path, health_port, True)
    assert rc != 0
    assert ("SGLang server sglang-test.service on target could not be started with the new configuration: Start the SGLang server "
            "failed: ") in flat, flat[-3000:]
    assert "Job for sglang-test.service failed because the control process exited with error code." in flat
    assert ("Rolled back: the previous unit and environment files (%s) were restored and restarted; the previous server is ready "
            "again after" % (tmp_path / "unit.service")) in flat
    assert "serves. The new configuration was NOT applied." in flat
    assert "Fix: read the journal lines printed above (an ExecStartPre that failed" in flat
    assert flat.count("podman pull: connection refused (stand-in journal)") == 1
    # The previous file is back, its backup removed, and the unit was started twice: the new configuration (refused),
    # then the restored one (state=restarted starts a unit that is not running, as the refused one is not).
    assert (tmp_path / "unit.service").read_text() == "[Service]\nExecStart=good\n"
    assert not (tmp_path / "unit.service.bak").exists()
    assert [c.split()[0] for c in calls if c.split()[0] in ("start", "restart")] == ["start", "start"]
    assert calls.index("daemon-reload") < len(calls) - 1 and calls.count("daemon-reload") == 2
    assert (tmp_path / "state").read_text().strip() == "active"


def test_a_failed_start_without_a_previous_server_says_so(tmp_path, health_port):
    rc, flat, calls = _restart(tmp_path, health_port, False)
    assert rc != 0
    assert "could not be started with the new configuration: Start the SGLang server failed:" in flat, flat[-3000:]
    assert "Rollback: none (no server was running before this run, or nothing changed; sglang_server_rollback True)." in flat
    assert (tmp_path / "unit.service").read_text() == "[Service]\nExecStartPre=BAD pull\n"
    assert [c.split()[0] for c in calls if c.split()[0] in ("start", "restart")] == ["start"]
