"""What does the tuner's table mode cost (speculative_tuning_mode: table, issue 21), against the full grid?

Prints numbers (a measurement script, not a test). Two ways to measure every (bucket, step count) pair ``trials`` times:

* table mode (the speculative_tuning role): one server start per step count, every bucket measured as a concurrency
  level of each trial's sweep within that start, plus one start to serve the decision: ``S + 1`` starts, ``S x T``
  sweeps of ``B`` levels;
* the full grid: one server start per (bucket, step count), ``T`` trials of one level each: ``B x S`` starts,
  ``B x S x T`` runs.

Both measure the same ``B x S x T`` level runs (the same prompts, trials and early-stop rule), so table mode saves server
starts only. Time of a level run: from the SGLang simulator's timing model (tests/sandbox/sglang_sim/timing.py, the
reference host's seed: t0 8.84 ms, k 0.25 ms/request, verify 3.83 ms, draft 1.5 + 0.145 ms/request per step), each draft
token accepted with probability ``--accept-p`` along the chain; a level of concurrency c sends ``max(num_prompts,
prompts_per_concurrency x c)`` requests of ``--output-len`` tokens in rounds of c (decode only, prefill left out).
Time of a server start (pull excluded: weights load, CUDA-graph capture, health, speculative_check): ``--start-s``, one
value per column; it is a parameter, not measured here (the simulator starts in about a second, a 122B model on real
GPUs in minutes).

Goal (issue 21): table mode at most 50 % of the full grid's time.

Usage: .venv/bin/python benchmarks/adaptive_tune_cost.py [--buckets 1,8,32,64] [--steps 0,1,2,3,5,7] [--trials 3]
       [--start-s 60,300,600,1200] [--accept-p 0.8] [--output-len 1000] [--num-prompts 16] [--prompts-per-concurrency 4]
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))

from sglang_sim.timing import TimingModel  # noqa: E402


def level_run_s(steps, concurrency, accept_p, output_len, num_prompts, prompts_per_concurrency):
    """Seconds one level run takes in the simulator's model: rounds of ``concurrency`` requests, each decoding
    ``output_len`` tokens at ``accept length`` tokens per (verify) step of ``concurrency`` running requests."""
    model = TimingModel(num_steps=steps, num_draft_tokens=steps + 1 if steps else 0, eagle_topk=1)
    requests = max(num_prompts, prompts_per_concurrency * concurrency)
    rounds = -(-requests // concurrency)
    accept = model.expected_accept_length(steps, accept_p) if steps else 1.0
    return rounds * (output_len / accept) * model.decode_step_s(concurrency)


def costs(buckets, steps, trials, start_s, run_s):
    """``{mode: (starts, runs, seconds)}`` for table mode and the full grid; ``run_s[(s, b)]`` seconds per level run."""
    measure = trials * sum(run_s.values())
    table_starts = len(steps) + 1
    grid_starts = len(buckets) * len(steps)
    return {"table": (table_starts, len(steps) * trials, table_starts * start_s + measure),
            "grid": (grid_starts, grid_starts * trials, grid_starts * start_s + measure)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--buckets", default="1,8,32,64")
    ap.add_argument("--steps", default="0,1,2,3,5,7")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--start-s", default="60,300,600,1200")
    ap.add_argument("--accept-p", type=float, default=0.8)
    ap.add_argument("--output-len", type=int, default=1000)
    ap.add_argument("--num-prompts", type=int, default=16)
    ap.add_argument("--prompts-per-concurrency", type=int, default=4)
    a = ap.parse_args()
    buckets = [int(x) for x in a.buckets.split(",")]
    steps = [int(x) for x in a.steps.split(",")]
    starts = [float(x) for x in a.start_s.split(",")]
    run_s = dict(((s, b), level_run_s(s, b, a.accept_p, a.output_len, a.num_prompts, a.prompts_per_concurrency))
                 for s in steps for b in buckets)
    print("buckets %s, step counts %s, %d trials, accept p %.2f, %d output tokens, max(%d, %d x c) requests per level"
          % (buckets, steps, a.trials, a.accept_p, a.output_len, a.num_prompts, a.prompts_per_concurrency))
    print("")
    print("level run time (s, simulator timing model):")
    print("| steps | " + " | ".join("c=%d" % b for b in buckets) + " |")
    print("|---:|" + "---:|" * len(buckets))
    for s in steps:
        print("| %d | %s |" % (s, " | ".join("%.1f" % run_s[(s, b)] for b in buckets)))
    measure = a.trials * sum(run_s.values())
    print("")
    print("measuring (both modes, %d level runs): %.0f s" % (len(buckets) * len(steps) * a.trials, measure))
    print("")
    print("| start (s) | table: starts | table: sweeps | table: time (s) | grid: starts | grid: runs | grid: time (s) | table / grid |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for st in starts:
        c = costs(buckets, steps, a.trials, st, run_s)
        (ts, tr, tt), (gs, gr, gt) = c["table"], c["grid"]
        print("| %.0f | %d | %d | %.0f | %d | %d | %.0f | %.0f %% |" % (st, ts, tr, tt, gs, gr, gt, 100.0 * tt / gt))
    saved = len(buckets) * len(steps) - len(steps) - 1
    # (S + 1) st + M <= 0.5 (B S st + M)  <=>  st >= 0.5 M / (0.5 B S - S - 1)
    den = 0.5 * len(buckets) * len(steps) - len(steps) - 1
    print("")
    print("table mode saves %d of %d starts (%.0f %%); it reaches 50 %% of the grid's time from a start of %s" % (
        saved, len(buckets) * len(steps), 100.0 * saved / (len(buckets) * len(steps)),
        ("%.0f s on" % (0.5 * measure / den)) if den > 0 else "never (too few buckets)"))


if __name__ == "__main__":
    main()
