"""Tests of plugins/module_utils/_server/logs.py.

Two kinds of input:
- the recorded logs in tests/fixtures/sglang/ (values asserted are read off the fixture text by hand);
- synthetic lines written here from the templates in SGLANG_FACTS.md section 2.2/2.3/3 for every
  version 0.4.10 -> 0.5.23 and every prefix form.
"""
from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._server import logs as L


def _read(fixtures_dir, name):
    return (fixtures_dir / "sglang" / name).read_text()


# ---------------------------------------------------------------------------------------------
# Recorded logs
# ---------------------------------------------------------------------------------------------

def test_mtp_tp4_fixture(fixtures_dir):
    res = L.parse_log(_read(fixtures_dir, "qwen35-122b-mtp-tp4-v0.5.9.log"))
    assert res["target_class"] == "Qwen3_5MoeForConditionalGeneration"
    assert res["draft_class"] == "Qwen3_5ForCausalLMMTP"
    assert res["draft_kind"] == "mtp"
    assert res["draft_mem_gb"] == {"TP0": 1.91, "TP1": 1.91, "TP2": 1.91, "TP3": 1.91}
    assert res["target_mem_gb"] == {"TP0": 57.35, "TP1": 57.35, "TP2": 57.35, "TP3": 57.35}
    assert res["draft_loaded_ranks"] == ["TP0", "TP1", "TP2", "TP3"]
    assert res["draft_missing_ranks"] == [] and res["draft_before_target_ranks"] == []
    # two Decode lines: 0.95 (after the idle period, preceded by a Prefill with #running-req: 0) and 135.04
    assert res["decode"] == 2 and res["prefill"] == 2
    assert res["accept_length"] == 2.00
    assert res["accept_rate_logged"] == 1.00
    assert res["gen_throughput"] == 135.04
    assert res["gen_throughput_excluded"] == [0.95]
    assert res["speculation"] == "on"
    assert res["ready"] is True
    assert res["runs"] == 1
    args = res["server_args"]
    assert args["speculative_algorithm"] == "EAGLE"
    assert args["speculative_num_steps"] == 1
    assert args["speculative_eagle_topk"] == 1
    assert args["speculative_num_draft_tokens"] == 2
    assert args["tp_size"] == 4
    assert args["max_running_requests"] == 64
    assert args["attention_backend"] == "triton"
    assert args["disable_radix_cache"] is False
    assert args["speculative_draft_model_path"] == "/models/Qwen3.5-122B-A10B"
    keys = [w["key"] for w in res["warnings"]]
    assert keys == ["attention_backend_defaulted", "spec_v2_on", "custom_all_reduce_disabled"]
    assert res["warnings"][0]["backend"] == "triton"
    assert res["warnings"][2]["rank"] == "TP0"
    assert res["refusals"] == []


def test_mtp_tp4_fixture_load_lines_order_and_elapsed(fixtures_dir):
    res = L.parse_log(_read(fixtures_dir, "qwen35-122b-mtp-tp4-v0.5.9.log"))
    loads = res["load_weights"]
    assert [x["rank"] for x in loads] == ["TP0", "TP1", "TP2", "TP3"] * 2
    assert [x["elapsed_s"] for x in loads] == [29.35, 29.41, 29.38, 29.44, 1.96, 1.97, 1.95, 1.99]
    assert [x["is_draft"] for x in loads] == [False] * 4 + [True] * 4
    assert loads[4]["avail_mem_gb"] == 11.82 and loads[4]["dtype"] == "torch.bfloat16"


def test_no_spec_fixture(fixtures_dir):
    res = L.parse_log(_read(fixtures_dir, "qwen35-122b-no-spec-tp4-v0.5.9.log"))
    assert res["speculation"] == "off"
    assert res["gen_throughput"] == 110.21
    assert res["gen_throughput_excluded"] == [0.62]
    assert res["accept_length"] is None
    assert res["draft_class"] is None
    assert res["draft_mem_gb"] == {}
    assert res["target_class"] == "Qwen3_5MoeForConditionalGeneration"
    assert res["target_mem_gb"] == {"TP0": 57.35}
    assert all("accept_len" not in d for d in res["decode_lines"])


