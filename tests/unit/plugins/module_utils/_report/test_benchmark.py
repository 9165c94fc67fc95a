"""Reports, gates and the A/B maths of bench_report, against hand-computed values."""
from __future__ import annotations

import json
import math

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._report import benchmark as br
from ansible_collections.llmops.sglang.plugins.module_utils._bench import stats as bs
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult


def _rec(conc, out_tps, tpot_ms=10.0, completed=10, accept=None, level=None):
    return {"max_concurrency": conc, "request_rate": float("inf"), "output_throughput": out_tps, "completed": completed,
            "decode_tok_s_per_request": 1000.0 / tpot_ms, "median_tpot_ms": tpot_ms, "median_ttft_ms": 50.0,
            "accept_length": accept, "level": level}


# baseline (MTP off) and candidate (MTP on) output throughput, tok/s, at concurrency 1, 4, 16, 64
OFF = [_rec(1, 110.0), _rec(4, 400.0), _rec(16, 1200.0), _rec(64, 3000.0)]
ON = [_rec(1, 135.0, accept=2.0), _rec(4, 460.0, accept=2.0), _rec(16, 1150.0, accept=2.0), _rec(64, 2600.0, accept=2.0)]


def test_speedup_table_by_hand():
    ab = br.compare(OFF, ON, target=1)
    assert [r["level"] for r in ab["levels"]] == [1, 4, 16, 64]
    # 135/110, 460/400, 1150/1200, 2600/3000
    assert [r["speedup"] for r in ab["levels"]] == pytest.approx([1.227273, 1.15, 0.958333, 0.866667], abs=1e-6)
    assert [r["winner"] for r in ab["levels"]] == ["mtp_on", "mtp_on", "mtp_off", "mtp_off"]


def test_crossover_log2_interpolated_by_hand():
    ab = br.compare(OFF, ON)
    # between 4 (1.15) and 16 (0.958333): log2 c = 2 + (1 - 1.15) / (0.958333 - 1.15) * (4 - 2) = 3.565217
    # c = 2 ** 3.565217 = 11.837
    assert ab["crossover"]["concurrency"] == pytest.approx(11.837, abs=0.01)
    assert ab["crossover"]["level"] == 16
    assert ab["decision"] is None


def test_decisions_at_1_and_64_by_the_tuners_engine():
    d1 = br.compare(OFF, ON, target=1)["decision"]
    assert (d1["winner"], d1["basis"], d1["winner_is_candidate"]) == ("mtp_on", "measured", True)
    # 135 / 110 = 1.227273
    assert d1["speedup"] == pytest.approx(1.227273, abs=1e-6)
    assert d1["reason"].startswith("at concurrency 1 the output-throughput speedup of mtp_on over mtp_off is 1.227 (measured)")
    # the engine (spec_tune's decide) took it: one sweep per arm, so a point estimate, significance unknown
    assert d1["engine"]["winner"] == "mtp_on" and d1["engine"]["point_estimate"] is True
    assert d1["engine"]["significant"] is None
    assert d1["engine"]["basis"].startswith("point estimate (one trial per arm")
    assert "mtp_on over mtp_off is 1.227, above 1.000, so mtp_on" in d1["engine"]["basis"]
    d64 = br.compare(OFF, ON, target=64)["decision"]
    assert (d64["winner"], d64["basis"]) == ("mtp_off", "measured")
    assert d64["speedup"] == pytest.approx(2600 / 3000)
    # MTP off has the best mean at 64: 3000 > 2600, and it is the simpler arm
    assert "mtp_off is the simplest arm and has the best throughput (3000 tok/s)" in d64["engine"]["basis"]
    # at 4: 460 / 400 = 1.15; a 10 % minimum gain still lets MTP win, 20 % keeps MTP off
    assert br.compare(OFF, ON, target=4, min_gain=0.10)["decision"]["winner"] == "mtp_on"
    d4 = br.compare(OFF, ON, target=4, min_gain=0.20)["decision"]
    assert d4["winner"] == "mtp_off" and d4["speedup"] == pytest.approx(1.15)
    assert "mtp_on over mtp_off is 1.150, mtp_on needs > 1.200 to win, so the simpler mtp_off is kept" in d4["engine"]["basis"]


