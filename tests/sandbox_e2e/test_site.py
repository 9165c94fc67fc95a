"""The main job end to end on the embedded sandbox: ``ansible-playbook site.yml``.

Runs in order (module scope): the sandbox brought up (``tests/sandbox/sandbox.yml``, as ``make site`` does;
it is not part of site.yml), a first full run (preflight, host, serve, verify,
benchmark, report), a second run that must change nothing, a ``--check --diff`` run that must change
nothing, and a run with an inconsistent server description that must stop in preflight before any
change, and last ``playbooks/mtp_ab.yml`` with the server managed (both arms, the decision at 64, the
winner left running). The expected numbers come from the simulator's documented defaults (docs/simulator.md: a
test double, not a model): MTP with one draft token, 14.815 ms per verify step (135 tok/s at accept length 2.00), and
draft acceptance by prompt content (docs/simulator.md "Acceptance"). With speculative decoding on, the benchmark stage
sends the built-in prompt set (workload auto -> builtin): the concurrency-1 level's 4 prompts are, with seed 1, one each
of extraction, math, qa and rag (workloads.stratified: categories sorted, rotated by 1), accepted at p = 0.82, 1.00,
0.62, 0.56, so 1000-token outputs take 999 / (1 + p) verify steps each and the pooled accept length is
4 / (1/1.82 + 1/2 + 1/1.62 + 1/1.56) = 1.733, i.e. 1.733 / 14.815 ms = 117 tok/s.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from sbx import REPO_ROOT, run_playbook, sandbox_env

pytestmark = [pytest.mark.sandbox]
HOST = "sglang-sbx-1"
STATE_DIR = "/var/lib/llmops/benchmark"      # sglang_benchmark_state_dir (default)


@pytest.fixture(scope="module")
def first_run(sandbox_up):
    # A host with no recorded benchmark (the state an earlier session may have left is removed), as on a fresh host.
    subprocess.run(["podman", "exec", HOST, "rm", "-rf", STATE_DIR], env=sandbox_env(), check=True, timeout=60)
    run = run_playbook("site.yml")
    assert run.rc == 0, run.output[-6000:]
    return run


def _latest_report(host: str) -> Path:
    runs = sorted((REPO_ROOT / "reports" / host).iterdir(), key=lambda p: p.stat().st_mtime)
    assert runs, f"no report directory under reports/{host}"
    return runs[-1]


def test_site_ends_with_the_benchmark_table_printed_and_saved(first_run):
    report = _latest_report(HOST)
    lines = [json.loads(line) for line in (report / "results.jsonl").read_text().splitlines() if line.strip()]
    # Default sweep: concurrency 1 and 8, 1000 in / 1000 out (bench_serving JSONL keys).
    assert sorted(r["max_concurrency"] for r in lines) == [1, 8]
    for r in lines:
        assert r["random_input_len"] == 1000 and r["random_output_len"] == 1000
        assert r["completed"] > 0
    single = next(r for r in lines if r["max_concurrency"] == 1)
    # MTP on, so the built-in prompts (not random ids), and no synthetic-prompt warning; by hand (module docstring):
    # accept length 1.733, 117 ± 7 tok/s
    assert single["dataset_name"] == "builtin" and single["warnings"] == []
    assert sorted(single["categories"]) == ["extraction", "math", "qa", "rag"]
    assert single["categories"]["math"]["accept_length"] == pytest.approx(2.0, abs=0.01)
    assert single["accept_length"] == pytest.approx(1.733, abs=0.05)
    assert 110 <= single["output_throughput"] <= 124, single["output_throughput"]
    assert "## Per category (workload `builtin`)" in (report / "summary.md").read_text()
    # summary.md holds one table row per level, with the JSONL's numbers (1 decimal for tok/s).
    # (the per-category table's rows start "| 1 | 1 | <category> |"; the level table's rate cell is "-")
    rows = [line for line in (report / "summary.md").read_text().splitlines() if line.startswith("| 1 | 1 | - |")]
    assert len(rows) == 1 and f"| {single['output_throughput']:.1f} |" in rows[0], rows
    # The same table is printed at the end of the play (the callback folds long lines, so compare cells).
    printed = " ".join(first_run.output.split())
    assert f"| 1 | 1 | - | {single['completed']} | 0 | {single['output_throughput']:.1f} |" in printed
    assert f"report: {report}" in printed
    # each level's line, shown under the sweep task as the level ends, carries the JSONL's numbers too
    assert f"[{HOST}] Benchmark level 1/2: concurrency 1, {single['num_prompts']} requests" in first_run.output
    assert (f"[{HOST}] Result concurrency 1: {single['completed']} ok / 0 failed; output {single['output_throughput']:.1f} tok/s, "
            f"{single['decode_tok_s_per_request']:.1f} tok/s per request") in printed
    assert "1 level(s) left, ETA ~" in printed and "0 level(s) left, ETA ~0 s" in printed
    summary = json.loads((report / "summary.json").read_text())
    assert summary, "summary.json is empty"


def test_verify_read_the_draft_model_from_the_server_logs(first_run):
    # speculative_check reads the unit's journal on the sandbox host: the simulator logs, per TP rank, the target's
    # "Load weight end." and then the draft's (SGLang builds Qwen3_5ForCausalLMMTP from the checkpoint's MTP head).
    printed = " ".join(first_run.output.split())
    assert "PASS (SGLang 0.5.9, speculation on)" in printed
    assert "draft Qwen3_5ForCausalLMMTP loaded after the target Qwen3_5MoeForConditionalGeneration on TP0, TP1, TP2, TP3" in printed


def test_a_normal_run_has_no_host_pattern_warnings(first_run):
    # serve.yml's multi-node and router plays name groups that a single-node fleet does not have
    # (the first run on a bare host may warn that nvidia-smi is missing before the driver is installed; the
    # no-change run below must have no warning at all)
    assert "Could not match supplied host pattern" not in first_run.output


def test_second_run_changes_nothing_and_skips_the_benchmark(first_run):
    report = _latest_report(HOST)
    state = json.loads(subprocess.run(["podman", "exec", HOST, "cat", f"{STATE_DIR}/sglang-server.json"], env=sandbox_env(),
                                      capture_output=True, text=True, timeout=60, check=True).stdout)
    # the first run recorded what it measured next to its result: the report directory, the image the container runs
    assert state["result"]["report_dir"] == str(report) and state["run_id"] == report.name
    assert re.fullmatch(r"(sha256:)?[0-9a-f]{64}", state["inputs"]["server"]["image_id"] or ""), state["inputs"]["server"]
    assert state["inputs"]["host"]["gpu_count"] == 4 and state["inputs"]["server"]["version"] == "0.5.9"
    run = run_playbook("site.yml")
    assert run.rc == 0, run.output[-6000:]
    assert run.recap, run.output[-3000:]
    assert run.changed_hosts() == {}, run.output[-6000:]
    printed = " ".join(run.output.split())
    assert f"benchmark skipped on {HOST}: nothing changed since run {report.name} (" in printed, run.output[-4000:]
    assert "Benchmark level 1/" not in run.output                # no level ran (a line under the sweep task)
    assert _latest_report(HOST) == report                      # nothing new measured
    # the last table is shown again, with the same numbers as the first run's report
    single = next(json.loads(ln) for ln in (report / "results.jsonl").read_text().splitlines() if '"max_concurrency": 1,' in ln)
    assert f"| 1 | 1 | - | {single['completed']} | 0 | {single['output_throughput']:.1f} |" in printed
    assert f"last report: {report} (run {report.name}, " in printed
    assert "[WARNING]" not in run.output, [ln for ln in run.output.splitlines() if "WARNING" in ln]
    # the serve stage found the host steady and did not roll it out again
    assert f"{HOST}: steady (unit, environment and state already as deployed): no rollout" in printed


def test_check_diff_on_a_provisioned_sandbox_changes_nothing(first_run):
    run = run_playbook("site.yml", "--check", "--diff")
    assert run.rc == 0, run.output[-6000:]
    assert run.changed_hosts() == {}, run.output[-6000:]


def test_inconsistent_server_description_fails_in_preflight_before_any_change(first_run):
    extra = json.dumps({"sglang_server_speculative_eagle_topk": None, "sglang_server_speculative_num_draft_tokens": None})
    run = run_playbook("site.yml", "-e", extra)
    assert run.rc != 0
    assert "sglang_server_speculative_eagle_topk" in run.output
    assert "sglang_server_speculative_num_steps" in run.output
    # It stopped in preflight: no later stage started, nothing changed on the host.
    assert "PLAY [Host" not in run.output and "PLAY [Serve" not in run.output, run.output[-4000:]
    assert run.recap[HOST]["changed"] == 0
    assert run.recap[HOST]["failed"] >= 1


def _sandbox_server_info() -> dict:
    out = subprocess.run(["podman", "exec", HOST, "curl", "-sf", "http://127.0.0.1:30000/server_info"], env=sandbox_env(),
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, f"no /server_info on {HOST}: {out.stderr}"
    return json.loads(out.stdout)


def test_mtp_ab_measures_both_arms_and_leaves_the_winner_running(first_run):
    """playbooks/mtp_ab.yml with the server managed: MTP off and on served, verified and swept at [1] plus the target 64
    (added by the playbook), on the built-in prompt set (mtp_ab.yml's default). By hand from the simulator's model
    (docs/simulator.md): at 1 the level's 4 prompts (extraction, math, qa, rag; see the module docstring) decode at
    1.733 tokens per 14.815 ms verify step = 117 tok/s against 110 -> speedup 1.064; at 64, 55.45 ms per step against
    24.84 ms, with the ten categories' mean accept length 1.644 instead of 2 -> about 0.896 x 1.644 / 2 = 0.74 in
    steady state (higher as the batch drains), so MTP loses and the decision at 64 is MTP off; the service is
    redeployed without speculative decoding. The last test of the module: it leaves MTP off."""
    assert _sandbox_server_info()["speculative_algorithm"] == "EAGLE"       # site.yml left MTP on (NEXTN -> EAGLE)
    run_id = f"ab-e2e-{int(time.time())}"
    extra = json.dumps({"sglang_target_concurrency": 64, "sglang_benchmark_concurrency": [1], "sglang_benchmark_output_len": 256,
                        "sglang_benchmark_ab_run_id": run_id, "sglang_benchmark_plots": True})
    run = run_playbook("playbooks/mtp_ab.yml", "-e", extra)
    assert run.rc == 0, run.output[-6000:]
    ab = json.loads((REPO_ROOT / "reports" / HOST / run_id / "ab_summary.json").read_text())
    assert [r["level"] for r in ab["levels"]] == [1, 64]
    assert ab["levels"][0]["speedup"] == pytest.approx(1.064, abs=0.05)
    assert 0.6 < ab["levels"][1]["speedup"] < 0.9
    assert ab["warnings"] == [] and len(ab["levels"][1]["categories"]) == 10
    assert 1 < ab["crossover"]["concurrency"] < 64
    assert (ab["decision"]["winner"], ab["decision"]["basis"]) == ("mtp_off", "measured")
    for arm in (run_id + "-mtp_off", run_id + "-mtp_on"):
        assert len((REPO_ROOT / "reports" / HOST / arm / "results.jsonl").read_text().splitlines()) == 2
    printed = " ".join(run.output.split())
    assert "service: redeployed with MTP off" in printed
    info = _sandbox_server_info()
    assert info["speculative_algorithm"] is None, info.get("speculative_algorithm")
    assert info["max_running_requests"] == 64
