"""``python3 -m sglang_sim <SGLang launch_server flags>`` (same as the sglang.launch_server shim)."""
from __future__ import annotations

import sys

from sglang_sim.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