@pytest.mark.parametrize("target", [8, 256])
def test_a_target_outside_the_measured_levels_is_refused_not_interpolated(target):
    # the tuner's rule: the decision is measured at the target, never interpolated (8) or extrapolated (256)
    with pytest.raises(br.ReportError, match=r"no decision at concurrency %d: the mtp_off run did not measure it \(levels "
                                             r"\[1, 4, 16, 64\]\); a speedup is never interpolated into a decision. "
                                             r"Fix: add %d to the sweep" % (target, target)):
        br.compare(OFF, ON, target=target)


def test_a_fractional_target_is_refused():
    with pytest.raises(br.ReportError, match="whole number >= 1, got 2.5"):
        br.compare(OFF, ON, target=2.5)


def test_crossover_when_candidate_always_wins_or_never_wins():
    always = br.compare(OFF[:2], ON[:2])["crossover"]
    assert always["concurrency"] is None and "wins at every measured level" in always["note"]
    never = br.compare([_rec(1, 100.0)], [_rec(1, 90.0)])["crossover"]
    assert never["level"] == 1 and "does not win even at the lowest" in never["note"]


def test_tie_keeps_baseline_and_a_failed_target_level_is_refused():
    ab = br.compare([_rec(1, 100.0), _rec(2, 100.0)], [_rec(1, 100.0), _rec(2, 0.0, completed=0)], target=1)
    # 100 / 100 = 1.0, not > 1.0: the baseline stays
    assert ab["levels"][0]["winner"] == "mtp_off" and ab["decision"]["winner"] == "mtp_off"
    assert ab["levels"][1]["speedup"] is None
    # the candidate measured nothing at 2: no decision there (it used to be extrapolated from level 1)
    with pytest.raises(br.ReportError, match="no decision at concurrency 2: only mtp_off has a usable measurement there"):
        br.compare([_rec(1, 100.0), _rec(2, 100.0)], [_rec(1, 100.0), _rec(2, 0.0, completed=0)], target=2)
    failed = dict(_rec(2, 90.0), failed=3)
    with pytest.raises(br.ReportError, match="concurrency 2: 3 failed request"):
        br.compare([_rec(1, 100.0), _rec(2, 100.0)], [_rec(1, 100.0), failed], target=2)


def test_compare_refuses_disjoint_levels():
    with pytest.raises(br.ReportError, match="share no sweep level"):
        br.compare([_rec(1, 1.0)], [_rec(2, 1.0)])


def test_compare_refuses_two_dimensional_sweep():
    a = dict(_rec(2, 10.0), request_rate=4.0)
    b = dict(_rec(2, 12.0), request_rate=8.0)
    with pytest.raises(br.ReportError, match="needs one dimension"):
        br.compare([a, b], [a, b])


def test_decision_refuses_a_request_rate_sweep():
    """The decision is per concurrency: a rate-only sweep is compared level by level, but no target decision."""
    a = [dict(_rec(None, 100.0), request_rate=2.0), dict(_rec(None, 180.0), request_rate=4.0)]
    b = [dict(_rec(None, 120.0), request_rate=2.0), dict(_rec(None, 170.0), request_rate=4.0)]
    assert [r["speedup"] for r in br.compare(a, b)["levels"]] == pytest.approx([1.2, 170.0 / 180.0])
    with pytest.raises(br.ReportError, match=r"target 32\), but the runs swept request rates 2.0, 4.0 req/s .* sweep "
                                             r"sglang_benchmark_concurrency instead"):
        br.compare(a, b, target=32)


def test_accept_length_gate_says_why_it_is_missing():
    off = {"level": 1, "max_concurrency": 1, "accept_length": None, "backend": "sglang"}
    assert br.check_gates(off, {"min_accept_length": 1.5}) == [
        "level 1 (max_concurrency=1): accept_length is not available, so the gate 1.50 cannot pass: no response carried "
        "spec_verify_ct: speculative decoding is off on this server"]
    oai = dict(off, backend="openai-chat")
    assert "the openai-chat backend does not report it" in br.check_gates(oai, {"min_accept_length": 1.5})[0]


def test_gates_name_level_and_metric():
    rec = {"level": 3, "max_concurrency": 16, "output_throughput": 900.0, "p99_ttft_ms": 2500.0, "p99_tpot_ms": 20.0,
           "accept_length": 1.0, "failed_fraction": 0.1}
    msgs = br.check_gates(rec, {"min_output_throughput": 1000, "max_p99_ttft_ms": 2000, "max_p99_tpot_ms": 25,
                                "min_accept_length": 1.5, "max_failed_fraction": 0.0})
    assert msgs == [
        "level 3 (max_concurrency=16): output_throughput 900.00 tok/s is below the gate 1000.00 tok/s",
        "level 3 (max_concurrency=16): p99_ttft_ms 2500.00 ms is above the gate 2000.00 ms",
        "level 3 (max_concurrency=16): accept_length 1.00 is below the gate 1.50",
        "level 3 (max_concurrency=16): failed_fraction 0.10 is above the gate 0.00",
    ]
    assert br.check_gates(rec, {"max_p99_tpot_ms": 25}) == []
    with pytest.raises(br.ReportError, match="unknown benchmark gate"):
        br.check_gates(rec, {"max_ttft": 1})


