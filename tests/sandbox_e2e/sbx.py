"""Helpers for the sandbox end-to-end tests (marker ``sandbox``): run playbooks, parse PLAY RECAP.

These tests drive the real entry points (``ansible-playbook site.yml``, ``molecule test``) against
the embedded sandbox: podman systemd containers standing in for GPU hosts (see docs/sandbox.md).
They need root, podman and the toolchain that ``scripts/bootstrap.sh`` installs.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = REPO_ROOT / ".venv" / "bin"
RECAP_RE = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+"
    r"failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)"
)


@dataclass
class PlaybookRun:
    """Result of one ansible-playbook run: exit code, combined output and the PLAY RECAP per host."""

    rc: int
    output: str
    recap: dict = field(default_factory=dict)

    def changed_hosts(self) -> dict:
        """Hosts whose recap shows changed > 0, as {host: changed}."""
        return {h: r["changed"] for h, r in self.recap.items() if r["changed"]}


def parse_recap(output: str) -> dict:
    """Parse the PLAY RECAP block of ansible's default callback into {host: {ok, changed, ...}} (ints)."""
    recap = {}
    in_recap = False
    for line in output.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        if in_recap:
            m = RECAP_RE.match(line.strip())
            if m:
                recap[m.group("host")] = {k: int(v) for k, v in m.groupdict().items() if k != "host"}
    return recap


def sandbox_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["CONTAINERS_CONF"] = str(REPO_ROOT / "tests" / "sandbox" / "containers.conf")
    env["ANSIBLE_CONFIG"] = str(REPO_ROOT / "ansible.cfg")
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    return env


def run_playbook(*args: str, timeout: int = 1800) -> PlaybookRun:
    """Run ``ansible-playbook ARGS`` from the repository root; never raises on a failed play."""
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), *args],
        cwd=REPO_ROOT, env=sandbox_env(), capture_output=True, text=True, timeout=timeout, check=False,
    )
    out = proc.stdout + proc.stderr
    return PlaybookRun(rc=proc.returncode, output=out, recap=parse_recap(out))


def start_playbook(*args: str) -> subprocess.Popen:
    """Start ``ansible-playbook ARGS`` from the repository root in the background (stdout and stderr together, text);
    collect it with :func:`finish_playbook`. For a playbook that must run while the test does something else."""
    return subprocess.Popen([str(VENV_BIN / "ansible-playbook"), *args], cwd=REPO_ROOT, env=sandbox_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish_playbook(proc: subprocess.Popen, timeout: int = 600) -> PlaybookRun:
    """Wait (at most ``timeout`` s; subprocess.TimeoutExpired after it) for a playbook :func:`start_playbook` started."""
    out, _err = proc.communicate(timeout=timeout)
    return PlaybookRun(rc=proc.returncode, output=out, recap=parse_recap(out))
