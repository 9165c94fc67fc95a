"""Multi-turn conversations: loaders keep every turn, each turn is sent with the history and the server's own answers,
concurrency counts conversations, per-turn records and statistics (plugins/module_utils/_bench/conversations.py)."""
from __future__ import annotations

import json
import socketserver
import threading
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc
from ansible_collections.llmops.sglang.plugins.module_utils._bench import processes as bench_multi
from ansible_collections.llmops.sglang.plugins.module_utils._bench import conversations as cv
from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads as wl
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


SHAREGPT = [{"id": "c1", "conversations": [
    {"from": "system", "value": "Be brief."},
    {"from": "human", "value": "Name a prime."}, {"from": "gpt", "value": "7"},
    {"from": "human", "value": "Another one?"}, {"from": "gpt", "value": "11"},
    {"from": "human", "value": "Their sum?"}, {"from": "gpt", "value": "18"}]}]


def test_loaders_keep_every_user_turn_and_the_system_prompt(tmp_path):
    rows = wl.load_file(_write(tmp_path, "sharegpt.json", json.dumps(SHAREGPT)))
    assert rows[0]["turns"] == ["Name a prime.", "Another one?", "Their sum?"]
    assert rows[0]["system"] == "Be brief."
    assert rows[0]["prompt"] == "Name a prime."          # single-turn replay unchanged: the first human turn
    msgs = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "u1"},
                         {"role": "assistant", "content": "file answer"}, {"role": "user", "content": "u2"},
                         {"role": "assistant", "content": "reference"}]}
    q = {"category": "writing", "turns": ["Compose a post.", "Rewrite it in 3 lines."]}
    rows = wl.load_file(_write(tmp_path, "mixed.jsonl", json.dumps(msgs) + "\n" + json.dumps(q) + "\n"))
    assert rows[0]["turns"] == ["u1", "u2"] and rows[0]["system"] == "S"
    assert rows[1]["turns"] == ["Compose a post.", "Rewrite it in 3 lines."] and rows[1]["system"] is None
    assert wl.row_turns(rows[0], 1) == ["u1"] and wl.row_turns(rows[1], 0) == rows[1]["turns"]
    # rows shipped as module data keep their turns
    back = wl.validate_rows([dict(r) for r in rows])
    assert [r["turns"] for r in back] == [["u1", "u2"], ["Compose a post.", "Rewrite it in 3 lines."]]
    with pytest.raises(wl.WorkloadError, match=r"'turns' must be a non-empty list of non-empty strings"):
        wl.validate_rows([{"prompt": "p", "turns": ["p", ""]}])
    with pytest.raises(wl.WorkloadError, match=r"line 1: bad field \('turns' must be a list of strings"):
        wl.load_file(_write(tmp_path, "bad.jsonl", json.dumps({"turns": ["a", 3]}) + "\n"))


def test_turn_rendering_by_hand():
    turns, answers = ["u1", "u2", "u3"], ["a1", "a2"]
    assert cv.turn_messages("S", turns, answers) == [
        {"role": "system", "content": "S"}, {"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"}, {"role": "assistant", "content": "a2"}, {"role": "user", "content": "u3"}]
    assert cv.turn_text(None, turns, answers[:1]) == "u1\n\na1\n\nu2"
    assert cv.turn_text("S", turns, ["", "a2"]) == "S\n\nu1\n\nu2\n\na2\n\nu3"     # an empty answer is left out
    with pytest.raises(ValueError, match="nothing left to send"):
        cv.turn_messages(None, ["u1"], ["a1"])