def test_make_record_key_order_and_jsonl_compat():
    res = [RequestResult(prompt_len=10, output_len=4, success=True, ttft=0.1, latency=0.4, itl=[0.1] * 3)]
    m = bs.level_metrics(res, 1.0)
    rec = br.make_record(m, {"backend": "sglang", "max_concurrency": 4, "request_rate": None, "random_input_len": 10,
                             "random_output_len": 4, "random_range_ratio": 1.0, "tag": "t", "num_prompts": 1},
                         server_info={"version": "0.5.9"}, meta={"level": 1, "run_id": "r1"})
    keys = list(rec)
    assert keys[:len(bs.BENCH_SERVING_KEYS)] == list(bs.BENCH_SERVING_KEYS)
    assert rec["dataset_name"] == "random-ids" and rec["server_info"] == {"version": "0.5.9"}
    assert rec["request_rate"] is None                 # JSON-safe in module results
    line = br.jsonl_line(rec)
    assert '"request_rate": Infinity' in line          # as bench_serving writes an unlimited rate
    assert math.isinf(json.loads(line)["request_rate"])
    assert rec["output_throughput"] == 4.0 and rec["level"] == 1 and rec["num_prompts"] == 1


def test_markdown_table_rows():
    recs = [dict(_rec(1, 110.0, tpot_ms=9.09, accept=None, level=1), failed=0, p99_ttft_ms=60.0),
            dict(_rec(4, 400.5, tpot_ms=10.0, accept=2.0, level=2), failed=1, p99_ttft_ms=70.0)]
    md = br.markdown_table(recs).splitlines()
    assert len(md) == 4
    assert md[2].startswith("| 1 | 1 | - | 10 | 0 | 110.0 | 110.0 | 50.0 | 60.0 | 9.09 |")
    assert md[3].endswith("| 2.00 |")
    # the header and separator, written out by hand: 14 columns, the summary-only ones (p90s, measured
    # concurrency, duration) left out
    assert md[0] == ("| level | concurrency | rate (req/s) | ok | failed | output tok/s | decode tok/s/req | TTFT p50 ms "
                     "| TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | ITL p50 ms | E2E p50 ms | accept len |")
    assert md[1] == "|" + "---:|" * 14
    ab = br.ab_markdown(br.compare(OFF, ON, target=64))
    assert "| 16 | 1200.0 | 1150.0 | 0.958 |" in ab
    assert "Crossover: concurrency ~11.8 (first losing level 16)" in ab
    assert "Decision: **mtp_off**" in ab


def test_one_field_table_drives_summary_and_plots():
    rec = dict(_rec(8, 500.0, tpot_ms=20.0, accept=1.5, level=3), p90_ttft_ms=70.0, p99_ttft_ms=90.0,
               p90_tpot_ms=22.0, p99_tpot_ms=25.0, concurrency=7.5, duration=12.0)
    row = br.summary_rows([rec])[0]
    assert list(row) == ["level", "concurrency", "request_rate", "completed", "failed", "output_tok_s",
                         "decode_tok_s_per_req", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
                         "p90_tpot_ms", "p99_tpot_ms", "median_itl_ms", "median_e2e_ms", "measured_concurrency",
                         "accept_length", "duration_s", "goodput_req_s"]
    assert row["request_rate"] is None and row["decode_tok_s_per_req"] == 50.0 and row["measured_concurrency"] == 7.5
    plots = {name: (yl, series) for name, _t, yl, series in br.plot_series([rec, dict(rec, decode_tok_s_per_request=0.0)])}
    assert list(plots) == ["output_throughput.png", "decode_speed.png", "ttft.png", "tpot.png"]
    assert plots["ttft.png"] == ("ms", [("median", [50.0, 50.0]), ("p90", [70.0, 70.0]), ("p99", [90.0, 90.0])])
    assert plots["tpot.png"][1] == [("median", [20.0, 20.0]), ("p90", [22.0, 22.0]), ("p99", [25.0, 25.0])]
    assert plots["decode_speed.png"][1] == [("decode", [50.0, None])]     # no output tokens: a gap, not 0
    assert plots["output_throughput.png"] == ("output tok/s", [("output", [500.0, 500.0])])


