"""A sandbox host image end to end (tests/sandbox/verify_host.sh in a throwaway container): signed apt from the
stand-in repository, nvidia-open's stand-in nvidia-smi, CDI, nested podman running the simulator image.

Marked ``sandbox`` (root + podman, about 30 s per suite after the images are built; the build is cached).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SANDBOX = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("suite", ["bookworm", "trixie"])
def test_sandbox_host_end_to_end(suite):
    env = dict(os.environ, CONTAINERS_CONF=str(SANDBOX / "containers.conf"))
    build = subprocess.run([str(SANDBOX / "build.sh"), "repo", suite, "sim"], capture_output=True, text=True,
                           env=env, timeout=1200, check=False)
    assert build.returncode == 0, build.stderr[-3000:]
    res = subprocess.run([str(SANDBOX / "verify_host.sh"), suite], capture_output=True, text=True, env=env,
                         timeout=600, check=False)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    passes = [line for line in res.stdout.splitlines() if line.startswith("verify: PASS")]
    assert len(passes) == 6, res.stdout
    assert res.stdout.splitlines()[-1].startswith("verify: OK")
