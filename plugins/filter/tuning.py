# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin Jinja2 filters over ``plugins/module_utils/_tune/decision.py`` for the sglang_server and speculative_tuning roles.

* ``decision_text | llmops.sglang.spec_tuned_settings(current, path, host)`` -> the speculative settings of the
  tuning decision recorded on the host (the speculative_tuning role), refused when it was measured on another
  model, SGLang version, tensor-parallel size or GPU (``spec_decision.tuned_settings``).
* ``inputs | llmops.sglang.tuning_inputs`` -> ``{weights, levels}`` of a tuning run, every input checked first
  (:func:`tuning_inputs`).
* ``recorded_text | llmops.sglang.tuning_running(current)`` -> the speculative settings running now (:func:`tuning_running`).
* ``durations | llmops.sglang.tuning_eta(arms_left)`` -> the ETA text shown before each arm (:func:`tuning_eta`).
* ``setup | llmops.sglang.tuning_table_refusal`` -> why the table mode cannot make adaptive an arm here ("" when it can;
  ``_sglang/adaptive.table_mode_refusal``).

A refusal raises ``AnsibleFilterError`` whose message names the variable, the value, why, and the fix.
"""

from __future__ import annotations

import json
import re

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils._server.limits import SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT
from ansible_collections.llmops.sglang.plugins.module_utils._tune.decision import SpecDecisionError, tuned_settings
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.adaptive import table_mode_refusal
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.launch import SGLangArgsError, version_profile

#: The keys of an arm (and of the running configuration), without the ``sglang_server_`` prefix.
ARM_KEYS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
            "speculative_draft_model_path")

_INT = re.compile(r"^[0-9]+$")


def spec_tuned_settings(text, current, path="", host=""):
    """The recorded decision's sglang_server_speculative_* settings, checked against ``current`` (see tuned_settings)."""
    try:
        return tuned_settings(text, current or {}, path, host)
    except SpecDecisionError as exc:
        raise AnsibleFilterError("sglang_server: %s" % exc)


