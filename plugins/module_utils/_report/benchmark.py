# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Benchmark records, reports, gates and the MTP A/B decision (pure Python, no I/O).

A *record* is one level of a sweep: one line of a bench_serving-compatible ``results.jsonl``
(SGLang 0.5.9 ``bench_serving --output-file`` keys, SGLANG_FACTS.md section 5.1, in that order),
followed by this collection's extra keys (see :data:`bench_stats.EXTRA_KEYS`) and ``level``
(1-based index in the sweep), ``run_id``, ``host``, ``label``, ``started_at``.

Units in records: times ``*_ms`` in ms, ``duration`` in s, throughputs in tok/s (req/s for
``request_throughput``), ``decode_tok_s_per_request`` in tok/s, ``request_rate`` in req/s
(``None`` in records and summaries when unlimited, ``Infinity`` in results.jsonl as bench_serving writes it).

A/B maths (:func:`compare`): levels of the two runs are matched by ``max_concurrency`` (or
``request_rate`` for rate sweeps). ``speedup`` = candidate output_throughput / baseline
output_throughput at the same level. The crossover is where the speedup falls to 1.0: the first
pair of adjacent levels with speedup > 1 then <= 1, interpolated linearly in log2(concurrency)
(concurrency sweeps are geometric); ``crossover_level`` is the first measured level at or past it.
The decision at ``target`` is the tuner's (:func:`_tune.decision.decide`, the one decision engine): the two runs
are two arms with one trial each (weights ``{target: 1}``, the baseline the simpler arm), decided on the point
estimate of the speedup measured at ``target``: the candidate wins when speedup > 1 + ``min_gain``; a tie keeps
the baseline. The target must be a measured level without failed requests in either run (the tuner's rule; the
playbook adds it to the sweep): a speedup is never interpolated or extrapolated into a decision.
"""

from __future__ import annotations

import json
import math

from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import BENCH_SERVING_KEYS, EXTRA_KEYS
from ansible_collections.llmops.sglang.plugins.module_utils._tune import decision as tune_decision

CONFIG_KEYS = ("tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len",
               "random_input_len", "random_output_len", "random_range_ratio", "server_info")
META_KEYS = ("level", "label", "run_id", "host", "started_at", "url", "speculative")

# THE gates: one row per gate - gate key (serving_benchmark ``gates`` option), the record metric it checks,
# ``min`` (the metric must reach the limit; a missing value fails) or ``max`` (the metric must not exceed it),
# the unit in messages, and the module's default (None = not checked). check_gates and serving_benchmark's
# option spec read this table; a new gate is one row here plus its line in the module's DOCUMENTATION.
GATES = (
    ("min_output_throughput", "output_throughput", "min", " tok/s", None),
    ("max_p99_ttft_ms", "p99_ttft_ms", "max", " ms", None),
    ("max_p99_tpot_ms", "p99_tpot_ms", "max", " ms", None),
    ("min_accept_length", "accept_length", "min", "", None),
    ("max_failed_fraction", "failed_fraction", "max", "", 0.0),
    ("min_goodput", "goodput", "min", " req/s", None),
    ("min_goodput_fraction", "goodput_fraction", "min", "", None),
)
# Why a ``min`` gate's metric can be missing, for the message (accept_length's reason depends on the backend).
_MISSING_WHY = {
    "goodput": "the level was measured without an SLO (set slo.ttft_ms and/or slo.tpot_ms)",
    "goodput_fraction": "the level was measured without an SLO (set slo.ttft_ms and/or slo.tpot_ms)",
}
GATE_KEYS = tuple(g[0] for g in GATES)


def gate_option_spec():
    """The ``gates`` suboptions of serving_benchmark's argument spec (all floats), from :data:`GATES`."""
    return dict((key, dict(type="float", default=default) if default is not None else dict(type="float"))
                for key, _metric, _kind, _unit, default in GATES)


class ReportError(Exception):
    """Unusable report input (no levels, levels that do not match, bad gate). The message names the value and the fix."""


