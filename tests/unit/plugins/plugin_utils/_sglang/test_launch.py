"""Tests for plugins/plugin_utils/_sglang/launch.py, the one SGLang launch-argument renderer.

Every expected argv / env below is written by hand from docs/design/SGLANG_FACTS.md:
- §1.1/§0.2: --speculative-algorithm NEXTN with steps 1, topk 1, draft tokens 2 (topk 1 => draft = steps + 1)
- §1.2: --mamba-scheduler-strategy up to 0.5.10, --mamba-radix-cache-strategy from 0.5.14 (old flag gone in 0.5.23)
- §0.6: SGLANG_ENABLE_SPEC_V2=1 in 0.5.9/0.5.10, removed from 0.5.14 (always on)
- §1.3: --cuda-graph-max-bs up to 0.5.10, --cuda-graph-max-bs-decode from 0.5.14
- §0.11: --host 0.0.0.0 inside containers
The reference deployment is DESIGN.md's (fixture server_info-mtp-v0.5.9.json shows the same values).
"""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import launch as sa

REFERENCE = {
    "model_path": "/models/Qwen3.5-122B-A10B",
    "served_model_name": "qwen3.5-122b",
    "tp_size": 4,
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 1,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 2,
    "max_running_requests": 64,
    "attention_backend": "triton",
    "mem_fraction_static": 0.85,
    "cuda_graph_max_bs": 256,
    "enable_metrics": True,
    "decode_log_interval": 40,
}

