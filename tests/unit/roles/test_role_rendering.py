"""Rendering and check-mode tests of the host roles on the Ubuntu, Debian and RHEL paths.

Each test writes a small playbook that injects the recorded facts of a host (OS facts as Ansible
reports them, GPU facts in the shape of llmops.sglang.gpu_facts with the values of the recorded
outputs in tests/fixtures) through the test-only module library/recorded_facts.py, runs a role
task file on the controller (local connection, nothing outside tmp_path is touched) and reads what
the role decided or rendered. Expected values are written out by hand from NVIDIA's repository layout
(PLATFORM_FACTS.md §2), the kernel's parameter rules (§4) and the fixture files.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
LIBRARY = Path(__file__).resolve().parent / "library"
PLAYBOOK_BIN = Path(sys.executable).with_name("ansible-playbook")

# ---------------------------------------------------------------------------------------------
# recorded facts

OS_FACTS = {
    "ubuntu2404": {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
                   "os_family": "Debian", "architecture": "x86_64", "kernel": "6.8.0-87-generic"},
    "ubuntu2204_arm": {"distribution": "Ubuntu", "distribution_version": "22.04", "distribution_major_version": "22",
                       "os_family": "Debian", "architecture": "aarch64", "kernel": "5.15.0-131-generic"},
    "debian12": {"distribution": "Debian", "distribution_version": "12.12", "distribution_major_version": "12",
                 "os_family": "Debian", "architecture": "x86_64", "kernel": "6.1.0-40-amd64"},
    "debian13": {"distribution": "Debian", "distribution_version": "13.2", "distribution_major_version": "13",
                 "os_family": "Debian", "architecture": "x86_64", "kernel": "6.12.57+deb13-amd64"},
    "rhel9": {"distribution": "RedHat", "distribution_version": "9.4", "distribution_major_version": "9",
              "os_family": "RedHat", "architecture": "x86_64", "kernel": "5.14.0-427.13.1.el9_4.x86_64"},
    "rocky9": {"distribution": "Rocky", "distribution_version": "9.5", "distribution_major_version": "9",
               "os_family": "RedHat", "architecture": "x86_64", "kernel": "5.14.0-503.14.1.el9_5.x86_64"},
    "ubuntu2004": {"distribution": "Ubuntu", "distribution_version": "20.04", "distribution_major_version": "20",
                   "os_family": "Debian", "architecture": "x86_64", "kernel": "5.4.0-200-generic"},
}

# nvidia/rtxpro6000-x4-topo-p2p-r.txt, read by eye: OK only within 0-1 and 2-3, CNS across.
_P2P_R = [["X", "OK", "CNS", "CNS"], ["OK", "X", "CNS", "CNS"], ["CNS", "CNS", "X", "OK"], ["CNS", "CNS", "OK", "X"]]
# The reference host: nvidia/rtxpro6000-x4-query-gpu-noheader.csv + host/sev-snp-host-dmesg.txt (AMD, SNP, translated).
REF_GPU = {
    "smi_state": "ok", "driver_version": "580.95.05", "kernel_module_flavour": "open", "gpu_count": 4,
    "gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "pci_bus_id": bdf, "memory_total_mib": 97887,
              "compute_capability": "12.0", "architecture": "Blackwell"}
             for i, bdf in enumerate(["0000:17:00.0", "0000:63:00.0", "0000:af:00.0", "0000:e3:00.0"])],
    "architectures": ["Blackwell"],
    "pci": {"gpu_count": 4, "nvswitch_count": 0, "nvswitches": []},
    "p2p": {"modes": ["r"], "read": {"gpus": [0, 1, 2, 3], "matrix": _P2P_R,
                                     "ok_directed": [[0, 1], [1, 0], [2, 3], [3, 2]]}, "ok_pairs": [[0, 1], [2, 3]]},
    "nvlink": {"present": False, "nvlink_pairs": []},
    "iommu": {"enabled": True, "default_domain": "translated", "gpu_group_types": ["DMA"],
              "gpu_groups": [{"pci_bus_id": "0000:17:00.0", "group": "31", "type": "DMA"}]},
    "cmdline": {"raw": "BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic ro quiet", "tokens": ["BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic", "ro", "quiet"]},
    "cpu_vendor": "amd",
    "sev_snp": {"active": True, "evidence": ["kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)"]},
    "virtualization": {"role": "host", "gpu_passthrough": False},
}
# The H200 of nvidia/h200-query-gpu-noheader.csv (cc 9.0, 143771 MiB, 580.159.04, open module) on an Intel host.
H200_GPU = {
    "smi_state": "ok", "driver_version": "580.159.04", "kernel_module_flavour": "open", "gpu_count": 1,
    "gpus": [{"index": 0, "name": "NVIDIA H200", "pci_bus_id": "0000:00:06.0", "memory_total_mib": 143771,
              "compute_capability": "9.0", "architecture": "Hopper"}],
    "architectures": ["Hopper"],
    "pci": {"gpu_count": 1, "nvswitch_count": 0, "nvswitches": []},
    "p2p": {"modes": ["r"], "read": None, "ok_pairs": []},
    "nvlink": {"present": False, "nvlink_pairs": []},
    "iommu": {"enabled": True, "default_domain": "translated", "gpu_group_types": ["DMA"], "gpu_groups": []},
    "cmdline": {"tokens": ["BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic", "ro", "quiet", "splash", "intel_iommu=on", "iommu.strict=0"]},
    "cpu_vendor": "intel",
    "sev_snp": {"active": False},
    "virtualization": {"role": "host", "gpu_passthrough": False},
}
# A host before the driver: nvidia-smi missing, GPUs only seen on the PCI bus; an HGX board with NVSwitches.
BARE_HGX_GPU = {
    "smi_state": "missing", "driver_version": None, "kernel_module_flavour": "unknown", "gpu_count": 0, "gpus": [], "architectures": [],
    "pci": {"gpu_count": 8, "nvswitch_count": 4, "nvswitches": [{"pci_bus_id": "0000:05:00.0"}] * 4},
    "p2p": {}, "nvlink": {}, "iommu": {"default_domain": "translated", "gpu_groups": []},
    "cmdline": {"tokens": ["ro"]}, "cpu_vendor": "intel", "sev_snp": {"active": False}, "virtualization": {"role": "host"},
}


def facts(os_name, gpu, var_lib_free_gib=100):
    out = copy.deepcopy(OS_FACTS[os_name])
    out["llmops_gpu"] = copy.deepcopy(gpu)
    out["mounts"] = [{"mount": "/", "size_available": 500 * 1073741824}, {"mount": "/var/lib", "size_available": var_lib_free_gib * 1073741824},
                     {"mount": "/var/lib/sglang-other", "size_available": 1}]
    return out


# ---------------------------------------------------------------------------------------------
# harness


def run_tasks(tmp_path, host_facts, tasks, play_vars=None, check=False, extra_env=None):
    """Run ``tasks`` after injecting ``host_facts``; return (rc, output text, results dict written by the play)."""
    out_file = tmp_path / "out.json"
    play = [{
        "name": "role rendering test", "hosts": "target", "gather_facts": False, "vars": play_vars or {},
        "tasks": [{"name": "Inject the recorded facts", "recorded_facts": {"facts": host_facts}}] + tasks + [
            {"name": "Write the results", "ansible.builtin.copy": {
                "dest": str(out_file), "mode": "0644",
                "content": "{{ {'nvidia_driver__plan': nvidia_driver__plan | default(None), 'iommu__plan': iommu__plan | default(None), "
                           "'iommu__method': iommu__method | default(None), 'nccl_p2p_decision': nccl_p2p_decision | default(None), "
                           "'nccl_disable_custom_all_reduce': nccl_disable_custom_all_reduce | default(None), "
                           "'preflight_problems': preflight__check.report.problems | default(None), "
                           "'preflight_notes': preflight__check.report.notes | default(None), "
                           "'rendered': rendered | default(None)} | to_json }}"}, "check_mode": False},
        ],
    }]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"target": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_LIBRARY": str(LIBRARY),
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".collections"), "ANSIBLE_CACHE_PLUGIN": "memory",
        "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
        "ANSIBLE_HOME": str(tmp_path / "home"),
    })
    env.update(extra_env or {})
    cmd = [str(PLAYBOOK_BIN), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")] + (["--check", "--diff"] if check else [])
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=240, check=False)
    text = proc.stdout + proc.stderr
    results = json.loads(out_file.read_text()) if out_file.exists() else None
    return proc.returncode, text, results


def role_task(role, tasks_from="main.yml"):
    return {"name": "Run %s %s" % (role, tasks_from), "ansible.builtin.include_role": {"name": "llmops.sglang." + role, "tasks_from": tasks_from}}


# ---------------------------------------------------------------------------------------------
# nvidia_driver: repository, packages, flavour per distribution

NV = "https://developer.download.nvidia.com/compute/cuda/repos"


@pytest.mark.parametrize("os_name, repo_dir, key_file, headers, driver_pkgs, pinning, manager", [
    ("ubuntu2404", "ubuntu2404/x86_64", "3bf863cc.pub", ["linux-headers-6.8.0-87-generic"], ["nvidia-open"], ["nvidia-driver-pinning-580"], "apt"),
    ("ubuntu2204_arm", "ubuntu2204/sbsa", "3bf863cc.pub", ["linux-headers-5.15.0-131-generic"], ["nvidia-open"], ["nvidia-driver-pinning-580"], "apt"),
    ("debian12", "debian12/x86_64", "3bf863cc.pub", ["linux-headers-6.1.0-40-amd64"], ["nvidia-open"], ["nvidia-driver-pinning-580"], "apt"),
    ("debian13", "debian13/x86_64", "8793F200.pub", ["linux-headers-6.12.57+deb13-amd64"], ["nvidia-open"], ["nvidia-driver-pinning-580"], "apt"),
    ("rhel9", "rhel9/x86_64", "D42D0685.pub", ["kernel-devel-5.14.0-427.13.1.el9_4.x86_64", "kernel-headers-5.14.0-427.13.1.el9_4.x86_64"],
     ["@nvidia-driver:580-open"], [], "dnf"),
    ("rocky9", "rhel9/x86_64", "D42D0685.pub", ["kernel-devel-5.14.0-503.14.1.el9_5.x86_64", "kernel-headers-5.14.0-503.14.1.el9_5.x86_64"],
     ["@nvidia-driver:580-open"], [], "dnf"),
])
def test_driver_plan_per_distribution(tmp_path, os_name, repo_dir, key_file, headers, driver_pkgs, pinning, manager):
    rc, text, res = run_tasks(tmp_path, facts(os_name, REF_GPU), [role_task("nvidia_driver", "plan.yml")])
    assert rc == 0, text
    plan = res["nvidia_driver__plan"]
    assert plan["package_manager"] == manager
    assert plan["repo_url"] == "%s/%s" % (NV, repo_dir)
    assert plan["key_url"] == "%s/%s/%s" % (NV, repo_dir, key_file)
    if manager == "apt":
        assert plan["keyring_url"] == "%s/%s/cuda-keyring_1.1-1_all.deb" % (NV, repo_dir)
        assert plan["container_toolkit_repo_url"] == "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
        assert plan["initramfs_command"] == ["update-initramfs", "-u"]
    else:
        assert plan["extra_packages"] == ["dkms"]
        assert plan["container_toolkit_repo_url"] == "https://nvidia.github.io/libnvidia-container/stable/rpm"
        assert plan["initramfs_command"] == ["dracut", "-f"]
    assert plan["header_packages"] == headers
    assert plan["driver_packages"] == driver_pkgs
    assert plan["pinning_packages"] == pinning
    assert plan["flavour"] == "open"
    assert plan["fabricmanager"] is False and plan["fabricmanager_packages"] == []
    assert plan["cuda_toolkit_packages"] == []
    assert plan["upgrade"] is False  # 580.95.05 >= 580.65.06


def test_driver_plan_proprietary_branch_and_toolkit_on_ubuntu_hopper(tmp_path):
    rc, text, res = run_tasks(tmp_path, facts("ubuntu2404", H200_GPU), [role_task("nvidia_driver", "plan.yml")],
                              {"nvidia_driver_flavour": "proprietary", "nvidia_driver_cuda_toolkit": True})
    assert rc == 0, text
    plan = res["nvidia_driver__plan"]
    assert plan["driver_packages"] == ["cuda-drivers"]
    assert plan["cuda_toolkit_packages"] == ["cuda-toolkit-13-0"]
    assert plan["flavour"] == "proprietary"


def test_driver_plan_rhel_proprietary_stream(tmp_path):
    rc, text, res = run_tasks(tmp_path, facts("rhel9", H200_GPU), [role_task("nvidia_driver", "plan.yml")], {"nvidia_driver_flavour": "proprietary"})
    assert rc == 0, text
    assert res["nvidia_driver__plan"]["driver_packages"] == ["@nvidia-driver:580-dkms"]


def test_driver_plan_fabric_manager_on_nvswitch_and_driver_missing(tmp_path):
    rc, text, res = run_tasks(tmp_path, facts("ubuntu2204_arm", BARE_HGX_GPU), [role_task("nvidia_driver", "plan.yml")])
    assert rc == 0, text
    plan = res["nvidia_driver__plan"]
    assert plan["fabricmanager"] is True
    assert plan["fabricmanager_packages"] == ["nvidia-fabricmanager-580"]
    # no driver answers yet: nothing to "upgrade" (a fresh install), the floor is reported
    assert plan["upgrade"] is False
    assert "580.65.06" in plan["upgrade_reason"]


def test_driver_plan_upgrades_a_driver_below_the_cuda13_floor(tmp_path):
    old = dict(H200_GPU, driver_version="570.133.20")
    rc, text, res = run_tasks(tmp_path, facts("debian12", old), [role_task("nvidia_driver", "plan.yml")])
    assert rc == 0, text
    assert res["nvidia_driver__plan"]["upgrade"] is True
    assert "570.133.20 < 580.65.06" in res["nvidia_driver__plan"]["upgrade_reason"]


def test_driver_refuses_proprietary_on_blackwell(tmp_path):
    rc, text, res = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("nvidia_driver", "plan.yml")],
                              {"nvidia_driver_flavour": "proprietary"})
    assert rc != 0
    assert "Refusing nvidia_driver_flavour='proprietary'" in text
    assert "Blackwell" in text and "nvidia_driver_flavour_force" in text
    assert res is None  # stopped before anything else ran


def test_driver_refuses_unsupported_os(tmp_path):
    rc, text, _unused = run_tasks(tmp_path, facts("ubuntu2004", H200_GPU), [role_task("nvidia_driver", "plan.yml")])
    assert rc != 0
    assert "Ubuntu 20.04" in text and "not supported by llmops.sglang.nvidia_driver" in text
    # the list comes from the one OS table (platform_policy.SUPPORTED_OS_TABLE), written out here by hand
    assert ("only for Ubuntu 22.04, Ubuntu 24.04, Debian 12, Debian 13, RHEL 9, Rocky Linux 9, AlmaLinux 9, "
            "CentOS Stream 9") in " ".join(text.split())


def test_preflight_reports_an_unsupported_os_with_the_list(tmp_path):
    rc, text, res = _preflight(tmp_path, "ubuntu2004", REF_GPU, REFERENCE_DEPLOYMENT, var_lib_free_gib=300)
    problems = [p for p in (res or {}).get("preflight_problems") or [] if p.startswith("ansible_facts.distribution=")]
    assert problems == ["ansible_facts.distribution=Ubuntu 20.04: Ubuntu 20 is not supported: NVIDIA publishes the CUDA repository "
                        "this collection installs the driver from, and the kernel arguments are managed, only for Ubuntu 22.04, "
                        "Ubuntu 24.04, Debian 12, Debian 13, RHEL 9, Rocky Linux 9, AlmaLinux 9, CentOS Stream 9. Fix: use one of "
                        "those releases, or remove the host from gpu_hosts."], text


def test_driver_refuses_a_branch_below_the_cuda_floor(tmp_path):
    rc, text, _unused = run_tasks(tmp_path, facts("debian12", H200_GPU), [role_task("nvidia_driver", "plan.yml")], {"nvidia_driver_branch": "570"})
    assert rc != 0
    assert "nvidia_driver_branch is '570'" in text and ">= 580.65.06" in text


def test_driver_validate_refuses_reboot_of_the_control_node(tmp_path):
    rc, text, _unused = run_tasks(tmp_path, facts("ubuntu2404", H200_GPU),
                                  [role_task("nvidia_driver", "plan.yml"), role_task("nvidia_driver", "validate.yml")],
                                  {"nvidia_driver_reboot_allowed": True})
    assert rc != 0
    assert "Refusing nvidia_driver_reboot_allowed=True" in text and "control node" in text


@pytest.mark.parametrize("enrolled", [False, True])
def test_driver_validate_refuses_dkms_under_secure_boot_without_a_mok(tmp_path, enrolled):
    """The state read found Secure Boot on (mokutil's line): the DKMS-built driver is refused before any change unless
    the MOK is enrolled; otherwise the same task prints the plan (branch 580, open modules on an H200)."""
    state = {"secure_boot": ["SecureBoot enabled"], "files": {}, "packages": {}, "units": {}, "globs": {}}
    rc, text, _unused = run_tasks(tmp_path, facts("ubuntu2404", H200_GPU),
                                  [role_task("nvidia_driver", "plan.yml"), role_task("nvidia_driver", "validate.yml")],
                                  {"nvidia_driver__state": state, "nvidia_driver__secure_boot": True,
                                   "nvidia_driver_secure_boot_mok_enrolled": enrolled})
    flat = " ".join(text.split())
    if enrolled:
        assert rc == 0, text
        assert "Driver branch 580, open kernel modules" in flat
    else:
        assert rc != 0
        assert "Secure Boot is enabled on target (SecureBoot enabled)" in flat
        assert "nvidia_driver_secure_boot_mok_enrolled is false" in flat


# ---------------------------------------------------------------------------------------------
# iommu: kernel arguments per vendor, drop-in text, grubby commands


def _iommu(tmp_path, os_name, gpu, play_vars, extra_tasks=()):
    render = {"name": "Render", "ansible.builtin.set_fact": {"rendered": {
        "dropin": "{{ iommu__plan | llmops.sglang.grub_dropin }}",
        "grubby": "{{ iommu__plan | llmops.sglang.grubby_commands }}"}}}
    return run_tasks(tmp_path, facts(os_name, gpu), [role_task("iommu", "plan.yml")] + list(extra_tasks) + [render], play_vars)


def test_iommu_translated_on_intel_ubuntu_writes_intel_iommu_on(tmp_path):
    rc, text, res = _iommu(tmp_path, "ubuntu2404", H200_GPU, {"iommu_mode": "translated"})
    assert rc == 0, text
    assert res["iommu__method"]["method"] == "grub_dropin"
    assert res["iommu__method"]["path"] == "/etc/default/grub.d/99-llmops-iommu.cfg"
    assert res["iommu__plan"]["add"] == ["intel_iommu=on"]
    assert "iommu=pt" in res["iommu__plan"]["remove"]
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:+${GRUB_CMDLINE_LINUX_DEFAULT} }intel_iommu=on"' in res["rendered"]["dropin"]


def test_iommu_dropin_keeps_cloud_image_args_when_sourced(tmp_path, fixtures_dir):
    """Source the rendered drop-in after the recorded cloud-image drop-in, the way grub-mkconfig does."""
    rc, text, res = _iommu(tmp_path, "ubuntu2404", H200_GPU, {"iommu_mode": "passthrough"})
    assert rc == 0, text
    dropin = tmp_path / "99-llmops-iommu.cfg"
    dropin.write_text(res["rendered"]["dropin"])
    cloud = fixtures_dir / "host" / "etc-default-grub.d-50-cloudimg-settings.cfg"
    script = ('GRUB_CMDLINE_LINUX="ro intel_iommu=off"; . "%s"; GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=nopt quiet"; '
              '. "%s"; printf "%%s|%%s" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"' % (cloud, dropin))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    linux, default = out.split("|")
    assert linux == "ro"  # intel_iommu=off replaced (removed here, added below)
    assert default == "console=tty1 console=ttyS0 quiet intel_iommu=on iommu=pt"


def test_iommu_passthrough_on_amd_never_writes_amd_iommu_on(tmp_path):
    amd_host = dict(REF_GPU, sev_snp={"active": False}, architectures=["Hopper"], gpus=H200_GPU["gpus"])
    rc, text, res = _iommu(tmp_path, "debian13", amd_host, {"iommu_mode": "passthrough"})
    assert rc == 0, text
    assert res["iommu__plan"]["add"] == ["iommu=pt"]
    assert "amd_iommu=on" in res["iommu__plan"]["remove"]
    assert "amd_iommu=on" not in res["rendered"]["dropin"].split("GRUB_CMDLINE_LINUX_DEFAULT=\"${")[-1]


def test_iommu_rhel_uses_grubby(tmp_path):
    rc, text, res = _iommu(tmp_path, "rhel9", H200_GPU, {"iommu_mode": "passthrough"})
    assert rc == 0, text
    assert res["iommu__method"]["method"] == "grubby"
    # remove candidates iommu.passthrough=0 iommu=nopt iommu=off amd_iommu=off intel_iommu=off, minus the keys that
    # --args replaces (iommu=..., intel_iommu=...): grubby sets a key's new value in place of the old one
    assert res["rendered"]["grubby"] == [
        ["grubby", "--update-kernel=ALL", "--remove-args=iommu.passthrough=0 amd_iommu=off"],
        ["grubby", "--update-kernel=ALL", "--args=intel_iommu=on iommu=pt"],
    ]


def test_iommu_refuses_passthrough_on_sev_snp(tmp_path):
    rc, text, res = _iommu(tmp_path, "ubuntu2404", REF_GPU, {"iommu_mode": "passthrough"})
    assert rc != 0
    assert "Refusing iommu_mode='passthrough'" in text and "SEV-SNP" in text and "iommu_force" in text


def test_iommu_refuses_runtime_identity_on_blackwell(tmp_path):
    no_snp = dict(REF_GPU, sev_snp={"active": False})
    rc, text, _unused = _iommu(tmp_path, "debian12", no_snp, {"iommu_runtime_identity": True})
    assert rc != 0
    assert "Refusing iommu_runtime_identity=True" in text and "Blackwell" in text


def test_iommu_auto_on_snp_keeps_translated(tmp_path):
    rc, text, res = _iommu(tmp_path, "debian12", REF_GPU, {"iommu_mode": "auto"})
    assert rc == 0, text
    assert res["iommu__plan"]["effective_mode"] == "translated"
    assert res["iommu__plan"]["add"] == []
    assert {"iommu=pt", "iommu.passthrough=1", "amd_iommu=on"} <= set(res["iommu__plan"]["remove"])


def test_iommu_refuses_reboot_of_the_control_node(tmp_path):
    rc, text, _unused = _iommu(tmp_path, "ubuntu2404", H200_GPU, {"iommu_mode": "translated", "iommu_reboot_allowed": True})
    assert rc != 0
    assert "Refusing iommu_reboot_allowed=True" in text


def test_iommu_unmanaged_changes_nothing_even_on_unsupported_os(tmp_path):
    rc, text, res = _iommu(tmp_path, "ubuntu2004", H200_GPU, {"iommu_mode": "unmanaged"})
    assert rc == 0, text
    assert res["iommu__plan"]["add"] == [] and res["iommu__plan"]["remove"] == []
    assert res["iommu__method"] == {"method": "unmanaged"}


# ---------------------------------------------------------------------------------------------
# nccl: the environment file (really rendered, into tmp_path)


def _env(text):
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_nccl_env_on_the_reference_host(tmp_path):
    env_file = tmp_path / "etc" / "nccl.env"
    rc, text, res = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("nccl")],
                              {"sglang_server_tp_size": 4, "nccl_env_file": str(env_file), "nccl_debug": "WARN",
                               "nccl_extra_env": {"NCCL_IB_DISABLE": "1"}})
    assert rc == 0, text
    assert _env(env_file.read_text()) == {"NCCL_P2P_DISABLE": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "1"}
    assert res["nccl_p2p_decision"]["p2p"] == "disabled"
    assert res["nccl_disable_custom_all_reduce"] is True
    body = env_file.read_text()
    assert "# Why: SEV-SNP is active" in body
    assert "GPU0-GPU2 CNS" in body and "GPU1-GPU3 CNS" in body


def test_nccl_tp2_on_an_ok_pair_without_snp_or_translation_keeps_p2p(tmp_path):
    host = dict(REF_GPU, sev_snp={"active": False},
                iommu={"default_domain": "passthrough", "gpu_group_types": ["identity"], "gpu_groups": []})
    env_file = tmp_path / "nccl.env"
    rc, text, res = run_tasks(tmp_path, facts("debian12", host), [role_task("nccl")],
                              {"sglang_server_tp_size": 2, "nccl_env_file": str(env_file)})
    assert rc == 0, text
    assert res["nccl_p2p_decision"]["p2p"] == "enabled"
    assert res["nccl_p2p_decision"]["gpus"] == [0, 1]
    assert res["nccl_disable_custom_all_reduce"] is False
    assert _env(env_file.read_text()) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_nccl_single_gpu_is_not_applicable(tmp_path):
    env_file = tmp_path / "nccl.env"
    rc, text, res = run_tasks(tmp_path, facts("rhel9", H200_GPU), [role_task("nccl")], {"nccl_env_file": str(env_file)})
    assert rc == 0, text
    assert res["nccl_p2p_decision"]["p2p"] == "not_applicable"
    assert _env(env_file.read_text()) == {}


def test_nccl_refuses_p2p_forced_on_across_cns_pairs(tmp_path):
    host = dict(REF_GPU, sev_snp={"active": False}, iommu={"default_domain": "passthrough", "gpu_group_types": ["identity"], "gpu_groups": []})
    env_file = tmp_path / "nccl.env"
    rc, text, _unused = run_tasks(tmp_path, facts("debian12", host), [role_task("nccl")],
                                  {"sglang_server_tp_size": 4, "nccl_p2p": "enabled", "nccl_env_file": str(env_file)})
    assert rc != 0
    assert "Refusing nccl_p2p='enabled'" in text and "GPU0-GPU2 CNS" in text and "nccl_p2p_force" in text
    assert not env_file.exists()


def test_nccl_rejects_p2p_in_extra_env(tmp_path):
    rc, text, _unused = run_tasks(tmp_path, facts("debian12", REF_GPU), [role_task("nccl")],
                                  {"nccl_env_file": str(tmp_path / "x.env"), "nccl_extra_env": {"NCCL_P2P_DISABLE": "0"}})
    assert rc != 0
    assert "nccl_extra_env" in text and "NCCL_P2P_DISABLE belongs to the P2P policy" in text


def test_nccl_check_mode_writes_nothing(tmp_path):
    env_file = tmp_path / "etc" / "nccl.env"
    rc, text, res = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("nccl")],
                              {"sglang_server_tp_size": 4, "nccl_env_file": str(env_file)}, check=True)
    assert rc == 0, text
    assert not env_file.exists()
    assert "+NCCL_P2P_DISABLE=1" in text  # --diff shows the file that would be written


# ---------------------------------------------------------------------------------------------
# preflight: the checks on recorded facts


def _preflight(tmp_path, os_name, gpu, play_vars, var_lib_free_gib=100):
    # preflight_fail false: the task reports the problems instead of failing, so the test reads them all
    return run_tasks(tmp_path, facts(os_name, gpu, var_lib_free_gib), [role_task("preflight", "checks.yml")],
                     dict({"preflight_fail": False}, **play_vars))


REFERENCE_DEPLOYMENT = {"sglang_server_tp_size": 4, "sglang_server_image": "lmsysorg/sglang:v0.5.9-cu130-runtime",
                        "preflight_model_params_billion": 122, "preflight_model_bytes_per_param": 2,
                        "sglang_server_mem_fraction_static": 0.85, "sglang_server_model_path": "Qwen/Qwen3.5-122B-A10B",
                        "sglang_server_hf_cache_dir": "/var/lib/sglang/huggingface"}


def test_preflight_reference_deployment_passes(tmp_path):
    rc, text, res = _preflight(tmp_path, "ubuntu2404", REF_GPU, REFERENCE_DEPLOYMENT, var_lib_free_gib=300)
    assert rc == 0, text
    assert res["preflight_problems"] == []
    notes = " ".join(res["preflight_notes"])
    # 122e9 x 2 B = 227.2 GiB; / tp 4 x 1.1 = 62.5 GiB per GPU; 97887 MiB = 95.6 GiB x 0.85 = 81.3 GiB
    assert "memory: 62.5 GiB of weights per GPU needed (x1.1), 81.3 GiB available (95.6 GiB x 0.85)" in notes
    # disk: /var/lib (300 GiB free) is the longest mount prefix of /var/lib/sglang/huggingface (not /var/lib/sglang-other)
    assert "disk: 300.0 GiB free on /var/lib for 227.2 GiB" in notes


def test_preflight_collects_every_problem(tmp_path):
    play_vars = dict(REFERENCE_DEPLOYMENT, sglang_server_tp_size=8, sglang_server_image="lmsysorg/sglang:v0.4.6-cu124",
                     iommu_mode="passthrough", nvidia_driver_flavour="proprietary", preflight_driver_managed=False,
                     nvidia_driver_reboot_allowed=True, ansible_connection="local")
    rc, text, res = _preflight(tmp_path, "ubuntu2004", REF_GPU, play_vars)
    assert rc == 0, text
    problems = res["preflight_problems"]
    joined = "\n".join(problems)
    assert "ansible_facts.distribution=Ubuntu 20.04" in joined
    assert "sglang_server_tp_size=8 over sglang_server_nnodes=1 needs 8 GPU(s) on each node, but target has 4" in joined
    assert "Refusing iommu_mode='passthrough'" in joined
    assert "Refusing nvidia_driver_flavour='proprietary'" in joined
    assert "Refusing nvidia_driver_reboot_allowed=True" in joined
    assert "Refusing ansible_facts.distribution='Ubuntu 20'" in joined  # no kernel-argument method there either
    assert "preflight_image_cuda_version=12.4" in joined and "Blackwell GPUs need CUDA >= 12.8" in joined
    # 227.2 GiB / 8 x 1.1 = 31.2 GiB per GPU fits, but the disk does not: 100 GiB < 227.2 + 20
    assert "preflight_weights_dir=/var/lib/sglang/huggingface: 100.0 GiB free on /var/lib" in joined
    assert len(problems) == 8, joined


def test_preflight_memory_too_small(tmp_path):
    play_vars = dict(REFERENCE_DEPLOYMENT, sglang_server_tp_size=1, preflight_disk_check=False)
    rc, text, res = _preflight(tmp_path, "rhel9", H200_GPU, play_vars)
    assert rc == 0, text
    joined = "\n".join(res["preflight_problems"])
    # 122e9 x 2 B / 2^30 = 227.24 GiB, x 1.1 = 249.96 GiB on one H200: 143771 MiB = 140.4 GiB x 0.85 = 119.3 GiB
    assert "250.0 GiB per GPU with tp 1" in joined and "140.4 GiB x mem_fraction_static 0.85 = 119.3 GiB" in joined


def test_preflight_bare_host_driver_will_be_installed(tmp_path):
    play_vars = dict(REFERENCE_DEPLOYMENT, sglang_server_tp_size=8, preflight_disk_check=False)
    rc, text, res = _preflight(tmp_path, "ubuntu2204_arm", BARE_HGX_GPU, play_vars)
    assert rc == 0, text
    assert res["preflight_problems"] == []  # 8 GPUs on the PCI bus, driver to be installed
    notes = " ".join(res["preflight_notes"])
    assert "will be installed/upgraded by llmops.sglang.nvidia_driver" in notes
    assert "architecture check deferred" in notes


def test_preflight_driver_missing_and_unmanaged_is_a_problem(tmp_path):
    play_vars = dict(REFERENCE_DEPLOYMENT, sglang_server_tp_size=8, preflight_disk_check=False, preflight_driver_managed=False)
    rc, text, res = _preflight(tmp_path, "ubuntu2204_arm", BARE_HGX_GPU, play_vars)
    assert rc == 0, text
    assert any("preflight_driver_managed is false" in p and "580.65.06" in p for p in res["preflight_problems"])


def test_preflight_refuses_the_benchmark_inputs_before_any_change(tmp_path):
    # issue #23: a workload that does not exist and a run id the report writer refuses passed preflight; both are now
    # refused by the one preflight task, listed together
    play_vars = dict(REFERENCE_DEPLOYMENT, sglang_benchmark_run_id="../../etc", sglang_benchmark_workload="/nonexistent/prompts.jsonl")
    rc, text, res = _preflight(tmp_path, "ubuntu2404", REF_GPU, play_vars, var_lib_free_gib=300)
    flat = " ".join(text.split())
    assert rc != 0 and res is None, text
    assert "Preflight refused the variables of target (2 problem(s)):" in flat, text
    # (the output quotes the messages; the exact words are asserted in tests/unit/plugins/plugin_utils/_vars/test_benchmark_inputs.py)
    assert "sglang_benchmark_workload=" in flat and "/nonexistent/prompts.jsonl" in flat
    assert "no such file or directory on the controller" in flat
    assert "sglang_benchmark_run_id=" in flat and "../../etc" in flat and "(it is a directory name)" in flat


def test_the_benchmark_role_refuses_its_inputs_before_measuring(tmp_path):
    # the role's first task runs the same checks (preflight_check checks=[benchmark]): nothing after it runs
    rc, text, res = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("sglang_benchmark")],
                              {"sglang_benchmark_run_id": "../../etc"})
    flat = " ".join(text.split())
    assert rc != 0 and res is None, text
    assert "Refused the benchmark inputs of target (1 problem(s)):" in flat, text
    assert "sglang_benchmark_run_id=" in flat and "../../etc" in flat and "(it is a directory name)" in flat
    assert "Decide whether the benchmark has something new to say" not in text


# ---------------------------------------------------------------------------------------------
# RHEL 9 grubby path, against a stand-in grubby on PATH that prints recorded `grubby --info=ALL`
# entries and logs every call (nothing on this machine is touched).

GRUBBY_INFO = """index=0
kernel="/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64"
args="ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root {extra}"
root="/dev/mapper/rhel-root"
initrd="/boot/initramfs-5.14.0-427.13.1.el9_4.x86_64.img $tuned_initrd"
title="Red Hat Enterprise Linux (5.14.0-427.13.1.el9_4.x86_64) 9.4 (Plow)"
id="0d1e8c5a7e0d4f1c9a2b6c3d4e5f6a7b-5.14.0-427.13.1.el9_4.x86_64"
index=1
kernel="/boot/vmlinuz-0-rescue-0d1e8c5a7e0d4f1c9a2b6c3d4e5f6a7b"
args="ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M {extra}"
root="/dev/mapper/rhel-root"
initrd="/boot/initramfs-0-rescue-0d1e8c5a7e0d4f1c9a2b6c3d4e5f6a7b.img"
title="Red Hat Enterprise Linux (0-rescue-0d1e8c5a7e0d4f1c9a2b6c3d4e5f6a7b) 9.4 (Plow)"
id="0d1e8c5a7e0d4f1c9a2b6c3d4e5f6a7b-0-rescue"
"""


def _fake_grubby(tmp_path, extra):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "grubby-info.txt").write_text(GRUBBY_INFO.format(extra=extra))
    script = bindir / "grubby"
    script.write_text('#!/bin/sh\necho "$*" >> "%s/grubby-calls.log"\n[ "$1" = --info=ALL ] && cat "%s/grubby-info.txt"\nexit 0\n'
                      % (tmp_path, tmp_path))
    script.chmod(0o755)
    return {"PATH": "%s:%s" % (bindir, os.environ.get("PATH", ""))}


def _grubby_calls(tmp_path):
    log = tmp_path / "grubby-calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_grubby_edits_entries_that_miss_the_plan(tmp_path):
    env = _fake_grubby(tmp_path, "intel_iommu=off rhgb quiet")
    rc, text, _unused = run_tasks(tmp_path, facts("rhel9", H200_GPU), [role_task("iommu", "plan.yml"), role_task("iommu", "grubby.yml")],
                                  {"iommu_mode": "passthrough"}, extra_env=env)
    assert rc == 0, text
    assert _grubby_calls(tmp_path) == [
        "--info=ALL",
        "--update-kernel=ALL --remove-args=iommu.passthrough=0 amd_iommu=off",
        "--update-kernel=ALL --args=intel_iommu=on iommu=pt",
    ]


def test_grubby_leaves_satisfied_entries_alone(tmp_path):
    env = _fake_grubby(tmp_path, "rhgb quiet intel_iommu=on iommu=pt")
    rc, text, _unused = run_tasks(tmp_path, facts("rhel9", H200_GPU), [role_task("iommu", "plan.yml"), role_task("iommu", "grubby.yml")],
                                  {"iommu_mode": "passthrough"}, extra_env=env)
    assert rc == 0, text
    assert _grubby_calls(tmp_path) == ["--info=ALL"]


def test_grubby_check_mode_only_shows_the_commands(tmp_path):
    env = _fake_grubby(tmp_path, "rhgb quiet")
    rc, text, _unused = run_tasks(tmp_path, facts("rocky9", H200_GPU), [role_task("iommu", "plan.yml"), role_task("iommu", "grubby.yml")],
                                  {"iommu_mode": "translated"}, check=True, extra_env=env)
    assert rc == 0, text
    assert _grubby_calls(tmp_path) == ["--info=ALL"]  # read-only probe only
    assert "check mode: would run grubby --update-kernel=ALL" in text and "--args=intel_iommu=on" in text


# ---------------------------------------------------------------------------------------------
# Docker daemon.json: merged, never overwritten


def _daemon_json(tmp_path, content, check=False):
    path = tmp_path / "docker" / "daemon.json"
    if content is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    rc, text, _unused = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("nvidia_driver", "docker_daemon_json.yml")],
                                  {"nvidia_driver_docker_daemon_json": str(path)}, check=check)
    return rc, text, path


def test_daemon_json_merge_keeps_other_keys_and_is_idempotent(tmp_path):
    existing = {"log-driver": "json-file", "log-opts": {"max-size": "10m"}, "data-root": "/srv/docker",
                "features": {"buildkit": True}, "runtimes": {"crun": {"path": "/usr/bin/crun"}}}
    rc, text, path = _daemon_json(tmp_path, json.dumps(existing))
    assert rc == 0, text
    merged = json.loads(path.read_text())
    assert merged == {"log-driver": "json-file", "log-opts": {"max-size": "10m"}, "data-root": "/srv/docker",
                      "features": {"buildkit": True, "cdi": True},
                      "runtimes": {"crun": {"path": "/usr/bin/crun"}, "nvidia": {"path": "nvidia-container-runtime", "args": []}}}
    rc, text, _unused = _daemon_json(tmp_path, None)
    assert rc == 0, text
    assert "changed=0" in text.split("PLAY RECAP")[-1]


def test_daemon_json_created_when_missing_and_check_mode_writes_nothing(tmp_path):
    rc, text, path = _daemon_json(tmp_path, None, check=True)
    assert rc == 0, text
    assert not path.exists()
    rc, text, path = _daemon_json(tmp_path, None)
    assert rc == 0, text
    assert json.loads(path.read_text()) == {"features": {"cdi": True}, "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}


def test_daemon_json_invalid_is_refused_untouched(tmp_path):
    broken = '{"log-driver": "json-file",, }'
    rc, text, path = _daemon_json(tmp_path, broken)
    assert rc != 0
    assert "is not valid JSON" in text and "Nothing was changed" in text
    assert path.read_text() == broken


def test_driver_refuses_a_non_boolean_uvm_disable_hmm(tmp_path):
    rc, text, _unused = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("nvidia_driver", "plan.yml")],
                                  {"nvidia_driver_uvm_disable_hmm": "auto"})
    assert rc != 0
    flat = " ".join(text.split())
    assert "nvidia_driver_uvm_disable_hmm is 'auto': it must be a boolean" in flat
    assert "Fix: set nvidia_driver_uvm_disable_hmm: true on RTX 50 / RTX PRO 6000 hosts" in flat


def test_driver_uvm_disable_hmm_writes_the_modprobe_option(tmp_path):
    """Check mode + diff on the control node: the file and its one option line, nothing written."""
    rc, text, _unused = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU),
                                  [role_task("nvidia_driver", "plan.yml"), role_task("nvidia_driver", "services.yml")],
                                  {"nvidia_driver_uvm_disable_hmm": True, "nvidia_driver_blacklist_nouveau": False,
                                   "nvidia_driver_persistenced": False, "nvidia_driver_fabricmanager": "disabled"}, check=True)
    assert rc == 0, text[-3000:]
    assert "+options nvidia-uvm uvm_disable_hmm=1" in text
    assert "TASK [llmops.sglang.nvidia_driver : Turn off HMM in nvidia-uvm" in text
    assert "changed: [target]" in text.split("Turn off HMM in nvidia-uvm", 1)[1].split("TASK [", 1)[0]


def _model_dir(tmp_path, total_size=None, files=(), config=None, index_text=None):
    model = tmp_path / "models" / "Qwen3.5-122B-A10B"
    model.mkdir(parents=True)
    if index_text is not None or total_size is not None:
        (model / "model.safetensors.index.json").write_text(index_text if index_text is not None else json.dumps(
            {"metadata": {"total_size": total_size}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                                                                    "b.weight": "model-00002-of-00002.safetensors"}}))
    for name, size in files:
        with open(str(model / name), "wb") as handle:
            handle.truncate(size)
    (model / "config.json").write_text(json.dumps(config or {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "torch_dtype": "bfloat16"}))
    return model


def _preflight_with_model(tmp_path, gpu, model, **extra):
    """gpu_facts reads the model directory (on this machine, GPU sources pointed at empty trees), the recorded facts of
    ``gpu`` are injected again over what it found, then the checks run."""
    (tmp_path / "empty").mkdir(exist_ok=True)
    play_vars = dict(REFERENCE_DEPLOYMENT, sglang_server_model_path=str(model), preflight_disk_check=False, preflight_fail=False,
                     llmops_gpu_facts_options={"nvidia_smi": str(tmp_path / "no-nvidia-smi"), "sysfs_root": str(tmp_path / "empty"),
                                               "procfs_root": str(tmp_path / "empty"), "etc_root": str(tmp_path / "empty"),
                                               "kernel_log": "none"})
    play_vars.update(extra)
    play_vars.pop("preflight_model_params_billion")
    read = {"name": "Read the GPU facts and the model directory as the role does", "llmops.sglang.gpu_facts": {"model_dir": str(model)},
            "module_defaults": {"group/llmops.sglang.gpu": "{{ llmops_gpu_facts_options }}"}, "register": "preflight_gpu_facts_read"}
    again = {"name": "Inject the recorded facts again", "recorded_facts": {"facts": facts("ubuntu2404", gpu)}}
    return run_tasks(tmp_path, facts("ubuntu2404", gpu), [read, again, role_task("preflight", "checks.yml")], play_vars)


def test_preflight_memory_check_from_the_model_directory(tmp_path):
    """Issue 14: the memory check ran only with a typed parameter count; the index on the host says how large the weights are."""
    model = _model_dir(tmp_path, total_size=250000000000)
    rc, text, res = _preflight_with_model(tmp_path, REF_GPU, model)
    assert rc == 0, text[-3000:]
    assert res["preflight_problems"] == []
    notes = " ".join(res["preflight_notes"])
    # 250e9 B / 2^30 = 232.83 GiB; / tp 4 x 1.1 = 64.03 GiB per GPU; 97887 MiB = 95.6 GiB x 0.85 = 81.3 GiB
    assert ("memory: 64.0 GiB of weights per GPU needed (x1.1), 81.3 GiB available (95.6 GiB x 0.85); weights from the model directory "
            "%s (model.safetensors.index.json metadata.total_size = 250000000000 bytes over 2 shard(s))" % model) in notes


def test_preflight_memory_problem_names_the_model_directory(tmp_path):
    """A single-file checkpoint (no index): the *.safetensors sizes; too large for one H200 at tp 1."""
    model = _model_dir(tmp_path, files=[("model.safetensors", 160 * 1073741824)])
    rc, text, res = _preflight_with_model(tmp_path, H200_GPU, model, sglang_server_tp_size=1)
    assert rc == 0, text[-3000:]
    joined = "\n".join(res["preflight_problems"])
    # 160 GiB x 1.1 = 176.0 GiB on one H200: 143771 MiB = 140.4 GiB x 0.85 = 119.3 GiB
    assert ("the model directory %s (1 *.safetensors file(s), 171798691840 bytes in all) says 160.0 GiB of weights: 176.0 GiB per GPU "
            "with tp 1" % model) in joined
    assert "140.4 GiB x mem_fraction_static 0.85 = 119.3 GiB" in joined


def test_preflight_without_readable_metadata_notes_the_skip(tmp_path):
    rc, text, res = _preflight_with_model(tmp_path, REF_GPU, tmp_path / "not-downloaded-yet")
    assert rc == 0, text[-3000:]
    assert any(n.startswith("memory check skipped: no model-size estimate (no model.safetensors.index.json or *.safetensors readable in %s"
                            % (tmp_path / "not-downloaded-yet")) for n in res["preflight_notes"])


def test_preflight_refuses_a_broken_index(tmp_path):
    """A broken index is a problem naming it, listed with the others (it used to stop preflight on its own)."""
    model = _model_dir(tmp_path, index_text='{"metadata": {"total_size": "lots"}}')
    rc, text, res = _preflight_with_model(tmp_path, REF_GPU, model, preflight_fail=True)
    assert rc != 0
    assert ("preflight_model_path=%s: model directory metadata: model.safetensors.index.json metadata.total_size='lots' is not a "
            "positive number of bytes. Fix: repair or re-download the model" % model) in " ".join(text.split())
    assert "Preflight refused target (1 problem(s)):" in " ".join(text.split())


@pytest.mark.parametrize("loaded", ["N", "Y"])
def test_driver_reboot_pending_when_nvidia_uvm_runs_with_the_other_hmm_setting(tmp_path, loaded):
    """gpu_facts reads /sys/module/nvidia_uvm/parameters/uvm_disable_hmm (a tree built here: N); the option asks for Y, which
    nvidia-uvm reads only when it loads, so a reboot is needed; not allowed -> pending, with the reason in the marker."""
    sysfs = tmp_path / "sys"
    (sysfs / "module" / "nvidia_uvm" / "parameters").mkdir(parents=True)
    (sysfs / "module" / "nvidia_uvm" / "parameters" / "uvm_disable_hmm").write_text(loaded + "\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "dmesg.txt").write_text("")
    pending = tmp_path / "pending"
    play_vars = {"nvidia_driver_uvm_disable_hmm": True, "nvidia_driver_reboot_allowed": False, "nvidia_driver_blacklist_nouveau": False,
                 "llmops_gpu_facts_options": {"sysfs_root": str(sysfs), "procfs_root": str(tmp_path / "proc"), "kernel_log": "file",
                                              "kernel_log_file": str(tmp_path / "dmesg.txt"), "nvidia_smi": str(tmp_path / "no-nvidia-smi")},
                 "nvidia_driver_reboot_pending_dir": str(pending)}
    # facts.yml: main.yml's first task when this run has not read the GPU facts (here: the tree above, not the recorded facts)
    rc, text, _unused = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU),
                                  [role_task("nvidia_driver", "facts.yml"), role_task("nvidia_driver", "reboot.yml")], play_vars)
    assert rc == 0, text[-3000:]
    if loaded == "Y":      # already what the option asks for: no reboot, no marker
        assert not (pending / "nvidia_driver").exists() and "REBOOT PENDING" not in text
        return
    reason = "nvidia_uvm is loaded with uvm_disable_hmm=N and nvidia_driver_uvm_disable_hmm is true (read at module load)"
    assert (pending / "nvidia_driver").read_text().splitlines()[1:] == ["reason=" + reason]
    assert "REBOOT PENDING on target: " + reason in " ".join(text.split())


def test_reboot_policy_recognises_the_controller_by_its_real_addresses(tmp_path):
    """End to end on this machine: the network facts Ansible gathers here and the /proc/net addresses the filter reads here
    are the same machine's, so a reboot "over ssh" to it is refused by address (the connection name alone would allow it)."""
    from ansible_collections.llmops.sglang.plugins.plugin_utils._host import control_node as cn
    if not [a for a in cn.controller_addresses() if cn.is_identifying(a)]:
        pytest.skip("this machine has only loopback/link-local addresses: nothing identifies it by address")
    tasks = [{"name": "Gather the network and platform facts", "ansible.builtin.setup": {"gather_subset": ["!all", "!min", "network", "platform"]}},
             {"name": "Ask the reboot policy as if connected over ssh", "ansible.builtin.set_fact": {"rendered": (
                 "{{ true | llmops.sglang.reboot_policy(true, connection='ssh', variable='nvidia_driver_reboot_allowed', "
                 "addresses=(ansible_facts.all_ipv4_addresses | default([])) + (ansible_facts.all_ipv6_addresses | default([])), "
                 "machine_id=ansible_facts.machine_id | default(none)) }}")}}]
    rc, text, _unused = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), tasks)
    flat = " ".join(text.split())
    assert rc != 0, flat[-2000:]
    assert "Refusing nvidia_driver_reboot_allowed=True: this host is the control node: it has the controller's address" in flat


