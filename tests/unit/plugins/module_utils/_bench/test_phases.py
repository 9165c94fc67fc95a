"""phases: the moving load's phases, a profile from a histogram, and per-phase metrics, all worked out by hand."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import phases as bp
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult


def test_check_phases_normalizes_and_refuses_with_the_phase_named():
    assert bp.check_phases([{"concurrency": 8.0, "duration_s": 30}]) == [{"concurrency": 8, "duration_s": 30.0}]
    for bad, fragment in [
        ([], "give a list of phases"),
        ([5], "phases[0]=5: a phase is a dict"),
        ([{"concurrency": 0, "duration_s": 1}], "phases[0].concurrency=0: must be a whole number"),
        ([{"concurrency": 1, "duration_s": 1}, {"concurrency": 2.5, "duration_s": 1}], "phases[1].concurrency=2.5"),
        ([{"concurrency": 1, "duration_s": 0}], "phases[0].duration_s=0: must be a number of seconds > 0"),
        ([{"concurrency": 1, "duration_s": float("inf")}], "phases[0].duration_s=inf"),
        ([{"concurrency": 1, "duration_s": 1, "rate": 3}], "phases[0]: unknown key(s) rate"),
    ]:
        with pytest.raises(bp.PhaseError) as exc:
            bp.check_phases(bad)
        assert fragment in str(exc.value)


def test_boundaries_and_phase_at():
    phases = [{"concurrency": 1, "duration_s": 2.0}, {"concurrency": 8, "duration_s": 3.0}]
    bounds = bp.boundaries(phases)
    assert bounds == [0.0, 2.0, 5.0]
    assert [bp.phase_at(bounds, t) for t in (-1, 0, 1.99, 2.0, 4.9, 5.0, 9)] == [0, 0, 0, 1, 1, 1, 1]


def test_profile_from_histogram_by_hand():
    # rise-fall over 1, 8, 32: 1 8 32 8 1; a value that appears twice splits its weight (1: 0.25 each, 8: 0.15 each,
    # 32: 0.2); 60 s - 5 x 5 s minimum = 35 s shared by weight (total 1.0): 1 -> 5 + 8.75, 8 -> 5 + 5.25, 32 -> 5 + 7
    got = bp.profile_from_histogram({0: 0.9, 1: 0.5, 8: 0.3, 32: 0.2}, total_s=60, min_dwell_s=5)
    assert got == [{"concurrency": 1, "duration_s": 13.75}, {"concurrency": 8, "duration_s": 10.25},
                   {"concurrency": 32, "duration_s": 12.0}, {"concurrency": 8, "duration_s": 10.25},
                   {"concurrency": 1, "duration_s": 13.75}]
    assert [p["concurrency"] for p in bp.profile_from_histogram({64: 1, 1: 1, 8: 1, 32: 1}, 70)] == [1, 8, 32, 64, 32, 8, 1]
    assert [p["concurrency"] for p in bp.profile_from_histogram({1: 1, 8: 1}, 20, order="ascending")] == [1, 8]
    with pytest.raises(bp.PhaseError, match="3 phases of at least 5.0 s need 15.0 s"):
        bp.profile_from_histogram({1: 1, 8: 1}, 10)
    with pytest.raises(bp.PhaseError, match="no concurrency >= 1 with a weight > 0"):
        bp.profile_from_histogram({0: 1}, 10)


def test_phase_metrics_by_hand():
    phases = [{"concurrency": 1, "duration_s": 2.0}, {"concurrency": 2, "duration_s": 2.0}]
    # A: 100.0-102.0, tokens at 100.5, 101.0, 101.5, 102.0 (3 in phase 1, 1 in phase 2), 2 verify steps
    a = RequestResult(prompt_len=10, output_len=4, success=True, start_time=100.0, ttft=0.5, latency=2.0,
                      itl=[0.5, 0.5, 0.5], spec_verify_ct=2)
    # B: 102.0-103.0, tokens at 102.2, 102.6, 103.0 (phase 2), 1 verify step; C: failed at 102.5 after 0.5 s
    b = RequestResult(prompt_len=10, output_len=3, success=True, start_time=102.0, ttft=0.2, latency=1.0,
                      itl=[0.4, 0.4], spec_verify_ct=1)
    c = RequestResult(prompt_len=10, success=False, start_time=102.5, latency=0.5, error="HTTP 500")
    # D: started 0.001 s after the end (the client let it go just before): counted in the last phase, no token inside
    d = RequestResult(prompt_len=10, output_len=2, success=True, start_time=104.001, ttft=0.1, latency=0.2, itl=[0.1])
    one, two = bp.phase_metrics([a, b, c, d], phases, start=100.0)
    # phase 1: A only; 3 tokens / 2 s; in flight 2 s of 2; TPOT (2.0 - 0.5) / 3 = 0.5 s; accept 4 / 2
    assert one == {"phase": 1, "concurrency": 1, "duration_s": 2.0, "start_s": 0.0, "end_s": 2.0, "requests": 1, "failed": 0,
                   "output_throughput": 1.5, "mean_in_flight": 1.0, "tpot_p50_ms": 500.0, "decode_tok_s_per_req": 2.0,
                   "accept_length": 2.0, "settle_s": 0.0, "settled_throughput": 1.5}
    # phase 2: B, C and D started; A's last token + B's 3 = 4 tokens / 2 s; in flight 1.0 (B) + 0.5 (C) of 2 s;
    # TPOTs of B (1.0 - 0.2) / 2 = 0.4 s and D (0.2 - 0.1) / 1 = 0.1 s, median 0.25 s; accept 3 / 1 (D has no spec fields)
    assert two["requests"] == 3 and two["failed"] == 1 and two["output_throughput"] == 2.0
    assert two["mean_in_flight"] == 0.75
    assert two["tpot_p50_ms"] == pytest.approx(250.0) and two["accept_length"] == 3.0
    # a rise (cap 1 -> 2): A ended at 102.0, so nothing is in flight at the boundary: no drain, the settled window is
    # the whole phase
    assert two["settle_s"] == 0.0 and two["settled_throughput"] == 2.0


def test_phase_metrics_settle_after_a_fall_by_hand():
    phases = [{"concurrency": 3, "duration_s": 2.0}, {"concurrency": 1, "duration_s": 4.0}]
    # phase 1 (cap 3) from 100.0: A, B, C start at once; C ends at 101.0 and D replaces it
    # A: 100.0-102.5, tokens 100.5, 101.0, 101.5, 102.0, 102.5
    a = RequestResult(prompt_len=10, output_len=5, success=True, start_time=100.0, ttft=0.5, latency=2.5, itl=[0.5] * 4)
    # B: 100.0-103.0, tokens 101.0, 102.0, 103.0
    b = RequestResult(prompt_len=10, output_len=3, success=True, start_time=100.0, ttft=1.0, latency=3.0, itl=[1.0, 1.0])
    # C: 100.0-101.0, tokens 100.5, 101.0
    c = RequestResult(prompt_len=10, output_len=2, success=True, start_time=100.0, ttft=0.5, latency=1.0, itl=[0.5])
    # D: 101.0-102.5, tokens 101.5, 102.0, 102.5
    d = RequestResult(prompt_len=10, output_len=3, success=True, start_time=101.0, ttft=0.5, latency=1.5, itl=[0.5, 0.5])
    # phase 2 (cap 1) from 102.0: A, B, D in flight (3 > 1); A and D end at 102.5 -> 1 in flight (B): settled after
    # 0.5 s; B ends at 103.0 and E starts, then F after E
    # E: 103.0-105.0, tokens 103.5, 104.0, 104.5, 105.0; F: 105.0-107.0, tokens 105.5, 106.5 (past the end)
    e = RequestResult(prompt_len=10, output_len=4, success=True, start_time=103.0, ttft=0.5, latency=2.0, itl=[0.5] * 3)
    f = RequestResult(prompt_len=10, output_len=2, success=True, start_time=105.0, ttft=0.5, latency=2.0, itl=[1.0])
    one, two = bp.phase_metrics([a, b, c, d, e, f], phases, start=100.0)
    # phase 1: 3 in flight at its start = the cap: no drain; tokens in [100, 102): A 3, B 1, C 2, D 1 = 7 / 2 s
    assert one["settle_s"] == 0.0
    assert one["output_throughput"] == 3.5 and one["settled_throughput"] == 3.5
    # phase 2 window [102, 106): A 2, B 2, D 2, E 4, F 1 = 11 tokens / 4 s = 2.75;
    # settled window [102.5, 106) (a token at 102.5 counts): A 1, B 1, D 1, E 4, F 1 = 8 tokens / 3.5 s
    assert two["settle_s"] == 0.5
    assert two["output_throughput"] == 2.75
    assert two["settled_throughput"] == pytest.approx(8 / 3.5)


def test_phase_metrics_drain_longer_than_the_phase():
    phases = [{"concurrency": 2, "duration_s": 1.0}, {"concurrency": 1, "duration_s": 1.0}]
    # A and B: 100.0-103.0, tokens 100.5, 101.5, 102.5, 103.0: both still in flight at 102.0, the end of phase 2
    a = RequestResult(prompt_len=10, output_len=4, success=True, start_time=100.0, ttft=0.5, latency=3.0, itl=[1.0, 1.0, 0.5])
    b = RequestResult(prompt_len=10, output_len=4, success=True, start_time=100.0, ttft=0.5, latency=3.0, itl=[1.0, 1.0, 0.5])
    one, two = bp.phase_metrics([a, b], phases, start=100.0)
    assert one["settle_s"] == 0.0 and one["settled_throughput"] == 2.0      # 2 tokens (100.5, A and B) / 1 s
    # phase 2: 2 in flight > cap 1 the whole second: settle = the duration, no settled window; the window still has
    # 2 tokens (101.5, A and B) / 1 s
    assert two["settle_s"] == 1.0 and two["settled_throughput"] is None
    assert two["output_throughput"] == 2.0


def test_settle_time_counts_failed_requests_and_new_starts():
    # cap 1 from 10.0: X (failed, 9.0-11.0) and Y (9.5-12.0) in flight; X ends at 11.0 -> 1 in flight: settle 1.0
    x = RequestResult(prompt_len=10, success=False, start_time=9.0, latency=2.0, error="HTTP 500")
    y = RequestResult(prompt_len=10, output_len=2, success=True, start_time=9.5, ttft=0.5, latency=2.5, itl=[2.0])
    assert bp.settle_time([x, y], 10.0, 20.0, 1) == 1.0
    # a request that started at 10.5 (count 3) pushes the drop to 1 to Y's end at 12.0; one never sent is left out
    z = RequestResult(prompt_len=10, output_len=2, success=True, start_time=10.5, ttft=0.5, latency=5.0, itl=[1.0])
    never = RequestResult(prompt_len=10)
    assert bp.settle_time([x, y, z, never], 10.0, 20.0, 1) == 2.0
    assert bp.settle_time([x, y, z], 10.0, 11.5, 1) == 1.5     # not before the window's end: its length
    assert bp.settle_time([x, y], 10.0, 20.0, 2) == 0.0
