# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Prometheus rules, file_sd targets and a Grafana dashboard for a speculative-decoding SGLang fleet, rendered from what
this collection verified, measured and decided (issue 22). Controller side; standard library plus the contract table.

Two kinds of files (Prometheus 2.x rule-file and file_sd formats):

* per GPU host, from its evidence (:func:`host_evidence`): a rules file of constant recording rules, the thresholds
  (``llmops_sglang:speculation_expected``, ``llmops_sglang:verified_accept_length``, ``llmops_sglang:max_running_requests``,
  ``llmops_sglang:decode_reference_tok_s_per_request``), labelled ``host``; and a file_sd target file
  (:func:`render_targets`) whose labels (``host``, ``model``, ``sglang_version``, ``arm``) every scraped series carries.
  One file per host, so a ``--limit`` run rewrites only its hosts;
* once for the fleet (:func:`render_alerts`): the derived recording rules and the alerts of :data:`ALERTS`, which compare
  the live series with those thresholds ``on (host)``. Their metric names come from the contract table
  (``generated_flags.HEALTH_METRICS``, read from each SGLang wheel); :func:`host_evidence` refuses a version that lacks one.

Units: accept length in tokens per verify step per request (bonus token included, as SGLang's
``sglang:spec_accept_length``); decode speed in tokens/s per running request (``sglang:gen_throughput`` /
``sglang:num_running_reqs``; the benchmark's ``decode_tok_s_per_req`` = 1000 / median TPOT ms); windows and ``for`` as
Prometheus durations (``5m``). Errors: :class:`WatchError`, whose message names the variable, the value, why and the fix.
"""

from __future__ import annotations

import json
import math
import re

from ansible_collections.llmops.sglang.plugins.module_utils._tune.decision import SpecDecisionError, normalize_arm
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.generated_flags import HEALTH_METRICS
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.launch import SGLangArgsError, version_profile

PREFIX = "speculative_watch_"
GROUP_EVIDENCE = "llmops-sglang-evidence-%s"
GROUP_FLEET = "llmops-sglang-speculation"

#: The options of the fleet rules: name -> (default, check, fix). One table: the role's defaults, its argument spec and
#: the unit tests agree with it (tests/unit/plugins/plugin_utils/_watch/test_rules.py).
OPTIONS = {
    "accept_length_margin": (0.15, "fraction", "a fraction in (0, 1) such as 0.15: alert below 85 % of the verified accept length"),
    "decode_margin": (0.25, "fraction", "a fraction in (0, 1) such as 0.25: alert below 75 % of the benchmark's decode speed"),
    "window": ("5m", "duration", "a Prometheus duration such as 5m"),
    "job": ("llmops-sglang", "name", "the job_name of the scrape job that reads the targets files, e.g. llmops-sglang"),
    "alert_for": ({}, "for", "a dict of alert name -> Prometheus duration, e.g. {SGLangSpecAcceptLengthLow: 30m}"),
}

#: THE alerts: name, severity, ``for`` (Prometheus duration), summary and what it means. The expressions are built by
#: :func:`_alert_expr` from the same names. A new alert is one row here plus its expression.
ALERTS = (
    ("SGLangSpecAcceptLengthLow", "warning", "10m",
     "accept length on {{ $labels.host }} is {{ $value | printf \"%.2f\" }}, below the verified value by more than the margin",
     "speculation pays less than when it was verified: a context longer than the draft was trained on, a new chat "
     "template, or traffic unlike the verification's; re-tune (playbooks/spec_tune.yml) or check the draft model"),
    ("SGLangSpeculationOff", "critical", "5m",
     "{{ $labels.host }} decodes without speculation, but the deployment says it is on",
     "the server runs without its draft model (a restart with other arguments, speculative_adaptive disabled, a crash "
     "loop that came back without it); redeploy with site.yml"),
    ("SGLangSpeculationUnexpected", "warning", "5m",
     "{{ $labels.host }} reports speculative acceptance, but the deployment says speculation is off",
     "the server runs a configuration other than the decided one; redeploy with site.yml"),
    ("SGLangAdmissionCapped", "warning", "5m",
     "{{ $labels.host }} runs at its cap of running requests with requests queued",
     "requests wait at the cap (SGLang caps a speculative server at 48 running requests unless max_running_requests "
     "is set); raise sglang_server_max_running_requests if memory allows, or add servers"),
    ("SGLangDecodeSlow", "warning", "10m",
     "per-request decode speed on {{ $labels.host }} is {{ $value | printf \"%.1f\" }} tok/s, below the benchmark's p50 "
     "at this concurrency by more than the margin",
     "each request decodes slower than when the service was benchmarked at this concurrency: acceptance fell, batches "
     "above cuda_graph_max_bs run eagerly, or the GPU is throttled"),
    ("SGLangNotReady", "critical", "2m",
     "{{ $labels.host }} ({{ $labels.instance }}) does not answer /metrics",
     "the server is down, restarting or unreachable from Prometheus; see journalctl -u sglang-server on the host"),
    ("SGLangGenerationStalled", "critical", "5m",
     "{{ $labels.host }} has queued requests and generates no tokens",
     "the scheduler is stuck (a hung NCCL collective, a CUDA error); restart the server and keep its log"),
)
ALERT_NAMES = tuple(a[0] for a in ALERTS)

_DURATION = re.compile(r"^[1-9][0-9]*[smhd]$")
_HOSTLIKE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TARGET = re.compile(r"^[A-Za-z0-9._-]+:[0-9]{1,5}$|^\[[0-9A-Fa-f:]+\]:[0-9]{1,5}$")
_JOB = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_LABEL_VALUE = re.compile(r"^[^\x00-\x1f\"\\\x7f]*$")


class WatchError(ValueError):
    """Bad input for the rules; the message names the variable, the value, why and the fix."""


def _fail(name, value, why, fix):
    raise WatchError("%s%s=%r: %s. Fix: %s." % (PREFIX, name, value, why, fix))


def options(values=None):
    """The fleet options, defaults filled in and each checked (see :data:`OPTIONS`).

    :param values: dict of option name (without ``speculative_watch_``) -> value; None or missing keys take the default.
    :returns: dict with every :data:`OPTIONS` key.
    :raises WatchError: an unknown key, a margin outside (0, 1), a window that is not a Prometheus duration, a bad job name.
    """
    values = dict(values or {})
    unknown = sorted(set(values) - set(OPTIONS))
    if unknown:
        raise WatchError("unknown option(s) %s. Fix: use %s." % (", ".join(unknown), ", ".join(sorted(OPTIONS))))
    out = {}
    for name, (default, kind, fix) in OPTIONS.items():
        value = values.get(name)
        if value is None:
            value = default
        if kind == "fraction":
            if isinstance(value, str):  # -e name=0.2 arrives as text
                try:
                    value = float(value)
                except ValueError:
                    pass
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < float(value) < 1:
                _fail(name, value, "a margin is a fraction strictly between 0 and 1", fix)
            value = float(value)
        elif kind == "duration":
            if not isinstance(value, str) or not _DURATION.match(value):
                _fail(name, value, "not a Prometheus duration (a whole number and one of s, m, h, d)", fix)
        elif kind == "for":
            if not isinstance(value, dict):
                _fail(name, value, "not a dict of alert name -> duration", fix)
            for alert, duration in value.items():
                if alert not in ALERT_NAMES:
                    _fail(name, value, "%r is not one of the alerts %s" % (alert, ", ".join(ALERT_NAMES)), fix)
                if not isinstance(duration, str) or not _DURATION.match(duration):
                    _fail(name, value, "%s: %r is not a Prometheus duration" % (alert, duration), fix)
            value = dict(value)
        elif not isinstance(value, str) or not _JOB.match(value):
            _fail(name, value, "not a Prometheus job name (letters, digits, _ . -, not starting with a digit)", fix)
        out[name] = value
    return out


def _num(value):
    """A float as PromQL reads it (no trailing .0: 1.9, 101.3, 2 for 2.0)."""
    number = float(value)
    if number.is_integer():
        return str(int(number))
    return repr(round(number, 6))


def _positive(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _decode_levels(rows):
    """[(concurrency, decode tok/s per request)] of the benchmark rows that measured it cleanly, by concurrency."""
    levels = {}
    for row in rows or []:
        if not isinstance(row, dict):
            continue
        conc, speed = row.get("concurrency"), row.get("decode_tok_s_per_req")
        if row.get("request_rate") not in (None, float("inf")) or not _positive(conc) or not _positive(speed):
            continue
        if row.get("failed") or not row.get("completed"):
            continue
        levels[int(conc)] = float(speed)
    return sorted(levels.items())


def _benchmark_accept_length(rows):
    """Completion-weighted mean of the rows' per-request accept length (None when no row has one)."""
    total = weight = 0.0
    for row in rows or []:
        if isinstance(row, dict) and _positive(row.get("accept_length")) and _positive(row.get("completed")) and not row.get("failed"):
            total += float(row["accept_length"]) * float(row["completed"])
            weight += float(row["completed"])
    return total / weight if weight else None


def host_evidence(host, target, version, expected, verification=None, rows=None, model=None, accept_length=None):
    """What the rules of one GPU host are rendered from.

    :param host: inventory name (the ``host`` label; letters, digits, ``. _ -``).
    :param target: ``address:port`` Prometheus scrapes (``/metrics`` of the server), e.g. ``10.0.0.5:30000``.
    :param version: ``sglang_server_version`` (mapped to a contract profile; its metric names are checked).
    :param expected: ``sglang_server_expected`` (the renderer's expected server args): ``speculative_algorithm`` and the
        draft settings (the arm), ``max_running_requests`` (the cap; SGLang's 48 under speculation is already applied),
        ``enable_metrics`` (must not be false), ``served_model_name`` / ``model_path`` (the ``model`` label).
    :param verification: ``ansible_facts.llmops_speculative`` of speculative_check (its ``accept_length``), or None.
    :param rows: the benchmark's summary rows (``sglang_benchmark_result.rows``: ``concurrency``, ``decode_tok_s_per_req``,
        ``accept_length``, ``completed``, ``failed``), or None.
    :param model: the ``model`` label; default the served model name, else the model path's last part.
    :param accept_length: an explicit reference accept length (``speculative_watch_accept_length``), used before the
        verification's and the benchmark's.
    :returns: dict ``host``, ``target``, ``version``, ``profile``, ``model``, ``arm``, ``speculative`` (bool),
        ``accept_length`` (float or None) and ``accept_length_source`` (``verification`` / ``benchmark``),
        ``max_running_requests`` (int or None), ``decode_levels`` (``[[concurrency, tok/s], ...]``), ``warnings``.
    :raises WatchError: a host or target unusable as a label or target, an unsupported version, metrics disabled,
        speculation expected on without any accept length to compare with.
    """
    if not isinstance(host, str) or not _HOSTLIKE.match(host):
        raise WatchError("inventory_hostname=%r: not usable as the host label and file name (letters, digits, . _ -). Fix: "
                         "rename the inventory host." % (host,))
    if not isinstance(target, str) or not _TARGET.match(target):
        _fail("target", target, "a Prometheus target is address:port without a scheme or path",
              "set speculative_watch_target to the address Prometheus reaches the server at, e.g. 10.0.0.5:30000")
    try:
        profile, warnings = version_profile(version)
    except SGLangArgsError as exc:
        raise WatchError(str(exc))
    missing = [name for name in _METRICS_READ if name not in HEALTH_METRICS.get(profile, {})]
    if missing:
        raise WatchError("sglang_server_version=%r (profile %s) exports no %s, which the rules read. Fix: use a supported "
                         "SGLang version." % (version, profile, ", ".join(missing)))
    expected = dict(expected or {})
    if expected.get("enable_metrics") is False:
        raise WatchError("sglang_server_enable_metrics=false on %s: the rules read the server's /metrics. Fix: set "
                         "sglang_server_enable_metrics: true (the default) and redeploy." % host)
    arm_keys = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                "speculative_draft_model_path")
    arm_in = dict((k, expected.get(k)) for k in arm_keys)
    if arm_in["speculative_algorithm"] is None:
        arm_in = {"speculative_algorithm": None}
    elif arm_in["speculative_draft_model_path"] in (expected.get("model_path"),):
        arm_in["speculative_draft_model_path"] = None  # SGLang fills the MTP head's draft path with the model path
    try:
        arm = normalize_arm(arm_in)
    except SpecDecisionError as exc:
        raise WatchError("sglang_server_expected on %s: %s" % (host, exc))
    speculative = arm["speculative_algorithm"] is not None
    if model is None:
        model = expected.get("served_model_name") or str(expected.get("model_path") or "").rstrip("/").rsplit("/", 1)[-1]
    if not _LABEL_VALUE.match(str(model)):
        _fail("model", model, "a label value without control characters, quotes or backslashes", "set speculative_watch_model")
    verified = (verification or {}).get("accept_length")
    bench = _benchmark_accept_length(rows)
    accept, source = None, None
    if accept_length is not None and not (_positive(accept_length) and accept_length >= 1):
        _fail("accept_length", accept_length, "an accept length counts the bonus token, so it is a number >= 1",
              "give the accept length to watch against, e.g. 1.9, or null to take the verification's")
    if speculative:
        if accept_length is not None:
            accept, source = float(accept_length), "inventory"
        elif _positive(verified):
            accept, source = float(verified), "verification"
        elif bench is not None:
            accept, source = bench, "benchmark"
        else:
            raise WatchError("%s serves %s but there is no accept length to watch against: neither speculative_check's "
                             "(ansible_facts.llmops_speculative.accept_length) nor the benchmark's rows. Fix: run verify.yml "
                             "and benchmark.yml first (site.yml does), or set speculative_watch_accept_length."
                             % (host, arm["key"]))
    cap = expected.get("max_running_requests")
    levels = _decode_levels(rows)
    if not levels:
        warnings.append("%s: no benchmark rows with a decode speed, so no SGLangDecodeSlow threshold" % host)
    return {"host": host, "target": target, "version": str(version), "profile": profile, "model": str(model),
            "arm": arm["key"], "speculative": speculative, "accept_length": accept, "accept_length_source": source,
            "max_running_requests": int(cap) if _positive(cap) else None,
            "decode_levels": [[c, s] for c, s in levels], "warnings": warnings}


