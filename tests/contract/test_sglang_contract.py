"""SGLang's real contract, version by version, checked from the published wheels' own source.

For every version in scripts/sglang_contract.py VERSIONS (the wheel is fetched with ``pip download --no-deps``
and cached in .cache/sglang-wheels; a failed download FAILS these tests, it never skips them):

* the generated table plugins/plugin_utils/_sglang/generated_flags.py equals a fresh extraction (regenerate with
  ``python3 scripts/sglang_contract.py generate``);
* the reference matrix (reference deployment, EAGLE3 with a draft model, no speculation, multi-node, every
  attention backend and KV cache dtype the renderer allows, CUDA graphs off, mamba strategies) is rendered and
  every emitted flag and value is parsed by an argparse parser built from that version's real
  ``add_argument`` calls / ``A[T, Arg(...)]`` fields (unknown flag or invalid choice = failure; deprecated
  flags counted, goal 0);
* the ``Load weight end.`` lines rendered from that version's real format strings are parsed by
  plugins/module_utils/_server/logs.py with every field right, and the simulator prints the same format;
* the simulator, started with the rendered argv, answers with that version's ``meta_info`` spec keys and
  ``sglang:spec_*`` metric names.

``CONTRACT_TABLE`` collects the numbers of the closing note (printed by ``-s`` and at the end of the run).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import time

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import launch as sa
from ansible_collections.llmops.sglang.plugins.module_utils._server import logs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_script():
    spec = importlib.util.spec_from_file_location("sglang_contract_script", os.path.join(ROOT, "scripts", "sglang_contract.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


contract = _load_script()
PROFILES = [p for p, _req in contract.VERSIONS]
CONTRACT_TABLE = dict((p, {"flags_checked": 0, "flags_missing": 0, "invalid_choices": 0, "deprecated": 0,
                           "log_lines": 0, "log_lines_parsed": 0, "sim_lines": 0, "sim_lines_identical": 0}) for p in PROFILES)


@pytest.fixture(scope="module")
def real():
    """The fresh extraction of every wheel (download when not cached; ContractError fails the test)."""
    start = time.time()
    try:
        data = contract.collect(download=True)
    except contract.ContractError as err:
        pytest.fail("SGLang contract: %s" % err, pytrace=False)
    CONTRACT_TABLE["_collect_s"] = round(time.time() - start, 2)
    return data


# ------------------------------------------------------------------------------------------ the parser
class _ParseError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _ParseError(message)


def real_parser(flags):
    """argparse parser with the version's flags: one argument per ``primary`` with all its spellings, the real
    arity (switch / one value / nargs), choices and int/float types. allow_abbrev stays on, as in SGLang."""
    parser = _Parser(prog="sglang serve", add_help=False)
    groups = {}
    for flag, info in flags.items():
        groups.setdefault((info["primary"], info["negatable"] and flag.startswith("--no-")), []).append(flag)
    for (primary, _negated), names in sorted(groups.items()):
        info = flags[names[0]]
        kwargs = {"dest": "arg_%d" % len(parser._actions)}
        if not info["takes_value"]:
            kwargs["action"] = "store_true"
        else:
            if info["nargs"] is not None:
                kwargs["nargs"] = info["nargs"]
            if info["choices"] is not None:
                kwargs["choices"] = info["choices"]
            if info["type"] in ("int", "float"):
                kwargs["type"] = int if info["type"] == "int" else float
        parser.add_argument(*sorted(names), **kwargs)
    return parser


# ------------------------------------------------------------------------------------------ the matrix
SM120 = {"compute_capabilities": ["12.0"] * 4, "gpu_count": 4, "in_container": True,
         "nccl_p2p_decision": {"disable_custom_all_reduce": True, "reason": "SEV-SNP"}}
H100 = {"compute_capabilities": ["9.0"] * 8, "gpu_count": 8, "in_container": True}
REFERENCE = {"model_path": "/models/Qwen3.5-122B-A10B", "served_model_name": "qwen3.5-122b",
             "model_architecture": "Qwen3_5MoeForConditionalGeneration", "tp_size": 4, "speculative_algorithm": "NEXTN",
             "speculative_num_steps": 1, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2,
             "max_running_requests": 64, "attention_backend": "triton", "mem_fraction_static": 0.85, "cuda_graph_max_bs": 256,
             "enable_metrics": True, "decode_log_interval": 40}
QWEN3_NEXT = dict(REFERENCE, model_path="/models/Qwen3-Next-80B-A3B-Instruct", served_model_name="qwen3-next",
                  model_architecture="Qwen3NextForCausalLM")
EAGLE3 = {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "model_architecture": "LlamaForCausalLM", "speculative_algorithm": "EAGLE3",
          "speculative_draft_model_path": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B", "speculative_num_steps": 3,
          "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8, "max_running_requests": 128, "enable_metrics": True}
EAGLE_AUTO = {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "model_architecture": "LlamaForCausalLM", "speculative_algorithm": "EAGLE",
              "speculative_draft_model_path": "lmsys/sglang-EAGLE-LLaMA3-Instruct-8B"}
PLAIN = {"model_path": "Qwen/Qwen2.5-7B-Instruct", "model_architecture": "Qwen2ForCausalLM", "tp_size": 2, "enable_metrics": True,
         "context_length": 32768, "chunked_prefill_size": 8192, "page_size": 16, "disable_radix_cache": True,
         "watchdog_timeout": 600, "log_level": "info", "api_key": "k", "trust_remote_code": True}
MULTI_NODE = {"model_path": "deepseek-ai/DeepSeek-V3", "model_architecture": "DeepseekV3ForCausalLM", "tp_size": 16, "nnodes": 2,
              "node_rank": 1, "dist_init_addr": "10.0.0.1:5000", "speculative_algorithm": "NEXTN", "trust_remote_code": True}


def matrix(profile):
    """(name, description, context) of every deployment rendered for ``profile``; hybrid models only where the
    version has their model class (Qwen3-Next from 0.5.4, Qwen3.5 from 0.5.9)."""
    out = []
    if sa._at_least(profile, "0.5.9"):
        out.append(("reference", REFERENCE, SM120))
        for strategy in ("auto", "extra_buffer") + (("extra_buffer_lazy",) if sa._at_least(profile, "0.5.14") else ()):
            desc = dict(REFERENCE, mamba_strategy=strategy)
            if strategy == "extra_buffer_lazy":
                desc = dict(desc, speculative_algorithm=None, speculative_num_steps=None, speculative_eagle_topk=None,
                            speculative_num_draft_tokens=None)
            out.append(("reference mamba %s" % strategy, desc, SM120))
        out.append(("reference no_buffer no radix", dict(REFERENCE, mamba_strategy="no_buffer", disable_radix_cache=True), SM120))
    if sa._at_least(profile, "0.5.4"):
        out.append(("qwen3-next mtp", QWEN3_NEXT, H100))
        out.append(("qwen3-next spec v2", dict(QWEN3_NEXT, spec_v2=True), H100))
    out += [("eagle3 draft", EAGLE3, H100), ("eagle auto params", EAGLE_AUTO, H100), ("no speculation", PLAIN, H100),
            ("multi-node", MULTI_NODE, dict(H100, gpu_count=8)),
            ("cuda graphs off", dict(PLAIN, disable_cuda_graph=True), H100),
            ("cuda graph bs", dict(PLAIN, cuda_graph_max_bs=160), H100)]
    if sa._at_least(profile, "0.5.14"):
        out.append(("prefill cuda graph bs", dict(PLAIN, cuda_graph_max_bs=160, cuda_graph_max_bs_prefill=64), H100))
        # adaptive speculative decoding (the versions whose parser has the flags): SGLang's built-in table, and a table
        adaptive = dict(EAGLE3, speculative_adaptive=True, speculative_num_steps=None, speculative_eagle_topk=None,
                        speculative_num_draft_tokens=None)
        out.append(("eagle3 adaptive", adaptive, H100))
        table = {1: {"candidate_steps": [1, 3, 5]}, 32: {"candidate_steps": [0, 1]}}
        out.append(("nextn adaptive table", dict(REFERENCE, speculative_adaptive=True, speculative_num_steps=3,
                                                 speculative_num_draft_tokens=4, speculative_adaptive_config=table), SM120))
    for backend in contract_choices(profile, "--attention-backend"):
        out.append(("attention %s" % backend, dict(PLAIN, attention_backend=backend), H100))
    for dtype in contract_choices(profile, "--kv-cache-dtype"):
        out.append(("kv %s" % dtype, dict(PLAIN, kv_cache_dtype=dtype), H100))
    return out


def contract_choices(profile, flag):
    from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import cli_contract as sglang_cli
    return sglang_cli.choices_of(flag, profile) or ()


# ------------------------------------------------------------------------------------------ tests
def test_generated_table_matches_the_wheels(real):
    with open(contract.TABLE_PATH) as handle:
        current = handle.read()
    assert current == contract.render_table(real), "plugins/plugin_utils/_sglang/generated_flags.py is stale: run python3 scripts/sglang_contract.py generate"


@pytest.mark.parametrize("profile", PROFILES)
def test_rendered_matrix_parses_with_the_real_parser(real, profile):
    flags = real[profile]["flags"]
    parser = real_parser(flags)
    row = CONTRACT_TABLE[profile]
    rendered = refused = 0
    failures = []
    for name, desc, context in matrix(profile):
        try:
            out = sa.render_launch(desc, profile, context)
        except sa.SGLangArgsError as err:
            # every deployment of the matrix is valid for this version: a refusal (e.g. the renderer's own contract
            # check catching a flag it emitted) is a failure
            refused += 1
            failures.append("%s: refused: %s" % (name, err))
            continue
        rendered += 1
        argv = out["argv"][3:]
        assert out["argv"][:3] == ["python3", "-m", "sglang.launch_server"]
        for item in argv:
            if item.startswith("--"):
                row["flags_checked"] += 1
                flag = item.split("=", 1)[0]
                if flag not in flags:
                    row["flags_missing"] += 1
                    failures.append("%s: %s not in SGLang %s" % (name, flag, profile))
                elif flags[flag]["deprecated"]:
                    row["deprecated"] += 1
                    failures.append("%s: %s is deprecated in SGLang %s" % (name, flag, profile))
        try:
            parser.parse_args(argv)
        except _ParseError as err:
            if "invalid choice" in str(err):
                row["invalid_choices"] += 1
            failures.append("%s: %s" % (name, err))
    row["rendered"], row["refused"] = rendered, refused
    assert not failures, "\n".join(failures)
    assert rendered >= 8


def test_version_differences_the_renderer_must_know(real):
    """Facts the renderer rules rely on, asserted against the wheels (so a regenerated table that moves them fails here)."""
    def has(profile, flag):
        return flag in real[profile]["flags"]
    assert not has("0.5.4", "--mamba-scheduler-strategy") and has("0.5.9", "--mamba-scheduler-strategy")
    assert real["0.5.14"]["flags"]["--mamba-scheduler-strategy"]["deprecated"] and not has("0.5.23", "--mamba-scheduler-strategy")
    assert real["0.5.14"]["flags"]["--disable-cuda-graph"]["deprecated"] and not real["0.5.10"]["flags"]["--disable-cuda-graph"]["deprecated"]
    assert "disabled" in real["0.5.14"]["flags"]["--cuda-graph-backend-prefill"]["choices"]
    assert not {"fa4", "trtllm_mha"} & set(real["0.4.10"]["flags"]["--attention-backend"]["choices"])
    assert has("0.5.4", "--enable-beta-spec") and not has("0.5.9", "--enable-beta-spec")
    assert has("0.5.10", "--cuda-graph-max-bs") and not has("0.5.23", "--cuda-graph-max-bs")


@pytest.mark.parametrize("profile", PROFILES)
def test_real_load_weight_lines_parse(real, profile):
    row = CONTRACT_TABLE[profile]
    lines = real[profile]["load_weight_lines"]
    assert lines, "no Load weight end format found in SGLang %s" % profile
    for entry in lines:
        row["log_lines"] += 1
        message = entry["message"]
        parsed = logs.parse_load_weight_end("[2026-01-01 10:00:00 TP1] " + message)
        assert parsed is not None and parsed["rank"] == "TP1", message
        if message.startswith("Load weight end. Committed"):
            assert (parsed["kind"], parsed["commit_s"], parsed["overlap_window_s"], parsed["startup_overlap_s"]) == ("commit", 12.34, 12.34, 12.34)
        else:
            assert parsed["kind"] == "load"
            assert (parsed["class_name"], parsed["avail_mem_gb"], parsed["mem_usage_gb"]) == ("Qwen3NextForCausalLM", 12.34, 12.34), message
            assert parsed["dtype"] == ("torch.bfloat16" if "dtype=" in message else None)
            assert parsed["elapsed_s"] == (12.34 if "elapsed=" in message else None)
        row["log_lines_parsed"] += 1


@pytest.mark.parametrize("profile", PROFILES)
def test_simulator_load_weight_line_is_the_real_format(real, profile):
    from sglang_sim.logfmt import LogWriter
    row = CONTRACT_TABLE[profile]
    writer = LogWriter(sa.parse_version(profile), tp_size=1)
    sim = writer.load_weight_end(12.34, "Qwen3NextForCausalLM", 12.34, 12.34)
    real_lines = [x["message"] for x in real[profile]["load_weight_lines"] if "Committed" not in x["message"]]
    row["sim_lines"] += 1
    assert sim in real_lines
    row["sim_lines_identical"] += 1


@pytest.mark.parametrize("profile", PROFILES)
def test_real_batch_lines_parse(real, profile):
    """Decode/Prefill batch lines rendered from the wheel's scheduler code parse with every printed field."""
    row = CONTRACT_TABLE[profile]
    lines = real[profile]["batch_lines"]
    assert set(lines) == {v[0] for v in contract.BATCH_VARIANTS}, sorted(lines)
    for variant, message in sorted(lines.items()):
        row["log_lines"] += 1
        parsed = logs.parse_batch_line("[2026-01-01 10:00:00] " + message)
        assert parsed is not None, message
        assert parsed["kind"] == variant.split("_")[0]
        assert (parsed["running_req"], parsed["queue_req"]) == (7, 7), message
        if parsed["kind"] == "decode":
            assert parsed["gen_throughput"] == 12.34 and parsed["cuda_graph"] is True, message
            assert parsed.get("accept_len") == (12.34 if "spec" in variant else None), message
        else:
            assert (parsed["new_seq"], parsed["new_token"], parsed["cached_token"]) == (7, 7, 7), message
            if "input throughput" in message:
                assert parsed["input_throughput"] == 12.34, message
        row["log_lines_parsed"] += 1


