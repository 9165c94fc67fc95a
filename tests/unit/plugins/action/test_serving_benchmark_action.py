"""The serving_benchmark action plugin: the sweep planned once on the controller, one module call per level with that
level, a line per level as it ends, the early stop, check mode, and the inputs refused before anything is sent.
The module is replaced by a stand-in that answers each level call with a record; expectations worked out by hand."""
from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible_collections.llmops.sglang.plugins.action import serving_benchmark as action
from ansible_collections.llmops.sglang.plugins.modules import benchmark_report

ROLE_NAMES = {"max_concurrency": "sglang_benchmark_concurrency", "url": "sglang_benchmark_url",
              "delegate_to": "sglang_benchmark_delegate_to", "stop_on_failure": "sglang_benchmark_stop_on_failure"}


def record(level, mc, completed=16):
    return {"level": level, "max_concurrency": mc, "completed": completed, "failed": 0, "output_throughput": 100.0 * mc,
            "decode_tok_s_per_request": 100.0, "median_ttft_ms": 20.0, "p99_ttft_ms": 30.0, "median_tpot_ms": 10.0,
            "p99_tpot_ms": 12.0, "accept_length": None, "dataset_name": "random-ids", "warnings": [], "goodput": None,
            "error_kinds": []}


class Harness(object):
    """Runs the action with ``args``; ``answers[i]`` (a callable of the module args, or a dict) answers the i-th call."""

    def __init__(self, mocker, args, answers=None, check_mode=False, delegate_to=None, task_vars=None):
        task = mock.MagicMock(args=args, async_val=0, check_mode=check_mode, delegate_to=delegate_to,
                              action="llmops.sglang.serving_benchmark")
        connection = mock.MagicMock()
        connection._shell.tmpdir = "/tmp/remote"
        loader = mock.MagicMock()
        loader.get_basedir.return_value = "/nonexistent"
        self.plugin = action.ActionModule(task, connection, mock.MagicMock(), loader, None)
        self.calls = []
        self.shown = []
        self.answers = list(answers or [])

        def execute(module_name=None, module_args=None, task_vars=None):
            self.calls.append(dict(module_args))
            answer = self.answers.pop(0)
            return answer(module_args) if callable(answer) else answer

        mocker.patch.object(self.plugin, "_execute_module", side_effect=execute)
        mocker.patch.object(action.display, "display", side_effect=lambda msg, **kw: self.shown.append(msg))
        self.result = self.plugin.run(task_vars=dict({"inventory_hostname": "gpu1"}, **(task_vars or {})))


def measured(args):
    (lv,) = args["levels"]
    return {"changed": False, "records": [record(args["level_offset"] + 1, lv["max_concurrency"])], "gate_failures": [],
            "duration_s": 2.0 * lv["waves"], "server_info": {"version": "0.5.9"}, "speculative": {"algorithm": None},
            "warnings": ["capped at 48"], "msg": "1 level(s) measured"}


def test_one_module_call_per_level_with_the_level_and_its_offset(mocker):
    # role plan: [8, 1] + extra 4, sorted; 16 prompts, 4 per slot -> 16, 16, 32 requests; waves 16, 4, 4
    h = Harness(mocker, {"max_concurrency": [8, 1], "extra_concurrency": [4], "sort_levels": True, "num_prompts": 16,
                         "prompts_per_concurrency": 4, "variable_names": ROLE_NAMES}, [measured] * 3)
    r = h.result
    assert not r.get("failed"), r.get("msg")
    assert [c["levels"][0]["max_concurrency"] for c in h.calls] == [1, 4, 8]
    assert [c["levels"][0]["num_prompts"] for c in h.calls] == [16, 16, 32]
    assert [c["level_offset"] for c in h.calls] == [0, 1, 2]
    assert [rec["level"] for rec in r["records"]] == [1, 2, 3] and len(r["levels"]) == 3
    # 2 s per wave: level 1 took 32 s for 16 waves, 8 waves left -> ETA 16 s; after level 2 (8 s), 4 waves left -> 8 s
    assert h.shown[0] == "[gpu1] Benchmark level 1/3: concurrency 1, 16 requests"
    assert h.shown[1].startswith("[gpu1] Result concurrency 1: 16 ok / 0 failed; output 100.0 tok/s")
    assert h.shown[1].endswith("; 32.0 s; 2 level(s) left, ETA ~16 s")
    assert h.shown[3].endswith("; 8.0 s; 1 level(s) left, ETA ~8 s") and h.shown[5].endswith("0 level(s) left, ETA ~0 s")
    assert r["lines"] == [line[len("[gpu1] "):] for line in h.shown]
    assert r["duration_s"] == 48.0 and r["warnings"] == ["capped at 48"] and r["problems"] == []
    assert [row["output_tok_s"] for row in r["summary"]] == [100.0, 400.0, 800.0]
    assert r["msg"] == "3 level(s) measured"


