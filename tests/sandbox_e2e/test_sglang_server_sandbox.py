"""End-to-end: playbooks/serve.yml (role llmops.sglang.sglang_server) against sandbox hosts.

The sandbox tests are marked ``sandbox`` (select with ``-m sandbox``; deselect with ``-m "not sandbox"``); the fleet
rendering test at the end runs serve.yml in check mode against local stand-in hosts and needs no sandbox. Needs podman and the images
``localhost/llmops-sandbox:bookworm`` and ``localhost/sglang-sim:latest`` (tests/sandbox/build.sh). The tests start
their own privileged systemd hosts ``sglang-sbx-t7a`` / ``sglang-sbx-t7b`` (the sandbox's podman options), load the
simulator image into each host's inner podman, and remove the hosts (and their volumes) at the end.

What is shown (issue #7):
- the unit runs the simulator image and /server_info reports the rendered reference deployment;
- a second run changes nothing;
- changing one launch argument restarts the server exactly once (one new systemd invocation, one "Started" line);
- a server that never becomes ready fails within the readiness timeout, with its last journal lines;
- two hosts roll out with serial 1, and a bad configuration on the first stops the second from being touched;
- a crash (SGLANG_SIM_CRASH_AFTER) ends the container with status 137 and systemd restarts it (issue #14).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

SANDBOX = pytest.mark.sandbox

REPO = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = REPO / "tests" / "sandbox" / "containers.conf"
HOST_IMAGE = "localhost/llmops-sandbox:bookworm"
SIM_IMAGE = "localhost/sglang-sim:latest"
HOSTS = ("sglang-sbx-t7a", "sglang-sbx-t7b")
ENV = dict(os.environ, CONTAINERS_CONF=str(CONTAINERS_CONF), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
           ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")


def podman(*args, check=True, **kwargs):
    return subprocess.run(["podman"] + list(args), env=ENV, check=check, capture_output=True, text=True, **kwargs)


def on_host(host, command, check=False):
    return podman("exec", host, "sh", "-c", command, check=check)


@pytest.fixture(scope="module")
def sandbox_hosts(sandbox_images):  # pylint: disable=unused-argument
    for host in HOSTS:
        podman("rm", "-f", host, check=False)
        podman("volume", "rm", "-f", host + "-containers", check=False)
        podman("run", "-d", "--name", host, "--hostname", host, "--privileged", "--systemd=always",
               "-v", "%s-containers:/var/lib/containers" % host, HOST_IMAGE, "/sbin/init")
    try:
        for host in HOSTS:
            deadline = time.time() + 60
            while on_host(host, "systemctl is-system-running").stdout.strip() not in ("running", "degraded"):
                if time.time() > deadline:
                    pytest.fail("sandbox host %s did not boot: %s" % (host, on_host(host, "systemctl --failed").stdout))
                time.sleep(1)
            save = subprocess.Popen(["podman", "save", SIM_IMAGE], env=ENV, stdout=subprocess.PIPE)
            load = subprocess.run(["podman", "exec", "-i", host, "podman", "load"], env=ENV, stdin=save.stdout,
                                  capture_output=True, text=True, check=False)
            save.wait()
            assert load.returncode == 0, load.stderr
        yield HOSTS
    finally:
        for host in HOSTS:
            podman("rm", "-f", "-t", "5", host, check=False)
            podman("volume", "rm", "-f", host + "-containers", check=False)


def make_inventory(tmp_path, hosts, host_vars=None, group_vars=None):
    """Inventory dir: the sandbox group_vars for sglang_server + test overrides (GPU devices off: no CDI spec yet)."""
    inv = tmp_path / "inventory"
    (inv / "group_vars" / "all").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    shutil.copy(REPO / "inventories" / "sandbox" / "group_vars" / "all" / "sglang_server.yml",
                inv / "group_vars" / "all" / "sglang_server.yml")
    overrides = {"sglang_server_gpu_mode": "none", "sglang_server_ready_timeout": 90, "sglang_server_ready_delay": 1}
    overrides.update(group_vars or {})
    (inv / "group_vars" / "all" / "zz_test.yml").write_text(json.dumps(overrides))
    for host, values in (host_vars or {}).items():
        (inv / "host_vars" / ("%s.yml" % host)).write_text(json.dumps(values))
    hosts_yml = {"all": {"children": {"gpu_hosts": {"hosts": dict((h, None) for h in hosts),
                                                    "vars": {"ansible_connection": "containers.podman.podman",
                                                             "ansible_python_interpreter": "/usr/bin/python3"}}}}}
    (inv / "hosts.yml").write_text(json.dumps(hosts_yml))
    return inv


def serve(inventory, *extra):
    started = time.time()
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(inventory), "playbooks/serve.yml"] + list(extra),
                          cwd=str(REPO), env=ENV, capture_output=True, text=True, timeout=900, check=False)
    proc.elapsed = time.time() - started
    return proc


def recap(proc, host):
    """{'ok': n, 'changed': n, 'failed': n, ...} from the PLAY RECAP line of ``host`` (absent host -> None)."""
    for line in proc.stdout.splitlines():
        if line.startswith(host + " ") and "ok=" in line:
            return dict((k, int(v)) for k, v in (item.split("=") for item in line.split(":", 1)[1].split()))
    return None


def server_info(host):
    out = on_host(host, "curl -sf http://127.0.0.1:30000/server_info")
    assert out.returncode == 0, "no /server_info on %s: %s" % (host, out.stderr)
    return json.loads(out.stdout)


def unit_show(host, *props):
    out = on_host(host, "systemctl show sglang-server.service " + " ".join("-p " + p for p in props)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@SANDBOX
def test_serve_runs_simulator_and_second_run_changes_nothing(sandbox_hosts, tmp_path):
    host = sandbox_hosts[0]
    inv = make_inventory(tmp_path, [host])
    first = serve(inv)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    assert recap(first, host)["changed"] >= 1
    assert on_host(host, "systemctl is-active sglang-server.service").stdout.strip() == "active"
    info = server_info(host)
    # The reference deployment as SGLang 0.5.9 reports it (NEXTN rewritten to EAGLE; SGLANG_FACTS.md §0.1).
    assert info["version"] == "0.5.9"
    assert info["speculative_algorithm"] == "EAGLE"
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) == (1, 1, 2)
    assert info["max_running_requests"] == 64 and info["tp_size"] == 4
    assert info["mamba_scheduler_strategy"] == "extra_buffer" and info["attention_backend"] == "triton"
    unit = on_host(host, "cat /etc/systemd/system/sglang-server.service").stdout
    assert "ExecStart=/usr/bin/podman run --rm --name sglang-server --log-driver k8s-file --network host --ipc host" in unit
    assert "localhost/sglang-sim:latest python3 -m sglang.launch_server --model-path /models/Qwen3.5-122B-A10B" in unit
    assert "Restart=on-failure" in unit and "TimeoutStartSec=3600" in unit
    assert "After=network-online.target nvidia-persistenced.service" in unit
    env_file = on_host(host, "cat /etc/sglang/sglang-server.env").stdout
    assert "SGLANG_ENABLE_SPEC_V2=1" in env_file.splitlines()
    assert on_host(host, "stat -c %a /etc/sglang/sglang-server.secret.env").stdout.strip() == "600"

    second = serve(inv)
    assert second.returncode == 0, second.stdout[-4000:]
    assert recap(second, host)["changed"] == 0, second.stdout[-4000:]


@SANDBOX
def test_changing_one_launch_argument_restarts_once(sandbox_hosts, tmp_path):
    host = sandbox_hosts[0]
    inv = make_inventory(tmp_path, [host])
    baseline = serve(inv)
    assert baseline.returncode == 0, baseline.stdout[-4000:]
    before = unit_show(host, "InvocationID", "NRestarts")
    since = on_host(host, "date '+%Y-%m-%d %H:%M:%S'").stdout.strip()
    time.sleep(1)
    changed = serve(inv, "-e", "sglang_server_max_running_requests=32")
    assert changed.returncode == 0, changed.stdout[-4000:]
    assert recap(changed, host)["changed"] >= 2  # unit file + the one restart
    after = unit_show(host, "InvocationID", "NRestarts")
    assert after["InvocationID"] != before["InvocationID"]
    journal = on_host(host, "journalctl -u sglang-server.service --since '%s' --no-pager -o cat" % since).stdout
    assert journal.count("Started sglang-server.service") == 1, journal[-3000:]
    assert "Scheduled restart job" not in journal  # restarted by the handler, not by a crash loop
    assert server_info(host)["max_running_requests"] == 32
    again = serve(inv, "-e", "sglang_server_max_running_requests=32")
    assert recap(again, host)["changed"] == 0, again.stdout[-4000:]


@SANDBOX
def test_never_ready_fails_within_timeout_with_last_log_lines(sandbox_hosts, tmp_path):
    host = sandbox_hosts[0]
    env = {"SGLANG_SIM_VERSION": "0.5.9", "SGLANG_SIM_ARCH": "Qwen3_5MoeForConditionalGeneration", "SGLANG_SIM_GPU": "sm120",
           "SGLANG_SIM_LOAD_S": "1", "SGLANG_SIM_NEVER_READY": "1"}
    inv = make_inventory(tmp_path, [host], group_vars={"sglang_server_extra_env": env, "sglang_server_ready_timeout": 20})
    proc = serve(inv)
    assert proc.returncode != 0
    assert recap(proc, host)["failed"] == 1
    out = proc.stdout
    flat = " ".join(out.split())  # the message is wrapped by the YAML callback
    assert "is not ready: not ready within 20 s" in flat, out[-3000:]
    assert "/health last answered 503" in flat, out[-3000:]
    assert "Last 50 journal lines (journalctl -u sglang-server.service)" in out
    assert "server_args=ServerArgs(" in out or "sglang" in out.split("Last 50 journal lines", 1)[1]
    # 20 s of polling plus the playbook itself; a hang would hit the 900 s subprocess timeout instead.
    assert proc.elapsed < 20 + 120, proc.elapsed


@SANDBOX
def test_crash_loop_fails_fast_with_the_refusal_in_the_log(sandbox_hosts, tmp_path):
    """The server runs SGLang 0.5.23 (simulator) but the description says 0.5.9: the renderer spells the 0.5.9 mamba
    flag, 0.5.23 rejects it at startup, systemd restarts the unit again and again. Readiness stops at the crash loop
    instead of waiting out the whole timeout."""
    host = sandbox_hosts[0]
    env = {"SGLANG_SIM_VERSION": "0.5.23", "SGLANG_SIM_LOAD_S": "1"}
    inv = make_inventory(tmp_path, [host], group_vars={"sglang_server_extra_env": env, "sglang_server_ready_timeout": 300})
    proc = serve(inv)
    assert proc.returncode != 0
    out = proc.stdout
    flat = " ".join(out.split())
    assert "restarted" in flat and "times while waiting (crash loop; more than 2 allowed)" in flat, out[-3000:]
    assert "--mamba-scheduler-strategy" in out.split("Last 50 journal lines", 1)[1]
    assert proc.elapsed < 300, proc.elapsed


@SANDBOX
def test_crash_mid_benchmark_ends_the_container_and_systemd_restarts_it(sandbox_hosts, tmp_path):
    """Issue 14: SGLANG_SIM_CRASH_AFTER did nothing on the sandbox, because the server is PID 1 of its container and the
    kernel drops a self-sent SIGKILL there. Now the crash ends the container with status 137, systemd's
    Restart=on-failure starts it again after sglang_server_restart_sec (2 s on the sandbox), and it serves again.
    The simulator of this tree is mounted over the image's copy, so the test does not depend on when the image was built."""
    host = sandbox_hosts[0]
    on_host(host, "rm -rf /opt/sim-under-test && mkdir -p /opt/sim-under-test", check=True)
    podman("cp", str(REPO / "tests" / "sandbox" / "sglang_sim"), "%s:/opt/sim-under-test/sglang_sim" % host)
    env = {"SGLANG_SIM_VERSION": "0.5.9", "SGLANG_SIM_LOAD_S": "1", "SGLANG_SIM_INSTANT": "1", "SGLANG_SIM_CRASH_AFTER": "2"}
    options = ["-v", "/sys/fs/cgroup:/sys/fs/cgroup",
               "-v", "/opt/sim-under-test/sglang_sim:/usr/local/lib/python3.11/dist-packages/sglang_sim:ro"]
    inv = make_inventory(tmp_path, [host], group_vars={"sglang_server_extra_env": env, "sglang_server_container_options": options})
    proc = serve(inv)
    assert proc.returncode == 0, proc.stdout[-4000:]
    before = unit_show(host, "NRestarts", "InvocationID")
    since = on_host(host, "date '+%Y-%m-%d %H:%M:%S'").stdout.strip()
    # three generation requests, as a benchmark sends them: the third arrives after CRASH_AFTER=2 and kills the server
    codes = on_host(host, "for i in 1 2 3; do curl -s -m 10 -o /dev/null -w '%{http_code} ' -X POST http://127.0.0.1:30000/generate "
                          "-H 'Content-Type: application/json' -d '{\"input_ids\": [1, 2], \"sampling_params\": {\"max_new_tokens\": 4}}'; "
                          "done").stdout.split()
    assert codes == ["200", "200", "000"], codes
    deadline = time.time() + 60
    while True:
        after = unit_show(host, "NRestarts", "InvocationID", "ActiveState")
        healthy = on_host(host, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health").stdout.strip() == "200"
        if int(after["NRestarts"]) > int(before["NRestarts"]) and healthy:
            break
        assert time.time() < deadline, (after, on_host(host, "journalctl -u sglang-server.service -n 40 --no-pager").stdout)
        time.sleep(1)
    assert int(after["NRestarts"]) == int(before["NRestarts"]) + 1 and after["InvocationID"] != before["InvocationID"]
    journal = on_host(host, "journalctl -u sglang-server.service --since '%s' --no-pager -o cat" % since).stdout
    assert "RuntimeError: CUDA error: an illegal memory access was encountered (simulated fault: SGLANG_SIM_CRASH_AFTER=2, request 3 arrived)" \
        in journal, journal[-3000:]
    assert "Main process exited, code=exited, status=137" in journal, journal[-3000:]
    assert "Scheduled restart job" in journal, journal[-3000:]


@SANDBOX
def test_adaptive_table_is_served_read_only_and_a_change_restarts_once(sandbox_hosts, tmp_path):
    """Issue 21: SGLang 0.5.23 (simulator of this tree, mounted over the image's copy) with adaptive speculation and a
    table: the table is a 0644 file in the config dir, mounted read-only, reported by /server_info; a second run
    changes nothing; a changed table restarts the server once and is served (three serve runs: CI time)."""
    host = sandbox_hosts[0]
    on_host(host, "rm -rf /opt/sim-under-test && mkdir -p /opt/sim-under-test", check=True)
    podman("cp", str(REPO / "tests" / "sandbox" / "sglang_sim"), "%s:/opt/sim-under-test/sglang_sim" % host)
    options = ["-v", "/sys/fs/cgroup:/sys/fs/cgroup",
               "-v", "/opt/sim-under-test/sglang_sim:/usr/local/lib/python3.11/dist-packages/sglang_sim:ro"]
    env = {"SGLANG_SIM_VERSION": "0.5.23", "SGLANG_SIM_ARCH": "Qwen3_5MoeForConditionalGeneration", "SGLANG_SIM_GPU": "sm120",
           "SGLANG_SIM_LOAD_S": "1"}
    table = {"1": {"candidate_steps": [1, 3]}, "64": {"candidate_steps": [0, 1]}}
    group = {"sglang_server_version": "0.5.23", "sglang_server_extra_env": env, "sglang_server_container_options": options,
             "sglang_server_speculative_adaptive": True, "sglang_server_speculative_adaptive_config": table}
    inv = make_inventory(tmp_path, [host], group_vars=group)
    first = serve(inv)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    info = server_info(host)
    assert (info["speculative_adaptive"], info["speculative_adaptive_config"]) == (True, "/etc/sglang-adaptive/speculative_adaptive.json")
    # union [0, 1, 3]: the given initial step count 1 is a candidate; draft tokens 1 + 1
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (1, 2)
    assert on_host(host, "stat -c '%a %U' /etc/sglang/sglang-server.adaptive.json").stdout.strip() == "644 root"
    assert json.loads(on_host(host, "cat /etc/sglang/sglang-server.adaptive.json").stdout) == table
    unit = on_host(host, "cat /etc/systemd/system/sglang-server.service").stdout
    assert "-v /etc/sglang/sglang-server.adaptive.json:/etc/sglang-adaptive/speculative_adaptive.json:ro" in unit
    assert "speculative_adaptive disabled" not in on_host(host, "journalctl -u sglang-server.service --no-pager -o cat").stdout
    second = serve(inv)
    assert recap(second, host)["changed"] == 0, second.stdout[-4000:]

    before = unit_show(host, "InvocationID")
    since = on_host(host, "date '+%Y-%m-%d %H:%M:%S'").stdout.strip()
    time.sleep(1)
    table2 = {"1": {"candidate_steps": [1, 3, 5]}, "64": {"candidate_steps": [0, 1]}}
    (inv / "group_vars" / "all" / "zz_test.yml").write_text(json.dumps(dict(
        json.loads((inv / "group_vars" / "all" / "zz_test.yml").read_text()), sglang_server_speculative_adaptive_config=table2)))
    changed = serve(inv)
    assert changed.returncode == 0, changed.stdout[-4000:]
    assert recap(changed, host)["changed"] >= 2  # the table file + the one restart (the unit is the same)
    assert unit_show(host, "InvocationID")["InvocationID"] != before["InvocationID"]
    journal = on_host(host, "journalctl -u sglang-server.service --since '%s' --no-pager -o cat" % since).stdout
    assert journal.count("Started sglang-server.service") == 1, journal[-3000:]
    assert json.loads(on_host(host, "cat /etc/sglang/sglang-server.adaptive.json").stdout) == table2


@SANDBOX
def test_table_mode_tuning_serves_the_tuned_adaptive_table(sandbox_hosts, tmp_path):
    """Issue 21 part 3: playbooks/spec_tune.yml with speculative_tuning_mode table on SGLang 0.5.23 (simulator of this
    tree): step counts 0, 1, 3, buckets 1 and 8, 2 trials; one server start per step count plus the decision's, the table
    written as adaptive_table.json, recorded on the host and served with adaptive on."""
    host = sandbox_hosts[0]
    on_host(host, "rm -rf /opt/sim-under-test && mkdir -p /opt/sim-under-test; rm -f /etc/sglang/sglang-server.spec_decision.json",
            check=True)
    podman("cp", str(REPO / "tests" / "sandbox" / "sglang_sim"), "%s:/opt/sim-under-test/sglang_sim" % host)
    options = ["-v", "/sys/fs/cgroup:/sys/fs/cgroup",
               "-v", "/opt/sim-under-test/sglang_sim:/usr/local/lib/python3.11/dist-packages/sglang_sim:ro"]
    env = {"SGLANG_SIM_VERSION": "0.5.23", "SGLANG_SIM_ARCH": "Qwen3_5MoeForConditionalGeneration", "SGLANG_SIM_GPU": "sm120",
           "SGLANG_SIM_LOAD_S": "1"}
    # the decision path is named, so the test reads the file it knows (the role resolves speculative_tuning_decision_path
    # once, in main.yml, before decide.yml hands it to sglang_server as sglang_server_speculative_decision_path)
    inv = make_inventory(tmp_path, [host], group_vars={"sglang_server_version": "0.5.23", "sglang_server_extra_env": env,
                                                       "sglang_server_container_options": options,
                                                       "sglang_server_speculative_decision_path": "/etc/sglang/sglang-server.spec_decision.json"})
    reports = tmp_path / "reports"
    extra = {"llmops_target": host, "speculative_tuning_mode": "table", "speculative_tuning_table_steps": [0, 1, 3],
             "speculative_tuning_buckets": [1, 8], "speculative_tuning_trials": 2, "speculative_tuning_plots": False,
             "speculative_tuning_fresh": True, "sglang_benchmark_input_len": 32, "sglang_benchmark_output_len": 32,
             "sglang_benchmark_num_prompts": 4, "sglang_benchmark_prompts_per_concurrency": 2,
             "sglang_benchmark_report_dir": str(reports),
             "speculative_tuning_decision_path": "/etc/sglang/sglang-server.spec_decision.json"}
    since = on_host(host, "date '+%Y-%m-%d %H:%M:%S'").stdout.strip()
    started = time.time()
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(inv), "playbooks/spec_tune.yml", "-e",
                           json.dumps(extra)], cwd=str(REPO), env=ENV, capture_output=True, text=True, timeout=1500, check=False)
    elapsed = time.time() - started
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    report = reports / host / "spec-tune"
    table = json.loads((report / "adaptive_table.json").read_text())
    # buckets 1 and 8 are served from keys 1 and round(sqrt(1 x 8)) = 3 (adaptive_table.table_keys)
    assert sorted(table, key=int) == ["1", "3"]
    decision = json.loads(on_host(host, "cat /etc/sglang/sglang-server.spec_decision.json").stdout)
    assert decision["server_vars"]["sglang_server_speculative_adaptive"] is True
    assert decision["server_vars"]["sglang_server_speculative_adaptive_config"] == table
    info = server_info(host)
    assert (info["speculative_adaptive"], info["speculative_adaptive_config"]) == (True, "/etc/sglang-adaptive/speculative_adaptive.json")
    top = max(max(entry["candidate_steps"]) for entry in table.values())
    assert info["speculative_num_steps"] == top
    journal = on_host(host, "journalctl -u sglang-server.service --since '%s' --no-pager -o cat" % since).stdout
    # restarts: at most one start per step count plus the decision's (issue 21: step counts + 2)
    assert journal.count("Started sglang-server.service") <= 3 + 2, journal[-3000:]
    print("table mode on the sandbox: %.0f s to decision and deploy, %d starts, table %s" % (
        elapsed, journal.count("Started sglang-server.service"), json.dumps(table)))
    print((report / "decision.md").read_text().split("## Adaptive table")[1])


