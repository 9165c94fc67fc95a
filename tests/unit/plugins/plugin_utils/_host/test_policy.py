# -*- coding: utf-8 -*-
"""The host rows of DESIGN.md "Decisions the roles make (and refuse)", one case per row, each refusal
message included; plus IOMMU kernel arguments per CPU vendor, token-level command line edits and the
per-OS paths (Ubuntu 22.04/24.04 and Debian 12/13 grub drop-in, RHEL 9 grubby)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._host import policy as pp
from ansible_collections.llmops.sglang.plugins.module_utils._gpu.host_facts import parse_cmdline, parse_kernel_log, sev_snp_facts
from ansible_collections.llmops.sglang.plugins.module_utils._gpu.nvidia_smi import parse_query_gpu, parse_topo_p2p


def facts_for(fixtures_dir, gpus="rtx", snp=False, domain="translated", vendor="amd", p2p="rtx", nvlink=False, vm=False,
              driver=None, group_type="DMA-FQ"):
    """A llmops_gpu facts dict assembled from the recorded fixtures with the parsers (as gpu_facts does)."""
    csv = (fixtures_dir / ("nvidia/rtxpro6000-x4-query-gpu-noheader.csv" if gpus == "rtx" else "nvidia/h200-query-gpu-noheader.csv")).read_text()
    gpu_list = parse_query_gpu(csv)
    read = parse_topo_p2p((fixtures_dir / "nvidia/rtxpro6000-x4-topo-p2p-r.txt").read_text()) if p2p == "rtx" else p2p
    log = parse_kernel_log((fixtures_dir / "host/sev-snp-host-dmesg.txt").read_text()) if snp else None
    return {
        "smi_state": "ok",
        "driver_version": driver or gpu_list[0]["driver_version"],
        "gpu_count": len(gpu_list),
        "gpus": gpu_list,
        "architectures": sorted(set(g["architecture"] for g in gpu_list)),
        "p2p": {"read": read, "write": None, "ok_pairs": []},
        "nvlink": {"present": bool(nvlink), "nvlink_pairs": nvlink or []},
        "iommu": {"default_domain": domain, "gpu_group_types": [group_type] if domain != "off" else [],
                  "gpu_groups": [{"pci_bus_id": g["pci_bus_id"], "group": str(20 + i), "type": group_type} for i, g in enumerate(gpu_list)]},
        "cpu_vendor": vendor,
        "sev_snp": sev_snp_facts({"sev_snp_flag": snp}, "Y" if snp else None, log),
        "virtualization": {"role": "guest" if vm else "host", "gpu_passthrough": bool(vm)},
    }


ALL_OK_2 = {"gpus": [0, 1], "matrix": [["X", "OK"], ["OK", "X"]], "ok_directed": [[0, 1], [1, 0]]}


# ---------------------------------------------------------------------------------------------
# DESIGN.md decision rows (decisions)


def _row_snp(f):
    iommu = pp.iommu_kernel_args(f, "auto")
    nccl = pp.nccl_p2p_policy(f, tp=4)
    return iommu["effective_mode"], nccl["p2p"], nccl["env"].get("NCCL_P2P_DISABLE"), nccl["disable_custom_all_reduce"]


def _row_blackwell(f):
    return pp.driver_flavour(f, "auto")["flavour"]


def _row_pcie_translated(f):
    d = pp.nccl_p2p_policy(f, tp=2)
    return d["p2p"], d["env"].get("NCCL_P2P_DISABLE"), d["disable_custom_all_reduce"]


def _row_topo(f):
    d = pp.nccl_p2p_policy(f, tp=4)
    return d["p2p"], d["env"].get("NCCL_P2P_DISABLE"), d["disable_custom_all_reduce"]


def _row_driver(f):
    d = pp.driver_upgrade(f, "13.0")
    return d["upgrade"], d["floor"]


def _row_reboot(_f):
    return pp.reboot_policy(needed=True, allowed=False, connection="ssh")["action"]


DECISION_ROWS = [
    # (DESIGN row, facts kwargs, decision function, expected)
    ("SEV-SNP active", dict(snp=True), _row_snp, ("translated", "disabled", "1", True)),
    ("Blackwell GPU (cc 10.x/11.x/12.x)", dict(), _row_blackwell, "open"),
    # GPUs 0-1 are OK in topo -p2p r: only the translated-IOMMU + PCIe-only rule can turn P2P off for tp 2
    ("PCIe-only GPUs, IOMMU translated, tp > 1", dict(domain="translated"), _row_pcie_translated, ("disabled", "1", True)),
    # passthrough IOMMU, no SNP: only topo -p2p (CNS between 0-1 and 2-3) turns P2P off for tp 4
    ("topo -p2p not OK between GPUs in use", dict(domain="passthrough", group_type="identity"), _row_topo, ("disabled", "1", True)),
    ("driver < 580.65.06 with a CUDA 13 image", dict(driver="575.57.08"), _row_driver, (True, "580.65.06")),
    ("reboot needed, reboot not allowed", dict(), _row_reboot, "pending"),
]


@pytest.mark.parametrize("row,kwargs,decide,expected", DECISION_ROWS, ids=[r[0] for r in DECISION_ROWS])
def test_design_decision_rows(fixtures_dir, row, kwargs, decide, expected):
    assert decide(facts_for(fixtures_dir, **kwargs)) == expected


# ---------------------------------------------------------------------------------------------
# DESIGN.md refusal rows: exact messages (variable, value, reason, fix)

SNP_EVIDENCE = ("/proc/cpuinfo flags: sev_snp; /sys/module/kvm_amd/parameters/sev_snp: Y; "
                "SEV-SNP: RMP table physical range [0x0000000088e00000 - 0x00000000a92fffff]")
DANGER = "(dangerous: it overrides a guard that exists because the host breaks otherwise)"

REFUSAL_ROWS = [
    ("SEV-SNP active: passthrough / iommu=pt requested", dict(snp=True),
     lambda f: pp.iommu_kernel_args(f, "passthrough"),
     "Refusing iommu_mode='passthrough': SEV-SNP is active on this host (" + SNP_EVIDENCE + ") and needs a translated IOMMU: "
     "with iommu=pt the kernel prints 'AMD-Vi: SNP: IOMMU disabled or configured in passthrough mode, SNP cannot be supported.'. "
     "Fix: set iommu_mode: translated (or auto) and keep NCCL P2P off, or disable SEV-SNP in the BIOS if no confidential VMs run "
     "here; iommu_force: true skips this guard " + DANGER + "."),
    ("Blackwell GPU: proprietary flavour", dict(),
     lambda f: pp.driver_flavour(f, "proprietary"),
     "Refusing nvidia_driver_flavour='proprietary': the host has Blackwell GPUs, which only the open kernel modules drive "
     "(NVIDIA: Blackwell requires nvidia-open). Fix: set nvidia_driver_flavour: open (or auto); nvidia_driver_flavour_force: true "
     "installs it anyway " + DANGER + "."),
    ("Blackwell GPU: runtime per-group identity domain", dict(),
     lambda f: pp.runtime_identity_domain(f, True),
     "Refusing iommu_runtime_identity=True: the host has Blackwell GPUs (Blackwell); a runtime per-group identity domain stops the "
     "GPU's firmware security processor (FSP) from booting it and no FLR/SBR reset recovers it. Fix: set iommu_runtime_identity: "
     "false and keep the boot-time domain; iommu_force: true skips this guard " + DANGER + "."),
    ("topo -p2p not OK between GPUs in use: P2P forced on without override", dict(domain="passthrough", group_type="identity"),
     lambda f: pp.nccl_p2p_policy(f, tp=4, policy="enabled"),
     "Refusing nccl_p2p='enabled': nvidia-smi topo -p2p is not OK between GPUs in use: GPU0-GPU2 CNS, GPU0-GPU3 CNS, GPU1-GPU2 CNS, "
     "GPU1-GPU3 CNS. Fix: set nccl_p2p: auto (or disabled); nccl_p2p_force: true forces P2P on " + DANGER + "."),
    ("reboot needed: rebooting the control node", dict(),
     lambda f: pp.reboot_policy(needed=True, allowed=True, connection="local"),
     "Refusing iommu_reboot_allowed=True: this host is the control node (connection local): rebooting it would kill the running "
     "play. Fix: reboot the host by hand, or run the play from another machine over ssh."),
]


@pytest.mark.parametrize("row,kwargs,call,message", REFUSAL_ROWS, ids=[r[0] for r in REFUSAL_ROWS])
def test_design_refusal_rows(fixtures_dir, row, kwargs, call, message):
    with pytest.raises(pp.PolicyRefusal) as info:
        call(facts_for(fixtures_dir, **kwargs))
    assert str(info.value) == message
    assert info.value.to_dict()["message"] == message


def test_force_overrides_turn_refusals_into_warnings(fixtures_dir):
    snp = facts_for(fixtures_dir, snp=True)
    plan = pp.iommu_kernel_args(snp, "passthrough", force=True)
    assert plan["add"] == ["iommu=pt"]
    assert plan["warnings"][0].startswith("iommu_force: true overrides: SEV-SNP is active")
    assert pp.driver_flavour(facts_for(fixtures_dir), "proprietary", force=True)["flavour"] == "proprietary"
    p2p = pp.nccl_p2p_policy(facts_for(fixtures_dir, domain="passthrough", group_type="identity"), tp=4, policy="enabled", force=True)
    assert p2p["p2p"] == "enabled" and "NCCL_P2P_DISABLE" not in p2p["env"] and p2p["disable_custom_all_reduce"] is False


# ---------------------------------------------------------------------------------------------
# NCCL P2P details


def test_p2p_reference_host_reasons(fixtures_dir):
    d = pp.nccl_p2p_policy(facts_for(fixtures_dir, snp=True), tp=4)
    assert d["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_P2P_DISABLE": "1"}
    assert d["gpus"] == [0, 1, 2, 3]
    assert d["reasons"][0].startswith("SEV-SNP is active")
    assert d["reasons"][1].startswith("IOMMU is translated (DMA-FQ) and GPUs [0, 1, 2, 3] are PCIe-only with tp 4")
    assert d["reasons"][2] == ("nvidia-smi topo -p2p is not OK between GPUs in use: GPU0-GPU2 CNS, GPU0-GPU3 CNS, GPU1-GPU2 CNS, "
                               "GPU1-GPU3 CNS")
    assert len(d["reasons"]) == 3


def test_p2p_stays_on_within_an_ok_pair_without_iommu_translation(fixtures_dir):
    f = facts_for(fixtures_dir, domain="passthrough", group_type="identity")
    d = pp.nccl_p2p_policy(f, tp=2)
    assert d["p2p"] == "enabled"
    assert d["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert d["disable_custom_all_reduce"] is False
    # the same tp 2 on GPUs 1 and 2 (CNS) is off
    assert pp.nccl_p2p_policy(f, tp=2, gpus=[1, 2])["p2p"] == "disabled"


def test_p2p_gpu_group_types_win_over_boot_default(fixtures_dir):
    # boot default translated, but the GPUs' groups are identity: the IOMMU does not translate their P2P
    f = facts_for(fixtures_dir, domain="translated", group_type="identity")
    assert pp.nccl_p2p_policy(f, tp=2)["p2p"] == "enabled"
    f["iommu"]["gpu_group_types"] = []
    assert pp.nccl_p2p_policy(f, tp=2)["p2p"] == "disabled"


def test_p2p_nvlink_translated_stays_on(fixtures_dir):
    f = facts_for(fixtures_dir, gpus="h200", p2p=ALL_OK_2, nvlink=[[0, 1, 18]])
    f["gpu_count"] = 2
    assert pp.nccl_p2p_policy(f, tp=2)["p2p"] == "enabled"


def test_p2p_pass_through_vm_and_unknown_matrix(fixtures_dir):
    vm = facts_for(fixtures_dir, domain="passthrough", group_type="identity", vm=True, p2p=ALL_OK_2)
    vm["gpu_count"] = 2
    d = pp.nccl_p2p_policy(vm, tp=2)
    assert d["p2p"] == "disabled"
    assert d["reasons"] == ["GPUs are passed through to a VM: P2P between passed-through GPUs needs ACS/ATS set up by the hypervisor "
                            "and is not proven"]
    unknown = facts_for(fixtures_dir, domain="passthrough", group_type="identity", p2p=None)
    unknown["smi_state"] = "no_driver"
    assert pp.nccl_p2p_policy(unknown, tp=2)["reasons"] == ["P2P capability between GPUs [0, 1] is unknown (no nvidia-smi topo -p2p "
                                                            "matrix; smi_state=no_driver)"]


def test_p2p_single_gpu_and_disabled_policy(fixtures_dir):
    f = facts_for(fixtures_dir, gpus="h200")
    one = pp.nccl_p2p_policy(f, tp=1)
    assert (one["p2p"], one["env"], one["disable_custom_all_reduce"]) == ("not_applicable", {}, False)
    off = pp.nccl_p2p_policy(f, tp=1, policy="disabled")
    assert off["env"] == {"NCCL_P2P_DISABLE": "1"} and off["disable_custom_all_reduce"] is True


def test_p2p_bad_policy_and_tp(fixtures_dir):
    with pytest.raises(pp.PolicyRefusal) as info:
        pp.nccl_p2p_policy(facts_for(fixtures_dir), tp=2, policy="on")
    assert str(info.value) == "Refusing nccl_p2p='on': it is not one of auto, enabled, disabled. Fix: set nccl_p2p to one of auto, enabled, disabled."
    with pytest.raises(pp.PolicyRefusal, match=r"Refusing tp='four': tensor parallel size must be a positive integer"):
        pp.nccl_p2p_policy(facts_for(fixtures_dir), tp="four")


# ---------------------------------------------------------------------------------------------
# IOMMU mode -> kernel arguments per CPU vendor


@pytest.mark.parametrize("vendor,mode,add,remove", [
    ("intel", "translated", ["intel_iommu=on"], ["iommu=pt", "iommu.passthrough=1", "iommu=off", "amd_iommu=off"]),
    ("amd", "translated", [], ["iommu=pt", "iommu.passthrough=1", "iommu=off", "amd_iommu=off", "intel_iommu=off", "amd_iommu=on"]),
    ("intel", "passthrough", ["intel_iommu=on", "iommu=pt"], ["iommu.passthrough=0", "amd_iommu=off"]),
    ("amd", "passthrough", ["iommu=pt"], ["iommu.passthrough=0", "amd_iommu=off", "intel_iommu=off", "amd_iommu=on"]),
    ("intel", "off", ["intel_iommu=off"], ["iommu=pt", "iommu.passthrough=1", "iommu.passthrough=0", "iommu=nopt"]),
    ("amd", "off", ["amd_iommu=off"], ["iommu=pt", "iommu.passthrough=1", "iommu.passthrough=0", "iommu=nopt"]),  # amd_iommu=on: replaced by key
    ("arm", "passthrough", ["iommu.passthrough=1"], []),
    ("arm", "translated", ["iommu.passthrough=0"], []),
])
def test_iommu_args_per_vendor(fixtures_dir, vendor, mode, add, remove):
    plan = pp.iommu_kernel_args(facts_for(fixtures_dir, vendor=vendor), mode)
    assert plan["add"] == add
    assert plan["remove"] == remove
    assert plan["effective_mode"] == mode
    # amd_iommu=on is invalid ("AMD-Vi: Unknown option - 'on'") and never written
    assert "amd_iommu=on" not in plan["add"]


def test_iommu_auto_keeps_current_mode_and_unmanaged_touches_nothing(fixtures_dir):
    plan = pp.iommu_kernel_args(facts_for(fixtures_dir, vendor="intel", domain="passthrough", group_type="identity"), "auto")
    assert (plan["effective_mode"], plan["add"], plan["remove"]) == ("passthrough", [], [])
    amd = pp.iommu_kernel_args(facts_for(fixtures_dir, vendor="amd"), "auto")
    assert amd["remove"] == ["amd_iommu=on"]
    snp = pp.iommu_kernel_args(facts_for(fixtures_dir, snp=True), "auto")
    assert snp["remove"][:2] == ["iommu=pt", "iommu.passthrough=1"]
    none = pp.iommu_kernel_args(facts_for(fixtures_dir), "unmanaged")
    assert (none["add"], none["remove"], none["effective_mode"]) == ([], [], "unmanaged")


def test_iommu_refusals_bad_mode_off_on_snp_unknown_vendor(fixtures_dir):
    with pytest.raises(pp.PolicyRefusal) as info:
        pp.iommu_kernel_args(facts_for(fixtures_dir), "pt")
    assert str(info.value) == ("Refusing iommu_mode='pt': it is not one of auto, translated, passthrough, off, unmanaged. "
                               "Fix: set iommu_mode to one of auto, translated, passthrough, off, unmanaged.")
    with pytest.raises(pp.PolicyRefusal, match="with the IOMMU off the kernel prints"):
        pp.iommu_kernel_args(facts_for(fixtures_dir, snp=True), "off")
    with pytest.raises(pp.PolicyRefusal, match=r"the CPU vendor of this host is 'unknown'"):
        pp.iommu_kernel_args(facts_for(fixtures_dir, vendor="unknown"), "passthrough")


# ---------------------------------------------------------------------------------------------
# token-level command line edits


def test_cmdline_edit_keeps_unrelated_tokens(fixtures_dir):
    tokens = parse_cmdline((fixtures_dir / "host/proc-cmdline-ubuntu.txt").read_text())["tokens"]
    edit = pp.cmdline_edit(tokens, ["intel_iommu=on", "iommu=pt"], ["iommu.passthrough=0"])
    # iommu.strict=0 is another parameter than iommu=: it stays; intel_iommu=on is already there
    assert edit["cmdline"] == ("BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic root=UUID=1b7c9a52-0c2e-4d8e-9a31-55e0d6a1f0aa ro quiet splash "
                               "intel_iommu=on iommu.strict=0 iommu=pt")
    assert edit["added"] == ["iommu=pt"] and edit["removed"] == [] and edit["changed"] is True
    again = pp.cmdline_edit(edit["tokens"], ["intel_iommu=on", "iommu=pt"], ["iommu.passthrough=0"])
    assert again["changed"] is False


def test_cmdline_edit_replaces_values_and_removes_keys():
    edit = pp.cmdline_edit('ro console=tty1 console=ttyS0 intel_iommu=off iommu=nopt foo="a b"', ["intel_iommu=on"], ["iommu"])
    assert edit["cmdline"] == 'ro console=tty1 console=ttyS0 foo="a b" intel_iommu=on'
    assert edit["removed"] == ["intel_iommu=off", "iommu=nopt"]


def test_cmdline_satisfies_after_boot():
    ok = pp.cmdline_satisfies("ro intel_iommu=on iommu=pt", ["intel_iommu=on", "iommu=pt"], ["iommu.passthrough=0"])
    assert ok == {"satisfied": True, "missing": [], "unwanted": []}
    bad = pp.cmdline_satisfies("ro iommu=pt", [], ["iommu=pt", "amd_iommu=on"])
    assert bad == {"satisfied": False, "missing": [], "unwanted": ["iommu=pt"]}


# ---------------------------------------------------------------------------------------------
# per-OS decision paths


@pytest.mark.parametrize("distribution,major,method", [
    ("Ubuntu", "22", "grub_dropin"), ("Ubuntu", "24", "grub_dropin"),
    ("Debian", "12", "grub_dropin"), ("Debian", "13", "grub_dropin"),
    ("RedHat", "9", "grubby"), ("Rocky", "9", "grubby"),
])
def test_kernel_args_method_per_os(distribution, major, method):
    d = pp.kernel_args_method(distribution, major)
    assert d["method"] == method
    if method == "grub_dropin":
        assert d["path"] == "/etc/default/grub.d/99-llmops-iommu.cfg"
        assert d["update_command"] == ["update-grub"]
    else:
        assert d["path"] is None


@pytest.mark.parametrize("distribution,major", [("Ubuntu", "20"), ("Pop!_OS", "22"), ("RedHat", "8"), ("Debian", "11")])
def test_kernel_args_method_refuses_other_os(distribution, major):
    with pytest.raises(pp.PolicyRefusal) as info:
        pp.kernel_args_method(distribution, major)
    assert str(info.value) == ("Refusing ansible_facts.distribution='%s %s': the kernel command line is only managed on Ubuntu 22.04, "
                               "Ubuntu 24.04, Debian 12, Debian 13, RHEL 9, Rocky Linux 9, AlmaLinux 9, CentOS Stream 9. Fix: use a "
                               "supported OS, or set iommu_mode: unmanaged and manage the kernel arguments yourself." % (distribution, major))


@pytest.mark.parametrize("distribution,major,repo,kargs", [
    # NVIDIA's CUDA repository directories (developer.download.nvidia.com/compute/cuda/repos/): one per release
    ("Ubuntu", "22", "ubuntu2204", "grub_dropin"), ("Ubuntu", "24", "ubuntu2404", "grub_dropin"),
    ("Debian", "12", "debian12", "grub_dropin"), ("Debian", "13", "debian13", "grub_dropin"),
    ("RedHat", "9", "rhel9", "grubby"), ("AlmaLinux", "9", "rhel9", "grubby"),
])
def test_os_support_supported(distribution, major, repo, kargs):
    d = pp.os_support(distribution, major)
    assert (d["supported"], d["cuda_repo"], d["kernel_args"]) == (True, repo, kargs)


def test_os_support_refusal_names_the_os_and_the_list():
    d = pp.os_support("Ubuntu", "20")
    assert d["supported"] is False and d["cuda_repo"] is None
    assert d["reason"] == ("Ubuntu 20 is not supported: NVIDIA publishes the CUDA repository this collection installs the driver "
                           "from, and the kernel arguments are managed, only for Ubuntu 22.04, Ubuntu 24.04, Debian 12, Debian 13, "
                           "RHEL 9, Rocky Linux 9, AlmaLinux 9, CentOS Stream 9")


def test_nvidia_driver_os_vars_agree_with_the_os_table():
    # roles/nvidia_driver/vars/<Distribution>-<major>.yml (or <os_family>-<major>.yml) carry the package details of
    # each supported OS; their repository directory must be the table's, and there is no file for an unsupported OS
    import yaml
    vars_dir = Path(__file__).resolve().parents[5] / "roles" / "nvidia_driver" / "vars"
    # main.yml holds the role's internal constants (the content of the files it writes), not an OS
    files = sorted(p.stem for p in vars_dir.glob("*.yml") if p.stem != "main")
    assert files == ["Debian-12", "Debian-13", "RedHat-9", "Ubuntu-22", "Ubuntu-24"]
    for stem in files:
        dist, major = stem.split("-")
        repo = yaml.safe_load((vars_dir / (stem + ".yml")).read_text())["nvidia_driver__os_repo_distro"]
        assert repo == pp.os_support(dist, major)["cuda_repo"], stem


def _source_grub(tmp_path, files):
    """Source grub default files with /bin/sh as grub-mkconfig does and print the two variables."""
    script = "".join(". '%s'\n" % f for f in files) + 'printf "%s\\n%s\\n" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"\n'
    out = subprocess.run(["/bin/sh", "-c", script], check=True, capture_output=True, text=True).stdout
    linux, default = out.split("\n")[:2]
    return linux, default


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs /bin/sh")
def test_grub_dropin_after_cloud_image_dropin_intel_passthrough(tmp_path, fixtures_dir):
    """Ubuntu/Debian path: our drop-in sorts after 50-cloudimg-settings.cfg and appends to what it set."""
    plan = pp.iommu_kernel_args(facts_for(fixtures_dir, vendor="intel"), "passthrough")
    dropin = tmp_path / "99-llmops-iommu.cfg"
    dropin.write_text(pp.render_grub_dropin(plan["add"], plan["remove"], plan["reason"]))
    main = tmp_path / "grub"
    main.write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX="iommu.passthrough=0 net.ifnames=0"\n')
    cloud = fixtures_dir / "host/etc-default-grub.d-50-cloudimg-settings.cfg"
    linux, default = _source_grub(tmp_path, [main, cloud, dropin])
    assert default == "console=tty1 console=ttyS0 intel_iommu=on iommu=pt"
    assert linux == "net.ifnames=0"
    assert sorted(["50-cloudimg-settings.cfg", dropin.name])[-1] == dropin.name
    assert pp.MANAGED_MARKER in dropin.read_text()


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs /bin/sh")
def test_grub_dropin_amd_snp_removes_passthrough(tmp_path, fixtures_dir):
    plan = pp.iommu_kernel_args(facts_for(fixtures_dir, snp=True), "auto")
    dropin = tmp_path / "99-llmops-iommu.cfg"
    dropin.write_text(pp.render_grub_dropin(plan["add"], plan["remove"], plan["reason"]))
    main = tmp_path / "grub"
    main.write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt amd_iommu=on console=ttyS0,115200"\nGRUB_CMDLINE_LINUX=""\n')
    linux, default = _source_grub(tmp_path, [main, dropin])
    assert default == "quiet console=ttyS0,115200"
    assert linux == ""


def test_grubby_commands_rhel9(fixtures_dir):
    plan = pp.iommu_kernel_args(facts_for(fixtures_dir, vendor="intel"), "passthrough")
    assert pp.grubby_commands(plan["add"], plan["remove"], current_tokens="ro rhgb quiet iommu.passthrough=0") == [
        ["grubby", "--update-kernel=ALL", "--remove-args=iommu.passthrough=0"],
        ["grubby", "--update-kernel=ALL", "--args=intel_iommu=on iommu=pt"],
    ]
    assert pp.grubby_commands(plan["add"], plan["remove"], current_tokens="ro intel_iommu=on iommu=pt") == []


# ---------------------------------------------------------------------------------------------
# driver floor, flavour, host_decisions


@pytest.mark.parametrize("installed,cuda,upgrade", [
    ("580.65.06", "13.0", False), ("580.9", "13.0", True), ("575.57.08", "13.0", True), ("580.159.04", "13.2", False),
    ("570.86.15", "12.8", False), (None, "13.0", True),
])
def test_driver_floor(installed, cuda, upgrade):
    assert pp.driver_upgrade(installed, cuda)["upgrade"] is upgrade


def test_driver_flavour_pre_turing_and_mixed(fixtures_dir):
    f = facts_for(fixtures_dir)
    f["architectures"] = ["Volta"]
    assert pp.driver_flavour(f, "auto")["flavour"] == "proprietary"
    with pytest.raises(pp.PolicyRefusal, match=r"Refusing nvidia_driver_flavour='open': Volta GPUs are only supported by the proprietary"):
        pp.driver_flavour(f, "open")
    f["architectures"] = ["Blackwell", "Volta"]
    with pytest.raises(pp.PolicyRefusal, match="mixes Blackwell"):
        pp.driver_flavour(f, "auto")
    h200 = facts_for(fixtures_dir, gpus="h200")
    assert pp.driver_flavour(h200, "auto")["flavour"] == "open"


def test_host_decisions_reference_host(fixtures_dir):
    f = facts_for(fixtures_dir, snp=True)
    ok = pp.host_decisions(f, {"tp": 4, "distribution": "Ubuntu", "distribution_major_version": "24"})
    assert ok["refusals"] == []
    assert ok["decisions"]["nccl"]["p2p"] == "disabled"
    assert ok["decisions"]["driver_flavour"]["flavour"] == "open"
    assert ok["decisions"]["driver_upgrade"]["upgrade"] is False  # 580.95.05 >= 580.65.06
    bad = pp.host_decisions(f, {"tp": 4, "iommu_mode": "passthrough", "nvidia_driver_flavour": "proprietary", "nccl_p2p": "enabled",
                                "reboot_needed": True, "reboot_allowed": True, "connection": "local"})
    assert [r["variable"] for r in bad["refusals"]] == ["iommu_mode", "nvidia_driver_flavour", "nccl_p2p", "iommu_reboot_allowed"]


def test_the_docs_copy_of_the_os_table_is_the_table():
    doc = (Path(__file__).resolve().parents[5] / "docs" / "host_roles.md").read_text()
    block = doc.split("<!-- supported-os-table: start -->")[1].split("<!-- supported-os-table: end -->")[0]
    rows = [tuple(c.strip() for c in line.strip("|").split("|")) for line in block.strip().splitlines()[2:]]
    assert rows == [(label, d, m, repo, k) for d, m, label, repo, k in pp.SUPPORTED_OS_TABLE]
