"""Mooncake trace reader and the prefix-sharing layouts (trace hash_ids blocks, generated shared prefix)."""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bench_client
from ansible_collections.llmops.sglang.plugins.module_utils._bench import shared_prefix
from ansible_collections.llmops.sglang.plugins.module_utils._bench import traces

TRACE = """\
{"timestamp": 3052, "input_length": 1200, "output_length": 40, "hash_ids": [1, 2, 9]}
{"timestamp": 0, "input_length": 1500, "output_length": 50, "hash_ids": [1, 2, 3]}

{"timestamp": 3052, "input_length": 100, "output_length": 5, "hash_ids": [5]}
{"timestamp": 7000, "input_length": 300, "output_length": 7, "hash_ids": [1]}
{"timestamp": 9000, "input_length": 700, "output_length": 8, "hash_ids": [1]}
{"timestamp": 9001, "input_length": 700, "output_length": 8, "hash_ids": [1]}
"""


def common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@pytest.fixture
def recs(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text(TRACE)
    return traces.parse_mooncake(path.read_text())


def test_reader_sorts_by_timestamp_and_keeps_fields(recs):
    assert [(r.timestamp_ms, r.input_length, r.output_length, r.hash_ids, r.line) for r in recs] == [
        (0.0, 1500, 50, [1, 2, 3], 2),
        (3052.0, 1200, 40, [1, 2, 9], 1),      # stable: line 1 before line 4 at the same timestamp
        (3052.0, 100, 5, [5], 4),
        (7000.0, 300, 7, [1], 5),
        (9000.0, 700, 8, [1], 6),
        (9001.0, 700, 8, [1], 7),
    ]


def test_limit_keeps_the_first_lines_of_the_file():
    assert [r.input_length for r in traces.parse_mooncake(TRACE, limit=2)] == [1500, 1200]


def test_prompts_share_exactly_their_common_hash_blocks(recs):
    a, b, c, d, e, f = [p.prompt for p in traces.build_prompts(recs, block_size=512, seed=4)]
    assert [len(x) for x in (a, b, c, d, e, f)] == [1500, 1200, 100, 300, 700, 700]
    # a [1, 2, 3] and b [1, 2, 9] share blocks 1 and 2 = 2 x 512 tokens, and not one token more
    assert common_prefix(a, b) == 1024
    # d [1] (300 tokens) is the first 300 tokens of block 1
    assert d == a[:300]
    # c [5] shares nothing with a
    assert common_prefix(a, c) == 0
    # e and f both [1] with 700 tokens: block 1, then 188 tokens of their own
    assert common_prefix(e, f) == 512
    assert traces.shared_prefix_len(recs[0], recs[1], 512) == 1024
    # the same trace and seed give the same prompts
    assert [p.prompt for p in traces.build_prompts(recs, 512, seed=4)][0] == a


def test_blocks_of_ids_congruent_modulo_the_id_range_still_differ():
    r = [traces.TraceRecord(0.0, 64, 1, [7]), traces.TraceRecord(0.0, 64, 1, [7 + 29000])]
    a, b = [p.prompt for p in traces.build_prompts(r, block_size=64)]
    assert a[0] == b[0] and a[1] != b[1]


def test_text_prompts_have_one_word_per_token(recs):
    p = traces.build_prompts(recs[:1], block_size=512, text=True)[0]
    assert len(p.prompt.split()) == 1500 and p.prompt_len == 1500


@pytest.mark.parametrize("text, words", [
    ('{"timestamp": 0, "input_length": 10, "output_length": 1}\nnot json\n', "trace line 2 is not JSON"),
    ('[1, 2]\n', "trace line 1 is not a JSON object"),
    ('{"timestamp": 0, "output_length": 1}\n', "trace line 1: input_length=None"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 0}\n', "output_length=0"),
    ('{"timestamp": -5, "input_length": 10, "output_length": 1}\n', "timestamp=-5"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1, "x"]}\n', "hash_ids="),
    ('{"timestamp": 0, "input_length": 10, "output_length": 1}\n{"input_length": 10, "output_length": 1}\n',
     "lines \\[2\\] have no timestamp"),
    ('\n\n', "no request line"),
])
def test_reader_errors_name_the_line_and_the_field(text, words):
    with pytest.raises(traces.TraceError, match=words):
        traces.parse_mooncake(text)


def test_generated_shared_prefix_layout():
    prompts, groups = shared_prefix.make_prompts(3, 4, 100, 20, 16, seed=5)
    assert len(prompts) == 12 and sorted(groups) == [0] * 4 + [1] * 4 + [2] * 4
    assert groups != sorted(groups)                    # shuffled, as bench_serving does without --gsp-ordered
    assert all(p.prompt_len == 120 == len(p.prompt) and p.output_len == 16 for p in prompts)
    for i in range(12):
        for j in range(i + 1, 12):
            shared = common_prefix(prompts[i].prompt, prompts[j].prompt)
            assert shared == (100 if groups[i] == groups[j] else 0), (i, j, groups[i], groups[j])
    ordered, og = shared_prefix.make_prompts(3, 4, 100, 20, 16, seed=5, ordered=True)
    assert og == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]


def test_generated_shared_prefix_range_ratio_and_errors():
    prompts, _g = shared_prefix.make_prompts(2, 50, 100, 40, 30, range_ratio=0.5, seed=1)
    assert all(50 + 20 <= p.prompt_len <= 140 and 15 <= p.output_len <= 30 for p in prompts)
    assert len(set(p.output_len for p in prompts)) > 1
    with pytest.raises(bench_client.BenchError, match="gsp_num_groups must be >= 1"):
        shared_prefix.make_prompts(0, 4, 100, 20, 16)
    with pytest.raises(bench_client.BenchError, match="gsp_system_prompt_len must be >= 1"):
        shared_prefix.make_prompts(2, 4, 0, 20, 16)
