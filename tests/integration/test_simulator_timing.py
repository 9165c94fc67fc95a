"""The simulator's timing model arithmetic, against values worked out by hand (no clock involved)."""
from __future__ import annotations

import pytest

from sglang_sim import knobs
from sglang_sim.timing import TimingModel, crossover_concurrency


def test_default_single_stream_rates():
    off = TimingModel()
    on = TimingModel(num_steps=1, num_draft_tokens=2)
    # off: 1 / (8.84 + 0.25) ms = 1000 / 9.09 = 110.011 tok/s
    assert off.steady_throughput(1) == pytest.approx(1000 / 9.09, rel=1e-9)
    # on: 8.84 + 0.25*2 + 3.83 + (1.5 + 0.145) = 14.815 ms for 2 tokens -> 134.998 tok/s
    assert on.decode_step_s(1) == pytest.approx(0.014815, rel=1e-9)
    assert on.steady_throughput(1) == pytest.approx(2000 / 14.815, rel=1e-9)


def test_default_crossover_and_64_streams():
    off = TimingModel()
    on = TimingModel(num_steps=1, num_draft_tokens=2)
    # on/off > 1 while c < (8.84 - 3.83 - 1.5) / 0.145 = 24.2 -> first losing concurrency is 25
    assert crossover_concurrency(off, on) == 25
    assert on.steady_throughput(24) > off.steady_throughput(24)
    # 64 streams: off 64 / (8.84 + 16) ms = 2576.5; on 128 / (8.84 + 32 + 3.83 + 1.5 + 9.28) ms = 2308.4
    assert off.steady_throughput(64) == pytest.approx(64000 / 24.84, rel=1e-9)
    assert on.steady_throughput(64) == pytest.approx(128000 / 55.45, rel=1e-9)


def test_accept_length_expectation_and_three_step_recipe():
    assert TimingModel.expected_accept_length(3, 0.5) == pytest.approx(1.875)
    assert TimingModel.expected_accept_length(1, 0.0) == 1.0
    on3 = TimingModel(num_steps=3, num_draft_tokens=4)
    # 8.84 + 0.25*4 + 3.83 + 3*(1.5 + 0.145) = 18.605 ms per verify step, 4 tokens at p = 1
    assert on3.steady_throughput(1, 1.0) == pytest.approx(4000 / 18.605, rel=1e-9)


def test_prefill_cost():
    # 1000 prompt tokens: 8.84 + 0.05 * 1000 = 58.84 ms
    assert TimingModel().prefill_s(1000) == pytest.approx(0.05884, rel=1e-9)


def test_knob_resolution_flags_over_env_and_errors():
    got = knobs.resolve({"SGLANG_SIM_ACCEPT_P": "0.3", "SGLANG_SIM_INSTANT": "1"}, {"accept_p": "0.6"})
    assert got["accept_p"] == 0.6 and got["instant"] is True and got["load_s"] == 0.0
    assert knobs.resolve({"SGLANG_SIM_BROKEN_DRAFT": "yes"}, {})["accept_p"] == 0.0
    assert knobs.resolve({"SGLANG_SIM_STALL_S": "inf"}, {})["stall_s"] == float("inf")
    with pytest.raises(knobs.KnobError, match=r"SGLANG_SIM_CRASH_AFTER='-1' is invalid .* integer >= 0"):
        knobs.resolve({"SGLANG_SIM_CRASH_AFTER": "-1"}, {})
    with pytest.raises(knobs.KnobError, match=r"--sim-gpu='a100' is invalid"):
        knobs.resolve({}, {"gpu": "a100"})
