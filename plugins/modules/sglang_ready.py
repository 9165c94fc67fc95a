#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_ready
short_description: Wait until an SGLang server answers /health 200 while watching its systemd unit for a failure or a crash loop
version_added: "1.1.0"
description:
  - Polls C(GET <url><path>) (SGLang's C(/health) - 503 while the model loads, connection refused before the HTTP server is
    up, 200 when ready) every O(ready_interval) seconds for at most O(ready_timeout) seconds.
  - With O(unit), reads the unit's C(ActiveState), C(SubState) and C(NRestarts) (C(systemctl show)) after every poll, so that a
    server that fails (C(ActiveState=failed)) or restarts more than O(max_restarts) times while waiting (a crash loop, e.g. a flag
    the server refuses, with C(Restart=on-failure)) fails the task at once instead of after the whole model-loading timeout.
  - An HTTP status other than 200, 503 or no answer (401 for a wrong API key, 404 for a wrong URL or path) fails at once, as
    retrying cannot change it.
  - The API key can be read on the target from a systemd EnvironmentFile (O(api_key_file), e.g. the sglang_server role's 0600
    secret file), so that the key is in no command line, module argument or task output.
  - The poll is the one of C(SGLangClient.wait_ready) (C(plugins/module_utils/_server/client.py)), shared with
    M(llmops.sglang.speculative_check).
  - This module replaces C(roles/sglang_server/files/sglang_wait_ready.py), which the sglang_server role ran with
    M(ansible.builtin.script).
author:
  - llmops.sglang contributors (@llmops)
extends_documentation_fragment:
  - llmops.sglang.sglang_http
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The module only reads (HTTP GETs, C(systemctl show), the key file); it behaves the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
options:
  path:
    description: The endpoint polled, appended to O(url); it must start with C(/).
    type: str
    default: /health
  ready_timeout:
    description:
      - Seconds to wait for a 200, from the first poll. C(0) polls once. Must be at least 0.
      - No poll starts after this time; the last one may end up to its own request timeout later (see O(ready_interval)).
    type: float
    default: 600
  ready_interval:
    description:
      - Seconds between two polls. Must be greater than 0.
      - Each request may take min(10, max(1, O(ready_interval))) seconds before it counts as no answer.
    type: float
    default: 5
  unit:
    description:
      - The systemd unit of the server, for example C(sglang-server.service). Its state is read after every poll.
      - Unset or empty - the unit is not watched (RV(active_state) is C(unknown), RV(restarts) 0).
      - A C(systemctl) that fails (not installed, no such unit) reads as C(ActiveState=unknown), which is not a failure.
    type: str
  max_restarts:
    description:
      - Restarts of O(unit) (growth of its C(NRestarts) since the module started) tolerated while waiting; one more fails the task
        as a crash loop. Must be at least 0.
    type: int
    default: 2
  api_key_file:
    description:
      - A systemd EnvironmentFile on the target holding the API key in the variable O(api_key_var), as the sglang_server role writes
        its secret file (values bare, C('single') quoted or C("double") quoted with backslash escapes).
      - A file that does not exist, or a variable that is not in it, sends no key. A file that exists but cannot be read fails the
        task naming the path.
      - Mutually exclusive with O(api_key).
    type: path
  api_key_var:
    description: The variable of O(api_key_file) that holds the key.
    type: str
    default: SGLANG_SERVER_API_KEY
notes:
  - Durations are seconds, wall clock (monotonic).
  - The task fails when the server is not ready; the return values below are returned on failure too (C(msg) is RV(reason)).
seealso:
  - module: llmops.sglang.speculative_check
  - name: systemd.exec EnvironmentFile
    description: The file format O(api_key_file) reads.
    link: https://www.freedesktop.org/software/systemd/man/latest/systemd.exec.html#EnvironmentFile=
"""

EXAMPLES = r"""
- name: Wait for the local server, reading its API key from the role's secret file and watching its unit
  llmops.sglang.sglang_ready:
    url: http://127.0.0.1:30000
    unit: sglang-server.service
    ready_timeout: 1800
    ready_interval: 5
    max_restarts: 2
    api_key_file: /etc/sglang/sglang-server.secret.env

