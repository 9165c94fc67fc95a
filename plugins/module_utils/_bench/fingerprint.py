# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Benchmark only when it has something new to say: the fingerprint of what a benchmark measured.

A benchmark result describes one server configuration on one host. Its *inputs* are a nested dict of
JSON values, by convention (the role llmops.sglang.sglang_benchmark builds it; any JSON dict works):

  ``server``    the rendered configuration: ``version`` (SGLang), ``image`` (the pinned reference),
                ``image_id`` (the id of the image the running container uses, read on the host),
                ``argv`` (the renderer's launch arguments), ``env`` (its non-secret environment);
  ``host``      the facts that move the numbers: ``gpu_model``, ``gpu_count``, ``driver_version``,
                ``p2p`` (the nccl role's decision);
  ``benchmark`` the sweep itself (lengths, levels, requests, backend, seed, gates): another question is
                another benchmark.

The *fingerprint* is the SHA-256 of the canonical JSON of the inputs (keys sorted, no whitespace). The state
file (one per host and server, written by the module llmops.sglang.benchmark_state) holds the fingerprint, the
inputs, the time and a compact copy of the result, so that an unchanged host reports its last result and its age
instead of load-testing a live server again. Standard library only (runs on the managed host).
"""
from __future__ import annotations

import hashlib
import json

STATE_FORMAT = 1


class FingerprintError(ValueError):
    """Inputs that cannot be fingerprinted (not JSON) or a state file that cannot be read as one."""


def canonical(inputs):
    """Canonical JSON text of ``inputs`` (sorted keys, compact separators). Raises FingerprintError
    for values JSON cannot represent (sets, bytes, NaN)."""
    try:
        return json.dumps(inputs, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise FingerprintError("benchmark fingerprint inputs must be plain JSON values: %s" % exc)


def fingerprint(inputs):
    """``sha256:<64 hex>`` of :func:`canonical` ``(inputs)``."""
    return "sha256:" + hashlib.sha256(canonical(inputs).encode("utf-8")).hexdigest()


def flatten(value, prefix=""):
    """``{"server": {"image": "x"}}`` -> ``{"server.image": "x"}``. Lists and scalars are leaves."""
    out = {}
    if isinstance(value, dict) and value:
        for key in sorted(value):
            name = "%s.%s" % (prefix, key) if prefix else str(key)
            out.update(flatten(value[key], name))
    else:
        out[prefix or "(inputs)"] = value
    return out


def diff_inputs(old, new):
    """Leaves that differ between two input dicts, sorted by key: ``[{"key", "old", "new"}]``.
    A leaf present on one side only has ``None`` on the other (and ``missing`` names the side)."""
    fo, fn = flatten(old or {}), flatten(new or {})
    out = []
    for key in sorted(set(fo) | set(fn)):
        if canonical(fo.get(key)) != canonical(fn.get(key)) or (key in fo) != (key in fn):
            item = {"key": key, "old": fo.get(key), "new": fn.get(key)}
            if key not in fo:
                item["missing"] = "old"
            elif key not in fn:
                item["missing"] = "new"
            out.append(item)
    return out


def _short(value, limit=80):
    text = value if isinstance(value, str) else canonical(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_changes(changes, limit=5):
    """One line for a list of :func:`diff_inputs` items, e.g.
    ``server.image: "a:1" -> "a:2"; host.driver_version: "580.1" -> "580.2"`` (at most ``limit`` items)."""
    parts = []
    for item in changes[:limit]:
        if item.get("missing") == "old":
            parts.append("%s: new (%s)" % (item["key"], _short(item["new"])))
        elif item.get("missing") == "new":
            parts.append("%s: gone (was %s)" % (item["key"], _short(item["old"])))
        else:
            parts.append("%s: %s -> %s" % (item["key"], _short(item["old"]), _short(item["new"])))
    if len(changes) > limit:
        parts.append("and %d more" % (len(changes) - limit))
    return "; ".join(parts)


def format_age(seconds):
    """Human age: ``45 s``, ``12 min``, ``3 h 05 min``, ``2 d 04 h``. Negative (clock skew) reads ``0 s``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%d min" % (seconds // 60)
    if seconds < 86400:
        return "%d h %02d min" % (seconds // 3600, (seconds % 3600) // 60)
    return "%d d %02d h" % (seconds // 86400, (seconds % 86400) // 3600)


def parse_state(text, path="state file"):
    """The state dict of a state file's text. Raises FingerprintError naming ``path`` when it is not a
    JSON object of this format (``format`` 1 with ``fingerprint``, ``inputs``, ``time``)."""
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise FingerprintError("%s is not JSON (%s)" % (path, exc))
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise FingerprintError("%s is not a benchmark state of format %d" % (path, STATE_FORMAT))
    for key in ("fingerprint", "inputs", "time"):
        if key not in state:
            raise FingerprintError("%s has no %r" % (path, key))
    return state


def decide(state, inputs, force=False, now=0.0, max_age_s=0):
    """Whether to benchmark, and why.

    ``state``: the parsed last state or None (no benchmark recorded); ``inputs``: this run's inputs;
    ``force``: the user asked; ``now``: epoch seconds; ``max_age_s``: re-benchmark a result older than this
    (0 = never expires). Returns ``{"run": bool, "reason": str, "changes": [diff items], "fingerprint": str,
    "age_s": float or None}``.
    """
    fp = fingerprint(inputs)
    if state is None:
        return {"run": True, "reason": "no benchmark recorded on this host yet", "changes": [], "fingerprint": fp, "age_s": None}
    age = float(now) - float(state.get("time", 0))
    changes = diff_inputs(state.get("inputs"), inputs) if state.get("fingerprint") != fp else []
    if state.get("fingerprint") != fp and not changes:
        # same inputs, another fingerprint: written by another canonical form; treat as changed, say so
        changes = [{"key": "(fingerprint)", "old": state.get("fingerprint"), "new": fp}]
    if force:
        reason = "asked for (sglang_benchmark_force)"
        run = True
    elif changes:
        reason = "changed since run %s: %s" % (state.get("run_id", "?"), describe_changes(changes))
        run = True
    elif max_age_s and age > max_age_s:
        reason = "the last result (run %s) is %s old, over sglang_benchmark_max_age %s" % (
            state.get("run_id", "?"), format_age(age), format_age(max_age_s))
        run = True
    else:
        reason = "nothing changed since run %s (%s ago)" % (state.get("run_id", "?"), format_age(age))
        run = False
    return {"run": run, "reason": reason, "changes": changes, "fingerprint": fp, "age_s": age}


def make_state(inputs, result, now):
    """The state to write after a successful benchmark: format, fingerprint, inputs, ``time`` (epoch s),
    and ``result`` keys ``run_id``, ``report_dir``, ``rows`` (benchmark_report's summary rows), ``markdown``
    copied as given (other keys of ``result`` are kept too)."""
    result = dict(result or {})
    return {"format": STATE_FORMAT, "fingerprint": fingerprint(inputs), "inputs": inputs, "time": float(now),
            "run_id": result.get("run_id"), "result": result}