def test_broken_draft_fixture(fixtures_dir):
    res = L.parse_log(_read(fixtures_dir, "qwen35-122b-mtp-broken-draft-v0.5.9.log"))
    assert res["draft_class"] == "Qwen3_5ForCausalLMMTP"
    assert res["draft_mem_gb"] == {"TP0": 1.91}
    assert res["target_mem_gb"] == {"TP0": 57.37}
    # accept len 1.00, 1.01, 1.00 -> median 1.00; printed accept rate 0.50 (<=0.5.10 definition: 1.00 / 2)
    assert res["accept_length"] == 1.00
    assert res["accept_length_max"] == 1.01
    assert res["accept_rate_logged"] == 0.50
    assert L.is_never_accepted(res["accept_length"])
    # recomputed drafts-only rate: (1.00 - 1) / (2 - 1) = 0
    assert L.recompute_accept_rate(res["accept_length"], 2) == 0.0
    # 312.70 follows "Prefill batch ... #running-req: 0" (idle interval); median of 318.44 and 316.90
    assert res["gen_throughput_excluded"] == [312.70]
    assert res["gen_throughput"] == pytest.approx((318.44 + 316.90) / 2)
    assert res["speculation"] == "on"


def test_radix_conflict_fixture(fixtures_dir):
    res = L.parse_log(_read(fixtures_dir, "qwen35-radix-conflict-v0.5.10.log"))
    assert len(res["refusals"]) == 1
    refusal = res["refusals"][0]
    assert refusal["key"] == "radix_cache_conflict"
    assert refusal["arch"] == "Qwen3_5MoeForConditionalGeneration"
    assert refusal["strategy"] == "no_buffer"
    assert "extra_buffer" in refusal["fix"] and "--disable-radix-cache" in refusal["fix"]
    assert refusal["time"] == "2026-11-22 08:01:44"
    assert res["ready"] is False and res["decode"] == 0
    assert res["speculation"] == "unknown"


# ---------------------------------------------------------------------------------------------
# Decode / Prefill lines per version (templates of SGLANG_FACTS.md 2.2 / 2.3)
# ---------------------------------------------------------------------------------------------

HYBRID = "#full token: 4160, full token usage: 0.02, mamba num: 8, mamba usage: 0.04, "
NORMAL = "#token: 5120, token usage: 0.05, "

DECODE_BY_VERSION = {
    # 0.4.10: "Decode batch." period, no accept rate, trailing ", "
    "0.4.10": "[2025-08-01 10:00:00 TP0] Decode batch. #running-req: 3, " + NORMAL
              + "accept len: 2.71, cuda graph: True, gen throughput (token/s): 241.50, #queue-req: 0, ",
    # 0.5.4: iteration counter always printed, trailing ", "
    "0.5.4": "[2025-10-01 10:00:00 TP0] Decode batch [1840], #running-req: 3, " + NORMAL
             + "accept len: 2.71, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 241.50, #queue-req: 0, ",
    "0.5.9": "[2026-02-01 10:00:00 TP0] Decode batch, #running-req: 3, " + HYBRID
             + "accept len: 2.71, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 241.50, #queue-req: 0",
    "0.5.10": "[2026-03-01 10:00:00 TP0] Decode batch, #running-req: 3, " + HYBRID
              + "accept len: 2.71, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 241.50, #queue-req: 0",
    # 0.5.14: new accept-rate definition (drafts only) and MFU estimates
    "0.5.14": "[2026-06-01 10:00:00 TP0] Decode batch, #running-req: 3, " + HYBRID
              + "accept len: 2.71, accept rate: 0.57, cuda graph: True, gen throughput (token/s): 241.50, #queue-req: 0, "
              "est. decode TFLOPS/s (per GPU): 41.20, est. read BW (GB/s per GPU): 912.33, est. write BW (GB/s per GPU): 10.05",
    # 0.5.23: fwd occupancy and cap len
    "0.5.23": "[2026-10-01 10:00:00 TP0] Decode batch, #running-req: 3, " + HYBRID
              + "accept len: 2.71, accept rate: 0.57, cap len: 4.00, cuda graph: True, gen throughput (token/s): 241.50, "
              "#queue-req: 0, fwd occupancy: 93.20%",
}


@pytest.mark.parametrize("version", sorted(DECODE_BY_VERSION))
def test_decode_line_every_version(version):
    d = L.parse_batch_line(DECODE_BY_VERSION[version])
    assert d["kind"] == "decode"
    assert d["running_req"] == 3
    assert d["queue_req"] == 0
    assert d["accept_len"] == 2.71
    assert d["gen_throughput"] == 241.50
    assert d["cuda_graph"] is True
    assert d["rank"] == "TP0"
    assert d["unparsed"] == []


