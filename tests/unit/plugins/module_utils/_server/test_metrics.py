"""Tests of plugins/module_utils/_server/metrics.py (Prometheus text exposition of SGLang's /metrics)."""
from __future__ import annotations

import math

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._server import metrics as M


def test_fixture_summary(fixtures_dir):
    text = (fixtures_dir / "sglang" / "metrics-mtp.prom").read_text()
    s = M.sglang_summary(text)
    # values read off metrics-mtp.prom
    assert s["accept_length"] == 2.0
    assert s["accept_rate_reported"] == 1.0
    assert s["gen_throughput"] == 135.04
    assert s["num_running_reqs"] == 1.0
    assert s["num_queue_reqs"] == 0.0
    assert s["generation_tokens_total"] == 1187.0
    assert s["model_names"] == ["qwen3.5-122b"]
    assert s["has_spec_metrics"] is True
    assert s["spec_num_draft_tokens"] is None  # 0.5.23-only gauge, absent in this 0.5.9 page
    assert s["errors"] == []
    # 5 gauges + 1 counter + 3 buckets + sum + count
    assert s["series"] == 11


def test_fixture_families_and_histogram(fixtures_dir):
    parsed = M.parse_prometheus((fixtures_dir / "sglang" / "metrics-mtp.prom").read_text(), strict=True)
    fam = parsed["families"]
    assert fam["sglang:spec_accept_length"] == {"type": "gauge", "help": "The average acceptance length of speculative decoding."}
    assert fam["sglang:generation_tokens_total"]["type"] == "counter"
    assert fam["sglang:time_to_first_token_seconds"]["type"] == "histogram"
    buckets = [(s["labels"]["le"], s["value"]) for s in parsed["samples"] if s["name"] == "sglang:time_to_first_token_seconds_bucket"]
    assert buckets == [("0.1", 1.0), ("0.25", 2.0), ("+Inf", 2.0)]
    assert M.values(parsed, "sglang:time_to_first_token_seconds_sum") == [0.231]
    first = parsed["samples"][0]
    assert first["labels"] == {"engine_type": "unified", "model_name": "qwen3.5-122b", "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}


def test_dp_ranks_are_averaged_not_summed():
    text = "\n".join([
        "# TYPE sglang:spec_accept_length gauge",
        'sglang:spec_accept_length{dp_rank="0",model_name="m",tp_rank="0"} 2.5',
        'sglang:spec_accept_length{dp_rank="1",model_name="m",tp_rank="0"} 3.5',
        'sglang:gen_throughput{dp_rank="0",model_name="m"} NaN',
        'sglang:gen_throughput{dp_rank="1",model_name="m"} 100',
        'sglang:num_requests_total{model_name="m"} 3',
        'sglang:num_requests_total{model_name="n"} 4',
    ])
    s = M.sglang_summary(text)
    assert s["accept_length"] == 3.0
    assert s["gen_throughput"] == 100.0  # NaN series ignored
    assert s["num_requests_total"] == 7.0
    assert s["model_names"] == ["m", "n"]


def test_escapes_special_values_and_timestamps():
    text = "\n".join([
        'x{a="q\\"uote",b="back\\\\slash",c="new\\nline"} +Inf 1700000000000',
        "y -Inf",
        "z NaN",
        'w{le="1e-3"} 1.5e2',
    ])
    parsed = M.parse_prometheus(text, strict=True)
    x = parsed["samples"][0]
    assert x["labels"] == {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}
    assert x["value"] == math.inf and x["timestamp_ms"] == 1700000000000
    assert parsed["samples"][1]["value"] == -math.inf
    assert math.isnan(parsed["samples"][2]["value"])
    assert parsed["samples"][3]["value"] == 150.0


def test_bad_lines_are_reported_or_raise_in_strict_mode():
    text = "good 1\nbad{a=unquoted} 2\nalso bad\n"
    parsed = M.parse_prometheus(text)
    assert [s["name"] for s in parsed["samples"]] == ["good"]
    assert len(parsed["errors"]) == 2 and parsed["errors"][0].startswith("line 2: ")
    with pytest.raises(M.MetricsParseError, match="line 2"):
        M.parse_prometheus(text, strict=True)


def test_empty_page_has_no_spec_metrics():
    s = M.sglang_summary("")
    assert s["has_spec_metrics"] is False and s["accept_length"] is None and s["series"] == 0
