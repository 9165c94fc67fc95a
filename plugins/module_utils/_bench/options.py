# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""THE options of llmops.sglang.serving_benchmark: the argument spec and the checks of the values, shared by the module
(on the load generator) and its action plugin (on the controller, which refuses bad input before the first level).

Every message names the option, or the caller's name for it (option ``variable_names``: the sglang_benchmark role's
variables), the value, why and the fix. The level lists are checked where the sweep is planned (``plan.py``).
"""

from __future__ import annotations

import math
import os

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads
from ansible_collections.llmops.sglang.plugins.module_utils._bench.plan import PLAN_ARGUMENT_SPEC, option_name
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import normalize_slo
from ansible_collections.llmops.sglang.plugins.module_utils._report.benchmark import gate_option_spec
from ansible_collections.llmops.sglang.plugins.module_utils._report.files import run_id_problem
from ansible_collections.llmops.sglang.plugins.module_utils._server.client import http_argument_spec


def argument_spec():
    """The module's argument spec (a new dict each call: AnsibleModule may change what it is given)."""
    spec = http_argument_spec()
    spec.update(
        backend=dict(type="str", default="sglang", choices=["sglang", "openai", "openai-chat"]),
        model=dict(type="str", default=""),
        workload=dict(type="str", default="random-ids"),
        workload_categories=dict(type="list", elements="str", default=[]),
        workload_max_prompts=dict(type="int", default=2000),
        workload_max_skipped_fraction=dict(type="float", default=workloads.MAX_SKIPPED_FRACTION),
        prompts=dict(type="list", elements="dict"),
        temperature=dict(type="float", default=0.0),
        top_p=dict(type="float", default=1.0),
        input_len=dict(type="int", default=1000),
        output_len=dict(type="int", default=1000),
        range_ratio=dict(type="float", default=1.0),
        burstiness=dict(type="float", default=1.0),
        trace=dict(type="str"),
        trace_time_scale=dict(type="float", default=1.0),
        trace_block_size=dict(type="int", default=512),
        trace_max_requests=dict(type="int", default=0),
        shared_prefix=dict(type="dict", options=dict(
            num_groups=dict(type="int", required=True),
            prompts_per_group=dict(type="int", required=True),
            system_prompt_len=dict(type="int", required=True),
            question_len=dict(type="int", required=True),
        )),
        slo=dict(type="dict", default={}, options=dict(
            ttft_ms=dict(type="float"),
            tpot_ms=dict(type="float"),
            e2e_latency_ms=dict(type="float"),
        )),
        client_processes=dict(type="int", default=1),
        multi_turn=dict(type="bool", default=False),
        multi_turn_max_turns=dict(type="int", default=8),
        warmup_requests=dict(type="int", default=1),
        seed=dict(type="int", default=1),
        timeout=dict(type="float", default=1800),
        stall_timeout=dict(type="float", default=60),
        abort_after_failures=dict(type="int", default=20),
        server_info=dict(type="bool", default=True),
        gates=dict(type="dict", default={}, options=gate_option_spec()),
        tag=dict(type="str", default=""),
        label=dict(type="str", default=""),
        run_id=dict(type="str", default=""),
        level_offset=dict(type="int", default=0),
        output_file=dict(type="path"),
        output_details=dict(type="bool", default=False),
        raw_records=dict(type="path"),
        stop_on_failure=dict(type="bool", default=False),
        variable_names=dict(type="dict", default={}),
    )
    spec.update(PLAN_ARGUMENT_SPEC)
    return spec


def validate(params):
    """Messages for bad options in ``params`` (the module's params, types already converted): each names the option, or
    the caller's variable of ``variable_names``, the value, why and the fix."""
    errs = []

    def n(option):
        return option_name(params.get("variable_names"), option)

    for name in ("input_len", "output_len"):
        if params[name] < 1:
            errs.append("%s=%r: must be >= 1 token; set a positive integer" % (n(name), params[name]))
    if not 0.0 <= params["range_ratio"] <= 1.0:
        errs.append("%s=%r: must be within [0, 1]; use 1.0 for fixed lengths" % (n("range_ratio"), params["range_ratio"]))
    for name in ("warmup_requests", "abort_after_failures", "level_offset", "workload_max_prompts"):
        if params[name] < 0:
            errs.append("%s=%r: must be >= 0; use 0 to turn it off" % (n(name), params[name]))
    msf = params.get("workload_max_skipped_fraction")
    if msf is None or math.isnan(msf) or not 0.0 <= msf <= 1.0:
        errs.append("%s=%r: must be within [0, 1] (the share of a file's rows that may be skipped as unusable before the "
                    "file is refused); e.g. 0.5" % (n("workload_max_skipped_fraction"), msf))
    if params["seed"] < 0:
        errs.append("%s=%r: must be >= 0; Python seeds -N and N alike, so a negative seed repeats the prompts of "
                    "another level (radix-cache hits); use e.g. %d" % (n("seed"), params["seed"], abs(params["seed"])))
    for name in ("timeout", "stall_timeout"):
        if params[name] < 0:
            errs.append("%s=%r: must be >= 0 s (0 = no limit)" % (n(name), params[name]))
    gates = params["gates"] or {}
    ff = gates.get("max_failed_fraction")
    if ff is not None and not 0.0 <= ff <= 1.0:
        errs.append("%s=%r: must be within [0, 1] (a fraction of the level's requests); "
                    "e.g. 0.05 tolerates 5 %% failed requests" % (n("gates.max_failed_fraction"), ff))
    gf = gates.get("min_goodput_fraction")
    if gf is not None and not 0.0 <= gf <= 1.0:
        errs.append("%s=%r: must be within [0, 1] (a fraction of the level's requests)" % (n("gates.min_goodput_fraction"), gf))
    # The report directory is reports/<host>/<run_id>/: the report writer's own rule, checked before the first request
    # (a refusal after the sweep would lose the measurement).
    if params.get("run_id"):
        problem = run_id_problem(n("run_id"), params["run_id"])
        if problem:
            errs.append("%s; name the run like nextn-20261202 (or leave it empty: the role then uses a UTC timestamp)" % problem)
    errs.extend(validate_traffic(params, n))
    return errs


