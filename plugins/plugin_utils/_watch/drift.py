# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Does a speculative-tuning decision still hold for the load the service runs now? (``playbooks/spec_watch.yml``)

Compares the decision file the speculative_tuning role recorded on the host (``decision`` below: its ``arm``,
``weights`` (concurrency -> weight), ``speedup_table`` (per arm and concurrency: speedup over the simplest arm with its
95 % interval), ``category_acceptance`` and ``time``) with what the live server shows (``live``: the
production_concurrency module's ``distribution``, ``weights`` over the decision's levels and ``accept_length``).

It answers "re-tune" when any of these moved:

* **concurrency**: under the live weights the speedup table favours another arm: its weighted speedup
  (sum of weight x speedup over the levels, divided by the weights' sum; point estimates) beats the decided arm's by more
  than ``min_gain``;
* **beyond the measurements**: the live p99 of running requests is above the highest level the decision measured;
* **accept length**: the live mean accept length is below (1 - ``accept_length_margin``) x the decided arm's accept length
  at the decision (request-weighted over the categories, weighted over the decision's levels).

Units: concurrency in running requests, accept length in tokens per verify step per request (bonus included).
Errors: :class:`DriftError` names the input, the value, why and the fix.
"""

from __future__ import annotations


class DriftError(ValueError):
    """A decision file or live reading that cannot be compared; the message says why and the fix."""


def _weights(raw, what):
    if not isinstance(raw, dict) or not raw:
        raise DriftError("%s weights=%r: expected {concurrency: weight > 0}. Fix: %s" % (
            what, raw, "run playbooks/spec_tune.yml again to record a decision" if what == "the decision's"
            else "sample while the service takes traffic (production_concurrency)"))
    out = {}
    for key, value in raw.items():
        try:
            conc, weight = int(key), float(value)
        except (TypeError, ValueError):
            raise DriftError("%s weights: %r -> %r is not concurrency -> weight" % (what, key, value))
        if conc >= 1 and weight > 0:
            out[conc] = weight
    if not out:
        raise DriftError("%s weights=%r: no concurrency >= 1 with a weight > 0" % (what, raw))
    return out


def weighted_median(weights):
    """The level at which the cumulative weight first reaches half of the total (``{concurrency: weight}``)."""
    total = sum(weights.values())
    acc = 0.0
    for conc in sorted(weights):
        acc += weights[conc]
        if acc >= total / 2.0:
            return conc
    return max(weights)


def weighted_speedups(table, weights):
    """Per arm of the speedup table: ``sum(w x speedup) / sum(w)`` over the weighted levels; arms missing a weighted level
    are left out (they were not measured there)."""
    out = {}
    for arm, rows in (table or {}).items():
        by = dict((int(r["concurrency"]), r.get("speedup")) for r in rows or [] if r.get("speedup") is not None)
        if all(c in by for c in weights):
            out[arm] = sum(weights[c] * by[c] for c in weights) / sum(weights.values())
    return out


def decided_accept_length(decision, arm, weights):
    """The decided arm's accept length at the decision: request-weighted over the categories of each weighted level, then
    weighted by the level weights; None when the decision holds no category acceptance for it (speculation off)."""
    per_level = ((decision.get("category_acceptance") or {}).get(arm) or {})
    total = wsum = 0.0
    for conc, weight in weights.items():
        cats = per_level.get(str(conc)) or {}
        num = den = 0.0
        for stats in cats.values():
            acc, req = stats.get("accept_length"), stats.get("requests") or 0
            if isinstance(acc, (int, float)) and not isinstance(acc, bool) and acc > 0 and req > 0:
                num += acc * req
                den += req
        if den:
            total += weight * num / den
            wsum += weight
    return total / wsum if wsum else None


def drift(decision, live, accept_length_margin=0.15, min_gain=0.0):
    """The verdict.

    :param decision: the decision file's content (a dict, see the module docstring).
    :param live: ``{"distribution": {"running": {"p50", "p99", ...}}, "weights": {level: weight}, "accept_length":
        {"mean", "samples"} or None}`` (production_concurrency's return values).
    :param accept_length_margin: fraction in (0, 1).
    :param min_gain: fraction >= 0; another arm must beat the decided one by more than this to call for a re-tune.
    :returns: dict ``verdict`` (``holds`` / ``re-tune``), ``moved`` (one sentence per finding), ``summary`` (one line),
        ``decided`` (``arm``, ``time``, ``p50_concurrency``, ``accept_length``, ``weighted_speedups``), ``live``
        (``p50_concurrency``, ``p99_concurrency``, ``accept_length``, ``weighted_speedups``, ``best_arm``).
    :raises DriftError: a decision without arm, weights or speedup table, live readings without weights, a margin out
        of range.
    """
    if not isinstance(decision, dict) or not (decision.get("arm") or {}).get("key"):
        raise DriftError("the decision file holds no decided arm (%r). Fix: record a decision with playbooks/spec_tune.yml"
                         % (type(decision).__name__ if not isinstance(decision, dict) else sorted(decision)[:6],))
    if isinstance(accept_length_margin, bool) or not 0 < float(accept_length_margin) < 1:
        raise DriftError("speculative_watch_accept_length_margin=%r: a fraction strictly between 0 and 1. Fix: e.g. 0.15"
                         % (accept_length_margin,))
    if isinstance(min_gain, bool) or float(min_gain) < 0:
        raise DriftError("speculative_tuning_min_gain=%r: a fraction >= 0. Fix: e.g. 0.0" % (min_gain,))
    arm = decision["arm"]["key"]
    table = decision.get("speedup_table") or {}
    if arm not in table:
        raise DriftError("the decision's speedup table has no row for the decided arm %s. Fix: record the decision again with "
                         "playbooks/spec_tune.yml" % arm)
    old_w = _weights(decision.get("weights"), "the decision's")
    new_w = _weights((live or {}).get("weights"), "the live")
    levels = sorted(set(int(r["concurrency"]) for r in table[arm]))
    running = ((live.get("distribution") or {}).get("running") or {})
    moved = []
    old_sp, new_sp = weighted_speedups(table, old_w), weighted_speedups(table, new_w)
    best = max(new_sp, key=lambda k: (new_sp[k], k == arm)) if new_sp else arm
    p50_old, p50_live = weighted_median(old_w), running.get("p50")
    if best != arm and arm in new_sp and new_sp[best] > new_sp[arm] * (1.0 + float(min_gain)):
        moved.append("p50 concurrency %s -> %s: at the live distribution %s serves better (weighted speedup %.3f against %.3f "
                     "for the decided %s)" % (p50_old, _n(p50_live), best, new_sp[best], new_sp[arm], arm))
    p99 = running.get("p99")
    if levels and isinstance(p99, (int, float)) and p99 > max(levels):
        moved.append("running requests p99 %s above the highest measured level %d: the decision did not measure this load"
                     % (_n(p99), max(levels)))
    acc_old = decided_accept_length(decision, arm, old_w)
    acc_live = ((live.get("accept_length") or {}).get("mean"))
    if acc_old is not None and isinstance(acc_live, (int, float)) and acc_live < acc_old * (1.0 - float(accept_length_margin)):
        keep = 1.0 - float(accept_length_margin)
        moved.append("accept length %s -> %s (below %s = %s x %s)"
                     % (_f2(acc_old), _f2(acc_live), _f2(acc_old * keep), _f2(acc_old), _f2(keep)))
    if acc_old is not None and acc_live is None:
        moved.append("accept length %s -> none: the server reports no speculative acceptance, but %s speculates" % (_f2(acc_old), arm))
    facts = "p50 concurrency %s -> %s" % (p50_old, _n(p50_live))
    if acc_old is not None:
        facts += "; accept length %s -> %s" % (_f2(acc_old), _f2(acc_live) if isinstance(acc_live, (int, float)) else "none")
    summary = ("re-tune: " + "; ".join(moved)) if moved else ("the decision still holds (%s %s)" % (arm, facts))
    return {"verdict": "re-tune" if moved else "holds", "moved": moved, "summary": summary,
            "decided": {"arm": arm, "time": decision.get("time"), "p50_concurrency": p50_old, "accept_length": acc_old,
                        "weighted_speedups": old_sp, "levels": levels},
            "live": {"p50_concurrency": p50_live, "p99_concurrency": p99, "accept_length": acc_live, "weighted_speedups": new_sp,
                     "best_arm": best, "weights": dict((str(k), v) for k, v in sorted(new_w.items()))}}


def _n(value):
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _f2(value):
    return "%.2f" % float(value)
