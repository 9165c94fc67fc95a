# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""THE renderer of SGLang launch arguments and environment for llmops.sglang.

Pure Python (standard library only, Python 3.8+ syntax), used by:

* the filter plugins in ``plugins/filter/sglang_server.py`` (``llmops.sglang.sglang_launch``,
  ``sglang_expected_server_args``, ``sglang_systemd_exec``, ``sglang_router_launch``);
* the role ``llmops.sglang.sglang_server`` (unit file, EnvironmentFile, ``tasks/validate.yml`` which
  preflight runs before any change);
* ``speculative_check`` (through ``expected_server_args``: what ``/server_info`` must report).

Input: a *server description*, a dict whose keys are the role variables without the ``sglang_server_``
prefix (``model_path``, ``tp_size``, ``speculative_algorithm``, ...; the prefixed spelling is accepted too),
an SGLang version string (``"0.5.9"``, ``"v0.5.10.post1"``), and a *context* dict describing the target:

``{"llmops_gpu": <ansible_facts.llmops_gpu from gpu_facts> | None,
   "compute_capabilities": ["12.0", ...] (alternative to llmops_gpu),
   "gpu_count": 4 (alternative to llmops_gpu),
   "in_container": true,
   "nccl_p2p_decision": <the fact set by the nccl role> | None}``

Output of :func:`render_launch`: ``{"version": "0.5.9", "profile": "0.5.9", "argv": [...], "env": {...},
"secret_env": {...}, "warnings": [...], "decisions": [{"name", "value", "reason"}], "expected": {...}}``.
``argv`` starts with ``python3 -m sglang.launch_server``; ``env`` are the non-secret environment variables
for the container; ``secret_env`` holds ``HF_TOKEN`` / the API key (never logged, written to a 0600 file).

Errors: every refusal raises :class:`SGLangArgsError`, whose message names the variable
(``sglang_server_...``), the value, the reason and the fix.