# ---------------------------------------------------------------------------------------------
# sglang_server validate entry point: the main spec (documented once) is enforced there too


def test_sglang_server_validate_enforces_the_main_argument_spec(tmp_path):
    # the validate entry point documents no options of its own (ansible-doc prints them once, under main);
    # its first task applies main's spec, so a port that is not an int is refused by name before any change
    rc, text, _res = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("sglang_server", "validate.yml")],
                               dict(REFERENCE_DEPLOYMENT, sglang_server_port="thirty-thousand"))
    assert rc != 0
    assert "Check the variables against the main entry point's argument spec" in text
    assert "sglang_server_port" in text and "thirty-thousand" in text
    rc, text, _res = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("sglang_server", "validate.yml")], REFERENCE_DEPLOYMENT)
    assert rc == 0, text


def test_sglang_server_adaptive_table_is_mounted_read_only_and_refusals_come_first(tmp_path):
    # SGLang 0.5.23 with adaptive and a table: the unit's container argv mounts <config_dir>/<name>.adaptive.json at the
    # renderer's path, read-only, and passes it with --speculative-adaptive-config
    adaptive = dict(REFERENCE_DEPLOYMENT, sglang_server_image="lmsysorg/sglang:v0.5.23-cu130-runtime", sglang_server_version="0.5.23",
                    sglang_server_tp_size=1, sglang_server_model_path="meta-llama/Llama-3.1-8B-Instruct",
                    sglang_server_model_architecture="LlamaForCausalLM", sglang_server_speculative_algorithm="EAGLE3",
                    sglang_server_speculative_draft_model_path="/models/draft", sglang_server_speculative_adaptive=True,
                    sglang_server_speculative_adaptive_config={1: {"candidate_steps": [1, 3, 5]}, 32: {"candidate_steps": [0, 1]}},
                    sglang_server_nccl_env_file="")
    tasks = [role_task("sglang_server", "validate.yml"), role_task("sglang_server", "render.yml"),
             {"name": "Keep the argv", "ansible.builtin.set_fact": {"rendered": "{{ sglang_server__run_argv }}"}}]
    rc, text, res = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), tasks, adaptive)
    assert rc == 0, text[-3000:]
    argv = res["rendered"]
    mount = "/etc/sglang/sglang-server.adaptive.json:/etc/sglang-adaptive/speculative_adaptive.json:ro"
    assert argv[argv.index(mount) - 1] == "-v"
    assert argv[argv.index("--speculative-adaptive-config") + 1] == "/etc/sglang-adaptive/speculative_adaptive.json"
    # topk 4 would make SGLang switch adaptive off: refused in validate, before render or any file
    second = tmp_path / "refused"
    second.mkdir()
    rc, text, res = run_tasks(second, facts("ubuntu2404", REF_GPU), tasks, dict(adaptive, sglang_server_speculative_eagle_topk=4))
    assert rc != 0 and res is None
    assert "speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 is supported)" in " ".join(text.split())


