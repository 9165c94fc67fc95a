"""speculative_tuning with speculative_tuning_mode table (issue 21): the role's inputs step (tasks/inputs.yml) fixes the
mode and the levels before anything changes. Where adaptive can run the levels are the buckets (the sweep is not
added); where it cannot the run is static (the sweep and the target) and the reason is kept for the report.

Runs the tasks on the controller (test_role_rendering's harness); the values are the role's variables written by hand.
"""
from __future__ import annotations

from test_role_rendering import REF_GPU, facts, role_task, run_tasks

KEEP = {"name": "Keep the mode and the inputs", "ansible.builtin.set_fact": {
    "rendered": "{{ {'refusal': speculative_tuning__table_refusal, 'table': speculative_tuning__table | bool, "
                "'inputs': speculative_tuning__inputs} }}"}}


def run(tmp_path, **play_vars):
    base = {"speculative_tuning_mode": "table", "sglang_server_max_running_requests": 64,
            "sglang_benchmark_concurrency": [1, 4, 16]}
    base.update(play_vars)
    return run_tasks(tmp_path, facts("ubuntu2404", REF_GPU), [role_task("speculative_tuning", "inputs.yml"), KEEP], base)


def test_table_mode_measures_the_buckets(tmp_path):
    rc, text, res = run(tmp_path, sglang_server_version="0.5.23", speculative_tuning_buckets=[64, 1, 8, 32])
    assert rc == 0, text
    # no weights, no target: the buckets weigh equally; the sweep [1, 4, 16] is not added
    assert res["rendered"] == {"refusal": "", "table": True, "inputs": {
        "weights": {"64": 1.0, "1": 1.0, "8": 1.0, "32": 1.0}, "levels": [1, 8, 32, 64]}}


def test_table_mode_falls_back_to_static_where_adaptive_cannot_run(tmp_path):
    rc, text, res = run(tmp_path, sglang_server_version="0.5.10", speculative_tuning_buckets=[1, 8],
                        speculative_tuning_target_concurrency=8)
    assert rc == 0, text
    assert res["rendered"]["table"] is False
    assert res["rendered"]["refusal"].startswith("sglang_server_version (SGLang 0.5.10 rules) has no --speculative-adaptive")
    # a static run: the sweep plus the target, the buckets are not levels
    assert res["rendered"]["inputs"] == {"weights": {"8": 1.0}, "levels": [1, 4, 8, 16]}
