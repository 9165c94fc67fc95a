# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The serving-benchmark load generator: an asyncio HTTP/1.1 streaming client, standard library only.

It runs inside the ``serving_benchmark`` module (AnsiballZ, target Python >= 3.8), so it uses raw
asyncio transports (``asyncio.Protocol``), not aiohttp/urllib. One TCP (or TLS) connection per
request with ``Connection: close``; response bodies framed by ``Content-Length``, chunked
transfer-encoding or connection close; the body is decoded as server-sent events
(:mod:`sse`). Every chunk is timestamped with ``time.perf_counter()`` when its bytes arrive.

Backends and payloads (as ``sglang.bench_serving`` 0.5.9 sends them, SGLANG_FACTS.md section 5.1):

* ``sglang`` → ``POST /generate`` ``{"input_ids": [...], "sampling_params": {"temperature": 0,
  "max_new_tokens": N, "ignore_eos": true}, "stream": true, "logprob_start_len": -1}``;
  output tokens and per-chunk Δtokens from ``meta_info.completion_tokens``; ``spec_verify_ct`` from
  the finishing chunk.
* ``openai`` → ``POST /v1/completions`` ``{"model", "prompt": [ids] | "text", "max_tokens",
  "temperature": 0, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}}``.
* ``openai-chat`` → ``POST /v1/chat/completions`` with ``messages: [{"role": "user", "content": text}]``.
  For both OpenAI backends output tokens come from ``usage.completion_tokens`` (falling back to the
  number of non-empty chunks when the server sends no usage) and each chunk gap is one ITL sample.
  With ``Target.spec_details`` both OpenAI bodies add ``"return_spec_tokens_details": true``: SGLang 0.5.23 then
  sends a ``choices: []`` chunk with ``sglext.spec_tokens_details`` after the finish chunk, and its ``spec_verify_ct``
  and draft counts become the request's speculative accounting (as ``meta_info`` on ``/generate``). Older SGLang
  versions ignore the field (their pydantic request models keep the default ``extra="ignore"``) and send nothing.

Failures never raise out of :func:`run_benchmark`: each request gets a
:class:`~bench_stats.RequestResult` with ``success=False`` and an ``error`` that names the cause
(connection refused, HTTP status and body excerpt, error chunk, stream stalled for N s, timeout,
connection closed mid-stream).
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import time

from ansible_collections.llmops.sglang.plugins.module_utils._bench import arrivals
from ansible_collections.llmops.sglang.plugins.module_utils._bench import conversations
from ansible_collections.llmops.sglang.plugins.module_utils._bench import phases as bench_phases
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult
from ansible_collections.llmops.sglang.plugins.module_utils._bench.workloads import row_messages, row_text, row_turns, stratified
from ansible_collections.llmops.sglang.plugins.module_utils._bench.sse import SSEDecoder, generate_chunk_progress, parse_openai_chunk

BACKEND_PATHS = {
    "sglang": "/generate",
    "openai": "/v1/completions",
    "openai-chat": "/v1/chat/completions",
}

# Token ids for random prompts are drawn from [TOKEN_ID_MIN, TOKEN_ID_MAX): ordinary vocabulary
# entries of every current tokenizer (Qwen, Llama 3, DeepSeek put special tokens above 100000).
TOKEN_ID_MIN = 1000
TOKEN_ID_MAX = 30000
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
          "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
          "uniform", "victor", "whiskey", "xray", "yankee", "zulu")
_ERR_BODY_MAX = 2048


class BenchError(Exception):
    """Invalid benchmark input (bad URL, lengths, rates). The message names the value and the fix."""


