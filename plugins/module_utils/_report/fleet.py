# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The fleet view of a multi-host benchmark: which host is slower than its identical siblings, and why.

Input, one entry per host (the role llmops.sglang.sglang_benchmark builds them from ``sglang_benchmark_result``):

  ``host``   inventory name;
  ``run_id`` the benchmark run the rows come from (a host whose benchmark was skipped brings its last one);
  ``rows``   the compact per-level rows of llmops.sglang.benchmark_report (``summary``): keys ``concurrency``
             (max_concurrency or None), ``request_rate`` (req/s or None = all at once), ``completed``,
             ``output_tok_s`` (tok/s), ``median_ttft_ms``, ``median_tpot_ms`` (ms), ``accept_length``;
  ``facts``  what the benchmark fingerprint recorded (llmops.sglang bench_fingerprint inputs without the sweep):
             ``server`` (version, image, image_id, argv, env) and ``host`` (gpu_model, gpu_count, driver_version, p2p).

Rules (docs/benchmark.md, "Fleet report"):

- the *common levels* are the sweep levels (concurrency, request rate) that every host measured with at least one
  completed request; only they are compared;
- per level and metric the *fleet median* is the median over the hosts (``statistics.median``: the mean of the two
  middle values for an even count);
- a host's *shortfall* at a level is ``(median - value) / median`` for output throughput and for the per-request decode
  speed ``1000 / median TPOT`` (both "higher is better"); a host is *flagged* when its largest shortfall exceeds
  ``threshold`` (a fraction: 0.10 = 10 % below the median);
- the *differing facts* of a flagged host are the fact leaves (``server.image``, ``host.driver_version``,
  ``server.env.SGLANG_...``) whose value differs from the most common value among its siblings (the other hosts).

