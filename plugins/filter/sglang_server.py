# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin Jinja2 filters over ``plugins/plugin_utils/_sglang/launch.py`` (the one SGLang launch-argument renderer).

* ``description | llmops.sglang.sglang_launch(version, context)`` ->
  ``{version, profile, argv, env, secret_env, warnings, decisions, expected, adaptive_config}``
* ``description | llmops.sglang.sglang_expected_server_args(version, context)`` -> what ``/server_info`` must report
* ``argv | llmops.sglang.sglang_systemd_exec`` -> one systemd ``ExecStart=`` command line
* ``worker_urls | llmops.sglang.sglang_router_launch(port, policy)`` -> router argv
* ``launch | llmops.sglang.sglang_container_argv(name, image, engine=..., gpu_mode=..., ...)`` -> podman/docker run argv
* ``ansible_facts | llmops.sglang.sglang_context(nccl_p2p_decision, in_container)`` -> the renderer's context

Destination checks and quoting (``plugins/plugin_utils/_sglang/quoting.py``), used by the role's templates and by
``tasks/validate.yml`` before any change:

* ``value | llmops.sglang.sglang_unit_value(variable)`` -> text for a unit line (no control character, ``%%`` escaped)
* ``dict | llmops.sglang.sglang_unit_environment(variable)`` -> list of quoted ``"NAME=value"`` words for ``Environment=``
* ``env | llmops.sglang.sglang_env_file(variable)`` -> lines of a podman/docker ``--env-file``
* ``secret_env | llmops.sglang.sglang_systemd_env_file(variables)`` -> lines of the 0600 systemd ``EnvironmentFile=``
* ``image | llmops.sglang.sglang_image_check(force)`` -> ``{domain, path, tag, digest, pinned}``
* ``vars_dict | llmops.sglang.sglang_server_destinations(description)`` -> checks every sglang_server_* value for its
  destination
* ``gpus | llmops.sglang.sglang_gpu_check(gpu_count, gpu_mode, cdi_devices)`` -> the --device names, checked against the host

The role's one variable table (``plugins/plugin_utils/_sglang/description.py``), read by ``vars/main.yml``:

* ``kind | llmops.sglang.sglang_server_variables`` -> the role's variable names of one kind (all, option, fingerprinted,
  destination, or a destination kind)
* ``vars_dict | llmops.sglang.sglang_server_description(speculative, multinode)`` -> the renderer's server description
* ``vars_dict | llmops.sglang.sglang_server_validation_key(description, context, tuned)`` -> the validation key

Refusals raise ``AnsibleFilterError`` whose message is the renderer's: variable, value, reason, fix.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import description as _description
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.quoting import (
    DestinationError,
    check_gpus,
    env_file,
    image_reference,
    server_destinations,
    systemd_env_file,
    unit_environment,
    unit_value,
)
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.launch import (
    SGLangArgsError,
    expected_server_args,
    render_container,
    render_launch,
    render_router,
    systemd_exec,
)


