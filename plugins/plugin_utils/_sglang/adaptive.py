# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""SGLang's adaptive speculative decoding (``--speculative-adaptive``, ``--speculative-adaptive-config``), as the wheels
define it: which versions have it, when SGLang switches it off, and how it reads its table.

Read from the wheels (``pip download --no-deps sglang==X``), not from notes:

* the flags exist from 0.5.14 (``server_args.py`` in 0.5.14, ``arg_groups/fields/spec.py`` in 0.5.23); the versions
  come from the generated flag table (``generated_flags.py``, built by ``scripts/sglang_contract.py`` from the wheels),
  not from a list here;
* ``speculative/adaptive_spec_params.py`` ``adaptive_unsupported_reason`` (0.5.14, 0.5.23): the conditions under which
  ``arg_groups/speculative_hook.py`` ``_maybe_disable_adaptive`` logs ``speculative_adaptive disabled: <reason>.
  Falling back to static speculative params.`` and sets ``speculative_adaptive = False`` - the server starts, static;
* ``_load_adaptive_config``: how SGLang reads the table - the rules live in target code,
  ``plugins/module_utils/_tune/adaptive_config.py`` (the tuner module writes tables too), and are re-exported here
  (``validate_table``, ``TableError``, ``FIELD_DEFAULTS``, ``table_json``, ``candidate_union``, ``initial_steps``);
* ``_init_adaptive_speculative_params``: topk becomes 1 when unset, ``speculative_num_steps`` the middle of the sorted
  union of every bucket's candidates when unset (a given one outside it is a startup ``ValueError``), and
  ``speculative_num_draft_tokens`` always ``steps + 1``.

