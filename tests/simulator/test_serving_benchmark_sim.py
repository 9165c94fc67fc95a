"""serving_benchmark, its client and the playbooks against the SGLang simulator (a test double) on loopback.

The simulator's defaults reproduce the seed deployment: single-stream decode 110 tok/s with MTP off and
135 tok/s with one draft token (accept length 2.00). Its timing model (tests/sandbox/sglang_sim/knobs.py
defaults): a target step costs t0 8.84 ms + k 0.25 ms per token in the step (running requests x
num_draft_tokens when verifying); with MTP each step adds one draft step (1.5 ms + 0.145 ms per running
request) and 3.83 ms of verify overhead, and yields 2 tokens per request at accept probability 1.
By hand:
  concurrency 1:  off 8.84 + 0.25       = 9.09 ms/token           -> 110.0 tok/s
                  on  8.84 + 0.5 + 1.645 + 3.83 = 14.815 ms / 2 tokens -> 135.0 tok/s   speedup 1.227
  concurrency 64: off 8.84 + 16         = 24.84 ms/token
                  on  8.84 + 32 + 10.78 + 3.83 = 55.45 ms / 2 tokens            speedup 24.84*2/55.45 = 0.896
So MTP must win at concurrency 1 and lose at 64.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc
from ansible_collections.llmops.sglang.plugins.module_utils._report import benchmark as br
from ansible_collections.llmops.sglang.plugins.module_utils._bench import stats as bs
from ansible_collections.llmops.sglang.plugins.modules import serving_benchmark

# ansible-core 2.19 (pinned in requirements.txt) injects module args this way.
from ansible.module_utils.testing import patch_module_args


pytestmark = pytest.mark.simulator

REPO = Path(__file__).resolve().parents[2]
OFF_ARGS = ["--tp", "4"]
ON_ARGS = ["--tp", "4", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1",
           "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2", "--max-running-requests", "64"]


def level(url, conc, n, out_len, in_len=64, warm=1):
    t = bc.Target(url, timeout_s=120, stall_timeout_s=20)
    res, dur, _w = bc.run_benchmark(t, bc.make_prompts(n, in_len, out_len, seed=1), max_concurrency=conc,
                                    warmup_prompts=bc.make_prompts(warm, in_len, 8, seed=2) if warm else None)
    m = bs.level_metrics(res, dur)
    assert m["failed"] == 0, m["error_kinds"]
    return br.make_record(m, {"backend": "sglang", "max_concurrency": conc, "request_rate": None})


def run_module(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            serving_benchmark.main()
    return json.loads(capsys.readouterr().out)


def single_stream(url, low, high):
    """Concurrency-1 level; measured once more when the first result is outside [low, high] tok/s, because the
    build machines are 2 shared cores and a stall of the simulator's process shows up as lost throughput."""
    first = level(url, 1, 3, 100)
    if low <= first["output_throughput"] <= high:
        return first, [first["output_throughput"]]
    second = level(url, 1, 3, 100)
    return second, [first["output_throughput"], second["output_throughput"]]


def test_single_stream_mtp_off_110(sglang_sim):
    srv = sglang_sim(OFF_ARGS)
    rec, seen = single_stream(srv.url, 105.0, 115.0)
    assert 105.0 <= rec["output_throughput"] <= 115.0, seen
    assert 105.0 <= rec["decode_tok_s_per_request"] <= 115.0    # 1000 / 9.09 ms
    assert rec["accept_length"] is None


def test_single_stream_mtp_on_135_accept_2(sglang_sim):
    srv = sglang_sim(ON_ARGS)
    rec, seen = single_stream(srv.url, 128.0, 142.0)
    assert 128.0 <= rec["output_throughput"] <= 142.0, seen
    assert rec["accept_length"] == pytest.approx(2.00, abs=0.01)
    assert rec["spec_verify_ct"] == 150                           # 3 requests x 100 tokens / 2 per verify step


