# -*- coding: utf-8 -*-
"""host_facts readers on every recorded file in tests/fixtures/host and on sysfs trees built here."""
from __future__ import annotations

import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._gpu import host_facts as hf


def read(fixtures_dir, name):
    return (fixtures_dir / "host" / name).read_text()


def test_proc_cmdline_ubuntu(fixtures_dir):
    c = hf.parse_cmdline(read(fixtures_dir, "proc-cmdline-ubuntu.txt"))
    assert c["tokens"] == ["BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic", "root=UUID=1b7c9a52-0c2e-4d8e-9a31-55e0d6a1f0aa", "ro", "quiet",
                           "splash", "intel_iommu=on", "iommu.strict=0"]
    assert c["params"]["intel_iommu"] == "on"
    assert c["params"]["iommu.strict"] == "0"
    assert c["params"]["ro"] is True
    assert hf.cmdline_iommu_mode(c["params"]) is None


def test_cmdline_init_args_after_double_dash():
    c = hf.parse_cmdline("console=ttyS0 quiet rdinit=/init -- --addr 0.0.0.0:2024 iommu=pt\n")
    assert c["params"] == {"console": "ttyS0", "quiet": True, "rdinit": "/init"}
    assert c["init_args"] == ["--addr", "0.0.0.0:2024", "iommu=pt"]
    assert hf.cmdline_iommu_mode(c["params"]) is None


def test_cmdline_quotes_crlf_and_dashes():
    c = hf.parse_cmdline('ro  dyndbg="file foo.c +p"\tintel-iommu=on\r\n')
    assert c["tokens"] == ["ro", 'dyndbg="file foo.c +p"', "intel-iommu=on"]
    assert c["params"]["dyndbg"] == "file foo.c +p"
    assert c["params"]["intel_iommu"] == "on"


@pytest.mark.parametrize("cmdline,mode", [("iommu=pt", "passthrough"), ("iommu.passthrough=1", "passthrough"), ("iommu=nopt", "translated"),
                                          ("amd_iommu=off", "off"), ("intel_iommu=off iommu=pt", "off"), ("quiet", None)])
def test_cmdline_iommu_mode(cmdline, mode):
    assert hf.cmdline_iommu_mode(hf.parse_cmdline(cmdline)["params"]) == mode


def test_sev_snp_host_dmesg(fixtures_dir):
    log = hf.parse_kernel_log(read(fixtures_dir, "sev-snp-host-dmesg.txt"))
    assert log["iommu_default_domain"] == "translated"
    assert log["iommu_default_domain_forced"] is False
    assert log["iommu_tlb_policy"] == "lazy"
    assert log["sev_snp_lines"] == [
        "SEV-SNP: RMP table physical range [0x0000000088e00000 - 0x00000000a92fffff]",
        "AMD-Vi: IOMMU SNP support enabled.",
        "ccp 0000:46:00.1: SEV-SNP API:1.55 build:42",
        "kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)",
    ]
    assert log["sev_snp_conflict_lines"] == []
    assert log["nvrm"] == {"driver_version": "580.95.05", "kernel_module_flavour": "open", "gcc_version": None}
    snp = hf.sev_snp_facts(hf.parse_cpuinfo(""), None, log)
    # the kernel log alone (no kvm_amd parameter file, no cpuinfo) says SNP is active
    assert snp["active"] is True
    assert snp["kernel_log"] == "enabled"
    assert snp["conflict"] is False


def test_snp_passthrough_conflict_dmesg(fixtures_dir):
    log = hf.parse_kernel_log(read(fixtures_dir, "snp-passthrough-conflict-dmesg.txt"))
    assert log["iommu_default_domain"] == "passthrough"
    assert log["iommu_default_domain_forced"] is True
    assert log["command_line"] == "BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic root=UUID=1b7c9a52-0c2e-4d8e-9a31-55e0d6a1f0aa ro iommu=pt"
    assert log["sev_snp_conflict_lines"] == ["AMD-Vi: SNP: IOMMU disabled or configured in passthrough mode, SNP cannot be supported."]
    snp = hf.sev_snp_facts({"sev_snp_flag": True}, None, log)
    assert (snp["active"], snp["conflict"], snp["cpu_flag"], snp["kernel_log"]) == (False, True, True, "conflict")


