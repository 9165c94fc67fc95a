# -*- coding: utf-8 -*-
"""llmops.sglang GPU filters: registration, refusals as AnsibleFilterError, and a real render by FQCN
in an ansible-playbook run (the way roles call them)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter import host_policy as gpu
from ansible_collections.llmops.sglang.plugins.module_utils._gpu.nvidia_smi import parse_query_gpu, parse_topo_p2p


@pytest.fixture
def reference_facts(fixtures_dir):
    """The seed host: 4x RTX PRO 6000 (fixtures), SEV-SNP active, translated IOMMU, AMD."""
    gpus = parse_query_gpu((fixtures_dir / "nvidia/rtxpro6000-x4-query-gpu-noheader.csv").read_text())
    return {
        "smi_state": "ok", "driver_version": "580.95.05", "gpu_count": 4, "gpus": gpus, "architectures": ["Blackwell"],
        "p2p": {"read": parse_topo_p2p((fixtures_dir / "nvidia/rtxpro6000-x4-topo-p2p-r.txt").read_text()), "write": None},
        "nvlink": {"present": False, "nvlink_pairs": []},
        "iommu": {"default_domain": "translated", "gpu_group_types": ["DMA-FQ"], "gpu_groups": []},
        "cpu_vendor": "amd", "sev_snp": {"active": True, "evidence": ["kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)"]},
        "virtualization": {"role": "host", "gpu_passthrough": False},
    }


def test_filter_names():
    assert sorted(gpu.FilterModule().filters()) == sorted([
        "iommu_kernel_args", "iommu_runtime_identity", "cmdline_edit", "cmdline_satisfies", "kernel_args_method", "grub_dropin",
        "grubby_commands", "nvidia_driver_flavour", "driver_upgrade", "nccl_p2p_policy", "reboot_policy", "host_decisions",
        "host_refusals", "gpu_architecture", "os_support"])


def test_refusal_is_filter_error(reference_facts):
    with pytest.raises(AnsibleFilterError) as info:
        gpu.iommu_kernel_args(reference_facts, "passthrough")
    assert str(info.value).startswith("Refusing iommu_mode='passthrough': SEV-SNP is active on this host (kvm_amd: SEV-SNP enabled")
    with pytest.raises(AnsibleFilterError, match="Refusing iommu_reboot_allowed=True: this host is the control node"):
        gpu.reboot_policy(True, "yes", "local")


def test_string_booleans_from_inventory(reference_facts):
    # "false" from an extra var must not count as a force
    with pytest.raises(AnsibleFilterError):
        gpu.nvidia_driver_flavour(reference_facts, "proprietary", "false")
    assert gpu.nvidia_driver_flavour(reference_facts, "proprietary", "true")["flavour"] == "proprietary"


def test_host_refusals_list(reference_facts):
    assert gpu.host_refusals(reference_facts, {"tp": 4}) == []
    msgs = gpu.host_refusals(reference_facts, {"tp": 4, "iommu_mode": "passthrough", "nccl_p2p": "enabled"})
    assert len(msgs) == 2
    assert msgs[0].startswith("Refusing iommu_mode='passthrough'")
    assert msgs[1].startswith("Refusing nccl_p2p='enabled': SEV-SNP is active")


def test_nccl_policy_alias(reference_facts):
    a = gpu.nccl_p2p_policy(reference_facts, tp=2, policy_name="disabled")
    b = gpu.nccl_p2p_policy(reference_facts, tp=2, policy="disabled")
    assert a == b and a["reason"] == "nccl_p2p=disabled"
    with pytest.raises(AnsibleFilterError, match="Refusing nccl_p2p='enabled': SEV-SNP is active"):
        gpu.nccl_p2p_policy(reference_facts, tp=2, policy_name="enabled", force="no")


def test_grub_filters():
    plan = {"add": ["intel_iommu=on"], "remove": ["iommu=pt"], "reason": "r"}
    text = gpu.grub_dropin(plan)
    assert text.splitlines()[-1] == 'unset _llmops_kept _llmops_tok'
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:+${GRUB_CMDLINE_LINUX_DEFAULT} }intel_iommu=on"' in text
    assert gpu.grubby_commands(plan, "ro iommu=pt") == [
        ["grubby", "--update-kernel=ALL", "--remove-args=iommu=pt"],
        ["grubby", "--update-kernel=ALL", "--args=intel_iommu=on"],
    ]
    assert gpu.kernel_args_method("Debian", "13")["method"] == "grub_dropin"


def test_through_ansible_playbook(reference_facts, tmp_path, repo_root):
    """Render the filters by their FQCN in a real play, as a role would (ansible-playbook, local connection)."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - ansible.builtin.copy:\n"
        "        dest: " + str(tmp_path / "out.json") + "\n"
        "        content: \"{{ {'nccl': f | llmops.sglang.nccl_p2p_policy(tp=4), 'arch': '12.0' | llmops.sglang.gpu_architecture,\n"
        "                     'refusals': f | llmops.sglang.host_refusals({'tp': 4, 'iommu_mode': 'passthrough'})} | to_json }}\"\n"
        "      delegate_to: localhost\n")
    (tmp_path / "vars.json").write_text(json.dumps({"f": reference_facts}))
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(ansible_playbook):
        pytest.skip("ansible-playbook not installed next to the test interpreter")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(repo_root / ".collections"), ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"))
    proc = subprocess.run([ansible_playbook, "-i", "localhost,", "-c", "local", "-e", "@" + str(tmp_path / "vars.json"),
                           "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)],
                          cwd=str(repo_root), env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["nccl"]["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_P2P_DISABLE": "1"}
    assert out["nccl"]["disable_custom_all_reduce"] is True
    assert out["arch"] == "Blackwell"
    assert len(out["refusals"]) == 1 and out["refusals"][0].startswith("Refusing iommu_mode='passthrough'")