def check(args):
    """The arguments of a serving_benchmark task as the module will see them, and every message against them.

    ``args``: the task's arguments (dict, values as given). Returns ``(params, errors)``: ``params`` the arguments with
    types converted and defaults filled by :func:`argument_spec`, ``errors`` the argument spec's messages followed by
    :func:`validate`'s (a list of str; [] when all pass). Used by the action plugin before the first level and by
    preflight (``plugin_utils/_vars/benchmark.py``) before any change, so both refuse the same values with the same words.
    """
    checked = ArgumentSpecValidator(argument_spec()).validate(args)
    errors = [str(e) for e in checked.error_messages]
    if not errors:
        errors = validate(checked.validated_parameters)
    return checked.validated_parameters, errors


def workload_problem(spec, basedir):
    """Why the files of a file workload cannot be read on the controller, or None (named workloads and files that can).

    ``spec``: the workload as given (a file, a directory, a glob; :data:`.workloads.NAMED_WORKLOADS` are not files);
    ``basedir``: the playbook's directory (a relative spec that does not exist from the current directory is taken from
    there). The files are found as the benchmark finds them (:func:`.workloads.locate`, :func:`.workloads.resolve_files`)
    and each is opened: a path that does not exist, a glob that matches nothing, a directory without .json/.jsonl files, a
    file of another format, an unreadable or an empty file. The rows themselves are read when the benchmark starts.
    Returns the reason (str) naming the file.
    """
    if spec in (None, "") or spec in workloads.NAMED_WORKLOADS:
        return None
    try:
        files = workloads.resolve_files(workloads.locate(str(spec), basedir))
    except workloads.WorkloadError as exc:
        return str(exc)
    for path in files:
        ext = os.path.splitext(path)[1].lower()
        if ext not in workloads.FILE_EXTENSIONS:
            return "workload %s: unknown format %r (a workload file is .json or .jsonl)" % (path, ext or "(no extension)")
        try:
            with open(path, "rb") as fh:
                first = fh.read(1)
        except (IOError, OSError) as exc:
            return "workload %s: cannot read it on the controller (%s)" % (path, exc)
        if not first:
            return "workload %s: the file is empty" % path
    return None


# Preflight reads a file workload's rows when its files hold at most this many bytes in all (the ShareGPT V3 file, 650
# MB, is left to the benchmark's start: its load is measured in seconds, preflight must stay quick).
PREFLIGHT_READ_BYTES = 16 * 1024 * 1024


def workload_rows_problem(spec, basedir, categories=None, max_skipped_fraction=workloads.MAX_SKIPPED_FRACTION,
                          limit_name="workload_max_skipped_fraction"):
    """Why the rows of a workload would be refused when the benchmark starts, or None; preflight's second look, after
    :func:`workload_problem` found the files readable.

    ``spec``, ``basedir``: as :func:`workload_problem`. ``categories``: the category filter (list of str or None);
    ``max_skipped_fraction``: the refusal limit of the skipped share (0..1), named ``limit_name`` in the message (the
    caller's variable). Checks, with the benchmark's own code:

    * ``random-ids`` with a category filter (random token ids carry no category);
    * ``builtin``, ``builtin-long`` and ``auto`` (which may send ``builtin``): every category of the filter is one of
      the built-in set's (``builtin_prompts.CATEGORIES``);
    * files of at most :data:`PREFLIGHT_READ_BYTES` in all: read whole with :func:`.workloads.load_workload_counted`, so
      a file with no usable row, a skipped share above the limit, or a filter that matches no row is refused here.
      Larger files are read when the benchmark starts (before its first request).

    Returns the benchmark's message (str) naming the file, the lines and the fix, or None.
    """
    cats = [str(c) for c in (categories or [])]
    if spec == workloads.RANDOM_IDS:
        if cats:
            return ("workload_categories=%s applies to prompt workloads, not random-ids (random token ids carry no "
                    "category); use builtin or a file, or drop the filter" % cats)
        return None
    if spec in (None, "", workloads.AUTO, workloads.BUILTIN, workloads.BUILTIN_LONG):
        unknown = sorted(set(cats) - set(workloads.CATEGORIES))
        if unknown:
            return ("workload_categories names %s, which the built-in set does not have (its categories are %s)"
                    % (unknown, ", ".join(workloads.CATEGORIES)))
        return None
    located = workloads.locate(str(spec), basedir)
    try:
        if sum(os.path.getsize(f) for f in workloads.resolve_files(located)) > PREFLIGHT_READ_BYTES:
            return None
        workloads.load_workload_counted(located, cats or None, 0, 1, max_skipped_fraction, limit_name=limit_name)
    except (workloads.WorkloadError, OSError) as exc:
        return str(exc)
    return None


