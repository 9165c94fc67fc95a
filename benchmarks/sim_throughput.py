"""Real-time throughput of the SGLang simulator (a test double) with MTP off and on.

Measures, against the simulator in real-time mode (default timing model):
  * single-stream output throughput, MTP off and on (1 step, topk 1, 2 draft tokens, p = 1);
    targets 110 +- 5 tok/s off, 135 +- 7 tok/s on with accept length 2.00;
  * 64-stream output throughput, MTP off and on (--max-running-requests 64), and MTP on with
    SGLang's default 48-request cap under speculation (no --max-running-requests);
  * a short concurrency sweep around the crossover, and the crossover concurrency computed from
    the timing model's arithmetic (sglang_sim.timing.crossover_concurrency).

Output throughput = completion tokens / wall time of the level (bench_serving's definition; includes
prefill and queueing); decode tok/s per request = (completion_tokens - 1) / (e2e - ttft).
Usage: .venv/bin/python benchmarks/sim_throughput.py [--tokens 256] [--quick]
Takes about 1-2 minutes.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "sandbox"))

from sglang_sim.harness import SimProcess, stream_generate  # noqa: E402
from sglang_sim.timing import TimingModel, crossover_concurrency  # noqa: E402

MTP = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
       "--speculative-num-draft-tokens", "2", "--mamba-scheduler-strategy", "extra_buffer"]
BASE = ["--tp", "4", "--served-model-name", "qwen3.5-122b"]


async def _level(port, concurrency, requests_per_stream, tokens):
    results = []

    async def worker(idx):
        for rnd in range(requests_per_stream):
            results.append(await stream_generate(port, 32, tokens, rid="bench-%d-%d" % (idx, rnd)))

    t0 = time.monotonic()
    await asyncio.gather(*[worker(i) for i in range(concurrency)])
    duration = time.monotonic() - t0
    out = sum(r["completion_tokens"] for r in results)
    decode = [(r["completion_tokens"] - 1) / (r["e2e"] - r["ttft"]) for r in results if r["completion_tokens"] > 1]
    verify = sum(r["meta_info"].get("spec_verify_ct", 0) for r in results)
    accept = (out / float(verify)) if verify else None
    return {"concurrency": concurrency, "requests": len(results), "duration": duration, "output_throughput": out / duration,
            "median_decode_tps": statistics.median(decode), "accept_length": accept,
            "median_ttft_ms": 1000 * statistics.median(r["ttft"] for r in results)}


def measure(flags, levels, tokens, env=None):
    srv = SimProcess(BASE + flags, env=env or {}, load_s=0.05, log_path="/tmp/sim_throughput-%d.log" % os.getpid())
    out = []
    try:
        srv.wait_ready(30)
        for conc, rounds in levels:
            out.append(asyncio.run(_level(srv.port, conc, rounds, tokens)))
        info = srv.get_json("/server_info")
    finally:
        if srv.stop() == 0:
            os.remove(srv.log_path)   # kept when the simulator did not exit cleanly
    return out, info


def _fmt(row, label):
    acc = "%.2f" % row["accept_length"] if row["accept_length"] else "-"
    return ("%-28s conc %3d  reqs %3d  %7.1f s  output %7.1f tok/s  decode/req %6.1f tok/s  accept len %s  TTFT p50 %.1f ms"
            % (label, row["concurrency"], row["requests"], row["duration"], row["output_throughput"], row["median_decode_tps"], acc,
               row["median_ttft_ms"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=256, help="output tokens per request (default 256)")
    parser.add_argument("--quick", action="store_true", help="skip the measured crossover sweep")
    args = parser.parse_args()
    t_start = time.monotonic()
    off = TimingModel()
    on = TimingModel(num_steps=1, num_draft_tokens=2)
    cross = crossover_concurrency(off, on)
    print("timing model (ms): t0=%.2f k=%.3f draft=%.2f draft_k=%.3f verify=%.2f"
          % (off.t0 * 1e3, off.k * 1e3, off.draft * 1e3, off.draft_k * 1e3, off.verify * 1e3))
    print("model arithmetic: single stream off %.1f tok/s, on %.1f tok/s (accept length 2.00); MTP stops paying at concurrency %s"
          % (off.steady_throughput(1), on.steady_throughput(1), cross))
    print("model arithmetic at 64 streams: off %.0f tok/s, on %.0f tok/s" % (off.steady_throughput(64), on.steady_throughput(64)))
    sweep = [] if args.quick else [(16, 1), (24, 1), (28, 1), (32, 1)]
    rows_off, _unused = measure(["--max-running-requests", "64"], [(1, 3), (64, 1)] + sweep, args.tokens)
    rows_on, info = measure(MTP + ["--max-running-requests", "64"], [(1, 3), (64, 1)] + sweep, args.tokens)
    rows_cap, info_cap = measure(MTP, [(64, 1)], args.tokens)
    print()
    print(_fmt(rows_off[0], "single stream, MTP off"))
    print(_fmt(rows_on[0], "single stream, MTP on"))
    print(_fmt(rows_off[1], "64 streams, MTP off"))
    print(_fmt(rows_on[1], "64 streams, MTP on"))
    print(_fmt(rows_cap[0], "64 streams, MTP on, cap 48"))
    print("server avg_spec_accept_length (lifetime): %s; max_running_requests without the flag: %s"
          % (info["internal_states"][0].get("avg_spec_accept_length"), info_cap["max_running_requests"]))
    if sweep:
        print()
        print("measured sweep (output tok/s, off vs on):")
        measured_cross = None
        for r_off, r_on in zip(rows_off[2:], rows_on[2:]):
            gain = r_on["output_throughput"] / r_off["output_throughput"]
            print("  concurrency %3d: off %7.1f  on %7.1f  on/off %.3f"
                  % (r_off["concurrency"], r_off["output_throughput"], r_on["output_throughput"], gain))
            if gain <= 1.0 and measured_cross is None:
                measured_cross = r_off["concurrency"]
        print("measured: first swept concurrency where MTP does not pay: %s (timing model: MTP pays up to %d, loses from %s on)"
              % (measured_cross, (cross or 1) - 1, cross))
    single_off = rows_off[0]["output_throughput"]
    single_on = rows_on[0]["output_throughput"]
    ok = abs(single_off - 110) <= 5 and abs(single_on - 135) <= 7 and abs((rows_on[0]["accept_length"] or 0) - 2.0) < 0.005
    print()
    print("targets: single off 110+-5 -> %.1f, single on 135+-7 -> %.1f, accept length 2.00 -> %.2f: %s"
          % (single_off, single_on, rows_on[0]["accept_length"], "OK" if ok else "MISSED"))
    print("total benchmark time: %.1f s" % (time.monotonic() - t_start))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
