"""The SGLang simulator (a test double) against the formats of the recorded real outputs.

Every parser here is written from SGLANG_FACTS.md sections 2-4 and the recorded fixtures in
``tests/fixtures/sglang`` (strict regexes, one per version and line kind), independently of the
simulator's own code. Expected numbers are worked out by hand in the comments.
"""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

VERSIONS = ["0.4.10", "0.5.4", "0.5.9", "0.5.10", "0.5.14", "0.5.23"]
TS = r"\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?: TP(?P<rank>\d+))?\] "
NUM2 = r"\d+\.\d{2}"
USAGE_DECODE = (r"#full token: (?P<full>\d+), full token usage: (?P<usage>%s), mamba num: (?P<mnum>\d+), mamba usage: (?P<musage>%s), "
                % (NUM2, NUM2))
USAGE_PREFILL = r"full token usage: %s, mamba usage: %s, " % (NUM2, NUM2)
TAIL_DECODE = r"cuda graph: (?P<graph>True|False), gen throughput \(token/s\): (?P<gen>%s), #queue-req: (?P<queue>\d+)" % NUM2
ACC = r"accept len: (?P<acc>%s), " % NUM2
ACC_RATE = r"accept len: (?P<acc>%s), accept rate: (?P<rate>%s), " % (NUM2, NUM2)
PREFILL_HEAD = r"#new-seq: (?P<seq>\d+), #new-token: (?P<tok>\d+), #cached-token: (?P<cached>\d+), "
RUNQ = r"#running-req: (?P<run>\d+), #queue-req: (?P<queue>\d+), "
INPUT_TPS = r"input throughput \(token/s\): (?P<itps>%s)" % NUM2

# SGLANG_FACTS.md 2.2 / 2.3 templates, hybrid mamba model with speculation.
DECODE_RE = {
    "0.4.10": TS + r"Decode batch\. #running-req: (?P<run>\d+), " + USAGE_DECODE + ACC + TAIL_DECODE + r", $",
    "0.5.4": TS + r"Decode batch \[(?P<ct>\d+)\], #running-req: (?P<run>\d+), " + USAGE_DECODE + ACC_RATE + TAIL_DECODE + r", $",
    "0.5.9": TS + r"Decode batch, #running-req: (?P<run>\d+), " + USAGE_DECODE + ACC_RATE + TAIL_DECODE + r"$",
}
DECODE_RE["0.5.10"] = DECODE_RE["0.5.14"] = DECODE_RE["0.5.23"] = DECODE_RE["0.5.9"]
PREFILL_RE = {
    "0.4.10": TS + r"Prefill batch\. " + PREFILL_HEAD + USAGE_PREFILL + RUNQ + r"$",
    "0.5.4": TS + r"Prefill batch \[(?P<ct>\d+)\], " + PREFILL_HEAD + USAGE_PREFILL + RUNQ + r"$",
    "0.5.9": TS + r"Prefill batch, " + PREFILL_HEAD + USAGE_PREFILL + RUNQ + INPUT_TPS + r", cuda graph: (?P<graph>True|False)$",
    "0.5.10": TS + r"Prefill batch, " + PREFILL_HEAD + USAGE_PREFILL + RUNQ + r"cuda graph: (?P<graph>True|False), " + INPUT_TPS + r"$",
    "0.5.14": TS + r"Prefill batch, " + PREFILL_HEAD + USAGE_PREFILL + RUNQ + r"#pending-token: \d+, cuda graph: (?P<graph>True|False), "
    + INPUT_TPS + r"$",
}
PREFILL_RE["0.5.23"] = PREFILL_RE["0.5.14"]
LOAD_OLD = TS + r"Load weight end\. type=(?P<cls>\w+), dtype=torch\.bfloat16, avail mem=(?P<avail>%s) GB, mem usage=(?P<mem>%s) GB\.$" % (NUM2, NUM2)
LOAD_059 = (TS + r"Load weight end\. elapsed=(?P<el>%s) s, type=(?P<cls>\w+), dtype=torch\.bfloat16, avail mem=(?P<avail>%s) GB, "
            r"mem usage=(?P<mem>%s) GB\.$" % (NUM2, NUM2, NUM2))
LOAD_NEW = (TS + r"Load weight end\. elapsed=(?P<el>%s) s, type=(?P<cls>\w+), (?:quant=[^,]+, )?avail mem=(?P<avail>%s) GB, "
            r"mem usage=(?P<mem>%s) GB\.$" % (NUM2, NUM2, NUM2))
# model_runner.py of each wheel: dtype= printed up to 0.5.9 only (0.5.10 replaced it with the optional quant string)
LOAD_RE = {"0.4.10": LOAD_OLD, "0.5.4": LOAD_OLD, "0.5.9": LOAD_059, "0.5.10": LOAD_NEW, "0.5.14": LOAD_NEW, "0.5.23": LOAD_NEW}
READY_RE = TS + r"The server is fired up and ready to roll!$"
SERVER_ARGS_RE = TS + r"server_args=ServerArgs\((?P<body>.*)\)$"
ACCESS_RE = TS + r'INFO:     (?P<ip>[\d.]+):(?P<port>\d+) - "(?P<method>GET|POST) (?P<path>\S+) HTTP/1\.[01]" (?P<status>\d{3}) (?P<reason>[A-Za-z ]+)$'

MTP_1_1_2 = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "2"]


