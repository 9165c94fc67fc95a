"""bench_client: HTTP/1.1 framing, SSE timing and fault handling, against scripted loopback servers."""
from __future__ import annotations

import datetime
import json
import random
import socket
import ssl
import socketserver
import threading
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult


def _chunked(parts):
    out = b""
    for p in parts:
        out += b"%x\r\n" % len(p) + p + b"\r\n"
    return out + b"0\r\n\r\n"


class _Scripted(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def _serve(script, tls=None):
    """Start a loopback server; ``script(sock)`` writes the response after the request was read.
    ``tls``: an ``ssl.SSLContext`` (server side) to speak HTTPS. Returns (server, url, seen)."""
    seen = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            sock = self.request
            try:
                if tls is not None:
                    sock = tls.wrap_socket(sock, server_side=True)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += sock.recv(65536)
                head, _s, body = data.partition(b"\r\n\r\n")
                clen = [int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0]
                while len(body) < clen:
                    body += sock.recv(65536)
                seen.append((head, json.loads(body)))
                script(sock)
            except OSError:      # ssl.SSLError too: a client that refused our certificate
                pass

    srv = _Scripted(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, "%s://127.0.0.1:%d" % ("https" if tls is not None else "http", srv.server_address[1]), seen


def _gen_chunk(ct, finish=None, extra=None):
    meta = {"id": "r", "finish_reason": finish, "prompt_tokens": 8, "completion_tokens": ct}
    meta.update(extra or {})
    return b"data: " + json.dumps({"text": "x" * ct, "output_ids": list(range(ct)), "meta_info": meta}).encode() + b"\n\n"


FINAL = {"type": "length", "length": 4}


def _prompts(n=1, out=4):
    return bc.make_prompts(n, 8, out, seed=3)


@pytest.fixture
def server():
    started = []

    def start(script, tls=None):
        srv, url, seen = _serve(script, tls)
        started.append(srv)
        return url, seen

    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
def test_framings_give_same_result(server, framing):
    events = [_gen_chunk(1), _gen_chunk(3), _gen_chunk(4, FINAL, {"spec_verify_ct": 2}), b"data: [DONE]\n\n"]
    body = b"".join(events)

    def script(sock):
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        if framing == "chunked":
            sock.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
            for e in events:   # one HTTP chunk per event, sent separately
                sock.sendall(_chunked([e])[:-5])
                time.sleep(0.01)
            sock.sendall(b"0\r\n\r\n")
        elif framing == "length":
            sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        else:
            sock.sendall(head + b"\r\n")
            for e in events:
                sock.sendall(e)
                time.sleep(0.01)
            sock.shutdown(socket.SHUT_WR)

    url, seen = server(script)
    res, dur, _w = bc.run_benchmark(bc.Target(url, timeout_s=10, stall_timeout_s=5), _prompts())
    r = res[0]
    assert r.success, r.error
    assert r.output_len == 4
    assert r.spec_verify_ct == 2
    assert r.prompt_len == 8
    assert len(r.itl) == 3          # chunk 2 carried 2 tokens -> 2 samples, chunk 3 one
    assert r.itl[0] == r.itl[1]
    assert 0 < r.ttft <= r.latency <= dur
    head, req = seen[0]
    assert head.startswith(b"POST /generate HTTP/1.1")
    assert req["sampling_params"] == {"temperature": 0.0, "max_new_tokens": 4, "ignore_eos": True}
    assert req["stream"] is True and len(req["input_ids"]) == 8


def test_itl_split_with_controlled_clock(monkeypatch, fixtures_dir):
    """Replay the recorded MTP stream with known arrival times: chunk 1 at 0.100 s (1 token),
    chunk 2 at 0.130 s (+2), chunk 3 at 0.170 s (+2), chunk 4 at 0.180 s (+1), [DONE] at 0.181 s."""
    payloads = (fixtures_dir / "sglang" / "generate-stream-mtp.sse").read_bytes().split(b"\n\n")
    events = [p + b"\n\n" for p in payloads if p]

    class Fut(object):
        def __init__(self):
            self.d = False

        def done(self):
            return self.d

        def set_result(self, _v):
            self.d = True

    r = RequestResult(prompt_len=17)
    s = bc._Stream(bc.Target("http://127.0.0.1:1"), r, 0.0, Fut())
    monkeypatch.setattr(bc.time, "perf_counter", lambda: 0.050)
    s.data_received(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    # the header-only read took one clock reading; the events get the scripted arrival times
    times = iter([0.100, 0.130, 0.170, 0.180, 0.181])
    monkeypatch.setattr(bc.time, "perf_counter", lambda: next(times))
    for e in events:
        s.data_received(_chunked([e])[:-5])
    assert r.success, r.error
    assert r.ttft == pytest.approx(0.100)
    assert r.itl == pytest.approx([0.015, 0.015, 0.020, 0.020, 0.010])
    assert r.latency == pytest.approx(0.181)
    assert r.output_len == 6 and r.spec_verify_ct == 3


def _self_signed(tmp_path):
    """A throw-away self-signed certificate for 127.0.0.1 (cryptography comes with ansible-core); returns a server SSLContext."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmops-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    return ctx


def test_https_stream_and_certificate_check(server, tmp_path):
    """Over TLS the request goes out once the handshake is done; a self-signed certificate is refused unless
    validate_certs is off, and the error names the TLS failure."""
    events = [_gen_chunk(1), _gen_chunk(4, FINAL), b"data: [DONE]\n\n"]

    def script(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(events))

    url, seen = server(script, tls=_self_signed(tmp_path))
    res, _d, _w = bc.run_benchmark(bc.Target(url, timeout_s=10, stall_timeout_s=5, validate_certs=False), _prompts())
    assert res[0].success, res[0].error
    assert res[0].output_len == 4 and len(res[0].itl) == 3
    assert seen[0][0].startswith(b"POST /generate HTTP/1.1") and seen[0][1]["sampling_params"]["max_new_tokens"] == 4
    res, _d, _w = bc.run_benchmark(bc.Target(url, timeout_s=10, stall_timeout_s=5), _prompts())
    assert not res[0].success
    assert res[0].error.startswith("cannot connect to 127.0.0.1:%d: SSLCertVerificationError:" % int(url.rsplit(":", 1)[1]))
    assert "self-signed certificate" in res[0].error or "self signed certificate" in res[0].error
    assert len(seen) == 1          # the refused connection never sent its request


def test_http_error_status_reports_body(server):
    def script(sock):
        body = b'{"object":"error","message":"max_new_tokens too large","code":400}'
        sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    url, _seen = server(script)
    res, _d, _w = bc.run_benchmark(bc.Target(url), _prompts())
    assert not res[0].success
    assert res[0].status == 400
    assert "HTTP 400 from /generate" in res[0].error and "max_new_tokens too large" in res[0].error


def test_error_chunk_mid_stream(server):
    def script(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + _gen_chunk(1) + b'data: {"error": {"message": "scheduler died"}}\n\n')
        sock.shutdown(socket.SHUT_WR)

    url, _seen = server(script)
    res, _d, _w = bc.run_benchmark(bc.Target(url), _prompts())
    assert res[0].error == "error chunk after 1 tokens: scheduler died"


def test_connection_closed_mid_stream(server):
    def script(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked([_gen_chunk(2)])[:-5])
        sock.close()

    url, _seen = server(script)
    res, _d, _w = bc.run_benchmark(bc.Target(url), _prompts())
    assert "connection closed mid-stream after 2 tokens" in res[0].error


def test_stalled_stream_fails_within_stall_timeout(server):
    gate = threading.Event()

    def script(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked([_gen_chunk(1)])[:-5])
        gate.wait(10)

    url, _seen = server(script)
    t0 = time.monotonic()
    res, _d, _w = bc.run_benchmark(bc.Target(url, stall_timeout_s=0.5, timeout_s=30), _prompts())
    waited = time.monotonic() - t0
    gate.set()
    assert "stream stalled: no data for" in res[0].error and "after 1 tokens" in res[0].error
    assert 0.5 <= waited < 2.0


@pytest.mark.parametrize("conc, stalled", [(1, 2), (3, 3)])
def test_hung_server_ends_the_run_after_one_wave_of_stalls(server, conc, stalled):
    """A server that answers the head and then never sends a token: without the early stop, 10 requests at
    concurrency 1 would wait 10 x 0.4 s; with it, one wave of max(2, concurrency) stalls ends the run."""
    gate = threading.Event()

    def script(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        gate.wait(10)

    url, seen = server(script)
    t0 = time.monotonic()
    res, _d, _w = bc.run_benchmark(bc.Target(url, stall_timeout_s=0.4, timeout_s=30), _prompts(n=10), max_concurrency=conc,
                                   abort_after_failures=20)
    waited = time.monotonic() - t0
    gate.set()
    stalls = [r for r in res if r.error.startswith("stream stalled: no data for")]
    unsent = [r for r in res if r.error.startswith("not sent: the run was aborted after %d consecutive requests timed out" % stalled)]
    assert len(stalls) == stalled and len(unsent) == 10 - stalled, [r.error for r in res]
    assert len(seen) == stalled                       # nothing was sent after the wave
    # conc 1: two stalls one after the other (2 x 0.4 s); conc 3: one wave of three in parallel (0.4 s)
    assert 0.4 * (2 if conc == 1 else 1) <= waited < 0.4 * (2 if conc == 1 else 1) + 1.5


def test_connection_refused_and_abort_after_failures():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                      # nothing listens there now
    res, _d, _w = bc.run_benchmark(bc.Target("http://127.0.0.1:%d" % port), _prompts(n=10), max_concurrency=1,
                                   abort_after_failures=3)
    assert all(not r.success for r in res)
    assert "cannot connect to 127.0.0.1:%d" % port in res[0].error
    assert sum(1 for r in res if r.error.startswith("not sent: the run was aborted after 3")) == 7


def test_openai_backend_uses_usage_and_chunk_gaps(server, fixtures_dir):
    body = (fixtures_dir / "sglang" / "completions-stream.sse").read_bytes()

    def script(sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    url, seen = server(script)
    res, _d, _w = bc.run_benchmark(bc.Target(url, backend="openai", model="qwen3.5-122b"), _prompts())
    r = res[0]
    assert r.success, r.error
    assert r.output_len == 5 and r.prompt_len == 17    # from the usage chunk
    assert len(r.itl) == 2                             # 3 text chunks -> 2 gaps
    head, req = seen[0]
    assert head.startswith(b"POST /v1/completions ")
    assert req["model"] == "qwen3.5-122b" and req["stream_options"] == {"include_usage": True}


def test_concurrency_limit_is_respected(server):
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def script(sock):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        body = _gen_chunk(1) + _gen_chunk(4, FINAL) + b"data: [DONE]\n\n"
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    url, _seen = server(script)
    res, _d, warm = bc.run_benchmark(bc.Target(url), _prompts(n=12), max_concurrency=3, warmup_prompts=_prompts(n=2))
    assert all(r.success for r in res) and len(warm) == 2
    assert state["max"] == 3


def test_make_prompts_lengths_and_seed():
    a = bc.make_prompts(50, 100, 20, range_ratio=0.5, seed=7)
    b = bc.make_prompts(50, 100, 20, range_ratio=0.5, seed=7)
    assert [p.prompt for p in a] == [p.prompt for p in b]
    assert all(50 <= p.prompt_len <= 100 and len(p.prompt) == p.prompt_len for p in a)
    assert all(10 <= p.output_len <= 20 for p in a)
    fixed = bc.make_prompts(5, 1000, 1000, range_ratio=1.0)
    assert {(p.prompt_len, p.output_len) for p in fixed} == {(1000, 1000)}
    with pytest.raises(bc.BenchError, match="range_ratio"):
        bc.make_prompts(1, 10, 10, range_ratio=1.5)


@pytest.mark.parametrize("url", ["127.0.0.1:30000", "ftp://x", "http://", "http://h:port"])
def test_target_rejects_bad_url(url):
    with pytest.raises(bc.BenchError, match="url"):
        bc.Target(url)


def test_target_keeps_path_prefix_and_api_key():
    t = bc.Target("https://lb.example:8443/sglang/", backend="openai-chat", api_key="sk-1", validate_certs=False)
    assert (t.host, t.port, t.path) == ("lb.example", 8443, "/sglang/v1/chat/completions")
    assert b"Authorization: Bearer sk-1\r\n" in t.head(10)


def test_poisson_dispatch_follows_seeded_exponential_gaps(server):
    def script(sock):
        body = _gen_chunk(4, FINAL) + b"data: [DONE]\n\n"
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    url, _seen = server(script)
    res, _d, _w = bc.run_benchmark(bc.Target(url), _prompts(n=6), request_rate=20.0, seed=11)
    rng = random.Random(11)
    expected = [rng.expovariate(20.0) for _i in range(5)]       # mean 50 ms between dispatches
    starts = sorted(r.start_time for r in res)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(r.success for r in res)
    for got, want in zip(gaps, expected):
        assert got == pytest.approx(want, abs=0.015)              # asyncio.sleep granularity on a busy machine
