# -*- coding: utf-8 -*-
"""gpu_facts module tests: patch_module_args, mocked run_command, temporary sysfs/procfs/etc trees
built from the recorded fixtures in tests/fixtures. Expected values are read off the fixture
text by hand (see the comments), never copied from the module's output."""
from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils import basic

from ansible_collections.llmops.sglang.plugins.modules import gpu_facts

# ansible-core 2.19 (pinned in requirements.txt) injects module args this way.
from ansible.module_utils.testing import patch_module_args


QUERY = ["--query-gpu=index,name,pci.bus_id,driver_version,compute_cap,memory.total,uuid", "--format=csv,noheader,nounits"]
RTX_BDFS = ["0000:17:00.0", "0000:63:00.0", "0000:af:00.0", "0000:e3:00.0"]
AMD_SNP_CPUINFO = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9354 32-Core Processor\n"
    "flags\t\t: fpu vme de pse svm sme sev sev_es sev_snp rdpid\n\n"
)
INTEL_VM_CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel Xeon Platinum 8480+\nflags\t\t: fpu vmx hypervisor\n"
TOPO_M_NV = (
    "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\t0-55\t0\t\tN/A\n"
    "GPU1\tNV18\t X \t0-55\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
)
TOPO_M_PCIE4 = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tPHB\tSYS\tSYS\t0-31\t0\t\tN/A\n"
    "GPU1\tPHB\t X \tSYS\tSYS\t0-31\t0\t\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tPHB\t32-63\t1\t\tN/A\n"
    "GPU3\tSYS\tSYS\tPHB\t X \t32-63\t1\t\tN/A\n\nLegend:\n"
)


def _w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def make_sysfs(root, bdfs, group_type="DMA-FQ", kvm_sev_snp=None, dmi=None, other_group_members=None):
    """A sysfs tree: one PCI device dir per GPU (vendor 0x10de, class 0x030200, driver + iommu_group links),
    one IOMMU group per GPU with the given type, plus the GPU's audio function (0x040300) in the same group."""
    sysfs = os.path.join(root, "sys")
    for n, bdf in enumerate(bdfs):
        dev = os.path.join(sysfs, "bus", "pci", "devices", bdf)
        _w(os.path.join(dev, "vendor"), "0x10de\n")
        _w(os.path.join(dev, "device"), "0x2bb5\n")
        _w(os.path.join(dev, "class"), "0x030200\n")
        _w(os.path.join(dev, "numa_node"), "%d\n" % (0 if n < 2 else 1))
        group = os.path.join(sysfs, "kernel", "iommu_groups", str(20 + n))
        _w(os.path.join(group, "type"), group_type + "\n")
        os.makedirs(os.path.join(group, "devices"), exist_ok=True)
        os.symlink(dev, os.path.join(group, "devices", bdf))
        audio = bdf[:-1] + "1"
        _w(os.path.join(sysfs, "bus", "pci", "devices", audio, "vendor"), "0x10de\n")
        _w(os.path.join(sysfs, "bus", "pci", "devices", audio, "class"), "0x040300\n")
        os.symlink(os.path.join(sysfs, "bus", "pci", "devices", audio), os.path.join(group, "devices", audio))
        os.symlink(group, os.path.join(dev, "iommu_group"))
        os.makedirs(os.path.join(sysfs, "bus", "pci", "drivers", "nvidia"), exist_ok=True)
        os.symlink(os.path.join(sysfs, "bus", "pci", "drivers", "nvidia"), os.path.join(dev, "driver"))
    # a non-NVIDIA device (AMD root port) must not be counted
    _w(os.path.join(sysfs, "bus", "pci", "devices", "0000:00:01.0", "vendor"), "0x1022\n")
    _w(os.path.join(sysfs, "bus", "pci", "devices", "0000:00:01.0", "class"), "0x060400\n")
    os.makedirs(os.path.join(sysfs, "class", "iommu", "ivhd0"), exist_ok=True)
    if kvm_sev_snp is not None:
        _w(os.path.join(sysfs, "module", "kvm_amd", "parameters", "sev_snp"), kvm_sev_snp + "\n")
    for key, value in (dmi or {}).items():
        _w(os.path.join(sysfs, "class", "dmi", "id", key), value + "\n")
    return sysfs


