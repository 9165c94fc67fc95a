"""plugins/plugin_utils/_watch/rules.py: evidence, thresholds and alert expressions, values by hand; promtool checks the
rendered files when it is installed (make bootstrap installs Debian's prometheus package)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.plugin_utils._watch import rules as r

EXPECTED = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4, "speculative_draft_model_path": "/models/Qwen3.5-122B-A10B",
            "model_path": "/models/Qwen3.5-122B-A10B", "max_running_requests": 48, "enable_metrics": True}
# benchmark rows (shape of sglang_benchmark_result.rows): concurrency 1, 8, 32; one failed level left out
ROWS = [{"concurrency": 1, "decode_tok_s_per_req": 110.0, "completed": 4, "failed": 0, "accept_length": 2.0},
        {"concurrency": 8, "decode_tok_s_per_req": 80.5, "completed": 12, "failed": 0, "accept_length": 1.8},
        {"concurrency": 32, "decode_tok_s_per_req": 40.0, "completed": 0, "failed": 3, "accept_length": None}]


def evidence(**kw):
    args = dict(host="gpu1", target="10.0.0.5:30000", version="0.5.9", expected=EXPECTED, verification={"accept_length": 1.9},
                rows=ROWS)
    args.update(kw)
    return r.host_evidence(**args)


def test_evidence_by_hand():
    ev = evidence()
    # SGLang reports NEXTN as EAGLE and fills the draft path with the model path for the MTP head: the arm has no draft model
    assert ev["arm"] == "EAGLE-s3-k1-d4" and ev["speculative"] is True
    assert (ev["accept_length"], ev["accept_length_source"]) == (1.9, "verification")
    assert ev["max_running_requests"] == 48
    # the failed level at 32 is not a reference
    assert ev["decode_levels"] == [[1, 110.0], [8, 80.5]]
    assert ev["model"] == "Qwen3.5-122B-A10B" and ev["profile"] == "0.5.9"


def test_accept_length_falls_back_to_the_benchmark_then_takes_an_explicit_one():
    # completion-weighted: (2.0 * 4 + 1.8 * 12) / 16 = 29.6 / 16 = 1.85
    ev = evidence(verification={})
    assert ev["accept_length_source"] == "benchmark" and ev["accept_length"] == pytest.approx(1.85)
    assert evidence(accept_length=2.2)["accept_length_source"] == "inventory"
    with pytest.raises(r.WatchError, match=r"speculative_watch_accept_length=0.5: an accept length counts the bonus token"):
        evidence(accept_length=0.5)


def test_speculation_off_needs_no_accept_length():
    ev = evidence(expected={"speculative_algorithm": None, "max_running_requests": None, "served_model_name": "qwen"},
                  verification={}, rows=[])
    assert ev["arm"] == "off" and ev["speculative"] is False and ev["accept_length"] is None
    assert ev["max_running_requests"] is None and ev["model"] == "qwen"
    assert ev["warnings"] == ["gpu1: no benchmark rows with a decode speed, so no SGLangDecodeSlow threshold"]


@pytest.mark.parametrize("kw, words", [
    ({"host": "gpu 1"}, "inventory_hostname='gpu 1': not usable as the host label"),
    ({"target": "http://10.0.0.5:30000"}, "speculative_watch_target='http://10.0.0.5:30000': a Prometheus target is address:port"),
    ({"version": "0.3.0"}, "SGLang older than 0.4.10 is not supported"),
    ({"expected": dict(EXPECTED, enable_metrics=False)}, "sglang_server_enable_metrics=false on gpu1"),
    ({"verification": {}, "rows": []}, "gpu1 serves EAGLE-s3-k1-d4 but there is no accept length to watch against"),
    ({"model": 'q"wen'}, "speculative_watch_model='q\"wen': a label value without control characters"),
])
def test_evidence_refusals_name_the_variable(kw, words):
    with pytest.raises(r.WatchError) as exc:
        evidence(**kw)
    assert words in str(exc.value)


@pytest.mark.parametrize("opts, words", [
    ({"accept_length_margin": 1.5}, "speculative_watch_accept_length_margin=1.5: a margin is a fraction strictly between 0 and 1"),
    ({"decode_margin": 0}, "speculative_watch_decode_margin=0: a margin is a fraction"),
    ({"decode_margin": True}, "speculative_watch_decode_margin=True: a margin is a fraction"),
    ({"window": "5 m"}, "speculative_watch_window='5 m': not a Prometheus duration"),
    ({"job": "9job"}, "speculative_watch_job='9job': not a Prometheus job name"),
    ({"windw": "5m"}, "unknown option(s) windw"),
    ({"alert_for": {"SGLangNope": "5m"}}, "'SGLangNope' is not one of the alerts SGLangSpecAcceptLengthLow"),
    ({"alert_for": {"SGLangNotReady": "2 min"}}, "SGLangNotReady: '2 min' is not a Prometheus duration"),
])
def test_options_refusals(opts, words):
    with pytest.raises(r.WatchError) as exc:
        r.options(opts)
    assert words in str(exc.value)


def test_options_defaults_and_text_numbers():
    assert r.options() == {"accept_length_margin": 0.15, "decode_margin": 0.25, "window": "5m", "job": "llmops-sglang",
                           "alert_for": {}}
    # -e speculative_watch_decode_margin=0.3 arrives as text
    assert r.options({"decode_margin": "0.3"})["decode_margin"] == 0.3


def test_host_rules_by_hand():
    rules = r.render_host_rules(evidence())["groups"][0]
    assert rules["name"] == "llmops-sglang-evidence-gpu1"
    by = dict((x["record"], x) for x in rules["rules"])
    assert by["llmops_sglang:speculation_expected"]["expr"] == "vector(1)"
    assert by["llmops_sglang:verified_accept_length"] == {"record": "llmops_sglang:verified_accept_length", "expr": "vector(1.9)",
                                                          "labels": {"host": "gpu1", "source": "verification"}}
    assert by["llmops_sglang:max_running_requests"]["expr"] == "vector(48)"
    running = 'max(sglang:num_running_reqs{job="llmops-sglang",host="gpu1"})'
    assert by["llmops_sglang:decode_reference_tok_s_per_request"]["expr"] == (
        "(vector(110) and on () (%s <= 1)) or (vector(80.5) and on () (%s > 1 and %s <= 8))" % (running, running, running))


def test_alerts_table_and_expressions_by_hand():
    group = r.render_alerts({"accept_length_margin": 0.2, "window": "10m"})["groups"][0]
    alerts = dict((x["alert"], x) for x in group["rules"] if "alert" in x)
    assert list(alerts) == list(r.ALERT_NAMES) == ["SGLangSpecAcceptLengthLow", "SGLangSpeculationOff", "SGLangSpeculationUnexpected",
                                                   "SGLangAdmissionCapped", "SGLangDecodeSlow", "SGLangNotReady", "SGLangGenerationStalled"]
    # 1 - 0.2 = 0.8
    assert alerts["SGLangSpecAcceptLengthLow"]["expr"] == (
        "llmops_sglang:accept_length:avg_10m < on (host) (llmops_sglang:verified_accept_length * 0.8) "
        "and on (host) llmops_sglang:generation_tok_s:rate_10m > 0")
    assert alerts["SGLangNotReady"]["expr"] == 'up{job="llmops-sglang"} == 0'
    assert alerts["SGLangDecodeSlow"]["expr"].endswith("< on (host) (llmops_sglang:decode_reference_tok_s_per_request * 0.75)")
    assert alerts["SGLangSpeculationOff"]["labels"] == {"severity": "critical", "component": "sglang"}
    assert [alerts[n]["for"] for n in r.ALERT_NAMES] == ["10m", "5m", "5m", "5m", "10m", "2m", "5m"]
    short = r.render_alerts({"alert_for": {"SGLangNotReady": "30s"}})["groups"][0]["rules"]
    assert next(x for x in short if x.get("alert") == "SGLangNotReady")["for"] == "30s"
    records = [x["record"] for x in group["rules"] if "record" in x]
    assert records == ["llmops_sglang:accept_length:avg_10m", "llmops_sglang:generation_tok_s:rate_10m",
                       "llmops_sglang:decode_tok_s_per_request"]


def test_targets_and_dashboard():
    assert r.render_targets(evidence()) == [{"targets": ["10.0.0.5:30000"], "labels": {
        "host": "gpu1", "model": "Qwen3.5-122B-A10B", "sglang_version": "0.5.9", "arm": "EAGLE-s3-k1-d4"}}]
    dash = r.render_dashboard()
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert "llmops_sglang:verified_accept_length" in exprs and "llmops_sglang:max_running_requests" in exprs
    assert dash["uid"] == "llmops-sglang-spec" and len(dash["panels"]) == 5


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (make bootstrap installs it)")
def test_promtool_accepts_every_rendered_file(tmp_path):
    files = []
    for name, doc in (("fleet.yml", r.render_alerts()), ("gpu1.yml", r.render_host_rules(evidence())),
                      ("off.yml", r.render_host_rules(evidence(host="gpu2", expected={"speculative_algorithm": None}, rows=[])))):
        (tmp_path / name).write_text(yaml.safe_dump(doc, sort_keys=False, width=1000))
        files.append(str(tmp_path / name))
    out = subprocess.run(["promtool", "check", "rules"] + files, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    # 3 derived records + 7 alerts; 4 thresholds for gpu1; 1 for the host without speculation
    assert [line.strip() for line in out.stdout.splitlines() if "SUCCESS" in line] == [
        "SUCCESS: 10 rules found", "SUCCESS: 4 rules found", "SUCCESS: 1 rules found"]
