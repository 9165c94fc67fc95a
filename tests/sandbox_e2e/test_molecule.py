"""Role scenarios: every ``extensions/molecule/<scenario>`` runs ``molecule test`` (create, converge,
idempotence, testinfra verify, destroy) on the sandbox images (podman driver, systemd as PID 1)."""
from __future__ import annotations

import subprocess

import pytest

from sbx import REPO_ROOT, VENV_BIN, sandbox_env

pytestmark = [pytest.mark.sandbox, pytest.mark.molecule]
SCENARIOS = sorted(p.parent.name for p in (REPO_ROOT / "extensions" / "molecule").glob("*/molecule.yml"))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario, sandbox_available):
    # The images (bookworm and trixie) come from the same cached builder that site.yml uses.
    build = subprocess.run(
        ["bash", "tests/sandbox/build.sh", "all"],
        cwd=REPO_ROOT, env=sandbox_env(), capture_output=True, text=True, timeout=3600, check=False,
    )
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    proc = subprocess.run(
        [str(VENV_BIN / "molecule"), "test", "-s", scenario],
        # From the repository root: molecule finds extensions/molecule/<scenario> there, and the scenarios
        # resolve llmops.sglang through ${MOLECULE_PROJECT_DIRECTORY}/.collections.
        cwd=REPO_ROOT, env=sandbox_env(), capture_output=True, text=True, timeout=3600, check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-8000:]


def test_there_are_scenarios_for_both_debian_images():
    assert SCENARIOS, "no molecule scenarios under extensions/molecule"