Pure Python (standard library only).
"""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.module_utils._tune.adaptive_config import (
    FIELD_DEFAULTS, TableError, candidate_union, initial_steps, table_json, validate_table)
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.generated_flags import FLAGS

#: The loader rules are re-exported from module_utils/_tune/adaptive_config (one place, shared with the tuner module).
__all__ = ["FLAG", "CONFIG_FLAG", "CONTAINER_CONFIG_PATH", "DEFAULT_TABLES", "DISABLED_PREFIX", "DISABLED_SUFFIX",
           "MULTI_LAYER_EAGLE_ARCHS", "FIELD_DEFAULTS", "TableError", "candidate_union", "initial_steps", "table_json",
           "validate_table", "versions_with_adaptive", "primary_flag", "extra_flags", "unsupported_reason", "table_mode_refusal"]

#: The flags, as the CLI spells them.
FLAG = "--speculative-adaptive"
CONFIG_FLAG = "--speculative-adaptive-config"

#: Where the managed table is mounted (read-only) inside the container; the role writes it on the host as
#: ``<sglang_server_config_dir>/<sglang_server_name>.adaptive.json`` (0644).
CONTAINER_CONFIG_PATH = "/etc/sglang-adaptive/speculative_adaptive.json"

#: SGLang's built-in table (``DEFAULT_ADAPTIVE_CONFIG``) per version: used when the table is left empty. Only the
#: bucket 1 candidates differ (0.5.14: 1, 3, 7; 0.5.23: 1, 3, 5, 7).
DEFAULT_TABLES = {
    "0.5.14": {"1": {"candidate_steps": [1, 3, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
               "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
               "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
               "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0}},
    "0.5.23": {"1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
               "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
               "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
               "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0}},
}

#: The log line SGLang writes when it switches adaptive off (``speculative_hook.py`` ``_maybe_disable_adaptive``).
DISABLED_PREFIX = "speculative_adaptive disabled: "
DISABLED_SUFFIX = ". Falling back to static speculative params."

#: Architectures for which SGLang turns on multi-layer EAGLE by itself when the algorithm is EAGLE
#: (0.5.14 ``server_args.py`` ``_handle_model_specific_adjustments``: ``MIMO_V2_MODEL_ARCHS`` and ``Step3p5ForCausalLM`` /
#: ``Step3p7ForConditionalGeneration``; 0.5.23 ``arg_groups/overrides.py``), which then disables adaptive.
MULTI_LAYER_EAGLE_ARCHS = ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM", "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration")


def versions_with_adaptive():
    """Tuple of the modelled SGLang versions whose parser has both flags (from the generated table of the wheels)."""
    a = FLAGS.get(FLAG, {}).get("versions", ())
    b = FLAGS.get(CONFIG_FLAG, {}).get("versions", ())
    return tuple(v for v in a if v in b)


def primary_flag(flag, profile):
    """The primary spelling of ``flag`` in SGLang ``profile`` (aliases such as ``--data-parallel-size`` resolved), or the
    flag itself."""
    row = FLAGS.get(flag)
    if not row:
        return flag
    primary = row.get("primary", flag)
    if isinstance(primary, dict):
        primary = primary.get(profile, flag)
    return primary


def extra_flags(extra_args, profile):
    """``{primary flag: value or True}`` of the flags in ``extra_args`` (``--x=v`` and ``--x v`` forms; a switch is True)."""
    found = {}
    items = list(extra_args or [])
    for i, item in enumerate(items):
        if not str(item).startswith("--"):
            continue
        name, sep, value = str(item).partition("=")
        info = FLAGS.get(name)
        takes = bool(info and (info.get("takes_value") if not isinstance(info.get("takes_value"), dict)
                               else info["takes_value"].get(profile)))
        if sep:
            found[primary_flag(name, profile)] = value
        elif takes and i + 1 < len(items) and not str(items[i + 1]).startswith("--"):
            found[primary_flag(name, profile)] = str(items[i + 1])
        else:
            found[primary_flag(name, profile)] = True
    return found


def _int_or(value, default):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def unsupported_reason(profile, algorithm, topk, architecture, extra_args):
    """SGLang's ``adaptive_unsupported_reason`` for a rendered configuration.

    :param profile: the version profile (``0.5.14``, ``0.5.23``). :param algorithm: the speculative algorithm as rendered
        (upper case or None; NEXTN counts as EAGLE, SGLang resolves the alias first). :param topk:
        ``speculative_eagle_topk`` or None. :param architecture: config.json ``architectures[0]`` or None.
    :param extra_args: ``sglang_server_extra_args``.
    :returns: None when adaptive runs, else ``(key, value, reason)``: the description key to change
        (``speculative_algorithm``, ``speculative_eagle_topk``, ``model_architecture`` or ``extra_args``), its offending
        value, and the reason text SGLang logs after ``speculative_adaptive disabled: ``.

    Conditions in SGLang's order: the algorithm, topk, attention DP (0.5.14: ``--enable-dp-attention``; 0.5.23:
    ``attn_dp_size > 1``, i.e. ``--attn-dp-size N`` or the deprecated ``--enable-dp-attention`` with ``--dp-size N``),
    multi-layer EAGLE (``--enable-multi-layer-eagle``, or EAGLE on an architecture SGLang turns it on for), two-batch
    overlap, PD-mux. Not modelled: 0.5.23's non-CUDA platform workers (this collection deploys CUDA images).
    """
    effective = "EAGLE" if algorithm == "NEXTN" else algorithm
    if effective not in ("EAGLE", "EAGLE3"):
        return "speculative_algorithm", algorithm, "speculative_algorithm=%s (only EAGLE/EAGLE3 are supported)" % effective
    if topk is not None and topk != 1:
        return "speculative_eagle_topk", topk, "speculative_eagle_topk=%s (only topk=1 is supported)" % topk
    flags = extra_flags(extra_args, profile)
    if profile == "0.5.14":
        if flags.get("--enable-dp-attention"):
            return ("extra_args", "--enable-dp-attention",
                    "enable_dp_attention=True is not supported (adaptive tier decisions are not synchronized across DP ranks)")
    else:
        attn_dp = _int_or(flags.get("--attn-dp-size"), 1)
        if flags.get("--enable-dp-attention") and attn_dp == 1:
            attn_dp = _int_or(flags.get("--dp-size"), 1)
        if attn_dp > 1:
            given = ("--attn-dp-size %d" % attn_dp if flags.get("--attn-dp-size") is not None
                     else "--enable-dp-attention with --dp-size %d" % attn_dp)
            return ("extra_args", given,
                    "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)")
    reason = "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"
    if flags.get("--enable-multi-layer-eagle"):
        return "extra_args", "--enable-multi-layer-eagle", reason
    if algorithm == "EAGLE" and architecture in MULTI_LAYER_EAGLE_ARCHS:
        return "model_architecture", architecture, reason
    if flags.get("--enable-two-batch-overlap"):
        return ("extra_args", "--enable-two-batch-overlap",
                "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)")
    if flags.get("--enable-pdmux"):
        return ("extra_args", "--enable-pdmux",
                "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)")
    return None


def table_mode_refusal(profile, algorithm, topk=None, architecture=None, extra_args=None):
    """Why the tuner's table mode (``speculative_tuning_mode: table``) cannot make adaptive an arm here, or None.

    Where this returns a reason the tuner falls back to today's static decision over the weighted distribution and
    its report says why adaptive was not an arm (issue 21 part 5).

    :param profile: the version profile of ``sglang_server_version`` (``sglang_args.version_profile``: ``0.5.10``,
        ``0.5.14``, ...). :param algorithm: the algorithm of the table's arms (``speculative_tuning_default_algorithm``,
        any case; None = no speculation). :param topk: the largest ``speculative_eagle_topk`` of the arms (None = 1).
    :param architecture: ``sglang_server_model_architecture`` or None. :param extra_args: ``sglang_server_extra_args``.
    :returns: None, or a sentence naming the variable, its value and why: the version's parser has no
        ``--speculative-adaptive`` (SGLang <= 0.5.10; the versions with it come from the wheels,
        :func:`versions_with_adaptive`), or SGLang's own ``speculative_adaptive disabled`` reason
        (:func:`unsupported_reason`: algorithm, topk, attention DP, multi-layer EAGLE, two-batch overlap, PD-mux).
    """
    having = versions_with_adaptive()
    if profile not in having:
        return ("sglang_server_version (SGLang %s rules) has no --speculative-adaptive: the flags exist from %s (read from the "
                "wheels)" % (profile, " and ".join(having)))
    algo = None if algorithm in (None, "") else str(algorithm).upper()
    refused = unsupported_reason(profile, algo, topk, architecture, extra_args)
    if refused is None:
        return None
    key, value, reason = refused
    variable = {"speculative_algorithm": "speculative_tuning_default_algorithm", "speculative_eagle_topk": "arms' speculative_eagle_topk",
                "model_architecture": "sglang_server_model_architecture", "extra_args": "sglang_server_extra_args"}[key]
    return "%s=%s: SGLang would log 'speculative_adaptive disabled: %s' and serve static" % (variable, value, reason)