# 4x RTX PRO 6000 Blackwell (cc 12.0) on the SEV-SNP host: the nccl role turned P2P off.
SEV_SNP_RTX = {
    "llmops_gpu": {"gpu_count": 4, "gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                             "compute_capability": "12.0"} for i in range(4)]},
    "in_container": True,
    "nccl_p2p_decision": {"disable_custom_all_reduce": True, "reason": "SEV-SNP active: GPU P2P DMA broken"},
}
H200 = {"compute_capabilities": ["9.0"] * 8, "gpu_count": 8, "in_container": True}

COMMON_HEAD = ["python3", "-m", "sglang.launch_server",
               "--model-path", "/models/Qwen3.5-122B-A10B", "--served-model-name", "qwen3.5-122b",
               "--host", "0.0.0.0", "--port", "30000", "--tp-size", "4",
               "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2"]
COMMON_TAIL = ["--disable-custom-all-reduce", "--enable-metrics", "--decode-log-interval", "40"]


def render(desc=None, version="0.5.9", context=None, **changes):
    d = dict(REFERENCE if desc is None else desc)
    d.update(changes)
    return sa.render_launch(d, version, SEV_SNP_RTX if context is None else context)


def refused(version="0.5.9", context=None, desc=None, **changes):
    with pytest.raises(sa.SGLangArgsError) as info:
        render(desc, version, context, **changes)
    return info.value


# ---------------------------------------------------------------- reference deployment, per version

def test_reference_0_5_9_exact_argv_and_env():
    out = render(version="0.5.9")
    assert out["argv"] == COMMON_HEAD + [
        "--mamba-scheduler-strategy", "extra_buffer",
        "--attention-backend", "triton", "--mem-fraction-static", "0.85", "--max-running-requests", "64",
        "--cuda-graph-max-bs", "256"] + COMMON_TAIL
    assert out["env"] == {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert out["secret_env"] == {}
    assert out["warnings"] == []


def test_reference_0_5_10_exact_argv_and_env():
    out = render(version="0.5.10")
    assert out["argv"] == COMMON_HEAD + [
        "--mamba-scheduler-strategy", "extra_buffer",
        "--attention-backend", "triton", "--mem-fraction-static", "0.85", "--max-running-requests", "64",
        "--cuda-graph-max-bs", "256"] + COMMON_TAIL
    assert out["env"] == {"SGLANG_ENABLE_SPEC_V2": "1"}


def test_reference_0_5_14_exact_argv_and_env():
    out = render(version="0.5.14")
    assert out["argv"] == COMMON_HEAD + [
        "--mamba-radix-cache-strategy", "extra_buffer",
        "--attention-backend", "triton", "--mem-fraction-static", "0.85", "--max-running-requests", "64",
        "--cuda-graph-max-bs-decode", "256"] + COMMON_TAIL
    assert out["env"] == {}


def test_reference_0_5_23_exact_argv_and_env():
    out = render(version="0.5.23")
    assert out["argv"] == COMMON_HEAD + [
        "--mamba-radix-cache-strategy", "extra_buffer",
        "--attention-backend", "triton", "--mem-fraction-static", "0.85", "--max-running-requests", "64",
        "--cuda-graph-max-bs-decode", "256"] + COMMON_TAIL
    assert out["env"] == {}
    assert "--mamba-scheduler-strategy" not in out["argv"]
    assert "--cuda-graph-max-bs" not in out["argv"]


def test_reference_decisions_name_nccl_and_rewrites():
    out = render(version="0.5.9")
    by_name = dict((d["name"], d) for d in out["decisions"])
    assert by_name["disable_custom_all_reduce"]["value"] is True
    assert "SEV-SNP" in by_name["disable_custom_all_reduce"]["reason"]
    assert by_name["speculative_algorithm"]["value"] == "EAGLE"
    assert by_name["SGLANG_ENABLE_SPEC_V2"]["value"] == "1"
    assert by_name["mamba_strategy"]["value"] == "extra_buffer"
    assert by_name["host"]["value"] == "0.0.0.0"


def test_expected_server_args_match_recorded_server_info(fixtures_dir):
    """The expected values equal what the real 0.5.9 server reported for the reference deployment."""
    info = json.loads((fixtures_dir / "sglang" / "server_info-mtp-v0.5.9.json").read_text())
    expected = sa.expected_server_args(REFERENCE, "0.5.9", SEV_SNP_RTX)
    for key in ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                "speculative_draft_model_path", "max_running_requests", "tp_size", "attention_backend",
                "mamba_scheduler_strategy", "disable_custom_all_reduce", "disable_radix_cache", "enable_metrics",
                "decode_log_interval", "served_model_name", "model_path", "host", "port", "mem_fraction_static", "cuda_graph_max_bs"):
        assert expected[key] == info[key], key
    assert expected["speculative_algorithm"] == "EAGLE"


def test_expected_mamba_key_renamed_in_0_5_14():
    expected = sa.expected_server_args(REFERENCE, "0.5.14", SEV_SNP_RTX)
    assert expected["mamba_radix_cache_strategy"] == "extra_buffer"
    assert "mamba_scheduler_strategy" not in expected


# ---------------------------------------------------------------- other versions and rules

QWEN3_NEXT = {"model_path": "/models/Qwen3-Next-80B-A3B-Instruct", "model_architecture": "Qwen3NextForCausalLM"}


def test_0_5_4_spells_spec_v2_as_enable_beta_spec():
    # 0.5.4 server_args.py: --enable-beta-spec exists, --mamba-scheduler-strategy does not (added in 0.5.9)
    out = render(version="0.5.4", context=H200, attention_backend=None, spec_v2=True, served_model_name=None, **QWEN3_NEXT)
    assert "--enable-beta-spec" in out["argv"]
    assert out["env"] == {}
    assert "--mamba-scheduler-strategy" not in out["argv"]


def test_0_5_4_renders_no_mamba_strategy_and_refuses_one():
    out = render(version="0.5.4", context=H200, attention_backend=None, served_model_name=None, **QWEN3_NEXT)
    assert not [a for a in out["argv"] if a.startswith("--mamba")]
    err = refused(version="0.5.4", context=H200, attention_backend=None, served_model_name=None, mamba_strategy="extra_buffer", **QWEN3_NEXT)
    assert err.variable == "sglang_server_mamba_strategy" and "0.5.9" in err.reason


def test_0_5_4_refuses_qwen3_5():
    # 0.5.4's sglang/srt/models has qwen3_next.py but no qwen3_5.py
    err = refused(version="0.5.4", context=H200, attention_backend=None)
    assert err.variable == "sglang_server_version" and "Qwen3.5" in err.reason


def test_0_4_10_refuses_hybrid_model():
    err = refused(version="0.4.10", context=H200, attention_backend=None)
    assert err.variable == "sglang_server_version"
    assert "0.5.4" in err.reason


def test_unknown_version_string_refused():
    err = refused(version="latest")
    assert err.variable == "sglang_server_version" and err.value == "latest"
    assert "Fix:" in str(err)


def test_intermediate_version_refused_without_force():
    err = refused(version="0.5.12.post1")
    assert err.variable == "sglang_server_version" and err.value == "0.5.12.post1"
    assert "sglang_server_version_force: true" in err.fix and "0.5.10 rules" in err.fix


def test_intermediate_version_uses_older_profile_with_warning_when_forced():
    out = render(version="0.5.12.post1", version_force=True)
    assert out["profile"] == "0.5.10"
    assert "--mamba-scheduler-strategy" in out["argv"]
    assert any("0.5.12.post1" in w and "0.5.10" in w for w in out["warnings"])


def test_speculation_without_max_running_requests_renders_48_explicitly():
    out = render(max_running_requests=None)
    assert out["argv"][out["argv"].index("--max-running-requests") + 1] == "48"
    assert out["expected"]["max_running_requests"] == 48
    assert any("48" in w for w in out["warnings"])


def test_no_speculation_no_cap_no_spec_env():
    desc = dict(REFERENCE, speculative_algorithm=None, speculative_num_steps=None, speculative_eagle_topk=None,
                speculative_num_draft_tokens=None, max_running_requests=None)
    out = sa.render_launch(desc, "0.5.9", SEV_SNP_RTX)
    assert "--max-running-requests" not in out["argv"]
    assert not any(a.startswith("--speculative") for a in out["argv"])
    assert "--mamba-scheduler-strategy" not in out["argv"]
    assert out["env"] == {}
    assert out["expected"]["speculative_algorithm"] is None


def _auto(version, arch, path="/models/m", algorithm="EAGLE"):
    desc = {"model_path": path, "model_architecture": arch, "speculative_algorithm": algorithm,
            "speculative_draft_model_path": "/models/draft", "max_running_requests": 32}
    exp = sa.expected_server_args(desc, version, H200)
    return exp["speculative_num_steps"], exp["speculative_eagle_topk"], exp["speculative_num_draft_tokens"]


def test_auto_spec_params_expected_3_1_4_for_qwen_and_5_4_8_for_llama():
    desc = dict(REFERENCE, speculative_num_steps=None, speculative_eagle_topk=None, speculative_num_draft_tokens=None,
                model_architecture="Qwen3_5MoeForConditionalGeneration")
    out = sa.render_launch(desc, "0.5.9", SEV_SNP_RTX)
    assert "--speculative-num-steps" not in out["argv"]
    assert (out["expected"]["speculative_num_steps"], out["expected"]["speculative_eagle_topk"],
            out["expected"]["speculative_num_draft_tokens"]) == (3, 1, 4)
    assert _auto("0.5.9", "LlamaForCausalLM") == (5, 4, 8)


def test_auto_spec_params_per_version_keyed_on_exact_architecture():
    # auto_choose_speculative_params, read in each wheel: 0.4.10 returns (5, 4, 8) for everything but DeepseekV3/V2;
    # 0.5.4 the same with a longer DeepSeek/GptOss/Bailing list and STANDALONE (3, 1, 4); from 0.5.9 the default is (3, 1, 4).
    assert _auto("0.4.10", "Qwen2ForCausalLM") == (5, 4, 8)
    assert _auto("0.4.10", "DeepseekV3ForCausalLM") == (3, 1, 4)
    assert _auto("0.5.4", "Qwen2ForCausalLM") == (5, 4, 8)
    assert _auto("0.5.4", "GptOssForCausalLM") == (3, 1, 4)
    assert _auto("0.5.4", "Qwen2ForCausalLM", algorithm="STANDALONE") == (3, 1, 4)
    assert _auto("0.5.10", "Qwen2ForCausalLM") == (3, 1, 4)
    assert _auto("0.5.23", "Grok1ForCausalLM") == (5, 4, 8)
    # the name is not the architecture: a "llama" path with a Qwen architecture is (3, 1, 4) in 0.5.9
    assert _auto("0.5.9", "Qwen2ForCausalLM", path="/models/llama-distilled-qwen") == (3, 1, 4)
    # a Llama-derived architecture other than exactly LlamaForCausalLM is not special-cased
    assert _auto("0.5.14", "LlamaForCausalLMEagle3") == (3, 1, 4)


def test_auto_spec_params_unknown_architecture_warns():
    desc = {"model_path": "/models/m", "speculative_algorithm": "EAGLE", "speculative_draft_model_path": "/d", "max_running_requests": 8}
    out = sa.render_launch(desc, "0.5.4", H200)
    assert out["expected"]["speculative_num_steps"] == 5
    assert any("sglang_server_model_architecture is unset" in w for w in out["warnings"])


def test_cuda_graph_max_bs_below_max_running_requests_warns_under_speculation_only():
    # 16 < 64 with NEXTN: batches of 17 to 64 decode without CUDA graphs (issue 21 pitfall)
    out = render(version="0.5.9", cuda_graph_max_bs=16)
    assert out["warnings"] == [
        "sglang_server_cuda_graph_max_bs 16 is below sglang_server_max_running_requests 64 with speculative decoding on: "
        "decode batches of 17 to 64 requests run without CUDA graphs (eager mode), which costs speculation its gain at "
        "that concurrency; raise sglang_server_cuda_graph_max_bs to 64, or lower sglang_server_max_running_requests"]
    assert "--cuda-graph-max-bs" in out["argv"]                      # a warning, the value is still rendered
    assert render(version="0.5.9", cuda_graph_max_bs=64)["warnings"] == []        # equal: every batch has a graph
    off = render(version="0.5.9", cuda_graph_max_bs=16, speculative_algorithm=None, speculative_num_steps=None,
                 speculative_eagle_topk=None, speculative_num_draft_tokens=None)
    assert not any("cuda_graph_max_bs" in w for w in off["warnings"])           # no speculation, no speculative cost


def test_eagle3_renders_draft_path_and_no_mamba_for_dense_model():
    desc = {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "speculative_algorithm": "EAGLE3",
            "speculative_draft_model_path": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
            "speculative_num_steps": 3, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
            "max_running_requests": 128, "port": 30001}
    out = sa.render_launch(desc, "0.5.9", H200)
    assert out["argv"] == ["python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
                           "--host", "0.0.0.0", "--port", "30001",
                           "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
                           "--speculative-num-draft-tokens", "8",
                           "--speculative-draft-model-path", "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
                           "--max-running-requests", "128"]
    assert out["env"] == {}
    assert out["expected"]["speculative_algorithm"] == "EAGLE3"


def test_outside_container_keeps_loopback_host():
    out = render(context={"in_container": False})
    assert out["argv"][out["argv"].index("--host") + 1] == "127.0.0.1"


def test_multinode_flags():
    out = render(context=H200, version="0.5.9", attention_backend=None, tp_size=16, nnodes=2, node_rank=1,
                 dist_init_addr="10.0.0.11:20000")
    i = out["argv"].index("--dist-init-addr")
    assert out["argv"][i:i + 6] == ["--dist-init-addr", "10.0.0.11:20000", "--nnodes", "2", "--node-rank", "1"]
    assert out["argv"][out["argv"].index("--tp-size") + 1] == "16"


def test_nccl_decision_absent_keeps_custom_all_reduce():
    out = render(context=H200, attention_backend=None)
    assert "--disable-custom-all-reduce" not in out["argv"]
    assert out["expected"]["disable_custom_all_reduce"] is False


def test_api_key_and_hf_token_stay_out_of_argv_and_env():
    out = render(api_key="sk-secret-1", hf_token="hf_abc")
    assert "sk-secret-1" not in out["argv"] and "hf_abc" not in json.dumps(out["env"])
    assert out["argv"][out["argv"].index("--api-key") + 1] == "${SGLANG_SERVER_API_KEY}"
    assert out["secret_env"] == {"SGLANG_SERVER_API_KEY": "sk-secret-1", "HF_TOKEN": "hf_abc"}


def test_extra_args_and_env_appended():
    out = render(extra_args=["--enable-cache-report"], extra_env={"SGLANG_SIM_VERSION": "0.5.9", "SGLANG_LOG_MS": 1})
    assert out["argv"][-1] == "--enable-cache-report"
    assert out["env"] == {"SGLANG_ENABLE_SPEC_V2": "1", "SGLANG_LOG_MS": "1", "SGLANG_SIM_VERSION": "0.5.9"}


def test_spec_v2_env_dropped_with_warning_on_0_5_14():
    out = render(version="0.5.14", extra_env={"SGLANG_ENABLE_SPEC_V2": "1"})
    assert out["env"] == {}
    assert any("SGLANG_ENABLE_SPEC_V2 was removed" in w for w in out["warnings"])


def test_disable_cuda_graph_spelled_per_version():
    assert "--disable-cuda-graph" in render(version="0.5.10", disable_cuda_graph=True)["argv"]
    # 0.5.14 and 0.5.23 register --disable-cuda-graph with DeprecatedStoreTrueAction,
    # new_flag="--cuda-graph-backend-{decode,prefill}=disabled"
    for version in ("0.5.14", "0.5.23"):
        argv = render(version=version, disable_cuda_graph=True)["argv"]
        assert "--disable-cuda-graph" not in argv
        i = argv.index("--cuda-graph-backend-decode")
        assert argv[i:i + 4] == ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]


