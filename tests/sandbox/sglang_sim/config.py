"""SGLang's command line as the simulator (a test double) understands it, per version.

``parse(argv, env)`` builds an argparse parser with the selected version's flag names (so argparse's
own errors, prefix matching such as ``--tp 4`` and ambiguous prefixes behave as in SGLang), then
applies SGLang's post-processing: NEXTN -> EAGLE, the auto speculative parameters, the topk-1
draft-token rule, the 48-request cap under speculation, the mamba/radix-cache rules of the version,
the spec-v2 / overlap-scheduler lines, the attention backend default, and the refusals (exceptions
SGLang raises for bad combinations). Sources: SGLang ``server_args.py`` (0.4.10-0.5.14) and
``arg_groups/*`` (0.5.23) as summarised in SGLANG_FACTS.md sections 0-1.

Unknown flags are accepted and ignored with a warning line (a newer role may drive an older server),
except the few that the selected version rejects for real (``--mamba-scheduler-strategy`` in 0.5.23).
"""
from __future__ import annotations

import argparse
import re
from collections import OrderedDict

from sglang_sim import adaptive as adaptive_mod
from sglang_sim import knobs as knobs_mod
from sglang_sim import version_tuple

HYBRID_ARCHS = ("Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
                "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM")
DRAFT_ARCH = {
    "Qwen3NextForCausalLM": "Qwen3NextForCausalLMMTP",
    "Qwen3_5ForConditionalGeneration": "Qwen3_5ForCausalLMMTP",
    "Qwen3_5MoeForConditionalGeneration": "Qwen3_5ForCausalLMMTP",
    "Qwen3_5ForCausalLM": "Qwen3_5ForCausalLMMTP",
    "Qwen3_5MoeForCausalLM": "Qwen3_5ForCausalLMMTP",
    "DeepseekV3ForCausalLM": "DeepseekV3ForCausalLMNextN",
    "Glm4MoeForCausalLM": "Glm4MoeForCausalLMNextN",
    "BailingMoeForCausalLM": "BailingMoeForCausalLMNextN",
}
MODEL_TYPE = {
    "Qwen3NextForCausalLM": "qwen3_next",
    "Qwen3_5ForConditionalGeneration": "qwen3_5",
    "Qwen3_5MoeForConditionalGeneration": "qwen3_5_moe",
    "Qwen3_5ForCausalLM": "qwen3_5_text",
    "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "LlamaForCausalLM": "llama",
}
SPEC_EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
#: SGLang turns multi-layer EAGLE on for these with --speculative-algorithm EAGLE (0.5.14 server_args.py
#: _handle_model_specific_adjustments; 0.5.23 arg_groups/overrides.py), which switches adaptive off.
MULTI_LAYER_EAGLE_ARCHS = ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM", "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration")
SPEC_CHOICES_OLD = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]

# Recorded reference values (qwen35-122b-mtp-tp4-v0.5.9.log, RTX PRO 6000 x4, tp 4).
REF_WEIGHT_GB_TP4 = 57.35
REF_PARAMS_B = 122.0
REF_DRAFT_GB = 1.91
REF_KV_TOKENS_SPEC = 1048576
REF_KV_TOKENS_NO_SPEC = 1310720
REF_CONTEXT_LEN = 262144


class Refusal(Exception):
    """SGLang would raise here. ``exc_type`` (e.g. ``ValueError``), ``message``, ``stage``:
    ``"args"`` (server-args post-processing, before anything loads) or ``"scheduler"`` (after the
    weights load, inside the scheduler process), ``where`` (source file/function for the traceback)."""

    def __init__(self, exc_type, message, stage="args", where=("sglang/srt/server_args.py", 1, "__post_init__")):
        Exception.__init__(self, "%s: %s" % (exc_type, message))
        self.exc_type = exc_type
        self.message = message
        self.stage = stage
        self.where = where


class ArgparseExit(Exception):
    """argparse wanted to exit (``status``, ``text`` already formatted as argparse prints it)."""

    def __init__(self, status, text):
        Exception.__init__(self, text)
        self.status = status
        self.text = text


