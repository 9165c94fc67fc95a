"""End-to-end (marker ``sandbox``): bad input never takes a serving SGLang server down (issue 14).

One sandbox host (``sglang-sbx-t14``, the sandbox's podman options, the simulator image loaded) serves the reference
deployment. Then:

- each bad input of :data:`SERVE_CASES` goes through ``playbooks/serve.yml``: the run fails naming the variable, and the
  unit file, both environment files, the container start time and the systemd invocation are unchanged, the server
  still answering ``/health`` (the newline and out-of-range GPU cases of the issue among them);
- the bad variables of :data:`PREFLIGHT_CASES` (ranges, types, choices, misspelled names) go through ONE
  ``playbooks/preflight.yml`` run (it lists every problem together); each is asserted on its own: named with its value,
  reason and fix, and nothing changed (the same state as above), the server still serving. 10 + 30 = 40 bad inputs;
- a configuration that fails readiness, and one whose restart itself fails (an ExecStartPre image pull with no
  registry), are rolled back: the previous files are restored and the old server serves again;
- recovering from a crash loop takes seconds, not ``podman stop``'s 110 s (``--init`` forwards SIGTERM).

The full tables of bad values (about 80 rows) are unit tests (tests/unit/plugins/plugin_utils/_sglang/test_quoting.py,
test_var_checks.py); this file shows on a real host that a refusal comes before any change.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from test_sglang_server_sandbox import ENV, HOST_IMAGE, REPO, SIM_IMAGE, on_host, podman, server_info

SANDBOX = pytest.mark.sandbox
HOST = "sglang-sbx-t14"
FILES = "/etc/systemd/system/sglang-server.service /etc/sglang/sglang-server.env /etc/sglang/sglang-server.secret.env"


@pytest.fixture(scope="module")
def host(sandbox_images):  # pylint: disable=unused-argument
    podman("rm", "-f", HOST, check=False)
    podman("volume", "rm", "-f", HOST + "-containers", check=False)
    podman("run", "-d", "--name", HOST, "--hostname", HOST, "--privileged", "--systemd=always",
           "-v", "%s-containers:/var/lib/containers" % HOST, HOST_IMAGE, "/sbin/init")
    try:
        deadline = time.time() + 60
        while on_host(HOST, "systemctl is-system-running").stdout.strip() not in ("running", "degraded"):
            if time.time() > deadline:
                pytest.fail("sandbox host %s did not boot" % HOST)
            time.sleep(1)
        save = subprocess.Popen(["podman", "save", SIM_IMAGE], env=ENV, stdout=subprocess.PIPE)
        load = subprocess.run(["podman", "exec", "-i", HOST, "podman", "load"], env=ENV, stdin=save.stdout,
                              capture_output=True, text=True, check=False)
        save.wait()
        assert load.returncode == 0, load.stderr
        yield HOST
    finally:
        podman("rm", "-f", "-t", "5", HOST, check=False)
        podman("volume", "rm", "-f", HOST + "-containers", check=False)


def inventory(tmp_path, overrides=None):
    """The sandbox group_vars (server, host roles, gpu_facts fixture roots) + fast readiness + overrides."""
    inv = tmp_path / "inventory"
    (inv / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    for name in ("sglang_server.yml", "sandbox.yml", "host_roles.yml"):
        shutil.copy(REPO / "inventories" / "sandbox" / "group_vars" / "all" / name, inv / "group_vars" / "all" / name)
    values = {"sglang_server_gpu_mode": "none", "sglang_server_ready_timeout": 60, "sglang_server_ready_delay": 1}
    values.update(overrides or {})
    (inv / "group_vars" / "all" / "zz_test.yml").write_text(json.dumps(values))
    (inv / "hosts.yml").write_text(json.dumps({"all": {"children": {"gpu_hosts": {"hosts": {HOST: None}, "vars": {
        "ansible_connection": "containers.podman.podman", "ansible_python_interpreter": "/usr/bin/python3"}}}}}))
    return inv


def playbook(inv, name, *extra, timeout=600):
    started = time.time()
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(inv), "playbooks/%s" % name] + list(extra),
                          cwd=str(REPO), env=dict(ENV, ANSIBLE_CACHE_PLUGIN="memory"), capture_output=True, text=True,
                          timeout=timeout, check=False)
    proc.elapsed = time.time() - started
    proc.flat = " ".join((proc.stdout + proc.stderr).split())
    return proc


def state(host):
    """What a refused run must not touch: file hashes, container start time, unit invocation and state."""
    files = on_host(host, "sha256sum " + FILES).stdout
    started = on_host(host, "podman inspect sglang-server --format '{{.State.StartedAt}}'").stdout.strip()
    unit = on_host(host, "systemctl show sglang-server.service -p InvocationID -p ActiveState -p NRestarts").stdout
    return files, started, unit


def healthy(host):
    return on_host(host, "curl -sf -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health").stdout.strip() == "200"


@pytest.fixture(scope="module")
def serving(host, tmp_path_factory):
    proc = playbook(inventory(tmp_path_factory.mktemp("base")), "serve.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert healthy(host)
    return host


# (id, -e JSON, variable the message names, words it holds). Each must be refused before any change.
SERVE_CASES = [
    ("model path newline", {"sglang_server_model_path": "/models/Qwen\nExecStartPre=/bin/touch /tmp/pwned"},
     "sglang_server_model_path", "contains a newline at position 12"),
    ("api key newline", {"sglang_server_api_key": "sk-FAKE-e2e\nHF_TOKEN=evil"}, "sglang_server_api_key", "<redacted: 25 characters, newline at 11>"),
    ("gpu index out of range", {"sglang_server_gpus": [0, 7]}, "sglang_server_gpus", "index 7 does not exist: gpu_facts found 4 GPU(s)"),
    ("floating image tag", {"sglang_server_image_force": False}, "sglang_server_image", "uses the floating tag :latest"),
    ("image with spaces", {"sglang_server_image": "localhost/sglang sim:v1"}, "sglang_server_image", "invalid image reference"),
    ("unknown version", {"sglang_server_version": "0.5.12", "sglang_server_image": "localhost/sglang-sim:v0.5.12"},
     "sglang_server_version", "not one of the SGLang versions this collection models"),
    ("unit environment newline", {"sglang_server_unit_environment": {"X": "1\nExecStartPre=/bin/true"}},
     "sglang_server_unit_environment", "newline"),
    ("engine bin with shell", {"sglang_server_engine_bin": "/usr/bin/podman;id"}, "sglang_server_engine_bin", "absolute path"),
    ("absent image never pulled", {"sglang_server_image": "localhost/sglang-absent:v1"}, "sglang_server_image",
     "not in the local podman storage"),
    ("tp 0", {"sglang_server_tp_size": 0}, "sglang_server_tp_size", "must be at least 1"),
]


@SANDBOX
@pytest.mark.parametrize("changes,variable,words", [c[1:] for c in SERVE_CASES], ids=[c[0] for c in SERVE_CASES])
def test_bad_input_refused_before_any_change(serving, tmp_path, changes, variable, words):
    before = state(serving)
    proc = playbook(inventory(tmp_path), "serve.yml", "-e", json.dumps(changes))
    assert proc.returncode != 0
    assert variable in proc.flat and words in proc.flat, proc.stdout[-3000:]
    assert "sk-FAKE-e2e" not in proc.stdout + proc.stderr
    assert state(serving) == before
    assert healthy(serving)
    assert on_host(serving, "test -e /tmp/pwned").returncode == 1


# (id, variable, value, words its message holds): all refused by preflight's variable check in ONE playbooks/preflight.yml run
# (it lists every problem together), each asserted on its own; misspelled names are refused with the closest valid name.
PREFLIGHT_CASES = [
    ("ready timeout -1", "sglang_server_ready_timeout", -1, "must be at least 1"),
    ("driver branch 570", "nvidia_driver_branch", "570", "whose driver floor is branch 580"),
    ("nccl extra env P2P", "nccl_extra_env", {"NCCL_P2P_DISABLE": "1"}, "belongs to the P2P policy (nccl_p2p)"),
    ("concurrency string", "sglang_benchmark_concurrency", "1,8", "must be a list (a string is not split into one)"),
    ("negative rate", "sglang_benchmark_request_rates", [-1], "every element must be a number > 0 (-1 is not)"),
    ("gate fast", "sglang_benchmark_min_output_throughput", "fast", "must be a number"),
    ("num prompts -3", "sglang_benchmark_num_prompts", -3, "must be at least 1"),
    ("backend vllm", "sglang_benchmark_backend", "vllm", "not one of sglang, openai, openai-chat"),
    ("port abc", "sglang_server_port", "abc", "must be a whole number"),
    ("mem fraction 1.5", "sglang_server_mem_fraction_static", 1.5, "must be in (0, 1)"),
    ("router port 0", "sglang_server_router_port", 0, "not a TCP port (1-65535)"),
    ("dist init port 99999", "sglang_server_dist_init_port", 99999, "not a TCP port (1-65535)"),
    ("ready delay 0", "sglang_server_ready_delay", 0, "must be at least 1"),
    ("max restarts -1", "sglang_server_ready_max_restarts", -1, "must be at least 0"),
    ("journal lines 0", "sglang_server_journal_lines", 0, "must be in [1, 10000]"),
    ("start timeout 0", "sglang_server_timeout_start_sec", 0, "must be at least 1"),
    ("restart sec -5", "sglang_server_restart_sec", -5, "must be at least 0"),
    ("engine lxc", "sglang_server_engine", "lxc", "not one of podman, docker"),
    ("image pull sometimes", "sglang_server_image_pull", "sometimes", "not one of missing, always, never"),
    ("ipc host maybe", "sglang_server_ipc_host", "maybe", "must be a boolean"),
    ("extra args string", "sglang_server_extra_args", "--enable-foo", "must be a list (a string is not split into one)"),
    ("driver reboot timeout 10", "nvidia_driver_reboot_timeout", 10, "must be at least 60"),
    ("iommu reboot timeout 5", "iommu_reboot_timeout", 5, "must be at least 60"),
    ("failed fraction 2", "sglang_benchmark_max_failed_fraction", 2, "must be in [0, 1]"),
    ("client processes 100", "sglang_benchmark_client_processes", 100, "must be in [1, 64]"),
    ("min accept length 0.5", "sglang_benchmark_min_accept_length", 0.5, "must be at least 1"),
    ("misspelled num_step", "sglang_server_speculative_num_step", 3, "Fix: did you mean sglang_server_speculative_num_steps?"),
    ("misspelled nccl policy", "nccl_p2p_polcy", "disable", "Fix: did you mean nccl_p2p_force (or nccl_p2p)?"),
    ("misspelled concurrency", "sglang_benchmark_concurency", [1, 8], "Fix: did you mean sglang_benchmark_concurrency?"),
    ("misspelled spec_tune target", "spec_tune_target_concurency", 32, "Fix: did you mean spec_tune_target_concurrency?"),
]


@pytest.fixture(scope="module")
def preflight_refusal(serving, tmp_path_factory):
    """One preflight.yml run with every bad variable of PREFLIGHT_CASES; the state of the server before and after."""
    before = state(serving)
    bad = dict((variable, value) for _id, variable, value, _words in PREFLIGHT_CASES)
    assert len(bad) == len(PREFLIGHT_CASES)  # one case per variable, or a later value would hide an earlier one
    proc = playbook(inventory(tmp_path_factory.mktemp("preflight")), "preflight.yml", "-e", json.dumps(bad))
    return proc, before, state(serving), healthy(serving)


@SANDBOX
def test_preflight_lists_every_bad_variable_in_one_refusal(preflight_refusal):
    proc = preflight_refusal[0]
    assert proc.returncode != 0
    assert "Preflight refused the variables of %s (%d problem(s)):" % (HOST, len(PREFLIGHT_CASES)) in proc.flat, proc.stdout[-3000:]
    assert "Could not match supplied host pattern" not in proc.stdout + proc.stderr


@SANDBOX
@pytest.mark.parametrize("variable,value,words", [c[1:] for c in PREFLIGHT_CASES], ids=[c[0] for c in PREFLIGHT_CASES])
def test_preflight_refuses_bad_variable_by_name_before_any_change(preflight_refusal, variable, value, words):
    proc, before, after, still_healthy = preflight_refusal
    # The message of this variable: "<variable>=<value as JSON>: <reason>. Fix: <fix>", up to the next problem; a misspelled
    # name is shown without its value ("<variable>: not a variable of this collection ...").
    start = max(proc.flat.find("%s=%s: " % (variable, json.dumps(value, sort_keys=True))),
                proc.flat.find("%s: not a variable of this collection" % variable))
    assert start >= 0, (variable, proc.stdout[-3000:])
    others = [max(proc.flat.find(" %s=" % c[1], start + 1), proc.flat.find(" %s: " % c[1], start + 1))
              for c in PREFLIGHT_CASES if c[1] != variable]
    message = proc.flat[start:min([i for i in others if i > start] or [start + 600])]
    assert words in message and "Fix:" in message, message
    assert after == before and still_healthy


# issue #23: benchmark inputs that passed preflight and were refused only in the benchmark stage (the workload), or after
# the whole sweep (the run id, 85 s on the sandbox, the measurement lost). Now preflight refuses both, together.
BENCHMARK_CASES = {"sglang_benchmark_workload": "/nonexistent/prompts/sharegpt.json", "sglang_benchmark_run_id": "../../etc"}


@SANDBOX
def test_preflight_refuses_bad_benchmark_inputs_before_any_change(serving, tmp_path):
    before = state(serving)
    proc = playbook(inventory(tmp_path), "preflight.yml", "-e", json.dumps(BENCHMARK_CASES))
    print("preflight refusal of the benchmark inputs after %.1f s" % proc.elapsed)
    assert proc.returncode != 0
    assert "Preflight refused the variables of %s (2 problem(s)):" % HOST in proc.flat, proc.stdout[-3000:]
    assert "workload '/nonexistent/prompts/sharegpt.json': no such file or directory on the controller" in proc.flat.replace("\\'", "'")
    assert "sglang_benchmark_run_id=" in proc.flat and "../../etc" in proc.flat and "(it is a directory name)" in proc.flat
    assert "TASK [llmops.sglang.sglang_server" not in proc.stdout   # refused in the preflight task, before the server's tasks
    assert state(serving) == before and healthy(serving)


@SANDBOX
def test_failed_readiness_rolls_back_to_the_serving_configuration(serving, tmp_path):
    before_files = state(serving)[0]
    env = {"SGLANG_SIM_VERSION": "0.5.9", "SGLANG_SIM_ARCH": "Qwen3_5MoeForConditionalGeneration", "SGLANG_SIM_GPU": "sm120",
           "SGLANG_SIM_LOAD_S": "1", "SGLANG_SIM_NEVER_READY": "1"}
    proc = playbook(inventory(tmp_path, {"sglang_server_extra_env": env, "sglang_server_ready_timeout": 10}), "serve.yml")
    assert proc.returncode != 0
    assert "is not ready: not ready within 10 s" in proc.flat, proc.stdout[-3000:]
    assert "Rolled back: the previous unit and environment files" in proc.flat and "serves. The new configuration was NOT applied" in proc.flat
    # The journal tail is printed once, in the failure message.
    assert proc.stdout.count("Last 50 journal lines") == 1
    assert state(serving)[0] == before_files
    assert healthy(serving) and server_info(serving)["max_running_requests"] == 64
    assert on_host(serving, "ls /etc/sglang /etc/systemd/system | grep -c '~$'").stdout.strip() == "0"  # backups removed


@SANDBOX
def test_failed_restart_rolls_back_to_the_serving_configuration(serving, tmp_path):
    # sglang_server_image_pull=always passes every check (the image is in the host's storage), but the new unit's
    # ExecStartPre "podman pull localhost/sglang-sim:..." has no registry to pull from: the restart itself fails,
    # before any readiness check, and the previous configuration must come back.
    before_files = state(serving)[0]
    proc = playbook(inventory(tmp_path, {"sglang_server_image_pull": "always"}), "serve.yml")
    assert proc.returncode != 0
    assert "could not be started with the new configuration: Restart the SGLang server failed:" in proc.flat, proc.stdout[-3000:]
    assert "Rolled back: the previous unit and environment files" in proc.flat and "serves. The new configuration was NOT applied" in proc.flat
    assert proc.stdout.count("Last 50 journal lines") == 1
    assert state(serving)[0] == before_files
    assert healthy(serving) and server_info(serving)["max_running_requests"] == 64
    assert on_host(serving, "ls /etc/sglang /etc/systemd/system | grep -c '~$'").stdout.strip() == "0"  # backups removed


@SANDBOX
def test_recovering_from_a_crash_loop_takes_seconds(serving, tmp_path):
    crash = {"sglang_server_extra_env": {"SGLANG_SIM_VERSION": "0.5.23", "SGLANG_SIM_LOAD_S": "1"}, "sglang_server_rollback": False,
             "sglang_server_ready_timeout": 120}
    proc = playbook(inventory(tmp_path / "crash", crash), "serve.yml")
    assert proc.returncode != 0 and "crash loop" in proc.flat, proc.stdout[-3000:]
    good = playbook(inventory(tmp_path / "good"), "serve.yml")
    assert good.returncode == 0, good.stdout[-3000:]
    assert healthy(serving)
    # Before --init, the handler's restart of the loading container waited out `podman stop -t 110`.
    assert good.elapsed < 100, good.elapsed


FAKE_KEY = "sk-FAKE-SECRET-e2e-4242"
FAKE_TOKEN = "hf_FAKE-TOKEN-e2e-4242"
#: Where a secret must never be (command, on the sandbox host).
MUST_NOT_HOLD = {
    "unit file": "cat /etc/systemd/system/sglang-server.service",
    "container env file": "cat /etc/sglang/sglang-server.env",
    "host /proc/*/cmdline (world-readable)": "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '",
    "ps axww": "ps axww -o args",
    "podman inspect Path/Args": "podman inspect sglang-server --format '{{.Path}} {{.Args}}'",
    "systemctl show ExecStart": "systemctl show sglang-server.service -p ExecStart",
}
#: Where it remains by design (docs/sglang_server.md, Secrets), recorded.
MAY_HOLD = {
    "secret EnvironmentFile (0600)": "cat /etc/sglang/sglang-server.secret.env",
    "podman inspect Config.Env (root)": "podman inspect sglang-server --format '{{.Config.Env}}'",
    "container storage config.json (root)": "grep -rl %s /var/lib/containers/storage/overlay-containers 2>/dev/null | head -3" % FAKE_KEY,
    "journal (SGLang server_args line)": "journalctl -u sglang-server.service --no-pager -o cat",
}


@SANDBOX
def test_secrets_stay_out_of_ansible_output_and_command_lines(serving, tmp_path):
    """serve, verify and benchmark at -vvv with known fake secrets; then grep every place of issue 14. Runs last: it
    leaves the server configured with the key."""
    reports = tmp_path / "reports"
    inv = inventory(tmp_path, {"sglang_server_api_key": FAKE_KEY, "sglang_server_hf_token": FAKE_TOKEN,
                               "sglang_benchmark_concurrency": [1], "sglang_benchmark_num_prompts": 2, "sglang_benchmark_warmup_requests": 0,
                               "sglang_benchmark_input_len": 32, "sglang_benchmark_output_len": 16, "sglang_benchmark_report_dir": str(reports),
                               "sglang_benchmark_plots": False, "sglang_benchmark_force": True})
    for name in ("serve.yml", "verify.yml", "benchmark.yml"):
        proc = playbook(inv, name, "-vvv")
        assert proc.returncode == 0, (name, proc.stdout[-3000:])
        for secret in (FAKE_KEY, FAKE_TOKEN):
            assert secret not in proc.stdout + proc.stderr, (name, secret)
    leaked = subprocess.run(["grep", "-rl", FAKE_KEY, str(reports)], capture_output=True, text=True, check=False).stdout
    assert leaked == "", leaked
    # The server really has the key: /v1/models without it is refused, with it answered.
    assert on_host(serving, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models").stdout.strip() == "401"
    assert on_host(serving, "curl -sf -H 'Authorization: Bearer %s' http://127.0.0.1:30000/v1/models" % FAKE_KEY).returncode == 0
    for place, command in MUST_NOT_HOLD.items():
        out = on_host(serving, command).stdout
        assert FAKE_KEY not in out and FAKE_TOKEN not in out, place
    remains = dict((place, FAKE_KEY in on_host(serving, command).stdout) for place, command in MAY_HOLD.items())
    print("secret remains in:", json.dumps(remains, indent=1))
    assert remains["secret EnvironmentFile (0600)"] and remains["podman inspect Config.Env (root)"]
    assert on_host(serving, "stat -c %a /etc/sglang/sglang-server.secret.env").stdout.strip() == "600"
