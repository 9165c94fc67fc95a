# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The benchmark load split over several client processes (``multiprocessing``, standard library only).

One asyncio process drives about 77k output tok/s against the simulator's instant mode (one core);
a router in front of many replicas needs more. :func:`run_benchmark_processes` forks ``processes``
workers that each run :func:`bench_client.run_benchmark` on a share of the requests, and merges their
per-request records, in the original request order, *before* any metric is computed, so
:func:`bench_stats.level_metrics` sees what one process would have seen:

* The arrival schedule is computed once (:mod:`arrivals`: Poisson, gamma or trace offsets) and
  request ``i`` keeps its offset; all workers count offsets from one shared ``time.perf_counter()``
  instant (Linux CLOCK_MONOTONIC, the same in every process), set a little after the fork.
* Requests are dealt round-robin (request ``i`` to worker ``i mod N``); ``max_concurrency`` is split
  as evenly as integers allow (worker ``k`` gets ``mc // N`` plus one for ``k < mc mod N``), and with
  ``mc < N`` only ``mc`` workers run. The global limit is then per-worker limits that add up to it: a
  worker whose requests end early cannot lend its slots to another (with many requests per worker the
  difference vanishes; one process is exact).
* ``duration`` is from the shared start to the end of the last request of any worker, as
  bench_serving measures it. Warm-up requests are sent by the parent before the workers start.
* ``abort_after_failures`` counts consecutive failures per worker.
* A multi-turn conversation (a prompt with ``turns``) is dealt whole to one worker: its turns depend on each other's
  answers. Its records come back in turn order and are merged under its prompt index (:func:`merge_share`).

Needs the ``fork`` start method (Linux, the targets this collection supports): a worker inherits the
module's code and arguments without pickling them, and leaves with ``os._exit`` (multiprocessing does
so), so it never runs the parent's ``atexit`` clean-ups.
"""

from __future__ import annotations

import time
import traceback

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bench_client
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult

try:
    import multiprocessing
    _FORK = multiprocessing.get_context("fork")
except (ImportError, ValueError):  # pragma: no cover - platforms without fork
    _FORK = None

# s between the fork and the shared start: the workers build their request bodies before it.
START_MARGIN_S = 0.2


def split_concurrency(max_concurrency, processes):
    """Per-worker concurrency limits: ``[mc // N + (k < mc % N) for k in range(min(N, mc))]``, or ``[None] * N`` without a limit."""
    if not max_concurrency:
        return [None] * processes
    n = min(processes, max_concurrency)
    return [max_concurrency // n + (1 if k < max_concurrency % n else 0) for k in range(n)]


def _worker(conn, target, prompts, limit, offsets, start, abort_after):
    try:
        results, _dur, _w = bench_client.run_benchmark(target, prompts, max_concurrency=limit, arrival_offsets=offsets,
                                                       abort_after_failures=abort_after, start=start)
        conn.send(("ok", [r.as_dict() for r in results]))
    except Exception as exc:  # pylint: disable=broad-except
        conn.send(("error", "%s: %s\n%s" % (type(exc).__name__, exc, traceback.format_exc())))
    finally:
        conn.close()


def merge_share(per_prompt, prompts, share, payload):
    """Put one worker's flat records (``RequestResult.as_dict()``, in its prompts' order, a conversation's turns in a
    row) back under their prompt indices: ``per_prompt[i]`` becomes the list of prompt ``i``'s RequestResults
    (``prompts[i].requests()`` of them), with ``conversation`` renumbered from the worker's index to ``i``.
    Raises ValueError when the payload does not hold exactly the requests of ``share``."""
    pos = 0
    for i in share:
        n = prompts[i].requests()
        chunk = payload[pos:pos + n]
        if len(chunk) != n:
            raise ValueError("returned %d records for %d requests" % (len(payload), sum(prompts[x].requests() for x in share)))
        rs = [RequestResult(**d) for d in chunk]
        for r in rs:
            if r.conversation is not None:
                r.conversation = i
        per_prompt[i] = rs
        pos += n
    if pos != len(payload):
        raise ValueError("returned %d records for %d requests" % (len(payload), pos))


def run_benchmark_processes(target, prompts, processes=1, max_concurrency=None, request_rate=None, burstiness=1.0,
                            arrival_offsets=None, warmup_prompts=None, seed=1, abort_after_failures=0):
    """Like :func:`bench_client.run_benchmark`, the load split over ``processes`` forked workers.

    Returns ``(results, duration_s, warmup_results)``: one :class:`RequestResult` per prompt, in prompt
    order; ``duration_s`` from the shared start to the last request's end (s). ``processes`` 1 runs in
    this process (exactly :func:`bench_client.run_benchmark`).

    Raises BenchError for ``processes`` < 1, a platform without ``fork``, bad rates (as run_benchmark),
    or a worker that died or raised (its message and traceback included).
    """
    if processes is None or processes < 1:
        raise bench_client.BenchError("client_processes must be >= 1, got %r" % (processes,))
    if max_concurrency is not None and max_concurrency < 0:
        raise bench_client.BenchError("max_concurrency must be >= 1 (or empty for no limit), got %r" % (max_concurrency,))
    if processes == 1:
        return bench_client.run_benchmark(target, prompts, max_concurrency=max_concurrency, request_rate=request_rate,
                                          warmup_prompts=warmup_prompts, seed=seed, abort_after_failures=abort_after_failures,
                                          burstiness=burstiness, arrival_offsets=arrival_offsets)
    if _FORK is None:
        raise bench_client.BenchError("client_processes=%d needs the fork start method (Linux); use 1 here" % processes)
    offsets = bench_client.send_offsets(len(prompts), request_rate, burstiness, seed, arrival_offsets)
    warm = []
    if warmup_prompts:
        warm, _d, _w = bench_client.run_benchmark(target, warmup_prompts, max_concurrency=len(warmup_prompts),
                                                  abort_after_failures=abort_after_failures)
    limits = split_concurrency(max_concurrency, min(processes, len(prompts)) or 1)
    n = len(limits)
    shares = [list(range(k, len(prompts), n)) for k in range(n)]
    start = time.perf_counter() + START_MARGIN_S + 0.02 * n
    workers = []
    for k in range(n):
        if not shares[k]:
            continue
        parent_conn, child_conn = _FORK.Pipe(duplex=False)
        proc = _FORK.Process(target=_worker, args=(child_conn, target, [prompts[i] for i in shares[k]], limits[k],
                                                   [offsets[i] for i in shares[k]], start, abort_after_failures))
        proc.daemon = True
        proc.start()
        child_conn.close()
        workers.append((k, proc, parent_conn))
    per_prompt = [None] * len(prompts)
    problems = []
    for k, proc, conn in workers:
        try:
            status, payload = conn.recv()
        except EOFError:
            status, payload = "error", "worker exited without a result (exit code %s)" % proc.exitcode
        proc.join()
        if status != "ok":
            problems.append("client process %d: %s" % (k, payload))
            continue
        try:
            merge_share(per_prompt, prompts, shares[k], payload)
        except ValueError as exc:
            problems.append("client process %d: %s" % (k, exc))
    if problems:
        raise bench_client.BenchError("; ".join(problems))
    results = [r for rs in per_prompt for r in rs]
    ends = [r.start_time + r.latency for r in results if r.start_time]
    duration = (max(ends) if ends else time.perf_counter()) - start
    return results, max(duration, 1e-9), warm