# ---------------------------------------------------------------------------------------------
# preflight: every role variable checked before anything else (llmops.sglang.preflight_check, _vars/checks.py)

def test_preflight_variables_refuses_every_bad_variable_at_once(tmp_path):
    play_vars = dict(REFERENCE_DEPLOYMENT, sglang_server_ready_timeout=-1, nvidia_driver_branch="570",
                     nccl_extra_env={"NCCL_P2P_DISABLE": "1"}, sglang_benchmark_concurrency="1,8",
                     sglang_benchmark_request_rates=[-2], sglang_benchmark_min_output_throughput="fast",
                     sglang_benchmark_num_prompts=-3, sglang_benchmark_backend="vllm", sglang_server_port="abc",
                     sglang_server_api_key="sk-FAKE-preflight")
    rc, text = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("preflight", "checks.yml")], play_vars)[:2]
    assert rc != 0
    flat = " ".join(text.split())
    assert "Preflight refused the variables of target (9 problem(s)):" in flat, text[-3000:]
    for words in ("sglang_server_ready_timeout=-1: must be at least 1", "nvidia_driver_branch=\"570\": the image needs CUDA 13.0",
                  "nccl_extra_env={\"NCCL_P2P_DISABLE\": \"1\"}", "sglang_benchmark_concurrency=\"1,8\": must be a list",
                  "sglang_benchmark_request_rates=[-2]", "sglang_benchmark_min_output_throughput=\"fast\": must be a number",
                  "sglang_benchmark_num_prompts=-3", "sglang_benchmark_backend=\"vllm\": not one of sglang, openai, openai-chat",
                  "sglang_server_port=\"abc\": must be a whole number"):
        assert words in flat, words
    assert "sk-FAKE-preflight" not in text


