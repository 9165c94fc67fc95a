"""plugins/filter/tuning.py: the speculative_tuning role's input check, running configuration and ETA, values by hand."""
from __future__ import annotations

import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter import tuning

GOOD = {"target_concurrency": 32, "weights": {}, "sweep": [1, 4, 16], "request_rates": [], "trials": 3, "min_trials": 2,
        "objective": "throughput", "slo_ttft_ms": None, "slo_tpot_ms": None, "max_running_requests": None, "workload": "builtin"}


def test_target_becomes_one_weight_and_is_added_to_the_levels():
    assert tuning.tuning_inputs(GOOD) == {"weights": {"32": 1.0}, "levels": [1, 4, 16, 32]}
    # a target given as a string of digits (-e key=value) is the same
    assert tuning.tuning_inputs(dict(GOOD, target_concurrency="32"))["weights"] == {"32": 1.0}


def test_weights_win_over_the_target_and_every_weighted_level_is_measured():
    out = tuning.tuning_inputs(dict(GOOD, target_concurrency=None, weights={"8": 3, 40: "1"}, max_running_requests=64))
    assert out == {"weights": {"8": 3.0, "40": 1.0}, "levels": [1, 4, 8, 16, 40]}


@pytest.mark.parametrize("change,named", [
    ({"target_concurrency": None}, "speculative_tuning_target_concurrency=undefined: set it to the concurrency"),
    ({"target_concurrency": 0}, "speculative_tuning_target_concurrency=0: set it"),
    ({"weights": {"8": 0}}, "speculative_tuning_weights="),
    ({"weights": {"x": 1}}, "speculative_tuning_weights="),
    ({"sweep": [1, "4"]}, "sglang_benchmark_concurrency=[1, '4'] must be a list of integers >= 1"),
    ({"sweep": "1,4"}, "sglang_benchmark_concurrency=1,4 must be"),
    ({"request_rates": [2.0]}, "sglang_benchmark_request_rates=[2.0] must be empty"),
    ({"trials": 0}, "speculative_tuning_trials=0"),
    ({"min_trials": 1}, "speculative_tuning_min_trials=1"),
    ({"objective": "latency"}, "speculative_tuning_objective='latency'"),
    ({"objective": "goodput"}, "needs an SLO"),
    ({"sweep": [1, 64]}, "The sweep goes up to concurrency 64, but sglang_server_max_running_requests is unset"),
    ({"max_running_requests": 16}, "The sweep goes up to concurrency 32, but sglang_server_max_running_requests=16: above "
                                   "that every arm queue"),
    ({"workload": "auto"}, "sglang_benchmark_workload='auto'"),
    ({"workload": ""}, "sglang_benchmark_workload=''"),
])
def test_bad_input_is_refused_naming_the_variable(change, named):
    with pytest.raises(AnsibleFilterError) as err:
        tuning.tuning_inputs(dict(GOOD, **change))
    assert named in str(err.value)


def test_the_old_prefix_can_be_named_in_errors():
    with pytest.raises(AnsibleFilterError, match="spec_tune_trials=0"):
        tuning.tuning_inputs(dict(GOOD, trials=0, prefix="spec_tune_"))


def test_mtp_ab_names_its_own_target_and_skips_the_server_checks_for_servers_it_does_not_manage():
    ab = {"target_concurrency": 64, "sweep": [1], "workload": "builtin", "target_name": "sglang_target_concurrency",
          "weights_name": "", "sweep_name": "The A/B sweep", "arms": 2}
    assert tuning.tuning_inputs(dict(ab, check_server=False)) == {"weights": {"64": 1.0}, "levels": [1, 64]}
    with pytest.raises(AnsibleFilterError, match="The A/B sweep goes up to concurrency 64, but sglang_server_max_running_requests "
                                                 "is unset.*it applies to both arms"):
        tuning.tuning_inputs(ab)
    with pytest.raises(AnsibleFilterError) as err:
        tuning.tuning_inputs(dict(ab, target_concurrency=None))
    assert str(err.value) == ("sglang_target_concurrency=undefined: set it to the concurrency the service really runs at, an "
                              "integer >= 1 (e.g. -e sglang_target_concurrency=32); the decision is taken there.")