class _Parser(argparse.ArgumentParser):
    def exit(self, status=0, message=None):
        """argparse exit -> ArgparseExit (the caller prints and exits)."""
        raise ArgparseExit(status, message or "")

    def error(self, message):
        """argparse error -> ArgparseExit(2, usage + ``launch_server.py: error: ...``)."""
        raise ArgparseExit(2, "%s%s: error: %s\n" % (self.format_usage(), self.prog, message))


def _truthy_env(env, name):
    return str(env.get(name, "")).strip().lower() in ("1", "true", "yes", "on")


def build_parser(vt):
    """argparse parser with the flag names of SGLang version tuple ``vt``."""
    parser = _Parser(prog="launch_server.py", allow_abbrev=True)
    add = parser.add_argument
    add("--model-path", "--model", dest="model_path", type=str, required=True)
    add("--tokenizer-path", type=str, default=None)
    add("--host", type=str, default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--served-model-name", type=str, default=None)
    add("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    add("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    add("--nnodes", type=int, default=1)
    add("--node-rank", type=int, default=0)
    add("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr", type=str, default=None)
    add("--mem-fraction-static", type=float, default=None)
    add("--max-running-requests", type=int, default=None)
    add("--chunked-prefill-size", type=int, default=None)
    add("--max-prefill-tokens", type=int, default=16384)
    if vt >= (0, 5, 23):
        add("--cuda-graph-max-bs-decode", dest="cuda_graph_max_bs", type=int, default=None)
        add("--cuda-graph-max-bs-prefill", type=int, default=None)
    elif vt >= (0, 5, 14):
        add("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs", dest="cuda_graph_max_bs", type=int, default=None)
    else:
        add("--cuda-graph-max-bs", type=int, default=None)
    add("--attention-backend", type=str, default=None)
    add("--page-size", type=int, default=None)
    add("--context-length", type=int, default=None)
    add("--kv-cache-dtype", type=str, default="auto")
    if vt >= (0, 5, 23):
        add("--speculative-algorithm", "--speculative-algo", dest="speculative_algorithm", type=str, default=None)
    else:
        add("--speculative-algorithm", dest="speculative_algorithm", type=str, choices=SPEC_CHOICES_OLD, default=None)
    add("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path", type=str, default=None)
    add("--speculative-draft-model-revision", type=str, default=None)
    add("--speculative-draft-load-format", type=str, default=None)
    add("--speculative-num-steps", type=int, default=None)
    add("--speculative-eagle-topk", type=int, default=None)
    add("--speculative-num-draft-tokens", type=int, default=None)
    add("--speculative-accept-threshold-single", type=float, default=1.0)
    add("--speculative-accept-threshold-acc", type=float, default=1.0)
    add("--speculative-attention-mode", type=str, default="prefill")
    add("--speculative-draft-attention-backend", type=str, default=None)
    add("--speculative-moe-runner-backend", type=str, default=None)
    add("--speculative-token-map", type=str, default=None)
    if vt >= (0, 5, 14):
        # adaptive speculative decoding (speculative/adaptive_spec_params.py) and the settings that switch it off
        add("--speculative-adaptive", action="store_true")
        add("--speculative-adaptive-config", type=str, default=None)
    add("--enable-dp-attention", action="store_true")
    if vt >= (0, 5, 23):
        add("--attn-dp-size", "--attention-data-parallel-size", dest="attn_dp_size", type=int, default=1)
    add("--enable-multi-layer-eagle", action="store_true")
    add("--enable-two-batch-overlap", action="store_true")
    add("--enable-pdmux", action="store_true")
    if (0, 5, 4) <= vt < (0, 5, 9):
        add("--enable-beta-spec", action="store_true")
    mamba_choices = ["auto", "no_buffer", "extra_buffer"]
    if vt >= (0, 5, 14):
        add("--mamba-radix-cache-strategy", dest="mamba_strategy", choices=mamba_choices + ["extra_buffer_lazy"], default="auto")
        if vt < (0, 5, 23):
            add("--mamba-scheduler-strategy", dest="mamba_strategy_deprecated", choices=mamba_choices + ["extra_buffer_lazy"], default=None)
    elif vt >= (0, 5, 4):
        add("--mamba-scheduler-strategy", dest="mamba_strategy", choices=mamba_choices, default="auto")
    if vt >= (0, 5, 4):
        add("--mamba-track-interval", type=int, default=256)
        add("--mamba-ssm-dtype", type=str, default="float32")
        add("--max-mamba-cache-size", type=int, default=None)
    add("--disable-radix-cache", action="store_true")
    add("--enable-mixed-chunk", action="store_true")
    if vt >= (0, 5, 23):
        add("--cuda-graph-backend-decode", type=str, default=None)
    else:
        add("--disable-cuda-graph", action="store_true")
    add("--disable-overlap-schedule", action="store_true")
    add("--disable-custom-all-reduce", action="store_true")
    add("--enable-p2p-check", action="store_true")
    add("--enable-metrics", action="store_true")
    add("--enable-metrics-for-all-schedulers", action="store_true")
    add("--enable-cache-report", action="store_true")
    add("--decode-log-interval", type=int, default=40)
    add("--trust-remote-code", action="store_true")
    add("--api-key", type=str, default=None)
    add("--log-level", type=str, default="info")
    add("--log-level-http", type=str, default=None)
    add("--watchdog-timeout", type=float, default=300.0)
    add("--reasoning-parser", type=str, default=None)
    add("--tool-call-parser", type=str, default=None)
    add("--stream-output", action="store_true")
    add("--random-seed", type=int, default=None)
    for name, _parser, _default, help_text in knobs_mod.KNOBS:
        add(knobs_mod.flag_name(name), dest="sim_" + name, type=str, default=None, help=help_text)
    return parser


def _params_b(model_path):
    """Parameter count in billions read from the model path (``Qwen3.5-122B-A10B`` -> 122.0), default 122."""
    match = re.search(r"(\d+(?:\.\d+)?)[Bb](?![a-z])", model_path.rsplit("/", 1)[-1])
    return float(match.group(1)) if match else REF_PARAMS_B


class SimConfig(object):
    """Everything the simulator derives from the command line and the environment.

    ``server_args``: OrderedDict, SGLang's flattened ServerArgs as /server_info shows them (and as
    the ``server_args=ServerArgs(...)`` log line prints them). ``warnings``: startup warning
    messages in order. ``refusal``: a :class:`Refusal` or None. ``unknown``: ignored argv items.
    """

    def __init__(self):
        self.server_args = OrderedDict()
        self.warnings = []
        self.refusal = None
        self.unknown = []


def parse(argv, env):
    """Parse ``argv`` (launch_server flags) with ``env`` (mapping). Returns SimConfig.

    Raises ArgparseExit (argparse error, exit status 2, text as argparse prints it) and
    knobs.KnobError (bad ``SGLANG_SIM_*`` value). SGLang refusals are returned in ``cfg.refusal``.
    """
    # The version decides the flag set, so read --sim-version / SGLANG_SIM_VERSION first.
    pre = {}
    for i, item in enumerate(argv):
        if item.startswith("--sim-version="):
            pre["version"] = item.split("=", 1)[1]
        elif item == "--sim-version" and i + 1 < len(argv):
            pre["version"] = argv[i + 1]
    version = knobs_mod.resolve(env, pre)["version"] if pre else knobs_mod.resolve(env, {})["version"]
    vt = version_tuple(version)
    parser = build_parser(vt)
    args, unknown = parser.parse_known_args(argv)
    if vt >= (0, 5, 23):
        removed = [u for u in unknown if u.split("=", 1)[0] == "--mamba-scheduler-strategy"]
        if removed:
            idx = unknown.index(removed[0])
            shown = unknown[idx:idx + 2] if "=" not in removed[0] and idx + 1 < len(unknown) else unknown[idx:idx + 1]
            parser.error("unrecognized arguments: %s" % " ".join(shown))
    flag_knobs = {name: getattr(args, "sim_" + name) for name in knobs_mod.KNOB_NAMES if getattr(args, "sim_" + name) is not None}
    knobs = knobs_mod.resolve(env, flag_knobs)
    cfg = SimConfig()
    cfg.version = version
    cfg.vt = vt
    cfg.args = args
    cfg.knobs = knobs
    cfg.unknown = unknown
    cfg.env = env
    _post_process(cfg, args, knobs, env, vt)
    return cfg


def _post_process(cfg, a, knobs, env, vt):
    warn = cfg.warnings.append
    arch = knobs["arch"]
    cfg.arch = arch
    cfg.hybrid = arch in HYBRID_ARCHS
    gpu = knobs["gpu"]
    cfg.gpu = gpu
    blackwell = gpu[2:4] in ("10", "11", "12")
    if a.tp_size < 1 or a.nnodes < 1 or a.tp_size % a.nnodes:
        cfg.refusal = Refusal("AssertionError", "tp_size=%d must be >= 1 and divisible by nnodes=%d" % (a.tp_size, a.nnodes))
    served = a.served_model_name or a.model_path
    tokenizer = a.tokenizer_path or a.model_path
    algo = a.speculative_algorithm
    if algo is not None:
        algo = algo.upper()
        if algo == "NEXTN":
            algo = "EAGLE"
    spec = algo is not None
    steps, topk, ndraft = a.speculative_num_steps, a.speculative_eagle_topk, a.speculative_num_draft_tokens
    draft_path = a.speculative_draft_model_path
    mrr = a.max_running_requests
    disable_radix = a.disable_radix_cache
    disable_overlap = a.disable_overlap_schedule
    attention = a.attention_backend
    page_size = a.page_size or 1
    mamba = getattr(a, "mamba_strategy", None)
    if vt >= (0, 5, 14) and getattr(a, "mamba_strategy_deprecated", None):
        warn("--mamba-scheduler-strategy is deprecated and will be removed in a future release. Please use --mamba-radix-cache-strategy instead.")
        mamba = a.mamba_strategy_deprecated

    # attention backend default (SGLang logs this before the speculative handling)
    if attention is None:
        if cfg.hybrid and blackwell:
            attention = "triton"
        elif gpu == "sm90":
            attention = "fa3"
        else:
            attention = "flashinfer"
        warn("Attention backend not specified. Use %s backend by default." % attention)
    if cfg.hybrid:
        warn("Using hybrid linear attention backend for hybrid GDN models.")

    # Blackwell refusals
    if cfg.refusal is None and attention == "trtllm_mha" and vt <= (0, 5, 9) and not gpu.startswith("sm10"):
        cfg.refusal = Refusal("ValueError", "TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use a different backend.")
    if (cfg.refusal is None and vt[:3] == (0, 5, 9) and cfg.hybrid and blackwell and attention not in ("triton", "trtllm_mha")):
        cfg.refusal = Refusal(
            "AssertionError",
            "triton or trtllm_mha backend are the only supported backends on Blackwell GPUs for hybrid GDN models, use "
            "--attention-backend triton or --attention-backend trtllm_mha to specify the backend.",
            stage="scheduler", where=("sglang/srt/layers/attention/attention_registry.py", 197, "attn_backend_wrapper"))

    cfg.draft_arch = None
    # adaptive (0.5.14+, arg_groups/speculative_hook.py): _maybe_disable_adaptive, then _init_adaptive_speculative_params,
    # both before the EAGLE handling (which chooses the auto parameters only when adaptive is off)
    cfg.adaptive = None
    cfg.pre_warnings = []
    adaptive_on = vt >= (0, 5, 14) and getattr(a, "speculative_adaptive", False)
    if adaptive_on:
        if vt >= (0, 5, 23):
            dp_attention = a.attn_dp_size > 1 or (a.enable_dp_attention and a.dp_size > 1)
        else:
            dp_attention = a.enable_dp_attention
        multi_layer = a.enable_multi_layer_eagle or (algo == "EAGLE" and arch in MULTI_LAYER_EAGLE_ARCHS
                                                     and a.speculative_algorithm.upper() == "EAGLE")
        reason = adaptive_mod.unsupported_reason(vt, algo, topk, dp_attention, multi_layer, a.enable_two_batch_overlap, a.enable_pdmux)
        if reason is not None:
            # logged while the args resolve, i.e. before the server_args= line (main.py prints pre_warnings first)
            cfg.pre_warnings.append(adaptive_mod.disabled_line(reason))
            adaptive_on = False
    if adaptive_on:
        try:
            table_cfg, entries = adaptive_mod.load_table(a.speculative_adaptive_config, vt)
        except (ValueError, OSError) as exc:
            table_cfg, entries = None, None
            cfg.refusal = Refusal(type(exc).__name__, str(exc), where=("sglang/srt/speculative/adaptive_spec_params.py", 1,
                                                                       "_load_adaptive_config"))
        if entries is not None:
            union = adaptive_mod.candidate_union(entries)
            topk = 1 if topk is None else topk
            steps = union[len(union) // 2] if steps is None else steps
            if steps not in union and cfg.refusal is None:
                cfg.refusal = Refusal("ValueError", "--speculative-num-steps=%d is not in the adaptive config candidate_steps %s. "
                                      "Pass one of those values." % (steps, union),
                                      where=("sglang/srt/arg_groups/speculative_hook.py", 1, "_init_adaptive_speculative_params"))
            ndraft = steps + 1
            cfg.adaptive = {"cfg": table_cfg, "entries": entries, "initial_steps": steps}
    if spec and algo in SPEC_EAGLE_FAMILY:
        if cfg.refusal is None and not (steps is None and topk is None and ndraft is None) and None in (steps, topk, ndraft):
            # SGLang: auto mode asserts the other two are None; setting a subset fails.
            cfg.refusal = Refusal("AssertionError", "", where=("sglang/srt/server_args.py", 1, "_handle_speculative_decoding"))
        if steps is None and topk is None and ndraft is None:
            # auto_choose_speculative_params of each wheel: keyed on the exact architecture; the default for
            # unlisted architectures is (5, 4, 8) in 0.4.10/0.5.4 and (3, 1, 4) from 0.5.9
            narrow_054 = ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM") + (
                ("DeepseekV32ForCausalLM", "GptOssForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM") if vt >= (0, 5, 4) else ())
            if algo == "STANDALONE" and vt >= (0, 5, 4):
                steps, topk, ndraft = 3, 1, 4
            elif arch in ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"):
                steps, topk, ndraft = 5, 4, 8
            elif vt < (0, 5, 9) and arch not in narrow_054:
                steps, topk, ndraft = 5, 4, 8
            else:
                steps, topk, ndraft = 3, 1, 4
        if None not in (steps, topk, ndraft):
            if topk == 1 and ndraft != steps + 1:
                warn("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1")
                ndraft = steps + 1
            if cfg.refusal is None and topk > 1 and page_size > 1 and attention not in ("flashinfer", "fa3"):
                cfg.refusal = Refusal("ValueError", "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results "
                                      "for paged attention backends. This combination is only supported for the 'flashinfer' backend.")
            if cfg.refusal is None and topk > 1 and attention == "trtllm_mha":
                cfg.refusal = Refusal("ValueError", "trtllm_mha backend only supports topk = 1 for speculative decoding.")
        if mrr is None:
            mrr = 48
            warn("Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.")
        if draft_path is None:
            draft_path = a.model_path
        elif arch in ("DeepseekV3ForCausalLM", "Glm4MoeForCausalLM", "BailingMoeForCausalLM"):
            warn("DeepSeek MTP does not require setting speculative_draft_model_path.")
            draft_path = a.model_path
        if a.enable_mixed_chunk:
            warn("Mixed chunked prefill is disabled because of using eagle speculative decoding.")
        if algo == "EAGLE3":
            cfg.draft_arch = "LlamaForCausalLMEagle3"      # EAGLE3 drafts are separate Llama-style heads
        elif algo == "STANDALONE":
            cfg.draft_arch = arch                           # a smaller model of the same family
        else:
            cfg.draft_arch = DRAFT_ARCH.get(arch, arch + "Eagle")
        # overlap scheduler / spec v2 lines by version
        if vt >= (0, 5, 14):
            if env.get("SGLANG_ENABLE_SPEC_V2") not in (None, ""):
                warn("SGLANG_ENABLE_SPEC_V2 has been removed: spec v2 is always on. Use --disable-overlap-schedule for the synchronous path.")
            if disable_overlap:
                warn("Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.")
        elif vt >= (0, 5, 9):
            if _truthy_env(env, "SGLANG_ENABLE_SPEC_V2"):
                if cfg.refusal is None and topk is not None and topk > 1:
                    cfg.refusal = Refusal("ValueError", "Spec v2 currently only supports topk = 1 for speculative decoding.")
                warn("Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on.")
            else:
                disable_overlap = True
                warn("Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. "
                     "You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. ")
        elif vt >= (0, 5, 4) and getattr(a, "enable_beta_spec", False) and algo == "EAGLE":
            warn("Beta spec is enabled for eagle speculative decoding and overlap schedule is turned on.")
        else:
            disable_overlap = True
            if algo == "EAGLE":
                warn("Overlap scheduler is disabled because of using eagle speculative decoding.")
            else:
                warn("Overlap scheduler is disabled because of using eagle3 and standalone speculative decoding.")
    elif spec:  # NGRAM
        if None in (steps, topk, ndraft):
            steps, topk, ndraft = steps or 0, topk or 1, ndraft or 8
        if mrr is None:
            mrr = 48
            warn("Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.")
    else:
        steps = topk = ndraft = None

    # mamba strategy and radix cache (hybrid models)
    if mamba is not None:
        if mamba == "auto":
            mamba = "extra_buffer" if (vt >= (0, 5, 14) and cfg.hybrid) else "no_buffer"
        if cfg.hybrid and spec and not disable_radix and mamba == "no_buffer":
            if vt >= (0, 5, 10) and vt < (0, 5, 14):
                if cfg.refusal is None:
                    cfg.refusal = Refusal(
                        "ValueError",
                        "Speculative decoding for %s is not compatible with radix cache when using --mamba-scheduler-strategy no_buffer."
                        "To use radix cache with speculative decoding, please use --mamba-scheduler-strategy extra_buffer and set "
                        "SGLANG_ENABLE_SPEC_V2=1." % arch)
            elif vt < (0, 5, 10):
                disable_radix = True
                warn("Disabling radix cache since speculative decoding for %s is not supported with radix cache yet." % arch)
        if cfg.refusal is None and cfg.hybrid and mamba == "extra_buffer" and a.disable_radix_cache and vt >= (0, 5, 10):
            cfg.refusal = Refusal(
                "ValueError",
                "mamba extra_buffer is not compatible with --disable-radix-cache Overlap scheduling is already supported with no_buffer + "
                "disable_radix_cache. Please use --mamba-scheduler-strategy no_buffer instead.")
        if cfg.refusal is None and cfg.hybrid and mamba == "extra_buffer" and ndraft and a.mamba_track_interval < ndraft:
            cfg.refusal = Refusal("ValueError", "mamba_track_interval %d must be greater than or equal to speculative_num_draft_tokens %d"
                                  % (a.mamba_track_interval, ndraft))
        if (cfg.hybrid and not spec and mamba == "no_buffer" and not disable_radix and (0, 5, 9) <= vt < (0, 5, 14)):
            disable_overlap = True
            warn("Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, try to use "
                 "--disable-radix-cache if overlap schedule is necessary")

    if cfg.unknown:
        warn("Unrecognized arguments are ignored by the SGLang simulator (a test double; SGLang %s itself may refuse them): %s"
             % (cfg.version, " ".join(cfg.unknown)))

    cfg.spec = spec
    cfg.algorithm = algo
    cfg.num_steps = steps if spec else 0
    cfg.topk = topk
    cfg.num_draft_tokens = ndraft if spec else 0
    cfg.mamba_strategy = mamba
    cfg.disable_overlap = disable_overlap
    cfg.attention_backend = attention
    cfg.served_model_name = served
    cfg.context_len = a.context_length or REF_CONTEXT_LEN
    cfg.max_total_num_tokens = REF_KV_TOKENS_SPEC if spec else REF_KV_TOKENS_NO_SPEC
    cfg.max_req_input_len = cfg.context_len - 6
    cfg.chunked_prefill_size = a.chunked_prefill_size or 8192
    cfg.max_prefill_tokens = a.max_prefill_tokens
    cfg.cuda_graph_max_bs = a.cuda_graph_max_bs or 256
    cfg.effective_mrr = mrr if mrr is not None else 2048
    cfg.max_mamba_cache_size = a.max_mamba_cache_size if getattr(a, "max_mamba_cache_size", None) else cfg.effective_mrr * (3 if mamba == "extra_buffer" else 2)
    cfg.mamba_per_req = 2 if mamba == "extra_buffer" else 1
    cfg.weight_gb = round(REF_WEIGHT_GB_TP4 * (_params_b(a.model_path) / REF_PARAMS_B) * 4.0 / max(1, a.tp_size), 2)
    cfg.draft_gb = REF_DRAFT_GB if spec and algo in SPEC_EAGLE_FAMILY else 0.0
    cfg.model_type = MODEL_TYPE.get(arch, arch.lower())

    sa = OrderedDict()
    sa["model_path"] = a.model_path
    sa["tokenizer_path"] = tokenizer
    sa["host"] = a.host
    sa["port"] = a.port
    sa["served_model_name"] = served
    sa["tp_size"] = a.tp_size
    sa["dp_size"] = a.dp_size
    sa["nnodes"] = a.nnodes
    sa["node_rank"] = a.node_rank
    sa["dist_init_addr"] = a.dist_init_addr
    sa["mem_fraction_static"] = a.mem_fraction_static if a.mem_fraction_static is not None else 0.85
    sa["max_running_requests"] = mrr
    sa["chunked_prefill_size"] = cfg.chunked_prefill_size
    sa["max_prefill_tokens"] = a.max_prefill_tokens
    sa["cuda_graph_max_bs"] = cfg.cuda_graph_max_bs
    sa["attention_backend"] = attention
    sa["page_size"] = page_size
    sa["context_length"] = a.context_length
    sa["kv_cache_dtype"] = a.kv_cache_dtype
    sa["speculative_algorithm"] = algo
    sa["speculative_draft_model_path"] = draft_path if spec else None
    sa["speculative_num_steps"] = steps
    sa["speculative_eagle_topk"] = topk
    sa["speculative_num_draft_tokens"] = ndraft
    sa["speculative_accept_threshold_single"] = a.speculative_accept_threshold_single
    sa["speculative_accept_threshold_acc"] = a.speculative_accept_threshold_acc
    sa["speculative_attention_mode"] = a.speculative_attention_mode
    if vt >= (0, 5, 14):
        sa["speculative_adaptive"] = cfg.adaptive is not None
        sa["speculative_adaptive_config"] = a.speculative_adaptive_config
    if (0, 5, 4) <= vt < (0, 5, 9):
        sa["enable_beta_spec"] = bool(getattr(a, "enable_beta_spec", False))
    if vt >= (0, 5, 14):
        sa["mamba_radix_cache_strategy"] = mamba
    elif vt >= (0, 5, 4):
        sa["mamba_scheduler_strategy"] = mamba
    if vt >= (0, 5, 4):
        sa["mamba_track_interval"] = a.mamba_track_interval
    sa["disable_radix_cache"] = disable_radix
    sa["disable_overlap_schedule"] = disable_overlap
    sa["disable_cuda_graph"] = bool(getattr(a, "disable_cuda_graph", False))
    sa["disable_custom_all_reduce"] = a.disable_custom_all_reduce
    sa["enable_p2p_check"] = a.enable_p2p_check
    sa["enable_metrics"] = a.enable_metrics
    sa["decode_log_interval"] = a.decode_log_interval
    sa["trust_remote_code"] = a.trust_remote_code
    sa["api_key"] = a.api_key
    sa["log_level"] = a.log_level
    sa["watchdog_timeout"] = a.watchdog_timeout
    sa["reasoning_parser"] = a.reasoning_parser
    sa["tool_call_parser"] = a.tool_call_parser
    sa["stream_output"] = a.stream_output
    cfg.server_args = sa
