# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The speculative-decoding decision: arms, trials, intervals, the winner.

Standard library only (it runs in modules on the controller). Pieces:

* arms: :func:`normalize_arm` (one speculative configuration: off, NEXTN/EAGLE/EAGLE3 chain or tree,
  a separate draft model), :func:`default_grid`, :func:`arm_key`, :func:`simplicity`, :func:`order_arms`;
* per-trial objective values from serving_benchmark records (:func:`objective_value`): output throughput
  (tok/s, higher is better), goodput (req/s of requests meeting every set SLO, the record's
  ``goodput`` that serving_benchmark computes with ``sglang_benchmark_slo_ttft_ms`` / ``_tpot_ms``, vLLM ``--goodput`` semantics) or median TPOT (ms, lower is
  better), at one concurrency or weighted over a concurrency distribution;
* :func:`ratio_interval`: speedup of one arm over another with a 95 % interval (Welch t on the log of the
  ratio of the means, delta method; pooled relative spread when one arm has a single trial), and :func:`is_clear` for
  stopping trials early;
* :func:`decide`: the winner, "no significant difference" keeping the simpler arm;
* :func:`running_distribution`: p50/p90/max of ``#running-req`` and ``#queue-req`` from parsed SGLang
  ``Decode batch`` lines (``sglang_logs.parse_batch_line``) or ``sglang:num_running_reqs`` samples, and
  :func:`distribution_weights` to turn it into objective weights over the measured levels.
"""
from __future__ import annotations

import json
import math

from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import percentile

#: Two-sided 95 % Student t quantiles t(0.975, df) for df = 1..30 (any statistics table; e.g. scipy.stats.t.ppf).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)

ALGORITHMS = ("NEXTN", "EAGLE", "EAGLE3", "STANDALONE")
OBJECTIVES = ("throughput", "goodput", "tpot")
#: objective -> (record key, True when higher is better, unit)
OBJECTIVE_METRIC = {
    "throughput": ("output_throughput", True, "tok/s"),
    "goodput": ("goodput", True, "req/s"),
    "tpot": ("median_tpot_ms", False, "ms"),
}
ARM_KEYS = ("name", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
            "speculative_num_draft_tokens", "speculative_draft_model_path")
#: The adaptive settings a table-mode decision records beside the arm (``sglang_server_<key>`` in its ``server_vars``).
ADAPTIVE_KEYS = ("speculative_adaptive", "speculative_adaptive_config")


class SpecDecisionError(ValueError):
    """A bad arm, objective or measurement; the message names the variable, the value, why and the fix."""


def _int_or_none(variable, value, minimum):
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise SpecDecisionError("%s=%r: expected an integer >= %d, not a boolean. Fix: give a number." % (variable, value, minimum))
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SpecDecisionError("%s=%r: expected an integer >= %d. Fix: give a whole number." % (variable, value, minimum))
    if number != float(value) or number < minimum:
        raise SpecDecisionError("%s=%r: expected an integer >= %d. Fix: give a whole number >= %d." % (variable, value, minimum, minimum))
    return number


def normalize_arm(arm, index=0):
    """One arm (a dict) -> its canonical form.

    Keys (the role variables without ``sglang_server_``): ``speculative_algorithm`` (null/``off`` = no
    speculation, or NEXTN/EAGLE/EAGLE3/STANDALONE), ``speculative_num_steps``, ``speculative_eagle_topk``,
    ``speculative_num_draft_tokens`` (integers >= 1), ``speculative_draft_model_path`` (a separate draft model;
    null = the MTP head inside the target), ``name`` (optional; default :func:`arm_key`). The short keys
    ``algorithm``, ``num_steps``, ``eagle_topk``/``topk``, ``num_draft_tokens``, ``draft_model_path`` are accepted.
    Only the shape is checked here; whether SGLang accepts the combination is the launch renderer's call
    (``sglang_args.render_launch``), made for every arm before any restart.

    :returns: dict with the ``ARM_KEYS`` (``name`` filled in) and ``key`` (str, unique per configuration).
    :raises SpecDecisionError: unknown keys, a bad algorithm, a non-integer, settings without an algorithm.
    """
    where = "spec_tune arms[%d]" % index
    if not isinstance(arm, dict):
        raise SpecDecisionError("%s=%r: an arm is a dict such as {speculative_algorithm: NEXTN, speculative_num_steps: 1, "
                                "speculative_eagle_topk: 1, speculative_num_draft_tokens: 2}. Fix: give a dict." % (where, arm))
    aliases = {"algorithm": "speculative_algorithm", "num_steps": "speculative_num_steps", "eagle_topk": "speculative_eagle_topk",
               "topk": "speculative_eagle_topk", "num_draft_tokens": "speculative_num_draft_tokens",
               "draft_model_path": "speculative_draft_model_path"}
    out = dict.fromkeys(ARM_KEYS)
    for key, value in arm.items():
        full = aliases.get(key, key)
        if full not in out:
            raise SpecDecisionError("%s has the unknown key %r. Fix: use %s." % (where, key, ", ".join(ARM_KEYS)))
        out[full] = value
    algo = out["speculative_algorithm"]
    algo = None if algo in (None, "", False) or str(algo).lower() in ("off", "none", "null") else str(algo).upper()
    if algo is not None and algo not in ALGORITHMS:
        raise SpecDecisionError("%s speculative_algorithm=%r: the tuner compares draft-model configurations. Fix: use off (null), %s."
                                % (where, out["speculative_algorithm"], ", ".join(ALGORITHMS)))
    out["speculative_algorithm"] = algo
    for key in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"):
        out[key] = _int_or_none("%s %s" % (where, key), out[key], 1)
    draft = out["speculative_draft_model_path"]
    out["speculative_draft_model_path"] = None if draft in (None, "") else str(draft)
    if algo is None and any(out[k] is not None for k in ARM_KEYS[2:]):
        raise SpecDecisionError("%s: speculative settings %s without speculative_algorithm. Fix: set speculative_algorithm "
                                "(NEXTN, EAGLE, ...) or remove them for the arm without speculation."
                                % (where, {k: out[k] for k in ARM_KEYS[2:] if out[k] is not None}))
    out["key"] = arm_key(out)
    if out["name"] in (None, ""):
        out["name"] = out["key"]
    out["name"] = str(out["name"])
    return out


def arm_key(arm):
    """Stable text key of an arm's configuration: ``off`` or ``NEXTN-s1-k1-d2`` (+ ``-m<draft path>``); ``-`` for auto values."""
    if arm.get("speculative_algorithm") is None:
        return "off"

    def part(value):
        return "-" if value is None else str(value)
    key = "%s-s%s-k%s-d%s" % (arm["speculative_algorithm"], part(arm.get("speculative_num_steps")),
                              part(arm.get("speculative_eagle_topk")), part(arm.get("speculative_num_draft_tokens")))
    if arm.get("speculative_draft_model_path"):
        key += "-m" + arm["speculative_draft_model_path"].rstrip("/").rsplit("/", 1)[-1]
    return key


