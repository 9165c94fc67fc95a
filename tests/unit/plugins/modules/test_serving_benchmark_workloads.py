"""serving_benchmark with prompt workloads: builtin, prompts as data, auto, bad input refused before any load,
per-category records and the synthetic-prompt warning; the load generator is mocked."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bench_client
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult
from ansible_collections.llmops.sglang.plugins.module_utils._server.client import SGLangClient
from ansible_collections.llmops.sglang.plugins.modules import serving_benchmark

from ansible.module_utils.testing import patch_module_args

# verify steps per 10-token response, by category (so the accept length per category is known by hand)
VERIFY = {"math": 5, "roleplay": 8}


def run(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            serving_benchmark.main()
    return json.loads(capsys.readouterr().out)


def _info(fixtures_dir, mocker, spec=True):
    info = json.loads((fixtures_dir / "sglang" / "server_info-mtp-v0.5.9.json").read_text())
    if not spec:
        info["speculative_algorithm"] = None
    mocker.patch.object(SGLangClient, "server_info", return_value=("/server_info", info))
    mocker.patch.object(SGLangClient, "metrics_text", return_value=None)
    return info


@pytest.fixture
def fake_load(mocker):
    calls = []

    def fake(target, prompts, max_concurrency=None, request_rate=None, warmup_prompts=None, seed=1,
             abort_after_failures=0, progress=None, **_traffic):
        calls.append({"prompts": prompts, "warm": warmup_prompts, "body": json.loads(bench_client.request_body(target, prompts[0]))})
        out = []
        for p in prompts:
            v = VERIFY.get(p.category, 10) if p.category else 5
            out.append(RequestResult(prompt_len=0, output_len=10, success=True, ttft=0.1, latency=0.1 + 0.01 * 9, itl=[0.01] * 9,
                                     spec_verify_ct=v, final_meta={"completion_tokens": 10, "spec_verify_ct": v, "prompt_tokens": 7}))
        return out, 2.0, []

    mocker.patch.object(bench_client, "run_benchmark", side_effect=fake)
    return calls


def test_builtin_sends_text_and_reports_per_category(capsys, fixtures_dir, mocker, fake_load):
    _info(fixtures_dir, mocker)
    out = run(capsys, {"workload": "builtin", "workload_categories": ["math", "roleplay"], "max_concurrency": [4],
                       "num_prompts": 4, "output_len": 10, "temperature": 0.5, "top_p": 0.9})
    assert not out.get("failed"), out.get("msg")
    sent = fake_load[0]["prompts"]
    assert sorted(p.category for p in sent) == ["math", "math", "roleplay", "roleplay"]
    assert all(isinstance(p.prompt, str) and p.prompt_len == 0 for p in sent)
    body = fake_load[0]["body"]
    assert "text" in body and body["sampling_params"] == {"temperature": 0.5, "top_p": 0.9, "max_new_tokens": 10, "ignore_eos": True}
    assert "return_spec_tokens_details" not in body      # /generate's meta_info always carries the spec fields
    assert [w.output_len for w in fake_load[0]["warm"]] == [10]              # min(output_len, 32)
    rec = out["records"][0]
    assert rec["dataset_name"] == "builtin" and rec["workload_prompts"] == 20
    assert (rec["temperature"], rec["top_p"]) == (0.5, 0.9)
    assert rec["warnings"] == []
    cats = rec["categories"]
    assert cats["math"]["accept_length"] == pytest.approx(2.0)            # 20 tokens / 10 verify steps
    assert cats["roleplay"]["accept_length"] == pytest.approx(1.25)       # 20 / 16
    assert cats["math"]["output_tok_s"] == pytest.approx(10.0)            # 20 tokens / 2.0 s
    # per-request accept lengths 2, 2, 1.25, 1.25: p10 at position 0.3 -> 1.25; mean 1.625
    assert rec["accept_length_mean"] == pytest.approx(1.625) and rec["accept_length_p10"] == pytest.approx(1.25)
    assert [b["count"] for b in rec["accept_length_histogram"]] == [0, 2, 0, 0, 2]


def test_random_ids_with_speculation_carries_the_warning(capsys, fixtures_dir, mocker, fake_load):
    _info(fixtures_dir, mocker)
    out = run(capsys, {"max_concurrency": [1], "num_prompts": 2, "input_len": 10, "output_len": 10})
    rec = out["records"][0]
    assert rec["dataset_name"] == "random-ids" and rec["warnings"] == [serving_benchmark.SYNTHETIC_WARNING]
    assert rec["categories"] == {}


def test_auto_is_builtin_with_speculation_and_random_ids_without(capsys, fixtures_dir, mocker, fake_load):
    _info(fixtures_dir, mocker)
    assert run(capsys, {"workload": "auto", "num_prompts": 2, "output_len": 10})["records"][0]["dataset_name"] == "builtin"
    _info(fixtures_dir, mocker, spec=False)
    rec = run(capsys, {"workload": "auto", "num_prompts": 2, "output_len": 10, "input_len": 10})["records"][0]
    assert rec["dataset_name"] == "random-ids"


def test_prompts_as_data_and_chat_messages(capsys, fixtures_dir, mocker, fake_load):
    _info(fixtures_dir, mocker)
    rows = [{"messages": [{"role": "system", "content": "terse"}, {"role": "user", "content": "2+2?"}], "category": "math",
             "output_len": 5, "source": "p.jsonl:1"}]
    out = run(capsys, {"workload": "p.jsonl", "prompts": rows, "backend": "openai-chat", "num_prompts": 1, "warmup_requests": 0})
    assert not out.get("failed"), out.get("msg")
    body = fake_load[0]["body"]
    assert body["messages"] == rows[0]["messages"] and body["max_tokens"] == 5 and "top_p" not in body
    assert body["return_spec_tokens_details"] is True    # SGLang 0.5.23's per-request spec details on the OpenAI routes
    assert out["records"][0]["dataset_name"] == "p.jsonl"


@pytest.mark.parametrize("args, expect", [
    ({"workload": "builtin", "workload_categories": ["poetry"]}, "matches no row"),
    ({"workload": "/no/such/prompts.jsonl"}, "files are read on the controller by the llmops.sglang.serving_benchmark action plugin"),
    ({"workload": "x.jsonl", "prompts": [{"category": "qa", "source": "x.jsonl:4"}]}, "prompts[0] (x.jsonl:4): row without a prompt"),
    ({"workload": "random-ids", "prompts": [{"prompt": "hi"}]}, "set workload to a name for them"),
    ({"workload_categories": ["math"]}, "applies to prompt workloads, not random-ids"),
    ({"workload": "builtin", "shared_prefix": {"num_groups": 1, "prompts_per_group": 1, "system_prompt_len": 8, "question_len": 8}},
     "workload=builtin and shared_prefix are two workloads; set one of them"),
    ({"temperature": -1.0}, "temperature must be >= 0"),
    ({"top_p": 0.0}, "top_p must be within (0, 1]"),
])
def test_bad_workload_input_is_refused_before_any_load(capsys, fixtures_dir, mocker, fake_load, args, expect):
    info = mocker.patch.object(SGLangClient, "server_info")
    out = run(capsys, dict({"num_prompts": 1}, **args))
    assert out["failed"] and expect in out["msg"], out["msg"]
    assert fake_load == [] and not info.called          # nothing sent, the server not even asked


_PAGE = ("sglang:generation_tokens_total{model_name=\"m\"} %d\nsglang:spec_verify_calls_total{model_name=\"m\"} %d\n"
         "sglang:spec_accept_length{model_name=\"m\",tp_rank=\"0\"} 1.5\n")


def test_openai_backend_without_spec_fields_measures_on_the_server(capsys, fixtures_dir, mocker):
    """An OpenAI backend of SGLang < 0.5.23 returns no spec fields: the level's accept length is the /metrics counters'
    delta (0.5.14+), read before and after the level, and the level says per-request acceptance is unavailable."""
    _info(fixtures_dir, mocker)
    pages = iter([_PAGE % (1000, 500), _PAGE % (1000 + 30, 500 + 12)])     # 30 tokens over 12 verify calls = 2.5
    mocker.patch.object(SGLangClient, "metrics_text", side_effect=lambda: next(pages))

    def fake(target, prompts, **_kw):
        return [RequestResult(prompt_len=7, output_len=10, success=True, ttft=0.1, latency=0.19, itl=[0.01] * 9)
                for _p in prompts], 2.0, []
    mocker.patch.object(bench_client, "run_benchmark", side_effect=fake)
    out = run(capsys, {"workload": "builtin", "backend": "openai", "num_prompts": 3, "output_len": 10, "warmup_requests": 0})
    assert not out.get("failed"), out.get("msg")
    rec = out["records"][0]
    assert rec["accept_length"] == pytest.approx(2.5) and rec["accept_length_source"] == "server_counters"
    assert rec["accept_length_mean"] is None
    assert rec["warnings"] == [serving_benchmark.openai_spec_warning("openai", "0.5.9", "server_counters")]
    assert rec["warnings"][0].startswith("per-request accept length is unavailable on backend openai with SGLang 0.5.9:")
