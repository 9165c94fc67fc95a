"""How much does the serving-benchmark client (plugins/module_utils/_bench/client.py) cost, and how exact is it?

Prints numbers (this is a measurement script, not a test):

1. Capacity, against the SGLang simulator in instant mode (``SGLANG_SIM_INSTANT=1``: the same token
   accounting and chunks as the real-time simulator, no sleeping). The client (this process) is pinned to
   one CPU and the simulator to another with ``os.sched_setaffinity``. For each concurrency level:
   streamed tokens, wall time, token rate, the client's CPU time (``time.process_time``) per streamed
   token, the client's CPU use (CPU s / wall s; near 1.0 means the client is the bottleneck), the
   simulator's CPU use, and the capacity of one client core = tokens / client CPU seconds.
2. Accuracy, against the real-time simulator at concurrency 1, for each prompt length of
   ``--acc-input-lens`` (32: fixed costs dominate; 1000: the benchmark's default request shape), MTP off
   and on: median TTFT and TPOT measured by the client versus the simulator's known timing
   (tests/sandbox/sglang_sim/timing.py: TTFT = one prefill batch t0 + 0.05 ms x input tokens; TPOT =
   decode step / tokens per step: 9.09 ms off, 14.815 / 2 ms on), the simulator's own TTFT (its
   ``sglang:time_to_first_token_seconds`` histogram over the same requests), the TTFT of a bare
   blocking-socket client sending the same requests (the floor: loopback TCP + the server's HTTP path;
   client minus bare socket is the client's own distortion), and the client's E2E versus the server's
   own ``meta_info.e2e_latency``.

Goals: >= 50,000 streamed tok/s and >= 512 concurrent streams on one client core; TTFT and TPOT
medians within 2 % of the simulator's timing.

Usage: .venv/bin/python benchmarks/client_load.py [--levels 64,256,512] [--output-len 256] [--rounds 2]
       [--acc-input-lens 32,1000] [--acc-requests 7] [--client-cpu 0] [--sim-cpu 1] [--skip-accuracy] [--skip-capacity]
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._bench import stats as bs  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils._server import metrics as sglang_metrics  # noqa: E402
from sglang_sim.harness import SimProcess  # noqa: E402
from sglang_sim.timing import TimingModel  # noqa: E402

SPEC = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "2"]


def proc_cpu_s(pid):
    """utime + stime of a process in seconds (/proc/<pid>/stat fields 14 and 15)."""
    with open("/proc/%d/stat" % pid) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def max_in_flight(results):
    """Most requests streaming at the same instant (sweep over start/end times of completed requests)."""
    events = []
    for r in results:
        if r.success:
            events.append((r.start_time, 1))
            events.append((r.start_time + r.latency, -1))
    cur = best = 0
    for _t, d in sorted(events):
        cur += d
        best = max(best, cur)
    return best


def server_hist(srv, name):
    """(sum, count) of a /metrics histogram (the server's own measurement), via module_utils/_server/metrics.py."""
    parsed = sglang_metrics.parse_prometheus(srv.get_text("/metrics"))
    return (sum(sglang_metrics.values(parsed, name + "_sum")), sum(sglang_metrics.values(parsed, name + "_count")))


def capacity(args, log_dir):
    print("== capacity: client pinned to CPU %d, simulator (instant mode, MTP off) pinned to CPU %d ==" % (args.client_cpu, args.sim_cpu))
    os.sched_setaffinity(0, {args.client_cpu})
    top = max(args.levels)
    srv = SimProcess(args=["--tp", "4", "--max-running-requests", str(max(1024, top)), "--cuda-graph-max-bs", "1024"],
                     instant=True, cpu=args.sim_cpu, log_path=os.path.join(log_dir, "sim-capacity.log"))
    rows = []
    try:
        srv.wait_ready(timeout=60)
        target = bc.Target(srv.url, timeout_s=300, stall_timeout_s=60)
        bc.run_benchmark(target, bc.make_prompts(8, args.input_len, 16, seed=9), max_concurrency=8)   # warm the server
        cols = ("conc", "requests", "tokens", "wall s", "tok/s", "client us/tok", "client cpu", "sim cpu", "capacity tok/s", "max in flight")
        print("%8s %8s %10s %9s %12s %14s %10s %10s %16s %s" % cols)
        for conc in args.levels:
            for _r in range(args.rounds):
                prompts = bc.make_prompts(conc * 2, args.input_len, args.output_len, seed=conc)
                sim0 = proc_cpu_s(srv.proc.pid)
                c0 = time.process_time()
                w0 = time.perf_counter()
                res, dur, _w = bc.run_benchmark(target, prompts, max_concurrency=conc)
                wall = time.perf_counter() - w0
                cpu = time.process_time() - c0
                sim_cpu = proc_cpu_s(srv.proc.pid) - sim0
                m = bs.level_metrics(res, dur)
                toks = m["total_output_tokens"]
                row = (conc, len(prompts), toks, wall, toks / wall, 1e6 * cpu / max(toks, 1), cpu / wall, sim_cpu / wall,
                       toks / cpu if cpu else 0.0, max_in_flight(res), m["failed"])
                rows.append(row)
                print("%8d %8d %10d %9.2f %12.0f %14.2f %10.2f %10.2f %16.0f %6d%s" % (row[:10] + (("  FAILED %d" % row[10]) if row[10] else "",)))
    finally:
        srv.stop()
    return rows


def bare_ttft(host, port, request, timeout=60.0):
    """TTFT (s) of one request sent by the simplest possible client: a blocking socket, no event loop.

    It connects, sends ``request`` (HTTP head + body bytes), reads until the first ``data:`` byte (the first
    SSE event), then drains the stream. This is the floor any client measures on this machine: loopback TCP
    connect plus the server's own HTTP path. The difference between it and bench_client is the client's own
    distortion.
    """
    t0 = time.perf_counter()
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(request)
        seen = b""
        first = None
        while True:
            data = sock.recv(65536)
            if not data:
                break
            if first is None:
                seen = seen[-4:] + data
                if b"data:" in seen:
                    first = time.perf_counter() - t0
    finally:
        sock.close()
    if first is None:
        raise RuntimeError("no SSE event in the response")
    return first


def pct(value, ref):
    """Relative error of ``value`` against ``ref`` in percent."""
    return 100.0 * (value - ref) / ref


def accuracy(args, log_dir):
    print("\n== accuracy: real-time simulator (pinned to CPU %d) at concurrency 1, output %d tokens, %d requests per row ==\n"
          "   model = the simulator's timing model (TTFT = t0 + 0.05 ms x input tokens, TPOT = step / tokens per step);\n"
          "   server = the simulator's own sglang:time_to_first_token_seconds mean (arrival to first token);\n"
          "   bare socket = a blocking-socket client (the floor: loopback TCP connect + the server's HTTP path);\n"
          "   client = bench_client (serving_benchmark). TTFT/TPOT are medians over the requests."
          % (args.sim_cpu, args.acc_output_len, args.acc_requests))
    os.sched_setaffinity(0, {args.client_cpu})
    hdr = ("mode", "input", "model TTFT", "server TTFT", "bare TTFT", "client TTFT", "client-model", "client-bare", "model TPOT", "client TPOT",
           "TPOT err", "E2E-server e2e")
    print("%-8s %6s %11s %12s %10s %12s %13s %12s %11s %12s %9s %15s" % hdr)
    out = []
    spreads = []
    for input_len in args.acc_input_lens:
        for name, extra, steps, draft in (("MTP off", [], 0, 0), ("MTP on", SPEC, 1, 2)):
            tm = TimingModel(num_steps=steps, num_draft_tokens=draft)
            exp_tpot = tm.decode_step_s(1) / (2 if steps else 1)
            exp_ttft = tm.prefill_s(input_len)
            srv = SimProcess(args=["--tp", "4", "--enable-metrics"] + extra, cpu=args.sim_cpu,
                             log_path=os.path.join(log_dir, "sim-acc-%d-%d.log" % (input_len, steps)))
            try:
                srv.wait_ready(timeout=60)
                target = bc.Target(srv.url, timeout_s=300, stall_timeout_s=60)
                prompts = bc.make_prompts(args.acc_requests, input_len, args.acc_output_len, seed=5)
                bc.run_benchmark(target, bc.make_prompts(1, input_len, 8, seed=6))     # warm-up, outside the histogram delta
                h0 = server_hist(srv, "sglang:time_to_first_token_seconds")
                res, dur, _w = bc.run_benchmark(target, prompts, max_concurrency=1)
                h1 = server_hist(srv, "sglang:time_to_first_token_seconds")
                # other prompts of the same lengths: the simulator's prefix cache would serve the client's again
                bare = [bare_ttft(srv.host, srv.port, target.head(len(b)) + b)
                        for b in (bc.request_body(target, p)
                                  for p in bc.make_prompts(args.acc_requests, input_len, args.acc_output_len, seed=15))]
            finally:
                srv.stop()
            srv_ttft = (h1[0] - h0[0]) / (h1[1] - h0[1]) if h1[1] > h0[1] else float("nan")
            m = bs.level_metrics(res, dur)
            ttft = m["median_ttft_ms"] / 1000.0
            tpot = m["median_tpot_ms"] / 1000.0
            bare_med = bs.median(bare)
            e2e_err = [r.latency - r.final_meta["e2e_latency"] for r in res if r.success and r.final_meta and "e2e_latency" in r.final_meta]
            row = (name, input_len, exp_ttft * 1e3, srv_ttft * 1e3, bare_med * 1e3, ttft * 1e3, pct(ttft, exp_ttft), 1e3 * (ttft - bare_med),
                   exp_tpot * 1e3, tpot * 1e3, pct(tpot, exp_tpot), 1e3 * bs.median(e2e_err))
            spreads.append((1e3 * min(r.ttft for r in res if r.success), 1e3 * max(r.ttft for r in res if r.success)))
            print("%-8s %6d %8.3f ms %9.3f ms %7.3f ms %9.3f ms %+11.2f %% %+9.3f ms %8.4f ms %9.4f ms %+7.2f %% %+12.3f ms%s"
                  % (row + (("  FAILED %d" % m["failed"]) if m["failed"] else "",)))
            out.append(row)
    print("\nGoal: client TTFT and TPOT medians within 2 %% of the simulator's timing model (medians of %d requests;%s\n"
          "the fixed loopback cost moves with the machine's load, so repeat a borderline row)."
          % (args.acc_requests, " fewer than 7 are noisy," if args.acc_requests < 7 else ""))
    for row, (lo, hi) in zip(out, spreads):
        ok = abs(row[6]) <= 2.0 and abs(row[10]) <= 2.0
        print("  %-7s input %5d: TTFT %+.2f %% (requests %.3f..%.3f ms), TPOT %+.2f %% -> %s%s"
              % (row[0], row[1], row[6], lo, hi, row[10], "within 2 %" if ok else "NOT within 2 %",
                 "" if ok else " (the bare socket is %+.2f %% off too: fixed loopback TCP + HTTP cost of %.2f ms)"
                 % (pct(row[4], row[2]), row[4] - row[2])))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--levels", default="64,256,512", help="concurrency levels of the capacity run")
    ap.add_argument("--output-len", type=int, default=256, help="output tokens per request in the capacity run")
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--acc-output-len", type=int, default=201, help="odd, so MTP's 2-token steps divide output-1 exactly")
    ap.add_argument("--acc-requests", type=int, default=7)
    ap.add_argument("--acc-input-lens", default="32,1000",
                    help="prompt lengths of the accuracy rows (1000 = the benchmark's default request shape)")
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--sim-cpu", type=int, default=1)
    ap.add_argument("--skip-capacity", action="store_true")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--log-dir", default="/tmp")
    args = ap.parse_args()
    args.levels = [int(x) for x in args.levels.split(",") if x]
    args.acc_input_lens = [int(x) for x in args.acc_input_lens.split(",") if x]
    if not args.skip_capacity:
        capacity(args, args.log_dir)
    if not args.skip_accuracy:
        accuracy(args, args.log_dir)


if __name__ == "__main__":
    main()
