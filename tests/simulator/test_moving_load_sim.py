"""The moving load (issue 21) against the SGLang simulator (a test double): the client follows each phase's cap, a lower
cap lets the requests above it finish, and the per-phase metrics count what happened in each window."""
from __future__ import annotations

import re

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc
from ansible_collections.llmops.sglang.plugins.module_utils._bench import phases as bp
from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads as wl

ON_ARGS = ["--tp", "4", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1",
           "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2", "--max-running-requests", "64"]


def test_the_load_follows_each_phases_cap(sglang_sim):
    srv = sglang_sim(ON_ARGS)
    prompts = bc.workload_prompts(wl.builtin_rows(), 40, 24, 1, "sglang")
    phases = [{"concurrency": 1, "duration_s": 1.5}, {"concurrency": 6, "duration_s": 1.5}, {"concurrency": 2, "duration_s": 1.5}]
    seen = []
    results, duration, start, total = bc.run_phases(bc.Target(srv.url), prompts, phases, on_phase=seen.append)
    assert seen == [0, 1, 2] and total == 4.5
    assert results and all(r.success for r in results)
    assert [r.start_time for r in results] == sorted(r.start_time for r in results)
    # no request starts after the last phase; the run ends when the last one in flight does
    assert max(r.start_time for r in results) - start < total and duration >= total
    one, two, three = bp.phase_metrics(results, phases, start)
    # 24 output tokens take about 0.2 s here, so each window is full: in flight ~1, then ~6 (a request takes a few ms to
    # replace), then 2 plus the tail of phase 2's requests finishing
    assert 0.85 <= one["mean_in_flight"] <= 1.0
    assert 5.0 <= two["mean_in_flight"] <= 6.0
    assert 1.8 <= three["mean_in_flight"] <= 3.0
    assert two["requests"] > one["requests"] and one["accept_length"] is not None
    assert sum(p["requests"] for p in (one, two, three)) == len(results)
    # the caps rise into phases 1 and 2 (no drain); into phase 3 about 6 are in flight over a cap of 2, and they finish
    # within a request's lifetime (~0.2 s), after which the settled window holds the rest of the phase
    assert one["settle_s"] == 0.0 and two["settle_s"] == 0.0
    assert 0.0 < three["settle_s"] < 0.5 and three["settled_throughput"] > 0


def test_a_conversation_or_bad_phases_are_refused_before_a_request(sglang_sim):
    srv = sglang_sim(ON_ARGS, instant=True)
    prompts = bc.workload_prompts(wl.builtin_rows(), 2, 8, 1, "sglang")
    for phases, fragment in (([], "give a list of phases"), ([{"concurrency": 0, "duration_s": 1}], "concurrency=0")):
        with pytest.raises(bc.BenchError, match=re.escape(fragment)):
            bc.run_phases(bc.Target(srv.url), prompts, phases)
    with pytest.raises(bc.BenchError, match="at least one prompt"):
        bc.run_phases(bc.Target(srv.url), [], [{"concurrency": 1, "duration_s": 1}])


def test_the_benchmark_role_runs_a_moving_load_and_records_each_phase(sglang_sim, tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    srv = sglang_sim(ON_ARGS + ["--enable-metrics"])
    inv = tmp_path / "hosts.ini"
    inv.write_text("[gpu_hosts]\nsimhost ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    reports = tmp_path / "reports"
    extra = {"sglang_benchmark_state_dir": str(tmp_path / "state"), "sglang_benchmark_url": srv.url,
             "sglang_benchmark_workload": "builtin", "sglang_benchmark_output_len": 24, "sglang_benchmark_num_prompts": 30,
             "sglang_benchmark_phases": [{"concurrency": 1, "duration_s": 1.5}, {"concurrency": 4, "duration_s": 1.5}],
             "sglang_benchmark_report_dir": str(reports), "sglang_benchmark_run_id": "moving", "sglang_benchmark_plots": False}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv),
                           str(repo / "playbooks" / "benchmark.yml"), "-e", json.dumps(extra)], cwd=str(repo),
                          env=dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_NOCOLOR="1"),
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    (rec,) = [json.loads(line) for line in (reports / "simhost" / "moving" / "results.jsonl").read_text().splitlines()]
    assert rec["arrival"] == "phases" and rec["max_concurrency"] == 4
    assert [p["concurrency"] for p in rec["phases"]] == [1, 4]
    assert 0.85 <= rec["phases"][0]["mean_in_flight"] <= 1.0 and 3.3 <= rec["phases"][1]["mean_in_flight"] <= 4.0
    assert sum(p["requests"] for p in rec["phases"]) == rec["completed"] + rec.get("failed", 0)
    assert "moving load 1/4 (3 s)" in proc.stdout
    md = (reports / "simhost" / "moving" / "summary.md").read_text()
    assert "## Per phase (a load that moves)" in md and "| 1 | 2 | 4 | 1.5 |" in md
