"""Simulator-only knobs: ``--sim-<name>`` flags and ``SGLANG_SIM_<NAME>`` environment variables.

The environment is how the sandbox passes them (its systemd unit renders only real SGLang flags);
a ``--sim-*`` flag, when given, wins over the environment. Every knob is validated before the
simulator prints anything else: a bad value stops it with exit code 2 and a message naming the
variable, the value, why it is wrong and how to fix it.
"""
from __future__ import annotations

import math

from sglang_sim import DEFAULT_VERSION, SUPPORTED_VERSIONS

GPU_CHOICES = ("sm120", "sm100", "sm103", "sm110", "sm90", "sm89", "sm80")


class KnobError(ValueError):
    """A ``SGLANG_SIM_*`` / ``--sim-*`` value is invalid (the message says which, why and the fix)."""


def _bool(text):
    low = str(text).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected a boolean (1/0, true/false, yes/no, on/off)")


def _nonneg_float(text):
    value = float(text)
    if math.isnan(value) or value < 0:
        raise ValueError("expected a number >= 0")
    return value


def _duration(text):
    """Seconds >= 0; ``inf`` (or ``forever``) means forever."""
    if str(text).strip().lower() in ("inf", "forever", "infinity"):
        return math.inf
    return _nonneg_float(text)


def _prob(text):
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("expected a probability in [0, 1]")
    return value


def _count(text):
    value = int(str(text).strip())
    if value < 0:
        raise ValueError("expected an integer >= 0")
    return value


def _version(text):
    text = str(text).strip()
    if text not in SUPPORTED_VERSIONS:
        raise ValueError("supported versions are %s" % ", ".join(SUPPORTED_VERSIONS))
    return text


def _gpu(text):
    text = str(text).strip().lower()
    if text not in GPU_CHOICES:
        raise ValueError("supported values are %s" % ", ".join(GPU_CHOICES))
    return text


def _str(text):
    text = str(text).strip()
    if not text:
        raise ValueError("expected a non-empty string")
    return text


# name, parser, default, help (units in the help text)
KNOBS = (
    ("version", _version, DEFAULT_VERSION, "SGLang version whose CLI, log and API formats are simulated"),
    ("instant", _bool, False, "instant mode: same token accounting, no sleeping (for client load tests)"),
    ("reuse_port", _bool, False, "bind with SO_REUSEPORT, so several simulator processes share one port (client capacity tests)"),
    ("load_s", _nonneg_float, 2.0, "simulated weight-load + graph-capture time before HTTP is up, s (0 in instant mode unless set)"),
    ("t0_ms", _nonneg_float, 8.84, "fixed cost of one target forward (decode or prefill) step, ms"),
    ("k_ms", _nonneg_float, 0.25, "cost per token in a target step (running requests x num_draft_tokens when verifying), ms"),
    ("draft_ms", _nonneg_float, 1.5, "fixed cost of one draft step (per speculative step), ms"),
    ("draft_k_ms", _nonneg_float, 0.145, "cost per running request in one draft step, ms"),
    ("verify_ms", _nonneg_float, 3.83, "fixed speculative overhead per verify step (draft extend, tree bookkeeping), ms"),
    ("prefill_ms_per_token", _nonneg_float, 0.05, "prefill cost per new prompt token, ms"),
    ("accept_p", _prob, 1.0, "probability that each draft token is accepted, along the chain"),
    ("seed", _count, 0, "random seed for draft acceptance"),
    ("draft_train_len", _count, 2048, "draft training length, tokens: acceptance falls with the prompt length past it "
     "(EAGLE3 Qwen3-8B shape, acceptance.py); 0 = off"),
    ("slow_start_s", _duration, 0.0, "fault: /health answers 503 and the scheduler waits this long after HTTP is up, s"),
    ("never_ready", _bool, False, "fault: the server never finishes warm-up (/health 503 forever, requests hang)"),
    ("crash_after", _count, 0, "fault: the process dies with status 137 (as after SGLang's self-SIGKILL) when request N+1 arrives; 0 = off"),
    ("error_after_chunks", _count, 0, "fault: each stream gets an error chunk after N chunks (non-stream: HTTP 400); 0 = off"),
    ("stall_after_chunks", _count, 0, "fault: each stream stops sending after N chunks for stall_s; 0 = off"),
    ("stall_s", _duration, math.inf, "how long a stalled stream stalls, s (inf = until the client goes away)"),
    ("broken_draft", _bool, False, "fault: the draft model never predicts right (accept length 1.00)"),
    ("arch", _str, "Qwen3_5MoeForConditionalGeneration", "target architecture (decides hybrid/mamba log groups and the draft MTP class)"),
    ("gpu", _gpu, "sm120", "simulated GPU architecture (Blackwell refusals): sm120 = RTX PRO 6000"),
    ("gpu_mem_gb", _nonneg_float, 93.87, "available GPU memory per rank before loading, GB (the recorded RTX PRO 6000 value)"),
    ("p2p", _bool, False, "whether GPU peer-to-peer works (False logs the custom all-reduce disabled line when tp > 1)"),
)

KNOB_NAMES = tuple(k[0] for k in KNOBS)


def env_name(name):
    """``accept_p`` -> ``SGLANG_SIM_ACCEPT_P``."""
    return "SGLANG_SIM_" + name.upper()


def flag_name(name):
    """``accept_p`` -> ``--sim-accept-p``."""
    return "--sim-" + name.replace("_", "-")


def resolve(env, flag_values):
    """Return ``{knob: value}`` from ``flag_values`` (``{knob: str}``, from ``--sim-*``) over ``env``.

    Raises KnobError naming the variable, the value, why and the fix.
    """
    out = {}
    for name, parser, default, help_text in KNOBS:
        source = None
        raw = flag_values.get(name)
        if raw is not None:
            source = flag_name(name)
        elif env.get(env_name(name)) not in (None, ""):
            raw = env[env_name(name)]
            source = env_name(name)
        if source is None:
            out[name] = default
            continue
        try:
            out[name] = parser(raw)
        except ValueError as exc:
            raise KnobError("%s=%r is invalid for the SGLang simulator: %s. Fix: set %s to a valid value (%s; default %r) or unset it."
                            % (source, raw, exc, source, help_text, default))
    if out["instant"] and env.get(env_name("load_s")) in (None, "") and flag_values.get("load_s") is None:
        out["load_s"] = 0.0
    if out["broken_draft"]:
        out["accept_p"] = 0.0
    return out
