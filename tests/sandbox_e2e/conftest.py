"""Fixtures for the sandbox end-to-end tests; helpers live in sbx.py."""
from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(scope="session")
def sandbox_available():
    """Skip-free guard: the sandbox tests need root and podman; say clearly what is missing."""
    missing = [b for b in ("podman", "debootstrap") if shutil.which(b) is None]
    if os.geteuid() != 0 or missing:
        pytest.fail(f"sandbox tests need root and {missing or 'podman'}; run scripts/bootstrap.sh as root")
    return True
