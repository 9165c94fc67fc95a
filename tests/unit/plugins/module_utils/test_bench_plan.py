"""bench_plan.plan_levels and the llmops.sglang.sweep_plan filter: the one sweep plan (values worked out by hand)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.bench import FilterModule
from ansible_collections.llmops.sglang.plugins.module_utils import bench_plan

sweep_plan = FilterModule().filters()["sweep_plan"]


def test_role_plan_sorted_unique_with_the_extra_level_and_waves():
    # concurrency [16, 1, 4, 4] + extra 8, 64 prompts, 4 per slot: 16 -> max(64, 64) = 64 requests, 4 waves
    plan = sweep_plan([16, 1, 4, 4], [], 64, 4, [8])
    assert [(lv["max_concurrency"], lv["num_prompts"], lv["waves"], lv["name"]) for lv in plan] == [
        (1, 64, 64.0, "concurrency 1"), (4, 64, 16.0, "concurrency 4"), (8, 64, 8.0, "concurrency 8"),
        (16, 64, 4.0, "concurrency 16")]
    assert all(lv["request_rate"] is None for lv in plan)


def test_prompts_per_concurrency_raises_the_count_at_high_concurrency():
    # 64 concurrent x 4 per slot = 256 > 100 prompts; 256 / 64 = 4 waves
    (lv,) = sweep_plan([64], [], 100, 4)
    assert (lv["num_prompts"], lv["waves"]) == (256, 4.0)


def test_rates_cross_concurrency_and_rate_only_waves_are_seconds():
    plan = sweep_plan([2], [8, 2.5], 10)
    assert [lv["name"] for lv in plan] == ["concurrency 2, rate 8 req/s", "concurrency 2, rate 2.5 req/s"]
    (lv,) = sweep_plan([], [2.5], 10)
    assert (lv["max_concurrency"], lv["request_rate"], lv["waves"], lv["name"]) == (None, 2.5, 4.0, "rate 2.5 req/s")
    (lv,) = sweep_plan([], [], 7)
    assert (lv["num_prompts"], lv["waves"], lv["name"]) == (7, 1.0, "no limit")


def test_module_order_keeps_repeated_levels():
    plan = bench_plan.plan_levels([4, 2, 2], [], 8)
    assert [lv["max_concurrency"] for lv in plan] == [4, 2, 2]


@pytest.mark.parametrize("conc, rates, needle", [
    ("1,8", [], "sglang_benchmark_concurrency='1,8': must be a list of levels"),
    ([1, 0], [], "sglang_benchmark_concurrency=[1, 0]: every level must be a whole number of concurrent requests >= 1"),
    ([1.5], [], "sglang_benchmark_concurrency=[1.5]: every level must be a whole number"),
    ([1], [0], "sglang_benchmark_request_rates=[0]: every level must be a finite request rate > 0 req/s"),
])
def test_bad_levels_are_refused_by_name(conc, rates, needle):
    with pytest.raises(AnsibleFilterError) as info:
        sweep_plan(conc, rates, 10)
    assert needle in str(info.value)


def test_a_trace_fixes_the_requests_and_drops_the_rate_levels():
    trace = '{"timestamp": 0, "input_length": 8, "output_length": 4}\n\n{"timestamp": 5}\n  \n{"timestamp": 9}\n'
    plan = sweep_plan([4, 1], [2.0], 100, 4, trace=trace)             # 3 non-blank lines
    assert [(lv["max_concurrency"], lv["request_rate"], lv["num_prompts"]) for lv in plan] == [(1, None, 3), (4, None, 3)]
    (lv,) = sweep_plan([2], [], 100, trace=trace, trace_max_requests=2)
    assert (lv["num_prompts"], lv["waves"]) == (2, 1.0)


def test_shared_prefix_sends_groups_times_prompts():
    (lv,) = sweep_plan([4], [], 100, 8, shared_prefix={"num_groups": 3, "prompts_per_group": 5})
    assert (lv["num_prompts"], lv["waves"]) == (15, 3.75)