def make_record(metrics, config, server_info=None, meta=None):
    """One JSONL record: bench_serving keys in bench_serving's order, then extras, then ``meta``.

    Args:
      metrics (dict): :func:`bench_stats.level_metrics` output.
      config (dict): ``backend``, ``max_concurrency`` (int or None), ``request_rate`` (req/s or None
        = unlimited), ``random_input_len``, ``random_output_len``, ``random_range_ratio``, ``tag``,
        ``num_prompts``, ``warmup_requests``, ``seed`` (the prompts' seed of this level).
      server_info (dict or None): the server's ``/server_info`` JSON (embedded as bench_serving does).
      meta (dict or None): ``level``, ``label``, ``run_id``, ``host``, ``started_at``, ``url``, ``speculative``.
    """
    rate = config.get("request_rate")
    rec = {}
    for k in BENCH_SERVING_KEYS:
        if k in metrics:
            rec[k] = metrics[k]
        elif k == "request_rate":
            rec[k] = float(rate) if rate else None
        elif k == "dataset_name":
            rec[k] = config.get("dataset_name", "random-ids")
        elif k == "server_info":
            rec[k] = server_info
        elif k == "sharegpt_output_len":
            rec[k] = None
        else:
            rec[k] = config.get(k)
    for k in EXTRA_KEYS:
        if k in metrics:
            rec[k] = metrics[k]
        elif k in config:
            rec[k] = config[k]
    for k, v in (meta or {}).items():
        rec[k] = v
    return rec


def jsonl_line(rec, details=None):
    """One results.jsonl / ``output_file`` line for ``rec``, with bench_serving 0.5.9's values.

    An unlimited ``request_rate`` (None) is written ``Infinity``, exactly as bench_serving's
    ``json.dumps(float("inf"))`` does, and a trace replay (``arrival`` ``trace``) writes ``"trace"``, as
    bench_serving does with ``--use-trace-timestamps``; an empty ``tag`` is ``null`` (bench_serving's
    ``--tag`` default None). ``details`` (dict, :func:`bench_stats.output_details`) is appended after the
    record's keys, as ``--output-details`` does (``result | result_details``).
    """
    if "request_rate" in rec or "tag" in rec or details:
        rec = dict(rec)
        if rec.get("arrival") == "trace" and "request_rate" in rec:
            rec["request_rate"] = "trace"
        elif rec.get("request_rate") is None and "request_rate" in rec:
            rec["request_rate"] = float("inf")
        if "tag" in rec and not rec["tag"]:
            rec["tag"] = None
        for k, v in (details or {}).items():
            rec[k] = v
    return json.dumps(rec)


def level_key(rec):
    """The sweep coordinate of a record: ``("max_concurrency", n)`` or ``("request_rate", r)``."""
    mc = rec.get("max_concurrency")
    if mc:
        return ("max_concurrency", int(mc))
    rate = rec.get("request_rate")
    if rate is None or isinstance(rate, str) or (isinstance(rate, float) and math.isinf(rate)):
        # None/Infinity: all at once; "trace" (a replayed trace, bench_serving's value) has no rate either
        return ("request_rate", float("inf"))
    return ("request_rate", float(rate))


def _rate_display(rate):
    if rate is None or isinstance(rate, str) or (isinstance(rate, float) and math.isinf(rate)):
        return None
    return rate


# The report's one field table: every per-level column of summary rows (module result ``summary`` and
# summary.json), the Markdown table (summary.md, the play's output) and the single-run plots comes from
# here. A new column is one row. Columns:
#   record key     - key in the record (results.jsonl line)
#   summary key    - key in the summary row
#   Markdown header, or None when the column is in the summary only
#   decimals       - for floats in the Markdown table
#   plot           - (PNG file, series label) when the column is drawn in a single-run plot (see PLOTS), else None
REPORT_FIELDS = (
    ("level", "level", "level", 0, None),
    ("max_concurrency", "concurrency", "concurrency", 0, None),
    ("request_rate", "request_rate", "rate (req/s)", 1, None),
    ("completed", "completed", "ok", 0, None),
    ("failed", "failed", "failed", 0, None),
    ("output_throughput", "output_tok_s", "output tok/s", 1, ("output_throughput.png", "output")),
    ("decode_tok_s_per_request", "decode_tok_s_per_req", "decode tok/s/req", 1, ("decode_speed.png", "decode")),
    ("median_ttft_ms", "median_ttft_ms", "TTFT p50 ms", 1, ("ttft.png", "median")),
    ("p90_ttft_ms", "p90_ttft_ms", None, 1, ("ttft.png", "p90")),
    ("p99_ttft_ms", "p99_ttft_ms", "TTFT p99 ms", 1, ("ttft.png", "p99")),
    ("median_tpot_ms", "median_tpot_ms", "TPOT p50 ms", 2, ("tpot.png", "median")),
    ("p90_tpot_ms", "p90_tpot_ms", None, 2, ("tpot.png", "p90")),
    ("p99_tpot_ms", "p99_tpot_ms", "TPOT p99 ms", 2, ("tpot.png", "p99")),
    ("median_itl_ms", "median_itl_ms", "ITL p50 ms", 2, None),
    ("median_e2e_latency_ms", "median_e2e_ms", "E2E p50 ms", 1, None),
    ("concurrency", "measured_concurrency", None, 1, None),
    ("accept_length", "accept_length", "accept len", 2, None),
    ("duration", "duration_s", None, 1, None),
    ("goodput", "goodput_req_s", None, 2, None),
)

