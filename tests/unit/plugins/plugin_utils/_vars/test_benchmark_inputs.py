"""The sglang_benchmark role's inputs checked in preflight (plugins/plugin_utils/_vars/benchmark.py, issue #23).

Each refusal is written out here by hand: the variable, the value, why, the fix. The workload files are real files in
tmp_path; the table of options is held against the role's own sweep.yml and vars/main.yml."""
from __future__ import annotations

import re
from pathlib import Path
from unittest import mock

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.action import preflight_check
from ansible_collections.llmops.sglang.plugins.plugin_utils._vars import benchmark as vb

REPO = Path(__file__).resolve().parents[5]
RUN_ID_FIX = "name the run like nextn-20261202 (or leave it empty: the role then uses a UTC timestamp)"
WORKLOAD_FIX = ("Fix: name a prompt file (.json/.jsonl), a directory of them or a glob on the controller (absolute, or relative "
                "to the playbook directory %s), or one of auto, random-ids, builtin, builtin-long")
PROMPT = '{"prompt": "Explain speculative decoding.", "category": "qa"}\n'


@pytest.fixture
def base(tmp_path):
    """A playbook directory with prompts/good.jsonl, prompts/more.json, empty/ (a directory without prompt files)."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "good.jsonl").write_text(PROMPT)
    (tmp_path / "prompts" / "more.json").write_text("[" + PROMPT.strip() + "]")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not a prompt file")
    (tmp_path / "blank.jsonl").write_text("")
    (tmp_path / "prompts.txt").write_text(PROMPT)
    return tmp_path


def test_the_role_defaults_pass(base):
    assert vb.benchmark_problems({}, str(base)) == []


@pytest.mark.parametrize("spec", ["auto", "builtin", "builtin-long", "random-ids", "prompts/good.jsonl", "prompts", "prompts/*.json*",
                                  "{base}/prompts/more.json"])
def test_workloads_that_the_benchmark_can_read_pass(base, spec):
    assert vb.benchmark_problems({"sglang_benchmark_workload": spec.format(base=base)}, str(base)) == []


def test_a_missing_workload_path_is_refused_with_the_benchmarks_own_words(base):
    problems = vb.benchmark_problems({"sglang_benchmark_workload": "prompts/missing.jsonl"}, str(base))
    # Not found from the current directory, so taken from the playbook directory, as the benchmark does (workloads.locate).
    assert problems == [
        "sglang_benchmark_workload=\"prompts/missing.jsonl\": workload '%s/prompts/missing.jsonl': no such file or directory on "
        "the controller, and not one of auto, random-ids, builtin, builtin-long; give a prompt file, a directory or a glob, or a named "
        "workload. %s" % (base, WORKLOAD_FIX % base)]


@pytest.mark.parametrize("spec,why", [
    ("{base}/prompts/*.parquet", "workload {base}/prompts/*.parquet: the glob matches no file (on the controller); check the pattern"),
    ("{base}/empty", "workload {base}/empty: the directory holds no .json or .jsonl file; put prompt files there or name a file"),
    ("{base}/blank.jsonl", "workload {base}/blank.jsonl: the file is empty"),
    ("{base}/prompts.txt", "workload {base}/prompts.txt: unknown format '.txt' (a workload file is .json or .jsonl)"),
])
def test_workload_files_that_cannot_be_used_are_refused(base, spec, why):
    spec = spec.format(base=base)
    assert vb.benchmark_problems({"sglang_benchmark_workload": spec}, str(base)) == [
        "sglang_benchmark_workload=\"%s\": %s. %s" % (spec, why.format(base=base), WORKLOAD_FIX % base)]


def test_an_unreadable_workload_file_is_refused(base, mocker):
    path = str(base / "prompts" / "good.jsonl")
    real_open = open

    def denied(name, *args, **kwargs):
        if name == path:
            raise PermissionError(13, "Permission denied", name)
        return real_open(name, *args, **kwargs)

    mocker.patch("builtins.open", side_effect=denied)
    assert vb.benchmark_problems({"sglang_benchmark_workload": path}, str(base)) == [
        "sglang_benchmark_workload=\"%s\": workload %s: cannot read it on the controller ([Errno 13] Permission denied: '%s'). %s"
        % (path, path, path, WORKLOAD_FIX % base)]


@pytest.mark.parametrize("run_id", ["../../etc", "..", "run 1", "a/b", "nextn:1"])
def test_a_run_id_the_report_writer_refuses_is_refused(base, run_id):
    assert vb.benchmark_problems({"sglang_benchmark_run_id": run_id}, str(base)) == [
        "sglang_benchmark_run_id=%r: use only letters, digits, '.', '_' and '-' (it is a directory name); %s" % (run_id, RUN_ID_FIX)]


@pytest.mark.parametrize("run_id", ["20261202T101500Z", "ab-20261202-mtp_on", "spec-tune-nextn.3-t1"])
def test_run_ids_the_report_writer_takes_pass(base, run_id):
    assert vb.benchmark_problems({"sglang_benchmark_run_id": run_id}, str(base)) == []


def test_a_label_that_cannot_name_a_run_is_refused(base):
    assert vb.benchmark_problems({"sglang_benchmark_label": "mtp/on"}, str(base)) == [
        "sglang_benchmark_label='mtp/on': use only letters, digits, '.', '_' and '-' (it is a directory name): the run id is "
        "<label>-<UTC time> and the state file <server>-<label>.json. Fix: a label such as mtp_on"]


@pytest.mark.parametrize("values,problem", [
    # cross-checks no single variable's rule can see
    ({"sglang_benchmark_burstiness": 0.5},
     "sglang_benchmark_burstiness=0.5: shapes the gaps between arrivals at a request rate, but sglang_benchmark_request_rates is "
     "empty (all at once); set sglang_benchmark_request_rates levels, or leave sglang_benchmark_burstiness at 1.0"),
    ({"sglang_benchmark_multi_turn": True},
     "sglang_benchmark_multi_turn=true replays the conversations of a prompt file, but sglang_benchmark_workload=auto has none "
     "(random-ids, builtin and auto are single prompts); set sglang_benchmark_workload to a ShareGPT, messages or question file, "
     "or set sglang_benchmark_multi_turn=false"),
    ({"sglang_benchmark_seed": -2},
     "sglang_benchmark_seed=-2: must be >= 0; Python seeds -N and N alike, so a negative seed repeats the prompts of another "
     "level (radix-cache hits); use e.g. 2"),
    ({"sglang_benchmark_phases": [{"concurrency": 8, "duration_s": 0}]},
     "sglang_benchmark_phases[0].duration_s=0: must be a number of seconds > 0 (the phase's dwell time)"),
    ({"sglang_benchmark_phases": [{"concurrency": 8, "duration_s": 30}], "sglang_benchmark_request_rates": [4]},
     "sglang_benchmark_phases and sglang_benchmark_request_rates: a moving load is a closed loop of single prompts per phase "
     "(each phase's concurrency sets the load); leave sglang_benchmark_request_rates unset, or sglang_benchmark_phases empty"),
    ({"sglang_benchmark_concurrency": [1, 2.5]},
     "sglang_benchmark_concurrency=[1, 2.5]: every level must be a whole number of concurrent requests >= 1; give a list such "
     "as [1, 4, 16, 64]"),
])
def test_benchmark_cross_checks_are_refused(base, values, problem):
    assert vb.benchmark_problems(values, str(base)) == [problem]


def test_a_trace_file_is_read_and_parsed(base):
    trace = base / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 8, "output_length": 4}\n')
    assert vb.benchmark_problems({"sglang_benchmark_trace_file": str(trace)}, str(base), lambda p: Path(p).read_text()) == []
    # with request rates, the trace's timestamps would be overridden
    assert vb.benchmark_problems({"sglang_benchmark_trace_file": str(trace), "sglang_benchmark_request_rates": [2]}, str(base),
                                 lambda p: Path(p).read_text()) == [
        "sglang_benchmark_request_rates=[2.0]: a trace replay sends each request at its trace timestamp (sglang_benchmark_trace_file "
        "is set); leave sglang_benchmark_request_rates empty (use sglang_benchmark_trace_time_scale to replay faster or slower)"]


def test_a_missing_trace_file_is_refused(base):
    def read(path):
        raise IOError("Could not find or access '%s'" % path)
    assert vb.benchmark_problems({"sglang_benchmark_trace_file": "traces/prod.jsonl"}, str(base), read) == [
        "sglang_benchmark_trace_file=\"traces/prod.jsonl\": cannot read it on the controller (Could not find or access "
        "'traces/prod.jsonl'). Fix: give the path of a Mooncake JSONL trace (absolute, or in the playbook directory or its "
        "files/), or \"\" for none"]


def test_every_problem_is_collected_together(base):
    problems = vb.benchmark_problems({"sglang_benchmark_run_id": "../../etc", "sglang_benchmark_workload": "nope.jsonl",
                                      "sglang_benchmark_label": "a b", "sglang_benchmark_burstiness": 2.0}, str(base))
    assert [p.split("=", 1)[0] for p in problems] == ["sglang_benchmark_label", "sglang_benchmark_workload",
                                                      "sglang_benchmark_run_id", "sglang_benchmark_burstiness"]


# ---------------------------------------------------------------------------------------------
# one table with the role: sweep.yml passes these variables, vars/main.yml names these options


def test_the_options_are_those_sweep_yml_passes():
    tasks = yaml.safe_load((REPO / "roles" / "sglang_benchmark" / "tasks" / "sweep.yml").read_text())
    (task,) = [t for t in tasks if "llmops.sglang.serving_benchmark" in t]
    args = task["llmops.sglang.serving_benchmark"]
    plain = dict((option, re.fullmatch(r"\{\{ (sglang_benchmark_\w+) \}\}", str(value)).group(1)) for option, value in args.items()
                 if re.fullmatch(r"\{\{ (sglang_benchmark_\w+) \}\}", str(value)))
    # url and run_id are fixed once per run from the variables (sglang_benchmark__url, sglang_benchmark__run_id)
    assert plain.pop("url") == "sglang_benchmark__url" and plain.pop("run_id") == "sglang_benchmark__run_id"
    assert plain.pop("variable_names") == "sglang_benchmark__variable_names"
    assert plain == dict((k, v) for k, v in vb.OPTION_VARIABLES.items() if k not in ("trace", "shared_prefix", "url", "run_id"))
    assert "sglang_benchmark_trace_file" in args["trace"] and "sglang_benchmark_shared_prefix" in args["shared_prefix"]
    assert dict((k, v.strip("{} ")) for k, v in args["gates"].items()) == vb.GATE_VARIABLES
    assert dict((k, v.strip("{} ")) for k, v in args["slo"].items()) == vb.SLO_VARIABLES
    # the internal ones: the run id and URL fixed once, mtp_ab's level, the message names, the raw records
    assert set(args) - set(vb.OPTION_VARIABLES) - {"gates", "slo"} == {"extra_concurrency", "sort_levels", "raw_records", "variable_names"}


def test_the_message_names_are_the_roles():
    names = yaml.safe_load((REPO / "roles" / "sglang_benchmark" / "vars" / "main.yml").read_text())["sglang_benchmark__variable_names"]
    mine = vb.variable_names()
    assert dict((k, v) for k, v in names.items() if k in mine) == dict((k, v) for k, v in mine.items() if k in names)
    assert set(names) - set(mine) == {"delegate_to", "extra_concurrency"}


# ---------------------------------------------------------------------------------------------
# preflight_check: the benchmark's inputs with the variables, one failure listing everything


def run_preflight(task_vars, checks=("variables",), basedir="/nonexistent"):
    task = mock.MagicMock(args={"checks": list(checks)}, async_val=0, check_mode=False, action="llmops.sglang.preflight_check")
    loader = mock.MagicMock()
    loader.get_basedir.return_value = basedir
    templar = mock.MagicMock()
    templar.template.side_effect = lambda value: value
    plugin = preflight_check.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader, templar, None)
    return plugin.run(task_vars=dict({"inventory_hostname": "gpu1"}, **task_vars))


def test_preflight_refuses_a_run_id_like_dot_dot_etc():
    result = run_preflight({"sglang_benchmark_run_id": "../../etc"})
    assert result["failed"]
    assert result["msg"] == ["Preflight refused the variables of gpu1 (1 problem(s)):",
                             "sglang_benchmark_run_id='../../etc': use only letters, digits, '.', '_' and '-' (it is a directory "
                             "name); " + RUN_ID_FIX]


def test_preflight_lists_benchmark_inputs_with_the_other_variables_once_each(base):
    result = run_preflight({"sglang_benchmark_run_id": "../../etc", "sglang_benchmark_workload": "prompts/missing.jsonl",
                            "sglang_benchmark_concurrency": "1,8", "sglang_server_port": 0}, basedir=str(base))
    msg = result["msg"]
    assert result["failed"] and msg[0] == "Preflight refused the variables of gpu1 (4 problem(s)):"
    # the per-variable rules first; the concurrency string is refused once (by its rule), not again by the plan
    assert msg[1].startswith("sglang_benchmark_concurrency=\"1,8\": must be a list (a string is not split into one). Fix:")
    assert msg[2] == "sglang_server_port=0: not a TCP port (1-65535). Fix: use a free TCP port such as 30000"
    assert msg[3].startswith("sglang_benchmark_workload=\"prompts/missing.jsonl\": workload '%s/prompts/missing.jsonl': no such" % base)
    assert msg[4].startswith("sglang_benchmark_run_id='../../etc': use only letters")


def test_checks_benchmark_alone_is_the_roles_first_task(base):
    result = run_preflight({"sglang_benchmark_workload": "prompts/missing.jsonl", "sglang_server_port": 0}, checks=("benchmark",),
                           basedir=str(base))
    assert result["failed"] and result["msg"][0] == "Refused the benchmark inputs of gpu1 (1 problem(s)):"
    assert len(result["msg"]) == 2 and result["msg"][1].startswith("sglang_benchmark_workload=")
    assert run_preflight({"sglang_benchmark_workload": "prompts/good.jsonl"}, checks=("benchmark",), basedir=str(base)) == {
        "changed": False, "msg": "The variables of gpu1 passed."}


ROWS_FIX = ("Fix: point the benchmark at a file whose rows are usable (see the skip reasons), raise "
            "sglang_benchmark_workload_max_skipped_fraction, or fix sglang_benchmark_workload_categories")


def test_a_mostly_broken_file_is_refused_in_preflight_with_its_lines(base):
    # 1 usable row of 3: 2 skipped of 3 is 0.667 > 0.5, the default limit
    (base / "broken.jsonl").write_text(PROMPT + "not json\n" + '{"category": "qa"}\n')
    problems = vb.benchmark_problems({"sglang_benchmark_workload": "broken.jsonl"}, str(base))
    assert len(problems) == 1, problems
    assert problems[0].startswith('sglang_benchmark_workload="broken.jsonl": workload %s/broken.jsonl' % base)
    assert "line 2" in problems[0] and "not JSON" in problems[0] and "line 3" in problems[0] and "no prompt key" in problems[0]
    assert problems[0].endswith(ROWS_FIX)
    # the same file passes with the limit raised to 0.7 (0.667 is below it)
    assert vb.benchmark_problems({"sglang_benchmark_workload": "broken.jsonl",
                                  "sglang_benchmark_workload_max_skipped_fraction": 0.7}, str(base)) == []


def test_a_category_filter_no_row_carries_is_refused_in_preflight(base):
    problems = vb.benchmark_problems({"sglang_benchmark_workload": "prompts/good.jsonl",
                                      "sglang_benchmark_workload_categories": ["math"]}, str(base))
    assert len(problems) == 1 and "matches no row; its categories are qa" in problems[0], problems
    problems = vb.benchmark_problems({"sglang_benchmark_workload": "builtin-long",
                                      "sglang_benchmark_workload_categories": ["math", "poetry"]}, str(base))
    assert problems == ["sglang_benchmark_workload=\"builtin-long\": workload_categories names ['poetry'], which the built-in "
                        "set does not have (its categories are coding, math, reasoning, qa, summarization, rag, extraction, "
                        "translation, writing, roleplay). " + ROWS_FIX]
    problems = vb.benchmark_problems({"sglang_benchmark_workload": "random-ids",
                                      "sglang_benchmark_workload_categories": ["math"]}, str(base))
    assert len(problems) == 1 and "not random-ids" in problems[0], problems


def test_a_file_above_the_preflight_read_limit_is_left_to_the_benchmark(base, mocker):
    (base / "broken.jsonl").write_text("not json\n" * 3)
    assert vb.benchmark_problems({"sglang_benchmark_workload": "broken.jsonl"}, str(base)) != []
    mocker.patch("ansible_collections.llmops.sglang.plugins.module_utils._bench.options.PREFLIGHT_READ_BYTES", 10)
    assert vb.benchmark_problems({"sglang_benchmark_workload": "broken.jsonl"}, str(base)) == []