def version_flags(version):
    """Flags/env that make a Qwen3.5 MTP server start on each version (the mamba flag name and spec v2 per version)."""
    if version == "0.4.10":
        return [], {}
    if version in ("0.5.14", "0.5.23"):
        return ["--mamba-radix-cache-strategy", "extra_buffer"], {}
    return ["--mamba-scheduler-strategy", "extra_buffer"], ({"SGLANG_ENABLE_SPEC_V2": "1"} if version in ("0.5.9", "0.5.10") else {})


def matches(rx, text):
    return list(re.finditer(rx, text, re.M))


def sse_events(raw):
    """Split an SSE body (str) into the payload of each ``data: `` event; every event must be ``data: <payload>\\n\\n``."""
    assert raw.endswith("\n\n"), raw[-80:]
    events = raw[:-2].split("\n\n")
    out = []
    for event in events:
        assert event.startswith("data: "), event[:80]
        assert "\n" not in event
        out.append(event[len("data: "):])
    return out


def http(url, body=None, headers=None, timeout=30):
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), headers=hdrs,
                                 method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8"), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8"), dict(exc.headers)


def fixture_text(fixtures_dir, name):
    return (fixtures_dir / "sglang" / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------
# Logs of every version: startup, two Load weight end per rank, ready line, Prefill/Decode batch lines.
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_log_formats_per_version(sglang_sim, version):
    flags, env = version_flags(version)
    env["SGLANG_SIM_VERSION"] = version
    srv = sglang_sim(["--tp", "4", "--served-model-name", "qwen3.5-122b", "--decode-log-interval", "4", "--max-running-requests", "64",
                      "--enable-metrics"] + MTP_1_1_2 + flags, env=env, instant=True)
    status, body, _unused = http(srv.url + "/generate", {"input_ids": list(range(17)), "sampling_params": {"max_new_tokens": 41, "ignore_eos": True}})
    assert status == 200, body
    out = json.loads(body)
    assert out["meta_info"]["completion_tokens"] == 41
    log = srv.log_text()

    # server_args line: NEXTN already rewritten to EAGLE, tp_size=4, draft steps as given.
    (sa,) = matches(SERVER_ARGS_RE, log)
    assert "speculative_algorithm='EAGLE'" in sa.group("body")
    assert "tp_size=4" in sa.group("body") and "speculative_num_draft_tokens=2" in sa.group("body")
    assert "NEXTN" not in sa.group("body")

    # Two Load weight end per rank: target Qwen3_5MoeForConditionalGeneration (57.35 GB, the recorded
    # value for tp 4), then draft Qwen3_5ForCausalLMMTP (1.91 GB), TP0..TP3 each.
    loads = matches(LOAD_RE[version], log)
    assert [(m.group("rank"), m.group("cls")) for m in loads] == (
        [(str(r), "Qwen3_5MoeForConditionalGeneration") for r in range(4)] + [(str(r), "Qwen3_5ForCausalLMMTP") for r in range(4)])
    assert {m.group("mem") for m in loads[:4]} == {"57.35"} and {m.group("mem") for m in loads[4:]} == {"1.91"}
    # recorded: 93.87 GB free before loading, 93.87 - 57.35 = 36.52 after the target
    assert {m.group("avail") for m in loads[:4]} == {"36.52"}
    assert len(matches(READY_RE, log)) == 1
    ready_at = log.index("The server is fired up and ready to roll!")
    assert log.index("Load weight end.") < ready_at

    # Decode lines: only TP0 prints them; accept len 2.00 with p=1 and one draft token;
    # accept rate is 2.00/2 = 1.00 (<=0.5.10, bonus included) and (2-1)/(2-1) = 1.00 (0.5.14+).
    decodes = matches(DECODE_RE[version], log)
    all_decode = [line for line in log.splitlines() if "Decode batch" in line]
    assert decodes and len(decodes) == len(all_decode), all_decode[:3]
    assert {m.group("rank") for m in decodes} == {"0"}
    assert {m.group("acc") for m in decodes} == {"2.00"}
    if version != "0.4.10":
        assert {m.group("rate") for m in decodes} == {"1.00"}
    our_prefill = log.index("#new-token: 17,")   # our request's prefill (the warm-up has 6 prompt tokens)
    ours = [m for m in decodes if m.group("run") == "1" and m.start() > our_prefill]
    # 4 decode steps per line x 2 tokens per step x 1 request = +8 full tokens between consecutive lines
    fulls = [int(m.group("full")) for m in ours]
    assert len(fulls) >= 4
    assert all(b - a == 8 for a, b in zip(fulls, fulls[1:])), fulls
    # the last line is at the request's 20th verify step: 17 prompt + 1 (prefill) + 2*20 = 58 tokens
    assert fulls[-1] == 58
    mamba_per_req = 1 if version == "0.4.10" else 2   # extra_buffer keeps 2 mamba slots per request (recorded: 1 req -> mamba num 2)
    assert {int(m.group("mnum")) for m in ours} == {mamba_per_req}
    assert {m.group("graph") for m in ours} == {"True"}
    if version == "0.5.4":
        cts = [int(m.group("ct")) for m in decodes]
        assert cts == sorted(cts) and len(set(cts)) == len(cts)

    prefills = matches(PREFILL_RE[version], log)
    all_prefill = [line for line in log.splitlines() if "Prefill batch" in line]
    assert prefills and len(prefills) == len(all_prefill), all_prefill[:3]
    assert any(m.group("tok") == "17" and m.group("seq") == "1" for m in prefills)
    # access lines are uvicorn's
    assert any(m.group("path") == "/generate" and m.group("status") == "200" for m in matches(ACCESS_RE, log))


@pytest.mark.parametrize("version", VERSIONS)
def test_production_log_parser_reads_simulator_output(sglang_sim, version):
    sglang_logs = pytest.importorskip("ansible_collections.llmops.sglang.plugins.module_utils._server.logs")
    flags, env = version_flags(version)
    env["SGLANG_SIM_VERSION"] = version
    srv = sglang_sim(["--tp", "4", "--decode-log-interval", "4", "--max-running-requests", "8"] + MTP_1_1_2 + flags, env=env, instant=True)
    http(srv.url + "/generate", {"input_ids": [1] * 10, "sampling_params": {"max_new_tokens": 40}})
    parsed = sglang_logs.parse_log(srv.log_text())
    assert parsed["ready"] is True
    assert parsed["target_class"] == "Qwen3_5MoeForConditionalGeneration"
    assert parsed["draft_class"] == "Qwen3_5ForCausalLMMTP"
    assert len(parsed["draft_loaded_ranks"]) == 4 and parsed["draft_missing_ranks"] == []
    assert parsed["accept_length"] == 2.0
    assert parsed["speculation"] == "on"
    assert parsed["decode"] >= 2


def test_no_tp_prefix_and_plain_token_group_for_tp1_dense_model(sglang_sim):
    # tp 1: no " TP0" in any prefix; a non-hybrid model prints "#token: N, token usage: X" (SGLANG_FACTS 2.2).
    srv = sglang_sim(["--decode-log-interval", "2"], env={"SGLANG_SIM_ARCH": "LlamaForCausalLM"}, instant=True)
    http(srv.url + "/generate", {"input_ids": [5] * 10, "sampling_params": {"max_new_tokens": 5}})
    log = srv.log_text()
    assert " TP" not in log
    rx = (TS + r"Decode batch, #running-req: (?P<run>\d+), #token: (?P<tok>\d+), token usage: (?P<u>%s), cuda graph: (True|False), "
          r"gen throughput \(token/s\): %s, #queue-req: \d+$" % (NUM2, NUM2))
    found = [m for m in matches(rx, log) if m.group("run") == "1"]
    # steps of 1 token: our request holds 10 prompt + 1 (prefill) + s tokens after its s-th decode step (s = 1..4);
    # lines come every 2 decode steps (the step counter is global, so the phase depends on the warm-up)
    toks = [int(m.group("tok")) for m in found if m.start() > log.index("#new-token: 10,")]
    assert len(toks) == 2 and toks[1] - toks[0] == 2 and 12 <= toks[0] <= 13, toks
    assert "Load weight end" in log and "MTP" not in log
    assert "Using hybrid linear attention backend" not in log


def test_log_ms_and_forward_iters_env(sglang_sim):
    srv = sglang_sim(["--decode-log-interval", "1"], env={"SGLANG_LOG_MS": "1", "SGLANG_LOG_FORWARD_ITERS": "1"}, instant=True)
    http(srv.url + "/generate", {"input_ids": [5] * 3, "sampling_params": {"max_new_tokens": 3}})
    log = srv.log_text()
    assert re.search(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}\] Decode batch \[\d+\], #running-req: 1, ", log, re.M)
    assert re.search(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}\] Prefill batch \[\d+\], #new-seq: 1, ", log, re.M)


