"""Adaptive speculative decoding in the renderer: the flags per version, one refusal per condition under which SGLang
would switch adaptive off silently, the table validation (named entries), the initial step count and the JSON written.

Expected values are written by hand from the wheels' source (speculative/adaptive_spec_params.py,
arg_groups/speculative_hook.py of 0.5.14 and 0.5.23); tests/contract/test_adaptive_contract.py checks the texts against
the wheels themselves."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import adaptive
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import launch

BASE = {"model_path": "/models/m", "model_architecture": "LlamaForCausalLM", "speculative_algorithm": "EAGLE3",
        "speculative_draft_model_path": "/models/d", "speculative_adaptive": True}


def render(version="0.5.23", **changes):
    return launch.render_launch(dict(BASE, **changes), version)


def refusal(version="0.5.23", **changes):
    with pytest.raises(launch.SGLangArgsError) as err:
        render(version, **changes)
    return err.value


def flags_after(argv, flag):
    i = argv.index(flag)
    return argv[i + 1]


# ------------------------------------------------------------------------------------------ rendering
def test_builtin_table_renders_the_switch_and_the_resolved_parameters():
    out = render()
    argv = out["argv"]
    assert "--speculative-adaptive" in argv and "--speculative-adaptive-config" not in argv
    # 0.5.23 built-in table: union {0, 1, 3, 5, 7} -> middle (index 5 // 2 = 2) is 3; topk 1; draft tokens 3 + 1
    assert (flags_after(argv, "--speculative-num-steps"), flags_after(argv, "--speculative-eagle-topk"),
            flags_after(argv, "--speculative-num-draft-tokens")) == ("3", "1", "4")
    assert out["adaptive_config"] is None
    assert out["expected"]["speculative_adaptive"] is True and out["expected"]["speculative_adaptive_config"] is None


def test_builtin_table_of_0_5_14_has_other_candidates():
    # 0.5.14: bucket 1 is [1, 3, 7]: union {0, 1, 3, 7} -> index 2 -> 3; 5 is not a candidate there
    assert flags_after(render("0.5.14")["argv"], "--speculative-num-steps") == "3"
    assert "not in the adaptive config candidate_steps [0, 1, 3, 7]" in str(refusal("0.5.14", speculative_num_steps=5))
    assert flags_after(render("0.5.23", speculative_num_steps=5)["argv"], "--speculative-num-steps") == "5"


def test_a_table_is_written_as_json_and_mounted_path_rendered():
    table = {1: {"candidate_steps": [1, 3, 5], "ema_alpha": 0.3}, "32": {"candidate_steps": [0, 1]}, "warmup_batches": 4}
    out = render(speculative_adaptive_config=table)
    assert flags_after(out["argv"], "--speculative-adaptive-config") == "/etc/sglang-adaptive/speculative_adaptive.json"
    assert out["adaptive_config"]["path"] == "/etc/sglang-adaptive/speculative_adaptive.json"
    written = json.loads(out["adaptive_config"]["content"])
    assert written == {"warmup_batches": 4, "1": {"candidate_steps": [1, 3, 5], "ema_alpha": 0.3}, "32": {"candidate_steps": [0, 1]}}
    # union {0, 1, 3, 5} -> index 2 -> 3
    assert flags_after(out["argv"], "--speculative-num-steps") == "3"
    assert out["expected"]["speculative_adaptive_config"] == "/etc/sglang-adaptive/speculative_adaptive.json"


def test_nextn_counts_as_eagle():
    out = render(speculative_algorithm="NEXTN", speculative_draft_model_path=None, model_architecture="Qwen3NextForCausalLM")
    assert "--speculative-adaptive" in out["argv"]


def test_off_renders_nothing():
    out = launch.render_launch(dict(BASE, speculative_adaptive=False, speculative_num_steps=3, speculative_eagle_topk=1,
                                    speculative_num_draft_tokens=4), "0.5.23")
    assert "--speculative-adaptive" not in out["argv"] and "speculative_adaptive" not in out["expected"]


# ------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("version", ["0.4.10", "0.5.4", "0.5.9", "0.5.10"])
def test_versions_without_the_flags_are_refused_naming_the_version(version):
    err = refusal(version)
    assert err.variable == "sglang_server_speculative_adaptive"
    assert "SGLang %s's parser has no --speculative-adaptive" % version in str(err)
    assert "0.5.14" in err.fix


@pytest.mark.parametrize("name, changes, version, variable, reason", [
    ("algorithm", {"speculative_algorithm": "STANDALONE"}, "0.5.23", "sglang_server_speculative_algorithm",
     "speculative_algorithm=STANDALONE (only EAGLE/EAGLE3 are supported)"),
    ("ngram", {"speculative_algorithm": "NGRAM", "speculative_draft_model_path": None}, "0.5.14", "sglang_server_speculative_algorithm",
     "speculative_algorithm=NGRAM (only EAGLE/EAGLE3 are supported)"),
    ("topk", {"speculative_eagle_topk": 2}, "0.5.23", "sglang_server_speculative_eagle_topk",
     "speculative_eagle_topk=2 (only topk=1 is supported)"),
    ("dp attention 0.5.14", {"extra_args": ["--enable-dp-attention", "--dp-size", "2"]}, "0.5.14", "sglang_server_extra_args",
     "enable_dp_attention=True is not supported (adaptive tier decisions are not synchronized across DP ranks)"),
    ("dp attention 0.5.23", {"extra_args": ["--attn-dp-size=4"]}, "0.5.23", "sglang_server_extra_args",
     "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"),
    ("dp attention deprecated 0.5.23", {"extra_args": ["--enable-dp-attention", "--data-parallel-size", "2"]}, "0.5.23",
     "sglang_server_extra_args", "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"),
    ("multi-layer eagle", {"extra_args": ["--enable-multi-layer-eagle"]}, "0.5.23", "sglang_server_extra_args",
     "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"),
    ("multi-layer eagle by architecture", {"speculative_algorithm": "EAGLE", "model_architecture": "MiMoV2FlashForCausalLM"}, "0.5.14",
     "sglang_server_model_architecture", "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"),
    ("two-batch overlap", {"extra_args": ["--enable-two-batch-overlap"]}, "0.5.14", "sglang_server_extra_args",
     "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)"),
    ("pd-mux", {"extra_args": ["--enable-pdmux"]}, "0.5.23", "sglang_server_extra_args",
     "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)"),
])
def test_each_disabling_condition_is_refused_with_sglangs_reason(name, changes, version, variable, reason):
    err = refusal(version, **changes)
    assert err.variable == variable, name
    assert "'speculative_adaptive disabled: %s. Falling back to static speculative params.'" % reason in str(err), name
    assert "sglang_server_speculative_adaptive: false" in err.fix


def test_dp_size_without_dp_attention_is_not_attention_dp():
    # 0.5.23: --dp-size alone counts replicas (attn_dp_size stays 1); SGLang keeps adaptive on
    assert "--speculative-adaptive" in render("0.5.23", extra_args=["--dp-size", "2"])["argv"]


def test_adaptive_without_speculation_and_a_table_without_adaptive_are_refused():
    err = refusal(speculative_algorithm=None, speculative_draft_model_path=None)
    assert err.variable == "sglang_server_speculative_adaptive" and "speculative_algorithm=None" in str(err)
    with pytest.raises(launch.SGLangArgsError) as exc:
        launch.render_launch(dict(BASE, speculative_adaptive=False, speculative_adaptive_config={1: {"candidate_steps": [1]}}), "0.5.23")
    assert exc.value.variable == "sglang_server_speculative_adaptive_config"


def test_steps_outside_the_candidates_and_wrong_draft_tokens_are_refused():
    err = refusal(speculative_num_steps=2)
    assert err.variable == "sglang_server_speculative_num_steps" and "[0, 1, 3, 5, 7]" in str(err)
    err = refusal(speculative_num_steps=5, speculative_num_draft_tokens=5)
    assert err.variable == "sglang_server_speculative_num_draft_tokens" and "num_steps + 1 = 6" in str(err)
    argv = render(speculative_num_steps=5, speculative_num_draft_tokens=6, speculative_eagle_topk=1)["argv"]
    assert flags_after(argv, "--speculative-num-draft-tokens") == "6"


# ------------------------------------------------------------------------------------------ the table
@pytest.mark.parametrize("table, entry, words", [
    ([1, 2], "sglang_server_speculative_adaptive_config", "must be a mapping"),
    ({}, None, None),  # empty = the built-in table, not an error
    ({"ema_alpha": 0.2}, "sglang_server_speculative_adaptive_config", "no batch-size bucket"),
    ({"1": {"candidate_steps": []}}, "sglang_server_speculative_adaptive_config[1.candidate_steps]", "non-empty list of non-negative ints"),
    ({"1": {"candidate_steps": [1, -1]}}, "sglang_server_speculative_adaptive_config[1.candidate_steps]", "non-negative"),
    ({"1": {"candidate_steps": [1, 2.5]}}, "sglang_server_speculative_adaptive_config[1.candidate_steps]", "non-negative ints"),
    ({"1": {"candidate_steps": [True]}}, "sglang_server_speculative_adaptive_config[1.candidate_steps]", "non-negative ints"),
    ({"1": {"candidate_steps": "1,3"}}, "sglang_server_speculative_adaptive_config[1.candidate_steps]", "list"),
    ({"8": {"steps": [1]}}, "sglang_server_speculative_adaptive_config[8.candidate_steps]", "non-empty list"),
    ({"8": [0, 1]}, "sglang_server_speculative_adaptive_config[8]", "must be a mapping with candidate_steps"),
    ({"8": {"candidate_steps": [0, 1], "emma_alpha": 0.3}}, "sglang_server_speculative_adaptive_config[8.emma_alpha]", "not a per-bucket field"),
    ({"one": {"candidate_steps": [1]}}, "sglang_server_speculative_adaptive_config[one]", "neither a batch-size bucket"),
    ({"-1": {"candidate_steps": [1]}}, "sglang_server_speculative_adaptive_config[-1]", "neither a batch-size bucket"),
    ({8: {"candidate_steps": [1]}, "8": {"candidate_steps": [0]}}, "sglang_server_speculative_adaptive_config[8]", "given twice"),
    ({"1": {"candidate_steps": [1], "ema_alpha": 0}}, "sglang_server_speculative_adaptive_config[1.ema_alpha]", "(0, 1]"),
    ({"1": {"candidate_steps": [1], "ema_alpha": 1.5}}, "sglang_server_speculative_adaptive_config[1.ema_alpha]", "(0, 1]"),
    ({"1": {"candidate_steps": [1], "update_interval": 0}}, "sglang_server_speculative_adaptive_config[1.update_interval]", "divides by zero"),
    ({"1": {"candidate_steps": [1], "warmup_batches": -1}}, "sglang_server_speculative_adaptive_config[1.warmup_batches]", ">= 0"),
    ({"1": {"candidate_steps": [1], "ceiling_coeff": -0.5}}, "sglang_server_speculative_adaptive_config[1.ceiling_coeff]", ">= 0"),
    ({"1": {"candidate_steps": [1], "up_hysteresis": "0.1"}}, "sglang_server_speculative_adaptive_config[1.up_hysteresis]", "a number"),
    ({"1": {"candidate_steps": [1]}, "update_interval": 2.5}, "sglang_server_speculative_adaptive_config[update_interval]", "whole number"),
])
def test_table_validation_names_the_bad_entry(table, entry, words):
    if entry is None:
        assert render(speculative_adaptive_config=table)["adaptive_config"] is None
        return
    err = refusal(speculative_adaptive_config=table)
    assert err.variable == entry
    assert words in err.reason


def test_validate_table_orders_buckets_and_keeps_numbers():
    out = adaptive.validate_table({64: {"candidate_steps": [0]}, "8": {"candidate_steps": [3, 0, 1], "down_hysteresis": -0.5},
                                   1: {"candidate_steps": [7]}, "ceiling_coeff": 1.5})
    assert list(out) == ["ceiling_coeff", "1", "8", "64"]
    assert out["8"] == {"candidate_steps": [3, 0, 1], "down_hysteresis": -0.5}
    assert adaptive.candidate_union(out) == [0, 1, 3, 7]
    assert adaptive.initial_steps(out) == 3 and adaptive.initial_steps(out, 7) == 7
    text = adaptive.table_json(out)
    assert text.count("\n") == 6 and json.loads(text) == out


def test_validation_key_takes_a_table_with_mixed_keys():
    # YAML gives int bucket keys next to str field keys; the role's validation key must still hash it (and see a change)
    from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import description as d
    inputs = dict((row.name, row.default) for row in d.VARIABLES)
    inputs.update(sglang_server_speculative_adaptive=True,
                  sglang_server_speculative_adaptive_config={1: {"candidate_steps": [1, 3]}, "ema_alpha": 0.3})
    desc = d.server_description(inputs)
    key = d.validation_key(inputs, desc)
    inputs["sglang_server_speculative_adaptive_config"] = {1: {"candidate_steps": [1, 5]}, "ema_alpha": 0.3}
    assert len(key) == 64 and d.validation_key(inputs, d.server_description(inputs)) != key


# -- the tuner's table mode: where adaptive cannot be an arm (one reason per condition) --------------------------

@pytest.mark.parametrize("profile, algorithm, topk, arch, extra, words", [
    ("0.5.10", "NEXTN", None, None, [], "SGLang 0.5.10 rules) has no --speculative-adaptive: the flags exist from 0.5.14 and 0.5.23"),
    ("0.5.9", "EAGLE", None, None, [], "SGLang 0.5.9 rules) has no --speculative-adaptive"),
    ("0.5.23", "standalone", None, None, [], "speculative_tuning_default_algorithm=STANDALONE: SGLang would log 'speculative_adaptive "
     "disabled: speculative_algorithm=STANDALONE (only EAGLE/EAGLE3 are supported)'"),
    ("0.5.23", None, None, None, [], "speculative_tuning_default_algorithm=None"),
    ("0.5.23", "EAGLE3", 4, None, [], "arms' speculative_eagle_topk=4: SGLang would log 'speculative_adaptive disabled: "
     "speculative_eagle_topk=4 (only topk=1 is supported)'"),
    ("0.5.14", "NEXTN", None, None, ["--enable-dp-attention"], "sglang_server_extra_args=--enable-dp-attention: SGLang would "
     "log 'speculative_adaptive disabled: enable_dp_attention=True is not supported"),
    ("0.5.23", "NEXTN", None, None, ["--attn-dp-size", "4"], "sglang_server_extra_args=--attn-dp-size 4: SGLang would log "
     "'speculative_adaptive disabled: attention DP is not supported"),
    ("0.5.23", "EAGLE", None, None, ["--enable-multi-layer-eagle"], "enable_multi_layer_eagle=True is not supported"),
    ("0.5.23", "EAGLE", None, "MiMoV2ForCausalLM", [], "sglang_server_model_architecture=MiMoV2ForCausalLM: SGLang would log "
     "'speculative_adaptive disabled: enable_multi_layer_eagle=True"),
    ("0.5.23", "EAGLE3", None, None, ["--enable-two-batch-overlap"], "enable_two_batch_overlap=True is not supported"),
    ("0.5.14", "EAGLE3", None, None, ["--enable-pdmux"], "enable_pdmux=True is not supported"),
])
def test_table_mode_refusal_one_reason_per_condition(profile, algorithm, topk, arch, extra, words):
    reason = adaptive.table_mode_refusal(profile, algorithm, topk, arch, extra)
    assert words in reason


@pytest.mark.parametrize("profile, algorithm, topk, arch", [
    ("0.5.14", "NEXTN", None, None), ("0.5.23", "eagle3", 1, None)])
def test_table_mode_allowed(profile, algorithm, topk, arch):
    assert adaptive.table_mode_refusal(profile, algorithm, topk, arch, ["--mem-fraction-static", "0.8"]) is None