def simplicity(arm):
    """Sort key, simplest first: no speculation < fewer draft tokens < fewer steps < smaller topk < MTP head < separate draft model.

    Draft tokens are what the verify step pays for per request (``num_draft_tokens``; chain = steps + 1 when unset).
    """
    if arm.get("speculative_algorithm") is None:
        return (0, 0, 0, 0, 0, "")
    steps = arm.get("speculative_num_steps") or 0
    topk = arm.get("speculative_eagle_topk") or 1
    draft = arm.get("speculative_num_draft_tokens") or (steps + 1)
    return (1, draft, steps, topk, 1 if arm.get("speculative_draft_model_path") else 0, arm_key(arm))


def default_grid(algorithm="NEXTN"):
    """The default arms for the reference model (Qwen3.5-122B-A10B, MTP head, SGLang 0.5.9): off and chain drafts of 1, 2, 3 tokens.

    Chains (topk 1, draft tokens = steps + 1) because SGLang 0.5.9/0.5.10 spec v2 accepts only topk 1, and because
    SGLang's own auto choice for this family is 3/1/4 (``auto_choose_speculative_params``): the grid brackets it
    from below, where the optimum moves as concurrency grows.
    """
    arms = [{"name": "off", "speculative_algorithm": None}]
    for steps in (1, 2, 3):
        arms.append({"speculative_algorithm": algorithm, "speculative_num_steps": steps, "speculative_eagle_topk": 1,
                     "speculative_num_draft_tokens": steps + 1})
    return [normalize_arm(a, i) for i, a in enumerate(arms)]


def order_arms(arms, running_key=None):
    """Arms in run order: the configuration already running first (no restart), then simplest first.

    Every other arm costs one restart whatever the order; the simplest-first order measures the baseline (off)
    early, so later arms can stop their trials early against it. Duplicate keys are refused.
    """
    seen = {}
    for i, arm in enumerate(arms):
        if arm["key"] in seen:
            raise SpecDecisionError("spec_tune arms[%d] (%s) repeats arms[%d]: the same configuration twice. Fix: remove one."
                                    % (i, arm["key"], seen[arm["key"]]))
        seen[arm["key"]] = i
    return sorted(arms, key=lambda a: (0 if a["key"] == running_key else 1, simplicity(a)))


# ------------------------------------------------------------------------------------------------------
# statistics
# ------------------------------------------------------------------------------------------------------

def t975(df):
    """Two-sided 95 % Student t quantile for ``df`` degrees of freedom (float df rounds down; >30 -> 1.96 + 2.4/df)."""
    if df is None or df < 1:
        raise SpecDecisionError("t quantile: %r degrees of freedom; at least 2 trials per arm are needed for an interval" % (df,))
    d = int(math.floor(df))
    if d <= 30:
        return T975[d - 1]
    return 1.96 + 2.4 / d