def test_a_failed_level_stops_the_rest_and_fails_with_the_problem(mocker):
    gate = {"changed": False, "records": [record(1, 1)], "gate_failures": ["level 1: p99_tpot_ms 12.00 ms is above the gate 5.00 ms"],
            "duration_s": 3.0, "failed": True, "msg": "serving_benchmark: 1 gate(s) missed: level 1: p99_tpot_ms 12.00 ms is above"}
    h = Harness(mocker, {"max_concurrency": [1, 8], "num_prompts": 4, "stop_on_failure": True, "variable_names": ROLE_NAMES}, [gate])
    r = h.result
    assert len(h.calls) == 1 and r["stopped"] is True and r["failed"] is True
    assert r["problems"] == ["level 1 (concurrency 1): " + gate["msg"]]
    assert r["msg"] == "serving_benchmark failed: level 1 (concurrency 1): " + gate["msg"]
    assert "1 level(s) skipped (sglang_benchmark_stop_on_failure); FAILED: serving_benchmark: 1 gate(s) missed" in h.shown[1]
    assert r["gate_failures"] == gate["gate_failures"] and len(r["records"]) == 1


def test_without_stop_on_failure_every_level_runs(mocker):
    down = {"failed": True, "msg": "serving_benchmark: the server at http://127.0.0.1:30000 is not ready", "records": [],
            "duration_s": 0.5}
    h = Harness(mocker, {"max_concurrency": [1, 8], "num_prompts": 4}, [down, measured])
    assert len(h.calls) == 2 and h.result["failed"] is True and len(h.result["records"]) == 1
    assert h.result["problems"] == ["level 1 (concurrency 1): " + down["msg"]]


def test_check_mode_is_one_call_with_the_whole_plan(mocker):
    planned = {"changed": False, "records": [], "msg": "check mode: 2 level(s) planned, no request sent"}
    h = Harness(mocker, {"max_concurrency": [8, 1], "sort_levels": True, "num_prompts": 4}, [planned], check_mode=True)
    (call,) = h.calls
    assert [lv["max_concurrency"] for lv in call["levels"]] == [1, 8]
    assert h.result["msg"] == planned["msg"] and h.result["problems"] == [] and h.shown == []


@pytest.mark.parametrize("args,needle", [
    ({"max_concurrency": "1,8", "variable_names": ROLE_NAMES},
     "serving_benchmark: sglang_benchmark_concurrency='1,8': must be a list of levels"),
    ({"max_concurrency": [0], "variable_names": ROLE_NAMES}, "sglang_benchmark_concurrency=[0]: every level must be a whole number"),
    ({"trace": '{"timestamp": 0}\n'}, "serving_benchmark: trace: trace line 1: input_length=None"),
    ({"workload": "/nonexistent/prompts.jsonl"}, "/nonexistent/prompts.jsonl"),
    ({"stop_on_failure": "maybe"}, "serving_benchmark: invalid options: argument 'stop_on_failure' is of type"),
    ({"seed": -1, "variable_names": {"seed": "sglang_benchmark_seed"}},
     "serving_benchmark: invalid options: sglang_benchmark_seed=-1: must be >= 0; Python seeds -N and N alike"),
    ({"trace": '{"timestamp": 0, "input_length": 8, "output_length": 4}', "request_rate": [2.0],
      "variable_names": {"request_rate": "sglang_benchmark_request_rates", "trace": "sglang_benchmark_trace_file"}},
     "sglang_benchmark_request_rates=[2.0]: a trace replay sends each request at its trace timestamp (sglang_benchmark_trace_file is "
     "set)"),
])
def test_inputs_refused_before_any_module_call(mocker, args, needle):
    h = Harness(mocker, args)
    assert h.result["failed"] and needle in h.result["msg"], h.result["msg"]
    assert h.result["msg"].endswith("(nothing was sent)") and h.result["problems"] == [h.result["msg"]]
    assert h.calls == [] and h.result["records"] == []


