"""The simulator's timing model arithmetic, against values worked out by hand (no clock involved), and the
real-time step scheduling against a fake clock whose timers wake late the way asyncio's do."""
from __future__ import annotations

import asyncio
import math
import types

import pytest

from sglang_sim import engine, knobs
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


def test_topk_widens_every_draft_step():
    # EAGLE 3 steps, topk 4, 8 draft tokens, 2 streams: 8.84 + 0.25*2*8 + 3.83 + 3*(1.5 + 0.145*2*4) = 24.65 ms
    tree = TimingModel(num_steps=3, num_draft_tokens=8, eagle_topk=4)
    assert tree.decode_step_s(2) == pytest.approx(0.02465, rel=1e-9)
    # topk 1 (and None, as for NGRAM) keeps the chain cost: 8.84 + 0.25*2*4 + 3.83 + 3*(1.5 + 0.29) = 20.04 ms
    assert TimingModel(num_steps=3, num_draft_tokens=4, eagle_topk=None).decode_step_s(2) == pytest.approx(0.02004, rel=1e-9)


def _best_chain(conc, p):
    rates = [TimingModel(num_steps=s, num_draft_tokens=s + 1 if s else 0).steady_throughput(conc, p) for s in range(5)]
    return rates.index(max(rates))


def test_best_draft_length_shrinks_with_concurrency():
    # p = 0.8, chains of s = 0..4 steps (D = s + 1); accept length 1 + .8 + ... + .8^s
    # c = 1: s=4: 3.3616 tokens / (8.84 + 1.25 + 3.83 + 4*1.645 = 20.50 ms) = 164.0 tok/s > s=3: 2.952 / 18.605 ms = 158.7
    assert _best_chain(1, 0.8) == 4
    # c = 8: s=3: 8*2.952 / (8.84 + 8 + 3.83 + 3*(1.5 + 1.16) = 28.65 ms) = 824.3 > s=2: 19.52 / 23.99 ms = 813.7
    #        > s=4: 26.89 / 33.31 ms = 807.4 > off: 8 / 10.84 ms = 738.0
    assert _best_chain(8, 0.8) == 3
    # c = 16: off 16 / 12.84 ms = 1246.1 > s=1: 28.8 / (8.84 + 8 + 3.83 + 1.5 + 2.32 = 24.49 ms) = 1176.0
    assert _best_chain(16, 0.8) == 0


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


class _FakeClock(object):
    """time.monotonic and asyncio.sleep stand-ins: a timer sleep wakes as late as asyncio's epoll selector
    makes it (timeout rounded up to a whole ms, plus 0.2 ms of timer slack); a zero sleep costs 10 us."""

    def __init__(self, now=100.0):
        self.now = now
        self.timer_sleeps = []
        self.yields = 0

    def monotonic(self):
        return self.now

    async def sleep(self, delay):
        if delay > 0:
            self.timer_sleeps.append(delay)
            self.now += math.ceil(delay * 1000.0) / 1000.0 + 0.0002
        else:
            self.yields += 1
            self.now += 0.00001


def test_real_time_step_ends_at_its_deadline_despite_late_timers(monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(engine.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(engine.asyncio, "sleep", clock.sleep)
    state = types.SimpleNamespace(instant=False, next_t=None)
    # prefill of 32 tokens: 8.84 + 0.05*32 = 10.44 ms. A plain timer sleep would wake at ceil(10.44) + 0.2 = 11.2 ms.
    asyncio.run(engine.Engine._spend(state, 0.01044))
    assert clock.timer_sleeps == [pytest.approx(0.01044 - engine.SPIN_MARGIN_S)]
    # timer: ceil(9.14 ms) + 0.2 = 10.2 ms; then 10 us yields until >= 10.44 ms: 24 yields, ending at 10.44 ms
    assert clock.yields == 24
    assert clock.now - 100.0 == pytest.approx(0.01044, abs=1e-5)
    # the next step is scheduled from the previous deadline (absolute schedule): 9.09 ms later
    asyncio.run(engine.Engine._spend(state, 0.00909))
    assert state.next_t == pytest.approx(100.0 + 0.01044 + 0.00909)
    assert clock.now - 100.0 == pytest.approx(0.01953, abs=1e-5)


def test_instant_mode_only_yields(monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(engine.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(engine.asyncio, "sleep", clock.sleep)
    asyncio.run(engine.Engine._spend(types.SimpleNamespace(instant=True, next_t=None), 0.05))
    assert clock.timer_sleeps == [] and clock.yields == 1