# the names the alert expressions read (each is in HEALTH_METRICS for every profile; host_evidence checks)
_RUNNING = "sglang:num_running_reqs"
_QUEUE = "sglang:num_queue_reqs"
_GEN = "sglang:gen_throughput"
_ACCEPT = "sglang:spec_accept_length"
_TOKENS = "sglang:generation_tokens_total"
_METRICS_READ = (_RUNNING, _QUEUE, _GEN, _ACCEPT, _TOKENS)


def render_host_rules(evidence, opts=None):
    """The constant recording rules (thresholds) of one host: a Prometheus rule-file dict ``{"groups": [...]}``.

    ``llmops_sglang:decode_reference_tok_s_per_request`` picks, at each evaluation, the benchmark's decode speed of the
    lowest measured concurrency at or above the running requests now (per-request speed falls as concurrency grows, so
    this is the conservative reference); above the highest measured level it is absent and SGLangDecodeSlow stays quiet.
    """
    opts = options(opts)
    host = evidence["host"]
    labels = {"host": host}
    rules = [{"record": "llmops_sglang:speculation_expected", "expr": "vector(%d)" % (1 if evidence["speculative"] else 0),
              "labels": dict(labels)}]
    if evidence.get("accept_length"):
        rules.append({"record": "llmops_sglang:verified_accept_length", "expr": "vector(%s)" % _num(evidence["accept_length"]),
                      "labels": dict(labels, source=evidence["accept_length_source"])})
    if evidence.get("max_running_requests"):
        rules.append({"record": "llmops_sglang:max_running_requests", "expr": "vector(%d)" % evidence["max_running_requests"],
                      "labels": dict(labels)})
    levels = evidence.get("decode_levels") or []
    if levels:
        running = 'max(%s{job="%s",host="%s"})' % (_RUNNING, opts["job"], host)
        parts, low = [], 0
        for conc, speed in levels:
            cond = "%s <= %d" % (running, conc) if not parts else "%s > %d and %s <= %d" % (running, low, running, conc)
            parts.append("(vector(%s) and on () (%s))" % (_num(speed), cond))
            low = conc
        rules.append({"record": "llmops_sglang:decode_reference_tok_s_per_request", "expr": " or ".join(parts),
                      "labels": dict(labels)})
    return {"groups": [{"name": GROUP_EVIDENCE % host, "rules": rules}]}


