# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Parsers for the log text of a running SGLang server (one parser per line format).

Formats read (sources: sgl-project/sglang ``scheduler_metrics_mixin.py`` for 0.4.10-0.5.9,
``observability/scheduler_metrics_mixin.py`` for 0.5.10, ``scheduler_components/metrics_reporter.py``
for 0.5.14 and 0.5.23, ``model_executor/model_runner.py`` and ``utils/common.py`` ``configure_logger``):

* the line prefix ``[%Y-%m-%d %H:%M:%S[.mmm][ DPn][ PPn][ ATTN_CPn][ MOE_DPn][ TPn][ EPn]] `` written by
  SGLang's logger, optionally preceded by what the log transport adds: journald (``short``:
  ``Mon DD HH:MM:SS host unit[pid]: ``, ``short-iso``/``short-precise`` variants), docker/podman
  ``--timestamps`` (RFC 3339 + space), docker-compose (``service  | ``), Ray (``(Actor pid=N, ip=A.B.C.D) ``);
  :func:`split_prefix` is the single prefix parser;
* ``Decode batch`` and ``Prefill batch`` lines of every version 0.4.10 -> 0.5.23 (:func:`parse_batch_line`),
  read as ``key: value`` pairs in any order, with or without the ``[forward_ct]`` counter, the 0.4.x
  period (``Decode batch.``), trailing ``, `` separators and extra fields (MFU estimates, ``fwd occupancy``);
* ``Load weight end.`` lines (0.4.10/0.5.4 ``type=..., dtype=..., avail mem=..., mem usage=...``; 0.5.9 adds
  ``elapsed=... s``; 0.5.10+ drops ``dtype`` and may add ``quant=...``; 0.5.23's overlapped startup prints
  ``Load weight end. Committed real weights after CUDA graph capture in X s (capture overlap window Y s,
  startup overlap total Z s)``, ``startup_weight_load.py``) (:func:`parse_load_weight_end`);
* the ``server_args=ServerArgs(...)`` startup line (:func:`parse_server_args`);
* the startup warnings and refusals that matter for speculative decoding (:func:`match_warning`,
  :func:`match_refusal`).

All numbers are returned as printed by SGLang: memory in GB (SGLang divides bytes by 1 << 30, so
these are GiB), throughput in tok/s, elapsed times in s. Nothing here raises on unknown text: lines
that are not in a known format yield ``None`` (or an empty list), so a log of any version can be fed
whole. :func:`parse_log` puts it all together for one log text.

