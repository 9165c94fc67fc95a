"""Capacity of the serving-benchmark client with 1, 2 and 4 client processes (plugins/module_utils/_bench/processes.py).

Prints numbers (a measurement script, not a test). Against the SGLang simulator in instant mode
(``SGLANG_SIM_INSTANT=1``: the same chunks and token accounting, no sleeping), the same load (``--requests``
requests of ``--output-len`` tokens at ``--concurrency``) is sent with each number of client processes. Per row:
streamed output tokens, wall seconds, achieved tok/s, the client's CPU seconds (this process for 1; the forked
workers, from ``RUSAGE_CHILDREN``, for more), the client's capacity = tokens / client CPU s (what the client could
drive if the server and the machine were not the limit), the simulator's CPU seconds, and the 1-minute load
average before and after (the build machines are shared: read the numbers with it).

With one simulator process (itself one asyncio loop, about as much CPU per token as the client) the achieved tok/s
stops growing once the simulator saturates its core; ``--sims N`` runs N simulator processes on one port
(``SGLANG_SIM_REUSE_PORT``), so that on a machine with free cores the client processes, not the simulator, are the
limit. The client CPU per token column is the per-process efficiency, whatever the machine's load.

A second part (the equality check) sends the same load shape to a real-time simulator (timed decode steps, MTP off)
with each number of processes and prints the metrics (completed, output tokens, output tok/s, median TPOT, mean ITL,
mean E2E, measured concurrency) with the worst deviation from the one-process run; it exits 1 when one exceeds 2 %.

The machine bound column is ``cores / (client + simulator CPU s per token)``: what the machine can stream with both
programs on it. When the achieved tok/s is close to it, the machine (not the client) is the limit; the client CPU per
token (load-independent: CPU time, not wall time) is the per-process efficiency.

Usage: .venv/bin/python benchmarks/client_processes.py [--processes 1,2,4] [--requests 2048] [--output-len 256]
       [--concurrency 256] [--input-len 32] [--eq-requests 96] [--eq-output-len 64] [--eq-concurrency 8]
       [--skip-capacity] [--skip-equality]
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._bench import processes as bench_multi  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._bench import stats as bs  # noqa: E402
from sglang_sim.harness import SimProcess  # noqa: E402


def proc_cpu_s(pid):
    """utime + stime of a process in seconds (/proc/<pid>/stat fields 14 and 15)."""
    with open("/proc/%d/stat" % pid) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def start_sims(n, log_dir, sim_args):
    """``n`` instant-mode simulator processes on one port (``SGLANG_SIM_REUSE_PORT``: the kernel spreads the connections,
    one request each, over them), each waited for by its own log line. Returns the list of SimProcess."""
    first = SimProcess(args=sim_args, instant=True, env={"SGLANG_SIM_REUSE_PORT": "1"} if n > 1 else None,
                       log_path=os.path.join(log_dir, "sim-0.log"))
    first.wait_ready(60)
    sims = [first]
    for k in range(1, n):
        sim = SimProcess(args=sim_args + ["--port", str(first.port)], instant=True, env={"SGLANG_SIM_REUSE_PORT": "1"},
                         log_path=os.path.join(log_dir, "sim-%d.log" % k))
        sims.append(sim)
        deadline = time.monotonic() + 60
        while "Uvicorn running on" not in sim.log_text():
            if sim.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("simulator %d did not start: %s" % (k, sim.log_tail()))
            time.sleep(0.05)
    return sims


def capacity(args):
    """Instant mode: tokens per second delivered and client CPU seconds per token, per number of processes."""
    log_dir = tempfile.mkdtemp(prefix="client-processes-")
    sims = start_sims(args.sims, log_dir, ["--max-running-requests", str(max(args.concurrency, 64))])
    srv = sims[0]
    target = bc.Target(srv.url, timeout_s=600, stall_timeout_s=60)
    cores = os.cpu_count() or 1
    cols = ("processes", "completed", "tokens", "wall s", "tok/s", "client cpu s", "client cpu us/token",
            "client tok per cpu s", "sim cpu s", "sim cpu us/token", "machine bound tok/s", "cores this run got", "load avg before/after")
    print("== capacity: %d requests x %d output tokens, concurrency %d, %d simulator process(es) in instant mode, %d cores ==" % (
        args.requests, args.output_len, args.concurrency, len(sims), cores))
    print("machine bound = cores / (client + simulator CPU s per token): the most this machine can stream with both on it;")
    print("cores this run got = (client + simulator CPU s) / wall s: the rest went to other jobs on the machine")
    print(" | ".join(cols))
    rows = []
    try:
        for n in [int(x) for x in args.processes.split(",")]:
            prompts = bc.make_prompts(args.requests, args.input_len, args.output_len, seed=n)
            load0 = os.getloadavg()[0]
            sim0, self0, kids0 = sum(proc_cpu_s(s.proc.pid) for s in sims), time.process_time(), children_cpu_s()
            t0 = time.perf_counter()
            res, dur, _w = bench_multi.run_benchmark_processes(target, prompts, processes=n, max_concurrency=args.concurrency)
            wall = time.perf_counter() - t0
            client_cpu = (time.process_time() - self0) + (children_cpu_s() - kids0)
            sim_cpu = sum(proc_cpu_s(s.proc.pid) for s in sims) - sim0
            m = bs.level_metrics(res, dur)
            tokens = m["total_output_tokens"]
            c_us = client_cpu / tokens * 1e6 if tokens else 0.0
            s_us = sim_cpu / tokens * 1e6 if tokens else 0.0
            bound = cores / ((client_cpu + sim_cpu) / tokens) if tokens and client_cpu + sim_cpu else 0.0
            rows.append((n, tokens / dur, c_us))
            print("%d | %d | %d | %.2f | %.0f | %.2f | %.1f | %.0f | %.2f | %.1f | %.0f | %.2f | %.2f/%.2f" % (
                n, m["completed"], tokens, wall, tokens / dur, client_cpu, c_us, 1e6 / c_us if c_us else 0.0,
                sim_cpu, s_us, bound, (client_cpu + sim_cpu) / wall, load0, os.getloadavg()[0]))
            if m["failed"]:
                print("   first errors: %s" % m["error_kinds"][:2])
    finally:
        for s in sims:
            s.stop()
    return rows


CHECKED = (("completed", "completed"), ("total_output_tokens", "output tokens"), ("output_throughput", "output tok/s"),
           ("median_tpot_ms", "median TPOT ms"), ("mean_itl_ms", "mean ITL ms"), ("mean_e2e_latency_ms", "mean E2E ms"),
           ("concurrency", "measured concurrency"))


def equality(args):
    """Real-time simulator: the metrics of N processes against one process's, on the same load shape, within 2 %.

    Each N-process run is bracketed by one-process runs (1, N1, 1, N2, 1, ...) and compared with the mean of the two
    around it, so a drift of the shared machine's load (which slows the simulator's timed steps) cancels; the
    deviation between consecutive one-process runs is printed as the noise floor."""
    log_dir = tempfile.mkdtemp(prefix="client-processes-eq-")
    srv = SimProcess(args=["--max-running-requests", "64"], instant=False, log_path=os.path.join(log_dir, "sim.log"))
    srv.wait_ready(60)
    target = bc.Target(srv.url, timeout_s=600, stall_timeout_s=60)
    print("== equality: %d requests x %d output tokens, concurrency %d, real-time simulator (MTP off) ==" % (
        args.eq_requests, args.eq_output_len, args.eq_concurrency))
    print("processes | " + " | ".join(label for _k, label in CHECKED) + " | load avg | worst deviation")
    counts = [n for n in (int(x) for x in args.processes.split(",")) if n != 1]
    order = [1]
    for n in counts:
        order += [n, 1]
    runs = []
    try:
        for run, n in enumerate(order):
            # other prompts each run (a new seed), the same lengths: no run is served from an earlier run's prefix cache
            prompts = bc.make_prompts(args.eq_requests, args.input_len, args.eq_output_len, seed=100 + run)
            res, dur, _w = bench_multi.run_benchmark_processes(target, prompts, processes=n,
                                                               max_concurrency=args.eq_concurrency)
            m = bs.level_metrics(res, dur)
            runs.append((n, [m[k] for k, _l in CHECKED], os.getloadavg()[0]))
            print("%d | %s | %.1f |" % (n, " | ".join("%.3f" % v for v in runs[-1][1]), runs[-1][2]))
    finally:
        srv.stop()

    def worst(vals, ref):
        devs = [abs(v - r) / r if r else 0.0 for v, r in zip(vals, ref)]
        return max(devs), CHECKED[devs.index(max(devs))][1]

    worst_all = 0.0
    for i in range(1, len(runs), 2):
        before, mid, after = runs[i - 1][1], runs[i][1], runs[i + 1][1]
        ref = [(x + y) / 2.0 for x, y in zip(before, after)]
        dev, what = worst(mid, ref)
        floor, fwhat = worst(after, before)
        worst_all = max(worst_all, dev)
        print("%d processes vs the mean of the one-process runs around it: worst %.2f %% (%s); those two one-process runs "
              "differ by up to %.2f %% (%s)" % (runs[i][0], dev * 100, what, floor * 100, fwhat))
    print("equality within 2 %%: %s (worst %.2f %%)" % ("PASS" if worst_all <= 0.02 else "FAIL", worst_all * 100))
    return worst_all


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--processes", default="1,2,4")
    ap.add_argument("--requests", type=int, default=2048)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--sims", type=int, default=1, help="simulator processes sharing one port (SO_REUSEPORT)")
    ap.add_argument("--eq-requests", type=int, default=96, help="equality check: requests (real-time simulator)")
    ap.add_argument("--eq-output-len", type=int, default=64)
    ap.add_argument("--eq-concurrency", type=int, default=8)
    ap.add_argument("--skip-capacity", action="store_true")
    ap.add_argument("--skip-equality", action="store_true")
    args = ap.parse_args()
    if not args.skip_capacity:
        capacity(args)
    if not args.skip_equality:
        worst = equality(args)
        if worst > 0.02:
            sys.exit(1)


if __name__ == "__main__":
    main()
