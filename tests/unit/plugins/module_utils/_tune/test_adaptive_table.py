"""Table mode of the tuner: SGLang's adaptive table from static step counts, against tables worked out by hand.

The 95 % intervals are Welch t on the log of the ratio of means (decision.ratio_interval); the arithmetic is in the
comments, t(0.975, 3) = 3.182 and t(0.975, 4) = 2.776 from any t table.
"""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._tune import adaptive_table as at
from ansible_collections.llmops.sglang.plugins.module_utils._tune import decision as sd
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import adaptive


def rec(conc, tput, tpot=10.0, failed=0):
    return {"max_concurrency": conc, "output_throughput": tput, "median_tpot_ms": tpot, "failed": failed}


OFF, S1, S2, S3 = at.step_arms("NEXTN", (0, 1, 2, 3))[:4]


def trials(per_bucket):
    """per_bucket: {bucket: [value of trial 1, trial 2, trial 3]} -> three trials of records."""
    n = len(next(iter(per_bucket.values())))
    return [[rec(b, vals[i]) for b, vals in sorted(per_bucket.items())] for i in range(n)]


# bucket 1:  off [50, 55, 60] mean 55 sd 5; 1 step [95, 100, 105] mean 100 sd 5; 3 steps [100, 110, 120] mean 110 sd 10
# bucket 32: off [1000] x3; 1 step [1100] x3; 3 steps [900] x3 (no spread)
RESULTS = [
    {"arm": OFF, "trials": trials({1: [50, 55, 60], 32: [1000, 1000, 1000]})},
    {"arm": S1, "trials": trials({1: [95, 100, 105], 32: [1100, 1100, 1100]})},
    {"arm": S3, "trials": trials({1: [100, 110, 120], 32: [900, 900, 900]})},
]


def test_bucket_table_by_hand():
    out = at.bucket_table(RESULTS, [32, 1])
    # bucket 1: best = 3 steps (mean 110).
    #  3 over 1 step: R = 110/100 = 1.1; v3 = 10^2/(3*110^2) = 0.0027548, v1 = 5^2/(3*100^2) = 0.00083333,
    #   var = 0.0035882, se = 0.059901, df = var^2/(v3^2/2 + v1^2/2) = 3.11 -> t 3.182; half = 0.19061;
    #   interval 1.1*exp(-/+0.19061) = [0.9091, 1.3310]: reaches 1 -> 1 step is a candidate.
    #  3 over off: R = 110/55 = 2.0; v3 = 0.0027548, voff = 5^2/(3*55^2) = 0.0027548, var = 0.0055096, se = 0.074227,
    #   df = 4 -> t 2.776; half = 0.20605; [2*0.81381, 2*1.22880] = [1.6276, 2.4576]: clear of 1 -> off is out.
    # bucket 32: best = 1 step (1100); off 1100/1000 = 1.1 and 3 steps 1100/900 = 1.2222, no spread: the intervals are
    #   the points, clear of 1 -> only 1 step.
    # keys: 1, and for level 32 the geometric midpoint sqrt(1 x 32) = 5.66 -> 6
    assert out["table"] == {"1": {"candidate_steps": [1, 3]}, "6": {"candidate_steps": [1]}}
    assert list(out["table"]) == ["1", "6"]
    b1, b32 = out["buckets"]
    assert (b1["bucket"], b1["best"], b1["candidate_steps"]) == (1, 3, [1, 3])
    rows = dict((r["steps"], r) for r in b1["steps"])
    assert rows[1]["vs_best"]["speedup"] == pytest.approx(1.1)
    assert rows[1]["vs_best"]["low"] == pytest.approx(0.9091, abs=5e-4)
    assert rows[1]["vs_best"]["high"] == pytest.approx(1.3310, abs=5e-4)
    assert rows[0]["vs_best"]["low"] == pytest.approx(1.6276, abs=5e-4)
    assert [rows[s]["candidate"] for s in (0, 1, 3)] == [False, True, True]
    # speedup over off: 3 steps 110/55 = 2.0 [1.6276, 2.4576]; 1 step 100/55 = 1.8182; off itself 1.0
    assert rows[3]["vs_off"]["speedup"] == pytest.approx(2.0)
    assert (rows[3]["vs_off"]["low"], rows[3]["vs_off"]["high"]) == (pytest.approx(1.6276, abs=5e-4), pytest.approx(2.4576, abs=5e-4))
    assert rows[1]["vs_off"]["speedup"] == pytest.approx(1.8182, abs=1e-4)
    assert rows[0]["vs_off"]["speedup"] == pytest.approx(1.0)
    assert rows[3]["mean"] == pytest.approx(110.0) and rows[3]["n"] == 3 and rows[3]["arm"] == "NEXTN-s3-k1-d4"
    assert (b32["best"], b32["candidate_steps"]) == (1, [1])
    r32 = dict((r["steps"], r) for r in b32["steps"])
    assert (r32[0]["vs_best"]["low"], r32[3]["vs_best"]["low"]) == (pytest.approx(1.1), pytest.approx(1100 / 900.0))
    assert out["problems"] == [] and out["unit"] == "tok/s" and out["higher_is_better"] is True
    # SGLang's loader accepts it as it is (the controller's renderer checks the same way)
    assert adaptive.validate_table(out["table"]) == out["table"]


