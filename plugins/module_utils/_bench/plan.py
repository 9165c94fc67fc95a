# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""THE sweep plan of a serving benchmark and its progress (pure Python, no I/O).

The serving_benchmark action plugin plans the sweep once, on the controller (:func:`plan_sweep`), and runs the module
once per level with that level (option ``levels``); the module plans only when it runs outside Ansible (tests). The
sglang_benchmark role calls the action once for the whole sweep.

A sweep is every concurrency level crossed with every request-rate level (in the given order). A replayed
trace fixes each level's requests (every trace line, once) and their arrivals, so it has no rate levels; a
shared-prefix workload fixes the number of requests (groups x prompts per group). With ``sort_levels`` (the role)
the concurrency levels run ascending, each once (mtp_ab.yml's target concurrency joins them); without, the levels
run as given, so a repeated level is measured again. Each level measures ``max(num_prompts, prompts_per_concurrency x
max_concurrency)`` requests, so high concurrency levels still see several waves of requests.

:class:`SweepProgress` keeps what the levels measured so far: the records, the problems, the early stop, and the line
printed after each level (its results and the ETA of the rest: measured seconds per wave x the waves left).
"""

from __future__ import annotations

import math

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.llmops.sglang.plugins.module_utils._bench import phases as bench_phases

#: The options of serving_benchmark that shape the plan (a part of the module's argument spec).
PLAN_ARGUMENT_SPEC = dict(
    max_concurrency=dict(type="list", elements="int", default=[1]),
    request_rate=dict(type="list", elements="float", default=[]),
    num_prompts=dict(type="int", default=100),
    prompts_per_concurrency=dict(type="int", default=0),
    extra_concurrency=dict(type="list", elements="int", default=[]),
    sort_levels=dict(type="bool", default=False),
    phases=dict(type="list", elements="dict", default=[]),
    levels=dict(type="list", elements="dict", options=dict(
        max_concurrency=dict(type="int"),
        request_rate=dict(type="float"),
        num_prompts=dict(type="int", required=True),
        waves=dict(type="float", default=1.0),
        name=dict(type="str", required=True),
        phases=dict(type="list", elements="dict"),
    )),
)

#: Options whose value must be a list (a string is never split into one, as Ansible's list type would).
LIST_OPTIONS = ("max_concurrency", "request_rate", "extra_concurrency")


class PlanError(ValueError):
    """A sweep that cannot be planned; the message names the variable, the value and the fix."""


def _levels(values, variable, kind):
    out = []
    for v in values or []:
        try:
            x = int(v) if kind == "concurrency" else float(v)
        except (TypeError, ValueError):
            x = None
        if x is None or isinstance(v, bool) or x <= 0 or (kind == "rate" and (math.isinf(x) or math.isnan(x))) \
                or (kind == "concurrency" and float(v) != x):
            raise PlanError("%s=%r: every level must be a %s; give a list such as %s"
                            % (variable, list(values), "whole number of concurrent requests >= 1" if kind == "concurrency"
                               else "finite request rate > 0 req/s", "[1, 4, 16, 64]" if kind == "concurrency" else "[2, 8]"))
        out.append(x)
    return out


def plan_levels(max_concurrency, request_rate, num_prompts, prompts_per_concurrency=0, extra_concurrency=(),
                variables=("max_concurrency", "request_rate", "extra_concurrency"), sort_unique=False, trace_requests=None,
                shared_prefix=None):
    """The levels of a sweep, in the order they run.

    Args:
      max_concurrency (list of int): concurrency levels; empty = no concurrency limit (one level).
      request_rate (list of float): request-rate levels in req/s; empty = all requests at once.
      num_prompts (int): requests per level at least.
      prompts_per_concurrency (int): with a concurrency level, at least this many requests per concurrent slot.
      extra_concurrency (list of int): levels that join the concurrency levels (mtp_ab.yml's target concurrency).
      variables (tuple of 3 str): the names of the three level lists in messages (the caller's variable names).
      sort_unique (bool): run the concurrency levels ascending, each once (else as given, extra ones last).
      trace_requests (int or None): the number of requests of a replayed trace: each level sends exactly these,
        and the rate levels are dropped (the trace's timestamps set the arrivals).
      shared_prefix (dict or None): ``num_groups`` and ``prompts_per_group`` (default 1 each) of a shared-prefix
        workload: each level sends num_groups x prompts_per_group requests.

    Returns:
      list of dict: ``max_concurrency`` (int or None), ``request_rate`` (float req/s or None), ``num_prompts`` (int),
      ``waves`` (float: num_prompts / concurrency, or the seconds num_prompts take at the rate, else 1; the ETA's unit)
      and ``name`` (``"concurrency 4"``, ``"rate 2 req/s"``, ``"concurrency 4, rate 2 req/s"`` or ``"no limit"``).

    Raises:
      PlanError: a level that is not a whole number >= 1 (concurrency) or a finite number > 0 (rate).
    """
    concs = _levels(max_concurrency, variables[0], "concurrency") + _levels(extra_concurrency, variables[2], "concurrency")
    if sort_unique:
        concs = sorted(set(concs))
    rates = _levels(request_rate, variables[1], "rate") if trace_requests is None else []
    plan = []
    for mc in concs or [None]:
        for rate in rates or [None]:
            if trace_requests is not None:
                n = int(trace_requests)
            elif shared_prefix:
                n = int(shared_prefix.get("num_groups") or 1) * int(shared_prefix.get("prompts_per_group") or 1)
            else:
                n = int(num_prompts)
                if mc is not None:
                    n = max(n, int(prompts_per_concurrency or 0) * mc)
            waves = n / float(mc) if mc is not None else (n / rate if rate is not None else 1.0)
            parts = []
            if mc is not None:
                parts.append("concurrency %d" % mc)
            if rate is not None:
                parts.append("rate %g req/s" % rate)
            plan.append({"max_concurrency": mc, "request_rate": rate, "num_prompts": n, "waves": round(waves, 3),
                         "name": ", ".join(parts) or "no limit"})
    return plan


def option_name(names, option):
    """The name ``option`` has for the caller: ``names[option]`` (the sglang_benchmark role passes its variables'
    names, e.g. ``max_concurrency`` -> ``sglang_benchmark_concurrency``), else the option's own name."""
    return (names or {}).get(option) or option


def _whole(value, name, low):
    try:
        x = int(value)
        ok = not isinstance(value, bool) and float(value) == x and x >= low
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise PlanError("%s=%r: must be a whole number >= %d" % (name, value, low))
    return x


def check_lists(options, names=None):
    """Refuse a level option (:data:`LIST_OPTIONS`) whose value is not a list: PlanError naming it."""
    for option in LIST_OPTIONS:
        value = options.get(option)
        if value is not None and not isinstance(value, (list, tuple)):
            name = option_name(names, option)
            raise PlanError("%s=%r: must be a list of levels (a single number or a comma-separated string, as -e key=value "
                            "gives, is not one); give it as JSON, e.g. -e '{\"%s\": [1, 8]}'" % (name, value, name))


def plan_sweep(options, trace_requests=None, names=None):
    """The sweep of serving_benchmark's options (a dict; values as given in the task, defaults from
    :data:`PLAN_ARGUMENT_SPEC` where missing): :func:`plan_levels` over ``max_concurrency``, ``request_rate``,
    ``num_prompts``, ``prompts_per_concurrency``, ``extra_concurrency``, ``sort_levels`` and ``shared_prefix``; with
    ``phases`` (a moving load) the one level of :func:`moving_level` instead.

    ``trace_requests``: the number of requests of the replayed trace (None without one). ``names``: the caller's name of
    each option, for messages (:func:`option_name`). Raises PlanError naming the option (or the caller's variable), the
    value and the fix.
    """
    check_lists(options, names)

    def get(option):
        value = options.get(option)
        return PLAN_ARGUMENT_SPEC[option]["default"] if value is None else value

    num_prompts = _whole(get("num_prompts"), option_name(names, "num_prompts"), 1)
    per_slot = _whole(get("prompts_per_concurrency"), option_name(names, "prompts_per_concurrency"), 0)
    gsp = options.get("shared_prefix") or None
    if gsp:
        gsp = dict((k, _whole(gsp.get(k) or 1, "%s.%s" % (option_name(names, "shared_prefix"), k), 1))
                   for k in ("num_groups", "prompts_per_group"))
    try:
        sort_levels = boolean(get("sort_levels"))
    except TypeError as exc:
        raise PlanError("%s=%r: %s" % (option_name(names, "sort_levels"), options.get("sort_levels"), exc))
    if options.get("phases"):
        return [moving_level(options.get("phases"), num_prompts, per_slot, names)]
    return plan_levels(get("max_concurrency"), get("request_rate"), num_prompts, per_slot, get("extra_concurrency"),
                       variables=tuple(option_name(names, o) for o in LIST_OPTIONS), sort_unique=sort_levels,
                       trace_requests=trace_requests, shared_prefix=gsp)


def moving_level(phases, num_prompts, prompts_per_concurrency=0, names=None):
    """The one level of a moving load (option ``phases``, :mod:`.phases`): the phases replace the concurrency levels.

    Returns a level as :func:`plan_levels` gives them, plus ``phases`` (normalized): ``max_concurrency`` the highest
    phase's, ``request_rate`` None, ``num_prompts`` the prompt pool the closed loop cycles through (``num_prompts``, at
    least ``prompts_per_concurrency`` x the highest concurrency), ``waves`` the phases' total seconds (the ETA's unit),
    ``name`` ``moving load 1/8/32 (90 s)``. Raises PlanError naming the option (or the caller's variable).
    """
    try:
        checked = bench_phases.check_phases(phases, option_name(names, "phases"))
    except bench_phases.PhaseError as exc:
        raise PlanError(str(exc))
    top = max(p["concurrency"] for p in checked)
    total = sum(p["duration_s"] for p in checked)
    return {"max_concurrency": top, "request_rate": None, "num_prompts": max(int(num_prompts), int(prompts_per_concurrency or 0) * top),
            "waves": round(total, 3), "phases": checked,
            "name": "moving load %s (%g s)" % ("/".join(str(p["concurrency"]) for p in checked), total)}


def check_levels(levels, name="levels"):
    """Refuse planned levels (as :func:`plan_levels` returns them) that no plan gives: PlanError naming the level."""
    for i, lv in enumerate(levels):
        mc, rate, n = lv.get("max_concurrency"), lv.get("request_rate"), lv.get("num_prompts")
        if (mc is not None and mc < 1) or (rate is not None and not 0 < rate < math.inf) or n is None or n < 1:
            raise PlanError("%s[%d]=%r: a level needs num_prompts >= 1, max_concurrency >= 1 or null and request_rate > 0 "
                            "or null; give the levels plan_sweep returns" % (name, i, lv))
        if lv.get("phases"):
            try:
                bench_phases.check_phases(lv["phases"], "%s[%d].phases" % (name, i))
            except bench_phases.PhaseError as exc:
                raise PlanError(str(exc))


def eta_seconds(levels, done, seconds):
    """Seconds the levels after the first ``done`` of ``levels`` should take: the measured ``seconds`` (a list, one per
    level done) per wave done, times the waves left (a wave: num_prompts / concurrency, or the seconds at the rate)."""
    waves_done = sum(float(lv["waves"]) for lv in levels[:done])
    waves_left = sum(float(lv["waves"]) for lv in levels[done:])
    return waves_left * sum(seconds) / max(waves_done, 0.001)


def _num(value):
    return float(value) if value is not None else 0.0


def level_result(record, seconds):
    """What one level measured, in one line: ``16 ok / 0 failed; output 441.8 tok/s, 115.7 tok/s per request, TTFT p50/p99
    19/25 ms, TPOT p50/p99 8.64/9.25 ms, accept len 2.00 (builtin); 1.4 s;`` (goodput and warnings when there are).
    ``record``: the level's record (serving_benchmark RETURN ``records``), None when the level measured nothing;
    ``seconds``: the level's wall time."""
    rec = record or {}
    accept = rec.get("accept_length")
    warnings = rec.get("warnings") or []
    line = ("%s ok / %s failed; output %.1f tok/s, %.1f tok/s per request, TTFT p50/p99 %.0f/%.0f ms, TPOT p50/p99 %.2f/%.2f ms, "
            "accept len %s (%s)%s;" % (
                rec.get("completed", 0), rec.get("failed", "?"), _num(rec.get("output_throughput")),
                _num(rec.get("decode_tok_s_per_request")), _num(rec.get("median_ttft_ms")), _num(rec.get("p99_ttft_ms")),
                _num(rec.get("median_tpot_ms")), _num(rec.get("p99_tpot_ms")), "%.2f" % accept if accept is not None else "-",
                rec.get("dataset_name", "?"), " [%s]" % "; ".join(warnings) if warnings else ""))
    if rec.get("goodput") is not None:
        line += " goodput %.2f req/s (%.0f %% within the SLO);" % (rec["goodput"], 100 * _num(rec.get("goodput_fraction")))
    return line + " %.1f s;" % _num(seconds)


class SweepProgress(object):
    """The levels of one sweep as they are measured.

    ``levels``: the plan (:func:`plan_levels`); ``stop_on_failure``: skip the rest after a failed level; ``stop_name``:
    how the caller names that option in the line (the role: ``sglang_benchmark_stop_on_failure``). After each level,
    :meth:`add` takes the module's result for it and returns the line to show. ``records``, ``problems`` (``level N
    (name): message``), ``seconds`` (per level) and ``stopped`` hold the sweep so far.
    """

    def __init__(self, levels, stop_on_failure=True, stop_name="stop_on_failure"):
        self.levels = levels
        self.stop_on_failure = stop_on_failure
        self.stop_name = stop_name
        self.records = []
        self.problems = []
        self.seconds = []
        self.stopped = False

    def start_line(self, index):
        """``Benchmark level 2/4: concurrency 8, 32 requests``: shown before level ``index`` (0-based) starts."""
        lv = self.levels[index]
        return "Benchmark level %d/%d: %s, %d requests" % (index + 1, len(self.levels), lv["name"], lv["num_prompts"])

    def add(self, index, result):
        """Take the module's ``result`` of level ``index`` (0-based); return its line. A level failed when it missed a gate
        (failed requests count, through max_failed_fraction) or measured nothing (server down before the load, bad
        options)."""
        lv = self.levels[index]
        records = result.get("records") or []
        failed = bool(result.get("gate_failures")) or not records
        msg = result.get("msg") or "failed"
        self.records.extend(records)
        self.seconds.append(_num(result.get("duration_s")))
        if failed:
            self.problems.append("level %d (%s): %s" % (index + 1, lv["name"], msg))
            self.stopped = self.stop_on_failure
        left = len(self.levels) - index - 1
        if self.stopped:
            rest = "%d level(s) skipped (%s)" % (left, self.stop_name)
        else:
            rest = "%d level(s) left, ETA ~%.0f s" % (left, eta_seconds(self.levels, index + 1, self.seconds))
        line = "Result %s: %s %s" % (lv["name"], level_result(records[0] if records else None, result.get("duration_s")), rest)
        return line + ("; FAILED: %s" % msg if failed else "")