def mean_sd(values):
    """(mean, sample standard deviation with n - 1; 0.0 for one value)."""
    n = len(values)
    m = sum(values) / float(n)
    if n < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))


def ratio_interval(candidate, baseline, higher_is_better=True):
    """Speedup of ``candidate`` over ``baseline`` with a 95 % interval.

    ``candidate``/``baseline``: lists of per-trial values (> 0). Speedup = mean(c)/mean(b) when higher is better,
    mean(b)/mean(c) when lower is better (TPOT). Interval: ``exp(ln R -/+ t * se)`` with
    ``se^2 = s_c^2/(n_c m_c^2) + s_b^2/(n_b m_b^2)`` (delta method for the log of a ratio of means) and Welch's
    degrees of freedom ``se^4 / sum((s_i^2/(n_i m_i^2))^2/(n_i - 1))``. With identical trials (se 0) the interval is
    the point. With one trial on one side and two or more on the other, the one trial has no spread of its own: the
    interval then pools the relative spread (pooled two-sample t on the log scale, equal relative variance assumed, as for
    two arms measured at the same level on the same server): ``se^2 = s_rel^2 (1/n_c + 1/n_b)`` with ``s_rel`` the
    other side's ``s/m`` and ``n - 1`` degrees of freedom. With fewer than 2 trials in both arms, ``low``/``high`` are None.

    :returns: dict ``speedup``, ``low``, ``high`` (floats or None), ``df`` (float or None), ``n`` ([n_c, n_b]),
        ``means`` ([m_c, m_b]).
    :raises SpecDecisionError: empty lists or a value <= 0.
    """
    if not candidate or not baseline:
        raise SpecDecisionError("ratio_interval: no trials (candidate %r, baseline %r)" % (candidate, baseline))
    if min(candidate) <= 0 or min(baseline) <= 0:
        raise SpecDecisionError("ratio_interval: values must be > 0 (candidate %r, baseline %r)" % (candidate, baseline))
    mc, sc = mean_sd(candidate)
    mb, sb = mean_sd(baseline)
    ratio = mc / mb if higher_is_better else mb / mc
    out = {"speedup": ratio, "low": None, "high": None, "df": None, "n": [len(candidate), len(baseline)], "means": [mc, mb]}
    if len(candidate) < 2 and len(baseline) < 2:
        return out
    if len(candidate) < 2 or len(baseline) < 2:
        n_more, s_rel = (len(baseline), sb / mb) if len(candidate) < 2 else (len(candidate), sc / mc)
        df = float(n_more - 1)
        half = t975(df) * s_rel * math.sqrt(1.0 / len(candidate) + 1.0 / len(baseline))
        out.update(low=ratio * math.exp(-half), high=ratio * math.exp(half), df=df)
        return out
    vc = sc ** 2 / (len(candidate) * mc ** 2)
    vb = sb ** 2 / (len(baseline) * mb ** 2)
    var = vc + vb
    if var <= 0:
        out.update(low=ratio, high=ratio, df=float(len(candidate) + len(baseline) - 2))
        return out
    den = 0.0
    if vc > 0:
        den += vc ** 2 / (len(candidate) - 1)
    if vb > 0:
        den += vb ** 2 / (len(baseline) - 1)
    df = var ** 2 / den
    half = t975(df) * math.sqrt(var)
    out.update(low=ratio * math.exp(-half), high=ratio * math.exp(half), df=df)
    return out


def is_clear(interval, min_gain=0.0):
    """True when the interval lies wholly above ``1 + min_gain`` or wholly below 1: more trials would not change the answer."""
    if interval.get("low") is None:
        return False
    return interval["low"] > 1.0 + min_gain or interval["high"] < 1.0


# ------------------------------------------------------------------------------------------------------
# objective values from serving_benchmark records
# ------------------------------------------------------------------------------------------------------

def _level_records(records):
    by_level = {}
    for rec in records:
        conc = rec.get("max_concurrency")
        if conc is None:
            continue
        by_level[int(conc)] = rec
    return by_level