def make_procfs(root, cmdline=None, cpuinfo=None, nvidia_version=None):
    procfs = os.path.join(root, "proc")
    os.makedirs(procfs, exist_ok=True)
    if cmdline is not None:
        _w(os.path.join(procfs, "cmdline"), cmdline)
    if cpuinfo is not None:
        _w(os.path.join(procfs, "cpuinfo"), cpuinfo)
    if nvidia_version is not None:
        _w(os.path.join(procfs, "driver", "nvidia", "version"), nvidia_version)
    return procfs


class Smi(object):
    """run_command stand-in: answers argv (after an optional timeout prefix) from a table; records calls."""

    def __init__(self, answers, bins=None):
        self.answers = answers
        self.calls = []
        self.bins = bins if bins is not None else {"nvidia-smi": "/usr/bin/nvidia-smi"}

    def run_command(self, args, check_rc=False, environ_update=None, **kwargs):
        argv = list(args)
        if argv and argv[0] == "/usr/bin/timeout":
            argv = argv[3:]
        self.calls.append(argv)
        key = tuple(argv[1:]) if argv[0].endswith("nvidia-smi") else tuple([os.path.basename(argv[0])] + argv[1:])
        for pattern, answer in self.answers.items():
            if tuple(pattern) == key:
                return answer
        return 127, "", "%s: command not answered by the test" % argv[0]

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        return self.bins.get(arg)


def run(mocker, capsys, smi, args, check_mode=False):
    mocker.patch.object(basic.AnsibleModule, "run_command", side_effect=smi.run_command)
    mocker.patch.object(basic.AnsibleModule, "get_bin_path", side_effect=smi.get_bin_path)
    module_args = dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)
    if check_mode:
        module_args["_ansible_check_mode"] = True
    with patch_module_args(module_args):
        with pytest.raises(SystemExit):
            gpu_facts.main()
    result = json.loads(capsys.readouterr().out)
    return result


def fx(fixtures_dir, name):
    return (fixtures_dir / name).read_text()


