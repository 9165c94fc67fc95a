"""sglang_server with sglang_server_speculative_from_decision: the tuned arm recorded on the host is what the one
renderer renders; a missing decision, or one measured on another model/version/GPU, is refused before any change.

Runs the role's validate.yml (what preflight, serve's plan and the deploy run first) on the controller with the
recorded facts of the reference host (4 x RTX PRO 6000 Blackwell, test_role_rendering.REF_GPU) and an H200 host. The
decision files are written here by hand in the shape playbooks/spec_tune.yml writes them (see its "Record the decision
on the host" task); the expected flags are SGLang's spelling of the arm NEXTN 3/1/4 (docs/design/SGLANG_FACTS.md).
"""
from __future__ import annotations

import json

from test_role_rendering import H200_GPU, REF_GPU, REFERENCE_DEPLOYMENT, facts, role_task, run_tasks

RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def decision(**fingerprint):
    fp = {"model_path": "Qwen/Qwen3.5-122B-A10B", "sglang_version": "0.5.9", "tp_size": 4, "gpu_models": [RTX], "gpu_count": 4,
          "levels": [1, 8], "host": "target"}
    fp.update(fingerprint)
    return {"arm": {"key": "NEXTN-s3-k1-d4"}, "time": "2026-12-01T10:00:00Z", "fingerprint": fp,
            "server_vars": {"sglang_server_speculative_algorithm": "NEXTN", "sglang_server_speculative_num_steps": 3,
                            "sglang_server_speculative_eagle_topk": 1, "sglang_server_speculative_num_draft_tokens": 4,
                            "sglang_server_speculative_draft_model_path": None}}


RENDER = [role_task("sglang_server", "validate.yml"),
          {"name": "Keep the argv", "ansible.builtin.set_fact": {"rendered": "{{ sglang_server_launch.argv }}"}}]


def flags(argv):
    return [(a, argv[i + 1]) for i, a in enumerate(argv) if a.startswith("--speculative-")]


def run(tmp_path, gpu, content, **extra):
    path = tmp_path / "sglang-server.spec_decision.json"
    if content is not None:
        path.write_text(content)
    play_vars = dict(REFERENCE_DEPLOYMENT, sglang_server_speculative_from_decision=True,
                     sglang_server_speculative_decision_path=str(path),
                     # the inventory says 1/1/2; the decision (3/1/4) must win
                     sglang_server_speculative_algorithm="NEXTN", sglang_server_speculative_num_steps=1,
                     sglang_server_speculative_eagle_topk=1, sglang_server_speculative_num_draft_tokens=2)
    play_vars.update(extra)
    return run_tasks(tmp_path, facts("ubuntu2404", gpu), RENDER, play_vars)


def test_the_recorded_decision_is_rendered(tmp_path):
    rc, text, res = run(tmp_path, REF_GPU, json.dumps(decision()))
    assert rc == 0, text
    assert flags(res["rendered"]) == [("--speculative-algorithm", "NEXTN"), ("--speculative-num-steps", "3"),
                                      ("--speculative-eagle-topk", "1"), ("--speculative-num-draft-tokens", "4")]
    assert "speculative settings: the tuning decision NEXTN-s3-k1-d4 of 2026-12-01T10:00:00Z" in text


def test_an_off_decision_renders_no_speculative_flag(tmp_path):
    off = decision()
    off["arm"] = {"key": "off"}
    off["server_vars"] = dict.fromkeys(off["server_vars"])
    rc, text, res = run(tmp_path, REF_GPU, json.dumps(off))
    assert rc == 0, text
    assert flags(res["rendered"]) == []


def test_without_the_switch_the_inventory_is_rendered(tmp_path):
    rc, text, res = run(tmp_path, REF_GPU, json.dumps(decision()), sglang_server_speculative_from_decision=False)
    assert rc == 0, text
    assert ("--speculative-num-steps", "1") in flags(res["rendered"])
    assert "speculative settings: the inventory" in text


def test_a_missing_decision_is_refused(tmp_path):
    rc, text, _res = run(tmp_path, REF_GPU, None)
    assert rc != 0
    assert "sglang_server_speculative_from_decision=true on target, but there is no tuning decision at" in text
    assert "spec_tune.yml" in text


def test_a_decision_for_another_gpu_and_version_is_refused(tmp_path):
    # measured on the 4 x RTX PRO 6000 host with SGLang 0.5.9; served now on one H200 with tp 1 and 0.5.10
    rc, text, _res = run(tmp_path, H200_GPU, json.dumps(decision()), sglang_server_tp_size=1, sglang_server_version="0.5.10",
                         sglang_server_image="lmsysorg/sglang:v0.5.10-cu130-runtime")
    assert rc != 0
    flat = " ".join(text.split())
    assert "was measured on another setup" in flat
    assert "sglang_version 0.5.9 then, 0.5.10 now" in flat
    assert "tp_size 4 then, 1 now" in flat
    assert "gpu_models ['%s'] then, ['NVIDIA H200'] now" % RTX in flat
    assert "gpu_count 4 then, 1 now" in flat
    assert "model_path" not in flat.split("was measured on another setup")[1].split("Fix:")[0]


def test_a_table_mode_decision_is_rendered_with_adaptive_on(tmp_path):
    # spec_tune mode=table records adaptive on, the tuned table and the static settings of its largest candidate (3 steps)
    table = {"1": {"candidate_steps": [1, 3]}, "32": {"candidate_steps": [0, 1]}}
    tuned = decision(sglang_version="0.5.23")
    tuned["server_vars"].update(sglang_server_speculative_adaptive=True, sglang_server_speculative_adaptive_config=table)
    rc, text, res = run(tmp_path, REF_GPU, json.dumps(tuned), sglang_server_version="0.5.23",
                        sglang_server_image="lmsysorg/sglang:v0.5.23-cu130-runtime")
    assert rc == 0, text
    assert ("--speculative-adaptive-config", "/etc/sglang-adaptive/speculative_adaptive.json") in flags(res["rendered"])
    assert "--speculative-adaptive" in res["rendered"]
    assert ("--speculative-num-steps", "3") in flags(res["rendered"])