def _shape(text):
    """A log message with every number as N and every boolean as B (its format, not its values)."""
    return re.sub(r"\d+(?:\.\d+)?", "N", text.replace("True", "B").replace("False", "B"))


_USAGE = {"hybrid_decode": "#full token: 7, full token usage: 12.34, mamba num: 7, mamba usage: 12.34, ",
          "hybrid_prefill": "full token usage: 12.34, mamba usage: 12.34, ",
          "plain_decode": "#token: 7, token usage: 12.34, ", "plain_prefill": "token usage: 12.34, "}


@pytest.mark.parametrize("profile", PROFILES)
def test_simulator_batch_templates_are_the_real_ones(real, profile):
    """The simulator's Decode/Prefill templates (logfmt.LogWriter) give the real lines for the same values."""
    from sglang_sim.logfmt import LogWriter
    row = CONTRACT_TABLE[profile]
    writer = LogWriter(sa.parse_version(profile), tp_size=1)
    lines = real[profile]["batch_lines"]
    for variant, message in sorted(lines.items()):
        hybrid = "hybrid" in variant
        if hybrid and not sa._at_least(profile, "0.5.4"):
            continue  # 0.4.10 has no mamba pool branch: its "hybrid" rendering is the plain one (compared as such)
        if variant.startswith("decode"):
            sim = writer.decode_line(7, 7, _USAGE["hybrid_decode" if hybrid else "plain_decode"], "spec" in variant, 12.34, 12.34, True, 12.34, 7)
        else:
            sim = writer.prefill_line(7, 7, 7, 7, _USAGE["hybrid_prefill" if hybrid else "plain_prefill"], 7, 7, 12.34, cuda_graph=True)
        row["sim_lines"] += 1
        # identical up to the numbers (the simulator prints a constant "#pending-token: 0")
        assert _shape(sim) == _shape(message), (variant, sim, message)
        row["sim_lines_identical"] += 1


