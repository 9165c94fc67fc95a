"""The speculative_watch rules under ``promtool test rules``, with input series taken from the simulator's /metrics for
every SGLang version of the contract table (the names, types and labels the server exports), and the values of each
scenario written here by hand. Each alert fires in its scenario, after its ``for``, and not in the healthy one.

Needs promtool (Debian's prometheus package; make bootstrap installs it).
"""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.generated_flags import HEALTH_METRICS, VERSIONS
from ansible_collections.llmops.sglang.plugins.plugin_utils._watch import rules as r

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (make bootstrap installs it)")

SPEC = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--enable-metrics"]
# the benchmark's rows the thresholds come from (decode speed 1000 / TPOT ms at concurrency 1 and 8)
ROWS = [{"concurrency": 1, "decode_tok_s_per_req": 110.0, "completed": 4, "failed": 0, "accept_length": 2.0},
        {"concurrency": 8, "decode_tok_s_per_req": 80.5, "completed": 12, "failed": 0, "accept_length": 1.8}]
VERIFIED = 1.9          # what speculative_check reported
TARGET = "127.0.0.1:30000"


def _scrape(sglang_sim, profile):
    # DeepSeek-V3 with its NextN head: an MTP model every version serves without the hybrid models' mamba rules
    srv = sglang_sim(SPEC + ["--model-path", "/models/DeepSeek-V3"], env={"SGLANG_SIM_VERSION": profile,
                                                                          "SGLANG_SIM_ARCH": "DeepseekV3ForCausalLM"}, instant=True)
    for request in range(3):
        srv.post_json("/generate", {"input_ids": [3 + request] * 16, "sampling_params": {"max_new_tokens": 32}})
    return srv.get_text("/metrics")


def _labels(text, name):
    """The label set of the first sample of ``name`` in an exposition text, as a dict."""
    match = re.search(r"^%s\{([^}]*)\}" % re.escape(name), text, re.M)
    assert match, "the simulator exports no %s" % name
    return dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', match.group(1)))


def _series(name, labels):
    return "%s{%s}" % (name, ",".join('%s="%s"' % (k, v) for k, v in sorted(labels.items())))


