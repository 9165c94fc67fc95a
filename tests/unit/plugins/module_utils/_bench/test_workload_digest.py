"""workloads.content_digest / locate and the workload_digest filter: the benchmark's skip-if-unchanged fingerprint
counts a prompt file by its content, not by its path (issue 16).

Expected digests are computed here from the documented format (sha256 over, per file in read order: base name, NUL,
sha256 of the bytes), not by calling the code under test twice.
"""
from __future__ import annotations

import hashlib
import json
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.benchmark import FilterModule
from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads as wl
from ansible_collections.llmops.sglang.plugins.module_utils._bench.builtin_prompts import BUILTIN_PROMPTS

DIGEST = FilterModule().filters()["workload_digest"]
ROW_A = '{"prompt": "What is 2+2?", "category": "math"}\n'
ROW_B = '{"prompt": "What is 2+3?", "category": "math"}\n'


def by_hand(*files):
    """(base name, bytes) pairs -> the documented digest."""
    h = hashlib.sha256()
    for name, data in files:
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return "sha256:" + h.hexdigest()


def test_a_file_edited_at_the_same_path_is_a_new_digest(tmp_path):
    f = tmp_path / "prompts.jsonl"
    f.write_text(ROW_A)
    first = wl.content_digest(str(f))
    assert first == by_hand(("prompts.jsonl", ROW_A.encode()))
    f.write_text(ROW_B)      # same path, one character differs
    second = wl.content_digest(str(f))
    assert second == by_hand(("prompts.jsonl", ROW_B.encode()))
    assert second != first


def test_touching_a_file_without_change_keeps_the_digest(tmp_path):
    f = tmp_path / "prompts.jsonl"
    f.write_text(ROW_A)
    before = wl.content_digest(str(f))
    os.utime(str(f), (1, 1))         # only the times change
    assert wl.content_digest(str(f)) == before


def test_a_directory_hashes_its_prompt_files_in_read_order(tmp_path):
    d = tmp_path / "wl"
    d.mkdir()
    (d / "b.jsonl").write_text(ROW_B)
    (d / "a.jsonl").write_text(ROW_A)
    (d / "notes.txt").write_text("not a prompt file: ignored as resolve_files ignores it")
    assert wl.content_digest(str(d)) == by_hand(("a.jsonl", ROW_A.encode()), ("b.jsonl", ROW_B.encode()))
    (d / "c.json").write_text('[{"prompt": "x"}]')   # a file added to the workload is a new question
    assert wl.content_digest(str(d)) == by_hand(("a.jsonl", ROW_A.encode()), ("b.jsonl", ROW_B.encode()),
                                                ("c.json", b'[{"prompt": "x"}]'))


def test_a_glob_hashes_its_matches(tmp_path):
    (tmp_path / "x1.jsonl").write_text(ROW_A)
    (tmp_path / "x2.jsonl").write_text(ROW_B)
    assert wl.content_digest(str(tmp_path / "x*.jsonl")) == by_hand(("x1.jsonl", ROW_A.encode()), ("x2.jsonl", ROW_B.encode()))


def test_named_workloads():
    assert wl.content_digest("random-ids") == "" and wl.content_digest("") == ""
    builtin = "sha256:" + hashlib.sha256(json.dumps(BUILTIN_PROMPTS, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert wl.content_digest("builtin") == builtin
    assert wl.content_digest("auto") == builtin   # auto may send the built-in set
    long_rows = json.dumps(wl.builtin_long_rows(), sort_keys=True, separators=(",", ":")).encode()
    assert wl.content_digest("builtin-long") == "sha256:" + hashlib.sha256(long_rows).hexdigest() != builtin


def test_relative_paths_resolve_like_the_action_plugin(tmp_path, monkeypatch):
    play = tmp_path / "play"
    (play / "prompts").mkdir(parents=True)
    (play / "prompts" / "p.jsonl").write_text(ROW_A)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(str(elsewhere))
    # not under the current directory -> the playbook's directory
    assert wl.locate("prompts/p.jsonl", str(play)) == os.path.join(str(play), "prompts/p.jsonl")
    assert DIGEST("prompts/p.jsonl", str(play)) == by_hand(("p.jsonl", ROW_A.encode()))
    # present under the current directory -> read there, as the action plugin does
    (elsewhere / "prompts").mkdir()
    (elsewhere / "prompts" / "p.jsonl").write_text(ROW_B)
    assert wl.locate("prompts/p.jsonl", str(play)) == "prompts/p.jsonl"
    assert DIGEST("prompts/p.jsonl", str(play)) == by_hand(("p.jsonl", ROW_B.encode()))
    assert wl.locate("builtin", str(play)) == "builtin"


def test_a_missing_file_names_the_variable(tmp_path):
    with pytest.raises(AnsibleFilterError) as err:
        DIGEST("nope.jsonl", str(tmp_path))
    msg = str(err.value)
    assert msg.startswith("sglang_benchmark_workload='nope.jsonl': ") and "no such file or directory" in msg
    with pytest.raises(wl.WorkloadError, match="glob matches no file"):
        wl.content_digest(str(tmp_path / "none*.jsonl"))
