"""Capacity of the serving-benchmark client with 1, 2 and 4 client processes (plugins/module_utils/bench_multi.py).

Prints numbers (a measurement script, not a test). Against the SGLang simulator in instant mode
(``SGLANG_SIM_INSTANT=1``: the same chunks and token accounting, no sleeping), the same load (``--requests``
requests of ``--output-len`` tokens at ``--concurrency``) is sent with each number of client processes. Per row:
streamed output tokens, wall seconds, achieved tok/s, the client's CPU seconds (this process for 1; the forked
workers, from ``RUSAGE_CHILDREN``, for more), the client's capacity = tokens / client CPU s (what the client could
drive if the server and the machine were not the limit), the simulator's CPU seconds, and the 1-minute load
average before and after (the build machines are shared: read the numbers with it).

With one simulator process (itself one asyncio loop) the achieved tok/s stops growing once the simulator saturates
its core; the client capacity column is then the figure that shows the client's scaling.

Usage: .venv/bin/python benchmarks/client_processes.py [--processes 1,2,4] [--requests 2048] [--output-len 256]
       [--concurrency 256] [--input-len 32]
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

from ansible_collections.llmops.sglang.plugins.module_utils import bench_client as bc  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils import bench_multi  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils import bench_stats as bs  # noqa: E402
from sglang_sim.harness import SimProcess  # noqa: E402


def proc_cpu_s(pid):
    """utime + stime of a process in seconds (/proc/<pid>/stat fields 14 and 15)."""
    with open("/proc/%d/stat" % pid) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--processes", default="1,2,4")
    ap.add_argument("--requests", type=int, default=2048)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=256)
    args = ap.parse_args()
    log_dir = tempfile.mkdtemp(prefix="client-processes-")
    srv = SimProcess(args=["--max-running-requests", str(max(args.concurrency, 64))], instant=True,
                     log_path=os.path.join(log_dir, "sim.log"))
    srv.wait_ready(60)
    target = bc.Target(srv.url, timeout_s=600, stall_timeout_s=60)
    cols = ("processes", "completed", "tokens", "wall s", "tok/s", "client cpu s", "client capacity tok/s",
            "sim cpu s", "median TPOT ms", "load avg before/after")
    print("== %d requests x %d output tokens, concurrency %d, simulator instant mode ==" % (
        args.requests, args.output_len, args.concurrency))
    print(" | ".join(cols))
    try:
        for n in [int(x) for x in args.processes.split(",")]:
            prompts = bc.make_prompts(args.requests, args.input_len, args.output_len, seed=n)
            load0 = os.getloadavg()[0]
            sim0, self0, kids0 = proc_cpu_s(srv.proc.pid), time.process_time(), children_cpu_s()
            t0 = time.perf_counter()
            res, dur, _w = bench_multi.run_benchmark_processes(target, prompts, processes=n, max_concurrency=args.concurrency)
            wall = time.perf_counter() - t0
            client_cpu = (time.process_time() - self0) + (children_cpu_s() - kids0)
            sim_cpu = proc_cpu_s(srv.proc.pid) - sim0
            m = bs.level_metrics(res, dur)
            tokens = m["total_output_tokens"]
            print("%d | %d | %d | %.2f | %.0f | %.2f | %.0f | %.2f | %.3f | %.2f/%.2f" % (
                n, m["completed"], tokens, wall, tokens / dur, client_cpu, tokens / client_cpu if client_cpu else 0.0,
                sim_cpu, m["median_tpot_ms"], load0, os.getloadavg()[0]))
            if m["failed"]:
                print("   first errors: %s" % m["error_kinds"][:2])
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
