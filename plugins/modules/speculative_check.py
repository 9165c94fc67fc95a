#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: speculative_check
short_description: Prove that a running SGLang server's draft model loaded and speculative decoding is accepting tokens
version_added: "1.0.0"
description:
  - Reads a running SGLang server (0.4.10 to 0.5.23) and returns verdicts, each with a reason and the evidence it rests on.
  - C(ready) - C(/health) answers 200; 503 and connection failures are retried until O(ready_timeout).
  - C(configured) - the server runs the speculative algorithm (C(/server_info) C(speculative_algorithm); NEXTN is reported as EAGLE),
    with a draft path or the model's own MTP head; or, with O(expect_speculative=false), runs without speculation.
  - C(loaded) - a draft C(Load weight end.) line (class C(...MTP), C(...NextN), C(...Eagle3)) follows the target's on every rank
    that logged one; without such lines in the log window, accepted draft tokens are taken as proof of a working draft.
  - C(accepting) - the accept length (from the probe's C(meta_info), else the logs, else C(/metrics), else the server's lifetime
    C(avg_spec_accept_length)) is at least O(min_accept_length); 1.00 +/- 0.02 is reported as "draft loaded but never accepted"
    with its known causes.
  - C(as_intended) - every key of O(expected) equals what the running server reports (C(/server_info), else the C(server_args=) log line).
    With C(speculative_adaptive=true) expected (SGLang 0.5.14+ adaptive speculative decoding), it also fails when the log of the
    server start holds SGLang's C(speculative_adaptive disabled - <reason>) line (the server then runs static), with that line as
    evidence, and passes only when the server reports C(speculative_adaptive) true; the evidence tells whether the log was read
    and reaches back to the server start, and lists the C(Adaptive spec params updated) step switches logged.
  - Evidence sources are optional and reported separately - C(/server_info) (falling back to C(/get_server_info)), C(/model_info),
    a non-stream C(/generate) probe with C(ignore_eos), C(/metrics) (only with C(--enable-metrics)), and logs (a journald unit,
    a docker or podman container, or a file) bounded by O(log_since) and O(log_max_bytes).
  - The task fails (with every verdict and all evidence) when a verdict named in O(fail_on) is not C(pass) or C(skip).
  - The accept rate is recomputed one way for every version as (C(accept_length) - 1) / (C(num_draft_tokens) - 1), the fraction of
    proposed draft tokens accepted, because SGLang changed the definition it prints in 0.5.14.
  - A probe that gets no answer within O(timeout) while C(/health) answers 200 is a stalled generation - C(accepting) fails and
    names the stall (the time waited, the last Decode line logged) instead of reporting a missing accept length; a probe that
    fails otherwise (an HTTP error, an error object, a broken connection) fails C(accepting) with that error.
author:
  - llmops.sglang contributors (@llmops)
extends_documentation_fragment:
  - llmops.sglang.sglang_http
  - llmops.sglang.sglang_log
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The module only reads (HTTP GETs, one probe generation, log reads); it behaves the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
options:
  timeout:
    description: Seconds allowed for each HTTP request, the probe generation included.
    type: float
    default: 60
  ready_timeout:
    description: Seconds to wait for C(/health) to answer 200 (503 and connection failures are retried). C(0) polls once.
    type: float
    default: 600
  ready_interval:
    description: Seconds between two readiness polls.
    type: float
    default: 5
  probe:
    description:
      - Send one non-stream C(/generate) request (temperature 0, C(ignore_eos)) and read the spec fields of its final C(meta_info)
        (C(spec_accept_length), C(spec_verify_ct), ...). This is the freshest accept length; it also makes the server log Decode lines.
    type: bool
    default: true
  probe_prompt:
    description: Prompt text of the probe.
    type: str
    default: "Count from 1 to 500, separated by commas:"
  probe_max_new_tokens:
    description: Tokens the probe generates (exactly, because of C(ignore_eos)). With the default C(--decode-log-interval 40), 256 tokens
      give at least two Decode lines even at an accept length of 3.
    type: int
    default: 256
  metrics:
    description: Read C(/metrics) (C(sglang:spec_accept_length), C(sglang:gen_throughput), ...). A 404 (server started without
      C(--enable-metrics)) is reported, not an error.
    type: bool
    default: true
  expect_speculative:
    description: Whether the server is meant to run speculative decoding. With C(false), C(configured) passes when speculation is
      off and C(loaded)/C(accepting) are skipped (the MTP-off arm of an A/B run).
    type: bool
    default: true
  expected:
    description:
      - The configuration the server must run, as SGLang reports it in C(/server_info) (flattened server args), for example the
        C(expected) dict of the C(llmops.sglang.sglang_expected_server_args) filter. Keys with a null value are not compared.
      - Compared keys include C(speculative_algorithm) (C(NEXTN) is compared as C(EAGLE), as SGLang rewrites it),
        C(speculative_num_steps), C(speculative_eagle_topk), C(speculative_num_draft_tokens) (with topk 1 and only steps given,
        steps + 1 is expected), C(speculative_draft_model_path), C(tp_size), C(attention_backend), C(max_running_requests),
        and any other server arg such as C(model_path), C(disable_radix_cache), C(mamba_scheduler_strategy).
      - Numbers are compared as numbers, strings case-insensitively for the algorithm and the attention backend, exactly otherwise.
    type: dict
    default: {}
  min_accept_length:
    description: Lowest acceptable accept length (tokens per verify step per request, bonus token included; 1.00 = nothing accepted).
    type: float
    default: 1.2
  accept_length_drop_warn:
    description:
      - Warn (C(warnings_found) key C(accept_length_falling), and an Ansible warning) when the accept length falls by more than this
        fraction across the log window - the median of the first quarter of the Decode lines that print C(accept len) against the
        median of the last quarter (at least 4 lines; see RV(accept_length_trend)).
      - Catches acceptance that decays over uptime while the median still passes, as in sgl-project/sglang#37326 (2.00 to 1.05).
        A change of workload also moves the accept length, so this warns and never fails.
      - A fraction between 0 and 1; C(0.2) warns below 80% of the starting accept length.
    type: float
    default: 0.2
  fail_on:
    description: Verdicts that fail the task when their status is C(fail) or C(unknown). Others are still computed and returned.
    type: list
    elements: str
    choices: [ready, configured, loaded, accepting, as_intended]
    default: [ready, configured, loaded, accepting, as_intended]