def test_kernel_log_prefixes_and_unknown_amd_option():
    text = ("Nov 29 18:00:01 host kernel: AMD-Vi: Unknown option - 'on'\n"
            "<6>[    1.0] iommu: Default domain type: Passthrough\n"
            "[    2.5] kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)\r\n")
    log = hf.parse_kernel_log(text)
    assert log["amd_vi_unknown_options"] == ["on"]
    assert log["iommu_default_domain"] == "passthrough"
    assert log["sev_snp_lines"] == ["kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)"]


def test_sev_snp_kvm_param_only():
    snp = hf.sev_snp_facts({"sev_snp_flag": True}, "Y\n", None)
    assert snp["active"] is True and snp["kvm_amd_sev_snp"] == "Y"
    capable = hf.sev_snp_facts({"sev_snp_flag": True}, "N\n", None)
    assert capable["active"] is False and capable["cpu_flag"] is True


def test_cpuinfo_vendors():
    amd = hf.parse_cpuinfo("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9354\nflags\t\t: fpu svm sev sev_es sev_snp\n"
                           "processor\t: 1\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu\n")
    assert (amd["vendor"], amd["sev_snp_flag"], amd["hypervisor"]) == ("amd", True, False)
    assert amd["flags"] == ["sev", "sev_es", "sev_snp", "svm"]
    intel = hf.parse_cpuinfo("vendor_id\t: GenuineIntel\nflags\t\t: fpu vmx hypervisor\n")
    assert (intel["vendor"], intel["hypervisor"]) == ("intel", True)
    arm = hf.parse_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n")
    assert arm["vendor"] == "arm"
    assert hf.parse_cpuinfo(None)["vendor"] == "unknown"


def test_virtualization():
    vm = hf.virtualization_facts({"hypervisor": True}, "QEMU", "Standard PC (Q35 + ICH9, 2009)", None, 1, [None])
    assert (vm["role"], vm["hypervisor"], vm["gpu_passthrough"], vm["vgpu"]) == ("guest", "kvm", True, False)
    host = hf.virtualization_facts({"hypervisor": False}, "Supermicro", "AS-4125GS-TNRT", None, 4, ["None"])
    assert (host["role"], host["hypervisor"], host["gpu_passthrough"]) == ("host", None, False)
    vgpu = hf.virtualization_facts({"hypervisor": True}, "VMware, Inc.", "VMware7,1", None, 1, ["VGPU"])
    assert (vgpu["hypervisor"], vgpu["vgpu"], vgpu["gpu_passthrough"]) == ("vmware", True, False)
    no_gpu_vm = hf.virtualization_facts({"hypervisor": True}, "Amazon EC2", "c7i.large", None, 0, [])
    assert no_gpu_vm["gpu_passthrough"] is False


def _dev(sysfs, bdf, vendor, cls, group=None, driver=None):
    path = os.path.join(sysfs, "bus", "pci", "devices", bdf)
    os.makedirs(path)
    for name, value in (("vendor", vendor), ("class", cls), ("device", "0x2335"), ("numa_node", "-1")):
        with open(os.path.join(path, name), "w") as handle:
            handle.write(value + "\n")
    if group is not None:
        gdir = os.path.join(sysfs, "kernel", "iommu_groups", group)
        os.makedirs(os.path.join(gdir, "devices"), exist_ok=True)
        os.symlink(path, os.path.join(gdir, "devices", bdf))
        os.symlink(gdir, os.path.join(path, "iommu_group"))
    if driver:
        ddir = os.path.join(sysfs, "bus", "pci", "drivers", driver)
        os.makedirs(ddir, exist_ok=True)
        os.symlink(ddir, os.path.join(path, "driver"))