class Target(object):
    """Where and how to send requests.

    Args:
      url (str): base URL of the server, ``http://host:port`` or ``https://...`` (a path prefix is kept).
      backend (str): ``sglang`` | ``openai`` | ``openai-chat``.
      model (str): model name for the OpenAI backends ('' lets the server choose its only model).
      api_key (str): sent as ``Authorization: Bearer <key>`` when not empty.
      timeout_s (float): limit for a whole request, s (0 = none).
      stall_timeout_s (float): limit without any byte received, s (0 = none).
      validate_certs (bool): verify TLS certificates for https.
      headers (dict): extra request headers.
      keep_text (bool): keep each request's output text in ``RequestResult.generated_text`` (for
        ``output_details``; off by default, it costs memory and time per chunk on the OpenAI backends).
      temperature (float): sampling temperature sent with every request (0 = greedy, bench_serving's value).
      top_p (float): nucleus sampling cut-off (0, 1]; sent only when below 1.0.
      spec_details (bool): OpenAI backends: ask for per-request speculative details (``return_spec_tokens_details``,
        SGLang 0.5.23+; see the module docstring). Ignored by the ``sglang`` backend, whose ``meta_info`` always has them.

    Raises BenchError for an unusable URL, backend or sampling setting.
    """

    def __init__(self, url, backend="sglang", model="", api_key="", timeout_s=600.0, stall_timeout_s=60.0,
                 validate_certs=True, headers=None, keep_text=False, temperature=0.0, top_p=1.0, spec_details=False):
        if backend not in BACKEND_PATHS:
            raise BenchError("backend %r is not supported; use one of %s" % (backend, ", ".join(sorted(BACKEND_PATHS))))
        scheme, sep, rest = (url or "").partition("://")
        if not sep or scheme not in ("http", "https") or not rest:
            raise BenchError("url %r is not an http(s) URL; use e.g. http://127.0.0.1:30000" % (url,))
        hostport, slash, prefix = rest.partition("/")
        self.prefix = ("/" + prefix).rstrip("/") if slash else ""
        if hostport.startswith("["):
            host, _sep, port = hostport[1:].partition("]")
            port = port.lstrip(":")
        elif hostport.count(":") == 1:
            host, _sep, port = hostport.partition(":")
        else:
            host, port = hostport, ""
        try:
            self.port = int(port) if port else (443 if scheme == "https" else 80)
        except ValueError:
            raise BenchError("url %r has an invalid port %r; use a number, e.g. http://127.0.0.1:30000" % (url, port))
        if not host:
            raise BenchError("url %r has no host; use e.g. http://127.0.0.1:30000" % (url,))
        self.url = url
        self.scheme = scheme
        self.host = host
        self.backend = backend
        self.path = self.prefix + BACKEND_PATHS[backend]
        self.model = model or ""
        self.api_key = api_key or ""
        self.timeout_s = float(timeout_s or 0)
        self.stall_timeout_s = float(stall_timeout_s or 0)
        self.ssl = None
        if scheme == "https":
            ctx = ssl.create_default_context()
            if not validate_certs:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self.ssl = ctx
        self.headers = dict(headers or {})
        self.keep_text = bool(keep_text)
        if temperature is None or temperature < 0:
            raise BenchError("temperature must be >= 0 (0 = greedy), got %r" % (temperature,))
        if top_p is None or not 0 < top_p <= 1:
            raise BenchError("top_p must be within (0, 1] (1.0 = off), got %r" % (top_p,))
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.spec_details = bool(spec_details)

    def head(self, body_len):
        """The HTTP/1.1 request head (bytes) for a POST with a JSON body of ``body_len`` bytes."""
        hostval = self.host if self.port in (80, 443) else "%s:%d" % (self.host, self.port)
        if ":" in self.host and not self.host.startswith("["):
            hostval = "[%s]:%d" % (self.host, self.port)
        lines = ["POST %s HTTP/1.1" % self.path, "Host: %s" % hostval, "Content-Type: application/json",
                 "Accept: text/event-stream", "Connection: close", "Content-Length: %d" % body_len,
                 "User-Agent: llmops.sglang-serving-benchmark"]
        if self.api_key:
            lines.append("Authorization: Bearer %s" % self.api_key)
        for k, v in self.headers.items():
            lines.append("%s: %s" % (k, v))
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Prompt(object):
    """One request to send.

    ``prompt``: a list of token ids, or text; ``prompt_len``: tokens sent (the length of the ids; 0 for text, whose
    count comes from the server's ``prompt_tokens``); ``output_len``: tokens to generate; ``category``: the workload
    row's category (reports only, never sent); ``messages``: OpenAI chat messages for the ``openai-chat`` backend
    (None: one user message with ``prompt``).

    A multi-turn conversation (:mod:`conversations`) sets ``turns`` (list of str, the user turns in order) and
    ``system`` (str or None); it is sent as ``len(turns)`` requests, one after the other, each with the history and the
    server's previous answers (``prompt`` is then the first turn's text, for reports).
    """

    __slots__ = ("prompt", "prompt_len", "output_len", "category", "messages", "turns", "system")

    def __init__(self, prompt, prompt_len, output_len, category=None, messages=None, turns=None, system=None):
        self.prompt = prompt
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.category = category
        self.messages = messages
        self.turns = turns
        self.system = system

    def requests(self):
        """How many requests this prompt sends: its number of turns, or 1."""
        return len(self.turns) if self.turns else 1

    def turn_prompt(self, answers, chat):
        """The :class:`Prompt` of turn ``len(answers)`` of this conversation (see :mod:`conversations`): chat messages
        when ``chat`` (the ``openai-chat`` backend), else the plain-text history. Raises ValueError past the last turn."""
        if chat:
            msgs = conversations.turn_messages(self.system, self.turns, answers)
            return Prompt(msgs[-1]["content"], 0, self.output_len, self.category, messages=msgs)
        return Prompt(conversations.turn_text(self.system, self.turns, answers), 0, self.output_len, self.category)


def _lengths(rng, n, length, ratio, name):
    if length < 1:
        raise BenchError("%s must be >= 1 token, got %r" % (name, length))
    if ratio < 0 or ratio > 1:
        raise BenchError("range_ratio must be within [0, 1], got %r; use 1.0 for fixed lengths" % (ratio,))
    low = max(int(length * ratio), 1)
    return [rng.randint(low, length) for _i in range(n)]


