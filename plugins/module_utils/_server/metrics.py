# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Parser for SGLang's Prometheus ``/metrics`` page (only served with ``--enable-metrics``).

Format: the Prometheus text exposition format 0.0.4 as written by ``prometheus_client``
(``# HELP name text``, ``# TYPE name gauge|counter|histogram|summary|untyped``, then samples
``name{label="value",...} value [timestamp_ms]``; label values escape ``\\\\``, ``\\"`` and ``\\n``;
values may be ``+Inf``, ``-Inf``, ``NaN``). Source of the names: SGLang 0.5.9
``python/sglang/srt/metrics/collector.py`` (and 0.5.23's additions), SGLANG_FACTS.md section 4.5.

SGLang's scheduler gauges carry ``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank``,
``moe_ep_rank`` (+ ``dp_rank``) labels and are updated at each Decode/Prefill log line (every
``--decode-log-interval`` decode iterations); with several DP ranks a gauge repeats once per rank,
so :func:`sglang_summary` averages gauges over series rather than summing them.
"""
from __future__ import annotations

import math
import re

_SAMPLE_RE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"(?:\{(?P<labels>.*)\})?"
    r"\s+(?P<value>\S+)"
    r"(?:\s+(?P<ts>-?\d+))?\s*$"
)
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


class MetricsParseError(ValueError):
    """Raised by :func:`parse_prometheus` (strict mode) for a line that is not valid exposition text."""


def _unescape(value):
    out = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _parse_value(text):
    lowered = text.lower()
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    if lowered == "nan":
        return math.nan
    return float(text)


def parse_labels(text):
    """Parse the inside of ``{...}`` into a dict; raises MetricsParseError on malformed text."""
    labels = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _LABEL_RE.match(text, pos)
        if not m:
            raise MetricsParseError("malformed label set %r at offset %d" % (text, pos))
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
    return labels


def parse_prometheus(text, strict=False):
    """Parse Prometheus text exposition into ``{"families": {...}, "samples": [...], "errors": [...]}``.

    * ``families``: metric family name -> ``{"type": str or None, "help": str or None}``;
    * ``samples``: list of ``{"name", "labels" (dict), "value" (float), "timestamp_ms" (int or None)}``
      in page order (histogram series keep their ``_bucket``/``_sum``/``_count`` names);
    * ``errors``: ``"line N: text"`` for lines that could not be read (skipped), unless ``strict``,
      in which case the first one raises MetricsParseError naming the line.
    """
    families = {}
    samples = []
    errors = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                family = families.setdefault(parts[2], {"type": None, "help": None})
                family["type" if parts[1] == "TYPE" else "help"] = parts[3] if len(parts) > 3 else ""
            continue
        m = _SAMPLE_RE.match(line)
        try:
            if not m:
                raise MetricsParseError("not a sample line")
            samples.append({
                "name": m.group("name"),
                "labels": parse_labels(m.group("labels") or ""),
                "value": _parse_value(m.group("value")),
                "timestamp_ms": int(m.group("ts")) if m.group("ts") else None,
            })
        except (MetricsParseError, ValueError) as exc:
            msg = "line %d: %s (%s)" % (number, raw[:200], exc)
            if strict:
                raise MetricsParseError(msg)
            errors.append(msg)
    return {"families": families, "samples": samples, "errors": errors}


def values(parsed, name, **label_filter):
    """Values of every sample called ``name`` whose labels include ``label_filter`` (list of floats)."""
    found = []
    for sample in parsed["samples"]:
        if sample["name"] != name:
            continue
        if all(sample["labels"].get(k) == v for k, v in label_filter.items()):
            found.append(sample["value"])
    return found


def gauge_mean(parsed, name, **label_filter):
    """Mean of a gauge over its series (one per DP/TP rank that records), None when absent or NaN only."""
    vals = [v for v in values(parsed, name, **label_filter) if not math.isnan(v)]
    if not vals:
        return None
    return round(sum(vals) / len(vals), 4)


def counter_total(parsed, name, **label_filter):
    """Sum of a counter over its series (``_total`` name as exposed), None when absent."""
    vals = values(parsed, name, **label_filter)
    return round(sum(vals), 4) if vals else None


#: Scheduler gauges read by :func:`sglang_summary`: result key -> metric name.
SUMMARY_GAUGES = (
    ("accept_length", "sglang:spec_accept_length"),
    ("accept_rate_reported", "sglang:spec_accept_rate"),
    ("gen_throughput", "sglang:gen_throughput"),
    ("num_running_reqs", "sglang:num_running_reqs"),
    ("num_queue_reqs", "sglang:num_queue_reqs"),
    ("spec_num_steps", "sglang:spec_num_steps"),
    ("spec_num_draft_tokens", "sglang:spec_num_draft_tokens"),
    ("cache_hit_rate", "sglang:cache_hit_rate"),
    ("token_usage", "sglang:token_usage"),
    ("is_cuda_graph", "sglang:is_cuda_graph"),
)
SUMMARY_COUNTERS = (
    ("generation_tokens_total", "sglang:generation_tokens_total"),
    ("prompt_tokens_total", "sglang:prompt_tokens_total"),
    ("num_requests_total", "sglang:num_requests_total"),
    ("num_aborted_requests_total", "sglang:num_aborted_requests_total"),
)


def sglang_summary(text):
    """The speculative-decoding view of a ``/metrics`` page.

    Returns a dict: ``accept_length`` (``sglang:spec_accept_length``, per-interval mean accept length incl.
    the bonus token, averaged over series), ``accept_rate_reported`` (``sglang:spec_accept_rate`` as the
    server defines it, version-dependent), ``gen_throughput`` (tok/s), ``num_running_reqs``,
    ``num_queue_reqs``, ``spec_num_steps`` / ``spec_num_draft_tokens`` (0.5.23 only), ``cache_hit_rate``,
    ``token_usage``, ``is_cuda_graph``, counters ``generation_tokens_total``, ``prompt_tokens_total``,
    ``num_requests_total``, ``num_aborted_requests_total`` (each None when not exposed), ``model_names``
    (sorted ``model_name`` label values), ``series`` (number of ``sglang:`` samples), ``has_spec_metrics``
    (bool: a spec gauge is exposed), ``errors`` (unreadable lines).
    """
    parsed = parse_prometheus(text)
    summary = {}
    for key, name in SUMMARY_GAUGES:
        summary[key] = gauge_mean(parsed, name)
    for key, name in SUMMARY_COUNTERS:
        summary[key] = counter_total(parsed, name)
    sglang_samples = [s for s in parsed["samples"] if s["name"].startswith("sglang:")]
    summary["model_names"] = sorted(set(s["labels"]["model_name"] for s in sglang_samples if "model_name" in s["labels"]))
    summary["series"] = len(sglang_samples)
    summary["has_spec_metrics"] = summary["accept_length"] is not None
    summary["errors"] = parsed["errors"]
    return summary
