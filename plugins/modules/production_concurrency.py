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
  - With O(log_source=none) (the default) it samples C(sglang:num_running_reqs) and C(sglang:num_queue_reqs) from
    C(/metrics) (the server needs C(--enable-metrics)) every O(interval) seconds for O(duration) seconds, and the mean
    queue time over the window from the C(sglang:queue_time_seconds) histogram (sum and count deltas). C(/metrics) is read
    like every other endpoint, with O(api_key) and O(validate_certs).
  - With O(log_source=journald), C(podman), C(docker) or C(file) it reads the server's log within O(log_since) (the
    collection's one log reader, the same options as M(llmops.sglang.speculative_check)) and takes every
    C(Decode batch) line of rank 0 (by default within the last hour, O(log_since=1h); SGLang 0.4.10 - 0.5.23 formats,
    C(logs.parse_batch_line)); SGLang prints one every C(--decode-log-interval) decode steps, so each line stands for
    the same number of steps.
  - Samples with no running request (an idle server) are left out unless O(include_idle).
author:
  - llmops.sglang developers (@llmops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang.sglang_http
  - llmops.sglang.sglang_log
options:
  source:
    description:
      - The name this choice had before the log options were shared with M(llmops.sglang.speculative_check), kept so that
        existing playbooks work - C(metrics) is O(log_source=none), C(journald), C(podman), C(docker) and C(file) are
        the O(log_source) of that name.
      - Give O(log_source) in new playbooks. Setting both to different sources is refused.
    type: str
    choices: [metrics, journald, podman, docker, file]
  log_since:
    # the fragment's option with another default: the last hour, the recent production load
    default: 1h
  duration:
    description: Seconds to sample C(/metrics) (O(log_source=none)).
    type: float
    default: 60
  interval:
    description: Seconds between two C(/metrics) samples (O(log_source=none)).
    type: float
    default: 1.0
  timeout:
    description: Seconds for one C(/metrics) request.
    type: float
    default: 10
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
  - module: llmops.sglang.speculative_check
"""

EXAMPLES = r"""
- name: Sample /metrics for ten minutes
  llmops.sglang.production_concurrency:
    duration: 600
    levels: [1, 4, 16, 64]
  register: prod

- name: Read the last day of Decode batch lines from the journal
  llmops.sglang.production_concurrency:
    log_source: journald
    log_unit: sglang-server.service
    log_since: 1d
    log_max_bytes: 67108864
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
  description: Mean queue time over the sampling window in seconds (O(log_source=none), null without queued requests or the histogram).
  returned: always
  type: float
accept_length:
  description:
    - The mean accept length over the busy samples that report one (C(sglang:spec_accept_length), or the Decode line's
      C(accept len)) as C({mean, samples}); null for a server without speculation. Tokens per verify step per request,
      bonus token included.
  returned: always
  type: dict
summary:
  description: The distribution in one line, as the production_concurrency playbook prints it.
  returned: success
  type: str
  sample: "running requests over 412 samples: p50 9, p90 14, p99 17, max 19; queue p90 0, max 3, queued in 2 % of samples"
window:
  description:
    - What was read - C(source) (C(metrics) or the O(log_source)), C(samples_read), and C(seconds) and C(errors) (metrics),
      or C(since) (the window's start, local time), C(lines), C(bytes), C(truncated) (older text cut by O(log_max_bytes))
      and C(command) or C(path) (logs).
  returned: always
  type: dict
"""

import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils._server import metrics as sm
from ansible_collections.llmops.sglang.plugins.module_utils._server.client import SGLangHTTPError, http_argument_spec, module_client
from ansible_collections.llmops.sglang.plugins.module_utils._server.log_source import check_log_options, log_argument_spec, read_log
from ansible_collections.llmops.sglang.plugins.module_utils._server.logs import parse_batch_line
from ansible_collections.llmops.sglang.plugins.module_utils._tune import decision as sd

#: A rank-0 tag among SGLang's rank tags (``TP0``, ``DP0 TP0 EP0``); a line without tags is rank 0 too (tp_size 1).
_RANK0_RE = re.compile(r"\bTP0\b")
_METRICS_FIX = "Fix: start the server with --enable-metrics (sglang_server_enable_metrics: true) or read its log (log_source)."


def decode_samples(text):
    """The rank-0 ``Decode batch`` lines of ``text`` (any SGLang version's format), parsed (``logs.parse_batch_line``)."""
    out = []
    for line in text.splitlines():
        if "Decode batch" not in line:
            continue
        parsed = parse_batch_line(line)
        if not parsed or parsed["kind"] != "decode":
            continue
        if parsed["rank"] and not _RANK0_RE.search(parsed["rank"]):
            continue
        out.append(parsed)
    return out


def _histogram_sum_count(parsed, name):
    total = sm.values(parsed, name + "_sum")
    count = sm.values(parsed, name + "_count")
    return (sum(total) if total else None), (sum(count) if count else None)


def sample_metrics(module, client, duration, interval):
    """Sample ``/metrics`` through ``client`` (an SGLangClient): ``(samples, queue_time_mean_s, window)``. Fails the
    module when the server has no ``/metrics`` (404), when three reads fail before any sample, or without samples."""
    samples = []
    first = last = None
    started = time.monotonic()
    errors = []
    while True:
        t = time.monotonic()
        try:
            text = client.metrics_text()
        except SGLangHTTPError as exc:
            errors.append(str(exc))
            if len(errors) >= 3 and not samples:
                module.fail_json(msg="cannot read %s/metrics (%s). %s" % (client.base_url, errors[-1], _METRICS_FIX))
            text = ""
        if text is None:
            module.fail_json(msg="%s/metrics answered 404: the server was started without --enable-metrics. %s"
                                 % (client.base_url, _METRICS_FIX))
        parsed = sm.parse_prometheus(text)
        running = sm.values(parsed, "sglang:num_running_reqs")
        queue = sm.values(parsed, "sglang:num_queue_reqs")
        if running:
            accept = sm.values(parsed, "sglang:spec_accept_length")
            samples.append({"running_req": sum(running), "queue_req": sum(queue) if queue else 0,
                            "accept_len": max(accept) if accept else None})
        if text:
            qt = _histogram_sum_count(parsed, "sglang:queue_time_seconds")
            first = first or qt
            last = qt
        if t - started >= duration:
            break
        time.sleep(max(0.0, interval - (time.monotonic() - t)))
    queue_mean = None
    if first and last and None not in first + last and last[1] > first[1]:
        queue_mean = (last[0] - first[0]) / (last[1] - first[1])
    window = {"source": "metrics", "seconds": round(time.monotonic() - started, 3), "samples_read": len(samples), "errors": errors[:3]}
    if not samples:
        module.fail_json(msg="%s/metrics has no sglang:num_running_reqs. %s" % (client.base_url, _METRICS_FIX), window=window)
    return samples, queue_mean, window


def accept_length_summary(samples):
    """Mean accept length over the busy samples that report one (> 0: a server with speculation): ``{"mean", "samples"}``,
    or None. Sources: ``sglang:spec_accept_length`` (SGLang's last decode-log interval, tokens per verify step per request,
    bonus included) or the Decode batch line's ``accept len``."""
    values = [s["accept_len"] for s in samples if (s.get("running_req") or 0) > 0
              and isinstance(s.get("accept_len"), (int, float)) and not isinstance(s.get("accept_len"), bool) and s["accept_len"] > 0]
    if not values:
        return None
    return {"mean": sum(values) / float(len(values)), "samples": len(values)}


def summary_line(dist, queue_mean):
    """The distribution in one line (RETURN ``summary``), e.g. ``running requests over 2 samples: p50 1, p90 1, p99 1,
    max 1; queue p90 0, max 0, queued in 0 % of samples``, with ``, mean queue time 0.012 s`` when measured."""
    run, queue = dist["running"], dist["queue"]
    line = ("running requests over %d samples: p50 %s, p90 %s, p99 %s, max %s; queue p90 %s, max %s, queued in %.0f %% of samples"
            % (dist["samples"], run["p50"], run["p90"], run["p99"], run["max"], queue["p90"], queue["max"],
               100 * (dist["queued_fraction"] or 0)))
    return line + (", mean queue time %.3f s" % queue_mean if queue_mean is not None else "")


def resolve_log_source(params):
    """``log_source`` after the older option ``source`` (``metrics`` = ``none``); ValueError when both name a source and differ."""
    if params.get("source") is None:
        return params["log_source"]
    wanted = "none" if params["source"] == "metrics" else params["source"]
    if params["log_source"] not in ("none", wanted):
        raise ValueError("source=%s and log_source=%s name two different sources; give only log_source (source is its older "
                         "name, source=metrics is log_source=none)" % (params["source"], params["log_source"]))
    return wanted


def log_samples(module, params):
    """Rank-0 Decode samples of the server log and the window dict; fails the module when the log cannot be read."""
    text, info = read_log(module, params)
    if info["status"] != "ok":
        module.fail_json(msg="cannot read the server log: %s" % info.get("msg"), window=info)
    samples = decode_samples(text)
    window = dict((k, info[k]) for k in ("source", "since", "lines", "bytes", "truncated", "command", "path") if k in info)
    window["samples_read"] = len(samples)
    if info["truncated"]:
        module.warn("production_concurrency: only the newest %d bytes of the log were read (log_max_bytes), so the window starts "
                    "later than log_since=%s; raise log_max_bytes to cover it" % (params["log_max_bytes"], params["log_since"]))
    return samples, window


def main():
    argument_spec = http_argument_spec()
    argument_spec.update(log_argument_spec(log_since="1h"))
    argument_spec.update(
        source=dict(type="str", choices=["metrics", "journald", "podman", "docker", "file"]),
        duration=dict(type="float", default=60.0),
        interval=dict(type="float", default=1.0),
        timeout=dict(type="float", default=10.0),
        levels=dict(type="list", elements="int", default=[]),
        include_idle=dict(type="bool", default=False),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    errors = []
    try:
        p["log_source"] = resolve_log_source(p)
    except ValueError as exc:
        errors.append(str(exc))
    errors.extend(check_log_options(p))
    if p["duration"] < 0 or p["interval"] <= 0 or p["timeout"] <= 0:
        errors.append("duration=%s must be >= 0 s, interval=%s and timeout=%s > 0 s" % (p["duration"], p["interval"], p["timeout"]))
    if [lv for lv in p["levels"] if lv < 1]:
        errors.append("levels=%s: every level must be a concurrency >= 1" % (p["levels"],))
    try:
        client = module_client(module, p["timeout"])
    except ValueError as exc:
        errors.append(str(exc))
    if errors:
        module.fail_json(msg="production_concurrency: bad options: " + "; ".join(errors), errors=errors)
    queue_mean = None
    if p["log_source"] == "none":
        samples, queue_mean, window = sample_metrics(module, client, p["duration"], p["interval"])
    else:
        samples, window = log_samples(module, p)
    dist = sd.running_distribution(samples, include_idle=p["include_idle"])
    weights = {}
    if p["levels"] and dist["samples"]:
        weights = dict((str(k), v) for k, v in sd.distribution_weights(dist["histogram"], p["levels"]).items())
    dist["histogram"] = dict((str(k), v) for k, v in sorted(dist["histogram"].items()))
    if not dist["samples"]:
        module.fail_json(msg="no busy samples in the window (%s): the server was idle, or the window is wrong. Fix: widen log_since / "
                             "duration, or sample while the service takes traffic." % window, distribution=dist, window=window)
    module.exit_json(changed=False, distribution=dist, weights=weights, queue_time_mean_s=queue_mean, window=window,
                     accept_length=accept_length_summary(samples), summary=summary_line(dist, queue_mean))


if __name__ == "__main__":
    main()