@pytest.fixture
def rtx_host(tmp_path, fixtures_dir):
    """The reference host: 4x RTX PRO 6000 Blackwell, AMD EPYC with SEV-SNP, translated IOMMU (DMA-FQ)."""
    sysfs = make_sysfs(str(tmp_path), RTX_BDFS, "DMA-FQ", kvm_sev_snp="Y", dmi={"sys_vendor": "Supermicro", "product_name": "AS-4125GS-TNRT"})
    procfs = make_procfs(str(tmp_path), cmdline="BOOT_IMAGE=/boot/vmlinuz-6.8.0-87-generic root=UUID=x ro quiet\n", cpuinfo=AMD_SNP_CPUINFO)
    answers = {
        tuple(QUERY): (0, fx(fixtures_dir, "nvidia/rtxpro6000-x4-query-gpu-noheader.csv"), ""),
        ("topo", "-p2p", "r"): (0, fx(fixtures_dir, "nvidia/rtxpro6000-x4-topo-p2p-r.txt"), ""),
        ("topo", "-m"): (0, TOPO_M_PCIE4, ""),
        ("-q",): (2, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", ""),
        (): (0, fx(fixtures_dir, "nvidia/h200-smi-plain.txt"), ""),
    }
    args = {"sysfs_root": sysfs, "procfs_root": procfs, "etc_root": str(tmp_path / "etc"), "kernel_log": "file",
            "kernel_log_file": str(fixtures_dir / "host" / "sev-snp-host-dmesg.txt")}
    return answers, args


def test_rtx_pro_6000_x4_reference_host(mocker, capsys, rtx_host):
    answers, args = rtx_host
    smi = Smi(answers)
    result = run(mocker, capsys, smi, args)
    facts = result["ansible_facts"]["llmops_gpu"]
    assert result["changed"] is False
    # the query the module runs is the contract with the sandbox stand-in
    assert smi.calls[0] == ["/usr/bin/nvidia-smi"] + QUERY
    assert facts["smi_state"] == "ok"
    assert facts["gpu_count"] == 4
    # fixture: "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 00000000:17:00.0, 580.95.05, 12.0, 97887, GPU-...b60"
    assert [g["pci_bus_id"] for g in facts["gpus"]] == RTX_BDFS
    assert {g["name"] for g in facts["gpus"]} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert {g["compute_capability"] for g in facts["gpus"]} == {"12.0"}
    assert {g["memory_total_mib"] for g in facts["gpus"]} == {97887}
    assert facts["gpus"][3]["uuid"] == "GPU-5a1e0c3b-0f6e-4c1d-9b1a-7d2e3f4a5b63"
    assert facts["architectures"] == ["Blackwell"]
    assert facts["driver_version"] == "580.95.05"
    assert facts["driver_version_source"] == "nvidia-smi"
    # no /proc/driver/nvidia/version in this tree: the dmesg NVRM line "Open Kernel Module ... 580.95.05" decides
    assert facts["kernel_module_flavour"] == "open"
    assert facts["kernel_module_flavour_source"] == "kernel_log"
    # topo -p2p r: OK only within 0-1 and 2-3, CNS across
    assert facts["p2p"]["ok_pairs"] == [[0, 1], [2, 3]]
    assert facts["p2p"]["read"]["matrix"][0] == ["X", "OK", "CNS", "CNS"]
    assert facts["p2p"]["read"]["matrix"][2] == ["CNS", "CNS", "X", "OK"]
    assert facts["p2p"]["write"] is None
    assert facts["nvlink"]["present"] is False
    assert facts["nvlink"]["cpu_affinity"]["2"] == "32-63"
    # SEV-SNP: kvm_amd Y and the four dmesg lines
    assert facts["sev_snp"]["active"] is True
    assert facts["sev_snp"]["kvm_amd_sev_snp"] == "Y"
    assert facts["sev_snp"]["kernel_log"] == "enabled"
    assert "kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)" in facts["sev_snp"]["evidence"]
    assert facts["cpu_vendor"] == "amd"
    # IOMMU: dmesg "Default domain type: Translated" + "lazy mode"; GPU groups 20..23 typed DMA-FQ
    assert facts["iommu"]["default_domain"] == "translated"
    assert facts["iommu"]["default_domain_source"] == "kernel_log"
    assert facts["iommu"]["tlb_policy"] == "lazy"
    assert facts["iommu"]["gpu_group_types"] == ["DMA-FQ"]
    assert [g["group"] for g in facts["iommu"]["gpu_groups"]] == ["20", "21", "22", "23"]
    assert facts["iommu"]["gpu_groups"][0]["devices"] == ["0000:17:00.0", "0000:17:00.1"]
    assert facts["iommu"]["gpu_groups"][0]["shared"] is False
    assert facts["iommu"]["units"] == ["ivhd0"]
    assert facts["gpus"][2]["numa_node"] == 1
    assert facts["gpus"][0]["kernel_driver"] == "nvidia"
    assert facts["pci"]["gpu_count"] == 4
    assert facts["virtualization"]["role"] == "host"
    assert facts["virtualization"]["gpu_passthrough"] is False
    assert facts["virtualization"]["vfio_gpus"] == []
    assert facts["cmdline"]["params"]["root"] == "UUID=x"
    # -q was refused: a warning, not a failure; the plain banner ("CUDA Version: 13.0") still gives the CUDA version
    assert any(w.startswith("nvidia-smi -q failed (rc=2): Invalid combination of input arguments") for w in facts["warnings"])
    assert facts["cuda_version"] == "13.0"


def test_h200_vm_open_module(mocker, capsys, tmp_path, fixtures_dir):
    sysfs = make_sysfs(str(tmp_path), ["0000:00:06.0"], "DMA", dmi={"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)"})
    procfs = make_procfs(str(tmp_path), cmdline=fx(fixtures_dir, "host/proc-cmdline-ubuntu.txt"), cpuinfo=INTEL_VM_CPUINFO,
                         nvidia_version=fx(fixtures_dir, "nvidia/h200-proc-driver-nvidia-version.txt"))
    smi = Smi({
        tuple(QUERY): (0, fx(fixtures_dir, "nvidia/h200-query-gpu-noheader.csv"), ""),
        ("topo", "-p2p", "r"): (0, "        GPU0\t\n GPU0\tX\t\n\nLegend:\n\n  X    = Self\n", ""),
        ("topo", "-m"): (0, "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n", ""),
        ("-q",): (0, fx(fixtures_dir, "nvidia/h200-smi-q.txt"), ""),
    })
    facts = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs, "kernel_log": "none"})["ansible_facts"]["llmops_gpu"]
    gpu = facts["gpus"][0]
    # fixture: "0, NVIDIA H200, 00000000:00:06.0, 580.159.04, 9.0, 143771, GPU-33f2ce9d-..."
    assert (gpu["name"], gpu["compute_capability"], gpu["architecture"], gpu["memory_total_mib"]) == ("NVIDIA H200", "9.0", "Hopper", 143771)
    assert gpu["pci_bus_id"] == "0000:00:06.0"
    assert gpu["pci_bus_id_smi"] == "00000000:00:06.0"
    assert facts["driver_version"] == "580.159.04"
    # "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04"
    assert facts["kernel_module_flavour"] == "open"
    assert facts["kernel_module_flavour_source"] == "procfs"
    assert facts["cuda_version"] == "13.0"
    # -q: "Virtualization Mode : Pass-Through"; DMI says QEMU; cpuinfo has "hypervisor"
    assert facts["virtualization"]["role"] == "guest"
    assert facts["virtualization"]["hypervisor"] == "kvm"
    assert facts["virtualization"]["gpu_passthrough"] is True
    assert facts["virtualization"]["smi_virtualization_modes"] == ["Pass-Through"]
    assert facts["cpu_vendor"] == "intel"
    assert facts["sev_snp"]["active"] is False
    # /proc/cmdline fixture tokens
    assert facts["cmdline"]["tokens"][-2:] == ["intel_iommu=on", "iommu.strict=0"]
    assert facts["cmdline"]["params"]["intel_iommu"] == "on"
    # no kernel log: the GPU group type (DMA) decides the domain
    assert facts["iommu"]["default_domain"] == "translated"
    assert facts["iommu"]["default_domain_source"] == "groups"
    assert facts["p2p"]["ok_pairs"] == []
    assert facts["p2p"]["read"]["matrix"] == [["X"]]
    assert facts["kernel_log"]["source"] == "none"


