"""Test-wide setup for llmops.sglang.

- Makes the collection importable as ``ansible_collections.llmops.sglang`` by linking this checkout
  at ``.collections/ansible_collections/llmops/sglang`` (the same link ansible.cfg uses) and
  putting ``.collections`` first on ``sys.path``.
- Exposes the recorded real outputs in ``tests/fixtures`` (see its README for where each came from).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS_DIR = REPO_ROOT / ".collections"
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"


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
    """``tests/fixtures`` (recorded real outputs; read-only by convention)."""
    return FIXTURES_DIR


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


# Tests that drive podman (the sandbox hosts, molecule, the sandbox builder) run in groups under pytest-xdist
# (`scripts/test.sh` runs `-n 2 --dist loadgroup`): one group per test file, so that the tests of a file, which share
# that file's sandbox hosts (test_site: sglang-sbx-1, test_sglang_server_sandbox: sglang-sbx-t7a/b, ...), run on one
# worker in file order, while another file's hosts and the unit, contract, packaging and simulator tests run beside
# them. A file that drives another file's hosts names that file's group in a module-level ``PODMAN_GROUP``.
# The image builds themselves are serialised by tests/sandbox/build.sh's lock.
_PODMAN_PATHS = ("tests/sandbox_e2e/", "tests/sandbox/tests/")


def podman_group(item):
    """The xdist group of a podman test (``podman-<file stem>`` or ``podman-<PODMAN_GROUP>``), None for the others."""
    rel = Path(str(item.fspath)).resolve().relative_to(REPO_ROOT).as_posix()
    if not (item.get_closest_marker("sandbox") or item.get_closest_marker("molecule") or rel.startswith(_PODMAN_PATHS)):
        return None
    return "podman-" + str(getattr(item.module, "PODMAN_GROUP", Path(rel).stem))


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook, which reads the group marker into the node id
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = podman_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(name=group))


@pytest.fixture(scope="session")
def sandbox_images():
    """The sandbox images (``localhost/llmops-sandbox:bookworm`` and ``:trixie``, ``localhost/sglang-sim:latest``) and
    the stand-in apt repository, built by ``tests/sandbox/build.sh`` (cached under .cache/sandbox: a few seconds when
    nothing changed). A test that needs them fails with the builder's output rather than skipping, so that no podman
    test is silently left out on a fresh machine where the images do not exist yet."""
    missing = [b for b in ("podman", "debootstrap") if shutil.which(b) is None]
    if os.geteuid() != 0 or missing:
        pytest.fail("sandbox tests need root and %s; run scripts/bootstrap.sh as root" % (missing or "podman"))
    env = dict(os.environ, CONTAINERS_CONF=str(REPO_ROOT / "tests" / "sandbox" / "containers.conf"))
    build = subprocess.run(["bash", str(REPO_ROOT / "tests" / "sandbox" / "build.sh"), "all"], cwd=REPO_ROOT, env=env,
                           capture_output=True, text=True, timeout=3600, check=False)
    if build.returncode != 0:
        pytest.fail("tests/sandbox/build.sh all failed (rc %d):\n%s" % (build.returncode, (build.stdout + build.stderr)[-4000:]))
    return True