def test_the_gate_table_is_what_the_module_and_the_role_offer():
    # serving_benchmark documents each gate of bench_report.GATES with the table's default, and the role passes
    # each one from its own variable sglang_benchmark_<gate>, declared in its argument spec
    from pathlib import Path

    import yaml
    from ansible_collections.llmops.sglang.plugins.modules import serving_benchmark as sb
    repo = Path(__file__).resolve().parents[5]
    doc = yaml.safe_load(sb.DOCUMENTATION)["options"]["gates"]["suboptions"]
    assert sorted(doc) == sorted(br.GATE_KEYS) == sorted(br.gate_option_spec())
    assert {k: v.get("default") for k, v in doc.items()} == {g[0]: g[4] for g in br.GATES}
    assert br.gate_option_spec()["max_failed_fraction"] == {"type": "float", "default": 0.0}
    spec = yaml.safe_load((repo / "roles/sglang_benchmark/meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    level = yaml.safe_load((repo / "roles/sglang_benchmark/tasks/sweep.yml").read_text())
    passed = [t for t in level if "llmops.sglang.serving_benchmark" in t][0]["llmops.sglang.serving_benchmark"]["gates"]
    for key in br.GATE_KEYS:
        assert "sglang_benchmark_" + key in spec
        assert passed[key] == "{{ sglang_benchmark_%s }}" % key


def test_phase_rows_and_markdown_of_a_moving_load():
    rec = {"level": 1, "phases": [
        {"phase": 1, "concurrency": 1, "duration_s": 2.0, "start_s": 0.0, "end_s": 2.0, "requests": 1, "failed": 0,
         "output_throughput": 1.5, "mean_in_flight": 1.0, "tpot_p50_ms": 500.0, "decode_tok_s_per_req": 2.0, "accept_length": 2.0,
         "settle_s": 0.0, "settled_throughput": 1.5},
        {"phase": 2, "concurrency": 8, "duration_s": 2.0, "start_s": 2.0, "end_s": 4.0, "requests": 9, "failed": 1,
         "output_throughput": 40.25, "mean_in_flight": 7.5, "tpot_p50_ms": None, "decode_tok_s_per_req": None, "accept_length": None,
         "settle_s": 0.375, "settled_throughput": 38.0},
        {"phase": 3, "concurrency": 1, "duration_s": 2.0, "start_s": 4.0, "end_s": 6.0, "requests": 0, "failed": 0,
         "output_throughput": 12.0, "mean_in_flight": 3.0, "tpot_p50_ms": None, "decode_tok_s_per_req": None, "accept_length": None,
         "settle_s": 2.0, "settled_throughput": None}]}
    # a record written before settle_s existed: its row has None there, shown as "-"
    old = {"level": 3, "phases": [dict((k, v) for k, v in rec["phases"][0].items() if not k.startswith("settle"))]}
    assert br.phase_rows([{"level": 2}]) == [] and br.phase_markdown([{"level": 2}]) == ""
    rows = br.phase_rows([rec, old])
    assert [(r["level"], r["phase"], r["concurrency"], r["failed"]) for r in rows] == [
        (1, 1, 1, 0), (1, 2, 8, 1), (1, 3, 1, 0), (3, 1, 1, 0)]
    assert [(r["settle_s"], r["settled_throughput"]) for r in rows] == [(0.0, 1.5), (0.375, 38.0), (2.0, None), (None, None)]
    md = br.phase_markdown([rec, old]).splitlines()
    assert md[0].endswith("| accept len | settle s | settled tok/s |") and md[1].count("---:") == 13
    assert md[2:] == [
        "| 1 | 1 | 1 | 2.0 | 1 | 0 | 1.5 | 1.0 | 500.00 | 2.0 | 2.00 | 0.00 | 1.5 |",
        "| 1 | 2 | 8 | 2.0 | 9 | 1 | 40.2 | 7.5 | - | - | - | 0.38 | 38.0 |",
        "| 1 | 3 | 1 | 2.0 | 0 | 0 | 12.0 | 3.0 | - | - | - | 2.00 | - |",
        "| 3 | 1 | 1 | 2.0 | 1 | 0 | 1.5 | 1.0 | 500.00 | 2.0 | 2.00 | - | - |"]
