# -*- coding: utf-8 -*-
"""nvidia_smi parsers on every recorded file in tests/fixtures/nvidia (values read off the files)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._gpu import nvidia_smi as smi


def read(fixtures_dir, name):
    return (fixtures_dir / "nvidia" / name).read_text()


def test_query_is_the_contract():
    assert list(smi.QUERY_ARGS) == ["--query-gpu=index,name,pci.bus_id,driver_version,compute_cap,memory.total,uuid",
                                    "--format=csv,noheader,nounits"]


def test_h200_noheader(fixtures_dir):
    (gpu,) = smi.parse_query_gpu(read(fixtures_dir, "h200-query-gpu-noheader.csv"))
    assert gpu == {
        "index": 0, "name": "NVIDIA H200", "pci_bus_id_smi": "00000000:00:06.0", "pci_bus_id": "0000:00:06.0",
        "driver_version": "580.159.04", "compute_capability": "9.0", "architecture": "Hopper", "memory_total_mib": 143771,
        "uuid": "GPU-33f2ce9d-2b54-4529-c9c7-285c017b1246",
    }


def test_h200_header_and_units(fixtures_dir):
    (gpu,) = smi.parse_query_gpu(read(fixtures_dir, "h200-query-gpu-header-units.csv"))
    # "143771 MiB" -> 143771; extra columns keep their header names; "700.00 W" -> "700.00"
    assert gpu["memory_total_mib"] == 143771
    assert gpu["compute_capability"] == "9.0"
    assert gpu["architecture"] == "Hopper"
    assert gpu["driver_version"] == "580.159.04"
    assert gpu["persistence_mode"] == "Enabled"
    assert gpu["power_limit"] == "700.00"
    assert gpu["clocks_max_sm"] == "1980"


def test_rtx_pro_6000_x4(fixtures_dir):
    gpus = smi.parse_query_gpu(read(fixtures_dir, "rtxpro6000-x4-query-gpu-noheader.csv"))
    assert [g["index"] for g in gpus] == [0, 1, 2, 3]
    assert [g["pci_bus_id"] for g in gpus] == ["0000:17:00.0", "0000:63:00.0", "0000:af:00.0", "0000:e3:00.0"]
    assert {(g["name"], g["compute_capability"], g["architecture"], g["memory_total_mib"], g["driver_version"]) for g in gpus} == {
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", "Blackwell", 97887, "580.95.05")}
    assert gpus[1]["uuid"] == "GPU-5a1e0c3b-0f6e-4c1d-9b1a-7d2e3f4a5b61"


def test_query_messy_output(fixtures_dir):
    text = read(fixtures_dir, "rtxpro6000-x4-query-gpu-noheader.csv")
    messy = "\x1b[?25l\x1b[0m" + text.replace("\n", " \t\r\n") + "\r\n\n\t\n"
    assert smi.parse_query_gpu(messy) == smi.parse_query_gpu(text)
    assert len(smi.parse_query_gpu(messy)) == 4


def test_query_truncated_line_is_ignored():
    text = "0, NVIDIA H200, 00000000:00:06.0, 580.159.04, 9.0, 143771, GPU-a\n1, NVIDIA H200, 00000000:00:07.0\n"
    assert [g["index"] for g in smi.parse_query_gpu(text)] == [0]


def test_topo_p2p_r(fixtures_dir):
    m = smi.parse_topo_p2p(read(fixtures_dir, "rtxpro6000-x4-topo-p2p-r.txt"))
    assert m["gpus"] == [0, 1, 2, 3]
    assert m["matrix"] == [["X", "OK", "CNS", "CNS"], ["OK", "X", "CNS", "CNS"], ["CNS", "CNS", "X", "OK"], ["CNS", "CNS", "OK", "X"]]
    assert m["ok_directed"] == [[0, 1], [1, 0], [2, 3], [3, 2]]
    assert smi.p2p_ok_pairs([m]) == [[0, 1], [2, 3]]
    assert smi.p2p_ok_pairs([m], gpus=[1, 2, 3]) == [[2, 3]]


def test_topo_p2p_whole_words_and_asymmetry():
    text = ("P2P Connectivity Matrix\n        GPU0    GPU1    GPU2\n GPU0   X       NS      OK\n GPU1   CNS     X       GNS\n"
            " GPU2   OK      TNS     X\n\nLegend:\n  NS   = Not supported\n")
    m = smi.parse_topo_p2p(text)
    assert m["matrix"][0] == ["X", "NS", "OK"]
    assert m["matrix"][1] == ["CNS", "X", "GNS"]
    assert smi.p2p_ok_pairs([m]) == [[0, 2]]
    w = {"gpus": [0, 1, 2], "matrix": [], "ok_directed": [[0, 2]]}  # write only 0 -> 2
    assert smi.p2p_ok_pairs([m, w]) == []


def test_topo_p2p_garbage():
    assert smi.parse_topo_p2p("") is None
    assert smi.parse_topo_p2p("No devices were found\n") is None


def test_topo_m_pcie_and_nvlink():
    pcie = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPIX\t24-47,72-95\t1\t\tN/A\n"
            "GPU1\tPIX\t X \t24-47,72-95\t1\t\tN/A\n\nLegend:\n\n  X    = Self\n")
    m = smi.parse_topo_m(pcie)
    assert m["matrix"] == [["X", "PIX"], ["PIX", "X"]]
    assert m["nvlink"] is False
    assert m["cpu_affinity"] == {"0": "24-47,72-95", "1": "24-47,72-95"}
    assert m["numa_affinity"] == {"0": "1", "1": "1"}
    nv = ("\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\n GPU0\t X \tNV18\tNV18\tPXB\t0-55\t0\n"
          "GPU1\tNV18\t X \tNV18\tSYS\t0-55\t0\nGPU2\tNV18\tNV18\t X \tSYS\t56-111\t1\nNIC0\tPXB\tSYS\tSYS\t X \n\nNIC Legend:\n\n  NIC0: mlx5_0\n")
    n = smi.parse_topo_m(nv)
    assert n["nvlink"] is True
    assert n["nvlink_pairs"] == [[0, 1, 18], [0, 2, 18], [1, 2, 18]]
    assert n["matrix"][0] == ["X", "NV18", "NV18"]
    assert n["nics"] == ["NIC0"]
    assert n["cpu_affinity"]["2"] == "56-111"


def test_topo_m_row_with_leading_space_is_found():
    nv = "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n"
    assert smi.parse_topo_m(nv)["nvlink_pairs"] == [[0, 1, 4]]


@pytest.mark.parametrize("name,rc,state", [
    ("smi-no-driver.txt", 9, "no_driver"),
    ("smi-no-devices.txt", 6, "no_devices"),
    ("smi-version-mismatch.txt", 18, "version_mismatch"),
    ("smi-bad-field.txt", 2, "error"),
])
def test_error_outputs(fixtures_dir, name, rc, state):
    text = read(fixtures_dir, name)
    assert smi.classify_smi_output(rc, text)[0] == state
    # the same text on stderr maps the same way
    assert smi.classify_smi_output(rc, "", text)[0] == state


def test_error_messages(fixtures_dir):
    assert smi.classify_smi_output(18, read(fixtures_dir, "smi-version-mismatch.txt")) == (
        "version_mismatch", "Failed to initialize NVML: Driver/library version mismatch; NVML library version: 580.95")
    assert smi.parse_nvml_library_version(read(fixtures_dir, "smi-version-mismatch.txt")) == "580.95"
    assert smi.classify_smi_output(2, read(fixtures_dir, "smi-bad-field.txt")) == ("error", 'Field "not_a_field" is not a valid field to query.')
    assert smi.classify_smi_output(0, read(fixtures_dir, "h200-query-gpu-noheader.csv")) == ("ok", "")
    assert smi.classify_smi_output(0, "") == ("error", "nvidia-smi exited 0 but printed nothing")
    assert smi.classify_smi_output(255, "") == ("error", "nvidia-smi exited with rc 255 and no output")


def test_proc_driver_version_open_and_proprietary(fixtures_dir):
    assert smi.parse_proc_driver_version(read(fixtures_dir, "h200-proc-driver-nvidia-version.txt")) == {
        "driver_version": "580.159.04", "kernel_module_flavour": "open", "gcc_version": "gcc version 15.3.0 (GCC)"}
    assert smi.parse_proc_driver_version(read(fixtures_dir, "proprietary-proc-driver-nvidia-version.txt")) == {
        "driver_version": "580.95.05", "kernel_module_flavour": "proprietary",
        "gcc_version": "gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)"}
    assert smi.parse_proc_driver_version(None)["kernel_module_flavour"] == "unknown"


@pytest.mark.parametrize("text,flavour", [("Dual MIT/GPL\n", "open"), ("NVIDIA\n", "proprietary"), ("", "unknown"),
                                          ("modinfo: ERROR: Module nvidia not found.\n", "unknown")])
def test_module_license(text, flavour):
    assert smi.flavour_from_license(text) == flavour


def test_smi_q_h200(fixtures_dir):
    r = smi.parse_smi_report(read(fixtures_dir, "h200-smi-q.txt"))
    assert (r["driver_version"], r["cuda_version"], r["attached_gpus"]) == ("580.159.04", "13.0", 1)
    (gpu,) = r["gpus"]
    assert gpu["pci_bus_id"] == "0000:00:06.0"
    assert gpu["product_name"] == "NVIDIA H200"
    assert gpu["architecture"] == "Hopper"
    assert gpu["uuid"] == "GPU-33f2ce9d-2b54-4529-c9c7-285c017b1246"
    assert gpu["virtualization_mode"] == "Pass-Through"


def test_smi_plain_h200(fixtures_dir):
    r = smi.parse_smi_plain(read(fixtures_dir, "h200-smi-plain.txt"))
    assert (r["smi_version"], r["driver_version"], r["cuda_version"]) == ("580.159.04", "580.159.04", "13.0")
    assert r["gpus"] == [{"index": 0, "name": "NVIDIA H200", "pci_bus_id": "0000:00:06.0", "memory_used_mib": 0, "memory_total_mib": 143771}]


@pytest.mark.parametrize("cc,arch", [("8.0", "Ampere"), ("8.6", "Ampere"), ("8.9", "Ada"), ("9.0", "Hopper"), ("10.0", "Blackwell"),
                                     ("11.0", "Blackwell"), ("12.0", "Blackwell"), ("7.5", "Turing"), ("7.0", "Volta"), ("6.1", "Pascal"),
                                     ("", "unknown"), ("[N/A]", "unknown"), ("13.0", "unknown")])
def test_architecture(cc, arch):
    assert smi.architecture_from_cc(cc) == arch


@pytest.mark.parametrize("raw,norm", [("00000000:AF:00.0", "0000:af:00.0"), ("0000:1b:00.0", "0000:1b:00.0"), ("17:00.0", "0000:17:00.0"),
                                      ("00000001:E3:00.1", "0001:e3:00.1"), ("GPU-abc", None), (None, None)])
def test_bus_id(raw, norm):
    assert smi.normalise_pci_bus_id(raw) == norm


def test_version_tuple():
    assert smi.version_tuple("580.65.06") == (580, 65, 6)
    assert smi.version_tuple("580.9") < smi.version_tuple("580.65.06")
    assert smi.version_tuple("N/A") is None
