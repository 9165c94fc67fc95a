"""Tiny ``sglang`` package that runs the SGLang simulator (a test double), not SGLang.

Only ``python3 -m sglang.launch_server ...`` is provided. ``__version__`` is the simulated version
(``SGLANG_SIM_VERSION``, default 0.5.9).
"""
import os as _os

__version__ = _os.environ.get("SGLANG_SIM_VERSION") or "0.5.9"