notes:
  - The probe runs in check mode too - it changes no state of the server beyond its lifetime counters.
  - Memory figures are in GB as SGLang prints them (bytes / 2**30).
seealso:
  - name: SGLang speculative decoding
    description: SGLang's documentation of EAGLE/MTP speculative decoding.
    link: https://docs.sglang.ai/advanced_features/speculative_decoding.html
"""

EXAMPLES = r"""
- name: Prove MTP works on the local server (logs from the systemd unit)
  llmops.sglang.speculative_check:
    log_source: journald
    log_unit: sglang-server.service
    log_since: 2h
    expected:
      speculative_algorithm: NEXTN
      speculative_num_steps: 1
      speculative_eagle_topk: 1
      speculative_num_draft_tokens: 2
      tp_size: 4
      attention_backend: triton
      max_running_requests: 64

- name: Check the MTP-off arm of an A/B run, reading a podman container's log
  llmops.sglang.speculative_check:
    url: http://127.0.0.1:30000
    expect_speculative: false
    log_source: podman
    log_container: sglang
    fail_on: [ready, configured]

- name: Use the renderer's expected server args and keep the facts
  llmops.sglang.speculative_check:
    api_key: "{{ sglang_server_api_key | default(omit) }}"
    expected: "{{ sglang_server_description | llmops.sglang.sglang_expected_server_args(sglang_server_version) }}"
  register: spec
"""

RETURN = r"""
passed:
  description: True when every verdict in O(fail_on) passed (or was skipped).
  returned: always
  type: bool
failed_verdicts:
  description: Names of the required verdicts that did not pass.
  returned: always
  type: list
  elements: str
  sample: [accepting]
verdicts:
  description: One entry per verdict (C(ready), C(configured), C(loaded), C(accepting), C(as_intended)), each
    C({status, reason, evidence}); status is C(pass), C(fail), C(unknown) (no evidence) or C(skip) (does not apply).
  returned: always
  type: dict
  sample:
    accepting:
      status: fail
      reason: "draft loaded but never accepted: accept length 1.00 (probe meta_info)"
      evidence: {accept_length: 1.0, source: probe, causes: ["the checkpoint lacks the mtp.* tensors ..."]}
accept_length:
  description: Accept length used by the C(accepting) verdict (tokens per verify step per request, bonus included).
  returned: always
  type: float
  sample: 2.0
accept_length_source:
  description: Where C(accept_length) came from - C(probe), C(logs), C(metrics), C(server_info), or null.
  returned: always
  type: str
accept_length_trend:
  description:
    - Accept length at the start of the log window against its end - C({lines, window_lines, first, last, change, change_fraction,
      first_from, first_to, last_from, last_to, drop_warn, falling}) - C(first)/C(last) are the medians of the first/last
      C(window_lines) (a quarter) of the C(lines) Decode lines that print C(accept len); times are SGLang's log times.
    - Null when fewer than 4 Decode lines print an accept length (or no log was read).
  returned: always
  type: dict
  sample: {lines: 12, window_lines: 3, first: 2.0, last: 1.05, change: -0.95, change_fraction: -0.475, falling: true, drop_warn: 0.2,
           first_from: "2026-11-20 09:14:02", first_to: "2026-11-20 09:16:40", last_from: "2026-11-20 17:02:11", last_to: "2026-11-20 17:05:30"}
accept_rate:
  description: (C(accept_length) - 1) / (C(num_draft_tokens) - 1) - accepted / proposed draft tokens, same definition for every version.
  returned: always
  type: float
  sample: 1.0
num_draft_tokens:
  description: C(speculative_num_draft_tokens) of the running server (or the expected one when the server does not report it).
  returned: always
  type: int
gen_throughput:
  description: Decode throughput in tok/s - median of the logs' C(gen throughput) over Decode lines that are not idle intervals,
    else C(sglang:gen_throughput), else C(internal_states[].last_gen_throughput).
  returned: always
  type: float
  sample: 135.04
gen_throughput_source:
  description: Where C(gen_throughput) came from (C(logs), C(metrics), C(server_info)) or null.
  returned: always
  type: str
probe_tok_per_s:
  description: Completion tokens / C(e2e_latency) of the probe (tok/s), null without a probe.
  returned: always
  type: float
draft_class:
  description: Class of the draft model from its C(Load weight end.) line (e.g. C(Qwen3_5ForCausalLMMTP)), null when not logged.
  returned: always
  type: str
draft_kind:
  description: Kind of draft model from its class name - C(mtp), C(nextn), C(eagle) or C(eagle3); null when no draft C(Load weight end.) line was logged.
  returned: always
  type: str
  sample: mtp
