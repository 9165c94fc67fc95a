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
* ``_load_adaptive_config``: the table is a JSON object; its integer-string keys are batch-size buckets, each with a
  non-empty ``candidate_steps`` list of non-negative ints; the other top-level keys are ignored as buckets but merged
  into every bucket (``AdaptiveSpeculativeParams.__init__``: ``cfg={**cfg, **entry}``), i.e. they are table-wide
  defaults of the per-bucket fields; ``AdaptiveStepSlot.__init__`` reads ``ema_alpha`` (0.2), ``update_interval`` (5),
  ``warmup_batches`` (10), ``down_hysteresis`` (-0.25), ``up_hysteresis`` (0.0), ``ceiling_coeff`` (0);
* ``_init_adaptive_speculative_params``: topk becomes 1 when unset, ``speculative_num_steps`` the middle of the sorted
  union of every bucket's candidates when unset (a given one outside it is a startup ``ValueError``), and
  ``speculative_num_draft_tokens`` always ``steps + 1``.

Pure Python (standard library only).
"""

from __future__ import annotations

import json

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.generated_flags import FLAGS

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

#: The per-bucket fields besides ``candidate_steps`` (``AdaptiveStepSlot.__init__``) and their SGLang defaults.
FIELD_DEFAULTS = {"ema_alpha": 0.2, "update_interval": 5, "warmup_batches": 10, "down_hysteresis": -0.25,
                  "up_hysteresis": 0.0, "ceiling_coeff": 0}

#: The log line SGLang writes when it switches adaptive off (``speculative_hook.py`` ``_maybe_disable_adaptive``).
DISABLED_PREFIX = "speculative_adaptive disabled: "
DISABLED_SUFFIX = ". Falling back to static speculative params."

#: Architectures for which SGLang turns on multi-layer EAGLE by itself when the algorithm is EAGLE
#: (0.5.14 ``server_args.py`` ``_handle_model_specific_adjustments``: ``MIMO_V2_MODEL_ARCHS`` and ``Step3p5ForCausalLM`` /
#: ``Step3p7ForConditionalGeneration``; 0.5.23 ``arg_groups/overrides.py``), which then disables adaptive.
MULTI_LAYER_EAGLE_ARCHS = ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM", "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration")


class TableError(ValueError):
    """A table SGLang's loader would reject (or misread). ``entry`` names the bad entry (``"8"``, ``"8.ema_alpha"``,
    or ``""`` for the whole table), ``value`` its value, ``reason`` why, ``fix`` what to write instead."""

    def __init__(self, entry, value, reason, fix):
        self.entry = entry
        self.value = value
        self.reason = reason
        self.fix = fix
        super(TableError, self).__init__("%s=%r: %s. Fix: %s" % (entry or "table", value, reason, fix))


def versions_with_adaptive():
    """Tuple of the modelled SGLang versions whose parser has both flags (from the generated table of the wheels)."""
    a = FLAGS.get(FLAG, {}).get("versions", ())
    b = FLAGS.get(CONFIG_FLAG, {}).get("versions", ())
    return tuple(v for v in a if v in b)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_field(entry, name, value):
    where = "%s.%s" % (entry, name) if entry else name
    if name in ("up_hysteresis", "down_hysteresis"):
        if not _is_number(value):
            raise TableError(where, value, "must be a number (tokens of EMA accept length added to the switch threshold)",
                             "write a number such as %s" % FIELD_DEFAULTS[name])
    elif name == "ceiling_coeff":
        if not _is_number(value) or value < 0:
            raise TableError(where, value, "must be a number >= 0 (0 turns the EMA ceiling off)", "write e.g. 0 or 1.5")
    elif name == "ema_alpha":
        if not _is_number(value) or not 0 < value <= 1:
            raise TableError(where, value, "must be a number in (0, 1] (the weight of the newest batch in the EMA)", "write e.g. 0.2")
    elif name == "update_interval":
        if not _is_int(value) or value < 1:
            raise TableError(where, value, "must be a whole number >= 1 (SGLang takes the batch count modulo it: 0 divides by zero "
                             "at the first decode)", "write e.g. 5")
    elif name == "warmup_batches":
        if not _is_int(value) or value < 0:
            raise TableError(where, value, "must be a whole number >= 0 (batches before the first switch)", "write e.g. 10")


def validate_table(table):
    """Check an adaptive table the way SGLang's ``_load_adaptive_config`` reads it, and more strictly where SGLang would
    fail later or silently ignore a typo.

    :param table: dict; keys are batch-size buckets (non-negative integers, as ints or digit strings) or table-wide
        defaults of the per-bucket fields (``ema_alpha``, ``update_interval``, ``warmup_batches``, ``up_hysteresis``,
        ``down_hysteresis``, ``ceiling_coeff``); each bucket is a dict with ``candidate_steps`` (non-empty list of
        non-negative ints; 0 = no drafting) and optionally those fields.
    :returns: the table as SGLang's JSON wants it: string keys, buckets in ascending order, candidate lists as given.
    :raises TableError: naming the bad entry: not a dict, no bucket, a key that is neither a bucket nor a field (SGLang
        ignores it silently), a bucket that is not a dict, ``candidate_steps`` missing/empty/not non-negative ints
        (SGLang's own ``ValueError``), an unknown per-bucket key, a field out of range.
    """
    if not isinstance(table, dict):
        raise TableError("", table, "must be a mapping of batch-size buckets to {candidate_steps: [...]}",
                         "write e.g. {1: {candidate_steps: [1, 3, 5]}, 32: {candidate_steps: [0, 1]}}")
    buckets = {}
    defaults = {}
    for raw_key, entry in table.items():
        key = str(raw_key).strip() if not isinstance(raw_key, bool) else ""
        if _is_int(raw_key) and raw_key < 0:
            key = ""
        if key.isdigit() and key.isascii():
            bucket = int(key)
            if bucket in buckets:
                raise TableError(key, entry, "bucket %d is given twice (e.g. as 8 and '8')" % bucket, "keep one of them")
            if not isinstance(entry, dict):
                raise TableError(key, entry, "a bucket must be a mapping with candidate_steps", "write e.g. {candidate_steps: [0, 1]}")
            steps = entry.get("candidate_steps")
            if not isinstance(steps, list) or not steps or not all(_is_int(s) and s >= 0 for s in steps):
                raise TableError("%s.candidate_steps" % key, steps,
                                 "candidate_steps must be a non-empty list of non-negative ints (SGLang: 'BS %s: candidate_steps "
                                 "must be a list of non-negative ints')" % key, "write e.g. [0, 1, 3] (0 = no drafting)")
            for name, value in entry.items():
                if name == "candidate_steps":
                    continue
                if name not in FIELD_DEFAULTS:
                    raise TableError("%s.%s" % (key, name), value, "not a per-bucket field SGLang reads (it would be ignored)",
                                     "use candidate_steps, %s" % ", ".join(sorted(FIELD_DEFAULTS)))
                _check_field(key, name, value)
            buckets[bucket] = dict(entry)
        elif key in FIELD_DEFAULTS:
            _check_field("", key, entry)
            defaults[key] = entry
        else:
            raise TableError(str(raw_key), entry, "neither a batch-size bucket (a non-negative integer) nor a table-wide field; "
                             "SGLang would ignore it silently", "use integer keys for buckets, or one of %s" % ", ".join(sorted(FIELD_DEFAULTS)))
    if not buckets:
        raise TableError("", table, "the table has no batch-size bucket (SGLang: 'speculative_adaptive_config must contain at "
                         "least one integer-string BS key')", "add e.g. 1: {candidate_steps: [1, 3, 7]}")
    out = dict((k, v) for k, v in defaults.items())
    for bucket in sorted(buckets):
        out[str(bucket)] = buckets[bucket]
    return out


def table_json(table):
    """The JSON text of a validated table: one bucket (or table-wide field) per line, as SGLang's ``json.load`` reads it."""
    lines = ["  %s: %s" % (json.dumps(str(key)), json.dumps(value, sort_keys=True)) for key, value in table.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def candidate_union(table):
    """Sorted union of every bucket's ``candidate_steps`` of a validated table (SGLang's
    ``resolve_candidate_steps_from_config``)."""
    steps = set()
    for key, entry in table.items():
        if str(key).isdigit():
            steps.update(entry["candidate_steps"])
    return sorted(steps)


def initial_steps(table, given=None):
    """The ``speculative_num_steps`` SGLang starts with: ``given`` (must be in the union), else the middle of the union
    (``candidate_steps[len(candidate_steps) // 2]``, ``_init_adaptive_speculative_params``)."""
    union = candidate_union(table)
    return given if given is not None else union[len(union) // 2]


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
