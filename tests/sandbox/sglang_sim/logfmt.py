"""SGLang's log lines, per version, written to stdout (the sandbox reads them via journald / podman logs).

Prefix: ``[%Y-%m-%d %H:%M:%S{.mmm if SGLANG_LOG_MS}{ TPn when tp_size > 1}] `` (SGLang
``utils/common.py configure_logger``). Batch line templates: SGLANG_FACTS.md section 2.2 / 2.3
(``scheduler_metrics_mixin.py`` 0.4.10-0.5.10, ``metrics_reporter.py`` 0.5.14/0.5.23). Startup
lines: SGLANG_FACTS.md section 3 and the recorded log qwen35-122b-mtp-tp4-v0.5.9.log.
"""
from __future__ import annotations

import os
import sys
import time


class LogWriter(object):
    """Writes one SGLang-format line at a time to a file descriptor (stdout), unbuffered."""

    def __init__(self, vt, tp_size, log_ms=False, log_forward_iters=False, fd=None):
        self.vt = vt
        self.tp_size = tp_size
        self.log_ms = log_ms
        self.log_forward_iters = log_forward_iters
        self.fd = sys.stdout.fileno() if fd is None else fd

    def stamp(self, rank=None):
        """``[YYYY-MM-DD HH:MM:SS[.mmm][ TPn]]`` for now (local time)."""
        now = time.time()
        text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        if self.log_ms:
            text += ".%03d" % int((now % 1.0) * 1000)
        if rank is not None and self.tp_size > 1:
            text += " TP%d" % rank
        return "[" + text + "]"

    def write_raw(self, text):
        """Write ``text`` to the log fd with os.write (unbuffered; a closed stdout is ignored)."""
        data = text.encode("utf-8", "replace")
        while data:
            try:
                written = os.write(self.fd, data)
            except BlockingIOError:
                time.sleep(0.001)
                continue
            except OSError:
                return
            data = data[written:]

    def line(self, message, rank=None):
        """One log line; ``rank``: the TP rank printing it (None for the HTTP/tokenizer process)."""
        self.write_raw("%s %s\n" % (self.stamp(rank), message))

    def access(self, peer, method, path, http_version, status, reason):
        """uvicorn access line: ``INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK``."""
        self.line('INFO:     %s:%d - "%s %s HTTP/%s" %d %s' % (peer[0], peer[1], method, path, http_version, status, reason))

    # -- batch lines ---------------------------------------------------------------------------
    def _batch_head(self, kind, forward_ct):
        vt = self.vt
        if vt < (0, 5, 0):
            return "%s batch. " % kind
        if vt < (0, 5, 9) or self.log_forward_iters:
            return "%s batch [%d], " % (kind, forward_ct)
        return "%s batch, " % kind

    def decode_line(self, forward_ct, running, usage_group, spec, accept_len, accept_rate, cuda_graph, gen_tps, queue):
        """``usage_group``: e.g. ``#full token: 257, full token usage: 0.00, mamba num: 3, mamba usage: 0.03, ``."""
        vt = self.vt
        msg = self._batch_head("Decode", forward_ct) + "#running-req: %d, %s" % (running, usage_group)
        if spec:
            if vt < (0, 5, 0):
                msg += "accept len: %.2f, " % accept_len
            else:
                msg += "accept len: %.2f, accept rate: %.2f, " % (accept_len, accept_rate)
        msg += "cuda graph: %s, gen throughput (token/s): %.2f, #queue-req: %d" % (cuda_graph, gen_tps, queue)
        if vt < (0, 5, 9):
            msg += ", "
        return msg

    def prefill_line(self, forward_ct, new_seq, new_token, cached, usage_group, running, queue, input_tps, cuda_graph=False):
        """Message of a ``Prefill batch`` line in this version's template (SGLANG_FACTS 2.3); ``input_tps`` in tok/s."""
        vt = self.vt
        msg = self._batch_head("Prefill", forward_ct) + "#new-seq: %d, #new-token: %d, #cached-token: %d, %s" % (new_seq, new_token, cached, usage_group)
        msg += "#running-req: %d, #queue-req: %d, " % (running, queue)
        if vt < (0, 5, 9):
            return msg
        if vt < (0, 5, 10):
            return msg + "input throughput (token/s): %.2f, cuda graph: %s" % (input_tps, cuda_graph)
        if vt < (0, 5, 14):
            return msg + "cuda graph: %s, input throughput (token/s): %.2f" % (cuda_graph, input_tps)
        return msg + "#pending-token: 0, cuda graph: %s, input throughput (token/s): %.2f" % (cuda_graph, input_tps)

    # -- startup lines ---------------------------------------------------------------------------
    def load_weight_end(self, elapsed, cls, avail, usage):
        """``Load weight end.`` message (0.4.10/0.5.4, 0.5.9, 0.5.10+ forms: model_runner.py; 0.5.10 dropped ``dtype=``);
        ``elapsed`` s, memory in GB."""
        vt = self.vt
        if vt < (0, 5, 9):
            return "Load weight end. type=%s, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%.2f GB." % (cls, avail, usage)
        if vt < (0, 5, 10):
            return "Load weight end. elapsed=%.2f s, type=%s, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%.2f GB." % (elapsed, cls, avail, usage)
        return "Load weight end. elapsed=%.2f s, type=%s, avail mem=%.2f GB, mem usage=%.2f GB." % (elapsed, cls, avail, usage)

    def graph_begin(self, avail, name=""):
        """CUDA graph capture begin message (``name``: "" target, "draft", "draft extend"); ``avail`` GB."""
        if self.vt >= (0, 5, 14):
            return "Capture %s CUDA graph begin. This can take up to several minutes. avail mem=%.2f GB" % (name or "decode", avail)
        label = ("%s cuda graph" % name) if name else "cuda graph"
        return "Capture %s begin. This can take up to several minutes. avail mem=%.2f GB" % (label, avail)

    def graph_end(self, elapsed, usage, avail, name=""):
        """CUDA graph capture end message; ``elapsed`` s, memory in GB."""
        if self.vt >= (0, 5, 14):
            return "Capture %s CUDA graph end. elapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB." % (name or "decode", elapsed, usage, avail)
        label = ("%s cuda graph" % name) if name else "cuda graph"
        return "Capture %s end. Time elapsed: %.2f s. mem usage=%.2f GB. avail mem=%.2f GB." % (label, elapsed, usage, avail)


def render_server_args(server_args):
    """``ServerArgs(model_path='...', tp_size=4, ...)``: Python repr of each value, as a dataclass repr prints."""
    return "ServerArgs(" + ", ".join("%s=%r" % (k, v) for k, v in server_args.items()) + ")"
