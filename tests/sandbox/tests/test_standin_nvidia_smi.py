"""The stand-in nvidia-smi prints the recorded real outputs of 4x RTX PRO 6000 Blackwell (580.95.05)."""
from __future__ import annotations

import re

import pytest

QUERY = "index,name,pci.bus_id,driver_version,compute_cap,memory.total,uuid"


def test_query_noheader_nounits_is_the_recorded_csv(run_standin, fixtures_dir):
    res = run_standin("nvidia-smi", "--query-gpu=" + QUERY, "--format=csv,noheader,nounits")
    assert res.returncode == 0
    assert res.stdout == (fixtures_dir / "nvidia" / "rtxpro6000-x4-query-gpu-noheader.csv").read_text()


def test_query_with_header_and_units(run_standin):
    res = run_standin("nvidia-smi", "--query-gpu=index,memory.total,driver_version", "--format=csv")
    lines = res.stdout.splitlines()
    assert res.returncode == 0
    # header and unit spelling of the recorded H200 header/units CSV (h200-query-gpu-header-units.csv)
    assert lines[0] == "index, memory.total [MiB], driver_version"
    assert lines[1:] == ["0, 97887 MiB, 580.95.05", "1, 97887 MiB, 580.95.05",
                         "2, 97887 MiB, 580.95.05", "3, 97887 MiB, 580.95.05"]


def test_query_space_separated_options_and_id_selection(run_standin):
    res = run_standin("nvidia-smi", "--query-gpu", "pci.bus_id,uuid", "--format", "csv,noheader", "-i", "1")
    assert res.returncode == 0
    assert res.stdout == "00000000:63:00.0, GPU-5a1e0c3b-0f6e-4c1d-9b1a-7d2e3f4a5b61\n"


def test_unknown_field_gives_the_real_error_and_rc_2(run_standin, fixtures_dir):
    recorded = (fixtures_dir / "nvidia" / "smi-bad-field.txt").read_text()
    res = run_standin("nvidia-smi", "--query-gpu=index,not_a_field", "--format=csv,noheader")
    assert res.returncode == 2
    assert res.stdout == recorded


def test_topo_p2p_r_is_the_recorded_matrix(run_standin, fixtures_dir):
    res = run_standin("nvidia-smi", "topo", "-p2p", "r")
    assert res.returncode == 0
    assert res.stdout == (fixtures_dir / "nvidia" / "rtxpro6000-x4-topo-p2p-r.txt").read_text()


def test_topo_p2p_n_no_nvlink_between_any_pair(run_standin):
    res = run_standin("nvidia-smi", "topo", "-p2p", "n")
    # note: the header line ("        GPU0\tGPU1...") matches ^\s*GPU\d+\s too; data rows have "X" in them
    rows = [line.split("\t") for line in res.stdout.splitlines() if re.match(r"^\s*GPU\d+\t", line) and "X" in line.split("\t")]
    assert len(rows) == 4
    for i, row in enumerate(rows):
        cells = [c for c in row[1:] if c]
        assert cells[i] == "X"
        assert [c for j, c in enumerate(cells) if j != i] == ["NS", "NS", "NS"]


