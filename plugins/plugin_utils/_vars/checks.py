# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Preflight check of every role variable, before the first change (action ``llmops.sglang.preflight_check``).

Two sources, one pass:

1. the roles' own argument specs (the one place each variable is documented), through the table generated from every
   ``roles/*/meta/argument_specs.yml`` (:mod:`.role_specs`, ``scripts/role_variables.py``): its ``type`` (``int``,
   ``float``, ``bool``, ``str``, ``path``, ``list``, ``dict``, ``raw``) and ``choices``. Unlike Ansible's own
   argument-spec conversion, a string is never split into a list (``sglang_benchmark_concurrency: "1,8"`` is refused:
   ``-e concurrency=1,8`` is a string, and a level list must be written as a list);
2. :data:`RULES`, the table of what a type cannot say: ranges, formats and cross-checks (a TCP port, a fraction,
   a positive timeout, a driver branch at or above the CUDA floor of the image, NCCL-only keys).

A third check, :func:`unknown_variables`, refuses a name that starts with one of the collection's :data:`PREFIXES` (a
role's name and ``_``, from the roles directory, or a playbook prefix) but is no variable of it
(``sglang_server_speculative_num_step``: Ansible would ignore it silently), with the closest valid name (difflib) as the
fix. Known names: the roles' options, the playbook knobs (:data:`PLAYBOOK_VARIABLES`) and the facts roles publish for
each other (:data:`.published.PUBLISHED_FACTS`); a role's internal names are ``<role>__<name>`` by convention and never
checked.

Each problem is one string ``"<variable>=<value>: <reason>. Fix: <fix>"``; values of ``no_log`` options are
redacted. Pure Python (standard library and this collection's plugin utils only).
"""

from __future__ import annotations

import difflib
import json
import re

from ansible_collections.llmops.sglang.plugins.plugin_utils._host.policy import cuda_driver_branch_floor
from ansible_collections.llmops.sglang.plugins.plugin_utils._vars.published import PUBLISHED_FACTS
from ansible_collections.llmops.sglang.plugins.plugin_utils._vars.role_specs import ROLE_VARIABLES, ROLES
from ansible_collections.llmops.sglang.plugins.plugin_utils._watch import rules as watch_rules

_BOOL_TRUE = ("true", "yes", "on", "1", "y", "t")
_BOOL_FALSE = ("false", "no", "off", "0", "n", "f")
_CTRL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _shown(value):
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def coerce(kind, value):
    """Convert ``value`` to the argument_specs ``kind`` the way a user means it; raise ValueError with the reason.

    int: an int or a string of digits (a bool or a fraction is refused); float: a number or a numeric string;
    bool: a bool or yes/no/true/false/on/off/1/0; str/path: a scalar; list: a list (never a string); dict: a mapping.
    """
    if value is None or kind in (None, "raw"):
        return value
    if kind == "int":
        if isinstance(value, bool):
            raise ValueError("must be a whole number, not a boolean")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.match(r"^\s*[-+]?\d+\s*$", value):
            return int(value)
        raise ValueError("must be a whole number")
    if kind == "float":
        if isinstance(value, bool):
            raise ValueError("must be a number, not a boolean")
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return float(str(value).strip())
        except ValueError:
            raise ValueError("must be a number")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _BOOL_TRUE:
            return True
        if text in _BOOL_FALSE:
            return False
        raise ValueError("must be a boolean (true or false)")
    if kind in ("str", "path"):
        if isinstance(value, (list, tuple, dict)):
            raise ValueError("must be a single value, not a %s" % ("mapping" if isinstance(value, dict) else "list"))
        return str(value)
    if kind == "list":
        if not isinstance(value, (list, tuple)):
            raise ValueError("must be a list (a string is not split into one)")
        return list(value)
    if kind == "dict":
        if not isinstance(value, dict):
            raise ValueError("must be a mapping NAME: value")
        return value
    return value


# ---------------------------------------------------------------------------------------------
# The table of range/format rules. Each check takes (value already coerced to its type, context) and returns the
# reason it is wrong, or None. context: {"image_cuda_version": "13.0", ...}.

def _at_least(low):
    return lambda v, c: None if v is None or v >= low else "must be at least %s" % low


def _between(low, high, low_open=False, high_open=False):
    def check(v, c):
        if v is None:
            return None
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
        return None if ok else "must be in %s%s, %s%s" % ("(" if low_open else "[", low, high, ")" if high_open else "]")
    return check


def _port(v, c):
    return None if v is None or 1 <= v <= 65535 else "not a TCP port (1-65535)"


def _list_of_ints_at_least(low):
    def check(v, c):
        for item in v or []:
            if isinstance(item, bool) or not re.match(r"^\s*\d+\s*$", str(item)) or int(item) < low:
                return "every element must be a whole number >= %d (%s is not)" % (low, _shown(item))
        return None
    return check


def _list_of_positive_numbers(v, c):
    for item in v or []:
        try:
            ok = not isinstance(item, bool) and float(item) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            return "every element must be a number > 0 (%s is not)" % _shown(item)
    return None


def _branch(v, c):
    if v is None:
        return None
    if not re.match(r"^[0-9]{3}$", str(v)):
        return "must be a 3-digit driver branch such as \"580\""
    cuda = str(c.get("image_cuda_version") or "13.0")
    floor = cuda_driver_branch_floor(cuda)
    if floor and int(v) < floor:
        return "the image needs CUDA %s, whose driver floor is branch %d (a %s driver cannot run it)" % (cuda, floor, v)
    return None


def _nccl_env(v, c):
    for name, value in sorted((v or {}).items()):
        if not re.match(r"^NCCL_[A-Z0-9_]+$", str(name)):
            return "key %s is not an NCCL_* variable (the file holds NCCL settings only)" % name
        if name == "NCCL_P2P_DISABLE":
            return "NCCL_P2P_DISABLE belongs to the P2P policy (nccl_p2p), not to extra settings"
        if _CTRL_RE.search(str(value)):
            return "the value of %s contains a control character (the env file is line based)" % name
    return None


def _no_ctrl(v, c):
    return None if v is None or not _CTRL_RE.search(str(v)) else "contains a control character (newline, tab, ...)"


def _cuda_version(v, c):
    return None if v is None or re.match(r"^[0-9]+\.[0-9]+$", str(v)) else "must look like 13.0 (major.minor)"


def _watch_option(option):
    """The speculative_watch role's own check of one fleet option (_watch/rules.py ``options``): one rule for both."""
    def check(v, c):
        if v is None:
            return None
        try:
            watch_rules.options({option: v})
        except watch_rules.WatchError as exc:
            return str(exc).split(": ", 1)[-1].split(". Fix:")[0]
        return None
    return check


#: name -> (type, check, fix). The type is used when the variable has no argument_specs entry (or a raw one).
RULES = {
    # sglang_server (the launch flags themselves are checked by the renderer, _sglang/launch.py)
    "sglang_server_port": ("int", _port, "use a free TCP port such as 30000"),
    "sglang_server_router_port": ("int", _port, "use a free TCP port such as 30001"),
    "sglang_server_dist_init_port": ("int", _port, "use a free TCP port such as 20000"),
    "sglang_server_tp_size": ("int", _at_least(1), "set the tensor parallel size, e.g. 4 (GPUs per node x nodes)"),
    "sglang_server_nnodes": ("int", _at_least(1), "set 1 for a single node"),
    "sglang_server_mem_fraction_static": ("float", _between(0, 1, True, True), "use e.g. 0.85, or leave it unset"),
    "sglang_server_ready_timeout": ("int", _at_least(1), "give the seconds model loading may take, e.g. 1800"),
    "sglang_server_ready_delay": ("int", _at_least(1), "poll every few seconds, e.g. 5"),
    "sglang_server_ready_max_restarts": ("int", _at_least(0), "e.g. 2 (0: the first restart fails the readiness check)"),
    "sglang_server_journal_lines": ("int", _between(1, 10000), "e.g. 50"),
    "sglang_server_restart_sec": ("int", _at_least(0), "e.g. 10"),
    "sglang_server_timeout_start_sec": ("int", _at_least(1), "e.g. 3600 (it covers the image pull)"),
    "sglang_server_timeout_stop_sec": ("int", _at_least(1), "e.g. 120"),
    "sglang_server_model_path": ("str", _no_ctrl, "write the path on one line"),
    # preflight (tp, nnodes and mem_fraction_static default to the sglang_server_* values checked above)
    "preflight_image_cuda_version": ("str", _cuda_version, "set preflight_image_cuda_version to e.g. \"13.0\""),
    "preflight_model_params_billion": ("float", _at_least(0), "give the parameter count in billions, or 0 to skip the memory check"),
    "preflight_model_size_gib": ("float", _at_least(0), "give the weight size in GiB, or 0"),
    "preflight_draft_model_size_gib": ("float", _at_least(0), "give the draft model's weight size in GiB, or 0"),
    "preflight_model_bytes_per_param": ("float", _between(0, 8, True, False), "BF16 2, FP8 1, FP4 0.5"),
    "preflight_memory_overhead_factor": ("float", _at_least(1), "e.g. 1.1"),
    "preflight_disk_reserve_gib": ("float", _at_least(0), "e.g. 20"),
    # host roles
    "nvidia_driver_branch": ("str", _branch, "set nvidia_driver_branch: \"580\" (quoted) for CUDA 13 images"),
    "nvidia_driver_reboot_timeout": ("int", _at_least(60), "e.g. 1800 s"),
    "iommu_reboot_timeout": ("int", _at_least(60), "e.g. 1800 s"),
    "nccl_extra_env": ("dict", _nccl_env, "e.g. nccl_extra_env: {NCCL_IB_DISABLE: \"1\"}; use nccl_p2p for P2P"),
    # sglang_benchmark
    "sglang_benchmark_concurrency": ("list", _list_of_ints_at_least(1),
                                     "write a list: -e '{\"sglang_benchmark_concurrency\": [1, 8]}' (inventory: [1, 8])"),
    "sglang_benchmark_request_rates": ("list", _list_of_positive_numbers,
                                       "write a list of req/s > 0: -e '{\"sglang_benchmark_request_rates\": [2, 4.5]}', or [] for all at once"),
    "sglang_benchmark_num_prompts": ("int", _at_least(1), "e.g. 16 measured requests per level"),
    "sglang_benchmark_prompts_per_concurrency": ("int", _at_least(1), "e.g. 4"),
    "sglang_benchmark_warmup_requests": ("int", _at_least(0), "e.g. 1 (0: none)"),
    "sglang_benchmark_input_len": ("int", _at_least(1), "tokens per prompt, e.g. 1000"),
    "sglang_benchmark_output_len": ("int", _at_least(1), "tokens per answer, e.g. 1000"),
    "sglang_benchmark_range_ratio": ("float", _between(0, 1, True, False), "1.0 for fixed lengths, e.g. 0.5 for 50-100%"),
    "sglang_benchmark_timeout": ("float", _at_least(1), "seconds per request, e.g. 1800"),
    "sglang_benchmark_stall_timeout": ("float", _at_least(1), "seconds without a byte, e.g. 60"),
    "sglang_benchmark_abort_after_failures": ("int", _at_least(1), "e.g. 20"),
    "sglang_benchmark_max_failed_fraction": ("float", _between(0, 1), "a fraction 0..1, e.g. 0.0"),
    "sglang_benchmark_min_output_throughput": ("float", _between(0, float("inf"), True), "a gate in tok/s such as 500, or null for none"),
    "sglang_benchmark_max_p99_ttft_ms": ("float", _between(0, float("inf"), True), "a gate in ms such as 2000, or null for none"),
    "sglang_benchmark_max_p99_tpot_ms": ("float", _between(0, float("inf"), True), "a gate in ms such as 50, or null for none"),
    "sglang_benchmark_min_accept_length": ("float", _at_least(1), "a gate >= 1 such as 1.5, or null for none"),
    # sglang_benchmark: workloads, sampling, traffic shapes, SLOs, skip-if-unchanged, fleet report
    "sglang_benchmark_workload_max_prompts": ("int", _at_least(1), "rows of a prompt file to ship, e.g. 2000"),
    "sglang_benchmark_workload_max_skipped_fraction": ("float", _between(0, 1),
                                                       "a fraction 0..1 of a prompt file's rows that may be unusable, e.g. 0.5"),
    "sglang_benchmark_temperature": ("float", _at_least(0), "0 for greedy (bench_serving's default), e.g. 0.7 for sampling"),
    "sglang_benchmark_top_p": ("float", _between(0, 1, True), "a fraction in (0, 1], 1.0 for no nucleus cut-off"),
    "sglang_benchmark_burstiness": ("float", _between(0, float("inf"), True), "1.0 for Poisson arrivals, < 1 for bursts"),
    "sglang_benchmark_trace_time_scale": ("float", _between(0, float("inf"), True), "1.0 replays the trace at its own speed"),
    "sglang_benchmark_trace_block_size": ("int", _at_least(1), "tokens per hash_ids block, 512 for Mooncake traces"),
    "sglang_benchmark_trace_max_requests": ("int", _at_least(0), "0 replays the whole trace"),
    "sglang_benchmark_client_processes": ("int", _between(1, 64), "1, or up to the load generator's cores (at most 64)"),
    "sglang_benchmark_multi_turn_max_turns": ("int", _at_least(0), "user turns per conversation, e.g. 8 (0 = all)"),
    "sglang_benchmark_slo_ttft_ms": ("float", _between(0, float("inf"), True), "a TTFT SLO in ms such as 2000, or null"),
    "sglang_benchmark_slo_tpot_ms": ("float", _between(0, float("inf"), True), "a TPOT SLO in ms such as 50, or null"),
    "sglang_benchmark_min_goodput": ("float", _between(0, float("inf"), True), "a gate in req/s such as 2.5, or null for none"),
    "sglang_benchmark_min_goodput_fraction": ("float", _between(0, 1), "a fraction 0..1 such as 0.9, or null for none"),
    "sglang_benchmark_max_age": ("int", _at_least(0), "seconds, e.g. 86400 (0: an unchanged result never expires)"),
    "sglang_benchmark_fleet_threshold": ("float", _between(0, 1, False, True), "a fraction in [0, 1) such as 0.10"),
    # speculative_watch (the fleet options: the role's own check; the Prometheus directory is checked on its hosts)
    "speculative_watch_accept_length_margin": ("float", _watch_option("accept_length_margin"),
                                               watch_rules.OPTIONS["accept_length_margin"][2]),
    "speculative_watch_decode_margin": ("float", _watch_option("decode_margin"), watch_rules.OPTIONS["decode_margin"][2]),
    "speculative_watch_window": ("str", _watch_option("window"), watch_rules.OPTIONS["window"][2]),
    "speculative_watch_job": ("str", _watch_option("job"), watch_rules.OPTIONS["job"][2]),
    "speculative_watch_alert_for": ("dict", _watch_option("alert_for"), watch_rules.OPTIONS["alert_for"][2]),
    "speculative_watch_accept_length": ("float", _at_least(1), "an accept length >= 1 such as 1.9, or null for the verified one"),
}


def spec_options(argument_specs=None):
    """Merge the ``options`` of every entry point of one or more parsed ``meta/argument_specs.yml`` documents.

    :param argument_specs: a parsed document (``{"argument_specs": {...}}``) or a list of them; None (the default): the
        collection's own roles, from the generated :data:`.role_specs.ROLE_VARIABLES` (no file is read).
    :returns: dict variable -> option dict (``type``, ``choices``, ``no_log``, ``default``, ...).
    """
    if argument_specs is None:
        out = {}
        for role in ROLES:
            for name, option in ROLE_VARIABLES[role].items():
                out.setdefault(name, option)
        return out
    docs = argument_specs if isinstance(argument_specs, (list, tuple)) else [argument_specs]
    out = {}
    for doc in docs:
        for entry in ((doc or {}).get("argument_specs") or {}).values():
            for name, option in ((entry or {}).get("options") or {}).items():
                out.setdefault(name, option or {})
    return out


def checked_variables(argument_specs=None):
    """Names :func:`variable_problems` checks: every option of the argument specs and every :data:`RULES` name."""
    return set(spec_options(argument_specs)) | set(RULES)


def variable_problems(values, argument_specs=None, context=None):
    """Check variables against the roles' argument specs and :data:`RULES`.

    :param values: dict variable -> value (the variables set in the inventory, group/host vars or -e; names that are
        neither in a spec nor in RULES are ignored).
    :param argument_specs: parsed ``meta/argument_specs.yml`` documents (one or a list); None (the default): every role
        of the collection (:data:`.role_specs.ROLE_VARIABLES`).
    :param context: ``{"image_cuda_version": "13.0"}`` for cross-checks.
    :returns: list of ``"<variable>=<value>: <reason>. Fix: <fix>"`` strings, in variable order; [] when all pass.
    """
    options = spec_options(argument_specs)
    context = dict(context or {})
    problems = []
    for name in sorted(values or {}):
        if name not in options and name not in RULES:
            continue
        value = values[name]
        option = options.get(name, {})
        rule = RULES.get(name)
        kind = option.get("type") or "raw"
        if kind == "raw" and rule:
            kind = rule[0]
        shown = "<redacted>" if option.get("no_log") else _shown(value)
        fix = rule[2] if rule else "see the %s entry in the role's meta/argument_specs.yml" % name
        try:
            coerced = coerce(kind, value)
        except ValueError as exc:
            problems.append("%s=%s: %s. Fix: %s" % (name, shown, exc, fix))
            continue
        choices = option.get("choices")
        if choices and coerced is not None and str(coerced) not in [str(c) for c in choices]:
            listed = ", ".join(str(c) for c in choices)
            problems.append("%s=%s: not one of %s. Fix: use one of %s" % (name, shown, listed, listed))
            continue
        if rule:
            reason = rule[1](coerced, context)
            if reason:
                problems.append("%s=%s: %s. Fix: %s" % (name, shown, reason, fix))
    return problems


#: Prefixes of this collection's variables: each role's name and ``_`` (the roles directory, through the generated
#: :data:`.role_specs.ROLES`, so a new role is checked once the table is regenerated) and the playbook prefixes of
#: :data:`PLAYBOOK_PREFIXES`. A name with one of them that is not known is refused as a misspelling. Shorter shared
#: prefixes (``sglang_target_concurrency``, ``llmops_target``) are not checked: they belong to no role. Longest first,
#: so a role whose name starts with another's is matched by its own prefix.
PLAYBOOK_PREFIXES = ("spec_tune_",)
PREFIXES = tuple(sorted(set(role + "_" for role in ROLES) | set(PLAYBOOK_PREFIXES), key=lambda p: (-len(p), p)))

#: Playbook-level variables with a role prefix that are no role option (documented in the playbook headers and docs/:
#: serve.yml, mtp_ab.yml, spec_tune.yml, spec_tune_fleet.yml, spec_watch.yml).
PLAYBOOK_VARIABLES = frozenset((
    "sglang_server_advertise_host", "sglang_server_dist_init_host", "sglang_server_rollout_serial",
    "sglang_server_rollout_max_fail_percentage",
    "sglang_benchmark_ab_report_only", "sglang_benchmark_ab_min_gain", "sglang_benchmark_ab_manage_server",
    "sglang_benchmark_ab_off_url", "sglang_benchmark_ab_on_url", "sglang_benchmark_ab_run_id",
    "spec_tune_target_concurrency", "spec_tune_weights", "spec_tune_arms", "spec_tune_default_algorithm",
    "spec_tune_objective", "spec_tune_trials", "spec_tune_min_trials", "spec_tune_min_gain", "spec_tune_run_id",
    "spec_tune_fresh", "spec_tune_report_only", "spec_tune_decision_path", "spec_tune_plots", "spec_tune_canary",
    "speculative_watch_source", "speculative_watch_duration", "speculative_watch_log_since", "speculative_watch_report_dir",
))


def known_variables(argument_specs=None):
    """Every name :func:`unknown_variables` accepts: argument_specs options, RULES, playbook variables and the facts the
    roles publish (:data:`.published.PUBLISHED_FACTS`). Internal ``<role>__*`` names are accepted by convention."""
    return checked_variables(argument_specs) | PLAYBOOK_VARIABLES | set(PUBLISHED_FACTS)


def collection_variable_problems(names, value_of, known_own=(), context=None):
    """Preflight's whole variable check: the values of the collection's variables set in scope, and misspelled names.

    :param names: every variable name in scope (the play's variables; names without a prefix of the collection are
        ignored).
    :param value_of: function name -> value, called only for names :func:`variable_problems` checks (it templates the
        value); never for an unknown name, whose value may be a secret under a name no redaction rule knows.
    :param known_own: the user's own names that share a prefix (``preflight_known_variables``).
    :param context: see :func:`variable_problems`.
    :returns: the problems of :func:`variable_problems` followed by those of :func:`unknown_variables`; [] when all pass.
    """
    prefixed = set(n for n in names if str(n).startswith(PREFIXES))
    checked = sorted(prefixed & checked_variables())
    problems = variable_problems(dict((n, value_of(n)) for n in checked), None, context)
    return problems + unknown_variables(sorted(prefixed - set(known_own or ())))


def unknown_variables(values, argument_specs=None, prefixes=None):
    """Refuse variables named like the collection's (one of ``prefixes``) that are none of its variables.

    :param values: the names set in scope (a list, or a dict whose values are ignored); names without a prefix, and
        internal ``<role>__*`` names, are ignored.
    :param argument_specs: parsed ``meta/argument_specs.yml`` documents (one or a list); None: every role of the collection.
    :param prefixes: the prefixes checked; None: :data:`PREFIXES`.
    :returns: ``"<variable>: not a variable of this collection ... Fix: did you mean <closest>? ..."`` strings, sorted
        by name; [] when every name is known. The value is never read or shown: a misspelled name may hold a secret
        under a name no redaction rule knows (``sglang_server_bearer``), and reading it would template it.
    """
    options = spec_options(argument_specs)
    known = known_variables(argument_specs)
    prefixes = PREFIXES if prefixes is None else tuple(prefixes)
    # Suggest only what a user sets: options, RULES and playbook variables, not registered results.
    offered = sorted(set(options) | set(RULES) | PLAYBOOK_VARIABLES)
    problems = []
    for name in sorted(set(values or [])):
        prefix = next((p for p in prefixes if name.startswith(p)), None)
        if prefix is None or name in known or name[len(prefix):].startswith("_"):
            continue
        same_prefix = [n for n in offered if n.startswith(prefix)]
        close = difflib.get_close_matches(name, same_prefix, n=3, cutoff=0.6) or difflib.get_close_matches(name, offered, n=3, cutoff=0.6)
        # The best match, and the runners-up that are nearly as close (nccl_p2p_polcy: nccl_p2p_force or nccl_p2p).
        ratios = [difflib.SequenceMatcher(None, name, c).ratio() for c in close]
        close = [c for c, r in zip(close, ratios) if r >= ratios[0] - 0.1]
        if close:
            fix = "did you mean %s%s? Rename it (see its entry in the role's meta/argument_specs.yml or docs/)" % (
                close[0], " (or %s)" % ", ".join(close[1:]) if close[1:] else "")
        else:
            fix = "remove it, or use a documented %s* variable (ansible-doc -t role llmops.sglang.<role>)" % prefix
        problems.append("%s: not a variable of this collection (a misspelled name is ignored silently, so its value would "
                        "never be used). Fix: %s" % (name, fix))
    return problems
