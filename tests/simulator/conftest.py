"""Integration-test fixtures: the SGLang simulator (a test double) on loopback.

Fixture ``sglang_sim`` (function scope) is a factory. Every server it starts is killed at teardown,
whatever the test did (SIGTERM to its process group, SIGKILL after 5 s)::

    def test_something(sglang_sim):
        srv = sglang_sim(["--tp", "4", "--speculative-algorithm", "NEXTN",
                          "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                          "--speculative-num-draft-tokens", "2", "--enable-metrics"],
                         env={"SGLANG_SIM_VERSION": "0.5.9"}, instant=True)
        srv.url            # "http://127.0.0.1:<free port>"
        srv.post_json("/generate", {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 8}})
        srv.log_text()     # everything printed so far (SGLang log format of the selected version)

Arguments of the factory ``sglang_sim(args=(), env=None, wait_ready=True, timeout=30.0, instant=False,
load_s=0.05, cpu=None)``:

- ``args``: real SGLang ``launch_server`` flags. ``--host 127.0.0.1 --port <free port>`` are added
  unless given; ``--model-path /models/Qwen3.5-122B-A10B`` unless ``--model-path``/``--model`` is given.
- ``env``: extra environment, e.g. ``SGLANG_SIM_VERSION``, ``SGLANG_SIM_ACCEPT_P``, fault knobs
  (``SGLANG_SIM_SLOW_START_S``, ``SGLANG_SIM_CRASH_AFTER``, ``SGLANG_SIM_ERROR_AFTER_CHUNKS``,
  ``SGLANG_SIM_STALL_AFTER_CHUNKS``, ``SGLANG_SIM_BROKEN_DRAFT``, ``SGLANG_SIM_NEVER_READY``); see
  docs/simulator.md for the full list.
- ``wait_ready``: poll ``GET /health`` until 200 (raises ``SimError`` with the last log lines if the
  process exits or ``timeout`` s pass). Pass ``False`` for refusal / never-ready / slow-start tests.
- ``instant``: ``SGLANG_SIM_INSTANT=1`` (same token accounting, no sleeping).
- ``load_s``: simulated weight-load time in seconds (``SGLANG_SIM_LOAD_S``) unless ``env`` sets it.

The returned ``SimProcess`` (tests/sandbox/sglang_sim/harness.py) has ``url``, ``host``, ``port``,
``proc``, ``log_path``, ``returncode``, and ``log_text()``, ``log_tail(n)``, ``wait_for_log(regex,
timeout)``, ``wait_ready(timeout)``, ``wait_exit(timeout)``, ``status(path)``, ``get_json(path)``,
``get_text(path)``, ``post_json(path, body)``, ``stop()``.

Fixture ``sim_server_cls`` gives the class itself for module-scoped setups (use it as a context manager).
"""
from __future__ import annotations

import pytest

from sglang_sim.harness import SimProcess


@pytest.fixture
def sglang_sim(tmp_path):
    started = []

    def start(args=(), env=None, wait_ready=True, timeout=30.0, instant=False, load_s=0.05, cpu=None):
        log_path = str(tmp_path / ("sglang-sim-%d.log" % len(started)))
        srv = SimProcess(args=args, env=env, log_path=log_path, instant=instant, load_s=load_s, cpu=cpu)
        started.append(srv)
        if wait_ready:
            srv.wait_ready(timeout=timeout)
        return srv

    yield start
    for srv in started:
        srv.stop()


@pytest.fixture(scope="session")
def sim_server_cls():
    return SimProcess
