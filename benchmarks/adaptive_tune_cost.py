"""What does the tuner's table mode cost (speculative_tuning_mode: table, issue 21), against the full grid?

Prints numbers (a measurement script, not a test). Two ways to measure every (bucket, step count) pair:

* table mode (the speculative_tuning role): one server start per step count, every bucket measured as a concurrency
  level of each trial's sweep within that start, plus one start to serve the decision: ``S + 1`` starts. From its second
  arm on, a trial measures only the buckets where the step count is still in contention
  (``_tune/adaptive_table.levels_next``, the rule spec_tune's record action applies): a count significantly worse than a
  finished arm at a bucket is not measured there again, so it makes at most ``S x B x T`` level runs, usually fewer;
* the full grid: one server start per (bucket, step count), ``T`` trials of one level each: ``B x S`` starts,
  ``B x S x T`` runs.

Time of a level run: from the SGLang simulator's timing model (tests/sandbox/sglang_sim/timing.py, the reference host's
seed: t0 8.84 ms, k 0.25 ms/request, verify 3.83 ms, draft 1.5 + 0.145 ms/request per step), each draft token accepted
with probability ``--accept-p`` along the chain; a level of concurrency c sends ``max(num_prompts,
prompts_per_concurrency x c)`` requests of ``--output-len`` tokens in rounds of c (decode only, prefill left out). Its
measured throughput is the model's with a log-normal trial-to-trial spread of ``--cv`` (default 2 %, what the sandbox's
repeated trials showed), drawn with ``--seed``; the elimination is run on those values ``--repeats`` times (seeds
``seed .. seed + repeats - 1``) and the table-mode numbers are the mean (and range) over them.
Time of a server start (pull excluded: weights load, CUDA-graph capture, health, speculative_check): ``--start-s``, one
value per column; it is a parameter, not measured here (the simulator starts in about a second, a 122B model on real
GPUs in minutes).

Goal (issue 21): table mode at most 50 % of the full grid's time.

Usage: .venv/bin/python benchmarks/adaptive_tune_cost.py [--buckets 1,8,32,64] [--steps 0,1,2,3,5,7] [--trials 3]
       [--start-s 0,60,300,600,1200] [--accept-p 0.8] [--output-len 1000] [--num-prompts 16] [--prompts-per-concurrency 4]
       [--cv 0.02] [--seed 1] [--repeats 20]
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))

sys.path.insert(0, os.path.join(ROOT, ".collections"))

from sglang_sim.timing import TimingModel  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._tune import adaptive_table as at  # noqa: E402


def level_run_s(steps, concurrency, accept_p, output_len, num_prompts, prompts_per_concurrency):
    """Seconds one level run takes in the simulator's model: rounds of ``concurrency`` requests, each decoding
    ``output_len`` tokens at ``accept length`` tokens per (verify) step of ``concurrency`` running requests."""
    model = TimingModel(num_steps=steps, num_draft_tokens=steps + 1 if steps else 0, eagle_topk=1)
    requests = max(num_prompts, prompts_per_concurrency * concurrency)
    rounds = -(-requests // concurrency)
    accept = model.expected_accept_length(steps, accept_p) if steps else 1.0
    return rounds * (output_len / accept) * model.decode_step_s(concurrency)


def table_runs(buckets, steps, trials, run_s, tput, cv, seed):
    """Table mode's level runs with the elimination rule: ``(runs, seconds)`` over one draw of trial values."""
    rng = random.Random(seed)
    finished = []
    runs, secs = 0, 0.0
    for s in steps:
        arm = at.step_arms("NEXTN", [s])[0]
        done, levels = [], list(buckets)
        for _t in range(trials):
            done.append([{"max_concurrency": b, "output_throughput": tput[(s, b)] * math.exp(rng.gauss(0.0, cv)), "failed": 0}
                         for b in levels])
            runs += len(levels)
            secs += sum(run_s[(s, b)] for b in levels)
            levels = at.levels_next(done, finished, list(buckets))[0]
            if not levels:
                break
        finished.append({"arm": arm, "trials": done})
    return runs, secs