@pytest.mark.timing
def test_ab_decisions_at_1_and_64(sglang_sim):
    sweeps = {}
    for name, args in (("off", OFF_ARGS), ("on", ON_ARGS)):
        srv = sglang_sim(args)
        sweeps[name] = [level(srv.url, 1, 2, 64), level(srv.url, 64, 64, 64)]
        srv.stop()
    ab = br.compare(sweeps["off"], sweeps["on"], target=1)
    sp = dict((r["level"], r["speedup"]) for r in ab["levels"])
    assert sp[1] == pytest.approx(1.227, abs=0.07)
    assert sp[64] == pytest.approx(0.896, abs=0.07)
    assert ab["decision"]["winner"] == "mtp_on"
    assert br.compare(sweeps["off"], sweeps["on"], target=64)["decision"]["winner"] == "mtp_off"
    assert 1 < ab["crossover"]["concurrency"] < 64 and ab["crossover"]["level"] == 64


def test_crash_mid_sweep_fails_with_counts_and_partial_records(sglang_sim, capsys):
    # level 1: 1 warm-up + 4 requests; the 6th request (level 2's warm-up) kills the server
    srv = sglang_sim(OFF_ARGS, env={"SGLANG_SIM_CRASH_AFTER": "5"}, instant=True)
    t0 = time.monotonic()
    out = run_module(capsys, {"url": srv.url, "max_concurrency": [1, 2], "num_prompts": 4, "input_len": 16,
                              "output_len": 16, "stall_timeout": 5, "timeout": 30})
    assert time.monotonic() - t0 < 20
    assert out["failed"] is True
    recs = out["records"]
    assert [r["completed"] for r in recs] == [4, 0]
    assert recs[1]["failed"] == 4
    assert out["failed_requests"] == 4
    assert "level 2 (max_concurrency=2): failed_fraction 1.00 is above the gate 0.00" in out["msg"]
    assert "cannot connect to 127.0.0.1:%d" % srv.port in out["msg"] or "connection closed" in out["msg"]


def test_error_chunks_fail_every_request(sglang_sim, capsys):
    srv = sglang_sim(ON_ARGS, env={"SGLANG_SIM_ERROR_AFTER_CHUNKS": "3"}, instant=True)
    out = run_module(capsys, {"url": srv.url, "max_concurrency": [2], "num_prompts": 4, "input_len": 16, "output_len": 32,
                              "warmup_requests": 0})
    assert out["failed"] is True and out["failed_requests"] == 4
    err = out["first_errors"][0]
    assert err["count"] == 4 and err["error"].startswith("error chunk after ")


def test_stalled_stream_ends_within_stall_timeout(sglang_sim, capsys):
    srv = sglang_sim(OFF_ARGS, env={"SGLANG_SIM_STALL_AFTER_CHUNKS": "2"})
    t0 = time.monotonic()
    out = run_module(capsys, {"url": srv.url, "max_concurrency": [2], "num_prompts": 2, "input_len": 16, "output_len": 32,
                              "warmup_requests": 0, "stall_timeout": 1.0, "timeout": 60})
    waited = time.monotonic() - t0
    assert out["failed"] is True
    assert out["first_errors"][0]["error"].startswith("stream stalled: no data for 1.")
    assert out["first_errors"][0]["count"] == 2
    assert waited < 5.0


# ---- playbooks (ansible-playbook against localhost, the server URL pointing at the simulator) -----------------

def _playbook(tmp_path, playbook, extra, check=False):
    inv = tmp_path / "hosts.ini"
    inv.write_text("[gpu_hosts]\nsimhost ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    # the benchmark's skip-if-unchanged state goes under tmp_path, not the controller's /var/lib/llmops
    extra = dict({"sglang_benchmark_state_dir": str(tmp_path / "state")}, **extra)
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), str(REPO / "playbooks" / playbook),
           "-e", json.dumps(extra)] + (["--check"] if check else [])
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_NOCOLOR="1")
    return subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300, check=False)


