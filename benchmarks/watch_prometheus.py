"""A real Prometheus (Debian's prometheus binary) loads the speculative_watch role's files and alerts on the SGLang
simulator (a test double): time to fire and time to resolve, measured.

1. The simulator serves NEXTN 3/1/4 on loopback with draft acceptance p = 0.9 under a closed loop of 4 requests
   (accept length 1 + 0.9 + 0.81 + 0.729 = 3.439 per verify step, by the chain model).
2. The role (playbooks/watch.yml's role, local connection) writes the rules, the host's thresholds and its file_sd target
   under a scratch directory, with the reference accept length measured from /metrics, a 20 s window and every alert's
   ``for`` at 10 s (speculative_watch_window / speculative_watch_alert_for: the production defaults are 5m and 2-10m).
3. Prometheus scrapes every 1 s and evaluates every 1 s.
4. Degrade: the simulator restarts on the same port with p = 0.3 (accept length 1 + 0.3 + 0.09 + 0.027 = 1.417, below
   0.85 x 3.439 = 2.92): SGLangSpecAcceptLengthLow must fire; then p = 0.9 again: it must resolve.
   Then the cap: the simulator restarts with --max-running-requests 2 under a closed loop of 6 (4 queued at every
   moment; rounds of 600 requests, so the queue does not drain between rounds): SGLangAdmissionCapped must fire after
   about one window (20 s) plus its ``for`` (10 s).

Expected time to fire, by hand: the window's mean falls below the threshold once the share f of degraded samples
satisfies 3.439 (1 - f) + 1.417 f < 2.92, f > 0.257, i.e. about 0.26 x 20 s = 5 s after the first degraded sample, then
the ``for`` of 10 s, plus up to one scrape, one evaluation and the simulator's decode-log interval: about 15-18 s.
Resolve: the mean rises above the threshold after f < 0.257 of the window is degraded, about 15 s after the restore.

Usage: .venv/bin/python benchmarks/watch_prometheus.py [--keep DIR]
Prints one line per phase: the alert, the seconds from the change to firing (or resolving), and the values seen.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "sandbox"))
sys.path.insert(0, os.path.join(REPO, ".collections"))

from sglang_sim.harness import SimProcess, free_port  # noqa: E402
from promwatch import Load, Prometheus, alert_for, metric  # noqa: E402

SPEC = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--enable-metrics", "--decode-log-interval", "4",
        "--model-path", "/models/DeepSeek-V3"]
ENV = {"SGLANG_SIM_ARCH": "DeepseekV3ForCausalLM"}


def start_sim(port, accept_p, scratch, extra=()):
    env = dict(ENV, SGLANG_SIM_ACCEPT_P=str(accept_p))
    srv = SimProcess(args=SPEC + list(extra) + ["--port", str(port)], env=env,
                     log_path=os.path.join(scratch, "sim-%s.log" % time.time()))
    srv.wait_ready(timeout=30)
    return srv


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--keep", help="keep the scratch directory here")
    args = parser.parse_args()
    if not shutil.which("promtool"):
        sys.exit("needs Debian's prometheus package (prometheus and promtool): make bootstrap installs it")
    scratch = args.keep or tempfile.mkdtemp(prefix="llmops-watch-")
    os.makedirs(scratch, exist_ok=True)
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    srv = start_sim(port, 0.9, scratch)
    load = Load(url, 4)
    prom = None
    try:
        time.sleep(3)
        healthy = metric(url, "sglang:spec_accept_length")
        print("healthy accept length (sglang:spec_accept_length): %.3f (chain model 3.439)" % healthy)
        conf = os.path.join(scratch, "prometheus")
        os.makedirs(conf, exist_ok=True)
        play = [{"hosts": "gpu1", "gather_facts": False, "vars": {
            "sglang_server_version": "0.5.9", "speculative_watch_dir": conf, "speculative_watch_reload": "none",
            "speculative_watch_target": "127.0.0.1:%d" % port, "speculative_watch_window": "20s",
            "speculative_watch_alert_for": alert_for("10s"), "speculative_watch_accept_length": round(healthy, 3),
            "sglang_benchmark_result": {"rows": []},
            "sglang_server_expected": {
                "speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": 4, "max_running_requests": 2, "served_model_name": "deepseek",
                "enable_metrics": True}},
            "roles": ["llmops.sglang.speculative_watch"]}]
        with open(os.path.join(scratch, "play.json"), "w") as fh:
            json.dump(play, fh)
        with open(os.path.join(scratch, "inv"), "w") as fh:
            fh.write("gpu1 ansible_connection=local ansible_python_interpreter=%s\nlocalhost ansible_connection=local "
                     "ansible_python_interpreter=%s\n" % (sys.executable, sys.executable))
        t = time.monotonic()
        out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", os.path.join(scratch, "inv"),
                              os.path.join(scratch, "play.json")], cwd=REPO, capture_output=True, text=True,
                             env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg")), check=False)
        if out.returncode:
            sys.exit(out.stdout[-3000:])
        print("role: files written in %.1f s" % (time.monotonic() - t))
        prom = Prometheus(scratch, conf)
        print("prometheus: target up after %.1f s; rules loaded: %d" % (prom.wait_target_up(), prom.rules_loaded()))
        time.sleep(25)   # a full window of healthy samples
        print("before the change: SGLangSpecAcceptLengthLow %s" % prom.alert_state("SGLangSpecAcceptLengthLow"))

        srv.stop()
        changed = time.monotonic()
        srv = start_sim(port, 0.3, scratch)
        fired = prom.wait_state("SGLangSpecAcceptLengthLow", "firing", changed)
        degraded = metric(url, "sglang:spec_accept_length")
        print("accept length %.3f -> %.3f (chain model 1.417; threshold %.3f): SGLangSpecAcceptLengthLow fired after %s s"
              % (healthy, degraded, 0.85 * healthy, "%.1f" % fired if fired is not None else "NEVER (120 s)"))
        srv.stop()
        restored = time.monotonic()
        srv = start_sim(port, 0.9, scratch)
        resolved = prom.wait_state("SGLangSpecAcceptLengthLow", "inactive", restored)
        print("restored p = 0.9: SGLangSpecAcceptLengthLow resolved after %s s"
              % ("%.1f" % resolved if resolved is not None else "NEVER (120 s)"))
        print("NotReady during the restarts (for 10 s): %s" % prom.alert_state("SGLangNotReady"))

        load.close()
        srv.stop()
        capped = time.monotonic()
        srv = start_sim(port, 0.9, scratch, ["--max-running-requests", "2"])
        load = Load(url, 6, rounds_of=100)   # long rounds: the queue never drains between two rounds
        fired = prom.wait_state("SGLangAdmissionCapped", "firing", capped)
        print("cap 2 under a closed loop of 6 (running %s, queued %s): SGLangAdmissionCapped fired after %s s" % (
            metric(url, "sglang:num_running_reqs"), metric(url, "sglang:num_queue_reqs"),
            "%.1f" % fired if fired is not None else "NEVER (120 s)"))
    finally:
        load.close()
        srv.stop()
        if prom is not None:
            prom.close()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
