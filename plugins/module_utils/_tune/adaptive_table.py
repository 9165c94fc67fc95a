# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The tuner's table mode (issue 21 part 3): SGLang's adaptive draft-length table from measured static step counts.

SGLang's adaptive speculative decoding (``--speculative-adaptive-config``, SGLang 0.5.14+) serves a decode batch of
``bs`` requests from the largest table bucket not above ``bs`` (``AdaptiveSpeculativeParams``; the smallest bucket when
``bs`` is below every bucket) and moves, inside that bucket, between its ``candidate_steps`` as an EMA of the accepted
drafts changes. Steps 0 means no drafting. The tuner measures one static arm per step count (draft tokens = steps + 1,
topk 1; steps 0 = speculation off), each at every bucket as a concurrency level, and keeps per bucket the best step count
plus every smaller count the best does not beat significantly (95 % interval of best/count reaches 1) and that the EMA
would not fall to at the acceptance measured for the best. SGLang's ``AdaptiveStepSlot`` moves down to the next smaller
candidate ``l`` when the EMA of accepted drafts per request is at or below ``l - 0.5 + down_hysteresis`` (-0.25; 0.25 for
``l = 0``) and up only when it passes the next larger one ``- 0.5``, which a chain rarely reaches: so a count above the
best, even one not significantly worse, would run whenever acceptance allows, at its measured cost, and a smaller count
whose threshold lies at or above the best's measured accepted drafts (``accept_length - 1``) would be where the bucket
settles (a first proof with ``[1, 2, 3]`` at batch 1 sat at 2 steps 71 % of the time, 3 being the best). The smaller
counts kept are where the EMA goes only when acceptance drops below what was measured, never a count measured to be
worse.

A bucket is measured as a closed loop of its own concurrency ``c``, but its table key is not ``c``: SGLang serves a
batch from the largest key not above it, so a table keyed at the measured levels (1/8/32/64) serves every batch between
two levels with the lower level's counts - a batch of 63 with the counts measured at 32 - and a closed loop of ``c``
decodes a batch just below ``c`` most of the time (requests being sent, queued or prefilled), so a load of 64 would draft
with bucket 32's counts. Each key after the first is instead the geometric midpoint of its level and the level below
(:func:`table_keys`: 1, 3, 16, 45 for levels 1, 8, 32, 64): every batch size is served with the counts measured at the
nearest level on the log scale the step time and the buckets follow. The first key is the smallest level (SGLang serves
every batch below the smallest key from it).

