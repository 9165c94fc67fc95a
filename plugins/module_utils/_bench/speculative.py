# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Per-request speculative-decoding accounting and per-category statistics of a benchmark level (pure Python).

Source of the per-request numbers: the final ``meta_info`` of each SGLang ``/generate`` response
(docs/design/SGLANG_FACTS.md section 4.1): ``completion_tokens`` and ``spec_verify_ct`` (every version with
speculative decoding on), the accepted / proposed draft-token counts named ``spec_accept_token_num`` /
``spec_draft_token_num`` in 0.5.9/0.5.10 and ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` from 0.5.14 on
(0.5.14 also sends the aliases ``spec_accepted_drafts`` / ``spec_proposed_drafts``; 0.4.10 and 0.5.4 send no counts;
then accepted = completion_tokens - spec_verify_ct, the bonus token of each verify step taken out, and the accept rate is not available).

Definitions (per request with ``spec_verify_ct`` > 0):

* accept length = completion_tokens / spec_verify_ct (SGLang's ``spec_accept_length``; tokens per verify step);
* accept rate = accepted drafts / proposed drafts (0..1; SGLang 0.5.14+'s per-request definition).

Per group of requests (a level, or one category of a level): ``accept_length`` pooled as
Σcompletion_tokens / Σspec_verify_ct (the token-weighted value, comparable with the level's ``accept_length``),
``accept_length_mean``/``_p10``/``_p50``/``_p90`` over the requests (numpy-linear percentiles), ``accept_rate`` pooled as
Σaccepted / Σproposed (None unless every request reported both counts), ``output_tok_s`` = Σoutput tokens of the group /
the level's duration (the group's share of the level's output throughput, tok/s), TPOT mean/median (ms) and
``decode_tok_s_per_request`` = 1000 / median TPOT (tok/s). Failed requests only count in ``failed``.
"""

from __future__ import annotations

import math

from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import mean, median, percentile, tpot
from ansible_collections.llmops.sglang.plugins.module_utils._server.metrics import (
    MetricsParseError, counter_total, gauge_mean, parse_prometheus)

# (accepted, proposed) key pairs by SGLang version, newest first.
_COUNT_KEYS = (("spec_num_correct_drafts", "spec_num_proposed_drafts"), ("spec_accepted_drafts", "spec_proposed_drafts"),
               ("spec_accept_token_num", "spec_draft_token_num"))
HISTOGRAM_WIDTH = 0.25


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def request_spec(meta):
    """Speculative numbers of one response from its final ``meta_info`` (dict), or None without ``spec_verify_ct`` > 0.

    Returns ``{"completion_tokens", "verify_ct", "accepted", "proposed" (None when not reported), "accept_length",
    "accept_rate" (None without proposed)}``.
    """
    if not isinstance(meta, dict):
        return None
    verify = _int(meta.get("spec_verify_ct"))
    ct = _int(meta.get("completion_tokens"))
    if not verify or verify <= 0 or ct is None:
        return None
    accepted = proposed = None
    for acc_key, prop_key in _COUNT_KEYS:
        if _int(meta.get(acc_key)) is not None:
            accepted = meta[acc_key]
            proposed = _int(meta.get(prop_key))
            break
    if accepted is None:
        accepted = max(0, ct - verify)
    return {"completion_tokens": ct, "verify_ct": verify, "accepted": accepted, "proposed": proposed,
            "accept_length": ct / float(verify),
            "accept_rate": (accepted / float(proposed)) if proposed else None}


def group_stats(results, duration_s):
    """Statistics of a group of :class:`bench_stats.RequestResult` (see the module docstring for each key).

    ``duration_s``: the level's duration (s, > 0). Returns a dict; accept-length keys are None when no request of the
    group carried ``spec_verify_ct`` (speculative decoding off, or an OpenAI backend).
    """
    if not duration_s or duration_s <= 0:
        raise ValueError("duration must be > 0 s, got %r" % (duration_s,))
    ok = [r for r in results if r.success]
    specs = [s for s in (request_spec(r.final_meta) for r in ok) if s is not None]
    tpots = [t for t in (tpot(r) for r in ok) if t is not None]
    out_tokens = sum(r.output_len for r in ok)
    lengths = [s["accept_length"] for s in specs]
    verify = sum(s["verify_ct"] for s in specs)
    have_rate = bool(specs) and all(s["proposed"] for s in specs)
    med_tpot_ms = median(tpots) * 1000.0
    return {
        "requests": len(results),
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "output_tokens": out_tokens,
        "output_tok_s": out_tokens / duration_s,
        "mean_tpot_ms": mean(tpots) * 1000.0,
        "median_tpot_ms": med_tpot_ms,
        "decode_tok_s_per_request": (1000.0 / med_tpot_ms) if med_tpot_ms > 0 else 0.0,
        "spec_requests": len(specs),
        "accept_length": (sum(s["completion_tokens"] for s in specs) / float(verify)) if verify else None,
        "accept_length_mean": mean(lengths) if lengths else None,
        "accept_length_p10": percentile(lengths, 10) if lengths else None,
        "accept_length_p50": percentile(lengths, 50) if lengths else None,
        "accept_length_p90": percentile(lengths, 90) if lengths else None,
        "accept_rate": (sum(s["accepted"] for s in specs) / float(sum(s["proposed"] for s in specs))) if have_rate else None,
    }


def accept_length_histogram(results, width=HISTOGRAM_WIDTH):
    """Histogram of the per-request accept lengths of completed requests: ``[{"lo", "hi", "count"}]``, bins of
    ``width`` tokens from 1.0 up to the bin holding the largest value (a value on an edge counts in the bin above it).
    Empty when no request carried ``spec_verify_ct``."""
    values = [s["accept_length"] for s in (request_spec(r.final_meta) for r in results if r.success) if s is not None]
    if not values:
        return []
    nbins = int(math.floor((max(values) - 1.0) / width + 1e-9)) + 1
    counts = [0] * nbins
    for v in values:
        counts[min(nbins - 1, max(0, int(math.floor((v - 1.0) / width + 1e-9))))] += 1
    return [{"lo": round(1.0 + i * width, 6), "hi": round(1.0 + (i + 1) * width, 6), "count": c} for i, c in enumerate(counts)]


def by_category(prompts, results, duration_s):
    """``{category: group_stats}`` for a level, pairing ``prompts[i]`` (with ``.category``) and ``results[i]``.

    Empty when no prompt carries a category (random token ids). Categories are sorted by name.
    """
    groups = {}
    for p, r in zip(prompts, results):
        cat = getattr(p, "category", None)
        if cat is None:
            continue
        groups.setdefault(cat, []).append(r)
    return dict((cat, group_stats(groups[cat], duration_s)) for cat in sorted(groups))


#: Input-length buckets of :func:`by_input_length`: ``(label, lowest prompt tokens, first prompt tokens past it or None)``.
#: Powers of two around the length drafts are commonly trained at (2048 tokens): a draft loses acceptance past it
#: (EAGLE3 Qwen3-8B: accept length 2.30 at 2k, 1.69 at 8k, 1.09 at 16k; vllm-project/speculators #684, SGLang #6783).
INPUT_BUCKETS = (("<2k", 0, 2048), ("2k-8k", 2048, 8192), ("8k-16k", 8192, 16384), (">16k", 16384, None))


def input_bucket(prompt_tokens):
    """The :data:`INPUT_BUCKETS` label of a request of ``prompt_tokens`` input tokens (int >= 0): ``<2k`` below 2048,
    ``2k-8k`` from 2048 to 8191, ``8k-16k`` from 8192 to 16383, ``>16k`` from 16384 on."""
    for label, lo, hi in INPUT_BUCKETS:
        if prompt_tokens >= lo and (hi is None or prompt_tokens < hi):
            return label
    return INPUT_BUCKETS[0][0]


def by_input_length(results, duration_s):
    """``{bucket: group_stats + {"input_tokens_mean"}}`` for a level, the requests grouped by their input tokens
    (``RequestResult.prompt_len``: the server's ``prompt_tokens``, or the token ids sent) into :data:`INPUT_BUCKETS`, in
    bucket order, only the buckets that hold a request. ``input_tokens_mean``: the mean input tokens of the bucket's
    requests. A multi-turn conversation's later turns count with their whole history (what the server prefilled)."""
    groups = {}
    for r in results:
        groups.setdefault(input_bucket(int(r.prompt_len or 0)), []).append(r)
    out = {}
    for label, _lo, _hi in INPUT_BUCKETS:
        if label in groups:
            st = group_stats(groups[label], duration_s)
            st["input_tokens_mean"] = mean([float(r.prompt_len or 0) for r in groups[label]])
            out[label] = st
    return out


#: How :func:`server_accept_length` measured, for the record's ``accept_length_source`` and the level warning.
SERVER_SOURCES = {
    "server_counters": "the server's /metrics counters over the level (delta sglang:generation_tokens_total / delta "
                       "sglang:spec_verify_calls_total, SGLang 0.5.14+; the level's warm-up and any other traffic count too)",
    "server_gauge": "the server's sglang:spec_accept_length gauge after the level (the mean of its last decode-log "
                    "interval of 40 steps, not the whole level)",
}


def _metric_view(text):
    """``(generation_tokens_total, spec_verify_calls_total, spec_accept_length gauge)`` of a /metrics page, each None
    when absent; all None for None/unparsable text."""
    if not text:
        return None, None, None
    try:
        parsed = parse_prometheus(text)
    except (MetricsParseError, ValueError):
        return None, None, None
    return (counter_total(parsed, "sglang:generation_tokens_total"), counter_total(parsed, "sglang:spec_verify_calls_total"),
            gauge_mean(parsed, "sglang:spec_accept_length"))


def server_accept_length(before_text, after_text):
    """The level's accept length measured on the server, for backends whose responses carry no per-request
    speculative fields (the OpenAI routes before SGLang 0.5.23).

    ``before_text``/``after_text``: the ``/metrics`` pages (str, Prometheus text; None when not exposed) read just before
    and just after the level. SGLang 0.5.14+ adds each finished request's ``spec_verify_ct`` to
    ``sglang:spec_verify_calls_total`` and its completion tokens to ``sglang:generation_tokens_total``
    (``observability/metrics_collector.py`` ``observe_one_finished_request``), so the deltas give the level's pooled accept
    length exactly as the responses would (plus the warm-up). Older versions expose only the gauge
    ``sglang:spec_accept_length``, the mean accept length of the last decode-log interval (``metrics_collector.py``,
    updated with each ``Decode batch`` line). Returns ``(accept_length or None, source or None)``, source a key of
    :data:`SERVER_SOURCES`. Never raises.
    """
    gen0, ver0, _g0 = _metric_view(before_text)
    gen1, ver1, gauge = _metric_view(after_text)
    if None not in (gen0, ver0, gen1, ver1) and ver1 - ver0 > 0 and gen1 - gen0 > 0:
        return (gen1 - gen0) / float(ver1 - ver0), "server_counters"
    if gauge is not None and gauge > 0:
        return float(gauge), "server_gauge"
    return None, None
