"""Instant-mode capacity of the SGLang simulator (a test double): concurrent streams and streamed tokens/s.

The simulator runs with SGLANG_SIM_INSTANT=1 (no sleeping) pinned to ONE core (os.sched_setaffinity);
this client runs pinned to another core when the machine has one. The client is a lean asyncio
raw-socket HTTP/1.1 client (no JSON parsing per chunk: it counts SSE events and reads the token count
from the final chunk), so the number measures the simulator, not the client.

Usage: .venv/bin/python benchmarks/sim_load.py [--streams 256] [--tokens 200] [--rounds 2]
       [--endpoint generate|completions|chat] [--spec]
Prints: streams, requests, completed, failed, streamed tokens, SSE chunks, seconds, tokens/s, chunks/s,
and the simulator's CPU time per token (µs).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "sandbox"))

from sglang_sim.harness import SimProcess  # noqa: E402

_COMPLETION_TOKENS = re.compile(rb'"completion_tokens": ?(\d+)')


def _request(endpoint, port, tokens, idx):
    if endpoint == "generate":
        body = {"input_ids": list(range(1, 33)), "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True, "temperature": 0.0},
                "stream": True, "rid": "load-%d" % idx}
        path = "/generate"
    elif endpoint == "completions":
        body = {"model": "m", "prompt": list(range(1, 33)), "max_tokens": tokens, "stream": True, "ignore_eos": True,
                "stream_options": {"include_usage": True}}
        path = "/v1/completions"
    else:
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": tokens, "stream": True,
                "stream_options": {"include_usage": True}}
        path = "/v1/chat/completions"
    data = json.dumps(body).encode()
    head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (path, port, len(data)))
    return head.encode() + data


async def _one_stream(port, endpoint, tokens, rounds, idx, stats):
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    try:
        for rnd in range(rounds):
            writer.write(_request(endpoint, port, tokens, idx * 1000 + rnd))
            tail = b""
            chunks = 0
            while True:
                data = await reader.read(1 << 20)
                if not data:
                    raise ConnectionError("server closed the connection")
                chunks += data.count(b"data: ")
                tail = (tail + data)[-8192:]
                if tail.endswith(b"0\r\n\r\n") and b"data: [DONE]" in tail:
                    break
            found = _COMPLETION_TOKENS.findall(tail)
            stats["tokens"] += int(found[-1]) if found else 0
            stats["chunks"] += chunks
            stats["completed"] += 1
    except (OSError, ConnectionError) as exc:
        stats["failed"] += 1
        stats["errors"].append(str(exc))
    finally:
        writer.close()


async def _run(port, endpoint, streams, tokens, rounds):
    stats = {"tokens": 0, "chunks": 0, "completed": 0, "failed": 0, "errors": []}
    t0 = time.perf_counter()
    await asyncio.gather(*[_one_stream(port, endpoint, tokens, rounds, i, stats) for i in range(streams)])
    return stats, time.perf_counter() - t0


def _cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=256, help="concurrent streams (default 256)")
    parser.add_argument("--tokens", type=int, default=200, help="output tokens per request (default 200)")
    parser.add_argument("--rounds", type=int, default=2, help="requests per stream, one after the other (default 2)")
    parser.add_argument("--endpoint", choices=("generate", "completions", "chat"), default="generate")
    parser.add_argument("--spec", action="store_true", help="run the simulator with MTP (1 step, topk 1, 2 draft tokens)")
    args = parser.parse_args()
    ncpu = os.cpu_count() or 1
    sim_cpu = 0
    flags = ["--max-running-requests", str(max(args.streams, 1)), "--decode-log-interval", "40"]
    if args.spec:
        flags += ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                  "--speculative-num-draft-tokens", "2"]
    srv = SimProcess(flags, env={}, instant=True, load_s=0, cpu=sim_cpu, log_path="/tmp/sim_load-%d.log" % os.getpid())
    try:
        srv.wait_ready(30)
        if ncpu > 1 and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {1})
        cpu0 = _cpu_seconds(srv.proc.pid)
        stats, elapsed = asyncio.run(_run(srv.port, args.endpoint, args.streams, args.tokens, args.rounds))
        cpu1 = _cpu_seconds(srv.proc.pid)
    finally:
        if srv.stop() == 0:
            os.remove(srv.log_path)   # kept when the simulator did not exit cleanly
    tokens = stats["tokens"]
    print("simulator pinned to cpu %d (of %d); client on cpu %s" % (sim_cpu, ncpu, 1 if ncpu > 1 else 0))
    print("endpoint: %s  spec: %s" % (args.endpoint, args.spec))
    print("concurrent streams: %d" % args.streams)
    print("requests completed: %d  failed: %d" % (stats["completed"], stats["failed"]))
    print("streamed tokens: %d  SSE chunks: %d" % (tokens, stats["chunks"]))
    print("elapsed (s): %.2f" % elapsed)
    print("streamed tokens/s: %.0f" % (tokens / elapsed))
    print("SSE chunks/s: %.0f" % (stats["chunks"] / elapsed))
    cpu = cpu1 - cpu0
    print("simulator CPU s: %.2f  (%.1f us per token, %.0f%% of one core)" % (cpu, 1e6 * cpu / max(1, tokens), 100.0 * cpu / elapsed))
    if stats["errors"]:
        print("first errors: %s" % stats["errors"][:3])
    return 0 if stats["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
