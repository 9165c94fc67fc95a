# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of the modules that read a running SGLang server's log (speculative_check, production_concurrency).

One description and one default per option, matching ``LOG_ARGUMENT_SPEC`` in
``plugins/module_utils/_server/log_source.py`` (the one reader); a module documents only what it changes.
"""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  log_source:
    description:
      - Where to read the server's log.
      - C(journald) runs C(journalctl --no-pager -o short-iso -u <log_unit>), which keeps SGLang's own line text behind
        the journal's prefix.
      - C(docker) and C(podman) run C(<engine> logs --tail <log_max_lines>) on O(log_container) and read its stdout and
        stderr (SGLang logs to stderr).
      - C(file) reads the end of O(log_path).
      - C(none) reads no log.
    type: str
    choices: [none, journald, docker, podman, file]
    default: none
  log_unit:
    description: systemd unit of the server, for O(log_source=journald). The default is the unit the sglang_server role installs.
    type: str
    default: sglang-server.service
  log_container:
    description: Container name or id of the server, for O(log_source=docker) or O(log_source=podman). The default is
      the container the sglang_server role runs.
    type: str
    default: sglang-server
  log_path:
    description: Log file of the server, for O(log_source=file).
    type: path
  log_since:
    description:
      - Time window of the log read - a duration C(<N>s), C(<N>m), C(<N>h), C(<N>d) back from now, or a local time
        C(YYYY-MM-DD HH:MM[:SS]).
      - journald and docker/podman apply it themselves (C(--since)); for O(log_source=file) it is applied to SGLang's own line
        timestamps (a line without one, such as a traceback, goes with the stamped line before it).
      - Unset reads everything within O(log_max_bytes) and O(log_max_lines).
    type: str
  log_max_bytes:
    description: At most this many bytes of log text are kept, the newest ones (cut at a line start). The result says
      when older text was cut (C(truncated)).
    type: int
    default: 8388608
  log_max_lines:
    description: At most this many lines are asked of journald, docker or podman (C(-n) / C(--tail)).
    type: int
    default: 100000
"""
