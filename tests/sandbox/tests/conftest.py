"""Fixtures for the sandbox's own tests (stand-in nvidia-smi / nvidia-ctk, fixture tree, stand-in apt repo).

``standin_data`` lays out, in a temporary directory, exactly what the stand-in package ``nvidia-smi`` installs
under /usr/share/nvidia-standin (copied from tests/fixtures at test time).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SANDBOX = Path(__file__).resolve().parent.parent
STANDIN = SANDBOX / "standin"
BUILD = SANDBOX / "build.sh"


@pytest.fixture()
def standin_data(tmp_path, fixtures_dir):
    data = tmp_path / "nvidia-standin"
    data.mkdir()
    nv = fixtures_dir / "nvidia"
    shutil.copy(nv / "rtxpro6000-x4-query-gpu-noheader.csv", data / "query-gpu-noheader.csv")
    shutil.copy(nv / "rtxpro6000-x4-topo-p2p-r.txt", data / "topo-p2p-r.txt")
    shutil.copy(STANDIN / "topo-m.txt", data / "topo-m.txt")
    for name in ("smi-no-driver.txt", "smi-no-devices.txt", "smi-version-mismatch.txt", "smi-bad-field.txt"):
        shutil.copy(nv / name, data / name)
    return data


@pytest.fixture()
def run_standin(standin_data, tmp_path):
    """run_standin("nvidia-smi", "-L", env={...}) -> CompletedProcess (text)."""
    def _run(tool, *args, env=None):
        full = dict(os.environ, NVIDIA_STANDIN_DATA=str(standin_data), NVIDIA_STANDIN_STATE="ok")
        full.update(env or {})
        script = STANDIN / (tool.replace("-", "_") + ".py")     # installed as /usr/bin/<tool> by build.sh
        return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                              env=full, cwd=tmp_path, timeout=30, check=False)
    return _run
