"""testinfra checks of the host roles on a sandbox host after converge (molecule verifier).

The instance is reached with testinfra's podman backend (``podman exec``), named after the scenario
(``llmops-molecule-<scenario>``); run with CONTAINERS_CONF=tests/sandbox/containers.conf like molecule.
Expected values come from the stand-in repository (driver 580.95.05, the version of the recorded
``rtxpro6000-x4-query-gpu-noheader.csv``), the sandbox fixture tree (SEV-SNP AMD host, 4 GPUs, P2P
``CNS`` across the pairs) and NVIDIA's package layout, not from the roles' own output.
"""
from __future__ import annotations

import os

import pytest

testinfra_hosts = ["podman://llmops-molecule-%s" % os.environ.get("MOLECULE_SCENARIO_NAME", "host_bookworm").replace("_", "-")]

DRIVER_VERSION = "580.95.05"  # rtxpro6000-x4-query-gpu-noheader.csv, the stand-in packages' version
DISTRO_BY_CODENAME = {"bookworm": "debian12", "trixie": "debian13"}


def _env_lines(text):
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _sep, value = line.partition("=")
            out[key] = value
    return out


@pytest.fixture(scope="module")
def distro(host):
    codename = host.system_info.codename
    assert codename in DISTRO_BY_CODENAME, codename
    return DISTRO_BY_CODENAME[codename]


def test_cuda_repository_of_this_distribution(host, distro):
    source = host.file("/etc/apt/sources.list.d/cuda-%s-x86_64.list" % distro)
    assert source.exists
    assert "file:///srv/nvidia-standin/compute/cuda/repos/%s/x86_64/" % distro in source.content_string
    assert "signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg" in source.content_string
    other = {"debian12": "debian13", "debian13": "debian12"}[distro]
    assert not host.file("/etc/apt/sources.list.d/cuda-%s-x86_64.list" % other).exists


def test_container_toolkit_repository(host):
    source = host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.list").content_string
    assert "signed-by=/etc/apt/keyrings/nvidia-container-toolkit.asc" in source
    assert "file:///srv/nvidia-standin/libnvidia-container/stable/deb/$(ARCH) /" in source
    assert host.file("/etc/apt/keyrings/nvidia-container-toolkit.asc").content_string.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")


@pytest.mark.parametrize("name", ["cuda-keyring", "nvidia-driver-pinning-580", "nvidia-open", "nvidia-kernel-open-dkms",
                                  "nvidia-container-toolkit", "nvidia-container-toolkit-base", "nvidia-persistenced"])
def test_packages_installed(host, name):
    assert host.package(name).is_installed


def test_open_flavour_at_the_pinned_branch(host):
    assert host.package("nvidia-open").version.startswith(DRIVER_VERSION)
    # the proprietary flavour and the optional parts stay out (no NVSwitch on PCIe RTX PRO 6000, toolkit off)
    for name in ("nvidia-kernel-dkms", "cuda-drivers", "nvidia-fabricmanager-580", "cuda-toolkit-13-0"):
        assert not host.package(name).is_installed, name
    pin = host.file("/etc/apt/preferences.d/nvidia-driver-pinning-580").content_string
    assert "Pin: version 580.*" in pin


def test_nouveau_blacklisted(host):
    text = host.file("/etc/modprobe.d/blacklist-nouveau.conf").content_string.splitlines()
    assert "blacklist nouveau" in text
    assert "options nouveau modeset=0" in text


def test_persistenced_running(host):
    svc = host.service("nvidia-persistenced")
    assert svc.is_enabled
    assert svc.is_running


def test_cdi_devices(host):
    out = host.check_output("nvidia-ctk cdi list")
    devices = set(out.split())
    assert {"nvidia.com/gpu=all", "nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=2", "nvidia.com/gpu=3"} <= devices
    # toolkit 1.18 refreshes /var/run/cdi itself: no second static spec next to it (duplicate device names)
    assert host.file("/var/run/cdi/nvidia.yaml").exists
    assert not host.file("/etc/cdi/nvidia.yaml").exists


def test_no_docker_daemon_json_with_podman(host):
    assert not host.file("/etc/docker/daemon.json").exists


def test_grub_dropin_edits_tokens_and_keeps_cloud_args(host):
    dropin = host.file("/etc/default/grub.d/99-llmops-iommu.cfg")
    assert dropin.exists
    assert dropin.mode == 0o644
    assert "Managed by llmops.sglang" in dropin.content_string
    # Source the files the way grub-mkconfig does (cloud-image drop-in first) with passthrough tokens added:
    # on this SEV-SNP host auto must strip them and the invalid amd_iommu=on, keeping console=... and quiet.
    script = ('. /etc/default/grub.d/50-cloudimg-settings.cfg; '
              'GRUB_CMDLINE_LINUX="ro iommu=pt"; '
              'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT amd_iommu=on quiet iommu.passthrough=1"; '
              '. /etc/default/grub.d/99-llmops-iommu.cfg; '
              'printf "%s|%s" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"')
    linux, default = host.check_output("sh -c %s" % _quote(script)).split("|")
    assert linux == "ro"
    assert default == "console=tty1 console=ttyS0 quiet"


def test_no_reboot_pending(host):
    # the fixture /proc/cmdline has no passthrough token and the stand-in driver answers: nothing pending
    pending = host.file("/var/lib/llmops/reboot-pending")
    assert not pending.exists or host.check_output("ls -A /var/lib/llmops/reboot-pending") == ""


def test_nccl_env_disables_p2p_on_the_snp_host(host):
    env = host.file("/etc/llmops/nccl.env")
    assert env.mode == 0o644
    text = env.content_string
    assert _env_lines(text) == {"NCCL_P2P_DISABLE": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert "SEV-SNP is active" in text
    # pairs 0-1 and 2-3 are OK in the recorded topo -p2p r matrix; every cross pair is CNS
    assert "GPU0-GPU2 CNS" in text and "GPU1-GPU3 CNS" in text
    assert "GPU0-GPU1" not in text


def _quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"