def test_hybrid_blackwell_0_5_9_without_backend_picks_triton():
    out = render(attention_backend=None)
    assert out["argv"][out["argv"].index("--attention-backend") + 1] == "triton"
    assert any(d["name"] == "attention_backend" for d in out["decisions"])


def test_prefixed_keys_accepted():
    desc = dict(("sglang_server_" + k, v) for k, v in REFERENCE.items())
    assert sa.render_launch(desc, "0.5.9", SEV_SNP_RTX)["argv"] == render()["argv"]


# ---------------------------------------------------------------- refusals (each with its message)

def test_refuse_flashinfer_for_hybrid_gdn_on_blackwell_0_5_9():
    err = refused(attention_backend="flashinfer")
    assert err.variable == "sglang_server_attention_backend" and err.value == "flashinfer"
    assert "hybrid GDN" in err.reason and "Blackwell" in err.reason and "0.5.9" in err.reason
    assert "triton" in err.fix


def test_flashinfer_hybrid_blackwell_allowed_from_0_5_10():
    out = render(version="0.5.10", attention_backend="flashinfer")
    assert out["argv"][out["argv"].index("--attention-backend") + 1] == "flashinfer"


def test_refuse_trtllm_mha_on_sm120_up_to_0_5_9():
    desc = {"model_path": "/models/Llama-3.1-8B-Instruct", "attention_backend": "trtllm_mha"}
    with pytest.raises(sa.SGLangArgsError) as info:
        sa.render_launch(desc, "0.5.9", SEV_SNP_RTX)
    assert info.value.variable == "sglang_server_attention_backend"
    assert "SM100" in info.value.reason and "triton" in info.value.fix
    # the same on an H200 is not refused by this rule
    sa.render_launch(desc, "0.5.9", H200)