def test_a_tie_goes_to_fewer_steps_and_counts_above_the_best_are_no_candidates():
    # bucket 8: 1 step and 2 steps both [200, 200, 200]: best = 1 step (tie -> fewer steps); 2 steps is not worse, but
    # above the best: SGLang's EMA would run it whenever acceptance allows -> no candidate; off 150 is worse -> no candidate
    res = [{"arm": S1, "trials": trials({8: [200, 200, 200]})}, {"arm": S2, "trials": trials({8: [200, 200, 200]})},
           {"arm": OFF, "trials": trials({8: [150, 150, 150]})}]
    out = at.bucket_table(res, [8])
    assert out["buckets"][0]["best"] == 1
    assert out["table"] == {"8": {"candidate_steps": [1]}}
    # 3 steps best [210, 220, 230] (mean 220, s 10), 2 steps [205, 215, 225] (mean 215, s 10), 1 step [190, 200, 210]:
    # 2 steps (below the best): R = 220/215 = 1.0233, v = 100/(3*220^2) + 100/(3*215^2) = 0.00068871 + 0.00072111 =
    # 0.00140982, se 0.037547, Welch df 3.998 (the t table takes the whole df below: 3, t 3.182) -> low
    # 1.0233 * exp(-0.11948) = 0.9080 <= 1 -> candidate; 1 step: R = 1.1, v = 0.00068871 + 100/(3*200^2) = 0.00152204,
    # se 0.039013, df 3.964 -> 3, low 1.1 * exp(-0.12414) = 0.9716 -> candidate
    res = [{"arm": S1, "trials": trials({8: [190, 200, 210]})}, {"arm": S2, "trials": trials({8: [205, 215, 225]})},
           {"arm": S3, "trials": trials({8: [210, 220, 230]})}]
    out = at.bucket_table(res, [8])
    assert out["table"] == {"8": {"candidate_steps": [1, 2, 3]}}
    rows = dict((r["steps"], r) for r in out["buckets"][0]["steps"])
    assert rows[2]["vs_best"]["low"] == pytest.approx(0.9080, abs=2e-4)
    assert rows[1]["vs_best"]["low"] == pytest.approx(0.9716, abs=2e-4)


def test_tpot_lower_is_better():
    # median TPOT (ms): off 20, 1 step 10, 3 steps 12.5, each three equal trials: best = 1 step; off 20/10 = 2.0 and
    # 3 steps 12.5/10 = 1.25 worse, with no spread -> only 1 step
    def t(v):
        return [[{"max_concurrency": 4, "output_throughput": 1.0, "median_tpot_ms": v}] for trial in range(3)]
    out = at.bucket_table([{"arm": OFF, "trials": t(20.0)}, {"arm": S1, "trials": t(10.0)}, {"arm": S3, "trials": t(12.5)}],
                          [4], "tpot")
    assert out["table"] == {"4": {"candidate_steps": [1]}}
    rows = dict((r["steps"], r) for r in out["buckets"][0]["steps"])
    assert rows[1]["vs_off"]["speedup"] == pytest.approx(2.0)
    assert rows[3]["vs_best"]["speedup"] == pytest.approx(1.25)
    assert out["unit"] == "ms" and out["higher_is_better"] is False


def test_one_trial_on_both_sides_keeps_the_count_and_says_so():
    # 1 step 100 (one trial) vs 3 steps 110 (one trial): no interval at all -> 1 step stays, with a problem line
    res = [{"arm": S1, "trials": [[rec(1, 100)]]}, {"arm": S3, "trials": [[rec(1, 110)]]}]
    out = at.bucket_table(res, [1])
    assert out["table"] == {"1": {"candidate_steps": [1, 3]}}
    assert out["problems"] == ["bucket 1: 1 steps kept as a candidate without an interval (one trial)"]