# (record key, summary key) pairs, kept for callers of the former name.
SUMMARY_FIELDS = tuple((f[0], f[1]) for f in REPORT_FIELDS)

# The single-run plots: PNG file -> (title suffix, y axis label). Their series are the REPORT_FIELDS rows
# whose plot names the file, in table order.
PLOTS = (
    ("output_throughput.png", "output throughput", "output tok/s"),
    ("decode_speed.png", "per-request decode speed (1000 / median TPOT)", "tok/s per request"),
    ("ttft.png", "TTFT", "ms"),
    ("tpot.png", "TPOT", "ms"),
)


def summary_rows(records):
    """Compact per-level rows (dicts keyed by the summary keys of :data:`REPORT_FIELDS`, in table order).

    ``level`` defaults to the 1-based position when the record has none; an unlimited ``request_rate``
    is None.
    """
    rows = []
    for i, rec in enumerate(records):
        row = {}
        for src, name, _head, _nd, _plot in REPORT_FIELDS:
            v = rec.get(src)
            if src == "level" and v is None:
                v = i + 1
            if src == "request_rate":
                v = _rate_display(v)
            row[name] = v
        rows.append(row)
    return rows


def plot_series(records):
    """The single-run plots' data: ``[(file, title suffix, y label, [(series label, [y per record])])]``.

    Built from :data:`PLOTS` and the ``plot`` column of :data:`REPORT_FIELDS`; a zero decode speed
    (no output tokens) is drawn as a gap (None), like a missing value.
    """
    out = []
    for name, title, ylabel in PLOTS:
        series = []
        for src, _n, _h, _nd, plot in REPORT_FIELDS:
            if plot and plot[0] == name:
                ys = [rec.get(src) for rec in records]
                if src == "decode_tok_s_per_request":
                    ys = [y or None for y in ys]
                series.append((plot[1], ys))
        out.append((name, title, ylabel, series))
    return out


def _fmt(v, nd=1):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return "inf"
        return ("%%.%df" % nd) % v
    return str(v)


def markdown_table(records):
    """The per-level Markdown table (one row per level, the REPORT_FIELDS columns that have a header)
    for summary.md and the end of the play."""
    cols = [(name, head, nd) for _src, name, head, nd, _plot in REPORT_FIELDS if head]
    lines = ["| %s |" % " | ".join(head for _n, head, _nd in cols), "|" + "---:|" * len(cols)]
    for row in summary_rows(records):
        lines.append("| %s |" % " | ".join(_fmt(row[name], nd) for name, _h, nd in cols))
    return "\n".join(lines)


CATEGORY_FIELDS = ("completed", "accept_length", "accept_length_mean", "accept_length_p10", "accept_length_p50",
                   "accept_length_p90", "accept_rate", "output_tok_s", "decode_tok_s_per_request", "median_tpot_ms")


def category_rows(records):
    """Per level and category rows ``{level, concurrency, request_rate, workload, category, <CATEGORY_FIELDS>}`` from the
    records' ``categories`` blocks (serving_benchmark with a prompt workload); empty for random-ids sweeps."""
    rows = []
    for i, rec in enumerate(records):
        for cat, st in sorted((rec.get("categories") or {}).items()):
            row = {"level": rec.get("level", i + 1), "concurrency": rec.get("max_concurrency"),
                   "request_rate": _rate_display(rec.get("request_rate")), "workload": rec.get("dataset_name"), "category": cat}
            for k in CATEGORY_FIELDS:
                row[k] = st.get(k)
            rows.append(row)
    return rows


def category_markdown(records):
    """Markdown table of :func:`category_rows` ('' when there are none): accept length pooled, mean and p10/p50/p90,
    accept rate, output tok/s (the category's share of the level), per-request decode tok/s and median TPOT."""
    rows = category_rows(records)
    if not rows:
        return ""
    lines = ["| level | concurrency | category | ok | accept len | mean | p10 | p50 | p90 | accept rate | output tok/s "
             "| decode tok/s/req | TPOT p50 ms |", "|---:|---:|---|" + "---:|" * 10]
    for r in rows:
        lines.append("| %s |" % " | ".join([
            _fmt(r["level"]), _fmt(r["concurrency"]), r["category"], _fmt(r["completed"]), _fmt(r["accept_length"], 2),
            _fmt(r["accept_length_mean"], 2), _fmt(r["accept_length_p10"], 2), _fmt(r["accept_length_p50"], 2),
            _fmt(r["accept_length_p90"], 2), _fmt(r["accept_rate"], 2), _fmt(r["output_tok_s"]),
            _fmt(r["decode_tok_s_per_request"]), _fmt(r["median_tpot_ms"], 2)]))
    return "\n".join(lines)