def test_decode_line_version_specific_fields():
    assert "accept_rate" not in L.parse_batch_line(DECODE_BY_VERSION["0.4.10"])
    assert L.parse_batch_line(DECODE_BY_VERSION["0.4.10"])["token"] == 5120
    assert L.parse_batch_line(DECODE_BY_VERSION["0.5.4"])["forward_ct"] == 1840
    assert L.parse_batch_line(DECODE_BY_VERSION["0.5.9"])["forward_ct"] is None
    assert L.parse_batch_line(DECODE_BY_VERSION["0.5.9"])["mamba_num"] == 8
    assert L.parse_batch_line(DECODE_BY_VERSION["0.5.9"])["full_token_usage"] == 0.02
    mfu = L.parse_batch_line(DECODE_BY_VERSION["0.5.14"])
    assert mfu["fields"]["est. decode TFLOPS/s (per GPU)"] == 41.20
    assert mfu["fields"]["est. write BW (GB/s per GPU)"] == 10.05
    assert mfu["accept_rate"] == 0.57
    occ = L.parse_batch_line(DECODE_BY_VERSION["0.5.23"])
    assert occ["fwd_occupancy_pct"] == 93.20
    assert occ["cap_len"] == 4.00


def test_decode_fields_in_any_order_and_forward_iters():
    line = ("[2026-02-01 10:00:00] Decode batch [77], gen throughput (token/s): 55.54, #queue-req: 2, accept len: 3.05, "
            "cuda graph: False, #running-req: 48")
    d = L.parse_batch_line(line)
    assert (d["forward_ct"], d["gen_throughput"], d["queue_req"], d["accept_len"], d["cuda_graph"], d["running_req"]) == \
        (77, 55.54, 2, 3.05, False, 48)
    assert d["rank"] == ""


PREFILL_BY_VERSION = {
    "0.4.10": "[2025-08-01 10:00:00 TP0] Prefill batch. #new-seq: 2, #new-token: 2000, #cached-token: 16, token usage: 0.01, "
              "#running-req: 1, #queue-req: 0, ",
    "0.5.4": "[2025-10-01 10:00:00 TP0] Prefill batch [12], #new-seq: 2, #new-token: 2000, #cached-token: 16, token usage: 0.01, "
             "#running-req: 1, #queue-req: 0, ",
    "0.5.9": "[2026-02-01 10:00:00 TP0] Prefill batch, #new-seq: 2, #new-token: 2000, #cached-token: 16, full token usage: 0.01, "
             "mamba usage: 0.02, #running-req: 1, #queue-req: 0, input throughput (token/s): 4467.39, cuda graph: False",
    # 0.5.10 flipped the last two fields
    "0.5.10": "[2026-03-01 10:00:00 TP0] Prefill batch, #new-seq: 2, #new-token: 2000, #cached-token: 16, full token usage: 0.01, "
              "mamba usage: 0.02, #running-req: 1, #queue-req: 0, cuda graph: False, input throughput (token/s): 4467.39",
    "0.5.14": "[2026-06-01 10:00:00 TP0] Prefill batch, #new-seq: 2, #new-token: 2000, #cached-token: 16, full token usage: 0.01, "
              "mamba usage: 0.02, #running-req: 1, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 4467.39",
    "0.5.23": "[2026-10-01 10:00:00 TP0] Prefill batch, #new-seq: 2, #new-token: 2000, #cached-token: 16, full token usage: 0.01, "
              "mamba usage: 0.02, #running-req: 1, #queue-req: 0, #pending-token: 0, #replay-token: 5, cuda graph: False, "
              "input throughput (token/s): 4467.39, est. prefill TFLOPS/s (per GPU): 120.50, fwd occupancy: 88.00%",
}


@pytest.mark.parametrize("version", sorted(PREFILL_BY_VERSION))
def test_prefill_line_every_version(version):
    p = L.parse_batch_line(PREFILL_BY_VERSION[version])
    assert p["kind"] == "prefill"
    assert (p["new_seq"], p["new_token"], p["cached_token"], p["running_req"], p["queue_req"]) == (2, 2000, 16, 1, 0)
    if version not in ("0.4.10", "0.5.4"):
        assert p["input_throughput"] == 4467.39
        assert p["cuda_graph"] is False
    assert p["unparsed"] == []


def test_prefill_version_specific_fields():
    assert L.parse_batch_line(PREFILL_BY_VERSION["0.5.4"])["forward_ct"] == 12
    assert L.parse_batch_line(PREFILL_BY_VERSION["0.5.14"])["pending_token"] == 0
    last = L.parse_batch_line(PREFILL_BY_VERSION["0.5.23"])
    assert last["replay_token"] == 5 and last["fwd_occupancy_pct"] == 88.0


def test_not_batch_lines():
    assert L.parse_batch_line('[2026-11-20 09:15:14] INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK') is None
    assert L.parse_batch_line("Decode batches are great") is None
    assert L.parse_batch_line("") is None


# ---------------------------------------------------------------------------------------------
# Prefix forms
# ---------------------------------------------------------------------------------------------

