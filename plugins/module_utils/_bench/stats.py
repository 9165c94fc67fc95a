# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Serving-benchmark metric maths, exactly as ``sglang.bench_serving`` computes them.

Source of the definitions: ``python/sglang/bench_serving.py`` of SGLang 0.5.9, function
``calculate_metrics`` (see docs/design/SGLANG_FACTS.md section 5.1 and DESIGN.md "Benchmark
semantics"). Pure standard library (no numpy), so it runs inside AnsiballZ on any target Python >= 3.8.

Units: every time in a :class:`RequestResult` is in **seconds** (``time.perf_counter`` deltas);
every ``*_ms`` key of the level metrics is in **milliseconds**; throughputs are per second
(``request_throughput`` req/s, ``*_throughput`` tok/s).

Definitions (bench_serving 0.5.9):

* ``duration`` (s): wall time of the measured run (warm-up excluded), from the first request's
  dispatch to the end of the last one.
* ``completed``: requests that finished without error. Failed requests count 0 output tokens.
* ``request_throughput`` = completed / duration; ``input_throughput`` = Σprompt_len(completed) /
  duration; ``output_throughput`` = Σoutput_len(completed) / duration; ``total_throughput`` = their sum.
* TTFT (s): time from dispatch to the first chunk that carried at least one token.
* E2E latency (s): time from dispatch to the end of the stream.
* TPOT (s/token), per request with output_len > 1: (latency - ttft) / (output_len - 1).
* ITL (s/token): for the SGLang ``/generate`` backend, the gap between two chunks is divided evenly
  over the Δcompletion_tokens the later chunk carried (so a 3-token chunk after 30 ms gives three
  10 ms samples); for the OpenAI backends each chunk gap is one sample.
* ``concurrency`` = Σ e2e latency(completed) / duration (the mean number of requests in flight).
* Percentiles use numpy's default ``linear`` interpolation; ``std`` is the population standard
  deviation (numpy ``ddof=0``); empty lists give 0 (bench_serving's ``np.mean(x or 0)``).
* ``max_output_tokens_per_s`` / ``max_concurrent_requests``: tokens and running requests bucketed
  per whole second since the first request's start (bench_serving 0.5.9 ``calculate_metrics``).
* ``accept_length`` (this collection's per-level value, *not* bench_serving's server-lifetime one):
  Σcompletion_tokens / Σspec_verify_ct over the final ``meta_info`` of this level's completed
  requests (SGLang 0.5.9 ``/generate`` finishing chunk), or ``None`` when the server reported no
  ``spec_verify_ct`` (speculative decoding off, or an OpenAI backend).
"""

from __future__ import annotations

import math
import re

# Key order of one bench_serving 0.5.9 JSONL line (SGLANG_FACTS.md section 5.1). The p90/p95 keys
# that 0.5.14+ added are appended after these by :func:`level_metrics`.
BENCH_SERVING_KEYS = (
    "tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len",
    "random_input_len", "random_output_len", "random_range_ratio", "server_info", "duration", "completed",
    "total_input_tokens", "total_input_text_tokens", "total_input_vision_tokens", "total_output_tokens",
    "total_output_tokens_retokenized", "request_throughput", "input_throughput", "output_throughput",
    "total_throughput", "mean_e2e_latency_ms", "median_e2e_latency_ms", "std_e2e_latency_ms",
    "p90_e2e_latency_ms", "p99_e2e_latency_ms", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms",
    "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
    "median_itl_ms", "std_itl_ms", "p95_itl_ms", "p99_itl_ms", "concurrency", "accept_length",
    "max_output_tokens_per_s", "max_concurrent_requests",
)

# Numbers in an error message (token counts, seconds, ports): masked when errors are grouped by kind.
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

# Extra keys this collection adds to each line (bench_serving 0.5.14+ names where one exists).
EXTRA_KEYS = (
    "p95_e2e_latency_ms", "p90_ttft_ms", "p95_ttft_ms", "p90_tpot_ms", "p95_tpot_ms", "p90_itl_ms",
    "max_itl_ms", "num_prompts", "failed", "failed_fraction", "error_kinds", "decode_tok_s_per_request",
    "accept_length_source", "spec_verify_ct", "warmup_requests", "seed", "cached_tokens",
    "arrival", "burstiness", "trace_time_scale", "slo", "goodput", "goodput_completed", "goodput_fraction",
)

# bench_serving 0.5.9 ``--output-details`` keys, in its order (``result_details`` in ``benchmark``).
DETAIL_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")

# SLO names of :func:`goodput` (ms), as vLLM's ``--goodput ttft:<ms> tpot:<ms> e2el:<ms>``.
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_latency_ms")


class RequestResult(object):
    """Outcome of one benchmark request (bench_serving's ``RequestFuncOutput``).

    Attributes (times in seconds, relative to ``time.perf_counter``):
      success (bool): the stream ended normally (finish chunk / ``[DONE]``) with no error.
      prompt_len (int): input tokens sent (token ids, or the server's ``prompt_tokens``).
      output_len (int): output tokens, from the server's cumulative ``completion_tokens`` (SGLang
        ``/generate`` meta_info) or the OpenAI ``usage.completion_tokens``.
      start_time (float): dispatch time (perf_counter).
      ttft (float): time to the first chunk carrying a token, 0.0 if none arrived.
      latency (float): E2E latency, dispatch to end of stream.
      itl (list of float): inter-token latencies (see the module docstring).
      error (str): why the request failed ('' on success).
      spec_verify_ct (int or None): ``meta_info.spec_verify_ct`` of the final /generate chunk.
      status (int or None): HTTP status code, when one was received.
      final_meta (dict or None): the ``meta_info`` of the finishing /generate chunk.
      generated_text (str): the output text, kept only when the client was asked to (``Target.keep_text``).
      conversation (int or None): index of the conversation (the level's prompt index) in a multi-turn run.
      turn (int or None): 1-based turn of that conversation; None for single-turn requests.
    """

    __slots__ = ("success", "prompt_len", "output_len", "start_time", "ttft", "latency", "itl", "error",
                 "spec_verify_ct", "status", "final_meta",
                 "generated_text", "conversation", "turn")

    def __init__(self, prompt_len=0, output_len=0, success=False, start_time=0.0, ttft=0.0, latency=0.0,
                 itl=None, error="", spec_verify_ct=None, status=None, final_meta=None, generated_text="",
                 conversation=None, turn=None):
        self.success = success
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.start_time = start_time
        self.ttft = ttft
        self.latency = latency
        self.itl = itl if itl is not None else []
        self.error = error
        self.spec_verify_ct = spec_verify_ct
        self.status = status
        self.final_meta = final_meta
        self.generated_text = generated_text
        self.conversation = conversation
        self.turn = turn

    def as_dict(self):
        """A JSON-serialisable dict of all fields (times in seconds)."""
        return dict((k, getattr(self, k)) for k in self.__slots__)


def percentile(values, q):
    """Return the ``q``-th percentile (0 <= q <= 100) of ``values`` like ``numpy.percentile``.

    Uses numpy's default ``method='linear'``: sort, position ``(n - 1) * q / 100``, linear
    interpolation between the two neighbouring order statistics. An empty sequence gives 0.0
    (bench_serving calls ``np.percentile(x or 0, q)``).

    Raises ValueError when ``q`` is outside [0, 100].
    """
    if q < 0 or q > 100:
        raise ValueError("percentile q must be within [0, 100], got %r" % (q,))
    if not values:
        return 0.0
    data = sorted(values)
    pos = (len(data) - 1) * (q / 100.0)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(data) - 1)
    frac = pos - lo
    return data[lo] + (data[hi] - data[lo]) * frac


def mean(values):
    """Arithmetic mean; 0.0 for an empty sequence (bench_serving ``np.mean(x or 0)``)."""
    if not values:
        return 0.0
    return math.fsum(values) / len(values)


def median(values):
    """Median (numpy: the 50th percentile with linear interpolation); 0.0 when empty."""
    return percentile(values, 50)


def std(values):
    """Population standard deviation (numpy ``np.std``, ``ddof=0``); 0.0 when empty."""
    if not values:
        return 0.0
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / len(values))


def split_itl(gap_s, new_tokens):
    """ITL samples for one chunk: ``gap_s`` (s) split evenly over ``new_tokens`` tokens.

    bench_serving 0.5.9 ``async_request_sglang_generate``: ``adjust_itl = chunk_gap / num_new_tokens``,
    extended ``num_new_tokens`` times. A chunk carrying no new token yields no sample.
    """
    if new_tokens <= 0:
        return []
    return [gap_s / new_tokens] * new_tokens


def tpot(result):
    """TPOT (s/token) of one request, or None when output_len <= 1: (latency - ttft)/(output_len - 1)."""
    if result.output_len > 1:
        return (result.latency - result.ttft) / (result.output_len - 1)
    return None


def token_times(result):
    """Arrival times (perf_counter s) of a request's output tokens, bench_serving 0.5.9's timeline: the first at
    ``start_time + ttft``, then one after each ITL sample (a chunk's gap split over its tokens, :func:`split_itl`)."""
    t = result.start_time + result.ttft
    out = [t]
    for gap in result.itl:
        t += gap
        out.append(t)
    return out


def peak_rates(results):
    """(max_output_tokens_per_s, max_concurrent_requests) bucketed per whole second.

    bench_serving 0.5.9: token times are start + ttft, then + each ITL; each lands in bucket
    ``int(t - min_start)``; a request counts as running in every bucket from ``int(start - min_start)``
    to ``int(end - min_start)`` inclusive. Only completed requests count. Returns (0.0, 0) if none.
    """
    ok = [r for r in results if r.success]
    if not ok:
        return 0.0, 0
    t0 = min(r.start_time for r in ok)
    t_end = max(r.start_time + r.latency for r in ok)
    nbuckets = int(math.ceil(t_end - t0)) + 1
    tokens = [0] * nbuckets
    running = [0] * nbuckets
    for r in ok:
        for t in token_times(r):
            b = int(t - t0)
            if 0 <= b < nbuckets:
                tokens[b] += 1
        first = int(r.start_time - t0)
        last = min(int(r.start_time + r.latency - t0), nbuckets - 1)
        for b in range(first, last + 1):
            running[b] += 1
    return float(max(tokens)), int(max(running))


def accept_length(results):
    """Per-level accept length: Σcompletion_tokens / Σspec_verify_ct over completed requests.

    Only requests whose final chunk carried ``spec_verify_ct`` > 0 (SGLang 0.5.9 /generate
    ``meta_info``) count. Returns (accept_length or None, Σspec_verify_ct).
    """
    toks = 0
    verify = 0
    for r in results:
        if r.success and r.spec_verify_ct:
            toks += r.output_len
            verify += r.spec_verify_ct
    if verify <= 0:
        return None, 0
    return toks / float(verify), verify


def normalize_slo(slo):
    """The SLO dict with only the thresholds that are set: ``{name: ms}`` for names in :data:`SLO_KEYS`.

    Raises ValueError naming the key for an unknown name or a threshold that is not a number > 0 ms.
    """
    out = {}
    for k, v in (slo or {}).items():
        if v is None:
            continue
        if k not in SLO_KEYS:
            raise ValueError("unknown SLO %r; supported SLOs (ms): %s" % (k, ", ".join(SLO_KEYS)))
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v <= 0 or math.isinf(v):
            raise ValueError("SLO %s=%r must be a number > 0 (ms); e.g. ttft_ms: 500" % (k, v))
        out[k] = float(v)
    return out


def meets_slo(result, slo):
    """True when a completed request meets every threshold of ``slo`` (``{name: ms}``, see :func:`normalize_slo`).

    vLLM ``benchmark_serving`` ``--goodput`` semantics: a value equal to its threshold meets it; a request
    with one output token has TPOT 0 (it meets any TPOT SLO). A failed request never meets the SLOs.
    """
    if not result.success:
        return False
    t = tpot(result)
    values = {"ttft_ms": result.ttft * 1000.0, "tpot_ms": (t or 0.0) * 1000.0, "e2e_latency_ms": result.latency * 1000.0}
    for k, limit in slo.items():
        if values[k] > limit:
            return False
    return True


def goodput(results, duration_s, slo):
    """``(goodput req/s, good requests)``: completed requests meeting every SLO, per second of the run.

    As vLLM's ``--goodput`` and aiperf's ``--goodput``: good / ``duration_s`` (s). ``slo`` as
    :func:`normalize_slo` returns. Raises ValueError when ``duration_s`` is not > 0.
    """
    if not duration_s or duration_s <= 0:
        raise ValueError("benchmark duration must be > 0 s, got %r" % (duration_s,))
    good = sum(1 for r in results if meets_slo(r, slo))
    return good / duration_s, good


def output_details(results):
    """Per-request lists under bench_serving 0.5.9's ``--output-details`` keys (:data:`DETAIL_KEYS`).

    As bench_serving builds them: ``input_lens`` (prompt tokens, every request), ``output_lens`` (output
    tokens of the *completed* requests only, so it is shorter when some failed), ``ttfts`` (s, 0.0 when no
    token came), ``itls`` (per request, list of s), ``generated_texts`` (the output text when the client kept
    it, else ''), ``errors`` (per request, '' on success).
    """
    return {
        "input_lens": [r.prompt_len for r in results],
        "output_lens": [r.output_len for r in results if r.success],
        "ttfts": [r.ttft for r in results],
        "itls": [list(r.itl) for r in results],
        "generated_texts": [r.generated_text or "" for r in results],
        "errors": [r.error or "" for r in results],
    }


def level_metrics(results, duration_s, max_errors=5, slo=None):
    """Compute one level's metrics from its :class:`RequestResult` list and duration (s).

    Returns a dict with every numeric bench_serving 0.5.9 JSONL key (``completed`` ...
    ``max_concurrent_requests``; configuration keys such as ``backend`` are added by the caller),
    the 0.5.14+ p90/p95 keys, and this collection's extras: ``failed`` (count),
    ``failed_fraction`` (0..1), ``error_kinds`` (the first ``max_errors`` distinct kinds of error, each
    ``{"error": the first message of that kind, "count": requests}``; messages that differ only in
    their numbers, e.g. ``... after 412 tokens`` and ``... after 415 tokens``, are one kind, so the
    counts add up to ``failed`` unless there are more kinds than ``max_errors``), ``max_itl_ms``,
    ``decode_tok_s_per_request`` (1000 / median TPOT in ms, the per-request decode speed; 0.0 without TPOT samples), ``accept_length`` and ``spec_verify_ct``,
    ``cached_tokens`` (Σ ``meta_info.cached_tokens`` of the completed requests, SGLang's prefix-cache hits; None when no
    response carried it), and with ``slo`` (``{ttft_ms, tpot_ms, e2e_latency_ms}``, ms, None = not set) ``slo`` (the
    thresholds set), ``goodput`` (req/s meeting all of them, see :func:`goodput`), ``goodput_completed`` and
    ``goodput_fraction`` (good / all requests); all None without an SLO.

    Raises ValueError when ``duration_s`` is not > 0 or an SLO is invalid.
    """
    if not duration_s or duration_s <= 0:
        raise ValueError("benchmark duration must be > 0 s, got %r" % (duration_s,))
    ttfts, e2es, tpots, itls = [], [], [], []
    total_in = 0
    total_out = 0
    completed = 0
    err_counts = {}
    err_order = []
    for r in results:
        if r.success:
            completed += 1
            total_in += r.prompt_len
            total_out += r.output_len
            ttfts.append(r.ttft)
            e2es.append(r.latency)
            t = tpot(r)
            if t is not None:
                tpots.append(t)
            itls.extend(r.itl)
        else:
            msg = r.error or "unknown error"
            kind = _NUMBER.sub("#", msg)
            if kind not in err_counts:
                err_counts[kind] = 0
                err_order.append((kind, msg))
            err_counts[kind] += 1
    failed = len(results) - completed
    slo = normalize_slo(slo)
    cached = [r.final_meta.get("cached_tokens") for r in results if r.success and r.final_meta]
    cached = [c for c in cached if isinstance(c, int) and not isinstance(c, bool)]
    acc, verify_ct = accept_length(results)
    peak_tok, peak_conc = peak_rates(results)
    ms = 1000.0
    med_tpot_ms = median(tpots) * ms
    out = {
        "duration": duration_s,
        "completed": completed,
        "total_input_tokens": total_in,
        "total_input_text_tokens": total_in,
        "total_input_vision_tokens": 0,
        "total_output_tokens": total_out,
        "total_output_tokens_retokenized": total_out,
        "request_throughput": completed / duration_s,
        "input_throughput": total_in / duration_s,
        "output_throughput": total_out / duration_s,
        "total_throughput": (total_in + total_out) / duration_s,
        "mean_e2e_latency_ms": mean(e2es) * ms,
        "median_e2e_latency_ms": median(e2es) * ms,
        "std_e2e_latency_ms": std(e2es) * ms,
        "p90_e2e_latency_ms": percentile(e2es, 90) * ms,
        "p95_e2e_latency_ms": percentile(e2es, 95) * ms,
        "p99_e2e_latency_ms": percentile(e2es, 99) * ms,
        "mean_ttft_ms": mean(ttfts) * ms,
        "median_ttft_ms": median(ttfts) * ms,
        "std_ttft_ms": std(ttfts) * ms,
        "p90_ttft_ms": percentile(ttfts, 90) * ms,
        "p95_ttft_ms": percentile(ttfts, 95) * ms,
        "p99_ttft_ms": percentile(ttfts, 99) * ms,
        "mean_tpot_ms": mean(tpots) * ms,
        "median_tpot_ms": med_tpot_ms,
        "std_tpot_ms": std(tpots) * ms,
        "p90_tpot_ms": percentile(tpots, 90) * ms,
        "p95_tpot_ms": percentile(tpots, 95) * ms,
        "p99_tpot_ms": percentile(tpots, 99) * ms,
        "mean_itl_ms": mean(itls) * ms,
        "median_itl_ms": median(itls) * ms,
        "std_itl_ms": std(itls) * ms,
        "p90_itl_ms": percentile(itls, 90) * ms,
        "p95_itl_ms": percentile(itls, 95) * ms,
        "p99_itl_ms": percentile(itls, 99) * ms,
        "max_itl_ms": (max(itls) if itls else 0.0) * ms,
        "concurrency": math.fsum(e2es) / duration_s,
        "accept_length": acc,
        "spec_verify_ct": verify_ct,
        "max_output_tokens_per_s": peak_tok,
        "max_concurrent_requests": peak_conc,
        "failed": failed,
        "failed_fraction": (failed / float(len(results))) if results else 0.0,
        "error_kinds": [{"error": m, "count": err_counts[k]} for k, m in err_order[:max_errors]],
        "decode_tok_s_per_request": (1000.0 / med_tpot_ms) if med_tpot_ms > 0 else 0.0,
        "cached_tokens": sum(cached) if cached else None,
        "slo": slo or None, "goodput": None, "goodput_completed": None, "goodput_fraction": None,
    }
    if slo:
        gp, good = goodput(results, duration_s, slo)
        out.update(goodput=gp, goodput_completed=good, goodput_fraction=(good / float(len(results))) if results else 0.0)
    return out
