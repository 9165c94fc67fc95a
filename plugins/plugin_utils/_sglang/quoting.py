# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Destination checks and quoting: every value that reaches a systemd unit, an environment file, a container
argument or a shell goes through one of these functions, which refuse what the destination cannot carry and
quote the rest the way the destination reads it.

Pure Python (standard library only), used by the filters in ``plugins/filter/sglang_server.py``
(``sglang_unit_value``, ``sglang_unit_environment``, ``sglang_env_file``, ``sglang_systemd_env_file``,
``sglang_image_check``, ``sglang_server_destinations``), by ``sglang_args.render_container`` and
``sglang_args.systemd_exec``, and by the role ``llmops.sglang.sglang_server`` (``tasks/validate.yml``, which
preflight runs before any change, and the three templates).

Destinations and their rules (where each rule comes from):

* systemd unit lines (``Description=``, ``Environment=``, ``ExecStart=``; systemd.syntax(7), systemd.service(5)
  "Command lines", systemd.exec(5) ``Environment=``): one setting per line, so no control character
  (a newline would start a new directive such as ``ExecStartPre=``); ``%`` is a specifier and is doubled;
  ``Environment=`` is one double-quoted word with ``\\`` and ``"`` escaped.
* systemd ``EnvironmentFile=`` (the 0600 secret file; systemd.exec(5)): ``NAME=value`` per line; values are
  written bare when they hold only safe characters, else single-quoted (literal), else double-quoted with
  ``\\ " $ ``` escaped. No control character (a newline would add a variable, e.g. a second ``HF_TOKEN=``).
* podman/docker ``--env-file`` (containers/common ``pkg/env`` ParseFile, docker ``opts/envfile.go``):
  ``NAME=value`` per line, the value taken literally (no quote removal), so no control character and no
  quoting; names are ``[A-Za-z_][A-Za-z0-9_]*``.
* container arguments (argv of ``podman run``; each item is one ``ExecStart=`` word quoted by
  ``sglang_args.systemd_quote``): no control character.
* image references (distribution/reference grammar, the one podman and docker parse):
  ``[host[:port]/]path[:tag][@sha256:<64 hex>]``; a floating tag (none, ``latest``, ``nightly``, ``dev``,
  ``main``) is refused unless ``sglang_server_image_force``.

