"""Fixtures for the sandbox end-to-end tests; helpers live in sbx.py."""
from __future__ import annotations

import os
import shutil

import pytest

from sbx import run_playbook


@pytest.fixture(scope="session")
def sandbox_available():
    """Skip-free guard: the sandbox tests need root and podman; say clearly what is missing."""
    missing = [b for b in ("podman", "debootstrap") if shutil.which(b) is None]
    if os.geteuid() != 0 or missing:
        pytest.fail(f"sandbox tests need root and {missing or 'podman'}; run scripts/bootstrap.sh as root")
    return True


@pytest.fixture(scope="session")
def sandbox_up(sandbox_available):
    """The embedded sandbox brought up once per session (``tests/sandbox/sandbox.yml``, as ``make site`` does): the
    hosts of inventories/sandbox (sglang-sbx-1) running, the simulator image loaded. Shared by the tests that run
    site.yml against that inventory (test_site.py, test_ci_pipeline.py) instead of starting hosts of their own."""
    sandbox = run_playbook("tests/sandbox/sandbox.yml")
    assert sandbox.rc == 0, sandbox.output[-6000:]
    return sandbox
