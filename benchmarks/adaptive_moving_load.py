"""Speculation that follows the load (issue 21): tune SGLang's adaptive draft-length table on the SGLang simulator (a test
double), then prove it on a load that moves, against SGLang's default table, the best static arm and no speculation.

1. The simulator runs the Hopper-class profile of docs/simulator.md ("the best static step count falls with batch
   size": SGLANG_SIM_T0_MS=20, K_MS=0.1, DRAFT_MS=1.5, DRAFT_K_MS=0.02, VERIFY_MS=1, ACCEPT_P=0.75), SGLang 0.5.23
   formats, NEXTN on the reference model, tp 4, max_running_requests 64, the built-in category-labelled prompts.
2. Tuning, as spec_tune's table mode does it: one server start per static step count (0, 1, 2, 3, 5, 7; draft tokens
   steps + 1, topk 1), every bucket (1, 8, 32, 64) measured as a closed-loop concurrency level in that start, ``--tune-
   trials`` sweeps, each only over the buckets where the count is still in contention (``levels_next``); the tuning
   cost against the full grid (one start per bucket and step count, every pair ``--tune-trials`` times) from the
   measured level runs, at the simulator's start time and at 60-1200 s per start; the table from
   ``_tune/adaptive_table.bucket_table`` (each bucket's best step count plus every count not significantly worse, 95 %
   intervals, keyed at the geometric midpoints ``table_keys``); the best static arm for the load's time-weighted distribution with
   ``_tune/decision.objective_value``. Printed: the per-bucket table, the time from start to decision, the restarts.
3. The moving load (``_bench/client.run_phases``): phases 1 -> 8 -> 32 -> 64 -> 8 -> 1 at ``--dwell`` seconds each, a
   closed loop; four arms - the tuned table (``--speculative-adaptive --speculative-adaptive-config``), SGLang's default
   table (``--speculative-adaptive`` alone), the best static arm, off (one arm when the best static arm is off) -
   ``--ab-trials`` trials each, the arms interleaved
   per trial so drift on the machine spreads over all of them, a fresh server per run (a restart costs the simulator
   50 ms). Trial k (1-based) sends the prompts in its own order (``random.Random(k).shuffle`` of a copy) and seeds the
   simulator's draft acceptance with ``SGLANG_SIM_SEED=k``, both the same for every arm in it: the trials differ, so the
   intervals measure something (with one order and one seed the trials of an arm were identical and the intervals a
   point).
4. Per phase (``_bench/phases.phase_metrics``), the primary comparison is on the settled tok/s
   (``settled_throughput``: the tokens that arrived after the drain, over the rest of the phase): after a fall in
   concurrency the requests in flight at the boundary finish first, and how many tokens they have left depends on
   which prompts they are - on how many requests the arm completed before, not on the arm. Table 1: settled tok/s per
   arm with a 95 % interval over the trials, the tuned table's speedup over the default table and over the best static
   arm with 95 % intervals (``decision.ratio_interval``), and for the adaptive arms the step counts observed in the
   phase (``sglang:spec_num_steps`` read from /metrics every 0.2 s) and how often the step count switched. Table 2: the
   raw window tok/s (``output_throughput``, the drain included), the mean settle seconds per arm and the window ratios.
   The whole-load totals are total tokens / total time, as before. ``--json`` holds both, per phase under ``rows``
   (``settled_throughput``, ``output_throughput``, ``settle_s``: {arm: per-trial values}; the ratios), the per-run
   metrics under ``runs`` and the trials' orders and seeds under ``trials``.

Usage: .venv/bin/python benchmarks/adaptive_moving_load.py [--dwell 15] [--tune-trials 3] [--ab-trials 3] [--json out.json]
Takes about 30-35 minutes with the defaults on an idle 2-core machine; run it alone: the simulator's timing is real
sleeping, and a CPU-starved simulator or client widens the intervals, and with them the tuned table's candidate lists.
The numbers are the simulator's, not a GPU's.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "sandbox"))
sys.path.insert(0, os.path.join(REPO, ".collections"))

from sglang_sim.harness import SimProcess  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._bench import phases as bp  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads as wl  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import level_metrics  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._tune import adaptive_table as at  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._tune import decision as sd  # noqa: E402

PROFILE = {"SGLANG_SIM_VERSION": "0.5.23", "SGLANG_SIM_T0_MS": "20", "SGLANG_SIM_K_MS": "0.1", "SGLANG_SIM_DRAFT_MS": "1.5",
           "SGLANG_SIM_DRAFT_K_MS": "0.02", "SGLANG_SIM_VERIFY_MS": "1", "SGLANG_SIM_ACCEPT_P": "0.75"}
BASE = ["--tp", "4", "--max-running-requests", "64", "--enable-metrics", "--decode-log-interval", "40"]
BUCKETS = (1, 8, 32, 64)
STEPS = at.STEP_COUNTS
STEPS_RE = re.compile(r"^sglang:spec_num_steps(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.M)


def spec_args(steps):
    """Launch flags of a static arm: NEXTN with ``steps`` draft steps (topk 1, draft tokens steps + 1); 0 = off."""
    if steps == 0:
        return []
    return ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(steps + 1)]


def adaptive_args(table_path=None, steps=None):
    """Launch flags of an adaptive arm: the table at ``table_path`` (None: SGLang's built-in table), starting at
    ``steps`` (None: SGLang picks the middle of the candidates' union)."""
    out = ["--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "1", "--speculative-adaptive"]
    if steps is not None:
        out += ["--speculative-num-steps", str(steps), "--speculative-num-draft-tokens", str(steps + 1)]
    if table_path:
        out += ["--speculative-adaptive-config", table_path]
    return out


def start(args, seed=None):
    """A simulator with the profile and ``args``; ``seed``: its ``SGLANG_SIM_SEED`` (draft acceptance; None: its
    default 0)."""
    env = dict(PROFILE)
    if seed is not None:
        env["SGLANG_SIM_SEED"] = str(seed)
    sim = SimProcess(BASE + args, env=env)
    sim.wait_ready(timeout=60)
    return sim


def measure_level(url, prompts, concurrency, trial=0):
    """One closed-loop level: max(16, 4 x concurrency) requests at ``concurrency`` (the sglang_benchmark role's default
    num_prompts and prompts_per_concurrency: four rounds, so steady decoding outweighs the ramp and the drain), a seeded
    sample of the prompts per level and trial (the same for every arm); a record as spec_tune reads it."""
    n = max(16, 4 * concurrency)
    picked = random.Random(1000 * trial + concurrency).sample(prompts, min(n + 2, len(prompts)))
    results, duration, _warm = bc.run_benchmark(bc.Target(url), picked[:n], max_concurrency=concurrency,
                                                warmup_prompts=picked[n:n + 2])
    rec = level_metrics(results, duration)
    rec["max_concurrency"] = concurrency
    return rec


class StepPoller(object):
    """Reads ``sglang:spec_num_steps`` from /metrics every ``period`` s in a thread: ``samples`` = [(perf_counter, steps)]."""

    def __init__(self, url, period=0.2):
        self.url, self.period, self.samples = url + "/metrics", period, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=2) as resp:
                    m = STEPS_RE.search(resp.read().decode("utf-8", "replace"))
                if m:
                    self.samples.append((time.perf_counter(), int(float(m.group(1)))))
            except OSError:
                pass
            self._stop.wait(self.period)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)


def steps_by_phase(samples, phases, start):
    """Per phase: the step counts observed (sorted), the share of the phase's samples at each (``share``: {steps:
    fraction}) and the number of switches between consecutive samples in it."""
    bounds = bp.boundaries(phases)
    out = []
    prev = None
    for k in range(len(phases)):
        seen, switches, count = set(), 0, {}
        for t, steps in samples:
            if start + bounds[k] <= t < start + bounds[k + 1]:
                seen.add(steps)
                count[steps] = count.get(steps, 0) + 1
                if prev is not None and steps != prev:
                    switches += 1
            if t < start + bounds[k + 1]:
                prev = steps
        total = float(sum(count.values())) or 1.0
        out.append({"steps": sorted(seen), "switches": switches, "share": dict((s, c / total) for s, c in count.items())})
    return out


def interval(values):
    """(mean, 95 % half-width) of per-trial values (Student t, n - 1 degrees of freedom; 0 with one value)."""
    m, s = sd.mean_sd(values)
    return m, (sd.t975(len(values) - 1) * s / len(values) ** 0.5) if len(values) > 1 else 0.0


def mean_cell(values, digits=0):
    """``mean ± half-width`` of the values that are not None (:func:`interval`), ``-`` without any."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    return ("%%.%df ± %%.%df" % (digits, digits)) % interval(vals)


def ratio(candidate, baseline):
    """``decision.ratio_interval`` of the per-trial values that are not None, or None when a side has none (a phase whose
    drain lasted all of it in every trial has no settled tok/s) or a value <= 0."""
    c = [v for v in candidate if v is not None]
    b = [v for v in baseline if v is not None]
    if not c or not b or min(c + b) <= 0:
        return None
    return sd.ratio_interval(c, b)


def ratio_cell(iv):
    """``speedup [low, high]`` of a :func:`ratio` result; the speedup alone without an interval; ``-`` for None."""
    if iv is None:
        return "-"
    if iv["low"] is None:
        return "%.2f" % iv["speedup"]
    return "%.2f [%.2f, %.2f]" % (iv["speedup"], iv["low"], iv["high"])


def phase_values(runs, k, key):
    """``{arm: [phase ``k``'s ``key`` (a ``phase_metrics`` key) in each trial]}``."""
    return dict((name, [r["phases"][k][key] for r in arm_runs]) for name, arm_runs in runs.items())


def trial_order(prompts, trial):
    """The prompt order of A/B trial ``trial`` (1-based), the same for every arm in it: a copy of ``prompts`` shuffled
    with ``random.Random(trial)``."""
    order = list(prompts)
    random.Random(trial).shuffle(order)
    return order


def tune(prompts, trials):
    """Measure every step count at every bucket (one start per step count), each trial only at the buckets where the
    count is still in contention (``adaptive_table.levels_next``, as spec_tune's table mode does).

    Returns (bucket_table result, results, restarts, seconds, cost): ``cost`` holds ``starts_s`` (seconds per server
    start, measured), ``level_s`` ({(steps, bucket): [seconds of each level run]}) and ``runs`` (level runs made)."""
    t0 = time.time()
    results, restarts = [], 0
    cost = {"starts_s": [], "level_s": {}, "runs": 0}
    arms = at.step_arms("NEXTN", STEPS)
    for arm in arms:
        steps = at.arm_steps(arm)
        t_start = time.time()
        sim = start(spec_args(steps))
        cost["starts_s"].append(time.time() - t_start)
        restarts += 1
        sweeps, levels, gone = [], list(BUCKETS), set()
        try:
            for trial in range(trials):
                sweep = []
                for c in levels:
                    t_level = time.time()
                    sweep.append(measure_level(sim.url, prompts, c, trial))
                    cost["level_s"].setdefault((steps, c), []).append(time.time() - t_level)
                    cost["runs"] += 1
                sweeps.append(sweep)
                levels, dropped = at.levels_next(sweeps, results, list(BUCKETS))
                for d in dropped:
                    if d["bucket"] in gone:
                        continue
                    gone.add(d["bucket"])
                    print("  %d steps: bucket %d done after %d trial(s)%s" % (
                        steps, d["bucket"], len(sweeps), "" if d["eliminated_by"] is None else
                        " (%s better x%.3f, low %.3f)" % (d["eliminated_by"], d["speedup"], d["low"])), flush=True)
                if not levels:
                    break
        finally:
            sim.stop()
        results.append({"arm": arm, "trials": sweeps})
        shown = ", ".join("c%d %.0f tok/s" % (r["max_concurrency"], r["output_throughput"]) for r in sweeps[0])
        print("  tuned %d steps: %s (trial 1)" % (steps, shown), flush=True)
    return at.bucket_table(results, list(BUCKETS)), results, restarts, time.time() - t0, cost


def grid_cost(cost, trials, start_s=None):
    """(table mode, full grid) seconds: table mode = its server starts (step counts + 1, serving the decision included)
    plus the level runs it made; the full grid = one start per (bucket, step count) and every (bucket, step count) pair
    ``trials`` times (a pair dropped after fewer trials costs its measured mean for the runs it skipped). ``start_s``:
    seconds per server start (None: the simulator's measured mean)."""
    per_start = start_s if start_s is not None else sum(cost["starts_s"]) / len(cost["starts_s"])
    made = sum(sum(v) for v in cost["level_s"].values())
    full = sum(trials * sum(v) / len(v) for v in cost["level_s"].values())
    table = (len(STEPS) + 1) * per_start + made
    grid = len(BUCKETS) * len(STEPS) * per_start + full
    return table, grid


def best_static(results, weights):
    """The step count whose mean time-weighted throughput over its complete trials is the highest (ties: fewer steps)."""
    best = None
    for res in results:
        vals = []
        for records in res["trials"]:      # trials that measured every level (a count dropped at a bucket has fewer)
            try:
                vals.append(sd.objective_value(records, "throughput", weights))
            except sd.SpecDecisionError:
                continue
        mean = sum(vals) / len(vals)
        if best is None or mean > best[1]:
            best = (at.arm_steps(res["arm"]), mean)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--dwell", type=float, default=15.0,
                    help="seconds per phase (default 15: several requests' lifetimes, so the drain after a fall in "
                         "concurrency is a small part of the next phase)")
    ap.add_argument("--tune-trials", type=int, default=3, help="sweeps per step count while tuning (default 3)")
    ap.add_argument("--ab-trials", type=int, default=3, help="runs of the moving load per arm (default 3)")
    ap.add_argument("--output-len", type=int, default=128, help="output tokens per request (default 128)")
    ap.add_argument("--json", default="", help="write every number to this file")
    args = ap.parse_args(argv)
    prompts = bc.workload_prompts(wl.builtin_rows(), 400, args.output_len, 1, "sglang")
    phases = [{"concurrency": c, "duration_s": args.dwell} for c in bp.EXAMPLE_CONCURRENCY]
    weights = {}
    for ph in phases:
        weights[ph["concurrency"]] = weights.get(ph["concurrency"], 0.0) + ph["duration_s"]
    t_start = time.time()

    print("== tuning: %d step counts x %d buckets x %d trials, one server start per step count"
          % (len(STEPS), len(BUCKETS), args.tune_trials), flush=True)
    table, results, restarts, tune_s, cost = tune(prompts, args.tune_trials)
    static_steps, static_mean = best_static(results, weights)
    print("\n| bucket | table key (geometric midpoint) | best steps | candidate_steps | speedup over off by steps %s |"
          % " / ".join(str(s) for s in STEPS))
    print("|---:|---:|---:|---|---|")
    for b in table["buckets"]:
        ups = dict((r["steps"], r["vs_off"]) for r in b["steps"])
        shown = " / ".join("%.2f [%.2f, %.2f]" % (ups[s]["speedup"], ups[s]["low"] or 0, ups[s]["high"] or 0) if ups.get(s) else "-"
                           for s in STEPS)
        print("| %d | %d | %d | %s | %s |" % (b["bucket"], b["key"], b["best"], b["candidate_steps"], shown))
    print("\ntable: %s" % json.dumps(table["table"], sort_keys=True))
    print("best static arm for the load's distribution %s: %d steps (%.0f tok/s weighted)" % (
        dict((c, round(w / sum(weights.values()), 3)) for c, w in sorted(weights.items())), static_steps, static_mean))
    print("time from start to decision: %.0f s; server starts while tuning: %d (step counts %d + 2 = %d allowed)"
          % (tune_s, restarts, len(STEPS), len(STEPS) + 2), flush=True)
    print("level runs: %d of the full grid's %d (%d buckets x %d step counts x %d trials)"
          % (cost["runs"], len(BUCKETS) * len(STEPS) * args.tune_trials, len(BUCKETS), len(STEPS), args.tune_trials))
    print("| seconds per server start | table mode s | full grid s | table / grid |")
    print("|---|---:|---:|---:|")
    for start_s in [None, 60.0, 300.0, 600.0, 1200.0]:
        tab_s, grid_s = grid_cost(cost, args.tune_trials, start_s)
        label = ("%.1f (simulator, measured)" % (sum(cost["starts_s"]) / len(cost["starts_s"]))) if start_s is None else "%.0f" % start_s
        print("| %s | %.0f | %.0f | %.2f |" % (label, tab_s, grid_s, tab_s / grid_s))
    print("", flush=True)

    tmp = tempfile.mkdtemp(prefix="adaptive-moving-")
    table_path = os.path.join(tmp, "adaptive_table.json")
    with open(table_path, "w") as fh:
        json.dump(table["table"], fh)
    tuned_steps = max(s for e in table["table"].values() for s in e["candidate_steps"])
    arms = [("tuned table", adaptive_args(table_path, tuned_steps)), ("default table", adaptive_args())]
    if static_steps:
        arms.append(("static %d steps" % static_steps, spec_args(static_steps)))
    arms.append(("off", []))     # when the best static arm is off, it is this one (run once)
    runs = dict((name, []) for name, _a in arms)
    print("\n== moving load: phases %s x %.0f s, %d arms x %d trials"
          % ("/".join(str(c) for c in bp.EXAMPLE_CONCURRENCY), args.dwell, len(arms), args.ab_trials), flush=True)
    for trial in range(1, args.ab_trials + 1):
        order = trial_order(prompts, trial)     # per trial, shared by the arms: the drain differs between trials, not arms
        for name, flags in arms:
            sim = start(flags, seed=trial)
            try:
                with StepPoller(sim.url) as poller:
                    res, _dur, t0, _total = bc.run_phases(bc.Target(sim.url), order, phases)
            finally:
                sim.stop()
            pm = bp.phase_metrics(res, phases, t0)
            steps = steps_by_phase(poller.samples, phases, t0)
            total_tokens = sum(p["output_throughput"] * p["duration_s"] for p in pm)
            runs[name].append({"phases": pm, "steps": steps, "throughput": total_tokens / sum(p["duration_s"] for p in phases),
                               "failed": sum(p["failed"] for p in pm)})
            print("  trial %d %-16s %7.1f tok/s over the load, %d failed"
                  % (trial, name, runs[name][-1]["throughput"], runs[name][-1]["failed"]), flush=True)

    names = [n for n, _a in arms]
    static_name = names[2]          # the best static arm, or off when that is it
    print("\nPer phase, settled tok/s: the tokens that arrived after the drain (``settle_s``) over the rest of the phase")
    print("\n| phase | concurrency | %s | tuned / default | tuned / static | tuned steps: share of the phase (switches) | default steps: share (switches) |"
          % " | ".join("%s settled tok/s" % n for n in names))
    print("|---:|---:|%s---|---|---|---|" % ("---:|" * len(names)))
    rows = []
    for k, ph in enumerate(phases):
        settled, window, settle = [phase_values(runs, k, key) for key in ("settled_throughput", "output_throughput", "settle_s")]
        vs_def = ratio(settled["tuned table"], settled["default table"])
        vs_sta = ratio(settled["tuned table"], settled[static_name])

        def steps_cell(name):
            seen = sorted(set(s for r in runs[name] for s in r["steps"][k]["steps"]))
            sw = [r["steps"][k]["switches"] for r in runs[name]]
            share = ", ".join("%d: %.0f %%" % (s, 100.0 * sum(r["steps"][k]["share"].get(s, 0.0) for r in runs[name]) / len(runs[name]))
                              for s in seen)
            return "%s (%s)" % (share, "/".join(str(x) for x in sw))
        print("| %d | %d | %s | %s | %s | %s | %s |" % (
            k + 1, ph["concurrency"], " | ".join(mean_cell(settled[n]) for n in names), ratio_cell(vs_def), ratio_cell(vs_sta),
            steps_cell("tuned table"), steps_cell("default table")))
        rows.append({"phase": k + 1, "concurrency": ph["concurrency"], "settled_throughput": settled, "output_throughput": window,
                     "settle_s": settle, "tuned_vs_default": vs_def, "tuned_vs_static": vs_sta,
                     "window_tuned_vs_default": ratio(window["tuned table"], window["default table"]),
                     "window_tuned_vs_static": ratio(window["tuned table"], window[static_name])})
    print("\nPer phase, the raw window (every token that arrived in the phase, the drain included) and the drain's length")
    print("\n| phase | concurrency | %s | %s | window tuned / default | window tuned / static |"
          % (" | ".join("%s window tok/s" % n for n in names), " | ".join("%s settle s" % n for n in names)))
    print("|---:|---:|%s---|---|" % ("---:|" * (2 * len(names))))
    for row in rows:
        print("| %d | %d | %s | %s | %s | %s |" % (
            row["phase"], row["concurrency"], " | ".join(mean_cell(row["output_throughput"][n]) for n in names),
            " | ".join(mean_cell(row["settle_s"][n], 2) for n in names), ratio_cell(row["window_tuned_vs_default"]),
            ratio_cell(row["window_tuned_vs_static"])))
    whole = dict((n, [r["throughput"] for r in runs[n]]) for n in names)
    print("\nwhole load: %s" % "; ".join("%s %.0f ± %.0f tok/s" % ((n,) + interval(whole[n])) for n in names))
    for other in names[1:]:
        iv = sd.ratio_interval(whole["tuned table"], whole[other])
        print("tuned table / %s over the whole load: %.3f [%.3f, %.3f]" % (other, iv["speedup"], iv["low"] or 0, iv["high"] or 0))
    print("total wall: %.0f s" % (time.time() - t_start))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"table": table, "static_steps": static_steps, "tune_s": tune_s, "restarts": restarts, "phases": phases,
                       "runs": runs, "rows": rows,
                       "trials": [{"trial": k, "prompt_order": "random.Random(%d).shuffle" % k, "SGLANG_SIM_SEED": k}
                                  for k in range(1, args.ab_trials + 1)]}, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
