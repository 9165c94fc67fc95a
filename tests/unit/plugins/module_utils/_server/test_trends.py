"""Tests of plugins/module_utils/_server/trends.py (accept-length trend over the Decode lines of one run)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._server import logs as L
from ansible_collections.llmops.sglang.plugins.module_utils._server.trends import accept_length_trend, falling_warning


def _lines(values, start_hour=9):
    return "\n".join("[2026-11-20 %02d:00:00 TP0] Decode batch, #running-req: 1, #token: 300, token usage: 0.00, accept len: %.2f, "
                     "accept rate: 0.50, cuda graph: True, gen throughput (token/s): 130.00, #queue-req: 0" % (start_hour + i, v)
                     for i, v in enumerate(values))


def test_trend_of_the_37326_decay():
    # sgl-project/sglang#37326: 2.00 after start, 1.05 later. 8 lines -> quarters of 2.
    decode = L.parse_log(_lines([2.00, 2.00, 1.80, 1.60, 1.40, 1.20, 1.05, 1.05]))["decode_lines"]
    trend = accept_length_trend(decode)
    assert (trend["lines"], trend["window_lines"], trend["first"], trend["last"]) == (8, 2, 2.0, 1.05)
    assert trend["change"] == -0.95 and trend["change_fraction"] == -0.475 and trend["falling"] is True
    assert (trend["first_from"], trend["first_to"], trend["last_from"], trend["last_to"]) == (
        "2026-11-20 09:00:00", "2026-11-20 10:00:00", "2026-11-20 15:00:00", "2026-11-20 16:00:00")
    warn = falling_warning(trend)
    assert warn["key"] == "accept_length_falling" and "-47.5%" in warn["text"]


def test_threshold_is_strict():
    # 2.00 -> 1.60 is exactly -20%: not more than 0.2
    decode = L.parse_log(_lines([2.00, 2.00, 2.00, 1.60]))["decode_lines"]
    trend = accept_length_trend(decode, drop_warn=0.2)
    assert trend["change_fraction"] == -0.2 and trend["falling"] is False and falling_warning(trend) is None
    assert accept_length_trend(decode, drop_warn=0.19)["falling"] is True


def test_a_rising_accept_length_is_not_falling():
    decode = L.parse_log(_lines([1.50, 1.60, 1.90, 2.00]))["decode_lines"]
    trend = accept_length_trend(decode)
    assert (trend["first"], trend["last"], trend["change_fraction"], trend["falling"]) == (1.5, 2.0, 0.3333, False)


def test_too_few_lines_and_no_spec_give_no_trend():
    assert accept_length_trend(L.parse_log(_lines([2.0, 1.0, 1.0]))["decode_lines"]) is None
    no_spec = [{"gen_throughput": 100.0, "time": "t"}] * 10
    assert accept_length_trend(no_spec) is None


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5])
def test_drop_warn_must_be_a_fraction(bad):
    with pytest.raises(ValueError, match="drop_warn=.* must be a fraction between 0 and 1"):
        accept_length_trend([], drop_warn=bad)
