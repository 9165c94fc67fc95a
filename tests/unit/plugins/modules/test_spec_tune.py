"""spec_tune module: plan order, resume from the state file, early stop, fingerprint refusal, decision files."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.modules import spec_tune

from ansible.module_utils.testing import patch_module_args

ARMS = [{"speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4},
        {"speculative_algorithm": None},
        {"speculative_algorithm": "NEXTN", "speculative_num_steps": 1, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2}]
FP = {"host": "gpu1", "sglang_version": "0.5.9", "levels": [1, 32]}


def run(capsys, args, fail=False):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            spec_tune.main()
    out = json.loads(capsys.readouterr().out)
    assert bool(out.get("failed")) is fail, out.get("msg")
    return out


def recs(t1, t32, accept=None):
    return [{"max_concurrency": 1, "output_throughput": t1, "failed": 0, "accept_length": accept},
            {"max_concurrency": 32, "output_throughput": t32, "failed": 0, "accept_length": accept}]


def test_plan_resume_early_stop_and_decision(capsys, tmp_path):
    state = str(tmp_path / "h" / "state.json")
    base = {"state_file": state, "fingerprint": FP}
    running = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 1, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2}
    plan = run(capsys, dict(base, action="plan", arms=ARMS, running=running))
    # the running configuration first (no restart), then simplest first
    assert [a["key"] for a in plan["pending"]] == ["NEXTN-s1-k1-d2", "off", "NEXTN-s3-k1-d4"]
    assert plan["eta_s"] is None
    w = {"1": 1}
    rec = dict(base, action="record", objective="throughput", weights=w)
    # first arm: no finished arm to compare with -> never clear
    for t, (a, b) in enumerate([(135, 1840), (134, 1838), (136, 1839)], 1):
        out = run(capsys, dict(rec, arm="NEXTN-s1-k1-d2", trial=t, records=recs(a, b, 2.0)))
        assert out["early_stop"] is False and out["trials_done"] == t
    run(capsys, dict(base, action="finish", arm="NEXTN-s1-k1-d2", duration_s=100.0))
    # second arm (off): after 2 trials at 110 vs 134-136 the interval is far below 1 -> clear, skip trial 3
    run(capsys, dict(rec, arm="off", trial=1, records=recs(110, 1900)))
    out = run(capsys, dict(rec, arm="off", trial=2, records=recs(110.5, 1901)))
    assert out["early_stop"] is True and out["evidence"][0]["against"] == "NEXTN-s1-k1-d2"
    assert out["evidence"][0]["high"] < 1.0
    # the trial line: mean off 110.25 vs mean 135 -> 110.25 / 135 = 0.8167
    assert out["summary"] == ("off trial 2: 1: 110.5, 32: 1901.0 tok/s; clear after 2 trials, the remaining ones are skipped "
                              "['NEXTN-s1-k1-d2 x0.817']")
    run(capsys, dict(base, action="finish", arm="off", duration_s=60.0))
    # third arm interrupted after one trial: a new plan resumes it, finished arms are not run again
    run(capsys, dict(rec, arm="NEXTN-s3-k1-d4", trial=1, records=recs(215, 2030, 4.0)))
    plan = run(capsys, dict(base, action="plan", arms=ARMS, running=running))
    assert [(a["key"], a["status"], a["trials_done"]) for a in plan["pending"]] == [("NEXTN-s3-k1-d4", "partial", 1)]
    assert plan["eta_s"] == pytest.approx(80.0)   # mean of 100 s and 60 s, one arm left
    assert plan["summary"] == ["state: " + state, "NEXTN-s1-k1-d2 | done | 3", "off | done | 2", "NEXTN-s3-k1-d4 | partial | 1",
                               "levels: 1, 32; objective throughput weighted {}; ETA: ~80 s"]
    run(capsys, dict(rec, arm="NEXTN-s3-k1-d4", trial=2, records=recs(214, 2028, 4.0)))
    run(capsys, dict(base, action="finish", arm="NEXTN-s3-k1-d4", duration_s=90.0))
    report = tmp_path / "report"
    out = run(capsys, dict(base, action="decide", weights=w, report_dir=str(report), plots=False))
    assert out["decision"]["winner"] == "NEXTN-s3-k1-d4" and out["decision"]["significant"]
    assert out["winner_vars"]["sglang_server_speculative_num_draft_tokens"] == 4
    assert out["decision"]["accept_length"]["NEXTN-s3-k1-d4"] == {"1": 4.0, "32": 4.0}
    assert sorted(p.name for p in report.iterdir()) == ["decision.json", "decision.md", "winner_vars.json"]
    saved = json.loads((report / "decision.json").read_text())
    assert saved["winner"] == "NEXTN-s3-k1-d4" and saved["winner_arm"]["speculative_num_steps"] == 3
    assert "**Winner: `NEXTN-s3-k1-d4`**" in out["markdown"]
    # what the role records on the host: the winner, its server variables, where it was measured
    record = out["record"]
    assert record["arm"]["key"] == "NEXTN-s3-k1-d4" and record["server_vars"] == out["winner_vars"]
    assert (record["report_dir"], record["tuned_on"], record["fingerprint"]) == (str(report), "", FP)
    assert record["time"] == out["decision"]["time"] and record["significant"] is True
    # deciding again without new measurements keeps the decision's time (the host's decision file stays unchanged)
    again = run(capsys, dict(base, action="decide", weights=w, report_dir=str(report), plots=False))
    assert again["decision"]["time"] == out["decision"]["time"]


def test_fingerprint_mismatch_is_refused_and_fresh_moves_the_state(capsys, tmp_path):
    state = str(tmp_path / "state.json")
    run(capsys, {"action": "plan", "state_file": state, "fingerprint": FP})
    other = dict(FP, sglang_version="0.5.10")
    out = run(capsys, {"action": "plan", "state_file": state, "fingerprint": other}, fail=True)
    assert "sglang_version was '0.5.9', now '0.5.10'" in out["msg"] and "speculative_tuning_fresh=true" in out["msg"]
    out = run(capsys, {"action": "plan", "state_file": state, "fingerprint": other, "fresh": True})
    assert out["moved_to"].startswith(state + ".")
    # the default grid for the reference model
    assert [a["key"] for a in out["arms"]] == ["off", "NEXTN-s1-k1-d2", "NEXTN-s2-k1-d3", "NEXTN-s3-k1-d4"]


def test_bad_arm_and_corrupt_state(capsys, tmp_path):
    state = tmp_path / "state.json"
    out = run(capsys, {"action": "plan", "state_file": str(state), "arms": [{"speculative_algorithm": "NEXTN", "steps": 2}]}, fail=True)
    assert "arms[0] has the unknown key 'steps'" in out["msg"]
    state.write_text("{not json")
    out = run(capsys, {"action": "plan", "state_file": str(state)}, fail=True)
    assert "is not JSON" in out["msg"]
    out = run(capsys, {"action": "plan", "state_file": str(tmp_path / "s2.json"), "min_trials": 1}, fail=True)
    assert "min_trials=1" in out["msg"]


def cat_recs(t1, t8, cats8):
    """Records of one trial at concurrency 1 and 8; ``cats8``: the categories block of level 8 (spec_stats.group_stats
    keys that matter here). Level 1 carries a category too, which must not show: only weighted levels are reported."""
    return [{"max_concurrency": 1, "output_throughput": t1, "failed": 0,
             "categories": {"math": {"accept_length": 9.9, "accept_rate": 0.99, "completed": 1}}},
            {"max_concurrency": 8, "output_throughput": t8, "failed": 0, "categories": cats8}]


def test_decision_reports_acceptance_per_category(capsys, tmp_path):
    state = str(tmp_path / "state.json")
    base = {"state_file": state, "fingerprint": FP}
    arms = [{"speculative_algorithm": None}, ARMS[0]]
    run(capsys, dict(base, action="plan", arms=arms))
    rec = dict(base, action="record", objective="throughput", weights={"8": 1})
    # speculation off: the server reports no verify steps, so the categories have no accept length
    off = {"math": {"accept_length": None, "accept_rate": None, "completed": 4},
           "coding": {"accept_length": None, "accept_rate": None, "completed": 4}}
    for t, v in ((1, 900), (2, 905)):
        run(capsys, dict(rec, arm="off", trial=t, records=cat_recs(110, v, off)))
    run(capsys, dict(base, action="finish", arm="off", duration_s=50.0))
    s3 = "NEXTN-s3-k1-d4"
    run(capsys, dict(rec, arm=s3, trial=1, records=cat_recs(200, 1000, {
        "math": {"accept_length": 3.2, "accept_rate": 0.74, "completed": 4},
        "coding": {"accept_length": 2.6, "accept_rate": 0.54, "completed": 4}})))
    run(capsys, dict(rec, arm=s3, trial=2, records=cat_recs(201, 1002, {
        "math": {"accept_length": 3.0, "accept_rate": 0.66, "completed": 4},
        "coding": {"accept_length": 2.4, "accept_rate": 0.46, "completed": 4},
        "rag": {"accept_length": 1.8, "accept_rate": None, "completed": 2}})))
    run(capsys, dict(base, action="finish", arm=s3, duration_s=60.0))
    out = run(capsys, dict(base, action="decide", weights={"8": 1}, report_dir=str(tmp_path / "r"), plots=False))
    cats = out["decision"]["category_acceptance"]
    # by hand: math (3.2 + 3.0) / 2 = 3.1, rate (0.74 + 0.66) / 2 = 0.70, 4 + 4 requests; coding (2.6 + 2.4) / 2 = 2.5,
    # rate (0.54 + 0.46) / 2 = 0.50; rag only in trial 2: 1.8, no rate; off: nothing to report; level 1 not weighted
    assert cats["off"] == {"8": {}}
    assert list(cats[s3]) == ["8"]
    got = cats[s3]["8"]
    assert list(got) == ["coding", "math", "rag"]
    assert got["math"]["accept_length"] == pytest.approx(3.1) and got["math"]["accept_rate"] == pytest.approx(0.70)
    assert got["math"]["requests"] == 8 and got["math"]["trials"] == 2
    assert got["coding"]["accept_length"] == pytest.approx(2.5) and got["coding"]["accept_rate"] == pytest.approx(0.50)
    assert got["rag"] == {"accept_length": pytest.approx(1.8), "accept_rate": None, "requests": 2, "trials": 1}
    md = out["markdown"]
    assert "## Acceptance by workload category" in md
    assert "| arm | coding | math | rag |" in md
    assert "| off | - | - | - |" in md
    assert "| NEXTN-s3-k1-d4 | 2.50 (50 %) | 3.10 (70 %) | 1.80 |" in md
    saved = json.loads((tmp_path / "r" / "decision.json").read_text())
    assert saved["category_acceptance"][s3]["8"]["math"]["accept_length"] == pytest.approx(3.1)


def bucket_recs(t8, buckets8):
    return [{"max_concurrency": 8, "output_throughput": t8, "failed": 0, "input_length_buckets": buckets8}]


def test_decision_reports_acceptance_by_input_length_and_warns_on_long_prompts(capsys, tmp_path):
    state = str(tmp_path / "state.json")
    base = {"state_file": state, "fingerprint": FP}
    run(capsys, dict(base, action="plan", arms=[{"speculative_algorithm": None}, ARMS[0]]))
    rec = dict(base, action="record", objective="throughput", weights={"8": 1})

    def b(acc, dec, tokens):
        return {"accept_length": acc, "decode_tok_s_per_request": dec, "input_tokens_mean": tokens, "completed": 4}
    for t, v in ((1, 900), (2, 905)):
        run(capsys, dict(rec, arm="off", trial=t, records=bucket_recs(v, {"<2k": b(None, 100.0, 800), ">16k": b(None, 80.0, 18000)})))
    run(capsys, dict(base, action="finish", arm="off", duration_s=50.0))
    s3 = "NEXTN-s3-k1-d4"
    # short prompts: 3.2 and 3.0 (mean 3.1), 150 tok/s/req; >16k: 1.10 and 1.08 (mean 1.09), 70 and 74 (mean 72) tok/s/req
    run(capsys, dict(rec, arm=s3, trial=1, records=bucket_recs(1200, {"<2k": b(3.2, 150.0, 800), ">16k": b(1.10, 70.0, 18000)})))
    run(capsys, dict(rec, arm=s3, trial=2, records=bucket_recs(1210, {"<2k": b(3.0, 150.0, 800), ">16k": b(1.08, 74.0, 18000)})))
    run(capsys, dict(base, action="finish", arm=s3, duration_s=60.0))
    out = run(capsys, dict(base, action="decide", weights={"8": 1}, report_dir=str(tmp_path / "r"), plots=False))
    d = out["decision"]
    assert d["winner"] == s3
    got = d["input_length_acceptance"][s3]["8"]
    assert list(got) == ["<2k", ">16k"]
    assert got[">16k"]["accept_length"] == pytest.approx(1.09) and got[">16k"]["decode_tok_s_per_request"] == pytest.approx(72.0)
    assert got["<2k"]["accept_length"] == pytest.approx(3.1) and got["<2k"]["requests"] == 8 and got["<2k"]["trials"] == 2
    # the winner on >16k: accept length 1.09 < 1.3 and decode speedup 72 / 80 = 0.900 < 1 -> one warning
    (w,) = d["long_context_warnings"]
    assert "fails on >16k-token prompts at concurrency 8 (accept length 1.09 < 1.3, per-request decode speedup over off 0.900 < 1)" in w
    md = out["markdown"]
    assert "## Acceptance by input length" in md
    assert "| NEXTN-s3-k1-d4 | 3.10 (150.0) | 1.09 (72.0) |" in md and "| off | - (100.0) | - (80.0) |" in md
    assert "**Warning:** the winner NEXTN-s3-k1-d4 fails on >16k-token prompts" in md
    assert out["record"]["input_length_acceptance"][s3]["8"][">16k"]["accept_length"] == pytest.approx(1.09)


# -- table mode (issue 21): SGLang's adaptive table per bucket --------------------------------------------------------

def test_table_mode_plans_step_counts_stops_per_bucket_and_writes_the_table(capsys, tmp_path):
    state = str(tmp_path / "h" / "state.json")
    base = {"state_file": state, "fingerprint": FP, "mode": "table", "buckets": [1, 32]}
    plan = run(capsys, dict(base, action="plan", table_steps=[3, 0, 1]))
    # one arm per step count, simplest first; steps s -> s + 1 draft tokens, topk 1
    assert [a["key"] for a in plan["pending"]] == ["off", "NEXTN-s1-k1-d2", "NEXTN-s3-k1-d4"]
    rec = dict(base, action="record", objective="throughput", weights={"1": 1, "32": 1})
    # bucket 1 / bucket 32 per trial: off 50/1000, 55/1000, 60/1000; 1 step 95/1100, 100/1100, 105/1100;
    # 3 steps 100/900, 110/900, 120/900
    for t, (a, b) in enumerate([(50, 1000), (55, 1000), (60, 1000)], 1):
        run(capsys, dict(rec, arm="off", trial=t, records=recs(a, b)))
    run(capsys, dict(base, action="finish", arm="off", duration_s=60.0))
    out = run(capsys, dict(rec, arm="NEXTN-s1-k1-d2", trial=1, records=recs(95, 1100)))
    # better than off at both buckets, one trial: nothing dropped (a clear comparison needs min_trials)
    assert out["levels_next"] == [1, 32] and out["early_stop"] is False
    out = run(capsys, dict(rec, arm="NEXTN-s1-k1-d2", trial=2, records=recs(100, 1100)))
    # clear at both buckets against off: bucket 1 [95, 100] vs [50, 55, 60] is 97.5/55 = 1.77; bucket 32 1100/1000 = 1.1
    # with no spread (the interval is the point)
    assert out["early_stop"] is True and out["levels_next"] == []
    assert [(e["bucket"], e.get("against"), e.get("eliminated_by", "-")) for e in out["evidence"]] == [
        (1, "off", "-"), (32, "off", "-"), (1, None, None), (32, None, None)]
    assert out["evidence"][1]["low"] == pytest.approx(1.1)
    run(capsys, dict(rec, arm="NEXTN-s1-k1-d2", trial=3, records=recs(105, 1100)))   # a third trial still counts
    run(capsys, dict(base, action="finish", arm="NEXTN-s1-k1-d2", duration_s=60.0))
    out = run(capsys, dict(rec, arm="NEXTN-s3-k1-d4", trial=1, records=recs(100, 900)))
    # bucket 32 after one trial: 900 against off 1000 x3 and 1 step 1100 x3 (no spread: the pooled interval is the point):
    # 1 step is better by 1100/900 = 1.2222 (the larger of the two) -> 3 steps is no candidate there and is dropped;
    # bucket 1: 100 against off (55 / 100 < 1) and 1 step (100 / 100 = 1, not above 1) -> measured again
    assert out["levels_next"] == [1] and out["early_stop"] is False
    (gone,) = [e for e in out["evidence"] if "eliminated_by" in e]
    assert gone["bucket"] == 32 and gone["eliminated_by"] == "NEXTN-s1-k1-d2" and gone["low"] == pytest.approx(1.2222, abs=1e-4)
    assert "bucket 32 done (NEXTN-s1-k1-d2 better x1.222, low 1.222)" in out["summary"]
    out = run(capsys, dict(rec, arm="NEXTN-s3-k1-d4", trial=2, records=recs(110, 900)))
    # weighted over both buckets 3 steps (500, 505) is clearly below 1 step (597.5, 600, 602.5), but at bucket 1
    # [100, 110] vs [95, 100, 105] is not clear yet: no early stop in table mode
    assert out["early_stop"] is False
    assert "NEXTN-s1-k1-d2 at 1 x" in out["summary"]
    run(capsys, dict(rec, arm="NEXTN-s3-k1-d4", trial=3, records=recs(120, 900)))
    run(capsys, dict(base, action="finish", arm="NEXTN-s3-k1-d4", duration_s=60.0))
    report = tmp_path / "report"
    out = run(capsys, dict(base, action="decide", weights={"1": 1, "32": 1}, report_dir=str(report), plots=False))
    # the static decision stays (weighted means: off 527.5, 1 step 600, 3 steps 505 -> 1 step)
    assert out["decision"]["winner"] == "NEXTN-s1-k1-d2"
    # the table (hand-computed in test_adaptive_table.py): bucket 1 best 3 steps, 1 step within [0.9091, 1.3310] -> [1, 3];
    # bucket 32 best 1 step, off 1.1 and 3 steps 1.222 clear -> [1]
    text = (report / "adaptive_table.json").read_text()
    # bucket 32's key: sqrt(1 x 32) = 5.66 -> 6 (adaptive_table.table_keys)
    assert text == '{\n  "1": {"candidate_steps": [1, 3]},\n  "6": {"candidate_steps": [1]}\n}\n'
    assert json.loads(text) == out["adaptive"]["table"]
    # served: adaptive on, the static settings of the largest candidate (3 steps, 4 draft tokens, topk 1)
    assert out["winner_vars"] == {
        "sglang_server_speculative_algorithm": "NEXTN", "sglang_server_speculative_num_steps": 3,
        "sglang_server_speculative_eagle_topk": 1, "sglang_server_speculative_num_draft_tokens": 4,
        "sglang_server_speculative_draft_model_path": None, "sglang_server_speculative_adaptive": True,
        "sglang_server_speculative_adaptive_config": {"1": {"candidate_steps": [1, 3]}, "6": {"candidate_steps": [1]}}}
    assert json.loads((report / "winner_vars.json").read_text()) == out["winner_vars"]
    assert out["winner"]["key"] == "NEXTN-s3-k1-d4"
    assert out["record"]["server_vars"] == out["winner_vars"] and out["record"]["mode"] == "table"
    assert out["record"]["adaptive"]["table"] == out["adaptive"]["table"]
    md = out["markdown"]
    assert "## Adaptive table" in md and "starting at 3 steps" in md
    # per bucket, speedup over steps 0 (the baseline itself): bucket 1: 1 step 100/55 = 1.818, v = 5^2/(3*100^2) +
    # 5^2/(3*55^2) = 0.0035882 (as 3 over 1 step), df 3.11, half 3.182*0.059901 = 0.19061 -> [1.503, 2.200]; 3 steps 110/55 = 2.000
    # [1.628, 2.458]; bucket 32: 1.100 and 0.900 (900/1000), points (no spread)
    assert "| 1 | 1 | 1 (baseline) | 1.818 [1.503, 2.200] |" in md
    assert "| 2.000 [1.628, 2.458] | 3 | [1, 3] |" in md
    assert "| 32 | 6 | 1 (baseline) | 1.100 [1.100, 1.100] | 0.900 [0.900, 0.900] | 1 | [1] |" in md
    assert (report / "decision.md").read_text() == md


def test_table_mode_falls_back_to_the_static_decision_and_says_why(capsys, tmp_path):
    state = str(tmp_path / "state.json")
    why = "sglang_server_version (SGLang 0.5.10 rules) has no --speculative-adaptive"
    base = {"state_file": state, "fingerprint": FP, "mode": "table", "table_refusal": why}
    plan = run(capsys, dict(base, action="plan"))
    # today's default grid, not the step counts
    assert [a["key"] for a in plan["pending"]] == ["off", "NEXTN-s1-k1-d2", "NEXTN-s2-k1-d3", "NEXTN-s3-k1-d4"]
    rec = dict(base, action="record", weights={"32": 1})
    for key, vals in (("off", (1000, 1010)), ("NEXTN-s1-k1-d2", (1200, 1210))):
        for t, v in enumerate(vals, 1):
            run(capsys, dict(rec, arm=key, trial=t, records=recs(100, v)))
        run(capsys, dict(base, action="finish", arm=key, duration_s=10.0))
    report = tmp_path / "report"
    out = run(capsys, dict(base, action="decide", weights={"32": 1}, report_dir=str(report), plots=False))
    assert out["decision"]["winner"] == "NEXTN-s1-k1-d2"
    assert out["winner_vars"]["sglang_server_speculative_num_steps"] == 1
    assert out["winner_vars"]["sglang_server_speculative_adaptive"] is False
    assert out["adaptive"]["refusal"] == why and out["adaptive"]["table"] is None
    assert "Served: the static winner `NEXTN-s1-k1-d2` above, because adaptive was not an arm: " + why in out["markdown"]
    assert not (report / "adaptive_table.json").exists()


def test_table_mode_refuses_arms_a_table_cannot_hold(capsys, tmp_path):
    out = run(capsys, {"state_file": str(tmp_path / "s.json"), "action": "plan", "mode": "table",
                       "arms": [{"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 4,
                                 "speculative_num_draft_tokens": 8}]}, fail=True)
    assert "cannot be a step count of an adaptive table: speculative_eagle_topk 4" in out["msg"]


def test_table_mode_static_decision_reads_complete_sweeps_only():
    # 3 steps was dropped at bucket 32 after trial 1: trials 2 and 3 measured bucket 1 only
    s3 = {"key": "NEXTN-s3-k1-d4"}
    off = {"key": "off"}
    full = recs(100, 900)
    short = [recs(110, 0)[0]]
    res = [{"arm": off, "trials": [recs(50, 1000)] * 3}, {"arm": s3, "trials": [full, short, short]}]
    out, notes = spec_tune.complete_sweeps(res, {1: 1.0, 32: 1.0})
    assert [(r["arm"]["key"], len(r["trials"])) for r in out] == [("off", 3), ("NEXTN-s3-k1-d4", 1)]
    assert out[1]["trials"][0] is full
    assert notes == ["NEXTN-s3-k1-d4: trial(s) 2, 3 measured only the buckets [1] (table mode measures a step count no more "
                     "where it is significantly worse); the static decision reads its 1 complete sweep(s)"]
    # an arm with no complete sweep is left out of the static decision
    out, notes = spec_tune.complete_sweeps([{"arm": s3, "trials": [short]}], {1: 1.0, 32: 1.0})
    assert out == [] and len(notes) == 1
