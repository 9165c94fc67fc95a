"""The tuner (spec_tune's plan/record/finish/decide over real sweeps) against the SGLang simulator (a test double).

Timing model (tests/sandbox/sglang_sim/timing.py, defaults; accept probability 1, so every draft is accepted), by hand:
  step without speculation, c running:       t0 + k c                       = 8.84 + 0.25 c ms, 1 token each
  verify step, s steps, D = s + 1 tokens:    t0 + k c D + verify + s (draft + draft_k c)
                                             = 8.84 + 0.25 c D + 3.83 + s (1.5 + 0.145 c) ms, s + 1 tokens each
  steady output tok/s = c (s + 1) / step:
                c = 1                                  c = 64
  off           1 / 9.09 ms      = 110.0              64 / 24.84 ms                         = 2576.5   <- best at 64
  1/1/2         2 / 14.815 ms    = 135.0              128 / (8.84+32+3.83+10.78 = 55.45 ms)  = 2308.4
  3/1/4         4 / 18.605 ms    = 215.0  <- best     256 / (8.84+64+3.83+32.34 = 109.01 ms) = 2348.4
With 32-token outputs and the prefill batch included the measured rates are lower, the order is the same:
  c = 1  (32-token prompt: prefill 8.84 + 1.6 = 10.44 ms): off 31 x 9.09 + 10.44 = 292.2 ms -> 109.5 tok/s;
         3/1/4 8 steps x 18.605 + 10.44 = 159.3 ms -> 200.9 tok/s; 1/1/2 16 x 14.815 + 10.44 = 247.5 ms -> 129.3 tok/s
  c = 64 (prefill of 64 x 32 tokens: 8.84 + 102.4 = 111.24 ms): off 31 x 24.84 + 111.24 = 881.3 ms -> 2324 tok/s;
         3/1/4 8 x 109.01 + 111.24 = 983.3 ms -> 2083 tok/s; 1/1/2 16 x 55.45 + 111.24 = 998.4 ms -> 2051 tok/s
So the tuner must pick 3/1/4 at concurrency 1 and off at 64.

Identical timing: NEXTN 1/1/2 with the verify overhead raised to 7.195 ms costs 8.84 + 0.5 + 7.195 + 1.645 = 18.18 ms
per step for 2 tokens, exactly two MTP-off steps (2 x 9.09 ms). With 33-token outputs both need 32 decode tokens after
the prefill token: off 32 x 9.09 = 290.9 ms, on 16 x 18.18 = 290.9 ms. The decision must be "no significant
difference", keeping off. A 1 % practical threshold (min_gain 0.01) absorbs what the timing model does not cover (the
MTP server sends half as many chunks, so its HTTP overhead per token is lower).
"""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc
from ansible_collections.llmops.sglang.plugins.module_utils._report import benchmark as br
from ansible_collections.llmops.sglang.plugins.module_utils._bench import stats as bs
from ansible_collections.llmops.sglang.plugins.modules import spec_tune

pytestmark = pytest.mark.simulator

ARMS = [{"speculative_algorithm": None},
        {"speculative_algorithm": "NEXTN", "speculative_num_steps": 1, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2},
        {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}]


def launch_args(arm):
    args = ["--tp", "4", "--max-running-requests", "64"]
    if arm["speculative_algorithm"]:
        args += ["--speculative-algorithm", arm["speculative_algorithm"], "--speculative-num-steps", str(arm["speculative_num_steps"]),
                 "--speculative-eagle-topk", str(arm["speculative_eagle_topk"]),
                 "--speculative-num-draft-tokens", str(arm["speculative_num_draft_tokens"])]
    return args