@SANDBOX
def test_two_hosts_serial_bad_first_host_stops_second(sandbox_hosts, tmp_path):
    first, second = sandbox_hosts
    on_host(second, "systemctl stop sglang-server.service; rm -f /etc/systemd/system/sglang-server.service")
    bad_env = {"SGLANG_SIM_VERSION": "0.5.9", "SGLANG_SIM_NEVER_READY": "1"}
    inv = make_inventory(tmp_path, [first, second], group_vars={"sglang_server_ready_timeout": 15},
                         host_vars={first: {"sglang_server_extra_env": bad_env}})
    proc = serve(inv)
    assert proc.returncode != 0
    assert recap(proc, first)["failed"] == 1
    # serial: 1 + max_fail_percentage: 0 -> the second batch never starts (the rollout plan, which only reads, ran on
    # both hosts at once: both need the rollout, the first batch is the first host alone). The plan's check-mode
    # comparison counts "would change" in the recap although it writes nothing, so what the second host got is read
    # from the host itself below (no unit, no environment file), not from its changed count.
    assert recap(proc, second) is None or recap(proc, second)["failed"] == 0, proc.stdout[-3000:]
    assert len([ln for ln in proc.stdout.splitlines() if ln.startswith("PLAY [Serve - single-node replicas")]) == 1
    assert on_host(second, "test -e /etc/systemd/system/sglang-server.service").returncode == 1
    assert on_host(second, "test -e /etc/sglang/sglang-server.env").returncode == 1

    # With a good configuration both hosts roll out, one batch after the other.
    inv_ok = make_inventory(tmp_path / "ok", [first, second])
    ok = serve(inv_ok)
    assert ok.returncode == 0, ok.stdout[-4000:]
    headers = [line for line in ok.stdout.splitlines() if line.startswith("PLAY [Serve - single-node replicas")]
    assert len(headers) == 2  # one play header per serial batch
    rollout = ok.stdout[ok.stdout.index("PLAY [Serve - single-node replicas"):]    # the plan play reads both at once
    assert rollout.index("ok: [%s]" % first) < rollout.index("ok: [%s]" % second)
    for host in (first, second):
        assert server_info(host)["speculative_algorithm"] == "EAGLE"


