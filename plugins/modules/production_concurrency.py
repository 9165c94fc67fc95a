#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: production_concurrency
short_description: Measure the concurrency a live SGLang server really runs at (running-request distribution)
version_added: "1.1.0"
description:
  - Reads the running-request count of a live SGLang server and reports its distribution - p50, p90, p99, max and mean of
    running requests, the queue (C(#queue-req)) and the share of samples with a queue - plus, given the benchmark levels,
    the weights that let C(spec_tune) take the decision over that distribution instead of one guessed number.
  - O(source=metrics) samples C(sglang:num_running_reqs) and C(sglang:num_queue_reqs) from C(/metrics) (the server needs
    C(--enable-metrics)) every O(interval) seconds for O(duration) seconds, and the mean queue time over the window from the
    C(sglang:queue_time_seconds) histogram (sum and count deltas).
  - O(source=journald), C(podman), C(docker) or C(file) reads the server's log since O(log_since) and takes every
    C(Decode batch) line of rank 0 (SGLang 0.4.10 - 0.5.23 formats, C(sglang_logs.parse_batch_line)); SGLang prints one
    every C(--decode-log-interval) decode steps, so each line stands for the same number of steps.
  - Samples with no running request (an idle server) are left out unless O(include_idle).
author:
  - llmops.sglang developers (@llmops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  source:
    description: Where the running-request counts come from.
    type: str
    choices: [metrics, journald, podman, docker, file]
    default: metrics
  url:
    description: Base URL of the server for O(source=metrics).
    type: str
    default: http://127.0.0.1:30000
  duration:
    description: Seconds to sample C(/metrics) (O(source=metrics)).
    type: float
    default: 60
  interval:
    description: Seconds between two C(/metrics) samples (O(source=metrics)).
    type: float
    default: 1.0
  timeout:
    description: Seconds for one C(/metrics) request.
    type: float
    default: 10
  log_unit:
    description: systemd unit for O(source=journald).
    type: str
    default: sglang-server.service
  log_container:
    description: Container name for O(source=podman) and O(source=docker).
    type: str
    default: sglang-server
  log_path:
    description: Log file for O(source=file).
    type: path
  log_since:
    description: Read the log since this long ago (C(30m), C(2h), C(900s), C(1d)) or this local time (C(2026-11-20 09:14:00)).
    type: str
    default: 1h
  log_max_lines:
    description: At most this many log lines are read (the newest).
    type: int
    default: 200000
  levels:
    description: Benchmark concurrency levels; when given, C(weights) maps each level to the weight of the observed counts
      nearest to it (log2 scale), each count weighted by its samples times the count (tokens scale with running requests).
    type: list
    elements: int
    default: []
  include_idle:
    description: Count samples with 0 running requests.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: The module only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Standard library only. Runs on the serving host (loopback URL, local journal).
seealso:
  - module: llmops.sglang.spec_tune
"""

EXAMPLES = r"""
- name: Sample /metrics for ten minutes
  llmops.sglang.production_concurrency:
    source: metrics
    duration: 600
    levels: [1, 4, 16, 64]
  register: prod

- name: Read the last day of Decode batch lines from the journal
  llmops.sglang.production_concurrency:
    source: journald
    log_unit: sglang-server.service
    log_since: 1d
    levels: [1, 4, 16, 64]
"""

RETURN = r"""
distribution:
  description: C(samples) (int), C(running) and C(queue) (dicts of p50, p90, max, mean; running also p99; requests),
    C(queued_fraction) (0-1), C(histogram) (running count -> samples).
  returned: always
  type: dict
weights:
  description: Level -> weight (only levels that received weight; empty without O(levels)).
  returned: always
  type: dict
queue_time_mean_s:
  description: Mean queue time over the sampling window in seconds (O(source=metrics), null without queued requests or the histogram).
  returned: always
  type: float
window:
  description: What was read - C(source), C(samples_read), and C(seconds) (metrics) or C(lines), C(command)/C(path) (logs).
  returned: always
  type: dict
"""

import datetime
import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.llmops.sglang.plugins.module_utils import sglang_metrics as sm
from ansible_collections.llmops.sglang.plugins.module_utils import spec_decision as sd
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_logs import parse_batch_line

_DURATION_RE = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_ABSOLUTE_RE = re.compile(r"^\s*(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2})?)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(value):
    """``log_since`` -> absolute local time ``YYYY-MM-DD HH:MM:SS``; ValueError naming the option when unreadable."""
    m = _DURATION_RE.match(str(value))
    if m:
        start = datetime.datetime.now() - datetime.timedelta(seconds=int(m.group(1)) * _UNIT_SECONDS[m.group(2)])
        return start.strftime("%Y-%m-%d %H:%M:%S")
    m = _ABSOLUTE_RE.match(str(value))
    if m:
        return "%s %s" % (m.group(1), m.group(2) if m.group(2).count(":") == 2 else m.group(2) + ":00")
    raise ValueError("log_since=%r is not a duration like 30m, 2h, 900s, 1d or a local time like '2026-11-20 09:14:00'. "
                     "Fix: give one of those forms." % (value,))


def decode_samples(text, since=None):
    """Rank-0 ``Decode batch`` lines of ``text`` (any SGLang version's format) at or after ``since`` (local time text)."""
    out = []
    for line in text.splitlines():
        if "Decode batch" not in line:
            continue
        parsed = parse_batch_line(line)
        if not parsed or parsed["kind"] != "decode":
            continue
        if parsed["rank"] and not re.search(r"\bTP0\b", parsed["rank"]):
            continue
        if since is not None and parsed["time"] is not None and parsed["time"] < since:
            continue
        out.append(parsed)
    return out


def _histogram_sum_count(parsed, name):
    total = sm.values(parsed, name + "_sum")
    count = sm.values(parsed, name + "_count")
    return (sum(total) if total else None), (sum(count) if count else None)


def sample_metrics(module, url, duration, interval, timeout):
    """Sample ``/metrics``: (samples, queue_time_mean_s, window)."""
    samples = []
    first = last = None
    started = time.monotonic()
    errors = []
    while True:
        t = time.monotonic()
        try:
            text = open_url(url.rstrip("/") + "/metrics", timeout=timeout, validate_certs=False).read().decode("utf-8", "replace")
            parsed = sm.parse_prometheus(text)
            running = sm.values(parsed, "sglang:num_running_reqs")
            queue = sm.values(parsed, "sglang:num_queue_reqs")
            if running:
                samples.append({"running_req": sum(running), "queue_req": sum(queue) if queue else 0})
            qt = _histogram_sum_count(parsed, "sglang:queue_time_seconds")
            first = first or qt
            last = qt
        # any network or parse error is reported, not raised
        except Exception as exc:    # pylint: disable=broad-except
            errors.append(str(exc))
            if len(errors) >= 3 and not samples:
                module.fail_json(msg="cannot read %s/metrics (%s). Fix: start the server with --enable-metrics "
                                     "(sglang_server_enable_metrics: true) or use a log source." % (url, errors[-1]))
        if t - started >= duration:
            break
        time.sleep(max(0.0, interval - (time.monotonic() - t)))
    queue_mean = None
    if first and last and None not in first + last and last[1] > first[1]:
        queue_mean = (last[0] - first[0]) / (last[1] - first[1])
    if samples and all(s["running_req"] is None for s in samples):
        samples = []
    window = {"source": "metrics", "seconds": round(time.monotonic() - started, 3), "samples_read": len(samples), "errors": errors[:3]}
    if not samples:
        module.fail_json(msg="%s/metrics has no sglang:num_running_reqs. Fix: start the server with --enable-metrics "
                             "(sglang_server_enable_metrics: true) or use a log source." % url, window=window)
    return samples, queue_mean, window


def read_log(module, p):
    """The log text and a window dict for the log sources."""
    src = p["source"]
    since = parse_since(p["log_since"])
    if src == "file":
        if not p["log_path"]:
            module.fail_json(msg="source=file needs log_path. Fix: set log_path to the server's log file.")
        try:
            with open(p["log_path"], "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot read log_path=%s: %s" % (p["log_path"], exc))
        lines = text.splitlines()[-p["log_max_lines"]:]
        return "\n".join(lines), since, {"source": "file", "path": p["log_path"]}
    if src == "journald":
        binary = module.get_bin_path("journalctl", required=True)
        cmd = [binary, "--no-pager", "-o", "short-iso", "-u", p["log_unit"], "-n", str(p["log_max_lines"]), "--since", since]
    else:
        binary = module.get_bin_path(src, required=True)
        cmd = [binary, "logs", "--tail", str(p["log_max_lines"]), "--since", since.replace(" ", "T"), p["log_container"]]
    rc, out, err = module.run_command(cmd, check_rc=False, environ_update={"LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg="%s exited %d: %s" % (" ".join(cmd), rc, (err or out).strip()[-500:]))
    text = out if src == "journald" else (out or "") + "\n" + (err or "")
    return text, since, {"source": src, "command": cmd}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", default="metrics", choices=["metrics", "journald", "podman", "docker", "file"]),
            url=dict(type="str", default="http://127.0.0.1:30000"),
            duration=dict(type="float", default=60.0),
            interval=dict(type="float", default=1.0),
            timeout=dict(type="float", default=10.0),
            log_unit=dict(type="str", default="sglang-server.service"),
            log_container=dict(type="str", default="sglang-server"),
            log_path=dict(type="path"),
            log_since=dict(type="str", default="1h"),
            log_max_lines=dict(type="int", default=200000),
            levels=dict(type="list", elements="int", default=[]),
            include_idle=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["duration"] < 0 or p["interval"] <= 0:
        module.fail_json(msg="duration=%s must be >= 0 s and interval=%s > 0 s" % (p["duration"], p["interval"]))
    bad = [lv for lv in p["levels"] if lv < 1]
    if bad:
        module.fail_json(msg="levels=%s: every level must be a concurrency >= 1" % (p["levels"],))
    queue_mean = None
    if p["source"] == "metrics":
        samples, queue_mean, window = sample_metrics(module, p["url"], p["duration"], p["interval"], p["timeout"])
    else:
        try:
            text, since, window = read_log(module, p)
        except ValueError as exc:
            module.fail_json(msg=str(exc))
        samples = decode_samples(text, since)
        window.update(samples_read=len(samples), since=since)
    dist = sd.running_distribution(samples, include_idle=p["include_idle"])
    weights = {}
    if p["levels"] and dist["samples"]:
        weights = dict((str(k), v) for k, v in sd.distribution_weights(dist["histogram"], p["levels"]).items())
    dist["histogram"] = dict((str(k), v) for k, v in sorted(dist["histogram"].items()))
    if not dist["samples"]:
        module.fail_json(msg="no busy samples in the window (%s): the server was idle, or the window is wrong. Fix: widen log_since / "
                             "duration, or sample while the service takes traffic." % window, distribution=dist, window=window)
    module.exit_json(changed=False, distribution=dist, weights=weights, queue_time_mean_s=queue_mean, window=window)


if __name__ == "__main__":
    main()
