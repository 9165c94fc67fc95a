# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""THE table of the ``llmops.sglang.sglang_server`` role's variables: the server description written once.

Each row of :data:`VARIABLES` is one variable of the role's main entry point, with

* ``name``: the role variable (``sglang_server_...``);
* ``type``, ``elements``, ``default``, ``choices``: as ``meta/argument_specs.yml`` and ``defaults/main.yml`` state them
  (``default`` ``None`` = no ``default:`` in the spec and ``null`` in the defaults). The role's YAML stays hand-written
  and documented; ``tests/unit/plugins/plugin_utils/_sglang/test_description.py`` fails when it and this table disagree;
* ``flags``: the SGLang CLI flags the renderer owns for it (first = the usual spelling, then aliases;
  ``sglang_server_extra_args`` may not repeat them); ``()`` = none;
* ``unset``: for an option of the server description (the renderer's input, :mod:`.launch`), the value the renderer
  uses when the description leaves it out or empty; :data:`NOT_AN_OPTION` for the other variables;
* ``destinations``: where the value ends up and so which check :func:`.quoting.server_destinations` runs on it:
  ``unit`` (a line of the systemd unit: no control character), ``path`` (an absolute path written into ``ExecStart=``
  and the engine's ``-v``/``--env-file``), ``argv`` (a list of container/server argv items), ``unit_env``
  (``Environment=``), ``env_file`` (the container ``--env-file``), ``secret`` (the 0600 ``EnvironmentFile=``, as
  ``env``), ``image`` (the image reference and its ``force``), ``version`` (the version text); ``()`` = none checked;
* ``env``: for a secret, the environment variable it is written as;
* ``fingerprinted``: part of the validation key (:func:`validation_key`): ``tasks/validate.yml``'s checks and render
  read it, so a change must validate again.

Derived from it (nothing listed again): the renderer's option map (:data:`OPTIONS`, :data:`MANAGED_FLAGS`), the
destination checks (:func:`names`), the description dict (:func:`server_description`) and the validation key.
Pure Python (standard library only).
"""

from __future__ import annotations

import collections
import hashlib
import json

PREFIX = "sglang_server_"

#: ``unset`` of a variable that is not an option of the server description.
NOT_AN_OPTION = "<not an option>"

#: Destination kinds (see the module docstring).
DESTINATION_KINDS = ("unit", "path", "argv", "unit_env", "env_file", "secret", "image", "version")

Variable = collections.namedtuple("Variable", "name type elements default choices flags unset destinations env fingerprinted")


def _v(name, kind, default=None, choices=None, elements=None, flags=(), unset=NOT_AN_OPTION, dest=(), env=None, fp=True):
    return Variable(PREFIX + name, kind, elements, default, tuple(choices) if choices else None, tuple(flags), unset,
                    tuple(dest), env, fp)


#: Every variable of the role's main entry point, in the order of meta/argument_specs.yml.
VARIABLES = (
    # ---- identity, image, engine
    _v("name", "str", "sglang-server", dest=("unit",)),
    _v("version", "str", "0.5.9", dest=("version",)),
    _v("version_force", "bool", False),
    _v("image", "str", "lmsysorg/sglang:v0.5.9-cu130-runtime", dest=("image",)),
    _v("image_force", "bool", False, dest=("image",)),
    _v("image_pull", "str", "missing", choices=("missing", "always", "never")),
    _v("engine", "str", "podman", choices=("podman", "docker")),
    _v("engine_bin", "str", "", dest=("unit", "path")),
    _v("gpu_mode", "str", "cdi", choices=("cdi", "gpus", "none")),
    _v("gpus", "raw", "all"),
    _v("ipc_host", "bool", True, fp=False),
    _v("shm_size", "str", "32g", dest=("unit",)),
    _v("network_host", "bool", True, fp=False),
    _v("hf_cache_dir", "path", "/var/lib/sglang/huggingface", dest=("unit", "path")),
    _v("model_dir", "str", "/models", dest=("unit", "path")),
    _v("container_options", "list", [], elements="str", dest=("argv",)),
    _v("config_dir", "path", "/etc/sglang", dest=("unit", "path")),
    _v("nccl_env_file", "str", "/etc/llmops/nccl.env", dest=("unit", "path")),
    _v("reboot_pending_dir", "str", "/var/lib/llmops/reboot-pending", fp=False),
    # ---- systemd
    _v("restart_sec", "int", 10, fp=False),
    _v("timeout_start_sec", "int", 3600, fp=False),
    _v("timeout_stop_sec", "int", 120, fp=False),
    _v("unit_environment", "dict", {}, dest=("unit_env",)),
    _v("enabled", "bool", True, fp=False),
    # ---- readiness
    _v("wait_ready", "bool", True, fp=False),
    _v("ready_timeout", "int", 1800, fp=False),
    _v("ready_delay", "int", 5, fp=False),
    _v("health_host", "str", "127.0.0.1", dest=("unit",)),
    _v("journal_lines", "int", 50, fp=False),
    _v("rollback", "bool", True, fp=False),
    # ---- the server description (the renderer's options)
    _v("model_path", "str", "", flags=("--model-path", "--model"), unset=None, dest=("unit",)),
    _v("served_model_name", "str", flags=("--served-model-name",), unset=None, dest=("unit",)),
    _v("model_architecture", "str", unset=None),
    _v("hybrid_model", "bool", unset=None),
    _v("host", "str", flags=("--host",), unset=None, dest=("unit",)),
    _v("port", "int", 30000, flags=("--port",), unset=30000),
    _v("tp_size", "int", 1, flags=("--tp-size", "--tensor-parallel-size", "--tp"), unset=1),
    _v("pp_size", "int", flags=("--pp-size", "--pipeline-parallel-size"), unset=None),
    _v("nnodes", "int", 1, flags=("--nnodes",), unset=1),
    _v("node_rank", "int", 0, flags=("--node-rank",), unset=0),
    _v("dist_init_addr", "str", flags=("--dist-init-addr", "--nccl-init-addr"), unset=None, dest=("unit",)),
    _v("multinode_group", "str", ""),
    _v("dist_init_port", "int", 20000),
    _v("speculative_algorithm", "str", flags=("--speculative-algorithm", "--speculative-algo"), unset=None),
    _v("speculative_num_steps", "int", flags=("--speculative-num-steps",), unset=None),
    _v("speculative_eagle_topk", "int", flags=("--speculative-eagle-topk",), unset=None),
    _v("speculative_num_draft_tokens", "int", flags=("--speculative-num-draft-tokens",), unset=None),
    _v("speculative_draft_model_path", "str", flags=("--speculative-draft-model-path", "--speculative-draft-model"), unset=None,
       dest=("unit",)),
    _v("speculative_adaptive", "bool", False, flags=("--speculative-adaptive",), unset=False),
    _v("speculative_adaptive_config", "dict", {}, flags=("--speculative-adaptive-config",), unset=None),
    _v("speculative_from_decision", "bool", False),
    _v("speculative_decision_path", "str", "{{ sglang_server_config_dir }}/{{ sglang_server_name }}.spec_decision.json"),
    _v("spec_v2", "bool", unset=None),
    _v("mamba_strategy", "str", flags=("--mamba-radix-cache-strategy",), unset=None),
    _v("mamba_track_interval", "int", flags=("--mamba-track-interval",), unset=None),
    _v("max_running_requests", "int", flags=("--max-running-requests",), unset=None),
    _v("attention_backend", "str", flags=("--attention-backend",), unset=None),
    _v("cuda_graph_max_bs", "int", flags=("--cuda-graph-max-bs-decode",), unset=None),
    _v("cuda_graph_max_bs_prefill", "int", flags=("--cuda-graph-max-bs-prefill",), unset=None),
    _v("disable_cuda_graph", "bool", False, flags=("--disable-cuda-graph",), unset=False),
    _v("mem_fraction_static", "float", flags=("--mem-fraction-static",), unset=None),
    _v("context_length", "int", flags=("--context-length",), unset=None),
    _v("chunked_prefill_size", "int", flags=("--chunked-prefill-size",), unset=None),
    _v("kv_cache_dtype", "str", flags=("--kv-cache-dtype",), unset=None),
    _v("page_size", "int", flags=("--page-size",), unset=None),
    _v("disable_radix_cache", "bool", False, flags=("--disable-radix-cache",), unset=False),
    _v("disable_custom_all_reduce", "bool", flags=("--disable-custom-all-reduce",), unset=None),
    _v("custom_all_reduce_force", "bool", False, unset=False),
    _v("enable_metrics", "bool", True, flags=("--enable-metrics",), unset=False),
    _v("decode_log_interval", "int", 40, flags=("--decode-log-interval",), unset=None),
    _v("reasoning_parser", "str", flags=("--reasoning-parser",), unset=None),
    _v("tool_call_parser", "str", flags=("--tool-call-parser",), unset=None),
    _v("trust_remote_code", "bool", False, flags=("--trust-remote-code",), unset=False),
    _v("watchdog_timeout", "int", flags=("--watchdog-timeout",), unset=None),
    _v("log_level", "str", flags=("--log-level",), unset=None),
    _v("api_key", "str", "", flags=("--api-key",), unset=None, dest=("secret",), env="SGLANG_SERVER_API_KEY"),
    _v("hf_token", "str", "", unset=None, dest=("secret",), env="HF_TOKEN"),
    _v("extra_args", "list", [], elements="str", unset=None, dest=("argv",)),
    _v("extra_env", "dict", {}, unset=None, dest=("env_file",)),
    # ---- router
    _v("router_name", "str", "sglang-router", fp=False),
    _v("router_port", "int", 30001, fp=False),
    _v("router_policy", "str", "cache_aware", choices=("cache_aware", "round_robin", "random", "power_of_two"), fp=False),
    _v("router_extra_args", "list", [], elements="str", fp=False),
    _v("ulimits", "list", ["memlock=-1", "stack=67108864"], elements="str", dest=("argv",)),
    _v("ready_max_restarts", "int", 2, fp=False),
)

BY_NAME = dict((v.name, v) for v in VARIABLES)

#: The renderer's options (the server description's keys without the prefix): ``{key: (type, unset)}``.
OPTIONS = collections.OrderedDict((v.name[len(PREFIX):], (v.type, v.unset)) for v in VARIABLES if v.unset != NOT_AN_OPTION)

#: Every flag the renderer owns, with the option behind it: ``{"--tp-size": "tp_size", "--tp": "tp_size", ...}``.
MANAGED_FLAGS = dict((flag, v.name[len(PREFIX):]) for v in VARIABLES for flag in v.flags)

#: Keys of the description dict handed to the renderer: the options, and version_force (the version rule).
DESCRIPTION_KEYS = tuple(OPTIONS) + ("version_force",)

#: The speculative options a tuning decision (sglang_server_speculative_from_decision) replaces.
SPECULATIVE_KEYS = tuple(k for k in OPTIONS if k.startswith("speculative_"))

#: Description keys never published or logged (their destination is the secret file).
SECRET_KEYS = tuple(v.name[len(PREFIX):] for v in VARIABLES if "secret" in v.destinations)


def names(kind="all"):
    """Role variable names (prefixed) of one kind, in table order.

    :param kind: ``all``, ``option`` (the renderer's options), ``fingerprinted``, ``destination`` (any destination), or
        one of :data:`DESTINATION_KINDS`.
    :raises ValueError: an unknown kind.
    """
    if kind == "all":
        return [v.name for v in VARIABLES]
    if kind == "option":
        return [v.name for v in VARIABLES if v.unset != NOT_AN_OPTION]
    if kind == "fingerprinted":
        return [v.name for v in VARIABLES if v.fingerprinted]
    if kind == "destination":
        return [v.name for v in VARIABLES if v.destinations]
    if kind in DESTINATION_KINDS:
        return [v.name for v in VARIABLES if kind in v.destinations]
    raise ValueError("unknown kind %r: use all, option, fingerprinted, destination or one of %s" % (kind, ", ".join(DESTINATION_KINDS)))


def _missing(inputs, wanted):
    missing = [name for name in wanted if name not in inputs]
    if missing:
        raise ValueError("the role's variables are missing %s (pass every name of names('all'))" % ", ".join(missing))


def server_description(inputs, speculative=None, multinode=None):
    """The server description handed to the renderer, from the role's variables.

    :param inputs: dict of role variables (prefixed names; every option and ``sglang_server_version_force`` present).
    :param speculative: the speculative settings of the tuning decision served (``sglang_server__tuned``):
        ``{speculative_algorithm, speculative_num_steps, ...}``; ``None``/``{}`` = the inputs' (the inventory's).
        Keys other than :data:`SPECULATIVE_KEYS` (the decision's ``arm``, ``time``, ``path``) are ignored.
    :param multinode: ``sglang_server__multinode`` (``{nnodes, node_rank, dist_init_addr}`` computed from the inventory
        group) or ``{}``.
    :returns: ``{key: value}`` for :data:`DESCRIPTION_KEYS` (keys without the prefix).
    :raises ValueError: a description key missing from ``inputs``.
    """
    inputs = dict(inputs or {})
    _missing(inputs, [PREFIX + k for k in DESCRIPTION_KEYS])
    out = collections.OrderedDict((k, inputs[PREFIX + k]) for k in DESCRIPTION_KEYS)
    if speculative:
        for key in SPECULATIVE_KEYS:
            out[key] = speculative.get(key)
    for key, value in (multinode or {}).items():
        if key in out:
            out[key] = value
    return dict(out)


def destination_values(inputs, description=None):
    """The values :func:`.quoting.server_destinations` checks: every variable with a destination, the description's
    value where the description overrides it (a tuned draft model path, a multi-node dist-init address).

    :param inputs: dict of role variables (prefixed names); missing ones are left out.
    :param description: the result of :func:`server_description`, or ``None``.
    """
    description = description or {}
    out = {}
    for name in names("destination"):
        key = name[len(PREFIX):]
        if key in description:
            out[name] = description[key]
        elif name in inputs:
            out[name] = inputs[name]
    return out


def validation_key(inputs, description, context=None, tuned=None):
    """What ``tasks/validate.yml``'s checks and render depend on, as one SHA-256 hex digest (no value kept).

    :param inputs: dict of role variables (prefixed names); every ``fingerprinted`` variable must be present (the
        version among them), so a row added to the table is in the key without anyone assembling it.
    :param description: the resolved description (:func:`server_description`: the tuned and multi-node values).
    :param context: the renderer's context (GPU facts, NCCL decision; ``sglang_context``).
    :param tuned: the tuning decision read on the host (``sglang_server__tuned``) or ``{}``.
    :raises ValueError: a fingerprinted variable missing from ``inputs``.
    """
    inputs = dict(inputs or {})
    wanted = names("fingerprinted")
    _missing(inputs, wanted)
    payload = {"inputs": dict((name, inputs[name]) for name in wanted), "description": description,
               "context": context, "tuned": tuned or {}}
    return hashlib.sha256(json.dumps(_string_keys(payload), sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _string_keys(value):
    """``value`` with every mapping key as a string (a YAML table such as the adaptive one mixes ``1:`` and ``ema_alpha:``,
    which ``sort_keys`` cannot order)."""
    if isinstance(value, dict):
        return dict((str(k), _string_keys(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_string_keys(v) for v in value]
    return value
