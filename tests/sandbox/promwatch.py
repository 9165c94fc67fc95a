"""A real Prometheus (Debian's ``prometheus`` binary) run as a subprocess on the controller, loading the files the
speculative_watch role wrote, and a closed-loop load against an SGLang server (the simulator, a test double).

Shared by ``benchmarks/watch_prometheus.py`` (the simulator on loopback) and ``tests/sandbox_e2e/test_watch_sandbox.py``
(a sandbox host), so that one place knows how to configure, start, query and stop Prometheus for these measurements.

Units: seconds everywhere (scrape/evaluation interval, timeouts, the times returned); URLs are ``http://host:port``.
"""
from __future__ import annotations

import calendar
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request

from sglang_sim.harness import free_port
from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc
from ansible_collections.llmops.sglang.plugins.plugin_utils._watch.rules import ALERTS


class PromWatchError(RuntimeError):
    """Prometheus is missing, did not start, or did not see its target in time; the message says why and the fix."""


def alert_for(duration):
    """``{alert name: duration}`` for every alert of the role (``rules.ALERTS``): the value of
    ``speculative_watch_alert_for`` that shortens every ``for`` to ``duration`` (a Prometheus duration such as ``"10s"``)."""
    return dict((row[0], duration) for row in ALERTS)


def metric(url, name, timeout=5.0):
    """The largest sample of gauge/counter ``name`` (e.g. ``sglang:spec_accept_length``) in ``url``/metrics, as a float;
    None when the server exports no series of that name. Raises OSError when the server does not answer."""
    with urllib.request.urlopen(url + "/metrics", timeout=timeout) as resp:
        text = resp.read().decode()
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{") or line.startswith(name + " ")]
    return max(values) if values else None


def _rfc3339(text):
    """Unix time (s) of an RFC 3339 stamp as Prometheus writes it: ``2026-12-06T04:35:01.123456789Z`` or with an offset
    ``+02:00``, any number of fraction digits. Raises ValueError on anything else."""
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text)
    if not match:
        raise ValueError("%r is not an RFC 3339 time stamp" % (text,))
    whole, frac, zone = match.groups()
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0" + (frac or ".0")) - offset


class Load:
    """A closed loop of ``concurrency`` requests (random token ids, ``input_len`` / ``output_len`` tokens) against ``url``,
    in a daemon thread, in rounds of ``concurrency x rounds_of`` requests until :meth:`close`. Server restarts survive it:
    a round that fails is retried by the next one after 0.2 s. Longer rounds (``rounds_of``) keep the queue from draining
    between two rounds."""

    def __init__(self, url, concurrency, rounds_of=2, input_len=32, output_len=120):
        if int(concurrency) < 1:
            raise ValueError("concurrency=%r: a closed loop needs at least 1 request in flight. Fix: pass concurrency >= 1" % (concurrency,))
        self.url, self.concurrency, self.rounds_of = url, int(concurrency), int(rounds_of)
        self.input_len, self.output_len = int(input_len), int(output_len)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        """The loop (the thread's target)."""
        while not self.stop.is_set():
            try:
                bc.run_benchmark(bc.Target(self.url, timeout_s=60, stall_timeout_s=10),
                                 bc.make_prompts(self.concurrency * self.rounds_of, self.input_len, self.output_len, seed=5),
                                 max_concurrency=self.concurrency)
            # the server restarts under the load on purpose: any failure of a round is retried by the next one
            except Exception:  # pylint: disable=broad-except
                time.sleep(0.2)

    def close(self, timeout=60.0):
        """Stop after the round in flight (at most ``timeout`` s)."""
        self.stop.set()
        self.thread.join(timeout)