#: Input-length buckets past the common draft training length (2048 tokens), and the accept length below which a long
#: bucket is flagged: with an accept length under ~1.3 a verify step (target forward over the drafts, plus the draft
#: steps) yields too few tokens to pay for itself on most setups (a rule of thumb, not a measured constant).
LONG_BUCKETS = ("2k-8k", "8k-16k", ">16k")
LONG_CONTEXT_MIN_ACCEPT_LENGTH = 1.3


def input_bucket_rows(records):
    """Per level and input-length bucket rows ``{level, concurrency, request_rate, workload, bucket, input_tokens_mean,
    <CATEGORY_FIELDS>}`` from the records' ``input_length_buckets`` blocks (serving_benchmark, buckets
    ``spec_stats.INPUT_BUCKETS`` in their order); empty for records without them."""
    rows = []
    for i, rec in enumerate(records):
        for bucket, st in (rec.get("input_length_buckets") or {}).items():
            row = {"level": rec.get("level", i + 1), "concurrency": rec.get("max_concurrency"),
                   "request_rate": _rate_display(rec.get("request_rate")), "workload": rec.get("dataset_name"),
                   "bucket": bucket, "input_tokens_mean": st.get("input_tokens_mean")}
            for k in CATEGORY_FIELDS:
                row[k] = st.get(k)
            rows.append(row)
    return rows


def input_bucket_markdown(records):
    """Markdown table of :func:`input_bucket_rows` ('' when no level has an accept length in any bucket: speculation
    off, or no per-request accept length)."""
    rows = input_bucket_rows(records)
    if not any(r["accept_length"] is not None for r in rows):
        return ""
    lines = ["| level | concurrency | input tokens | mean input | ok | accept len | p10 | p50 | p90 | decode tok/s/req |",
             "|---:|---:|---|" + "---:|" * 7]
    for r in rows:
        lines.append("| %s |" % " | ".join([
            _fmt(r["level"]), _fmt(r["concurrency"]), r["bucket"], _fmt(r["input_tokens_mean"], 0), _fmt(r["completed"]),
            _fmt(r["accept_length"], 2), _fmt(r["accept_length_p10"], 2), _fmt(r["accept_length_p50"], 2),
            _fmt(r["accept_length_p90"], 2), _fmt(r["decode_tok_s_per_request"])]))
    return "\n".join(lines)


def phase_rows(records):
    """Per level and phase rows of a moving load: ``{level, phase, concurrency, duration_s, requests, failed,
    output_throughput, mean_in_flight, tpot_p50_ms, decode_tok_s_per_req, accept_length, settle_s, settled_throughput}``
    from the records' ``phases`` blocks (serving_benchmark option ``phases``, ``_bench/phases.phase_metrics``, which
    defines the keys and units); empty for records without them. A key the record lacks (written before it existed) is
    None."""
    keys = ("phase", "concurrency", "duration_s", "requests", "failed", "output_throughput", "mean_in_flight", "tpot_p50_ms",
            "decode_tok_s_per_req", "accept_length", "settle_s", "settled_throughput")
    return [dict([("level", rec.get("level", i + 1))] + [(k, ph.get(k)) for k in keys])
            for i, rec in enumerate(records) for ph in (rec.get("phases") or [])]


def phase_markdown(records):
    """Markdown table of :func:`phase_rows` ('' without a moving load)."""
    rows = phase_rows(records)
    if not rows:
        return ""
    lines = ["| level | phase | concurrency | s | requests | failed | output tok/s | in flight | TPOT p50 ms | decode tok/s/req "
             "| accept len | settle s | settled tok/s |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s |" % " | ".join([
            _fmt(r["level"]), _fmt(r["phase"]), _fmt(r["concurrency"]), _fmt(r["duration_s"]), _fmt(r["requests"]),
            _fmt(r["failed"]), _fmt(r["output_throughput"]), _fmt(r["mean_in_flight"]), _fmt(r["tpot_p50_ms"], 2),
            _fmt(r["decode_tok_s_per_req"]), _fmt(r["accept_length"], 2), _fmt(r["settle_s"], 2),
            _fmt(r["settled_throughput"])]))
    return "\n".join(lines)