Standard library only.
"""
from __future__ import annotations

import math
import statistics

from ansible_collections.llmops.sglang.plugins.module_utils._bench.fingerprint import canonical, flatten

METRICS = (  # key in the rows, column title, digits
    ("output_tok_s", "output tok/s", 1),
    ("median_ttft_ms", "TTFT p50 ms", 1),
    ("median_tpot_ms", "TPOT p50 ms", 2),
    ("accept_length", "accept len", 2),
)


class FleetReportError(ValueError):
    """Entries that cannot make a fleet report (fewer than two hosts, no common level, a malformed entry)."""


def _level(row):
    rate = row.get("request_rate")
    if rate is not None and (not isinstance(rate, (int, float)) or math.isinf(rate)):
        rate = None
    return (row.get("concurrency"), rate)


def level_name(level):
    """``(8, None)`` -> ``c8``; ``(None, 2.0)`` -> ``r2``; ``(8, 2.0)`` -> ``c8/r2``; ``(None, None)`` -> ``all``."""
    conc, rate = level
    parts = (["c%d" % conc] if conc is not None else []) + (["r%g" % rate] if rate is not None else [])
    return "/".join(parts) or "all"


def _sort_key(level):
    conc, rate = level
    return (conc if conc is not None else float("inf"), rate if rate is not None else float("inf"))


def common_levels(entries):
    """Levels every host measured with a completed request, sorted by concurrency then rate."""
    sets = []
    for e in entries:
        sets.append(set(_level(r) for r in e["rows"] if r.get("completed") and r.get("output_tok_s")))
    common = set.intersection(*sets) if sets else set()
    return sorted(common, key=_sort_key)


def _value(entry, level, key):
    for r in entry["rows"]:
        if _level(r) == level:
            return r.get(key)
    return None


def _decode_speed(tpot_ms):
    return 1000.0 / tpot_ms if tpot_ms else None


def _majority(values):
    """The most common value (compared as canonical JSON); ties go to the first seen."""
    counts, first = {}, {}
    for v in values:
        k = canonical(v)
        counts[k] = counts.get(k, 0) + 1
        first.setdefault(k, v)
    best = max(counts.values())
    for v in values:
        if counts[canonical(v)] == best:
            return v
    return None


def _list_delta(mine, theirs):
    """Tokens only in ``mine`` and only in ``theirs`` (for argv lists), order kept."""
    return [t for t in mine if t not in theirs], [t for t in theirs if t not in mine]


def differing_facts(entry, siblings):
    """Fact leaves where ``entry`` differs from the most common value among ``siblings``:
    ``[{"fact", "value", "siblings"}]`` (argv lists also get ``only_here`` / ``only_siblings`` tokens)."""
    mine = flatten(entry.get("facts") or {})
    theirs = [flatten(s.get("facts") or {}) for s in siblings]
    out = []
    for key in sorted(set(mine).union(*[set(t) for t in theirs]) if theirs else mine):
        ref = _majority([t.get(key) for t in theirs]) if theirs else None
        if canonical(mine.get(key)) != canonical(ref):
            item = {"fact": key, "value": mine.get(key), "siblings": ref}
            if isinstance(mine.get(key), list) and isinstance(ref, list):
                item["only_here"], item["only_siblings"] = _list_delta(mine[key], ref)
            out.append(item)
    return out


def build(entries, threshold=0.10):
    """The fleet report dict. ``entries``: see the module docstring; ``threshold``: fraction in [0, 1).

    Returns ``{"threshold", "levels" [names], "hosts": [{"host", "run_id", "values": {level: {metric: value}},
    "shortfall": {level: {"output_tok_s", "decode_tok_s"}}, "worst_shortfall", "worst", "flagged",
    "differing_facts"}], "median": {level: {metric: value}}, "flagged": [host names]}``.
    Raises FleetReportError for fewer than two hosts, a duplicate host, an entry without rows, no common level or
    a threshold outside [0, 1).
    """
    if threshold is None or not 0 <= float(threshold) < 1:
        raise FleetReportError("threshold=%r: give a fraction in [0, 1), e.g. 0.10 for 10 %% below the fleet median" % (threshold,))
    if len(entries) < 2:
        raise FleetReportError("a fleet report needs at least two hosts with results, got %d" % len(entries))
    names = [e.get("host") for e in entries]
    if len(set(names)) != len(names) or not all(names):
        raise FleetReportError("every entry needs a distinct host name, got %s" % names)
    for e in entries:
        if not isinstance(e.get("rows"), list) or not e["rows"]:
            raise FleetReportError("host %s has no benchmark rows" % e.get("host"))
    levels = common_levels(entries)
    if not levels:
        raise FleetReportError("the hosts share no measured level (%s); run the same sweep on all of them"
                               % "; ".join("%s: %s" % (e["host"], ", ".join(level_name(_level(r)) for r in e["rows"]))
                                           for e in entries))
    median = {}
    for lv in levels:
        m = {}
        for key, dummy, dummy2 in METRICS:
            vals = [v for v in (_value(e, lv, key) for e in entries) if v is not None]
            m[key] = statistics.median(vals) if vals else None
        speeds = [s for s in (_decode_speed(_value(e, lv, "median_tpot_ms")) for e in entries) if s is not None]
        m["decode_tok_s"] = statistics.median(speeds) if speeds else None
        median[level_name(lv)] = m
    hosts = []
    for e in entries:
        values, shortfall, worst, worst_at = {}, {}, 0.0, None
        for lv in levels:
            name = level_name(lv)
            vals = dict((key, _value(e, lv, key)) for key, dummy, dummy2 in METRICS)
            vals["decode_tok_s"] = _decode_speed(vals["median_tpot_ms"])
            values[name] = vals
            sf = {}
            for key in ("output_tok_s", "decode_tok_s"):
                med, v = median[name][key], vals[key]
                sf[key] = (med - v) / med if med and v is not None else None
                if sf[key] is not None and sf[key] > worst:
                    worst, worst_at = sf[key], "%s %s" % (name, "output throughput" if key == "output_tok_s" else "decode speed")
            shortfall[name] = sf
        hosts.append({"host": e["host"], "run_id": e.get("run_id"), "values": values, "shortfall": shortfall,
                      "worst_shortfall": worst, "worst": worst_at, "flagged": worst > float(threshold),
                      "differing_facts": []})
    for h, e in zip(hosts, entries):
        if h["flagged"]:
            h["differing_facts"] = differing_facts(e, [s for s in entries if s is not e])
    return {"threshold": float(threshold), "levels": [level_name(lv) for lv in levels], "hosts": hosts, "median": median,
            "flagged": [h["host"] for h in hosts if h["flagged"]]}


def _fmt(v, nd):
    if v is None:
        return "-"
    return ("%%.%df" % nd) % v


def _short(v, limit=60):
    if v is None:
        return "(unset)"
    text = v if isinstance(v, str) else canonical(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fact_line(item):
    """``server.env.SGLANG_SIM_T0_MS: 12 here, 8.84 on the siblings`` (argv: the tokens only on either side)."""
    if "only_here" in item:
        return "%s: %s here, %s on the siblings" % (item["fact"], " ".join(item["only_here"]) or "(nothing extra)",
                                                    " ".join(item["only_siblings"]) or "(nothing extra)")
    return "%s: %s here, %s on the siblings" % (item["fact"], _short(item["value"]), _short(item["siblings"]))


def markdown(report, title="SGLang fleet benchmark"):
    """One table, a row per host and a fleet-median row, then the flagged hosts with their differing facts."""
    cols = []
    for name in report["levels"]:
        cols += ["%s %s" % (name, t) for dummy, t, dummy2 in METRICS]
    lines = ["# %s" % title, "",
             "%d hosts, common levels %s; a host is flagged when its output throughput or per-request decode speed "
             "(1000 / TPOT p50) is more than %.0f %% below the fleet median at a common level."
             % (len(report["hosts"]), ", ".join(report["levels"]), report["threshold"] * 100), "",
             "| host | run | " + " | ".join(cols) + " | worst shortfall | flag |",
             "|---|---|" + "---:|" * len(cols) + "---:|---|"]
    for h in report["hosts"]:
        cells = []
        for name in report["levels"]:
            cells += [_fmt(h["values"][name][k], nd) for k, dummy, nd in METRICS]
        lines.append("| %s | %s | %s | %s | %s |" % (h["host"], h["run_id"] or "-", " | ".join(cells),
                                                     "%.1f %%" % (h["worst_shortfall"] * 100),
                                                     "**SLOW**" if h["flagged"] else ""))
    cells = []
    for name in report["levels"]:
        cells += [_fmt(report["median"][name][k], nd) for k, dummy, nd in METRICS]
    lines.append("| fleet median | | %s | | |" % " | ".join(cells))
    lines.append("")
    if not report["flagged"]:
        lines.append("No host is more than %.0f %% below the fleet median." % (report["threshold"] * 100))
    for h in report["hosts"]:
        if not h["flagged"]:
            continue
        lines.append("- **%s** is %.1f %% below the fleet median (%s). Facts that differ from its siblings: %s"
                     % (h["host"], h["worst_shortfall"] * 100, h["worst"],
                        "; ".join(fact_line(f) for f in h["differing_facts"])
                        or "none recorded (same GPU, driver, P2P, SGLang, image and launch configuration): suspect the "
                           "hardware itself (clocks, thermals, a degraded link)"))
    return "\n".join(lines) + "\n"