def test_preflight_variables_reference_deployment_passes(tmp_path):
    # the variables pass, and so does the host (disk not checked: this machine's mounts are not the recorded ones)
    rc, text = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("preflight", "checks.yml")],
                         dict(REFERENCE_DEPLOYMENT, preflight_disk_check=False))[:2]
    assert rc == 0, text[-3000:]
    assert "Preflight passed on target." in text


def test_preflight_variables_refuses_misspelled_names_with_the_closest_valid_one(tmp_path):
    # Misspelled names next to names that are legitimately set: playbook knobs, a fact of the nccl role, a shared
    # prefix (sglang_target_concurrency), an internal name and one listed in preflight_known_variables.
    play_vars = dict(REFERENCE_DEPLOYMENT, sglang_server_speculative_num_step=3, nccl_p2p_polcy="disable",
                     sglang_server_api_kye="sk-FAKE-misspelled", sglang_server_rollout_serial=[1, "50%"],
                     sglang_benchmark_ab_min_gain=0.05, nccl_p2p_decision={"p2p": "disabled"}, sglang_target_concurrency=32,
                     sglang_server__internal=1, nccl_site_note="mine", preflight_known_variables=["nccl_site_note"])
    rc, text = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("preflight", "checks.yml")], play_vars)[:2]
    assert rc != 0
    flat = " ".join(text.split())
    assert "Preflight refused the variables of target (3 problem(s)):" in flat, text[-3000:]
    assert "nccl_p2p_polcy: not a variable of this collection" in flat
    assert "Fix: did you mean nccl_p2p_force (or nccl_p2p)?" in flat
    assert "sglang_server_speculative_num_step: not a variable of this collection" in flat
    assert "Fix: did you mean sglang_server_speculative_num_steps?" in flat
    assert "sglang_server_api_kye: not a variable" in flat and "did you mean sglang_server_api_key?" in flat
    assert "sk-FAKE-misspelled" not in text


def test_preflight_variables_ignore_facts_an_older_role_version_cached(tmp_path):
    """A fact cache can hold cacheable facts an older version of a role set with one underscore (iommu_plan): they are facts,
    not inventory input, so they are no misspelling; the same name set as a variable is refused."""
    cached = {"name": "A fact an older iommu role cached", "ansible.builtin.set_fact": {"iommu_plan": {"add": []}, "cacheable": True}}
    play_vars = dict(REFERENCE_DEPLOYMENT, preflight_disk_check=False)
    rc, text = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [cached, role_task("preflight", "checks.yml")], play_vars)[:2]
    assert rc == 0, text[-3000:]
    rc, text = run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("preflight", "checks.yml")],
                         dict(play_vars, iommu_plan={"add": []}))[:2]
    assert rc != 0 and "iommu_plan: not a variable of this collection" in " ".join(text.split())
