#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: benchmark_state
short_description: Decide whether a serving benchmark has something new to say, and record the last one
version_added: "1.1.0"
description:
  - Runs on the GPU host. Keeps a small JSON state file per host and server (O(path)) with the fingerprint of what the
    last successful benchmark measured - the server's rendered configuration (launch arguments, environment, image,
    image id of the running container, SGLang version), the host facts that move the numbers (GPU model and count,
    driver, NCCL P2P decision) and the sweep itself - plus the time and a compact copy of the result.
  - With O(action=check) it compares this run's O(inputs) with the recorded ones and returns C(run) (benchmark or not),
    the C(reason), the inputs that changed, and the last result with its age. Read-only.
  - With O(action=record) it writes the state for O(inputs) and O(result) (after a successful sweep).
  - The fingerprint is the SHA-256 of the canonical JSON of the inputs (llmops.sglang bench_fingerprint).
author:
  - llmops.sglang developers (@llmops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  path:
    description: The state file on the host (its directory is created with mode 0755 on O(action=record)).
    type: path
    required: true
  action:
    description: C(check) decides (read-only); C(record) writes the state of a finished benchmark.
    type: str
    choices: [check, record]
    default: check
  inputs:
    description:
      - What the benchmark measures, as nested JSON values; by convention C(server) (version, image, argv, env),
        C(host) (gpu_model, gpu_count, driver_version, p2p) and C(benchmark) (the sweep). Any change of any leaf
        means a new benchmark.
      - With O(container_name), C(server.image_id) is added (or replaced) with the image id the running container uses.
    type: dict
    required: true
  container_engine:
    description: Container engine binary used to read the running container's image id (C(podman), C(docker) or a path).
    type: str
    default: podman
  container_name:
    description: Name of the running server container; empty = do not read an image id (C(server.image_id) is not added).
    type: str
    default: ""
  force:
    description: Benchmark even when nothing changed (O(action=check)); the user asked.
    type: bool
    default: false
  max_age:
    description: Seconds after which the last result is re-measured although nothing changed (O(action=check)); 0 = never.
    type: int
    default: 0
  result:
    description:
      - The result to keep next to the fingerprint (O(action=record)); C(run_id), C(report_dir), C(rows) (the compact
        per-level rows of M(llmops.sglang.benchmark_report)) and C(markdown) (its table) by convention.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: C(check) only reads; C(record) reports whether the file would change and writes nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Benchmark only when something changed
  llmops.sglang.benchmark_state:
    path: /var/lib/llmops/benchmark/sglang-server.json
    inputs:
      server: {version: "0.5.9", image: "lmsysorg/sglang:v0.5.9-cu130-runtime", argv: "{{ sglang_server_launch.argv }}"}
      host: {gpu_model: "NVIDIA H200", gpu_count: 8, driver_version: "580.95.05", p2p: true}
      benchmark: {input_len: 1000, output_len: 1000, concurrency: [1, 8]}
    container_name: sglang-server
  register: decision

- name: Record the benchmark just made
  llmops.sglang.benchmark_state:
    path: /var/lib/llmops/benchmark/sglang-server.json
    action: record
    inputs: "{{ decision.inputs }}"
    result: {run_id: "{{ run_id }}", rows: "{{ report.summary }}", markdown: "{{ report.markdown }}"}
  when: decision.run
"""

RETURN = r"""
run:
  description: Whether to benchmark (C(check)); true after C(record).
  returned: always
  type: bool
reason:
  description: Why, in one line (no state yet, asked for, what changed since which run, or nothing changed and the age).
  returned: always
  type: str
  sample: "changed since run 20261201T060102Z: server.image_id: \"sha256:1a..\" -> \"sha256:9f..\""
changes:
  description: The input leaves that differ from the recorded ones (C(key) dotted, C(old), C(new)).
  returned: always
  type: list
  elements: dict
fingerprint:
  description: C(sha256:<hex>) of this run's inputs.
  returned: always
  type: str
inputs:
  description: The inputs as fingerprinted (O(inputs) with C(server.image_id) when O(container_name) is set).
  returned: always
  type: dict
last:
  description: The recorded state (C(fingerprint), C(inputs), C(time) epoch s, C(run_id), C(result)), or null without one.
  returned: always
  type: dict
age_s:
  description: Seconds since the recorded benchmark (null without one).
  returned: always
  type: float
age:
  description: The same, for people (C(12 min), C(3 h 05 min)); empty without one.
  returned: always
  type: str
"""

import json
import os
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.llmops.sglang.plugins.module_utils._bench.fingerprint import (
    FingerprintError, decide, fingerprint, format_age, make_state, parse_state,
)


def _image_id(module, engine, name):
    """Image id of the running container ``name`` (``<engine> inspect --format {{.Image}}``), or None when the
    container does not exist or the engine is missing (the server may be stopped; the fingerprint then says so)."""
    binary = engine if os.path.isabs(engine) else module.get_bin_path(engine)
    if not binary:
        return None
    rc, out, dummy = module.run_command([binary, "inspect", "--type", "container", "--format", "{{.Image}}", name])
    out = out.strip()
    return out if rc == 0 and out else None


def _read_state(path):
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return parse_state(fh.read(), path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            action=dict(type="str", choices=["check", "record"], default="check"),
            inputs=dict(type="dict", required=True),
            container_engine=dict(type="str", default="podman"),
            container_name=dict(type="str", default=""),
            force=dict(type="bool", default=False),
            max_age=dict(type="int", default=0),
            result=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    out = dict(changed=False, run=True, reason="", changes=[], fingerprint="", inputs={}, last=None, age_s=None, age="")
    if p["max_age"] < 0:
        module.fail_json(msg="benchmark_state: max_age=%d: give seconds >= 0 (0 = a result never expires)" % p["max_age"], **out)
    inputs = json.loads(json.dumps(p["inputs"]))
    if p["container_name"]:
        server = inputs.get("server")
        if not isinstance(server, dict):
            server = {}
        server["image_id"] = _image_id(module, p["container_engine"], p["container_name"])
        inputs["server"] = server
    out["inputs"] = inputs
    try:
        out["fingerprint"] = fingerprint(inputs)
    except FingerprintError as exc:
        module.fail_json(msg="benchmark_state: inputs: %s" % to_native(exc), **out)
    state_problem = None
    try:
        state = _read_state(p["path"])
    except FingerprintError as exc:
        # an unreadable state is no state: benchmark again, and record overwrites it
        state, state_problem = None, to_native(exc)
    except (IOError, OSError) as exc:
        module.fail_json(msg="benchmark_state: cannot read %s: %s" % (p["path"], to_native(exc)), **out)
    now = time.time()
    out["last"] = state
    if state is not None:
        out["age_s"] = now - float(state.get("time", 0))
        out["age"] = format_age(out["age_s"])

    if p["action"] == "check":
        d = decide(state, inputs, force=p["force"], now=now, max_age_s=p["max_age"])
        if state_problem:
            d["reason"] = "the recorded state cannot be used (%s)" % state_problem
        out.update(run=d["run"], reason=d["reason"], changes=d["changes"])
        module.exit_json(**out)

    new_state = make_state(inputs, p["result"], now)
    unchanged = (state is not None and state.get("fingerprint") == new_state["fingerprint"]
                 and state.get("result") == new_state["result"])
    out.update(run=True, reason="recorded run %s" % new_state.get("run_id"), changed=not unchanged)
    if unchanged or module.check_mode:
        module.exit_json(**out)
    directory = os.path.dirname(p["path"]) or "."
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".benchmark-state-")
        with os.fdopen(fd, "w") as fh:
            json.dump(new_state, fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, p["path"])
    except (IOError, OSError) as exc:
        module.fail_json(msg="benchmark_state: cannot write %s: %s. Fix: make its directory writable (run the benchmark "
                         "with become, or set sglang_benchmark_state_dir)" % (p["path"], to_native(exc)), **out)
    out["last"] = new_state
    out["age_s"] = 0.0
    out["age"] = format_age(0)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
