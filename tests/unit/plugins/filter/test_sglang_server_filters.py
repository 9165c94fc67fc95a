"""Tests for plugins/filter/sglang_server.py (thin filters over plugin_utils/_sglang/launch.py).

Expected values are written by hand from SGLANG_FACTS.md (§0.1 NEXTN -> EAGLE, §1.3 --host 0.0.0.0 in containers).
"""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.sglang_server import FilterModule

FILTERS = FilterModule().filters()

DESC = {
    "sglang_server_model_path": "/models/Qwen3.5-122B-A10B",
    "sglang_server_served_model_name": "qwen3.5-122b",
    "sglang_server_tp_size": 4,
    "sglang_server_speculative_algorithm": "NEXTN",
    "sglang_server_speculative_num_steps": 1,
    "sglang_server_speculative_eagle_topk": 1,
    "sglang_server_speculative_num_draft_tokens": 2,
    "sglang_server_max_running_requests": 64,
    "sglang_server_attention_backend": "triton",
}
FACTS = {"llmops_gpu": {"gpu_count": 4, "gpus": [{"index": i, "compute_capability": "12.0"} for i in range(4)]},
         "distribution": "Debian"}


def test_filters_registered():
    assert set(FILTERS) == {"sglang_launch", "sglang_expected_server_args", "sglang_systemd_exec",
                            "sglang_router_launch", "sglang_context", "sglang_container_argv",
                            "sglang_unit_value", "sglang_unit_environment", "sglang_env_file", "sglang_systemd_env_file",
                            "sglang_image_check", "sglang_server_destinations", "sglang_gpu_check",
                            "sglang_server_variables", "sglang_server_description", "sglang_server_validation_key"}


def test_context_from_facts_and_launch():
    ctx = FILTERS["sglang_context"](FACTS, {"disable_custom_all_reduce": True, "reason": "SEV-SNP"})
    assert ctx == {"llmops_gpu": FACTS["llmops_gpu"], "in_container": True,
                   "nccl_p2p_decision": {"disable_custom_all_reduce": True, "reason": "SEV-SNP"}}
    out = FILTERS["sglang_launch"](DESC, "0.5.9", ctx)
    assert out["argv"][:5] == ["python3", "-m", "sglang.launch_server", "--model-path", "/models/Qwen3.5-122B-A10B"]
    assert "--disable-custom-all-reduce" in out["argv"]
    assert out["env"] == {"SGLANG_ENABLE_SPEC_V2": "1"}


def test_context_without_gpu_facts():
    assert FILTERS["sglang_context"]({}, None) == {"llmops_gpu": None, "in_container": True, "nccl_p2p_decision": None}


def test_expected_server_args_filter():
    exp = FILTERS["sglang_expected_server_args"](DESC, "0.5.23", {})
    assert exp["speculative_algorithm"] == "EAGLE"
    assert exp["speculative_num_draft_tokens"] == 2
    assert exp["mamba_radix_cache_strategy"] == "extra_buffer"
    assert exp["max_running_requests"] == 64 and exp["tp_size"] == 4


def test_refusal_becomes_filter_error_with_message():
    bad = dict(DESC, sglang_server_attention_backend="flashinfer")
    ctx = FILTERS["sglang_context"](FACTS)
    with pytest.raises(AnsibleFilterError) as info:
        FILTERS["sglang_launch"](bad, "0.5.9", ctx)
    msg = str(info.value)
    assert "sglang_server_attention_backend='flashinfer'" in msg and "Fix:" in msg


def test_systemd_exec_filter():
    assert FILTERS["sglang_systemd_exec"](["a b", "x"]) == '"a b" x'
    with pytest.raises(AnsibleFilterError):
        FILTERS["sglang_systemd_exec"]("not a list")


def test_router_filter():
    argv = FILTERS["sglang_router_launch"](["http://h1:30000", "http://h2:30000"], 8000, "round_robin")
    assert argv[-4:] == ["--port", "8000", "--policy", "round_robin"]
    with pytest.raises(AnsibleFilterError, match="sglang_server_router_policy"):
        FILTERS["sglang_router_launch"](["http://h1:30000", "http://h2:30000"], 8000, "fastest")


