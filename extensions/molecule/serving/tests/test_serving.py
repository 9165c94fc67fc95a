"""testinfra checks of the serving path on a sandbox host after converge and idempotence (molecule verifier).

The instance ``llmops-molecule-serving`` is reached with testinfra's podman backend (``podman exec``); run with
CONTAINERS_CONF=tests/sandbox/containers.conf like molecule. The expected values come from the server description of
inventories/sandbox/group_vars/all/sglang_server.yml (the reference deployment: SGLang 0.5.9, tp 4, NEXTN with
1 step, top-k 1, 2 draft tokens), from SGLang's documented behaviour (docs/design/SGLANG_FACTS.md: NEXTN is an alias
that the server reports as EAGLE; the CLI flag names) and from the sweep of converge.yml (levels 1 and 2, each sending
max(num_prompts 2, 1 x concurrency) = 2 requests of 64 output tokens), not from the roles' own output.
"""
from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

INSTANCE = "llmops-molecule-serving"
testinfra_hosts = ["podman://%s" % INSTANCE]

UNIT = "/etc/systemd/system/sglang-server.service"
BASE = "http://127.0.0.1:30000"
SPECULATIVE_FLAGS = {"--speculative-algorithm": "NEXTN", "--speculative-num-steps": "1", "--speculative-eagle-topk": "1",
                     "--speculative-num-draft-tokens": "2"}


def _exec_start_argv(unit_text):
    lines = [line for line in unit_text.splitlines() if line.startswith("ExecStart=")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0][len("ExecStart="):])


def _flag_values(argv):
    return dict((flag, argv[i + 1] if i + 1 < len(argv) else None) for i, flag in enumerate(argv) if flag.startswith("--"))


@pytest.fixture(scope="module")
def server_info(host):
    return json.loads(host.check_output("curl -sf %s/server_info" % BASE))


@pytest.fixture(scope="module")
def report_dirs():
    ephemeral = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY")
    assert ephemeral, "MOLECULE_EPHEMERAL_DIRECTORY is not set: run these tests through molecule verify"
    root = Path(ephemeral) / "reports" / INSTANCE
    assert root.is_dir(), "no benchmark report under %s" % root
    return sorted(p for p in root.iterdir() if p.is_dir())


def test_unit_runs_the_simulator_with_the_speculative_flags(host):
    argv = _exec_start_argv(host.file(UNIT).content_string)
    assert argv[:3] == ["/usr/bin/podman", "run", "--rm"], argv[:3]
    image = argv.index("localhost/sglang-sim:latest")
    assert argv[image + 1:image + 4] == ["python3", "-m", "sglang.launch_server"]
    flags = _flag_values(argv[image + 4:])
    for flag, value in SPECULATIVE_FLAGS.items():
        assert flags.get(flag) == value, (flag, flags.get(flag))
    assert flags.get("--tp-size") == "4" and flags.get("--model-path") == "/models/Qwen3.5-122B-A10B"
    # the GPUs come through CDI (the stand-in toolkit's spec), not through device nodes
    assert "nvidia.com/gpu=all" in argv[:image]


def test_unit_is_enabled_and_running(host):
    svc = host.service("sglang-server")
    assert svc.is_enabled
    assert svc.is_running


def test_health_answers_200(host):
    assert host.check_output("curl -s -o /dev/null -w '%%{http_code}' %s/health" % BASE) == "200"


def test_server_reports_the_speculative_configuration(server_info):
    # SGLang rewrites NEXTN to EAGLE in its server args and reports EAGLE (SGLANG_FACTS.md, point 1)
    assert server_info["speculative_algorithm"] == "EAGLE"
    assert (server_info["speculative_num_steps"], server_info["speculative_eagle_topk"], server_info["speculative_num_draft_tokens"]) == (1, 1, 2)
    assert server_info["version"] == "0.5.9" and server_info["tp_size"] == 4


def test_secret_environment_file_is_private(host):
    secret = host.file("/etc/sglang/sglang-server.secret.env")
    assert secret.exists and secret.mode == 0o600


def test_one_benchmark_report_with_both_levels(report_dirs):
    # the idempotence converge found nothing changed and measured nothing: one report
    assert len(report_dirs) == 1, report_dirs
    report = report_dirs[0]
    records = [json.loads(line) for line in (report / "results.jsonl").read_text().splitlines() if line.strip()]
    assert sorted(r["max_concurrency"] for r in records) == [1, 2]
    for rec in records:
        assert rec["random_output_len"] == 64
        assert (rec["completed"], rec["failed"]) == (2, 0), rec
        # speculative decoding is on, so the built-in prompt set is sent (workload auto) and drafts are accepted
        assert rec["dataset_name"] == "builtin"
        assert rec["accept_length"] > 1.0
    assert (report / "summary.md").is_file() and (report / "summary.json").is_file()


def test_benchmark_state_records_the_report(host, report_dirs):
    state = json.loads(host.file("/var/lib/llmops/benchmark/sglang-server.json").content_string)
    assert state["run_id"] == report_dirs[0].name
