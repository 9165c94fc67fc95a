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
    run(capsys, dict(base, action="finish", arm="off", duration_s=60.0))
    # third arm interrupted after one trial: a new plan resumes it, finished arms are not run again
    run(capsys, dict(rec, arm="NEXTN-s3-k1-d4", trial=1, records=recs(215, 2030, 4.0)))
    plan = run(capsys, dict(base, action="plan", arms=ARMS, running=running))
    assert [(a["key"], a["status"], a["trials_done"]) for a in plan["pending"]] == [("NEXTN-s3-k1-d4", "partial", 1)]
    assert plan["eta_s"] == pytest.approx(80.0)   # mean of 100 s and 60 s, one arm left
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
    # deciding again without new measurements keeps the decision's time (the host's decision file stays unchanged)
    again = run(capsys, dict(base, action="decide", weights=w, report_dir=str(report), plots=False))
    assert again["decision"]["time"] == out["decision"]["time"]


def test_fingerprint_mismatch_is_refused_and_fresh_moves_the_state(capsys, tmp_path):
    state = str(tmp_path / "state.json")
    run(capsys, {"action": "plan", "state_file": state, "fingerprint": FP})
    other = dict(FP, sglang_version="0.5.10")
    out = run(capsys, {"action": "plan", "state_file": state, "fingerprint": other}, fail=True)
    assert "sglang_version was '0.5.9', now '0.5.10'" in out["msg"] and "spec_tune_fresh=true" in out["msg"]
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
