"""bench_plan: the one sweep plan (plan_levels, plan_sweep as the action plugin calls it) and its progress (the line
after each level, the ETA, the early stop); every value worked out by hand."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import plan as bench_plan

ROLE_NAMES = {"max_concurrency": "sglang_benchmark_concurrency", "request_rate": "sglang_benchmark_request_rates",
              "num_prompts": "sglang_benchmark_num_prompts", "stop_on_failure": "sglang_benchmark_stop_on_failure"}


def role_plan(concurrency, rates=(), num_prompts=1, per_slot=0, extra=(), **kw):
    """The plan the sglang_benchmark role asks for: its levels sorted and unique, its names in messages."""
    options = dict(max_concurrency=concurrency, request_rate=list(rates) if isinstance(rates, tuple) else rates,
                   num_prompts=num_prompts, prompts_per_concurrency=per_slot, extra_concurrency=list(extra), sort_levels=True,
                   **kw)
    return bench_plan.plan_sweep(options, trace_requests=kw.pop("trace_requests", None), names=ROLE_NAMES)


def test_role_plan_sorted_unique_with_the_extra_level_and_waves():
    # concurrency [16, 1, 4, 4] + extra 8, 64 prompts, 4 per slot: 16 -> max(64, 64) = 64 requests, 4 waves
    plan = role_plan([16, 1, 4, 4], [], 64, 4, [8])
    assert [(lv["max_concurrency"], lv["num_prompts"], lv["waves"], lv["name"]) for lv in plan] == [
        (1, 64, 64.0, "concurrency 1"), (4, 64, 16.0, "concurrency 4"), (8, 64, 8.0, "concurrency 8"),
        (16, 64, 4.0, "concurrency 16")]
    assert all(lv["request_rate"] is None for lv in plan)


def test_prompts_per_concurrency_raises_the_count_at_high_concurrency():
    # 64 concurrent x 4 per slot = 256 > 100 prompts; 256 / 64 = 4 waves
    (lv,) = role_plan([64], [], 100, 4)
    assert (lv["num_prompts"], lv["waves"]) == (256, 4.0)


def test_rates_cross_concurrency_and_rate_only_waves_are_seconds():
    plan = role_plan([2], [8, 2.5], 10)
    assert [lv["name"] for lv in plan] == ["concurrency 2, rate 8 req/s", "concurrency 2, rate 2.5 req/s"]
    (lv,) = role_plan([], [2.5], 10)
    assert (lv["max_concurrency"], lv["request_rate"], lv["waves"], lv["name"]) == (None, 2.5, 4.0, "rate 2.5 req/s")
    (lv,) = role_plan([], [], 7)
    assert (lv["num_prompts"], lv["waves"], lv["name"]) == (7, 1.0, "no limit")


def test_module_order_keeps_repeated_levels_and_the_module_defaults():
    plan = bench_plan.plan_levels([4, 2, 2], [], 8)
    assert [lv["max_concurrency"] for lv in plan] == [4, 2, 2]
    # options left out take the module's defaults: max_concurrency [1], 100 prompts, levels as given
    (lv,) = bench_plan.plan_sweep({})
    assert (lv["max_concurrency"], lv["num_prompts"], lv["name"]) == (1, 100, "concurrency 1")
    plan = bench_plan.plan_sweep({"max_concurrency": [4, 2], "extra_concurrency": [1], "sort_levels": "no"})
    assert [lv["max_concurrency"] for lv in plan] == [4, 2, 1]


@pytest.mark.parametrize("conc, rates, needle", [
    ("1,8", [], "sglang_benchmark_concurrency='1,8': must be a list of levels (a single number or a comma-separated string"),
    ([1, 0], [], "sglang_benchmark_concurrency=[1, 0]: every level must be a whole number of concurrent requests >= 1"),
    ([1.5], [], "sglang_benchmark_concurrency=[1.5]: every level must be a whole number"),
    ([1], [0], "sglang_benchmark_request_rates=[0]: every level must be a finite request rate > 0 req/s"),
    ([1], 2, "sglang_benchmark_request_rates=2: must be a list of levels"),
])
def test_bad_levels_are_refused_by_name(conc, rates, needle):
    with pytest.raises(bench_plan.PlanError) as info:
        role_plan(conc, rates, 10)
    assert needle in str(info.value)


def test_scalars_are_whole_numbers_named_by_the_caller():
    with pytest.raises(bench_plan.PlanError, match=r"^sglang_benchmark_num_prompts='many': must be a whole number >= 1$"):
        role_plan([1], [], "many")
    with pytest.raises(bench_plan.PlanError, match=r"^shared_prefix.num_groups=-1: must be a whole number >= 1$"):
        bench_plan.plan_sweep({"shared_prefix": {"num_groups": -1, "prompts_per_group": 2}})
    assert role_plan([1], [], "12")[0]["num_prompts"] == 12        # -e key=value gives text


def test_a_trace_fixes_the_requests_and_drops_the_rate_levels():
    plan = role_plan([4, 1], [2.0], 100, 4, trace_requests=3)
    assert [(lv["max_concurrency"], lv["request_rate"], lv["num_prompts"]) for lv in plan] == [(1, None, 3), (4, None, 3)]


def test_shared_prefix_sends_groups_times_prompts():
    (lv,) = role_plan([4], [], 100, 8, shared_prefix={"num_groups": 3, "prompts_per_group": 5})
    assert (lv["num_prompts"], lv["waves"]) == (15, 3.75)


def test_check_levels_refuses_what_no_plan_gives():
    bench_plan.check_levels(role_plan([1, 8], [], 16, 4))
    with pytest.raises(bench_plan.PlanError, match=r"^levels\[1\]="):
        bench_plan.check_levels([{"max_concurrency": 1, "num_prompts": 4}, {"max_concurrency": 0, "num_prompts": 4}])


# ---- progress: the line after each level and the ETA -------------------------------------------------------------

LEVELS = [{"max_concurrency": 1, "request_rate": None, "num_prompts": 16, "waves": 16.0, "name": "concurrency 1"},
          {"max_concurrency": 8, "request_rate": None, "num_prompts": 32, "waves": 4.0, "name": "concurrency 8"},
          {"max_concurrency": 16, "request_rate": None, "num_prompts": 64, "waves": 4.0, "name": "concurrency 16"}]

RECORD = {"completed": 16, "failed": 0, "output_throughput": 441.84, "decode_tok_s_per_request": 115.66, "median_ttft_ms": 19.4,
          "p99_ttft_ms": 25.2, "median_tpot_ms": 8.641, "p99_tpot_ms": 9.249, "accept_length": 1.996, "dataset_name": "builtin",
          "warnings": [], "goodput": None}


def test_eta_is_seconds_per_wave_times_the_waves_left():
    # 20 s for the 16 waves of level 1: 1.25 s per wave; 8 waves left -> 10 s
    assert bench_plan.eta_seconds(LEVELS, 1, [20.0]) == pytest.approx(10.0)
    # 20 s + 10 s for 20 waves: 1.5 s per wave; 4 waves left -> 6 s
    assert bench_plan.eta_seconds(LEVELS, 2, [20.0, 10.0]) == pytest.approx(6.0)
    assert bench_plan.eta_seconds(LEVELS, 3, [20.0, 10.0, 6.0]) == 0.0


def test_the_line_of_a_level_and_the_eta_of_the_rest():
    progress = bench_plan.SweepProgress(LEVELS, stop_name="sglang_benchmark_stop_on_failure")
    assert progress.start_line(1) == "Benchmark level 2/3: concurrency 8, 32 requests"
    line = progress.add(0, {"records": [RECORD], "gate_failures": [], "duration_s": 20.0, "msg": "1 level(s) measured"})
    assert line == ("Result concurrency 1: 16 ok / 0 failed; output 441.8 tok/s, 115.7 tok/s per request, TTFT p50/p99 19/25 ms, "
                    "TPOT p50/p99 8.64/9.25 ms, accept len 2.00 (builtin); 20.0 s; 2 level(s) left, ETA ~10 s")
    assert progress.records == [RECORD] and progress.problems == [] and not progress.stopped


def test_goodput_warnings_and_a_level_without_speculation():
    rec = dict(RECORD, accept_length=None, warnings=["synthetic prompts", "capped"], goodput=1.25, goodput_fraction=0.875,
               dataset_name="random-ids")
    assert bench_plan.level_result(rec, 3.04) == (
        "16 ok / 0 failed; output 441.8 tok/s, 115.7 tok/s per request, TTFT p50/p99 19/25 ms, TPOT p50/p99 8.64/9.25 ms, "
        "accept len - (random-ids) [synthetic prompts; capped]; goodput 1.25 req/s (88 % within the SLO); 3.0 s;")


def test_a_failed_level_stops_the_sweep_and_names_the_option():
    progress = bench_plan.SweepProgress(LEVELS, stop_on_failure=True, stop_name="sglang_benchmark_stop_on_failure")
    gate = "serving_benchmark: 1 gate(s) missed: level 1 (max_concurrency=1): p99_tpot_ms 9.25 ms is above the gate 5.00 ms."
    line = progress.add(0, {"records": [RECORD], "gate_failures": ["p99_tpot_ms"], "duration_s": 20.0, "msg": gate})
    assert line.endswith("; 20.0 s; 2 level(s) skipped (sglang_benchmark_stop_on_failure); FAILED: " + gate)
    assert progress.problems == ["level 1 (concurrency 1): " + gate] and progress.stopped


def test_a_level_that_measured_nothing_failed_and_the_sweep_goes_on_without_stop():
    progress = bench_plan.SweepProgress(LEVELS, stop_on_failure=False)
    progress.add(0, {"records": [RECORD], "duration_s": 20.0})
    line = progress.add(1, {"failed": True, "msg": "serving_benchmark: the server at http://127.0.0.1:30000 is not ready",
                            "records": [], "duration_s": 0.3})
    # no record: the counts are unknown; 20.3 s for 20 waves, 4 waves left -> 4.06 s
    assert line == ("Result concurrency 8: 0 ok / ? failed; output 0.0 tok/s, 0.0 tok/s per request, TTFT p50/p99 0/0 ms, "
                    "TPOT p50/p99 0.00/0.00 ms, accept len - (?); 0.3 s; 1 level(s) left, ETA ~4 s; FAILED: serving_benchmark: "
                    "the server at http://127.0.0.1:30000 is not ready")
    assert not progress.stopped and len(progress.problems) == 1


def test_phases_replace_the_levels_with_one_moving_level():
    # 1 -> 8 -> 1 for 10 + 20 + 10 s: one level at the highest concurrency, waves = the seconds (the ETA's unit), the pool
    # max(num_prompts 50, 4 per slot x 8 = 32) = 50
    (lv,) = bench_plan.plan_sweep({"max_concurrency": [1, 4, 16], "num_prompts": 50, "prompts_per_concurrency": 4,
                                   "phases": [{"concurrency": 1, "duration_s": 10}, {"concurrency": 8, "duration_s": 20},
                                              {"concurrency": 1, "duration_s": 10}]})
    assert lv == {"max_concurrency": 8, "request_rate": None, "num_prompts": 50, "waves": 40.0, "name": "moving load 1/8/1 (40 s)",
                  "phases": [{"concurrency": 1, "duration_s": 10.0}, {"concurrency": 8, "duration_s": 20.0},
                             {"concurrency": 1, "duration_s": 10.0}]}
    with pytest.raises(bench_plan.PlanError, match=r"sglang_benchmark_phases\[0\]\.concurrency=0"):
        bench_plan.plan_sweep({"phases": [{"concurrency": 0, "duration_s": 1}]}, names={"phases": "sglang_benchmark_phases"})

    with pytest.raises(bench_plan.PlanError, match=r"levels\[0\]\.phases\[0\]\.duration_s=-1"):
        bench_plan.check_levels([{"max_concurrency": 8, "request_rate": None, "num_prompts": 4, "name": "moving",
                                  "phases": [{"concurrency": 8, "duration_s": -1}]}])
