"""benchmark_state module: check/record round trip, the image id of the running container, check mode."""
from __future__ import annotations

import json

import pytest

from ansible.module_utils.testing import patch_module_args
from ansible_collections.llmops.sglang.plugins.modules import benchmark_state

INPUTS = {"server": {"version": "0.5.9", "image": "img:1"}, "host": {"gpu_count": 4}, "benchmark": {"c": [1, 8]}}


def run(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            benchmark_state.main()
    return json.loads(capsys.readouterr().out)


def test_check_record_check(capsys, tmp_path):
    path = str(tmp_path / "state" / "sglang-server.json")
    first = run(capsys, {"path": path, "inputs": INPUTS})
    assert first["run"] is True and first["changed"] is False and first["last"] is None
    rec = run(capsys, {"path": path, "action": "record", "inputs": first["inputs"],
                       "result": {"run_id": "r1", "rows": [{"concurrency": 1, "output_tok_s": 135.2}], "markdown": "| t |"}})
    assert rec["changed"] is True
    saved = json.loads((tmp_path / "state" / "sglang-server.json").read_text())
    assert saved["run_id"] == "r1" and saved["result"]["rows"][0]["output_tok_s"] == 135.2 and saved["inputs"] == INPUTS
    again = run(capsys, {"path": path, "action": "record", "inputs": INPUTS,
                         "result": {"run_id": "r1", "rows": [{"concurrency": 1, "output_tok_s": 135.2}], "markdown": "| t |"}})
    assert again["changed"] is False
    second = run(capsys, {"path": path, "inputs": INPUTS})
    assert second["run"] is False and second["reason"].startswith("nothing changed since run r1 (")
    assert second["last"]["result"]["markdown"] == "| t |"
    changed = run(capsys, {"path": path, "inputs": {**INPUTS, "server": {"version": "0.5.10", "image": "img:1"}}})
    assert changed["run"] is True and changed["reason"] == "changed since run r1: server.version: 0.5.9 -> 0.5.10"


def test_image_id_of_the_running_container_is_fingerprinted(capsys, tmp_path):
    engine = tmp_path / "podman"
    engine.write_text("#!/bin/sh\n[ \"$1 $2 $3\" = 'inspect --type container' ] && [ \"$6\" = sglang-server ] && echo sha256:abc && exit 0\nexit 125\n")
    engine.chmod(0o755)
    out = run(capsys, {"path": str(tmp_path / "s.json"), "inputs": INPUTS, "container_engine": str(engine),
                       "container_name": "sglang-server"})
    assert out["inputs"]["server"] == {"version": "0.5.9", "image": "img:1", "image_id": "sha256:abc"}
    gone = run(capsys, {"path": str(tmp_path / "s.json"), "inputs": INPUTS, "container_engine": str(engine),
                        "container_name": "other"})
    assert gone["inputs"]["server"]["image_id"] is None


def test_record_in_check_mode_writes_nothing_and_a_bad_state_means_run(capsys, tmp_path):
    path = tmp_path / "s.json"
    out = run(capsys, {"path": str(path), "action": "record", "inputs": INPUTS, "result": {"run_id": "r"},
                       "_ansible_check_mode": True})
    assert out["changed"] is True and not path.exists()
    path.write_text("not json")
    bad = run(capsys, {"path": str(path), "inputs": INPUTS})
    assert bad["run"] is True and bad["reason"].startswith("the recorded state cannot be used (") and str(path) in bad["reason"]


def test_negative_max_age_is_refused(capsys, tmp_path):
    out = run(capsys, {"path": str(tmp_path / "s.json"), "inputs": INPUTS, "max_age": -1})
    assert out["failed"] is True and "max_age=-1" in out["msg"]
