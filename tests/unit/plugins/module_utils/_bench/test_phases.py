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
                   "accept_length": 2.0}
    # phase 2: B, C and D started; A's last token + B's 3 = 4 tokens / 2 s; in flight 1.0 (B) + 0.5 (C) of 2 s;
    # TPOTs of B (1.0 - 0.2) / 2 = 0.4 s and D (0.2 - 0.1) / 1 = 0.1 s, median 0.25 s; accept 3 / 1 (D has no spec fields)
    assert two["requests"] == 3 and two["failed"] == 1 and two["output_throughput"] == 2.0
    assert two["mean_in_flight"] == 0.75
    assert two["tpot_p50_ms"] == pytest.approx(250.0) and two["accept_length"] == 3.0
