"""production_concurrency against the SGLang simulator (a test double) serving a known load.

The load: a closed loop of max_concurrency 8 (bench_client, 24 requests of 32 prompt / 150 output tokens, MTP off):
8 requests are always in flight, so the scheduler decodes 8 running requests at every step once the first prefill
batch is in (a finished request is replaced by the next one, which runs a prefill batch of its own and rejoins).
The reported distribution must be within one request of 8: p50 and p90 in [7, 9], max 8 (never more than the load).
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bc
from ansible_collections.llmops.sglang.plugins.modules import production_concurrency

from ansible.module_utils.testing import patch_module_args

pytestmark = pytest.mark.simulator


def run(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            production_concurrency.main()
    out = json.loads(capsys.readouterr().out)
    assert not out.get("failed"), out.get("msg")
    return out


def test_known_load_of_8_from_metrics_and_from_the_log(sglang_sim, capsys):
    srv = sglang_sim(["--enable-metrics", "--decode-log-interval", "4"])
    done = {}

    def load():
        t = bc.Target(srv.url, timeout_s=120, stall_timeout_s=20)
        done["results"] = bc.run_benchmark(t, bc.make_prompts(24, 32, 150, seed=3), max_concurrency=8)

    th = threading.Thread(target=load)
    th.start()
    time.sleep(0.5)        # past the first prefill batch
    out = run(capsys, {"source": "metrics", "url": srv.url, "duration": 2.0, "interval": 0.1, "levels": [1, 4, 8, 32]})
    th.join(120)
    assert not th.is_alive()
    dist = out["distribution"]
    assert dist["samples"] >= 4, (dist, out["window"])   # a /metrics read takes 0.1-0.5 s on a loaded build machine
    assert 7 <= dist["running"]["p50"] <= 9 and 7 <= dist["running"]["p90"] <= 9, dist
    assert dist["running"]["max"] == 8
    assert out["weights"] and max(out["weights"], key=out["weights"].get) == "8"

    log = run(capsys, {"source": "file", "log_path": srv.log_path, "log_since": "1h", "levels": [1, 4, 8, 32]})
    dist = log["distribution"]
    # 24 requests x 149 decode tokens / 8 per step = 447 steps, one Decode line every 4 steps: ~110 lines
    assert dist["samples"] >= 80, dist
    assert 7 <= dist["running"]["p50"] <= 9 and 7 <= dist["running"]["p90"] <= 9, dist
    assert dist["running"]["max"] == 8
    assert dist["queue"]["max"] == 0          # the load never exceeds what the server admits (no queue)
    assert log["window"]["samples_read"] == dist["samples"]


def test_idle_server_is_a_clear_error(sglang_sim, capsys):
    srv = sglang_sim(["--enable-metrics"], instant=True)
    with patch_module_args({"source": "file", "log_path": srv.log_path, "_ansible_remote_tmp": "/tmp", "_ansible_keep_remote_files": False}):
        with pytest.raises(SystemExit):
            production_concurrency.main()
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] and "no busy samples" in out["msg"]
