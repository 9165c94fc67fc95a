# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The facts and registered results one role or playbook sets and another reads: the collection's published names.

Everything else a role sets is internal and named ``<role>__<name>`` (double underscore); the variable check
(:mod:`.checks`) never checks such a name. A published name keeps its role prefix and a single underscore, like an
option, so it must be listed here or preflight would refuse it as a misspelling when it is in scope (a later play of
the same run, a fact cache). tests/unit/plugins/plugin_utils/_vars/test_checks.py proves that every name the collection
assigns is an option, a playbook variable, an internal ``<role>__`` name or a row of this table, and that every row is
still assigned somewhere.

:data:`PUBLISHED_FACTS`: ``{name: (set by, read by, what it holds)}``.
"""

from __future__ import annotations

PUBLISHED_FACTS = {
    # host roles
    "preflight_gpu_facts_read": (
        "preflight (register of gpu_facts)", "nvidia_driver tasks/reboot.yml, playbooks/host.yml (skips the roles' spec check)",
        "the gpu_facts result of this run (registered, never from the fact cache): the facts are fresh, and "
        "model_dir holds the model directory read"),
    "nvidia_driver_reboot_pending": (
        "nvidia_driver (cacheable fact)", "playbooks/host.yml (stops before serving)", "bool: the driver needs a reboot that was not allowed"),
    "nvidia_driver_cdi_list": (
        "nvidia_driver tasks/verify.yml (register)", "sglang_server tasks/host_checks.yml",
        "the `nvidia-ctk cdi list` of this run after the last driver change (stdout_lines, rc)"),
    "iommu_reboot": (
        "iommu tasks/reboot.yml", "sglang_server tasks/host_checks.yml",
        "reboot_policy's decision of this run: {action: none|reboot|pending, reason, control_node}"),
    "iommu_reboot_pending": (
        "iommu (cacheable fact)", "playbooks/host.yml (stops before serving)", "bool: the IOMMU arguments need a reboot that was not allowed"),
    "nccl_p2p_decision": (
        "nccl (cacheable fact)", "sglang_server (launch arguments, unit environment), sglang_benchmark (report context)",
        "{p2p: enabled|disabled|not_applicable, env, disable_custom_all_reduce, gpus, reasons, reason, warnings}"),
    "nccl_disable_custom_all_reduce": (
        "nccl (cacheable fact)", "documented for plays of your own (docs/host_roles.md)", "bool: SGLang --disable-custom-all-reduce"),
    # serving and benchmarking
    "sglang_server_launch": (
        "sglang_server tasks/validate.yml", "sglang_server templates, sglang_benchmark vars, playbooks/benchmark.yml",
        "the rendered launch arguments (_sglang/launch.py)"),
    "sglang_server_description": ("sglang_server tasks/validate.yml", "docs/sglang_server.md", "the checked server description"),
    "sglang_server_expected": (
        "sglang_server tasks/validate.yml", "roles/speculative_check, playbooks/benchmark.yml, speculative_tuning tasks/verify.yml",
        "what the running server must report (speculative_check)"),
    "sglang_server_needs_rollout": ("sglang_server tasks/plan.yml", "playbooks/serve.yml", "bool: this host's unit changes"),
    "sglang_server_rollout_reasons": ("sglang_server tasks/plan.yml", "playbooks/serve.yml", "why the unit changes"),
    "sglang_benchmark_result": (
        "sglang_benchmark (register)", "playbooks/mtp_ab.yml, speculative_tuning tasks/trial.yml", "the serving_benchmark result"),
    "sglang_benchmark_ab_decision": ("playbooks/mtp_ab.yml", "playbooks/mtp_ab.yml, docs/benchmark.md", "the MTP on/off decision"),
    "sglang_benchmark_ab_off": ("playbooks/mtp_ab.yml", "playbooks/mtp_ab.yml", "the speculative-off arm's result"),
    "sglang_benchmark_ab_on": ("playbooks/mtp_ab.yml", "playbooks/mtp_ab.yml", "the speculative-on arm's result"),
    "speculative_tuning_decision": ("speculative_tuning tasks/decide.yml", "docs/spec_tune.md", "the tuning decision"),
    "speculative_tuning_decision_record": (
        "speculative_tuning tasks/decide.yml", "playbooks/spec_tune_fleet.yml", "the decision file's record"),
    "spec_tune_decision": ("playbooks/spec_tune.yml", "plays of your own (deprecated alias)", "speculative_tuning_decision"),
    "spec_tune_decision_record": (
        "playbooks/spec_tune.yml", "plays of your own (deprecated alias)", "speculative_tuning_decision_record"),
}