def _wrap(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except (SGLangArgsError, DestinationError) as exc:
        raise AnsibleFilterError("sglang_server: %s" % exc)


def sglang_launch(description, version=None, context=None, tuned=None, multinode=None):
    """Render argv/env/warnings/decisions for a server description (see launch.render_launch).

    With ``tuned`` or ``multinode`` given (``{}`` counts), ``description`` is the role's variables (every name of the
    role's variable table) and the description is taken from them first (description.server_description), in the same call.
    """
    if tuned is not None or multinode is not None:
        description = _table(_description.server_description, description, tuned, multinode)
    return _wrap(render_launch, description, version, context)


def sglang_expected_server_args(description, version=None, context=None):
    """Effective server args SGLang will report in /server_info (NEXTN -> EAGLE etc.)."""
    return _wrap(expected_server_args, description, version, context)


def sglang_systemd_exec(argv):
    """Quote an argv list into one systemd ExecStart= command line."""
    if not isinstance(argv, (list, tuple)):
        raise AnsibleFilterError("sglang_systemd_exec expects a list of argv items, got %r" % (argv,))
    return systemd_exec(argv)


def sglang_router_launch(worker_urls, port=30001, policy="cache_aware", extra_args=None):
    """argv of sglang_router.launch_router in front of the replicas."""
    return _wrap(render_router, worker_urls, port=port, policy=policy, extra_args=extra_args)


def sglang_container_argv(launch, name, image, **options):
    """argv of podman/docker run for the rendered launch (see sglang_args.render_container for the options)."""
    return _wrap(render_container, launch, name, image, **options)


def sglang_context(facts, nccl_p2p_decision=None, in_container=True):
    """Build the renderer's context from ``ansible_facts`` (uses ``ansible_facts.llmops_gpu`` when gpu_facts ran).

    :param facts: the host's ansible_facts (a dict; may lack llmops_gpu).
    :param nccl_p2p_decision: the nccl role's fact, or None.
    :param in_container: SGLang runs in a container (renders --host 0.0.0.0).
    """
    facts = facts if isinstance(facts, dict) else {}
    gpu = facts.get("llmops_gpu") if isinstance(facts.get("llmops_gpu"), dict) else None
    return {"llmops_gpu": gpu, "in_container": bool(in_container),
            "nccl_p2p_decision": nccl_p2p_decision if isinstance(nccl_p2p_decision, dict) else None}


def sglang_unit_value(value, variable):
    """Text for a systemd unit line (Description=, a comment): control characters refused, ``%`` doubled."""
    return _wrap(unit_value, value, variable)


def sglang_unit_environment(env, variable="sglang_server_unit_environment"):
    """List of ``"NAME=value"`` words (quoted for systemd Environment=), sorted by name."""
    return [_wrap(unit_environment, k, (env or {})[k], variable) for k in sorted(env or {})]


def sglang_env_file(env, variable="sglang_server_extra_env"):
    """Lines ``NAME=value`` of a podman/docker --env-file (values literal); refuses control characters."""
    return _wrap(env_file, env, variable)


def sglang_systemd_env_file(env, variables=None):
    """Lines ``NAME=<quoted>`` of a systemd EnvironmentFile holding secrets; messages are redacted."""
    return _wrap(systemd_env_file, env, variables)


def sglang_image_check(image, force=False, variable="sglang_server_image"):
    """Parse and check an image reference: ``{domain, path, tag, digest, pinned}``; floating tags refused unless force."""
    return _wrap(image_reference, image, variable, force)


def sglang_server_destinations(values, description=None):
    """Check every sglang_server_* value for its destination (unit, env files, container argv); returns ``{image}``.

    ``description`` (the server description) overrides the variables it resolves (tuned, multi-node)."""
    return _wrap(server_destinations, values, description)


def _table(func, *args):
    try:
        return func(*args)
    except ValueError as exc:
        raise AnsibleFilterError("sglang_server: %s" % exc)


def sglang_server_variables(kind="all"):
    """The role's variable names of one kind, from its one table (see description.names)."""
    return _table(_description.names, kind)


def sglang_server_description(values, speculative=None, multinode=None):
    """The server description for the renderer, from the role's variables (see description.server_description)."""
    return _table(_description.server_description, values, speculative, multinode)


def sglang_server_validation_key(values, description, context=None, tuned=None):
    """The SHA-256 of every fingerprinted variable, the description, the context and the decision (description.validation_key)."""
    return _table(_description.validation_key, values, description, context, tuned)


def sglang_gpu_check(gpus, gpu_count=None, gpu_mode="cdi", cdi_devices=None):
    """Check sglang_server_gpus against gpu_facts' GPU count and the CDI spec; returns the --device names."""
    return _wrap(check_gpus, gpus, gpu_count, gpu_mode, cdi_devices)


class FilterModule(object):
    """llmops.sglang filters over the SGLang launch-argument renderer."""

    def filters(self):
        return {
            "sglang_launch": sglang_launch,
            "sglang_expected_server_args": sglang_expected_server_args,
            "sglang_systemd_exec": sglang_systemd_exec,
            "sglang_router_launch": sglang_router_launch,
            "sglang_context": sglang_context,
            "sglang_container_argv": sglang_container_argv,
            "sglang_unit_value": sglang_unit_value,
            "sglang_unit_environment": sglang_unit_environment,
            "sglang_env_file": sglang_env_file,
            "sglang_systemd_env_file": sglang_systemd_env_file,
            "sglang_image_check": sglang_image_check,
            "sglang_server_destinations": sglang_server_destinations,
            "sglang_gpu_check": sglang_gpu_check,
            "sglang_server_variables": sglang_server_variables,
            "sglang_server_description": sglang_server_description,
            "sglang_server_validation_key": sglang_server_validation_key,
        }