class Prometheus:
    """Prometheus on ``127.0.0.1:<free port>`` with its configuration and data under ``scratch``.

    It loads every rules file under ``<watch_dir>/llmops-sglang/rules/`` and scrapes, as job ``job`` (the role's
    ``speculative_watch_job``), the file_sd targets under ``<watch_dir>/llmops-sglang/targets/``, every ``interval_s``
    (scrape, evaluation and file_sd refresh). ``watch_dir`` is the role's ``speculative_watch_dir``.

    Raises PromWatchError when the ``prometheus`` binary is not on PATH (Debian's package; ``make bootstrap``).
    """

    def __init__(self, scratch, watch_dir, job="llmops-sglang", interval_s=1):
        binary = shutil.which("prometheus")
        if not binary:
            raise PromWatchError("prometheus is not on PATH: needs Debian's prometheus package (the server and promtool). "
                                 "Fix: make bootstrap (scripts/bootstrap.sh installs it)")
        self.scratch, self.port = scratch, free_port()
        self.api = "http://127.0.0.1:%d" % self.port
        base = os.path.join(watch_dir, "llmops-sglang")
        config = os.path.join(scratch, "prometheus.yml")
        with open(config, "w") as fh:
            fh.write("global: {scrape_interval: %ds, evaluation_interval: %ds}\n"
                     "rule_files: ['%s/rules/*.yml']\n"
                     "scrape_configs:\n  - job_name: %s\n"
                     "    file_sd_configs: [{files: ['%s/targets/*.json'], refresh_interval: %ds}]\n"
                     % (interval_s, interval_s, base, job, base, interval_s))
        self.log_path = os.path.join(scratch, "prometheus.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([binary, "--config.file", config, "--storage.tsdb.path", os.path.join(scratch, "data"),
                                          "--web.listen-address", "127.0.0.1:%d" % self.port], stdout=log, stderr=subprocess.STDOUT)

    def query(self, path):
        """The ``data`` member of the JSON answer of API ``path`` (e.g. ``/api/v1/alerts``)."""
        with urllib.request.urlopen(self.api + path, timeout=5) as resp:
            return json.loads(resp.read().decode())["data"]

    def wait_target_up(self, timeout=60.0):
        """Seconds until the first scrape target is ``up``; raises PromWatchError (with the log's tail) after ``timeout``."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            try:
                targets = self.query("/api/v1/targets")["activeTargets"]
                if targets and targets[0]["health"] == "up":
                    return time.monotonic() - start
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.25)
        with open(self.log_path) as log:
            tail = log.read()[-3000:]
        raise PromWatchError("Prometheus did not scrape its target within %.0f s (exit status %s). Fix: check that the file_sd "
                             "target is reachable from the controller; log:\n%s" % (timeout, self.proc.poll(), tail))

    def rules_loaded(self):
        """How many rules (recording and alerting) Prometheus loaded."""
        return sum(len(g["rules"]) for g in self.query("/api/v1/rules")["groups"])

    def alert_state(self, name):
        """``firing``, ``pending`` or ``inactive`` (no alert of that name) for alert ``name``."""
        states = [a["state"] for a in self.query("/api/v1/alerts")["alerts"] if a["labels"].get("alertname") == name]
        return "firing" if "firing" in states else ("pending" if "pending" in states else "inactive")

    def active_at(self, name):
        """When alert ``name`` became pending (its condition first held), as Unix time in seconds (Prometheus's
        ``activeAt``, the earliest over its series); None when the alert is inactive."""
        stamps = [a["activeAt"] for a in self.query("/api/v1/alerts")["alerts"] if a["labels"].get("alertname") == name]
        if not stamps:
            return None
        return min(_rfc3339(text) for text in stamps)

    def wait_state(self, name, want, since, timeout=120.0):
        """Seconds from ``since`` (a ``time.monotonic()`` value) until alert ``name`` is in state ``want``, polled every
        0.25 s; None when it was not within ``timeout`` s of ``since``."""
        while time.monotonic() - since < timeout:
            if self.alert_state(name) == want:
                return time.monotonic() - since
            time.sleep(0.25)
        return None

    def close(self):
        """Stop Prometheus (SIGTERM, then SIGKILL after 10 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