def test_variable_table_filters():
    names = FILTERS["sglang_server_variables"]("all")
    assert len(names) == 85 and names[0] == "sglang_server_name"
    assert FILTERS["sglang_server_variables"]("secret") == ["sglang_server_api_key", "sglang_server_hf_token"]
    with pytest.raises(AnsibleFilterError, match="unknown kind 'nope'"):
        FILTERS["sglang_server_variables"]("nope")
    inputs = dict((n, None) for n in names)
    inputs.update(sglang_server_model_path="/models/m", sglang_server_tp_size=4, sglang_server_version="0.5.9")
    desc = FILTERS["sglang_server_description"](inputs, {}, {})
    assert desc["model_path"] == "/models/m" and desc["tp_size"] == 4 and "version" not in desc
    key = FILTERS["sglang_server_validation_key"](inputs, desc, {"gpu_count": 4}, {})
    assert len(key) == 64 and key != FILTERS["sglang_server_validation_key"](inputs, desc, {"gpu_count": 2}, {})
    with pytest.raises(AnsibleFilterError, match="sglang_server: the role.s variables are missing sglang_server_name, sglang_server_version, "):
        FILTERS["sglang_server_validation_key"]({}, desc)
    with pytest.raises(AnsibleFilterError, match="sglang_server_served_model_name"):
        FILTERS["sglang_server_destinations"]({}, dict(desc, served_model_name="a\nb"))


def test_launch_takes_the_roles_variables_with_the_tuned_settings():
    inputs = dict((n, None) for n in FILTERS["sglang_server_variables"]("all"))
    inputs.update(DESC, sglang_server_version_force=False)
    ctx = FILTERS["sglang_context"](FACTS, None)
    tuned = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 2, "speculative_eagle_topk": 1,
             "speculative_num_draft_tokens": 3, "speculative_draft_model_path": None, "arm": "s2"}
    out = FILTERS["sglang_launch"](inputs, "0.5.9", ctx, tuned, {})
    argv = out["argv"]
    # the decision's 2/1/3 replace the inventory's 1/1/2; NEXTN is rendered as given (SGLang maps it to EAGLE itself)
    assert argv[argv.index("--speculative-num-steps") + 1] == "2"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "3"
    with pytest.raises(AnsibleFilterError, match="sglang_server: the role's variables are missing"):
        FILTERS["sglang_launch"](DESC, "0.5.9", ctx, {}, {})


def test_launch_serves_a_table_mode_decision_with_adaptive_on():
    # spec_tune mode=table: the decision carries adaptive on and the tuned table (decision.tuned_settings passes them on)
    inputs = dict((n, None) for n in FILTERS["sglang_server_variables"]("all"))
    inputs.update(DESC, sglang_server_version_force=False, sglang_server_speculative_adaptive=False,
                  sglang_server_speculative_adaptive_config={})
    ctx = FILTERS["sglang_context"](FACTS, None)
    table = {"1": {"candidate_steps": [1, 3]}, "32": {"candidate_steps": [0, 1]}}
    tuned = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
             "speculative_num_draft_tokens": 4, "speculative_draft_model_path": None, "arm": "NEXTN-s3-k1-d4",
             "speculative_adaptive": True, "speculative_adaptive_config": table}
    out = FILTERS["sglang_launch"](inputs, "0.5.23", ctx, tuned, {})
    argv = out["argv"]
    # 3 steps (the largest candidate) start the server, 3 + 1 draft tokens, the table mounted and named
    assert "--speculative-adaptive" in argv and argv[argv.index("--speculative-num-steps") + 1] == "3"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4"
    assert out["adaptive_config"]["content"] == '{\n  "1": {"candidate_steps": [1, 3]},\n  "32": {"candidate_steps": [0, 1]}\n}\n'