def input_bucket_warnings(records):
    """One warning per level whose accept length in a long input bucket (:data:`LONG_BUCKETS`) is below
    :data:`LONG_CONTEXT_MIN_ACCEPT_LENGTH` while its shortest bucket's is not: a draft that works on short prompts and
    not on long ones (RAG, long documents)."""
    out = []
    for i, rec in enumerate(records):
        buckets = rec.get("input_length_buckets") or {}
        accs = [(b, st.get("accept_length")) for b, st in buckets.items() if st.get("accept_length") is not None]
        if not accs:
            continue
        short = accs[0]
        low = [(b, a) for b, a in accs if b in LONG_BUCKETS and a < LONG_CONTEXT_MIN_ACCEPT_LENGTH and b != short[0]]
        if low and short[1] >= LONG_CONTEXT_MIN_ACCEPT_LENGTH:
            out.append("level %s (concurrency %s): accept length %.2f on %s-token prompts but %s: speculative decoding that "
                       "pays on short prompts may cost on long ones; measure the long-context workload before serving it "
                       "(docs/benchmark.md, acceptance by input length)" % (
                           _fmt(rec.get("level", i + 1)), _fmt(rec.get("max_concurrency")), short[1], short[0],
                           ", ".join("%.2f on %s" % (a, b) for b, a in low)))
    return out


def run_warnings(records):
    """The distinct ``warnings`` of the records, in first-seen order (e.g. synthetic prompts under speculation)."""
    out = []
    for rec in records:
        for w in rec.get("warnings") or []:
            if w not in out:
                out.append(w)
    return out


def workload_rows(records):
    """The skip counts of the run's prompt file (``workload_rows`` of the first record that has them: the action plugin
    puts the same dict on every record), None for a workload that read no file."""
    for rec in records:
        if rec.get("workload_rows"):
            return rec["workload_rows"]
    return None


def check_gates(rec, gates):
    """Gate violations of one record, as messages naming the level and the metric.

    ``gates`` keys are those of :data:`GATES` (None/absent = not checked): ``min_output_throughput`` (tok/s),
    ``max_p99_ttft_ms`` (ms), ``max_p99_tpot_ms`` (ms), ``min_accept_length``, ``max_failed_fraction``
    (0..1), ``min_goodput`` (req/s meeting the SLOs) and ``min_goodput_fraction`` (0..1 of the level's requests).
    A ``min`` gate fails a level without the metric; ``min_accept_length`` then says why (speculative decoding
    off, or an OpenAI backend), the goodput gates that the level had no SLO. Raises ReportError for an unknown gate key.
    """
    gates = gates or {}
    unknown = sorted(set(k for k, v in gates.items() if v is not None) - set(GATE_KEYS))
    if unknown:
        raise ReportError("unknown benchmark gate(s) %s; supported gates: %s" % (", ".join(unknown), ", ".join(GATE_KEYS)))
    where = "level %s (%s=%s)" % (rec.get("level", "?"), level_key(rec)[0], _fmt(level_key(rec)[1]))
    out = []

    def missing(metric, limit):
        if metric == "accept_length":
            why = ("the %s backend does not report it (use the sglang backend, /generate, whose meta_info carries "
                   "spec_verify_ct)" % rec.get("backend") if rec.get("backend") in ("openai", "openai-chat")
                   else "no response carried spec_verify_ct: speculative decoding is off on this server")
        else:
            why = _MISSING_WHY[metric]
        return "%s: %s is not available, so the gate %s cannot pass: %s" % (where, metric, _fmt(float(limit), 2), why)

    for key, metric, kind, unit, _default in GATES:
        limit = gates.get(key)
        if limit is None:
            continue
        v = rec.get(metric)
        if kind == "min" and v is None and (metric == "accept_length" or metric in _MISSING_WHY):
            out.append(missing(metric, limit))
        elif kind == "min" and (v is None or v < limit):
            out.append("%s: %s %s%s is below the gate %s%s" % (where, metric, _fmt(v, 2), unit, _fmt(float(limit), 2), unit))
        elif kind == "max" and v is not None and v > limit:
            out.append("%s: %s %s%s is above the gate %s%s" % (where, metric, _fmt(v, 2), unit, _fmt(float(limit), 2), unit))
    return out


def _log2(x):
    return math.log(x, 2)