def make_prompts(num_prompts, input_len, output_len, range_ratio=1.0, seed=1, text=False):
    """Random prompts as bench_serving's ``random-ids`` dataset builds them.

    Lengths are uniform integers in ``[max(int(len * range_ratio), 1), len]`` (bench_serving:
    ``randint(max(int(N*ratio), 1), N + 1)`` with an exclusive upper bound), so ``range_ratio`` 1.0
    gives exactly ``input_len``/``output_len``. Prompts are token ids in
    [TOKEN_ID_MIN, TOKEN_ID_MAX), or with ``text=True`` ``input_len`` space-separated words (about
    one token each; the server's ``prompt_tokens`` is then the authoritative count). Deterministic
    for a given ``seed``. Returns a list of :class:`Prompt`.

    Raises BenchError for num_prompts < 1, a length < 1 or a ratio outside [0, 1].
    """
    if num_prompts < 1:
        raise BenchError("num_prompts must be >= 1, got %r" % (num_prompts,))
    rng = random.Random(seed)
    in_lens = _lengths(rng, num_prompts, input_len, range_ratio, "input_len")
    out_lens = _lengths(rng, num_prompts, output_len, range_ratio, "output_len")
    prompts = []
    for i in range(num_prompts):
        if text:
            p = " ".join(rng.choice(_WORDS) for _j in range(in_lens[i]))
        else:
            p = [rng.randrange(TOKEN_ID_MIN, TOKEN_ID_MAX) for _j in range(in_lens[i])]
        prompts.append(Prompt(p, in_lens[i], out_lens[i]))
    return prompts


def workload_prompts(rows, num_prompts, output_len, seed, backend):
    """Text prompts for one level from workload rows (:mod:`workloads`): ``num_prompts`` rows in a seeded round-robin
    over the categories (:func:`workloads.stratified`; rows repeat when the level needs more than there are), each with
    its row's ``output_len`` or ``output_len``. ``prompt_len`` is 0: the server's ``prompt_tokens`` is the count.
    The ``openai-chat`` backend gets the rows' messages; the others the text.
    Raises BenchError for num_prompts < 1 or output_len < 1."""
    if num_prompts < 1:
        raise BenchError("num_prompts must be >= 1, got %r" % (num_prompts,))
    if output_len < 1:
        raise BenchError("output_len must be >= 1 token, got %r" % (output_len,))
    out = []
    for row in stratified(rows, num_prompts, seed):
        out.append(Prompt(row_text(row), 0, row.get("output_len") or output_len, category=row["category"],
                          messages=row_messages(row) if backend == "openai-chat" else None))
    return out


def conversation_prompts(rows, num_conversations, output_len, seed, max_turns=0):
    """Multi-turn conversations for one level: ``num_conversations`` rows picked as :func:`workload_prompts` picks them
    (a seeded round-robin over the categories), each a :class:`Prompt` with the row's user turns (at most
    ``max_turns``, 0 = all), its system prompt, and the row's ``output_len`` or ``output_len`` for every turn.
    Raises BenchError for num_conversations < 1, output_len < 1 or max_turns < 0."""
    if num_conversations < 1:
        raise BenchError("num_prompts must be >= 1 conversation, got %r" % (num_conversations,))
    if output_len < 1:
        raise BenchError("output_len must be >= 1 token, got %r" % (output_len,))
    if max_turns is None or max_turns < 0:
        raise BenchError("multi_turn_max_turns must be >= 0 (0 = every turn), got %r" % (max_turns,))
    out = []
    for row in stratified(rows, num_conversations, seed):
        turns = row_turns(row, max_turns)
        out.append(Prompt(turns[0], 0, row.get("output_len") or output_len, category=row["category"], turns=turns,
                          system=row.get("system")))
    return out