@pytest.mark.parametrize("profile", VERSIONS)
def test_rules_fire_on_the_simulators_series(sglang_sim, profile, tmp_path):
    text = _scrape(sglang_sim, profile)
    # the contract: every name the rules read, with its type, in this version's exposition
    for name, kind in HEALTH_METRICS[profile].items():
        assert "# TYPE %s %s" % (name, kind) in text, (profile, name, kind)
    expected = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": 4, "max_running_requests": 48, "served_model_name": "qwen", "enable_metrics": True}
    ev = r.host_evidence("gpu1", TARGET, profile, expected, {"accept_length": VERIFIED}, ROWS)
    (tmp_path / "fleet.yml").write_text(yaml.safe_dump(r.render_alerts(), sort_keys=False, width=1000))
    (tmp_path / "gpu1.yml").write_text(yaml.safe_dump(r.render_host_rules(ev), sort_keys=False, width=1000))
    # what Prometheus adds to every scraped series: the job, the instance and the file_sd labels
    target = dict(r.render_targets(ev)[0]["labels"], job="llmops-sglang", instance=TARGET)

    def series(name, values):
        return {"series": _series(name, dict(_labels(text, name), **target)), "values": values}

    def base(**override):
        values = {"sglang:spec_accept_length": "1.9x60", "sglang:generation_tokens_total": "0+6000x60",
                  "sglang:num_running_reqs": "8x60", "sglang:num_queue_reqs": "0x60", "sglang:gen_throughput": "640x60",
                  "sglang:num_requests_total": "0+10x60"}
        up = override.pop("up", "1x60")
        values.update(override)
        out = [series(name, v) for name, v in values.items()]
        out.append({"series": _series("up", target), "values": up})
        return out

    def alert(name, at, value_text=None, fire=True):
        exp = []
        if fire:
            row = next(a for a in r.ALERTS if a[0] == name)
            labels = {"host": "gpu1", "severity": row[1], "component": "sglang"}
            if name == "SGLangNotReady":
                labels.update(target)
            summary = row[3].replace("{{ $labels.host }}", "gpu1").replace("{{ $labels.instance }}", TARGET)
            summary = re.sub(r"\{\{ \$value \| printf \"%\.\d+f\" \}\}", value_text or "", summary)
            exp = [{"exp_labels": labels, "exp_annotations": {"summary": summary, "description": row[4]}}]
        return {"eval_time": at, "alertname": name, "exp_alerts": exp}

    tests = [
        # healthy: 8 running at 640 tok/s = 80 tok/s per request >= 80.5 * 0.75 = 60.375; accept length 1.9 = verified
        {"interval": "1m", "input_series": base(),
         "alert_rule_test": [alert(name, "50m", fire=False) for name in r.ALERT_NAMES]},
        # accept length 1.2 from minute 10 (< 1.9 * 0.85 = 1.615): the 5m average is below from minute 15 (pending), for 10m
        {"interval": "1m", "input_series": base(**{"sglang:spec_accept_length": "1.9x10 1.2x50"}),
         "alert_rule_test": [alert("SGLangSpecAcceptLengthLow", "20m", fire=False),
                             alert("SGLangSpecAcceptLengthLow", "30m", "1.20")]},
        # speculation gone (accept length 0) with traffic, for 5m
        {"interval": "1m", "input_series": base(**{"sglang:spec_accept_length": "0x60"}),
         "alert_rule_test": [alert("SGLangSpeculationOff", "15m")]},
        # at the cap of 48 with 6 queued from minute 10: the queue never drains over the 5m window from minute 15, then
        # 5m pending; a queue that drains once a window (0 at every 5th minute) keeps it quiet
        {"interval": "1m", "input_series": base(**{"sglang:num_running_reqs": "48x60", "sglang:num_queue_reqs": "0x10 6x50",
                                                   "sglang:gen_throughput": "2400x60"}),
         "alert_rule_test": [alert("SGLangAdmissionCapped", "18m", fire=False), alert("SGLangAdmissionCapped", "21m")]},
        {"interval": "1m", "input_series": base(**{"sglang:num_running_reqs": "48x60", "sglang:num_queue_reqs": "6 6 6 6 0 " * 12,
                                                   "sglang:gen_throughput": "2400x60"}),
         "alert_rule_test": [alert("SGLangAdmissionCapped", "40m", fire=False)]},
        # 8 running at 320 tok/s = 40 tok/s per request < 60.375 (the reference at concurrency 8 is 80.5)
        {"interval": "1m", "input_series": base(**{"sglang:gen_throughput": "320x60"}),
         "alert_rule_test": [alert("SGLangDecodeSlow", "20m", "40.0")]},
        # /metrics does not answer for 3m (for: 2m)
        {"interval": "1m", "input_series": base(up="1x10 0x50"),
         "alert_rule_test": [alert("SGLangNotReady", "11m", fire=False), alert("SGLangNotReady", "14m")]},
        # 5 queued and no token generated (the counter stands still)
        {"interval": "1m", "input_series": base(**{"sglang:num_queue_reqs": "5x60", "sglang:generation_tokens_total": "1000x60",
                                                   "sglang:num_running_reqs": "0x60", "sglang:gen_throughput": "0x60"}),
         "alert_rule_test": [alert("SGLangGenerationStalled", "15m")]},
    ]
    (tmp_path / "tests.yml").write_text(yaml.safe_dump({"rule_files": ["fleet.yml", "gpu1.yml"], "evaluation_interval": "1m",
                                                        "tests": tests}, sort_keys=False, width=1000))
    out = subprocess.run(["promtool", "test", "rules", "tests.yml"], cwd=str(tmp_path), capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
