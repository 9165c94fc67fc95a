"""Goodput under SLOs (vLLM --goodput semantics), bench_serving --output-details lists, and the exact output-file values."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._report import benchmark as br
from ansible_collections.llmops.sglang.plugins.module_utils._bench import stats as bs
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult


def results():
    # TPOT = (latency - ttft) / (out - 1)
    return [
        RequestResult(prompt_len=10, output_len=11, success=True, ttft=0.125, latency=1.125, itl=[0.1] * 10),   # 125 ms, 100 ms
        RequestResult(prompt_len=20, output_len=11, success=True, ttft=0.25, latency=1.25, itl=[0.1] * 10),     # 250 ms, 100 ms
        RequestResult(prompt_len=30, output_len=11, success=True, ttft=0.125, latency=2.125, itl=[0.2] * 10),   # 125 ms, 200 ms
        RequestResult(prompt_len=40, output_len=1, success=True, ttft=0.5, latency=0.5),                          # 500 ms, TPOT 0
        RequestResult(prompt_len=50, error="HTTP 500 from /generate: boom"),
    ]


@pytest.mark.parametrize("slo, good", [
    ({"ttft_ms": 200.0, "tpot_ms": 150.0}, 1),             # only request 1
    ({"ttft_ms": 250.0, "tpot_ms": 150.0}, 2),             # 250 ms meets a 250 ms SLO (<=)
    ({"ttft_ms": 250.0}, 3),                               # TPOT not checked: requests 1, 2, 3
    ({"tpot_ms": 150.0}, 3),                               # 1, 2 and the one-token request 4 (TPOT 0)
    ({"ttft_ms": 1000.0, "tpot_ms": 1000.0, "e2e_latency_ms": 1500.0}, 3),   # request 3's 2125 ms E2E misses
])
def test_goodput_by_hand(slo, good):
    m = bs.level_metrics(results(), 2.0, slo=slo)
    assert m["goodput_completed"] == good
    assert m["goodput"] == pytest.approx(good / 2.0)          # req/s over the 2.0 s run
    assert m["goodput_fraction"] == pytest.approx(good / 5.0)  # of all 5 requests, the failed one included
    assert m["slo"] == slo


def test_no_slo_no_goodput_and_bad_slo_refused():
    m = bs.level_metrics(results(), 2.0)
    assert m["goodput"] is None and m["goodput_completed"] is None and m["slo"] is None
    with pytest.raises(ValueError, match="unknown SLO 'ttft'"):
        bs.level_metrics(results(), 2.0, slo={"ttft": 5})
    with pytest.raises(ValueError, match="tpot_ms=0"):
        bs.normalize_slo({"tpot_ms": 0})


def test_cached_tokens_summed_from_meta_info():
    rs = results()
    rs[0].final_meta = {"cached_tokens": 512}
    rs[1].final_meta = {"cached_tokens": 0}
    rs[4].final_meta = {"cached_tokens": 99}     # failed: not counted
    assert bs.level_metrics(rs, 2.0)["cached_tokens"] == 512
    assert bs.level_metrics(results(), 2.0)["cached_tokens"] is None


def test_output_details_as_bench_serving_builds_them():
    rs = results()
    rs[0].generated_text = "hello"
    d = bs.output_details(rs)
    assert list(d) == ["input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"]
    assert d["input_lens"] == [10, 20, 30, 40, 50]
    assert d["output_lens"] == [11, 11, 11, 1]                  # completed requests only, as calculate_metrics appends
    assert d["ttfts"] == [0.125, 0.25, 0.125, 0.5, 0.0]
    assert d["itls"][2] == [0.2] * 10 and d["itls"][4] == []
    assert d["generated_texts"] == ["hello", "", "", "", ""]
    assert d["errors"] == ["", "", "", "", "HTTP 500 from /generate: boom"]


def test_output_file_values_are_bench_serving_s():
    rec = br.make_record(bs.level_metrics(results(), 2.0), {"backend": "sglang", "request_rate": None, "tag": None})
    line = br.jsonl_line(dict(rec, tag=""))
    # json.dumps(float("inf")) writes the bare literal Infinity; an empty tag is null (bench_serving's --tag default None)
    assert '"request_rate": Infinity' in line and '"tag": null' in line
    assert json.loads(line)["request_rate"] == float("inf")
    traced = json.loads(br.jsonl_line(dict(rec, arrival="trace")))
    assert traced["request_rate"] == "trace"
    assert br.level_key(traced) == ("request_rate", float("inf"))
    withd = json.loads(br.jsonl_line(rec, bs.output_details(results())))
    keys = list(withd)
    assert keys[-6:] == list(bs.DETAIL_KEYS) and keys[:len(bs.BENCH_SERVING_KEYS)] == list(bs.BENCH_SERVING_KEYS)
    assert isinstance(withd["error_kinds"], list) and withd["errors"][4] == "HTTP 500 from /generate: boom"
    assert br.jsonl_line(dict(rec, request_rate=4.0)).count('"request_rate": 4.0') == 1


def test_goodput_gates():
    rec = br.make_record(bs.level_metrics(results(), 2.0, slo={"ttft_ms": 200.0}), {"request_rate": None})
    rec["level"] = 1
    # 2 good requests (1 and 3) in 2.0 s = 1.0 req/s, fraction 0.4
    assert br.check_gates(rec, {"min_goodput": 1.0, "min_goodput_fraction": 0.4}) == []
    msgs = br.check_gates(rec, {"min_goodput": 1.5, "min_goodput_fraction": 0.5})
    assert len(msgs) == 2 and "goodput 1.00 req/s is below the gate 1.50 req/s" in msgs[0]
    assert "goodput_fraction 0.40 is below the gate 0.50" in msgs[1]
    bare = br.make_record(bs.level_metrics(results(), 2.0), {"request_rate": None})
    assert "measured without an SLO" in br.check_gates(bare, {"min_goodput": 0.1})[0]