def compare(baseline, candidate, target=None, min_gain=0.0, baseline_label="mtp_off", candidate_label="mtp_on"):
    """A/B comparison of two sweeps (lists of records) on the same levels.

    Returns a dict:
      ``levels``: per matched level ``{key, level (coordinate value), baseline_output_tok_s,
      candidate_output_tok_s, speedup, baseline_decode_tok_s_per_req, candidate_decode_tok_s_per_req,
      decode_speedup, baseline_median_ttft_ms, candidate_median_ttft_ms, baseline_median_tpot_ms,
      candidate_median_tpot_ms, candidate_accept_length, winner}``, sorted by coordinate;
      ``crossover``: ``{concurrency (float, interpolated) or None, level (first measured level where
      the candidate no longer wins) or None, note}``;
      ``decision``: ``{target, speedup, basis ("measured"), winner (label), winner_is_candidate (bool), min_gain,
      reason, engine}`` or None without ``target``; ``engine`` is the tuner's decision
      (:func:`_tune.decision.decide` with ``point_estimate=True``: its ``basis``, ``arms`` with per-arm means).

    Levels with no completed request on either side are listed with ``speedup`` None and ignored by
    the crossover. Raises ReportError when the runs share no level, a run repeats a level coordinate
    (a sweep over both concurrency and request rate), ``min_gain`` < 0, ``target`` is given for runs that
    swept request rates (the decision is per concurrency), or ``target`` is not a whole concurrency measured without
    failed requests in both runs (the engine's message names the level and the fix).
    """
    if min_gain is None or min_gain < 0:
        raise ReportError("min_gain must be >= 0 (fraction, e.g. 0.02 for 2 %%), got %r" % (min_gain,))
    for name, recs in (("baseline", baseline), ("candidate", candidate)):
        keys = [level_key(r) for r in recs]
        if len(set(keys)) != len(keys):
            raise ReportError("the %s run has several levels at the same coordinate %s (a sweep over both concurrency and "
                              "request rate); the A/B comparison needs one dimension: set sglang_benchmark_concurrency or "
                              "sglang_benchmark_request_rates, not both" % (name, sorted(set(k for k in keys if keys.count(k) > 1))))
    b_by = dict((level_key(r), r) for r in baseline)
    c_by = dict((level_key(r), r) for r in candidate)
    keys = sorted(set(b_by) & set(c_by), key=lambda k: (k[0], k[1]))
    if not keys:
        raise ReportError("the two runs share no sweep level (baseline %s, candidate %s); run both with the same "
                          "sglang_benchmark_concurrency / request rates" % (sorted(b_by), sorted(c_by)))
    rows = []
    for k in keys:
        b, c = b_by[k], c_by[k]
        bo, co = b.get("output_throughput") or 0.0, c.get("output_throughput") or 0.0
        ok = bool(b.get("completed")) and bool(c.get("completed")) and bo > 0
        sp = (co / bo) if ok else None
        bd, cd = b.get("decode_tok_s_per_request") or 0.0, c.get("decode_tok_s_per_request") or 0.0
        rows.append({
            "key": k[0], "level": k[1],
            "baseline_output_tok_s": bo, "candidate_output_tok_s": co, "speedup": sp,
            "baseline_decode_tok_s_per_req": bd, "candidate_decode_tok_s_per_req": cd,
            "decode_speedup": (cd / bd) if bd > 0 and cd > 0 else None,
            "baseline_median_ttft_ms": b.get("median_ttft_ms"), "candidate_median_ttft_ms": c.get("median_ttft_ms"),
            "baseline_median_tpot_ms": b.get("median_tpot_ms"), "candidate_median_tpot_ms": c.get("median_tpot_ms"),
            "candidate_accept_length": c.get("accept_length"),
            "winner": None if sp is None else (candidate_label if sp > 1.0 + min_gain else baseline_label),
            "categories": _category_speedups(b, c),
            "input_buckets": _category_speedups(b, c, "input_length_buckets"),
        })
    valid = [r for r in rows if r["speedup"] is not None and not math.isinf(r["level"])]
    crossover = {"concurrency": None, "level": None, "note": ""}
    if valid:
        if valid[0]["speedup"] <= 1.0:
            crossover.update(level=valid[0]["level"], note="%s does not win even at the lowest measured level %s"
                             % (candidate_label, _fmt(valid[0]["level"])))
        else:
            for a, b in zip(valid, valid[1:]):
                if a["speedup"] > 1.0 >= b["speedup"]:
                    x = _log2(a["level"]) + (1.0 - a["speedup"]) / (b["speedup"] - a["speedup"]) * (_log2(b["level"]) - _log2(a["level"]))
                    crossover.update(concurrency=2 ** x, level=b["level"],
                                     note="speedup falls from %.3f at %s to %.3f at %s; 1.0 at about %.1f (log2 interpolation)"
                                     % (a["speedup"], _fmt(a["level"]), b["speedup"], _fmt(b["level"]), 2 ** x))
                    break
            else:
                crossover["note"] = "%s wins at every measured level (up to %s)" % (candidate_label, _fmt(valid[-1]["level"]))
    decision = None
    if target is not None:
        # the module passes a float (type=float); 64.0 means concurrency 64 in the reason text
        target = int(target) if float(target).is_integer() else float(target)
        rates = sorted(set(_fmt(r["level"]) for r in rows if r["key"] != "max_concurrency"))
        if rates:
            raise ReportError("the decision is taken at a concurrency (target %s), but the runs swept request rates %s req/s "
                              "with no max_concurrency; sweep sglang_benchmark_concurrency instead (and leave "
                              "sglang_benchmark_request_rates empty)" % (_fmt(target), ", ".join(rates)))
        decision = _decide(baseline, candidate, target, min_gain, baseline_label, candidate_label)
    warnings = run_warnings(list(baseline) + list(candidate)) + _long_context_ab_warnings(rows, candidate_label, baseline_label)
    if decision is not None and warnings:
        decision["warnings"] = warnings
        decision["reason"] += "; WARNING: " + "; ".join(warnings)
    return {"levels": rows, "crossover": crossover, "decision": decision, "warnings": warnings,
            "baseline_label": baseline_label, "candidate_label": candidate_label, "metric": "output_throughput"}


