# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin Jinja2 filter over ``plugins/module_utils/bench_plan.py`` (the one sweep plan).

* ``concurrency | llmops.sglang.sweep_plan(request_rates, num_prompts, prompts_per_concurrency, extra_concurrency,
  trace=..., trace_max_requests=..., shared_prefix=...)``
  -> ``[{max_concurrency, request_rate, num_prompts, waves, name}]``
* ``sglang_benchmark_workload | llmops.sglang.workload_digest(playbook_dir)`` -> ``"sha256:<hex>"`` or ``""``: what
  the workload sends, by content (``workloads.content_digest``), for the skip-if-unchanged fingerprint.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils.bench_plan import PlanError, plan_levels
from ansible_collections.llmops.sglang.plugins.module_utils.workloads import WorkloadError, content_digest


def sweep_plan(concurrency, request_rates=None, num_prompts=1, prompts_per_concurrency=0, extra_concurrency=None,
               trace=None, trace_max_requests=0, shared_prefix=None):
    """The sglang_benchmark sweep (bench_plan.plan_levels), messages naming the role's variables.

    ``trace``: the text of a trace to replay (its non-blank lines are its requests, at most
    ``trace_max_requests`` when > 0); ``shared_prefix``: ``{num_groups, prompts_per_group}``."""
    trace_requests = None
    if trace:
        trace_requests = len([line for line in str(trace).splitlines() if line.strip()])
        if int(trace_max_requests or 0) > 0:
            trace_requests = min(trace_requests, int(trace_max_requests))
    for name, value in (("sglang_benchmark_concurrency", concurrency), ("sglang_benchmark_request_rates", request_rates)):
        if value is not None and not isinstance(value, (list, tuple)):
            raise AnsibleFilterError("%s=%r: must be a list of levels, e.g. [1, 4, 16, 64] (JSON with -e)" % (name, value))
    try:
        return plan_levels(concurrency or [], request_rates or [], num_prompts, prompts_per_concurrency, extra_concurrency or [],
                           variables=("sglang_benchmark_concurrency", "sglang_benchmark_request_rates"), sort_unique=True,
                           trace_requests=trace_requests, shared_prefix=shared_prefix or None)
    except PlanError as exc:
        raise AnsibleFilterError(str(exc))


def workload_digest(spec, basedir=None):
    """Digest of the workload ``spec`` by content (``workloads.content_digest``; relative paths as the serving_benchmark
    action plugin reads them: from the current directory, else from ``basedir``). Raises AnsibleFilterError naming
    sglang_benchmark_workload when the files cannot be found or read."""
    try:
        return content_digest("" if spec is None else str(spec), basedir)
    except WorkloadError as exc:
        raise AnsibleFilterError("sglang_benchmark_workload=%r: %s (nothing was sent)" % (spec, exc))


class FilterModule(object):
    """llmops.sglang benchmark filters."""

    def filters(self):
        return {"sweep_plan": sweep_plan, "workload_digest": workload_digest}