def test_benchmark_playbook_crash_keeps_partial_report(sglang_sim, tmp_path):
    srv = sglang_sim(OFF_ARGS, env={"SGLANG_SIM_CRASH_AFTER": "5"}, instant=True)
    reports = tmp_path / "reports"
    proc = _playbook(tmp_path, "benchmark.yml", {
        "sglang_benchmark_url": srv.url, "sglang_benchmark_concurrency": [1, 2, 4], "sglang_benchmark_num_prompts": 4,
        "sglang_benchmark_prompts_per_concurrency": 1, "sglang_benchmark_input_len": 16, "sglang_benchmark_output_len": 16,
        "sglang_benchmark_report_dir": str(reports), "sglang_benchmark_run_id": "crash", "sglang_benchmark_plots": False})
    out = proc.stdout
    assert proc.returncode != 0, out
    assert "serving benchmark on simhost" in out and "level 2 (concurrency 2)" in out
    assert "[2 of 3 level(s) measured" in out
    lines = (reports / "simhost" / "crash" / "results.jsonl").read_text().splitlines()
    assert [json.loads(ln)["completed"] for ln in lines] == [4, 0]
    assert "Failed requests" in (reports / "simhost" / "crash" / "summary.md").read_text()


def _python_without_matplotlib():
    """A Python on this machine that cannot import matplotlib (Debian's own python3: bootstrap installs it only in .venv)."""
    for py in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import matplotlib"], capture_output=True, check=False).returncode != 0:
            return py
    pytest.skip("every python3 here imports matplotlib; nothing to take it away from")
    return None


@pytest.mark.parametrize("extra,words", [
    ({"sglang_benchmark_concurrency": "1,8"}, "sglang_benchmark_concurrency='1,8': must be a list of levels (a single number or a "
                                              "comma-separated string, as -e key=value gives, is not one); give it as JSON"),
    ({"sglang_benchmark_concurrency": 8}, "sglang_benchmark_concurrency=8: must be a list of levels"),
    ({"sglang_benchmark_seed": -1}, "sglang_benchmark_seed=-1: must be >= 0; Python seeds -N and N alike"),
])
def test_benchmark_refuses_a_scalar_sweep_or_negative_seed(tmp_path, extra, words):
    """-e key=value gives strings and numbers, not lists: refused with the variable and the JSON form, before any level
    (by the role's first task, the preflight check of the benchmark inputs, in the role's variable names)."""
    proc = _playbook(tmp_path, "benchmark.yml", dict({"sglang_benchmark_url": "http://127.0.0.1:9"}, **extra))
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    # the YAML callback doubles the quotes of a single-quoted value ('1,8' -> ''1,8''): compare without them
    bare = out.replace("'", "").replace("\\", "")
    assert words.replace("'", "") in bare and "Refused the benchmark inputs of simhost (1 problem(s))" in out, out[-3000:]
    assert "Benchmark level" not in proc.stdout


def test_delegated_benchmark_aims_at_the_gpu_host_not_the_load_host(sim_server_cls, tmp_path):
    """delegate_to localhost with the default URL: the URL is resolved on the GPU host (its ansible_host), not in the
    delegated task where ansible_host would be the load host's. Here the 'GPU host' is the simulator on 127.0.0.2."""
    srv = sim_server_cls(args=OFF_ARGS, host="127.0.0.2", instant=True, log_path=str(tmp_path / "sim.log"))
    try:
        srv.wait_ready(timeout=30)
        proc, rec = _delegated_run(srv, tmp_path)
    finally:
        srv.stop()
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert rec["url"] == "http://127.0.0.2:%d" % srv.port and rec["completed"] == 4   # max(1, 4 per slot x 1)


def _delegated_run(srv, tmp_path):
    inv = tmp_path / "hosts.ini"
    # the host is named by its address and has no ansible_host, like sandbox hosts: in a task delegated to localhost,
    # ansible_host is localhost's, so a URL templated there would point at the controller's own loopback
    inv.write_text("[gpu_hosts]\n127.0.0.2 ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    extra = {"sglang_benchmark_delegate_to": "localhost", "sglang_server_port": srv.port, "sglang_benchmark_concurrency": [1],
             "sglang_benchmark_num_prompts": 1, "sglang_benchmark_input_len": 8, "sglang_benchmark_output_len": 8,
             "sglang_benchmark_report_dir": str(tmp_path / "reports"), "sglang_benchmark_run_id": "deleg", "sglang_benchmark_plots": False,
             "sglang_benchmark_state_dir": str(tmp_path / "state")}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inv), str(REPO / "playbooks" / "benchmark.yml"),
                           "-e", json.dumps(extra)], cwd=str(REPO), capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_NOCOLOR="1"))
    jsonl = tmp_path / "reports" / "127.0.0.2" / "deleg" / "results.jsonl"
    return proc, (json.loads(jsonl.read_text().splitlines()[0]) if jsonl.exists() else {})