def test_one_trial_against_three_uses_the_pooled_spread():
    # 1 step: one trial of 100 (eliminated after its first trial). 3 steps: [110, 120, 130], mean 120, s 10,
    # s/m = 1/12; pooled on the log scale, df 2, t 4.302653: half = 4.302653 * (1/12) * sqrt(1 + 1/3) = 0.41403;
    # best/1 step = 1.2, low = 1.2 * exp(-0.41403) = 0.7932 <= 1 -> 1 step stays a candidate
    res = [{"arm": S1, "trials": [[rec(1, 100)]]}, {"arm": S3, "trials": [[rec(1, 110)], [rec(1, 120)], [rec(1, 130)]]}]
    out = at.bucket_table(res, [1])
    assert out["table"] == {"1": {"candidate_steps": [1, 3]}}
    row = out["buckets"][0]["steps"][0]
    assert row["vs_best"]["low"] == pytest.approx(0.7932, abs=1e-4) and row["vs_best"]["df"] == 2.0
    assert out["problems"] == []
    # 3 steps [119, 120, 121]: s/m = 1/120, half = 0.041403, low = 1.2 * exp(-0.041403) = 1.1513 > 1 -> 1 step is out
    res[1]["trials"] = [[rec(1, 119)], [rec(1, 120)], [rec(1, 121)]]
    out = at.bucket_table(res, [1])
    assert out["table"] == {"1": {"candidate_steps": [3]}}
    assert out["buckets"][0]["steps"][0]["vs_best"]["low"] == pytest.approx(1.1513, abs=1e-4)


def test_failed_level_is_left_out_of_that_bucket():
    # off failed at 32 in every trial: bucket 32 has only 1 step; vs_off is None there
    res = [{"arm": OFF, "trials": [[rec(1, 50), rec(32, 900, failed=2)]] * 2},
           {"arm": S1, "trials": [[rec(1, 80), rec(32, 1000)]] * 2}]
    out = at.bucket_table(res, [1, 32])
    assert out["table"] == {"1": {"candidate_steps": [1]}, "6": {"candidate_steps": [1]}}
    assert out["buckets"][1]["steps"][0]["vs_off"] is None
    assert out["problems"] == ["bucket 32: 0 steps (off) has no usable trial at concurrency 32"]


def test_step_arms():
    arms = at.step_arms("eagle3", (3, 0, 7))
    assert [a["key"] for a in arms] == ["off", "EAGLE3-s3-k1-d4", "EAGLE3-s7-k1-d8"]
    assert [at.arm_steps(a) for a in arms] == [0, 3, 7]
    assert [a["key"] for a in at.step_arms()] == ["off", "NEXTN-s1-k1-d2", "NEXTN-s2-k1-d3", "NEXTN-s3-k1-d4",
                                                  "NEXTN-s5-k1-d6", "NEXTN-s7-k1-d8"]


@pytest.mark.parametrize("algorithm, steps, words", [
    ("STANDALONE", (0, 1), "speculative_tuning_default_algorithm='STANDALONE'"),
    ("NEXTN", (), "none given"),
    ("NEXTN", (0, -1), "step count -1"),
    ("NEXTN", (1, 1), "repeated"),
])
def test_step_arms_refuses(algorithm, steps, words):
    with pytest.raises(sd.SpecDecisionError, match=words):
        at.step_arms(algorithm, steps)


@pytest.mark.parametrize("arm, words", [
    ({"speculative_algorithm": "NEXTN", "speculative_num_steps": 2, "speculative_eagle_topk": 4}, "topk 4"),
    ({"speculative_algorithm": "NEXTN", "speculative_num_steps": 2, "speculative_num_draft_tokens": 8}, "steps \\+ 1 = 3"),
    ({"speculative_algorithm": "STANDALONE", "speculative_num_steps": 2}, "speculative_algorithm STANDALONE"),
    ({"speculative_algorithm": "EAGLE"}, "no speculative_num_steps"),
])
def test_arm_steps_refuses(arm, words):
    with pytest.raises(sd.SpecDecisionError, match=words):
        at.arm_steps(sd.normalize_arm(arm))