target_class:
  description: Class of the target model, from its C(Load weight end.) line, else the first of C(/model_info) C(architectures); null when neither is known.
  returned: always
  type: str
  sample: Qwen3_5MoeForConditionalGeneration
draft_mem_gb:
  description: Draft C(mem usage) per rank in GB as printed by SGLang, keyed by the rank tag (C(TP0), C(DP0 TP0 EP0), ...).
  returned: always
  type: dict
  sample: {"TP0": 1.91, "TP1": 1.91, "TP2": 1.91, "TP3": 1.91}
speculation:
  description: C(on), C(off) or C(unknown) - what the evidence says the server runs.
  returned: always
  type: str
server_version:
  description: SGLang version reported by C(/server_info).
  returned: always
  type: str
lines:
  description:
    - The verdicts in a few lines, as playbooks print them - the outcome (C(PASS) or C(FAIL)), the SGLang version and the
      speculation state; the accept length with its source, the accept rate and the draft tokens; the generation throughput
      with its source and the probe's; the draft class and its memory per rank; one line per verdict (its name, status and
      reason, separated by colons); the warning keys.
    - Lines whose values are unknown are left out.
  returned: always
  type: list
  elements: str
  sample:
    - "PASS (SGLang 0.5.9, speculation on)"
    - "accept length 2.0 (probe), accept rate 1.0 with 2 draft tokens"
    - "ready: pass: /health answered 200"
    - "warnings: "