class _Srv(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def _conversation_server(chat):
    """A loopback server that answers each request with ``answer-<n>`` (n counts requests) and reports as prompt tokens
    the number of whitespace-separated words it received. Returns (server, url, log); ``log`` holds
    ``(t_received, t_answered, body, answer, prompt_tokens)`` per request."""
    log = []
    lock = threading.Lock()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            sock = self.request
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            head, _s, body = data.partition(b"\r\n\r\n")
            clen = [int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0]
            while len(body) < clen:
                body += sock.recv(65536)
            t_in = time.perf_counter()
            req = json.loads(body)
            with lock:
                n = len(log) + 1
                answer = "answer-%d" % n
            if chat:
                words = sum(len(m["content"].split()) for m in req["messages"])
                events = [{"choices": [{"index": 0, "delta": {"content": answer}, "finish_reason": None}]},
                          {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
                          {"choices": [], "usage": {"prompt_tokens": words, "completion_tokens": 2}}]
            else:
                words = len(req["text"].split())
                events = [{"text": answer, "output_ids": [1, 2], "meta_info": {
                    "id": "r%d" % n, "finish_reason": {"type": "length", "length": 2}, "prompt_tokens": words,
                    "completion_tokens": 2, "cached_tokens": 0}}]
            time.sleep(0.02)
            payload = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            with lock:
                log.append((t_in, time.perf_counter(), req, answer, words))
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(payload)
                         + payload)

    srv = _Srv(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, "http://127.0.0.1:%d" % srv.server_address[1], log


@pytest.fixture
def conv_server():
    started = []

    def start(chat):
        srv, url, log = _conversation_server(chat)
        started.append(srv)
        return url, log

    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()


def _convs():
    return [bc.Prompt("a1", 0, 2, "x", turns=["a1", "a2 more", "a3"], system="sys"),
            bc.Prompt("b1", 0, 2, "y", turns=["b1", "b2"])]


def test_chat_turns_carry_the_servers_previous_answers_in_order(conv_server):
    url, log = conv_server(chat=True)
    results, _dur, _w = bc.run_benchmark(bc.Target(url, backend="openai-chat"), _convs(), max_concurrency=1)
    # concurrency 1 counts conversations: conversation a's three turns, then b's two, never interleaved
    sent = [[m["content"] for m in req["messages"] if m["role"] == "user"][-1] for _i, _o, req, _a, _w in log]
    assert sent == ["a1", "a2 more", "a3", "b1", "b2"]
    # turn 3 of a: system, every earlier user turn and the server's own answers (answer-1, answer-2), by hand
    assert log[2][2]["messages"] == [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "a1"}, {"role": "assistant", "content": "answer-1"},
        {"role": "user", "content": "a2 more"}, {"role": "assistant", "content": "answer-2"}, {"role": "user", "content": "a3"}]
    assert log[4][2]["messages"] == [{"role": "user", "content": "b1"}, {"role": "assistant", "content": "answer-4"},
                                     {"role": "user", "content": "b2"}]
    # each turn left only after the previous one's answer was written
    for k in (1, 2, 4):
        assert log[k][0] >= log[k - 1][1]
    assert [(r.conversation, r.turn) for r in results] == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2)]
    # token accounting from the server: usage.prompt_tokens (words of all messages), 2 output tokens per turn
    assert [r.prompt_len for r in results] == [1 + 1, 1 + 1 + 1 + 2, 1 + 1 + 1 + 2 + 1 + 1, 1, 1 + 1 + 1]
    assert all(r.success and r.output_len == 2 for r in results)
    assert all(r.generated_text == "" for r in results)     # answers are not kept unless output_details asks


def test_generate_turns_send_the_text_history_and_concurrency_counts_conversations(conv_server):
    url, log = conv_server(chat=False)
    convs = _convs()
    results, _dur, _w = bc.run_benchmark(bc.Target(url, keep_text=True), convs, max_concurrency=2)
    texts = [req["text"] for _i, _o, req, _a, _w in log]
    # both conversations start at once (2 in flight), each next turn after its own previous answer
    assert sorted(texts[:2]) == ["b1", "sys\n\na1"]
    by_conv = {0: [], 1: []}
    for r in results:
        by_conv[r.conversation].append(r)
    answers = dict((req["text"], ans) for _i, _o, req, ans, _w in log)
    a1 = answers["sys\n\na1"]
    assert "sys\n\na1\n\n%s\n\na2 more" % a1 in texts
    a2 = answers["sys\n\na1\n\n%s\n\na2 more" % a1]
    assert "sys\n\na1\n\n%s\n\na2 more\n\n%s\n\na3" % (a1, a2) in texts
    assert "b1\n\n%s\n\nb2" % answers["b1"] in texts
    assert [r.generated_text for r in by_conv[0]] == [a1, a2, answers["sys\n\na1\n\n%s\n\na2 more\n\n%s\n\na3" % (a1, a2)]]
    # prompt tokens as the server counted them: conversation a grows 2 -> 2+1+2 -> 5+1+1
    assert [r.prompt_len for r in by_conv[0]] == [2, 5, 7]