def test_refuse_trtllm_mha_prefill_on_sm120_in_0_5_14_but_allow_0_5_23():
    desc = {"model_path": "/models/Llama-3.1-8B-Instruct", "attention_backend": "trtllm_mha"}
    with pytest.raises(sa.SGLangArgsError, match="prefill is still SM100-only"):
        sa.render_launch(desc, "0.5.14", SEV_SNP_RTX)
    assert "--attention-backend" in sa.render_launch(desc, "0.5.23", SEV_SNP_RTX)["argv"]


def test_refuse_extra_buffer_with_radix_cache_disabled():
    err = refused(mamba_strategy="extra_buffer", disable_radix_cache=True)
    assert err.variable == "sglang_server_mamba_strategy" and err.value == "extra_buffer"
    assert "radix cache disabled" in err.reason
    assert "no_buffer" in err.fix


def test_radix_disabled_auto_picks_no_buffer():
    out = render(disable_radix_cache=True)
    argv = out["argv"]
    assert argv[argv.index("--mamba-scheduler-strategy") + 1] == "no_buffer"
    assert "--disable-radix-cache" in argv
    assert out["env"] == {}


@pytest.mark.parametrize("partial", [
    {"speculative_num_steps": 1, "speculative_eagle_topk": None, "speculative_num_draft_tokens": None},
    {"speculative_num_steps": None, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2},
    {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": None},
])
def test_refuse_partial_steps_topk_draft_tokens(partial):
    err = refused(**partial)
    assert "only some of steps/topk/draft tokens" in err.reason
    assert err.variable.startswith("sglang_server_speculative_")
    assert "all three" in err.fix


def test_refuse_topk1_wrong_draft_tokens():
    err = refused(speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=3)
    assert err.variable == "sglang_server_speculative_num_draft_tokens" and err.value == 3
    assert "num_steps + 1 = 4" in err.reason
    assert "4" in err.fix


def test_refuse_old_mamba_flag_on_0_5_23():
    err = refused(version="0.5.23", extra_args=["--mamba-scheduler-strategy", "extra_buffer"])
    assert err.variable == "sglang_server_extra_args"
    assert "removed in SGLang 0.5.23" in err.reason
    assert "sglang_server_mamba_strategy" in err.fix


def test_refuse_bare_cuda_graph_max_bs_on_0_5_23():
    err = refused(version="0.5.23", cuda_graph_max_bs=None, extra_args=["--cuda-graph-max-bs=128"])
    assert "ambiguous-prefix" in err.reason


def test_refuse_no_buffer_with_spec_and_radix_in_0_5_10_warn_in_0_5_9():
    err = refused(version="0.5.10", mamba_strategy="no_buffer")
    assert "not compatible with radix cache" in err.reason
    out = render(version="0.5.9", mamba_strategy="no_buffer")
    assert any("silently disables the radix cache" in w for w in out["warnings"])
    assert "overlap schedule" in refused(version="0.5.23", mamba_strategy="no_buffer").reason


def test_refuse_spec_v2_off_where_needed():
    err = refused(version="0.5.10", spec_v2=False)
    assert err.variable == "sglang_server_spec_v2"


def test_refuse_spec_v2_with_topk_above_1():
    err = refused(context=H200, attention_backend=None, speculative_num_steps=3, speculative_eagle_topk=2,
                  speculative_num_draft_tokens=6)
    assert "topk = 1" in err.reason


def test_refuse_unknown_algorithm_and_0_5_23_only_algorithm_on_0_5_9():
    assert "accepts only" in refused(speculative_algorithm="MEDUSA").reason
    assert refused(speculative_algorithm="DFLASH").value == "DFLASH"


def test_refuse_eagle3_without_draft_and_ngram_with_draft():
    assert refused(speculative_algorithm="EAGLE3").variable == "sglang_server_speculative_draft_model_path"
    err = refused(speculative_algorithm="NGRAM", speculative_num_steps=None, speculative_eagle_topk=None,
                  speculative_num_draft_tokens=None, speculative_draft_model_path="/models/draft")
    assert "NGRAM does not use a draft model" in err.reason


def test_nextn_draft_path_equal_to_model_is_dropped_other_refused():
    out = render(speculative_draft_model_path="/models/Qwen3.5-122B-A10B")
    assert "--speculative-draft-model-path" not in out["argv"]
    assert refused(speculative_draft_model_path="/models/other").variable == "sglang_server_speculative_draft_model_path"


def test_refuse_spec_settings_without_algorithm():
    err = refused(speculative_algorithm=None)
    assert "speculative decoding is off" in err.reason


def test_refuse_custom_all_reduce_forced_on_against_nccl_decision():
    err = refused(disable_custom_all_reduce=False)
    assert err.variable == "sglang_server_disable_custom_all_reduce"
    assert "SEV-SNP" in err.reason and "custom_all_reduce_force" in err.fix
    out = render(disable_custom_all_reduce=False, custom_all_reduce_force=True)
    assert "--disable-custom-all-reduce" not in out["argv"]


def test_refuse_pipeline_parallel_with_speculation():
    assert refused(pp_size=2).variable == "sglang_server_pp_size"


def test_refuse_tp_larger_than_gpus():
    err = refused(tp_size=8)
    assert "4 GPU(s)" in err.reason


def test_refuse_multinode_without_dist_init_addr_and_bad_rank():
    assert refused(context=H200, attention_backend=None, tp_size=16, nnodes=2).variable == "sglang_server_dist_init_addr"
    err = refused(context=H200, attention_backend=None, tp_size=16, nnodes=2, node_rank=2, dist_init_addr="10.0.0.1:20000")
    assert err.variable == "sglang_server_node_rank"


def test_refuse_mamba_track_interval_below_draft_tokens():
    err = refused(speculative_num_steps=3, speculative_draft_model_path=None, speculative_eagle_topk=1,
                  speculative_num_draft_tokens=4, mamba_track_interval=2)
    assert "must be greater than or equal to speculative_num_draft_tokens 4" in err.reason


def test_refuse_managed_flag_in_extra_args_and_secret_in_extra_env():
    err = refused(extra_args=["--tp-size", "2"])
    assert "sglang_server_tp_size" in err.fix
    assert refused(extra_env={"HF_TOKEN": "x"}).variable == "sglang_server_extra_env"


def test_refuse_unknown_setting_and_bad_types():
    assert refused(tp=4).variable == "sglang_server_tp"
    assert refused(tp_size="four").variable == "sglang_server_tp_size"
    assert refused(extra_args="--foo bar").variable == "sglang_server_extra_args"
    assert refused(mem_fraction_static=1.5).variable == "sglang_server_mem_fraction_static"


def test_refuse_mamba_strategy_on_dense_model():
    desc = {"model_path": "/models/Llama-3.1-8B-Instruct", "mamba_strategy": "extra_buffer"}
    with pytest.raises(sa.SGLangArgsError, match="only hybrid"):
        sa.render_launch(desc, "0.5.9", H200)


def test_refuse_topk_gt1_page_size_gt1_non_flashinfer():
    desc = {"model_path": "/models/Llama-3.1-8B-Instruct", "speculative_algorithm": "EAGLE",
            "speculative_draft_model_path": "/models/eagle", "speculative_num_steps": 3, "speculative_eagle_topk": 4,
            "speculative_num_draft_tokens": 8, "page_size": 16, "attention_backend": "triton"}
    with pytest.raises(sa.SGLangArgsError, match="page_size > 1 is unstable"):
        sa.render_launch(desc, "0.5.9", H200)


# ---------------------------------------------------------------- systemd quoting, router

def test_systemd_exec_quoting():
    line = sa.systemd_exec(["podman", "run", "--model-loader-extra-config", '{"enable_multithread_load": true}',
                            "--api-key", "${SGLANG_SERVER_API_KEY}", "100%", "a$b"])
    assert line == ('podman run --model-loader-extra-config "{\\"enable_multithread_load\\": true}" '
                    '--api-key ${SGLANG_SERVER_API_KEY} 100%% a$$b')


def test_router_argv_and_refusal():
    argv = sa.render_router(["http://10.0.0.1:30000", "http://10.0.0.2:30000"], port=30001)
    assert argv == ["python3", "-m", "sglang_router.launch_router", "--worker-urls", "http://10.0.0.1:30000",
                    "http://10.0.0.2:30000", "--host", "0.0.0.0", "--port", "30001", "--policy", "cache_aware"]
    with pytest.raises(sa.SGLangArgsError, match="at least two replicas"):
        sa.render_router(["http://10.0.0.1:30000"])


# ---------------------------------------------------------------- container command (podman / docker)

LAUNCH = {"argv": ["python3", "-m", "sglang.launch_server", "--model-path", "/models/m"]}


def test_container_podman_cdi_defaults():
    argv = sa.render_container(LAUNCH, "sglang-server", "lmsysorg/sglang:v0.5.9-cu130-runtime",
                               volumes=["/var/lib/sglang/huggingface:/root/.cache/huggingface", "/models:/models:ro"],
                               env_files=["/etc/llmops/nccl.env", "/etc/sglang/sglang-server.env"], pass_env=["HF_TOKEN"])
    assert argv == ["/usr/bin/podman", "run", "--rm", "--name", "sglang-server", "--log-driver", "k8s-file",
                    "--network", "host", "--ipc", "host",
                    "--ulimit", "memlock=-1", "--ulimit", "stack=67108864", "--init",
                    "--device", "nvidia.com/gpu=all", "--security-opt", "label=disable",
                    "-v", "/var/lib/sglang/huggingface:/root/.cache/huggingface", "-v", "/models:/models:ro",
                    "--env-file", "/etc/llmops/nccl.env", "--env-file", "/etc/sglang/sglang-server.env", "--env", "HF_TOKEN",
                    "lmsysorg/sglang:v0.5.9-cu130-runtime", "python3", "-m", "sglang.launch_server", "--model-path", "/models/m"]


def test_container_docker_gpus_subset_shm_and_ports():
    argv = sa.render_container(LAUNCH, "s", "img:1", engine="docker", gpu_mode="gpus", gpus=[0, 1], ipc_host=False,
                               shm_size="32g", network_host=False, ports=["30000:30000"])
    assert argv[:17] == ["/usr/bin/docker", "run", "--rm", "--name", "s", "-p", "30000:30000", "--shm-size", "32g",
                         "--ulimit", "memlock=-1", "--ulimit", "stack=67108864", "--init", "--gpus", "device=0,1", "img:1"]


def test_container_cdi_per_index_and_sandbox_ulimits():
    argv = sa.render_container(LAUNCH, "s", "img:1", gpus=[2, 3], ulimits=["nofile=1024:1024"])
    assert argv[argv.index("--device"):argv.index("--device") + 4] == ["--device", "nvidia.com/gpu=2", "--device", "nvidia.com/gpu=3"]
    assert argv.count("--ulimit") == 1 and "memlock=-1" not in argv


@pytest.mark.parametrize("kwargs,variable", [
    ({"engine": "lxc"}, "sglang_server_engine"),
    ({"gpu_mode": "mig"}, "sglang_server_gpu_mode"),
    ({"gpus": ["a"]}, "sglang_server_gpus"),
    ({"ulimits": ["memlock unlimited"]}, "sglang_server_ulimits"),
])
def test_container_refusals(kwargs, variable):
    with pytest.raises(sa.SGLangArgsError) as info:
        sa.render_container(LAUNCH, "s", "img:1", **kwargs)
    assert info.value.variable == variable
