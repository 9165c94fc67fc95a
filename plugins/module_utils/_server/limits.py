# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Numbers SGLang itself fixes, named once for the target code (modules) and the controller code (the renderer).

Pure Python (no imports), so that modules on the target and ``plugins/plugin_utils`` on the controller both import it.
"""

from __future__ import annotations

#: The running-request cap SGLang sets under speculative decoding when ``--max-running-requests`` is not given:
#: ``max_running_requests = 48`` in ``python/sglang/srt/server_args.py`` of the wheels 0.5.4 to 0.5.14
#: (``_handle_speculative_decoding``, for EAGLE/EAGLE3/NEXTN/STANDALONE and NGRAM) and in 0.5.23's
#: ``arg_groups/speculative_hook.py`` (DFLASH and DSPARK too), logged as
#: ``Max running requests is reset to 48 for speculative decoding.`` (docs/design/SGLANG_FACTS.md section 0, item 3).
SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT = 48
