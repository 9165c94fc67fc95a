"""Entry point of the SGLang simulator (a test double): ``main(argv)`` = ``python3 -m sglang.launch_server argv``.

Sequence (as a real 0.5.9 server with tp 4 prints it, qwen35-122b-mtp-tp4-v0.5.9.log): the
``server_args=ServerArgs(...)`` line, the post-processing warnings, per-rank ``Init torch
distributed`` / ``Load weight begin`` / ``Load weight end`` lines (target, then after the target
CUDA graphs the draft with its MTP class), KV/mamba pool and graph lines, the scheduler limits
line, the uvicorn startup lines, a warm-up request (``GET /get_model_info`` + ``POST /generate``)
and ``The server is fired up and ready to roll!``. Refusals print a traceback ending with SGLang's
exception text and exit 1; argparse errors exit 2; a bad ``SGLANG_SIM_*`` knob exits 2.
"""
from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

from sglang_sim import config as config_mod
from sglang_sim import knobs as knobs_mod
from sglang_sim.engine import Engine, Request
from sglang_sim.logfmt import LogWriter, render_server_args
from sglang_sim.server import App, _emit_internal, die
from sglang_sim.timing import TimingModel

RANK_JITTER = (0.0, 0.06, 0.03, 0.09, 0.02, 0.07, 0.04, 0.08)


def _traceback(log, refusal, rank=None):
    path, lineno, func = refusal.where
    text = "%s: %s" % (refusal.exc_type, refusal.message) if refusal.message else refusal.exc_type
    if refusal.stage == "scheduler":
        log.line("Scheduler hit an exception: Traceback (most recent call last):\n"
                 '  File "/sgl-workspace/sglang/python/%s", line %d, in %s\n%s' % (path, lineno, func, text), rank=rank)
        log.line("Received sigquit from a child process. It usually means the child failed.")
        return
    log.line("Traceback (most recent call last):")
    log.line('  File "<frozen runpy>", line 198, in _run_module_as_main')
    log.line('  File "/sgl-workspace/sglang/python/%s", line %d, in %s' % (path, lineno, func))
    log.line(text)


