"""benchmark_report with per-category blocks: summary.md/summary.json tables, PNGs, A/B per-category speedups and the
synthetic-prompt warning carried into the decision."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._report import benchmark as br
from ansible_collections.llmops.sglang.plugins.modules import benchmark_report
from ansible_collections.llmops.sglang.plugins.modules.serving_benchmark import SYNTHETIC_WARNING

from ansible.module_utils.testing import patch_module_args


def run(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            benchmark_report.main()
    return json.loads(capsys.readouterr().out)


def _cat(acc, decode, p10=None, p90=None):
    return {"completed": 4, "accept_length": acc, "accept_length_mean": acc, "accept_length_p10": p10 or acc, "accept_length_p50": acc,
            "accept_length_p90": p90 or acc, "accept_rate": None if acc is None else acc - 1.0, "output_tok_s": 50.0, "decode_tok_s_per_request": decode,
            "median_tpot_ms": 1000.0 / decode}


def _rec(level, conc, out_tps, tpot_ms, accept=None, cats=None, workload="builtin", warnings=()):
    return {"level": level, "max_concurrency": conc, "request_rate": None, "backend": "sglang", "completed": 8, "failed": 0,
            "dataset_name": workload, "output_throughput": out_tps, "decode_tok_s_per_request": 1000.0 / tpot_ms,
            "median_tpot_ms": tpot_ms, "p90_tpot_ms": tpot_ms, "p99_tpot_ms": tpot_ms, "median_ttft_ms": 40.0, "p90_ttft_ms": 50.0,
            "p99_ttft_ms": 60.0, "accept_length": accept, "errors": [], "random_input_len": 1000, "random_output_len": 1000,
            "categories": cats or {}, "warnings": list(warnings)}


OFF = [_rec(1, 1, 110.0, 9.09, cats={"math": _cat(None, 110.0), "roleplay": _cat(None, 110.0)}),
       _rec(2, 8, 800.0, 10.0, cats={"math": _cat(None, 100.0), "roleplay": _cat(None, 100.0)})]
ON = [_rec(1, 1, 118.0, 8.5, 1.69, cats={"math": _cat(2.0, 135.0, 1.9, 2.0), "roleplay": _cat(1.38, 93.2, 1.3, 1.45)}),
      _rec(2, 8, 760.0, 10.5, 1.69, cats={"math": _cat(2.0, 120.0), "roleplay": _cat(1.38, 80.0)})]


def test_category_rows_and_markdown():
    rows = br.category_rows(ON)
    assert [(r["level"], r["category"]) for r in rows] == [(1, "math"), (1, "roleplay"), (2, "math"), (2, "roleplay")]
    md = br.category_markdown(ON)
    assert "| 1 | 1 | roleplay | 4 | 1.38 | 1.38 | 1.30 | 1.38 | 1.45 | 0.38 | 50.0 | 93.2 | 10.73 |" in md
    assert br.category_markdown([_rec(1, 1, 1.0, 1.0)]) == ""


def test_compare_adds_category_speedups_and_warnings():
    ab = br.compare(OFF, ON, target=8)
    lv1 = ab["levels"][0]["categories"]
    assert lv1["math"]["decode_speedup"] == pytest.approx(135.0 / 110.0)
    assert lv1["roleplay"]["decode_speedup"] == pytest.approx(93.2 / 110.0)     # MTP loses on roleplay at 1
    assert ab["warnings"] == [] and "warnings" not in ab["decision"]
    syn_off = [dict(r, categories={}, dataset_name="random-ids") for r in OFF]
    syn_on = [dict(r, categories={}, dataset_name="random-ids", warnings=[SYNTHETIC_WARNING]) for r in ON]
    ab = br.compare(syn_off, syn_on, target=8)
    assert ab["decision"]["warnings"] == [SYNTHETIC_WARNING] and ab["decision"]["reason"].endswith("WARNING: " + SYNTHETIC_WARNING)
    assert "**Warning:** " + SYNTHETIC_WARNING in br.ab_markdown(ab)


def test_report_files_with_categories(capsys, tmp_path):
    out = run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "ab", "records": ON, "baseline_records": OFF,
                       "target_concurrency": 8})
    assert not out.get("failed"), out.get("msg")
    d = tmp_path / "h" / "ab"
    assert (d / "accept_length_by_category.png").read_bytes()[:4] == b"\x89PNG"
    assert (d / "ab_speedup_by_category.png").read_bytes()[:4] == b"\x89PNG"
    md = (d / "summary.md").read_text()
    assert "## Per category (workload `builtin`)" in md and "| 2 | 8 | math |" in md
    summary = json.loads((d / "summary.json").read_text())
    assert len(summary["categories"]) == 4 and summary["warnings"] == []
    assert "| 1 | roleplay | 110.0 | 93.2 | 0.847 | 1.38 |" in (d / "ab_summary.md").read_text()
    assert out["ab"]["levels"][1]["categories"]["math"]["decode_speedup"] == pytest.approx(1.2)


def test_synthetic_warning_in_summary(capsys, tmp_path):
    recs = [dict(r, categories={}, dataset_name="random-ids", warnings=[SYNTHETIC_WARNING]) for r in ON]
    out = run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "s", "records": recs, "plots": False})
    md = (tmp_path / "h" / "s" / "summary.md").read_text()
    assert "**Warning:** " + SYNTHETIC_WARNING in md and "workload `random-ids`" in md
    assert "WARNING: " + SYNTHETIC_WARNING in out["markdown"]
    assert json.loads((tmp_path / "h" / "s" / "summary.json").read_text())["warnings"] == [SYNTHETIC_WARNING]
