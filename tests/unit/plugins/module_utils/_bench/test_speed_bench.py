"""SPEED-Bench workloads: its Parquet splits (pyarrow), its JSONL exports, its placeholder rows (hand-made fixtures in the
data set's schema, tests/fixtures/speed_bench; the expected rows are read off the fixture description by hand)."""
from __future__ import annotations

import json
import os
import sys

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import speed_bench as sb
from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads as wl


@pytest.fixture
def sbdir(fixtures_dir):
    return os.path.join(str(fixtures_dir), "speed_bench")


def test_config_of_and_placeholders():
    assert sb.config_of("/data/speed/throughput_16k/test.parquet") == "throughput_16k"
    assert sb.config_of("/x/nvidia/SPEED-Bench/qualitative/test-00000-of-00001.parquet") == "qualitative"
    assert sb.config_of("/x/prompts.parquet") is None
    assert sb.is_placeholder([sb.TURNS_PLACEHOLDER + "\n\n{question}"]) and sb.is_placeholder(["ok", sb.TURNS_PLACEHOLDER])
    assert not sb.is_placeholder(["Write a poem."])


def test_jsonl_export_loads_with_categories_and_without_placeholders(sbdir):
    # 6 rows, 1 placeholder (qa): 5 kept; the category filter keeps the two coding rows
    name, rows = wl.load_workload(os.path.join(sbdir, "qualitative.jsonl"))
    assert [r["category"] for r in rows] == ["coding", "coding", "math", "roleplay", "multilingual"]
    assert [len(r["turns"]) for r in rows] == [1, 1, 2, 3, 1]
    assert rows[2]["turns"] == ["Solve 3x + 7 = 22 and explain each step.", "Now solve 3x + 7 = 23."]
    assert rows[4]["prompt"].startswith("Traduis en français : « Le train")       # non-ASCII kept
    _name, coding = wl.load_workload(os.path.join(sbdir, "qualitative.jsonl"), categories=["coding"])
    assert [r["source"] for r in coding] == ["qualitative.jsonl:1", "qualitative.jsonl:2"]


def test_mostly_placeholders_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "throughput_32k" / "x.jsonl"
    path.parent.mkdir()
    path.write_text('{"category": "mixed", "turns": ["%s"]}\n{"category": "mixed", "turns": ["real text"]}\n'
                    '{"category": "mixed", "turns": ["%s"]}\n' % (sb.TURNS_PLACEHOLDER, sb.TURNS_PLACEHOLDER))
    expect = (r"2 of 3 SPEED-Bench rows are unresolved placeholders.*prepare_data.py "
              r"--config throughput_32k \(it writes data/speed/throughput_32k/test.parquet\)")
    with pytest.raises(wl.WorkloadError, match=expect):
        wl.load_file(str(path))


def test_parquet_without_pyarrow_names_the_package(sbdir, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(wl.WorkloadError, match=r"needs the Python package pyarrow on the controller.*pip install pyarrow.*JSONL"):
        wl.load_file(os.path.join(sbdir, "qualitative", "test-00000-of-00001.parquet"))


def test_parquet_split_loads_with_categories(sbdir):
    pytest.importorskip("pyarrow.parquet")
    path = os.path.join(sbdir, "qualitative", "test-00000-of-00001.parquet")
    rows, unresolved = sb.load_parquet(path)
    assert unresolved == 1
    assert [(r["category"], r["source"]) for r in rows] == [
        ("coding", "qualitative/test-00000-of-00001.parquet:1"), ("coding", "qualitative/test-00000-of-00001.parquet:2"),
        ("math", "qualitative/test-00000-of-00001.parquet:3"), ("roleplay", "qualitative/test-00000-of-00001.parquet:4"),
        ("multilingual", "qualitative/test-00000-of-00001.parquet:5")]
    assert rows[3]["turns"][2] == "Say goodbye as the fog rolls in."
    # a directory workload reads its .parquet files too, and the category filter applies
    _name, math = wl.load_workload(os.path.join(sbdir, "qualitative"), categories=["math"])
    assert [r["prompt"] for r in math] == ["Solve 3x + 7 = 22 and explain each step."]


def test_raw_throughput_download_is_refused(sbdir):
    pytest.importorskip("pyarrow.parquet")
    # 3 of 5 rows are placeholders (60 % > 50 %): the raw throughput split needs NVIDIA's prepare_data.py first
    with pytest.raises(wl.WorkloadError, match=r"3 of 5 SPEED-Bench rows.*--config throughput_16k"):
        wl.load_file(os.path.join(sbdir, "throughput_16k", "test-00000-of-00001.parquet"))


def test_placeholder_rows_are_counted_as_skipped(tmp_path):
    # 4 resolved rows and 1 placeholder in a JSONL export: 4 of 5 used, the placeholder has no line to name
    p = tmp_path / "qualitative.jsonl"
    rows = [{"category": "coding", "turns": ["q%d" % i]} for i in range(4)]
    rows.append({"category": "coding", "turns": [sb.TURNS_PLACEHOLDER + " (source: x)"]})
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    used, skips = wl.read_file(str(p))
    assert len(used) == 4 and skips.rows == 5 and skips.skipped == {"SPEED-Bench placeholder": 1}
    assert wl.skip_counts([(str(p), used, skips)])["text"] == "4 of 5 rows used; skipped: 1 SPEED-Bench placeholder"