@pytest.mark.parametrize("fixture,rc,state,message_start", [
    ("smi-no-driver.txt", 9, "no_driver", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
    ("smi-no-devices.txt", 6, "no_devices", "No devices were found"),
    ("smi-version-mismatch.txt", 18, "version_mismatch", "Failed to initialize NVML: Driver/library version mismatch"),
    ("smi-bad-field.txt", 2, "error", 'Field "not_a_field" is not a valid field to query.'),
])
def test_error_outputs_map_to_states(mocker, capsys, tmp_path, fixtures_dir, fixture, rc, state, message_start):
    sysfs = make_sysfs(str(tmp_path), RTX_BDFS[:2], "DMA-FQ")
    procfs = make_procfs(str(tmp_path), cmdline="ro\n", cpuinfo=AMD_SNP_CPUINFO,
                         nvidia_version=fx(fixtures_dir, "nvidia/proprietary-proc-driver-nvidia-version.txt"))
    smi = Smi({tuple(QUERY): (rc, fx(fixtures_dir, "nvidia/" + fixture), "")})
    result = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs, "kernel_log": "none"})
    facts = result["ansible_facts"]["llmops_gpu"]
    assert "failed" not in result
    assert facts["smi_state"] == state
    assert facts["smi_message"].startswith(message_start)
    # no topo/-q calls after a failed query
    assert [c[1:] for c in smi.calls] == [QUERY]
    # the GPUs are still counted from sysfs, with their PCI ids
    assert facts["gpu_count"] == 2
    assert [g["pci_bus_id"] for g in facts["gpus"]] == ["0000:17:00.0", "0000:63:00.0"]
    assert {g["source"] for g in facts["gpus"]} == {"pci"}
    # /proc/driver/nvidia/version (proprietary fixture, 580.95.05) still answers
    assert facts["driver_version"] == "580.95.05"
    assert facts["driver_version_source"] == "procfs"
    assert facts["kernel_module_flavour"] == "proprietary"
    if state == "version_mismatch":
        assert facts["nvml_library_version"] == "580.95"