class Simulator(object):
    """One simulated server process: prints the load phase, then runs the engine and the HTTP server."""
    def __init__(self, cfg, log):
        self.cfg = cfg
        self.log = log
        self.knobs = cfg.knobs
        a = cfg.args
        per_node = max(1, a.tp_size // max(1, a.nnodes))
        self.ranks = list(range(a.node_rank * per_node, (a.node_rank + 1) * per_node))
        self.first = self.ranks[0]
        self.timing = TimingModel.from_knobs(self.knobs, cfg.num_steps, cfg.num_draft_tokens, cfg.topk if cfg.num_steps else 1)
        self.engine = None
        self.app = None

    async def pause(self, fraction):
        """Sleep ``fraction`` of SGLANG_SIM_LOAD_S (s) during the simulated load phase."""
        load_s = self.knobs["load_s"]
        if load_s > 0:
            await asyncio.sleep(load_s * fraction)

    def each_rank(self, message):
        """Log ``message`` (str, or callable(rank) -> str) once per TP rank on this node."""
        for r in self.ranks:
            self.log.line(message(r) if callable(message) else message, rank=r)

    def rank0(self, message):
        """Log ``message`` as TP0 (only on the node that holds rank 0)."""
        if self.first == 0:
            self.log.line(message, rank=0)

    async def load(self):
        """Print the load phase; returns False when a scheduler-stage refusal stopped it."""
        cfg, log, k = self.cfg, self.log, self.knobs
        lw = log.load_weight_end
        mem = k["gpu_mem_gb"]
        self.each_rank("Init torch distributed begin.")
        await self.pause(0.05)
        if cfg.args.tp_size > 1 and not k["p2p"]:
            self.rank0("Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed. To silence this warning, "
                       "specify disable_custom_all_reduce=True explicitly.")
        self.rank0("Init torch distributed ends. elapsed=%.2f s, mem usage=0.61 GB" % (self.knobs["load_s"] * 0.05))
        avail = mem - 0.61 + 0.61  # the recorded log shows the same 93.87 GB before and after init
        self.each_rank("Load weight begin. avail mem=%.2f GB" % avail)
        t = time.monotonic()
        await self.pause(0.5)
        el = time.monotonic() - t
        weight = cfg.weight_gb
        if weight + 2.0 > avail:
            # a real server would stop here (GPU memory exhausted); the stand-in goes on, and says so
            self.rank0("SGLang simulator (a test double): %.2f GB of weights per rank do not fit in %.2f GB (model %s, tp %d); "
                       "a real server would run out of GPU memory here. Memory figures below are clamped."
                       % (weight, avail, cfg.args.model_path, cfg.args.tp_size))
        avail_after = max(0.5, avail - weight)
        self.each_rank(lambda r: lw(el + RANK_JITTER[r % 8], cfg.arch, avail_after, weight))
        if cfg.refusal is not None and cfg.refusal.stage == "scheduler":
            _traceback(log, cfg.refusal, rank=self.first)
            return False
        kv_gb = 6.0 * cfg.max_total_num_tokens / 1048576.0
        self.rank0("KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB" % (cfg.max_total_num_tokens, kv_gb, kv_gb))
        pool_gb = 2 * kv_gb + 1.34   # + allocator/workspace overhead: the recorded log's 36.52 -> 15.10 GB
        if cfg.hybrid:
            scale = cfg.max_mamba_cache_size / 192.0
            conv, ssm = 0.84 * scale, 5.62 * scale
            line = "Mamba Cache is allocated. max_mamba_cache_size: %d, conv_state size: %.2fGB, ssm_state size: %.2fGB " % (
                cfg.max_mamba_cache_size, conv, ssm)
            pool_gb += conv + ssm
            if cfg.spec:
                line += "intermediate_ssm_state_cache size: %.2fGB intermediate_conv_window_cache size: %.2fGB" % (1.41 * scale, 0.21 * scale)
                pool_gb += (1.41 + 0.21) * scale
            self.rank0(line.rstrip() if not cfg.spec else line)
        avail_pool = max(0.5, avail_after - pool_gb)
        self.rank0("Memory pool end. avail mem=%.2f GB" % avail_pool)
        avail_g = max(0.5, avail_pool - 0.17)
        self.rank0(log.graph_begin(avail_g))
        t = time.monotonic()
        await self.pause(0.2)
        el = time.monotonic() - t
        avail_g2 = max(0.5, avail_g - 1.20)
        self.rank0(log.graph_end(el, 1.20, avail_g2))
        avail_final = avail_g2
        if cfg.spec and cfg.draft_gb:
            self.each_rank("Load weight begin. avail mem=%.2f GB" % avail_g2)
            t = time.monotonic()
            await self.pause(0.1)
            el = time.monotonic() - t
            avail_d = max(0.5, avail_g2 - cfg.draft_gb)
            self.each_rank(lambda r: lw(el + RANK_JITTER[r % 8] / 3, cfg.draft_arch, avail_d, cfg.draft_gb))
            a1 = max(0.5, avail_d - 0.02)
            if cfg.vt >= (0, 5, 14):
                if cfg.num_steps > 1:
                    self.rank0("Capture draft decode CUDA graph begin. backend=%s, num_tokens_per_bs=%d, bs=[1, 2, 4, 8, 16, 24, 32, 40, 48], avail mem=%.2f GB"
                               % (cfg.attention_backend, cfg.topk or 1, a1))
                    self.rank0("Capture draft decode CUDA graph end. elapsed=%.2f s, mem usage=0.31 GB, avail mem=%.2f GB."
                               % (self.knobs["load_s"] * 0.05, max(0.5, a1 - 0.31)))
                    a1 = max(0.5, a1 - 0.31)
                self.rank0("Capture draft extend CUDA graph begin. backend=%s, num_tokens_per_bs=%d, bs=[1, 2, 4, 8, 16, 24, 32, 40, 48], avail mem=%.2f GB"
                           % (cfg.attention_backend, cfg.num_draft_tokens, a1))
                await self.pause(0.1)
                self.rank0("Capture draft extend CUDA graph end. elapsed=%.2f s, mem usage=0.22 GB, avail mem=%.2f GB."
                           % (self.knobs["load_s"] * 0.1, max(0.5, a1 - 0.22)))
                avail_final = a1 - 0.22
            else:
                self.rank0(log.graph_begin(a1, "draft"))
                self.rank0(log.graph_end(self.knobs["load_s"] * 0.05, 0.31, max(0.5, a1 - 0.31), "draft"))
                self.rank0(log.graph_begin(max(0.5, a1 - 0.31), "draft extend"))
                await self.pause(0.1)
                self.rank0(log.graph_end(self.knobs["load_s"] * 0.1, 0.22, max(0.5, a1 - 0.53), "draft extend"))
                avail_final = a1 - 0.53
        avail_final = max(0.5, avail_final)
        self.rank0("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, max_running_requests=%d, context_len=%d, "
                   "available_gpu_mem=%.2f GB" % (cfg.max_total_num_tokens, cfg.chunked_prefill_size, cfg.max_prefill_tokens, cfg.effective_mrr,
                                                  cfg.context_len, avail_final))
        return True

    async def warmup(self):
        """SGLang's warm-up request, then status ready and the ready line (never, under SGLANG_SIM_NEVER_READY)."""
        app, log, k = self.app, self.log, self.knobs
        if k["never_ready"]:
            self.engine.frozen = True
        if k["slow_start_s"] > 0:
            self.engine.hold_until = time.monotonic() + k["slow_start_s"]
        peer = ("127.0.0.1", 40000 + os.getpid() % 20000)
        path = "/get_model_info" if self.cfg.vt < (0, 5, 10) else "/model_info"
        log.access(peer, "GET", path, "1.1", 200, "OK")
        req = Request("WARMUP_%d" % os.getpid(), 6, 8, _emit_internal, internal=True)
        req.future = asyncio.get_event_loop().create_future()
        self.engine.submit(req)
        await req.future
        log.access((peer[0], peer[1] + 6), "POST", "/generate", "1.1", 200, "OK")
        app.status = "ready"
        log.line("The server is fired up and ready to roll!")

    def _scheduler_died(self, task):
        """The scheduler loop must never end; if it raises (a simulator bug), die loudly like SGLang does."""
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        import traceback
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
        self.log.line("Scheduler hit an exception: " + text, rank=0)
        self.log.line("Received sigquit from a child process. It usually means the child failed.")
        die()

    async def serve(self):
        """Load phase, HTTP server, scheduler; returns the exit code after SIGTERM/SIGINT (1 on bind failure/refusal)."""
        cfg, log = self.cfg, self.log
        a = cfg.args
        loop = asyncio.get_event_loop()
        ok = await self.load()
        if not ok:
            return 1
        self.engine = Engine(cfg, self.timing, log)
        self.app = App(cfg, self.engine, log)
        try:
            server = await loop.create_server(self.app.protocol_factory, host=a.host, port=a.port, reuse_address=True, backlog=2048,
                                              reuse_port=bool(self.knobs["reuse_port"]) or None)
        except OSError as exc:
            # asyncio's message is uvicorn's: "error while attempting to bind on address ('127.0.0.1', 30000): address already in use"
            log.line("ERROR:    [Errno %s] %s" % (exc.errno, exc.strerror or exc))
            return 1
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        pid = os.getpid()
        log.line("INFO:     Started server process [%d]" % pid)
        log.line("INFO:     Waiting for application startup.")
        log.line("INFO:     Application startup complete.")
        log.line("INFO:     Uvicorn running on http://%s:%d (Press CTRL+C to quit)" % (a.host, a.port))
        if self.app.dummy:
            self.app.status = "ready"
        else:
            task = asyncio.ensure_future(self.engine.run())
            task.add_done_callback(self._scheduler_died)
            asyncio.ensure_future(self.warmup())
        await stop.wait()
        log.line("INFO:     Shutting down")
        server.close()
        for conn in list(self.app.conns):
            if conn.transport is not None:
                conn.transport.close()
        log.line("INFO:     Waiting for application shutdown.")
        log.line("INFO:     Application shutdown complete.")
        log.line("INFO:     Finished server process [%d]" % pid)
        return 0


def main(argv=None, env=None):
    """Run the simulator; returns the process exit code (0 after SIGTERM/SIGINT)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if env is None else env)
    try:
        cfg = config_mod.parse(argv, env)
    except config_mod.ArgparseExit as exc:
        sys.stderr.write(exc.text)
        sys.stderr.flush()
        return exc.status
    except knobs_mod.KnobError as exc:
        sys.stderr.write("error: %s\n" % exc)
        sys.stderr.flush()
        return 2
    cfg.argv = argv
    log = LogWriter(cfg.vt, cfg.args.tp_size, log_ms=bool(env.get("SGLANG_LOG_MS")),
                    log_forward_iters=str(env.get("SGLANG_LOG_FORWARD_ITERS", "")).lower() in ("1", "true", "yes", "on"))
    for message in cfg.pre_warnings:
        log.line(message)
    log.line("server_args=" + render_server_args(cfg.server_args))
    for message in cfg.warnings:
        log.line(message)
    if cfg.refusal is not None and cfg.refusal.stage == "args":
        _traceback(log, cfg.refusal)
        return 1
    sim = Simulator(cfg, log)
    try:
        return asyncio.run(sim.serve())
    except KeyboardInterrupt:
        return 0


def run():
    """Console entry point: ``sys.exit(main())``."""
    sys.exit(main())


if __name__ == "__main__":
    run()