def test_a_failed_turn_ends_its_conversation():
    convs = [bc.Prompt("a1", 0, 2, turns=["a1", "a2", "a3"])]
    results, _d, _w = bc.run_benchmark(bc.Target("http://127.0.0.1:9", stall_timeout_s=2), convs)
    assert [r.turn for r in results] == [1, 2, 3] and not any(r.success for r in results)
    assert "cannot connect" in results[0].error
    assert results[1].error.startswith("not sent: turn 1 of this conversation failed")


def test_client_processes_merge_keeps_conversations_whole(conv_server):
    url, log = conv_server(chat=True)
    convs = _convs() + [bc.Prompt("c1", 0, 2, turns=["c1", "c2"]), bc.Prompt("single", 0, 2)]
    results, _dur, _w = bench_multi.run_benchmark_processes(bc.Target(url, backend="openai-chat"), convs, processes=2,
                                                            max_concurrency=2)
    assert [(r.conversation, r.turn) for r in results] == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (2, 1), (2, 2),
                                                           (None, None)]
    assert len(log) == 8 and all(r.success for r in results)
    # the merged record of conversation 2 turn 2 has the prompt tokens the server counted for c's history
    assert results[6].prompt_len == 1 + 1 + 1


def test_by_turn_statistics_by_hand():
    def res(turn, prompt, cached, ttft, ok=True):
        return RequestResult(prompt_len=prompt, output_len=2, success=ok, ttft=ttft, latency=ttft + 0.01, turn=turn,
                             conversation=0, final_meta={"cached_tokens": cached})
    stats = cv.by_turn([res(1, 100, 0, 0.010), res(1, 120, 0, 0.030), res(2, 300, 240, 0.005), res(2, 500, 400, 0.007),
                        res(2, 1, 0, 0.0, ok=False), RequestResult()])
    assert [s["turn"] for s in stats] == [1, 2]
    assert stats[0]["requests"] == 2 and stats[0]["mean_prompt_tokens"] == 110.0
    assert stats[0]["cached_tokens"] == 0 and stats[0]["cached_fraction"] == 0.0
    assert stats[0]["mean_ttft_ms"] == pytest.approx(20.0) and stats[0]["median_ttft_ms"] == pytest.approx(20.0)
    assert stats[1]["requests"] == 3 and stats[1]["completed"] == 2
    assert stats[1]["cached_tokens"] == 640 and stats[1]["cached_fraction"] == pytest.approx(640 / 800.0)
    assert stats[1]["mean_ttft_ms"] == pytest.approx(6.0)


def test_conversation_prompts_cap_and_errors():
    rows = [{"prompt": "p", "messages": None, "category": "c", "output_len": 7, "source": "f:1",
             "turns": ["t1", "t2", "t3"], "system": "S"}]
    convs = bc.conversation_prompts(rows, 3, 16, seed=1, max_turns=2)
    assert len(convs) == 3 and all(c.turns == ["t1", "t2"] and c.system == "S" and c.output_len == 7 for c in convs)
    assert sum(c.requests() for c in convs) == 6
    with pytest.raises(bc.BenchError, match="multi_turn_max_turns must be >= 0"):
        bc.conversation_prompts(rows, 1, 16, seed=1, max_turns=-1)