def test_missing_binary(mocker, capsys, tmp_path):
    sysfs = make_sysfs(str(tmp_path), ["0000:17:00.0"], "identity")
    # the GPU is bound to vfio-pci (handed to a VM), which is also why no nvidia-smi answers here
    link = os.path.join(sysfs, "bus", "pci", "devices", "0000:17:00.0", "driver")
    os.unlink(link)
    os.makedirs(os.path.join(sysfs, "bus", "pci", "drivers", "vfio-pci"))
    os.symlink(os.path.join(sysfs, "bus", "pci", "drivers", "vfio-pci"), link)
    procfs = make_procfs(str(tmp_path), cmdline="ro iommu=pt\n", cpuinfo=AMD_SNP_CPUINFO)
    smi = Smi({}, bins={})
    facts = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs})["ansible_facts"]["llmops_gpu"]
    assert facts["smi_state"] == "missing"
    assert facts["smi_path"] is None
    assert smi.calls == []
    assert facts["gpu_count"] == 1
    assert facts["driver_version"] is None
    assert facts["kernel_module_flavour"] == "unknown"
    # kernel_log=auto with no dmesg/journalctl: a warning and sysfs decides
    assert facts["kernel_log"]["source"] == "none"
    assert facts["iommu"]["default_domain"] == "passthrough"
    assert facts["iommu"]["cmdline_mode"] == "passthrough"
    assert facts["virtualization"]["vfio_gpus"] == ["0000:17:00.0"]
    assert facts["gpus"][0]["kernel_driver"] == "vfio-pci"


def test_timeout_is_an_error_state(mocker, capsys, tmp_path):
    sysfs = make_sysfs(str(tmp_path), ["0000:17:00.0"])
    procfs = make_procfs(str(tmp_path), cmdline="ro\n", cpuinfo=AMD_SNP_CPUINFO)
    smi = Smi({tuple(QUERY): (124, "", "")}, bins={"nvidia-smi": "/usr/bin/nvidia-smi", "timeout": "/usr/bin/timeout"})
    facts = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs, "kernel_log": "none", "timeout": 7})["ansible_facts"]["llmops_gpu"]
    assert facts["smi_state"] == "error"
    assert facts["smi_message"] == "nvidia-smi --query-gpu did not answer within 7 s (timeout)"


def test_timeout_prefix_is_used(mocker, capsys, tmp_path, fixtures_dir):
    sysfs = make_sysfs(str(tmp_path), ["0000:00:06.0"])
    procfs = make_procfs(str(tmp_path), cmdline="ro\n")
    calls = []

    def fake(args, check_rc=False, environ_update=None, **kwargs):
        calls.append((list(args), environ_update))
        return 0, fx(fixtures_dir, "nvidia/h200-query-gpu-noheader.csv"), ""

    mocker.patch.object(basic.AnsibleModule, "run_command", side_effect=fake)
    mocker.patch.object(basic.AnsibleModule, "get_bin_path",
                        side_effect=lambda a, required=False, opt_dirs=None: {"timeout": "/usr/bin/timeout", "nvidia-smi": "/opt/smi"}.get(a))
    with patch_module_args({"sysfs_root": sysfs, "procfs_root": procfs, "kernel_log": "none", "timeout": 12,
                            "topology": False, "query_details": False, "p2p_modes": []}):
        with pytest.raises(SystemExit):
            gpu_facts.main()
    capsys.readouterr()
    assert calls[0][0] == ["/usr/bin/timeout", "--kill-after=5", "12", "/opt/smi"] + QUERY
    assert calls[0][1]["LC_ALL"] == "C"