def _sim_args(profile):
    desc = dict(EAGLE_AUTO, max_running_requests=16, enable_metrics=True) if not sa._at_least(profile, "0.5.9") else dict(REFERENCE)
    context = H100 if not sa._at_least(profile, "0.5.9") else SM120
    out = sa.render_launch(desc, profile, context)
    args = list(out["argv"][3:])
    # loopback for the test: drop the rendered --host/--port (the harness adds a free port on 127.0.0.1)
    for flag in ("--host", "--port"):
        i = args.index(flag)
        del args[i:i + 2]
    env = dict(out["env"], SGLANG_SIM_VERSION=profile, SGLANG_SIM_ARCH=desc["model_architecture"])
    return args, env


@pytest.mark.simulator
@pytest.mark.parametrize("profile", PROFILES)
def test_simulator_meta_info_and_metrics_are_the_real_names(real, profile, tmp_path):
    from sglang_sim.harness import SimProcess
    args, env = _sim_args(profile)
    srv = SimProcess(args=args, env=env, log_path=str(tmp_path / "sim.log"), instant=True, load_s=0.05)
    try:
        srv.wait_ready(timeout=30)
        body = srv.post_json("/generate", {"input_ids": [3] * 8, "sampling_params": {"max_new_tokens": 9}})
        meta = body["meta_info"]
        sim_keys = sorted(k for k in meta if k.startswith("spec_"))
        real_keys = real[profile]["meta_info_spec_keys"]
        assert sim_keys and set(sim_keys) <= set(real_keys), (sim_keys, real_keys)
        text = srv.get_text("/metrics")
        sim_metrics = sorted(set(re.findall(r"^(sglang:spec_[a-z_]+)\{", text, re.M)))
        real_metrics = real[profile]["spec_metrics"]
        assert set(sim_metrics) <= set(real_metrics), (sim_metrics, real_metrics)
        # the names every version's scheduler always sets are all there
        core = {"sglang:spec_accept_length"} | ({"sglang:spec_accept_rate"} if profile != "0.4.10" else set()) | (
            {"sglang:spec_num_steps", "sglang:spec_num_draft_tokens", "sglang:spec_verify_calls_total"} if sa._at_least(profile, "0.5.14") else set())
        assert core <= set(sim_metrics), (core, sim_metrics)
        log = srv.log_text()
        real_batches = set(_shape(m) for m in real[profile]["batch_lines"].values())
        sim_batches = [logs.split_prefix(line)["message"] for line in log.splitlines() if re.search(r"\] (Decode|Prefill) batch", line)]
        assert sim_batches
        for message in sim_batches:
            CONTRACT_TABLE[profile]["sim_lines"] += 1
            assert _shape(message) in real_batches, message
            CONTRACT_TABLE[profile]["sim_lines_identical"] += 1
        sim_loads = [logs.split_prefix(line)["message"] for line in log.splitlines() if "Load weight end." in line]
        assert sim_loads
        shapes = set(re.sub(r"\d+\.\d+", "N", re.sub(r"type=\w+", "type=T", x["message"])) for x in real[profile]["load_weight_lines"])
        for message in sim_loads:
            CONTRACT_TABLE[profile]["sim_lines"] += 1
            assert re.sub(r"\d+\.\d+", "N", re.sub(r"type=\w+", "type=T", message)) in shapes, message
            CONTRACT_TABLE[profile]["sim_lines_identical"] += 1
    finally:
        srv.stop()


def test_zz_print_contract_table(real):
    """Prints the per-version table of the closing note (run with -s to see it)."""
    lines = ["version  flags-checked  not-in-version  invalid-choices  deprecated  real-log-lines-parsed  sim-lines-identical"]
    for p in PROFILES:
        r = CONTRACT_TABLE[p]
        values = (p, r["flags_checked"], r["flags_missing"], r["invalid_choices"], r["deprecated"], r["log_lines_parsed"], r["log_lines"],
                  r["sim_lines_identical"], r["sim_lines"])
        lines.append("%-8s %13d %15d %16d %11d %14d/%-7d %12d/%d" % values)
    sys.stdout.write("\n" + "\n".join(lines) + "\n")
