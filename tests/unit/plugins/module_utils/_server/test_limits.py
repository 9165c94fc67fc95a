"""SGLang's fixed numbers (plugins/module_utils/_server/limits.py), by hand from the wheels' server_args.py."""
from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.llmops.sglang.plugins.module_utils._server.limits import SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT

PLUGINS = Path(__file__).resolve().parents[5] / "plugins"


def test_speculative_cap_is_sglangs_48():
    # server_args.py 0.5.9 _handle_speculative_decoding: "self.max_running_requests = 48"
    assert SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT == 48


def test_no_code_repeats_the_cap_as_a_literal():
    # the cap is compared and rendered only through the constant (documentation prose may state the number)
    offenders = []
    for path in sorted(PLUGINS.rglob("*.py")):
        if path.name in ("limits.py", "generated_flags.py"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            # 48 compared, assigned or passed (not "48-request" prose, not 2048 or 0.48)
            if re.search(r"(?:[=!]=|=|\(|,)\s*48(?![-\w.])", code):
                offenders.append("%s:%d: %s" % (path.relative_to(PLUGINS), number, line.strip()))
    assert offenders == []
