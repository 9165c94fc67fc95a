"""The sglang_benchmark role's sweep through ansible-playbook (local connection) against the SGLang simulator (a test
double) on loopback: one serving_benchmark task for the whole sweep, whose action plugin plans it once and shows a line
per level as it ends; the report and the table after it; the early stop on a failed level; check mode; an input refused
by the role's variable name before anything is sent.

The sweep is small: concurrency [2, 1] (run ascending), max(2 prompts, 1 x concurrency) = 2 requests per level,
16-token prompts, 8-token answers, no warm-up, instant simulator (no sleeping), no plots.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.simulator

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK_BIN = Path(sys.executable).with_name("ansible-playbook")
SWEEP = {"sglang_benchmark_concurrency": [2, 1], "sglang_benchmark_num_prompts": 2, "sglang_benchmark_prompts_per_concurrency": 1,
         "sglang_benchmark_input_len": 16, "sglang_benchmark_output_len": 8, "sglang_benchmark_warmup_requests": 0,
         "sglang_benchmark_workload": "random-ids", "sglang_benchmark_plots": False}


def run_role(tmp_path, url, extra=None, check=False):
    """Run the role's sweep.yml against ``url``; (rc, output, sglang_benchmark_result or None, report dir)."""
    out_file = tmp_path / "result.json"
    reports = tmp_path / "reports"
    play = [{"name": "benchmark sweep", "hosts": "target", "gather_facts": False,
             "vars": dict(SWEEP, sglang_benchmark_url=url, sglang_benchmark_report_dir=str(reports)),
             "tasks": [{"name": "Sweep", "ansible.builtin.include_role": {"name": "llmops.sglang.sglang_benchmark", "tasks_from": "sweep.yml"}},
                       {"name": "Write the result", "ansible.builtin.copy": {"dest": str(out_file), "mode": "0644",
                                                                             "content": "{{ sglang_benchmark_result | to_json }}"},
                        "check_mode": False}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"target": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"),
               ANSIBLE_CACHE_PLUGIN="memory", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_HOME=str(tmp_path / "home"))
    cmd = [str(PLAYBOOK_BIN), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")]
    cmd += ["-e", json.dumps(extra)] if extra else []
    cmd += ["--check"] if check else []
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300, check=False)
    result = json.loads(out_file.read_text()) if out_file.exists() else None
    return proc.returncode, proc.stdout + proc.stderr, result, reports


def _jsonl(reports):
    files = list(reports.glob("target/*/results.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


@pytest.fixture
def sim(sglang_sim):
    return sglang_sim(["--enable-metrics"], instant=True)


def test_one_task_a_line_per_level_then_the_report_and_the_table(tmp_path, sim):
    rc, out, result, reports = run_role(tmp_path, sim.url)
    assert rc == 0, out[-4000:]
    assert out.count("TASK [llmops.sglang.sglang_benchmark : Run the sweep") == 1
    assert "Benchmark level" not in "".join(line for line in out.splitlines() if line.startswith("TASK"))
    lines = [line for line in out.splitlines() if line.startswith("[target] ")]
    assert [line.split(":")[0] for line in lines] == [
        "[target] Benchmark level 1/2", "[target] Result concurrency 1", "[target] Benchmark level 2/2", "[target] Result concurrency 2"]
    assert lines[0] == "[target] Benchmark level 1/2: concurrency 1, 2 requests"
    assert lines[1].startswith("[target] Result concurrency 1: 2 ok / 0 failed; output ") and "accept len - (random-ids)" in lines[1]
    assert " 1 level(s) left, ETA ~" in lines[1] and lines[3].endswith(" 0 level(s) left, ETA ~0 s")
    records = _jsonl(reports)
    assert [(r["level"], r["max_concurrency"], r["completed"]) for r in records] == [(1, 1, 2), (2, 2, 2)]
    # each level's record as measured, written before the report (issue #23)
    (raw,) = reports.glob("target/*/raw_records.jsonl")
    assert [json.loads(line) for line in raw.read_text().splitlines()] == result["records"]
    assert [r["level"] for r in result["records"]] == [1, 2] and result["failed"] is False and result["problems"] == []
    printed = " ".join(out.split())
    assert "| 1 | 1 | - | 2 | 0 |" in printed and "| 2 | 2 | - | 2 | 0 |" in printed
    assert "report: %s" % result["report_dir"] in printed


def test_a_failed_level_skips_the_rest_and_the_role_fails_after_the_report(tmp_path, sim):
    rc, out, result, reports = run_role(tmp_path, sim.url, {"sglang_benchmark_min_output_throughput": 1000000})
    assert rc != 0
    printed = " ".join(out.split())
    assert "1 level(s) skipped (sglang_benchmark_stop_on_failure); FAILED: serving_benchmark: 1 gate(s) missed" in printed
    assert "Benchmark level 2/2" not in out
    assert "[1 of 2 level(s) measured; report: %s" % next(reports.glob("target/*")) in printed
    assert len(_jsonl(reports)) == 1                               # the measured level is in the report
    # raw records first (issue #23): the level the gate refused reached the disk before the gate or the report
    raw = next(reports.glob("target/*/raw_records.jsonl"))
    assert [(r["level"], r["max_concurrency"]) for r in map(json.loads, raw.read_text().splitlines())] == [(1, 1)]
    assert "records as measured: %s]" % raw in printed


def test_check_mode_measures_nothing(tmp_path, sim):
    rc, out, result, reports = run_role(tmp_path, sim.url, check=True)
    assert rc == 0, out[-4000:]
    assert "Result concurrency" not in out and not reports.exists()
    assert result["records"] == [] and result["failed"] is False


def test_a_string_of_levels_is_refused_by_the_role_variable_before_anything_is_sent(tmp_path, sim):
    rc, out, result, reports = run_role(tmp_path, sim.url, {"sglang_benchmark_concurrency": "1,8"})
    assert rc != 0
    printed = " ".join(out.split())
    assert "sglang_benchmark_concurrency='1,8': must be a list of levels" in printed and "(nothing was sent)" in printed
    assert "Benchmark level" not in out and not reports.exists()
