"""Test-wide setup for llmops.sglang.

- Makes the collection importable as ``ansible_collections.llmops.sglang`` by linking this checkout
  at ``.collections/ansible_collections/llmops/sglang`` (the same link ansible.cfg uses) and
  putting ``.collections`` first on ``sys.path``.
- Exposes the recorded real outputs in ``../shared/fixtures`` (override with ``LLMOPS_SHARED``);
  tests read them from there, never from a private copy.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS_DIR = REPO_ROOT / ".collections"
SHARED_DIR = Path(os.environ.get("LLMOPS_SHARED", REPO_ROOT.parent / "shared")).resolve()
FIXTURES_DIR = SHARED_DIR / "fixtures"


def _link_collection() -> None:
    link = COLLECTIONS_DIR / "ansible_collections" / "llmops" / "sglang"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(REPO_ROOT, target_is_directory=True)
        except FileExistsError:  # another xdist worker won the race
            pass
    if str(COLLECTIONS_DIR) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS_DIR))
    sandbox = str(REPO_ROOT / "tests" / "sandbox")
    if sandbox not in sys.path:
        sys.path.insert(0, sandbox)


_link_collection()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``../shared/fixtures`` (read-only recorded real outputs)."""
    if not FIXTURES_DIR.is_dir():
        pytest.fail(f"shared fixtures not found at {FIXTURES_DIR}; set LLMOPS_SHARED to the shared/ folder")
    return FIXTURES_DIR


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT
