"""Clients written for SGLang's API, unchanged, against the SGLang simulator (a test double)."""
from __future__ import annotations

import http.client
import json
import re
import socket
import time
import urllib.request

import pytest

MTP_1_1_2 = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "2", "--mamba-scheduler-strategy", "extra_buffer"]


def test_openai_client_streaming_completion_and_chat(sglang_sim):
    openai = pytest.importorskip("openai")
    srv = sglang_sim(["--served-model-name", "qwen3.5-122b", "--api-key", "k"] + MTP_1_1_2, instant=True)
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0, timeout=30)
    assert [m.id for m in client.models.list().data] == ["qwen3.5-122b"]
    stream = client.completions.create(model="qwen3.5-122b", prompt="What is 15*23?", max_tokens=7, stream=True,
                                       stream_options={"include_usage": True})
    texts, finish, usage = [], [], None
    for chunk in stream:
        if chunk.choices:
            texts.append(chunk.choices[0].text)
            finish.append(chunk.choices[0].finish_reason)
        if chunk.usage is not None:
            usage = chunk.usage
    # 7 tokens with MTP: 1 + 2 + 2 + 2 -> 4 content chunks
    assert len(texts) == 4 and finish == [None, None, None, "length"]
    assert "".join(texts).strip()
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (6, 7, 13)
    chat = client.chat.completions.create(model="qwen3.5-122b", messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True)
    pieces = [c.choices[0].delta.content or "" for c in chat if c.choices]
    assert "".join(pieces).strip()
    bad = openai.OpenAI(base_url=srv.url + "/v1", api_key="wrong", max_retries=0, timeout=10)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_plain_urllib_streaming_generate_real_time(sglang_sim):
    # Real-time mode, MTP off: 30 tokens = 1 from prefill + 29 decode steps of t0 + k = 9.09 ms -> >= 0.26 s
    srv = sglang_sim(["--served-model-name", "m"], load_s=0)
    body = json.dumps({"input_ids": [1, 2, 3, 4], "stream": True, "sampling_params": {"max_new_tokens": 30, "ignore_eos": True}}).encode()
    req = urllib.request.Request(srv.url + "/generate", data=body, headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    arrivals, payloads = [], []
    with urllib.request.urlopen(req, timeout=30) as resp:
        for raw in resp:
            line = raw.decode().rstrip("\n")
            if line.startswith("data: "):
                arrivals.append(time.monotonic() - t0)
                payloads.append(line[6:])
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == list(range(1, 31))
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 30}
    assert arrivals[-1] - arrivals[0] >= 29 * 0.00909 * 0.9   # streamed progressively, not in one burst
    assert chunks[-1]["meta_info"]["e2e_latency"] >= 0.26


def test_http10_close_delimited_stream(sglang_sim):
    srv = sglang_sim([], instant=True)
    body = json.dumps({"input_ids": [1], "stream": True, "sampling_params": {"max_new_tokens": 3}}).encode()
    sock = socket.create_connection((srv.host, srv.port), timeout=10)
    sock.sendall(b"POST /generate HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    data = b""
    while True:
        part = sock.recv(65536)
        if not part:
            break
        data += part
    sock.close()
    head, _unused, payload = data.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower() and head.startswith(b"HTTP/1.1 200 OK")
    assert payload.count(b"data: ") == 4 and payload.endswith(b"data: [DONE]\n\n")


def test_keep_alive_and_chunked_request_body(sglang_sim):
    srv = sglang_sim([], instant=True)
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    for n in (2, 5):
        conn.request("POST", "/generate", body=json.dumps({"input_ids": [1], "sampling_params": {"max_new_tokens": n}}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert json.loads(resp.read())["meta_info"]["completion_tokens"] == n
    # a chunked request body (Transfer-Encoding: chunked) on the same connection
    conn.request("POST", "/generate", body=iter([b'{"input_ids": [1], ', b'"sampling_params": {"max_new_tokens": 4}}']),
                 headers={"Content-Type": "application/json"}, encode_chunked=True)
    assert json.loads(conn.getresponse().read())["meta_info"]["completion_tokens"] == 4
    conn.close()
    # all three went over one connection: one client port in the access lines of POST /generate
    ports = set(re.findall(r'127\.0\.0\.1:(\d+) - "POST /generate', srv.log_text()))
    assert len(ports) == 2   # ours + the warm-up line the server logs for itself


def test_gen_throughput_includes_idle_time(sglang_sim):
    # Real time, MTP off, a Decode line every 10 steps. The first line after 1 s of idleness divides the tokens
    # of its interval by >= 1 s (tiny value, like the recorded 0.95 before 135.04); a steady line is ~110 tok/s.
    srv = sglang_sim(["--decode-log-interval", "10"], load_s=0)

    def post(n):
        body = json.dumps({"input_ids": [1], "sampling_params": {"max_new_tokens": n}}).encode()
        with urllib.request.urlopen(urllib.request.Request(srv.url + "/generate", data=body), timeout=30) as resp:
            return resp.read()
    post(35)
    time.sleep(1.0)
    mark = len(srv.log_text())
    post(35)
    values = [float(v) for v in re.findall(r"gen throughput \(token/s\): (\d+\.\d{2})", srv.log_text()[mark:])]
    assert len(values) >= 3
    assert values[0] < 30.0
    assert max(values[1:]) > 50.0
