"""serving_benchmark module: options, gates, failures and records, with the load generator mocked."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._bench import client as bench_client
from ansible_collections.llmops.sglang.plugins.module_utils._bench.stats import RequestResult
from ansible_collections.llmops.sglang.plugins.module_utils._server.client import SGLangClient, SGLangHTTPError
from ansible_collections.llmops.sglang.plugins.modules import serving_benchmark

# ansible-core 2.19 (pinned in requirements.txt) injects module args this way.
from ansible.module_utils.testing import patch_module_args


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


def _ok(out_len=10, ttft=0.1, tpot=0.01, verify=5, start=0.0):
    return RequestResult(prompt_len=100, output_len=out_len, success=True, start_time=start, ttft=ttft,
                         latency=ttft + tpot * (out_len - 1), itl=[tpot] * (out_len - 1), spec_verify_ct=verify)


@pytest.fixture
def fake_load(mocker):
    calls = []

    def fake(target, prompts, max_concurrency=None, request_rate=None, warmup_prompts=None, seed=1,
             abort_after_failures=0, progress=None, **kw):
        calls.append({"n": len(prompts), "mc": max_concurrency, "rate": request_rate, "kw": kw,
                      "warm": len(warmup_prompts or []), "lens": {(p.prompt_len, p.output_len) for p in prompts},
                      "warm_lens": {(p.prompt_len, p.output_len) for p in warmup_prompts or []},
                      "prompts": [p.prompt for p in prompts]})
        return [_ok() for _p in prompts], 2.0, []

    mocker.patch.object(bench_client, "run_benchmark", side_effect=fake)
    return calls


def test_levels_records_and_accept_length(capsys, server_info, fake_load):
    out = run(capsys, {"max_concurrency": [1, 8], "num_prompts": 4, "prompts_per_concurrency": 2, "input_len": 100,
                       "output_len": 10, "label": "mtp_on", "run_id": "r1", "level_offset": 2})
    assert not out.get("failed"), out.get("msg")
    assert [c["n"] for c in fake_load] == [4, 16]           # max(4, 2 * 8) at concurrency 8
    assert [c["mc"] for c in fake_load] == [1, 8]
    assert fake_load[0]["warm"] == 1 and fake_load[0]["lens"] == {(100, 10)}
    recs = out["records"]
    assert [r["level"] for r in recs] == [3, 4]
    r = recs[0]
    # 4 requests x 10 tokens in 2.0 s
    assert r["output_throughput"] == pytest.approx(20.0)
    assert r["median_tpot_ms"] == pytest.approx(10.0)
    assert r["accept_length"] == pytest.approx(2.0)         # 40 tokens / 20 verify steps
    assert r["server_info"]["speculative_num_draft_tokens"] == 2
    assert out["speculative"]["algorithm"] == "EAGLE"
    assert r["label"] == "mtp_on" and r["backend"] == "sglang" and r["random_output_len"] == 10
    assert "| 3 | 1 |" in out["markdown"]
    assert out["changed"] is False


def test_each_level_sends_its_own_prompts(capsys, server_info, fake_load):
    """Level N uses seed + N - 1: no level repeats an earlier level's prompts (which SGLang's radix cache would
    serve without a prefill), and the same seed and level number give the same prompts in another run (A/B arms)."""
    out = run(capsys, {"max_concurrency": [2, 2], "num_prompts": 2, "input_len": 50, "output_len": 10, "seed": 7, "level_offset": 1})
    assert [r["seed"] for r in out["records"]] == [8, 9]       # levels 2 and 3
    assert fake_load[0]["prompts"] == [p.prompt for p in bench_client.make_prompts(2, 50, 10, seed=8)]
    assert fake_load[1]["prompts"] == [p.prompt for p in bench_client.make_prompts(2, 50, 10, seed=9)]
    assert not set(map(tuple, fake_load[0]["prompts"])) & set(map(tuple, fake_load[1]["prompts"]))


def test_warmup_uses_input_len_and_at_most_32_output_tokens(capsys, server_info, fake_load):
    run(capsys, {"max_concurrency": [2], "num_prompts": 2, "input_len": 100, "output_len": 1000, "warmup_requests": 3})
    assert fake_load[0]["warm"] == 3 and fake_load[0]["warm_lens"] == {(100, 32)}
    assert fake_load[0]["lens"] == {(100, 1000)}


def test_warns_when_concurrency_exceeds_max_running_requests(capsys, server_info, fake_load):
    # the recorded server runs with max_running_requests 64
    out = run(capsys, {"max_concurrency": [64, 128], "num_prompts": 1})
    # ansible-core 2.19 returns warnings as WarningSummary objects, older cores as plain strings
    msgs = [w["event"]["msg"] if isinstance(w, dict) else w for w in out["warnings"]]
    assert msgs[0] == ("max_concurrency 128 exceeds the server's max_running_requests 64: 64 requests per wave queue "
                       "(#queue-req) and their TTFT includes the wait; raise sglang_server_max_running_requests to "
                       "measure 128 concurrent decodes")
    # the recorded server has MTP on and the workload is random-ids: the synthetic-prompt warning follows
    assert len(msgs) == 2 and msgs[1] == serving_benchmark.SYNTHETIC_WARNING


def test_gate_miss_fails_naming_level_and_metric(capsys, server_info, fake_load):
    out = run(capsys, {"max_concurrency": [1, 2], "num_prompts": 2, "gates": {"min_accept_length": 2.5, "max_p99_tpot_ms": 5}})
    assert out["failed"] is True
    assert "4 gate(s) missed" in out["msg"]
    assert "level 1 (max_concurrency=1): p99_tpot_ms 10.00 ms is above the gate 5.00 ms" in out["msg"]
    assert "level 2 (max_concurrency=2): accept_length 2.00 is below the gate 2.50" in out["msg"]
    assert len(out["records"]) == 2                          # partial/complete results still returned


def test_failed_requests_fail_with_counts_and_first_errors(capsys, server_info, mocker):
    def fake(target, prompts, **kw):
        res = [_ok() for _p in prompts[:3]]
        res += [RequestResult(prompt_len=100, error="connection closed mid-stream after 12 tokens (server closed the connection)")
                for _p in prompts[3:]]
        return res, 1.0, []

    mocker.patch.object(bench_client, "run_benchmark", side_effect=fake)
    out = run(capsys, {"max_concurrency": [4], "num_prompts": 5})
    assert out["failed"] is True
    assert out["failed_requests"] == 2
    assert "failed_fraction 0.40 is above the gate 0.00" in out["msg"]
    assert "2 request(s) failed; first errors: level 1: connection closed mid-stream after 12 tokens" in out["msg"]
    assert out["records"][0]["completed"] == 3
    # the same failures pass when the operator allows 50 %
    out2 = run(capsys, {"max_concurrency": [4], "num_prompts": 5, "gates": {"max_failed_fraction": 0.5}})
    assert not out2.get("failed")


def test_server_down_fails_before_load(capsys, mocker, fake_load):
    mocker.patch.object(SGLangClient, "server_info", side_effect=SGLangHTTPError(
        "server info: no HTTP answer from http://127.0.0.1:30000/server_info (connection refused)", status=-1))
    out = run(capsys, {})
    assert out["failed"] is True
    assert "did not answer server info before the load" in out["msg"] and "connection refused" in out["msg"]
    assert fake_load == []


@pytest.mark.parametrize("args,needle", [
    ({"max_concurrency": [0]}, "max_concurrency=[0]: every level must be a whole number of concurrent requests >= 1"),
    ({"request_rate": [-1.0]}, "request_rate=[-1.0]: every level must be a finite request rate > 0 req/s"),
    ({"range_ratio": 2.0}, "range_ratio=2.0: must be within [0, 1]"),
    ({"output_len": 0}, "output_len=0: must be >= 1"),
    ({"url": "localhost:30000"}, "url 'localhost:30000' is not an http(s) URL"),
    ({"gates": {"max_failed_fraction": 3}}, "gates.max_failed_fraction=3.0: must be within [0, 1]"),
    ({"seed": -3}, "seed=-3: must be >= 0; Python seeds -N and N alike"),
])
def test_bad_options_fail_before_anything(capsys, fake_load, args, needle):
    out = run(capsys, args)
    assert out["failed"] is True and needle in out["msg"]
    assert fake_load == []


def test_check_mode_sends_nothing(capsys, fake_load):
    out = run(capsys, {"max_concurrency": [1, 4], "request_rate": [2.0], "_ansible_check_mode": True})
    assert not out.get("failed")
    # 100 prompts per level; waves = 100 / concurrency
    assert out["levels"] == [{"max_concurrency": 1, "request_rate": 2.0, "num_prompts": 100, "waves": 100.0, "name": "concurrency 1, rate 2 req/s"},
                             {"max_concurrency": 4, "request_rate": 2.0, "num_prompts": 100, "waves": 25.0, "name": "concurrency 4, rate 2 req/s"}]
    assert fake_load == []


def test_openai_model_from_server_info_and_output_file(capsys, server_info, fake_load, mocker, tmp_path):
    seen = {}
    orig = bench_client.Target.__init__

    def spy(self, *a, **kw):
        orig(self, *a, **kw)
        seen["t"] = self

    mocker.patch.object(bench_client.Target, "__init__", spy)
    dest = tmp_path / "out" / "res.jsonl"
    out = run(capsys, {"backend": "openai", "max_concurrency": [], "request_rate": [4.0], "num_prompts": 2,
                       "output_file": str(dest)})
    assert seen["t"].model == "qwen3.5-122b"
    assert fake_load[0]["rate"] == 4.0 and fake_load[0]["mc"] is None
    assert out["changed"] is True
    assert json.loads(dest.read_text().splitlines()[0])["request_rate"] == 4.0
