"""SSE framing and SGLang chunk formats, on the recorded streams in tests/fixtures/sglang/*.sse."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import sse


@pytest.fixture
def generate_sse(fixtures_dir):
    return (fixtures_dir / "sglang" / "generate-stream-mtp.sse").read_bytes()


@pytest.fixture
def completions_sse(fixtures_dir):
    return (fixtures_dir / "sglang" / "completions-stream.sse").read_bytes()


def test_generate_fixture_framing(generate_sse):
    payloads = sse.iter_sse_payloads(generate_sse)
    assert len(payloads) == 5            # 4 chunks + [DONE] in the recording
    assert payloads[-1] == b"[DONE]"
    assert json.loads(payloads[0])["text"] == "15"


@pytest.mark.parametrize("step", [1, 2, 7, 64, 100000])
def test_framing_independent_of_read_boundaries(generate_sse, step):
    dec = sse.SSEDecoder()
    out = []
    for i in range(0, len(generate_sse), step):
        out.extend(dec.feed(generate_sse[i:i + step]))
    assert out == sse.iter_sse_payloads(generate_sse)


def test_crlf_line_ends_split_between_reads(generate_sse):
    crlf = generate_sse.replace(b"\n", b"\r\n")
    dec = sse.SSEDecoder()
    out = []
    for i in range(0, len(crlf), 3):      # splits land between \r and \n
        out.extend(dec.feed(crlf[i:i + 3]))
    assert out == sse.iter_sse_payloads(generate_sse)


def test_multiline_data_comments_and_other_fields():
    body = b": keep-alive\n\nevent: message\nid: 7\ndata: {\"a\":\ndata: 1}\n\nretry: 10\n\n"
    assert sse.iter_sse_payloads(body) == [b'{"a":\n1}']


def test_generate_chunk_progress_on_fixture(generate_sse):
    chunks = [sse.generate_chunk_progress(p) for p in sse.iter_sse_payloads(generate_sse)]
    # completion_tokens in the recording: 1, 3, 5, 6 (spec decoding adds 2 tokens per step)
    assert [c.completion_tokens for c in chunks[:4]] == [1, 3, 5, 6]
    assert [c.finished for c in chunks[:4]] == [False, False, False, True]
    assert chunks[0].meta is None                    # running chunks are not parsed fully
    final = chunks[3].meta
    assert final["finish_reason"] == {"type": "stop", "matched": 151645}
    assert final["spec_verify_ct"] == 3
    assert final["e2e_latency"] == 0.0481
    assert chunks[4].done is True
    assert not any(c.error for c in chunks)


def test_generate_chunk_compact_json_and_key_in_text():
    # orjson (what SGLang really uses) writes no spaces; a text containing "meta_info" must not confuse it
    body = {"text": 'say "meta_info": {"completion_tokens": 999, "finish_reason": "x"}', "output_ids": [1, 2],
            "meta_info": {"id": "r1", "finish_reason": None, "prompt_tokens": 4, "completion_tokens": 2}}
    payload = json.dumps(body, separators=(",", ":")).encode()
    c = sse.generate_chunk_progress(payload)
    assert (c.completion_tokens, c.finished, c.error) == (2, False, "")


def test_generate_error_and_abort_chunks():
    e = sse.generate_chunk_progress(b'{"error": {"message": "CUDA out of memory", "code": 500}}')
    assert e.error == "CUDA out of memory (500)"
    a = sse.generate_chunk_progress(json.dumps({"text": "x", "meta_info": {
        "finish_reason": {"type": "abort", "message": "client disconnected"}, "completion_tokens": 3}}).encode())
    assert a.finished and "client disconnected" in a.error


def test_completions_fixture(completions_sse):
    chunks = [sse.parse_openai_chunk(p) for p in sse.iter_sse_payloads(completions_sse)]
    assert [c.text for c in chunks[:3]] == [" The", " answer is", " 345."]
    assert chunks[2].finish_reason == "length"
    assert chunks[3].usage == {"prompt_tokens": 17, "completion_tokens": 5, "total_tokens": 22}
    assert chunks[4].done


def test_chat_chunk_delta_and_error():
    c = sse.parse_openai_chunk(b'{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",'
                               b'"content":"Hi","reasoning_content":null},"finish_reason":null}],"usage":null}')
    assert (c.text, c.finish_reason, c.usage) == ("Hi", None, None)
    e = sse.parse_openai_chunk(b'{"object":"error","message":"The model x does not exist.","type":"NotFoundError","code":404}')
    assert "does not exist" in e.error
    with pytest.raises(ValueError):
        sse.parse_openai_chunk(b"not json")


def test_openai_sglext_spec_tokens_details_chunk():
    # SGLang 0.5.23 serving_completions.py: after the finish chunk, a response-level chunk with choices [] and sglext
    payload = ('{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":null,'
               '"sglext":{"spec_tokens_details":{"spec_accept_rate":0.75,"spec_accept_length":1.75,"spec_num_correct_drafts":30,'
               '"spec_num_proposed_drafts":40,"spec_verify_ct":40}}}')
    ch = sse.parse_openai_chunk(payload)
    assert ch.text == "" and ch.finish_reason is None and ch.usage is None and not ch.error
    assert ch.spec["spec_verify_ct"] == 40 and ch.spec["spec_num_correct_drafts"] == 30
    # n > 1 sends a list: choice 0's details
    ch = sse.parse_openai_chunk('{"choices":[],"sglext":{"spec_tokens_details":[{"spec_verify_ct":7},{"spec_verify_ct":9}]}}')
    assert ch.spec == {"spec_verify_ct": 7}
    # other sglext fields only, or none at all
    assert sse.parse_openai_chunk('{"choices":[],"sglext":{"cached_tokens_details":{"device":3}}}').spec is None
    assert sse.parse_openai_chunk('{"choices":[{"index":0,"text":"a","finish_reason":null}]}').spec is None