def test_topo_m_is_pcie_only_and_consistent_with_p2p(run_standin, fixtures_dir):
    res = run_standin("nvidia-smi", "topo", "-m")
    assert res.returncode == 0
    lines = res.stdout.split("\n")
    header = lines[0].split("\t")
    assert header == ["", "GPU0", "GPU1", "GPU2", "GPU3", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    matrix = {}
    for line in lines[1:5]:
        cells = line.split("\t")
        matrix[cells[0]] = [c.strip() for c in cells[1:5]]
    assert "NV" not in res.stdout.split("Legend:")[0]
    # symmetric, self is X
    for i in range(4):
        for j in range(4):
            assert matrix["GPU%d" % i][j] == matrix["GPU%d" % j][i]
        assert matrix["GPU%d" % i][i] == "X"
    # pairs the recorded p2p matrix reports OK (0-1, 2-3) share a NUMA node (NODE); the CNS pairs cross it (SYS)
    assert matrix["GPU0"] == ["X", "NODE", "SYS", "SYS"]
    assert matrix["GPU2"] == ["SYS", "SYS", "X", "NODE"]
    p2p = (fixtures_dir / "nvidia" / "rtxpro6000-x4-topo-p2p-r.txt").read_text()
    assert "\n GPU0\tX\tOK\tCNS\tCNS\t" in p2p


def test_plain_summary_lists_the_four_gpus(run_standin):
    res = run_standin("nvidia-smi")
    assert res.returncode == 0
    assert "Driver Version: 580.95.05" in res.stdout
    assert "CUDA Version: 13.0" in res.stdout
    for bus in ("00000000:17:00.0", "00000000:63:00.0", "00000000:AF:00.0", "00000000:E3:00.0"):
        assert bus in res.stdout
    assert res.stdout.count("0MiB /  97887MiB") == 4
    # every table row is as wide as the header rows of the recorded H200 summary (91 characters)
    assert {len(line) for line in res.stdout.splitlines()[1:] if line.startswith(("|", "+"))} == {91}


def test_list_gpus(run_standin):
    res = run_standin("nvidia-smi", "-L")
    assert res.stdout.splitlines()[3] == \
        "GPU 3: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-5a1e0c3b-0f6e-4c1d-9b1a-7d2e3f4a5b63)"


@pytest.mark.parametrize("state,fixture,rc", [
    ("no_driver", "smi-no-driver.txt", 9),
    ("no_devices", "smi-no-devices.txt", 6),
    ("version_mismatch", "smi-version-mismatch.txt", 18),
])
def test_failure_states_print_the_recorded_texts(run_standin, fixtures_dir, state, fixture, rc):
    res = run_standin("nvidia-smi", "--query-gpu=index", "--format=csv", env={"NVIDIA_STANDIN_STATE": state})
    assert res.returncode == rc
    assert res.stdout == (fixtures_dir / "nvidia" / fixture).read_text()


def test_unsupported_command_line_is_a_usage_error(run_standin):
    res = run_standin("nvidia-smi", "nvlink", "-s")
    assert res.returncode == 2
    assert res.stdout == "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


def test_persistence_mode_round_trip(run_standin, tmp_path):
    env = {"NVIDIA_STANDIN_RUN": str(tmp_path / "run")}
    res = run_standin("nvidia-smi", "-pm", "1", "-i", "0", env=env)
    assert res.returncode == 0
    assert res.stdout == "Enabled persistence mode for GPU 00000000:17:00.0.\nAll done.\n"
    res = run_standin("nvidia-smi", "--query-gpu=persistence_mode", "--format=csv,noheader", env=env)
    assert res.stdout == "Enabled\nEnabled\nEnabled\nEnabled\n"
    run_standin("nvidia-smi", "-pm", "0", env=env)
    res = run_standin("nvidia-smi", "--query-gpu=persistence_mode", "--format=csv,noheader", env=env)
    assert res.stdout == "Disabled\nDisabled\nDisabled\nDisabled\n"
    assert run_standin("nvidia-smi", "-pm", "7", env=env).returncode == 2


def test_q_report_uses_the_recorded_layout(run_standin, fixtures_dir):
    recorded = (fixtures_dir / "nvidia" / "h200-smi-q.txt").read_text().splitlines()
    colon = {line.index(" : ") for line in recorded if " : " in line}
    assert colon == {54}                       # "Key" padded so that ": " starts at column 55
    res = run_standin("nvidia-smi", "-q")
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert {line.index(" : ") for line in lines if " : " in line} == {54}
    assert lines[1] == recorded[1] == "==============NVSMI LOG=============="
    assert "Attached GPUs                                          : 4" in lines
    gpu_lines = [line for line in lines if line.startswith("GPU ")]
    assert gpu_lines == ["GPU 00000000:17:00.0", "GPU 00000000:63:00.0", "GPU 00000000:AF:00.0", "GPU 00000000:E3:00.0"]
    assert lines.count("        Virtualization Mode                            : None") == 4
    assert lines.count("    Product Architecture                               : Blackwell") == 4