def costs(buckets, steps, trials, start_s, measure_table, runs_table, run_s):
    """``{mode: (starts, level runs, seconds)}`` for table mode (its measured ``runs_table`` level runs taking
    ``measure_table`` s) and the full grid; ``run_s[(s, b)]`` seconds per level run."""
    measure = trials * sum(run_s.values())
    table_starts = len(steps) + 1
    grid_starts = len(buckets) * len(steps)
    return {"table": (table_starts, runs_table, table_starts * start_s + measure_table),
            "grid": (grid_starts, grid_starts * trials, grid_starts * start_s + measure)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--buckets", default="1,8,32,64")
    ap.add_argument("--steps", default="0,1,2,3,5,7")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--start-s", default="0,60,300,600,1200")
    ap.add_argument("--accept-p", type=float, default=0.8)
    ap.add_argument("--output-len", type=int, default=1000)
    ap.add_argument("--num-prompts", type=int, default=16)
    ap.add_argument("--prompts-per-concurrency", type=int, default=4)
    ap.add_argument("--cv", type=float, default=0.02, help="trial-to-trial spread of a level's throughput (log-normal sigma)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    buckets = [int(x) for x in a.buckets.split(",")]
    steps = [int(x) for x in a.steps.split(",")]
    starts = [float(x) for x in a.start_s.split(",")]
    run_s = dict(((s, b), level_run_s(s, b, a.accept_p, a.output_len, a.num_prompts, a.prompts_per_concurrency))
                 for s in steps for b in buckets)
    tput = dict(((s, b), max(a.num_prompts, a.prompts_per_concurrency * b) * a.output_len / run_s[(s, b)]) for s in steps for b in buckets)
    print("buckets %s, step counts %s, %d trials, accept p %.2f, %d output tokens, max(%d, %d x c) requests per level, "
          "trial spread %.1f %%, %d draws"
          % (buckets, steps, a.trials, a.accept_p, a.output_len, a.num_prompts, a.prompts_per_concurrency, 100 * a.cv, a.repeats))
    print("")
    print("level run time (s) and throughput (tok/s), simulator timing model:")
    print("| steps | " + " | ".join("c=%d" % b for b in buckets) + " |")
    print("|---:|" + "---:|" * len(buckets))
    for s in steps:
        print("| %d | %s |" % (s, " | ".join("%.1f s, %.0f" % (run_s[(s, b)], tput[(s, b)]) for b in buckets)))
    draws = [table_runs(buckets, steps, a.trials, run_s, tput, a.cv, a.seed + k) for k in range(a.repeats)]
    runs_t = sum(r for r, _s in draws) / float(len(draws))
    secs_t = sum(x for _r, x in draws) / float(len(draws))
    measure = a.trials * sum(run_s.values())
    print("")
    print("measuring: full grid %d level runs, %.0f s; table mode %.1f level runs (%d-%d over the draws), %.0f s (%.0f-%.0f), "
          "%.0f %% of the grid's" % (len(buckets) * len(steps) * a.trials, measure, runs_t, min(r for r, _s in draws),
                                     max(r for r, _s in draws), secs_t, min(x for _r, x in draws), max(x for _r, x in draws),
                                     100.0 * secs_t / measure))
    print("")
    print("| start (s) | table: starts | table: level runs | table: time (s) | grid: starts | grid: runs | grid: time (s) | table / grid |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for st in starts:
        c = costs(buckets, steps, a.trials, st, secs_t, runs_t, run_s)
        (ts, tr, tt), (gs, gr, gt) = c["table"], c["grid"]
        print("| %.0f | %d | %.1f | %.0f | %d | %d | %.0f | %.0f %% |" % (st, ts, tr, tt, gs, gr, gt, 100.0 * tt / gt))
    # (S + 1) st + M_t <= 0.5 (B S st + M)  <=>  st >= (M_t - 0.5 M) / (0.5 B S - S - 1)
    den = 0.5 * len(buckets) * len(steps) - len(steps) - 1
    need = (secs_t - 0.5 * measure) / den if den > 0 else None
    print("")
    print("table mode reaches 50 %% of the grid's time %s" % (
        "at every start time" if need is not None and need <= 0 else
        ("from a start of %.0f s on" % need) if need is not None else "never (too few buckets)"))


if __name__ == "__main__":
    main()
