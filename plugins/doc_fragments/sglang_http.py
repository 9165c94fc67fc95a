# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options shared by the modules that talk HTTP to a running SGLang server (speculative_check, serving_benchmark,
production_concurrency).

One description and one default per option, matching ``HTTP_ARGUMENT_SPEC`` in
``plugins/module_utils/_server/client.py`` (the argument spec those modules share); a module documents only what it
adds. ``timeout`` is not here: speculative_check limits each short HTTP request (default 60 s), serving_benchmark a
whole streamed generation (default 1800 s) and production_concurrency one ``/metrics`` read (default 10 s), three
different quantities.
"""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of the SGLang server, C(http://host:port) or C(https://host:port) (SGLang's C(--host) and C(--port)),
        without an endpoint path.
      - The default is the server on the host the module runs on.
    type: str
    default: http://127.0.0.1:30000
  api_key:
    description:
      - The server's C(--api-key), sent as the header C(Authorization) with the value C(Bearer <key>). Unset or empty sends no header.
    type: str
  validate_certs:
    description:
      - Verify the server's TLS certificate for C(https://) URLs.
    type: bool
    default: true
"""