def test_benchmark_without_matplotlib_stops_before_the_sweep(sglang_sim, tmp_path):
    srv = sglang_sim(OFF_ARGS, instant=True)
    py = _python_without_matplotlib()
    reports = tmp_path / "reports"
    proc = _playbook(tmp_path, "benchmark.yml", {
        "sglang_benchmark_url": srv.url, "sglang_benchmark_concurrency": [1], "sglang_benchmark_num_prompts": 2,
        "sglang_benchmark_input_len": 16, "sglang_benchmark_output_len": 16, "sglang_benchmark_report_dir": str(reports),
        "sglang_benchmark_report_python": py, "sglang_benchmark_report_venv_install": False})
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0, out[-3000:]
    assert "sglang_benchmark_plots=true needs matplotlib on the controller, before the sweep starts: %s cannot import it" % py in out
    assert "No module named 'matplotlib'" in out and "sglang_benchmark_report_venv_install is false" in out
    assert "set sglang_benchmark_plots=false" in out
    # nothing was measured or written: the simulator saw no /generate beyond its own start-up warm-up
    assert "Benchmark level" not in proc.stdout
    assert srv.log_text().count('"POST /generate HTTP/1.1" 200') == 1
    assert not reports.exists()


def test_benchmark_draws_plots_with_a_venv_it_creates(sglang_sim, tmp_path):
    srv = sglang_sim(OFF_ARGS, instant=True)
    py = _python_without_matplotlib()
    venv = tmp_path / "report-venv"
    reports = tmp_path / "reports"
    proc = _playbook(tmp_path, "benchmark.yml", {
        "sglang_benchmark_url": srv.url, "sglang_benchmark_concurrency": [1], "sglang_benchmark_num_prompts": 2,
        "sglang_benchmark_input_len": 16, "sglang_benchmark_output_len": 16, "sglang_benchmark_report_dir": str(reports),
        "sglang_benchmark_run_id": "venv", "sglang_benchmark_report_python": py, "sglang_benchmark_report_venv": str(venv)})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert subprocess.run([str(venv / "bin" / "python"), "-c", "import matplotlib"], check=False).returncode == 0
    assert (reports / "simhost" / "venv" / "output_throughput.png").exists(), sorted(os.listdir(reports / "simhost" / "venv"))


@pytest.fixture(scope="module")
def ab_servers(sim_server_cls, tmp_path_factory):
    d = tmp_path_factory.mktemp("ab")
    off = sim_server_cls(args=OFF_ARGS, log_path=str(d / "off.log"))
    on = sim_server_cls(args=ON_ARGS, log_path=str(d / "on.log"))
    try:
        off.wait_ready(timeout=30)
        on.wait_ready(timeout=30)
        yield off, on
    finally:
        off.stop()
        on.stop()