def sweep(url, levels, out_len, seed):
    records = []
    for conc, n in levels:
        t = bc.Target(url, timeout_s=120, stall_timeout_s=20)
        res, dur, _w = bc.run_benchmark(t, bc.make_prompts(n, 32, out_len, seed=seed + conc), max_concurrency=conc,
                                        warmup_prompts=bc.make_prompts(1, 32, 4, seed=seed + 999))
        m = bs.level_metrics(res, dur)
        assert m["failed"] == 0, m["error_kinds"]
        records.append(br.make_record(m, {"backend": "sglang", "max_concurrency": conc, "request_rate": None}))
    return records


def params(state_file, **kw):
    p = {"state_file": state_file, "arms": [], "default_algorithm": "NEXTN", "running": {}, "fingerprint": {"levels": [1, 64]},
         "fresh": False, "trials": 3, "min_trials": 2, "arm": None, "trial": None, "records": [], "failed": "",
         "verification": {}, "duration_s": None, "objective": "throughput", "weights": {}, "min_gain": 0.0, "report_dir": None,
         "plots": False, "title": "t"}
    p.update(kw)
    return p


def tune(sglang_sim, state_file, arms, levels, out_len, weights, env=None, trials=3, min_gain=0.0):
    """The playbook's loop, in process: plan, then per pending arm serve + trials (early stop) + finish."""
    plan = spec_tune.plan(params(state_file, arms=arms), False)
    trials_run = {}
    for arm in plan["pending"]:
        srv = sglang_sim(launch_args(arm), env=(env or {}).get(arm["key"]))
        for trial in range(arm["trials_done"] + 1, trials + 1):
            records = sweep(srv.url, levels, out_len, seed=1000 * trial)
            out = spec_tune.record(params(state_file, arm=arm["key"], trial=trial, records=records, weights=weights,
                                          min_gain=min_gain), False)
            trials_run[arm["key"]] = trial
            if out["early_stop"]:
                break
        srv.stop()
        spec_tune.finish(params(state_file, arm=arm["key"], duration_s=1.0), False)
    return trials_run


@pytest.mark.timing
def test_tuner_finds_the_hand_computed_best_arm_at_low_and_high_concurrency(sglang_sim, tmp_path):
    state = str(tmp_path / "state.json")
    ran = tune(sglang_sim, state, ARMS, [(1, 2), (64, 64)], 32, {"1": 1})
    assert ran["off"] == 3                       # the first arm has nothing to be compared with: all trials
    assert ran["NEXTN-s3-k1-d4"] == 2            # 200.9 vs 109.5 / 129.3 tok/s at c = 1: clear after min_trials
    low = spec_tune.decide(params(state, weights={"1": 1}), False)["decision"]
    high = spec_tune.decide(params(state, weights={"64": 1}), False)["decision"]
    assert low["winner"] == "NEXTN-s3-k1-d4" and low["significant"], low["basis"]
    # at 64 the margins are 12-13 % and the 64-stream level is the noisier one on a shared machine (2 or 3 trials):
    # off must be the best mean and the winner; significance is asserted where the margin is large (c = 1)
    assert high["best"] == "off" and high["winner"] == "off", high["basis"]
    means = {a["key"]: a["mean"] for a in low["arms"]}
    assert means["NEXTN-s3-k1-d4"] == pytest.approx(200.9, rel=0.08)
    assert means["off"] == pytest.approx(109.5, rel=0.08)
    means64 = {a["key"]: a["mean"] for a in high["arms"]}
    assert means64["off"] / means64["NEXTN-s3-k1-d4"] == pytest.approx(2324 / 2083.0, rel=0.05)
    # the per-level table carries both answers: 3/1/4 over off is > 1 at c = 1 (the whole interval) and < 1 at c = 64
    # (the point estimate: 2083 / 2324 = 0.896 by hand; with the 2 trials the early stop leaves, the interval's upper end
    # on a shared 2-core machine can reach past 1, so only c = 1 asserts the interval)
    table = {r["concurrency"]: r for r in low["speedup_table"]["NEXTN-s3-k1-d4"]}
    assert table[1]["low"] > 1.0
    assert table[64]["speedup"] == pytest.approx(2083 / 2324.0, rel=0.05)
    assert table[64]["low"] < table[64]["speedup"] < table[64]["high"]


