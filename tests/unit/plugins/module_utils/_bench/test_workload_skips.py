"""workloads: unusable rows are skipped and counted by reason, as bench_serving drops them; a file is refused only when
nothing usable remains or the skipped share is above the limit. Every expected count below is worked out by hand from the
rows as written here."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads as wl

NON_ASCII = "日本語の質問 😀 café"

# The shapes of ShareGPT_V3_unfiltered_cleaned_split.json, one row per line of the array (row i on line i + 1).
SHAREGPT_ROWS = [
    {"id": "ok1", "conversations": [{"from": "human", "value": "first question"}, {"from": "gpt", "value": "a"}]},
    {"id": "empty", "conversations": []},                                                              # too few turns
    {"id": "single", "conversations": [{"from": "human", "value": "alone"}]},                        # too few turns
    {"id": "gpt-first", "conversations": [{"from": "gpt", "value": "Hello! How can I help?"},
                                          {"from": "human", "value": "after the greeting"}, {"from": "gpt", "value": "b"}]},
    {"id": "empty-value", "conversations": [{"from": "human", "value": ""}, {"from": "gpt", "value": "c"}]},  # empty value
    {"id": "system", "conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "why?"},
                                       {"from": "gpt", "value": "d"}]},
    {"id": "no-human", "conversations": [{"from": "gpt", "value": "e"}, {"from": "gpt", "value": "f"}]},  # no human turn
    {"id": "utf8", "conversations": [{"from": "human", "value": NON_ASCII}, {"from": "gpt", "value": "g"}]},
    {"id": "multi", "conversations": [{"from": "human", "value": "t1"}, {"from": "gpt", "value": "r1"},
                                      {"from": "human", "value": "t2"}, {"from": "gpt", "value": "r2"},
                                      {"from": "human", "value": "t3"}]},
    "just a string",                                                                                   # not an object
    {"id": "ok2", "conversations": [{"from": "user", "value": "second question"}, {"from": "assistant", "value": "h"}]},
    {"id": "no-key"},                                                                                  # no prompt key
]


def _sharegpt(tmp_path, rows, name="sharegpt.json"):
    p = tmp_path / name
    p.write_text("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n]\n", encoding="utf-8")
    return str(p)


def _jsonl(tmp_path, lines, name="p.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(p)


def test_sharegpt_shapes_are_skipped_and_counted(tmp_path):
    path = _sharegpt(tmp_path, SHAREGPT_ROWS)
    rows, skips = wl.read_file(path)
    # used: ok1, gpt-first, system, utf8, multi, ok2 (6); skipped 6 of 12 = 50 %, not above the 0.5 limit
    assert [r["source"] for r in rows] == ["sharegpt.json:2", "sharegpt.json:5", "sharegpt.json:7", "sharegpt.json:9",
                                           "sharegpt.json:10", "sharegpt.json:12"]
    assert skips.rows == 12
    assert skips.skipped == {"too few turns": 2, "empty value": 1, "no human turn": 1, "not an object": 1, "no prompt key": 1}
    assert [(line, reason) for line, reason, _why in skips.first] == [
        (3, "too few turns"), (4, "too few turns"), (6, "empty value"), (8, "no human turn"), (11, "not an object")]
    wl.check_skips(path, rows, skips)      # 0.5 is not above 0.5
    # the existing rules: a leading assistant turn is skipped, a system turn is never the user turn, non-ASCII survives
    # byte for byte, and the turns keep their order
    by_src = dict((r["source"], r) for r in rows)
    assert by_src["sharegpt.json:5"]["prompt"] == "after the greeting"
    assert by_src["sharegpt.json:7"]["prompt"] == "why?" and by_src["sharegpt.json:7"]["system"] == "be brief"
    assert by_src["sharegpt.json:9"]["prompt"].encode("utf-8") == NON_ASCII.encode("utf-8")
    assert by_src["sharegpt.json:10"]["turns"] == ["t1", "t2", "t3"]
    counts = wl.skip_counts([(path, rows, skips)])
    assert counts["text"] == ("6 of 12 rows used; skipped: 2 too few turns, 1 empty value, 1 no human turn, 1 no prompt key, "
                              "1 not an object (lines 3, 4, 6, 8, 11, ...)")
    assert (counts["rows"], counts["used"], counts["files"]) == (12, 6, ["sharegpt.json"])
    assert counts["first_skipped"][0] == {"source": "sharegpt.json:3", "reason": "too few turns"}


def test_jsonl_with_a_broken_line_and_rows_without_a_user_turn(tmp_path):
    ok = [json.dumps({"prompt": "p%d" % i}) for i in range(9)]
    no_user = [json.dumps({"messages": [{"role": "system", "content": "S"}]}),
               json.dumps({"messages": [{"role": "assistant", "content": "A"}]})]
    # lines 1-3 ok, 4 no user, 5-6 ok, 7 no user, 8-10 ok, 11 broken, 12 ok
    lines = ok[:3] + [no_user[0]] + ok[3:5] + [no_user[1]] + ok[5:8] + ['{"prompt": "cut'] + ok[8:]
    path = _jsonl(tmp_path, lines)
    _name, rows, counts = wl.load_workload_counted(path)
    assert [r["prompt"] for r in rows] == ["p%d" % i for i in range(9)]
    assert counts["text"] == "9 of 12 rows used; skipped: 2 no human turn, 1 not JSON (lines 4, 7, 11)"
    assert counts["skipped"] == {"no human turn": 2, "not JSON": 1}


def test_a_mostly_broken_file_is_refused_naming_the_file_and_its_first_lines(tmp_path):
    # 12 rows: 5 usable, 7 without a human turn or with an empty value: 7 / 12 = 58 % > 50 %
    good = [{"conversations": [{"from": "human", "value": "q%d" % i}, {"from": "gpt", "value": "a"}]} for i in range(5)]
    bad = ([{"conversations": [{"from": "gpt", "value": "a"}, {"from": "gpt", "value": "b"}]}] * 4
           + [{"conversations": [{"from": "human", "value": " "}, {"from": "gpt", "value": "b"}]}] * 3)
    path = _sharegpt(tmp_path, bad + good, "wrong.json")
    with pytest.raises(wl.WorkloadError) as exc:
        wl.load_workload(path)
    msg = str(exc.value)
    assert "wrong.json: 7 of its 12 rows are unusable (58 %, above workload_max_skipped_fraction=0.5" in msg
    assert "(4 no human turn, 3 empty value)" in msg
    assert "first: line 2: no human turn (the conversation has no human turn" in msg
    assert "line 6: empty value (the conversation's first human turn has an empty value), ..." in msg
    # a higher limit takes it: 5 rows
    _name, rows = wl.load_workload(path, max_skipped_fraction=0.6)
    assert len(rows) == 5
    # the role names its own variable in the refusal
    with pytest.raises(wl.WorkloadError, match="raise sglang_benchmark_workload_max_skipped_fraction$"):
        wl.load_workload_counted(path, limit_name="sglang_benchmark_workload_max_skipped_fraction")


def test_a_wholly_broken_file_is_refused(tmp_path):
    path = _jsonl(tmp_path, ["not json", "[1, 2]", '{"conversations": []}'], "junk.jsonl")
    with pytest.raises(wl.WorkloadError) as exc:
        wl.load_workload(path, max_skipped_fraction=1.0)
    msg = str(exc.value)
    assert "junk.jsonl: none of its 3 row(s) is usable (1 not JSON, 1 not an object, 1 too few turns)" in msg
    assert "line 1: not JSON (malformed JSON" in msg and "line 2: not an object" in msg and "line 3: too few turns" in msg


def test_counts_of_a_directory_name_each_file(tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    _jsonl(d, [json.dumps({"prompt": "a1"}), json.dumps({"prompt": ""}), json.dumps({"prompt": "a3"})], "a.jsonl")
    _jsonl(d, [json.dumps({"prompt": "b1"}), "{oops"], "b.jsonl")
    _name, rows, counts = wl.load_workload_counted(str(d))
    assert [r["prompt"] for r in rows] == ["a1", "a3", "b1"]
    assert counts["text"] == "3 of 5 rows used; skipped: 1 empty value, 1 not JSON (at a.jsonl:2, b.jsonl:2)"
    assert counts["files"] == ["a.jsonl", "b.jsonl"]
    # builtin reads no file: no counts
    assert wl.load_workload_counted("builtin")[2] is None


def test_large_file_read_in_chunks_with_progress(tmp_path, monkeypatch):
    # 40 rows with non-ASCII split across 64-byte chunks; progress every 1 KiB and at the end
    monkeypatch.setattr(wl, "READ_CHUNK", 64)
    monkeypatch.setattr(wl, "PROGRESS_BYTES", 1024)
    rows = [{"conversations": [{"from": "human", "value": "%s %d" % (NON_ASCII, i)}, {"from": "gpt", "value": "x" * 30}]}
            for i in range(40)] + [12345678]
    path = _sharegpt(tmp_path, rows)
    size = (tmp_path / "sharegpt.json").stat().st_size
    calls = []
    got, skips = wl.read_file(path, progress=lambda p, done, total, n: calls.append((done, total, n)))
    assert [r["prompt"] for r in got] == ["%s %d" % (NON_ASCII, i) for i in range(40)]
    assert skips.skipped == {"not an object": 1} and skips.first[0][0] == 42
    assert calls[-1] == (size, size, 41)
    assert len(calls) >= size // 1024 and all(t == size for _d, t, _n in calls)
    assert [d for d, _t, _n in calls] == sorted(d for d, _t, _n in calls)
    assert 0 < calls[0][2] < 41 and [n for _d, _t, n in calls] == sorted(n for _d, _t, n in calls)


# A ShareGPT array laid out by hand (line numbers counted from this text): a BOM, rows on one line and over three lines,
# a blank line, 2-, 3- and 4-byte UTF-8 characters, a skipped row. Read in chunks of every size from 1 byte (every
# character and every row cut by a chunk's end) to one chunk for the whole file.
SPLIT_TEXT = (
    "\ufeff[\n"                                                                                      # line 1
    '  {"conversations": [{"from": "human", "value": "é one"}, {"from": "gpt", "value": "a"}]},\n'    # line 2
    "\n"                                                                                            # line 3
    '  {"conversations": [\n'                                                                       # line 4: row 2
    '    {"from": "human", "value": "😀 two\\nstill two"},\n'                                       # line 5
    '    {"from": "gpt", "value": "日本"}]},\n'                                                      # line 6
    '  {"conversations": []},\n'                                                                    # line 7: too few turns
    '  {"conversations": [{"from": "human", "value": "three"}, {"from": "gpt", "value": "b"}]}\n'    # line 8
    "]\n")


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 31, 64, 4096])
def test_rows_cut_by_chunk_ends_keep_their_text_and_lines(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(wl, "READ_CHUNK", chunk)
    path = tmp_path / "split.json"
    path.write_bytes(SPLIT_TEXT.encode("utf-8"))
    rows, skips = wl.read_file(str(path))
    assert [r["prompt"] for r in rows] == ["é one", "😀 two\nstill two", "three"]
    assert [r["source"] for r in rows] == ["split.json:2", "split.json:4", "split.json:8"]
    assert skips.rows == 4 and skips.skipped == {"too few turns": 1} and skips.first[0][:2] == (7, "too few turns")


@pytest.mark.parametrize("chunk", [1, 2, 5, 4096])
def test_bytes_that_are_not_utf8_in_an_array_name_their_line_at_any_chunk_size(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(wl, "READ_CHUNK", chunk)
    path = tmp_path / "bad.json"
    # line 3 holds a lone continuation byte (0x80), after a 3-byte character on line 2
    path.write_bytes(b'[\n  {"prompt": "\xe6\x97\xa5"},\n  {"prompt": "x\x80"}\n]\n')
    with pytest.raises(wl.WorkloadError, match="bad.json line 3: not UTF-8"):
        wl.read_file(str(path))
    # a character cut by the end of the file
    path.write_bytes(b'[\n  {"prompt": "a"}\n]\n\xe6\x97')
    with pytest.raises(wl.WorkloadError, match="bad.json line 4: not UTF-8"):
        wl.read_file(str(path))


@pytest.mark.parametrize("chunk", [1, 3, 8, 4096])
def test_malformed_json_in_an_array_names_the_line_of_the_fault_at_any_chunk_size(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(wl, "READ_CHUNK", chunk)
    path = tmp_path / "broken.json"
    # the second row starts on line 3; its bad value ("oops", not JSON) is on line 4
    path.write_text('[\n  {"prompt": "a"},\n  {"prompt": "b",\n   "category": oops}\n]\n', encoding="utf-8")
    with pytest.raises(wl.WorkloadError, match="broken.json line 4: malformed JSON: Expecting value"):
        wl.read_file(str(path))