def test_bucket_table_refuses():
    with pytest.raises(sd.SpecDecisionError, match="no bucket"):
        at.bucket_table(RESULTS, [])
    with pytest.raises(sd.SpecDecisionError, match="bucket 0: must be an int >= 1"):
        at.bucket_table(RESULTS, [0])
    with pytest.raises(sd.SpecDecisionError, match="bucket 8: no step count has a usable trial"):
        at.bucket_table(RESULTS, [1, 8])
    with pytest.raises(sd.SpecDecisionError, match="both have 1 steps"):
        at.bucket_table(RESULTS + [{"arm": sd.normalize_arm({"algorithm": "NEXTN", "num_steps": 1}), "trials": []}], [1])
    with pytest.raises(sd.SpecDecisionError, match="objective='speed'"):
        at.bucket_table(RESULTS, [1], "speed")


def test_adaptive_server_vars():
    table = {"1": {"candidate_steps": [3, 5]}, "32": {"candidate_steps": [0, 1]}}
    # the largest candidate 5 starts the server: draft tokens 5 + 1 = 6, topk 1
    assert at.adaptive_server_vars(table, "eagle") == {
        "sglang_server_speculative_algorithm": "EAGLE", "sglang_server_speculative_num_steps": 5,
        "sglang_server_speculative_eagle_topk": 1, "sglang_server_speculative_num_draft_tokens": 6,
        "sglang_server_speculative_draft_model_path": None, "sglang_server_speculative_adaptive": True,
        "sglang_server_speculative_adaptive_config": table}
    assert at.adaptive_server_vars({"1": {"candidate_steps": [0]}, "8": {"candidate_steps": [0]}}, "NEXTN") is None


def test_table_keys_are_geometric_midpoints():
    # sqrt(1 * 8) = 2.83 -> 3; sqrt(8 * 32) = 16; sqrt(32 * 64) = 45.25 -> 45
    assert at.table_keys([1, 8, 32, 64]) == [1, 3, 16, 45]
    # sqrt(1 * 2) = 1.41 -> 1, but keys ascend: 2; sqrt(2 * 3) = 2.45 -> 2 -> 3; sqrt(3 * 100) = 17.3 -> 17
    assert at.table_keys([1, 2, 3, 100]) == [1, 2, 3, 17]
    assert at.table_keys([4]) == [4]
    out = at.bucket_table([{"arm": OFF, "trials": [[rec(1, 50), rec(8, 300), rec(32, 900), rec(64, 1500)]]}], [1, 8, 32, 64])
    assert sorted(out["table"], key=int) == ["1", "3", "16", "45"]
    assert [(b["bucket"], b["key"]) for b in out["buckets"]] == [(1, 1), (8, 3), (32, 16), (64, 45)]


def test_a_smaller_count_the_ema_would_settle_on_is_no_candidate():
    # bucket 1: 3 steps best [210, 220, 230], 2 steps [205, 215, 225], 1 step [190, 200, 210]: both not significantly worse
    # (intervals by hand in the test above). SGLang moves from 3 down to 2 when the EMA of accepted drafts <= 2 - 0.5 - 0.25
    # = 1.25, down to 1 when <= 1 - 0.5 - 0.25 = 0.25. 3 steps measured accept length 2.2 -> 1.2 accepted drafts:
    # 1.2 <= 1.25, so the EMA would settle on 2 -> 2 steps is no candidate; 1 stays (0.25 < 1.2) -> [1, 3]
    def arm(a, vals, accept=None):
        return {"arm": a, "trials": [[dict(rec(1, v), accept_length=accept)] for v in vals]}
    res = [arm(S1, [190, 200, 210], 1.6), arm(S2, [205, 215, 225], 1.9), arm(S3, [210, 220, 230], 2.2)]
    assert at.accepted_drafts(res[2]["trials"], 1) == pytest.approx(1.2)
    assert (at.down_threshold(2), at.down_threshold(1), at.down_threshold(0)) == (1.25, 0.25, 0.25)
    out = at.bucket_table(res, [1])
    assert out["table"] == {"1": {"candidate_steps": [1, 3]}}
    rows = dict((r["steps"], r) for r in out["buckets"][0]["steps"])
    assert rows[2]["ema_threshold"] == 1.25 and rows[2]["candidate"] is False and rows[3]["accepted_drafts"] == pytest.approx(1.2)
    # 3 steps at accept length 2.3 (1.3 accepted drafts > 1.25): the EMA stays at 3, 2 steps is kept -> [1, 2, 3]
    res[2] = arm(S3, [210, 220, 230], 2.3)
    assert at.bucket_table(res, [1])["table"] == {"1": {"candidate_steps": [1, 2, 3]}}
    # no accept length recorded: the rule cannot be applied, the counts not significantly worse stay
    res[2] = arm(S3, [210, 220, 230])
    assert at.bucket_table(res, [1])["table"] == {"1": {"candidate_steps": [1, 2, 3]}}