def test_goodput_with_an_slo_and_a_sweep_at_the_cap_pass():
    assert tuning.tuning_inputs(dict(GOOD, objective="goodput", slo_tpot_ms=50, sweep=[48], target_concurrency=48))["levels"] == [48]


def test_running_configuration_prefers_the_recorded_decision():
    current = {"sglang_server_speculative_algorithm": "NEXTN", "sglang_server_speculative_num_steps": 3}
    assert tuning.tuning_running("", current) == {
        "speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": None,
        "speculative_num_draft_tokens": None, "speculative_draft_model_path": None}
    recorded = json.dumps({"server_vars": {"sglang_server_speculative_algorithm": None, "sglang_server_speculative_num_steps": None}})
    assert tuning.tuning_running(recorded, current)["speculative_algorithm"] is None
    assert tuning.tuning_running(recorded, current)["speculative_num_steps"] is None
    with pytest.raises(AnsibleFilterError, match="not a JSON object"):
        tuning.tuning_running("{", current)


def test_eta_is_the_mean_arm_time_times_the_arms_left():
    assert tuning.tuning_eta([], 3) == "unknown until the first arm finishes"
    assert tuning.tuning_eta([100.0, 60.0], 3) == "~240 s"           # (100 + 60) / 2 * 3


def test_tuning_table_refusal_maps_the_version_to_its_rules():
    # 0.5.12 renders with the 0.5.10 rules (the newest modelled version not newer): no adaptive flags there
    assert "SGLang 0.5.10 rules) has no --speculative-adaptive" in tuning.tuning_table_refusal({"version": "0.5.12", "algorithm": "NEXTN"})
    # 0.5.16 uses the 0.5.14 rules: adaptive exists, NEXTN with topk 1 runs
    assert tuning.tuning_table_refusal({"version": "0.5.16", "algorithm": "NEXTN", "topk": 1, "extra_args": []}) == ""
    assert "attention DP" in tuning.tuning_table_refusal({"version": "v0.5.23", "algorithm": "EAGLE3",
                                                          "extra_args": ["--attn-dp-size=2"]})
    with pytest.raises(AnsibleFilterError, match="sglang_server_version"):
        tuning.tuning_table_refusal({"version": "latest", "algorithm": "NEXTN"})


def test_tuning_table_refusal_checks_each_given_arm():
    arms = [{"speculative_algorithm": None}, {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1},
            {"algorithm": "EAGLE3", "num_steps": 2, "topk": 4}]
    assert "arms' speculative_eagle_topk=4" in tuning.tuning_table_refusal({"version": "0.5.23", "algorithm": "EAGLE3", "arms": arms})
    assert tuning.tuning_table_refusal({"version": "0.5.23", "algorithm": "EAGLE3", "arms": arms[:2]}) == ""


def test_table_mode_buckets_are_levels_and_weighted_equally_without_weights():
    base = {"target_concurrency": None, "weights": {}, "sweep": [], "trials": 3, "min_trials": 2, "objective": "throughput",
            "max_running_requests": 64, "workload": "builtin"}
    out = tuning.tuning_inputs(dict(base, buckets=[32, 1, 8]))
    assert out == {"weights": {"32": 1.0, "1": 1.0, "8": 1.0}, "levels": [1, 8, 32]}
    # a production distribution keeps its weights; the buckets are measured too
    out = tuning.tuning_inputs(dict(base, weights={"8": 3}, buckets=[1, 8]))
    assert out == {"weights": {"8": 3.0}, "levels": [1, 8]}
    with pytest.raises(AnsibleFilterError, match="speculative_tuning_buckets=\\[0\\]"):
        tuning.tuning_inputs(dict(base, buckets=[0]))
