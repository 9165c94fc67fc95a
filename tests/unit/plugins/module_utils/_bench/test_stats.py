"""Metric maths of bench_stats against values computed by hand (bench_serving 0.5.9 definitions)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import stats as bs
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult


def test_percentile_numpy_linear_by_hand():
    # numpy linear: position (n-1)*q/100 between order statistics
    assert bs.percentile([4, 1, 3, 2], 50) == pytest.approx(2.5)      # pos 1.5 -> 2 + .5*1
    assert bs.percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)     # pos 2.97 -> 3 + .97*1
    assert bs.percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)      # pos 2.7
    assert bs.percentile([10, 20, 30, 40, 50], 95) == pytest.approx(48.0)  # pos 3.8 -> 40 + .8*10
    assert bs.percentile([10, 20, 30, 40, 50], 0) == 10
    assert bs.percentile([10, 20, 30, 40, 50], 100) == 50
    assert bs.percentile([7.0], 99) == 7.0
    assert bs.percentile([], 99) == 0.0   # bench_serving: np.percentile(x or 0, q)


def test_percentile_rejects_bad_q():
    with pytest.raises(ValueError, match="within"):
        bs.percentile([1, 2], 101)


def test_std_is_population_std():
    # [2, 4, 4, 4, 5, 5, 7, 9]: mean 5, squared deviations sum 32, /8 = 4 -> 2 (ddof=0)
    assert bs.std([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(2.0)
    assert bs.std([]) == 0.0


def test_split_itl_over_multi_token_chunk():
    # a 30 ms gap before a chunk that carried 3 tokens -> three 10 ms samples
    assert bs.split_itl(0.030, 3) == pytest.approx([0.010, 0.010, 0.010])
    assert bs.split_itl(0.030, 0) == []


def test_tpot_excludes_first_token():
    assert bs.tpot(RequestResult(output_len=5, ttft=0.2, latency=1.0)) == pytest.approx(0.2)  # 0.8 / 4
    assert bs.tpot(RequestResult(output_len=1, ttft=0.2, latency=0.2)) is None


def _three_requests():
    # A: 6 tokens at 0.25, 0.5, 0.75, 1.0, 1.25, 1.5 s (start 0); B: starts at 0.5 s, tokens at
    # 1.0, 1.5, 1.75 s; C failed.
    a = RequestResult(prompt_len=100, output_len=6, success=True, start_time=0.0, ttft=0.25, latency=1.5,
                      itl=[0.25] * 5, spec_verify_ct=3)
    b = RequestResult(prompt_len=50, output_len=3, success=True, start_time=0.5, ttft=0.5, latency=1.25,
                      itl=[0.5, 0.25], spec_verify_ct=2)
    c = RequestResult(prompt_len=70, success=False, start_time=0.1, error="HTTP 500 from /generate: boom")
    return [a, b, c]


def test_level_metrics_hand_computed():
    m = bs.level_metrics(_three_requests(), 2.0)
    assert m["completed"] == 2
    assert m["failed"] == 1
    assert m["failed_fraction"] == pytest.approx(1 / 3)
    assert m["error_kinds"] == [{"error": "HTTP 500 from /generate: boom", "count": 1}]
    assert m["total_input_tokens"] == 150            # failed request's prompt not counted
    assert m["total_output_tokens"] == 9
    assert m["request_throughput"] == pytest.approx(1.0)
    assert m["input_throughput"] == pytest.approx(75.0)
    assert m["output_throughput"] == pytest.approx(4.5)
    assert m["total_throughput"] == pytest.approx(79.5)
    # TTFT [0.25, 0.5] s
    assert m["mean_ttft_ms"] == pytest.approx(375.0)
    assert m["median_ttft_ms"] == pytest.approx(375.0)
    assert m["std_ttft_ms"] == pytest.approx(125.0)
    assert m["p90_ttft_ms"] == pytest.approx(475.0)
    assert m["p99_ttft_ms"] == pytest.approx(497.5)
    # E2E [1.5, 1.25] s
    assert m["mean_e2e_latency_ms"] == pytest.approx(1375.0)
    assert m["p90_e2e_latency_ms"] == pytest.approx(1475.0)
    assert m["p99_e2e_latency_ms"] == pytest.approx(1497.5)
    # TPOT: A (1.5-0.25)/5 = 0.25, B (1.25-0.5)/2 = 0.375
    assert m["mean_tpot_ms"] == pytest.approx(312.5)
    assert m["median_tpot_ms"] == pytest.approx(312.5)
    assert m["p99_tpot_ms"] == pytest.approx(373.75)
    assert m["decode_tok_s_per_request"] == pytest.approx(3.2)   # 1000 / 312.5
    # ITL [0.25 x 6, 0.5]: mean 2/7 s, median 0.25, p95 pos 5.7 -> 0.425, p99 pos 5.94 -> 0.485
    assert m["mean_itl_ms"] == pytest.approx(2000.0 / 7)
    assert m["median_itl_ms"] == pytest.approx(250.0)
    assert m["p95_itl_ms"] == pytest.approx(425.0)
    assert m["p99_itl_ms"] == pytest.approx(485.0)
    assert m["max_itl_ms"] == pytest.approx(500.0)
    assert m["std_itl_ms"] == pytest.approx(87.4818, abs=1e-3)
    # concurrency = sum(e2e) / duration = 2.75 / 2
    assert m["concurrency"] == pytest.approx(1.375)
    # accept length = (6 + 3) tokens / (3 + 2) verify steps
    assert m["accept_length"] == pytest.approx(1.8)
    assert m["spec_verify_ct"] == 5
    # second 0 holds 3 tokens, second 1 holds A's 1.0/1.25/1.5 and B's 1.0/1.5/1.75 -> 6
    assert m["max_output_tokens_per_s"] == 6.0
    assert m["max_concurrent_requests"] == 2


def test_level_metrics_all_failed_gives_zeros_not_errors():
    m = bs.level_metrics([RequestResult(prompt_len=5, error="cannot connect")] * 2, 0.5)
    assert m["completed"] == 0
    assert m["failed"] == 2
    assert m["error_kinds"] == [{"error": "cannot connect", "count": 2}]
    assert m["output_throughput"] == 0.0
    assert m["mean_ttft_ms"] == 0.0
    assert m["accept_length"] is None
    assert m["max_concurrent_requests"] == 0


def test_errors_are_grouped_by_kind_ignoring_numbers():
    """A crash at concurrency 4: each stream died after a different number of tokens; one kind, 3 requests; the
    first message is kept as the example. A different kind stays separate, and the counts add up to failed."""
    errs = ["connection closed mid-stream after 412 tokens (server closed the connection)",
            "connection closed mid-stream after 415 tokens (server closed the connection)",
            "cannot connect to 127.0.0.1:30000: ConnectionRefusedError: [Errno 111] Connection refused",
            "connection closed mid-stream after 9 tokens (server closed the connection)"]
    m = bs.level_metrics([RequestResult(prompt_len=5, error=e) for e in errs], 1.0)
    assert m["error_kinds"] == [{"error": errs[0], "count": 3}, {"error": errs[2], "count": 1}]
    assert sum(e["count"] for e in m["error_kinds"]) == m["failed"] == 4


def test_level_metrics_rejects_zero_duration():
    with pytest.raises(ValueError, match="duration"):
        bs.level_metrics([], 0)


def test_accept_length_none_without_spec():
    r = RequestResult(output_len=10, success=True)
    assert bs.accept_length([r]) == (None, 0)


def test_bench_serving_key_names_present():
    m = bs.level_metrics(_three_requests(), 2.0)
    numeric = set(bs.BENCH_SERVING_KEYS) - {"tag", "backend", "dataset_name", "request_rate", "max_concurrency",
                                            "sharegpt_output_len", "random_input_len", "random_output_len",
                                            "random_range_ratio", "server_info"}
    assert numeric <= set(m)