def objective_value(records, objective="throughput", weights=None):
    """The objective of one trial (one sweep of one arm).

    ``records``: serving_benchmark records (one per concurrency level, ``max_concurrency`` set). ``weights``: dict
    concurrency -> weight (> 0), e.g. ``{32: 1}`` for one target, or a production distribution
    (:func:`distribution_weights`). The value is ``sum(w * metric) / sum(w)`` over the weighted levels.
    Metrics: ``output_throughput`` (tok/s), ``goodput`` (req/s meeting the SLOs; serving_benchmark with SLOs set),
    ``median_tpot_ms`` (ms).

    :raises SpecDecisionError: unknown objective, a weighted level missing from the records or without the metric,
        or a level with failed requests (its numbers would measure the failures).
    """
    if objective not in OBJECTIVE_METRIC:
        raise SpecDecisionError("spec_tune objective=%r: use one of %s." % (objective, ", ".join(OBJECTIVES)))
    metric = OBJECTIVE_METRIC[objective][0]
    by_level = _level_records(records)
    if not weights:
        raise SpecDecisionError("objective_value: no weights (target concurrency or distribution)")
    total = wsum = 0.0
    for conc, weight in sorted(weights.items()):
        rec = by_level.get(int(conc))
        if rec is None:
            raise SpecDecisionError("concurrency %s has weight %s but was not measured (levels %s). Fix: add it to the sweep."
                                    % (conc, weight, sorted(by_level)))
        if rec.get("failed"):
            raise SpecDecisionError("concurrency %s: %s failed request(s); its %s would measure the failures, not the arm."
                                    % (conc, rec["failed"], metric))
        value = rec.get(metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            hint = " (set sglang_benchmark_slo_ttft_ms / sglang_benchmark_slo_tpot_ms so the benchmark computes goodput)" if objective == "goodput" else ""
            raise SpecDecisionError("concurrency %s: the record has no positive %s (%r)%s." % (conc, metric, value, hint))
        total += weight * value
        wsum += weight
    return total / wsum


def level_values(trials, concurrency, objective="throughput"):
    """Per-trial values of the objective's metric at one concurrency (trials whose level failed are left out)."""
    out = []
    for records in trials:
        try:
            out.append(objective_value(records, objective, {concurrency: 1.0}))
        except SpecDecisionError:
            continue
    return out


# ------------------------------------------------------------------------------------------------------
# the decision
# ------------------------------------------------------------------------------------------------------

def decide(results, objective="throughput", weights=None, min_gain=0.0, point_estimate=False, simpler_first=None):
    """Pick the arm to serve. The one decision engine: ``spec_tune`` (N arms, repeated trials) and the MTP A/B
    (``benchmark_report`` with baseline and candidate records: two arms, one sweep each) both decide here.

    ``results``: list of ``{"arm": normalized arm, "trials": [records of one sweep, ...]}``. Every arm's per-trial
    objective (:func:`objective_value`) is computed; the best arm is the one with the best mean. Then, simplest arm
    first (:func:`simplicity`), the first arm that the best arm does not beat significantly (the 95 % interval of
    best/arm reaches down to ``1 + min_gain``) is chosen: with "no significant difference" the simpler arm stays.

    ``point_estimate``: where a comparison has no interval (an arm with one trial), decide on the point estimate
    (best/arm mean ratio > ``1 + min_gain`` or not) instead of keeping the simpler arm. The MTP A/B sets it (one
    sweep per arm); the decision then says it is a point estimate, and ``significant`` / ``no_significant_difference``
    are None (unknown without trials). ``simpler_first``: arm keys, simplest first, for arms whose configuration is not
    known (the A/B's two servers given by URL: the baseline counts as the simpler); default :func:`simplicity`.

    :returns: dict ``winner`` (arm key), ``winner_name``, ``best`` (key of the best mean), ``significant`` (bool: the
        winner's speedup over every other arm has a 95 % interval clear of 1), ``no_significant_difference`` (the
        opposite), ``ties`` (the arms whose interval against the winner reaches 1: key, speedup, low, high),
        ``basis`` (sentence), ``objective``, ``unit``, ``higher_is_better``,
        ``weights``, ``arms`` (per arm: key, name, values, mean, sd, n, ``vs_best`` interval, ``vs_baseline`` interval
        against the simplest arm), ``baseline`` (key of the simplest arm).
    :raises SpecDecisionError: no arm with a usable trial.
    """
    metric, higher, unit = OBJECTIVE_METRIC.get(objective, (None, True, ""))
    if metric is None:
        raise SpecDecisionError("spec_tune objective=%r: use one of %s." % (objective, ", ".join(OBJECTIVES)))
    rows = []
    problems = []
    for res in results:
        arm = res["arm"]
        values = []
        for i, records in enumerate(res.get("trials") or []):
            try:
                values.append(objective_value(records, objective, weights))
            except SpecDecisionError as exc:
                problems.append("%s trial %d: %s" % (arm["key"], i + 1, exc))
        if values:
            m, sd = mean_sd(values)
            rows.append({"key": arm["key"], "name": arm["name"], "arm": arm, "values": values, "mean": m, "sd": sd, "n": len(values)})
    if not rows:
        raise SpecDecisionError("no arm has a usable trial: %s" % ("; ".join(problems) or "no results"))
    order = None if simpler_first is None else list(simpler_first)
    if order is not None:
        unknown = [r["key"] for r in rows if r["key"] not in order]
        if unknown:
            raise SpecDecisionError("decide: simpler_first %r does not name the arm(s) %s" % (order, unknown))

    def rank(row):
        """Sort key, simplest first: the given order, else :func:`simplicity`."""
        return order.index(row["key"]) if order is not None else simplicity(row["arm"])
    rows.sort(key=rank)
    best = max(rows, key=lambda r: r["mean"]) if higher else min(rows, key=lambda r: r["mean"])
    baseline = rows[0]
    for r in rows:
        r["vs_best"] = ratio_interval(best["values"], r["values"], higher)
        r["vs_baseline"] = ratio_interval(r["values"], baseline["values"], higher)
    pointwise = bool(point_estimate) and any(r["vs_best"]["low"] is None for r in rows if r is not best)
    winner = best
    for r in rows:
        if r is best:
            break
        iv = r["vs_best"]
        if iv["low"] is None and point_estimate:
            if iv["speedup"] <= 1.0 + min_gain:
                winner = r
                break
        elif iv["low"] is None or iv["low"] <= 1.0 + min_gain:
            winner = r
            break
    ties = []
    for r in rows:
        if r is winner:
            continue
        iv = ratio_interval(winner["values"], r["values"], higher)
        if not is_clear(iv, min_gain) and not (pointwise and iv["low"] is None):
            ties.append({"key": r["key"], "speedup": iv["speedup"], "low": iv["low"], "high": iv["high"]})

    def fmt(iv):
        return "[%.3f, %.3f]" % (iv["low"], iv["high"]) if iv["low"] is not None else "unknown (one trial)"
    simpler = [r for r in rows if rank(r) < rank(winner)]
    if pointwise:
        head = "point estimate (one trial per arm, no 95 % interval; repeat trials for a significance test): "
        if winner is not best:
            basis = head + "%s over %s is %.3f, %s needs > %.3f to win, so the simpler %s is kept" % (
                best["key"], winner["key"], winner["vs_best"]["speedup"], best["key"], 1.0 + min_gain, winner["key"])
        elif simpler:
            low = min(simpler, key=lambda r: r["vs_best"]["speedup"])
            basis = head + "%s over %s is %.3f, above %.3f, so %s" % (
                winner["key"], low["key"], low["vs_best"]["speedup"], 1.0 + min_gain, winner["key"])
        else:
            basis = head + "%s is the simplest arm and has the best %s (%.4g %s)" % (winner["key"], objective, winner["mean"], unit)
    elif winner is not best:
        iv = winner["vs_best"]
        basis = ("no significant difference: %s (best mean %.4g %s) over %s is %.3f, 95 %% interval %s, which reaches %.3f; "
                 "the simpler arm %s is kept" % (best["key"], best["mean"], unit, winner["key"], iv["speedup"], fmt(iv),
                                                 1.0 + min_gain, winner["key"]))
    elif ties:
        basis = ("no significant difference: %s has the best %s (%.4g %s) but its speedup over %s has the 95 %% interval(s) %s, "
                 "which reach 1; %s is kept as the simplest of them"
                 % (winner["key"], objective, winner["mean"], unit, ", ".join(t["key"] for t in ties),
                    ", ".join(fmt(t) for t in ties), winner["key"]))
    elif simpler:
        basis = ("%s has the best %s (%.4g %s) and beats every other arm significantly (lowest 95 %% bound of its speedup "
                 "over the simpler arms: %.3f)" % (winner["key"], objective, winner["mean"], unit, min(r["vs_best"]["low"] for r in simpler)))
    elif len(rows) > 1:
        basis = "%s is the simplest arm, has the best %s (%.4g %s) and beats every other arm significantly" % (
            winner["key"], objective, winner["mean"], unit)
    else:
        basis = "%s is the only arm measured" % winner["key"]
    arms_out = []
    for r in rows:
        arms_out.append({"key": r["key"], "name": r["name"], "values": r["values"], "mean": r["mean"], "sd": r["sd"], "n": r["n"],
                         "vs_best": r["vs_best"], "vs_baseline": r["vs_baseline"]})
    return {"winner": winner["key"], "winner_name": winner["name"], "best": best["key"], "baseline": baseline["key"],
            "significant": None if pointwise else not ties, "no_significant_difference": None if pointwise else bool(ties),
            "point_estimate": pointwise, "ties": ties, "basis": basis, "objective": objective,
            "metric": metric, "unit": unit, "higher_is_better": higher, "weights": {str(k): v for k, v in sorted(weights.items())},
            "min_gain": min_gain, "arms": arms_out, "problems": problems}


def speedup_table(results, baseline_key, objective="throughput"):
    """Per arm and concurrency: speedup over ``baseline_key`` with its 95 % interval (for the plot and decision.md).

    :returns: dict arm key -> list of ``{"concurrency", "speedup", "low", "high", "n"}`` sorted by concurrency.
    """
    higher = OBJECTIVE_METRIC[objective][1]
    base = next((r for r in results if r["arm"]["key"] == baseline_key), None)
    if base is None:
        return {}
    levels = sorted({int(rec["max_concurrency"]) for t in base["trials"] for rec in t if rec.get("max_concurrency") is not None})
    out = {}
    for res in results:
        rows = []
        for conc in levels:
            c = level_values(res["trials"], conc, objective)
            b = level_values(base["trials"], conc, objective)
            if not c or not b:
                continue
            iv = ratio_interval(c, b, higher)
            rows.append({"concurrency": conc, "speedup": iv["speedup"], "low": iv["low"], "high": iv["high"], "n": iv["n"]})
        out[res["arm"]["key"]] = rows
    return out


def category_acceptance(results, levels):
    """Per arm, concurrency and workload category: the acceptance the arm's trials measured.

    ``results``: ``[{"arm": {"key", ...}, "trials": [records, ...]}]`` (as for :func:`decide`); each record may carry
    ``categories`` (serving_benchmark with a prompt workload: per category ``accept_length`` pooled as
    Σcompletion_tokens / Σspec_verify_ct, ``accept_rate`` pooled as Σaccepted / Σproposed, ``completed``; see
    ``spec_stats.group_stats``). ``levels``: the concurrencies to report (the decision's weighted levels).

    For each (arm, level, category) the values are the plain mean over the trials that reported them (one trial is
    one sweep, the same prompts for every arm); a trial whose category has no accept length (speculation off, an
    OpenAI backend) is left out of that mean. ``accept_rate`` is None unless at least one trial had it.

    :returns: ``{arm key: {"<concurrency>": {category: {"accept_length", "accept_rate", "requests", "trials"}}}}`` with
        concurrencies as strings (JSON keys) and categories sorted; an arm or level without category data maps to ``{}``.
    """
    out = {}
    for arm, conc, groups in _level_groups(results, levels, "categories"):
        per_level = out.setdefault(arm, {})
        per_level[conc] = {}
        for cat, stats in sorted(groups.items()):
            stats = [st for st in stats if _number(st.get("accept_length"))]
            if not stats:
                continue
            rates = [float(st["accept_rate"]) for st in stats if _number(st.get("accept_rate"))]
            per_level[conc][cat] = {"accept_length": _mean([float(st["accept_length"]) for st in stats]),
                                    "accept_rate": _mean(rates), "requests": sum(int(st.get("completed") or 0) for st in stats),
                                    "trials": len(stats)}
    return out


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _mean(values):
    """The plain mean of ``values``, None when empty."""
    return sum(values) / len(values) if values else None


def _level_groups(results, levels, key):
    """For each arm and each of ``levels`` (ascending): ``(arm key, "<concurrency>", {group: [the group's stats dict in
    each trial that reported it]})``, the groups read from the level record's ``key`` (``categories``,
    ``input_length_buckets``)."""
    wanted = sorted(set(int(c) for c in levels))
    for res in results:
        for conc in wanted:
            groups = {}
            for records in res["trials"]:
                rec = _level_records(records).get(conc) or {}
                for name, st in (rec.get(key) or {}).items():
                    groups.setdefault(name, []).append(st)
            yield res["arm"]["key"], str(conc), groups


#: Input-length buckets past the common draft training length (2048 tokens) and the accept length below which the winner
#: is flagged there (the same rule as the benchmark report's, ``_report.benchmark.LONG_CONTEXT_MIN_ACCEPT_LENGTH``).
LONG_BUCKETS = ("2k-8k", "8k-16k", ">16k")
LONG_CONTEXT_MIN_ACCEPT_LENGTH = 1.3


def input_length_acceptance(results, levels):
    """Per arm, concurrency and input-length bucket (``<2k``, ``2k-8k``, ``8k-16k``, ``>16k`` of the requests' prompt
    tokens): the accept length and per-request decode speed the arm's trials measured.

    ``results``/``levels`` as for :func:`category_acceptance`; each record may carry ``input_length_buckets``
    (serving_benchmark, ``spec_stats.by_input_length``). Values are plain means over the trials that reported them.

    :returns: ``{arm key: {"<concurrency>": {bucket: {"accept_length" (None without speculation),
        "decode_tok_s_per_request", "input_tokens_mean", "requests", "trials"}}}}``, buckets in their order.
    """
    out = {}
    for arm, conc, groups in _level_groups(results, levels, "input_length_buckets"):
        per_level = out.setdefault(arm, {})
        per_level[conc] = {}
        for bucket, stats in groups.items():
            values = dict((name, _mean([float(st[name]) for st in stats if _number(st.get(name))]))
                          for name in ("accept_length", "decode_tok_s_per_request", "input_tokens_mean"))
            per_level[conc][bucket] = dict(values, requests=sum(int(st.get("completed") or 0) for st in stats), trials=len(stats))
    return out


def long_context_warnings(table, winner, baseline):
    """Warnings for a winner that holds on short prompts and fails on long ones: for each concurrency of ``table``
    (:func:`input_length_acceptance`) and each long bucket (:data:`LONG_BUCKETS`), the winner's accept length below
    :data:`LONG_CONTEXT_MIN_ACCEPT_LENGTH`, or its per-request decode speed below the ``baseline`` arm's (speedup < 1).
    Empty when the winner is the baseline or no long prompt was measured."""
    if winner == baseline:
        return []
    out = []
    mine, base = table.get(winner) or {}, table.get(baseline) or {}
    for conc in sorted(mine, key=int):
        for bucket, v in (mine.get(conc) or {}).items():
            if bucket not in LONG_BUCKETS:
                continue
            b = (base.get(conc) or {}).get(bucket) or {}
            acc, dec, bdec = v.get("accept_length"), v.get("decode_tok_s_per_request"), b.get("decode_tok_s_per_request")
            speedup = (dec / bdec) if dec and bdec else None
            why = []
            if acc is not None and acc < LONG_CONTEXT_MIN_ACCEPT_LENGTH:
                why.append("accept length %.2f < %.1f" % (acc, LONG_CONTEXT_MIN_ACCEPT_LENGTH))
            if speedup is not None and speedup < 1.0:
                why.append("per-request decode speedup over %s %.3f < 1" % (baseline, speedup))
            if why:
                out.append("the winner %s fails on %s-token prompts at concurrency %s (%s): the decision holds for short "
                           "prompts, not long ones; for a long-context service (RAG, long documents) tune on that workload "
                           "or serve %s" % (winner, bucket, conc, ", ".join(why), baseline))
    return out


# ------------------------------------------------------------------------------------------------------
# keeping the decision: the sglang_server role serves the tuned arm (sglang_server_speculative_from_decision)
# ------------------------------------------------------------------------------------------------------

#: What a decision is only valid for: the key in the decision's ``fingerprint`` -> the role variable or fact it
#: comes from (the tuner writes these at plan time, playbooks/spec_tune.yml; the role compares them when it serves).
DECISION_MATCH_KEYS = (
    ("model_path", "sglang_server_model_path"),
    ("sglang_version", "sglang_server_version"),
    ("tp_size", "sglang_server_tp_size"),
    ("gpu_models", "ansible_facts.llmops_gpu.gpus[].name"),
    ("gpu_count", "ansible_facts.llmops_gpu.gpu_count"),
)


def _match_value(key, value):
    """Canonical form of one DECISION_MATCH_KEYS value (so "1" and 1, or an unsorted GPU list, compare equal)."""
    if value in (None, ""):
        return None
    if key in ("tp_size", "gpu_count"):
        try:
            return int(value)
        except (TypeError, ValueError):
            return str(value)
    if key == "gpu_models":
        if isinstance(value, (list, tuple)):
            return sorted(set(str(v) for v in value))
        return [str(value)]
    if key == "sglang_version":
        return str(value).lstrip("v")
    return str(value)


def tuned_settings(text, current, path="", host=""):
    """The speculative settings of the tuning decision recorded on a host, checked against the host's setup now.

    ``text``: the decision file written by playbooks/spec_tune.yml (JSON: ``arm``, ``server_vars``
    (``sglang_server_speculative_*``), ``time``, ``fingerprint``, ...); None or "" when the file does not exist.
    ``current``: the setup the server is about to be served with, keyed as :data:`DECISION_MATCH_KEYS`
    (``model_path``, ``sglang_version``, ``tp_size``, ``gpu_models`` (list of str), ``gpu_count``).
    ``path``/``host``: only for the messages.

    :returns: ``{"speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
        "speculative_num_draft_tokens", "speculative_draft_model_path", "arm" (key of the static settings), "time", "path"}``,
        plus ``speculative_adaptive`` and ``speculative_adaptive_config`` when the decision sets them (a table-mode
        decision: adaptive on with the tuned table).
    :raises SpecDecisionError: no file, not JSON, not a decision, or a decision taken for another model, SGLang
        version, tensor-parallel size or GPU (model or count), naming each difference and the fix.
    """
    where = "sglang_server_speculative_from_decision=true on %s" % (host or "this host")
    retune = ("Fix: tune this setup (ansible-playbook playbooks/spec_tune.yml -e llmops_target=%s ...), or set "
              "sglang_server_speculative_from_decision=false and give sglang_server_speculative_* in the inventory." % (host or "<host>"))
    if text in (None, ""):
        raise SpecDecisionError("%s, but there is no tuning decision at %s: the speculative settings to serve are unknown. %s"
                                % (where, path, retune))
    try:
        decision = json.loads(text)
    except ValueError as exc:
        raise SpecDecisionError("%s: the decision file %s is not JSON (%s). %s" % (where, path, exc, retune))
    server_vars = decision.get("server_vars") if isinstance(decision, dict) else None
    fingerprint = decision.get("fingerprint") if isinstance(decision, dict) else None
    if not isinstance(server_vars, dict) or not isinstance(fingerprint, dict):
        raise SpecDecisionError("%s: %s is not a spec_tune decision (no server_vars / fingerprint). %s" % (where, path, retune))
    diffs = []
    for key, source in DECISION_MATCH_KEYS:
        then, now = _match_value(key, fingerprint.get(key)), _match_value(key, current.get(key))
        if then is None and key not in fingerprint:
            diffs.append("%s not recorded in the decision (written by an older spec_tune), %s now" % (key, now))
        elif then != now:
            diffs.append("%s %s then, %s now (%s)" % (key, then, now, source))
    if diffs:
        raise SpecDecisionError("%s: the decision in %s (arm %s, %s) was measured on another setup: %s. A draft length tuned "
                                "there is not evidence for this one. %s" % (
                                    where, path, (decision.get("arm") or {}).get("key", "?"), decision.get("time", "?"),
                                    "; ".join(diffs), retune))
    out = {}
    for key in ARM_KEYS[1:]:
        if "sglang_server_" + key not in server_vars:
            raise SpecDecisionError("%s: the decision in %s lacks sglang_server_%s. %s" % (where, path, key, retune))
        out[key] = server_vars["sglang_server_" + key]
    arm = normalize_arm(out)
    result = dict((k, arm[k]) for k in ARM_KEYS[1:])
    result.update(arm=arm["key"], time=decision.get("time"), path=path)
    # a table-mode decision (spec_tune mode=table) serves SGLang's adaptive table on top of the static settings
    for key in ADAPTIVE_KEYS:
        if "sglang_server_" + key in server_vars:
            result[key] = server_vars["sglang_server_" + key]
    return result


# ------------------------------------------------------------------------------------------------------
# production concurrency
# ------------------------------------------------------------------------------------------------------

def running_distribution(samples, include_idle=False):
    """Distribution of running requests from samples.

    ``samples``: list of dicts with ``running_req`` (int) and optionally ``queue_req`` (int): parsed SGLang
    ``Decode batch`` lines (``sglang_logs.parse_batch_line``; SGLang logs one every ``--decode-log-interval`` decode
    steps, so each line stands for the same number of steps) or ``/metrics`` samples of ``sglang:num_running_reqs`` /
    ``sglang:num_queue_reqs``. Samples with 0 running requests are idle and left out unless ``include_idle``.

    :returns: dict ``samples`` (int), ``running`` {p50, p90, p99, max, mean}, ``queue`` {p50, p90, max, mean},
        ``queued_fraction`` (share of samples with a queue), ``histogram`` {running count: samples}; values None
        without samples.
    """
    run = []
    queue = []
    for s in samples:
        r = s.get("running_req")
        if not isinstance(r, (int, float)) or isinstance(r, bool):
            continue
        if r <= 0 and not include_idle:
            continue
        run.append(r)
        q = s.get("queue_req")
        queue.append(q if isinstance(q, (int, float)) and not isinstance(q, bool) else 0)
    hist = {}
    for r in run:
        hist[int(r)] = hist.get(int(r), 0) + 1

    def summary(values, qs):
        if not values:
            return dict.fromkeys(qs + ("max", "mean"))
        out = {q: percentile(values, float(q[1:])) for q in qs}
        out["max"] = max(values)
        out["mean"] = sum(values) / float(len(values))
        return out
    return {"samples": len(run), "running": summary(run, ("p50", "p90", "p99")), "queue": summary(queue, ("p50", "p90")),
            "queued_fraction": (sum(1 for q in queue if q > 0) / float(len(queue))) if queue else None,
            "histogram": hist}


def distribution_weights(histogram, levels):
    """Weights over the measured ``levels`` from a running-request ``histogram`` ({count: samples}).

    Each observed count goes to the nearest measured level on a log2 scale (ties to the higher level), weighted by
    its samples times the count (a step with more running requests produces proportionally more tokens).

    :returns: dict level -> weight (only levels that received some weight).
    :raises SpecDecisionError: no levels or an empty histogram.
    """
    if not levels:
        raise SpecDecisionError("distribution_weights: no measured levels")
    if not histogram:
        raise SpecDecisionError("distribution_weights: the production distribution has no samples (an idle server?)")
    levels = sorted(int(x) for x in levels)
    weights = {}
    for count, n in histogram.items():
        count = int(count)
        if count <= 0:
            continue
        best = min(levels, key=lambda lv: (abs(math.log(lv, 2) - math.log(count, 2)), -lv))
        weights[best] = weights.get(best, 0.0) + float(n) * count
    if not weights:
        raise SpecDecisionError("distribution_weights: the production distribution has no busy samples")
    return weights