@pytest.mark.timing
@pytest.mark.parametrize("target,winner", [(1, "mtp_on"), (64, "mtp_off")])
def test_mtp_ab_playbook_table_crossover_decision(ab_servers, tmp_path, target, winner):
    off, on = ab_servers
    reports = tmp_path / "reports"
    proc = _playbook(tmp_path, "mtp_ab.yml", {
        "sglang_benchmark_ab_manage_server": False, "sglang_benchmark_ab_off_url": off.url, "sglang_benchmark_ab_on_url": on.url,
        "sglang_target_concurrency": target, "sglang_benchmark_ab_run_id": "ab", "sglang_benchmark_concurrency": [1, 64],
        "sglang_benchmark_num_prompts": 2, "sglang_benchmark_prompts_per_concurrency": 1, "sglang_benchmark_input_len": 64,
        "sglang_benchmark_output_len": 64, "sglang_benchmark_report_dir": str(reports)})
    assert proc.returncode == 0, proc.stdout[-4000:]
    ab = json.loads((reports / "simhost" / "ab" / "ab_summary.json").read_text())
    assert ab["decision"]["winner"] == winner and ab["decision"]["basis"] == "measured"
    assert [r["level"] for r in ab["levels"]] == [1, 64]
    assert ab["levels"][0]["speedup"] > 1.1 and ab["levels"][1]["speedup"] < 0.97
    assert 1 < ab["crossover"]["concurrency"] < 64
    assert "Decision: **%s**" % winner in proc.stdout
    assert "Crossover: concurrency ~" in proc.stdout
    for arm in ("ab-mtp_off", "ab-mtp_on"):
        assert len((reports / "simhost" / arm / "results.jsonl").read_text().splitlines()) == 2
    assert (reports / "simhost" / "ab" / "ab_speedup.png").exists()


def test_mtp_ab_refuses_missing_target(tmp_path):
    proc = _playbook(tmp_path, "mtp_ab.yml", {"sglang_benchmark_ab_manage_server": False})
    assert proc.returncode != 0
    assert "sglang_target_concurrency=undefined" in proc.stdout


@pytest.mark.parametrize("extra,expected", [
    # SGLang caps a speculative server at 48 running requests when none is set: the MTP-on arm would queue at 64
    ({"sglang_target_concurrency": 64}, "The A/B sweep goes up to concurrency 64, but sglang_server_max_running_requests is unset"),
    ({"sglang_target_concurrency": 16, "sglang_server_max_running_requests": 32},
     "The A/B sweep goes up to concurrency 64, but sglang_server_max_running_requests=32: above that both arms queue"),
    ({"sglang_target_concurrency": 8, "sglang_benchmark_request_rates": [2.0]}, "sglang_benchmark_request_rates=[2.0] must be empty"),
    ({"sglang_target_concurrency": 8, "sglang_benchmark_concurrency": "1,8"},
     "sglang_benchmark_concurrency=1,8 must be a list of integers >= 1, given as JSON"),
    ({"sglang_target_concurrency": 0}, "sglang_target_concurrency=0: set it to the concurrency the service really runs at"),
])
def test_mtp_ab_plan_refuses_a_biased_sweep_before_serving(tmp_path, extra, expected):
    proc = _playbook(tmp_path, "mtp_ab.yml", dict({"sglang_server_speculative_algorithm": "NEXTN"}, **extra))
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert expected in out, out[-3000:]
    assert "PLAY [MTP A/B - plan]" in proc.stdout and "PLAY [Serve" not in proc.stdout   # stopped in the plan


@pytest.mark.parametrize("backend", ["openai", "openai-chat"])
def test_openai_backends_count_tokens_from_usage(sglang_sim, capsys, backend):
    srv = sglang_sim(OFF_ARGS, instant=True)
    out = run_module(capsys, {"url": srv.url, "backend": backend, "max_concurrency": [4], "num_prompts": 8, "input_len": 16,
                              "output_len": 24})
    assert not out.get("failed"), out.get("msg")
    rec = out["records"][0]
    assert rec["completed"] == 8 and rec["total_output_tokens"] == 8 * 24
    assert rec["backend"] == backend and rec["accept_length"] is None


# ---- workloads (issue 11): prompt files read on the controller, the built-in set, random-ids vs real prompts ------

