# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The sglang_benchmark role's inputs, checked in preflight with the benchmark's own checks (issue #23).

The benchmark stage runs last: on a first deploy the server has been changed long before it starts, and a run id the
report writer refuses would only be refused after the whole sweep. So preflight (action ``llmops.sglang.preflight_check``)
and the role's first task check the role's variables here, through the same code the benchmark runs, never a copy:

- the options of ``llmops.sglang.serving_benchmark`` as the role passes them (:func:`module_args` mirrors
  ``roles/sglang_benchmark/tasks/sweep.yml``), through the module's argument spec and checks (``_bench/options.py``
  :func:`check`: ranges, cross-checks such as burstiness without request rates, a trace with request rates, the run id by
  the report writer's rule ``_report/files.py`` :func:`run_id_problem`) and the sweep plan (``_bench/plan.py``);
- the label, which the role puts into the run id (``<label>-<UTC time>``) and the state file's name, by the same rule;
- the workload's files on the controller, found as the benchmark finds them (``_bench/workloads.py`` ``locate`` and
  ``resolve_files``) and opened (:func:`options.workload_problem`), then their rows read with the benchmark's loader when
  they are small enough (``options.PREFLIGHT_READ_BYTES``, 16 MiB): no usable row, a skipped share above the limit, a
  category filter that matches nothing (:func:`options.workload_rows_problem`);
- the trace file, found where the role's ``lookup('file')`` finds it, and parsed (``_bench/traces.py``).

Every problem is one string naming the variable, the value, why and the fix; all are returned together.
"""

from __future__ import annotations

import json

from ansible_collections.llmops.sglang.plugins.module_utils._bench import options, plan, traces, workloads
from ansible_collections.llmops.sglang.plugins.module_utils._report.files import run_id_problem
from ansible_collections.llmops.sglang.plugins.plugin_utils._vars.role_specs import ROLE_VARIABLES

ROLE = "sglang_benchmark"

#: serving_benchmark option -> the role's variable, as ``roles/sglang_benchmark/tasks/sweep.yml`` passes them (a unit
#: test holds the two together). ``gates`` and ``slo`` are dicts of variables; ``trace`` is the trace file's content.
OPTION_VARIABLES = {
    "url": "sglang_benchmark_url", "backend": "sglang_benchmark_backend", "model": "sglang_benchmark_model",
    "api_key": "sglang_benchmark_api_key", "validate_certs": "sglang_benchmark_validate_certs",
    "workload": "sglang_benchmark_workload", "workload_categories": "sglang_benchmark_workload_categories",
    "workload_max_prompts": "sglang_benchmark_workload_max_prompts",
    "workload_max_skipped_fraction": "sglang_benchmark_workload_max_skipped_fraction", "temperature": "sglang_benchmark_temperature",
    "top_p": "sglang_benchmark_top_p", "input_len": "sglang_benchmark_input_len", "output_len": "sglang_benchmark_output_len",
    "range_ratio": "sglang_benchmark_range_ratio", "max_concurrency": "sglang_benchmark_concurrency",
    "request_rate": "sglang_benchmark_request_rates", "num_prompts": "sglang_benchmark_num_prompts",
    "prompts_per_concurrency": "sglang_benchmark_prompts_per_concurrency", "burstiness": "sglang_benchmark_burstiness",
    "trace": "sglang_benchmark_trace_file", "trace_time_scale": "sglang_benchmark_trace_time_scale",
    "trace_block_size": "sglang_benchmark_trace_block_size", "trace_max_requests": "sglang_benchmark_trace_max_requests",
    "shared_prefix": "sglang_benchmark_shared_prefix", "phases": "sglang_benchmark_phases", "client_processes": "sglang_benchmark_client_processes",
    "multi_turn": "sglang_benchmark_multi_turn", "multi_turn_max_turns": "sglang_benchmark_multi_turn_max_turns",
    "warmup_requests": "sglang_benchmark_warmup_requests", "seed": "sglang_benchmark_seed",
    "timeout": "sglang_benchmark_timeout", "stall_timeout": "sglang_benchmark_stall_timeout",
    "abort_after_failures": "sglang_benchmark_abort_after_failures", "stop_on_failure": "sglang_benchmark_stop_on_failure",
    "tag": "sglang_benchmark_tag", "label": "sglang_benchmark_label", "run_id": "sglang_benchmark_run_id",
}
GATE_VARIABLES = {
    "min_output_throughput": "sglang_benchmark_min_output_throughput", "max_p99_ttft_ms": "sglang_benchmark_max_p99_ttft_ms",
    "max_p99_tpot_ms": "sglang_benchmark_max_p99_tpot_ms", "min_accept_length": "sglang_benchmark_min_accept_length",
    "max_failed_fraction": "sglang_benchmark_max_failed_fraction", "min_goodput": "sglang_benchmark_min_goodput",
    "min_goodput_fraction": "sglang_benchmark_min_goodput_fraction",
}
SLO_VARIABLES = {"ttft_ms": "sglang_benchmark_slo_ttft_ms", "tpot_ms": "sglang_benchmark_slo_tpot_ms"}

#: The variables :func:`benchmark_problems` reads (each role default fills an unset one).
VARIABLES = tuple(sorted(set(OPTION_VARIABLES.values()) | set(GATE_VARIABLES.values()) | set(SLO_VARIABLES.values())))


def variable_names():
    """serving_benchmark option -> the role's variable, for the module's messages (its option ``variable_names``): the
    table the role passes (``roles/sglang_benchmark/vars/main.yml``), with ``gates.*`` and ``slo``."""
    names = dict(OPTION_VARIABLES)
    names.update(("gates." + k, v) for k, v in GATE_VARIABLES.items())
    names["slo"] = "sglang_benchmark_slo_*"
    return names


def role_defaults():
    """The role's argument-spec defaults of :data:`VARIABLES` (values as written, Jinja not rendered)."""
    spec = ROLE_VARIABLES.get(ROLE, {})
    return dict((name, (spec.get(name) or {}).get("default")) for name in VARIABLES)