def test_pci_enumeration_without_driver(tmp_path):
    sysfs = str(tmp_path)
    _dev(sysfs, "0000:00:06.0", "0x10de", "0x030200", group="5")                     # H200, no driver bound
    _dev(sysfs, "0000:01:00.0", "0x10de", "0x030000", group="6", driver="vfio-pci")  # workstation board as VGA, for a VM
    _dev(sysfs, "0000:01:00.1", "0x10de", "0x040300", group="6")                     # its audio function
    _dev(sysfs, "0000:05:00.0", "0x10de", "0x068000")                                # NVSwitch
    _dev(sysfs, "0000:00:01.0", "0x8086", "0x060400", group="1")                     # Intel root port
    pci = hf.pci_nvidia_devices(sysfs)
    assert [d["pci_bus_id"] for d in pci["gpus"]] == ["0000:00:06.0", "0000:01:00.0"]
    assert [d["driver"] for d in pci["gpus"]] == [None, "vfio-pci"]
    assert [d["iommu_group"] for d in pci["gpus"]] == ["5", "6"]
    assert pci["gpus"][0]["numa_node"] == -1
    assert [d["pci_bus_id"] for d in pci["nvswitches"]] == ["0000:05:00.0"]
    assert [d["pci_bus_id"] for d in pci["other"]] == ["0000:01:00.1"]


def test_iommu_groups_types_and_sharing(tmp_path):
    sysfs = str(tmp_path)
    _dev(sysfs, "0000:17:00.0", "0x10de", "0x030200", group="20")
    _dev(sysfs, "0000:63:00.0", "0x10de", "0x030200", group="21")
    _dev(sysfs, "0000:60:01.0", "0x1022", "0x060400", group="21")  # a bridge sharing the group
    for group, gtype in (("20", "DMA-FQ"), ("21", "DMA")):
        with open(os.path.join(sysfs, "kernel", "iommu_groups", group, "type"), "w") as handle:
            handle.write(gtype + "\n")
    f = hf.iommu_facts(sysfs, ["0000:17:00.0", "0000:63:00.0"], {"iommu.strict": "0"}, None)
    assert f["default_domain"] == "translated"
    assert f["default_domain_source"] == "groups"
    assert f["gpu_group_types"] == ["DMA", "DMA-FQ"]
    assert [(g["group"], g["type"], g["shared"]) for g in f["gpu_groups"]] == [("20", "DMA-FQ", False), ("21", "DMA", True)]
    assert f["group_count"] == 2
    assert f["enabled"] is True


def test_iommu_off_and_identity(tmp_path):
    off = tmp_path / "off"
    os.makedirs(str(off / "kernel" / "iommu_groups"))
    f = hf.iommu_facts(str(off), ["0000:17:00.0"], {}, None)
    assert (f["default_domain"], f["default_domain_source"], f["enabled"]) == ("off", "sysfs", False)
    # the kernel prints "Default domain type: Translated" even without IOMMU hardware: empty sysfs wins
    logged = hf.iommu_facts(str(off), [], {}, {"iommu_default_domain": "translated"})
    assert (logged["default_domain"], logged["enabled"]) == ("off", False)
    assert (logged["present"], logged["note"]) == (False, None)
    ident = str(tmp_path / "ident")
    _dev(ident, "0000:17:00.0", "0x10de", "0x030200", group="3")
    with open(os.path.join(ident, "kernel", "iommu_groups", "3", "type"), "w") as handle:
        handle.write("identity\n")
    g = hf.iommu_facts(ident, ["0000:17:00.0"], {"iommu": "pt"}, None)
    assert g["default_domain"] == "passthrough"
    assert g["cmdline_mode"] == "passthrough"


