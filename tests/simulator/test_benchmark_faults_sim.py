"""The fault suite (issue 14) for serving_benchmark against the SGLang simulator (a test double) on loopback.

Each fault must end in a clear failure that names its cause, keep the records of what was measured, and wait no
longer than the configured timeouts (stall_timeout, timeout). Already covered elsewhere (not repeated here):
crash mid-sweep (SGLANG_SIM_CRASH_AFTER) and its playbook report, error chunks, a stalled stream
(test_serving_benchmark_sim.py); speculative_check never ready, broken draft, stall and error chunk
(test_speculative_check_sim.py); the crash as PID 1 (test_simulator_faults.py); systemd's restart after a crash
(tests/sandbox_e2e/test_sglang_server_sandbox.py).
"""
from __future__ import annotations

import json
import re
import signal
import threading
import time

import pytest

from ansible_collections.llmops.sglang.plugins.modules import serving_benchmark

# ansible-core 2.19 (pinned in requirements.txt) injects module args this way.
from ansible.module_utils.testing import patch_module_args

pytestmark = pytest.mark.simulator

ON_ARGS = ["--tp", "4", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1",
           "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2", "--max-running-requests", "64"]


def run_module(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            serving_benchmark.main()
    return json.loads(capsys.readouterr().out)


def test_never_ready_server_is_refused_before_any_request(sglang_sim, capsys):
    srv = sglang_sim(ON_ARGS, env={"SGLANG_SIM_NEVER_READY": "1"}, wait_ready=False)
    srv.wait_for_log(r"Uvicorn running", timeout=15)
    t0 = time.monotonic()
    out = run_module(capsys, {"url": srv.url, "max_concurrency": [1, 4], "num_prompts": 4, "input_len": 16, "output_len": 16,
                              "warmup_requests": 0, "stall_timeout": 1.0, "timeout": 30})
    assert time.monotonic() - t0 < 3.0
    assert out["failed"] is True and out["status"] == 503
    assert out["msg"].startswith("serving_benchmark: the server at %s is not ready: GET /health answered 503" % srv.url), out["msg"]
    assert out["records"] == []
    assert "POST /generate" not in srv.log_text()     # nothing was sent


def test_never_ready_server_without_the_health_check_stalls_within_the_stall_timeout(sglang_sim, capsys):
    """server_info: false skips /server_info and /health: the requests themselves find the hung scheduler, as stalls."""
    srv = sglang_sim(ON_ARGS, env={"SGLANG_SIM_NEVER_READY": "1"}, wait_ready=False)
    srv.wait_for_log(r"Uvicorn running", timeout=15)
    t0 = time.monotonic()
    out = run_module(capsys, {"url": srv.url, "max_concurrency": [1, 4], "num_prompts": 4, "input_len": 16, "output_len": 16,
                              "warmup_requests": 0, "stall_timeout": 1.0, "timeout": 30, "server_info": False})
    waited = time.monotonic() - t0
    assert out["failed"] is True
    # the scheduler never runs: no byte comes back, so each request is a stall; a wave of stalls ends each level
    assert out["first_errors"][0]["error"].startswith("stream stalled: no data for 1."), out["first_errors"]
    assert [r["completed"] for r in out["records"]] == [0, 0]
    # level 1: two stalls (a wave at concurrency 1 is 2 requests), level 2: one wave of 4 in parallel -> about 3 stall periods
    assert waited < 8.0, waited


def test_broken_draft_fails_the_accept_length_gate_naming_it(sglang_sim, capsys):
    srv = sglang_sim(ON_ARGS, env={"SGLANG_SIM_BROKEN_DRAFT": "1"}, instant=True)
    out = run_module(capsys, {"url": srv.url, "max_concurrency": [2], "num_prompts": 4, "input_len": 16, "output_len": 33,
                              "warmup_requests": 0, "gates": {"min_accept_length": 1.2}})
    assert out["failed"] is True and out["failed_requests"] == 0
    # every request: 33 tokens = 1 (prefill) + 32 verify steps accepting no draft; SGLang's meta_info accept length is
    # completion_tokens / spec_verify_ct = 33 / 32 = 1.03125
    assert out["records"][0]["accept_length"] == pytest.approx(33 / 32.0, abs=1e-6)
    assert out["msg"] == ("serving_benchmark: 1 gate(s) missed: level 1 (max_concurrency=2): accept_length 1.03 is below the gate "
                          "1.20."), out["msg"]


def _signal_when(srv, pattern, sig, deadline_s=30.0):
    """Thread: send ``sig`` to the simulator once its log matches ``pattern`` (polled every 50 ms)."""
    rx = re.compile(pattern, re.M)
    fired = threading.Event()

    def watch():
        end = time.monotonic() + deadline_s
        while time.monotonic() < end and srv.proc.poll() is None:
            if rx.search(srv.log_text()):
                srv.proc.send_signal(sig)
                fired.set()
                return
            time.sleep(0.05)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, fired


@pytest.mark.parametrize("sig,name", [(signal.SIGTERM, "stop"), (signal.SIGKILL, "kill -9")])
def test_server_stopped_mid_benchmark_fails_fast_with_partial_records(sglang_sim, capsys, sig, name):
    """The server goes away while level 2 (4 streams) runs: SIGTERM is SGLang's graceful shutdown, which closes the
    connections; SIGKILL leaves it to the kernel. Level 1 is kept, level 2's requests fail as broken or refused
    connections, and nothing waits out stall_timeout (30 s) or timeout (60 s)."""
    srv = sglang_sim(ON_ARGS + ["--decode-log-interval", "10"], load_s=0)
    # level 2 is the only one with more than one running request: its first Decode line fires the signal
    thread, fired = _signal_when(srv, r"Decode batch, #running-req: [2-4],", sig)
    t0 = time.monotonic()
    out = run_module(capsys, {"url": srv.url, "max_concurrency": [1, 4], "num_prompts": 1, "input_len": 16, "output_len": 200,
                              "prompts_per_concurrency": 1, "warmup_requests": 0, "stall_timeout": 30, "timeout": 60,
                              "server_info": False})
    waited = time.monotonic() - t0
    thread.join(5)
    assert fired.is_set(), srv.log_tail()
    assert srv.wait_exit(10) == (0 if sig == signal.SIGTERM else -9)
    assert out["failed"] is True, name
    recs = out["records"]
    # level 1 (1 prompt, concurrency 1) finished before the signal; level 2 lost its 4 streams
    assert [(r["max_concurrency"], r["completed"], r["failed"]) for r in recs] == [(1, 1, 0), (4, 0, 4)], recs
    # the streams that were running break mid-answer; the message says so and counts them
    assert [(e["level"], e["count"]) for e in out["first_errors"]] == [(2, 4)], out["first_errors"]
    assert re.match(r"stream ended before the finish chunk after \d+ tokens$", out["first_errors"][0]["error"]), out["first_errors"]
    # level 1: 1 prompt (num_prompts 1), level 2: 4 (prompts_per_concurrency 1 x 4); 200 tokens at ~135 tok/s is ~1.5 s for
    # level 1; level 2 ends when the server goes, not after 30 s of stall
    assert waited < 10.0, waited