def module_args(values, trace_text=None):
    """The arguments the role's sweep task gives llmops.sglang.serving_benchmark, from the role's variables.

    :param values: variable -> value (every name of :data:`VARIABLES`; see :func:`role_defaults`).
    :param trace_text: the trace file's content (the role passes ``lookup('file', sglang_benchmark_trace_file)``), or
        None without a trace.
    :returns: dict of module arguments (without ``levels``; ``sort_levels`` true as the role sets it).
    """
    args = dict((option, values.get(variable)) for option, variable in OPTION_VARIABLES.items())
    args["trace"] = trace_text
    if not args["shared_prefix"]:
        args["shared_prefix"] = None
    args["gates"] = dict((gate, values.get(variable)) for gate, variable in GATE_VARIABLES.items())
    args["slo"] = dict((key, values.get(variable)) for key, variable in SLO_VARIABLES.items())
    args["sort_levels"] = True
    args["variable_names"] = variable_names()
    return dict((k, v) for k, v in args.items() if v is not None or k in ("trace", "shared_prefix"))


def _shown(value):
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def benchmark_problems(values, basedir=None, read_trace=None):
    """Every problem of the sglang_benchmark role's inputs, before anything is changed or sent.

    :param values: variable -> value for the names of :data:`VARIABLES` that are set; unset ones take the role's
        defaults (:func:`role_defaults`). Values already templated; a value the per-variable check (``checks.py``)
        refused should be left out, so it is reported once.
    :param basedir: the playbook's directory (a relative workload path is also looked for there, as the benchmark does).
    :param read_trace: function path -> the trace file's text, finding it where the role's ``lookup('file')`` does;
        raises IOError/OSError (or ValueError) when it cannot. None: the trace file is not read.
    :returns: list of str, each ``"<variable>=<value>: <why>; <fix>"`` (the benchmark's own messages, prefixed with the
        variable where they name an option); [] when all pass.
    """
    merged = role_defaults()
    merged.update(dict((k, v) for k, v in (values or {}).items() if k in merged))
    problems = []

    label = merged.get("sglang_benchmark_label") or ""
    if label:
        problem = run_id_problem("sglang_benchmark_label", str(label))
        if problem:
            problems.append("%s: the run id is <label>-<UTC time> and the state file <server>-<label>.json. Fix: a label "
                            "such as mtp_on" % problem)

    spec = merged.get("sglang_benchmark_workload")
    why = options.workload_problem(spec, basedir)
    if why:
        problems.append("sglang_benchmark_workload=%s: %s. Fix: name a prompt file (.json/.jsonl), a directory of them or a "
                        "glob on the controller (absolute, or relative to the playbook directory %s), or one of %s"
                        % (_shown(spec), why, basedir or "of the play", ", ".join(workloads.NAMED_WORKLOADS)))
    else:
        cats = merged.get("sglang_benchmark_workload_categories")
        limit = merged.get("sglang_benchmark_workload_max_skipped_fraction")
        try:
            limit = workloads.MAX_SKIPPED_FRACTION if limit is None else float(limit)
        except (TypeError, ValueError):
            limit = None    # options.check below names the variable
        why = options.workload_rows_problem(spec, basedir, cats if isinstance(cats, list) else None, limit,
                                            "sglang_benchmark_workload_max_skipped_fraction") if limit is not None else None
        if why:
            problems.append("sglang_benchmark_workload=%s: %s. Fix: point the benchmark at a file whose rows are usable "
                            "(see the skip reasons), raise sglang_benchmark_workload_max_skipped_fraction, or fix "
                            "sglang_benchmark_workload_categories" % (_shown(spec), why))

    trace_file = merged.get("sglang_benchmark_trace_file") or ""
    trace_text, trace_requests = None, None
    if trace_file and read_trace is not None:
        try:
            trace_text = read_trace(str(trace_file))
        except (IOError, OSError, ValueError) as exc:
            problems.append("sglang_benchmark_trace_file=%s: cannot read it on the controller (%s). Fix: give the path of a "
                            "Mooncake JSONL trace (absolute, or in the playbook directory or its files/), or \"\" for none"
                            % (_shown(trace_file), exc))
    args = module_args(merged, trace_text)
    try:
        # the levels as given first (the argument spec would convert 2.5 to an int with a message naming no variable)
        plan.plan_sweep(args, None, variable_names())
    except plan.PlanError as exc:
        return problems + [str(exc)]
    params, errors = options.check(args)
    problems.extend(errors)
    if errors:
        return problems
    if trace_text is not None:
        try:
            limit = max(int(params.get("trace_max_requests") or 0), 0)
            trace_requests = len(traces.parse_mooncake(trace_text, limit=limit))
        except (TypeError, ValueError) as exc:
            problems.append("sglang_benchmark_trace_file=%s: %s" % (_shown(trace_file), exc))
    try:
        plan.plan_sweep(params, trace_requests, variable_names())
    except plan.PlanError as exc:
        problems.append(str(exc))
    return problems