def validate_traffic(params, n):
    """Messages for bad arrival, trace, shared-prefix, SLO and client-process options; ``n`` names an option."""
    errs = []
    b = params.get("burstiness", 1.0)
    if b is None or math.isnan(b) or b <= 0 or math.isinf(b):
        errs.append("%s=%r: must be a number > 0 (1.0 = Poisson, < 1 burstier, > 1 more regular)" % (n("burstiness"), b))
    elif b != 1.0 and not params["request_rate"] and not params.get("trace"):
        errs.append("%s=%r: shapes the gaps between arrivals at a request rate, but %s is empty (all at once); set %s levels, "
                    "or leave %s at 1.0" % (n("burstiness"), b, n("request_rate"), n("request_rate"), n("burstiness")))
    if params.get("trace"):
        if params["request_rate"]:
            errs.append("%s=%r: a trace replay sends each request at its trace timestamp (%s is set); leave %s empty (use %s "
                        "to replay faster or slower)"
                        % (n("request_rate"), params["request_rate"], n("trace"), n("request_rate"), n("trace_time_scale")))
        if params.get("shared_prefix"):
            errs.append("%s and %s are two workloads (the trace's hash_ids give the shared prefixes); set one of them"
                        % (n("shared_prefix"), n("trace")))
        ts = params.get("trace_time_scale")
        if ts is None or math.isnan(ts) or ts <= 0 or math.isinf(ts):
            errs.append("%s=%r: must be a number > 0 (1.0 = as recorded, 2.0 = half speed)" % (n("trace_time_scale"), ts))
        if (params.get("trace_max_requests") or 0) < 0:
            errs.append("%s=%r: must be >= 0 (0 = every line of the trace)" % (n("trace_max_requests"), params["trace_max_requests"]))
        if params.get("trace_block_size") is None or params["trace_block_size"] < 1:
            errs.append("%s=%r: must be >= 1 token per hash_ids block (Mooncake traces use 512)"
                        % (n("trace_block_size"), params.get("trace_block_size")))
    gsp = params.get("shared_prefix")
    if gsp:
        for k in ("num_groups", "prompts_per_group", "system_prompt_len", "question_len"):
            if gsp.get(k) is None or gsp[k] < 1:
                errs.append("%s.%s=%r: must be an integer >= 1" % (n("shared_prefix"), k, gsp.get(k)))
    try:
        normalize_slo(params.get("slo"))
    except ValueError as exc:
        errs.append("%s: %s" % (n("slo"), exc))
    cp = params.get("client_processes", 1)
    if cp is None or cp < 1 or cp > 64:
        errs.append("%s=%r: must be within [1, 64] (1 = one asyncio process)" % (n("client_processes"), cp))
    if params.get("multi_turn"):
        if params.get("workload") in workloads.NAMED_WORKLOADS and not params.get("prompts"):
            errs.append("%s=true replays the conversations of a prompt file, but %s=%s has none (random-ids, builtin and "
                        "auto are single prompts); set %s to a ShareGPT, messages or question file, or set %s=false"
                        % (n("multi_turn"), n("workload"), params.get("workload"), n("workload"), n("multi_turn")))
        if params.get("trace") or params.get("shared_prefix"):
            errs.append("%s=true and %s are two workloads; set one of them"
                        % (n("multi_turn"), n("trace") if params.get("trace") else n("shared_prefix")))
    if params.get("phases"):
        # the phases themselves are checked where they are planned (plan.moving_level); here what they exclude
        for other, why in (("request_rate", params.get("request_rate")), ("trace", params.get("trace")),
                           ("shared_prefix", params.get("shared_prefix")), ("multi_turn", params.get("multi_turn"))):
            if why:
                errs.append("%s and %s: a moving load is a closed loop of single prompts per phase (each phase's concurrency "
                            "sets the load); leave %s unset, or %s empty" % (n("phases"), n(other), n(other), n("phases")))
        if (params.get("client_processes") or 1) > 1:
            errs.append("%s=%r: a moving load runs in one client process; set %s to 1" % (
                n("client_processes"), params.get("client_processes"), n("client_processes")))
    mt = params.get("multi_turn_max_turns", 0)
    if mt is None or mt < 0:
        errs.append("%s=%r: must be >= 0 (0 = every turn of each conversation)" % (n("multi_turn_max_turns"), mt))
    if params.get("output_details") and not params.get("output_file"):
        errs.append("output_details=true writes the per-request lists into output_file, which is not set; set output_file")
    return errs