BODY = ("Decode batch, #running-req: 1, #token: 95, token usage: 0.00, accept len: 2.00, accept rate: 1.00, "
        "cuda graph: True, gen throughput (token/s): 135.04, #queue-req: 0")

PREFIXES = [
    # (line, expected rank label, expected transport kinds, expected ms)
    ("[2026-11-20 09:16:41] " + BODY, "", [], None),
    ("[2026-11-20 09:16:41 TP3] " + BODY, "TP3", [], None),
    ("[2026-11-20 09:16:41 DP1 TP0] " + BODY, "DP1 TP0", [], None),
    ("[2026-11-20 09:16:41 DP0 TP0 EP0] " + BODY, "DP0 TP0 EP0", [], None),
    ("[2026-11-20 09:16:41 PP1 TP2] " + BODY, "PP1 TP2", [], None),
    ("[2026-11-20 09:16:41 DP0 PP0 ATTN_CP1 MOE_DP0 TP1 EP1] " + BODY, "DP0 PP0 ATTN_CP1 MOE_DP0 TP1 EP1", [], None),
    ("[2026-11-20 09:16:41.123 TP0] " + BODY, "TP0", [], 123),
    ("sglang-1  | [2026-11-20 09:16:41 TP0] " + BODY, "TP0", ["compose"], None),
    ("sglang_server    | [2026-11-20 09:16:41.007] " + BODY, "", ["compose"], 7),
    ("Nov 20 09:16:41 gpu1 sglang-server[4242]: [2026-11-20 09:16:41 TP0] " + BODY, "TP0", ["journald"], None),
    ("Nov  2 09:16:41 gpu1 conmon[77]: [2026-11-02 09:16:41 TP0] " + BODY, "TP0", ["journald"], None),
    ("2026-11-20T09:16:41+0000 gpu1 sglang-server[4242]: [2026-11-20 09:16:41 TP0] " + BODY, "TP0", ["journald"], None),
    ("2026-11-20T09:16:41.123456+00:00 gpu1 sglang-server[4242]: [2026-11-20 09:16:41 TP0] " + BODY, "TP0", ["journald"], None),
    ("2026-11-20T09:16:41.123456789Z [2026-11-20 09:16:41 TP0] " + BODY, "TP0", ["container_timestamp"], None),
    ("2026-11-20T09:16:41.123456789+01:00 [2026-11-20 09:16:41 TP1] " + BODY, "TP1", ["container_timestamp"], None),
    ("(SchedulerActor pid=3012, ip=10.0.0.2) [2026-11-20 09:16:41 DP1 TP0] " + BODY, "DP1 TP0", ["ray"], None),
    ("(pid=3012) [2026-11-20 09:16:41 TP0] " + BODY, None, None, None),  # not a Ray actor prefix: no match expected
    ("(Scheduler pid=3012) [2026-11-20 09:16:41 TP0] " + BODY, "TP0", ["ray"], None),
    ("Nov 20 09:16:41 gpu1 ray[99]: (SchedulerActor pid=3012, ip=10.0.0.2) [2026-11-20 09:16:41 TP0] " + BODY,
     "TP0", ["journald", "ray"], None),
]


@pytest.mark.parametrize("line,rank,transport,ms", PREFIXES)
def test_prefix_forms(line, rank, transport, ms):
    d = L.parse_batch_line(line)
    if rank is None:
        assert d is None
        return
    assert d is not None, line
    assert d["rank"] == rank
    assert d["ms"] == ms
    assert d["time"][:10] in ("2026-11-20", "2026-11-02")
    assert d["accept_len"] == 2.00 and d["gen_throughput"] == 135.04
    assert L.split_prefix(line)["transport"] == transport


def test_split_prefix_ranks_dict_and_crlf():
    p = L.split_prefix("[2026-11-20 09:16:41 DP2 PP1 TP3 EP4] hello\r\n")
    assert p["ranks"] == {"DP": 2, "PP": 1, "TP": 3, "EP": 4}
    assert p["message"] == "hello"
    bare = L.split_prefix("  File \"x.py\", line 1")
    assert bare["time"] is None and bare["message"] == "  File \"x.py\", line 1"


# ---------------------------------------------------------------------------------------------
# Load weight end. per version, draft classes
# ---------------------------------------------------------------------------------------------

def test_load_weight_end_054():
    d = L.parse_load_weight_end("[2025-10-01 10:00:00 TP1] Load weight end. type=DeepseekV3ForCausalLMNextN, dtype=torch.bfloat16, "
                                "avail mem=60.12 GB, mem usage=11.30 GB.")
    assert (d["rank"], d["class_name"], d["dtype"], d["elapsed_s"], d["avail_mem_gb"], d["mem_usage_gb"]) == \
        ("TP1", "DeepseekV3ForCausalLMNextN", "torch.bfloat16", None, 60.12, 11.30)
    assert d["is_draft"] is True and L.draft_kind(d["class_name"]) == "nextn"


