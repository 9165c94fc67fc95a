"""benchmark_report module: files, idempotence, check mode, A/B output and the missing-matplotlib error."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.modules import benchmark_report

# ansible-core 2.19 (pinned in requirements.txt) injects module args this way.
from ansible.module_utils.testing import patch_module_args


def run(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            benchmark_report.main()
    return json.loads(capsys.readouterr().out)


def _rec(level, conc, out_tps, tpot_ms, accept=None):
    return {"level": level, "max_concurrency": conc, "request_rate": None, "backend": "sglang", "completed": 8, "failed": 0,
            "output_throughput": out_tps, "decode_tok_s_per_request": 1000.0 / tpot_ms, "median_tpot_ms": tpot_ms,
            "p90_tpot_ms": tpot_ms * 1.1, "p99_tpot_ms": tpot_ms * 1.2, "median_ttft_ms": 40.0, "p90_ttft_ms": 50.0,
            "p99_ttft_ms": 60.0, "accept_length": accept, "error_kinds": [], "random_input_len": 1000, "random_output_len": 1000}


OFF = [_rec(1, 1, 110.0, 9.09), _rec(2, 4, 400.0, 10.0), _rec(3, 16, 1200.0, 13.3), _rec(4, 64, 3000.0, 21.3)]
ON = [_rec(1, 1, 135.0, 7.4, 2.0), _rec(2, 4, 460.0, 8.7, 2.0), _rec(3, 16, 1150.0, 13.9, 2.0), _rec(4, 64, 2600.0, 24.6, 2.0)]


def test_single_run_files_and_idempotence(capsys, tmp_path):
    args = {"dest": str(tmp_path), "host": "gpu1", "run_id": "r1", "records": OFF}
    out = run(capsys, args)
    assert out["changed"] is True, out.get("msg")
    d = tmp_path / "gpu1" / "r1"
    names = sorted(p.name for p in d.iterdir())
    assert names == ["decode_speed.png", "output_throughput.png", "results.jsonl", "summary.json", "summary.md", "tpot.png", "ttft.png"]
    lines = (d / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4
    assert json.loads(lines[2])["output_throughput"] == 1200.0
    assert '"request_rate": Infinity' in lines[0]
    assert (d / "decode_speed.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| 3 | 16 | - | 8 | 0 | 1200.0 |" in (d / "summary.md").read_text()
    again = run(capsys, args)
    assert again["changed"] is False and again["changed_files"] == []


def test_results_jsonl_appends_new_levels_only(capsys, tmp_path):
    run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "r", "records": OFF[:2], "plots": False})
    run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "r", "records": OFF, "plots": False})
    lines = (tmp_path / "h" / "r" / "results.jsonl").read_text().splitlines()
    assert [json.loads(ln)["level"] for ln in lines] == [1, 2, 3, 4]


def test_check_mode_writes_nothing(capsys, tmp_path):
    out = run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "r", "records": OFF, "_ansible_check_mode": True})
    assert out["changed"] is True and len(out["changed_files"]) == 7
    assert not (tmp_path / "h").exists()


def test_ab_report_and_decision(capsys, tmp_path):
    out = run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "ab", "records": ON, "baseline_records": OFF,
                       "target_concurrency": 64})
    ab = out["ab"]
    assert ab["decision"]["winner"] == "mtp_off" and ab["decision"]["speedup"] == pytest.approx(2600 / 3000)
    assert ab["crossover"]["level"] == 16
    d = tmp_path / "h" / "ab"
    assert (d / "ab_speedup.png").exists() and (d / "ab_throughput.png").exists()
    assert "Decision: **mtp_off**" in (d / "ab_summary.md").read_text()
    assert json.loads((d / "ab_summary.json").read_text())["decision"]["basis"] == "measured"
    out1 = run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "ab", "records": ON, "baseline_records": OFF,
                        "target_concurrency": 1, "plots": False})
    assert out1["ab"]["decision"]["winner"] == "mtp_on"


def test_missing_matplotlib_is_a_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(benchmark_report, "HAS_MPL", False)
    out = run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "r", "records": OFF})
    assert out["failed"] is True and "matplotlib" in out["msg"] and "plots=false" in out["msg"]
    assert not (tmp_path / "h").exists()


@pytest.mark.parametrize("args,needle", [
    ({"run_id": "../x"}, "run_id='../x'"),
    ({"records": []}, "records is empty"),
    ({"baseline_records": [_rec(1, 2, 1.0, 1.0)]}, "share no sweep level"),
])
def test_bad_input(capsys, tmp_path, args, needle):
    base = {"dest": str(tmp_path), "host": "h", "run_id": "r", "records": OFF, "plots": False}
    base.update(args)
    out = run(capsys, base)
    assert out["failed"] is True and needle in out["msg"]


def test_a_refusal_after_the_sweep_names_where_the_measurement_is_kept(capsys, tmp_path):
    # a file where the report directory belongs: the report cannot be written, the raw records (written first) are named
    (tmp_path / "h").write_text("")
    out = run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "r", "records": OFF, "plots": False,
                       "raw_records": "/reports/h/r/raw_records.jsonl"})
    assert out["failed"] is True and out["msg"].startswith("benchmark_report: cannot write %s/h/r/results.jsonl: " % tmp_path)
    assert out["msg"].endswith(" [the measured records are kept in /reports/h/r/raw_records.jsonl]")
    out = run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "r", "records": OFF, "plots": False})
    assert "kept in" not in out["msg"]


@pytest.mark.parametrize("dataset, expected", [
    ("random-ids", "input 1000 / output 256 tokens (range ratio 1.0)"),
    # a prompt workload's input is its prompts, whatever random_input_len says (bench_serving writes it for every dataset)
    ("builtin", "input: the workload's own prompts / output 256 tokens (range ratio 1.0)"),
])
def test_summary_header_names_the_input_lengths_the_workload_had(dataset, expected):
    rec = {"backend": "sglang", "dataset_name": dataset, "temperature": 0.0, "top_p": 1.0, "random_input_len": 1000,
           "random_output_len": 256, "random_range_ratio": 1.0, "speculative": {}}
    header = benchmark_report.summary_md("T", "h1", "r1", [rec]).splitlines()[4]
    assert header == "Backend `sglang`, workload `%s` (temperature 0.0, top_p 1.0), %s, speculative: off" % (dataset, expected)
