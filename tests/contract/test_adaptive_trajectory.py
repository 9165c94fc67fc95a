"""The simulator's adaptive policy (tests/sandbox/sglang_sim/adaptive.py) against SGLang's own class.

``tests/fixtures/sglang/adaptive_trajectories.json`` holds recorded sequences: per decode batch its size and the accepted
drafts of each request, and the step counts SGLang 0.5.23's real ``AdaptiveSpeculativeParams`` / ``AdaptiveStepSlot``
(``sglang/srt/speculative/adaptive_spec_params.py`` of the wheel) chose: the step count active for the batch
(``get_steps_for_batch``) and the switch after its verify (``on_verify_complete``). The sequences were recorded in a
closed loop (``python3 tests/contract/test_adaptive_trajectory.py --record``): each request accepts a chain of drafts, each
with a per-phase probability, never more than the steps the real class had chosen for that batch.

* ``test_simulator_replays_the_recorded_trajectories`` needs no wheel: the simulator's policy, fed the same batches, must
  choose the same step counts and reach the same EMA;
* ``test_real_class_replays_the_recorded_trajectories`` imports the class from the cached 0.5.23 wheel (.cache/sglang-wheels,
  fetched by tests/contract/test_adaptive_contract.py and test_sglang_contract.py) with its heavy imports (server args,
  runtime context, the algorithm registry, torch-backed utils) stubbed, and replays the same batches; it skips when the
  wheel is not cached.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import random
import sys
import tempfile
import types
from unittest import mock

import pytest

from sglang_sim import adaptive as sim_adaptive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "sglang", "adaptive_trajectories.json")
PARAMS = "sglang/srt/speculative/adaptive_spec_params.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("sglang_contract_script_traj", os.path.join(ROOT, "scripts", "sglang_contract.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def real_module(messages=None):
    """``adaptive_spec_params`` of the cached 0.5.23 wheel, imported with its imports stubbed; None when not cached."""
    contract = _load_script()
    try:
        wheel = contract.Wheel(contract.wheel_path("0.5.23", download=False))
    except contract.ContractError:
        return None
    source = wheel.text(PARAMS)

    def log_info_on_rank0(logger, msg):
        if messages is not None:
            messages.append(msg)

    stubs = {}
    for name in ("sglang", "sglang.srt", "sglang.srt.arg_groups", "sglang.srt.speculative"):
        stubs[name] = types.ModuleType(name)
    stubs["sglang.srt.arg_groups.overrides"] = types.SimpleNamespace(resolved_view=lambda a: a, resolving_view=lambda a: a)
    stubs["sglang.srt.runtime_context"] = types.SimpleNamespace(attn_dp_enabled_of=lambda cfg: False)
    stubs["sglang.srt.speculative.spec_info"] = types.SimpleNamespace(SpeculativeAlgorithm=None)
    stubs["sglang.srt.utils"] = types.SimpleNamespace(log_info_on_rank0=log_info_on_rank0)
    module = types.ModuleType("sglang_0_5_23_adaptive_spec_params")
    module.__file__ = PARAMS
    with mock.patch.dict(sys.modules, stubs):
        exec(compile(source, PARAMS, "exec"), module.__dict__)  # noqa: S102 - the wheel's own source, read from the zip
    return module


def _table_file(table):
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(table, handle)
    handle.close()
    return handle.name


# ------------------------------------------------------------------------------------------ the recorded cases
#: (name, table or None for SGLang 0.5.23's built-in one, initial steps, phases [(batches, batch size, acceptance p)], seed)
CASES = [
    ("bs1 high acceptance climbs", None, 3, [(60, 1, 0.92)], 1),
    ("bs1 low acceptance falls", None, 3, [(60, 1, 0.15)], 2),
    ("bs8 zero-step probes", {"8": {"candidate_steps": [0, 1, 3], "down_hysteresis": 0.0}}, 1, [(40, 8, 0.05), (40, 8, 0.9)], 3),
    ("moving load 1-8-32-64-8-1 on the built-in table", None, 3,
     [(40, 1, 0.8), (40, 8, 0.6), (30, 32, 0.5), (20, 64, 0.5), (40, 8, 0.7), (40, 1, 0.85)], 4),
    ("ceiling, hysteresis, fast EMA, short warm-up", {"1": {"candidate_steps": [1, 2, 4, 6], "ceiling_coeff": 1.5, "up_hysteresis": 0.25},
                                                      "16": {"candidate_steps": [0, 1, 2]}, "ema_alpha": 0.5, "update_interval": 2,
                                                      "warmup_batches": 3},
     4, [(30, 1, 0.3), (30, 1, 0.95), (30, 20, 0.6), (20, 3, 0.1)], 5),
    ("starting at zero steps", {"1": {"candidate_steps": [0, 2, 4], "down_hysteresis": 0.0}}, 0, [(50, 2, 0.8)], 6),
]


def record():
    """Run every case in a closed loop with the real class; returns the fixture dict."""
    messages = []
    real = real_module(messages)
    if real is None:
        raise SystemExit("the 0.5.23 wheel is not cached: run pytest tests/contract/test_adaptive_contract.py first")
    cases = []
    for name, table, initial, phases, seed in CASES:
        path = _table_file(table) if table is not None else None
        try:
            params = real.AdaptiveSpeculativeParams(initial_steps=initial, cfg_path=path)
        finally:
            if path:
                os.unlink(path)
        rng = random.Random(seed)
        batches = []
        for count, bs, p in phases:
            for _batch in range(count):
                steps = params.get_steps_for_batch(bs)
                accepted = []
                for _r in range(bs):
                    a = 0
                    while a < steps and rng.random() < p:
                        a += 1
                    accepted.append(a)
                switched = params.on_verify_complete(accepted, bs)
                batches.append({"bs": bs, "accepted": accepted, "steps": steps, "switched_to": switched})
        emas = dict((str(bs), slot.ema_accept_len) for bs, slot in params._slots.items())
        cases.append({"name": name, "table": table, "initial_steps": initial, "batches": batches, "final_ema": emas,
                      "switches": sum(1 for b in batches if b["switched_to"] is not None)})
    return {"source": "sglang 0.5.23 wheel, %s AdaptiveSpeculativeParams (recorded by %s --record)"
                      % (PARAMS, os.path.relpath(__file__, ROOT)), "cases": cases}


@pytest.fixture(scope="module")
def recorded():
    with open(FIXTURE) as handle:
        return json.load(handle)


def _replay(params, case, steps_for, verify):
    for i, batch in enumerate(case["batches"]):
        assert steps_for(params, batch["bs"]) == batch["steps"], "%s: batch %d" % (case["name"], i)
        assert verify(params, batch["accepted"], batch["bs"]) == batch["switched_to"], "%s: batch %d" % (case["name"], i)


def test_the_fixture_covers_what_the_issue_asks(recorded):
    cases = recorded["cases"]
    assert len(cases) >= 5
    assert all(case["switches"] >= 1 for case in cases)
    # a zero-step probe and a multi-bucket run are among them
    assert any(b["steps"] == 0 for case in cases for b in case["batches"])
    assert any(len(set(b["bs"] for b in case["batches"])) >= 4 for case in cases)


def test_simulator_replays_the_recorded_trajectories(recorded, tmp_path):
    for case in recorded["cases"]:
        path = None
        if case["table"] is not None:
            path = str(tmp_path / "table.json")
            with open(path, "w") as handle:
                json.dump(case["table"], handle)
        cfg, entries = sim_adaptive.load_table(path, (0, 5, 23))
        policy = sim_adaptive.AdaptivePolicy(case["initial_steps"], cfg, entries)
        _replay(policy, case, lambda p, bs: p.steps_for(bs), _sim_verify)
        assert dict((str(bs), slot.ema_accept_len) for bs, slot in policy.slots.items()) == case["final_ema"], case["name"]


def test_real_class_replays_the_recorded_trajectories(recorded):
    messages = []
    real = real_module(messages)
    if real is None:
        pytest.skip("sglang 0.5.23 wheel not cached in .cache/sglang-wheels (tests/contract/test_adaptive_contract.py fetches it)")
    for case in recorded["cases"]:
        path = _table_file(case["table"]) if case["table"] is not None else None
        try:
            params = real.AdaptiveSpeculativeParams(initial_steps=case["initial_steps"], cfg_path=path)
        finally:
            if path:
                os.unlink(path)
        del messages[:]
        _replay(params, case, lambda p, bs: p.get_steps_for_batch(bs), lambda p, acc, bs: p.on_verify_complete(acc, bs))
        # SGLang's switch lines are the simulator's, character for character
        switches = [m for m in messages if m.startswith("Adaptive spec params updated")]
        assert len(switches) == case["switches"]
        for line in switches:
            old, rest = line.split("steps ", 1)[1].split(" -> ", 1)
            new, ema = rest.split(" (ema_accept_len=", 1)
            assert sim_adaptive.switch_line(int(old), int(new), float(ema.rstrip(")"))) == line


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        logging.basicConfig()
        data = record()
        with open(FIXTURE, "w") as handle:
            json.dump(data, handle, indent=None, separators=(",", ":"))
            handle.write("\n")
        print("wrote %s: %d cases, %s switches" % (FIXTURE, len(data["cases"]), [c["switches"] for c in data["cases"]]))


def _sim_verify(policy, acc, bs):
    """The simulator policy's step switch after one verify step (the new step count), None without a switch."""
    switch = policy.on_verify_complete(acc, bs)
    return None if switch is None else switch[1]