def _alert_expr(name, opts):
    w, job = opts["window"], opts["job"]
    sel = '{job="%s"}' % job
    accept = "llmops_sglang:accept_length:avg_%s" % w
    tokens = "llmops_sglang:generation_tok_s:rate_%s" % w
    exprs = {
        "SGLangSpecAcceptLengthLow": "%s < on (host) (llmops_sglang:verified_accept_length * %s) and on (host) %s > 0"
                                     % (accept, _num(1 - opts["accept_length_margin"]), tokens),
        "SGLangSpeculationOff": "llmops_sglang:speculation_expected == 1 and on (host) max by (host) (max_over_time(%s%s[%s])) == 0"
                                " and on (host) %s > 0" % (_ACCEPT, sel, w, tokens),
        "SGLangSpeculationUnexpected": "llmops_sglang:speculation_expected == 0 and on (host) max by (host) (max_over_time(%s%s[%s])) > 0"
                                       " and on (host) %s > 0" % (_ACCEPT, sel, w, tokens),
        "SGLangAdmissionCapped": "max by (host) (min_over_time(%s%s[%s])) >= on (host) llmops_sglang:max_running_requests"
                                 " and on (host) max by (host) (min_over_time(%s%s[%s])) > 0" % (_RUNNING, sel, w, _QUEUE, sel, w),
        "SGLangDecodeSlow": "avg_over_time(llmops_sglang:decode_tok_s_per_request[%s]) < on (host) "
                            "(llmops_sglang:decode_reference_tok_s_per_request * %s)" % (w, _num(1 - opts["decode_margin"])),
        "SGLangNotReady": "up%s == 0" % sel,
        "SGLangGenerationStalled": "max by (host) (min_over_time(%s%s[%s])) > 0 and on (host) %s == 0" % (_QUEUE, sel, w, tokens),
    }
    return exprs[name]


