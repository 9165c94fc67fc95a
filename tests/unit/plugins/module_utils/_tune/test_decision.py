"""spec_decision: arms, intervals and the decision against values worked out by hand (arithmetic in the comments)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._tune import decision as sd
from ansible_collections.llmops.sglang.plugins.module_utils._tune.decision import SpecDecisionError


def rec(conc, tput, tpot=10.0, failed=0, goodput=None):
    r = {"max_concurrency": conc, "output_throughput": tput, "median_tpot_ms": tpot, "failed": failed}
    if goodput is not None:
        r["goodput"] = goodput
    return r


def arm(**kw):
    return sd.normalize_arm(kw)


OFF = sd.normalize_arm({"speculative_algorithm": None})
S1 = sd.normalize_arm({"algorithm": "nextn", "num_steps": 1, "topk": 1, "num_draft_tokens": 2})
S3 = sd.normalize_arm({"speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                       "speculative_num_draft_tokens": 4})


# -- arms ------------------------------------------------------------------------------------------

def test_arm_keys_and_aliases():
    assert OFF["key"] == "off" and OFF["name"] == "off"
    assert S1["key"] == "NEXTN-s1-k1-d2" and S1["speculative_algorithm"] == "NEXTN"
    auto = arm(speculative_algorithm="EAGLE")
    assert auto["key"] == "EAGLE-s--k--d-"
    drafted = arm(speculative_algorithm="EAGLE3", num_steps=3, topk=1, num_draft_tokens=4,
                  draft_model_path="/models/EAGLE3-Llama-3.1-8B/")
    assert drafted["key"] == "EAGLE3-s3-k1-d4-mEAGLE3-Llama-3.1-8B"
    assert arm(algorithm="off", name="baseline")["name"] == "baseline"


@pytest.mark.parametrize("bad, words", [
    ({"algorithm": "NGRAM"}, "speculative_algorithm='NGRAM'"),
    ({"algorithm": "NEXTN", "num_steps": 0}, "speculative_num_steps=0"),
    ({"algorithm": "NEXTN", "num_steps": 1.5}, "speculative_num_steps=1.5"),
    ({"algorithm": "NEXTN", "num_steps": True}, "not a boolean"),
    ({"num_steps": 2}, "without speculative_algorithm"),
    ({"algorithm": "NEXTN", "steps": 2}, "unknown key 'steps'"),
    ("NEXTN", "an arm is a dict"),
])
def test_bad_arms_are_refused_with_the_variable(bad, words):
    with pytest.raises(SpecDecisionError) as exc:
        sd.normalize_arm(bad, 2)
    assert "arms[2]" in str(exc.value) and words in str(exc.value) and "Fix:" in str(exc.value)


def test_order_running_first_then_simplest():
    tree = arm(algorithm="EAGLE", num_steps=3, topk=4, num_draft_tokens=8)
    ordered = sd.order_arms([S3, tree, OFF, S1])
    assert [a["key"] for a in ordered] == ["off", "NEXTN-s1-k1-d2", "NEXTN-s3-k1-d4", "EAGLE-s3-k4-d8"]
    ordered = sd.order_arms([S3, tree, OFF, S1], running_key="NEXTN-s3-k1-d4")
    assert [a["key"] for a in ordered] == ["NEXTN-s3-k1-d4", "off", "NEXTN-s1-k1-d2", "EAGLE-s3-k4-d8"]
    with pytest.raises(SpecDecisionError, match=r"arms\[1\] \(off\) repeats arms\[0\]"):
        sd.order_arms([OFF, OFF])


def test_default_grid_is_off_and_three_chains():
    assert [a["key"] for a in sd.default_grid()] == ["off", "NEXTN-s1-k1-d2", "NEXTN-s2-k1-d3", "NEXTN-s3-k1-d4"]


# -- statistics ------------------------------------------------------------------------------------

def test_t_table():
    assert sd.t975(1) == 12.706 and sd.t975(2) == 4.303 and sd.t975(2.9) == 4.303 and sd.t975(30) == 2.042
    assert sd.t975(120) == pytest.approx(1.98)   # 1.96 + 2.4/120 (table value 1.980)
    with pytest.raises(SpecDecisionError):
        sd.t975(0.5)


def test_ratio_interval_one_sided_variance_by_hand():
    # candidate 110, 120, 130: mean 120, sd 10; baseline 100 x3: mean 100, sd 0 -> R = 1.2
    # se^2 = 10^2 / (3 * 120^2) = 0.00231481; df = 2 (only the candidate varies, n - 1); t = 4.303
    # half = 4.303 * sqrt(0.00231481) = 4.303 * 0.0481125 = 0.207028
    # low = 1.2 * exp(-0.207028) = 1.2 * 0.812997 = 0.975596; high = 1.2 * exp(0.207028) = 1.2 * 1.230017 = 1.476020
    iv = sd.ratio_interval([110, 120, 130], [100, 100, 100])
    assert iv["speedup"] == pytest.approx(1.2)
    assert iv["df"] == pytest.approx(2.0)
    assert iv["low"] == pytest.approx(0.975596, abs=5e-6)
    assert iv["high"] == pytest.approx(1.476020, abs=5e-6)
    assert not sd.is_clear(iv)   # spans 1


def test_ratio_interval_welch_by_hand():
    # candidate 2.0, 2.2: mean 2.1, sd 0.141421; baseline 1.0, 1.1: mean 1.05, sd 0.0707107 -> R = 2
    # v_c = 0.02 / (2 * 4.41) = 0.00226757; v_b = 0.005 / (2 * 1.1025) = 0.00226757; se = sqrt(0.00453515) = 0.0673435
    # df = (2v)^2 / (v^2/1 + v^2/1) = 2 -> t = 4.303; half = 0.289779
    # low = 2 * exp(-0.289779) = 2 * 0.748429 = 1.496858; high = 2 * 1.336132 = 2.672264
    iv = sd.ratio_interval([2.0, 2.2], [1.0, 1.1])
    assert iv["speedup"] == pytest.approx(2.0)
    assert iv["df"] == pytest.approx(2.0)
    assert iv["low"] == pytest.approx(1.496858, abs=5e-6)
    assert iv["high"] == pytest.approx(2.672264, abs=5e-6)
    assert sd.is_clear(iv) and not sd.is_clear(iv, min_gain=0.5)


def test_ratio_interval_lower_is_better_and_edges():
    iv = sd.ratio_interval([5.0], [10.0], higher_is_better=False)   # TPOT halved: speedup 2, one trial: no interval
    assert iv["speedup"] == 2.0 and iv["low"] is None and not sd.is_clear(iv)
    same = sd.ratio_interval([3.0, 3.0], [2.0, 2.0])
    assert same["low"] == same["high"] == pytest.approx(1.5)
    with pytest.raises(SpecDecisionError):
        sd.ratio_interval([], [1.0])
    with pytest.raises(SpecDecisionError):
        sd.ratio_interval([0.0], [1.0])


# -- objective and decision ------------------------------------------------------------------------

def test_objective_value_weighted_and_errors():
    records = [rec(1, 100.0, tpot=9.0), rec(32, 1900.0, tpot=16.8)]
    assert sd.objective_value(records, "throughput", {32: 1}) == 1900.0
    # weighted: (1*100 + 3*1900) / 4 = 1450
    assert sd.objective_value(records, "throughput", {1: 1, 32: 3}) == pytest.approx(1450.0)
    assert sd.objective_value(records, "tpot", {1: 1}) == 9.0
    with pytest.raises(SpecDecisionError, match="concurrency 8 has weight 1 but was not measured"):
        sd.objective_value(records, "throughput", {8: 1})
    with pytest.raises(SpecDecisionError, match="goodput"):
        sd.objective_value(records, "goodput", {1: 1})
    assert sd.objective_value([rec(4, 400, goodput=2.5)], "goodput", {4: 1}) == 2.5
    with pytest.raises(SpecDecisionError, match="2 failed request"):
        sd.objective_value([rec(4, 400, failed=2)], "throughput", {4: 1})
    with pytest.raises(SpecDecisionError, match="objective='speed'"):
        sd.objective_value(records, "speed", {1: 1})


def trials(values, conc=8):
    return [[rec(conc, v)] for v in values]


def test_decide_significant_winner():
    # off 100, 101, 99 (mean 100, sd 1); s1 130, 131, 129 (mean 130, sd 1): R = 1.3
    # v = 1/(3*130^2) + 1/(3*100^2) = 1.97239e-5 + 3.33333e-5 = 5.30572e-5; se = 0.00728404
    # df = v^2 / (v_c^2/2 + v_b^2/2) = 2.81507e-9 / (1.94516e-10 + 5.55556e-10) = 3.7531 -> t(3) = 3.182
    # low = 1.3 * exp(-3.182 * 0.00728404) = 1.3 * 0.977089 = 1.270215 > 1
    d = sd.decide([{"arm": OFF, "trials": trials([100, 101, 99])}, {"arm": S1, "trials": trials([130, 131, 129])}],
                  "throughput", {8: 1})
    assert d["winner"] == "NEXTN-s1-k1-d2" and d["significant"] and not d["no_significant_difference"]
    off_row = next(a for a in d["arms"] if a["key"] == "off")
    assert off_row["vs_best"]["low"] == pytest.approx(1.270215, abs=5e-6)
    assert off_row["vs_best"]["df"] == pytest.approx(3.7531, abs=1e-3)
    assert "beats every other arm significantly" in d["basis"] and d["ties"] == []


def test_decide_no_significant_difference_keeps_the_simpler_arm():
    # off 100, 102, 98 (mean 100); s1 101, 99, 100 (mean 100.0): identical within the noise
    d = sd.decide([{"arm": S1, "trials": trials([101, 99, 100.5])}, {"arm": OFF, "trials": trials([100, 102, 98])}],
                  "throughput", {8: 1})
    assert d["best"] == "NEXTN-s1-k1-d2"          # mean 100.1667 > 100
    assert d["winner"] == "off" and d["no_significant_difference"] and not d["significant"]
    assert d["basis"].startswith("no significant difference") and d["ties"][0]["key"] == "NEXTN-s1-k1-d2"
    # the simpler arm ahead on the mean but within the noise: kept, and still "no significant difference"
    d = sd.decide([{"arm": S1, "trials": trials([99, 101, 99.5])}, {"arm": OFF, "trials": trials([100, 102, 98])}],
                  "throughput", {8: 1})
    assert d["best"] == "off" and d["winner"] == "off" and d["no_significant_difference"]
    assert "is kept as the simplest of them" in d["basis"]


def test_decide_min_gain_and_simpler_draft_kept():
    # s1 and s3 both clearly beat off; s3 is 2 % above s1, which is within the noise: s1 (fewer draft tokens) stays
    results = [{"arm": OFF, "trials": trials([100, 100.5, 99.5])}, {"arm": S1, "trials": trials([130, 133, 127])},
               {"arm": S3, "trials": trials([132.6, 136, 129.2])}]
    d = sd.decide(results, "throughput", {8: 1})
    assert d["best"] == "NEXTN-s3-k1-d4" and d["winner"] == "NEXTN-s1-k1-d2"
    assert [t["key"] for t in d["ties"]] == ["NEXTN-s3-k1-d4"]     # off is beaten clearly, s3 is a tie
    # with a demanded gain of 50 % even a clear 30 % win is not enough: off stays
    d = sd.decide(results, "throughput", {8: 1}, min_gain=0.5)
    assert d["winner"] == "off"


def test_decide_one_trial_keeps_the_simpler_arm_unless_point_estimate():
    # one trial each: off 100, s1 112, s3 115 tok/s; no interval exists
    results = [{"arm": OFF, "trials": trials([100])}, {"arm": S1, "trials": trials([112])}, {"arm": S3, "trials": trials([115])}]
    d = sd.decide(results, "throughput", {8: 1})
    assert d["winner"] == "off" and d["point_estimate"] is False      # the tuner's rule: unknown -> simpler arm
    # point estimate, min_gain 0.10: best s3; s3/off = 1.15 > 1.10 (off loses), s3/s1 = 115/112 = 1.026786 <= 1.10 (s1 kept)
    d = sd.decide(results, "throughput", {8: 1}, min_gain=0.10, point_estimate=True)
    assert (d["best"], d["winner"], d["point_estimate"]) == ("NEXTN-s3-k1-d4", "NEXTN-s1-k1-d2", True)
    assert d["significant"] is None and d["no_significant_difference"] is None and d["ties"] == []
    assert "NEXTN-s3-k1-d4 over NEXTN-s1-k1-d2 is 1.027, NEXTN-s3-k1-d4 needs > 1.100 to win, so the simpler NEXTN-s1-k1-d2 is kept" in d["basis"]
    # min_gain 0.02: s3/s1 = 1.026786 > 1.02 and s3/off = 1.15 > 1.02: s3; the smallest margin is over s1
    d = sd.decide(results, "throughput", {8: 1}, min_gain=0.02, point_estimate=True)
    assert d["winner"] == "NEXTN-s3-k1-d4"
    assert "NEXTN-s3-k1-d4 over NEXTN-s1-k1-d2 is 1.027, above 1.020, so NEXTN-s3-k1-d4" in d["basis"]


def test_decide_point_estimate_uses_intervals_when_there_are_trials():
    # two trials each: intervals exist, so point_estimate changes nothing (same as test_decide_significant_winner's shape)
    results = [{"arm": OFF, "trials": trials([100, 101])}, {"arm": S1, "trials": trials([130, 131])}]
    a = sd.decide(results, "throughput", {8: 1})
    b = sd.decide(results, "throughput", {8: 1}, point_estimate=True)
    assert a["winner"] == b["winner"] == "NEXTN-s1-k1-d2" and b["point_estimate"] is False and b["significant"] is True


def test_decide_simpler_first_for_arms_without_a_configuration():
    # the A/B's two servers given by URL: labels only; the baseline listed first counts as the simpler arm
    base, cand = {"key": "blue", "name": "blue"}, {"key": "green", "name": "green"}
    results = [{"arm": cand, "trials": trials([100])}, {"arm": base, "trials": trials([100])}]
    d = sd.decide(results, "throughput", {8: 1}, point_estimate=True, simpler_first=["blue", "green"])
    assert d["baseline"] == "blue" and d["winner"] == "blue"             # a tie keeps the baseline
    d = sd.decide(results, "throughput", {8: 1}, point_estimate=True, simpler_first=["green", "blue"])
    assert d["winner"] == "green"
    with pytest.raises(SpecDecisionError, match="does not name the arm"):
        sd.decide(results, "throughput", {8: 1}, point_estimate=True, simpler_first=["blue"])


def test_decide_tpot_lower_is_better():
    results = [{"arm": OFF, "trials": [[rec(1, 110, tpot=9.09)], [rec(1, 110, tpot=9.10)]]},
               {"arm": S1, "trials": [[rec(1, 135, tpot=7.40)], [rec(1, 135, tpot=7.41)]]}]
    d = sd.decide(results, "tpot", {1: 1})
    assert d["winner"] == "NEXTN-s1-k1-d2" and d["unit"] == "ms"
    # 9.095 / 7.405 = 1.22822
    assert next(a for a in d["arms"] if a["key"] == "off")["vs_best"]["speedup"] == pytest.approx(1.22822, abs=1e-5)


def test_speedup_table_per_level():
    base = {"arm": OFF, "trials": [[rec(1, 110), rec(64, 2576)], [rec(1, 110), rec(64, 2576)]]}
    cand = {"arm": S1, "trials": [[rec(1, 135), rec(64, 2308)], [rec(1, 135), rec(64, 2308)]]}
    table = sd.speedup_table([base, cand], "off")
    assert [r["concurrency"] for r in table["NEXTN-s1-k1-d2"]] == [1, 64]
    assert table["NEXTN-s1-k1-d2"][0]["speedup"] == pytest.approx(135 / 110.0)
    assert table["NEXTN-s1-k1-d2"][1]["speedup"] == pytest.approx(2308 / 2576.0)
    assert table["off"][0]["speedup"] == 1.0


# -- production concurrency ------------------------------------------------------------------------

def test_running_distribution_by_hand():
    samples = [{"running_req": r, "queue_req": q} for r, q in [(0, 0), (4, 0), (8, 0), (8, 2), (16, 5), (12, 0)]]
    dist = sd.running_distribution(samples)
    # busy samples 4, 8, 8, 16, 12 -> sorted 4 8 8 12 16; p50 = 8; p90: pos 3.6 -> 12 + .6*4 = 14.4; max 16; mean 9.6
    assert dist["samples"] == 5
    assert dist["running"]["p50"] == 8 and dist["running"]["p90"] == pytest.approx(14.4)
    assert dist["running"]["max"] == 16 and dist["running"]["mean"] == pytest.approx(9.6)
    assert dist["queue"]["max"] == 5 and dist["queued_fraction"] == pytest.approx(0.4)
    assert dist["histogram"] == {4: 1, 8: 2, 16: 1, 12: 1}
    assert sd.running_distribution([])["running"]["p50"] is None


def test_distribution_weights_nearest_level_on_log2():
    # levels 1, 8, 32: 4 -> |2-0|=2 vs |2-3|=1 -> 8; 12 -> log2 3.585: 8 (0.585) vs 32 (1.415) -> 8; 16 -> 8 (1) vs 32 (1): tie -> 32
    w = sd.distribution_weights({4: 1, 8: 2, 12: 1, 16: 1}, [1, 8, 32])
    assert w == {8: 4 * 1 + 8 * 2 + 12 * 1, 32: 16.0}
    with pytest.raises(SpecDecisionError):
        sd.distribution_weights({}, [1])


# -- keeping the decision (sglang_server_speculative_from_decision) -----------------------------------

def _decision(**fp):
    fingerprint = {"model_path": "/models/Qwen3.5-122B-A10B", "sglang_version": "0.5.9", "tp_size": 4,
                   "gpu_models": ["NVIDIA H200"], "gpu_count": 4}
    fingerprint.update(fp)
    return {"arm": {"key": "NEXTN-s1-k1-d2"}, "time": "2026-12-01T10:00:00Z", "fingerprint": fingerprint,
            "server_vars": {"sglang_server_speculative_algorithm": "NEXTN", "sglang_server_speculative_num_steps": 1,
                            "sglang_server_speculative_eagle_topk": 1, "sglang_server_speculative_num_draft_tokens": 2,
                            "sglang_server_speculative_draft_model_path": None}}


NOW = {"model_path": "/models/Qwen3.5-122B-A10B", "sglang_version": "v0.5.9", "tp_size": "4",
       "gpu_models": ["NVIDIA H200"] * 4, "gpu_count": 4}


def test_tuned_settings_matching_setup():
    import json
    # "v0.5.9" vs "0.5.9", "4" vs 4 and one name per GPU vs the unique list are the same setup
    got = sd.tuned_settings(json.dumps(_decision()), NOW, "/etc/sglang/x.json", "gpu1")
    assert got == {"speculative_algorithm": "NEXTN", "speculative_num_steps": 1, "speculative_eagle_topk": 1,
                   "speculative_num_draft_tokens": 2, "speculative_draft_model_path": None, "arm": "NEXTN-s1-k1-d2",
                   "time": "2026-12-01T10:00:00Z", "path": "/etc/sglang/x.json"}


@pytest.mark.parametrize("text, words", [
    (None, ["no tuning decision at /d.json", "playbooks/spec_tune.yml", "sglang_server_speculative_from_decision=false"]),
    ("{not json", ["/d.json is not JSON"]),
    ('{"arm": {}}', ["is not a spec_tune decision"]),
])
def test_tuned_settings_refuses_what_is_not_a_decision(text, words):
    with pytest.raises(SpecDecisionError) as err:
        sd.tuned_settings(text, NOW, "/d.json", "gpu1")
    for w in words:
        assert w in str(err.value)


def test_tuned_settings_refuses_another_setup_naming_each_difference():
    import json
    text = json.dumps(_decision(model_path="/models/Other", gpu_count=8))
    with pytest.raises(SpecDecisionError) as err:
        sd.tuned_settings(text, NOW, "/d.json", "gpu1")
    msg = str(err.value)
    assert "model_path /models/Other then, /models/Qwen3.5-122B-A10B now (sglang_server_model_path)" in msg
    assert "gpu_count 8 then, 4 now" in msg
    assert "sglang_version" not in msg.split("another setup")[1].split("Fix")[0]
    old = _decision()
    del old["fingerprint"]["gpu_models"]
    with pytest.raises(SpecDecisionError) as err:
        sd.tuned_settings(json.dumps(old), NOW, "/d.json", "gpu1")
    assert "gpu_models not recorded in the decision" in str(err.value)


def test_tuned_settings_carries_a_table_mode_decision():
    import json
    # spec_tune mode=table records adaptive on and the table beside the static settings of the largest candidate
    decision = _decision()
    table = {"1": {"candidate_steps": [1, 3]}, "32": {"candidate_steps": [0, 1]}}
    decision["server_vars"].update(sglang_server_speculative_num_steps=3, sglang_server_speculative_num_draft_tokens=4,
                                   sglang_server_speculative_adaptive=True, sglang_server_speculative_adaptive_config=table)
    got = sd.tuned_settings(json.dumps(decision), NOW, "/d.json", "gpu1")
    assert (got["arm"], got["speculative_adaptive"], got["speculative_adaptive_config"]) == ("NEXTN-s3-k1-d4", True, table)
    # an older static decision has neither key (the role then serves the static arm, adaptive off)
    assert "speculative_adaptive" not in sd.tuned_settings(json.dumps(_decision()), NOW, "/d.json", "gpu1")
