"""speculative_check against the SGLang simulator (a test double) on loopback, for every supported log version.

The module runs in-process (patch_module_args) with the real fetch_url, and reads the simulator's log file
(log_source: file), so the HTTP contract, the log formats of each version and the verdict logic are exercised
end to end. The simulator runs in instant mode (same token accounting, no sleeping), so throughput numbers are
not asserted here; benchmarks/ measures those.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest


from ansible_collections.llmops.sglang.plugins.modules import speculative_check

# ansible-core 2.19 (pinned in requirements.txt) injects module args this way.
from ansible.module_utils.testing import patch_module_args


VERSIONS = ("0.4.10", "0.5.4", "0.5.9", "0.5.10", "0.5.14", "0.5.23")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: The reference deployment: Qwen3.5-122B-A10B, tp 4, NEXTN with one draft token, 64 running requests.
MTP_ARGS = ["--tp", "4", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "2", "--max-running-requests", "64", "--attention-backend", "triton",
            "--enable-metrics", "--served-model-name", "qwen3.5-122b"]
EXPECTED = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 1, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 2, "tp_size": 4, "attention_backend": "triton", "max_running_requests": 64,
            "model_path": "/models/Qwen3.5-122B-A10B"}


def run_module(capsys, args):
    full = dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)
    with patch_module_args(full):
        with pytest.raises(SystemExit) as exc:
            speculative_check.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def spec_env(version, **extra):
    env = {"SGLANG_SIM_VERSION": version}
    if version in ("0.5.9", "0.5.10"):
        # hybrid model + spec: extra_buffer + spec v2, as the renderer does (0.5.10 refuses no_buffer)
        env["SGLANG_ENABLE_SPEC_V2"] = "1"
    env.update(extra)
    return env


def spec_args(version):
    if version in ("0.5.4", "0.5.9", "0.5.10"):
        return MTP_ARGS + ["--mamba-scheduler-strategy", "extra_buffer"]
    return list(MTP_ARGS)


@pytest.mark.parametrize("version", VERSIONS)
def test_mtp_on_passes(sglang_sim, capsys, version):
    srv = sglang_sim(spec_args(version), env=spec_env(version), instant=True)
    code, res = run_module(capsys, {"url": srv.url, "log_source": "file", "log_path": srv.log_path, "expected": EXPECTED,
                                    "ready_timeout": 10, "probe_max_new_tokens": 256})
    assert code == 0, res.get("msg")
    assert res["passed"] is True
    assert {k: v["status"] for k, v in res["verdicts"].items()} == {
        "ready": "pass", "configured": "pass", "loaded": "pass", "accepting": "pass", "as_intended": "pass"}
    # the simulator's defaults reproduce the seed: every draft token accepted, accept length 2.00 with one draft token
    assert res["accept_length"] == pytest.approx(2.0, abs=0.01)
    assert res["accept_rate"] == pytest.approx(1.0, abs=0.01)
    assert res["num_draft_tokens"] == 2
    assert res["draft_class"] == "Qwen3_5ForCausalLMMTP"
    assert sorted(res["draft_mem_gb"]) == ["TP0", "TP1", "TP2", "TP3"]
    assert res["speculation"] == "on"
    assert res["sources"]["logs"]["decode_lines"] >= 2
    assert res["verdicts"]["accepting"]["evidence"]["sources"]["logs"] == pytest.approx(2.0, abs=0.01)
    assert res["ansible_facts"]["llmops_speculative"]["algorithm"] == "EAGLE"  # NEXTN is reported as EAGLE


@pytest.mark.parametrize("version", VERSIONS)
def test_broken_draft_fails(sglang_sim, capsys, version):
    srv = sglang_sim(spec_args(version), env=spec_env(version, SGLANG_SIM_BROKEN_DRAFT="1"), instant=True)
    code, res = run_module(capsys, {"url": srv.url, "log_source": "file", "log_path": srv.log_path, "expected": EXPECTED,
                                    "ready_timeout": 10})
    assert code == 1
    assert res["failed_verdicts"] == ["accepting"]
    acc = res["verdicts"]["accepting"]
    assert acc["reason"].startswith("draft loaded but never accepted: accept length 1.00")
    assert len(acc["evidence"]["causes"]) == 5
    assert res["verdicts"]["loaded"]["status"] == "pass"  # the draft class did load: that is the point of the verdict
    assert res["accept_rate"] == pytest.approx(0.0, abs=0.01)  # the probe: completion_tokens / spec_verify_ct = 256 / 255
    assert "accepting: draft loaded but never accepted" in res["msg"]


@pytest.mark.parametrize("version", VERSIONS)
def test_expected_configuration_differs(sglang_sim, capsys, version):
    srv = sglang_sim(spec_args(version), env=spec_env(version), instant=True)
    expected = dict(EXPECTED, speculative_num_steps=3, speculative_num_draft_tokens=4, max_running_requests=128)
    code, res = run_module(capsys, {"url": srv.url, "log_source": "file", "log_path": srv.log_path, "expected": expected,
                                    "ready_timeout": 10})
    assert code == 1
    assert res["failed_verdicts"] == ["as_intended"]
    names = [d["name"] for d in res["verdicts"]["as_intended"]["evidence"]["differences"]]
    assert names == ["max_running_requests", "speculative_num_draft_tokens", "speculative_num_steps"]
    assert "speculative_num_steps expected 3, running 1" in res["msg"]
    assert "max_running_requests expected 128, running 64" in res["msg"]


@pytest.mark.parametrize("version", VERSIONS)
def test_never_ready_fails_within_its_timeout(sglang_sim, capsys, version):
    srv = sglang_sim(spec_args(version), env=spec_env(version, SGLANG_SIM_NEVER_READY="1"), instant=True, wait_ready=False)
    srv.wait_for_log(r"Uvicorn running", timeout=15)
    start = time.monotonic()
    code, res = run_module(capsys, {"url": srv.url, "log_source": "file", "log_path": srv.log_path, "ready_timeout": 2,
                                    "ready_interval": 0.5, "timeout": 2})
    elapsed = time.monotonic() - start
    assert code == 1
    assert elapsed < 6, "the readiness wait must end near ready_timeout (2 s), took %.1f s" % elapsed
    ready = res["verdicts"]["ready"]
    assert ready["status"] == "fail"
    assert "did not answer 200 within 2 s" in ready["reason"]
    assert ready["evidence"]["status_counts"].get("503", 0) >= 2
    assert ready["evidence"]["log_tail"]  # the last log lines are part of the evidence
    assert res["failed_verdicts"][0] == "ready"


def test_stalled_generation_is_named_a_stall_within_the_timeout(sglang_sim, capsys):
    """Issue 14: a stream that stalls during verify ended in "no accept length ... (enable probe, metrics or logs)"."""
    srv = sglang_sim(spec_args("0.5.9"), env=spec_env("0.5.9", SGLANG_SIM_STALL_AFTER_CHUNKS="3"), instant=True)
    start = time.monotonic()
    code, res = run_module(capsys, {"url": srv.url, "log_source": "file", "log_path": srv.log_path, "ready_timeout": 5, "timeout": 2})
    elapsed = time.monotonic() - start
    assert code == 1
    acc = res["verdicts"]["accepting"]
    assert acc["status"] == "fail" and acc["evidence"]["probe_failure"] == "stall"
    assert acc["reason"].startswith("generation stalled: the probe /generate (256 tokens) got no answer within timeout=2 s "
                                    "although /health answered 200"), acc["reason"]
    assert "no accept length" not in res["msg"] and "accepting: generation stalled" in res["msg"]
    assert res["verdicts"]["ready"]["status"] == "pass"
    # the probe waits out timeout (2 s), the readiness poll, metrics and log reads add little: never the 60 s default
    assert 2.0 <= elapsed < 8, elapsed


def test_probe_error_chunk_names_the_error(sglang_sim, capsys):
    srv = sglang_sim(spec_args("0.5.9"), env=spec_env("0.5.9", SGLANG_SIM_ERROR_AFTER_CHUNKS="3"), instant=True)
    code, res = run_module(capsys, {"url": srv.url, "metrics": False, "ready_timeout": 5, "timeout": 5})
    assert code == 1
    acc = res["verdicts"]["accepting"]
    assert acc["evidence"]["probe_failure"] == "error"
    # the non-stream /generate answers HTTP 400 with SGLang's error object (the simulator's fault text)
    assert acc["reason"].startswith("the probe /generate failed: probe generation: %s/generate answered HTTP 400" % srv.url), acc["reason"]
    assert "SGLANG_SIM_ERROR_AFTER_CHUNKS=3" in acc["reason"]


def test_no_speculation_passes_when_not_expected(sglang_sim, capsys):
    srv = sglang_sim(["--tp", "4", "--max-running-requests", "64", "--attention-backend", "triton"],
                     env={"SGLANG_SIM_VERSION": "0.5.9"}, instant=True)
    code, res = run_module(capsys, {"url": srv.url, "log_source": "file", "log_path": srv.log_path, "expect_speculative": False,
                                    "expected": {"tp_size": 4, "speculative_algorithm": None}, "ready_timeout": 10})
    assert code == 0, res.get("msg")
    assert res["speculation"] == "off"
    assert res["verdicts"]["configured"]["reason"].startswith("speculation off, as expected")
    assert res["accept_length"] is None and res["draft_class"] is None


def test_radix_conflict_refusal_0510_is_reported(sglang_sim, capsys):
    """0.5.10 refuses spec + radix cache under mamba no_buffer; the readiness failure names the refusal and its fix."""
    srv = sglang_sim(MTP_ARGS + ["--mamba-scheduler-strategy", "no_buffer"], env={"SGLANG_SIM_VERSION": "0.5.10"},
                     instant=True, wait_ready=False)
    srv.wait_exit(timeout=15)
    code, res = run_module(capsys, {"url": srv.url, "log_source": "file", "log_path": srv.log_path, "ready_timeout": 1,
                                    "ready_interval": 0.5, "timeout": 1})
    assert code == 1
    assert res["refusals"][0]["key"] == "radix_cache_conflict"
    assert "not compatible with radix cache" in res["verdicts"]["ready"]["reason"]
    assert res["verdicts"]["ready"]["evidence"]["status_counts"] == {"-1": res["sources"]["ready"]["attempts"].__len__()}


def test_verify_playbook_against_the_simulator(sglang_sim, tmp_path):
    """playbooks/verify.yml on localhost (local connection) with the simulator's log file: the play passes and prints the verdicts."""
    srv = sglang_sim(spec_args("0.5.9"), env=spec_env("0.5.9"), instant=True)
    port = srv.url.rsplit(":", 1)[1]
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    gpu_hosts:\n      hosts:\n        simhost:\n"
                         "          ansible_connection: local\n          ansible_python_interpreter: %s\n" % sys.executable)
    extra = {
        "sglang_server_port": int(port), "sglang_server_speculative_algorithm": "NEXTN",
        "sglang_server_expected": EXPECTED,
        "speculative_check_log_source": "file", "speculative_check_log_path": srv.log_path,
        "speculative_check_ready_timeout": 10,
    }
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory), "playbooks/verify.yml",
           "-e", json.dumps(extra)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "simhost: PASS (SGLang 0.5.9, speculation on)" in proc.stdout
    assert "accepting: pass: accept length 2.00 from the probe" in proc.stdout

    # the same play fails, naming the argument, when the inventory says 3 steps
    extra["sglang_server_expected"] = dict(EXPECTED, speculative_num_steps=3, speculative_num_draft_tokens=4)
    cmd[-1] = json.dumps(extra)
    proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=240, check=False)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "speculative_num_steps expected 3, running 1" in proc.stdout