def render_alerts(opts=None):
    """The fleet's derived recording rules and :data:`ALERTS`, as a Prometheus rule-file dict (the same for every host;
    the per-host thresholds come from :func:`render_host_rules`)."""
    opts = options(opts)
    w, sel = opts["window"], '{job="%s"}' % opts["job"]
    rules = [
        {"record": "llmops_sglang:accept_length:avg_%s" % w, "expr": "avg by (host) (avg_over_time(%s%s[%s]))" % (_ACCEPT, sel, w)},
        {"record": "llmops_sglang:generation_tok_s:rate_%s" % w, "expr": "sum by (host) (rate(%s%s[%s]))" % (_TOKENS, sel, w)},
        {"record": "llmops_sglang:decode_tok_s_per_request",
         "expr": "max by (host) (%s%s) / (max by (host) (%s%s) > 0)" % (_GEN, sel, _RUNNING, sel)},
    ]
    for name, severity, for_, summary, meaning in ALERTS:
        rules.append({"alert": name, "expr": _alert_expr(name, opts), "for": opts["alert_for"].get(name, for_),
                      "labels": {"severity": severity, "component": "sglang"},
                      "annotations": {"summary": summary, "description": meaning}})
    return {"groups": [{"name": GROUP_FLEET, "rules": rules}]}