def _long_context_ab_warnings(rows, candidate_label, baseline_label):
    """One warning per level where the candidate wins overall but, in a long input bucket (:data:`LONG_BUCKETS`), decodes
    slower per request than the baseline (decode speedup < 1) or accepts fewer than LONG_CONTEXT_MIN_ACCEPT_LENGTH tokens
    per verify step: the decision holds for short prompts and fails for long ones."""
    out = []
    for r in rows:
        if r["winner"] != candidate_label:
            continue
        bad = []
        for bucket, v in (r.get("input_buckets") or {}).items():
            if bucket not in LONG_BUCKETS:
                continue
            sp, acc = v.get("decode_speedup"), v.get("candidate_accept_length")
            if (sp is not None and sp < 1.0) or (acc is not None and acc < LONG_CONTEXT_MIN_ACCEPT_LENGTH):
                bad.append("%s-token prompts: decode speedup %s, accept length %s" % (bucket, _fmt(sp, 3), _fmt(acc, 2)))
        if bad:
            out.append("at %s %s %s wins overall, but not on long prompts (%s); for a long-context service (RAG, long "
                       "documents) keep %s or measure that workload"
                       % (r["key"], _fmt(r["level"]), candidate_label, "; ".join(bad), baseline_label))
    return out


def _category_speedups(b, c, key="categories"):
    """Per category of a level present in both arms: ``{category: {baseline/candidate decode_tok_s_per_request,
    decode_speedup (candidate / baseline per-request decode speed), candidate_accept_length}}``. The category's share
    of output tok/s is not compared: both arms send the same prompts, so that ratio is the level's, not the category's.
    ``key``: the records' block to pair (``categories``, or ``input_length_buckets``: the same per input-length bucket)."""
    bc, cc = b.get(key) or {}, c.get(key) or {}
    out = {}
    for cat in (sorted(set(bc) & set(cc)) if key == "categories" else [k for k in cc if k in bc]):
        bd = bc[cat].get("decode_tok_s_per_request") or 0.0
        cd = cc[cat].get("decode_tok_s_per_request") or 0.0
        out[cat] = {"baseline_decode_tok_s_per_req": bd, "candidate_decode_tok_s_per_req": cd,
                    "decode_speedup": (cd / bd) if bd > 0 and cd > 0 else None,
                    "candidate_accept_length": cc[cat].get("accept_length")}
    return out