def test_snp_passthrough_conflict_log(mocker, capsys, tmp_path, fixtures_dir):
    sysfs = make_sysfs(str(tmp_path), RTX_BDFS[:1], "identity", kvm_sev_snp="N")
    procfs = make_procfs(str(tmp_path), cpuinfo=AMD_SNP_CPUINFO)  # no /proc/cmdline: the log's "Command line:" is used
    smi = Smi({tuple(QUERY): (9, fx(fixtures_dir, "nvidia/smi-no-driver.txt"), "")})
    facts = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs, "kernel_log": "file",
                                      "kernel_log_file": str(fixtures_dir / "host" / "snp-passthrough-conflict-dmesg.txt")})["ansible_facts"]["llmops_gpu"]
    assert facts["sev_snp"]["active"] is False
    assert facts["sev_snp"]["conflict"] is True
    assert facts["sev_snp"]["cpu_flag"] is True
    assert facts["sev_snp"]["kernel_log"] == "conflict"
    assert "AMD-Vi: SNP: IOMMU disabled or configured in passthrough mode, SNP cannot be supported." in facts["sev_snp"]["evidence"]
    assert facts["iommu"]["default_domain"] == "passthrough"
    assert facts["iommu"]["default_domain_source"] == "kernel_log"
    assert facts["cmdline"]["source"] == "kernel_log"
    assert facts["cmdline"]["tokens"][-1] == "iommu=pt"


def test_grub_cloud_image_dropin(mocker, capsys, tmp_path, fixtures_dir):
    etc = tmp_path / "etc"
    _w(str(etc / "default" / "grub"), 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX=""\n')
    _w(str(etc / "default" / "grub.d" / "50-cloudimg-settings.cfg"), fx(fixtures_dir, "host/etc-default-grub.d-50-cloudimg-settings.cfg"))
    _w(str(etc / "default" / "grub.d" / "99-llmops-iommu.cfg"), "# Managed by llmops.sglang: IOMMU\nGRUB_CMDLINE_LINUX_DEFAULT=x\n")
    sysfs = make_sysfs(str(tmp_path), [])
    procfs = make_procfs(str(tmp_path), cmdline="ro\n")
    args = {"sysfs_root": sysfs, "procfs_root": procfs, "etc_root": str(etc), "kernel_log": "none"}
    facts = run(mocker, capsys, Smi({}, bins={}), args)["ansible_facts"]["llmops_gpu"]
    # the cloud image drop-in (sourced later) overrides /etc/default/grub's "quiet splash"
    assert facts["grub"]["cmdline_linux_default"] == "console=tty1 console=ttyS0"
    assert facts["grub"]["set_by"]["GRUB_CMDLINE_LINUX_DEFAULT"].endswith("50-cloudimg-settings.cfg")
    assert facts["grub"]["managed_dropins"] == [str(etc / "default" / "grub.d" / "99-llmops-iommu.cfg")]
    assert facts["gpu_count"] == 0


def test_check_mode_gathers_the_same(mocker, capsys, rtx_host):
    answers, args = rtx_host
    normal = run(mocker, capsys, Smi(answers), args)["ansible_facts"]["llmops_gpu"]
    checked = run(mocker, capsys, Smi(answers), args, check_mode=True)
    assert checked["changed"] is False
    assert checked["ansible_facts"]["llmops_gpu"] == normal


def test_messy_output_and_write_matrix(mocker, capsys, rtx_host, fixtures_dir):
    answers, args = rtx_host
    csv = fx(fixtures_dir, "nvidia/rtxpro6000-x4-query-gpu-noheader.csv")
    messy = "\x1b[0m\r\n" + csv.replace("\n", "\t\r\n") + "\r\n\r\n"
    answers[tuple(QUERY)] = (0, messy, "")
    # write matrix: 1 -> 0 not OK (asymmetric): the pair 0-1 is no longer OK in both directions
    answers[("topo", "-p2p", "w")] = (0, "        GPU0\tGPU1\tGPU2\tGPU3\t\n GPU0\tX\tOK\tCNS\tCNS\t\n GPU1\tNS\tX\tCNS\tCNS\t\n"
                                         " GPU2\tCNS\tCNS\tX\tOK\t\n GPU3\tCNS\tCNS\tOK\tX\t\n", "")
    args = dict(args, p2p_modes=["r", "w"])
    facts = run(mocker, capsys, Smi(answers), args)["ansible_facts"]["llmops_gpu"]
    assert facts["gpu_count"] == 4
    assert facts["gpus"][3]["uuid"] == "GPU-5a1e0c3b-0f6e-4c1d-9b1a-7d2e3f4a5b63"
    assert facts["gpus"][3]["memory_total_mib"] == 97887
    assert facts["p2p"]["write"]["matrix"][1][0] == "NS"
    assert facts["p2p"]["ok_pairs"] == [[2, 3]]


def test_nvlink_topology(mocker, capsys, tmp_path):
    sysfs = make_sysfs(str(tmp_path), ["0000:18:00.0", "0000:2a:00.0"], "DMA")
    procfs = make_procfs(str(tmp_path), cmdline="ro\n")
    query = ("0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 580.65.06, 9.0, 81559, GPU-a\n"
             "1, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, 580.65.06, 9.0, 81559, GPU-b\n")
    smi = Smi({tuple(QUERY): (0, query, ""), ("topo", "-m"): (0, TOPO_M_NV, ""),
               ("topo", "-p2p", "r"): (0, "\tGPU0\tGPU1\n GPU0\tX\tOK\n GPU1\tOK\tX\n", "")})
    facts = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs, "kernel_log": "none",
                                      "query_details": False})["ansible_facts"]["llmops_gpu"]
    assert facts["nvlink"]["present"] is True
    assert facts["nvlink"]["nvlink_pairs"] == [[0, 1, 18]]
    assert facts["gpus"][1]["pci_bus_id"] == "0000:2a:00.0"
    assert facts["p2p"]["ok_pairs"] == [[0, 1]]