warnings_found:
  description: Warnings that matter, from the logs (48-request cap, radix cache disabled, custom all-reduce disabled, spec v2 on/off,
    C(accept_length_falling) from RV(accept_length_trend), ...) and from the server args (C(max_running_requests_capped) when the
    server runs speculation at 48 running requests; C(dp_attention_accept_length_one_rank) when attention DP is on and the accept
    length does not come from the probe, since the scheduler's figure then covers one DP rank), each C({key, meaning, text}),
    with C(time) and C(rank) when the log line carries them.
  returned: always
  type: list
  elements: dict
refusals:
  description: Startup refusals found in the logs (e.g. the 0.5.10 radix-cache ValueError), each C({key, cause, fix, text}).
  returned: always
  type: list
  elements: dict
sources:
  description: Per evidence source (C(ready), C(server_info), C(model_info), C(probe), C(metrics), C(logs)) its status
    (C(ok), C(error), C(disabled), C(skipped)) and what was read.
  returned: always
  type: dict
ansible_facts:
  description: Facts for later plays.
  returned: always
  type: dict
  contains:
    llmops_speculative:
      description:
        - The verdicts and measurements for later plays. The keys C(passed), C(speculation), C(accept_length),
          C(accept_length_source), C(accept_length_trend), C(accept_rate), C(num_draft_tokens), C(gen_throughput), C(gen_throughput_source),
          C(probe_tok_per_s), C(draft_class), C(draft_kind), C(draft_mem_gb), C(target_class) and C(server_version) hold the
          same values as the return values of the same name; the others follow.
      type: dict
      returned: always
      contains:
        algorithm:
          description: C(speculative_algorithm) the running server reports (C(EAGLE) for NEXTN), null without speculation.
          type: str
        warnings:
          description: The C(key) of each entry of RV(warnings_found).
          type: list
          elements: str
        verdicts:
          description: Each verdict name mapped to C({status, reason}) (RV(verdicts) without the evidence).
          type: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._server.client import (
    SGLangHTTPError,
    SGLangNotReady,
    avg_spec_accept_length,
    http_argument_spec,
    last_gen_throughput,
    module_client,
)
from ansible_collections.llmops.sglang.plugins.module_utils._server.limits import SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT
from ansible_collections.llmops.sglang.plugins.module_utils._server.log_source import check_log_options, log_argument_spec, read_log
from ansible_collections.llmops.sglang.plugins.module_utils._server.logs import (
    NEVER_ACCEPTED_CAUSES,
    NEVER_ACCEPTED_TOLERANCE,
    is_never_accepted,
    parse_log,
    recompute_accept_rate,
)
from ansible_collections.llmops.sglang.plugins.module_utils._server.metrics import sglang_summary
from ansible_collections.llmops.sglang.plugins.module_utils._server.trends import accept_length_trend, falling_warning

VERDICTS = ("ready", "configured", "loaded", "accepting", "as_intended")
#: Expected keys compared case-insensitively (SGLang upper-cases algorithms; backends are lower-case names).
_CASELESS_KEYS = ("speculative_algorithm", "attention_backend")


def validate_params(params):
    """Return a list of error strings for bad option values (each naming the option, the value, why and the fix)."""
    errors = check_log_options(params)
    for name in ("timeout", "ready_interval"):
        if params[name] <= 0:
            errors.append("%s=%r must be a positive number of seconds" % (name, params[name]))
    if params["ready_timeout"] < 0:
        errors.append("ready_timeout=%r must be 0 (poll once) or a positive number of seconds" % (params["ready_timeout"],))
    for name in ("probe_max_new_tokens",):
        if params[name] < 1:
            errors.append("%s=%r must be at least 1" % (name, params[name]))
    if not 0 < params["accept_length_drop_warn"] < 1:
        errors.append("accept_length_drop_warn=%r must be a fraction between 0 and 1 (0.2 warns when the accept length falls by more "
                      "than 20%% across the log window); set it to such a value or leave the default" % (params["accept_length_drop_warn"],))
    if params["min_accept_length"] < 1.0:
        errors.append("min_accept_length=%r is below 1.0, the accept length with no draft token accepted; use a value such as 1.2"
                      % (params["min_accept_length"],))
    for key, value in (params.get("expected") or {}).items():
        if isinstance(value, (dict, list)):
            errors.append("expected.%s=%r: only scalar server args can be compared; remove it or give its scalar value" % (key, value))
    return errors


def normalize_expected(expected):
    """Expected server args as SGLang will report them: NEXTN -> EAGLE, topk 1 -> draft tokens = steps + 1. Null values dropped."""
    exp = dict((k, v) for k, v in (expected or {}).items() if v is not None and not (isinstance(v, str) and v.strip() == ""))
    algo = exp.get("speculative_algorithm")
    if isinstance(algo, str) and algo.upper() == "NEXTN":
        exp["speculative_algorithm"] = "EAGLE"
    try:
        if int(exp.get("speculative_eagle_topk", 0)) == 1 and "speculative_num_steps" in exp and "speculative_num_draft_tokens" not in exp:
            exp["speculative_num_draft_tokens"] = int(exp["speculative_num_steps"]) + 1
    except (TypeError, ValueError):
        pass
    return exp


def values_equal(key, expected, running):
    """Compare one server arg: numbers numerically (1e-6), booleans strictly, caseless for algorithm/backend, else exact text."""
    if isinstance(expected, bool) or isinstance(running, bool):
        if isinstance(expected, str):
            expected = expected.strip().lower() in ("true", "yes", "1")
        return bool(expected) == bool(running) and running is not None
    if running is None:
        return False
    try:
        return abs(float(expected) - float(running)) <= 1e-6
    except (TypeError, ValueError):
        pass
    if key in _CASELESS_KEYS:
        return str(expected).strip().lower() == str(running).strip().lower()
    return str(expected).strip() == str(running).strip()


def compare_expected(expected, running):
    """``(differences, matched, not_reported)`` of normalized expected args against running args (dicts)."""
    differences, matched, not_reported = [], [], []
    for key in sorted(expected):
        if key not in running:
            not_reported.append(key)
            continue
        if values_equal(key, expected[key], running[key]):
            matched.append(key)
        else:
            differences.append({"name": key, "expected": expected[key], "running": running[key]})
    return differences, matched, not_reported


def error_source(exc):
    """Source entry for a failed HTTP read: ``{status: error, msg, url, http_status, body, reason, ...}``."""
    info = exc.as_dict()
    info["http_status"] = info.pop("status")
    info["status"] = "error"
    return info


def verdict(status, reason, **evidence):
    return {"status": status, "reason": reason, "evidence": evidence}


class Checker(object):
    """Collects the evidence and computes the verdicts (no side effects beyond HTTP reads, the probe and log reads)."""

    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.sources = dict((name, {"status": "skipped"}) for name in ("ready", "server_info", "model_info", "probe", "metrics", "logs"))
        self.server_info = None
        self.model_info = None
        self.probe = None
        self.metrics = None
        self.log = None
        self.log_tail = []
        self.client = module_client(module, self.p["timeout"])

    # ---- evidence -------------------------------------------------------------------------
    def collect(self):
        ready = self._ready()
        if ready:
            self._server_info()
            self._model_info()
            if self.p["probe"]:
                self._probe()
            if self.p["metrics"]:
                self._metrics()
        if self.p["log_source"] != "none":
            self._logs()
        return ready

    def _ready(self):
        try:
            res = self.client.wait_ready(timeout_s=self.p["ready_timeout"], interval_s=self.p["ready_interval"])
            self.sources["ready"] = {"status": "ok", "elapsed_s": res["elapsed_s"], "polls": len(res["attempts"]),
                                     "status_counts": res["status_counts"]}
            return True
        except SGLangNotReady as exc:
            self.sources["ready"] = error_source(exc)
            return False

    def _server_info(self):
        try:
            endpoint, info = self.client.server_info()
            self.server_info = info
            self.sources["server_info"] = {"status": "ok", "endpoint": endpoint, "version": info.get("version")}
        except SGLangHTTPError as exc:
            self.sources["server_info"] = error_source(exc)

    def _model_info(self):
        try:
            endpoint, info = self.client.model_info()
            self.model_info = info if isinstance(info, dict) else {}
            self.sources["model_info"] = {"status": "ok", "endpoint": endpoint, "architectures": self.model_info.get("architectures"),
                                          "model_path": self.model_info.get("model_path")}
        except SGLangHTTPError as exc:
            self.sources["model_info"] = error_source(exc)

    def _probe(self):
        started = time.monotonic()
        try:
            self.probe = self.client.generate_probe(prompt=self.p["probe_prompt"], max_new_tokens=self.p["probe_max_new_tokens"])
            self.sources["probe"] = {"status": "ok", "completion_tokens": self.probe["completion_tokens"],
                                     "elapsed_s": self.probe["elapsed_s"], "tok_per_s": self.probe["tok_per_s"],
                                     "spec": self.probe["spec"]["raw"], "finish_reason": self.probe["spec"]["finish_reason"]}
        except SGLangHTTPError as exc:
            self.sources["probe"] = error_source(exc)
            self.sources["probe"]["elapsed_s"] = round(time.monotonic() - started, 3)

    def _metrics(self):
        try:
            text = self.client.metrics_text()
        except SGLangHTTPError as exc:
            self.sources["metrics"] = error_source(exc)
            return
        if text is None:
            self.sources["metrics"] = {"status": "disabled", "msg": "/metrics answered 404: the server was started without --enable-metrics"}
            return
        self.metrics = sglang_summary(text)
        self.sources["metrics"] = dict(status="ok", **dict((k, v) for k, v in self.metrics.items() if v is not None))

    def _logs(self):
        text, info = read_log(self.module, self.p)
        if info.get("status") == "ok":
            self.log = parse_log(text)
            self.log_tail = [line for line in text.splitlines() if line.strip()][-20:]
            info.update(runs=self.log["runs"], decode_lines=self.log["decode"], prefill_lines=self.log["prefill"],
                        load_weight_lines=len(self.log["load_weights"]), ready_logged=self.log["ready"])
        self.sources["logs"] = info

    # ---- derived values -------------------------------------------------------------------
    def running_args(self):
        """``(args, source)``: /server_info when read, else the server_args= log line, else ({}, None)."""
        if self.server_info is not None:
            return self.server_info, "server_info"
        if self.log and self.log.get("server_args"):
            return self.log["server_args"], "logs"
        return {}, None

    def accept_length_sources(self):
        """``[(source, accept_length)]`` in priority order: probe, logs, metrics, server_info (lifetime).

        Values below 1 - NEVER_ACCEPTED_TOLERANCE are not accept lengths (SGLang exports its spec gauges as 0 when
        speculation is off or before the first Decode log interval) and are left out. Rounded to 4 decimals.
        """
        found = []
        if self.probe and self.probe["spec"]["accept_length"] is not None:
            found.append(("probe", self.probe["spec"]["accept_length"]))
        if self.log and self.log.get("accept_length") is not None:
            found.append(("logs", self.log["accept_length"]))
        if self.metrics and self.metrics.get("accept_length") is not None:
            found.append(("metrics", self.metrics["accept_length"]))
        lifetime = avg_spec_accept_length(self.server_info) if self.server_info else None
        if lifetime is not None:
            found.append(("server_info", lifetime))
        return [(name, round(float(value), 4)) for name, value in found if float(value) >= 1.0 - NEVER_ACCEPTED_TOLERANCE]

    def gen_throughput(self):
        if self.log and self.log.get("gen_throughput") is not None:
            return self.log["gen_throughput"], "logs"
        if self.metrics and self.metrics.get("gen_throughput"):
            return self.metrics["gen_throughput"], "metrics"
        value = last_gen_throughput(self.server_info) if self.server_info else None
        if value:
            return value, "server_info"
        return None, None

    def speculation(self):
        args, source = self.running_args()
        if source is not None:
            return "on" if args.get("speculative_algorithm") else "off"
        if self.probe is not None:
            return "on" if self.probe["spec"]["accept_length"] is not None else "off"
        if self.log is not None:
            return self.log["speculation"]
        return "unknown"

    # ---- verdicts -------------------------------------------------------------------------
    def verdicts(self, ready):
        result = {}
        if ready:
            src = self.sources["ready"]
            result["ready"] = verdict("pass", "/health answered 200 after %.1f s (%d polls)" % (src["elapsed_s"], src["polls"]),
                                      status_counts=src["status_counts"])
        else:
            src = self.sources["ready"]
            refusals = (self.log or {}).get("refusals") or []
            reason = src.get("msg", "server not ready")
            if refusals:
                reason += "; the log shows a startup refusal: %s (%s; fix: %s)" % (refusals[-1]["text"], refusals[-1]["cause"], refusals[-1]["fix"])
            result["ready"] = verdict("fail", reason, status_counts=src.get("status_counts"), last_status=src.get("http_status"),
                                      refusals=refusals, log_tail=self.log_tail)
            for name in VERDICTS[1:]:
                result[name] = verdict("unknown", "not checked: the server is not ready")
            return result
        result["configured"] = self._configured()
        spec_on = result["configured"]["evidence"].get("speculative_algorithm") is not None
        if not self.p["expect_speculative"]:
            result["loaded"] = verdict("skip", "speculative decoding is not expected (expect_speculative=false)")
            result["accepting"] = verdict("skip", "speculative decoding is not expected (expect_speculative=false)")
        elif not spec_on and result["configured"]["status"] == "fail":
            result["loaded"] = verdict("fail", "no draft model: the server runs without speculative decoding")
            result["accepting"] = verdict("fail", "no speculative decoding: no accept length to check")
        else:
            result["accepting"] = self._accepting()
            result["loaded"] = self._loaded(result["accepting"])
        result["as_intended"] = self._as_intended()
        return dict((name, result[name]) for name in VERDICTS)

    def _configured(self):
        args, source = self.running_args()
        expect = self.p["expect_speculative"]
        if source is None:
            spec = self.speculation()
            if spec == "unknown":
                return verdict("unknown", "no server args (neither /server_info nor a server_args= log line) and no other evidence")
            ok = (spec == "on") == expect
            return verdict("pass" if ok else "fail", "speculation %s according to the %s (no server args read)"
                           % (spec, "probe" if self.probe is not None else "logs"), speculative_algorithm=None, source=spec)
        algo = args.get("speculative_algorithm")
        draft = args.get("speculative_draft_model_path")
        model = args.get("model_path")
        evidence = dict(speculative_algorithm=algo, speculative_draft_model_path=draft, model_path=model, source=source,
                        speculative_num_steps=args.get("speculative_num_steps"), speculative_eagle_topk=args.get("speculative_eagle_topk"),
                        speculative_num_draft_tokens=args.get("speculative_num_draft_tokens"))
        if not algo:
            if expect:
                return verdict("fail", "speculation off: the server runs without speculative decoding (speculative_algorithm is null in %s)"
                               % source, **evidence)
            return verdict("pass", "speculation off, as expected (speculative_algorithm is null in %s)" % source, **evidence)
        if not expect:
            return verdict("fail", "speculative decoding is on (speculative_algorithm %s) but expect_speculative=false" % algo, **evidence)
        if not draft or draft == model:
            where = "the model's own MTP/NextN head (speculative_draft_model_path %s)" % ("unset" if not draft else "= model_path")
        else:
            where = "draft model %s" % draft
        return verdict("pass", "speculative_algorithm %s with %s (steps %s, topk %s, draft tokens %s; from %s)"
                       % (algo, where, args.get("speculative_num_steps"), args.get("speculative_eagle_topk"),
                          args.get("speculative_num_draft_tokens"), source), draft=where, **evidence)

    def probe_failure(self):
        """``(kind, reason)`` when the probe ran and failed, else None; kind ``stall`` (no answer within ``timeout``
        although /health answered 200: generation stopped) or ``error`` (an HTTP error, an error object, a broken connection)."""
        src = self.sources["probe"]
        if not self.p["probe"] or src.get("status") != "error":
            return None
        last_decode = None
        if self.log and self.log.get("decode_lines"):
            last = self.log["decode_lines"][-1]
            last_decode = "%s (%s tok/s, #running-req %s)" % (last.get("time"), last.get("gen_throughput"), last.get("running_req"))
        waited = src.get("elapsed_s")
        timed_out = src.get("http_status") == -1 and (
            "timed out" in str(src.get("reason") or "").lower() or (waited is not None and waited >= 0.95 * self.p["timeout"]))
        if timed_out:
            return "stall", ("generation stalled: the probe /generate (%d tokens) got no answer within timeout=%g s although /health "
                             "answered 200, so the server accepts requests but stopped generating (a hung scheduler or a stalled "
                             "stream), or makes fewer than %.1f tok/s; last Decode line in the log: %s. Read the server log around "
                             "that time; restart the server, or raise timeout if it is only that slow"
                             % (self.p["probe_max_new_tokens"], self.p["timeout"], self.p["probe_max_new_tokens"] / float(self.p["timeout"]),
                                last_decode or "none read"))
        return "error", "the probe /generate failed: %s" % src.get("msg")

    def _accepting(self):
        found = self.accept_length_sources()
        evidence = {"sources": dict(found), "min_accept_length": self.p["min_accept_length"]}
        failure = self.probe_failure()
        if failure is not None and (failure[0] == "stall" or not found):
            evidence.update(probe_failure=failure[0], probe=self.sources["probe"])
            return verdict("fail", failure[1], **evidence)
        if not found:
            return verdict("unknown", "no accept length: no probe spec fields, no Decode line with accept len, no sglang:spec_accept_length, "
                           "no avg_spec_accept_length (enable probe, metrics or logs)", **evidence)
        source, value = found[0]
        evidence.update(accept_length=value, source=source)
        if is_never_accepted(value):
            evidence["causes"] = list(NEVER_ACCEPTED_CAUSES)
            return verdict("fail", "draft loaded but never accepted: accept length %.2f from the %s is 1.00 +/- %.2f (no draft token accepted)"
                           % (value, source, NEVER_ACCEPTED_TOLERANCE), **evidence)
        if value < self.p["min_accept_length"]:
            return verdict("fail", "accept length %.2f from the %s is below min_accept_length %.2f" % (value, source, self.p["min_accept_length"]),
                           **evidence)
        return verdict("pass", "accept length %.2f from the %s (>= %.2f)" % (value, source, self.p["min_accept_length"]), **evidence)

    def _loaded(self, accepting):
        log = self.log
        if log and log.get("refusals"):
            refusal = log["refusals"][-1]
            return verdict("fail", "the server refused to start: %s" % refusal["text"], refusal=refusal)
        if log and log["load_weights"]:
            evidence = dict(draft_class=log["draft_class"], target_class=log["target_class"], draft_mem_gb=log["draft_mem_gb"],
                            target_loaded_ranks=log["target_loaded_ranks"], draft_loaded_ranks=log["draft_loaded_ranks"])
            if not log["draft_class"]:
                return verdict("fail", "the target %s loaded on %s but no draft Load weight end. line followed"
                               % (log["target_class"], ", ".join(log["target_loaded_ranks"])), **evidence)
            if log["draft_before_target_ranks"]:
                return verdict("fail", "a draft loaded before the target on %s: the log window does not hold one clean server start"
                               % ", ".join(log["draft_before_target_ranks"]), **evidence)
            if log["draft_missing_ranks"]:
                return verdict("fail", "draft %s loaded on %s but not on %s"
                               % (log["draft_class"], ", ".join(log["draft_loaded_ranks"]), ", ".join(log["draft_missing_ranks"])), **evidence)
            mems = sorted(set(v for v in log["draft_mem_gb"].values() if v is not None))
            return verdict("pass", "draft %s loaded after the target %s on %s (%s GB per rank)"
                           % (log["draft_class"], log["target_class"], ", ".join(log["draft_loaded_ranks"]),
                              "/".join("%.2f" % m for m in mems) or "?"), **evidence)
        value = accepting["evidence"].get("accept_length")
        if value is not None and value > 1.0 + NEVER_ACCEPTED_TOLERANCE:
            return verdict("pass", "inferred: accepted draft tokens (accept length %.2f from the %s) prove a working draft; "
                           "no Load weight end. line was read" % (value, accepting["evidence"]["source"]),
                           inferred_from="accepting", log_status=self.sources["logs"].get("status"))
        return verdict("unknown", "no Load weight end. line was read (log_source=%s, status %s) and no accepted draft token proves a draft"
                       % (self.p["log_source"], self.sources["logs"].get("status")), log_status=self.sources["logs"].get("status"))

    def _as_intended(self):
        expected = normalize_expected(self.p["expected"])
        if not expected:
            return verdict("skip", "no expected configuration given (option expected)")
        args, source = self.running_args()
        adaptive = expected.get("speculative_adaptive") is True
        disabled = self.adaptive_disabled_line() if adaptive else None
        if disabled is not None:
            # SGLang logs this line and starts static; the line is the evidence whatever /server_info says
            return verdict("fail", "SGLang switched adaptive speculative decoding off at startup and runs static: '%s'" % disabled["text"],
                           expected=expected, adaptive_disabled=disabled, source=source)
        if source is None:
            return verdict("unknown", "the running server args could not be read (no /server_info, no server_args= log line)", expected=expected)
        differences, matched, not_reported = compare_expected(expected, args)
        evidence = dict(expected=expected, differences=differences, matched=matched, not_reported=not_reported, source=source)
        if adaptive:
            evidence["adaptive"] = self.adaptive_evidence()
        if differences:
            return verdict("fail", "the running server differs from the expected configuration: %s"
                           % "; ".join("%s expected %r, running %r" % (d["name"], d["expected"], d["running"]) for d in differences),
                           **evidence)
        if not matched:
            return verdict("unknown", "none of the expected keys is reported by the server (%s)" % ", ".join(not_reported), **evidence)
        if adaptive and "speculative_adaptive" not in matched:
            return verdict("unknown", "adaptive speculative decoding is expected but the server does not report speculative_adaptive (%s)"
                           % source, **evidence)
        note = "; adaptive on: %s" % evidence["adaptive"]["summary"] if adaptive else ""
        return verdict("pass", "%d server args match (%s)%s%s" % (len(matched), ", ".join(matched),
                                                                  "; not reported: " + ", ".join(not_reported) if not_reported else "", note),
                       **evidence)

    def adaptive_disabled_line(self):
        """The last run's ``speculative_adaptive disabled: <reason>`` log line (``{text, reason, time}``) or None."""
        return (self.log or {}).get("adaptive_disabled")

    def adaptive_evidence(self):
        """Besides the server args: whether the log was read and reaches back to the server start (SGLang logs the
        ``disabled`` line before the run's ``server_args=`` line), and the step switches it shows."""
        log = self.log
        if log is None:
            return {"log_read": False, "switches": [],
                    "summary": "the server args report it; the log was not read (log_source %s), so the absence of a "
                               "'speculative_adaptive disabled' line was not checked" % self.p["log_source"]}
        covers = log.get("server_args") is not None
        switches = log.get("adaptive_switches") or []
        summary = ("no 'speculative_adaptive disabled' line at the server start" if covers else
                   "no 'speculative_adaptive disabled' line in the log read, which does not reach back to the server start "
                   "(raise journal_lines)")
        last = (", last %d -> %d" % (switches[-1]["from"], switches[-1]["to"])) if switches else ""
        summary += "; %d step switch(es) logged%s" % (len(switches), last)
        return {"log_read": True, "covers_start": covers, "switches": switches, "summary": summary}

    def extra_warnings(self, accept_source=None):
        """Warnings derived from the server args (not from log lines). ``accept_source``: where the accept length came from
        (:meth:`accept_length_sources`), for the attention-DP warning."""
        found = []
        args, source = self.running_args()
        if args.get("speculative_algorithm") and args.get("enable_dp_attention") and accept_source not in (None, "probe"):
            # issue 21, a pitfall operators report: each DP rank runs its own scheduler; its Decode log line and its
            # metrics cover the batch of that rank only, while the probe's meta_info is the request's own
            found.append({"key": "dp_attention_accept_length_one_rank",
                          "text": "enable_dp_attention is on in %s and the accept length comes from %s" % (source, accept_source),
                          "meaning": "under attention DP the scheduler's accept length (Decode log line, /metrics) covers one DP rank's "
                                     "requests, not the server's; use the per-request fields (probe: true, or the benchmark's "
                                     "sglang backend meta_info)"})
        cap = SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT
        if args.get("speculative_algorithm") and args.get("max_running_requests") == cap \
                and normalize_expected(self.p["expected"]).get("max_running_requests") != cap:
            found.append({"key": "max_running_requests_capped", "text": "max_running_requests is %d in %s" % (cap, source),
                          "meaning": "SGLang caps running requests at %d under speculative decoding unless --max-running-requests is set" % cap})
        # queued_at_48: the key names the cap it counts (a public return key, kept)
        if self.log and self.log.get("queued_at_48"):
            found.append({"key": "queued_at_48_running",
                          "text": "%d Decode lines show #running-req: %d with requests queued" % (self.log["queued_at_48"], cap),
                          "meaning": "requests wait in #queue-req behind a %d-request cap; set --max-running-requests explicitly" % cap})
        return found


def report_lines(result):
    """The result in a few lines (the RETURN value ``lines``).

    ``result``: this module's result dict (keys ``passed``, ``server_version``, ``speculation``, ``accept_length``,
    ``accept_length_source``, ``accept_rate``, ``num_draft_tokens``, ``gen_throughput``, ``gen_throughput_source``,
    ``probe_tok_per_s``, ``draft_class``, ``draft_mem_gb`` ({rank: GB}), ``verdicts`` ({name: {status, reason}}),
    ``warnings_found`` ([{key, ...}])). Returns a list of str; never raises on missing or None values.
    """
    outcome = "PASS" if result.get("passed") else "FAIL"
    lines = ["%s (SGLang %s, speculation %s)" % (outcome, result.get("server_version") or "?", result.get("speculation") or "unknown")]
    if result.get("accept_length") is not None:
        lines.append("accept length %s (%s), accept rate %s with %s draft tokens" % (
            result["accept_length"], result.get("accept_length_source"), result.get("accept_rate"), result.get("num_draft_tokens")))
    if result.get("gen_throughput") is not None:
        probe = result.get("probe_tok_per_s")
        probe_text = ", probe %s tok/s" % probe if probe is not None else ""
        lines.append("gen throughput %s tok/s (%s)%s" % (result["gen_throughput"], result.get("gen_throughput_source"), probe_text))
    if result.get("draft_class") is not None:
        mem = result.get("draft_mem_gb") or {}
        distinct = []
        for value in mem.values():
            if value not in distinct:
                distinct.append(value)
        lines.append("draft %s, %s GB on %d rank(s)" % (result["draft_class"], "/".join(str(v) for v in distinct), len(mem)))
    lines.extend("%s: %s: %s" % (name, v.get("status"), v.get("reason")) for name, v in (result.get("verdicts") or {}).items())
    lines.append("warnings: " + ", ".join(w.get("key", "") for w in result.get("warnings_found") or []))
    return lines


def main():
    argument_spec = http_argument_spec()
    argument_spec.update(log_argument_spec())
    argument_spec.update(
        timeout=dict(type="float", default=60),
        ready_timeout=dict(type="float", default=600),
        ready_interval=dict(type="float", default=5),
        probe=dict(type="bool", default=True),
        probe_prompt=dict(type="str", default="Count from 1 to 500, separated by commas:"),
        probe_max_new_tokens=dict(type="int", default=256, no_log=False),
        metrics=dict(type="bool", default=True),
        expect_speculative=dict(type="bool", default=True),
        expected=dict(type="dict", default={}),
        min_accept_length=dict(type="float", default=1.2),
        accept_length_drop_warn=dict(type="float", default=0.2),
        fail_on=dict(type="list", elements="str", choices=list(VERDICTS), default=list(VERDICTS)),
    )
    module = AnsibleModule(
        argument_spec=argument_spec,
        supports_check_mode=True,
    )
    errors = validate_params(module.params)
    try:
        module_client(module, module.params["timeout"])
    except ValueError as exc:
        errors.append(str(exc))
    if errors:
        module.fail_json(msg="speculative_check: bad options: " + "; ".join(errors), errors=errors)

    checker = Checker(module)
    ready = checker.collect()
    verdicts = checker.verdicts(ready)
    failed = [name for name in module.params["fail_on"] if verdicts[name]["status"] not in ("pass", "skip")]

    args, dummy = checker.running_args()
    accept = checker.accept_length_sources()
    accept_length, accept_source = (accept[0][1], accept[0][0]) if accept else (None, None)
    num_draft = args.get("speculative_num_draft_tokens") or normalize_expected(module.params["expected"]).get("speculative_num_draft_tokens")
    gen, gen_source = checker.gen_throughput()
    log = checker.log or {}
    warnings_found = [dict((k, w[k]) for k in ("key", "meaning", "text", "time", "rank") if k in w) for w in log.get("warnings", [])]
    warnings_found.extend(checker.extra_warnings(accept_source))
    trend = accept_length_trend(log.get("decode_lines") or [], module.params["accept_length_drop_warn"])
    falling = falling_warning(trend)
    if falling is not None:
        warnings_found.append(falling)
        module.warn("speculative_check on %s: %s; %s" % (module.params["url"], falling["text"], falling["meaning"]))
    result = dict(
        changed=False,
        passed=not failed,
        failed_verdicts=failed,
        verdicts=verdicts,
        speculation=checker.speculation() if ready else "unknown",
        accept_length=accept_length,
        accept_length_source=accept_source,
        accept_length_trend=trend,
        accept_rate=recompute_accept_rate(accept_length, num_draft),
        num_draft_tokens=num_draft,
        gen_throughput=gen,
        gen_throughput_source=gen_source,
        probe_tok_per_s=checker.probe["tok_per_s"] if checker.probe else None,
        draft_class=log.get("draft_class"),
        draft_kind=log.get("draft_kind"),
        draft_mem_gb=log.get("draft_mem_gb") or {},
        target_class=log.get("target_class") or ((checker.model_info or {}).get("architectures") or [None])[0],
        server_version=(checker.server_info or {}).get("version"),
        warnings_found=warnings_found,
        refusals=log.get("refusals", []),
        sources=checker.sources,
    )
    result["lines"] = report_lines(result)
    facts = dict((k, result[k]) for k in ("passed", "speculation", "accept_length", "accept_length_source", "accept_length_trend",
                                          "accept_rate", "num_draft_tokens",
                                          "gen_throughput", "gen_throughput_source", "probe_tok_per_s", "draft_class", "draft_kind",
                                          "draft_mem_gb", "target_class", "server_version"))
    facts["algorithm"] = args.get("speculative_algorithm")
    facts["warnings"] = [w["key"] for w in warnings_found]
    facts["verdicts"] = dict((k, {"status": v["status"], "reason": v["reason"]}) for k, v in verdicts.items())
    result["ansible_facts"] = {"llmops_speculative": facts}
    if failed:
        module.fail_json(msg="speculative_check failed on %s: %s" % (module.params["url"], "; ".join(
            "%s: %s" % (name, verdicts[name]["reason"]) for name in failed)), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
