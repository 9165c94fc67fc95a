"""Arrival schedules: the gamma process against its formulas (mean 1/rate, CV 1/sqrt(burstiness)), Poisson, traces."""
from __future__ import annotations

import math

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import arrivals


def _mean_cv(xs):
    m = sum(xs) / len(xs)
    var = sum((x - m) ** 2 for x in xs) / len(xs)
    return m, math.sqrt(var) / m


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 1.0, 2.0, 8.0])
def test_gamma_gaps_mean_rate_and_cv_follow_the_formula(burstiness):
    rate = 20.0
    xs = arrivals.gaps(40000, rate, burstiness, seed=7)
    m, cv = _mean_cv(xs)
    # Gamma(k = b, theta = 1 / (rate * b)): mean k * theta = 1 / rate; CV = 1 / sqrt(k)
    assert m == pytest.approx(1.0 / rate, rel=0.03)
    assert cv == pytest.approx(1.0 / math.sqrt(burstiness), rel=0.04)


def test_burstiness_one_is_the_former_poisson_draws():
    # burstiness 1.0 keeps random.Random(seed).expovariate(rate): seeded Poisson runs send at the same times as before
    import random
    rng = random.Random(3)
    assert arrivals.gaps(5, 4.0, 1.0, seed=3) == [rng.expovariate(4.0) for _i in range(5)]


def test_offsets_are_cumulative_gaps_from_zero():
    g = arrivals.gaps(3, 5.0, 0.5, seed=11)
    offs = arrivals.offsets(4, 5.0, 0.5, seed=11)
    assert offs == pytest.approx([0.0, g[0], g[0] + g[1], g[0] + g[1] + g[2]])
    assert arrivals.offsets(3, None) == [0.0, 0.0, 0.0]
    assert arrivals.offsets(3, float("inf")) == [0.0, 0.0, 0.0]
    assert arrivals.offsets(0, 5.0) == []


@pytest.mark.parametrize("kw, words", [
    ({"rate": 0.0, "burstiness": 1.0}, "request_rate"),
    ({"rate": -1.0, "burstiness": 1.0}, "request_rate"),
    ({"rate": 2.0, "burstiness": 0.0}, "burstiness"),
    ({"rate": 2.0, "burstiness": -0.5}, "burstiness"),
])
def test_bad_rates_name_the_value(kw, words):
    with pytest.raises(arrivals.ArrivalError, match=words):
        arrivals.gaps(3, kw["rate"], kw["burstiness"])


def test_burstiness_without_a_rate_is_refused():
    with pytest.raises(arrivals.ArrivalError, match="needs a finite request_rate"):
        arrivals.offsets(3, None, burstiness=0.5)


def test_trace_offsets_scaled_from_the_first_timestamp():
    # (ts - 1000) / 1000 * 2.0
    assert arrivals.trace_offsets([1000, 1500, 1500, 4000], 2.0) == [0.0, 1.0, 1.0, 6.0]
    assert arrivals.trace_offsets([0, 250], 0.5) == [0.0, 0.125]
    with pytest.raises(arrivals.ArrivalError, match="non-decreasing"):
        arrivals.trace_offsets([10, 5])
    with pytest.raises(arrivals.ArrivalError, match="time scale"):
        arrivals.trace_offsets([0, 5], 0)