def test_prompt_file_workload_is_read_on_the_controller(sglang_sim, tmp_path):
    """A JSONL file given by path reaches the module as data (the action plugin reads it); records name the workload,
    carry the categories of the file, and the simulator's accept length follows the prompt text: math at p=1 accepts
    every draft (2.00 with one draft token), roleplay at 0.38 about 1.38 (acceptance.py)."""
    srv = sglang_sim(ON_ARGS, instant=True)
    prompts = tmp_path / "prompts.jsonl"
    # line 2 is broken: skipped and counted (1 of 3 rows, below the 0.5 limit), the other two are sent
    prompts.write_text("\n".join([json.dumps({"prompt": "What is 15*23? Answer briefly.", "category": "arith"}),
                                  '{"prompt": "cut off',
                                  json.dumps({"messages": [{"role": "user", "content": "You are a pirate captain. Stay in "
                                                            "character and greet the crew."}],
                                              "category": "play", "output_len": 400})]) + "\n")
    reports = tmp_path / "reports"
    proc = _playbook(tmp_path, "benchmark.yml", {
        "sglang_benchmark_url": srv.url, "sglang_benchmark_workload": str(prompts), "sglang_benchmark_concurrency": [2],
        "sglang_benchmark_num_prompts": 4, "sglang_benchmark_prompts_per_concurrency": 1, "sglang_benchmark_output_len": 400,
        "sglang_benchmark_report_dir": str(reports), "sglang_benchmark_run_id": "file", "sglang_benchmark_plots": False})
    assert proc.returncode == 0, proc.stdout[-4000:]
    rec = json.loads((reports / "simhost" / "file" / "results.jsonl").read_text().splitlines()[0])
    assert rec["dataset_name"] == str(prompts) and rec["workload_prompts"] == 2 and rec["warnings"] == []
    assert sorted(rec["categories"]) == ["arith", "play"]
    assert rec["categories"]["arith"]["accept_length"] == pytest.approx(2.0, abs=0.01)
    assert rec["categories"]["play"]["accept_length"] == pytest.approx(1.38, abs=0.06)   # ~600 verify steps
    # token counts from the server: "What is 15*23? Answer briefly." is 10 tokens to the simulator's word counter
    assert rec["total_input_tokens"] > 0 and rec["total_output_tokens"] == 4 * 400
    assert "## Per category (workload" in (reports / "simhost" / "file" / "summary.md").read_text()
    counts = "2 of 3 rows used; skipped: 1 not JSON (line 2)"
    assert "workload %s: %s" % (prompts, counts) in proc.stdout
    assert rec["workload_rows"]["skipped"] == {"not JSON": 1}
    assert json.loads((reports / "simhost" / "file" / "summary.json").read_text())["workload_rows"]["text"] == counts
    assert "Workload rows (prompts.jsonl): " + counts in (reports / "simhost" / "file" / "summary.md").read_text()


@pytest.mark.parametrize("content, expect", [
    # 2 of 3 rows unusable: 67 % > 50 %, the wrong file
    ('{"prompt": "fine"}\n{"text": "no prompt"}\n{"conversations": []}\n',
     "prompts.jsonl: 2 of its 3 rows are unusable (67 %, above sglang_benchmark_workload_max_skipped_fraction=0.5"),
    ("", "the file is empty"),
])
def test_bad_prompt_file_fails_before_any_request(sglang_sim, tmp_path, content, expect):
    srv = sglang_sim(ON_ARGS, instant=True)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(content)
    before = srv.log_text().count("POST /generate")         # the simulator's own warm-up request
    proc = _playbook(tmp_path, "benchmark.yml", {
        "sglang_benchmark_url": srv.url, "sglang_benchmark_workload": str(prompts), "sglang_benchmark_concurrency": [1],
        "sglang_benchmark_num_prompts": 1, "sglang_benchmark_report_dir": str(tmp_path / "r"), "sglang_benchmark_plots": False})
    out = " ".join(proc.stdout.split())
    # an empty file is refused by the role's first task (preflight's check of the inputs), a mostly broken one when
    # the action plugin reads its rows; neither sends a request
    assert proc.returncode != 0 and expect in out, out[-3000:]
    assert "(nothing was sent)" in out or "Refused the benchmark inputs of simhost" in out, out[-3000:]
    assert srv.log_text().count("POST /generate") == before


