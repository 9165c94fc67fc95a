"""The stand-in NVIDIA apt repository (build.sh repo): signed, flat, NVIDIA's package names, apt verifies it."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parent.parent / "build.sh"

V = "580.95.05-1"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    env = dict(os.environ, SANDBOX_CACHE=str(cache))
    res = subprocess.run(["bash", str(BUILD), "repo"], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("changed=1 check=0 targets=repo")
    again = subprocess.run(["bash", str(BUILD), "repo"], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert again.stdout.strip().endswith("changed=0 check=0 targets=repo")      # cached
    return cache / "repo"


def control(deb, field):
    return subprocess.run(["dpkg-deb", "-f", str(deb), field], capture_output=True, text=True, check=True).stdout.strip()


def test_flat_layout_like_nvidia(repo):
    for distro in ("debian12", "debian13"):
        base = repo / "compute" / "cuda" / "repos" / distro / "x86_64"
        for name in ("InRelease", "Release", "Release.gpg", "Packages", "Packages.gz", "cuda-keyring_1.1-1_all.deb"):
            assert (base / name).is_file(), name
    assert (repo / "libnvidia-container" / "stable" / "deb" / "amd64" / "InRelease").is_file()


def test_packages_carry_nvidia_names_versions_and_standin_descriptions(repo):
    base = repo / "compute" / "cuda" / "repos" / "debian12" / "x86_64"
    debs = {p.name.split("_")[0]: p for p in base.glob("*.deb")}
    assert set(debs) == {"cuda-keyring", "nvidia-driver-pinning-580", "nvidia-kernel-open-dkms", "nvidia-kernel-dkms",
                         "nvidia-smi", "nvidia-persistenced", "nvidia-driver", "nvidia-open", "cuda-drivers-580",
                         "cuda-drivers", "nvidia-fabricmanager-580", "cuda-toolkit-13-0",
                         "nvidia-container-toolkit-base", "nvidia-container-toolkit"}
    for name, deb in debs.items():
        assert control(deb, "Description").startswith("STAND-IN for tests: "), name
    assert control(debs["nvidia-open"], "Version") == V
    assert control(debs["nvidia-open"], "Depends") == "nvidia-driver (= %s), nvidia-kernel-open-dkms (= %s)" % (V, V)
    assert control(debs["cuda-toolkit-13-0"], "Version") == "13.0.2-1"
    assert control(debs["nvidia-container-toolkit"], "Version") == "1.18.0-1"


def test_keyring_package_installs_key_and_source(repo, tmp_path):
    deb = repo / "compute" / "cuda" / "repos" / "debian13" / "x86_64" / "cuda-keyring_1.1-1_all.deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    assert (tmp_path / "usr/share/keyrings/cuda-archive-keyring.gpg").stat().st_size > 0
    assert (tmp_path / "etc/apt/sources.list.d/cuda-debian13-x86_64.list").read_text() == (
        "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
        "file:///srv/nvidia-standin/compute/cuda/repos/debian13/x86_64/ /\n")


def apt(tmp_path, base, keyring, *args):
    """apt-get/apt-cache against one flat repository only, in a private state directory (no system change)."""
    (tmp_path / "state" / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (tmp_path / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    (tmp_path / "status").touch()
    sources = tmp_path / "sources.list"
    sources.write_text("deb [signed-by=%s] file://%s/ /\n" % (keyring, base))
    opts = ["-o", "Dir::State=%s" % (tmp_path / "state"), "-o", "Dir::State::status=%s" % (tmp_path / "status"),
            "-o", "Dir::Cache=%s" % (tmp_path / "cache"), "-o", "Dir::Etc::sourcelist=%s" % sources,
            "-o", "Dir::Etc::sourceparts=-", "-o", "Dir::Etc::preferencesparts=-", "-o", "APT::Architecture=amd64",
            "-o", "Debug::NoLocking=1"]
    return subprocess.run([args[0]] + opts + list(args[1:]), capture_output=True, text=True, timeout=120, check=False)


def extracted_keyring(repo, tmp_path):
    deb = repo / "compute" / "cuda" / "repos" / "debian12" / "x86_64" / "cuda-keyring_1.1-1_all.deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "kr")], check=True)
    return tmp_path / "kr" / "usr/share/keyrings/cuda-archive-keyring.gpg"


def test_apt_verifies_the_signature(repo, tmp_path):
    base = repo / "compute" / "cuda" / "repos" / "debian12" / "x86_64"
    res = apt(tmp_path, base, extracted_keyring(repo, tmp_path), "apt-get", "update")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "InRelease" in res.stdout
    policy = apt(tmp_path, base, extracted_keyring(repo, tmp_path), "apt-cache", "policy", "nvidia-open")
    assert "Candidate: %s" % V in policy.stdout


def test_apt_refuses_a_tampered_release(repo, tmp_path):
    base = tmp_path / "tampered"
    shutil.copytree(repo / "compute" / "cuda" / "repos" / "debian12" / "x86_64", base)
    inrelease = (base / "InRelease").read_text()
    (base / "InRelease").write_text(inrelease.replace("Origin: NVIDIA (STAND-IN)", "Origin: NVIDIA (TAMPERED)"))
    res = apt(tmp_path, base, extracted_keyring(repo, tmp_path), "apt-get", "update")
    assert res.returncode != 0
    assert "BADSIG" in res.stdout + res.stderr or "not signed" in res.stdout + res.stderr


def test_apt_refuses_an_unknown_key(repo, tmp_path):
    base = repo / "compute" / "cuda" / "repos" / "debian12" / "x86_64"
    empty = tmp_path / "empty.gpg"
    subprocess.run(["gpg", "--batch", "--no-default-keyring", "--keyring", str(empty), "--list-keys"],
                   capture_output=True, env=dict(os.environ, GNUPGHOME=str(tmp_path)), check=False)
    res = apt(tmp_path, base, empty, "apt-get", "update")
    assert res.returncode != 0
    assert "NO_PUBKEY" in res.stdout + res.stderr


def test_driver_package_binds_the_fixture_tree_gpus(repo, tmp_path):
    """nvidia-kernel-open-dkms adds sys/bus/pci/drivers/nvidia and each GPU's driver link on top of the host tree."""
    res = subprocess.run(["bash", str(BUILD), "fixture-tree", str(tmp_path / "opt" / "llmops-sandbox")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    deb = repo / "compute" / "cuda" / "repos" / "debian12" / "x86_64" / ("nvidia-kernel-open-dkms_%s_amd64.deb" % V)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    sys_root = tmp_path / "opt" / "llmops-sandbox" / "sys"
    driver_dir = os.path.realpath(sys_root / "bus" / "pci" / "drivers" / "nvidia")
    for bdf in ("0000:17:00.0", "0000:63:00.0", "0000:af:00.0", "0000:e3:00.0"):
        device = sys_root / "bus" / "pci" / "devices" / bdf
        assert os.path.realpath(device / "driver") == driver_dir
        assert os.path.realpath(os.path.join(driver_dir, bdf)) == os.path.realpath(device)
    assert not (sys_root / "bus" / "pci" / "devices" / "0000:00:00.0" / "driver").exists()
    version = (tmp_path / "opt" / "llmops-sandbox" / "proc" / "driver" / "nvidia" / "version").read_text()
    assert version.startswith("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build")
