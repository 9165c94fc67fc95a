"""fleet_report module: the files, idempotence, check mode and a refusal (the numbers are tested in module_utils)."""
from __future__ import annotations

import json

import pytest

from ansible.module_utils.testing import patch_module_args
from ansible_collections.llmops.sglang.plugins.modules import fleet_report


def run(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            fleet_report.main()
    return json.loads(capsys.readouterr().out)


def _entry(host, tok_s, tpot, driver="580.95.05"):
    return {"host": host, "run_id": "r1", "facts": {"host": {"driver_version": driver}, "server": {"version": "0.5.9"}},
            "rows": [{"concurrency": 1, "request_rate": None, "completed": 4, "output_tok_s": tok_s,
                      "median_ttft_ms": 40.0, "median_tpot_ms": tpot, "accept_length": 2.0}]}


ENTRIES = [_entry("gpu1", 135.0, 7.4), _entry("gpu2", 136.0, 7.35), _entry("gpu3", 100.0, 10.0, driver="575.57.08")]


def test_files_flag_and_idempotence(capsys, tmp_path):
    args = {"dest": str(tmp_path), "run_id": "fleet-1", "entries": ENTRIES}
    out = run(capsys, args)
    assert out["changed"] is True, out.get("msg")
    d = tmp_path / "fleet" / "fleet-1"
    assert sorted(p.name for p in d.iterdir()) == ["fleet.json", "fleet.md", "fleet_throughput.png"]
    assert (d / "fleet_throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # output tok/s: median of 100, 135, 136 is 135, gpu3 is (135 - 100) / 135 = 25.9 % below it; decode speed
    # 1000 / TPOT: median of 100, 135.14, 136.05 is 1000 / 7.4, gpu3 is 1 - 7.4 / 10 = 26.0 % below it (the worst)
    assert out["flagged"] == ["gpu3"]
    saved = json.loads((d / "fleet.json").read_text())
    assert saved["report"]["hosts"][2]["shortfall"]["c1"]["output_tok_s"] == pytest.approx(35.0 / 135.0)
    assert saved["report"]["hosts"][2]["worst_shortfall"] == pytest.approx(0.26)
    assert saved["report"]["hosts"][2]["worst"] == "c1 decode speed"
    assert "host.driver_version: 575.57.08 here, 580.95.05 on the siblings" in (d / "fleet.md").read_text()
    assert run(capsys, args)["changed"] is False


def test_check_mode_and_refusal(capsys, tmp_path):
    out = run(capsys, {"dest": str(tmp_path), "run_id": "f", "entries": ENTRIES, "plots": False, "_ansible_check_mode": True})
    assert out["changed"] is True and len(out["changed_files"]) == 2 and not (tmp_path / "fleet").exists()
    bad = run(capsys, {"dest": str(tmp_path), "run_id": "f", "entries": ENTRIES[:1], "plots": False})
    assert bad["failed"] is True and "at least two hosts" in bad["msg"]
    bad = run(capsys, {"dest": str(tmp_path), "run_id": "../x", "entries": ENTRIES, "plots": False})
    assert bad["failed"] is True and "run_id='../x'" in bad["msg"]