Accept rate: SGLang changed its definition in 0.5.14 (<=0.5.10: ``accept_len / num_draft_tokens``,
bonus token included; 0.5.14+: ``(accept_len - 1) / (num_draft_tokens - 1)``, drafts only), so the
value printed in the log is not comparable across versions. :func:`recompute_accept_rate` recomputes
it one way for every version: the fraction of proposed draft tokens that were accepted,
``(accept_len - 1) / (num_draft_tokens - 1)``. That is the definition that makes 0.00 mean "no
draft token was ever accepted" whatever the draft width.
"""
from __future__ import annotations

import ast
import re
import statistics

from ansible_collections.llmops.sglang.plugins.module_utils._server.limits import SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT

# --------------------------------------------------------------------------------------------
# Line prefix (one parser)
# --------------------------------------------------------------------------------------------

#: SGLang's own bracketed prefix (configure_logger): time, optional .mmm (SGLANG_LOG_MS), rank tags.
_SGLANG_PREFIX_RE = re.compile(
    r"\[(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:[.,](?P<ms>\d{3}))?"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ?"
)
_RANK_RE = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)")

#: Prefixes added by the transport, stripped one after the other from the start of the line.
_TRANSPORT_PREFIXES = (
    # journald -o short / short-precise: "Nov 20 09:14:02 gpu1 sglang-server[1234]: "
    ("journald", re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)? \S+ [^\s\[\]:]+(?:\[\d+\])?: ")),
    # journald -o short-iso / short-iso-precise / short-full: "2026-11-20T09:14:02+0000 gpu1 unit[1234]: "
    ("journald", re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}) \S+ [^\s\[\]:]+(?:\[\d+\])?: ")),
    ("journald", re.compile(r"^[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \S+ \S+ [^\s\[\]:]+(?:\[\d+\])?: ")),
    # docker logs -t / podman logs -t: "2026-11-20T09:14:02.123456789Z " or with an offset
    ("container_timestamp", re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}) ")),
    # docker-compose / podman-compose: "sglang-1  | " (service name, padding, bar)
    ("compose", re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\s+\| ")),
    # Ray actors: "(SchedulerActor pid=1234, ip=10.0.0.2) " (ip optional)
    ("ray", re.compile(r"^\((?P<actor>[A-Za-z_][\w.]*) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9a-fA-F.:]+))?\) ")),
)


def split_prefix(line):
    """Split one log line into its transport prefix, SGLang's own prefix and the message.

    Returns a dict: ``transport`` (list of prefix kinds stripped: ``journald``, ``container_timestamp``,
    ``compose``, ``ray``), ``time`` (``"YYYY-MM-DD HH:MM:SS"`` or None), ``ms`` (int or None, present
    with ``SGLANG_LOG_MS``), ``ranks`` (dict such as ``{"TP": 1}`` or ``{"DP": 0, "TP": 0, "EP": 0}``),
    ``rank`` (the rank tags as printed, ``"TP1"``, ``"DP0 TP0 EP0"``, ``""`` when SGLang printed none,
    which is what it does for tp_size 1), ``message`` (the text after all prefixes). Never raises.
    """
    text = line.rstrip("\r\n")
    transport = []
    changed = not text.startswith("[")  # SGLang's own prefix first: no transport prefix to strip
    while changed:
        changed = False
        for kind, rx in _TRANSPORT_PREFIXES:
            m = rx.match(text)
            if m:
                transport.append(kind)
                text = text[m.end():]
                changed = True
                break
    result = {"transport": transport, "time": None, "ms": None, "ranks": {}, "rank": "", "message": text}
    m = _SGLANG_PREFIX_RE.match(text)
    if m:
        ranks_text = m.group("ranks").strip()
        result.update(
            time=m.group("time"),
            ms=int(m.group("ms")) if m.group("ms") else None,
            ranks=dict((k, int(v)) for k, v in _RANK_RE.findall(ranks_text)),
            rank=ranks_text,
            message=text[m.end():],
        )
    return result


def _rank_label(prefix):
    """Rank label used as a key in results: the rank tags as printed, ``TP0`` when SGLang printed none (tp_size 1)."""
    return prefix["rank"] or "TP0"


# --------------------------------------------------------------------------------------------
# Decode / Prefill batch lines
# --------------------------------------------------------------------------------------------

_BATCH_RE = re.compile(r"^(?P<kind>Decode|Prefill) batch(?: \[(?P<ct>\d+)\])?[.,](?P<rest>.*)$")
_NUMBER_RE = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")

#: SGLang's printed keys -> the names used in results (anything else is kept under ``fields`` as printed).
BATCH_KEYS = {
    "#running-req": "running_req",
    "#queue-req": "queue_req",
    "#token": "token",
    "token usage": "token_usage",
    "#full token": "full_token",
    "full token usage": "full_token_usage",
    "#swa token": "swa_token",
    "swa token usage": "swa_token_usage",
    "mamba num": "mamba_num",
    "mamba usage": "mamba_usage",
    "accept len": "accept_len",
    "accept rate": "accept_rate",
    "cap len": "cap_len",
    "block accept len": "block_accept_len",
    "cuda graph": "cuda_graph",
    "cpu graph": "cpu_graph",
    "npu graph": "npu_graph",
    "gen throughput (token/s)": "gen_throughput",
    "input throughput (token/s)": "input_throughput",
    "#new-seq": "new_seq",
    "#new-token": "new_token",
    "#cached-token": "cached_token",
    "#pending-token": "pending_token",
    "#replay-token": "replay_token",
    "fwd occupancy": "fwd_occupancy_pct",
}


def _coerce(value):
    """``True``/``False`` -> bool, integers -> int, decimals -> float, ``93.20%`` -> 93.2; else the text."""
    v = value.strip()
    if v in ("True", "False"):
        return v == "True"
    number = v[:-1] if v.endswith("%") else v
    if _NUMBER_RE.match(number):
        try:
            return int(number)
        except ValueError:
            return float(number)
    return v


def parse_batch_line(line):
    """Parse one ``Decode batch`` / ``Prefill batch`` line of any SGLang version 0.4.10 -> 0.5.23.

    Accepts every prefix form :func:`split_prefix` knows. The body is split on ``, `` into
    ``key: value`` pairs, in any order; empty trailing segments (0.4.x/0.5.4 end with ``, ``) are
    ignored; a segment without ``: `` is kept in ``unparsed``.

    Returns None for any other line, else a dict: ``kind`` (``decode``/``prefill``), ``forward_ct``
    (int or None, the ``[N]`` counter of 0.5.4 / ``SGLANG_LOG_FORWARD_ITERS``), ``time``, ``ms``,
    ``rank`` (see :func:`split_prefix`), ``fields`` (every pair as printed, values coerced), and the
    known fields under stable names (see ``BATCH_KEYS``): ``running_req``, ``queue_req``, ``accept_len``,
    ``accept_rate`` (as printed, version-dependent definition), ``gen_throughput`` (tok/s),
    ``input_throughput`` (tok/s), ``cuda_graph`` (bool), ``fwd_occupancy_pct`` (percent), ... Missing
    fields are absent (``accept_len`` is absent when speculative decoding is off).
    """
    return _batch_from_prefix(split_prefix(line))


def _batch_from_prefix(prefix):
    m = _BATCH_RE.match(prefix["message"])
    if not m:
        return None
    result = {
        "kind": m.group("kind").lower(),
        "forward_ct": int(m.group("ct")) if m.group("ct") else None,
        "time": prefix["time"],
        "ms": prefix["ms"],
        "rank": prefix["rank"],
        "fields": {},
        "unparsed": [],
    }
    for segment in m.group("rest").split(", "):
        segment = segment.strip().rstrip(",").strip()
        if not segment:
            continue
        key, sep, value = segment.partition(": ")
        if not sep:
            result["unparsed"].append(segment)
            continue
        key = key.strip()
        coerced = _coerce(value)
        result["fields"][key] = coerced
        if key in BATCH_KEYS:
            result[BATCH_KEYS[key]] = coerced
    return result


# --------------------------------------------------------------------------------------------
# Load weight end.
# --------------------------------------------------------------------------------------------

_LOAD_END_RE = re.compile(r"^Load weight end\. (?P<rest>.*?)\.?\s*$")
#: 0.5.23 model_runner_components/startup_weight_load.py (overlapped startup: real weights committed after the
#: CUDA graphs were captured on placeholder weights).
_LOAD_COMMIT_RE = re.compile(r"^Load weight end\. Committed real weights after CUDA graph capture in (?P<commit>[\d.]+) s "
                             r"\(capture overlap window (?P<window>[\d.]+) s, startup overlap total (?P<total>[\d.]+) s\)\s*$")
_FLOAT_PREFIX_RE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)")

#: Suffixes of the classes SGLang builds for draft models (model_config._config_draft_model and the
#: EAGLE3 draft classes): Qwen3_5ForCausalLMMTP, Qwen3NextForCausalLMMTP, DeepseekV3ForCausalLMNextN,
#: Glm4MoeForCausalLMNextN, MiMoMTP, Step3p5MTP, LlamaForCausalLMEagle, LlamaForCausalLMEagle3, ...
_DRAFT_CLASS_RE = re.compile(r"(?:MTP|NextN|Eagle3?|EAGLE3?)$")


def is_draft_class(class_name):
    """True when ``class_name`` is one of SGLang's draft-model classes (``...MTP``, ``...NextN``, ``...Eagle``, ``...Eagle3``)."""
    return bool(class_name) and bool(_DRAFT_CLASS_RE.search(class_name))