# ---------------------------------------------------------------------------------------------------------
# CLI rewrites and warnings
# ---------------------------------------------------------------------------------------------------------
def test_rewrites_and_warnings_0_5_9(sglang_sim):
    # --tp by argparse prefix, NEXTN -> EAGLE, topk 1 with 3 draft tokens adjusted to steps+1 = 2,
    # no --max-running-requests -> 48, no_buffer (auto) + spec -> radix cache disabled (<=0.5.9).
    srv = sglang_sim(["--tp", "2", "--speculative-algo", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                      "--speculative-num-draft-tokens", "3", "--some-future-flag", "7"], instant=True)
    log = srv.log_text()
    for text in ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
                 "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.",
                 "Disabling radix cache since speculative decoding for Qwen3_5MoeForConditionalGeneration is not supported with radix cache yet.",
                 "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm."):
        assert re.search(r"^" + TS + re.escape(text), log, re.M), text
    # unknown flags are accepted and named in a warning
    assert re.search(r"^" + TS + r"Unrecognized arguments are ignored by the SGLang simulator .*: --some-future-flag 7$", log, re.M)
    info = srv.get_json("/server_info")
    assert info["speculative_algorithm"] == "EAGLE"
    assert info["speculative_num_draft_tokens"] == 2
    assert info["max_running_requests"] == 48
    assert info["disable_radix_cache"] is True
    assert info["mamba_scheduler_strategy"] == "no_buffer"
    assert info["tp_size"] == 2
    # auto parameters when none of the three is given: (3, 1, 4) for Qwen3.5
    srv2 = sglang_sim(["--speculative-algorithm", "EAGLE", "--mamba-scheduler-strategy", "extra_buffer"], instant=True)
    info2 = srv2.get_json("/server_info")
    assert (info2["speculative_num_steps"], info2["speculative_eagle_topk"], info2["speculative_num_draft_tokens"]) == (3, 1, 4)


