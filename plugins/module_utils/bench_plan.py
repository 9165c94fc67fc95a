# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""THE sweep plan of a serving benchmark (pure Python, no I/O): used by the serving_benchmark module and,
through the ``llmops.sglang.sweep_plan`` filter, by the sglang_benchmark role (one module call per level).

A sweep is every concurrency level crossed with every request-rate level (in the given order). A replayed
trace fixes each level's requests (every trace line, once) and their arrivals, so it has no rate levels; a
shared-prefix workload fixes the number of requests (groups x prompts per group). The role sorts
the concurrency levels and drops duplicates (mtp_ab.yml's target concurrency joins them); the module runs the
levels as given, so a repeated level is measured again. Each level measures ``max(num_prompts, prompts_per_concurrency x max_concurrency)``
requests, so high concurrency levels still see several waves of requests.
"""

from __future__ import annotations

import math


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
                variables=("max_concurrency", "request_rate"), sort_unique=False, trace_requests=None, shared_prefix=None):
    """The levels of a sweep, in the order they run.

    Args:
      max_concurrency (list of int): concurrency levels; empty = no concurrency limit (one level).
      request_rate (list of float): request-rate levels in req/s; empty = all requests at once.
      num_prompts (int): requests per level at least.
      prompts_per_concurrency (int): with a concurrency level, at least this many requests per concurrent slot.
      extra_concurrency (list of int): levels that join the concurrency levels (mtp_ab.yml's target concurrency).
      variables (tuple of 2 str): the names of the two level lists in messages (the role's variable names).
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
    concs = _levels(max_concurrency, variables[0], "concurrency") + _levels(extra_concurrency, variables[0], "concurrency")
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
