"""``python3 -m sglang.launch_server <flags>``: runs the SGLang simulator (a test double) with SGLang's flags.

Needs ``sglang_sim`` importable: ``PYTHONPATH=tests/sandbox/sglang_shim:tests/sandbox`` in the checkout,
or both packages installed side by side (the localhost/sglang-sim image). As a fallback the
checkout layout (``../../sglang_sim`` next to this shim) is added to ``sys.path``.
"""
import os
import sys

try:
    from sglang_sim.main import main
except ImportError:  # checkout layout: tests/sandbox/{sglang_shim/sglang,sglang_sim}
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from sglang_sim.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