def test_load_weight_end_0514_quant_no_dtype_tp1():
    d = L.parse_load_weight_end("[2026-06-01 10:00:00] Load weight end. elapsed=12.40 s, type=Qwen3NextForCausalLMMTP, "
                                "quant=fp8, bits=8, avail mem=20.00 GB, mem usage=0.95 GB.")
    assert d["rank"] == "TP0"  # tp_size 1 prints no rank: reported as TP0
    assert (d["class_name"], d["dtype"], d["quant"], d["elapsed_s"], d["mem_usage_gb"]) == \
        ("Qwen3NextForCausalLMMTP", None, "fp8", 12.40, 0.95)
    assert d["fields"]["bits"] == "8"


def test_load_weight_end_0523_commit_line_is_not_a_model_load():
    # 0.5.23 startup_weight_load.py: "Load weight end. Committed real weights after CUDA graph capture in %.2f s "
    # "(capture overlap window %.2f s, startup overlap total %.2f s)"
    line = ("[2026-09-01 10:00:05 TP0] Load weight end. Committed real weights after CUDA graph capture in 3.21 s "
            "(capture overlap window 40.50 s, startup overlap total 61.07 s)")
    d = L.parse_load_weight_end(line)
    assert (d["kind"], d["rank"], d["commit_s"], d["overlap_window_s"], d["startup_overlap_s"]) == ("commit", "TP0", 3.21, 40.50, 61.07)
    assert d["class_name"] is None and d["mem_usage_gb"] is None
    text = "\n".join([
        "[2026-09-01 10:00:00 TP0] Load weight end. elapsed=30.00 s, type=Qwen3_5MoeForConditionalGeneration, avail mem=40.00 GB, "
        "mem usage=60.00 GB.",
        "[2026-09-01 10:00:02 TP0] Load weight end. elapsed=1.00 s, type=Qwen3_5ForCausalLMMTP, avail mem=38.00 GB, mem usage=2.00 GB.",
        line])
    res = L.parse_log(text)
    assert [x["class_name"] for x in res["load_weights"]] == ["Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForCausalLMMTP"]
    assert res["draft_mem_gb"] == {"TP0": 2.0} and len(res["weight_commits"]) == 1


@pytest.mark.parametrize("name,kind", [
    ("Qwen3_5ForCausalLMMTP", "mtp"), ("Qwen3NextForCausalLMMTP", "mtp"), ("MiMoMTP", "mtp"), ("Step3p5MTP", "mtp"),
    ("Glm4MoeForCausalLMNextN", "nextn"), ("DeepseekV3ForCausalLMNextN", "nextn"),
    ("LlamaForCausalLMEagle3", "eagle3"), ("LlamaForCausalLMEagle", "eagle"),
    ("Qwen3_5MoeForConditionalGeneration", None), ("LlamaForCausalLM", None),
])
def test_draft_classes(name, kind):
    assert L.draft_kind(name) == kind
    assert L.is_draft_class(name) is (kind is not None)


def test_standalone_draft_is_second_load_per_rank():
    log = "\n".join([
        "[2026-01-01 00:00:00 TP0] Load weight end. elapsed=20.00 s, type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=40.00 GB, mem usage=15.00 GB.",
        "[2026-01-01 00:00:10 TP0] Load weight end. elapsed=2.00 s, type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=38.00 GB, mem usage=2.00 GB.",
    ])
    res = L.parse_log(log)
    assert res["draft_class"] == "LlamaForCausalLM" and res["draft_mem_gb"] == {"TP0": 2.0}


def test_draft_missing_on_a_rank_and_draft_before_target():
    log = "\n".join([
        "[2026-01-01 00:00:00 TP0] Load weight end. type=A, dtype=x, avail mem=1.00 GB, mem usage=50.00 GB.",
        "[2026-01-01 00:00:00 TP1] Load weight end. type=A, dtype=x, avail mem=1.00 GB, mem usage=50.00 GB.",
        "[2026-01-01 00:00:01 TP0] Load weight end. type=AMTP, dtype=x, avail mem=1.00 GB, mem usage=1.00 GB.",
        "[2026-01-01 00:00:01 TP2] Load weight end. type=AMTP, dtype=x, avail mem=1.00 GB, mem usage=1.00 GB.",
    ])
    res = L.parse_log(log)
    assert res["draft_missing_ranks"] == ["TP1"]
    assert res["draft_before_target_ranks"] == ["TP2"]


# ---------------------------------------------------------------------------------------------
# server_args, warnings, refusals, runs
# ---------------------------------------------------------------------------------------------

