"""fleet_report: common levels, fleet median, shortfall, flagging and the differing facts (numbers by hand)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._report import fleet as fr


def _row(conc, tok_s, tpot, accept=2.0, ttft=40.0, completed=4):
    return {"concurrency": conc, "request_rate": None, "completed": completed, "output_tok_s": tok_s,
            "median_ttft_ms": ttft, "median_tpot_ms": tpot, "accept_length": accept}


def _facts(driver="580.95.05", t0="8.84", argv=("--tp-size", "4")):
    return {"server": {"version": "0.5.9", "image": "localhost/sglang-sim:latest", "image_id": "ab" * 32,
                       "argv": list(argv), "env": {"SGLANG_SIM_T0_MS": t0, "SGLANG_SIM_GPU": "sm120"}},
            "host": {"gpu_model": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], "gpu_count": 4,
                     "driver_version": driver, "p2p": "off"}}


FLEET = [
    {"host": "h1", "run_id": "r", "rows": [_row(1, 135.0, 7.4), _row(8, 900.0, 8.0)], "facts": _facts()},
    {"host": "h2", "run_id": "r", "rows": [_row(1, 134.0, 7.45), _row(8, 910.0, 8.0)], "facts": _facts()},
    {"host": "h3", "run_id": "r", "rows": [_row(1, 136.0, 7.35), _row(8, 890.0, 8.0)], "facts": _facts()},
    {"host": "h4", "run_id": "r", "rows": [_row(1, 110.0, 9.09), _row(8, 700.0, 10.0)], "facts": _facts(t0="12")},
]


def test_median_shortfall_and_the_slow_host_flagged_with_its_differing_fact():
    rep = fr.build(FLEET, threshold=0.10)
    assert rep["levels"] == ["c1", "c8"]
    # c1 output tok/s: sorted 110, 134, 135, 136 -> median (134 + 135) / 2 = 134.5
    assert rep["median"]["c1"]["output_tok_s"] == pytest.approx(134.5)
    # c8: 700, 890, 900, 910 -> (890 + 900) / 2 = 895; decode speed 1000/8 = 125 x3 and 100 -> median 125
    assert rep["median"]["c8"]["output_tok_s"] == pytest.approx(895.0)
    assert rep["median"]["c8"]["decode_tok_s"] == pytest.approx(125.0)
    h4 = rep["hosts"][3]
    assert h4["shortfall"]["c1"]["output_tok_s"] == pytest.approx((134.5 - 110.0) / 134.5)        # 0.1822
    assert h4["shortfall"]["c8"]["decode_tok_s"] == pytest.approx(0.2)                            # (125 - 100) / 125
    assert h4["worst_shortfall"] == pytest.approx(195.0 / 895.0) and h4["worst"] == "c8 output throughput"  # 0.2179
    assert rep["flagged"] == ["h4"]
    assert h4["differing_facts"] == [{"fact": "server.env.SGLANG_SIM_T0_MS", "value": "12", "siblings": "8.84"}]
    # a host above the median has a negative shortfall and no facts are computed for unflagged hosts
    assert rep["hosts"][2]["shortfall"]["c1"]["output_tok_s"] == pytest.approx((134.5 - 136.0) / 134.5)
    assert rep["hosts"][0]["differing_facts"] == []
    md = fr.markdown(rep)
    assert "| h4 | r | 110.0 | 40.0 | 9.09 | 2.00 | 700.0 | 40.0 | 10.00 | 2.00 | 21.8 % | **SLOW** |" in md
    # TPOT p50 median at c1: (7.40 + 7.45) / 2 = 7.425 -> 7.43
    assert "| fleet median | | 134.5 | 40.0 | 7.43 | 2.00 | 895.0 | 40.0 | 8.00 | 2.00 | | |" in md
    assert "**h4** is 21.8 % below the fleet median (c8 output throughput). Facts that differ from its siblings: " \
           "server.env.SGLANG_SIM_T0_MS: 12 here, 8.84 on the siblings" in md


def test_threshold_is_strict_and_configurable():
    # h4's worst shortfall is 0.2179: flagged at 0.20, not at 0.25
    assert fr.build(FLEET, threshold=0.20)["flagged"] == ["h4"]
    assert fr.build(FLEET, threshold=0.25)["flagged"] == []
    assert "No host is more than 25 % below the fleet median." in fr.markdown(fr.build(FLEET, threshold=0.25))


def test_only_common_completed_levels_are_compared():
    fleet = [dict(FLEET[0], rows=FLEET[0]["rows"] + [_row(32, 2000.0, 12.0)]),
             dict(FLEET[1], rows=[_row(1, 134.0, 7.45), _row(8, 0.0, 8.0, completed=0)])]
    rep = fr.build(fleet)
    assert rep["levels"] == ["c1"]                         # c8 failed on h2, c32 only on h1
    # two hosts: the median is their mean, (135 + 134) / 2 = 134.5
    assert rep["median"]["c1"]["output_tok_s"] == pytest.approx(134.5)


def test_differing_facts_name_driver_and_argv_tokens():
    odd = dict(FLEET[3], facts=_facts(driver="575.57.08", t0="8.84", argv=("--tp-size", "4", "--disable-custom-all-reduce")))
    rep = fr.build(FLEET[:3] + [odd], threshold=0.10)
    facts = rep["hosts"][3]["differing_facts"]
    assert [f["fact"] for f in facts] == ["host.driver_version", "server.argv"]
    assert facts[0]["value"] == "575.57.08" and facts[0]["siblings"] == "580.95.05"
    assert facts[1]["only_here"] == ["--disable-custom-all-reduce"] and facts[1]["only_siblings"] == []
    assert fr.fact_line(facts[1]) == "server.argv: --disable-custom-all-reduce here, (nothing extra) on the siblings"


def test_identical_facts_point_at_the_hardware():
    same = dict(FLEET[3], facts=_facts())
    md = fr.markdown(fr.build(FLEET[:3] + [same]))
    assert "none recorded (same GPU, driver, P2P, SGLang, image and launch configuration)" in md


@pytest.mark.parametrize("entries, threshold, match", [
    (FLEET[:1], 0.1, "at least two hosts"),
    ([FLEET[0], FLEET[0]], 0.1, "distinct host name"),
    ([FLEET[0], dict(FLEET[1], rows=[])], 0.1, "h2 has no benchmark rows"),
    ([FLEET[0], dict(FLEET[1], rows=[_row(4, 300.0, 9.0)])], 0.1, "share no measured level .*h1: c1, c8; h2: c4"),
    (FLEET, 1.0, r"threshold=1.0: give a fraction in \[0, 1\)"),
])
def test_refusals(entries, threshold, match):
    with pytest.raises(fr.FleetReportError, match=match):
        fr.build(entries, threshold=threshold)


def test_level_names():
    assert fr.level_name((8, None)) == "c8" and fr.level_name((None, 2.0)) == "r2"
    assert fr.level_name((8, 0.5)) == "c8/r0.5" and fr.level_name((None, None)) == "all"


def test_a_fact_only_the_slow_host_has_reads_unset_on_the_siblings():
    facts = _facts()
    facts["server"]["env"]["SGLANG_SIM_DRAFT_MS"] = "3"
    rep = fr.build(FLEET[:3] + [dict(FLEET[3], facts=facts)])
    item = rep["hosts"][3]["differing_facts"]
    assert item == [{"fact": "server.env.SGLANG_SIM_DRAFT_MS", "value": "3", "siblings": None}]
    assert fr.fact_line(item[0]) == "server.env.SGLANG_SIM_DRAFT_MS: 3 here, (unset) on the siblings"