def test_mtp_ab_random_ids_overestimates_against_the_builtin_set(ab_servers, tmp_path):
    """The same sweep twice, random-ids then the built-in set. By hand (docs/simulator.md): random ids accept every draft
    (accept length 2.00), so at concurrency 1 MTP gives 14.815 ms / 2 tokens vs 9.09 ms: 1.227; the built-in set's ten
    categories accept 1 + p with the harmonic mean 1.621 over one request per category, so MTP-on decodes at
    1.621 / 14.815 ms = 109.4 tok/s and the speedup is about 0.995: random ids overestimate it by about 23 %
    (SPEED-Bench). The synthetic run's decision carries the warning; the built-in run reports coding/math above
    roleplay/writing."""
    off, on = ab_servers
    reports = tmp_path / "reports"
    common = {"sglang_benchmark_ab_manage_server": False, "sglang_benchmark_ab_off_url": off.url,
              "sglang_benchmark_ab_on_url": on.url, "sglang_target_concurrency": 1, "sglang_benchmark_concurrency": [1],
              "sglang_benchmark_num_prompts": 10, "sglang_benchmark_prompts_per_concurrency": 1, "sglang_benchmark_input_len": 64,
              "sglang_benchmark_output_len": 96, "sglang_benchmark_report_dir": str(reports), "sglang_benchmark_plots": False}
    speedups = {}
    for wl in ("random-ids", "builtin"):
        proc = _playbook(tmp_path, "mtp_ab.yml", dict(common, sglang_benchmark_workload=wl, sglang_benchmark_ab_run_id="ab-" + wl))
        assert proc.returncode == 0, proc.stdout[-4000:]
        ab = json.loads((reports / "simhost" / ("ab-" + wl) / "ab_summary.json").read_text())
        speedups[wl] = ab["levels"][0]["speedup"]
        if wl == "random-ids":
            assert ab["decision"]["warnings"] == [serving_benchmark.SYNTHETIC_WARNING]
            assert "synthetic prompts" in " ".join(proc.stdout.split())
        else:
            assert ab["warnings"] == []
            cats = ab["levels"][0]["categories"]
            assert len(cats) == 10
            acc = dict((c, v["candidate_accept_length"]) for c, v in cats.items())
            assert min(acc["coding"], acc["math"]) > max(acc["roleplay"], acc["writing"]), acc
    assert speedups["random-ids"] == pytest.approx(1.227, abs=0.06)
    assert speedups["builtin"] == pytest.approx(0.995, abs=0.08)
    assert speedups["random-ids"] / speedups["builtin"] == pytest.approx(1.23, abs=0.1)


def test_prompt_file_edited_at_the_same_path_is_benchmarked_again(sglang_sim, tmp_path):
    """The skip-if-unchanged fingerprint counts a prompt file by its content (workload_sha256): an unchanged file is
    skipped, the same path with another prompt measures again and names what changed (issue 16)."""
    srv = sglang_sim(OFF_ARGS, instant=True)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "What is 15*23?", "category": "arith"}\n')
    extra = {"sglang_benchmark_url": srv.url, "sglang_benchmark_workload": str(prompts), "sglang_benchmark_concurrency": [1],
             "sglang_benchmark_num_prompts": 1, "sglang_benchmark_output_len": 8, "sglang_benchmark_warmup_requests": 0,
             "sglang_benchmark_report_dir": str(tmp_path / "reports"), "sglang_benchmark_plots": False}
    runs = []
    for i, text in enumerate([None, None, '{"prompt": "Name three prime numbers.", "category": "arith"}\n']):
        if text:
            prompts.write_text(text)
        proc = _playbook(tmp_path, "benchmark.yml", dict(extra, sglang_benchmark_run_id="r%d" % i))
        assert proc.returncode == 0, proc.stdout[-4000:]
        runs.append(" ".join(proc.stdout.split()))
    assert "benchmark on simhost: no benchmark recorded on this host yet" in runs[0]
    assert "benchmark skipped on simhost: nothing changed since run r0" in runs[1]
    assert "benchmark on simhost: changed since run r0: benchmark.workload_sha256" in runs[2]
    assert [(tmp_path / "reports" / "simhost" / r / "results.jsonl").exists() for r in ("r0", "r1", "r2")] == [True, False, True]