def test_server_args_fallback_for_non_literal_values():
    line = ("[2026-01-01 00:00:00] server_args=ServerArgs(model_path='/m', tp_size=2, load_format=<LoadFormat.AUTO: 'auto'>, "
            "speculative_algorithm='EAGLE', speculative_num_steps=3, extra=None)")
    args = L.parse_server_args(line)
    assert args["model_path"] == "/m" and args["tp_size"] == 2
    assert args["speculative_algorithm"] == "EAGLE" and args["speculative_num_steps"] == 3 and args["extra"] is None


def test_server_args_lists_and_dicts():
    args = L.parse_server_args("[2026-01-01 00:00:00] server_args=ServerArgs(cuda_graph_bs=[1, 2, 4], json_model_override_args='{}', "
                               "model_loader_extra_config={'enable_multithread_load': True}, mem_fraction_static=0.85)")
    assert args == {"cuda_graph_bs": [1, 2, 4], "json_model_override_args": "{}",
                    "model_loader_extra_config": {"enable_multithread_load": True}, "mem_fraction_static": 0.85}


@pytest.mark.parametrize("message,key,group", [
    ("Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.",
     "max_running_requests_capped", ("value", "48")),
    ("Disabling radix cache since speculative decoding for Qwen3NextForCausalLM is not supported with radix cache yet.",
     "radix_cache_disabled", ("arch", "Qwen3NextForCausalLM")),
    ("Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. ", "custom_all_reduce_disabled", None),
    ("Beta spec is enabled for eagle speculative decoding and overlap schedule is turned on.", "spec_v2_on", None),
    ("Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. You can set env "
     "SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. ", "spec_v2_off", None),
    ("Overlap scheduler is disabled because of using eagle3 and standalone speculative decoding.", "spec_v2_off", None),
    ("Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.", "spec_v2_sync", None),
    ("SGLANG_ENABLE_SPEC_V2 has been removed: spec v2 is always on", "spec_v2_env_removed", None),
    ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1", "draft_tokens_adjusted", None),
    ("DeepSeek MTP does not require setting speculative_draft_model_path.", "draft_path_not_needed", None),
])
def test_warnings(message, key, group):
    found = L.match_warning(message)
    assert found["key"] == key
    if group:
        assert found[group[0]] == group[1]