@pytest.mark.timing
def test_identical_timing_is_no_significant_difference(sglang_sim, tmp_path):
    state = str(tmp_path / "state.json")
    arms = ARMS[:2]
    tune(sglang_sim, state, arms, [(1, 2)], 33, {"1": 1}, env={"NEXTN-s1-k1-d2": {"SGLANG_SIM_VERIFY_MS": "7.195"}}, min_gain=0.01)
    d = spec_tune.decide(params(state, weights={"1": 1}, min_gain=0.01), False)["decision"]
    assert d["winner"] == "off" and d["no_significant_difference"], d["basis"]
    assert d["basis"].startswith("no significant difference")
    ratio = [a for a in d["arms"] if a["key"] == "NEXTN-s1-k1-d2"][0]["vs_baseline"]["speedup"]
    assert ratio == pytest.approx(1.0, abs=0.02)


@pytest.mark.timing
def test_table_mode_writes_the_hand_computed_table(sglang_sim, tmp_path):
    # table mode (issue 21): step counts 0, 1, 3, buckets 1 and 64, one simulator start per step count. By hand (above):
    # bucket 1: 3 steps 200.9 tok/s vs 1 step 129.3 and off 109.5 -> only 3 steps (55 % and 83 % ahead);
    # bucket 64: off 2324 vs 3 steps 2083 and 1 step 2051 -> off is the best; the 12-13 % margins with 2-3 trials on a
    # shared machine may or may not be significant, so only "off is the best and a candidate" is asserted there
    state = str(tmp_path / "state.json")
    table = {"mode": "table", "table_steps": [0, 1, 3], "buckets": [1, 64]}
    plan = spec_tune.plan(params(state, **table), False)
    assert [a["key"] for a in plan["pending"]] == ["off", "NEXTN-s1-k1-d2", "NEXTN-s3-k1-d4"]
    starts = 0
    prompts = {1: 2, 64: 64}
    for arm in plan["pending"]:
        srv = sglang_sim(launch_args(arm))
        starts += 1
        levels = [1, 64]
        for trial in range(1, 4):
            # each trial measures only the buckets where this step count is still in contention (levels_next)
            records = sweep(srv.url, [(c, prompts[c]) for c in levels], 32, 1000 * trial)
            out = spec_tune.record(params(state, arm=arm["key"], trial=trial, records=records, weights={"1": 1, "64": 1}, **table), False)
            if out["early_stop"]:
                break
            levels = out["levels_next"]
        srv.stop()
        spec_tune.finish(params(state, arm=arm["key"], duration_s=1.0), False)
    assert starts == 3          # one start per step count, both buckets measured in it
    report = tmp_path / "report"
    out = spec_tune.decide(params(state, weights={"1": 1, "64": 1}, report_dir=str(report), **table), False)
    ad = out["adaptive"]
    # keys: 1 and sqrt(1 x 64) = 8 (adaptive_table.table_keys)
    assert sorted(ad["table"], key=int) == ["1", "8"]
    assert ad["table"]["1"] == {"candidate_steps": [3]}
    b64 = ad["buckets"][1]
    assert b64["bucket"] == 64 and b64["best"] == 0 and 0 in b64["candidate_steps"]
    rows = dict((r["steps"], r) for r in ad["buckets"][0]["steps"])
    assert rows[3]["vs_off"]["speedup"] == pytest.approx(200.9 / 109.5, rel=0.08)
    assert out["winner_vars"]["sglang_server_speculative_adaptive"] is True
    assert out["winner_vars"]["sglang_server_speculative_num_steps"] == max(max(e["candidate_steps"]) for e in ad["table"].values())
    assert (report / "adaptive_table.json").exists()
