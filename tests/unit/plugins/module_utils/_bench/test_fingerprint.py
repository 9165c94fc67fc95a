"""bench_fingerprint: canonical fingerprint, what changed, and the run/skip decision (hand-computed cases)."""
from __future__ import annotations

import hashlib

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import fingerprint as bf

INPUTS = {"server": {"version": "0.5.9", "image": "localhost/sglang-sim:latest", "argv": ["--tp-size", "4"]},
          "host": {"gpu_model": ["NVIDIA RTX PRO 6000"], "gpu_count": 4, "driver_version": "580.95.05", "p2p": "off"},
          "benchmark": {"sglang_benchmark_concurrency": [1, 8]}}


def test_fingerprint_is_sha256_of_sorted_compact_json():
    # by hand: keys sorted at every level, separators "," and ":"
    text = '{"a":1,"b":{"c":[1,2],"d":null}}'
    assert bf.fingerprint({"b": {"d": None, "c": [1, 2]}, "a": 1}) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_fingerprint_refuses_non_json_values():
    with pytest.raises(bf.FingerprintError, match="plain JSON"):
        bf.fingerprint({"x": {1, 2}})
    with pytest.raises(bf.FingerprintError):
        bf.fingerprint({"x": float("nan")})


def test_diff_names_the_changed_leaves():
    new = {"server": {"version": "0.5.9", "image": "localhost/sglang-sim:v2", "argv": ["--tp-size", "4"]},
           "host": {"gpu_model": ["NVIDIA RTX PRO 6000"], "gpu_count": 4, "driver_version": "580.95.05", "p2p": "off",
                    "numa": 2},
           "benchmark": {"sglang_benchmark_concurrency": [1, 8]}}
    assert bf.diff_inputs(INPUTS, new) == [
        {"key": "host.numa", "old": None, "new": 2, "missing": "old"},
        {"key": "server.image", "old": "localhost/sglang-sim:latest", "new": "localhost/sglang-sim:v2"},
    ]
    line = bf.describe_changes(bf.diff_inputs(INPUTS, new))
    assert line == "host.numa: new (2); server.image: localhost/sglang-sim:latest -> localhost/sglang-sim:v2"


def test_no_state_runs():
    d = bf.decide(None, INPUTS, now=1000.0)
    assert d["run"] is True and d["reason"] == "no benchmark recorded on this host yet" and d["age_s"] is None


def test_unchanged_skips_and_says_the_age():
    state = bf.make_state(INPUTS, {"run_id": "20261201T060000Z"}, now=1000.0)
    d = bf.decide(state, INPUTS, now=1000.0 + 3 * 3600 + 5 * 60 + 7)
    assert d["run"] is False
    assert d["reason"] == "nothing changed since run 20261201T060000Z (3 h 05 min ago)"
    assert d["age_s"] == pytest.approx(11107.0)


def test_a_changed_fact_runs_and_is_named():
    state = bf.make_state(INPUTS, {"run_id": "r1"}, now=0.0)
    new = {**INPUTS, "host": {**INPUTS["host"], "driver_version": "580.105.08"}}
    d = bf.decide(state, new, now=60.0)
    assert d["run"] is True
    assert d["reason"] == "changed since run r1: host.driver_version: 580.95.05 -> 580.105.08"
    assert [c["key"] for c in d["changes"]] == ["host.driver_version"]


def test_force_and_max_age():
    state = bf.make_state(INPUTS, {"run_id": "r1"}, now=0.0)
    assert bf.decide(state, INPUTS, force=True, now=10.0)["reason"] == "asked for (sglang_benchmark_force)"
    old = bf.decide(state, INPUTS, now=90000.0, max_age_s=86400)
    assert old["run"] is True and "1 d 01 h old, over sglang_benchmark_max_age 1 d 00 h" in old["reason"]
    assert bf.decide(state, INPUTS, now=80000.0, max_age_s=86400)["run"] is False


@pytest.mark.parametrize("seconds, text", [(-5, "0 s"), (59, "59 s"), (60, "1 min"), (3599, "59 min"), (3600, "1 h 00 min"),
                                           (86399, "23 h 59 min"), (86400 * 2 + 3600 * 4, "2 d 04 h")])
def test_format_age(seconds, text):
    assert bf.format_age(seconds) == text


def test_parse_state_refuses_foreign_files():
    with pytest.raises(bf.FingerprintError, match="not JSON"):
        bf.parse_state("{", "/x.json")
    with pytest.raises(bf.FingerprintError, match="format 1"):
        bf.parse_state('{"format": 7}', "/x.json")
    with pytest.raises(bf.FingerprintError, match="no 'time'"):
        bf.parse_state('{"format": 1, "fingerprint": "x", "inputs": {}}', "/x.json")
