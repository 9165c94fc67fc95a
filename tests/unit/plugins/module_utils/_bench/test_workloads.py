"""workloads: prompt-file loaders on small files written here (broken rows included), the built-in set, selection."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import workloads as wl
from ansible_collections.llmops.sglang.plugins.module_utils._bench.builtin_prompts import BUILTIN_PROMPTS, CATEGORIES


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_sharegpt_json(tmp_path):
    data = [{"id": "a", "conversations": [{"from": "human", "value": "Hi there"}, {"from": "gpt", "value": "Hello"}]},
            {"id": "b", "conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "Why?"}],
             "category": "qa", "output_len": 64}]
    rows = wl.load_file(_write(tmp_path, "sg.json", json.dumps(data, indent=1)))
    assert [r["prompt"] for r in rows] == ["Hi there", "Why?"]
    assert [r["category"] for r in rows] == ["uncategorized", "qa"] and rows[1]["output_len"] == 64
    # element lines: the array opens on line 1, the first object on line 2
    assert rows[0]["source"] == "sg.json:2"


def test_jsonl_prompt_and_messages(tmp_path):
    text = "\n".join([json.dumps({"prompt": "Write a haiku", "category": "writing"}), "",
                      json.dumps({"messages": [{"role": "system", "content": "You are terse."},
                                               {"role": "user", "content": "Sum 2 and 3"},
                                               {"role": "assistant", "content": "5"}]})])
    rows = wl.load_file(_write(tmp_path, "p.jsonl", text))
    assert rows[0]["prompt"] == "Write a haiku" and rows[0]["source"] == "p.jsonl:1"
    # a trailing assistant turn (the reference answer) is dropped; the row is on line 3
    assert rows[1]["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Sum 2 and 3"}]
    assert rows[1]["source"] == "p.jsonl:3"
    assert wl.row_text(rows[1]) == "You are terse.\n\nSum 2 and 3"
    assert wl.row_messages(rows[0]) == [{"role": "user", "content": "Write a haiku"}]


def test_question_file_mt_bench_shape(tmp_path):
    text = json.dumps({"question_id": 81, "category": "writing", "turns": ["Compose a travel blog post.", "Rewrite it."]}) + "\n"
    rows = wl.load_file(_write(tmp_path, "question.jsonl", text))
    assert rows == [{"prompt": "Compose a travel blog post.", "messages": None, "category": "writing", "output_len": None,
                     "source": "question.jsonl:1", "turns": ["Compose a travel blog post.", "Rewrite it."], "system": None}]


@pytest.mark.parametrize("name, text, expect", [
    ("e.jsonl", "", "the file is empty"),
    ("e.jsonl", "\n\n  \n", "the file is empty"),
    ("a.json", '[\n {"prompt": "ok"},\n {"prompt": "x",}\n]', "a.json line 3: malformed JSON"),
    ("u.json", '[\n {"prompt": "ok"}\n', "the JSON array is not closed"),
    ("z.json", '[]', "the file holds no rows"),
    ("t.json", '"just a string"', "unknown format"),
    ("x.csv", "prompt\nhello\n", "unknown format '.csv'"),
])
def test_unreadable_files_are_refused_whole(tmp_path, name, text, expect):
    with pytest.raises(wl.WorkloadError) as exc:
        wl.load_file(_write(tmp_path, name, text))
    assert expect in str(exc.value)
    assert name in str(exc.value)


# one unusable row per file: the file is refused (nothing usable), naming the line, the reason and why
@pytest.mark.parametrize("name, text, reason, why", [
    ("b.jsonl", '\n{"prompt": "broken"\n', "not JSON", "line 2: not JSON (malformed JSON"),
    ("n.jsonl", '{"text": "no prompt key"}\n', "no prompt key", "row without a prompt (keys: text)"),
    ("s.jsonl", '{"prompt": "   "}\n', "empty value", "'prompt' must be a non-empty string"),
    ("o.jsonl", '{"prompt": "x", "output_len": 0}\n', "bad field", "'output_len' must be an integer >= 1"),
    ("c.jsonl", '{"prompt": "x", "category": 5}\n', "bad field", "'category' must be a non-empty string"),
    ("l.jsonl", '["not", "an", "object"]\n', "not an object", "a row must be a JSON object, got list"),
    ("m.jsonl", '{"messages": [{"role": "user"}]}\n', "bad field", "messages[0]"),
    ("g.json", '[{"conversations": [{"from": "gpt", "value": "only the answer"}]}]', "too few turns", "has 1 turn(s)"),
    ("h.json", '[{"conversations": [{"from": "gpt", "value": "a"}, {"from": "gpt", "value": "b"}]}]', "no human turn",
     "the conversation has no human turn"),
    ("q.jsonl", '{"turns": []}\n', "no human turn", "'turns' must be a non-empty list"),
])
def test_a_file_without_a_usable_row_is_refused_naming_line_and_reason(tmp_path, name, text, reason, why):
    with pytest.raises(wl.WorkloadError) as exc:
        wl.load_file(_write(tmp_path, name, text))
    msg = str(exc.value)
    assert name + ": none of its 1 row(s) is usable (1 %s)" % reason in msg
    assert why in msg and ": %s (" % reason in msg


def test_unreadable_and_not_utf8(tmp_path):
    with pytest.raises(wl.WorkloadError, match="cannot read it"):
        wl.load_file(str(tmp_path / "missing.jsonl"))
    # JSON Lines: a line that is not UTF-8 is skipped and counted (1 of 2: 50 %, not above the limit)
    p = tmp_path / "latin1.jsonl"
    p.write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    rows, skips = wl.read_file(str(p))
    assert [r["prompt"] for r in rows] == ["ok"] and skips.rows == 2 and skips.skipped == {"not UTF-8": 1}
    assert skips.first[0][:2] == (2, "not UTF-8")
    with pytest.raises(wl.WorkloadError, match=r"latin1.jsonl: 1 of its 2 rows are unusable \(50 %, above x=0.4"):
        wl.check_skips(str(p), rows, skips, 0.4, "x")
    # a JSON array that is not UTF-8 is not JSON at all: refused whole, naming the line
    p = tmp_path / "latin1.json"
    p.write_bytes(b'[\n{"prompt": "ok"},\n{"prompt": "caf\xe9"}\n]')
    with pytest.raises(wl.WorkloadError, match="latin1.json line 3: not UTF-8"):
        wl.load_file(str(p))


def test_directory_glob_and_missing(tmp_path):
    d = tmp_path / "prompts"
    d.mkdir()
    (d / "b.jsonl").write_text('{"prompt": "two", "category": "y"}\n')
    (d / "a.jsonl").write_text('{"prompt": "one", "category": "x"}\n')
    (d / "notes.txt").write_text("ignored")
    name, rows = wl.load_workload(str(d))
    assert name == str(d) and [r["prompt"] for r in rows] == ["one", "two"]
    _n, rows = wl.load_workload(str(d / "*.jsonl"), categories=["y"])
    assert [r["prompt"] for r in rows] == ["two"]
    with pytest.raises(wl.WorkloadError, match="the glob matches no file"):
        wl.load_workload(str(d / "*.parquet"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(wl.WorkloadError, match="holds no .json or .jsonl file"):
        wl.load_workload(str(tmp_path / "empty"))
    with pytest.raises(wl.WorkloadError, match="no such file or directory on the controller"):
        wl.load_workload(str(tmp_path / "nope.jsonl"))


def test_category_filter_that_matches_nothing_is_refused():
    with pytest.raises(wl.WorkloadError) as exc:
        wl.load_workload("builtin", categories=["poetry"])
    assert "matches no row" in str(exc.value) and "coding" in str(exc.value)
    with pytest.raises(wl.WorkloadError, match=r"names \['poetry'\], which no row carries"):
        wl.load_workload("builtin", categories=["math", "poetry"])
    _n, rows = wl.load_workload("builtin", categories=["math", "coding"])
    assert Counter(r["category"] for r in rows) == {"math": 10, "coding": 10}


def test_builtin_set_shape():
    counts = Counter(c for c, _t in BUILTIN_PROMPTS)
    assert set(counts) == set(CATEGORIES) and len(CATEGORIES) >= 10 and min(counts.values()) >= 10
    assert len(set(t for _c, t in BUILTIN_PROMPTS)) == len(BUILTIN_PROMPTS)         # no duplicate prompt
    words = sorted(len(t.split()) for _c, t in BUILTIN_PROMPTS)
    assert words[0] < 10 and words[-1] > 1000                                         # varied lengths, long RAG contexts
    _n, rows = wl.load_workload("builtin")
    assert len(rows) == len(BUILTIN_PROMPTS) and rows[0]["source"] == "builtin:1"


def _prompts_of(cat):
    return [t for c, t in BUILTIN_PROMPTS if c == cat]


def test_builtin_long_row_shapes_by_hand():
    math = _prompts_of("math")
    # 1 token at 1.3 tokens per word: a goal of int(0.77) = 0 words, so no document at all; the i-th length takes the
    # category's i-th prompt as its task
    rows = wl.builtin_long_rows(lengths=(1, 1), categories=("math",))
    assert [r["prompt"] for r in rows] == ["Reference material:\n\n\n\nTask: " + math[0],
                                           "Reference material:\n\n\n\nTask: " + math[1]]
    assert [r["source"] for r in rows] == ["builtin-long:math:1", "builtin-long:math:1"]
    assert all(r["category"] == "math" and r["messages"] is None and r["output_len"] is None for r in rows)
    # one token per word, a goal of the task's words + 1: the task alone is one word short, so exactly one document
    # piece is added, the category's first prompt
    goal = len(math[0].split()) + 1
    (row,) = wl.builtin_long_rows(lengths=(goal,), categories=("math",), tokens_per_word=1.0, output_len=64)
    assert row["prompt"] == "Reference material:\n\n%s\n\nTask: %s" % (math[0], math[0])
    assert row["output_len"] == 64


def test_builtin_long_reaches_each_length_and_stops_there():
    rows = wl.builtin_long_rows()
    assert len(rows) == len(CATEGORIES) * 4 == 40
    assert [r["source"] for r in rows[:4]] == ["builtin-long:coding:%d" % n for n in (1000, 4000, 12000, 20000)]
    for r in rows:
        target = int(r["source"].rsplit(":", 1)[1])
        goal = int(target / 1.3)
        doc, task = r["prompt"][len("Reference material:\n\n"):].split("\n\nTask: ")
        texts = _prompts_of(r["category"])
        # the document is the category's prompts taken in turn from the first: find how many
        k, built = 0, ""
        while built != doc:
            assert len(built) < len(doc), r["source"]
            built = (built + "\n\n" if k else "") + texts[k % len(texts)]
            k += 1
        words = len(task.split()) + len(doc.split())
        before = words - len(texts[(k - 1) % len(texts)].split()) if k else 0
        # the task plus the document reach the goal, and without its last piece they did not
        assert words >= goal and before < goal, r["source"]


def test_builtin_long_is_a_named_workload_with_categories():
    assert "builtin-long" in wl.NAMED_WORKLOADS
    name, rows = wl.load_workload("builtin-long", categories=["rag"])
    assert name == "builtin-long" and len(rows) == 4 and {r["category"] for r in rows} == {"rag"}
    with pytest.raises(wl.WorkloadError, match="unknown category 'poetry'"):
        wl.builtin_long_rows(categories=("poetry",))
    with pytest.raises(wl.WorkloadError, match="lengths must be integers >= 1"):
        wl.builtin_long_rows(lengths=(0,))


def test_stratified_round_robin_and_sample():
    rows = [{"category": c, "prompt": "%s%d" % (c, i)} for c in ("a", "b", "c") for i in range(3)]
    pick = wl.stratified(rows, 7, seed=0)
    # seed 0: category order a, b, c from the start; 7 rows = a b c a b c a
    assert [r["category"] for r in pick] == ["a", "b", "c", "a", "b", "c", "a"]
    assert wl.stratified(rows, 7, seed=0) == pick                     # deterministic
    assert [r["category"] for r in wl.stratified(rows, 3, seed=1)] == ["b", "c", "a"]    # rotated by the seed
    many = wl.stratified(rows, 12, seed=5)                             # more than there are: rows repeat, shares kept
    assert Counter(r["category"] for r in many) == {"a": 4, "b": 4, "c": 4}
    assert len(wl.sample_rows(rows, 6, 1)) == 6 and wl.sample_rows(rows, 0, 1) == rows


def test_validate_rows_from_module_data():
    rows = wl.validate_rows([{"prompt": "hi", "category": "qa", "output_len": None, "source": "f.jsonl:3"}])
    assert rows[0]["source"] == "f.jsonl:3" and rows[0]["category"] == "qa"
    with pytest.raises(wl.WorkloadError, match=r"prompts\[0\] \(f.jsonl:9\): row without a prompt"):
        wl.validate_rows([{"category": "qa", "source": "f.jsonl:9"}])
    with pytest.raises(wl.WorkloadError, match="empty"):
        wl.validate_rows([])
