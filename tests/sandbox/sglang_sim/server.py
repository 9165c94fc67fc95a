"""The simulator's HTTP API (SGLang ``entrypoints/http_server.py`` and the OpenAI-compatible routes).

Routes: ``/health``, ``/health_generate`` (503 while starting), ``/server_info`` (0.5.9+),
``/get_server_info``, ``/model_info`` (0.5.9+), ``/get_model_info``, ``/v1/models``, ``/generate``,
``/v1/completions``, ``/v1/chat/completions``, ``/flush_cache``, ``/metrics`` (``--enable-metrics``).
With ``--api-key`` every route except ``/health*`` and ``/metrics`` needs ``Authorization: Bearer <key>``
(401 ``{"error": "Unauthorized"}``), as SGLang's API-key middleware does.

Per-chunk payloads are assembled from pre-encoded byte pieces; the cumulative ``text`` and
``output_ids`` of ``/generate`` streams are kept as growing bytearrays (token texts are short ASCII,
already JSON-safe), so a chunk costs one join, not a JSON serialisation.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
import traceback
import uuid

from sglang_sim.acceptance import accept_probability, long_context_p
from sglang_sim.engine import NV, TOKEN_ID, HIST_BUCKETS, Request, token_text
from sglang_sim.httpconn import HttpConn
from sglang_sim.prefix_cache import page_keys

_WORD = re.compile(r"\w+|[^\w\s]")
DONE = b"data: [DONE]\n\n"


def count_tokens(text):
    """Stand-in tokenizer: one token per word or punctuation mark (at least 1)."""
    return max(1, len(_WORD.findall(text)))


class ClientError(Exception):
    """Bad request from the client: ``status`` (HTTP code) and ``message`` (SGLang-style text)."""
    def __init__(self, message, status=400):
        Exception.__init__(self, message)
        self.status = status
        self.message = message


class Ctx(object):
    """Per-request pre-encoded pieces for the emitters."""
    __slots__ = ("kind", "conn", "stream", "text_buf", "ids_buf", "meta_head", "meta_mid", "head", "tail", "model", "created", "rid",
                 "include_usage", "stream_output", "app", "first", "batch", "index", "spec_details")


class Batch(object):
    """A batch ``/generate`` (lists in ``text``/``input_ids``): ``remaining`` requests, ``results`` (bytes per index,
    non-stream), ``reqs``; the stream ends (``data: [DONE]``) or the JSON list is sent when the last one finishes."""
    __slots__ = ("remaining", "results", "reqs", "failed")

    def __init__(self, size):
        self.remaining = size
        self.results = [b"null"] * size
        self.reqs = []
        self.failed = False


class App(object):
    """The HTTP side of the simulated server: routes, /server_info, /metrics and the per-request payload pieces."""
    def __init__(self, cfg, engine, log):
        self.cfg = cfg
        self.engine = engine
        self.log = log
        self.vt = cfg.vt
        self.status = "starting"
        self.created = int(time.time())
        self.start_time = time.time()
        self.gen_requests = 0
        self.conns = set()
        self.api_key = cfg.args.api_key
        self.crash_after = cfg.knobs["crash_after"]
        self.dummy = cfg.args.node_rank >= 1
        sa = cfg.server_args
        self.model_json = json.dumps(cfg.served_model_name)
        self.metric_labels = 'engine_type="unified",model_name=%s,moe_ep_rank="0",pp_rank="0",tp_rank="0"' % json.dumps(cfg.served_model_name)
        self.model_label = "model_name=%s" % json.dumps(cfg.served_model_name)
        self.stream_output = bool(sa.get("stream_output"))

    # -- plumbing ----------------------------------------------------------------------------------
    def protocol_factory(self):
        """asyncio protocol factory: one :class:`HttpConn` per client connection."""
        conn = HttpConn(self)
        self.conns.add(conn)
        return conn

    def connection_gone(self, conn):
        """A client went away: its request (if any, already flagged aborted by the connection) leaves the scheduler."""
        self.conns.discard(conn)
        for req in conn.request or ():
            if req.aborted and not req.finished and not req.internal:
                self.engine.counters["num_aborted_requests_total"] += 1
        self.engine.wake.set()

    def engine_wake(self):
        """A paused stream can be written again: let the scheduler look at it."""
        self.engine.wake.set()

    def log_access(self, conn, status, reason):
        """uvicorn access line for the request being answered on ``conn``."""
        self.log.access(conn.peer, conn.method, conn.path, conn.http_version, status, reason)

    # -- dispatch ------------------------------------------------------------------------------------
    def handle(self, conn, method, path, query, headers, body):
        """Serve one parsed request (called by HttpConn); client errors become 400/401/404/405, bugs become 500.

        ``HEAD`` is served as ``GET`` on every route and answered with the GET's status and headers
        (``content-length`` included) and no body (HttpConn drops it), as Starlette adds HEAD to each GET route
        and uvicorn sends no body for HEAD; on a POST-only route it is a 405, also without a body."""
        if method == "HEAD":
            method = "GET"
        try:
            self._route(conn, method, path, headers, body)
        except ClientError as exc:
            self._client_error(conn, path, exc)
        except Exception as exc:  # a simulator bug must not hang the client: 500 with the reason, logged
            self.log.line("ERROR:    Exception in ASGI application\n" + traceback.format_exc().rstrip())
            if not conn.closed and conn.busy:
                conn.keep_alive = False
                conn.send_json(500, {"error": {"message": "simulator internal error: %s: %s" % (type(exc).__name__, exc)}})

    @staticmethod
    def _client_error(conn, path, exc):
        """Bad request: SGLang's error shapes (OpenAI routes: ErrorResponse; native routes: {"error": {"message"}})."""
        if path.startswith("/v1/"):
            conn.send_json(exc.status, {"object": "error", "message": exc.message, "type": "BadRequestError", "param": None, "code": exc.status})
        else:
            conn.send_json(exc.status, {"error": {"message": exc.message}})

    def _route(self, conn, method, path, headers, body):
        vt = self.vt
        if path in ("/health", "/health_generate"):
            if method != "GET":
                return conn.send_json(405, {"detail": "Method Not Allowed"})
            return self._health(conn)
        if self.dummy:
            return conn.send_json(404, {"detail": "Not Found"})
        if path == "/metrics":
            if not self.cfg.args.enable_metrics:
                return conn.send_json(404, {"detail": "Not Found"})
            return conn.send(200, self.metrics_text().encode("utf-8"), "text/plain; version=0.0.4; charset=utf-8")
        if self.api_key and headers.get("authorization", "") != "Bearer " + self.api_key:
            return conn.send_json(401, {"error": "Unauthorized"})
        gets = {"/get_server_info": self.server_info, "/get_model_info": self.model_info, "/v1/models": self.v1_models}
        if vt >= (0, 5, 9):
            gets["/server_info"] = self.server_info
            gets["/model_info"] = self.model_info
        posts = {"/generate": self.generate, "/v1/completions": self.completions, "/v1/chat/completions": self.chat, "/flush_cache": None}
        if path in gets:
            if method != "GET":
                return conn.send_json(405, {"detail": "Method Not Allowed"})
            if vt >= (0, 5, 9) and path in ("/get_server_info", "/get_model_info"):
                self.log.line("Endpoint '%s' is deprecated and will be removed in a future version. Please use '%s' instead."
                              % (path, path.replace("/get_", "/")))
            return conn.send_json(200, gets[path]())
        if path in posts:
            if method not in ("POST", "PUT") and not (path == "/flush_cache" and method == "GET"):
                return conn.send_json(405, {"detail": "Method Not Allowed"})
            if path == "/flush_cache":
                if self.engine.prefix_cache is not None and not self.engine.busy:
                    self.engine.prefix_cache.clear()
                return conn.send(200, b"Cache flushed.\nPlease check backend logs for more details. "
                                 b"(When there are running or waiting requests, the operation will not be performed.)\n", "text/plain")
            try:
                payload = json.loads(body.decode("utf-8") or "{}")
            except ValueError as exc:
                raise ClientError("request body is not valid JSON: %s" % exc)
            if not isinstance(payload, dict):
                raise ClientError("request body must be a JSON object")
            self.gen_requests += 1
            if self.crash_after and self.gen_requests > self.crash_after:
                self.crash()
            return posts[path](conn, payload)
        return conn.send_json(404, {"detail": "Not Found"})

    # -- health / info ---------------------------------------------------------------------------------
    def _health(self, conn):
        if self.dummy:
            return conn.send(200 if self.status == "ready" else 503, b"", "text/plain")
        if self.status != "ready":
            return conn.send(503, b"", "text/plain")
        env = self.cfg.env
        if str(env.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "true")).lower() in ("0", "false", "no", "off") or self.engine.busy:
            return conn.send(200, b"", "text/plain")
        req = Request("HEALTH_CHECK_%s" % uuid.uuid4().hex[:8], 1, 1, _emit_internal, internal=True)
        req.future = asyncio.get_event_loop().create_future()
        timeout = float(env.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20") or 20)

        async def wait():
            """Answer 200 once the health generation produced its token, 503 after SGLANG_HEALTH_CHECK_TIMEOUT s."""
            try:
                await asyncio.wait_for(asyncio.shield(req.future), timeout)
            except asyncio.TimeoutError:
                req.aborted = True
                self.log.line("Health check failed. Server couldn't get a response from detokenizer for last %d seconds. tic start time: %s. "
                              "last_heartbeat time: %s" % (timeout, time.strftime("%H:%M:%S"), time.strftime("%H:%M:%S")))
                conn.send(503, b"", "text/plain")
                return
            conn.send(200, b"", "text/plain")
        self.engine.submit(req)
        asyncio.ensure_future(wait())

    def server_info(self):
        """/server_info JSON: flattened server args, scheduler info, internal_states (one per DP rank), version."""
        cfg = self.cfg
        eng = self.engine
        sa = cfg.server_args
        info = {}
        if self.vt >= (0, 5, 23):
            info["launch_command"] = "python3 -m sglang.launch_server " + " ".join(cfg.argv)
            info["startup_time"] = self.start_time
            info["kv_events"] = None
            info["frontend"] = "python"
        info.update(sa)
        info["status"] = "ready" if self.status == "ready" else "starting"
        info["max_total_num_tokens"] = cfg.max_total_num_tokens
        info["max_req_input_len"] = cfg.max_req_input_len
        state = dict(sa)
        state["max_total_num_tokens"] = cfg.max_total_num_tokens
        state["max_req_input_len"] = cfg.max_req_input_len
        state["last_gen_throughput"] = round(eng.last_gen_throughput, 2)
        state["memory_usage"] = {"weight": cfg.weight_gb + cfg.draft_gb, "kvcache": round(12.0 * cfg.max_total_num_tokens / 1048576.0, 2),
                                 "token_capacity": cfg.max_total_num_tokens, "graph": 1.73 if cfg.spec else 1.2}
        state["effective_max_running_requests_per_dp"] = cfg.effective_mrr
        avg = eng.avg_spec_accept_length()
        if avg is not None:
            state["avg_spec_accept_length"] = avg
        info["internal_states"] = [dict(state) for _rank in range(max(1, cfg.args.dp_size))]   # one entry per DP rank
        info["version"] = cfg.version
        return info

    def model_info(self):
        """/model_info JSON (0.5.9+ adds has_image_understanding, has_audio_understanding, model_type, architectures)."""
        cfg = self.cfg
        info = {"model_path": cfg.server_args["model_path"], "tokenizer_path": cfg.server_args["tokenizer_path"], "is_generation": True,
                "preferred_sampling_params": None, "weight_version": "default"}
        if self.vt >= (0, 5, 9):
            info["has_image_understanding"] = cfg.arch.endswith("ConditionalGeneration")
            info["has_audio_understanding"] = False
            info["model_type"] = cfg.model_type
            info["architectures"] = [cfg.arch]
        return info

    def v1_models(self):
        """/v1/models JSON: one card, id = served model name, max_model_len = context length (tokens)."""
        name = self.cfg.served_model_name
        return {"object": "list", "data": [{"id": name, "object": "model", "created": self.created, "owned_by": "sglang", "root": name,
                                            "parent": None, "max_model_len": self.cfg.context_len}]}

    def metrics_text(self):
        """Prometheus text exposition (0.0.4) with the names and labels of SGLang 0.5.9 (metrics-mtp.prom), per version:
        0.4.10 has no ``sglang:spec_accept_rate``; 0.5.14+ add ``sglang:spec_num_steps``, ``sglang:spec_num_draft_tokens``
        and ``sglang:spec_verify_calls_total`` (names checked against each wheel by tests/contract)."""
        eng = self.engine
        out = []
        lab = self.metric_labels
        helps = {"num_running_reqs": "The number of running requests.", "num_used_tokens": "The number of used tokens.",
                 "token_usage": "The token usage.", "mamba_usage": "The mamba state usage.", "gen_throughput": "The generation throughput (token/s).",
                 "num_queue_reqs": "The number of requests in the waiting queue.",
                 "spec_accept_length": "The average acceptance length of speculative decoding.",
                 "spec_accept_rate": "The average acceptance rate of speculative decoding.", "is_cuda_graph": "Whether the batch is using CUDA graph.",
                 "cache_hit_rate": "The prefix cache hit rate.", "max_total_num_tokens": "Maximum total number of tokens in the KV cache pool."}
        gauges = dict(eng.gauges)
        if self.vt < (0, 5, 0):
            # 0.4.10 metrics_collector.py declares sglang:spec_accept_length only (no spec_accept_rate)
            gauges.pop("spec_accept_rate", None)
        if self.vt >= (0, 5, 14):
            # 0.5.14+ observability/metrics_collector.py: the active draft shape as gauges
            gauges["spec_num_steps"] = float(eng.steps if eng.spec else 0)
            gauges["spec_num_draft_tokens"] = float(eng.ndraft if eng.spec else 0)
            helps["spec_num_steps"] = "Currently active speculative_num_steps."
            helps["spec_num_draft_tokens"] = "Currently active speculative_num_draft_tokens (decouples from steps under topk>1)."
        for name, value in gauges.items():
            if name == "mamba_usage" and not self.cfg.hybrid:
                continue
            out.append("# HELP sglang:%s %s\n# TYPE sglang:%s gauge\nsglang:%s{%s} %s" % (name, helps[name], name, name, lab, _num(value)))
        chelps = {"prompt_tokens_total": "Number of prefill tokens processed.", "generation_tokens_total": "Number of generation tokens processed.",
                  "num_requests_total": "Number of requests processed.", "num_aborted_requests_total": "Number of requests aborted.",
                  "cached_tokens_total": "Number of cached prompt tokens."}
        counters = dict(eng.counters)
        if self.vt >= (0, 5, 14) and eng.spec:
            # 0.5.14+ sglang:spec_verify_calls_total: each finished request adds its spec_verify_ct
            # (observability/metrics_collector.py observe_one_finished_request), so it moves with generation_tokens_total
            counters["spec_verify_calls_total"] = eng.finished_verify
            chelps["spec_verify_calls_total"] = "Number of speculative decoding verification calls."
        for name, value in counters.items():
            out.append("# HELP sglang:%s %s\n# TYPE sglang:%s counter\nsglang:%s{%s} %s" % (name, chelps[name], name, name, self.model_label, _num(value)))
        hhelps = {"time_to_first_token_seconds": "Histogram of time to first token in seconds.",
                  "e2e_request_latency_seconds": "Histogram of End-to-end request latency in seconds",
                  "inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
                  "queue_time_seconds": "Histogram of queueing time in seconds."}
        for name, hist in eng.hist.items():
            lines = ["# HELP sglang:%s %s" % (name, hhelps[name]), "# TYPE sglang:%s histogram" % name]
            cum = 0
            for bound, count in zip(HIST_BUCKETS, hist.counts):
                cum += count
                lines.append('sglang:%s_bucket{le="%s",%s} %s' % (name, _num(bound), self.model_label, _num(cum)))
            lines.append('sglang:%s_bucket{le="+Inf",%s} %s' % (name, self.model_label, _num(hist.n)))
            lines.append("sglang:%s_sum{%s} %s" % (name, self.model_label, _num(round(hist.total, 6))))
            lines.append("sglang:%s_count{%s} %s" % (name, self.model_label, _num(hist.n)))
            out.append("\n".join(lines))
        return "\n".join(out) + "\n"

    # -- generation ------------------------------------------------------------------------------------
    def _check_len(self, prompt_len, max_new):
        ctx = self.cfg.context_len
        if prompt_len + max_new > ctx:
            raise ClientError("Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: "
                              "%d tokens from the input messages and %d tokens for the completion. Please reduce the number of tokens in the input "
                              "messages or the completion to fit within the limit." % (ctx, prompt_len + max_new, prompt_len, max_new))

    @staticmethod
    def _int_param(value, name, default):
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ClientError("%s must be a non-negative integer, got %r" % (name, value))
        return value

    def _accept_p(self, text, temperature, top_p):
        """Per-draft-token acceptance of a request from its prompt text (None: token ids) and sampling settings
        (acceptance.py); never from a category label the client sends."""
        return accept_probability(text, self.engine.p, temperature, top_p)[0]

    def _new_request(self, conn, kind, stream, prompt_len, max_new, rid, include_usage=False, batch=None, index=0, tokens=None,
                     accept_p=None, spec_details=False):
        """Create the engine Request and its pre-encoded pieces, start the stream head once, queue it.

        ``tokens`` (the prompt's ids or words) feed the prefix cache (prefix_cache.py) when it is on; ``accept_p`` is the
        request's per-draft-token acceptance (acceptance.py; None = SGLANG_SIM_ACCEPT_P); ``spec_details``: an OpenAI
        request's ``return_spec_tokens_details`` (honoured from 0.5.23 with speculation on, see :meth:`spec_tokens_details`)."""
        c = Ctx()
        c.batch = batch
        c.index = index
        c.kind = kind
        c.conn = conn
        c.stream = stream
        c.rid = rid
        c.app = self
        c.first = True
        c.include_usage = include_usage
        c.spec_details = bool(spec_details) and self.vt >= (0, 5, 23) and bool(self.cfg.spec and self.cfg.num_steps > 0)
        c.stream_output = self.stream_output
        c.created = int(time.time())
        c.model = self.model_json
        if kind == "generate":
            c.text_buf = bytearray()
            c.ids_buf = bytearray()
            c.meta_head = ('], "meta_info": {"id": %s, "finish_reason": ' % json.dumps(rid)).encode()
            c.meta_mid = (', "prompt_tokens": %d, "weight_version": "default", "total_retractions": 0, "completion_tokens": ' % prompt_len).encode()
            c.tail = None    # built at the first chunk, after the prefill found the cached tokens (_emit_generate)
        elif kind == "completion":
            c.head = ('data: {"id":%s,"object":"text_completion","created":%d,"model":%s,"choices":[{"index":0,"text":"'
                      % (json.dumps(rid), c.created, c.model)).encode()
            c.text_buf = bytearray() if not stream else None
        else:
            c.head = ('data: {"id":%s,"object":"chat.completion.chunk","created":%d,"model":%s,"choices":[{"index":0,"delta":{"role":null,"content":"'
                      % (json.dumps(rid), c.created, c.model)).encode()
            c.text_buf = bytearray() if not stream else None
        if accept_p is not None:   # long prompts: acceptance falls past the draft's training length (acceptance.py)
            accept_p = long_context_p(accept_p, prompt_len, self.cfg.num_steps, self.cfg.knobs["draft_train_len"])
        req = Request(rid, prompt_len, max_new, _EMITTERS[kind], _fail, conn=conn, ctx=c, accept_p=accept_p)
        if tokens is not None and self.engine.prefix_cache is not None:
            req.prefix_keys = page_keys(tokens)
        if batch is None or index == 0:
            conn.request = [req]
            if stream:
                conn.start_stream()
        else:
            conn.request.append(req)
        if batch is not None:
            batch.reqs.append(req)
        self.engine.submit(req)
        return req

    def generate(self, conn, body):
        """POST /generate: ``text`` or ``input_ids`` (a list of them is a batch), ``sampling_params.max_new_tokens``
        (default 128), ``stream``, ``rid``. A batch answers a JSON list (non-stream) or chunks carrying ``index``."""
        if "text" in body and body["text"] is not None:
            text = body["text"]
            texts = text if isinstance(text, list) else [text]
            if not texts or not all(isinstance(t, str) for t in texts):
                raise ClientError("text must be a string or a non-empty list of strings")
            prompt_lens = [count_tokens(t) for t in texts]
            token_rows = [_WORD.findall(t) for t in texts] if self.engine.prefix_cache is not None else None
            is_batch = isinstance(text, list)
            prompt_texts = texts
        elif "input_ids" in body and body["input_ids"] is not None:
            ids = body["input_ids"]
            is_batch = isinstance(ids, list) and bool(ids) and isinstance(ids[0], list)
            rows = ids if is_batch else [ids]
            for row in rows:
                if not isinstance(row, list) or not row or not all(isinstance(i, int) and not isinstance(i, bool) for i in row):
                    raise ClientError("input_ids must be a non-empty list of token ids (int), or a list of such lists")
            prompt_lens = [len(row) for row in rows]
            token_rows = rows
            prompt_texts = [None] * len(rows)
        else:
            raise ClientError("Either text or input_ids should be provided.")
        sps = body.get("sampling_params") or {}
        sps = sps if isinstance(sps, list) else [sps] * len(prompt_lens)
        if len(sps) != len(prompt_lens) or not all(isinstance(sp, dict) for sp in sps):
            raise ClientError("sampling_params must be an object (or a list of objects, one per prompt)")
        max_news = [self._int_param(sp.get("max_new_tokens"), "sampling_params.max_new_tokens", 128) for sp in sps]
        accept_ps = [self._accept_p(t, sp.get("temperature"), sp.get("top_p")) for t, sp in zip(prompt_texts, sps)]
        for prompt_len, max_new in zip(prompt_lens, max_news):
            self._check_len(prompt_len, max_new)
        rids = body.get("rid")
        rids = rids if isinstance(rids, list) else [rids] * len(prompt_lens)
        stream = bool(body.get("stream"))
        if not is_batch:
            self._new_request(conn, "generate", stream, prompt_lens[0], max_news[0], str(rids[0] or uuid.uuid4().hex),
                              tokens=token_rows[0] if token_rows else None,
                              accept_p=accept_ps[0])
            return
        batch = Batch(len(prompt_lens))
        for index, (prompt_len, max_new) in enumerate(zip(prompt_lens, max_news)):
            rid = rids[index] if index < len(rids) and rids[index] else uuid.uuid4().hex
            self._new_request(conn, "generate", stream, prompt_len, max_new, str(rid), batch=batch, index=index,
                              tokens=token_rows[index] if token_rows else None,
                              accept_p=accept_ps[index])

    def completions(self, conn, body):
        """POST /v1/completions: ``prompt`` (str or token ids), ``max_tokens`` (default 16), ``stream``, ``stream_options``."""
        prompt = body.get("prompt")
        text = None
        if isinstance(prompt, str):
            prompt_len = count_tokens(prompt)
            tokens = _WORD.findall(prompt)
            text = prompt
        elif isinstance(prompt, list) and prompt and all(isinstance(i, int) and not isinstance(i, bool) for i in prompt):
            prompt_len = len(prompt)
            tokens = prompt
        elif isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt_len = count_tokens(prompt[0])
            tokens = _WORD.findall(prompt[0])
            text = prompt[0]
        else:
            raise ClientError("prompt must be a string, a list with one string, or a list of token ids (batches are not supported by the simulator)")
        max_new = self._int_param(body.get("max_tokens"), "max_tokens", 16)
        self._check_len(prompt_len, max_new)
        opts = body.get("stream_options") or {}
        self._new_request(conn, "completion", bool(body.get("stream")), prompt_len, max_new, "cmpl-" + uuid.uuid4().hex,
                          bool(isinstance(opts, dict) and opts.get("include_usage")), tokens=tokens,
                          accept_p=self._accept_p(text, body.get("temperature"), body.get("top_p")),
                          spec_details=body.get("return_spec_tokens_details") is True)

    def chat(self, conn, body):
        """POST /v1/chat/completions: ``messages``, ``max_completion_tokens``/``max_tokens`` (default 128), ``stream``."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ClientError("messages must be a non-empty list")
        prompt_len = 3
        tokens = []
        contents = []
        for msg in messages:
            content = msg.get("content") if isinstance(msg, dict) else None
            if isinstance(content, list):
                content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            prompt_len += 4 + (count_tokens(content) if isinstance(content, str) and content else 0)
            # the chat template's framing of one message (4 tokens), then its words
            tokens.extend(["<|im_start|>", str(msg.get("role") if isinstance(msg, dict) else ""), "\n", "<|im_end|>"])
            tokens.extend(_WORD.findall(content) if isinstance(content, str) else [])
            if isinstance(content, str) and content:
                contents.append(content)
        max_new = body.get("max_completion_tokens")
        if max_new is None:
            max_new = body.get("max_tokens")
        max_new = self._int_param(max_new, "max_tokens", 128)
        self._check_len(prompt_len, max_new)
        opts = body.get("stream_options") or {}
        self._new_request(conn, "chat", bool(body.get("stream")), prompt_len, max_new, "chatcmpl-" + uuid.uuid4().hex,
                          bool(isinstance(opts, dict) and opts.get("include_usage")), tokens=tokens,
                          accept_p=self._accept_p("\n\n".join(contents), body.get("temperature"), body.get("top_p")),
                          spec_details=body.get("return_spec_tokens_details") is True)

    def final_meta(self, req):
        """meta_info of the finishing chunk (dict, SGLang 0.5.9 key order; spec fields by version)."""
        cfg = self.cfg
        meta = {"id": req.rid, "finish_reason": {"type": "length", "length": req.max_new}, "prompt_tokens": req.prompt_len,
                "weight_version": "default", "total_retractions": 0, "completion_tokens": req.out_len, "cached_tokens": req.cached,
                "e2e_latency": round(time.monotonic() - req.t_arrival, 6)}
        if cfg.spec and cfg.num_steps > 0:
            verify = req.verify_ct
            proposed = verify * max(1, cfg.num_draft_tokens - 1)
            length = req.out_len / float(verify) if verify else 1.0
            if self.vt < (0, 5, 0):
                # 0.4.10 tokenizer_manager.py: only the verify count
                meta["spec_verify_ct"] = verify
            elif self.vt < (0, 5, 9):
                meta["spec_accept_rate"] = req.accepted / float(verify * cfg.num_steps) if verify else 0.0
                meta["spec_accept_length"] = length
                meta["spec_verify_ct"] = verify
            elif self.vt < (0, 5, 14):
                meta["spec_accept_rate"] = req.accepted / float(proposed) if proposed else 0.0
                meta["spec_accept_length"] = length
                meta["spec_accept_token_num"] = req.accepted
                meta["spec_draft_token_num"] = proposed
                meta["spec_verify_ct"] = verify
            else:
                meta["spec_accept_rate"] = req.accepted / float(proposed) if proposed else 0.0
                meta["spec_accept_length"] = length
                meta["spec_num_correct_drafts"] = req.accepted
                meta["spec_num_proposed_drafts"] = proposed
                meta["spec_verify_ct"] = verify
                if self.vt < (0, 5, 23):
                    # 0.5.14 keeps backward-compatible aliases ("FIXME: ... remove in next release"); 0.5.23 dropped them
                    meta["spec_accepted_drafts"] = req.accepted
                    meta["spec_proposed_drafts"] = proposed
        if cfg.args.enable_metrics:
            t_sched = req.t_sched or req.t_arrival
            wall = time.time() - (time.monotonic() - req.t_arrival)
            meta["queue_time"] = round(t_sched - req.t_arrival, 6)
            meta["request_received_ts"] = wall
            meta["inference_time"] = round(time.monotonic() - t_sched, 6)
            decode_s = (req.t_last or t_sched) - (req.t_first or t_sched)
            meta["decode_throughput"] = round((req.out_len - 1) / decode_s, 3) if decode_s > 0 and req.out_len > 1 else 0.0
        return meta

    def spec_tokens_details(self, req):
        """``sglext`` JSON (str) of an OpenAI response whose request set ``return_spec_tokens_details`` (SGLang 0.5.23:
        ``entrypoints/openai/utils.py`` ``spec_tokens_details_from_meta_info`` copies the final meta_info's spec keys into
        ``SpecTokensDetails``, absent ones as 0 / 0.0 / []); '' when the request did not ask or the version has no such field
        (before 0.5.23 the OpenAI routes return no speculative fields at all)."""
        if not req.ctx.spec_details:
            return ""
        meta = self.final_meta(req)
        details = {"spec_accept_rate": meta.get("spec_accept_rate") or 0.0, "spec_accept_length": meta.get("spec_accept_length") or 0.0,
                   "spec_cap_length": 0.0, "spec_block_accept_length": 0.0,
                   "spec_num_correct_drafts": meta.get("spec_num_correct_drafts") or 0,
                   "spec_num_proposed_drafts": meta.get("spec_num_proposed_drafts") or 0,
                   "spec_verify_ct": meta.get("spec_verify_ct") or 0,
                   "spec_correct_drafts_histogram": [], "spec_cap_lens_histogram": []}
        return json.dumps({"spec_tokens_details": details}, separators=(",", ":"))

    # -- faults -----------------------------------------------------------------------------------------
    def crash(self):
        """SGLANG_SIM_CRASH_AFTER fault: log a scheduler crash as SGLang does and end the process with status 137 (see :func:`die`)."""
        knob = self.cfg.knobs["crash_after"]
        self.log.line("Scheduler hit an exception: Traceback (most recent call last):\n"
                      '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2683, in run_scheduler_process\n'
                      "    scheduler.event_loop_overlap()\n"
                      "RuntimeError: CUDA error: an illegal memory access was encountered "
                      "(simulated fault: SGLANG_SIM_CRASH_AFTER=%d, request %d arrived)" % (knob, self.gen_requests), rank=0)
        self.log.line("Received sigquit from a child process. It usually means the child failed.")
        die()


#: Exit status of a crashed simulator: 128 + SIGKILL (9), what a shell, podman and systemd report for a process
#: killed by SIGKILL, which is how SGLang's ``kill_process_tree`` ends a server whose scheduler died.
CRASH_EXIT_STATUS = 128 + signal.SIGKILL


def die():
    """End this process at once with CRASH_EXIT_STATUS (137), without cleanup, like SGLang's self-SIGKILL.

    ``os._exit`` rather than ``os.kill(os.getpid(), SIGKILL)``: in a container the server is PID 1 of its PID
    namespace, and the kernel drops signals that PID 1 has no handler for when they come from inside the namespace,
    SIGKILL included, so a self-SIGKILL left the process running. ``os._exit`` ends PID 1 too; the kernel closes
    every socket (in-flight streams break), podman reports 137 and systemd sees a failed main process
    (``Restart=on-failure`` restarts it). The log is written with ``os.write`` (unbuffered), so nothing is lost.
    """
    os._exit(CRASH_EXIT_STATUS)


def _num(value):
    """Prometheus text value as prometheus_client prints it (floats: ``1.0``, ``135.04``)."""
    return repr(float(value))


# -- emitters (called by the engine after each step) ---------------------------------------------------------
def _emit_internal(req, start, n, finished):
    return None


def _emit_generate(req, start, n, finished):
    c = req.ctx
    conn = c.conn
    batch = c.batch
    if batch is not None and batch.failed:
        return
    if n:
        c.text_buf += token_text(start, n)
        ids = b", ".join([TOKEN_ID[j % NV] for j in range(start, start + n)])
        if c.stream_output and c.stream:
            c.ids_buf = bytearray(ids)
        elif c.ids_buf:
            c.ids_buf += b", " + ids
        else:
            c.ids_buf += ids
    if not finished:
        if c.stream:
            if c.tail is None:
                c.tail = (b', "cached_tokens": %d}}\n\n' % req.cached if batch is None
                          else b', "cached_tokens": %d}, "index": %d}\n\n' % (req.cached, c.index))
            conn.write_chunk(b"".join((b'data: {"text": "', c.text_buf, b'", "output_ids": [', c.ids_buf, c.meta_head, b"null", c.meta_mid,
                                       b"%d" % req.out_len, c.tail)))
        return
    meta = json.dumps(c.app.final_meta(req)).encode()
    body = b"".join((b'{"text": "', c.text_buf, b'", "output_ids": [', c.ids_buf, b'], "meta_info": ', meta,
                     b"}" if batch is None else b', "index": %d}' % c.index))
    if batch is None:
        if c.stream:
            conn.write_chunk(b"data: " + body + b"\n\n" + DONE)
            conn.end_stream()
        else:
            conn.send(200, body)
        return
    batch.remaining -= 1
    if c.stream:
        conn.write_chunk(b"data: " + body + b"\n\n" + (DONE if batch.remaining == 0 else b""))
        if batch.remaining == 0:
            conn.end_stream()
        return
    batch.results[c.index] = body
    if batch.remaining == 0:
        conn.send(200, b"[" + b", ".join(batch.results) + b"]")


def _sglext_field(req):
    """``,"sglext":{...}`` for a response whose request asked for speculative details (SGLang 0.5.23), else ''."""
    ext = req.ctx.app.spec_tokens_details(req) if req.ctx.spec_details else ""
    return ',"sglext":' + ext if ext else ""


def _usage_json(req):
    return '{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}' % (req.prompt_len, req.out_len, req.prompt_len + req.out_len)


def _emit_completion(req, start, n, finished):
    c = req.ctx
    conn = c.conn
    text = token_text(start, n) if n else b""
    if not c.stream:
        c.text_buf += text
        if finished:
            conn.send(200, ('{"id":%s,"object":"text_completion","created":%d,"model":%s,"choices":[{"index":0,"text":"%s","logprobs":null,'
                            '"finish_reason":"length","matched_stop":null}],"usage":%s%s}'
                            % (json.dumps(req.rid), c.created, c.model, c.text_buf.decode(),
                               _usage_json(req)[:-1] + ',"prompt_tokens_details":null}', _sglext_field(req))).encode())
        return
    if finished:
        out = [c.head, text, b'","logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}\n\n']
        if c.spec_details:
            # 0.5.23 serving_completions.py: a response-level chunk (choices []) with sglext, after the finish chunk
            out.append(('data: {"id":%s,"object":"text_completion","created":%d,"model":%s,"choices":[],"usage":null%s}\n\n'
                        % (json.dumps(req.rid), c.created, c.model, _sglext_field(req))).encode())
        if c.include_usage:
            out.append(('data: {"id":%s,"object":"text_completion","created":%d,"model":%s,"choices":[],"usage":%s}\n\n'
                        % (json.dumps(req.rid), c.created, c.model, _usage_json(req))).encode())
        out.append(DONE)
        conn.write_chunk(b"".join(out))
        conn.end_stream()
        return
    conn.write_chunk(b"".join((c.head, text, b'","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n')))


def _emit_chat(req, start, n, finished):
    c = req.ctx
    conn = c.conn
    text = token_text(start, n) if n else b""
    if not c.stream:
        c.text_buf += text
        if finished:
            conn.send(200, ('{"id":%s,"object":"chat.completion","created":%d,"model":%s,"choices":[{"index":0,"message":{"role":"assistant",'
                            '"content":"%s","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"length","matched_stop":null}],'
                            '"usage":%s%s}' % (json.dumps(req.rid), c.created, c.model, c.text_buf.decode(),
                                               _usage_json(req)[:-1] + ',"prompt_tokens_details":null}', _sglext_field(req))).encode())
        return
    out = []
    if c.first:
        c.first = False
        out.append(c.head.replace(b'"role":null,"content":"', b'"role":"assistant","content":"')
                   + b'","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n')
    if finished:
        out.append(c.head + text + b'","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"length","matched_stop":null}],'
                   b'"usage":null}\n\n')
        if c.spec_details:
            # 0.5.23 serving_chat.py: the sglext chunk (choices []) after the finish chunk, before the usage chunk
            out.append(('data: {"id":%s,"object":"chat.completion.chunk","created":%d,"model":%s,"choices":[],"usage":null%s}\n\n'
                        % (json.dumps(req.rid), c.created, c.model, _sglext_field(req))).encode())
        if c.include_usage:
            out.append(('data: {"id":%s,"object":"chat.completion.chunk","created":%d,"model":%s,"choices":[],"usage":%s}\n\n'
                        % (json.dumps(req.rid), c.created, c.model, _usage_json(req))).encode())
        out.append(DONE)
        conn.write_chunk(b"".join(out))
        conn.end_stream()
        return
    out.append(c.head + text + b'","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n')
    conn.write_chunk(b"".join(out) if len(out) > 1 else out[0])


def _fail(req, message):
    """A fault knob aborted the request: error chunk + [DONE] on streams, HTTP 400 otherwise (SGLang's shapes).

    In a batch stream the other requests go on (``data: [DONE]`` after the last one); a non-stream batch
    answers the first failure with 400 and drops the rest."""
    c = req.ctx
    conn = c.conn
    batch = c.batch
    if batch is not None and batch.failed:
        return
    c.app.log.line("[http_server] Error: %s" % message)
    if c.kind == "generate":
        err = {"error": {"message": message}}
    else:
        err = {"error": {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}}
    if c.stream:
        last = batch is None or batch.remaining == 1
        if batch is not None:
            batch.remaining -= 1
        conn.write_chunk(b"data: " + json.dumps(err).encode() + b"\n\n" + (DONE if last else b""))
        if last:
            conn.end_stream()
        return
    if batch is not None:
        batch.failed = True
        for other in batch.reqs:
            other.aborted = True
    if c.kind == "generate":
        conn.send(400, json.dumps(err).encode())
    else:
        conn.send(400, json.dumps(err["error"]).encode())


_EMITTERS = {"generate": _emit_generate, "completion": _emit_completion, "chat": _emit_chat}
