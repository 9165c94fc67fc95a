"""Flag/choice checks of the renderer against the generated table (plugins/plugin_utils/_sglang/cli_contract.py).

Expected facts are read by hand from the wheels' server_args.py:
- 0.4.10.post2 --attention-backend choices: aiter, cutlass_mla, fa3, flashinfer, flashmla, intel_amx, torch_native,
  ascend, triton, trtllm_mla (no fa4, no trtllm_mha); 0.5.4 adds fa4 and trtllm_mha (ATTENTION_BACKEND_CHOICES).
- --kv-cache-dtype: 0.4.10 auto/fp8_e5m2/fp8_e4m3; 0.5.9 adds bf16, bfloat16, fp4_e2m1.
- --mamba-scheduler-strategy: absent in 0.5.4, choices auto/no_buffer/extra_buffer in 0.5.9/0.5.10, a deprecated
  alias of --mamba-radix-cache-strategy in 0.5.14, gone in 0.5.23.
- --disable-cuda-graph: DeprecatedStoreTrueAction from 0.5.14.
"""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import launch as sa
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import cli_contract as cli
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import generated_flags as table

DENSE = {"model_path": "/models/Llama-3.1-8B-Instruct", "model_architecture": "LlamaForCausalLM"}
H100 = {"compute_capabilities": ["9.0"] * 8, "gpu_count": 8, "in_container": True}


def refused(version, **changes):
    with pytest.raises(sa.SGLangArgsError) as info:
        sa.render_launch(dict(DENSE, **changes), version, H100)
    return info.value


def test_table_covers_the_supported_versions():
    assert table.VERSIONS == sa.KNOWN_VERSIONS


def test_attention_backend_choices_per_version():
    assert "fa4" not in cli.choices_of("--attention-backend", "0.4.10")
    assert "trtllm_mha" not in cli.choices_of("--attention-backend", "0.4.10")
    assert {"fa4", "trtllm_mha"} <= set(cli.choices_of("--attention-backend", "0.5.4"))
    assert cli.choices_of("--kv-cache-dtype", "0.4.10") == ("auto", "fp8_e5m2", "fp8_e4m3")


@pytest.mark.parametrize("backend", ["fa4", "trtllm_mha"])
def test_0_4_10_refuses_backends_it_does_not_have(backend):
    err = refused("0.4.10", attention_backend=backend)
    assert err.variable == "sglang_server_attention_backend" and err.value == backend
    assert "0.4.10" in err.reason and "triton" in err.reason


def test_misspelled_backend_and_dtype_get_the_closest_spelling():
    err = refused("0.5.9", attention_backend="flashinferr")
    assert err.variable == "sglang_server_attention_backend" and "did you mean 'flashinfer'" in err.fix
    err = refused("0.5.9", kv_cache_dtype="fp9")
    assert err.variable == "sglang_server_kv_cache_dtype" and "fp8_e4m3" in err.reason


def test_extra_args_unknown_flag_with_suggestion():
    err = refused("0.5.9", extra_args=["--speculative-num-stepz", "3"])
    assert err.variable == "sglang_server_extra_args"
    assert "--speculative-num-stepz" in str(err.value)
    assert "--speculative-num-steps" in err.fix


def test_extra_args_flag_of_another_version_names_the_versions():
    err = refused("0.5.23", extra_args=["--enable-beta-spec"])
    assert err.variable == "sglang_server_extra_args"
    assert "exists only in SGLang 0.5.4" in err.reason
    # --enable-multi-layer-eagle: server_args.py add_argument in 0.5.9 and 0.5.10, an A[bool, ...] field in 0.5.14/0.5.23
    err = refused("0.5.4", extra_args=["--enable-multi-layer-eagle"])
    assert "exists only in SGLang 0.5.9, 0.5.10, 0.5.14, 0.5.23" in err.reason


def test_extra_args_bad_choice_and_bad_type():
    err = refused("0.5.9", extra_args=["--prefill-attention-backend", "flashinferr"])
    assert err.variable == "sglang_server_extra_args" and "flashinfer" in err.reason
    err = refused("0.5.9", extra_args=["--max-total-tokens", "many"])
    assert "integer" in err.reason
    err = refused("0.5.9", extra_args=["--schedule-policy=lpmm"])
    assert "lpm" in err.reason


def test_extra_args_valid_items_pass_and_deprecation_warns():
    out = sa.render_launch(dict(DENSE, extra_args=["--enable-cache-report", "--schedule-policy", "lpm", "--max-total-tokens=4096"]),
                           "0.5.9", H100)
    assert out["argv"][-4:] == ["--enable-cache-report", "--schedule-policy", "lpm", "--max-total-tokens=4096"]
    out = sa.render_launch(dict(DENSE, extra_args=["--disable-cuda-graph-padding", "--disable-piecewise-cuda-graph"]), "0.5.14", H100)
    assert any("deprecates --disable-piecewise-cuda-graph" in w and "--cuda-graph-backend-prefill=disabled" in w for w in out["warnings"])


def test_check_argv_walks_like_argparse():
    problems = cli.check_argv(["--tp-size", "4", "--enable-metrics", "--cuda-graph-bs", "1", "2", "4", "--port=x"], "0.5.9")
    assert [(p.kind, p.flag, p.value) for p in problems] == [("bad_type", "--port", "x")]
    problems = cli.check_argv(["--mamba-scheduler-strategy", "extra_buffer"], "0.5.4")
    assert [(p.kind, p.flag) for p in problems] == [("unknown_flag", "--mamba-scheduler-strategy")]
    problems = cli.check_argv(["--disable-cuda-graph"], "0.5.14")
    assert [(p.kind, p.is_error) for p in problems] == [("deprecated", False)]
    assert problems[0].suggestion == "--cuda-graph-backend-{decode,prefill}=disabled"
    assert [p.kind for p in cli.check_argv(["--tp-size"], "0.5.9")] == ["missing_value"]
    assert [p.kind for p in cli.check_argv(["--enable-metrics=yes"], "0.5.9")] == ["bad_type"]
