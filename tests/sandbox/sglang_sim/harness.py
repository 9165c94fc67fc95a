"""Start and stop the SGLang simulator (a test double) as a subprocess on loopback.

Used by ``tests/simulator/conftest.py`` (the ``sglang_sim`` pytest fixture) and by the
``benchmarks/sim_*.py`` scripts, so there is one place that knows how to launch the stand-in.

The simulator is launched exactly like SGLang:
``python3 -m sglang.launch_server --model-path ... --host 127.0.0.1 --port <free port> <args>``
with ``PYTHONPATH=tests/sandbox/sglang_shim:tests/sandbox``. Its stdout+stderr (the SGLang-format
log) goes to a file, so a chatty server can never block on a full pipe.

Standard library only (Python 3.8+).
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

SANDBOX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIM_DIR = os.path.join(SANDBOX_DIR, "sglang_shim")
DEFAULT_MODEL_PATH = "/models/Qwen3.5-122B-A10B"


class SimError(RuntimeError):
    """The simulator did not do what the harness waited for (exited, not ready in time, ...)."""


def free_port(host="127.0.0.1"):
    """Return a TCP port that was free on ``host`` a moment ago (bind to port 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _has_flag(args, *names):
    for arg in args:
        for name in names:
            if arg == name or arg.startswith(name + "="):
                return True
    return False


class SimProcess:
    """One simulator process.

    Attributes: ``url`` (``http://127.0.0.1:PORT``), ``host``, ``port``, ``proc``
    (``subprocess.Popen``), ``log_path`` (file holding the server's stdout+stderr), ``argv``, ``env``.

    ``args``: SGLang launch_server flags (list of str). ``--host``/``--port`` are added unless given,
    and ``--model-path /models/Qwen3.5-122B-A10B`` unless ``--model-path``/``--model`` is given.
    ``env``: extra environment (``SGLANG_SIM_*`` knobs, ``SGLANG_ENABLE_SPEC_V2``, ...), merged over
    ``os.environ``. ``instant=True`` sets ``SGLANG_SIM_INSTANT=1`` (no sleeping). ``load_s`` sets
    ``SGLANG_SIM_LOAD_S`` (simulated weight-load time, s) unless ``env`` sets it; default 0.05 s.
    ``cpu`` pins the process to that CPU index (``os.sched_setaffinity``) when given.
    """

    def __init__(self, args=(), env=None, log_path=None, instant=False, load_s=0.05, host="127.0.0.1",
                 port=None, cpu=None, python=None):
        self.args = list(args)
        self.host = host
        if _has_flag(self.args, "--port"):
            idx = [i for i, a in enumerate(self.args) if a == "--port" or a.startswith("--port=")][0]
            self.port = int(self.args[idx].split("=", 1)[1]) if "=" in self.args[idx] else int(self.args[idx + 1])
        else:
            self.port = port or free_port(host)
            self.args += ["--port", str(self.port)]
        if not _has_flag(self.args, "--host"):
            self.args += ["--host", host]
        if not _has_flag(self.args, "--model-path", "--model"):
            self.args = ["--model-path", DEFAULT_MODEL_PATH] + self.args
        self.url = "http://%s:%d" % (host, self.port)
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join([SHIM_DIR, SANDBOX_DIR] + ([self.env["PYTHONPATH"]] if self.env.get("PYTHONPATH") else []))
        self.env["PYTHONUNBUFFERED"] = "1"
        if instant:
            self.env["SGLANG_SIM_INSTANT"] = "1"
        if load_s is not None:
            self.env.setdefault("SGLANG_SIM_LOAD_S", str(load_s))
        self.env.update({k: str(v) for k, v in (env or {}).items()})
        self.log_path = log_path or os.path.join(os.environ.get("TMPDIR", "/tmp"), "sglang-sim-%d.log" % self.port)
        self.argv = [python or sys.executable, "-m", "sglang.launch_server"] + self.args
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(self.proc.pid, {cpu})

    # -- observation -------------------------------------------------------------------------
    def log_text(self):
        """Everything the server printed so far (str); works after :meth:`stop` too."""
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")

    def log_tail(self, lines=20):
        """The last ``lines`` log lines (str)."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    @property
    def returncode(self):
        """Exit code, or None while running (negative: killed by that signal)."""
        return self.proc.poll()

    def wait_for_log(self, pattern, timeout=10.0):
        """Wait until a log line matches regex ``pattern``; return the ``re.Match``. Raises SimError."""
        rx = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while True:
            match = rx.search(self.log_text())
            if match:
                return match
            if self.proc.poll() is not None:
                match = rx.search(self.log_text())
                if match:
                    return match
                raise SimError("simulator exited (rc=%s) before log matched %r; last lines:\n%s" % (self.proc.returncode, pattern, self.log_tail()))
            if time.monotonic() > deadline:
                raise SimError("log did not match %r within %.1f s; last lines:\n%s" % (pattern, timeout, self.log_tail()))
            time.sleep(0.02)

    def status(self, path="/health", timeout=2.0, headers=None):
        """HTTP status code of GET ``path`` (0 when the connection fails)."""
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                resp.read()
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (OSError, ValueError):
            return 0

    def wait_ready(self, timeout=30.0, path="/health"):
        """Poll GET ``path`` until 200. Raises SimError (with the log tail) on exit or timeout."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            if self.proc.poll() is not None:
                raise SimError("simulator exited with rc=%s before becoming ready; last lines:\n%s" % (self.proc.returncode, self.log_tail()))
            last = self.status(path, timeout=2.0)
            if last == 200:
                return self
            if time.monotonic() > deadline:
                raise SimError("simulator not ready within %.1f s (last %s status %s); last lines:\n%s" % (timeout, path, last, self.log_tail()))
            time.sleep(0.05)

    def wait_exit(self, timeout=10.0):
        """Wait for the process to exit by itself; return its exit code. Raises SimError on timeout."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise SimError("simulator still running after %.1f s; last lines:\n%s" % (timeout, self.log_tail()))

    # -- small HTTP helpers (urllib, JSON) ---------------------------------------------------
    def get_json(self, path, timeout=10.0, headers=None):
        """GET ``path`` and decode JSON; raises urllib.error.HTTPError on non-2xx."""
        req = urllib.request.Request(self.url + path, headers=headers or {})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def post_json(self, path, body, timeout=60.0, headers=None):
        """POST ``body`` as JSON to ``path`` and decode the JSON answer; raises urllib.error.HTTPError on non-2xx."""
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode("utf-8"), headers=hdrs, method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def get_text(self, path, timeout=10.0, headers=None):
        """GET ``path`` as text (e.g. /metrics); raises urllib.error.HTTPError on non-2xx."""
        req = urllib.request.Request(self.url + path, headers=headers or {})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.read().decode("utf-8")

    # -- teardown ----------------------------------------------------------------------------
    def stop(self, timeout=5.0):
        """SIGTERM, then SIGKILL after ``timeout`` s; always closes the log file. Returns the exit code."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout)
        if not self._log.closed:
            self._log.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# -- a lean streaming client (asyncio, raw HTTP/1.1), shared by benchmarks/sim_*.py -----------------------
async def stream_generate(port, prompt_len=32, max_new_tokens=128, host="127.0.0.1", rid=None):
    """One streaming ``POST /generate`` with ``input_ids`` (``ignore_eos``) over a fresh connection.

    Returns ``{"ttft": s, "e2e": s, "completion_tokens": int, "chunks": int, "meta_info": dict}``:
    ``ttft`` = time to the first SSE event, ``e2e`` = time to ``data: [DONE]`` (seconds, monotonic),
    ``meta_info`` = the final chunk's meta_info (spec fields included). Raises ConnectionError /
    ValueError when the stream breaks or carries an error chunk.
    """
    import asyncio

    body = json.dumps({"input_ids": list(range(1, prompt_len + 1)), "stream": True, "rid": rid,
                       "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": True, "temperature": 0.0}}).encode()
    head = ("POST /generate HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (host, port, len(body))).encode()
    t0 = time.monotonic()
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
    writer.write(head + body)
    ttft = None
    chunks = 0
    buf = b""
    try:
        while True:
            data = await reader.read(1 << 20)
            if not data:
                break
            if ttft is None and b"data: " in data:
                ttft = time.monotonic() - t0
            chunks += data.count(b"data: ")
            buf = (buf + data)[-65536:]
    finally:
        writer.close()
    e2e = time.monotonic() - t0
    if b"data: [DONE]" not in buf:
        raise ConnectionError("stream ended without data: [DONE]")
    events = [line[6:] for line in buf.split(b"\n") if line.startswith(b"data: {")]
    last = json.loads(events[-1].decode("utf-8"))
    if "error" in last:
        raise ValueError("error chunk: %s" % last["error"])
    meta = last["meta_info"]
    return {"ttft": ttft, "e2e": e2e, "completion_tokens": meta["completion_tokens"], "chunks": chunks - 1, "meta_info": meta}
