# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""A load that moves: closed-loop phases of different concurrency, one after the other (issue 21).

A production load is not one concurrency: quiet nights, busy afternoons, bursts. SGLang's adaptive speculative decoding
(0.5.14+, ``--speculative-adaptive``) picks its draft length per batch-size bucket at run time, so the proof that a tuned
table pays has to run on a load whose batch size moves through the buckets. A *phase* is ``{"concurrency": c,
"duration_s": d}``: for ``d`` seconds at most ``c`` requests are in flight, each finished request replaced at once (a
closed loop, as ``bench_serving --max-concurrency``). At a phase boundary a lower cap lets the requests above it finish
(none is cut), a higher cap starts new ones at once. The client is :func:`.client.run_phases`.

Standard library only. Shapes:

* phases: a list of ``{"concurrency": int >= 1, "duration_s": float > 0}``, in order (:func:`check_phases`);
* a profile from a production histogram (:func:`profile_from_histogram`): the concurrency values of the histogram's
  buckets, each for a share of the total time proportional to its weight (a time-weighted histogram such as
  ``production_concurrency``'s), in the order the operator gives or ascending then descending (a day's shape);
* per-phase metrics (:func:`phase_metrics`): one dict per phase (keys in its docstring).
"""

from __future__ import annotations

import math

from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import accept_length, percentile, token_times, tpot

#: The phases of the issue's proof, 1 -> 8 -> 32 -> 64 -> 8 -> 1 (each at ``duration_s``), for the benchmark script and
#: the docs' example.
EXAMPLE_CONCURRENCY = (1, 8, 32, 64, 8, 1)


class PhaseError(ValueError):
    """Phases that cannot be run: the message names the phase, the value and the fix."""


def check_phases(phases, name="phases"):
    """The phases normalized to ``[{"concurrency": int, "duration_s": float}]``.

    :param phases: list of dicts with ``concurrency`` (whole number >= 1) and ``duration_s`` (seconds, finite, > 0).
    :param name: the option or variable the messages name.
    :raises PhaseError: an empty list, a phase that is not a dict, a missing key, a value out of range.
    """
    if not isinstance(phases, (list, tuple)) or not phases:
        raise PhaseError("%s=%r: give a list of phases such as [{concurrency: 1, duration_s: 30}, {concurrency: 32, "
                         "duration_s: 60}]" % (name, phases))
    out = []
    for i, ph in enumerate(phases):
        if not isinstance(ph, dict):
            raise PhaseError("%s[%d]=%r: a phase is a dict with concurrency and duration_s" % (name, i, ph))
        unknown = sorted(set(ph) - set(("concurrency", "duration_s")))
        if unknown:
            raise PhaseError("%s[%d]: unknown key(s) %s; a phase has concurrency and duration_s" % (name, i, ", ".join(unknown)))
        c, d = ph.get("concurrency"), ph.get("duration_s")
        try:
            ci = int(c)
            ok = not isinstance(c, bool) and float(c) == ci and ci >= 1
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise PhaseError("%s[%d].concurrency=%r: must be a whole number of requests in flight >= 1" % (name, i, c))
        try:
            df = float(d)
            ok = not isinstance(d, bool) and df > 0 and not math.isinf(df) and not math.isnan(df)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise PhaseError("%s[%d].duration_s=%r: must be a number of seconds > 0 (the phase's dwell time)" % (name, i, d))
        out.append({"concurrency": ci, "duration_s": df})
    return out


def boundaries(phases):
    """The phases' start offsets and the end: ``[0.0, d0, d0 + d1, ..., total]`` (s from the load's start)."""
    out = [0.0]
    for ph in phases:
        out.append(out[-1] + ph["duration_s"])
    return out


def phase_at(bounds, t):
    """Index of the phase whose window ``[bounds[k], bounds[k + 1])`` holds offset ``t`` (s); the last phase for ``t`` at
    or past the end, the first for ``t`` < 0."""
    for k in range(len(bounds) - 1):
        if t < bounds[k + 1]:
            return k
    return len(bounds) - 2


def profile_from_histogram(histogram, total_s, min_dwell_s=5.0, order="rise-fall"):
    """Phases built from a concurrency histogram, so the moving load spends time where production does.

    :param histogram: ``{concurrency: weight}`` (weights >= 0, e.g. the share of time or of samples at that running
        count; ``production_concurrency``'s ``histogram``); concurrency 0 (idle) is left out.
    :param total_s: the load's total duration (s).
    :param min_dwell_s: each phase lasts at least this long (s): a bucket with a small weight still gets one phase of
        ``min_dwell_s``, the others share the rest by weight.
    :param order: ``rise-fall`` (ascending to the top, then descending back: 1, 8, 32, 64, 32, 8, 1 for four values; a
        day's shape), or ``ascending``.
    :returns: phases (:func:`check_phases` shape). With ``rise-fall`` a concurrency that appears twice splits its time.
    :raises PhaseError: no positive weight, a total too short for one ``min_dwell_s`` per phase, an unknown order.
    """
    items = sorted((int(c), float(w)) for c, w in (histogram or {}).items() if int(c) >= 1 and float(w) > 0)
    if not items:
        raise PhaseError("histogram %r: no concurrency >= 1 with a weight > 0; give the production histogram" % (histogram,))
    if order == "ascending":
        seq = [c for c, _w in items]
    elif order == "rise-fall":
        values = [c for c, _w in items]
        seq = values + values[-2::-1]
    else:
        raise PhaseError("order=%r: use rise-fall or ascending" % (order,))
    if total_s < min_dwell_s * len(seq):
        raise PhaseError("total_s=%r: %d phases of at least %s s need %s s; raise total_s or lower min_dwell_s"
                         % (total_s, len(seq), min_dwell_s, min_dwell_s * len(seq)))
    weight = dict(items)
    share = dict((c, weight[c] / float(seq.count(c))) for c in set(seq))     # a value that appears twice splits its weight
    total_w = math.fsum(share[c] for c in seq)
    spare = total_s - min_dwell_s * len(seq)
    return [{"concurrency": c, "duration_s": round(min_dwell_s + spare * share[c] / total_w, 3)} for c in seq]


def settle_time(results, lo, hi, cap):
    """Seconds from ``lo`` until the requests in flight first drop to at most ``cap`` (the drain after a fall in
    concurrency).

    :param results: :class:`.stats.RequestResult` list; a request is in flight over ``[start_time, start_time +
        latency)`` (failed ones too: they held a slot); one without a ``start_time`` (never sent) is left out.
    :param lo: the window's start, ``hi`` its end (``time.perf_counter()`` values, s).
    :param cap: the phase's concurrency (requests).
    :returns: 0.0 when at most ``cap`` were in flight at ``lo``; else the time (s after ``lo``) of the request end that
        brought the count to ``cap`` or below (requests that start meanwhile count); ``hi - lo`` when that did not
        happen before ``hi``.
    """
    spans = [(r.start_time, r.start_time + r.latency) for r in results if r.start_time]
    count = sum(1 for s, e in spans if s <= lo < e)
    if count <= cap:
        return 0.0
    # ends before starts at the same instant: a slot freed and refilled at once still touched the cap
    events = sorted([(e, -1) for s, e in spans if lo < e < hi] + [(s, 1) for s, e in spans if lo < s < hi])
    for t, delta in events:
        count += delta
        if count <= cap:
            return t - lo
    return hi - lo


def phase_metrics(results, phases, start):
    """Per-phase metrics of a moving load.

    :param results: the :class:`.stats.RequestResult` list of the run (every request sent).
    :param phases: the phases as run (:func:`check_phases` shape).
    :param start: the load's start (``time.perf_counter()`` value the phase offsets count from).
    :returns: list of dicts, one per phase, in order: ``phase`` (1-based), ``concurrency`` (the cap), ``duration_s``,
        ``start_s``/``end_s`` (offsets), ``requests`` and ``failed`` (the requests *started* in the phase),
        ``output_throughput`` (tok/s: the output tokens that *arrived* inside the phase's window over its duration, so a
        request that spans a boundary counts in both phases for its own tokens), ``mean_in_flight`` (the time-weighted
        mean of requests in flight during the window: how closely the load followed the cap), ``tpot_p50_ms`` and
        ``accept_length`` (over the requests started in the phase and completed; :func:`.stats.accept_length`; None
        without speculative fields) and ``decode_tok_s_per_req`` (1000 / tpot_p50_ms); ``settle_s`` (s from the phase's
        start until the requests in flight first drop to at most its cap: the drain after a fall in concurrency, 0.0
        when no more than the cap were in flight at its start; the phase's duration when the drain outlasted it, see
        :func:`settle_time`) and ``settled_throughput`` (tok/s: the output tokens that arrived in ``[start_s + settle_s,
        end_s)`` over ``duration_s - settle_s``; None when the drain lasted the whole phase). The window throughput
        after a fall depends on which prompts were in flight at the boundary (how many tokens they had left), not only
        on the server; the settled throughput leaves the drain out.
    """
    bounds = boundaries(phases)
    rows = []
    for k, ph in enumerate(phases):
        lo, hi = start + bounds[k], start + bounds[k + 1]
        # a request the client let start just before the end stamps its start a moment later: it is the last phase's
        last = k == len(phases) - 1
        started = [r for r in results if r.start_time and lo <= r.start_time and (r.start_time < hi or last)]
        ok = [r for r in started if r.success]
        tokens = 0
        busy = 0.0
        for r in results:
            if not r.start_time:
                continue
            end = r.start_time + r.latency
            busy += max(0.0, min(end, hi) - max(r.start_time, lo))
            if r.success:
                tokens += sum(1 for t in token_times(r)[:max(r.output_len, 1)] if lo <= t < hi)
        settle = settle_time(results, lo, hi, ph["concurrency"])
        settled = None
        if settle < ph["duration_s"]:
            late = sum(1 for r in results if r.start_time and r.success
                       for t in token_times(r)[:max(r.output_len, 1)] if lo + settle <= t < hi)
            settled = late / (ph["duration_s"] - settle)
        tpots = [v for v in (tpot(r) for r in ok) if v is not None]
        al, _verify = accept_length(ok)
        p50 = percentile(tpots, 50) * 1000.0 if tpots else None
        rows.append({"phase": k + 1, "concurrency": ph["concurrency"], "duration_s": ph["duration_s"],
                     "start_s": round(bounds[k], 3), "end_s": round(bounds[k + 1], 3), "requests": len(started),
                     "failed": len(started) - len(ok), "output_throughput": tokens / ph["duration_s"],
                     "mean_in_flight": busy / ph["duration_s"], "tpot_p50_ms": p50,
                     "decode_tok_s_per_req": 1000.0 / p50 if p50 else None, "accept_length": al,
                     "settle_s": settle, "settled_throughput": settled})
    return rows