def test_grub_cloud_image_dropin(fixtures_dir, tmp_path):
    base = ("/etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX="net.ifnames=0"\n')
    cloud = ("/etc/default/grub.d/50-cloudimg-settings.cfg", read(fixtures_dir, "etc-default-grub.d-50-cloudimg-settings.cfg"))
    g = hf.parse_grub_defaults([base, cloud])
    # 50-cloudimg-settings.cfg: GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0", GRUB_TIMEOUT=0
    assert g["cmdline_linux_default"] == "console=tty1 console=ttyS0"
    assert g["cmdline_linux"] == "net.ifnames=0"
    assert g["variables"]["GRUB_TIMEOUT"] == "0"
    assert g["variables"]["GRUB_TERMINAL"] == "console"
    assert g["set_by"]["GRUB_CMDLINE_LINUX_DEFAULT"] == "/etc/default/grub.d/50-cloudimg-settings.cfg"


def test_grub_shell_expansion_and_file_order(tmp_path):
    etc = tmp_path / "etc"
    os.makedirs(str(etc / "default" / "grub.d"))
    (etc / "default" / "grub").write_text("GRUB_CMDLINE_LINUX_DEFAULT='quiet'\n# GRUB_CMDLINE_LINUX=\"nope\"\n")
    (etc / "default" / "grub.d" / "60-b.cfg").write_text('GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} b=1"  # later\n')
    (etc / "default" / "grub.d" / "10-a.cfg").write_text('GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT a=1"\n')
    (etc / "default" / "grub.d" / "README").write_text("GRUB_CMDLINE_LINUX_DEFAULT=ignored\n")
    files = hf.grub_default_files(str(etc))
    assert [os.path.basename(p) for p, _t in files] == ["grub", "10-a.cfg", "60-b.cfg"]
    g = hf.parse_grub_defaults(files)
    assert g["cmdline_linux_default"] == "quiet a=1 b=1"
    assert g["cmdline_linux"] == ""


def test_iommu_in_a_guest_without_a_virtual_iommu_reads_the_kernel(tmp_path):
    """Issue 14: a VM with an empty /sys/kernel/iommu_groups read "off". The guest cannot see the hypervisor's IOMMU; the
    fact says what the guest kernel says (its log's default domain) and that no IOMMU is exposed to it."""
    sysfs = tmp_path / "vm"
    os.makedirs(str(sysfs / "kernel" / "iommu_groups"))
    _dev(str(sysfs), "0000:00:06.0", "0x10de", "0x030200")       # the passed-through H200, no group in the guest
    f = hf.iommu_facts(str(sysfs), ["0000:00:06.0"], {}, {"iommu_default_domain": "translated"}, guest=True)
    assert (f["default_domain"], f["default_domain_source"], f["enabled"], f["present"]) == ("translated", "kernel_log", False, False)
    assert f["note"].startswith("no IOMMU is exposed to this VM (no group in /sys/kernel/iommu_groups, no unit in /sys/class/iommu): "
                                "the default domain is what this kernel says (translated, from its log)")
    assert f["gpu_groups"] == [{"pci_bus_id": "0000:00:06.0", "group": None, "type": None, "devices": [], "shared": False}]
    # no kernel log line: the command line, else unknown (never "off", which only a host's empty sysfs means)
    g = hf.iommu_facts(str(sysfs), [], {"iommu": "pt"}, None, guest=True)
    assert (g["default_domain"], g["default_domain_source"]) == ("passthrough", "cmdline")
    h = hf.iommu_facts(str(sysfs), [], {}, None, guest=True)
    assert (h["default_domain"], h["default_domain_source"], h["enabled"]) == ("unknown", None, False)
    assert "(it says none)" in h["note"]
    # the same tree on a host is the IOMMU off
    assert hf.iommu_facts(str(sysfs), [], {}, {"iommu_default_domain": "translated"}, guest=False)["default_domain"] == "off"


def test_iommu_in_a_guest_with_a_virtual_iommu_reads_its_groups(tmp_path):
    sysfs = str(tmp_path)
    _dev(sysfs, "0000:00:06.0", "0x10de", "0x030200", group="4")
    with open(os.path.join(sysfs, "kernel", "iommu_groups", "4", "type"), "w") as handle:
        handle.write("DMA\n")
    f = hf.iommu_facts(sysfs, ["0000:00:06.0"], {}, None, guest=True)
    assert (f["default_domain"], f["default_domain_source"], f["enabled"], f["present"], f["note"]) == ("translated", "groups", True, True, None)


def test_nvidia_uvm_hmm_parameter(tmp_path):
    assert hf.nvidia_uvm_facts(str(tmp_path)) == {"loaded": False, "uvm_disable_hmm": None}
    params = tmp_path / "module" / "nvidia_uvm" / "parameters"
    params.mkdir(parents=True)
    assert hf.nvidia_uvm_facts(str(tmp_path)) == {"loaded": True, "uvm_disable_hmm": None}   # a driver without the parameter
    (params / "uvm_disable_hmm").write_text("N\n")
    assert hf.nvidia_uvm_facts(str(tmp_path)) == {"loaded": True, "uvm_disable_hmm": False}
    (params / "uvm_disable_hmm").write_text("Y\n")
    assert hf.nvidia_uvm_facts(str(tmp_path)) == {"loaded": True, "uvm_disable_hmm": True}