@pytest.mark.parametrize("message,key", [
    ("ValueError: Speculative decoding for Qwen3NextForCausalLM is not compatible with radix cache when using "
     "--mamba-scheduler-strategy no_buffer.To use radix cache ...", "radix_cache_conflict"),
    ("ValueError: mamba extra_buffer is not compatible with --disable-radix-cache Overlap scheduling is already supported",
     "extra_buffer_without_radix_cache"),
    ("AssertionError: triton or trtllm_mha backend are the only supported backends on Blackwell GPUs for hybrid GDN models, use "
     "--attention-backend triton", "blackwell_hybrid_backend"),
    ("AssertionError: Only {'trtllm_mha', 'triton', 'fa4'} backends are supported on Blackwell GPUs for hybrid GDN models. Got prefill=flashinfer",
     "blackwell_hybrid_backend"),
    ("ValueError: TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use a different backend.", "trtllm_mha_sm100_only"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda_out_of_memory"),
    ("RuntimeError: CUDART error: peer access is not supported between these two devices", "peer_access_unsupported"),
    ("KeyError: 'mtp.fc.weight'", "exception"),
])
def test_refusals(message, key):
    found = L.match_refusal(message)
    assert found["key"] == key
    if key == "exception":
        assert found["exception_type"] == "KeyError"


def test_no_warning_no_refusal_for_ordinary_lines():
    assert L.match_warning("Load weight begin. avail mem=93.87 GB") is None
    assert L.match_refusal("Load weight begin. avail mem=93.87 GB") is None


def test_only_last_run_is_read():
    first = ("[2026-01-01 00:00:00] server_args=ServerArgs(speculative_algorithm='EAGLE', tp_size=1)\n"
             "[2026-01-01 00:00:05] Decode batch, #running-req: 1, accept len: 1.00, gen throughput (token/s): 10.00\n")
    second = ("[2026-01-02 00:00:00] server_args=ServerArgs(speculative_algorithm='EAGLE', tp_size=1)\n"
              "[2026-01-02 00:00:05] Decode batch, #running-req: 1, accept len: 2.50, gen throughput (token/s): 20.00\n")
    res = L.parse_log(first + second)
    assert res["runs"] == 2 and res["accept_length"] == 2.50
    both = L.parse_log(first + second, last_run_only=False)
    assert both["accept_length"] == pytest.approx(1.75)


def test_idle_interval_rule_with_running_requests():
    """A Prefill that joins a busy batch (#running-req > 0) does not make the next Decode line an idle interval."""
    log = "\n".join([
        "[t] x",
        "[2026-01-01 00:00:00] Prefill batch, #new-seq: 1, #new-token: 10, #running-req: 0, #queue-req: 0",
        "[2026-01-01 00:00:01] Decode batch, #running-req: 1, gen throughput (token/s): 0.50",
        "[2026-01-01 00:00:02] Decode batch, #running-req: 1, gen throughput (token/s): 100.00",
        "[2026-01-01 00:00:03] Prefill batch, #new-seq: 1, #new-token: 10, #running-req: 1, #queue-req: 0",
        "[2026-01-01 00:00:04] Decode batch, #running-req: 2, gen throughput (token/s): 180.00",
        "[2026-01-01 00:00:05] Decode batch, #running-req: 2, gen throughput (token/s): 190.00",
    ])
    res = L.parse_log(log)
    assert [d["idle_interval"] for d in res["decode_lines"]] == [True, False, False, False]
    assert res["gen_throughput"] == 180.00  # median of 100, 180, 190
    assert res["speculation"] == "off"


@pytest.mark.parametrize("length,width,rate", [
    (2.00, 2, 1.0),     # the reference deployment: 1 draft token always accepted
    (1.00, 2, 0.0),     # broken draft
    (2.83, 4, 0.61),    # SGLANG_FACTS 2.2 worked check: 0.5.14+ prints 0.61 for 2.83 with 4 draft tokens
    (3.39, 4, 0.7967),
    (1.0, None, None), (None, 4, None), (2.0, 1, None),
])
def test_recompute_accept_rate(length, width, rate):
    assert L.recompute_accept_rate(length, width) == rate


@pytest.mark.parametrize("value,never", [(1.00, True), (1.02, True), (0.98, True), (1.03, False), (2.0, False), (None, False)])
def test_is_never_accepted(value, never):
    assert L.is_never_accepted(value) is never


def test_queued_at_48_signature():
    log = "\n".join([
        "[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 48, #token: 9000, token usage: 0.40, accept len: 2.90, accept rate: 0.63, "
        "cuda graph: True, gen throughput (token/s): 2100.00, #queue-req: 16",
        "[2026-01-01 00:00:02 TP0] Decode batch, #running-req: 48, #token: 9100, token usage: 0.41, accept len: 2.80, accept rate: 0.60, "
        "cuda graph: True, gen throughput (token/s): 2200.00, #queue-req: 0",
        "[2026-01-01 00:00:03 TP0] Decode batch, #running-req: 47, #token: 9100, token usage: 0.41, accept len: 2.80, accept rate: 0.60, "
        "cuda graph: True, gen throughput (token/s): 2200.00, #queue-req: 3",
    ])
    assert L.parse_log(log)["queued_at_48"] == 1


def _decode(t, gen, running=1, rank="", accept=None):
    tag = (" " + rank) if rank else ""
    spec = "accept len: %.2f, accept rate: 1.00, " % accept if accept is not None else ""
    return ("[2026-01-01 00:%s%s] Decode batch, #running-req: %d, #token: 100, token usage: 0.01, %scuda graph: True, "
            "gen throughput (token/s): %.2f, #queue-req: 0" % (t, tag, running, spec, gen))


def _prefill(t, running, rank=""):
    tag = (" " + rank) if rank else ""
    return ("[2026-01-01 00:%s%s] Prefill batch, #new-seq: 1, #new-token: 8, #cached-token: 0, token usage: 0.01, "
            "#running-req: %d, #queue-req: 0, input throughput (token/s): 10.00, cuda graph: False" % (t, tag, running))


def test_idle_interval_without_its_prefill_line_is_excluded_by_speed():
    """Issue 14: the 0.14 tok/s line after an idle gap was counted. Here its Prefill line is outside the window (or was
    never logged), so only the speed rule can tell: per-request 0.14 is below 1/10 of the median of 133.10, 0.14, 134.50."""
    log = "\n".join([_decode("00:01", 135.04), _decode("00:02", 133.10), _decode("09:30", 0.14), _decode("09:31", 134.50)])
    res = L.parse_log(log)
    assert [(d["idle_interval"], d["idle_reason"]) for d in res["decode_lines"]] == [
        (True, "first"), (False, None), (True, "slow"), (False, None)]
    assert res["gen_throughput"] == 133.80        # median of 133.10 and 134.50
    assert res["gen_throughput_excluded"] == [135.04, 0.14]


def test_idle_speed_rule_is_per_running_request():
    """64 running requests at 20 tok/s each (1280 tok/s) is a busy batch, not an idle one: per request 20 >= 135 / 10."""
    log = "\n".join([_decode("00:01", 1.0), _decode("00:02", 135.00), _decode("00:03", 134.00), _decode("00:04", 1280.00, running=64),
                     _decode("00:05", 133.00)])
    res = L.parse_log(log)
    # per-request speeds of the lines not marked first: 135, 134, 20, 133 -> median 133.5, floor 13.35: nothing below it
    assert [d["idle_reason"] for d in res["decode_lines"]] == ["first", None, None, None, None]
    assert res["gen_throughput"] == 134.50        # median of 135, 134, 1280, 133


def test_idle_speed_rule_needs_three_busy_lines():
    log = "\n".join([_decode("00:01", 1.0), _decode("00:02", 135.00), _decode("00:03", 0.50)])
    res = L.parse_log(log)
    assert [d["idle_reason"] for d in res["decode_lines"]] == ["first", None, None]
    assert res["gen_throughput"] == pytest.approx(67.75)   # (135 + 0.5) / 2: two lines are too few to call one slow


def test_idle_prefill_rule_is_per_dp_rank():
    """With DP attention each scheduler prints its own lines: DP1's idle Prefill does not mark DP0's next Decode line."""
    log = "\n".join([
        _decode("00:01", 1.00, rank="DP0 TP0"), _decode("00:01", 1.00, rank="DP1 TP1"),
        _decode("00:02", 120.00, rank="DP0 TP0"), _decode("00:02", 118.00, rank="DP1 TP1"),
        _prefill("00:40", 0, rank="DP1 TP1"),
        _decode("00:41", 121.00, rank="DP0 TP0"), _decode("00:41", 3.00, rank="DP1 TP1"),
    ])
    res = L.parse_log(log)
    assert [(d["rank"], d["idle_reason"]) for d in res["decode_lines"]] == [
        ("DP0 TP0", "first"), ("DP1 TP1", "first"), ("DP0 TP0", None), ("DP1 TP1", None), ("DP0 TP0", None), ("DP1 TP1", "idle_prefill")]
    assert res["gen_throughput"] == 120.00        # median of 120, 118, 121


def test_prefill_before_the_first_decode_line_keeps_the_first_reason():
    log = "\n".join([_prefill("00:00", 0), _decode("00:01", 0.95), _prefill("00:05", 0), _decode("00:06", 2.00), _decode("00:07", 130.00)])
    res = L.parse_log(log)
    assert [d["idle_reason"] for d in res["decode_lines"]] == ["first", "idle_prefill", None]
    assert res["gen_throughput"] == 130.00


def test_adaptive_lines_are_read_from_the_last_runs_start():
    """SGLang 0.5.14+: the disabled warning is logged while the args are resolved, before the run's server_args= line."""
    text = "\n".join([
        "[2026-11-20 09:00:00] speculative_adaptive disabled: enable_pdmux=True is not supported (adaptive state swap does not update "
        "decode_attn_backend_group). Falling back to static speculative params.",
        "[2026-11-20 09:00:01] server_args=ServerArgs(model_path='/m', speculative_algorithm='EAGLE')",
        "[2026-11-20 09:00:09] Decode batch, #running-req: 1, #token: 10, token usage: 0.01, accept len: 2.00, cuda graph: True, "
        "gen throughput (token/s): 100.00, #queue-req: 0",
        "[2026-11-20 10:00:00] speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 is supported). Falling back to "
        "static speculative params.",
        "[2026-11-20 10:00:01] server_args=ServerArgs(model_path='/m', speculative_algorithm='EAGLE')",
        "[2026-11-20 10:05:00] Adaptive spec params updated: steps 3 -> 5 (ema_accept_len=3.61)",
        "[2026-11-20 10:06:00] Adaptive spec params updated: steps 5 -> 1 (ema_accept_len=0.40)",
    ])
    parsed = L.parse_log(text)
    assert parsed["runs"] == 2
    assert parsed["adaptive_disabled"] == {"text": "speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 is supported). "
                                                   "Falling back to static speculative params.",
                                           "reason": "speculative_eagle_topk=4 (only topk=1 is supported)", "time": "2026-11-20 10:00:00"}
    assert parsed["adaptive_switches"] == [{"time": "2026-11-20 10:05:00", "from": 3, "to": 5, "ema_accept_len": 3.61},
                                           {"time": "2026-11-20 10:06:00", "from": 5, "to": 1, "ema_accept_len": 0.4}]
    # the previous run's line (before its own server_args=, after nothing) is not this run's
    assert L.parse_log("\n".join(text.splitlines()[:3] + text.splitlines()[4:]))["adaptive_disabled"] is None
