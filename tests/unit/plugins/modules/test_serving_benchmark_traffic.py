"""serving_benchmark traffic options (trace, shared prefix, burstiness, SLO, processes, output details), load mocked."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bench_client
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult
from ansible_collections.llmops.sglang.plugins.module_utils._server.client import SGLangClient
from ansible_collections.llmops.sglang.plugins.modules import serving_benchmark

from ansible.module_utils.testing import patch_module_args

TRACE = ('{"timestamp": 500, "input_length": 600, "output_length": 4, "hash_ids": [0, 1]}\n'
         '{"timestamp": 1500, "input_length": 520, "output_length": 6, "hash_ids": [0, 2]}\n'
         '{"timestamp": 900, "input_length": 30, "output_length": 2, "hash_ids": [3]}\n')


def run(capsys, args):
    with patch_module_args(dict(args, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)):
        with pytest.raises(SystemExit):
            serving_benchmark.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def server_info(fixtures_dir, mocker):
    info = json.loads((fixtures_dir / "sglang" / "server_info-mtp-v0.5.9.json").read_text())
    mocker.patch.object(SGLangClient, "server_info", return_value=("/server_info", info))
    return info


@pytest.fixture
def fake_load(mocker):
    calls = []

    def fake(target, prompts, max_concurrency=None, request_rate=None, warmup_prompts=None, seed=1,
             abort_after_failures=0, progress=None, burstiness=1.0, arrival_offsets=None, start=None):
        calls.append({"prompts": prompts, "mc": max_concurrency, "rate": request_rate, "burstiness": burstiness,
                      "offsets": arrival_offsets, "keep_text": target.keep_text})
        out = []
        for i, p in enumerate(prompts):
            # TTFT 100 ms for even requests, 300 ms for odd ones; TPOT 10 ms
            ttft = 0.1 if i % 2 == 0 else 0.3
            out.append(RequestResult(prompt_len=p.prompt_len, output_len=p.output_len, success=True, ttft=ttft,
                                     latency=ttft + 0.01 * (p.output_len - 1), itl=[0.01] * (p.output_len - 1),
                                     generated_text="t%d" % i if target.keep_text else ""))
        return out, 2.0, []

    mocker.patch.object(bench_client, "run_benchmark", side_effect=fake)
    return calls


def test_trace_replay_levels_offsets_and_output_file(capsys, server_info, fake_load, tmp_path):
    dest = tmp_path / "res.jsonl"
    out = run(capsys, {"trace": TRACE, "trace_time_scale": 2.0, "max_concurrency": [], "warmup_requests": 0,
                       "slo": {"ttft_ms": 200}, "output_file": str(dest), "output_details": True, "tag": ""})
    assert not out.get("failed"), out.get("msg")
    call = fake_load[0]
    # sorted by timestamp (500, 900, 1500 ms), offsets (ts - 500) / 1000 * 2.0
    assert call["offsets"] == [0.0, 0.8, 2.0]
    assert [(p.prompt_len, p.output_len) for p in call["prompts"]] == [(600, 4), (30, 2), (520, 6)]
    # hash 0 is shared by the first and third requests: one 512-token block
    a, c = call["prompts"][0].prompt, call["prompts"][2].prompt
    assert a[:512] == c[:512] and a[512] != c[512]
    rec = out["records"][0]
    assert rec["dataset_name"] == "mooncake" and rec["arrival"] == "trace" and rec["trace_time_scale"] == 2.0
    assert rec["request_rate"] is None and rec["tag"] is None
    # requests 0 and 2 have TTFT 100 ms <= 200 ms: 2 good in 2.0 s
    assert rec["goodput"] == 1.0 and rec["goodput_completed"] == 2
    line = dest.read_text().splitlines()[0]
    assert '"request_rate": "trace"' in line and '"tag": null' in line
    written = json.loads(line)
    assert written["input_lens"] == [600, 30, 520] and written["output_lens"] == [4, 2, 6]
    assert written["generated_texts"] == ["t0", "t1", "t2"] and written["errors"] == ["", "", ""]
    assert call["keep_text"] is True


def test_trace_max_requests_keeps_the_first_lines_of_the_file(capsys, server_info, fake_load):
    out = run(capsys, {"trace": TRACE, "trace_max_requests": 2, "max_concurrency": [], "warmup_requests": 0})
    assert not out.get("failed"), out.get("msg")
    # the first two lines of the file (500 ms and 1500 ms), then sorted: offsets 0 and 1.0 s
    assert [(p.prompt_len, p.output_len) for p in fake_load[0]["prompts"]] == [(600, 4), (520, 6)]
    assert fake_load[0]["offsets"] == [0.0, 1.0]
    assert out["levels"][0]["num_prompts"] == 2


def test_unlimited_rate_written_as_infinity(capsys, server_info, fake_load, tmp_path):
    dest = tmp_path / "res.jsonl"
    out = run(capsys, {"max_concurrency": [], "num_prompts": 2, "output_file": str(dest)})
    assert not out.get("failed"), out.get("msg")
    line = dest.read_text().splitlines()[0]
    assert '"request_rate": Infinity' in line and '"input_lens"' not in line
    assert len(fake_load) == 1 and fake_load[0]["keep_text"] is False


def test_shared_prefix_levels_send_groups_times_prompts(capsys, server_info, fake_load):
    out = run(capsys, {"shared_prefix": {"num_groups": 2, "prompts_per_group": 3, "system_prompt_len": 50,
                                         "question_len": 5}, "output_len": 4, "max_concurrency": [1, 4],
                       "warmup_requests": 0})
    assert not out.get("failed"), out.get("msg")
    assert [len(c["prompts"]) for c in fake_load] == [6, 6]
    # both levels send the same system prompts (the run's seed): the second level measures a warm prefix cache
    assert [p.prompt for p in fake_load[0]["prompts"]] == [p.prompt for p in fake_load[1]["prompts"]]
    assert all(p.prompt_len == 55 for p in fake_load[0]["prompts"])
    assert out["records"][0]["dataset_name"] == "generated-shared-prefix"


def test_burstiness_reaches_the_client(capsys, server_info, fake_load):
    out = run(capsys, {"request_rate": [4.0], "max_concurrency": [], "burstiness": 0.5, "num_prompts": 3,
                       "warmup_requests": 0})
    assert not out.get("failed"), out.get("msg")
    assert fake_load[0]["rate"] == 4.0 and fake_load[0]["burstiness"] == 0.5
    assert out["records"][0]["arrival"] == "gamma" and out["records"][0]["burstiness"] == 0.5


def test_goodput_gate_fails_the_task(capsys, server_info, fake_load):
    out = run(capsys, {"max_concurrency": [2], "num_prompts": 4, "warmup_requests": 0, "slo": {"ttft_ms": 200},
                       "gates": {"min_goodput_fraction": 0.9}})
    assert out["failed"] and "goodput_fraction 0.50 is below the gate 0.90" in out["msg"]


@pytest.mark.parametrize("args, words", [
    ({"burstiness": 0.5, "max_concurrency": [1]}, "burstiness=0.5: shapes the gaps"),
    ({"burstiness": 0.0, "request_rate": [1.0]}, "burstiness=0.0: must be a number > 0"),
    ({"trace": TRACE, "request_rate": [1.0]}, "a trace replay sends each request at its trace timestamp"),
    ({"trace": TRACE, "trace_time_scale": 0.0}, "trace_time_scale=0.0"),
    ({"trace": TRACE, "trace_max_requests": -1}, "trace_max_requests=-1"),
    ({"trace": '{"timestamp": 0}\n'}, "trace: trace line 1: input_length=None"),
    ({"shared_prefix": {"num_groups": 0, "prompts_per_group": 1, "system_prompt_len": 5, "question_len": 1}},
     "shared_prefix.num_groups=0"),
    ({"slo": {"ttft_ms": -1}}, "slo: SLO ttft_ms=-1.0"),
    ({"client_processes": 0}, "client_processes=0"),
    ({"output_details": True}, "output_details=true writes the per-request lists into output_file"),
    ({"gates": {"min_goodput_fraction": 1.5}}, "gates.min_goodput_fraction=1.5"),
    ({"multi_turn": True}, "multi_turn=true replays the conversations of a prompt file, but workload=random-ids has none"),
    ({"multi_turn": True, "workload": "builtin"}, "but workload=builtin has none"),
    ({"multi_turn": True, "trace": TRACE, "workload": "c.jsonl", "prompts": [{"prompt": "p"}]},
     "multi_turn=true and trace are two workloads"),
    ({"multi_turn_max_turns": -2}, "multi_turn_max_turns=-2: must be >= 0"),
])
def test_bad_traffic_options_fail_before_any_request(capsys, server_info, fake_load, args, words):
    out = run(capsys, args)
    assert out["failed"] and words in out["msg"], out["msg"]
    assert fake_load == []