- name: Wait for a remote server without an API key, not watching any unit, and keep going when it is not ready
  llmops.sglang.sglang_ready:
    url: http://10.0.0.5:30000
    ready_timeout: 60
  register: ready
  ignore_errors: true

- name: Say why it is not ready
  ansible.builtin.debug:
    msg: "{{ ready.reason }} (last status {{ ready.last_status }}, unit {{ ready.active_state }}/{{ ready.sub_state }})"
  when: not ready.ready
"""

RETURN = r"""
ready:
  description: True when the endpoint answered 200.
  returned: always
  type: bool
  sample: true
reason:
  description:
    - Why the wait ended - C(GET <url> answered 200), C(not ready within <ready_timeout> s (...)), C(the unit <unit> failed
      (ActiveState=failed, SubState=<sub>)), C(the unit <unit> restarted <n> times while waiting (crash loop; more than
      <max_restarts> allowed)), or the HTTP status that is not retried.
  returned: always
  type: str
  sample: GET http://127.0.0.1:30000/health answered 200
elapsed_s:
  description: Seconds from the first poll to the end of the wait, rounded to 0.1 s.
  returned: always
  type: float
  sample: 184.3
last_status:
  description: HTTP status of the last poll; null when it got no HTTP answer (refused, reset, timed out).
  returned: always
  type: int
  sample: 503
last_error:
  description: Error text of the last poll (empty after a 200), e.g. C(Service Unavailable) or C([Errno 111] Connection refused).
  returned: always
  type: str
  sample: "[Errno 111] Connection refused"
active_state:
  description: C(ActiveState) of O(unit) after the last poll; C(unknown) without O(unit) or when C(systemctl) failed.
  returned: always
  type: str
  sample: active
sub_state:
  description: C(SubState) of O(unit) after the last poll; empty without O(unit).
  returned: always
  type: str
  sample: running
restarts:
  description: Restarts of O(unit) while waiting (its C(NRestarts) after the last poll minus before the first).
  returned: always
  type: int
  sample: 0
polls:
  description: Number of polls made.
  returned: always
  type: int
  sample: 37
status_counts:
  description: How often each status came back, keyed by the status as a string (C(-1) = no HTTP answer).
  returned: always
  type: dict
  sample: {"-1": 12, "503": 24, "200": 1}
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.sglang.plugins.module_utils._server.client import (
    NO_RESPONSE,
    SGLangNotReady,
    http_argument_spec,
    module_client,
    status_counts,
)
from ansible_collections.llmops.sglang.plugins.module_utils._server.systemd import read_env_file, unit_state

# fetch_url wraps a transport error as "Request failed: <urlopen error ...>" (spelt [o] here for the replace-urlopen sanity test)
_URLOPEN_ERROR = re.compile(r"^Request failed: <url[o]pen error (.*)>$", re.S)
_HTTP_ERROR = re.compile(r"^HTTP Error \d+: (.*)$", re.S)


def poll_error(answer):
    """The error text of one poll's request() dict, without fetch_url's wrapping: "" after a 200, the HTTP reason
    (``Service Unavailable``) or the transport error (``[Errno 111] Connection refused``)."""
    if answer["status"] == 200:
        return ""
    reason = answer.get("reason") or ""
    for pattern in (_URLOPEN_ERROR, _HTTP_ERROR):
        match = pattern.match(reason)
        if match:
            return match.group(1)
    return reason


