"""plugins/plugin_utils/_watch/drift.py: the spec_watch verdict against a hand-written decision, values by hand."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._watch import drift as d


def _rows(*pairs):
    return [{"concurrency": c, "speedup": s, "low": s - 0.02, "high": s + 0.02, "n": [3, 3]} for c, s in pairs]


S3 = "NEXTN-s3-k1-d4"
DECISION = {
    "arm": {"key": S3}, "time": "2026-12-01T10:00:00Z", "weights": {"1": 1.0},
    "speedup_table": {"off": _rows((1, 1.0), (8, 1.0), (32, 1.0)),
                      "NEXTN-s1-k1-d2": _rows((1, 1.20), (8, 1.10), (32, 0.95)),
                      S3: _rows((1, 1.40), (8, 1.05), (32, 0.80))},
    # s3 at concurrency 1: code 2.4 over 4 requests, chat 2.0 over 12: (9.6 + 24) / 16 = 2.1
    "category_acceptance": {S3: {"1": {"code": {"accept_length": 2.4, "requests": 4}, "chat": {"accept_length": 2.0, "requests": 12}}}},
}


def live(weights, p50, p99, accept):
    return {"weights": weights, "distribution": {"running": {"p50": p50, "p99": p99}},
            "accept_length": None if accept is None else {"mean": accept, "samples": 10}}


def test_holds_when_the_load_and_the_acceptance_stay():
    # {1: 0.9, 8: 0.1}: s3 = 0.9 * 1.40 + 0.1 * 1.05 = 1.365; s1 = 0.9 * 1.20 + 0.1 * 1.10 = 1.19; off = 1.0
    out = d.drift(DECISION, live({"1": 0.9, "8": 0.1}, 1, 6, 2.0), accept_length_margin=0.2)
    assert out["verdict"] == "holds" and out["moved"] == []
    assert out["live"]["weighted_speedups"][S3] == pytest.approx(1.365)
    assert out["live"]["best_arm"] == S3
    # 2.0 >= 2.1 * 0.8 = 1.68
    assert out["summary"] == "the decision still holds (NEXTN-s3-k1-d4 p50 concurrency 1 -> 1; accept length 2.10 -> 2.00)"


def test_retune_when_the_concurrency_moved():
    # {8: 0.5, 32: 0.5}: s1 = (1.10 + 0.95) / 2 = 1.025, s3 = (1.05 + 0.80) / 2 = 0.925, off = 1.0 -> s1
    out = d.drift(DECISION, live({"8": 0.5, "32": 0.5}, 20, 30, 2.0), accept_length_margin=0.2)
    assert out["verdict"] == "re-tune"
    assert out["moved"] == ["p50 concurrency 1 -> 20: at the live distribution NEXTN-s1-k1-d2 serves better (weighted speedup "
                            "1.025 against 0.925 for the decided NEXTN-s3-k1-d4)"]
    # a 12 % minimum gain: 1.025 > 0.925 x 1.12 = 1.036? no -> holds on concurrency
    assert d.drift(DECISION, live({"8": 0.5, "32": 0.5}, 20, 30, 2.0), 0.2, min_gain=0.12)["verdict"] == "holds"


def test_retune_when_the_accept_length_fell_or_the_load_left_the_measured_range():
    out = d.drift(DECISION, live({"1": 1.0}, 1, 64, 1.31), accept_length_margin=0.2)
    # 1.31 < 1.68; p99 64 > 32, the highest measured level
    assert out["moved"] == ["running requests p99 64 above the highest measured level 32: the decision did not measure this load",
                            "accept length 2.10 -> 1.31 (below 1.68 = 2.10 x 0.80)"]
    assert out["summary"].startswith("re-tune: running requests p99 64")
    gone = d.drift(DECISION, live({"1": 1.0}, 1, 2, None))
    assert gone["moved"] == ["accept length 2.10 -> none: the server reports no speculative acceptance, but NEXTN-s3-k1-d4 speculates"]


def test_refusals():
    with pytest.raises(d.DriftError, match="holds no decided arm"):
        d.drift({"weights": {"1": 1}}, live({"1": 1.0}, 1, 1, 2.0))
    with pytest.raises(d.DriftError, match="the live weights=\\{\\}: expected"):
        d.drift(DECISION, live({}, 1, 1, 2.0))
    with pytest.raises(d.DriftError, match="speculative_watch_accept_length_margin=1.2"):
        d.drift(DECISION, live({"1": 1.0}, 1, 1, 2.0), accept_length_margin=1.2)
    with pytest.raises(d.DriftError, match="no row for the decided arm"):
        d.drift(dict(DECISION, speedup_table={}), live({"1": 1.0}, 1, 1, 2.0))


def test_weighted_median():
    assert d.weighted_median({1: 0.2, 8: 0.2, 32: 0.6}) == 32
    assert d.weighted_median({1: 0.5, 8: 0.5}) == 1
