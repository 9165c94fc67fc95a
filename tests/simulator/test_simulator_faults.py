"""Fault knobs of the SGLang simulator (a test double): each one observed from the outside."""
from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

MTP_1_1_2 = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "2", "--mamba-scheduler-strategy", "extra_buffer"]
TS = r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?: TP\d+)?\] "


def post(url, body, timeout=30):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def stream_events(srv, path, body, read_timeout=5.0):
    """POST a streaming request with http.client; returns (events as str payloads, reason) where reason is
    "end" (stream closed normally) or "timeout" (no byte for ``read_timeout`` s)."""
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=read_timeout)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    events = []
    try:
        while True:
            line = resp.readline()
            if not line:
                return events, "end"
            line = line.decode().rstrip("\n")
            if line.startswith("data: "):
                events.append(line[6:])
    except socket.timeout:
        return events, "timeout"
    finally:
        conn.close()


def test_slow_start_answers_503_then_200(sglang_sim):
    srv = sglang_sim([], env={"SGLANG_SIM_SLOW_START_S": "1.2"}, wait_ready=False)
    srv.wait_for_log(r"Uvicorn running on http://127\.0\.0\.1:%d" % srv.port, timeout=10)
    t_up = time.monotonic()
    assert srv.status("/health") == 503
    assert srv.status("/health_generate") == 503
    assert srv.get_json("/server_info")["status"] == "starting"
    assert "fired up" not in srv.log_text()
    srv.wait_ready(timeout=10)
    assert time.monotonic() - t_up >= 1.0
    assert re.search(r"^" + TS + r"The server is fired up and ready to roll!$", srv.log_text(), re.M)


def test_never_ready(sglang_sim):
    srv = sglang_sim([], env={"SGLANG_SIM_NEVER_READY": "1"}, wait_ready=False)
    srv.wait_for_log(r"Uvicorn running on", timeout=10)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        assert srv.status("/health") == 503
        time.sleep(0.1)
    assert srv.returncode is None
    assert "fired up" not in srv.log_text()
    # a generation request hangs: the scheduler never runs
    events, reason = stream_events(srv, "/generate", {"input_ids": [1], "stream": True, "sampling_params": {"max_new_tokens": 4}}, read_timeout=0.8)
    assert (events, reason) == ([], "timeout")


def test_crash_after_n_requests(sglang_sim):
    srv = sglang_sim(["--tp", "2"], env={"SGLANG_SIM_CRASH_AFTER": "2"}, instant=True)
    for _unused in range(2):
        assert post(srv.url + "/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3}})[0] == 200
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        post(srv.url + "/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3}}, timeout=5)
    assert srv.wait_exit(10) == 137     # 128 + SIGKILL: what SGLang's self-SIGKILL looks like to a shell, podman, systemd
    log = srv.log_text()
    assert re.search(r"^" + TS.replace("(?: TP\\d+)?", " TP0") + r"Scheduler hit an exception: Traceback \(most recent call last\):$", log, re.M)
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in log
    assert log.rstrip().endswith("Received sigquit from a child process. It usually means the child failed.")
    assert srv.status("/health") == 0   # nothing listens any more


def test_crash_ends_the_process_when_it_is_pid_1(tmp_path):
    """In a container the server is PID 1 of its PID namespace, where the kernel drops a self-sent SIGKILL; the crash
    fault must still end it (issue 14: SGLANG_SIM_CRASH_AFTER did nothing on the sandbox). ``unshare --pid --fork``
    makes the simulator PID 1 of a new namespace, as podman does, without a container."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to start the simulator as PID 1 of a new PID namespace")
    from sglang_sim.harness import SANDBOX_DIR, SHIM_DIR, free_port
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SHIM_DIR, SANDBOX_DIR]), SGLANG_SIM_INSTANT="1", SGLANG_SIM_CRASH_AFTER="1")
    log_path = tmp_path / "pid1.log"
    with open(str(log_path), "wb") as log:
        proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-m", "sglang.launch_server",
                                 "--model-path", "/models/Qwen3.5-122B-A10B", "--host", "127.0.0.1", "--port", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        url = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 20
        while "fired up and ready" not in log_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-2000:]
            time.sleep(0.05)
        assert "Started server process [1]" in log_path.read_text()   # it really is PID 1 of its namespace
        assert post(url + "/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3}})[0] == 200
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            post(url + "/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3}}, timeout=5)
        assert proc.wait(10) == 137   # unshare passes on its child's exit status
        assert "SGLANG_SIM_CRASH_AFTER=1, request 2 arrived" in log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_error_chunk_mid_stream(sglang_sim):
    srv = sglang_sim([], env={"SGLANG_SIM_ERROR_AFTER_CHUNKS": "3"}, instant=True)
    events, reason = stream_events(srv, "/generate", {"input_ids": [1], "stream": True, "sampling_params": {"max_new_tokens": 10}})
    assert reason == "end"
    assert len(events) == 5 and events[-1] == "[DONE]"
    assert [json.loads(e)["meta_info"]["completion_tokens"] for e in events[:3]] == [1, 2, 3]
    err = json.loads(events[3])
    assert list(err) == ["error"] and "SGLANG_SIM_ERROR_AFTER_CHUNKS=3" in err["error"]["message"]
    # OpenAI route: the error object SGLang's OpenAI layer sends
    events, _unused = stream_events(srv, "/v1/completions", {"prompt": "x", "max_tokens": 10, "stream": True})
    err = json.loads(events[-2])["error"]
    assert err["object"] == "error" and err["code"] == 400 and events[-1] == "[DONE]"
    # non-stream: HTTP 400 with the message
    status, body = post(srv.url + "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 10}})
    assert status == 400 and "SGLANG_SIM_ERROR_AFTER_CHUNKS" in json.loads(body)["error"]["message"]
    # requests shorter than the fault point are unaffected
    status, body = post(srv.url + "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 3}})
    assert status == 200 and json.loads(body)["meta_info"]["completion_tokens"] == 3
    assert "[http_server] Error: Simulated fault" in srv.log_text()


def test_stalled_stream_forever_and_bounded(sglang_sim):
    srv = sglang_sim([], env={"SGLANG_SIM_STALL_AFTER_CHUNKS": "2"}, instant=True)
    events, reason = stream_events(srv, "/generate", {"input_ids": [1], "stream": True, "sampling_params": {"max_new_tokens": 10}},
                                   read_timeout=1.0)
    assert reason == "timeout" and len(events) == 2
    # other requests keep flowing while one stream is stalled
    srv2 = sglang_sim([], env={"SGLANG_SIM_STALL_AFTER_CHUNKS": "2", "SGLANG_SIM_STALL_S": "0.6"}, instant=True)
    conn = http.client.HTTPConnection(srv2.host, srv2.port, timeout=5)
    conn.request("POST", "/generate", body=json.dumps({"input_ids": [1], "stream": True, "sampling_params": {"max_new_tokens": 6}}))
    resp = conn.getresponse()
    stamps = []
    while True:
        line = resp.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            stamps.append(time.monotonic())
    conn.close()
    assert len(stamps) == 7   # 6 token chunks + [DONE]
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert gaps[1] >= 0.5 and max(gaps[:1] + gaps[2:]) < 0.3, gaps


def test_broken_draft_accept_length_1(sglang_sim, fixtures_dir):
    recorded = (fixtures_dir / "sglang" / "qwen35-122b-mtp-broken-draft-v0.5.9.log").read_text()
    rec = re.findall(r"accept len: (\d+\.\d{2}), accept rate: (\d+\.\d{2})", recorded)
    assert ("1.00", "0.50") in rec
    srv = sglang_sim(["--tp", "4", "--decode-log-interval", "5", "--max-running-requests", "8"] + MTP_1_1_2,
                     env={"SGLANG_SIM_BROKEN_DRAFT": "1", "SGLANG_ENABLE_SPEC_V2": "1"}, instant=True)
    status, body = post(srv.url + "/generate", {"input_ids": [1] * 4, "sampling_params": {"max_new_tokens": 21}})
    meta = json.loads(body)["meta_info"]
    # 21 tokens = 1 (prefill) + 20 verify steps x (1 bonus + 0 drafts)
    assert (meta["spec_verify_ct"], meta["spec_accept_token_num"], meta["spec_draft_token_num"]) == (20, 0, 20)
    assert meta["spec_accept_length"] == 1.05 and meta["spec_accept_rate"] == 0.0
    got = re.findall(r"accept len: (\d+\.\d{2}), accept rate: (\d+\.\d{2})", srv.log_text())
    assert got and set(got) == {("1.00", "0.50")}    # 0.5.9: rate = 1.00 / 2 draft tokens, as recorded
    assert srv.get_json("/server_info")["internal_states"][0]["avg_spec_accept_length"] == 1.0
    # the draft still loads: the log cannot tell a broken draft from a working one, only accept len can
    assert "type=Qwen3_5ForCausalLMMTP" in srv.log_text()


def test_partial_acceptance_probability(sglang_sim):
    # p = 0.5, 3 draft steps: expected accept length 1 + 0.5 + 0.25 + 0.125 = 1.875
    srv = sglang_sim(["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                      "--speculative-num-draft-tokens", "4", "--mamba-scheduler-strategy", "extra_buffer"],
                     env={"SGLANG_SIM_ACCEPT_P": "0.5", "SGLANG_SIM_SEED": "7"}, instant=True)
    verify = tokens = 0
    for _unused in range(4):
        meta = json.loads(post(srv.url + "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 1000}})[1])["meta_info"]
        verify += meta["spec_verify_ct"]
        tokens += meta["completion_tokens"] - 1
    # ~2100 verify steps; the standard deviation of one step's accept length is ~0.93, so of the mean ~0.02
    assert 1.80 <= tokens / float(verify) <= 1.95


def test_client_disconnect_aborts_request(sglang_sim):
    srv = sglang_sim(["--decode-log-interval", "5", "--enable-metrics"], load_s=0)
    sock = socket.create_connection((srv.host, srv.port))
    body = json.dumps({"input_ids": [1], "stream": True, "sampling_params": {"max_new_tokens": 100000}}).encode()
    sock.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    got = b""
    sock.settimeout(5)
    while b"data: " not in got:
        got += sock.recv(65536)
    sock.close()
    time.sleep(0.2)
    status, out = post(srv.url + "/generate", {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 12}})
    assert status == 200
    tail = srv.log_text()[srv.log_text().index("#new-token: 3,"):]
    assert re.findall(r"Decode batch, #running-req: (\d+),", tail) and set(re.findall(r"Decode batch, #running-req: (\d+),", tail)) == {"1"}
    metrics = urllib.request.urlopen(srv.url + "/metrics", timeout=10).read().decode()
    assert re.search(r'^sglang:num_aborted_requests_total\{model_name="/models/Qwen3\.5-122B-A10B"\} 1\.0$', metrics, re.M)
    assert re.search(r'^sglang:num_requests_total\{model_name="/models/Qwen3\.5-122B-A10B"\} 2\.0$', metrics, re.M)


def test_sglang_simulate_acc_len_env(sglang_sim):
    # SGLang's SGLANG_SIMULATE_ACC_LEN=2.8 with 3/1/4: each verify step accepts 1 or 2 drafts, mean accept length 2.8
    srv = sglang_sim(["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                      "--speculative-num-draft-tokens", "4", "--mamba-scheduler-strategy", "extra_buffer"],
                     env={"SGLANG_SIMULATE_ACC_LEN": "2.8"}, instant=True)
    meta = json.loads(post(srv.url + "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 2801}})[1])["meta_info"]
    # 2800 decode tokens at 2.8 per step -> ~1000 verify steps; each step accepts 1 or 2 drafts (std 0.4 -> mean std ~0.013)
    assert 2.75 <= (meta["completion_tokens"] - 1) / float(meta["spec_verify_ct"]) <= 2.85