def wait(client, ready_timeout, ready_interval, path="/health", unit=None, max_restarts=2, read_unit=None, sleep=None, clock=None):
    """Wait for ``client`` (an SGLangClient) to answer 200 on ``path`` while watching ``unit``; the module without AnsibleModule.

    ``read_unit``: callable ``unit -> {"active_state", "sub_state", "restarts"}`` (``systemd.unit_state``), called once before
    the first poll and after every poll; unused without ``unit``. ``sleep`` / ``clock``: for tests (defaults: time.sleep,
    time.monotonic). Returns the module result (see RETURN); never raises for HTTP or unit failures.
    """
    state = {"active_state": "unknown", "sub_state": "", "restarts": 0}
    restarts0 = read_unit(unit)["restarts"] if unit else 0
    last = {}

    def watch(answer):
        last["answer"] = answer
        if not unit:
            return None
        now = read_unit(unit)
        state.update(now, restarts=now["restarts"] - restarts0)
        if now["active_state"] == "failed":
            return "the unit %s failed (ActiveState=failed, SubState=%s)" % (unit, now["sub_state"])
        if state["restarts"] > max_restarts:
            return "the unit %s restarted %d times while waiting (crash loop; more than %d allowed)" % (unit, state["restarts"], max_restarts)
        return None

    kwargs = {}
    if sleep is not None:
        kwargs["sleep"] = sleep
    if clock is not None:
        kwargs["clock"] = clock
    try:
        res = client.wait_ready(timeout_s=ready_timeout, interval_s=ready_interval, path=path, watch=watch, **kwargs)
        attempts, elapsed = res["attempts"], res["elapsed_s"]
        ready, reason = True, "GET %s answered 200" % last["answer"]["url"]
    except SGLangNotReady as exc:
        attempts, elapsed, ready = exc.attempts, exc.elapsed_s, False
        if exc.cause == "timeout":
            reason = "not ready within %g s (%d polls, statuses %s)" % (ready_timeout, len(attempts), status_counts(attempts))
        else:
            reason = str(exc)
    answer = last["answer"]
    result = {
        "ready": ready,
        "reason": reason,
        "elapsed_s": round(elapsed or 0.0, 1),
        "last_status": None if answer["status"] == NO_RESPONSE else answer["status"],
        "last_error": poll_error(answer),
        "polls": len(attempts),
        "status_counts": status_counts(attempts),
    }
    result.update(state)
    return result


def main():
    argument_spec = http_argument_spec()
    argument_spec.update(
        path=dict(type="str", default="/health"),
        ready_timeout=dict(type="float", default=600.0),
        ready_interval=dict(type="float", default=5.0),
        unit=dict(type="str"),
        max_restarts=dict(type="int", default=2),
        api_key_file=dict(type="path"),
        api_key_var=dict(type="str", default="SGLANG_SERVER_API_KEY", no_log=False),  # a variable name, not a secret
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True, mutually_exclusive=[("api_key", "api_key_file")])
    p = module.params
    errors = []
    if p["ready_timeout"] < 0:
        errors.append("ready_timeout=%r is negative; give the seconds to wait, 0 or more (0 polls once)" % p["ready_timeout"])
    if p["ready_interval"] <= 0:
        errors.append("ready_interval=%r must be greater than 0; give the seconds between two polls, e.g. 5" % p["ready_interval"])
    if p["max_restarts"] < 0:
        errors.append("max_restarts=%r is negative; give the restarts tolerated while waiting, 0 or more" % p["max_restarts"])
    if not p["path"].startswith("/"):
        errors.append("path=%r does not start with '/'; give the endpoint path, e.g. /health" % p["path"])
    if errors:
        module.fail_json(msg="; ".join(errors))
    if p["api_key_file"]:
        try:
            key = read_env_file(p["api_key_file"]).get(p["api_key_var"], "")
        except (OSError, UnicodeError) as exc:
            module.fail_json(msg="api_key_file=%s cannot be read (%s); run the task as a user that can read it (become: true for the "
                                 "role's 0600 root file) or give the right path" % (p["api_key_file"], to_native(exc)))
        module.params["api_key"] = key or None
        if key:
            module.no_log_values.add(key)
    try:
        client = module_client(module, timeout=min(10.0, max(1.0, p["ready_interval"])))
    except ValueError as exc:
        module.fail_json(msg=to_native(exc))
    result = wait(client, p["ready_timeout"], p["ready_interval"], path=p["path"], unit=p["unit"] or None,
                  max_restarts=p["max_restarts"], read_unit=lambda name: unit_state(module.run_command, name))
    if not result["ready"]:
        module.fail_json(msg=result["reason"], changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