FLEET = {"all": {"vars": {"ansible_connection": "local"},
                 "children": {"gpu_hosts": {"children": {
                     "tp16": {"hosts": {"node-a": {"sglang_server_dist_init_host": "10.0.0.11", "sglang_server_advertise_host": "10.0.0.11"},
                                        "node-b": {}}},
                     "single": {"hosts": {"node-c": {"sglang_server_advertise_host": "10.0.0.13"}}}}},
                     "sglang_router": {"hosts": {"node-c": {}}}}}}


def _fleet_check(tmp_path, extra_vars=None):
    """serve.yml --check --diff on local stand-in hosts (nothing is written or started); returns the finished process."""
    import sys
    inv = tmp_path / "fleet"
    (inv / "group_vars").mkdir(parents=True)
    fleet = json.loads(json.dumps(FLEET))
    fleet["all"]["vars"]["ansible_python_interpreter"] = sys.executable
    (inv / "hosts.yml").write_text(json.dumps(fleet))
    tp16 = {"sglang_server_multinode_group": "tp16", "sglang_server_tp_size": 16, "sglang_server_nnodes": 2}
    (inv / "group_vars" / "tp16.yml").write_text(json.dumps(tp16))
    all_vars = {
        "sglang_server_model_path": "/models/Qwen3.5-122B-A10B", "sglang_server_speculative_algorithm": "NEXTN",
        "sglang_server_speculative_num_steps": 1, "sglang_server_speculative_eagle_topk": 1, "sglang_server_speculative_num_draft_tokens": 2,
        "sglang_server_max_running_requests": 64, "sglang_server_config_dir": str(tmp_path / "etc"),
        "sglang_server_hf_cache_dir": str(tmp_path / "hf"), "sglang_server_nccl_env_file": ""}
    all_vars.update(extra_vars or {})
    (inv / "group_vars" / "all.yml").write_text(json.dumps(all_vars))
    env = dict(ENV, ANSIBLE_CACHE_PLUGIN="memory")
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(inv), "playbooks/serve.yml", "--check", "--diff"],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc


def test_fleet_rendering_multinode_rank0_first_and_router(tmp_path):
    """One multi-node tp 16 server (group tp16: node-a rank 0, node-b rank 1) + one replica (node-c) + the router on node-c."""
    out = _fleet_check(tmp_path).stdout
    execs = [line for line in out.splitlines() if line.startswith("+ExecStart=")]
    rank0 = [e for e in execs if "--node-rank 0" in e]
    rank1 = [e for e in execs if "--node-rank 1" in e]
    assert len(rank0) == 1 and len(rank1) == 1
    assert "--tp-size 16 --dist-init-addr 10.0.0.11:20000 --nnodes 2 --node-rank 0" in rank0[0]
    assert "--tp-size 16 --dist-init-addr 10.0.0.11:20000 --nnodes 2 --node-rank 1" in rank1[0]
    assert out.index("PLAY [Serve - multi-node rank 0") < out.index("PLAY [Serve - multi-node ranks 1..n-1]")
    router = [e for e in execs if "sglang_router.launch_router" in e]
    assert len(router) == 1
    assert router[0].endswith("python3 -m sglang_router.launch_router --worker-urls http://10.0.0.11:30000 http://10.0.0.13:30000 "
                              "--host 0.0.0.0 --port 30001 --policy cache_aware")


def test_fleet_rendering_docker_engine_unit(tmp_path):
    """Docker: ordered after and requiring docker.service, GPUs through --gpus, a shm size instead of host IPC."""
    out = _fleet_check(tmp_path, {"sglang_server_engine": "docker", "sglang_server_gpu_mode": "gpus", "sglang_server_ipc_host": False,
                                  "sglang_server_image_pull": "always"}).stdout
    assert "+After=network-online.target nvidia-persistenced.service docker.service" in out
    assert "+Requires=docker.service" in out
    assert "+ExecStartPre=/usr/bin/docker pull lmsysorg/sglang:v0.5.9-cu130-runtime" in out
    single = [line for line in out.splitlines() if line.startswith("+ExecStart=") and "launch_server" in line and "--node-rank" not in line]
    assert single and single[0].startswith("+ExecStart=/usr/bin/docker run --rm --name sglang-server --network host --shm-size 32g "
                                           "--ulimit memlock=-1 --ulimit stack=67108864 --init --gpus all ")
