"""Accept length by input length in the report: rows, Markdown, the long-context warnings of a single run and of an A/B
(values computed by hand from the records below)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._report import benchmark as br


def _b(acc, decode, tokens):
    return {"completed": 4, "accept_length": acc, "accept_length_mean": acc, "accept_length_p10": acc, "accept_length_p50": acc,
            "accept_length_p90": acc, "accept_rate": None, "output_tok_s": 10.0, "decode_tok_s_per_request": decode,
            "median_tpot_ms": 1000.0 / decode, "input_tokens_mean": tokens}


def _rec(level, conc, out_tps, accept, buckets):
    return {"level": level, "max_concurrency": conc, "request_rate": None, "completed": 8, "dataset_name": "long.jsonl",
            "output_throughput": out_tps, "decode_tok_s_per_request": 100.0, "accept_length": accept,
            "input_length_buckets": buckets, "warnings": []}


# the candidate: 3.10 on short prompts, 1.09 on >16k ones (the EAGLE3 Qwen3-8B shape at 16k)
OFF = [_rec(1, 4, 400.0, None, {"<2k": _b(None, 100.0, 900), ">16k": _b(None, 80.0, 18000)})]
ON = [_rec(1, 4, 520.0, 2.5, {"<2k": _b(3.10, 150.0, 900), ">16k": _b(1.09, 72.0, 18000)})]


def test_rows_keep_the_bucket_order_and_markdown():
    rows = br.input_bucket_rows(ON)
    assert [(r["bucket"], r["input_tokens_mean"], r["accept_length"]) for r in rows] == [("<2k", 900, 3.10), (">16k", 18000, 1.09)]
    md = br.input_bucket_markdown(ON)
    assert "| 1 | 4 | >16k | 18000 | 4 | 1.09 | 1.09 | 1.09 | 1.09 | 72.0 |" in md
    assert br.input_bucket_markdown(OFF) == ""          # no accept length anywhere: speculation off


def test_single_run_warns_when_long_prompts_accept_below_1_3():
    (w,) = br.input_bucket_warnings(ON)
    assert "accept length 3.10 on <2k-token prompts but 1.09 on >16k" in w
    # 1.35 on long prompts is above the limit; a run that is low everywhere is not a short/long difference
    assert br.input_bucket_warnings([_rec(1, 4, 1, 2, {"<2k": _b(3.1, 1, 1), ">16k": _b(1.35, 1, 1)})]) == []
    assert br.input_bucket_warnings([_rec(1, 4, 1, 2, {"<2k": _b(1.1, 1, 1), ">16k": _b(1.05, 1, 1)})]) == []


def test_ab_decision_that_fails_on_long_prompts_says_so():
    ab = br.compare(OFF, ON, target=4)
    lv = ab["levels"][0]
    assert lv["speedup"] == pytest.approx(1.3) and lv["winner"] == "mtp_on"
    assert lv["input_buckets"][">16k"]["decode_speedup"] == pytest.approx(72.0 / 80.0)     # 0.9: slower on long prompts
    assert list(lv["input_buckets"]) == ["<2k", ">16k"]
    (w,) = ab["warnings"]
    assert "mtp_on wins overall, but not on long prompts (>16k-token prompts: decode speedup 0.900, accept length 1.09)" in w
    assert ab["decision"]["winner"] == "mtp_on" and "WARNING: at max_concurrency 4 mtp_on wins overall" in ab["decision"]["reason"]
    # the same runs without the long bucket: no warning
    short_off = [dict(r, input_length_buckets={"<2k": r["input_length_buckets"]["<2k"]}) for r in OFF]
    short_on = [dict(r, input_length_buckets={"<2k": r["input_length_buckets"]["<2k"]}) for r in ON]
    assert br.compare(short_off, short_on, target=4)["warnings"] == []