Pieces: :data:`STEP_COUNTS`, :func:`step_arms`, :func:`arm_steps`, :func:`levels_next` (the buckets an arm still measures:
a step count already significantly worse at a bucket is not measured there again), :func:`bucket_table` (the table,
validated by SGLang's loader rules in :mod:`adaptive_config`), :func:`adaptive_server_vars` (the ``sglang_server_*`` variables that
serve it). Statistics: :func:`decision.ratio_interval` and :func:`decision.level_values`. Standard library only.
"""

from __future__ import annotations

import math

from ansible_collections.llmops.sglang.plugins.module_utils._tune import adaptive_config
from ansible_collections.llmops.sglang.plugins.module_utils._tune import decision as sd

#: Default static step counts of table mode (issue 21): 0 (off) and chains of 1, 2, 3, 5, 7 steps.
STEP_COUNTS = (0, 1, 2, 3, 5, 7)

#: Algorithms SGLang's adaptive mode runs with (``adaptive_unsupported_reason``; NEXTN is an alias of EAGLE).
TABLE_ALGORITHMS = ("NEXTN", "EAGLE", "EAGLE3")


def step_arms(algorithm="NEXTN", steps=STEP_COUNTS, draft_model_path=None):
    """The static arms of table mode: one per step count.

    :param algorithm: NEXTN, EAGLE or EAGLE3 (case-insensitive).
    :param steps: step counts (ints >= 0, each once); 0 is the arm without speculation (``off``).
    :param draft_model_path: the EAGLE draft model (None: the MTP head inside the target).
    :returns: normalized arms (:func:`decision.normalize_arm`), ascending step count; steps ``s`` > 0 is
        ``{algorithm, s, topk 1, draft tokens s + 1}``.
    :raises decision.SpecDecisionError: another algorithm, a step count that is not an int >= 0, a repeated one, none.
    """
    algo = str(algorithm or "").upper()
    if algo not in TABLE_ALGORITHMS:
        raise sd.SpecDecisionError("speculative_tuning_default_algorithm=%r: SGLang's adaptive table runs only with %s (it switches "
                                   "adaptive off for other algorithms). Fix: use one of them, or speculative_tuning_mode: static."
                                   % (algorithm, ", ".join(TABLE_ALGORITHMS)))
    counts = list(steps or [])
    if not counts:
        raise sd.SpecDecisionError("table mode step counts=%r: none given. Fix: give e.g. %s." % (steps, list(STEP_COUNTS)))
    for s in counts:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise sd.SpecDecisionError("table mode step count %r: must be an int >= 0 (0 = no drafting). Fix: give e.g. %s."
                                       % (s, list(STEP_COUNTS)))
    if len(set(counts)) != len(counts):
        raise sd.SpecDecisionError("table mode step counts %r: a count is repeated. Fix: give each once." % (counts,))
    arms = []
    for i, s in enumerate(sorted(counts)):
        if s == 0:
            arm = {"name": "off", "speculative_algorithm": None}
        else:
            arm = {"speculative_algorithm": algo, "speculative_num_steps": s, "speculative_eagle_topk": 1,
                   "speculative_num_draft_tokens": s + 1, "speculative_draft_model_path": draft_model_path}
        arms.append(sd.normalize_arm(arm, i))
    return arms


def arm_steps(arm):
    """The step count of a table-mode arm (normalized): 0 for ``off``, else ``speculative_num_steps``.

    :raises decision.SpecDecisionError: an arm that a table cannot hold - an algorithm other than NEXTN/EAGLE/EAGLE3,
        topk other than 1, draft tokens other than steps + 1 (SGLang's adaptive mode sets topk 1 and draft tokens
        steps + 1 itself), or no step count.
    """
    algo = arm.get("speculative_algorithm")
    if algo is None:
        return 0
    steps = arm.get("speculative_num_steps")
    why = None
    if algo not in TABLE_ALGORITHMS:
        why = "speculative_algorithm %s (adaptive runs with %s)" % (algo, ", ".join(TABLE_ALGORITHMS))
    elif steps is None:
        why = "no speculative_num_steps"
    elif (arm.get("speculative_eagle_topk") or 1) != 1:
        why = "speculative_eagle_topk %s (adaptive runs with topk 1)" % arm["speculative_eagle_topk"]
    elif arm.get("speculative_num_draft_tokens") not in (None, steps + 1):
        why = "speculative_num_draft_tokens %s (adaptive serves steps + 1 = %d)" % (arm["speculative_num_draft_tokens"], steps + 1)
    if why:
        raise sd.SpecDecisionError("arm %s cannot be a step count of an adaptive table: %s. Fix: give table mode chain arms "
                                   "(topk 1, draft tokens steps + 1) or use speculative_tuning_mode: static." % (arm.get("key"), why))
    return steps


def down_threshold(steps):
    """The EMA of accepted drafts per request at or below which SGLang's ``AdaptiveStepSlot`` moves down to ``steps``
    (the next smaller candidate): ``(0.5 if steps == 0 else steps - 0.5) + down_hysteresis`` (default -0.25,
    ``adaptive_config.FIELD_DEFAULTS``; SGLang 0.5.23 ``speculative/adaptive_spec_params.py``)."""
    return (0.5 if steps == 0 else steps - 0.5) + adaptive_config.FIELD_DEFAULTS["down_hysteresis"]


def accepted_drafts(trials, bucket):
    """Mean accepted drafts per request and verify step (``accept_length - 1``) of a step count's trials at concurrency
    ``bucket`` (the records' ``accept_length``), or None when no record has it."""
    values = []
    for records in trials:
        for rec in records or []:
            acc = rec.get("accept_length") if rec.get("max_concurrency") == bucket else None
            if isinstance(acc, (int, float)) and not isinstance(acc, bool) and acc >= 1:
                values.append(acc - 1.0)
    return sum(values) / len(values) if values else None


def table_keys(buckets):
    """The table key of each measured level (ascending ints >= 1): the first keeps its number; each next one is the
    geometric midpoint ``round(sqrt(previous level x level))``, at least the previous key + 1 and at most the level.

    Example: levels 1, 8, 32, 64 -> keys 1, 3, 16, 45 (sqrt 8 = 2.83, sqrt 256 = 16, sqrt 2048 = 45.25).
    """
    keys = []
    for i, b in enumerate(buckets):
        key = b if not i else min(b, max(keys[-1] + 1, int(math.floor(math.sqrt(buckets[i - 1] * b) + 0.5))))
        keys.append(key)
    return keys


def bucket_table(results, buckets, objective="throughput"):
    """Per bucket: each step count's objective, its distance to the best with a 95 % interval, and the candidates.

    :param results: ``[{"arm": normalized arm, "trials": [records of one sweep, ...]}]`` (as for
        :func:`decision.decide`), one arm per step count (:func:`arm_steps`); each trial's serving_benchmark records hold
        one record per concurrency level (``max_concurrency``).
    :param buckets: the batch-size buckets (ints >= 1), each measured as the concurrency level of the same number.
    :param objective: ``throughput`` (output tok/s), ``goodput`` (req/s) or ``tpot`` (median ms, lower is better).
    :returns: dict ``table`` (SGLang's JSON as a dict, validated by ``adaptive_config.validate_table``: ``{"<key>":
        {"candidate_steps": [ascending ints]}}``, one key per bucket, :func:`table_keys`), ``buckets`` (ascending; per
        bucket ``bucket`` (the measured level), ``key`` (its table key, :func:`table_keys`), ``best`` (step count of
        the best mean; a tie goes to the fewer steps), ``candidate_steps``, ``steps``: per measured step count, ascending,
        ``steps``, ``arm`` (key), ``values`` (per-trial metric), ``mean``, ``n``, ``vs_best`` (best over this count:
        ``decision.ratio_interval`` dict, ``speedup`` >= 1), ``vs_off`` (this count over steps 0, or None when steps 0 was
        not measured) and ``candidate`` (bool)), ``objective``, ``metric``, ``unit``, ``higher_is_better``, ``problems``
        (step counts without a usable trial at a bucket, and bucket decisions made without an interval).
        A count is a candidate when it is the best, or below the best and the 95 % interval of best/count reaches down to 1 (not
        significantly worse; ``decision.ratio_interval``, which pools the spread when one side has a single trial, e.g. a
        count eliminated after its first trial); with one trial on both sides there is no interval, so the count stays.
    :raises decision.SpecDecisionError: an unknown objective, no bucket, a bucket that is not an int >= 1, an arm a table
        cannot hold, two arms with one step count, or a bucket where no step count has a usable trial.
    """
    if objective not in sd.OBJECTIVE_METRIC:
        raise sd.SpecDecisionError("spec_tune objective=%r: use one of %s." % (objective, ", ".join(sd.OBJECTIVES)))
    metric, higher, unit = sd.OBJECTIVE_METRIC[objective]
    if not buckets:
        raise sd.SpecDecisionError("table mode buckets=%r: no bucket. Fix: give the concurrency buckets (e.g. [1, 8, 32, 64]) or a "
                                   "production distribution." % (buckets,))
    wanted = []
    for b in buckets:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise sd.SpecDecisionError("table mode bucket %r: must be an int >= 1 (a batch size measured as that concurrency). "
                                       "Fix: give e.g. [1, 8, 32, 64]." % (b,))
        wanted.append(b)
    by_steps = {}
    for res in results:
        steps = arm_steps(res["arm"])
        if steps in by_steps:
            raise sd.SpecDecisionError("arms %s and %s both have %d steps; a table needs one arm per step count. Fix: remove one."
                                       % (by_steps[steps]["arm"]["key"], res["arm"]["key"], steps))
        by_steps[steps] = res
    out_buckets = []
    problems = []
    table = {}
    ordered = sorted(set(wanted))
    keys = dict(zip(ordered, table_keys(ordered)))
    for bucket in ordered:
        rows = []
        for steps in sorted(by_steps):
            values = sd.level_values(by_steps[steps]["trials"], bucket, objective)
            if not values:
                problems.append("bucket %d: %d steps (%s) has no usable trial at concurrency %d" % (
                    bucket, steps, by_steps[steps]["arm"]["key"], bucket))
                continue
            m = sum(values) / float(len(values))
            rows.append({"steps": steps, "arm": by_steps[steps]["arm"]["key"], "values": values, "mean": m, "n": len(values)})
        if not rows:
            raise sd.SpecDecisionError("bucket %d: no step count has a usable trial at concurrency %d (measured arms: %s). Fix: "
                                       "measure the level (it must be in the sweep) or drop the bucket." % (
                                           bucket, bucket, ", ".join(r["arm"]["key"] for r in results) or "none"))
        best = rows[0]
        for r in rows[1:]:
            if (r["mean"] > best["mean"]) if higher else (r["mean"] < best["mean"]):
                best = r
        off = next((r for r in rows if r["steps"] == 0), None)
        drafts = accepted_drafts(by_steps[best["steps"]]["trials"], bucket) if best["steps"] else None
        best["accepted_drafts"] = drafts
        for r in rows:
            r["vs_best"] = sd.ratio_interval(best["values"], r["values"], higher)
            r["vs_off"] = sd.ratio_interval(r["values"], off["values"], higher) if off else None
            low = r["vs_best"]["low"]
            # counts above the best are never candidates: SGLang's EMA climbs to the largest candidate the acceptance
            # supports, so such a count would run most of the time, at its measured cost
            r["candidate"] = r is best or (r["steps"] < best["steps"] and (low is None or low <= 1.0))
            r["ema_threshold"] = None
            if r["candidate"] and r is not best and drafts is not None:
                # a smaller count the EMA would fall to at the acceptance measured for the best: the bucket would serve it
                r["ema_threshold"] = down_threshold(r["steps"])
                if r["ema_threshold"] >= drafts:
                    r["candidate"] = False
            if r["candidate"] and r is not best and low is None:
                problems.append("bucket %d: %d steps kept as a candidate without an interval (one trial)" % (bucket, r["steps"]))
        candidates = [r["steps"] for r in rows if r["candidate"]]
        table[str(keys[bucket])] = {"candidate_steps": candidates}
        out_buckets.append({"bucket": bucket, "key": keys[bucket], "best": best["steps"], "candidate_steps": candidates,
                            "steps": rows})
    return {"table": adaptive_config.validate_table(table), "buckets": out_buckets, "objective": objective, "metric": metric,
            "unit": unit, "higher_is_better": higher, "problems": problems}


def levels_next(trials, finished, buckets, objective="throughput", min_trials=2, min_gain=0.0):
    """The buckets an arm's next trial still has to measure (table mode's tuning cost, issue 21).

    A bucket is dropped for this arm when a finished arm is significantly better there (the 95 % interval of
    theirs/mine lies above 1, :func:`decision.ratio_interval`; after this arm's first trial the interval pools the finished
    arm's spread), so this step count is no candidate of the bucket and more trials would not make it one; or when, after
    ``min_trials`` trials (at least 2), every comparison with a finished arm at that bucket is clear
    (:func:`decision.is_clear`, the static early-stop rule, per bucket). A bucket whose level failed in every trial so far
    stays.

    :param trials: this arm's finished trials (lists of serving_benchmark records, as for :func:`bucket_table`).
    :param finished: the other finished arms, ``[{"arm", "trials"}]``.
    :param buckets: the table's buckets (ascending ints). :param objective: as for :func:`bucket_table`.
    :returns: ``(levels, dropped)``: the buckets still to measure (ascending; empty = the arm is done) and one row per
        dropped bucket: ``bucket``, ``eliminated_by`` (arm key of the largest lower bound, or None when dropped as clear),
        ``speedup`` and ``low`` (theirs over mine, None when clear).
    :raises decision.SpecDecisionError: an unknown objective.
    """
    if objective not in sd.OBJECTIVE_METRIC:
        raise sd.SpecDecisionError("spec_tune objective=%r: use one of %s." % (objective, ", ".join(sd.OBJECTIVES)))
    higher = sd.OBJECTIVE_METRIC[objective][1]
    keep, dropped = [], []
    for bucket in buckets:
        mine = sd.level_values(trials, bucket, objective)
        if not mine:
            keep.append(bucket)
            continue
        by, clear = None, bool(finished) and len(mine) >= max(2, min_trials)
        for other in finished:
            theirs = sd.level_values(other["trials"], bucket, objective)
            if not theirs:
                clear = False
                continue
            iv = sd.ratio_interval(theirs, mine, higher)
            if iv["low"] is not None and iv["low"] > 1.0 and (by is None or iv["low"] > by[1]["low"]):
                by = (other["arm"]["key"], iv)
            clear = clear and sd.is_clear(iv, min_gain)
        if by is not None:
            dropped.append({"bucket": bucket, "eliminated_by": by[0], "speedup": by[1]["speedup"], "low": by[1]["low"]})
        elif clear:
            dropped.append({"bucket": bucket, "eliminated_by": None, "speedup": None, "low": None})
        else:
            keep.append(bucket)
    return keep, dropped


def adaptive_server_vars(table, algorithm, draft_model_path=None):
    """The ``sglang_server_*`` variables that serve ``table`` with adaptive speculative decoding.

    :param table: a validated table (:func:`bucket_table`'s ``table``).
    :param algorithm: NEXTN, EAGLE or EAGLE3. :param draft_model_path: the EAGLE draft model or None.
    :returns: None when no bucket drafts (every candidate is 0: serve without speculation instead, a static decision),
        else ``sglang_server_speculative_algorithm``, ``_num_steps`` (the largest candidate, so the static settings
        cover the longest draft the table can switch to; SGLang refuses a start value outside the candidates),
        ``_eagle_topk`` 1, ``_num_draft_tokens`` steps + 1, ``_draft_model_path``, ``_adaptive`` true, ``_adaptive_config``
        (the table).
    """
    top = max(adaptive_config.candidate_union(table))
    if top == 0:
        return None
    return {"sglang_server_speculative_algorithm": str(algorithm).upper(), "sglang_server_speculative_num_steps": top,
            "sglang_server_speculative_eagle_topk": 1, "sglang_server_speculative_num_draft_tokens": top + 1,
            "sglang_server_speculative_draft_model_path": draft_model_path, "sglang_server_speculative_adaptive": True,
            "sglang_server_speculative_adaptive_config": table}
