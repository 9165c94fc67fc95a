# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""How SGLang reads its adaptive draft-length table (``--speculative-adaptive-config``): the loader's rules, in one place.

Read from the wheels (0.5.14, 0.5.23), ``speculative/adaptive_spec_params.py``:

* ``_load_adaptive_config``: the table is a JSON object; its integer-string keys are batch-size buckets, each with a
  non-empty ``candidate_steps`` list of non-negative ints; the other top-level keys are ignored as buckets but merged
  into every bucket (``AdaptiveSpeculativeParams.__init__``: ``cfg={**cfg, **entry}``), i.e. they are table-wide
  defaults of the per-bucket fields; ``AdaptiveStepSlot.__init__`` reads ``ema_alpha`` (0.2), ``update_interval`` (5),
  ``warmup_batches`` (10), ``down_hysteresis`` (-0.25), ``up_hysteresis`` (0.0), ``ceiling_coeff`` (0);
* ``_init_adaptive_speculative_params``: ``speculative_num_steps`` is the middle of the sorted union of every bucket's
  candidates when unset.

Target code (standard library only) so that both the tuner module (``spec_tune``, which writes a tuned table) and the
controller's renderer (``plugin_utils/_sglang/adaptive.py``, which re-exports these names) check a table the same way.
"""

from __future__ import annotations

import json

#: The per-bucket fields besides ``candidate_steps`` (``AdaptiveStepSlot.__init__``) and their SGLang defaults.
FIELD_DEFAULTS = {"ema_alpha": 0.2, "update_interval": 5, "warmup_batches": 10, "down_hysteresis": -0.25,
                  "up_hysteresis": 0.0, "ceiling_coeff": 0}


class TableError(ValueError):
    """A table SGLang's loader would reject (or misread). ``entry`` names the bad entry (``"8"``, ``"8.ema_alpha"``,
    or ``""`` for the whole table), ``value`` its value, ``reason`` why, ``fix`` what to write instead."""

    def __init__(self, entry, value, reason, fix):
        self.entry = entry
        self.value = value
        self.reason = reason
        self.fix = fix
        super(TableError, self).__init__("%s=%r: %s. Fix: %s" % (entry or "table", value, reason, fix))


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