def draft_kind(class_name):
    """``mtp`` / ``nextn`` / ``eagle3`` / ``eagle`` for a draft class name, None for a target class."""
    if not is_draft_class(class_name):
        return None
    lowered = class_name.lower()
    for kind in ("mtp", "nextn", "eagle3", "eagle"):
        if lowered.endswith(kind):
            return kind
    return None


def parse_load_weight_end(line):
    """Parse a ``Load weight end.`` line (0.4.10/0.5.4, 0.5.9, 0.5.10-0.5.23 forms, 0.5.23 commit form).

    Returns None for other lines, else a dict: ``kind`` (``load``, or ``commit`` for 0.5.23's ``Committed real
    weights after CUDA graph capture`` line), ``time``, ``rank`` (see :func:`split_prefix`), ``class_name``
    (``type=``), ``dtype`` (str or None; gone from 0.5.10), ``quant`` (str or None, 0.5.10+), ``elapsed_s``
    (float or None; absent in 0.4.10/0.5.4), ``avail_mem_gb`` and ``mem_usage_gb`` (float, GB as printed, i.e.
    GiB), ``is_draft`` (class is a draft class), ``fields`` (every ``k=v`` as printed). A ``commit`` line has
    ``commit_s``, ``overlap_window_s``, ``startup_overlap_s`` (s) instead, and no class or memory (None).
    """
    return _load_from_prefix(split_prefix(line))


def _load_from_prefix(prefix):
    commit = _LOAD_COMMIT_RE.match(prefix["message"])
    if commit:
        return {"kind": "commit", "time": prefix["time"], "rank": _rank_label(prefix), "class_name": None, "dtype": None,
                "quant": None, "elapsed_s": None, "avail_mem_gb": None, "mem_usage_gb": None, "is_draft": False, "fields": {},
                "commit_s": float(commit.group("commit")), "overlap_window_s": float(commit.group("window")),
                "startup_overlap_s": float(commit.group("total"))}
    m = _LOAD_END_RE.match(prefix["message"])
    if not m:
        return None
    fields = {}
    for segment in m.group("rest").split(", "):
        key, sep, value = segment.partition("=")
        if sep:
            fields[key.strip()] = value.strip().rstrip(".")

    def num(key):
        fm = _FLOAT_PREFIX_RE.match(fields.get(key, ""))
        return float(fm.group(1)) if fm else None

    class_name = fields.get("type")
    return {
        "kind": "load",
        "time": prefix["time"],
        "rank": _rank_label(prefix),
        "class_name": class_name,
        "dtype": fields.get("dtype"),
        "quant": fields.get("quant"),
        "elapsed_s": num("elapsed"),
        "avail_mem_gb": num("avail mem"),
        "mem_usage_gb": num("mem usage"),
        "is_draft": is_draft_class(class_name),
        "fields": fields,
    }


# --------------------------------------------------------------------------------------------
# server_args=ServerArgs(...)
# --------------------------------------------------------------------------------------------

_SERVER_ARGS_RE = re.compile(r"^server_args=ServerArgs\((?P<body>.*)\)\s*$")
_KV_FALLBACK_RE = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()\[\]{}]+)")