Facts and exact strings come from ``SGLANG_FACTS.md`` (SGLang wheels 0.4.10.post2, 0.5.4, 0.5.9, 0.5.10,
0.5.14, 0.5.23: ``python/sglang/srt/server_args.py`` ``_handle_speculative_decoding``,
``auto_choose_speculative_params``, ``_handle_mamba_radix_cache``; 0.5.23 ``arg_groups/fields/*.py``,
``speculative_hook.py``, ``mamba_hook.py``; ``layers/attention/attention_registry.py``).
"""

from __future__ import annotations

import re

from ansible_collections.llmops.sglang.plugins.module_utils._server.limits import SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import adaptive as _adaptive
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import description as _description
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.cli_contract import check_argv, choices_of
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.quoting import (
    DestinationError,
    check_argv as dest_check_argv,
    check_text,
    gpu_indices,
    image_reference,
)

PREFIX = _description.PREFIX

#: Versions whose behaviour this renderer models (the wheels SGLANG_FACTS.md was built from).
KNOWN_VERSIONS = ("0.4.10", "0.5.4", "0.5.9", "0.5.10", "0.5.14", "0.5.23")

#: Speculative algorithms accepted per version (0.4.10: EAGLE family only; 0.5.4-0.5.10: argparse
#: ``choices``; 0.5.23: free string with these builtins).
SPEC_ALGORITHMS = {
    "0.4.10": ("EAGLE", "EAGLE3", "NEXTN"),
    "0.5.4": ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"),
    "0.5.9": ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"),
    "0.5.10": ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"),
    "0.5.14": ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"),
    "0.5.23": ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO"),
}

#: Algorithms of the EAGLE family (steps/topk/draft-token rules, 48-request cap, mamba rules).
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")

#: Architectures of hybrid GDN/mamba models (Qwen3-Next, Qwen3.5); SGLANG_FACTS.md section 8.
HYBRID_ARCHITECTURES = (
    "Qwen3NextForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
)
_HYBRID_NAME_RE = re.compile(r"qwen3[._-]?5|qwen3[._-]?next|qwen3-coder-next", re.IGNORECASE)
#: Qwen3.5 model classes (``models/qwen3_5.py``) exist from SGLang 0.5.9; 0.5.4 has only Qwen3-Next.
QWEN35_ARCHITECTURES = tuple(a for a in HYBRID_ARCHITECTURES if a.startswith("Qwen3_5"))
_QWEN35_NAME_RE = re.compile(r"qwen3[._-]?5", re.IGNORECASE)

#: ``auto_choose_speculative_params`` (server_args.py up to 0.5.10, arg_groups/speculative_hook.py from 0.5.14),
#: keyed on the exact ``architectures[0]`` of config.json: STANDALONE -> (3, 1, 4) from 0.5.4; the listed
#: architectures -> their value; every other architecture -> the version's default.
_AUTO_WIDE = (5, 4, 8)
_AUTO_NARROW = (3, 1, 4)
_AUTO_WIDE_ARCHS = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
_AUTO_NARROW_ARCHS = {
    "0.4.10": ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"),
    "0.5.4": ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM", "GptOssForCausalLM",
              "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM"),
}
#: The "all other models" value: (5, 4, 8) in 0.4.10 and 0.5.4, (3, 1, 4) from 0.5.9.
_AUTO_DEFAULT = {"0.4.10": _AUTO_WIDE, "0.5.4": _AUTO_WIDE}

MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")

#: Options of the description, with their type and the value used when unset (``None``: not rendered / SGLang's
#: default), and the flags the renderer owns (extra_args may not repeat them: one place per setting). Both derived
#: from the role's one variable table, ``_sglang/description.py``.
OPTIONS = _description.OPTIONS
_MANAGED_FLAGS = _description.MANAGED_FLAGS

#: Environment variables that must not travel in sglang_server_extra_env (secrets have their own 0600 file).
_SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")

#: Name of the variable the systemd unit passes to ``--api-key`` (systemd expands ``${...}`` from the
#: 0600 EnvironmentFile, so the key never appears in the unit file).
API_KEY_ENV = "SGLANG_SERVER_API_KEY"


class SGLangArgsError(ValueError):
    """A server description that SGLang would reject or that is known to fail.

    Attributes: ``variable`` (``sglang_server_...``), ``value``, ``reason``, ``fix``. ``str(err)`` is
    ``"<variable>=<value>: <reason>. Fix: <fix>"``.
    """

    def __init__(self, variable, value, reason, fix):
        self.variable = variable
        self.value = value
        self.reason = reason
        self.fix = fix
        super(SGLangArgsError, self).__init__("%s=%r: %s. Fix: %s" % (variable, value, reason, fix))


def var(key):
    """Return the inventory variable name for a description key (``tp_size`` -> ``sglang_server_tp_size``)."""
    return PREFIX + key


def parse_version(version):
    """Parse an SGLang version string into a tuple of ints.

    Accepts ``"0.5.9"``, ``"v0.5.9"``, ``"0.5.10.post1"``, ``"0.5.12rc0"`` (suffixes after the third
    number are ignored). Raises :class:`SGLangArgsError` naming ``sglang_server_version`` otherwise.
    """
    text = "" if version is None else str(version).strip()
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        raise SGLangArgsError(var("version"), version, "not an SGLang version (expected MAJOR.MINOR.PATCH such as 0.5.9)",
                              "set sglang_server_version to the version inside sglang_server_image, e.g. \"0.5.9\"")
    return tuple(int(x or 0) for x in match.groups())


def version_profile(version):
    """Map any version to the newest KNOWN_VERSIONS entry not newer than it.

    Returns ``(profile, warnings)``. Versions older than 0.4.10 raise :class:`SGLangArgsError`; versions
    newer than 0.5.23 use the 0.5.23 profile with a warning; versions between two known ones use the
    older profile with a warning (flags renamed in between are not modelled).
    """
    wanted = parse_version(version)
    known = [(parse_version(k), k) for k in KNOWN_VERSIONS]
    if wanted < known[0][0]:
        raise SGLangArgsError(var("version"), version, "SGLang older than 0.4.10 is not supported by this collection",
                              "use an image with SGLang 0.5.9 or newer (e.g. lmsysorg/sglang:v0.5.9-cu130-runtime)")
    chosen = known[0]
    for parsed, name in known:
        if parsed <= wanted:
            chosen = (parsed, name)
    warnings = []
    if chosen[0] != wanted[:3]:
        warnings.append("sglang_server_version %s is not one of the modelled versions %s; rendering with the %s rules"
                        % (version, ", ".join(KNOWN_VERSIONS), chosen[1]))
    return chosen[1], warnings


def _at_least(profile, other):
    return parse_version(profile) >= parse_version(other)


def normalize_description(description):
    """Return a dict with every OPTIONS key, type-checked, from a description (prefixed keys accepted).

    Unknown keys raise :class:`SGLangArgsError` (a typo such as ``sglang_server_tp`` would otherwise
    be ignored silently). Empty strings count as unset.
    """
    if not isinstance(description, dict):
        raise SGLangArgsError("sglang_server description", description, "must be a mapping of sglang_server_* settings",
                              "pass a dict such as {'model_path': '/models/x', 'tp_size': 4}")
    out = {}
    for raw_key, value in description.items():
        key = raw_key[len(PREFIX):] if str(raw_key).startswith(PREFIX) else str(raw_key)
        if key in ("version", "version_force", "image", "image_force", "engine", "name"):
            continue
        if key not in OPTIONS:
            raise SGLangArgsError(var(key), value, "unknown server setting",
                                  "use one of: " + ", ".join(var(k) for k in sorted(OPTIONS)))
        out[key] = value
    result = {}
    for key, (kind, default) in OPTIONS.items():
        value = out.get(key)
        if value is None or (isinstance(value, str) and value.strip() == ""):
            result[key] = default
            continue
        # the adaptive table keeps its numbers (checked by adaptive.validate_table in _render_adaptive)
        result[key] = value if key in _STRUCTURED else _coerce(key, kind, value)
    return result


#: Options whose value is a structure checked by its own validator, not coerced to strings.
_STRUCTURED = ("speculative_adaptive_config",)


#: Example values for type errors (a port is not "an integer such as 4").
_EXAMPLES = {"port": 30000, "tp_size": 4, "pp_size": 2, "nnodes": 2, "node_rank": 0, "speculative_num_steps": 3, "speculative_eagle_topk": 1,
             "speculative_num_draft_tokens": 4, "mamba_track_interval": 256, "max_running_requests": 64, "cuda_graph_max_bs": 64,
             "cuda_graph_max_bs_prefill": 8, "mem_fraction_static": 0.85, "context_length": 32768, "chunked_prefill_size": 8192,
             "page_size": 1, "decode_log_interval": 40, "watchdog_timeout": 300}


def _coerce(key, kind, value):
    example = _EXAMPLES.get(key)
    if kind == "int":
        fix = "set %s to a whole number%s" % (var(key), " such as %s" % example if example else "")
        if isinstance(value, bool):
            raise SGLangArgsError(var(key), value, "must be a whole number, got a boolean", fix)
        try:
            return int(str(value).strip())
        except ValueError:
            raise SGLangArgsError(var(key), value, "must be a whole number", fix)
    if kind == "float":
        try:
            return float(value)
        except (TypeError, ValueError):
            raise SGLangArgsError(var(key), value, "must be a number", "set %s to a number%s" % (var(key), " such as %s" % example if example else ""))
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "yes", "on", "1"):
            return True
        if text in ("false", "no", "off", "0"):
            return False
        raise SGLangArgsError(var(key), value, "must be a boolean", "set true or false")
    if kind == "list":
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise SGLangArgsError(var(key), value, "must be a list of separate argv items",
                                  "write each flag and value as its own list item, e.g. ['--enable-cache-report']")
        return [str(x) for x in value]
    if kind == "dict":
        if not isinstance(value, dict):
            raise SGLangArgsError(var(key), value, "must be a mapping NAME: value", "write e.g. {SGLANG_LOG_MS: '1'}")
        return dict((str(k), "" if v is None else (("1" if v else "0") if isinstance(v, bool) else str(v))) for k, v in value.items())
    return str(value)


def _capabilities(context):
    """Compute capabilities (``[(major, minor), ...]``) known from the context, or ``[]``."""
    caps = []
    gpu = context.get("llmops_gpu") or {}
    raw = list(context.get("compute_capabilities") or [])
    for item in gpu.get("gpus") or []:
        if isinstance(item, dict) and item.get("compute_capability"):
            raw.append(item["compute_capability"])
    for text in raw:
        match = re.match(r"^\s*(\d+)(?:\.(\d+))?", str(text))
        if match:
            caps.append((int(match.group(1)), int(match.group(2) or 0)))
    return caps


def _gpu_count(context):
    if context.get("gpu_count") is not None:
        return int(context["gpu_count"])
    gpu = context.get("llmops_gpu") or {}
    if gpu.get("gpu_count") is not None:
        return int(gpu["gpu_count"])
    if gpu.get("gpus"):
        return len(gpu["gpus"])
    return None


def is_hybrid_model(desc):
    """True for hybrid GDN/mamba models (Qwen3-Next, Qwen3.5).

    ``hybrid_model`` wins when set; else ``model_architecture`` is checked against HYBRID_ARCHITECTURES; else
    the model path / served name is matched against ``qwen3.5``/``qwen3_5``/``qwen3-next``.
    """
    if desc.get("hybrid_model") is not None:
        return bool(desc["hybrid_model"])
    if desc.get("model_architecture"):
        return desc["model_architecture"] in HYBRID_ARCHITECTURES
    text = "%s %s" % (desc.get("model_path") or "", desc.get("served_model_name") or "")
    return bool(_HYBRID_NAME_RE.search(text))


class _Render(object):
    def __init__(self, desc, profile, context):
        self.d = desc
        self.p = profile
        self.ctx = context
        self.argv = ["python3", "-m", "sglang.launch_server"]
        self.env = {}
        self.secret_env = {}
        self.warnings = []
        self.decisions = []
        self.expected = {}
        self.adaptive_config = None

    def flag(self, name, value=None):
        self.argv.append(name)
        if value is not None:
            self.argv.append(str(value))

    def decide(self, name, value, reason):
        self.decisions.append({"name": name, "value": value, "reason": reason})


def render_launch(description, version=None, context=None):
    """Render SGLang launch arguments and environment for one server (one node of it).

    :param description: dict of server settings (keys of OPTIONS, with or without ``sglang_server_``).
        Units: ``port`` TCP port; ``mem_fraction_static`` fraction 0-1; ``watchdog_timeout`` s;
        ``decode_log_interval`` decode iterations; ``cuda_graph_max_bs`` requests; ``context_length`` tokens.
    :param version: SGLang version string; defaults to ``description['version']``.
    :param context: dict, see the module docstring (GPU facts, ``in_container``, ``nccl_p2p_decision``).
    :returns: dict with ``version``, ``profile``, ``argv`` (list of str), ``env`` (dict str->str),
        ``secret_env`` (dict, may be empty), ``warnings`` (list of str), ``decisions`` (list of
        ``{name, value, reason}``), ``expected`` (see :func:`expected_server_args`), ``adaptive_config`` (None, or
        ``{path, content}``: the adaptive table as JSON text and where the container reads it; the role writes it as
        ``<config_dir>/<name>.adaptive.json`` 0644 and mounts it read-only at ``path``).
    :raises SGLangArgsError: for any refused setting or combination (message names the variable,
        the value, the reason and the fix).
    """
    context = dict(context or {})
    if version is None and isinstance(description, dict):
        version = description.get("version", description.get(var("version")))
    profile, version_warnings = version_profile(version)
    force = isinstance(description, dict) and _coerce("version_force", "bool",
                                                      description.get("version_force", description.get(var("version_force"), False)) or False)
    if version_warnings and not force:
        raise SGLangArgsError(var("version"), version,
                              "not one of the SGLang versions this collection models (%s): flags renamed or removed since %s would be "
                              "rendered wrongly and the server would refuse to start" % (", ".join(KNOWN_VERSIONS), profile),
                              "use one of those versions (and its image), or set sglang_server_version_force: true to render with the %s "
                              "rules at your own risk" % profile)
    desc = normalize_description(description)
    r = _Render(desc, profile, context)
    r.warnings.extend(version_warnings)
    _check_basics(r)
    check_choices(r.d, profile)
    _render_model(r)
    _render_parallel(r)
    spec = _render_speculative(r)
    _render_mamba(r, spec)
    _render_attention(r, spec)
    _render_memory_and_graphs(r, spec)
    _render_all_reduce(r)
    _render_observability(r)
    extra_start = len(r.argv)
    _render_extra(r, spec)
    _check_destinations(r)
    check_cli_contract(r.argv[3:], profile, extra_start - 3, r.warnings)
    r.expected = _expected(r, spec)
    return {
        "version": str(version),
        "profile": profile,
        "argv": r.argv,
        "env": r.env,
        "secret_env": r.secret_env,
        "warnings": r.warnings,
        "decisions": r.decisions,
        "expected": r.expected,
        "adaptive_config": r.adaptive_config,
    }


#: Settings whose value SGLang restricts with argparse ``choices`` (checked first, with the setting's own name).
_CHOICE_SETTINGS = (("attention_backend", "--attention-backend"), ("kv_cache_dtype", "--kv-cache-dtype"),
                    ("reasoning_parser", "--reasoning-parser"), ("tool_call_parser", "--tool-call-parser"),
                    ("log_level", "--log-level"))

#: Flags the renderer emits that are not in _MANAGED_FLAGS (spelled per version), and the setting behind each.
_RENDERED_FLAGS = dict(_MANAGED_FLAGS, **{
    "--cuda-graph-max-bs": "cuda_graph_max_bs", "--mamba-scheduler-strategy": "mamba_strategy",
    "--mamba-radix-cache-strategy": "mamba_strategy", "--enable-beta-spec": "spec_v2",
    "--cuda-graph-backend-decode": "disable_cuda_graph", "--cuda-graph-backend-prefill": "disable_cuda_graph",
})


def check_choices(desc, profile):
    """Refuse a setting whose value is not one of SGLang ``profile``'s argparse choices.

    Covers ``attention_backend``, ``kv_cache_dtype``, ``reasoning_parser``, ``tool_call_parser``, ``log_level``;
    the choices come from the generated table (``_sglang/generated_flags.py``, the wheel's ``server_args.py``). Settings
    whose choices SGLang computes at run time (parsers registered from 0.5.14) are not checked.
    :raises SGLangArgsError: naming the variable, the value, the version's choices and the closest spelling.
    """
    for key, flag in _CHOICE_SETTINGS:
        value = desc.get(key)
        if value is None:
            continue
        choices = choices_of(flag, profile)
        if choices is not None and str(value) not in choices:
            problems = check_argv([flag, str(value)], profile)
            near = problems[0].suggestion if problems else None
            raise SGLangArgsError(var(key), value, "SGLang %s's %s accepts only %s" % (profile, flag, ", ".join(choices)),
                                  ("did you mean %r? " % near if near else "") + "set one of those (or leave it unset for SGLang's default)")


def check_cli_contract(argv, profile, extra_start, warnings):
    """Refuse an argv that SGLang ``profile``'s parser would reject (``sglang_cli.check_argv``).

    :param argv: launch flags without ``python3 -m sglang.launch_server``. :param extra_start: index in ``argv``
        where ``sglang_server_extra_args`` begins (earlier items were rendered from settings).
    :param warnings: list the deprecation notes for extra_args are appended to.
    :raises SGLangArgsError: naming ``sglang_server_extra_args`` (with the closest valid spelling) for an item of
        extra_args, else the setting that rendered the flag (a renderer rule this version does not support).
    """
    for problem in check_argv(argv, profile):
        from_extra = problem.index >= extra_start
        if not problem.is_error:
            if from_extra:
                warnings.append("sglang_server_extra_args: %s" % problem.message)
                continue
            raise SGLangArgsError(var(_RENDERED_FLAGS.get(problem.flag, "version")), problem.flag,
                                  "the renderer emitted a flag SGLang %s deprecates (%s)" % (profile, problem.message),
                                  "report this: the rendering rule for SGLang %s is out of date" % profile)
        if from_extra:
            fix = ("write %s" % problem.suggestion) if problem.suggestion else "remove it, or use a flag of SGLang %s" % profile
            raise SGLangArgsError(var("extra_args"), problem.flag if problem.value is None else "%s %s" % (problem.flag, problem.value),
                                  problem.message, fix + " (python3 -m sglang.launch_server --help inside the image lists them)")
        key = _RENDERED_FLAGS.get(problem.flag, "version")
        raise SGLangArgsError(var(key), problem.value if problem.value is not None else problem.flag, problem.message,
                              "unset %s for SGLang %s, or use a version that has it" % (var(key), profile))


def _check_destinations(r):
    """Every rendered argv item and environment value must fit its destination (sglang_dest): ExecStart= words and
    --env-file lines cannot carry a newline; secrets are checked (redacted) when the secret file is rendered."""
    owners = dict((flag, var(key)) for flag, key in _MANAGED_FLAGS.items())
    previous = None
    for item in r.argv:
        try:
            check_text(owners.get(previous, var("extra_args")), item, "a systemd ExecStart= command line")
        except DestinationError as exc:
            raise SGLangArgsError(exc.variable, exc.value, exc.reason, exc.fix)
        previous = item
    for name, value in r.env.items():
        try:
            check_text("%s.%s" % (var("extra_env"), name), value, "the container --env-file")
        except DestinationError as exc:
            raise SGLangArgsError(exc.variable, exc.value, exc.reason, exc.fix)


def _check_basics(r):
    d = r.d
    if not d["model_path"]:
        raise SGLangArgsError(var("model_path"), d["model_path"], "the model path is required",
                              "set sglang_server_model_path to the model directory inside the container or a Hugging Face id")
    if not 1 <= int(d["port"]) <= 65535:
        raise SGLangArgsError(var("port"), d["port"], "not a TCP port", "use 1-65535 (SGLang's default is 30000)")
    for key in ("tp_size", "nnodes"):
        if d[key] < 1:
            raise SGLangArgsError(var(key), d[key], "must be at least 1", "set a positive integer")
    if d["mem_fraction_static"] is not None and not 0.0 < d["mem_fraction_static"] < 1.0:
        raise SGLangArgsError(var("mem_fraction_static"), d["mem_fraction_static"], "must be a fraction between 0 and 1",
                              "use e.g. 0.85, or leave it unset for SGLang's automatic value")
    for key in ("max_running_requests", "cuda_graph_max_bs", "cuda_graph_max_bs_prefill", "context_length", "decode_log_interval",
                "page_size", "mamba_track_interval", "watchdog_timeout", "chunked_prefill_size"):
        if d[key] is not None and d[key] < 1 and not (key == "chunked_prefill_size" and d[key] == -1):
            raise SGLangArgsError(var(key), d[key], "must be a positive integer", "set a positive integer or leave it unset")


def _render_model(r):
    d = r.d
    r.flag("--model-path", d["model_path"])
    if d["served_model_name"]:
        r.flag("--served-model-name", d["served_model_name"])
    if d["trust_remote_code"]:
        r.flag("--trust-remote-code")
    host = d["host"]
    if r.ctx.get("in_container", True) and host in (None, "127.0.0.1", "localhost"):
        if host is not None:
            r.warnings.append("sglang_server_host %s is unreachable from outside the container; rendering 0.0.0.0" % host)
        host = "0.0.0.0"
        r.decide("host", host, "inside a container SGLang's default 127.0.0.1 is not reachable through the host network namespace")
    elif host is None:
        host = "127.0.0.1"
    r.flag("--host", host)
    r.flag("--port", d["port"])
    r.expected.update({"host": host, "port": d["port"]})


def _render_parallel(r):
    d = r.d
    if d["tp_size"] > 1:
        r.flag("--tp-size", d["tp_size"])
    count = _gpu_count(r.ctx)
    if count is not None and count > 0 and d["tp_size"] > count * d["nnodes"]:
        raise SGLangArgsError(var("tp_size"), d["tp_size"],
                              "tensor parallel size exceeds the %d GPU(s) per node x %d node(s) gpu_facts found" % (count, d["nnodes"]),
                              "lower sglang_server_tp_size or add nodes (sglang_server_nnodes)")
    if d["pp_size"] is not None and d["pp_size"] > 1:
        r.flag("--pp-size", d["pp_size"])
    if d["nnodes"] > 1:
        if d["tp_size"] % d["nnodes"]:
            raise SGLangArgsError(var("tp_size"), d["tp_size"], "tp size must be a multiple of sglang_server_nnodes=%d" % d["nnodes"],
                                  "use tp = GPUs per node x nnodes")
        if not d["dist_init_addr"] or not re.match(r"^\[?[A-Za-z0-9_.:-]+\]?:\d+$", d["dist_init_addr"]):
            raise SGLangArgsError(var("dist_init_addr"), d["dist_init_addr"], "multi-node tensor parallel needs the rank 0 address as host:port",
                                  "set sglang_server_dist_init_addr (serve.yml derives it from the first host of the tp group)")
        if not 0 <= d["node_rank"] < d["nnodes"]:
            raise SGLangArgsError(var("node_rank"), d["node_rank"], "node rank must be in 0..nnodes-1 (%d nodes)" % d["nnodes"],
                                  "number the hosts of the tp group 0..%d, rank 0 first" % (d["nnodes"] - 1))
        r.flag("--dist-init-addr", d["dist_init_addr"])
        r.flag("--nnodes", d["nnodes"])
        r.flag("--node-rank", d["node_rank"])
    elif d["node_rank"] not in (0, None):
        raise SGLangArgsError(var("node_rank"), d["node_rank"], "a node rank other than 0 needs sglang_server_nnodes > 1",
                              "set sglang_server_nnodes, or node_rank 0 for a single node")
    r.expected.update({"tp_size": d["tp_size"], "nnodes": d["nnodes"], "node_rank": d["node_rank"]})


def _auto_spec_params(r, algorithm):
    """SGLang's auto (steps, topk, draft tokens) when none is given (``auto_choose_speculative_params``).

    Keyed on the exact architecture (``sglang_server_model_architecture``, config.json ``architectures[0]``):
    ``LlamaForCausalLM``/Grok -> (5, 4, 8); the DeepSeek list of 0.4.10/0.5.4 -> (3, 1, 4); any other
    architecture -> (5, 4, 8) in 0.4.10/0.5.4 and (3, 1, 4) from 0.5.9. Returns ``(params, known)`` where
    ``known`` is False when the architecture is unset (then the version's default is assumed).
    """
    arch = r.d.get("model_architecture")
    if algorithm == "STANDALONE" and _at_least(r.p, "0.5.4"):
        return _AUTO_NARROW, True
    if arch in _AUTO_WIDE_ARCHS:
        return _AUTO_WIDE, True
    narrow = _AUTO_NARROW_ARCHS.get(r.p)
    if narrow is not None:
        return (_AUTO_NARROW if arch in narrow else _AUTO_WIDE), bool(arch)
    if arch:
        # 0.5.9 and later: only Llama/Grok are (5, 4, 8); every listed and unlisted architecture is (3, 1, 4)
        return _AUTO_NARROW, True
    return _AUTO_DEFAULT.get(r.p, _AUTO_NARROW), False


def _render_speculative(r):
    """Return None (speculation off) or a dict with algorithm / effective_algorithm / steps / topk / draft / draft_path."""
    d = r.d
    algorithm = d["speculative_algorithm"]
    spec_keys = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_draft_model_path")
    if algorithm is None or str(algorithm).strip().lower() in ("", "none", "off", "null"):
        for key in spec_keys:
            if d[key] is not None:
                raise SGLangArgsError(var(key), d[key], "is set but speculative decoding is off (sglang_server_speculative_algorithm is null)",
                                      "set sglang_server_speculative_algorithm (NEXTN, EAGLE, EAGLE3, STANDALONE, NGRAM) or unset %s" % var(key))
        _check_adaptive_off(r, algorithm=None)
        r.expected.update({"speculative_algorithm": None})
        return None
    algorithm = str(algorithm).strip().upper()
    allowed = SPEC_ALGORITHMS[r.p]
    if algorithm not in allowed:
        raise SGLangArgsError(var("speculative_algorithm"), d["speculative_algorithm"],
                              "SGLang %s accepts only %s" % (r.p, ", ".join(allowed)),
                              "pick one of those, or null to turn speculative decoding off")
    if d["pp_size"] is not None and d["pp_size"] > 1:
        raise SGLangArgsError(var("pp_size"), d["pp_size"],
                              "pipeline parallelism is not compatible with speculative decoding (SGLang asserts at startup)",
                              "use tensor parallel only (sglang_server_pp_size: 1) or turn speculation off")
    r.flag("--speculative-algorithm", algorithm)
    effective = "EAGLE" if algorithm == "NEXTN" else algorithm
    if algorithm == "NEXTN":
        r.decide("speculative_algorithm", "EAGLE", "SGLang rewrites NEXTN to EAGLE; /server_info will report EAGLE")

    steps, topk, draft = d["speculative_num_steps"], d["speculative_eagle_topk"], d["speculative_num_draft_tokens"]
    given = [x is not None for x in (steps, topk, draft)]
    if not d["speculative_adaptive"]:
        _check_adaptive_off(r, algorithm)
    if d["speculative_adaptive"]:
        steps, topk, draft = _render_adaptive(r, algorithm, steps, topk, draft)
    elif algorithm == "NGRAM":
        for key, value in (("speculative_num_steps", steps), ("speculative_eagle_topk", topk)):
            if value is not None:
                raise SGLangArgsError(var(key), value, "NGRAM speculation drafts from an n-gram table, it has no drafting steps or top-k",
                                      "unset %s; use sglang_server_speculative_num_draft_tokens (and --speculative-ngram-* in extra_args)" % var(key))
        if draft is not None:
            r.flag("--speculative-num-draft-tokens", draft)
    elif any(given) and not all(given):
        names = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
        missing = [var(n) for n, g in zip(names, given) if not g]
        present = dict((var(n), v) for n, g, v in zip(names, given, (steps, topk, draft)) if g)
        raise SGLangArgsError(missing[0], None,
                              "only some of steps/topk/draft tokens are set (%s); SGLang's auto mode asserts all three are unset" % present,
                              "set all three (e.g. steps 1, topk 1, draft tokens 2 for one draft token) or none of them (%s)"
                              % ", ".join(missing))
    elif all(given):
        for key, value in (("speculative_num_steps", steps), ("speculative_eagle_topk", topk), ("speculative_num_draft_tokens", draft)):
            if value < 1:
                raise SGLangArgsError(var(key), value, "must be at least 1", "use positive integers")
        if topk == 1 and draft != steps + 1:
            raise SGLangArgsError(var("speculative_num_draft_tokens"), draft,
                                  "with speculative_eagle_topk 1 SGLang adjusts num_draft_tokens to num_steps + 1 = %d with a warning "
                                  "(chain MTP), so the value asked for would not be the value served" % (steps + 1),
                                  "set sglang_server_speculative_num_draft_tokens: %d" % (steps + 1))
        r.flag("--speculative-num-steps", steps)
        r.flag("--speculative-eagle-topk", topk)
        r.flag("--speculative-num-draft-tokens", draft)
    else:
        (steps, topk, draft), known = _auto_spec_params(r, algorithm)
        if known:
            r.decide("speculative_params", [steps, topk, draft],
                     "steps/topk/draft tokens unset: SGLang %s auto-chooses (%d, %d, %d) for %s" % (
                         r.p, steps, topk, draft, r.d.get("model_architecture") or algorithm))
        else:
            r.decide("speculative_params", [steps, topk, draft],
                     "steps/topk/draft tokens unset and sglang_server_model_architecture unknown: SGLang %s auto-chooses from "
                     "config.json's architectures[0]; assuming its default (%d, %d, %d) for unlisted architectures" % (r.p, steps, topk, draft))
            r.warnings.append("sglang_server_model_architecture is unset: the expected automatic speculative parameters (%d, %d, %d) are "
                              "SGLang %s's default for unlisted architectures; set the architecture (config.json architectures[0]) "
                              "so that speculative_check compares the right values" % (steps, topk, draft, r.p))

    draft_path = d["speculative_draft_model_path"]
    if algorithm in ("EAGLE3", "STANDALONE") and not draft_path:
        raise SGLangArgsError(var("speculative_draft_model_path"), draft_path,
                              "%s needs a separate draft model" % algorithm,
                              "set sglang_server_speculative_draft_model_path to the draft checkpoint")
    if algorithm == "NGRAM" and draft_path:
        raise SGLangArgsError(var("speculative_draft_model_path"), draft_path, "NGRAM does not use a draft model",
                              "unset sglang_server_speculative_draft_model_path")
    if algorithm == "NEXTN" and draft_path:
        if draft_path == d["model_path"]:
            r.warnings.append("sglang_server_speculative_draft_model_path repeats the model path; NEXTN uses the MTP head inside the target "
                              "checkpoint, so the flag is dropped (passing it double-loads the checkpoint)")
            draft_path = None
        else:
            raise SGLangArgsError(var("speculative_draft_model_path"), draft_path,
                                  "NEXTN (MTP) drafts with the MTP head inside the target checkpoint, a different draft path is not used that way",
                                  "unset it for NEXTN, or use EAGLE/EAGLE3 with a separate draft model")
    if draft_path:
        r.flag("--speculative-draft-model-path", draft_path)
    spec = {"algorithm": algorithm, "effective_algorithm": effective, "steps": steps, "topk": topk, "draft": draft,
            "draft_path": draft_path or (d["model_path"] if algorithm in ("NEXTN", "EAGLE") else None)}

    if algorithm in EAGLE_FAMILY or algorithm in ("NGRAM", "DFLASH", "DSPARK"):
        # 0.5.23 arg_groups/speculative_hook.py caps _handle_eagle_family, _handle_ngram, _handle_dflash, _handle_dspark
        mrr = d["max_running_requests"]
        if mrr is None:
            mrr = SPECULATIVE_MAX_RUNNING_REQUESTS_DEFAULT
            r.decide("max_running_requests", mrr,
                     "speculative decoding without --max-running-requests is capped at %d by SGLang; rendered explicitly so the cap is visible "
                     "(raise sglang_server_max_running_requests for higher concurrency)" % mrr)
            r.warnings.append("sglang_server_max_running_requests is unset under speculative decoding: rendering the SGLang cap %d explicitly"
                              % mrr)
        r.d["max_running_requests"] = mrr
    return spec


def _check_adaptive_off(r, algorithm):
    """Adaptive on without speculation refuses (SGLang would log it disabled); a table with adaptive off refuses (it would
    be written and ignored). :raises SGLangArgsError: naming the variable."""
    d = r.d
    if d["speculative_adaptive"] and algorithm is None:
        raise SGLangArgsError(var("speculative_adaptive"), True,
                              "speculative decoding is off, so SGLang would start with adaptive switched off, logging 'speculative_adaptive "
                              "disabled: speculative_algorithm=None (only EAGLE/EAGLE3 are supported)'",
                              "set sglang_server_speculative_algorithm to EAGLE, EAGLE3 or NEXTN, or sglang_server_speculative_adaptive: false")
    if not d["speculative_adaptive"] and d["speculative_adaptive_config"]:
        raise SGLangArgsError(var("speculative_adaptive_config"), d["speculative_adaptive_config"],
                              "an adaptive table is given but sglang_server_speculative_adaptive is false (the table would not be used)",
                              "set sglang_server_speculative_adaptive: true, or leave the table empty ({})")


def _render_adaptive(r, algorithm, steps, topk, draft):
    """``--speculative-adaptive`` (and ``--speculative-adaptive-config`` with the managed table), for the versions whose
    parser has the flags; refuses every condition SGLang would silently switch it off for (``adaptive.unsupported_reason``,
    with SGLang's reason), a table SGLang's loader would reject (``adaptive.validate_table``, naming the entry), a
    num_steps outside the candidates (SGLang's startup ``ValueError``) and a draft token count SGLang would replace.
    Returns ``(steps, topk, draft)`` as SGLang resolves them (``_init_adaptive_speculative_params``)."""
    d = r.d
    having = _adaptive.versions_with_adaptive()
    if r.p not in having:
        raise SGLangArgsError(var("speculative_adaptive"), True,
                              "SGLang %s's parser has no --speculative-adaptive (the flags exist in %s, read from the wheels)"
                              % (r.p, ", ".join(having)),
                              "use SGLang %s or newer (sglang_server_version and its image), or set sglang_server_speculative_adaptive: false"
                              % having[0])
    refused = _adaptive.unsupported_reason(r.p, algorithm, topk, d.get("model_architecture"), d["extra_args"])
    if refused is not None:
        key, value, reason = refused
        note = " (SGLang turns multi-layer EAGLE on by itself for %s with EAGLE)" % value if key == "model_architecture" else ""
        raise SGLangArgsError(var(key), value,
                              "SGLang %s would start with adaptive switched off, logging 'speculative_adaptive disabled: %s. Falling back "
                              "to static speculative params.'%s" % (r.p, reason, note),
                              "change %s (adaptive runs with EAGLE/EAGLE3/NEXTN, topk 1, no attention DP, multi-layer EAGLE, two-batch "
                              "overlap or PD-mux), or set sglang_server_speculative_adaptive: false" % var(key))
    table = d["speculative_adaptive_config"] or {}
    if table:
        try:
            table = _adaptive.validate_table(table)
        except _adaptive.TableError as exc:
            name = var("speculative_adaptive_config") + ("[%s]" % exc.entry if exc.entry else "")
            raise SGLangArgsError(name, exc.value, exc.reason, exc.fix)
        r.adaptive_config = {"path": _adaptive.CONTAINER_CONFIG_PATH, "content": _adaptive.table_json(table)}
    union = _adaptive.candidate_union(table or _adaptive.DEFAULT_TABLES[r.p])
    if steps is not None and steps not in union:
        raise SGLangArgsError(var("speculative_num_steps"), steps,
                              "SGLang refuses at startup: --speculative-num-steps=%d is not in the adaptive config candidate_steps %s"
                              % (steps, union), "use one of %s (the initial step count), or leave it unset (SGLang starts at %d)"
                              % (union, _adaptive.initial_steps(table or _adaptive.DEFAULT_TABLES[r.p])))
    steps = _adaptive.initial_steps(table or _adaptive.DEFAULT_TABLES[r.p], steps)
    if draft is not None and draft != steps + 1:
        raise SGLangArgsError(var("speculative_num_draft_tokens"), draft,
                              "under adaptive SGLang sets num_draft_tokens to num_steps + 1 = %d, so the value asked for would not be "
                              "the value served" % (steps + 1), "leave it unset or set %d" % (steps + 1))
    r.flag("--speculative-adaptive")
    if r.adaptive_config:
        r.flag("--speculative-adaptive-config", _adaptive.CONTAINER_CONFIG_PATH)
    r.flag("--speculative-num-steps", steps)
    r.flag("--speculative-eagle-topk", 1)
    r.flag("--speculative-num-draft-tokens", steps + 1)
    r.decide("speculative_adaptive", True,
             "adaptive speculative decoding with %s; candidate steps %s, initial %d (topk 1, draft tokens steps + 1)"
             % ("the managed table %s" % _adaptive.CONTAINER_CONFIG_PATH if r.adaptive_config else "SGLang %s's built-in table" % r.p,
                union, steps))
    r.expected.update({"speculative_adaptive": True,
                       "speculative_adaptive_config": _adaptive.CONTAINER_CONFIG_PATH if r.adaptive_config else None})
    return steps, 1, steps + 1


def _render_mamba(r, spec):
    d = r.d
    hybrid = is_hybrid_model(d)
    strategy = d["mamba_strategy"]
    if strategy is not None and strategy not in MAMBA_STRATEGIES:
        raise SGLangArgsError(var("mamba_strategy"), strategy, "unknown mamba strategy", "use one of " + ", ".join(MAMBA_STRATEGIES))
    if not hybrid:
        if strategy is not None:
            raise SGLangArgsError(var("mamba_strategy"), strategy, "only hybrid mamba/GDN models (Qwen3-Next, Qwen3.5) have a mamba cache",
                                  "unset sglang_server_mamba_strategy, or set sglang_server_hybrid_model: true if this model is hybrid")
        if d["mamba_track_interval"] is not None:
            raise SGLangArgsError(var("mamba_track_interval"), d["mamba_track_interval"], "only hybrid mamba/GDN models use it",
                                  "unset sglang_server_mamba_track_interval")
        _render_spec_v2(r, spec, needed=False)
        return
    if not _at_least(r.p, "0.5.4"):
        raise SGLangArgsError(var("version"), r.p, "hybrid GDN models (Qwen3-Next/Qwen3.5) need SGLang 0.5.4 or newer",
                              "use an image with SGLang >= 0.5.9")
    if not _at_least(r.p, "0.5.9"):
        qwen35 = (d["model_architecture"] in QWEN35_ARCHITECTURES if d["model_architecture"]
                  else bool(_QWEN35_NAME_RE.search("%s %s" % (d["model_path"] or "", d["served_model_name"] or ""))))
        if qwen35:
            raise SGLangArgsError(var("version"), r.p, "SGLang %s has no Qwen3.5 model class (models/qwen3_5.py arrives in 0.5.9; "
                                  "0.5.4 knows only Qwen3-Next)" % r.p, "use an image with SGLang >= 0.5.9 for Qwen3.5")
        if strategy is not None:
            raise SGLangArgsError(var("mamba_strategy"), strategy, "SGLang %s has no mamba strategy flag (--mamba-scheduler-strategy "
                                  "arrives in 0.5.9)" % r.p, "unset sglang_server_mamba_strategy for %s, or use SGLang >= 0.5.9" % r.p)
        if d["mamba_track_interval"] is not None:
            raise SGLangArgsError(var("mamba_track_interval"), d["mamba_track_interval"], "SGLang %s has no --mamba-track-interval "
                                  "(arrives in 0.5.9)" % r.p, "unset sglang_server_mamba_track_interval")
        _render_spec_v2(r, spec, needed=False)
        return
    if strategy == "extra_buffer_lazy" and not _at_least(r.p, "0.5.14"):
        raise SGLangArgsError(var("mamba_strategy"), strategy, "extra_buffer_lazy exists from SGLang 0.5.14", "use extra_buffer")
    if strategy == "extra_buffer_lazy" and spec is not None:
        raise SGLangArgsError(var("mamba_strategy"), strategy, "SGLang 0.5.14-0.5.23 reject extra_buffer_lazy with speculative decoding "
                              "(`extra_buffer_lazy unsupported with spec.`)", "use extra_buffer")
    speculative_eagle = spec is not None and spec["algorithm"] in EAGLE_FAMILY
    if strategy in (None, "auto") and speculative_eagle:
        if d["disable_radix_cache"]:
            strategy = "no_buffer"
            r.decide("mamba_strategy", strategy, "radix cache disabled: extra_buffer would waste two mamba slots per request (and is refused)")
        else:
            strategy = "extra_buffer"
            r.decide("mamba_strategy", strategy, "hybrid model + speculative decoding + radix cache: extra_buffer keeps the radix cache "
                     "(no_buffer disables it silently in <=0.5.9 and is a ValueError in 0.5.10)")
    if strategy in ("extra_buffer", "extra_buffer_lazy") and d["disable_radix_cache"]:
        raise SGLangArgsError(var("mamba_strategy"), strategy,
                              "extra_buffer with the radix cache disabled is refused by SGLang >= 0.5.10 (`mamba extra_buffer is not compatible "
                              "with --disable-radix-cache`) and wastes two mamba slots per request",
                              "use sglang_server_mamba_strategy: no_buffer with sglang_server_disable_radix_cache: true, or keep the radix cache")
    if strategy == "no_buffer" and speculative_eagle and not d["disable_radix_cache"]:
        if _at_least(r.p, "0.5.14"):
            raise SGLangArgsError(var("mamba_strategy"), strategy,
                                  "SGLang %s runs speculative decoding with the overlap (spec v2) scheduler, and no_buffer with the radix cache "
                                  "does not support the overlap schedule (`no_buffer do not support overlap schedule`)" % r.p,
                                  "use sglang_server_mamba_strategy: extra_buffer (or auto), or sglang_server_disable_radix_cache: true")
        if _at_least(r.p, "0.5.10"):
            raise SGLangArgsError(var("mamba_strategy"), strategy,
                                  "SGLang %s: speculative decoding for hybrid models is not compatible with radix cache when using no_buffer "
                                  "(ValueError at startup, after the model load)" % r.p,
                                  "use sglang_server_mamba_strategy: extra_buffer (spec v2 is set for you), or sglang_server_disable_radix_cache: true")
        r.warnings.append("SGLang %s silently disables the radix cache for hybrid models with speculative decoding and no_buffer" % r.p)
    if strategy is not None:
        flag = "--mamba-radix-cache-strategy" if _at_least(r.p, "0.5.14") else "--mamba-scheduler-strategy"
        r.flag(flag, strategy)
        if strategy != "auto":
            r.expected["mamba_radix_cache_strategy" if _at_least(r.p, "0.5.14") else "mamba_scheduler_strategy"] = strategy
    if strategy in ("extra_buffer", "extra_buffer_lazy") and spec is not None:
        interval = d["mamba_track_interval"] if d["mamba_track_interval"] is not None else 256
        if interval < spec["draft"]:
            raise SGLangArgsError(var("mamba_track_interval"), interval,
                                  "mamba_track_interval %d must be greater than or equal to speculative_num_draft_tokens %d" % (interval, spec["draft"]),
                                  "raise sglang_server_mamba_track_interval (default 256)")
        page = d["page_size"] or 1
        if interval % page:
            raise SGLangArgsError(var("mamba_track_interval"), interval, "mamba_track_interval %d must be divisible by page_size %d" % (interval, page),
                                  "use a multiple of sglang_server_page_size")
    if d["mamba_track_interval"] is not None:
        r.flag("--mamba-track-interval", d["mamba_track_interval"])
    needed = strategy in ("extra_buffer",) and speculative_eagle
    _render_spec_v2(r, spec, needed=needed)


def _render_spec_v2(r, spec, needed):
    """SGLANG_ENABLE_SPEC_V2 (0.5.9/0.5.10 env), --enable-beta-spec (0.5.4), always on (0.5.14+)."""
    d = r.d
    wanted = d["spec_v2"]
    if wanted is None:
        wanted = needed
    if not wanted:
        if needed and not _at_least(r.p, "0.5.14"):
            raise SGLangArgsError(var("spec_v2"), d["spec_v2"], "hybrid models with speculative decoding and extra_buffer need the spec v2 "
                                  "(overlap) scheduler in SGLang %s" % r.p, "leave sglang_server_spec_v2 unset (auto) or true")
        return
    if spec is None or spec["algorithm"] not in EAGLE_FAMILY:
        raise SGLangArgsError(var("spec_v2"), d["spec_v2"], "spec v2 applies to EAGLE/EAGLE3/NEXTN/STANDALONE speculative decoding only",
                              "unset sglang_server_spec_v2")
    if spec["topk"] != 1:
        raise SGLangArgsError(var("spec_v2"), True, "Spec v2 currently only supports topk = 1 (speculative_eagle_topk is %s)" % spec["topk"],
                              "use speculative_eagle_topk 1 (chain MTP), or the non-hybrid path without spec v2")
    if _at_least(r.p, "0.5.14"):
        r.decide("spec_v2", "always on", "SGLang %s always runs spec v2; SGLANG_ENABLE_SPEC_V2 was removed" % r.p)
    elif _at_least(r.p, "0.5.9"):
        r.env["SGLANG_ENABLE_SPEC_V2"] = "1"
        r.decide("SGLANG_ENABLE_SPEC_V2", "1", "SGLang %s enables the spec v2 overlap scheduler only through this environment variable" % r.p)
    elif _at_least(r.p, "0.5.4"):
        r.flag("--enable-beta-spec")
        r.decide("--enable-beta-spec", True, "SGLang 0.5.4 spells spec v2 as the --enable-beta-spec flag")
    else:
        raise SGLangArgsError(var("spec_v2"), d["spec_v2"], "SGLang %s has no spec v2 scheduler" % r.p, "unset sglang_server_spec_v2")


def _is_blackwell(major):
    return major in (10, 11, 12)


def _render_attention(r, spec):
    """Attention backend rules (attention_registry.py hybrid GDN assert; trtllm_mha SM100-only through 0.5.9)."""
    d = r.d
    backend = d["attention_backend"]
    caps = _capabilities(r.ctx)
    majors = sorted(set(c[0] for c in caps))
    hybrid = is_hybrid_model(d)
    blackwell = any(_is_blackwell(m) for m in majors)
    sm120 = 12 in majors
    sm12_text = "compute capability 12.x (SM120: RTX PRO 6000 / RTX 50xx)"
    if backend == "trtllm_mla" and sm120:
        raise SGLangArgsError(var("attention_backend"), backend, "trtllm_mla needs SM100 tcgen05 kernels that %s lacks" % sm12_text,
                              "use triton (or flashinfer for non-MLA models)")
    if backend == "trtllm_mha" and sm120:
        if not _at_least(r.p, "0.5.10"):
            raise SGLangArgsError(var("attention_backend"), backend,
                                  "SGLang %s: TRTLLM MHA backend is only supported on Blackwell GPUs (SM100); the GPUs are %s" % (r.p, sm12_text),
                                  "use sglang_server_attention_backend: triton")
        if not _at_least(r.p, "0.5.23"):
            raise SGLangArgsError(var("attention_backend"), backend,
                                  "SGLang %s runs trtllm_mha decode on SM120 but its prefill is still SM100-only" % r.p,
                                  "use triton, or SGLang 0.5.23 where trtllm_mha prefill runs on SM120")
        if (d["kv_cache_dtype"] or "") == "fp8_e4m3":
            raise SGLangArgsError(var("kv_cache_dtype"), d["kv_cache_dtype"], "SGLang 0.5.23 trtllm_mha prefill on SM120 (FMHAv2) has no fp8_e4m3 KV cache",
                                  "use kv_cache_dtype auto/bf16 or attention backend triton")
    if hybrid and blackwell:
        if _at_least(r.p, "0.5.23"):
            allowed = ("triton", "trtllm_mha", "flashinfer") + (() if sm120 else ("fa4",))
        elif _at_least(r.p, "0.5.10"):
            allowed = ("triton", "trtllm_mha", "fa4", "flashinfer")
        else:
            allowed = ("triton",) if sm120 else ("triton", "trtllm_mha")
        if backend is None and not _at_least(r.p, "0.5.10"):
            backend = "triton"
            r.decide("attention_backend", backend, "hybrid GDN model on Blackwell with SGLang %s: the default flashinfer trips an assert; "
                     "triton is the supported backend" % r.p)
        elif backend is not None and backend not in allowed:
            raise SGLangArgsError(var("attention_backend"), backend,
                                  "SGLang %s supports only %s for hybrid GDN models on Blackwell (compute capability %s); %s fails an assert at startup"
                                  % (r.p, "/".join(allowed), ",".join("%d.%d" % c for c in sorted(set(caps))), backend),
                                  "use sglang_server_attention_backend: triton")
    if backend == "trtllm_mha" and spec is not None and spec["topk"] not in (None, 1):
        raise SGLangArgsError(var("speculative_eagle_topk"), spec["topk"], "trtllm_mha backend only supports topk = 1 for speculative decoding",
                              "use speculative_eagle_topk 1 or another attention backend")
    if spec is not None and spec["topk"] is not None and spec["topk"] > 1 and (d["page_size"] or 1) > 1:
        ok = ("flashinfer", "fa3") if not _at_least(r.p, "0.5.23") else ("flashinfer",)
        if backend not in ok:
            raise SGLangArgsError(var("page_size"), d["page_size"],
                                  "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results for paged attention backends",
                                  "use page_size 1, topk 1, or attention backend %s" % " or ".join(ok))
    if backend is not None:
        r.flag("--attention-backend", backend)
        r.expected["attention_backend"] = backend


def _render_memory_and_graphs(r, spec):
    """Memory, limits and CUDA graph flags. ``spec``: :func:`_render_speculative`'s dict. Warns (issue 21, a pitfall
    operators report) when speculative decoding is on and ``cuda_graph_max_bs`` is below ``max_running_requests``: the
    decode batches above it run without CUDA graphs (eager), where a verify step costs several times more."""
    d = r.d
    mrr, graphs = d["max_running_requests"], d["cuda_graph_max_bs"]
    if (spec or {}).get("algorithm") and graphs is not None and mrr is not None and graphs < mrr and not d["disable_cuda_graph"]:
        r.warnings.append("sglang_server_cuda_graph_max_bs %d is below sglang_server_max_running_requests %d with speculative "
                          "decoding on: decode batches of %d to %d requests run without CUDA graphs (eager mode), which costs "
                          "speculation its gain at that concurrency; raise sglang_server_cuda_graph_max_bs to %d, or lower "
                          "sglang_server_max_running_requests" % (graphs, mrr, graphs + 1, mrr, mrr))
    if d["mem_fraction_static"] is not None:
        r.flag("--mem-fraction-static", _fmt_float(d["mem_fraction_static"]))
        r.expected["mem_fraction_static"] = d["mem_fraction_static"]
    if d["max_running_requests"] is not None:
        r.flag("--max-running-requests", d["max_running_requests"])
        r.expected["max_running_requests"] = d["max_running_requests"]
    for key, flag in (("context_length", "--context-length"), ("chunked_prefill_size", "--chunked-prefill-size"),
                      ("kv_cache_dtype", "--kv-cache-dtype"), ("page_size", "--page-size")):
        if d[key] is not None:
            r.flag(flag, d[key])
            r.expected[key] = d[key]
    if d["disable_radix_cache"]:
        r.flag("--disable-radix-cache")
    if d["cuda_graph_max_bs"] is not None:
        if _at_least(r.p, "0.5.14"):
            r.flag("--cuda-graph-max-bs-decode", d["cuda_graph_max_bs"])
        else:
            r.flag("--cuda-graph-max-bs", d["cuda_graph_max_bs"])
            r.expected["cuda_graph_max_bs"] = d["cuda_graph_max_bs"]
    if d["cuda_graph_max_bs_prefill"] is not None:
        if not _at_least(r.p, "0.5.14"):
            raise SGLangArgsError(var("cuda_graph_max_bs_prefill"), d["cuda_graph_max_bs_prefill"],
                                  "prefill CUDA graphs (--cuda-graph-max-bs-prefill) exist from SGLang 0.5.14", "unset it for %s" % r.p)
        r.flag("--cuda-graph-max-bs-prefill", d["cuda_graph_max_bs_prefill"])
    if d["disable_cuda_graph"]:
        if _at_least(r.p, "0.5.14"):
            r.flag("--cuda-graph-backend-decode", "disabled")
            r.flag("--cuda-graph-backend-prefill", "disabled")
            r.decide("disable_cuda_graph", "--cuda-graph-backend-{decode,prefill} disabled",
                     "--disable-cuda-graph is deprecated from SGLang 0.5.14 (DeprecatedStoreTrueAction)")
        else:
            r.flag("--disable-cuda-graph")


def _fmt_float(value):
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _render_all_reduce(r):
    """--disable-custom-all-reduce from the description or the nccl role's decision (fact nccl_p2p_decision)."""
    d = r.d
    decision = r.ctx.get("nccl_p2p_decision") or {}
    wanted = d["disable_custom_all_reduce"]
    nccl_says = decision.get("disable_custom_all_reduce")
    if nccl_says is not None:
        nccl_says = _coerce("nccl_p2p_decision.disable_custom_all_reduce", "bool", nccl_says)
    if wanted is False and nccl_says and not d["custom_all_reduce_force"]:
        raise SGLangArgsError(var("disable_custom_all_reduce"), False,
                              "the nccl role decided GPU peer-to-peer is broken on this host (%s); custom all-reduce uses CUDA IPC P2P and hangs there"
                              % (decision.get("reason") or "nccl_p2p_decision.disable_custom_all_reduce is true"),
                              "leave sglang_server_disable_custom_all_reduce unset (auto), or set sglang_server_custom_all_reduce_force: true "
                              "(dangerous: NCCL hangs or silent corruption)")
    if wanted is None:
        wanted = bool(nccl_says)
        if nccl_says:
            r.decide("disable_custom_all_reduce", True, "nccl role: %s" % (decision.get("reason") or "GPU P2P off on this host"))
    if wanted and r.d["tp_size"] > 1:
        r.flag("--disable-custom-all-reduce")
    r.expected["disable_custom_all_reduce"] = bool(wanted and r.d["tp_size"] > 1)


def _render_observability(r):
    d = r.d
    if d["enable_metrics"]:
        r.flag("--enable-metrics")
    r.expected["enable_metrics"] = bool(d["enable_metrics"])
    if d["decode_log_interval"] is not None:
        r.flag("--decode-log-interval", d["decode_log_interval"])
        r.expected["decode_log_interval"] = d["decode_log_interval"]
    for key, flag in (("reasoning_parser", "--reasoning-parser"), ("tool_call_parser", "--tool-call-parser"),
                      ("watchdog_timeout", "--watchdog-timeout"), ("log_level", "--log-level")):
        if d[key] is not None:
            r.flag(flag, d[key])
    if d["api_key"]:
        r.flag("--api-key", "${%s}" % API_KEY_ENV)
        r.secret_env[API_KEY_ENV] = d["api_key"]
        r.decide("api_key", "${%s}" % API_KEY_ENV, "the key travels in the 0600 EnvironmentFile and systemd expands it in ExecStart")
    if d["hf_token"]:
        r.secret_env["HF_TOKEN"] = d["hf_token"]


def _flag_name(item):
    return item.split("=", 1)[0]


def _render_extra(r, spec):
    d = r.d
    extra = d["extra_args"] or []
    for item in extra:
        if not item.startswith("--"):
            continue
        name = _flag_name(item)
        if name == "--mamba-scheduler-strategy":
            if _at_least(r.p, "0.5.23"):
                raise SGLangArgsError(var("extra_args"), item, "--mamba-scheduler-strategy was removed in SGLang 0.5.23 (renamed "
                                      "--mamba-radix-cache-strategy)", "use sglang_server_mamba_strategy, rendered with the right spelling per version")
            raise SGLangArgsError(var("extra_args"), item, "the mamba strategy is a managed setting (its flag is spelled per version)",
                                  "use sglang_server_mamba_strategy")
        if name == "--cuda-graph-max-bs":
            if _at_least(r.p, "0.5.23"):
                raise SGLangArgsError(var("extra_args"), item, "SGLang 0.5.23 has only --cuda-graph-max-bs-decode/--cuda-graph-max-bs-prefill; "
                                      "the bare flag is an ambiguous-prefix argparse error", "use sglang_server_cuda_graph_max_bs")
            raise SGLangArgsError(var("extra_args"), item, "the CUDA graph batch size is a managed setting", "use sglang_server_cuda_graph_max_bs")
        if name == "--enable-beta-spec":
            raise SGLangArgsError(var("extra_args"), item, "--enable-beta-spec exists only in SGLang 0.5.4 (spec v2 is an environment variable in "
                                  "0.5.9/0.5.10 and always on from 0.5.14)", "use sglang_server_spec_v2")
        if name in _MANAGED_FLAGS:
            key = _MANAGED_FLAGS[name]
            raise SGLangArgsError(var("extra_args"), item, "%s is rendered from %s (one place per setting)" % (name, var(key)),
                                  "set %s instead" % var(key))
    r.argv.extend(extra)
    for name, value in sorted((d["extra_env"] or {}).items()):
        if name in _SECRET_ENV:
            raise SGLangArgsError(var("extra_env"), name, "secrets must not travel in the plain EnvironmentFile",
                                  "set sglang_server_hf_token (no_log, written to a 0600 file)")
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise SGLangArgsError(var("extra_env"), name, "not a valid environment variable name", "use letters, digits and _")
        if "\n" in value:
            raise SGLangArgsError(var("extra_env"), name, "values cannot contain a newline (EnvironmentFile is line based)", "remove the newline")
        if name == "SGLANG_ENABLE_SPEC_V2":
            if _at_least(r.p, "0.5.14"):
                r.warnings.append("SGLANG_ENABLE_SPEC_V2 was removed in SGLang %s (spec v2 is always on); dropped from the environment" % r.p)
                continue
            raise SGLangArgsError(var("extra_env"), name, "spec v2 is a managed setting (set only where the version needs it)",
                                  "use sglang_server_spec_v2")
        r.env[name] = value


def _expected(r, spec):
    d = r.d
    exp = dict(r.expected)
    exp["model_path"] = d["model_path"]
    exp["served_model_name"] = d["served_model_name"] or d["model_path"]
    exp["disable_radix_cache"] = bool(d["disable_radix_cache"])
    if spec is not None:
        exp.update({
            "speculative_algorithm": spec["effective_algorithm"],
            "speculative_num_draft_tokens": spec["draft"],
        })
        if spec["algorithm"] != "NGRAM":
            exp.update({"speculative_num_steps": spec["steps"], "speculative_eagle_topk": spec["topk"],
                        "speculative_draft_model_path": spec["draft_path"]})
    return exp


def expected_server_args(description, version=None, context=None):
    """The server args SGLang will report in ``/server_info`` (flattened ServerArgs) for this description.

    Applies SGLang's own rewrites: NEXTN -> EAGLE, the auto (3, 1, 4) / (5, 4, 8) parameters, the draft path
    falling back to the model path for MTP, max_running_requests 48 under speculation, the mamba strategy key
    (``mamba_scheduler_strategy`` up to 0.5.10, ``mamba_radix_cache_strategy`` from 0.5.14). Keys present only
    when the value is known: ``model_path, served_model_name, host, port, tp_size, nnodes, node_rank,
    speculative_algorithm, speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens,
    speculative_draft_model_path, max_running_requests, attention_backend, disable_radix_cache,
    disable_custom_all_reduce, enable_metrics, decode_log_interval, mem_fraction_static, cuda_graph_max_bs``.
    Raises :class:`SGLangArgsError` like :func:`render_launch`.
    """
    return render_launch(description, version, context)["expected"]


_SYSTEMD_SAFE_RE = re.compile(r"^[A-Za-z0-9_@%+=:,./${}-]+$")


def systemd_quote(arg, allow_env=False):
    """Quote one argv item for a systemd ``ExecStart=`` line (systemd.service "Command lines").

    ``%`` becomes ``%%`` (specifiers); ``$`` becomes ``$$`` unless ``allow_env`` and the item is exactly one
    ``${NAME}`` reference (then systemd expands it from the EnvironmentFile); items with spaces, quotes,
    backslashes or ``;`` are double-quoted with ``\\`` escapes. Returns a str.
    """
    text = str(arg)
    if allow_env and re.match(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$", text):
        return text
    text = text.replace("%", "%%").replace("$", "$$")
    if text and _SYSTEMD_SAFE_RE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_exec(argv):
    """Join an argv list into one ``ExecStart=`` command line (see :func:`systemd_quote`).

    Only items rendered by this module as ``${SGLANG_SERVER_API_KEY}`` keep their ``$``.
    Raises :class:`SGLangArgsError` for an item with a control character (a newline would end ``ExecStart=``).
    """
    try:
        dest_check_argv("ExecStart argument", argv)
    except DestinationError as exc:
        raise SGLangArgsError(exc.variable, exc.value, exc.reason, exc.fix)
    return " ".join(systemd_quote(a, allow_env=(a == "${%s}" % API_KEY_ENV)) for a in argv)


def render_router(worker_urls, port=30001, policy="cache_aware", host="0.0.0.0", extra_args=None):
    """argv of the SGLang router (``python3 -m sglang_router.launch_router``) in front of several replicas.

    :param worker_urls: list of ``http://host:port`` of the replicas (at least 2).
    :param port: router TCP port. :param policy: ``cache_aware`` | ``round_robin`` | ``random`` | ``power_of_two``.
    :raises SGLangArgsError: naming ``sglang_server_router_*`` on bad input.
    """
    urls = list(worker_urls or [])
    if len(urls) < 2:
        raise SGLangArgsError("sglang_server_router_worker_urls", urls, "a router needs at least two replicas",
                              "describe two or more replicas, or leave the router off (sglang_server_router_enabled: false)")
    for url in urls:
        if not re.match(r"^https?://[^/\s]+:\d+$", str(url)):
            raise SGLangArgsError("sglang_server_router_worker_urls", url, "not an http(s)://host:port URL", "use e.g. http://10.0.0.5:30000")
    if policy not in ("cache_aware", "round_robin", "random", "power_of_two"):
        raise SGLangArgsError("sglang_server_router_policy", policy, "unknown routing policy",
                              "use cache_aware, round_robin, random or power_of_two")
    argv = ["python3", "-m", "sglang_router.launch_router", "--worker-urls"] + [str(u) for u in urls]
    argv += ["--host", host, "--port", str(int(port)), "--policy", policy]
    return argv + [str(x) for x in (extra_args or [])]


#: In-container launcher used when the server has an API key (render_container): SGLang reads the key only from
#: ``--api-key`` (ServerArgs.api_key in 0.4.10-0.5.23; no environment variable), so the key is handed over inside the
#: process instead of on the command line: the engine passes SGLANG_SERVER_API_KEY through its environment (from the
#: 0600 EnvironmentFile), this snippet removes it from os.environ (children do not inherit it) and runs the module with
#: ``--api-key <key>`` appended to sys.argv. /proc/<pid>/cmdline (world-readable on the host) and ``podman inspect``
#: Args then show only the snippet; the key remains in the container's Config.Env and /proc/<pid>/environ (root only).
API_KEY_LAUNCHER = ("import os, runpy, sys; key = os.environ.pop(%r, ''); module = sys.argv[1]; "
                    "sys.argv = [module] + sys.argv[2:] + (['--api-key', key] if key else []); "
                    "runpy.run_module(module, run_name='__main__', alter_sys=True)" % API_KEY_ENV)


def _launch_without_key_on_cmdline(argv):
    """(argv, needs_env): ``python3 -m M ... --api-key ${SGLANG_SERVER_API_KEY} ...`` -> ``python3 -c LAUNCHER M ...``."""
    ref = "${%s}" % API_KEY_ENV
    items = list(argv)
    for i in range(len(items) - 1):
        if items[i] == "--api-key" and items[i + 1] == ref and len(items) >= 3 and items[1] == "-m":
            rest = items[3:i] + items[i + 2:]
            return [items[0], "-c", API_KEY_LAUNCHER, items[2]] + rest, True
    return items, False


ENGINES = ("podman", "docker")
GPU_MODES = ("cdi", "gpus", "none")
DEFAULT_ULIMITS = ("memlock=-1", "stack=67108864")


def render_container(launch, name, image, engine="podman", engine_bin=None, gpu_mode="cdi", gpus="all", ipc_host=True,
                     shm_size="32g", volumes=None, env_files=None, pass_env=None, network_host=True, ports=None, extra_options=None,
                     ulimits=None, init=True, api_key_in_env=True):
    """argv of ``podman|docker run`` that runs the rendered SGLang command in the foreground (for a systemd unit).

    :param launch: the dict returned by :func:`render_launch` (its ``argv`` is appended after the image).
    :param name: container name (also the unit name). :param image: image reference, tag or digest.
    :param gpu_mode: ``cdi`` (``--device nvidia.com/gpu=all`` or one ``--device`` per index, the CDI spec from
        ``nvidia-ctk cdi generate``), ``gpus`` (Docker/NVIDIA runtime ``--gpus all`` / ``--gpus "device=0,1"``),
        ``none`` (no GPU, e.g. the sandbox before nvidia-ctk ran).
    :param gpus: ``"all"`` or a list of GPU indices.
    :param ipc_host: ``--ipc host`` (else ``--shm-size shm_size``, e.g. ``32g``).
    :param volumes: list of ``host:container[:opts]`` strings.
    :param env_files: list of host paths passed as ``--env-file`` (read by the engine at start).
    :param pass_env: names passed as ``--env NAME`` (value taken from the engine's own environment, i.e. systemd's
        EnvironmentFile: how HF_TOKEN reaches the container without being written into the unit).
    :param network_host: ``--network host`` (else ``ports`` are published, e.g. ``["30000:30000"]``).
    :param extra_options: further engine options placed before the image (e.g. ``["-v", "/sys/fs/cgroup:/sys/fs/cgroup"]``).
    :param ulimits: ``--ulimit`` values (``name=soft[:hard]``); default ``memlock=-1`` (pinned host memory for NCCL/CUDA)
        and ``stack=67108864`` (64 MiB), as in SGLang's docker/compose.yaml. Note that giving any ``--ulimit`` replaces
        the engine's default_ulimits, so hosts that cannot raise limits (the sandbox) list nofile/nproc too.
    :param init: ``--init`` (podman's catatonit / docker's tini as PID 1). SGLang (and the simulator) do not handle SIGTERM
        while the model loads, and a PID 1 without a handler ignores it, so ``podman stop -t N`` waited the whole N seconds
        (110 s by default) on every restart of a loading or crash-looping server; the init forwards SIGTERM to SGLang.
    :param api_key_in_env: when the launch has ``--api-key ${SGLANG_SERVER_API_KEY}``, run SGLang through
        :data:`API_KEY_LAUNCHER` with ``--env SGLANG_SERVER_API_KEY`` instead, so the key is in no process command line
        (docs/sglang_server.md "Secrets"); false keeps the flag on the command line (systemd expands it there).
    :returns: list of str, starting ``<engine> run --rm --name <name>`` (podman adds ``--log-driver k8s-file``: the
        SGLang log lines reach the unit's journal once, and ``podman logs`` still works).
    :raises SGLangArgsError: naming ``sglang_server_engine`` / ``sglang_server_gpu_mode`` / ``sglang_server_gpus`` /
        ``sglang_server_image`` / ``sglang_server_name``.
    """
    if engine not in ENGINES:
        raise SGLangArgsError(var("engine"), engine, "unsupported container engine", "use podman or docker")
    if gpu_mode not in GPU_MODES:
        raise SGLangArgsError(var("gpu_mode"), gpu_mode, "unknown GPU access mode",
                              "use cdi (--device nvidia.com/gpu=...), gpus (--gpus, Docker with the NVIDIA runtime) or none")
    try:
        image_reference(image, var("image"), force=True)  # the grammar; pinning is checked by the role (sglang_server_image_force)
    except DestinationError as exc:
        raise SGLangArgsError(exc.variable, exc.value, exc.reason, exc.fix)
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", str(name or "")):
        raise SGLangArgsError(var("name"), name, "not a valid container/unit name", "use letters, digits, '.', '_' and '-'")
    argv = [engine_bin or ("/usr/bin/%s" % engine), "run", "--rm", "--name", str(name)]
    if engine == "podman":
        # Under systemd the attached container output already reaches the unit's journal; podman's default
        # journald log driver would write every SGLang line a second time (under the container's name), and a
        # log reader would see each rank's target "Load weight end." twice, mistaking the copy for the draft's.
        # k8s-file keeps `podman logs` working; passthrough would lose the output under systemd (podman 4.3).
        argv += ["--log-driver", "k8s-file"]
    if network_host:
        argv += ["--network", "host"]
    else:
        for port in ports or []:
            argv += ["-p", str(port)]
    if ipc_host:
        argv += ["--ipc", "host"]
    else:
        argv += ["--shm-size", str(shm_size)]
    for limit in (DEFAULT_ULIMITS if ulimits is None else ulimits):
        if not re.match(r"^[a-z]+=-?\d+(:-?\d+)?$", str(limit)):
            raise SGLangArgsError(var("ulimits"), limit, "not a ulimit of the form name=soft[:hard]", "e.g. memlock=-1 or stack=67108864")
        argv += ["--ulimit", str(limit)]
    if init:
        argv.append("--init")
    try:
        indices = gpu_indices(gpus)
    except ValueError:
        raise SGLangArgsError(var("gpus"), gpus, "must be 'all' or a list of GPU indices", "e.g. [0, 1, 2, 3]")
    if gpu_mode == "cdi":
        for dev in (["all"] if indices is None else indices):
            argv += ["--device", "nvidia.com/gpu=%s" % dev]
        if engine == "podman":
            argv += ["--security-opt", "label=disable"]
    elif gpu_mode == "gpus":
        argv += ["--gpus", "all" if indices is None else "device=%s" % ",".join(str(i) for i in indices)]
    for vol in volumes or []:
        argv += ["-v", str(vol)]
    for path in env_files or []:
        argv += ["--env-file", str(path)]
    launch_argv, key_in_env = _launch_without_key_on_cmdline(launch["argv"]) if api_key_in_env else (list(launch["argv"]), False)
    for env_name in list(pass_env or []) + ([API_KEY_ENV] if key_in_env else []):
        argv += ["--env", str(env_name)]
    argv += [str(x) for x in (extra_options or [])]
    argv.append(str(image))
    try:
        dest_check_argv("sglang_server_container_options / volumes / env_files", argv)
    except DestinationError as exc:
        raise SGLangArgsError(exc.variable, exc.value, exc.reason, exc.fix)
    return argv + launch_argv