def request_body(target, prompt):
    """The JSON body (bytes) of one benchmark request for ``target.backend`` (see the module docstring).

    Text prompts go out as production traffic does: ``/generate`` gets ``text`` (no chat template), ``/v1/completions``
    the text as ``prompt``, ``/v1/chat/completions`` the row's ``messages`` (or one user message), so the server applies
    the model's chat template. ``temperature`` (and ``top_p`` when below 1) come from ``target``.
    """
    temp = target.temperature
    if target.backend == "sglang":
        if isinstance(prompt.prompt, list):
            body = {"input_ids": prompt.prompt}
        else:
            body = {"text": prompt.prompt}
        sp = {"temperature": temp, "max_new_tokens": prompt.output_len, "ignore_eos": True}
        if target.top_p < 1.0:
            sp["top_p"] = target.top_p
        body.update({"sampling_params": sp, "stream": True, "logprob_start_len": -1})
    elif target.backend == "openai":
        body = {"prompt": prompt.prompt, "max_tokens": prompt.output_len, "temperature": temp, "best_of": 1,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    else:
        if prompt.messages:
            messages = prompt.messages
        else:
            content = prompt.prompt if not isinstance(prompt.prompt, list) else " ".join(str(t) for t in prompt.prompt)
            messages = [{"role": "user", "content": content}]
        body = {"messages": messages, "max_tokens": prompt.output_len,
                "temperature": temp, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    if target.backend != "sglang" and target.top_p < 1.0:
        body["top_p"] = target.top_p
    if target.backend != "sglang" and target.model:
        body["model"] = target.model
    if target.backend != "sglang" and target.spec_details:
        body["return_spec_tokens_details"] = True
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


class _Stream(asyncio.Protocol):
    """One request: HTTP/1.1 response parsing, SSE decoding and the per-chunk timing, in data_received.

    ``request`` (bytes, HTTP head + body) is written as soon as the connection is made; ``start`` is the
    perf_counter time (s) the request's timings count from; ``done`` (a Future) resolves when it ends.
    """

    def __init__(self, target, result, start, done, request=b""):
        self.t = target
        self.request = request
        self.r = result
        self.start = start
        self.done = done
        self.transport = None
        self.hbuf = b""
        self.mode = None          # None (headers), "chunked", "length", "close"
        self.status = None
        self.left = 0             # content-length left, or chunk data left
        self.crlf = 0             # chunked: CRLF bytes left after a chunk's data
        self.cbuf = b""           # chunked: partial size line
        self.err_body = b""
        self.sse = SSEDecoder()
        self.last_rx = start
        self.last_ct = 0
        self.last_ts = 0.0
        self.nchunks = 0
        self.text_len = 0
        self.usage = None
        self.spec = None          # OpenAI backends: sglext.spec_tokens_details (SGLang 0.5.23)
        self.finished = False
        self.closed = False
        self.timed_out = False    # failed by a stall, request or connect timeout (the server kept it waiting)
        self.generate = target.backend == "sglang"
        self.keep_text = target.keep_text

    # -- asyncio callbacks -------------------------------------------------------------------
    def connection_made(self, transport):
        # The request goes out here, in the callback that completes the connection, rather than after the
        # connect coroutine returns: that saves the event-loop turns between the two (~0.1 ms per request
        # on loopback, 1 % of a 10 ms TTFT). asyncio's TCP transports set TCP_NODELAY themselves (3.6+).
        self.transport = transport
        if self.request:
            transport.write(self.request)

    def data_received(self, data):
        now = time.perf_counter()
        self.last_rx = now
        if self.closed:
            return
        if self.mode is None:
            self.hbuf += data
            i = self.hbuf.find(b"\r\n\r\n")
            if i < 0:
                if len(self.hbuf) > 65536:
                    self._fail("response headers larger than 64 KiB")
                return
            head = self.hbuf[:i]
            data = self.hbuf[i + 4:]
            self.hbuf = b""
            if not self._headers(head):
                return
            if not data:
                if self.mode == "length" and self.left == 0:
                    self._body_end(now)
                return
        if self.mode == "chunked":
            self._chunked(data, now)
        elif self.mode == "length":
            if len(data) >= self.left:
                data = data[:self.left]
                self.left = 0
                self._body(data, now)
                if not self.closed:
                    self._body_end(now)
            else:
                self.left -= len(data)
                self._body(data, now)
        else:
            self._body(data, now)

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        if self.closed:
            return
        now = time.perf_counter()
        if self.mode == "close":
            self._body_end(now)
            return
        why = "%s: %s" % (type(exc).__name__, exc) if exc else "server closed the connection"
        if self.mode is None:
            self._fail("connection closed before a response (%s)" % why, now)
        else:
            self._fail("connection closed mid-stream after %d tokens (%s)" % (self._tokens(), why), now)

    # -- HTTP framing ------------------------------------------------------------------------
    def _headers(self, head):
        lines = head.split(b"\r\n")
        parts = lines[0].split(None, 2)
        try:
            self.status = int(parts[1])
        except (IndexError, ValueError):
            self._fail("malformed HTTP status line %r" % lines[0][:100])
            return False
        self.r.status = self.status
        te = b""
        clen = None
        for line in lines[1:]:
            k, _sep, v = line.partition(b":")
            k = k.strip().lower()
            if k == b"transfer-encoding":
                te = v.strip().lower()
            elif k == b"content-length":
                try:
                    clen = int(v.strip())
                except ValueError:
                    self._fail("malformed Content-Length %r" % v.strip()[:40])
                    return False
        if b"chunked" in te:
            self.mode = "chunked"
        elif clen is not None:
            self.mode = "length"
            self.left = clen
        else:
            self.mode = "close"
        return True

    def _chunked(self, data, now):
        buf = self.cbuf + data if self.cbuf else data
        self.cbuf = b""
        n = len(buf)
        pos = 0
        while pos < n and not self.closed:
            if self.left:
                take = min(self.left, n - pos)
                self._body(buf[pos:pos + take], now)
                pos += take
                self.left -= take
                if self.left:
                    return
                self.crlf = 2
                continue
            if self.crlf:
                take = min(self.crlf, n - pos)
                pos += take
                self.crlf -= take
                continue
            i = buf.find(b"\r\n", pos)
            if i < 0:
                self.cbuf = buf[pos:]
                return
            size_s = buf[pos:i].split(b";", 1)[0].strip()
            pos = i + 2
            try:
                size = int(size_s, 16)
            except ValueError:
                self._fail("malformed chunk size %r" % size_s[:40], now)
                return
            if size == 0:
                self._body_end(now)
                return
            self.left = size

    # -- body: SSE events --------------------------------------------------------------------
    def _body(self, data, now):
        if self.status != 200:
            if len(self.err_body) < _ERR_BODY_MAX:
                self.err_body += data[:_ERR_BODY_MAX - len(self.err_body)]
            return
        for payload in self.sse.feed(data):
            if self.generate:
                self._generate_event(payload, now)
            else:
                self._openai_event(payload, now)
            if self.closed:
                return

    def _generate_event(self, payload, now):
        try:
            ch = generate_chunk_progress(payload)
        except ValueError:
            self._fail("undecodable /generate chunk: %r" % payload[:200], now)
            return
        if ch.done:
            self._complete(now)
            return
        if ch.error:
            self._fail("error chunk after %d tokens: %s" % (self.last_ct, ch.error), now)
            return
        ct = ch.completion_tokens
        if ct is not None and ct > self.last_ct:
            if self.r.ttft == 0.0:
                self.r.ttft = now - self.start
            else:
                gap = (now - self.last_ts) / (ct - self.last_ct)
                self.r.itl.extend([gap] * (ct - self.last_ct))
            self.last_ts = now
            self.last_ct = ct
        if ch.finished:
            self.finished = True
            meta = ch.meta or {}
            self.r.final_meta = meta
            if isinstance(meta.get("completion_tokens"), int):
                self.last_ct = meta["completion_tokens"]
            svc = meta.get("spec_verify_ct")
            if isinstance(svc, int):
                self.r.spec_verify_ct = svc
            if isinstance(meta.get("prompt_tokens"), int) and meta["prompt_tokens"] > 0:
                self.r.prompt_len = meta["prompt_tokens"]
            if self.keep_text and ch.text is not None:
                self.r.generated_text = ch.text

    def _openai_event(self, payload, now):
        try:
            ch = parse_openai_chunk(payload)
        except ValueError:
            self._fail("undecodable OpenAI chunk: %r" % payload[:200], now)
            return
        if ch.done:
            self._complete(now)
            return
        if ch.error:
            self._fail("error chunk after %d chunks: %s" % (self.nchunks, ch.error), now)
            return
        if ch.text:
            if self.keep_text:
                self.r.generated_text += ch.text
            if self.r.ttft == 0.0:
                self.r.ttft = now - self.start
            else:
                self.r.itl.append(now - self.last_ts)
            self.last_ts = now
            self.nchunks += 1
        if ch.finish_reason is not None:
            self.finished = True
        if ch.usage:
            self.usage = ch.usage
            self.finished = True
        if ch.spec is not None:
            self.spec = ch.spec

    def _tokens(self):
        return self.last_ct if self.generate else self.nchunks

    def _body_end(self, now):
        if self.closed:
            return
        if self.status != 200:
            body = self.err_body.decode("utf-8", "replace").strip()
            self._fail("HTTP %s from %s: %s" % (self.status, self.t.path, body[:500] or "(empty body)"), now)
        elif self.finished:
            self._complete(now)
        else:
            self._fail("stream ended before the finish chunk after %d tokens" % self._tokens(), now)

    # -- outcome -------------------------------------------------------------------------------
    def _complete(self, now):
        if self.closed:
            return
        if not self.finished:
            self._fail("[DONE] before the finish chunk after %d tokens" % self._tokens(), now)
            return
        r = self.r
        if self.generate:
            r.output_len = self.last_ct
        else:
            usage = self.usage or {}
            out = usage.get("completion_tokens")
            r.output_len = out if isinstance(out, int) else self.nchunks
            if isinstance(usage.get("prompt_tokens"), int) and usage["prompt_tokens"] > 0:
                r.prompt_len = usage["prompt_tokens"]
            if self.spec is not None:
                # the same accounting as /generate's final meta_info: the details plus the server's completion count
                meta = dict(self.spec)
                meta["completion_tokens"] = r.output_len
                r.final_meta = meta
                svc = meta.get("spec_verify_ct")
                if isinstance(svc, int) and not isinstance(svc, bool) and svc > 0:
                    r.spec_verify_ct = svc
        r.latency = now - self.start
        r.success = True
        self._close()

    def _fail(self, msg, now=None):
        if self.closed:
            return
        r = self.r
        r.success = False
        r.error = msg
        r.latency = (now or time.perf_counter()) - self.start
        self._close()

    def _close(self):
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        if not self.done.done():
            self.done.set_result(None)

    def check_deadline(self, now):
        """Called by the watchdog: fail a stalled or overlong request."""
        if self.closed:
            return
        if self.t.stall_timeout_s and now - self.last_rx > self.t.stall_timeout_s:
            self.timed_out = True
            self._fail("stream stalled: no data for %.1f s (stall_timeout %.1f s) after %d tokens"
                       % (now - self.last_rx, self.t.stall_timeout_s, self._tokens()), now)
        elif self.t.timeout_s and now - self.start > self.t.timeout_s:
            self.timed_out = True
            self._fail("request timed out after %.1f s (timeout %.1f s) with %d tokens"
                       % (now - self.start, self.t.timeout_s, self._tokens()), now)


class _Runner(object):
    """Holds the in-flight streams of one run and a watchdog that enforces the timeouts."""

    def __init__(self, target):
        self.t = target
        self.active = set()
        self.consecutive_failures = 0
        self.consecutive_timeouts = 0    # stalls/timeouts among the consecutive failures
        self.abort_reason = ""

    async def one(self, prompt, body, keep_text=False):
        t = self.t
        loop = asyncio.get_running_loop() if hasattr(asyncio, "get_running_loop") else asyncio.get_event_loop()
        r = RequestResult(prompt_len=prompt.prompt_len)
        if self.abort_reason:
            r.error = self.abort_reason
            return r
        request = t.head(len(body)) + body
        start = time.perf_counter()
        r.start_time = start
        done = loop.create_future()
        proto = _Stream(t, r, start, done, request)
        proto.keep_text = proto.keep_text or keep_text
        self.active.add(proto)
        try:
            connect = loop.create_connection(lambda: proto, t.host, t.port, ssl=t.ssl,
                                             server_hostname=t.host if t.ssl else None)
            limit = t.stall_timeout_s or t.timeout_s or None
            try:
                await asyncio.wait_for(connect, limit)
            except asyncio.TimeoutError:
                proto.timed_out = True
                proto._fail("connect to %s:%d timed out after %.1f s" % (t.host, t.port, limit))
            except (OSError, ssl.SSLError) as exc:
                proto._fail("cannot connect to %s:%d: %s: %s" % (t.host, t.port, type(exc).__name__, exc))
            else:
                await done
        finally:
            self.active.discard(proto)
        if r.success:
            self.consecutive_failures = 0
            self.consecutive_timeouts = 0
        else:
            self.consecutive_failures += 1
            if proto.timed_out:
                self.consecutive_timeouts += 1
        return r

    def check_abort(self, res, abort_after, timeout_abort):
        """After each request: stop sending once ``abort_after`` requests failed in a row (0 = never), or earlier once
        ``timeout_abort`` of them in a row timed out or stalled (a hung server: each further request would wait the
        whole timeout too). Sets ``abort_reason`` (the error the unsent requests get)."""
        if not abort_after or self.abort_reason:
            return
        if self.consecutive_failures >= abort_after:
            self.abort_reason = ("not sent: the run was aborted after %d consecutive failed requests (last: %s)"
                                 % (self.consecutive_failures, res.error))
        elif self.consecutive_timeouts >= timeout_abort:
            self.abort_reason = ("not sent: the run was aborted after %d consecutive requests timed out with no "
                                 "successful request in between (last: %s)" % (self.consecutive_timeouts, res.error))

    async def watchdog(self):
        period = 0.25
        while True:
            await asyncio.sleep(period)
            now = time.perf_counter()
            for proto in list(self.active):
                proto.check_deadline(now)


async def _run(target, prompts, max_concurrency, offsets, abort_after, progress, start=None):
    runner = _Runner(target)
    # A whole wave of in-flight requests (at least 2) timing out in a row ends the run early: at concurrency 1
    # that is 2 x stall_timeout instead of abort_after x stall_timeout.
    timeout_abort = min(abort_after or 0, max(2, max_concurrency or len(prompts)))
    bodies = [request_body(target, p) if not p.turns else None for p in prompts]
    sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    results = [None] * len(prompts)
    wd = asyncio.ensure_future(runner.watchdog())
    chat = target.backend == "openai-chat"

    def after(i, res):
        runner.check_abort(res, abort_after, timeout_abort)
        if progress is not None:
            progress(i, res)

    async def conversation(i):
        # the turns of one conversation, in order; the caller holds its concurrency slot throughout (bench_serving's
        # multi-turn semaphore), so max_concurrency counts conversations in flight
        conv = prompts[i]
        answers = []
        out = []
        broken = ""
        for k in range(len(conv.turns)):
            if runner.abort_reason or broken:
                res = RequestResult(error=runner.abort_reason or broken, conversation=i, turn=k + 1)
            else:
                tp = conv.turn_prompt(answers, chat)
                res = await runner.one(tp, request_body(target, tp), keep_text=True)
                res.conversation, res.turn = i, k + 1
                answers.append(res.generated_text)
                if not target.keep_text:
                    res.generated_text = ""
                if not res.success:
                    broken = "not sent: turn %d of this conversation failed (%s)" % (k + 1, res.error)
            out.append(res)
            after(i, res)
            results[i] = out
        return out

    async def limited(i):
        if sem is not None:
            await sem.acquire()
        try:
            if prompts[i].turns:
                await conversation(i)
                return
            res = await runner.one(prompts[i], bodies[i])
        finally:
            if sem is not None:
                sem.release()
        results[i] = res
        after(i, res)

    if start is None:
        start = time.perf_counter()
    elif start > time.perf_counter():
        await asyncio.sleep(start - time.perf_counter())    # a shared start several client processes wait for
    tasks = []
    try:
        for i in range(len(prompts)):
            if offsets:
                # absolute send times (start + offset): a late wake-up does not push the later arrivals back
                delay = start + offsets[i] - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            if runner.abort_reason:
                break
            tasks.append(asyncio.ensure_future(limited(i)))
        await asyncio.gather(*tasks)
        duration = time.perf_counter() - start
    finally:
        wd.cancel()
        for tsk in tasks:
            if not tsk.done():
                tsk.cancel()
    return flatten(prompts, results, runner.abort_reason or "not sent"), duration


async def _run_phases(target, prompts, phases, abort_after, progress, on_phase):
    runner = _Runner(target)
    bounds = [0.0]
    for ph in phases:
        bounds.append(bounds[-1] + ph["duration_s"])
    total = bounds[-1]
    bodies = [request_body(target, p) for p in prompts]
    results = []
    state = {"next": 0}
    top = max(ph["concurrency"] for ph in phases)
    timeout_abort = min(abort_after or 0, max(2, top))     # a whole wave at the highest cap timing out in a row
    wd = asyncio.ensure_future(runner.watchdog())
    start = time.perf_counter()

    def phase_now(t):
        for k in range(len(phases)):
            if t < bounds[k + 1]:
                return k
        return None

    async def announcer():
        # calls on_phase(k) at each phase start, from the event loop (the caller samples the server there)
        for k in range(len(phases)):
            delay = start + bounds[k] - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if on_phase is not None:
                on_phase(k)

    async def worker(j):
        while True:
            now = time.perf_counter() - start
            k = phase_now(now)
            if k is None or runner.abort_reason:
                return
            if j >= phases[k]["concurrency"]:
                # above this phase's cap: idle until the next phase starts
                await asyncio.sleep(max(bounds[k + 1] - now, 0.001))
                continue
            sent = state["next"]
            state["next"] += 1
            res = await runner.one(prompts[sent % len(prompts)], bodies[sent % len(prompts)])
            results.append((sent, res))
            runner.check_abort(res, abort_after, timeout_abort)
            if progress is not None:
                progress(sent, res)

    tasks = [asyncio.ensure_future(worker(j)) for j in range(top)]
    ann = asyncio.ensure_future(announcer())
    try:
        await asyncio.gather(*tasks)
        duration = time.perf_counter() - start
    finally:
        wd.cancel()
        ann.cancel()
        for tsk in tasks:
            if not tsk.done():
                tsk.cancel()
    results.sort(key=lambda pair: pair[0])
    return [res for _sent, res in results], duration, start, total


def run_phases(target, prompts, phases, abort_after_failures=0, progress=None, on_phase=None):
    """A moving closed-loop load (:mod:`.phases`): for each phase in turn, at most its ``concurrency`` requests in flight
    for its ``duration_s`` seconds, every finished request replaced at once by the next prompt (``prompts`` cycled in
    order). At a boundary to a lower cap the requests above it finish (none is cut); no request starts after the last
    phase ends, and the run ends when the last one in flight does.

    Args:
      target (Target): server, backend and timeouts.
      prompts (list of Prompt): single-turn prompts, cycled (a conversation's turns are refused).
      phases (list of dict): ``{"concurrency": int >= 1, "duration_s": float > 0}``, checked by
        :func:`.phases.check_phases`.
      abort_after_failures (int): stop starting requests after this many consecutive failures (0 = never), or earlier
        after a wave of consecutive stalls/timeouts (max(2, the highest concurrency)), as :func:`run_benchmark`.
      progress (callable or None): ``progress(index, RequestResult)`` after each request.
      on_phase (callable or None): ``on_phase(k)`` at the start of phase ``k`` (0-based), e.g. to sample the
        server's ``sglang:spec_num_steps``; it runs on the event loop, so it must be quick.

    Returns ``(results, duration_s, start, total_s)``: the :class:`RequestResult` of every request sent, in the order
    they were sent (which is their start order): ``results[i]`` answered ``prompts[i % len(prompts)]``; the wall time (s)
    from the start to the end of the last request; the ``time.perf_counter()`` value the phase offsets count from (for
    :func:`.phases.phase_metrics`); the phases' total (s).
    Raises BenchError for empty prompts, a conversation prompt, or bad phases; never for server-side failures.
    """
    try:
        phases = bench_phases.check_phases(phases)
    except bench_phases.PhaseError as exc:
        raise BenchError(str(exc))
    if not prompts:
        raise BenchError("a moving load needs at least one prompt")
    if any(p.turns for p in prompts):
        raise BenchError("a moving load sends single prompts; multi-turn conversations are not supported with phases")
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_run_phases(target, prompts, phases, abort_after_failures, progress, on_phase))
    finally:
        loop.close()


def flatten(prompts, results, reason):
    """One :class:`RequestResult` per request, in prompt order, a conversation's turns in turn order.

    ``results[i]`` is a RequestResult, a list of them (the turns a conversation sent), or None (not sent); the turns
    that have none get a failed result with ``reason``, so the list always has ``sum(p.requests())`` entries."""
    flat = []
    for i, p in enumerate(prompts):
        res = results[i]
        if p.turns:
            got = list(res or [])
            for k in range(len(got), len(p.turns)):
                got.append(RequestResult(error=reason, conversation=i, turn=k + 1))
            flat.extend(got)
        else:
            flat.append(res if res is not None else RequestResult(prompt_len=p.prompt_len, error=reason))
    return flat


def send_offsets(n, request_rate=None, burstiness=1.0, seed=1, arrival_offsets=None):
    """The send offsets (s from the start of the run) of ``n`` requests: ``arrival_offsets`` when given, else
    :func:`arrivals.offsets` of the rate and burstiness. Raises BenchError for a bad rate/burstiness or a
    number of offsets other than ``n``."""
    if arrival_offsets is not None:
        if len(arrival_offsets) != n:
            raise BenchError("arrival_offsets has %d entries for %d prompts; give one send offset (s) per prompt"
                             % (len(arrival_offsets), n))
        return list(arrival_offsets)
    try:
        return arrivals.offsets(n, request_rate, burstiness, seed)
    except arrivals.ArrivalError as exc:
        raise BenchError(str(exc))


def run_benchmark(target, prompts, max_concurrency=None, request_rate=None, warmup_prompts=None, seed=1,
                  abort_after_failures=0, progress=None, burstiness=1.0, arrival_offsets=None, start=None):
    """Send ``prompts`` to ``target`` and return ``(results, duration_s, warmup_results)``.

    ``results`` has one :class:`RequestResult` per request (:func:`flatten`): a multi-turn conversation (a Prompt with
    ``turns``) sends its turns one after the other, holds one ``max_concurrency`` slot and one arrival for all of them,
    and gives one result per turn (``conversation`` and ``turn`` set); a turn that fails ends its conversation (the
    later turns are failed results saying so).

    Args:
      target (Target): server, backend and timeouts.
      prompts (list of Prompt): the measured requests.
      max_concurrency (int or None): at most this many requests in flight (bench_serving
        ``--max-concurrency``); None or 0 = no limit.
      request_rate (float or None): Poisson arrivals at this many req/s (exponential gaps drawn
        from ``seed``); None, 0 or inf = all at once (bench_serving's default ``inf``).
      burstiness (float): > 0; 1.0 = Poisson, else gamma gaps of the same mean rate and coefficient of
        variation 1/sqrt(burstiness) (:mod:`arrivals`, vLLM ``--burstiness``). Needs a finite ``request_rate``.
      arrival_offsets (list of float or None): explicit send offsets (s from the start of the run, one per
        prompt, non-decreasing), e.g. :func:`arrivals.trace_offsets` of a trace; replaces the rate.
      start (float or None): ``time.perf_counter()`` value the offsets count from (several client processes share
        one; CLOCK_MONOTONIC is system-wide on Linux); None = when the measured run begins.
      warmup_prompts (list of Prompt or None): sent first, concurrently, and not counted.
      abort_after_failures (int): stop sending new requests after this many consecutive failures
        (0 = never), or earlier, after a whole wave of consecutive stalls/timeouts (max(2, max_concurrency)
        requests, at most abort_after_failures): a hung server then costs two stall timeouts at concurrency 1,
        not abort_after_failures of them. Unsent requests are reported as failed with the reason.
      progress (callable or None): called as ``progress(index, RequestResult)`` after each request.

    ``duration_s`` is the wall time of the measured run in seconds (perf_counter), from before the
    first dispatch to after the last request ended, as bench_serving measures ``benchmark_duration``.
    Never raises for server-side failures; they are in the results.
    """
    if max_concurrency is not None and max_concurrency < 0:
        raise BenchError("max_concurrency must be >= 1 (or empty for no limit), got %r" % (max_concurrency,))
    if request_rate is not None and request_rate < 0:
        raise BenchError("request_rate must be > 0 req/s (or empty/inf for all at once), got %r" % (request_rate,))
    offsets = send_offsets(len(prompts), request_rate, burstiness, seed, arrival_offsets)
    if offsets and not any(offsets):
        offsets = None    # all at once: no sleeping at all
    loop = asyncio.new_event_loop()
    try:
        warm = []
        if warmup_prompts:
            warm, _d = loop.run_until_complete(_run(target, warmup_prompts, len(warmup_prompts), None,
                                                    abort_after_failures, None))
        results, duration = loop.run_until_complete(
            _run(target, prompts, max_concurrency, offsets, abort_after_failures, progress, start))
        return results, duration, warm
    finally:
        loop.close()
