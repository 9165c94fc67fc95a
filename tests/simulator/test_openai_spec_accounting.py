"""Speculative accounting on the OpenAI backends (issue 11), against the SGLang simulator (a test double) on loopback.

What SGLang returns (read in the wheels, docs/benchmark.md "Acceptance on the OpenAI backends"): only 0.5.23 puts
per-request speculative details in OpenAI responses, as ``sglext.spec_tokens_details`` when the request sets
``return_spec_tokens_details``; older versions ignore the field. For those, serving_benchmark measures the level's accept
length on the server: 0.5.14+ from the ``/metrics`` counters (delta ``sglang:generation_tokens_total`` / delta
``sglang:spec_verify_calls_total``, both advanced per finished request), 0.4.10-0.5.10 from the gauge
``sglang:spec_accept_length`` (the last decode-log interval), and the level says so in ``warnings``.

By hand: the built-in math prompts are accepted at p = 1 (acceptance.py), so with one draft token every verify step
yields 2 tokens; a 24-token output is 1 prefill token + 11 steps of 2 + 1 step cut to 1 token by max_tokens = 12 verify
steps, accept length 24 / 12 = 2.00, 12 drafts accepted of 12 proposed (accept rate 1.0). The warm-up request (a math
prompt, min(24, 32) = 24 tokens) gives the same ratio, so the server-side counters read 2.00 as well.
"""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.modules import serving_benchmark

from ansible.module_utils.testing import patch_module_args

pytestmark = pytest.mark.simulator

ON_ARGS = ["--tp", "4", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
           "--speculative-num-draft-tokens", "2", "--max-running-requests", "64"]


def run_module(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            serving_benchmark.main()
    return json.loads(capsys.readouterr().out)


def bench(capsys, srv, backend):
    out = run_module(capsys, {"url": srv.url, "backend": backend, "workload": "builtin", "workload_categories": ["math"],
                              "max_concurrency": [4], "num_prompts": 8, "output_len": 24})
    assert not out.get("failed"), out.get("msg")
    rec = out["records"][0]
    assert rec["completed"] == 8 and rec["total_output_tokens"] == 8 * 24
    return rec


@pytest.mark.parametrize("backend", ["openai", "openai-chat"])
def test_0_5_23_openai_responses_carry_per_request_spec_details(sglang_sim, capsys, backend):
    srv = sglang_sim(ON_ARGS, env={"SGLANG_SIM_VERSION": "0.5.23"}, instant=True)
    rec = bench(capsys, srv, backend)
    assert rec["accept_length_source"] == "responses"
    assert rec["accept_length"] == pytest.approx(2.0) and rec["spec_verify_ct"] == 8 * 12
    assert rec["accept_length_p10"] == pytest.approx(2.0) and rec["accept_length_p90"] == pytest.approx(2.0)
    assert rec["accept_rate"] == pytest.approx(1.0)
    assert rec["categories"]["math"]["accept_length"] == pytest.approx(2.0)
    assert rec["warnings"] == []


def test_0_5_23_sends_the_details_only_when_asked(sglang_sim):
    """The sglext chunk comes after the finish chunk and before the usage chunk, only with return_spec_tokens_details."""
    srv = sglang_sim(ON_ARGS, env={"SGLANG_SIM_VERSION": "0.5.23"}, instant=True)
    body = {"prompt": "What is 15*23? Answer briefly.", "max_tokens": 24, "temperature": 0, "ignore_eos": True, "stream": False}
    plain = srv.post_json("/v1/completions", body)
    asked = srv.post_json("/v1/completions", dict(body, return_spec_tokens_details=True))
    assert "sglext" not in plain
    details = asked["sglext"]["spec_tokens_details"]
    assert (details["spec_verify_ct"], details["spec_num_correct_drafts"], details["spec_num_proposed_drafts"]) == (12, 12, 12)
    assert details["spec_accept_length"] == pytest.approx(2.0)
    assert sorted(details) == sorted(["spec_accept_rate", "spec_accept_length", "spec_cap_length", "spec_block_accept_length",
                                      "spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_verify_ct",
                                      "spec_correct_drafts_histogram", "spec_cap_lens_histogram"])


def test_0_5_14_measures_the_level_from_the_metrics_counters(sglang_sim, capsys):
    srv = sglang_sim(ON_ARGS + ["--enable-metrics"], env={"SGLANG_SIM_VERSION": "0.5.14"}, instant=True)
    assert "sglext" not in srv.post_json("/v1/completions", {"prompt": "What is 15*23?", "max_tokens": 4, "stream": False,
                                                             "return_spec_tokens_details": True})
    rec = bench(capsys, srv, "openai-chat")
    assert rec["accept_length_source"] == "server_counters"
    assert rec["accept_length"] == pytest.approx(2.0)
    assert rec["accept_length_mean"] is None and rec["categories"]["math"]["accept_length"] is None
    assert len(rec["warnings"]) == 1
    assert "per-request accept length is unavailable on backend openai-chat with SGLang 0.5.14" in rec["warnings"][0]
    assert "sglang:spec_verify_calls_total" in rec["warnings"][0]


def test_0_5_9_falls_back_to_the_accept_length_gauge(sglang_sim, capsys):
    # the gauge moves with each Decode log line: log every step so that this short level updates it
    srv = sglang_sim(ON_ARGS + ["--enable-metrics", "--decode-log-interval", "1"], env={"SGLANG_SIM_VERSION": "0.5.9"}, instant=True)
    rec = bench(capsys, srv, "openai")
    assert rec["accept_length_source"] == "server_gauge"
    assert rec["accept_length"] == pytest.approx(2.0)
    assert "unavailable on backend openai with SGLang 0.5.9" in rec["warnings"][0]
    assert "sglang:spec_accept_length gauge" in rec["warnings"][0]


def test_without_metrics_the_level_says_accept_length_was_not_measured(sglang_sim, capsys):
    srv = sglang_sim(ON_ARGS, env={"SGLANG_SIM_VERSION": "0.5.9"}, instant=True)
    rec = bench(capsys, srv, "openai")
    assert rec["accept_length_source"] is None and rec["accept_length"] is None
    assert "not measured: the server exposes no /metrics" in rec["warnings"][0]