def test_48_request_cap_queues_requests(sglang_sim):
    # 50 concurrent requests with speculation and no --max-running-requests: 48 run, 2 wait in #queue-req.
    # t0 = 20 ms: a verify step of 48 requests costs 20 + 0.25*96 + 3.83 + 1.5 + 0.145*48 = 56 ms, 30 steps ~ 1.7 s,
    # long enough for all 50 threads to have sent their request while the first 48 run.
    import threading
    srv = sglang_sim(MTP_1_1_2 + ["--decode-log-interval", "1"], env={"SGLANG_SIM_T0_MS": "20"}, load_s=0)
    results = []

    def one():
        results.append(http(srv.url + "/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 60}})[0])

    threads = [threading.Thread(target=one) for _unused in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [200] * 50
    runs = [(int(m.group("run")), int(m.group("queue"))) for m in matches(DECODE_RE["0.5.9"], srv.log_text())]
    assert max(r for r, _unused in runs) == 48
    assert (48, 2) in runs or any(r == 48 and q > 0 for r, q in runs)


# ---------------------------------------------------------------------------------------------------------
# Refusals: exact texts, exit codes, nothing served
# ---------------------------------------------------------------------------------------------------------
def test_refusal_0_5_10_radix_cache_matches_recorded_log(sglang_sim, fixtures_dir):
    recorded = fixture_text(fixtures_dir, "qwen35-radix-conflict-v0.5.10.log").splitlines()
    expected = re.sub(r"^\[[^\]]*\] ", "", recorded[-1])
    srv = sglang_sim(["--tp", "4", "--speculative-algorithm", "NEXTN"], env={"SGLANG_SIM_VERSION": "0.5.10"}, wait_ready=False)
    assert srv.wait_exit(10) == 1
    lines = srv.log_text().splitlines()
    assert re.sub(r"^\[[^\]]*\] ", "", lines[-1]) == expected
    assert re.match(TS + r"Traceback \(most recent call last\):$", lines[-4])
    assert "Load weight" not in srv.log_text()


def test_refusal_0_5_23_old_mamba_flag_is_argparse_error(sglang_sim):
    srv = sglang_sim(["--mamba-scheduler-strategy", "extra_buffer"], env={"SGLANG_SIM_VERSION": "0.5.23"}, wait_ready=False)
    assert srv.wait_exit(10) == 2
    text = srv.log_text()
    assert text.startswith("usage: launch_server.py ")
    assert text.rstrip().endswith("launch_server.py: error: unrecognized arguments: --mamba-scheduler-strategy extra_buffer")


def test_0_5_14_accepts_old_mamba_flag_with_deprecation(sglang_sim):
    srv = sglang_sim(["--mamba-scheduler-strategy", "extra_buffer"] + MTP_1_1_2, env={"SGLANG_SIM_VERSION": "0.5.14"}, instant=True)
    info = srv.get_json("/server_info")
    assert info["mamba_radix_cache_strategy"] == "extra_buffer" and "mamba_scheduler_strategy" not in info
    assert "--mamba-scheduler-strategy is deprecated" in srv.log_text()


@pytest.mark.parametrize("flags", [["--speculative-num-steps", "2"], ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"],
                                   ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1"]])
def test_refusal_partial_speculative_params(sglang_sim, flags):
    srv = sglang_sim(["--speculative-algorithm", "EAGLE"] + flags, wait_ready=False)
    assert srv.wait_exit(10) == 1
    assert re.search(TS + r"AssertionError$", srv.log_text().splitlines()[-1])


def test_refusal_trtllm_mha_on_sm120_0_5_9(sglang_sim):
    srv = sglang_sim(["--attention-backend", "trtllm_mha"], env={"SGLANG_SIM_GPU": "sm120"}, wait_ready=False)
    assert srv.wait_exit(10) == 1
    assert srv.log_text().splitlines()[-1].endswith(
        "] ValueError: TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use a different backend.")
    # the same flag is fine on SM100 (B200)
    ok = sglang_sim(["--attention-backend", "trtllm_mha"], env={"SGLANG_SIM_GPU": "sm100"}, instant=True)
    assert ok.get_json("/server_info")["attention_backend"] == "trtllm_mha"


def test_refusal_flashinfer_hybrid_gdn_on_blackwell_0_5_9(sglang_sim):
    srv = sglang_sim(["--tp", "4", "--attention-backend", "flashinfer"], env={"SGLANG_SIM_GPU": "sm120"}, wait_ready=False)
    assert srv.wait_exit(10) == 1
    text = srv.log_text()
    # raised in the scheduler after the weights loaded, as SGLang's attention registry does
    assert text.index("Load weight end.") < text.index("Scheduler hit an exception")
    assert ("AssertionError: triton or trtllm_mha backend are the only supported backends on Blackwell GPUs for hybrid GDN models, use "
            "--attention-backend triton or --attention-backend trtllm_mha to specify the backend.") in text
    assert "fired up" not in text
    # 0.5.10 allows flashinfer there
    ok = sglang_sim(["--attention-backend", "flashinfer"], env={"SGLANG_SIM_VERSION": "0.5.10", "SGLANG_SIM_GPU": "sm120"}, instant=True)
    assert ok.status("/health") == 200


def test_bad_simulator_knob_is_named(sglang_sim):
    srv = sglang_sim([], env={"SGLANG_SIM_ACCEPT_P": "1.5"}, wait_ready=False)
    assert srv.wait_exit(10) == 2
    text = srv.log_text()
    assert "SGLANG_SIM_ACCEPT_P='1.5'" in text and "probability in [0, 1]" in text
    srv2 = sglang_sim([], env={"SGLANG_SIM_VERSION": "0.6.0"}, wait_ready=False)
    assert srv2.wait_exit(10) == 2
    assert "0.4.10, 0.5.4, 0.5.9, 0.5.10, 0.5.14, 0.5.23" in srv2.log_text()


def test_missing_model_path_is_argparse_error():
    import os
    import subprocess
    import sys
    from sglang_sim.harness import SANDBOX_DIR, SHIM_DIR
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SHIM_DIR, SANDBOX_DIR]))
    proc = subprocess.run([sys.executable, "-m", "sglang.launch_server", "--port", "1"], env=env, capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 2
    assert "launch_server.py: error: the following arguments are required: --model-path/--model" in proc.stderr


# ---------------------------------------------------------------------------------------------------------
# HTTP API against the recorded fixtures
# ---------------------------------------------------------------------------------------------------------
def _mtp_server(sglang_sim, version="0.5.9", extra=(), env=None, **kw):
    flags, venv = version_flags(version)
    venv["SGLANG_SIM_VERSION"] = version
    venv.update(env or {})
    return sglang_sim(["--tp", "4", "--served-model-name", "qwen3.5-122b", "--max-running-requests", "64"] + MTP_1_1_2 + flags + list(extra),
                      env=venv, **kw)


def test_server_info_matches_recorded_keys(sglang_sim, fixtures_dir):
    recorded = json.loads(fixture_text(fixtures_dir, "server_info-mtp-v0.5.9.json"))
    srv = _mtp_server(sglang_sim, extra=["--enable-metrics", "--host", "127.0.0.1"], instant=True)
    info = srv.get_json("/server_info")
    missing = [k for k in recorded if k not in info]
    assert missing == []
    missing_state = [k for k in recorded["internal_states"][0] if k not in info["internal_states"][0]]
    # avg_spec_accept_length is only there after the first Decode log interval (40 steps); the warm-up is shorter
    assert missing_state == ["avg_spec_accept_length"]
    for key in ("tp_size", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                "speculative_draft_model_path", "mamba_scheduler_strategy", "max_running_requests", "served_model_name", "attention_backend",
                "decode_log_interval", "enable_metrics", "disable_radix_cache", "page_size", "max_total_num_tokens", "max_req_input_len"):
        assert info[key] == recorded[key], key
    assert info["version"] == "0.5.9"
    assert info["model_path"] == "/models/Qwen3.5-122B-A10B"
    # 40 decode steps x 2 tokens: one interval. 100 tokens = 1 (prefill) + 2*49.5 -> 50 verify steps -> 1 Decode line.
    http(srv.url + "/generate", {"input_ids": [1] * 8, "sampling_params": {"max_new_tokens": 100}})
    state = srv.get_json("/server_info")["internal_states"][0]
    assert state["avg_spec_accept_length"] == 2.0
    # the deprecated path answers the same JSON
    assert srv.get_json("/get_server_info")["internal_states"][0]["avg_spec_accept_length"] == 2.0


def test_server_info_no_spec_matches_recorded(sglang_sim, fixtures_dir):
    recorded = json.loads(fixture_text(fixtures_dir, "server_info-no-spec-v0.5.9.json"))
    srv = sglang_sim(["--tp", "4", "--served-model-name", "qwen3.5-122b", "--max-running-requests", "64", "--enable-metrics",
                      "--attention-backend", "triton"], instant=True)
    info = srv.get_json("/server_info")
    assert [k for k in recorded if k not in info] == []
    for key in ("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk",
                "speculative_num_draft_tokens", "max_total_num_tokens"):
        assert info[key] == recorded[key], key
    assert "avg_spec_accept_length" not in info["internal_states"][0]


@pytest.mark.parametrize("version,paths_ok,paths_404", [
    ("0.4.10", ["/get_server_info", "/get_model_info"], ["/server_info", "/model_info"]),
    ("0.5.4", ["/get_server_info", "/get_model_info"], ["/server_info", "/model_info"]),
    ("0.5.9", ["/server_info", "/get_server_info", "/model_info", "/get_model_info"], []),
    ("0.5.23", ["/server_info", "/get_server_info", "/model_info"], []),
])
def test_info_endpoints_per_version(sglang_sim, version, paths_ok, paths_404):
    srv = sglang_sim([], env={"SGLANG_SIM_VERSION": version}, instant=True)
    for path in paths_ok:
        assert srv.status(path) == 200, path
    for path in paths_404:
        assert srv.status(path) == 404, path
    model_info = json.loads(http(srv.url + paths_ok[-1])[1])   # each list ends with the version's model-info path
    assert model_info["model_path"] == "/models/Qwen3.5-122B-A10B" and model_info["is_generation"] is True
    if tuple(int(x) for x in version.split(".")) >= (0, 5, 9):
        assert model_info["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
    else:
        assert "architectures" not in model_info
    info = json.loads(http(srv.url + paths_ok[0])[1])
    assert info["version"] == version
    if version == "0.5.23":
        assert {"launch_command", "startup_time", "kv_events", "frontend"} <= set(info)
        assert "mamba_radix_cache_strategy" in info


def test_v1_models(sglang_sim):
    srv = sglang_sim(["--served-model-name", "qwen3.5-122b", "--context-length", "32768"], instant=True)
    models = srv.get_json("/v1/models")
    assert models["object"] == "list"
    (card,) = models["data"]
    assert (card["id"], card["object"], card["owned_by"], card["root"], card["parent"], card["max_model_len"]) == (
        "qwen3.5-122b", "model", "sglang", "qwen3.5-122b", None, 32768)


@pytest.mark.parametrize("version", VERSIONS)
def test_generate_stream_matches_recorded_shape(sglang_sim, fixtures_dir, version):
    recorded = [json.loads(p) for p in sse_events(fixture_text(fixtures_dir, "generate-stream-mtp.sse")) if p != "[DONE]"]
    srv = _mtp_server(sglang_sim, version=version, instant=True)
    status, raw, headers = http(srv.url + "/generate", {"text": "What is 15*23?", "stream": True,
                                                        "sampling_params": {"max_new_tokens": 9, "ignore_eos": True, "temperature": 0}})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    payloads = sse_events(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    # 9 tokens: 1 from prefill, then 2 per verify step (p=1): 1, 3, 5, 7, 9 -> 5 chunks, 4 verify steps
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == [1, 3, 5, 7, 9]
    for chunk in chunks[:-1]:
        assert list(chunk) == list(recorded[0])
        assert list(chunk["meta_info"]) == list(recorded[0]["meta_info"])
        assert chunk["meta_info"]["finish_reason"] is None
    prev = ""
    for chunk in chunks:   # cumulative text and output_ids
        assert chunk["text"].startswith(prev)
        prev = chunk["text"]
        assert len(chunk["output_ids"]) == chunk["meta_info"]["completion_tokens"]
    final = chunks[-1]["meta_info"]
    assert final["finish_reason"] == {"type": "length", "length": 9}
    assert final["prompt_tokens"] == 6  # What / is / 15 / * / 23 / ?
    assert isinstance(final["e2e_latency"], float) and final["e2e_latency"] >= 0
    spec_keys = sorted(k for k in final if k.startswith("spec_"))
    if version in ("0.5.9", "0.5.10"):
        assert list(final) == list(recorded[-1]["meta_info"])
        # 9 tokens / 4 verify steps = 2.25; 4 steps x 1 draft, all accepted
        assert (final["spec_verify_ct"], final["spec_accept_token_num"], final["spec_draft_token_num"]) == (4, 4, 4)
        assert final["spec_accept_length"] == 2.25 and final["spec_accept_rate"] == 1.0
    elif version in ("0.5.14", "0.5.23"):
        # tokenizer_manager.py 0.5.14/0.5.23: correct/proposed draft counts; 0.5.14 also the spec_accepted_drafts aliases
        assert (final["spec_num_correct_drafts"], final["spec_num_proposed_drafts"], final["spec_verify_ct"]) == (4, 4, 4)
        assert "spec_accept_token_num" not in final
        assert ("spec_accepted_drafts" in final) == (version == "0.5.14")
    elif version == "0.5.4":
        assert spec_keys == ["spec_accept_length", "spec_accept_rate", "spec_verify_ct"]
        assert (final["spec_verify_ct"], final["spec_accept_length"]) == (4, 2.25)
    else:
        # 0.4.10 tokenizer_manager.py writes only meta_info["spec_verify_ct"]
        assert spec_keys == ["spec_verify_ct"] and final["spec_verify_ct"] == 4


def test_generate_non_stream_and_text_prompt(sglang_sim):
    srv = sglang_sim(["--served-model-name", "m"], instant=True)
    out = srv.post_json("/generate", {"text": "hello there", "sampling_params": {"max_new_tokens": 5}})
    assert set(out) == {"text", "output_ids", "meta_info"}
    assert out["meta_info"]["completion_tokens"] == 5 and len(out["output_ids"]) == 5
    assert out["meta_info"]["prompt_tokens"] == 2
    assert "spec_verify_ct" not in out["meta_info"]
    status, body, _unused = http(srv.url + "/generate", {"sampling_params": {"max_new_tokens": 5}})
    assert status == 400 and "Either text or input_ids should be provided." in body
    status, body, _unused = http(srv.url + "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": -3}})
    assert status == 400 and "max_new_tokens" in body


def test_completions_stream_matches_recorded_shape(sglang_sim, fixtures_dir):
    recorded = sse_events(fixture_text(fixtures_dir, "completions-stream.sse"))
    rec = [json.loads(p) for p in recorded[:-1]]
    srv = _mtp_server(sglang_sim, instant=True)
    request = {"model": "qwen3.5-122b", "prompt": "What is 15*23?", "max_tokens": 5, "stream": True, "stream_options": {"include_usage": True}}
    status, raw, _unused = http(srv.url + "/v1/completions", request)
    assert status == 200
    payloads = sse_events(raw)
    assert payloads[-1] == "[DONE]" == recorded[-1]
    chunks = [json.loads(p) for p in payloads[:-1]]
    # same serialisation as the recorded stream: compact JSON, same key order
    assert all("\": " not in p for p in payloads[:-1])
    for chunk in chunks[:-1]:
        assert list(chunk) == list(rec[0]) and list(chunk["choices"][0]) == list(rec[0]["choices"][0])
        assert chunk["object"] == "text_completion" and chunk["model"] == "qwen3.5-122b" and chunk["usage"] is None
    # 5 tokens with MTP: 1 + 2 + 2 -> three content chunks, the last one carries finish_reason "length"
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None, None, "length"]
    usage = chunks[-1]
    assert usage["choices"] == [] and list(usage["usage"]) == list(rec[-1]["usage"])
    assert usage["usage"] == {"prompt_tokens": 6, "completion_tokens": 5, "total_tokens": 11}
    assert len({c["id"] for c in chunks}) == 1


def test_chat_completions_non_stream_and_stream_without_usage(sglang_sim):
    srv = sglang_sim(["--served-model-name", "m"], instant=True)
    out = srv.post_json("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    assert out["object"] == "chat.completion"
    assert out["choices"][0]["message"]["role"] == "assistant" and out["choices"][0]["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 4 and out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"] + 4
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True}
    status, raw, _unused = http(srv.url + "/v1/chat/completions", request)
    payloads = sse_events(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" and c["usage"] is None for c in chunks)
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == out["choices"][0]["message"]["content"][:len("".join(
        c["choices"][0]["delta"]["content"] for c in chunks))]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


METRIC_LINE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>(?:[a-zA-Z_]+="[^"]*",?)*)\} (?P<value>-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|\+Inf)$')


def _parse_prom(text):
    samples, types = {}, {}
    for line in text.strip().splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _unused, _unused, name, kind = line.split(" ")
            types[name] = kind
            continue
        m = METRIC_LINE.match(line)
        assert m, line
        labels = tuple(sorted(re.findall(r'([a-zA-Z_]+)="', m.group("labels"))))
        samples.setdefault(m.group("name"), []).append((labels, dict(re.findall(r'([a-zA-Z_]+)="([^"]*)"', m.group("labels"))),
                                                        float(m.group("value"))))
    return samples, types


def test_metrics_match_recorded_exposition(sglang_sim, fixtures_dir):
    rec_samples, rec_types = _parse_prom(fixture_text(fixtures_dir, "metrics-mtp.prom"))
    srv = _mtp_server(sglang_sim, extra=["--enable-metrics"], instant=True)
    # 2 requests x 81 tokens: 1 + 2*40 -> 40 verify steps each
    for _unused in range(2):
        http(srv.url + "/generate", {"input_ids": [3] * 10, "sampling_params": {"max_new_tokens": 81}})
    status, text, headers = http(srv.url + "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    samples, types = _parse_prom(text)
    for name, kind in rec_types.items():
        assert types.get(name) == kind, name
    for name, entries in rec_samples.items():
        assert name in samples, name
        assert {e[0] for e in entries} <= {e[0] for e in samples[name]}, name
    assert samples["sglang:spec_accept_length"][0][2] == 2.0
    assert samples["sglang:spec_accept_rate"][0][2] == 1.0
    assert samples["sglang:spec_accept_length"][0][1]["model_name"] == "qwen3.5-122b"
    assert samples["sglang:generation_tokens_total"][0][2] == 162.0     # warm-up and health checks are not counted
    assert samples["sglang:time_to_first_token_seconds_count"][0][2] == 2.0
    # cumulative buckets end at the count
    buckets = [e[2] for e in samples["sglang:time_to_first_token_seconds_bucket"]]
    assert buckets == sorted(buckets) and buckets[-1] == 2.0
    # /metrics is 404 without --enable-metrics
    plain = sglang_sim([], instant=True)
    assert plain.status("/metrics") == 404


def test_api_key(sglang_sim):
    srv = sglang_sim(["--api-key", "s3cret"], instant=True)
    status, body, _unused = http(srv.url + "/v1/models")
    assert status == 401 and json.loads(body) == {"error": "Unauthorized"}
    status, body, _unused = http(srv.url + "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 1}}, headers={"Authorization": "Bearer nope"})
    assert status == 401
    status, body, _unused = http(srv.url + "/v1/models", headers={"Authorization": "Bearer s3cret"})
    assert status == 200
    assert srv.status("/health") == 200   # health is exempt, as in SGLang's middleware


def test_unknown_route_and_method(sglang_sim):
    srv = sglang_sim([], instant=True)
    assert srv.status("/nope") == 404
    status, _unused, _unused = http(srv.url + "/health", {"x": 1})
    assert status == 405


def test_second_node_serves_only_health(sglang_sim):
    srv = sglang_sim(["--tp", "4", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:5000"], instant=True)
    log = srv.log_text()
    ranks = {m.group("rank") for m in matches(LOAD_RE["0.5.9"], log)}
    assert ranks == {"2", "3"}
    assert srv.status("/health") == 200
    assert srv.status("/v1/models") == 404


@pytest.mark.parametrize("args,env,key", [
    (["--speculative-algorithm", "NEXTN"], {"SGLANG_SIM_VERSION": "0.5.10"}, "radix_cache_conflict"),
    (["--attention-backend", "trtllm_mha"], {}, "trtllm_mha_sm100_only"),
    (["--tp", "2", "--attention-backend", "flashinfer"], {}, "blackwell_hybrid_backend"),
    (["--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "2", "--speculative-num-steps", "2",
      "--speculative-num-draft-tokens", "4", "--mamba-scheduler-strategy", "extra_buffer"], {"SGLANG_ENABLE_SPEC_V2": "1"}, "spec_v2_topk"),
])
def test_production_log_parser_reads_refusals(sglang_sim, args, env, key):
    sglang_logs = pytest.importorskip("ansible_collections.llmops.sglang.plugins.module_utils._server.logs")
    srv = sglang_sim(args, env=env, wait_ready=False)
    assert srv.wait_exit(10) == 1
    parsed = sglang_logs.parse_log(srv.log_text())
    assert [r["key"] for r in parsed["refusals"]] == [key]
    assert parsed["ready"] is False


def test_sigterm_shuts_down_cleanly(sglang_sim):
    srv = sglang_sim([], instant=True)
    assert srv.stop() == 0
    assert srv.log_text().rstrip().endswith("INFO:     Finished server process [%d]" % srv.proc.pid)


def test_sim_flags_override_environment(sglang_sim):
    # --sim-* flags win over SGLANG_SIM_* (the sandbox uses the environment, a developer may prefer flags)
    srv = sglang_sim(["--sim-version", "0.5.4", "--sim-instant", "1"], env={"SGLANG_SIM_VERSION": "0.5.23"})
    assert srv.get_json("/get_server_info")["version"] == "0.5.4"
    assert srv.status("/server_info") == 404


def test_port_in_use_fails_like_uvicorn(sglang_sim):
    first = sglang_sim([], instant=True)
    second = sglang_sim(["--port", str(first.port)], instant=True, wait_ready=False)
    assert second.wait_exit(10) == 1
    assert re.search(TS + r"ERROR:    \[Errno 98\] error while attempting to bind on address \('127\.0\.0\.1', %d\): address already in use$"
                     % first.port, second.log_text(), re.M)


def test_generate_batch_non_stream_and_stream(sglang_sim):
    # SGLang batch /generate (what sglang.bench_one_batch_server sends): a list in input_ids/text.
    srv = _mtp_server(sglang_sim, instant=True)
    out = srv.post_json("/generate", {"input_ids": [[1, 2, 3], [4, 5], [6]],
                                      "sampling_params": [{"max_new_tokens": 3}, {"max_new_tokens": 5}, {"max_new_tokens": 1}]})
    assert isinstance(out, list) and len(out) == 3
    assert [o["meta_info"]["completion_tokens"] for o in out] == [3, 5, 1]
    assert [o["meta_info"]["prompt_tokens"] for o in out] == [3, 2, 1]
    assert [o["index"] for o in out] == [0, 1, 2]
    # 5 tokens with one draft token at p = 1: 1 (prefill) + 2 + 2 -> 2 verify steps
    assert out[1]["meta_info"]["spec_verify_ct"] == 2
    status, raw, _unused = http(srv.url + "/generate", {"text": ["a b", "c d e"], "stream": True, "sampling_params": {"max_new_tokens": 4}})
    assert status == 200
    payloads = sse_events(raw)
    assert payloads[-1] == "[DONE]" and payloads.count("[DONE]") == 1
    chunks = [json.loads(p) for p in payloads[:-1]]
    finals = {c["index"]: c["meta_info"] for c in chunks if c["meta_info"]["finish_reason"] is not None}
    assert sorted(finals) == [0, 1]
    assert finals[0]["prompt_tokens"] == 2 and finals[1]["prompt_tokens"] == 3
    assert all(f["completion_tokens"] == 4 for f in finals.values())
    # the two requests of the batch share one prefill batch
    assert re.search(r"Prefill batch, #new-seq: 2, #new-token: 5, ", srv.log_text())


@pytest.mark.parametrize("version,args,env,expect", [
    ("0.5.4", ["--speculative-algorithm", "EAGLE", "--enable-beta-spec", "--mamba-scheduler-strategy", "extra_buffer"], {},
     "Beta spec is enabled for eagle speculative decoding and overlap schedule is turned on."),
    ("0.5.9", ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3", "--mamba-scheduler-strategy",
               "extra_buffer"], {}, "type=LlamaForCausalLMEagle3"),
    ("0.5.9", ["--speculative-algorithm", "NGRAM"], {}, "Max running requests is reset to 48"),
    ("0.5.9", ["--disable-cuda-graph", "--decode-log-interval", "1"], {}, "cuda graph: False, gen throughput"),
    ("0.5.14", MTP_1_1_2, {"SGLANG_ENABLE_SPEC_V2": "1"}, "SGLANG_ENABLE_SPEC_V2 has been removed"),
    ("0.5.23", MTP_1_1_2 + ["--disable-overlap-schedule"], {}, "Non-overlap (synchronous) spec v2 is used"),
    ("0.5.9", ["--stream-output"], {}, "stream_output=True"),
    ("0.5.9", MTP_1_1_2, {"SGLANG_SIM_ARCH": "DeepseekV3ForCausalLM"}, "type=DeepseekV3ForCausalLMNextN"),
])
def test_other_configurations_start_and_serve(sglang_sim, version, args, env, expect):
    env = dict(env, SGLANG_SIM_VERSION=version)
    srv = sglang_sim(args, env=env, instant=True)
    info = srv.get_json("/get_server_info")   # present in every version (deprecated from 0.5.9)
    status, raw, _unused = http(srv.url + "/generate", {"input_ids": [1, 2], "stream": True, "sampling_params": {"max_new_tokens": 3}})
    assert status == 200
    chunks = [json.loads(p) for p in sse_events(raw)[:-1]]
    assert chunks[-1]["meta_info"]["completion_tokens"] == 3
    if "--stream-output" in args:
        assert [len(c["output_ids"]) for c in chunks] == [1, 1, 1]   # disjoint output_ids segments
    assert expect in srv.log_text()
    assert info["version"] == version
