"""The simulated scheduler: continuous batching, speculative verify steps, SGLang's log statistics.

One asyncio task runs the loop. Each iteration is either a prefill batch (waiting requests are
admitted while fewer than max_running_requests run; FIFO; up to max_prefill_tokens new tokens per
batch, at least one request) or a decode (verify) step over the running requests. The cost of each
step comes from :class:`sglang_sim.timing.TimingModel`; in real-time mode the loop sleeps until an
absolute deadline (so Python overhead does not slow the simulated GPU down), in instant mode it only
yields to the event loop.

Statistics follow SGLang 0.5.9 ``scheduler_metrics_mixin.py``: a Decode batch line every
``--decode-log-interval`` decode steps with ``gen throughput`` = tokens since the last Decode line /
wall time since it (idle time included), ``accept len`` = (accepted drafts + requests) / requests
over the interval, lifetime ``avg_spec_accept_length`` accumulated only when a Decode line is logged;
a Prefill batch line per prefill batch whose ``input throughput`` is the previous batch's tokens /
the time since the previous Prefill line.
"""
from __future__ import annotations

import asyncio
import bisect
import random
import time

from sglang_sim import adaptive as adaptive_mod
from sglang_sim.prefix_cache import PAGE, PrefixCache

# Output "vocabulary": short ASCII token texts (JSON-safe, no escaping needed) with Qwen-like ids.
VOCAB = ((" The", 576), (" answer", 4226), (" is", 374), (" 345", 15901), (".", 13), (" Let", 6771), (" me", 752),
         (" check", 1779), (":", 25), (" 15", 220), ("*", 9), ("23", 1419), (" =", 284), (" 345", 15901), (".", 13),
         (" Done", 27357))
TOKEN_TEXT = tuple(t.encode("ascii") for t, _unused in VOCAB)
TOKEN_ID = tuple(b"%d" % i for _unused, i in VOCAB)
NV = len(VOCAB)

# Real-time mode: the scheduler sleeps on an asyncio timer until this long before a step's deadline and yields
# to the event loop for the rest (see Engine._spend): 1 ms of epoll rounding plus ~0.2 ms of timer slack.
SPIN_MARGIN_S = 0.0013

HIST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0)


def token_text(start, count):
    """Concatenated text (bytes) of generated tokens ``start .. start+count-1``."""
    return b"".join([TOKEN_TEXT[j % NV] for j in range(start, start + count)])


class Histogram(object):
    """Prometheus histogram state: per-bucket counts over HIST_BUCKETS (seconds), sum (s) and count."""
    __slots__ = ("counts", "total", "n")

    def __init__(self):
        self.counts = [0] * (len(HIST_BUCKETS) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, value):
        """Add one observation ``value`` (seconds)."""
        self.counts[bisect.bisect_left(HIST_BUCKETS, value)] += 1
        self.total += value
        self.n += 1


class Request(object):
    """One generation request inside the scheduler.

    ``emit(req, start, n, finished)`` is called after every step that gave it tokens (``n`` tokens
    from index ``start``); ``fail(req, message)`` when a fault aborts it. ``internal`` requests
    (warm-up, health checks) resolve ``future`` and are left out of the metrics.
    """

    __slots__ = ("rid", "prompt_len", "max_new", "out_len", "verify_ct", "accepted", "chunks", "t_arrival", "t_first", "t_last",
                 "t_sched", "finished", "aborted", "stall_until", "stalled_once", "emit", "fail", "conn", "internal", "future", "ctx",
                 "prefix_keys", "cached", "accept_p")

    def __init__(self, rid, prompt_len, max_new, emit, fail=None, conn=None, internal=False, ctx=None, accept_p=None):
        self.rid = rid
        self.prompt_len = prompt_len
        self.max_new = max_new
        self.out_len = 0
        self.verify_ct = 0
        self.accepted = 0
        self.chunks = 0
        self.t_arrival = time.monotonic()
        self.t_first = None
        self.t_last = None
        self.t_sched = None
        self.finished = False
        self.aborted = False
        self.stall_until = 0.0
        self.stalled_once = False
        self.emit = emit
        self.fail = fail
        self.conn = conn
        self.internal = internal
        self.future = None
        self.ctx = ctx
        self.prefix_keys = None   # prefix_cache.page_keys of the prompt, when the prefix cache is on
        self.cached = 0           # prompt tokens found in the prefix cache at prefill (meta_info.cached_tokens)
        # per-draft-token acceptance of this request (acceptance.accept_probability of its content and sampling
        # settings); None = the engine's SGLANG_SIM_ACCEPT_P
        self.accept_p = accept_p


