"""SGLang simulator: a test double (stand-in) for an SGLang server, standard library only.

It speaks SGLang's command line (``python3 -m sglang.launch_server ...`` through the tiny shim in
``tests/sandbox/sglang_shim``), its HTTP API and its log formats for a selectable SGLang version,
with a continuous-batching timing model for speculative decoding (MTP/NEXTN/EAGLE). It is not
SGLang: no model, no GPU, no tokenizer. See docs/simulator.md.
"""
from __future__ import annotations

SUPPORTED_VERSIONS = ("0.4.10", "0.5.4", "0.5.9", "0.5.10", "0.5.14", "0.5.23")
DEFAULT_VERSION = "0.5.9"


def version_tuple(version):
    """``"0.5.10"`` -> ``(0, 5, 10)`` (suffixes such as ``.post2`` are ignored)."""
    parts = []
    for piece in str(version).split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits or not piece[0].isdigit():
            break
        parts.append(int(digits))
    return tuple(parts)