Errors: :class:`DestinationError` (a ``ValueError``) whose message is
``"<variable>=<value>: <reason>. Fix: <fix>"``; secret values are never printed, only a redacted description
(length and the position of the offending character).
"""

from __future__ import annotations

import re

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.description import (
    BY_NAME as VARIABLE_TABLE,
    destination_values,
    names as table_names,
)

#: Control characters (C0, DEL): no destination above can carry them.
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Characters written bare in a systemd EnvironmentFile (everything else is quoted).
_ENVFILE_SAFE_RE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]*$")
#: Tags that name a moving target (the image behind them changes without the inventory changing).
FLOATING_TAGS = ("latest", "nightly", "dev", "main", "edge", "stable")

# distribution/reference (reference/regexp.go): domain, path components, tag, digest.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = r"(?:%s(?:\.%s)*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?" % (_DOMAIN_COMPONENT, _DOMAIN_COMPONENT)
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_RE = re.compile(r"^(?:(?P<domain>%s)/)?(?P<path>%s(?:/%s)*)(?::(?P<tag>%s))?(?:@(?P<digest>%s))?$"
                      % (_DOMAIN, _PATH_COMPONENT, _PATH_COMPONENT, _TAG, _DIGEST))


class DestinationError(ValueError):
    """A value its destination cannot carry safely.

    Attributes: ``variable``, ``value`` (redacted for secrets), ``reason``, ``fix``. ``str(err)`` is
    ``"<variable>=<value>: <reason>. Fix: <fix>"`` (the shape of ``sglang_args.SGLangArgsError``).
    """

    def __init__(self, variable, value, reason, fix, secret=False):
        self.variable = variable
        self.value = redact(value) if secret else value
        self.reason = reason
        self.fix = fix
        shown = self.value if secret else repr(value)
        super(DestinationError, self).__init__("%s=%s: %s. Fix: %s" % (variable, shown, reason, fix))


def redact(value):
    """A description of a secret that names no character of it: ``<redacted: 40 characters, newline at 12>``."""
    text = "" if value is None else str(value)
    match = CONTROL_RE.search(text)
    where = ""
    if match:
        where = ", %s at %d" % (_char_name(match.group(0)), match.start())
    return "<redacted: %d characters%s>" % (len(text), where)


def _char_name(char):
    return {"\n": "newline", "\r": "carriage return", "\t": "tab", "\x00": "NUL"}.get(char, "control character 0x%02x" % ord(char))


def check_text(variable, value, destination, secret=False):
    """Refuse control characters in ``value`` bound for ``destination`` (e.g. ``"the systemd unit"``).

    :returns: ``value`` as str (``""`` for None).
    :raises DestinationError: naming ``variable``, the character and its position.
    """
    text = "" if value is None else str(value)
    match = CONTROL_RE.search(text)
    if match:
        raise DestinationError(
            variable, text, "contains a %s at position %d; %s is line based, so it would end the line there and the rest "
            "would be read as a new line (a new directive or variable)" % (_char_name(match.group(0)), match.start(), destination),
            "remove the %s (check how the value was quoted in the inventory or -e)" % _char_name(match.group(0)), secret=secret)
    return text


def check_argv(variable, argv):
    """Every item of a container argv is free of control characters. :returns: ``argv`` as a list of str."""
    return [check_text(variable, item, "a systemd ExecStart= command line") for item in (argv or [])]


def unit_value(value, variable):
    """A value inside a unit line such as ``Description=``: no control character, ``%`` doubled (specifier).

    :returns: the escaped text. :raises DestinationError: on a control character.
    """
    return check_text(variable, value, "the systemd unit").replace("%", "%%")


def unit_environment(name, value, variable):
    """One ``Environment=`` assignment, as the double-quoted word systemd.exec(5) reads.

    ``\\`` and ``"`` are backslash-escaped, ``%`` is doubled; ``$`` needs nothing (no expansion in Environment=).
    :returns: ``"NAME=value"`` with the quotes. :raises DestinationError: bad name or control character.
    """
    name = str(name)
    if not ENV_NAME_RE.match(name):
        raise DestinationError(variable, name, "not a valid environment variable name", "use letters, digits and _ (not starting with a digit)")
    text = check_text(variable, value, "the systemd unit")
    body = ("%s=%s" % (name, text)).replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return '"%s"' % body


def env_file(env, variable):
    """Lines of a podman/docker ``--env-file`` (values literal: neither engine removes quotes).

    :param env: dict NAME -> value (str). :returns: list of ``NAME=value`` lines, sorted by name.
    :raises DestinationError: a bad name or a control character in a value.
    """
    lines = []
    for name in sorted(env or {}):
        if not ENV_NAME_RE.match(str(name)):
            raise DestinationError(variable, name, "not a valid environment variable name", "use letters, digits and _ (not starting with a digit)")
        value = check_text("%s.%s" % (variable, name), env[name], "an --env-file of the container engine")
        lines.append("%s=%s" % (name, value))
    return lines


def systemd_env_value(value):
    """Quote a value for a systemd EnvironmentFile: bare, 'single-quoted' (literal) or "double-quoted" with escapes."""
    text = str(value)
    if _ENVFILE_SAFE_RE.match(text):
        return text
    if "'" not in text:
        return "'%s'" % text
    return '"%s"' % re.sub(r'([\\"$`])', r"\\\1", text)


def systemd_env_file(env, variables):
    """Lines of a systemd ``EnvironmentFile=`` holding secrets.

    :param env: dict NAME -> secret value. :param variables: dict NAME -> inventory variable (for messages).
    :returns: list of ``NAME=<quoted value>`` lines, sorted. :raises DestinationError: redacted, naming the variable.
    """
    lines = []
    for name in sorted(env or {}):
        variable = (variables or {}).get(name, name)
        if not ENV_NAME_RE.match(str(name)):
            raise DestinationError(variable, name, "not a valid environment variable name", "use letters, digits and _")
        text = check_text(variable, env[name], "the secret EnvironmentFile", secret=True)
        lines.append("%s=%s" % (name, systemd_env_value(text)))
    return lines


def image_reference(image, variable="sglang_server_image", force=False):
    """Check a container image reference and that it is pinned.

    :returns: dict ``{"domain", "path", "tag", "digest", "pinned"}``.
    :raises DestinationError: "invalid image reference" when the grammar does not match (spaces, upper case in the
        path, a bad tag); "not pinned" for no tag, or a floating tag, unless ``force``.
    """
    text = "" if image is None else str(image)
    match = IMAGE_RE.match(text)
    if not text or not match:
        raise DestinationError(variable, text, "invalid image reference (the form is [registry[:port]/]repository[:tag][@sha256:<64 hex>], "
                               "lower-case repository, no spaces)", "e.g. lmsysorg/sglang:v0.5.9-cu130-runtime")
    parts = match.groupdict()
    pinned = bool(parts["digest"]) or (parts["tag"] is not None and parts["tag"].lower() not in FLOATING_TAGS)
    if not pinned and not force:
        what = "has no tag (podman and docker pull :latest)" if parts["tag"] is None else "uses the floating tag :%s" % parts["tag"]
        raise DestinationError(variable, text, "the image %s, so hosts and restarts may run different SGLang builds" % what,
                               "pin a version tag or a digest (e.g. lmsysorg/sglang:v0.5.9-cu130-runtime or repo@sha256:...), or set "
                               "sglang_server_image_force: true for a locally built image")
    parts["pinned"] = pinned
    return parts


_SAFE_PATH_RE = re.compile(r"^/[A-Za-z0-9._+@/-]*$")
_VERSION_TEXT_RE = re.compile(r"^v?\d+\.\d+(?:\.\d+)?(?:[.+-]?[A-Za-z0-9]+)*$")


def version_text(version, variable="sglang_server_version"):
    """The version string as written in the unit's comment and Description=: ``0.5.9``, ``v0.5.10.post1``, ``0.5.12rc0``.

    :raises DestinationError: anything else (a newline, spaces).
    """
    text = "" if version is None else str(version).strip()
    if not _VERSION_TEXT_RE.match(text):
        raise DestinationError(variable, version, "not an SGLang version (MAJOR.MINOR.PATCH with an optional suffix such as .post1)",
                               "set it to the version inside sglang_server_image, e.g. \"0.5.9\"")
    return text


def server_destinations(values, description=None):
    """Check every sglang_server_* value that reaches the unit, the env files or the container argv.

    Which variable gets which check comes from the role's variable table (``_sglang/description.py``, its
    ``destinations`` column): ``version`` (the version text), ``image`` (the reference; ``sglang_server_image_force``
    accepts a floating tag), ``unit`` (a line of the unit: no control character), ``path`` (an absolute path of safe
    characters), ``argv`` (a list of argv items), ``unit_env`` (``Environment=``), ``env_file`` (the container
    ``--env-file``), ``secret`` (the 0600 ``EnvironmentFile=``, redacted in a refusal).

    :param values: dict of role variables (``sglang_server_name``, ``..._image``, ``..._model_path``, ...; the table's
        variables with a destination). Missing keys are skipped.
    :param description: the server description (``description.server_description``), whose values replace the
        variables' where it overrides them (a tuned draft model path, a multi-node dist-init address); ``None`` = none.
    :returns: ``{"image": <image_reference()>}``.
    :raises DestinationError: the first value its destination cannot carry.
    """
    v = dict(values or {})
    if description:
        v.update(destination_values(v, description))
    out = {}
    for key in table_names("version"):
        if key in v:
            version_text(v[key], key)
    if "sglang_server_image" in v:
        out["image"] = image_reference(v["sglang_server_image"], force=_truthy(v.get("sglang_server_image_force")))
    for key in table_names("unit"):
        if v.get(key) is not None:
            check_text(key, v[key], "the systemd unit")
    for key in table_names("path"):
        text = str(v.get(key) or "")
        if text and not _SAFE_PATH_RE.match(text):
            raise DestinationError(key, text, "must be an absolute path of letters, digits and . _ + @ - / only (it is written into "
                                   "ExecStart=, a shell command of ExecStartPre= and the engine's -v/--env-file options, where ':' and ',' "
                                   "separate fields and spaces split words)", "use a path such as /var/lib/sglang")
    for key in table_names("argv"):
        items = v.get(key)
        if items is not None and not isinstance(items, str):
            check_argv(key, items)
    for key in table_names("unit_env"):
        for name, value in sorted((v.get(key) or {}).items()):
            unit_environment(name, value, key)
    for key in table_names("env_file"):
        if v.get(key):
            env_file(v[key], key)
    secret_vars = dict((VARIABLE_TABLE[key].env, key) for key in table_names("secret"))
    secrets = dict((name, v[key]) for name, key in secret_vars.items() if v.get(key))
    systemd_env_file(secrets, secret_vars)
    return out


def _truthy(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "on", "1")


def gpu_indices(gpus):
    """``sglang_server_gpus`` as GPU indices: None for all GPUs (None, ``"all"``, ``["all"]``), else a list of ints.

    :param gpus: ``"all"``, a list of indices (ints or digit strings) or a comma-separated string of them.
    :raises ValueError: an item that is not a whole number.
    """
    if gpus in (None, "all", ["all"]):
        return None
    items = gpus if isinstance(gpus, (list, tuple)) else str(gpus).split(",")
    return [int(str(i).strip()) for i in items]


def check_gpus(gpus, gpu_count=None, gpu_mode="cdi", cdi_devices=None, variable="sglang_server_gpus"):
    """Check ``sglang_server_gpus`` against the host before the unit changes.

    :param gpus: ``"all"`` or a list of GPU indices (ints or digit strings).
    :param gpu_count: GPUs gpu_facts found on the host (``ansible_facts.llmops_gpu.gpu_count``), or None (unknown: skipped).
    :param gpu_mode: ``cdi`` | ``gpus`` | ``none``.
    :param cdi_devices: device names of the host's CDI specs (``nvidia-ctk cdi list`` stdout lines such as
        ``nvidia.com/gpu=0``), or None (not read: skipped). Only used with ``gpu_mode == "cdi"``.
    :returns: the list of ``--device`` names the unit will ask for (``["nvidia.com/gpu=all"]`` or one per index).
    :raises DestinationError: not a list of indices, a duplicate, an index outside ``0..gpu_count-1``, or a CDI
        device the spec does not define (podman would fail with "unresolvable CDI devices" after the old server stopped).
    """
    try:
        indices = gpu_indices(gpus)
    except ValueError:
        raise DestinationError(variable, gpus, "must be 'all' or a list of GPU indices", "e.g. [0, 1, 2, 3]")
    if indices is not None:
        if not indices or len(set(indices)) != len(indices) or min(indices) < 0:
            raise DestinationError(variable, gpus, "GPU indices must be a non-empty list of distinct indices >= 0", "e.g. [0, 1, 2, 3]")
        if gpu_count is not None and int(gpu_count) > 0 and max(indices) >= int(gpu_count):
            raise DestinationError(variable, gpus, "index %d does not exist: gpu_facts found %d GPU(s) on this host (indices 0..%d)"
                                   % (max(indices), int(gpu_count), int(gpu_count) - 1),
                                   "use indices 0..%d, or 'all'" % (int(gpu_count) - 1))
    devices = ["nvidia.com/gpu=%s" % d for d in (["all"] if indices is None else indices)]
    if gpu_mode == "cdi" and cdi_devices is not None:
        known = set(str(x).strip() for x in cdi_devices if str(x).strip())
        missing = [d for d in devices if d not in known]
        if missing:
            raise DestinationError(variable, gpus, "the host's CDI spec does not define %s (it defines: %s); podman would refuse to start "
                                   "the container (unresolvable CDI devices)" % (", ".join(missing), ", ".join(sorted(known)) or "nothing"),
                                   "pick devices the spec defines, or regenerate it with nvidia-ctk cdi generate (llmops.sglang.nvidia_driver)")
    return devices
