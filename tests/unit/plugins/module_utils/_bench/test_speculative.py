"""spec_stats: per-request speculative accounting and per-category statistics against hand-computed values."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import speculative as ss
from ansible_collections.llmops.sglang.plugins.module_utils._bench.client import Prompt
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult


def _r(ct, verify, ttft=0.1, latency=1.0, meta_extra=None, success=True):
    meta = {"completion_tokens": ct, "spec_verify_ct": verify}
    meta.update(meta_extra or {})
    return RequestResult(prompt_len=10, output_len=ct, success=success, ttft=ttft, latency=latency, final_meta=meta)


def test_request_spec_per_version_names():
    # 0.5.9: accepted/proposed from spec_accept_token_num / spec_draft_token_num
    s = ss.request_spec({"completion_tokens": 100, "spec_verify_ct": 40, "spec_accept_token_num": 59, "spec_draft_token_num": 120})
    assert s == {"completion_tokens": 100, "verify_ct": 40, "accepted": 59, "proposed": 120, "accept_length": 2.5,
                 "accept_rate": 59 / 120.0}
    # 0.5.23 names
    s = ss.request_spec({"completion_tokens": 30, "spec_verify_ct": 20, "spec_num_correct_drafts": 9, "spec_num_proposed_drafts": 20})
    assert (s["accepted"], s["proposed"], s["accept_length"], s["accept_rate"]) == (9, 20, 1.5, 0.45)
    # 0.5.14 aliases alone
    s = ss.request_spec({"completion_tokens": 30, "spec_verify_ct": 20, "spec_accepted_drafts": 8, "spec_proposed_drafts": 20})
    assert (s["accepted"], s["proposed"]) == (8, 20)
    # 0.5.4: no counts: accepted = 30 - 20 = 10, no rate
    s = ss.request_spec({"completion_tokens": 30, "spec_verify_ct": 20, "spec_accept_rate": 0.5})
    assert (s["accepted"], s["proposed"], s["accept_rate"]) == (10, None, None)
    assert ss.request_spec({"completion_tokens": 30}) is None and ss.request_spec(None) is None
    assert ss.request_spec({"completion_tokens": 30, "spec_verify_ct": 0}) is None


def test_group_stats_by_hand():
    # three completed requests: accept lengths 100/50 = 2.0, 60/40 = 1.5, 90/30 = 3.0; one failed request
    rs = [_r(100, 50, 0.1, 1.09, {"spec_accept_token_num": 49, "spec_draft_token_num": 50}),
          _r(60, 40, 0.2, 0.79, {"spec_accept_token_num": 19, "spec_draft_token_num": 40}),
          _r(90, 30, 0.1, 0.99, {"spec_accept_token_num": 59, "spec_draft_token_num": 60}),
          RequestResult(error="boom")]
    g = ss.group_stats(rs, 2.0)
    assert (g["requests"], g["completed"], g["failed"], g["spec_requests"]) == (4, 3, 1, 3)
    assert g["output_tokens"] == 250 and g["output_tok_s"] == pytest.approx(125.0)
    assert g["accept_length"] == pytest.approx(250 / 120.0)              # pooled: 250 tokens / 120 verify steps
    assert g["accept_length_mean"] == pytest.approx(6.5 / 3)             # (2.0 + 1.5 + 3.0) / 3
    # sorted 1.5, 2.0, 3.0: p10 at position 0.2 -> 1.5 + 0.2 * 0.5 = 1.6; p50 = 2.0; p90 at 1.8 -> 2.0 + 0.8 * 1.0 = 2.8
    assert (g["accept_length_p10"], g["accept_length_p50"], g["accept_length_p90"]) == pytest.approx((1.6, 2.0, 2.8))
    assert g["accept_rate"] == pytest.approx((49 + 19 + 59) / 150.0)
    # TPOTs: (1.09-0.1)/99 = 10 ms, (0.79-0.2)/59 = 10 ms, (0.99-0.1)/89 = 10 ms
    assert g["median_tpot_ms"] == pytest.approx(10.0) and g["decode_tok_s_per_request"] == pytest.approx(100.0)


def test_group_stats_without_speculation_and_bad_duration():
    r = RequestResult(prompt_len=1, output_len=11, success=True, ttft=0.0, latency=0.1, final_meta={"completion_tokens": 11})
    g = ss.group_stats([r], 1.0)
    assert g["accept_length"] is None and g["accept_rate"] is None and g["accept_length_p50"] is None
    with pytest.raises(ValueError):
        ss.group_stats([r], 0)


def test_by_category_pairs_prompts_and_results():
    prompts = [Prompt("a", 0, 10, category="math"), Prompt("b", 0, 10, category="roleplay"), Prompt("c", 0, 10, category="math")]
    rs = [_r(100, 50), _r(100, 80), _r(100, 25)]
    cats = ss.by_category(prompts, rs, 1.0)
    assert list(cats) == ["math", "roleplay"]
    assert cats["math"]["accept_length"] == pytest.approx(200 / 75.0) and cats["math"]["completed"] == 2
    assert cats["roleplay"]["accept_length"] == pytest.approx(1.25)
    assert ss.by_category([Prompt([1, 2], 2, 10)], [_r(10, 5)], 1.0) == {}


def test_histogram_bins():
    # accept lengths 1.0, 1.2, 1.25 (edge -> upper bin), 2.0
    rs = [_r(10, 10), _r(12, 10), _r(10, 8), _r(10, 5), RequestResult(error="x")]
    h = ss.accept_length_histogram(rs)
    assert h == [{"lo": 1.0, "hi": 1.25, "count": 2}, {"lo": 1.25, "hi": 1.5, "count": 1}, {"lo": 1.5, "hi": 1.75, "count": 0},
                 {"lo": 1.75, "hi": 2.0, "count": 0}, {"lo": 2.0, "hi": 2.25, "count": 1}]
    assert ss.accept_length_histogram([RequestResult(error="x")]) == []


_PAGE = """# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} %s
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="m"} %s
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m",tp_rank="0"} %s
"""


def test_server_accept_length_from_counters_then_gauge():
    # 0.5.14+: (5000 - 1000) generated tokens over (2600 - 1000) verify calls = 2.5 tokens per verify step
    before = _PAGE % (1000, 1000, 1.9)
    after = _PAGE % (5000, 2600, 2.2)
    assert ss.server_accept_length(before, after) == (pytest.approx(2.5), "server_counters")
    # 0.4.10-0.5.10: no spec_verify_calls_total; the gauge after the level (last interval), counters ignored
    no_counter = "\n".join(ln for ln in after.splitlines() if "spec_verify_calls" not in ln)
    assert ss.server_accept_length(before, no_counter) == (pytest.approx(2.2), "server_gauge")
    # counters that did not move (no finished request) fall back to the gauge; a zero gauge is no measurement
    assert ss.server_accept_length(after, after) == (pytest.approx(2.2), "server_gauge")
    assert ss.server_accept_length(before, _PAGE % (1000, 1000, 0)) == (None, None)
    # no /metrics (404 -> None), or a page without sglang spec metrics
    assert ss.server_accept_length(None, None) == (None, None)
    assert ss.server_accept_length("", "# nothing\n") == (None, None)


@pytest.mark.parametrize("tokens, bucket", [(0, "<2k"), (2047, "<2k"), (2048, "2k-8k"), (8191, "2k-8k"), (8192, "8k-16k"),
                                            (16383, "8k-16k"), (16384, ">16k"), (40000, ">16k")])
def test_input_bucket_edges(tokens, bucket):
    assert ss.input_bucket(tokens) == bucket


def test_by_input_length_by_hand():
    def r(prompt, ct, verify):
        res = _r(ct, verify)
        res.prompt_len = prompt
        return res
    # <2k: 100/25 = 4.0 and 60/20 = 3.0 -> pooled 160/45 = 3.5556, mean input (500 + 1500) / 2 = 1000
    # >16k: 100/80 = 1.25, input 20000; 2k-8k and 8k-16k hold nothing and are left out
    out = ss.by_input_length([r(500, 100, 25), r(1500, 60, 20), r(20000, 100, 80), RequestResult(prompt_len=30000, error="x")], 10.0)
    assert list(out) == ["<2k", ">16k"]
    assert out["<2k"]["accept_length"] == pytest.approx(160 / 45.0)
    assert out["<2k"]["input_tokens_mean"] == 1000.0 and out["<2k"]["completed"] == 2
    assert out[">16k"]["accept_length"] == pytest.approx(1.25)
    assert out[">16k"]["input_tokens_mean"] == 25000.0 and (out[">16k"]["completed"], out[">16k"]["failed"]) == (1, 1)