class Engine(object):
    """The scheduler. ``cfg``: config.SimConfig; ``timing``: TimingModel; ``log``: LogWriter."""

    def __init__(self, cfg, timing, log):
        self.cfg = cfg
        self.timing = timing
        self.log = log
        knobs = cfg.knobs
        self.instant = knobs["instant"]
        self.p = knobs["accept_p"]
        # SGLang's own SGLANG_SIMULATE_ACC_LEN (benchmarking aid): every verify step accepts floor(L - 1) drafts, plus one
        # more with probability frac(L - 1), so the mean accept length is L (capped at num_steps + 1). Overrides accept_p.
        try:
            self.sim_acc_len = float(cfg.env.get("SGLANG_SIMULATE_ACC_LEN", "-1") or -1)
        except ValueError:
            self.sim_acc_len = -1.0
        if knobs["broken_draft"]:
            self.sim_acc_len = -1.0
        self.rng = random.Random(knobs["seed"])
        self.error_after = knobs["error_after_chunks"]
        self.stall_after = knobs["stall_after_chunks"]
        self.stall_s = knobs["stall_s"]
        # adaptive (0.5.14+, adaptive.py): the step count is chosen per decode batch by its bucket's policy
        self.adaptive = None
        if cfg.spec and getattr(cfg, "adaptive", None):
            ad = cfg.adaptive
            # the capture list of CUDA graphs is not modelled: a batch goes straight to its bucket (SGLang pads it to the
            # next captured size first; the same bucket whenever the bucket keys are captured sizes, as 1/8/32/64 are)
            self.adaptive = adaptive_mod.AdaptivePolicy(ad["initial_steps"], ad["cfg"], ad["entries"])
        self.spec = cfg.spec and (cfg.num_steps > 0 or self.adaptive is not None)
        self.steps = cfg.num_steps
        self.ndraft = cfg.num_draft_tokens or (cfg.num_steps + 1)
        self.mrr = cfg.effective_mrr
        self.waiting = []
        self.running = []
        self.wake = asyncio.Event()
        self.hold_until = 0.0      # scheduler does nothing before this monotonic time (slow start)
        self.frozen = False        # never-ready fault: scheduler never runs
        self.next_t = None
        self.forward_ct = 0
        self.decode_ct = 0
        t = time.monotonic()
        # interval statistics (reset at every Decode log line)
        self.iv_tokens = 0
        self.iv_accepted = 0
        self.iv_verify = 0
        self.last_decode_log = t
        self.last_prefill_log = t
        self.last_prefill_tokens = 0
        # lifetime statistics (accumulated at Decode log lines, as SGLang does)
        self.life_accepted = 0
        self.life_verify = 0
        self.finished_verify = 0      # Σ spec_verify_ct of finished requests (sglang:spec_verify_calls_total)
        self.last_gen_throughput = 0.0
        self.gauges = {"num_running_reqs": 0.0, "num_used_tokens": 0.0, "token_usage": 0.0, "mamba_usage": 0.0, "gen_throughput": 0.0,
                       "num_queue_reqs": 0.0, "spec_accept_length": 0.0, "spec_accept_rate": 0.0, "is_cuda_graph": 0.0,
                       "cache_hit_rate": 0.0, "max_total_num_tokens": float(cfg.max_total_num_tokens)}
        self.counters = {"prompt_tokens_total": 0, "generation_tokens_total": 0, "num_requests_total": 0, "num_aborted_requests_total": 0,
                         "cached_tokens_total": 0}
        self.hist = {"time_to_first_token_seconds": Histogram(), "e2e_request_latency_seconds": Histogram(),
                     "inter_token_latency_seconds": Histogram(), "queue_time_seconds": Histogram()}
        self.metrics_on = bool(cfg.server_args.get("enable_metrics"))
        # SGLang's radix cache stand-in (prefix_cache.py): None with --disable-radix-cache
        self.prefix_cache = None if cfg.server_args.get("disable_radix_cache") else PrefixCache(cfg.max_total_num_tokens // PAGE)

    # -- public --------------------------------------------------------------------------------
    def submit(self, req):
        """Queue ``req`` (a :class:`Request`) for the next prefill batch (FIFO) and wake the loop."""
        self.waiting.append(req)
        self.wake.set()

    @property
    def busy(self):
        """True while any request waits or runs (SGLang skips the health generation then)."""
        return bool(self.waiting or self.running)

    def avg_spec_accept_length(self):
        """Lifetime accept length, or None before the first Decode log line under speculation."""
        if not self.spec or not self.life_verify:
            return None
        return (self.life_accepted + self.life_verify) / float(self.life_verify)

    # -- helpers -------------------------------------------------------------------------------
    async def _spend(self, cost):
        """Let ``cost`` seconds of simulated GPU time pass, to within ~0.05 ms of the deadline.

        asyncio's timers wake late: the epoll selector rounds every timeout up to a whole millisecond
        and the kernel adds its timer slack, so ``asyncio.sleep(0.01044)`` returns 0.6-0.9 ms late here,
        which alone put the simulator's TTFT 8 % above its own model. So the loop sleeps on a timer until
        SPIN_MARGIN_S before the deadline, then yields (``asyncio.sleep(0)``: HTTP traffic keeps flowing)
        until the deadline. The spin costs up to SPIN_MARGIN_S of CPU per step (at most ~14 % of a core at
        9 ms steps), in real-time mode only.
        """
        if self.instant:
            await asyncio.sleep(0)
            return
        now = time.monotonic()
        # absolute schedule: up to 50 ms of lateness (Python overhead, a busy machine) is caught up, never idle time
        self.next_t = deadline = (now if self.next_t is None else max(self.next_t, now - 0.05)) + cost
        coarse = deadline - now - SPIN_MARGIN_S
        if coarse > 0:
            await asyncio.sleep(coarse)
        while time.monotonic() < deadline:
            await asyncio.sleep(0)

    def _usage(self, reqs, prefill):
        cfg = self.cfg
        used = 0
        for r in reqs:
            used += r.prompt_len + r.out_len
        usage = used / float(cfg.max_total_num_tokens)
        if cfg.hybrid:
            mnum = len(reqs) * cfg.mamba_per_req
            musage = mnum / float(max(1, cfg.max_mamba_cache_size))
            self.gauges["mamba_usage"] = musage
            if prefill:
                return used, usage, "full token usage: %.2f, mamba usage: %.2f, " % (usage, musage)
            return used, usage, "#full token: %d, full token usage: %.2f, mamba num: %d, mamba usage: %.2f, " % (used, usage, mnum, musage)
        if prefill:
            return used, usage, "token usage: %.2f, " % usage
        return used, usage, "#token: %d, token usage: %.2f, " % (used, usage)

    def _finish(self, req, now):
        req.finished = True
        if not req.internal:
            self.counters["generation_tokens_total"] += req.out_len
            # SGLang 0.5.14+ metrics_collector.observe_one_finished_request: spec_verify_calls_total += the request's spec_verify_ct
            self.finished_verify += req.verify_ct
            if self.metrics_on:
                self.hist["e2e_request_latency_seconds"].observe(now - req.t_arrival)
        if req.future is not None and not req.future.done():
            req.future.set_result(req)

    def _check_faults(self, req, now):
        """True when the request must not advance this step (aborted by an error chunk, or stalled)."""
        if req.internal:
            return False
        if self.error_after and req.chunks >= self.error_after:
            req.aborted = True
            self.counters["num_aborted_requests_total"] += 1
            if req.fail is not None:
                req.fail(req, "Simulated fault: error after %d chunks (SGLANG_SIM_ERROR_AFTER_CHUNKS=%d)." % (req.chunks, self.error_after))
            return True
        if self.stall_after and req.chunks >= self.stall_after and not req.stalled_once:
            req.stalled_once = True
            req.stall_until = now + self.stall_s
            return True
        return False

    # -- the loop --------------------------------------------------------------------------------
    async def run(self):
        """The scheduler loop (never returns): prefill when requests wait and a slot is free, else one decode step."""
        while True:
            if self.frozen:
                await asyncio.sleep(3600)
                continue
            now = time.monotonic()
            if self.hold_until > now:
                await asyncio.sleep(self.hold_until - now)
                continue
            if self.waiting and any(r.aborted for r in self.waiting):
                self.waiting = [r for r in self.waiting if not r.aborted]
            if self.running and any(r.aborted or r.finished for r in self.running):
                self.running = [r for r in self.running if not (r.aborted or r.finished)]
            if self.waiting and len(self.running) < self.mrr:
                await self._prefill()
                continue
            if self.running:
                active = []
                wait_until = None
                for r in self.running:
                    if r.stall_until > now:
                        wait_until = r.stall_until if wait_until is None else min(wait_until, r.stall_until)
                    elif r.conn is not None and r.conn.paused:
                        wait_until = now + 0.005 if wait_until is None else min(wait_until, now + 0.005)
                    else:
                        active.append(r)
                if active:
                    await self._decode(active)
                    continue
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), timeout=min(1.0, max(0.001, wait_until - now)))
                except asyncio.TimeoutError:
                    pass
                continue
            self.wake.clear()
            self.next_t = None
            await self.wake.wait()

    async def _prefill(self):
        cfg = self.cfg
        batch = []
        tokens = 0
        while self.waiting and len(self.running) + len(batch) < self.mrr:
            r = self.waiting[0]
            if batch and tokens + r.prompt_len > cfg.max_prefill_tokens:
                break
            self.waiting.pop(0)
            if r.aborted:
                continue
            batch.append(r)
            tokens += r.prompt_len
        if not batch:
            return
        cached = 0
        if self.prefix_cache is not None:
            for r in batch:
                if r.prefix_keys:
                    r.cached = min(self.prefix_cache.match(r.prefix_keys) * PAGE, r.prompt_len - 1)
                    cached += r.cached
            for r in batch:
                if r.prefix_keys:
                    self.prefix_cache.insert(r.prefix_keys)
            self.gauges["cache_hit_rate"] = cached / float(tokens) if tokens else 0.0
        tokens -= cached
        now = time.monotonic()
        self.forward_ct += 1
        gap = now - self.last_prefill_log
        input_tps = self.last_prefill_tokens / gap if gap > 0 else 0.0
        self.last_prefill_log = now
        self.last_prefill_tokens = tokens
        _used, _usage, group = self._usage(self.running + batch, prefill=True)
        self.log.line(self.log.prefill_line(self.forward_ct, len(batch), tokens, cached, group, len(self.running), len(self.waiting), input_tps), rank=0)
        for r in batch:
            r.t_sched = now
            if not r.internal:
                self.counters["prompt_tokens_total"] += r.prompt_len
                self.counters["cached_tokens_total"] += r.cached
                self.counters["num_requests_total"] += 1
                if self.metrics_on:
                    self.hist["queue_time_seconds"].observe(now - r.t_arrival)
        await self._spend(self.timing.prefill_s(tokens))
        now = time.monotonic()
        for r in batch:
            if r.aborted:
                continue
            n = 1 if r.max_new > 0 else 0
            r.out_len = n
            r.t_first = r.t_last = now
            if self.metrics_on and not r.internal:
                self.hist["time_to_first_token_seconds"].observe(now - r.t_arrival)
            done = r.out_len >= r.max_new
            r.chunks += 1
            r.emit(r, 0, n, done)
            if done:
                self._finish(r, now)
            else:
                self.running.append(r)

    async def _decode(self, active):
        bs = len(active)
        if self.adaptive is not None:
            # activate_step_by_batch: the bucket of this batch decides the drafting steps (0 = a one-token verify plus the draft
            # extend, eagle_worker_v2.py _build_trivial_verify_input: timing charges t0 + k * bs + verify)
            self.steps = self.adaptive.steps_for(bs)
            self.ndraft = self.steps + 1
            self.timing.num_steps, self.timing.num_draft_tokens = self.steps, self.ndraft
        await self._spend(self.timing.decode_step_s(bs))
        now = time.monotonic()
        self.forward_ct += 1
        self.decode_ct += 1
        spec = self.spec
        steps = self.steps
        base_p = self.p
        rng = self.rng
        tokens = 0
        accepted_sum = 0
        per_req = []
        check_faults = bool(self.error_after or self.stall_after)
        metrics_on = self.metrics_on
        itl = self.hist["inter_token_latency_seconds"]
        advanced = []
        for r in active:
            if r.aborted or r.finished:
                continue
            if check_faults and self._check_faults(r, now):
                continue
            if spec:
                p = base_p if r.accept_p is None else r.accept_p
                if self.sim_acc_len > 0:
                    extra = min(float(steps), max(0.0, self.sim_acc_len - 1.0))
                    a = int(extra)
                    if a < steps and rng.random() < extra - a:
                        a += 1
                elif p >= 1.0:
                    a = steps
                elif p <= 0.0:
                    a = 0
                else:
                    a = 0
                    while a < steps and rng.random() < p:
                        a += 1
                accepted_sum += a
                per_req.append(a)
                r.verify_ct += 1
                r.accepted += a   # drafts accepted by the verify step (before the length limit cuts the output)
                n = 1 + a
            else:
                n = 1
            start = r.out_len
            rem = r.max_new - start
            if n > rem:
                n = rem
            r.out_len = start + n
            tokens += n
            advanced.append((r, start, n))
        self.iv_tokens += tokens
        if spec:
            self.iv_accepted += accepted_sum
            self.iv_verify += len(advanced)
            if self.adaptive is not None and advanced:
                # on_verify_complete: the accepted drafts of every request of the verify step drive the bucket's EMA
                switched = self.adaptive.on_verify_complete(per_req, bs)
                if switched is not None:
                    # AdaptiveController._activate: the worker runs the new state at once (sglang:spec_num_steps shows it)
                    self.steps, self.ndraft = switched[1], switched[1] + 1
                    self.log.line(adaptive_mod.switch_line(*switched), rank=0)
        # SGLang logs after the step; the log line is written before the outputs go out so that a client
        # that got its last chunk finds the line in the log (SGLang's detokenizer hop makes that order usual too)
        if self.decode_ct % max(1, self.cfg.args.decode_log_interval) == 0:
            self._log_decode(active, now)
        for r, start, n in advanced:
            if metrics_on and not r.internal and n:
                itl.observe((now - r.t_last) / n)
            r.t_last = now
            done = r.out_len >= r.max_new
            r.chunks += 1
            r.emit(r, start, n, done)
            if done:
                self._finish(r, now)

    def _log_decode(self, active, now):
        cfg = self.cfg
        gap = now - self.last_decode_log
        gen_tps = self.iv_tokens / gap if gap > 0 else 0.0
        self.last_decode_log = now
        self.last_gen_throughput = gen_tps
        accept_len = accept_rate = 0.0
        if self.spec and self.iv_verify:
            accept_len = (self.iv_accepted + self.iv_verify) / float(self.iv_verify)
            if cfg.vt >= (0, 5, 14):
                accept_rate = (accept_len - 1.0) / max(1, self.ndraft - 1)
            else:
                accept_rate = accept_len / float(self.ndraft)
            self.life_accepted += self.iv_accepted
            self.life_verify += self.iv_verify
        used, usage, group = self._usage(active, prefill=False)
        cuda_graph = len(active) <= cfg.cuda_graph_max_bs and not cfg.server_args.get("disable_cuda_graph")
        self.log.line(self.log.decode_line(self.forward_ct, len(active), group, self.spec, accept_len, accept_rate, cuda_graph, gen_tps,
                                           len(self.waiting)), rank=0)
        g = self.gauges
        g["num_running_reqs"] = float(len(active))
        g["num_used_tokens"] = float(used)
        g["token_usage"] = usage
        g["gen_throughput"] = gen_tps
        g["num_queue_reqs"] = float(len(self.waiting))
        g["spec_accept_length"] = accept_len
        g["spec_accept_rate"] = accept_rate
        g["is_cuda_graph"] = 1.0 if cuda_graph else 0.0
        self.iv_tokens = self.iv_accepted = self.iv_verify = 0
