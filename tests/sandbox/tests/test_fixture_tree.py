"""The /opt/llmops-sandbox fixture tree (build.sh fixture-tree DIR): the SEV-SNP reference host's /sys and /proc."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parent.parent / "build.sh"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree") / "llmops-sandbox"
    res = subprocess.run(["bash", str(BUILD), "fixture-tree", str(root)], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    return root


def gpu_bdfs(fixtures_dir):
    """sysfs form of the recorded CSV's pci.bus_id (00000000:AF:00.0 -> 0000:af:00.0)."""
    lines = (fixtures_dir / "nvidia" / "rtxpro6000-x4-query-gpu-noheader.csv").read_text().splitlines()
    return [line.split(", ")[2][4:].lower() for line in lines]


def test_gpus_are_in_translated_iommu_groups(tree, fixtures_dir):
    bdfs = gpu_bdfs(fixtures_dir)
    assert bdfs == ["0000:17:00.0", "0000:63:00.0", "0000:af:00.0", "0000:e3:00.0"]
    for bdf in bdfs:
        dev = tree / "sys" / "bus" / "pci" / "devices" / bdf
        assert (dev / "vendor").read_text() == "0x10de\n"
        assert (dev / "class").read_text() == "0x030200\n"
        group = os.path.realpath(dev / "iommu_group")
        assert os.path.dirname(group) == os.path.realpath(tree / "sys" / "kernel" / "iommu_groups")
        assert open(os.path.join(group, "type")).read() == "DMA\n"
        # the group lists the device back, and both paths reach the same directory
        assert os.path.realpath(os.path.join(group, "devices", bdf)) == os.path.realpath(dev)


def test_every_iommu_group_is_dma(tree):
    groups = sorted((tree / "sys" / "kernel" / "iommu_groups").iterdir(), key=lambda p: int(p.name))
    assert [g.name for g in groups] == ["0", "12", "31", "45", "78", "96"]
    assert {(g / "type").read_text() for g in groups} == {"DMA\n"}


def test_sev_snp_host(tree, fixtures_dir):
    params = tree / "sys" / "module" / "kvm_amd" / "parameters"
    assert (params / "sev_snp").read_text() == "Y\n"
    cpuinfo = (tree / "proc" / "cpuinfo").read_text()
    assert cpuinfo.count("vendor_id\t: AuthenticAMD\n") == 256
    flags = [line for line in cpuinfo.splitlines() if line.startswith("flags")][0].split(":", 1)[1].split()
    assert {"sme", "sev", "sev_es", "sev_snp"} <= set(flags)
    assert (tree / "dmesg.txt").read_text() == (fixtures_dir / "host" / "sev-snp-host-dmesg.txt").read_text()
    assert (tree / "proc" / "cmdline").read_text() == (fixtures_dir / "host" / "proc-cmdline-ubuntu.txt").read_text()


def test_no_driver_files_before_the_driver_package(tree):
    # /proc/driver/nvidia/version comes with the stand-in nvidia-kernel-open-dkms package, not with the host
    assert not (tree / "proc" / "driver").exists()
    assert not (tree / "sys" / "module" / "nvidia").exists()


def test_bare_metal_dmi(tree):
    assert (tree / "sys" / "class" / "dmi" / "id" / "sys_vendor").read_text() == "Supermicro\n"
    assert not (tree / "sys" / "hypervisor").exists()
