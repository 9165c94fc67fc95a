"""Preflight variable checks (plugins/plugin_utils/_vars/checks.py) against the roles' real meta/argument_specs.yml.

Each bad input of issue 14 (and its neighbours) is one row: the variable, the value as a user would pass it, and the
words the message must hold. Every message must start with "<variable>=" and hold a "Fix:". The specs are read here from
the files; the check itself reads the generated table (role_specs.py), which test_role_specs.py keeps equal to them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.plugin_utils._vars import checks as vc
from ansible_collections.llmops.sglang.plugins.plugin_utils._vars.published import PUBLISHED_FACTS

REPO = Path(__file__).resolve().parents[5]
SPECS = [yaml.safe_load(path.read_text()) for path in sorted((REPO / "roles").glob("*/meta/argument_specs.yml"))]

BAD_VARIABLES = [
    ("sglang_server_port", "abc", "must be a whole number. Fix: use a free TCP port such as 30000"),
    ("sglang_server_port", 70000, "not a TCP port (1-65535)"),
    ("sglang_server_tp_size", 0, "must be at least 1"),
    ("sglang_server_mem_fraction_static", 1.5, "must be in (0, 1)"),
    ("sglang_server_mem_fraction_static", "lots", "must be a number"),
    ("sglang_server_ready_timeout", -1, "must be at least 1. Fix: give the seconds model loading may take"),
    ("sglang_server_ready_delay", 0, "must be at least 1"),
    ("sglang_server_journal_lines", 0, "must be in [1, 10000]"),
    ("sglang_server_engine", "lxc", "not one of podman, docker"),
    ("sglang_server_image_pull", "sometimes", "not one of missing, always, never"),
    ("sglang_server_ipc_host", "maybe", "must be a boolean"),
    ("sglang_server_extra_args", "--enable-foo", "must be a list (a string is not split into one)"),
    ("sglang_server_extra_env", ["A=1"], "must be a mapping"),
    ("sglang_server_router_policy", "fastest", "not one of cache_aware"),
    ("nvidia_driver_branch", "570", "the image needs CUDA 13.0, whose driver floor is branch 580"),
    ("nvidia_driver_branch", "latest", "must be a 3-digit driver branch"),
    ("nvidia_driver_flavour", "closed", "not one of open, proprietary, auto"),
    ("nccl_extra_env", {"NCCL_P2P_DISABLE": "1"}, "NCCL_P2P_DISABLE belongs to the P2P policy"),
    ("nccl_extra_env", {"FOO": "1"}, "key FOO is not an NCCL_* variable"),
    ("nccl_extra_env", "NCCL_IB_DISABLE=1", "must be a mapping"),
    ("nccl_p2p", "sometimes", "not one of auto, enabled, disabled"),
    ("iommu_mode", "strict", "not one of auto, translated, passthrough, off, unmanaged"),
    ("sglang_benchmark_concurrency", "1,8", "must be a list (a string is not split into one). Fix: write a list"),
    ("sglang_benchmark_concurrency", [1, 0], "every element must be a whole number >= 1 (0 is not)"),
    ("sglang_benchmark_request_rates", [-1], "every element must be a number > 0 (-1 is not)"),
    ("sglang_benchmark_request_rates", ["fast"], "every element must be a number > 0 (\"fast\" is not)"),
    ("sglang_benchmark_min_output_throughput", "fast", "must be a number. Fix: a gate in tok/s"),
    ("sglang_benchmark_max_p99_ttft_ms", -5, "must be in (0, inf]"),
    ("sglang_benchmark_num_prompts", -3, "must be at least 1"),
    ("sglang_benchmark_backend", "vllm", "not one of sglang, openai, openai-chat"),
    ("sglang_benchmark_max_failed_fraction", 2, "must be in [0, 1]"),
    ("sglang_benchmark_range_ratio", 0, "must be in (0, 1]"),
    ("sglang_benchmark_temperature", -0.5, "must be at least 0"),
    ("sglang_benchmark_top_p", 0, "must be in (0, 1]"),
    ("sglang_benchmark_burstiness", 0, "must be in (0, inf]"),
    ("sglang_benchmark_trace_time_scale", -1, "must be in (0, inf]"),
    ("sglang_benchmark_client_processes", 65, "must be in [1, 64]"),
    ("sglang_benchmark_multi_turn_max_turns", -1, "must be at least 0"),
    ("sglang_benchmark_slo_tpot_ms", 0, "must be in (0, inf]"),
    ("sglang_benchmark_min_goodput_fraction", 1.5, "must be in [0, 1]"),
    ("sglang_benchmark_max_age", -1, "must be at least 0"),
    ("sglang_benchmark_fleet_threshold", 1, "must be in [0, 1)"),
    ("preflight_image_cuda_version", "13", "must look like 13.0"),
    ("preflight_model_params_billion", -1, "must be at least 0"),
    ("speculative_watch_accept_length_margin", 1.5, "a margin is a fraction strictly between 0 and 1. Fix: a fraction in (0, 1)"),
    ("speculative_watch_decode_margin", 0, "a margin is a fraction strictly between 0 and 1"),
    ("speculative_watch_window", "5 min", "not a Prometheus duration"),
    ("speculative_watch_job", "9job", "not a Prometheus job name"),
    ("speculative_watch_alert_for", {"SGLangNope": "5m"}, "'SGLangNope' is not one of the alerts"),
    ("speculative_watch_accept_length", 0.5, "must be at least 1"),
]


@pytest.mark.parametrize("name,value,words", BAD_VARIABLES, ids=["%s=%r" % (row[0], row[1]) for row in BAD_VARIABLES])
def test_bad_variable_named_with_value_reason_and_fix(name, value, words):
    problems = vc.variable_problems({name: value}, SPECS, {"image_cuda_version": "13.0"})
    assert len(problems) == 1, problems
    assert problems[0].startswith(name + "="), problems[0]
    assert words in problems[0] and "Fix:" in problems[0]


def test_good_values_pass():
    good = {"sglang_server_port": "30000", "sglang_server_tp_size": 4, "sglang_server_mem_fraction_static": "0.85",
            "sglang_server_ready_timeout": 1800, "nvidia_driver_branch": 580, "nccl_extra_env": {"NCCL_IB_DISABLE": "1"},
            "sglang_benchmark_concurrency": [1, 8], "sglang_benchmark_request_rates": [2, 4.5], "sglang_benchmark_backend": "openai",
            "sglang_benchmark_min_output_throughput": None, "sglang_server_ipc_host": "yes", "sglang_server_gpus": [0, 1],
            "unrelated_variable": "anything"}
    assert vc.variable_problems(good, SPECS, {"image_cuda_version": "13.0"}) == []


def test_branch_floor_follows_the_image_cuda():
    # CUDA 12.8 images run on branch 570 (floor 570.26); CUDA 12.9 needs 575 (575.51.03); 13.x 580 (580.65.06); no floor
    # is recorded for 12.4, so any 3-digit branch passes there. The floors are policy.CUDA_DRIVER_FLOORS, the one table.
    assert vc.variable_problems({"nvidia_driver_branch": "570"}, SPECS, {"image_cuda_version": "12.8"}) == []
    assert "floor is branch 575" in vc.variable_problems({"nvidia_driver_branch": "570"}, SPECS, {"image_cuda_version": "12.9"})[0]
    assert "floor is branch 580" in vc.variable_problems({"nvidia_driver_branch": "575"}, None, {"image_cuda_version": "13.2"})[0]
    assert vc.variable_problems({"nvidia_driver_branch": "535"}, None, {"image_cuda_version": "12.4"}) == []


def test_secret_values_redacted():
    problems = vc.variable_problems({"sglang_server_api_key": ["sk-FAKE-123"]}, SPECS)
    assert problems and "sk-FAKE" not in problems[0] and "<redacted>" in problems[0]


def test_every_problem_reported_together():
    problems = vc.variable_problems({"sglang_server_port": "abc", "sglang_benchmark_num_prompts": -3, "nvidia_driver_branch": "570"}, SPECS)
    assert [p.split("=")[0] for p in problems] == ["nvidia_driver_branch", "sglang_benchmark_num_prompts", "sglang_server_port"]


def test_every_rule_names_a_documented_variable():
    documented = set(vc.spec_options(SPECS))
    assert sorted(set(vc.RULES) - documented) == []


# Misspelled names (issue 14): (name as typed, value, the valid names the fix must offer), written by hand. Runners-up
# nearly as close as the best match are offered too.
MISSPELLED = [
    ("sglang_server_speculative_num_step", 3, "sglang_server_speculative_num_steps"),
    ("nccl_p2p_polcy", "disable", "nccl_p2p_force (or nccl_p2p)"),
    ("sglang_server_tp_szie", 4, "sglang_server_tp_size (or sglang_server_pp_size, sglang_server_page_size)"),
    ("sglang_benchmark_concurency", [1, 8], "sglang_benchmark_concurrency"),
    ("nvidia_driver_brnch", "580", "nvidia_driver_branch"),
    ("iommu_reboot_allowd", True, "iommu_reboot_allowed"),
    ("preflight_image_cuda_verison", "13.0", "preflight_image_cuda_version"),
    ("sglang_server_rollout_serail", 1, "sglang_server_rollout_serial"),
    ("spec_tune_target_concurency", 32, "spec_tune_target_concurrency"),
]


@pytest.mark.parametrize("name,value,closest", MISSPELLED, ids=[row[0] for row in MISSPELLED])
def test_misspelled_name_refused_with_the_closest_valid_name(name, value, closest):
    problems = vc.unknown_variables({name: value}, SPECS)
    assert problems == ["%s: not a variable of this collection (a misspelled name is ignored silently, so its value would never be "
                        "used). Fix: did you mean %s? Rename it (see its entry in the role's meta/argument_specs.yml or docs/)"
                        % (name, closest)]
    assert vc.unknown_variables([name], SPECS) == problems         # names alone give the same message


def test_valid_playbook_internal_and_foreign_names_pass():
    names = {"sglang_server_speculative_num_steps": 3, "nccl_p2p": "auto", "sglang_server_rollout_serial": [1, "50%"],
             "sglang_benchmark_ab_min_gain": 0.05, "spec_tune_weights": {"8": 1}, "sglang_server_launch": {},
             "nccl_p2p_decision": {}, "preflight__result": {}, "nvidia_driver__plan": {}, "sglang_server__unit": "x.service",
             "sglang_target_concurrency": 32, "llmops_target": "gpu_hosts", "unrelated_variable": 1, "sglang_production": 1}
    assert vc.unknown_variables(names, SPECS) == []


def test_unknown_name_without_a_close_match_and_secret_values():
    problems = vc.unknown_variables({"nccl_zzzzzzzzzzzz": 1, "sglang_server_api_kye": "sk-FAKE-9", "sglang_server_bearer": "hf_FAKE-7"},
                                    SPECS)
    assert len(problems) == 3 and "FAKE" not in " ".join(problems)     # no value, even under a name no rule calls secret
    assert problems[0].startswith("nccl_zzzzzzzzzzzz: not a variable of this collection")
    assert problems[0].endswith("Fix: remove it, or use a documented nccl_* variable (ansible-doc -t role llmops.sglang.<role>)")
    assert problems[1].startswith("sglang_server_api_kye: ") and "did you mean sglang_server_api_key?" in problems[1]
    assert problems[2].startswith("sglang_server_bearer: not a variable of this collection")


def test_a_list_of_names_is_accepted():
    assert vc.unknown_variables(["sglang_server_prot"], SPECS)[0].startswith("sglang_server_prot: not a variable")


def _assigned_names():
    """Every variable name with a collection prefix that the collection itself assigns (YAML keys, register:)."""
    pattern = r"(?:%s)[a-z0-9][a-z0-9_]*" % "|".join(vc.PREFIXES)
    names = set()
    for base in ("roles", "playbooks", "inventories", "extensions", "tests/sandbox"):
        for path in (REPO / base).rglob("*"):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".json", "") and "sglang_sim" not in path.parts:
                text = path.read_text(errors="replace")
                names |= set(re.findall(r"register:\s*(%s)\b" % pattern, text))
                names |= set(re.findall(r"^\s*(?:-\s+)?(%s)\s*:" % pattern, text, re.M))
                names |= set(re.findall(r"[\"'{,]\s*(%s)[\"']?\s*:" % pattern, text))
    return names


def test_every_name_the_collection_assigns_is_known():
    # A name missing here would be refused as a misspelling by preflight: rename it <role>__<name> (internal), or, when
    # another role or a playbook reads it, add it to published.PUBLISHED_FACTS.
    assigned = _assigned_names()
    assert len(assigned) > 150, len(assigned)
    assert sorted(assigned - vc.known_variables(SPECS)) == []
    # the same without the files: the generated table
    assert sorted(assigned - vc.known_variables()) == []


def test_every_published_fact_is_still_assigned():
    # a row of the table that nothing sets any more is a stale exception to the misspelling check
    assert sorted(set(PUBLISHED_FACTS) - _assigned_names()) == []


def test_a_role_internal_assigned_with_one_underscore_would_be_refused():
    # what the convention protects against: the old name of nvidia_driver's plan is no variable of the collection now
    problems = vc.unknown_variables(["nvidia_driver_plan", "iommu_method", "preflight_problems", "nvidia_driver__plan"])
    assert [p.split(":")[0] for p in problems] == ["iommu_method", "nvidia_driver_plan", "preflight_problems"]
    assert all(": not a variable of this collection (a misspelled name is ignored silently" in p for p in problems)


def test_prefixes_are_the_roles_directory_and_the_playbook_prefix():
    roles = sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/meta/argument_specs.yml"))
    assert sorted(vc.PREFIXES) == sorted([r + "_" for r in roles] + ["spec_tune_"])
    # longest first: a role named like the start of another's name never takes its variables
    assert [len(p) for p in vc.PREFIXES] == sorted((len(p) for p in vc.PREFIXES), reverse=True)


def test_collection_variable_problems_reads_only_checked_values():
    read = []

    def value_of(name):
        read.append(name)
        return {"sglang_server_port": "abc", "nccl_p2p": "auto"}.get(name)

    names = ["sglang_server_port", "nccl_p2p", "nccl_p2p_polcy", "sglang_server__x", "inventory_hostname", "nccl_site_note"]
    problems = vc.collection_variable_problems(names, value_of, known_own=["nccl_site_note"], context={"image_cuda_version": "13.0"})
    assert sorted(read) == ["nccl_p2p", "sglang_server_port"]          # never the misspelled, internal or foreign name
    assert [p.split(":")[0] for p in problems] == ["sglang_server_port=\"abc\"", "nccl_p2p_polcy"]


def test_playbook_variables_are_documented_in_their_playbook_or_docs():
    text = "".join(p.read_text() for p in list((REPO / "playbooks").glob("*.yml")) + list((REPO / "docs").glob("*.md")))
    assert sorted(n for n in vc.PLAYBOOK_VARIABLES if n not in text) == []
    assert sorted(vc.PLAYBOOK_VARIABLES & set(vc.spec_options(SPECS))) == []