def test_kernel_log_file_required(mocker, capsys):
    mocker.patch.object(basic.AnsibleModule, "get_bin_path", return_value=None)
    with patch_module_args({"kernel_log": "file"}):
        with pytest.raises(SystemExit):
            gpu_facts.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True
    assert "kernel_log_file" in result["msg"]


def test_dmesg_refused_falls_back_to_journal(mocker, capsys, tmp_path, fixtures_dir):
    sysfs = make_sysfs(str(tmp_path), [])
    procfs = make_procfs(str(tmp_path), cmdline="ro\n", cpuinfo=AMD_SNP_CPUINFO)
    smi = Smi({("dmesg",): (1, "", "dmesg: read kernel buffer failed: Operation not permitted"),
               ("journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"): (0, fx(fixtures_dir, "host/sev-snp-host-dmesg.txt"), "")},
              bins={"dmesg": "/usr/bin/dmesg", "journalctl": "/usr/bin/journalctl"})
    facts = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs})["ansible_facts"]["llmops_gpu"]
    assert facts["kernel_log"]["source"] == "journal"
    assert facts["kernel_log"]["lines"] == 7
    assert facts["sev_snp"]["active"] is True
    assert facts["smi_state"] == "missing"


def test_header_and_units_answer(mocker, capsys, tmp_path, fixtures_dir):
    """A stand-in or wrapper that prints the header and units anyway (h200-query-gpu-header-units.csv) gives the same GPU."""
    sysfs = make_sysfs(str(tmp_path), ["0000:00:06.0"], "DMA")
    procfs = make_procfs(str(tmp_path), cmdline="ro\n", nvidia_version=fx(fixtures_dir, "nvidia/h200-proc-driver-nvidia-version.txt"))
    smi = Smi({tuple(QUERY): (0, fx(fixtures_dir, "nvidia/h200-query-gpu-header-units.csv"), "")})
    args = {"sysfs_root": sysfs, "procfs_root": procfs, "kernel_log": "none", "p2p_modes": [], "topology": False, "query_details": False}
    facts = run(mocker, capsys, smi, args)["ansible_facts"]["llmops_gpu"]
    gpu = facts["gpus"][0]
    # header line: "index, name, pci.bus_id, driver_version, compute_cap, memory.total [MiB], uuid, ..."; value "143771 MiB"
    assert (gpu["memory_total_mib"], gpu["compute_capability"], gpu["architecture"], gpu["driver_version"]) == (143771, "9.0", "Hopper", "580.159.04")
    assert gpu["power_limit"] == "700.00"
    assert facts["kernel_module_flavour"] == "open"
    assert smi.calls == [["/usr/bin/nvidia-smi"] + QUERY]


def test_every_recorded_fixture_is_used_here(fixtures_dir):
    """Guard: each file of tests/fixtures/nvidia and tests/fixtures/host goes through gpu_facts in this file."""
    source = open(__file__).read()
    names = sorted(p.name for d in ("nvidia", "host") for p in (fixtures_dir / d).iterdir() if p.is_file())
    assert len(names) >= 16
    assert [n for n in names if '"%s"' % n not in source and "/%s\"" % n not in source] == []


