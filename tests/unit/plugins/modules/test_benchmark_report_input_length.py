"""benchmark_report with per-input-length blocks: summary.json rows and warnings, summary.md table, the PNG, and the A/B
warning in ab_summary.md (values set by hand in the records below)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.modules import benchmark_report

from ansible.module_utils.testing import patch_module_args


def run(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            benchmark_report.main()
    return json.loads(capsys.readouterr().out)


def _b(acc, decode, tokens):
    return {"completed": 2, "accept_length": acc, "accept_length_mean": acc, "accept_length_p10": acc, "accept_length_p50": acc,
            "accept_length_p90": acc, "accept_rate": None, "output_tok_s": 10.0, "decode_tok_s_per_request": decode,
            "median_tpot_ms": 1000.0 / decode, "input_tokens_mean": tokens}


def _rec(out_tps, accept, buckets):
    return {"level": 1, "max_concurrency": 1, "request_rate": None, "backend": "sglang", "completed": 4, "failed": 0,
            "dataset_name": "long.jsonl", "output_throughput": out_tps, "decode_tok_s_per_request": 100.0, "median_tpot_ms": 10.0,
            "p90_tpot_ms": 10.0, "p99_tpot_ms": 10.0, "median_ttft_ms": 40.0, "p90_ttft_ms": 50.0, "p99_ttft_ms": 60.0,
            "accept_length": accept, "errors": [], "random_input_len": 1000, "random_output_len": 400, "categories": {},
            "input_length_buckets": buckets, "warnings": []}


OFF = [_rec(100.0, None, {"<2k": _b(None, 110.0, 995), ">16k": _b(None, 75.0, 19445)})]
ON = [_rec(120.0, 1.44, {"<2k": _b(2.00, 134.7, 995), ">16k": _b(1.05, 70.5, 19445)})]


def test_report_files_with_input_length_buckets(capsys, tmp_path):
    out = run(capsys, {"dest": str(tmp_path), "host": "h", "run_id": "ab", "records": ON, "baseline_records": OFF,
                       "target_concurrency": 1})
    assert not out.get("failed"), out.get("msg")
    d = tmp_path / "h" / "ab"
    assert (d / "accept_length_by_input_length.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((d / "summary.json").read_text())
    assert [(r["bucket"], r["accept_length"]) for r in summary["input_length_buckets"]] == [("<2k", 2.0), (">16k", 1.05)]
    (w,) = summary["input_length_warnings"]
    assert "accept length 2.00 on <2k-token prompts but 1.05 on >16k" in w
    md = (d / "summary.md").read_text()
    assert "## Accept length by input length" in md and "| 1 | 1 | >16k | 19445 | 2 | 1.05 |" in md
    # the A/B: mtp_on wins overall (120 / 100 = 1.2) but decodes 70.5 / 75 = 0.940 per request on >16k prompts
    ab_md = (d / "ab_summary.md").read_text()
    assert "mtp_on wins overall, but not on long prompts (>16k-token prompts: decode speedup 0.940, accept length 1.05)" in ab_md
    assert out["ab"]["decision"]["winner"] == "mtp_on" and "not on long prompts" in out["ab"]["decision"]["reason"]