def render_targets(evidence):
    """The file_sd target list of one host: ``[{"targets": [address:port], "labels": {host, model, sglang_version, arm}}]``."""
    return [{"targets": [evidence["target"]],
             "labels": {"host": evidence["host"], "model": evidence["model"], "sglang_version": evidence["version"],
                        "arm": evidence["arm"]}}]


def render_dashboard(opts=None):
    """A Grafana dashboard (JSON model, schemaVersion 39) over the rules' series: accept length per host against the
    verified value, running requests against the cap, generation throughput, queue. Datasource: the ``${datasource}``
    variable (any Prometheus)."""
    opts = options(opts)
    w, sel = opts["window"], '{job="%s"}' % opts["job"]
    ds = {"type": "prometheus", "uid": "${datasource}"}
    panels = (
        ("Accept length against the verified value", "tokens/step",
         (("llmops_sglang:accept_length:avg_%s" % w, "{{host}}"), ("llmops_sglang:verified_accept_length", "{{host}} verified"))),
        ("Running requests against the cap", "requests",
         (("max by (host) (%s%s)" % (_RUNNING, sel), "{{host}}"), ("llmops_sglang:max_running_requests", "{{host}} cap"))),
        ("Generation throughput", "tok/s", (("llmops_sglang:generation_tok_s:rate_%s" % w, "{{host}}"),)),
        ("Queued requests", "requests", (("max by (host) (%s%s)" % (_QUEUE, sel), "{{host}}"),)),
        ("Decode speed per request against the benchmark", "tok/s",
         (("llmops_sglang:decode_tok_s_per_request", "{{host}}"),
          ("llmops_sglang:decode_reference_tok_s_per_request", "{{host}} benchmark"))),
    )
    out = []
    for i, (title, unit, queries) in enumerate(panels):
        out.append({"id": i + 1, "type": "timeseries", "title": title, "datasource": ds,
                    "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                    "fieldConfig": {"defaults": {"unit": "none", "custom": {"axisLabel": unit}}, "overrides": []},
                    "targets": [{"refId": chr(65 + j), "datasource": ds, "expr": expr, "legendFormat": legend}
                                for j, (expr, legend) in enumerate(queries)]})
    return {"title": "SGLang speculative decoding (llmops.sglang)", "uid": "llmops-sglang-spec", "schemaVersion": 39,
            "tags": ["sglang", "speculative-decoding", "llmops"], "time": {"from": "now-6h", "to": "now"},
            "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]},
            "panels": out}


def dumps_json(value):
    """Stable JSON text (sorted keys, indent 1, trailing newline) for the target and dashboard files."""
    return json.dumps(value, indent=1, sort_keys=True) + "\n"