def _decide(baseline, candidate, target, min_gain, baseline_label, candidate_label):
    """The A/B decision at ``target`` by the tuner's engine: two arms, one trial (sweep) each, point estimate."""
    if target <= 0 or float(target) != int(target):
        raise ReportError("target concurrency must be a whole number >= 1, got %r" % (target,))
    target = int(target)
    if baseline_label == candidate_label:
        raise ReportError("baseline_label and candidate_label are both %r; give the two arms different labels" % (baseline_label,))
    for label, recs in ((baseline_label, baseline), (candidate_label, candidate)):
        levels = sorted(int(r["max_concurrency"]) for r in recs if r.get("max_concurrency") is not None)
        if target not in levels:
            raise ReportError("no decision at concurrency %d: the %s run did not measure it (levels %s); a speedup is never "
                              "interpolated into a decision. Fix: add %d to the sweep (playbooks/mtp_ab.yml adds "
                              "sglang_target_concurrency itself)" % (target, label, levels, target))
    arms = [{"arm": {"key": baseline_label, "name": baseline_label}, "trials": [list(baseline)]},
            {"arm": {"key": candidate_label, "name": candidate_label}, "trials": [list(candidate)]}]
    try:
        engine = tune_decision.decide(arms, "throughput", {target: 1.0}, min_gain, point_estimate=True,
                                      simpler_first=[baseline_label, candidate_label])
    except tune_decision.SpecDecisionError as exc:
        raise ReportError("no decision at concurrency %s: %s" % (_fmt(target), exc))
    if len(engine["arms"]) < 2:
        raise ReportError("no decision at concurrency %s: only %s has a usable measurement there (%s)"
                          % (_fmt(target), engine["winner"], "; ".join(engine["problems"])))
    by_key = dict((a["key"], a) for a in engine["arms"])
    sp = by_key[candidate_label]["vs_baseline"]["speedup"]
    wins = engine["winner"] == candidate_label
    reason = ("at concurrency %s the %s speedup of %s over %s is %.3f (%s); %s needs > %.3f to win, so %s"
              % (_fmt(target), "output-throughput", candidate_label, baseline_label, sp, "measured", candidate_label,
                 1.0 + min_gain, engine["winner"]))
    return {"target": target, "speedup": sp, "basis": "measured", "winner": engine["winner"], "winner_is_candidate": wins,
            "min_gain": min_gain, "reason": reason, "engine": engine}


def ab_markdown(ab):
    """Markdown for an A/B comparison: per-level speedup table, crossover line and decision line."""
    bl, cl = ab["baseline_label"], ab["candidate_label"]
    lines = ["| %s | %s tok/s | %s tok/s | speedup | %s decode tok/s/req | %s decode tok/s/req | decode speedup "
             "| %s TPOT p50 ms | %s TPOT p50 ms | %s accept len | winner |"
             % (ab["levels"][0]["key"] if ab["levels"] else "level", bl, cl, bl, cl, bl, cl, cl),
             "|" + "---:|" * 10 + "---|"]
    for r in ab["levels"]:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            _fmt(r["level"]), _fmt(r["baseline_output_tok_s"]), _fmt(r["candidate_output_tok_s"]), _fmt(r["speedup"], 3),
            _fmt(r["baseline_decode_tok_s_per_req"]), _fmt(r["candidate_decode_tok_s_per_req"]), _fmt(r["decode_speedup"], 3),
            _fmt(r["baseline_median_tpot_ms"], 2), _fmt(r["candidate_median_tpot_ms"], 2), _fmt(r["candidate_accept_length"], 2),
            r["winner"] or "-"))
    cx = ab["crossover"]
    lines.append("")
    lines.append("Crossover: %s%s" % ("concurrency ~%.1f (first losing level %s); " % (cx["concurrency"], _fmt(cx["level"]))
                                      if cx["concurrency"] is not None else "", cx["note"]))
    if ab.get("decision"):
        lines.append("")
        lines.append("Decision: **%s** (%s)" % (ab["decision"]["winner"], ab["decision"]["reason"]))
        if ab["decision"].get("engine"):
            lines.append("")
            lines.append("Decision engine (the tuner's, spec_tune): %s" % ab["decision"]["engine"]["basis"])
    cats = [(r["level"], cat, v) for r in ab["levels"] for cat, v in sorted((r.get("categories") or {}).items())]
    if cats:
        lines += ["", "Per category (per-request decode speed, %s / %s):" % (cl, bl), "",
                  "| level | category | %s decode tok/s/req | %s decode tok/s/req | decode speedup | %s accept len |" % (bl, cl, cl),
                  "|---:|---|---:|---:|---:|---:|"]
        for lv, cat, v in cats:
            cells = (_fmt(lv), cat, _fmt(v["baseline_decode_tok_s_per_req"]), _fmt(v["candidate_decode_tok_s_per_req"]),
                     _fmt(v["decode_speedup"], 3), _fmt(v["candidate_accept_length"], 2))
            lines.append("| %s |" % " | ".join(cells))
    for w in ab.get("warnings") or []:
        lines += ["", "**Warning:** %s" % w]
    return "\n".join(lines)