def test_journal_without_access_is_no_log(mocker, capsys, tmp_path):
    sysfs = make_sysfs(str(tmp_path), [])
    procfs = make_procfs(str(tmp_path), cmdline="ro\n", cpuinfo=AMD_SNP_CPUINFO)
    smi = Smi({("dmesg",): (1, "", "dmesg: read kernel buffer failed: Operation not permitted"),
               ("journalctl", "-k", "-b", "--no-pager", "-o", "short-monotonic"): (
                   0, "Hint: You are currently not seeing messages from other users and the system.\n-- No entries --\n", "")},
              bins={"dmesg": "/usr/bin/dmesg", "journalctl": "/usr/bin/journalctl"})
    result = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs})
    facts = result["ansible_facts"]["llmops_gpu"]
    assert facts["kernel_log"]["source"] == "none"
    assert facts["kernel_log"]["error"].startswith("dmesg rc=1: dmesg: read kernel buffer failed: Operation not permitted; journalctl rc=0")
    assert any(w.startswith("kernel log not read (dmesg rc=1") for w in facts["warnings"])


def test_default_p2p_modes_are_read_and_write(mocker, capsys, tmp_path):
    """No p2p_modes given: topo -p2p r and w are both asked (the nccl role's decision reads both)."""
    sysfs = make_sysfs(str(tmp_path), ["0000:18:00.0", "0000:2a:00.0"], "DMA")
    procfs = make_procfs(str(tmp_path), cmdline="ro\n")
    query = ("0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 580.65.06, 9.0, 81559, GPU-a\n"
             "1, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, 580.65.06, 9.0, 81559, GPU-b\n")
    matrix = "\tGPU0\tGPU1\n GPU0\tX\tOK\n GPU1\tOK\tX\n"
    smi = Smi({tuple(QUERY): (0, query, ""), ("topo", "-p2p", "r"): (0, matrix, ""), ("topo", "-p2p", "w"): (0, matrix, "")})
    facts = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs, "kernel_log": "none", "topology": False,
                                      "query_details": False})["ansible_facts"]["llmops_gpu"]
    assert [c[1:] for c in smi.calls if c[1:3] == ["topo", "-p2p"]] == [["topo", "-p2p", "r"], ["topo", "-p2p", "w"]]
    assert facts["p2p"]["modes"] == ["r", "w"] and facts["p2p"]["ok_pairs"] == [[0, 1]]


def test_nouveau_loaded_and_model_dir_read(mocker, capsys, tmp_path):
    """/sys/module/nouveau present: nouveau.loaded; model_dir: the index's total_size and config.json, as a result key."""
    sysfs = make_sysfs(str(tmp_path), [])
    os.makedirs(os.path.join(sysfs, "module", "nouveau"))
    procfs = make_procfs(str(tmp_path), cmdline="ro\n")
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    index = {"metadata": {"total_size": 2147483648}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    (model / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    smi = Smi({}, bins={})
    result = run(mocker, capsys, smi, {"sysfs_root": sysfs, "procfs_root": procfs, "kernel_log": "none", "model_dir": str(model)})
    assert result["ansible_facts"]["llmops_gpu"]["nouveau"] == {"loaded": True}
    # 2147483648 B = 2 GiB exactly; one shard in the weight map
    assert result["model_dir"] == {
        "path": str(model), "exists": True, "config_json": True, "error": None,
        "weights": {"bytes": 2147483648, "gib": 2.0, "source": "index", "architectures": [], "torch_dtype": "bfloat16",
                    "quantization": None, "detail": "model.safetensors.index.json metadata.total_size = 2147483648 bytes over 1 shard(s)"}}
    # without model_dir there is no such key, and nouveau absent reads not loaded
    sysfs2 = make_sysfs(str(tmp_path / "other"), [])
    plain = run(mocker, capsys, Smi({}, bins={}), {"sysfs_root": sysfs2, "procfs_root": procfs, "kernel_log": "none"})
    assert "model_dir" not in plain and plain["ansible_facts"]["llmops_gpu"]["nouveau"] == {"loaded": False}