def test_a_delegated_load_generator_must_not_aim_at_its_own_loopback(mocker):
    h = Harness(mocker, {"url": "http://127.0.0.1:30000", "variable_names": ROLE_NAMES}, delegate_to="loadgen",
                task_vars={"ansible_host": "10.0.0.5"})
    assert h.calls == [] and h.result["failed"]
    assert h.result["msg"] == (
        "serving_benchmark: sglang_benchmark_url=http://127.0.0.1:30000 is a loopback address, but the load generator runs on "
        "sglang_benchmark_delegate_to=loadgen: it would measure whatever listens on that host's own loopback, not gpu1. Set "
        "sglang_benchmark_url to an address of gpu1 reachable from loadgen (e.g. http://10.0.0.5:30000), or leave "
        "sglang_benchmark_delegate_to empty (nothing was sent)")


@pytest.mark.parametrize("delegate,url", [("gpu1", "http://127.0.0.1:30000"), ("10.0.0.5", "http://localhost:30000"),
                                          ("loadgen", "http://10.0.0.5:30000"), (None, "http://127.0.0.1:30000"),
                                          # the host's own address is a loopback one (a test host named 127.0.0.2)
                                          ("localhost", "http://127.0.0.2:30000")])
def test_loopback_is_fine_on_the_host_itself_and_a_real_address_from_elsewhere(mocker, delegate, url):
    host = {"inventory_hostname": "127.0.0.2"} if "127.0.0.2" in url else {"ansible_host": "10.0.0.5"}
    h = Harness(mocker, {"url": url, "num_prompts": 4}, [measured], delegate_to=delegate, task_vars=host)
    assert not h.result.get("failed"), h.result["msg"]
    assert len(h.calls) == 1


# ---------------------------------------------------------------------------------------------
# raw records first (issue #23): a measurement that was taken is never lost to a later refusal


def test_each_levels_records_reach_the_raw_file_as_the_level_ends(mocker, tmp_path):
    raw = tmp_path / "reports" / "gpu1" / "r1" / "raw_records.jsonl"
    seen = []

    def second(args):
        # when level 2 is measured, level 1's record is already on disk
        seen.append([json.loads(line)["level"] for line in raw.read_text().splitlines()])
        return {"changed": False, "records": [record(2, 8)], "gate_failures": ["level 2: p99_tpot_ms 12.00 ms is above the gate 5.00 ms"],
                "duration_s": 1.0, "failed": True, "msg": "serving_benchmark: 1 gate(s) missed"}

    h = Harness(mocker, {"max_concurrency": [1, 8], "num_prompts": 4, "run_id": "r1", "raw_records": str(raw)}, [measured, second])
    assert seen == [[1]]
    # the gate refused level 2, and its record is on disk all the same, one JSON object per record, keys sorted
    lines = raw.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [record(1, 1), record(2, 8)]
    assert lines[0] == json.dumps(record(1, 1), sort_keys=True)
    assert h.result["failed"] and h.result["raw_records"] == str(raw)


def test_an_old_raw_file_is_emptied_and_an_unwritable_one_refused_before_anything_is_sent(mocker, tmp_path):
    raw = tmp_path / "raw_records.jsonl"
    raw.write_text('{"level": 99}\n')
    h = Harness(mocker, {"max_concurrency": [1], "num_prompts": 4, "raw_records": str(raw)}, [measured])
    assert [json.loads(line)["level"] for line in raw.read_text().splitlines()] == [1]
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    h = Harness(mocker, {"max_concurrency": [1], "num_prompts": 4, "raw_records": str(blocked / "raw_records.jsonl")}, [measured])
    assert h.calls == [] and h.result["failed"]
    assert h.result["msg"].startswith("serving_benchmark: raw_records=%s/raw_records.jsonl: cannot write it on the controller (" % blocked)
    assert h.result["msg"].endswith("); give a writable path (nothing was sent)")


def test_a_run_id_the_report_writer_refuses_is_refused_before_the_first_level(mocker, tmp_path):
    h = Harness(mocker, {"max_concurrency": [1], "num_prompts": 4, "run_id": "../../etc", "raw_records": str(tmp_path / "raw.jsonl"),
                         "variable_names": {"run_id": "sglang_benchmark_run_id"}}, [measured])
    assert h.calls == [] and not (tmp_path / "raw.jsonl").exists()
    assert h.result["msg"] == ("serving_benchmark: invalid options: sglang_benchmark_run_id='../../etc': use only letters, digits, '.', "
                               "'_' and '-' (it is a directory name); name the run like nextn-20261202 (or leave it empty: the role "
                               "then uses a UTC timestamp) (nothing was sent)")