def _count(value):
    """``value`` as an int >= 1 when it is one (an int, or a string of digits), else None. Booleans are not counts."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 1 else None
    if isinstance(value, str) and _INT.match(value.strip()):
        return int(value) if int(value) >= 1 else None
    return None


def tuning_inputs(inputs):
    """Check the inputs of a tuning run (the speculative_tuning role, playbooks/mtp_ab.yml) and fix its weights and
    levels, before anything changes.

    :param inputs: dict with
        ``target_concurrency`` (int >= 1 or None), ``weights`` ({concurrency: weight > 0}, may be empty),
        ``sweep`` (list of int >= 1: sglang_benchmark_concurrency), ``request_rates`` (must be empty),
        ``trials`` (int >= 1, default 1), ``min_trials`` (int >= 2, default 2), ``objective`` (throughput | goodput |
        tpot, default throughput), ``slo_ttft_ms`` / ``slo_tpot_ms`` (ms or None; goodput needs one),
        ``max_running_requests`` (int or None), ``workload`` (non-empty, not ``auto``), and how errors name things:
        ``prefix`` (of the tuning variables, default ``speculative_tuning_``), ``target_name`` (default
        ``<prefix>target_concurrency``), ``weights_name`` (default ``<prefix>weights``; empty: no weights variable),
        ``check_server`` (default true; false skips the max_running_requests checks: the servers are not the
        inventory's), ``sweep_name`` (default ``The sweep``), ``arms`` (number of arms, default 0 = unknown),
        ``buckets`` (table mode: the adaptive table's batch-size buckets, ints >= 1, measured as levels; without weights
        and target they are weighted equally).
    :returns: ``{"weights": {"<concurrency>": float}, "levels": [int, ...]}``: the weights (one target = ``{target: 1.0}``)
        and the sorted, de-duplicated levels (the sweep plus every weighted level and bucket).
    :raises AnsibleFilterError: naming the variable, its value, why and the fix, for the first wrong input.
    """
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("tuning_inputs: expected a dict of the tuning inputs, got %r" % (inputs,))
    pre = inputs.get("prefix") or "speculative_tuning_"
    target_name = inputs.get("target_name") or pre + "target_concurrency"
    weights_name = inputs.get("weights_name", pre + "weights")
    weights = inputs.get("weights") or {}
    target = inputs.get("target_concurrency")
    if not isinstance(weights, dict):
        raise AnsibleFilterError("%s=%r: must be a mapping {concurrency: weight > 0}. Fix: e.g. -e '{\"%s\": "
                                 "{\"8\": 3, \"32\": 1}}'." % (weights_name, weights, weights_name))
    fixed = {}
    for key, value in weights.items():
        conc = _count(key)
        try:
            weight = float(value)
        except (TypeError, ValueError):
            weight = 0.0
        if conc is None or weight <= 0 or isinstance(value, bool):
            raise AnsibleFilterError("%s=%r: key %r / weight %r; keys are concurrency levels (integers >= 1) and weights "
                                     "numbers > 0. Fix: e.g. -e '{\"%s\": {\"8\": 3, \"32\": 1}}'."
                                     % (weights_name, weights, key, value, weights_name))
        fixed[str(conc)] = weight
    buckets = inputs.get("buckets") or []
    if not isinstance(buckets, list) or any(_count(c) is None or not isinstance(c, int) for c in buckets):
        raise AnsibleFilterError("%sbuckets=%r: must be a list of integers >= 1 (batch-size buckets of the adaptive table, each "
                                 "measured as that concurrency). Fix: e.g. -e '{\"%sbuckets\": [1, 8, 32, 64]}'." % (pre, buckets, pre))
    if not fixed and _count(target) is None and buckets:
        fixed = dict((str(b), 1.0) for b in buckets)
    if not fixed:
        conc = _count(target)
        if conc is None:
            alternative = (", or %s to {concurrency: weight > 0} (e.g. -e '{\"%s\": {\"8\": 3, \"32\": 1}}')"
                           % (weights_name, weights_name)) if weights_name else ""
            raise AnsibleFilterError("%s=%s: set it to the concurrency the service really runs at, an integer >= 1 (e.g. -e "
                                     "%s=32)%s; the decision is taken there."
                                     % (target_name, "undefined" if target in (None, "") else target, target_name, alternative))
        fixed = {str(conc): 1.0}
    sweep = inputs.get("sweep")
    if not isinstance(sweep, list) or any(_count(c) is None or not isinstance(c, int) for c in sweep):
        raise AnsibleFilterError("sglang_benchmark_concurrency=%s must be a list of integers >= 1, given as JSON "
                                 "(e.g. -e '{\"sglang_benchmark_concurrency\": [1, 8, 32]}'; the target concurrency and the "
                                 "weighted levels are added to it)." % (sweep,))
    rates = inputs.get("request_rates") or []
    if rates:
        raise AnsibleFilterError("sglang_benchmark_request_rates=%s must be empty: the decision is taken per concurrency. "
                                 "Fix: leave it unset for a tuning or A/B run." % (rates,))
    trials, min_trials = inputs.get("trials", 1), inputs.get("min_trials", 2)
    if _count(trials) is None:
        raise AnsibleFilterError("%strials=%r: must be an integer >= 1 (trials per arm)." % (pre, trials))
    if _count(min_trials) is None or int(min_trials) < 2:
        raise AnsibleFilterError("%smin_trials=%r: must be an integer >= 2 (an interval needs two trials)." % (pre, min_trials))
    objective = inputs.get("objective", "throughput")
    if objective not in ("throughput", "goodput", "tpot"):
        raise AnsibleFilterError("%sobjective=%r: must be throughput, goodput or tpot." % (pre, objective))
    if objective == "goodput" and inputs.get("slo_ttft_ms") in (None, "") and inputs.get("slo_tpot_ms") in (None, ""):
        raise AnsibleFilterError("%sobjective=goodput needs an SLO: goodput counts the requests that meet them. Fix: set "
                                 "sglang_benchmark_slo_ttft_ms and/or sglang_benchmark_slo_tpot_ms (ms), or another objective." % pre)
    levels = sorted(set(int(c) for c in sweep) | set(int(k) for k in fixed) | set(buckets))
    top = levels[-1]
    mrr = inputs.get("max_running_requests")
    sweep_name = inputs.get("sweep_name") or "The sweep"
    arms = "both arms" if inputs.get("arms") == 2 else "every arm"
    if inputs.get("check_server", True) is False:
        pass
    elif mrr in (None, ""):
        if top > SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT:
            raise AnsibleFilterError(
                "%s goes up to concurrency %d, but sglang_server_max_running_requests is unset: SGLang then caps a "
                "speculative-decoding server at %d running requests, so a speculative arm would queue requests that the arm "
                "without speculation decodes, and the top levels would measure the queue, not the draft. Fix: set "
                "sglang_server_max_running_requests to at least %d (it applies to %s), or lower the sweep to %d or less."
                % (sweep_name, top, SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT, top, arms, SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT))
    elif _count(mrr) is None or int(mrr) < top:
        raise AnsibleFilterError(
            "%s goes up to concurrency %d, but sglang_server_max_running_requests=%s: above that %s queue requests "
            "instead of decoding them, so the top levels would measure the queue, not the draft. Fix: raise "
            "sglang_server_max_running_requests to at least %d, or lower the sweep." % (sweep_name, top, mrr, arms, top))
    workload = inputs.get("workload")
    if workload in (None, "") or workload == "auto":
        raise AnsibleFilterError(
            "sglang_benchmark_workload=%r: a tuning or A/B run needs one workload for every arm, and auto would send random "
            "token ids to the arm without speculative decoding and the built-in prompts to the others. Fix: use builtin "
            "(the default here), a prompt file, directory or glob, or random-ids (its decision then carries a warning that "
            "synthetic prompts inflate speculative decoding)." % (workload,))
    return {"weights": fixed, "levels": levels}


def tuning_running(recorded_text, current):
    """The speculative settings running now, as an arm dict (keys :data:`ARM_KEYS`).

    :param recorded_text: the decision file's JSON text when the inventory serves a recorded decision
        (sglang_server_speculative_from_decision), else empty / None. Its ``server_vars`` win over ``current``.
    :param current: the inventory's ``{"sglang_server_speculative_<key>": value}``; a missing key is None.
    :returns: ``{key: value}`` for every key of :data:`ARM_KEYS`.
    :raises AnsibleFilterError: when ``recorded_text`` is not JSON (naming the fix: remove or rewrite the file).
    """
    recorded = {}
    if recorded_text:
        try:
            recorded = (json.loads(recorded_text) or {}).get("server_vars") or {}
        except (ValueError, AttributeError) as exc:
            raise AnsibleFilterError("speculative_tuning: the recorded decision is not a JSON object (%s). Fix: remove the "
                                     "decision file or run the tuning with sglang_server_speculative_from_decision=false." % exc)
    current = current or {}
    out = {}
    for key in ARM_KEYS:
        name = "sglang_server_" + key
        out[key] = recorded[name] if name in recorded else current.get(name)
    return out


def tuning_eta(durations, arms_left):
    """ETA text for ``arms_left`` arms: mean of ``durations`` (seconds of the arms finished in this run) x arms left,
    ``"~<s> s"``, or ``"unknown until the first arm finishes"`` when none finished yet."""
    durations = [float(d) for d in (durations or [])]
    if not durations:
        return "unknown until the first arm finishes"
    return "~%.0f s" % (sum(durations) / len(durations) * int(arms_left))


def tuning_table_refusal(setup):
    """Why ``speculative_tuning_mode: table`` cannot make adaptive an arm on this setup, or "" when it can.

    :param setup: dict ``version`` (sglang_server_version), ``algorithm`` (speculative_tuning_default_algorithm),
        ``arms`` (speculative_tuning_arms: each speculative arm is checked with its own algorithm and topk, the first
        reason wins), ``topk`` (None = 1), ``architecture`` (sglang_server_model_architecture), ``extra_args`` (sglang_server_extra_args).
    :returns: the reason (str) from ``_sglang/adaptive.table_mode_refusal``, or "".
    :raises AnsibleFilterError: an unparsable or unsupported sglang_server_version (the renderer's own message).
    """
    setup = setup or {}
    try:
        profile = version_profile(setup.get("version"))[0]
    except SGLangArgsError as exc:
        raise AnsibleFilterError("speculative_tuning: %s" % exc)
    arch, extra = setup.get("architecture"), setup.get("extra_args") or []
    for arm in setup.get("arms") or []:
        algorithm = arm.get("speculative_algorithm", arm.get("algorithm"))
        if algorithm in (None, "") or str(algorithm).lower() in ("off", "none", "null"):
            continue
        topk = arm.get("speculative_eagle_topk", arm.get("eagle_topk", arm.get("topk")))
        reason = table_mode_refusal(profile, algorithm, None if topk in (None, "") else int(topk), arch, extra)
        if reason:
            return reason
    return table_mode_refusal(profile, setup.get("algorithm"), setup.get("topk"), arch, extra) or ""


class FilterModule(object):
    """llmops.sglang filters over the speculative-tuning decision."""

    def filters(self):
        return {"spec_tuned_settings": spec_tuned_settings, "tuning_inputs": tuning_inputs, "tuning_running": tuning_running,
                "tuning_eta": tuning_eta, "tuning_table_refusal": tuning_table_refusal}
