"""Acceptance by input length end to end (issue 23): a long-context workload through the benchmark playbook against the
simulator, whose acceptance falls past the draft's training length (SGLANG_SIM_DRAFT_TRAIN_LEN, default 2048 tokens) in
the shape of the published EAGLE3 Qwen3-8B figures (tests/sandbox/sglang_sim/acceptance.py). The expected values are
computed by hand from that model, not read back from the code."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ON_ARGS = ["--tp", "4", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1",
           "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2", "--max-running-requests", "64"]
UNIT = "Solve 15*23 = x. "      # 7 tokens to the simulator's counter (one per word or punctuation mark)


def math_prompt(tokens):
    """A math prompt of exactly ``tokens`` simulator tokens: the unit repeated, then single-token ``x`` words."""
    k, m = divmod(tokens, 7)
    return UNIT * k + "x " * m


def _playbook(tmp_path, extra):
    inv = tmp_path / "hosts.ini"
    inv.write_text("[gpu_hosts]\nsimhost ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    extra = dict({"sglang_benchmark_state_dir": str(tmp_path / "state")}, **extra)
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), str(REPO / "playbooks" / "benchmark.yml"),
           "-e", json.dumps(extra)]
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_NOCOLOR="1")
    return subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300, check=False)


def test_accept_length_falls_by_input_bucket_as_the_model_says(sglang_sim, tmp_path):
    # One draft token (NEXTN 1/1/2), math text (per-token acceptance 1.0): accept length 1 + g(L), g from the published
    # accept lengths (2.30, 2.04, 1.69, 1.29, 1.09 at 2k, 4k, 8k, 12k, 16k): g = (AL - 1) / 1.30, so
    #   1000 tokens  (<2k):    g = 1                 -> 2.0000
    #   4096 tokens  (2k-8k):  g = 1.04 / 1.30 = 0.8 -> 1.8000
    #   12288 tokens (8k-16k): g = 0.29 / 1.30       -> 1.2231
    #   20000 tokens (>16k):   g = 0.09 / 1.30 (flat past 16k) -> 1.0692
    srv = sglang_sim(ON_ARGS + ["--context-length", "65536"], instant=True)
    work = tmp_path / "long.jsonl"
    lengths = (1000, 4096, 12288, 20000)
    work.write_text("".join(json.dumps({"prompt": math_prompt(n), "category": "math-%d" % n}) + "\n" for n in lengths))
    reports = tmp_path / "reports"
    proc = _playbook(tmp_path, {
        "sglang_benchmark_url": srv.url, "sglang_benchmark_workload": str(work), "sglang_benchmark_concurrency": [1],
        "sglang_benchmark_num_prompts": 4, "sglang_benchmark_prompts_per_concurrency": 1, "sglang_benchmark_output_len": 600,
        "sglang_benchmark_report_dir": str(reports), "sglang_benchmark_run_id": "long", "sglang_benchmark_plots": False})
    assert proc.returncode == 0, proc.stdout[-4000:]
    rec = json.loads((reports / "simhost" / "long" / "results.jsonl").read_text().splitlines()[0])
    buckets = rec["input_length_buckets"]
    assert list(buckets) == ["<2k", "2k-8k", "8k-16k", ">16k"]
    assert [buckets[b]["input_tokens_mean"] for b in buckets] == [1000, 4096, 12288, 20000]
    # ~300-560 verify steps per request of 600 tokens: the std of each measured mean is below 0.03
    expected = {"<2k": 2.0, "2k-8k": 1.8, "8k-16k": 1 + 0.29 / 1.30, ">16k": 1 + 0.09 / 1.30}
    for bucket, value in expected.items():
        assert buckets[bucket]["accept_length"] == pytest.approx(value, abs=0.08), (bucket, buckets[bucket]["accept_length"])
    print("\nper-bucket accept length (measured vs by hand):",
          ", ".join("%s %.4f / %.4f" % (b, buckets[b]["accept_length"], v) for b, v in expected.items()))
    summary = json.loads((reports / "simhost" / "long" / "summary.json").read_text())
    assert [r["bucket"] for r in summary["input_length_buckets"]] == list(expected)
    # 8k-16k (1.22) and >16k (1.07) are below 1.3 while <2k (2.00) is not: one warning naming both
    (warning,) = summary["input_length_warnings"]
    assert "accept length 2.00 on <2k-token prompts but 1.2" in warning and " on 8k-16k, 1.0" in warning and warning.count(" on >16k") == 1
    md = (reports / "simhost" / "long" / "summary.md").read_text()
    assert "## Accept length by input length" in md and "| 1 | 1 | >16k | 20000 |" in md


def _by_hand_accept_length(tokens):
    """1 + g(L) with one draft token and math's per-token acceptance 1.0: g = (AL - 1) / 1.30 of the published EAGLE3
    Qwen3-8B accept lengths (2.30, 2.04, 1.69, 1.29, 1.09 at 2048, 4096, 8192, 12288, 16384 tokens), linear between
    them, 1 up to 2048 tokens, flat past 16384."""
    points = [(2048, 1.0), (4096, 1.04 / 1.30), (8192, 0.69 / 1.30), (12288, 0.29 / 1.30), (16384, 0.09 / 1.30)]
    if tokens <= 2048:
        return 2.0
    for (n0, g0), (n1, g1) in zip(points, points[1:]):
        if tokens <= n1:
            return 1.0 + g0 + (g1 - g0) * (tokens - n0) / float(n1 - n0)
    return 1.0 + points[-1][1]


def test_builtin_long_fills_every_input_bucket_and_acceptance_falls(sglang_sim, tmp_path):
    # The named workload builtin-long, math only: four rows of about 1000/4000/12000/20000 tokens (1.3 tokens per word;
    # the simulator counts one token per word or punctuation mark, so the server's prompt_tokens differ a little), one
    # per input-length bucket. Each bucket's accept length is 1 + g(prompt tokens), by hand from the published curve.
    srv = sglang_sim(ON_ARGS + ["--context-length", "65536"], instant=True)
    reports = tmp_path / "reports"
    proc = _playbook(tmp_path, {
        "sglang_benchmark_url": srv.url, "sglang_benchmark_workload": "builtin-long",
        "sglang_benchmark_workload_categories": ["math"], "sglang_benchmark_concurrency": [1],
        "sglang_benchmark_num_prompts": 4, "sglang_benchmark_prompts_per_concurrency": 1, "sglang_benchmark_output_len": 600,
        "sglang_benchmark_report_dir": str(reports), "sglang_benchmark_run_id": "blong", "sglang_benchmark_plots": False})
    assert proc.returncode == 0, proc.stdout[-4000:]
    rec = json.loads((reports / "simhost" / "blong" / "results.jsonl").read_text().splitlines()[0])
    assert rec["dataset_name"] == "builtin-long"
    buckets = rec["input_length_buckets"]
    assert list(buckets) == ["<2k", "2k-8k", "8k-16k", ">16k"]
    shown = []
    for bucket, row in buckets.items():
        expected = _by_hand_accept_length(row["input_tokens_mean"])
        assert row["accept_length"] == pytest.approx(expected, abs=0.08), (bucket, row)
        shown.append("%s %d tokens %.3f / %.3f" % (bucket, row["input_tokens_mean"], row["accept_length"], expected))
    assert buckets["<2k"]["accept_length"] > buckets["2k-8k"]["accept_length"] > buckets["8k-16k"]["accept_length"] \
        > buckets[">16k"]["accept_length"]
    print("\nbuiltin-long per-bucket accept length (measured / by hand):", ", ".join(shown))