# A prompt file with unusable rows: the usable rows are sent, the skips are shown and counted on every record (so
# summary.json/summary.md carry them), a mostly broken file is refused naming the role's variable.
WORKLOAD_NAMES = {"workload_max_skipped_fraction": "sglang_benchmark_workload_max_skipped_fraction",
                  "workload": "sglang_benchmark_workload"}


def _file(tmp_path, bad):
    # 4 usable rows, then ``bad`` rows: a conversation of one turn, then one starting and ending with the assistant
    good = [{"conversations": [{"from": "human", "value": "q%d" % i}, {"from": "gpt", "value": "a"}]} for i in range(4)]
    broken = [{"conversations": [{"from": "human", "value": "alone"}]},
              {"conversations": [{"from": "gpt", "value": "x"}, {"from": "gpt", "value": "y"}]}] * bad
    p = tmp_path / "sharegpt.json"
    p.write_text("[\n" + ",\n".join(json.dumps(r) for r in good + broken[:bad]) + "\n]\n", encoding="utf-8")
    return str(p)


def _answer(args):
    (lv,) = args["levels"]
    rec = record(args["level_offset"] + 1, lv["max_concurrency"])
    rec["dataset_name"] = args["workload"]
    return {"changed": False, "records": [rec], "gate_failures": [], "duration_s": 1.0, "msg": "1 level(s) measured"}


def test_usable_rows_are_sent_and_the_skips_reach_the_records(mocker, tmp_path):
    path = _file(tmp_path, 2)     # 4 usable of 6: lines 6 (one turn) and 7 (no human turn) skipped
    h = Harness(mocker, {"max_concurrency": [1, 2], "num_prompts": 2, "workload": path, "variable_names": WORKLOAD_NAMES},
                [_answer] * 2)
    r = h.result
    assert not r.get("failed"), r.get("msg")
    assert [row["prompt"] for row in h.calls[0]["prompts"]] == ["q0", "q1", "q2", "q3"]
    text = "4 of 6 rows used; skipped: 1 no human turn, 1 too few turns (lines 6, 7)"
    assert h.shown[0] == "[gpu1] workload %s: %s" % (path, text)
    assert r["workload_rows"]["text"] == text and r["workload_rows"]["skipped"] == {"no human turn": 1, "too few turns": 1}
    assert [rec["workload_rows"]["used"] for rec in r["records"]] == [4, 4]
    # the report carries them: summary.md names the file and the counts
    md = benchmark_report.summary_md("t", "gpu1", "run1", r["records"])
    assert "Workload rows (sharegpt.json): " + text in md


def test_a_mostly_broken_file_is_refused_naming_the_role_variable(mocker, tmp_path):
    path = _file(tmp_path, 6)     # 6 of 10 skipped: 60 % > 50 %
    h = Harness(mocker, {"max_concurrency": [1], "num_prompts": 2, "workload": path, "variable_names": WORKLOAD_NAMES})
    msg = h.result["msg"]
    assert h.result["failed"] and h.calls == [] and msg.endswith("(nothing was sent)")
    assert ("sharegpt.json: 6 of its 10 rows are unusable (60 %, above sglang_benchmark_workload_max_skipped_fraction=0.5"
            in msg)
    assert "first: line 6: too few turns" in msg and "line 7: no human turn" in msg
    # the same file passes with a higher limit: 4 rows sent
    h = Harness(mocker, {"max_concurrency": [1], "num_prompts": 2, "workload": path, "workload_max_skipped_fraction": 0.7},
                [_answer])
    assert not h.result.get("failed") and len(h.calls[0]["prompts"]) == 4


@pytest.mark.parametrize("value", [1.5, -0.1])
def test_the_limit_must_be_a_fraction(mocker, value):
    h = Harness(mocker, {"max_concurrency": [1], "workload_max_skipped_fraction": value, "variable_names": WORKLOAD_NAMES})
    assert h.result["failed"] and h.calls == []
    assert "sglang_benchmark_workload_max_skipped_fraction=%r: must be within [0, 1]" % value in h.result["msg"]


def test_named_workloads_have_no_counts(mocker):
    h = Harness(mocker, {"max_concurrency": [1], "num_prompts": 2, "workload": "builtin"}, [_answer])
    assert h.result["workload_rows"] is None and "workload_rows" not in h.result["records"][0]
    assert action.MODULE == "llmops.sglang.serving_benchmark"