def parse_server_args(line):
    """Parse the ``server_args=ServerArgs(k=v, ...)`` startup line (0.5.x ``{server_args=}``).

    Values are Python reprs; they are read with ``ast.literal_eval`` (str, int, float, bool, None,
    lists, dicts). When the whole body cannot be read that way (a value that is not a literal, e.g. an
    enum repr), each ``k=v`` is read one by one and unreadable values are kept as their text.
    Returns a dict of server args, or None when the line is not a server_args line.
    """
    return _args_from_prefix(split_prefix(line))


def _args_from_prefix(prefix):
    m = _SERVER_ARGS_RE.match(prefix["message"])
    if not m:
        return None
    body = m.group("body")
    try:
        call = ast.parse("f(" + body + ")", mode="eval").body
        result = {}
        for kw in call.keywords:
            try:
                result[kw.arg] = ast.literal_eval(kw.value)
            except ValueError:
                result[kw.arg] = ast.get_source_segment("f(" + body + ")", kw.value) if hasattr(ast, "get_source_segment") else None
        return result
    except SyntaxError:
        pass
    result = {}
    for key, raw in _KV_FALLBACK_RE.findall(body):
        raw = raw.strip()
        try:
            result[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            result[key] = raw
    return result


# --------------------------------------------------------------------------------------------
# Warnings and refusals
# --------------------------------------------------------------------------------------------

#: (key, regex on the message, what it means). Texts from SGLang 0.5.4-0.5.23 server_args.py,
#: custom_all_reduce.py, eagle workers and http_server.py (SGLANG_FACTS.md sections 1-3).
WARNINGS = (
    ("max_running_requests_capped", re.compile(r"Max running requests is reset to (?P<value>\d+) for speculative decoding"),
     "speculative decoding capped max_running_requests (%d by default): set --max-running-requests explicitly or requests queue"
     % SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT),
    ("radix_cache_disabled", re.compile(r"Disabling radix cache since speculative decoding for (?P<arch>\S+) is not supported"),
     "SGLang <= 0.5.9 silently turned the radix cache off for this hybrid model with speculative decoding"),
    ("custom_all_reduce_disabled", re.compile(r"Custom allreduce is disabled (?P<reason>.*)"),
     "custom all-reduce is off; tensor-parallel all-reduce goes through NCCL"),
    ("spec_v2_on", re.compile(r"(?:Spec v2|Beta spec) is enabled for eagle"),
     "spec v2 (overlap scheduler for speculative decoding) is on"),
    ("spec_v2_off", re.compile(r"Overlap scheduler is disabled (?:when spec v2 is off|because of using eagle3 and standalone)"),
     "spec v2 is off: speculative decoding runs without the overlap scheduler"),
    ("spec_v2_sync", re.compile(r"Non-overlap \(synchronous\) spec v2 is used"),
     "0.5.14+: synchronous spec v2 path (--disable-overlap-schedule)"),
    ("spec_v2_env_removed", re.compile(r"SGLANG_ENABLE_SPEC_V2 has been removed"),
     "0.5.14+: SGLANG_ENABLE_SPEC_V2 is ignored (spec v2 is always on)"),
    ("draft_tokens_adjusted", re.compile(r"speculative_num_draft_tokens is adjusted to speculative_num_steps \+ 1"),
     "topk 1: SGLang forced num_draft_tokens = num_steps + 1"),
    ("attention_backend_defaulted", re.compile(r"Attention backend not specified\. Use (?P<backend>\S+) backend by default"),
     "the attention backend was chosen by SGLang, not by the launch arguments"),
    ("mixed_chunk_disabled", re.compile(r"Mixed chunked prefill is disabled because of using eagle speculative decoding"),
     "mixed chunked prefill is off under speculative decoding"),
    ("overlap_disabled_no_buffer", re.compile(r"Disabling overlap schedule since mamba no_buffer is not compatible"),
     "mamba no_buffer: the overlap scheduler is off"),
    ("draft_path_not_needed", re.compile(r"MTP does not require setting speculative_draft_model_path"),
     "the draft path was set although the model carries its own MTP head"),
    ("health_check_failed", re.compile(r"Health check failed\."),
     "/health timed out waiting for the detokenizer"),
    ("watchdog_timeout", re.compile(r"Scheduler watchdog timeout"),
     "the scheduler hung (watchdog)"),
)

#: Startup refusals: (key, regex, cause, fix).
REFUSALS = (
    ("radix_cache_conflict",
     re.compile(r"Speculative decoding for (?P<arch>\S+) is not compatible with radix cache when using --mamba-scheduler-strategy (?P<strategy>\w+)"),
     "SGLang 0.5.10 refuses speculative decoding with the radix cache under mamba no_buffer for hybrid models",
     "use --mamba-scheduler-strategy extra_buffer with SGLANG_ENABLE_SPEC_V2=1, or --disable-radix-cache"),
    ("extra_buffer_without_radix_cache",
     re.compile(r"mamba extra_buffer is not compatible with --disable-radix-cache"),
     "mamba extra_buffer together with --disable-radix-cache is refused (PR #19169)",
     "drop --disable-radix-cache, or use the no_buffer strategy"),
    ("blackwell_hybrid_backend",
     re.compile(r"(?:backends? are the only supported backends on Blackwell GPUs for hybrid GDN models"
                r"|backends are supported on Blackwell GPUs for hybrid GDN models)"),
     "the attention backend is not allowed for hybrid GDN models on Blackwell",
     "pass --attention-backend triton (or trtllm_mha on SM100)"),
    ("trtllm_mha_sm100_only",
     re.compile(r"TRTLLM MHA backend is only supported on Blackwell GPUs \(SM100\)"),
     "trtllm_mha needs SM100", "use --attention-backend triton on this GPU"),
    ("topk_page_size",
     re.compile(r"speculative_eagle_topk > 1 with page_size > 1 is unstable"),
     "topk > 1 with page_size > 1 is refused for this attention backend", "use topk 1 or page_size 1"),
    ("spec_v2_topk",
     re.compile(r"Spec v2 currently only supports topk = 1"),
     "spec v2 needs topk 1", "set --speculative-eagle-topk 1 or turn spec v2 off"),
    ("mamba_track_interval",
     re.compile(r"mamba_track_interval \S+ must be"),
     "--mamba-track-interval does not fit num_draft_tokens / page_size", "raise --mamba-track-interval (default 256)"),
    ("extra_buffer_unsupported",
     re.compile(r"Mamba extra_buffer is only supported on CUDA devices with FLA backend"),
     "extra_buffer needs CUDA + the FLA backend", "use --disable-radix-cache on this platform"),
    ("cuda_out_of_memory",
     re.compile(r"CUDA out of memory|OutOfMemoryError"),
     "the GPU ran out of memory at startup", "lower --mem-fraction-static, --cuda-graph-max-bs or --max-running-requests"),
    ("peer_access_unsupported",
     re.compile(r"peer access is not supported between these two devices"),
     "custom all-reduce needs GPU peer-to-peer access", "pass --disable-custom-all-reduce (and NCCL_P2P_DISABLE=1)"),
)

_EXCEPTION_RE = re.compile(r"^(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)): (?P<text>.+)$")


def match_warning(message):
    """Return ``{"key", "meaning", "text", **named groups}`` for a known warning message, else None."""
    for key, rx, meaning in WARNINGS:
        m = rx.search(message)
        if m:
            found = {"key": key, "meaning": meaning, "text": message.strip()}
            found.update(dict((k, v) for k, v in m.groupdict().items() if v is not None))
            return found
    return None


def match_refusal(message):
    """Return ``{"key", "cause", "fix", "text", **named groups}`` for a known startup refusal, else None.

    An uncaught exception line (``SomethingError: text``) that is not a known refusal is returned with
    key ``exception`` and the exception type, so an unknown crash is still reported with its text.
    """
    for key, rx, cause, fix in REFUSALS:
        m = rx.search(message)
        if m:
            found = {"key": key, "cause": cause, "fix": fix, "text": message.strip()}
            found.update(dict((k, v) for k, v in m.groupdict().items() if v is not None))
            return found
    m = _EXCEPTION_RE.match(message.strip())
    if m:
        return {"key": "exception", "cause": "uncaught %s" % m.group("type"), "fix": "read the log lines before it",
                "text": message.strip(), "exception_type": m.group("type")}
    return None


# --------------------------------------------------------------------------------------------
# Derived values
# --------------------------------------------------------------------------------------------

#: Accept lengths within this distance of 1.00 mean that no draft token was accepted.
NEVER_ACCEPTED_TOLERANCE = 0.02

#: Known causes of "draft loaded but never accepted" (SGLANG_FACTS.md section 7.1-7.5).
NEVER_ACCEPTED_CAUSES = (
    "the checkpoint lacks the mtp.* tensors (common in NVFP4/GPTQ/AWQ re-uploads): check that "
    "model.safetensors.index.json lists mtp. keys",
    "the mtp.* weights were quantized or skipped wrongly (compressed-tensors / AutoRound, sglang#35797; Quark MXFP4, #23113; "
    "ModelSlim W8A8, PR #37736): try --speculative-draft-model-quantization unquant or a checkpoint with bf16 mtp.* weights",
    "the draft belongs to another model or revision than the target (wrong --speculative-draft-model-path)",
    "--speculative-draft-load-format dummy (random draft weights, for profiling only)",
    "acceptance decayed over uptime (sglang#37326): restart the server",
)


def is_never_accepted(accept_length):
    """True when ``accept_length`` is 1.00 +/- 0.02: the draft proposes tokens but none is accepted."""
    return accept_length is not None and round(abs(float(accept_length) - 1.0), 6) <= NEVER_ACCEPTED_TOLERANCE


def recompute_accept_rate(accept_length, num_draft_tokens):
    """Accept rate = ``(accept_length - 1) / (num_draft_tokens - 1)``: accepted drafts / proposed drafts.

    ``accept_length`` is tokens per verify step per request, bonus token included (1.00 = nothing
    accepted); ``num_draft_tokens`` is ``speculative_num_draft_tokens`` (the verify width). This is the
    0.5.14+ log definition and the 0.5.9 ``meta_info.spec_accept_rate`` one, applied to every version
    because the <=0.5.10 log value (``accept_len / num_draft_tokens``) never reaches 0. Rounded to 4
    decimals, clamped to [0, 1]. Returns None when either input is missing or num_draft_tokens < 2.
    """
    if accept_length is None or num_draft_tokens is None:
        return None
    try:
        width = int(num_draft_tokens)
        length = float(accept_length)
    except (TypeError, ValueError):
        return None
    if width < 2:
        return None
    rate = (length - 1.0) / (width - 1)
    return round(min(1.0, max(0.0, rate)), 4)


def _median(values):
    return round(statistics.median(values), 4) if values else None


#: SGLang 0.5.14+ ``arg_groups/speculative_hook.py`` ``_maybe_disable_adaptive`` (a warning while the server args are
#: resolved, so before that run's ``server_args=`` line) and ``speculative/adaptive_spec_params.py``
#: ``AdaptiveStepSlot._apply_target_steps`` (an info line on rank 0 at every step switch).
ADAPTIVE_DISABLED_RE = re.compile(r"speculative_adaptive disabled: (?P<reason>.*?)\. Falling back to static speculative params\.")
ADAPTIVE_SWITCH_RE = re.compile(r"Adaptive spec params updated: steps (?P<old>\d+) -> (?P<new>\d+) \(ema_accept_len=(?P<ema>-?[\d.]+)\)")


def _startup_preamble(lines, start):
    """The lines just before the run starting at ``start`` that belong to its startup (argument resolution logs before the
    ``server_args=`` line): back to the previous run's last batch, ready or ``server_args=`` line."""
    i = start
    while i > 0:
        text = lines[i - 1]
        if "server_args=ServerArgs(" in text or "ready to roll" in text or "Decode batch" in text or "Prefill batch" in text:
            break
        i -= 1
    return lines[i:start]


def parse_adaptive(lines):
    """``{"adaptive_disabled": {text, reason, time} or None, "adaptive_switches": [{time, from, to, ema_accept_len}]}``
    from SGLang log lines (see :data:`ADAPTIVE_DISABLED_RE`)."""
    disabled = None
    switches = []
    for line in lines:
        if "speculative_adaptive disabled" not in line and "Adaptive spec params updated" not in line:
            continue
        prefix = split_prefix(line)
        message = prefix["message"]
        m = ADAPTIVE_DISABLED_RE.search(message)
        if m:
            disabled = {"text": message.strip(), "reason": m.group("reason"), "time": prefix["time"]}
            continue
        m = ADAPTIVE_SWITCH_RE.search(message)
        if m:
            switches.append({"time": prefix["time"], "from": int(m.group("old")), "to": int(m.group("new")),
                             "ema_accept_len": float(m.group("ema"))})
    return {"adaptive_disabled": disabled, "adaptive_switches": switches}


def find_runs(lines):
    """Index of the first line of each server run: a ``server_args=`` line starts a new run."""
    starts = [i for i, line in enumerate(lines) if "server_args=ServerArgs(" in line]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return starts


def parse_log(text, last_run_only=True):
    """Parse a whole SGLang log text (any version, any prefix form) into the evidence it holds.

    ``last_run_only``: when the text holds several server starts (``server_args=`` lines), only the
    last one is read, so a previous configuration cannot vouch for the running one.

    Returns a dict:

    * ``lines`` (int, lines read), ``runs`` (int, server starts seen);
    * ``server_args`` (dict or None, see :func:`parse_server_args`);
    * ``load_weights`` (list of :func:`parse_load_weight_end` dicts of kind ``load``, in order);
    * ``weight_commits`` (the ``commit`` lines of 0.5.23's overlapped startup, in order; not model loads);
    * ``target_class`` / ``draft_class`` (str or None), ``draft_kind`` (``mtp``/``nextn``/``eagle``/``eagle3``),
      ``draft_mem_gb`` (dict rank -> GB of the draft's ``mem usage``), ``target_mem_gb`` (same for the target),
      ``draft_loaded_ranks`` / ``target_loaded_ranks`` (sorted rank labels), ``draft_missing_ranks`` (ranks
      with a target load and no draft load after it), ``draft_before_target_ranks`` (ranks where a draft class
      loaded before any target: the order SGLang never uses, so the log window or the run is not what it seems);
    * ``decode`` / ``prefill`` (int, lines seen), ``decode_lines`` (list of :func:`parse_batch_line` dicts,
      each with ``idle_interval`` added);
    * ``accept_length`` (median of ``accept len`` over the Decode lines, None when none printed one),
      ``accept_length_min`` / ``accept_length_max``, ``accept_rate_logged`` (median as printed, version-dependent);
    * ``gen_throughput`` (tok/s, median of ``gen throughput`` over the Decode lines that are not idle
      intervals, None when every line is one), ``gen_throughput_excluded`` (the values left out);
    * ``speculation`` (``on`` when Decode lines print accept len, a draft class loaded or server_args has an
      algorithm; ``off`` when Decode lines print no accept len and no draft loaded; else ``unknown``);
    * ``ready`` (True once ``The server is fired up and ready to roll!`` was logged);
    * ``adaptive_disabled`` (None, or ``{text, reason, time}`` of the last run's ``speculative_adaptive disabled:`` line,
      looked for also in the startup lines before its ``server_args=`` line) and ``adaptive_switches`` (the step switches
      ``Adaptive spec params updated: steps A -> B``), see :func:`parse_adaptive`;
    * ``warnings`` / ``refusals`` (lists of :func:`match_warning` / :func:`match_refusal` dicts, deduplicated
      by key and text, each with ``time`` and ``rank``).

    Idle intervals: ``gen throughput`` divides the tokens generated since the previous Decode line by the
    wall time since it, idle time included (SGLang 0.5.9 ``scheduler_metrics_mixin.log_decode_stats``:
    ``num_generated_tokens / (now - last_decode_stats_tic)``, the tic reset only by a Decode line), so a line
    whose interval covers time in which nothing was decoding understates the speed (e.g. 0.95 or 0.14 tok/s
    next to 135.04). See :func:`mark_idle_intervals` for the rule; those lines get ``idle_interval: true`` and
    ``idle_reason`` and are left out of the median.
    """
    all_lines = text.splitlines()
    runs = find_runs(all_lines)
    lines = all_lines[runs[-1]:] if last_run_only else all_lines
    result = {
        "lines": len(lines),
        "runs": sum(1 for line in all_lines if "server_args=ServerArgs(" in line),
        "server_args": None,
        "load_weights": [],
        "weight_commits": [],
        "decode": 0,
        "prefill": 0,
        "decode_lines": [],
        "warnings": [],
        "refusals": [],
        "ready": False,
    }
    seen_notes = set()
    batches = []
    for line in lines:
        prefix = split_prefix(line)
        message = prefix["message"]
        batch = _batch_from_prefix(prefix) if "batch" in message[:20] else None
        if batch is not None:
            batches.append(batch)
            if batch["kind"] == "prefill":
                result["prefill"] += 1
            else:
                result["decode"] += 1
                result["decode_lines"].append(batch)
            continue
        load = _load_from_prefix(prefix) if message.startswith("Load weight end.") else None
        if load is not None:
            result["weight_commits" if load["kind"] == "commit" else "load_weights"].append(load)
            continue
        args = _args_from_prefix(prefix) if message.startswith("server_args=") else None
        if args is not None:
            result["server_args"] = args
            continue
        if "The server is fired up and ready to roll!" in message:
            result["ready"] = True
            continue
        for kind, found in (("warnings", match_warning(message)), ("refusals", match_refusal(message))):
            if found is None:
                continue
            note = (kind, found["key"], found["text"])
            if note in seen_notes:
                continue
            seen_notes.add(note)
            found["time"] = prefix["time"]
            found["rank"] = prefix["rank"]
            result[kind].append(found)
            break
    mark_idle_intervals(batches)
    preamble = _startup_preamble(all_lines, runs[-1]) if last_run_only and runs[-1] > 0 else []
    result.update(parse_adaptive(preamble + lines))
    result.update(summarize_load_weights(result["load_weights"]))
    result.update(summarize_decode(result["decode_lines"]))
    args = result["server_args"] or {}
    spec_from_args = args.get("speculative_algorithm") if result["server_args"] is not None else None
    if result["accept_length"] is not None or result["draft_class"] or spec_from_args:
        result["speculation"] = "on"
    elif result["decode_lines"] and not result["draft_class"]:
        result["speculation"] = "off"
    else:
        result["speculation"] = "unknown"
    return result


def summarize_load_weights(loads):
    """Target/draft classes and per-rank memory from a list of :func:`parse_load_weight_end` dicts.

    On each rank the first ``Load weight end.`` is the target model; a later one is the draft when its
    class is a draft class (``...MTP``/``...NextN``/``...Eagle3``) or, for STANDALONE drafts (a plain
    model class), when it is the second load on that rank. Keys: see :func:`parse_log`.
    """
    target_mem, draft_mem = {}, {}
    draft_first = []
    target_class = draft_class = None
    for load in loads:
        rank = load["rank"]
        if rank not in target_mem and not load["is_draft"]:
            target_mem[rank] = load["mem_usage_gb"]
            target_class = target_class or load["class_name"]
        else:
            if rank not in target_mem and rank not in draft_first:
                draft_first.append(rank)
            draft_mem[rank] = load["mem_usage_gb"]
            draft_class = draft_class or load["class_name"]
    return {
        "target_class": target_class,
        "draft_class": draft_class,
        "draft_kind": draft_kind(draft_class) if draft_class else None,
        "target_mem_gb": target_mem,
        "draft_mem_gb": draft_mem,
        "target_loaded_ranks": sorted(target_mem),
        "draft_loaded_ranks": sorted(draft_mem),
        "draft_missing_ranks": sorted(r for r in target_mem if r not in draft_mem) if draft_mem else [],
        "draft_before_target_ranks": sorted(draft_first),
    }


#: A Decode line whose per-request gen throughput is below this fraction of the median over its rank's lines is an
#: idle interval (see :func:`mark_idle_intervals`).
IDLE_SPEED_FRACTION = 0.1
#: The speed rule needs at least this many Decode lines not already marked idle (a median of fewer means little).
IDLE_SPEED_MIN_LINES = 3


def mark_idle_intervals(batches):
    """Set ``idle_interval`` (bool) and ``idle_reason`` (str or None) on the Decode lines of ``batches``.

    ``batches``: parsed Prefill and Decode lines of one server run (:func:`parse_batch_line` dicts), in log order.
    A Decode line's ``gen throughput`` (SGLang 0.5.9: tokens generated since the previous Decode line of that
    scheduler / wall time since it) counts idle time, so a line is an idle interval, and is left out of the
    median gen throughput, when its interval covers time in which its scheduler had nothing to decode:

    * ``first``: the first Decode line of a rank in the log window (its interval starts at server start or
      before the window);
    * ``idle_prefill``: a ``Prefill batch`` with ``#running-req: 0`` (the scheduler had no running request when
      the new one arrived) was logged by the same rank since its previous Decode line;
    * ``slow``: its gen throughput per running request (``gen throughput / #running-req``) is below
      ``IDLE_SPEED_FRACTION`` (1/10) of the median of that ratio over the rank's lines not marked by the two
      rules above (itself included), when there are at least ``IDLE_SPEED_MIN_LINES`` (3) of them. A decode step at the same batch
      size does not run ten times slower than usual; such an interval holds idle time whose Prefill line is not
      in the window, or a long prefill that stalled decoding, and is not the decode speed either way.

    Ranks are told apart by their printed tags (``TP0``, ``DP1 TP4``, ...), so each DP scheduler has its own
    intervals. Returns the Decode lines (the same dicts).
    """
    decode, pending = [], {}
    for batch in batches:
        rank = batch.get("rank") or ""
        if batch["kind"] == "prefill":
            if batch.get("running_req") == 0 and rank in pending:   # before a rank's first Decode line: "first" wins
                pending[rank] = "idle_prefill"
            continue
        reason = pending.get(rank, "first")
        batch["idle_reason"] = reason
        batch["idle_interval"] = reason is not None
        pending[rank] = None
        decode.append(batch)
    for rank in set(d.get("rank") or "" for d in decode):
        mine = [d for d in decode if (d.get("rank") or "") == rank and _per_request_speed(d) is not None]
        busy = [_per_request_speed(d) for d in mine if not d["idle_interval"]]
        if len(busy) < IDLE_SPEED_MIN_LINES:
            continue
        floor = statistics.median(busy) * IDLE_SPEED_FRACTION
        for d in mine:
            if not d["idle_interval"] and _per_request_speed(d) < floor:
                d["idle_interval"] = True
                d["idle_reason"] = "slow"
    return decode


def _per_request_speed(decode_line):
    """``gen throughput / #running-req`` (tok/s per running request) of a Decode line, None when either is missing."""
    gen, running = decode_line.get("gen_throughput"), decode_line.get("running_req")
    if not isinstance(gen, (int, float)) or isinstance(gen, bool) or not isinstance(running, int) or running < 1:
        return None
    return float(gen) / running


def summarize_decode(decode_lines):
    """Accept length and gen throughput from parsed Decode lines (each with ``idle_interval`` set).

    Keys: ``accept_length`` (median accept len), ``accept_length_min``, ``accept_length_max``,
    ``accept_rate_logged`` (median of the printed accept rate, version-dependent definition),
    ``gen_throughput`` (tok/s, median over lines that are not idle intervals), ``gen_throughput_excluded``
    (list of tok/s values left out as idle intervals), ``gen_throughput_lines`` (how many were used),
    ``queued_at_48`` (Decode lines with ``#running-req: 48`` and a non-empty ``#queue-req``: the signature of
    SGLang's 48-request cap under speculative decoding).
    """
    accepts = [d["accept_len"] for d in decode_lines if isinstance(d.get("accept_len"), (int, float))]
    rates = [d["accept_rate"] for d in decode_lines if isinstance(d.get("accept_rate"), (int, float))]
    used = [d["gen_throughput"] for d in decode_lines
            if isinstance(d.get("gen_throughput"), (int, float)) and not d.get("idle_interval")]
    excluded = [d["gen_throughput"] for d in decode_lines
                if isinstance(d.get("gen_throughput"), (int, float)) and d.get("idle_interval")]
    capped = [d for d in decode_lines if d.get("running_req") == SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT
              and isinstance(d.get("queue_req"), int) and d["queue_req"] > 0]
    return {
        "queued_at_48": len(capped),
        "accept_length": _median(accepts),
        "accept_length_min": min(accepts) if accepts else None,
        "accept_length_max": max(accepts) if accepts else None,
        "accept_rate_logged": _median(rates),
        "gen_throughput": _median(used),
        "gen_throughput_excluded": excluded,
        "gen_throughput_lines": len(used),
    }
