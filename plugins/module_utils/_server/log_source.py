# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""THE reader of a running SGLang server's log text, for every module that reads it (speculative_check,
production_concurrency). One option set (:data:`LOG_ARGUMENT_SPEC`, documented once in the doc fragment
``llmops.sglang.sglang_log``), one way to bound the read in time and size, one error shape. What the text means is
parsed elsewhere (``logs.py``: one parser per line format).

Where the text comes from (``log_source``):

* ``journald``: ``journalctl --no-pager -o short-iso -u <log_unit> -n <log_max_lines> [--since -<N>s | 'YYYY-MM-DD
  HH:MM:SS']``; ``short-iso`` keeps SGLang's own line text behind the journal's prefix (``logs.split_prefix``);
* ``docker`` / ``podman``: ``<engine> logs --tail <log_max_lines> [--since <N>s | YYYY-MM-DDTHH:MM:SS] <log_container>``;
  both engines write the container's stdout to stdout and its stderr (where SGLang logs) to stderr, so both are read,
  stdout first; an absolute time without a zone is local time for both (docker and podman ``logs --since``);
* ``file``: the newest ``log_max_bytes`` of ``log_path``; the time window is applied to SGLang's own line timestamps
  (``[YYYY-MM-DD HH:MM:SS ...]``, local time): a line without one belongs to the last stamped line before it;
* ``none``: nothing is read.

Whatever the source, at most ``log_max_bytes`` bytes are kept, the newest ones, cut at a line start. ``log_since`` is a
duration back from now (``<N>s``, ``<N>m``, ``<N>h``, ``<N>d``) or a local time ``YYYY-MM-DD HH:MM[:SS]``.
Failures (no such unit or container, a missing binary, an unreadable file) are returned as ``status: error`` with a
message naming the option, the value and the fix; the caller decides whether that is fatal. Nothing here raises for
a failed read.
"""
from __future__ import annotations

import datetime
import os
import re

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.llmops.sglang.plugins.module_utils._server.logs import split_prefix

#: The values of ``log_source``.
LOG_SOURCES = ("none", "journald", "docker", "podman", "file")

#: The option each source needs, and what it names (for the message when it is empty).
NEEDS = {"journald": ("log_unit", "systemd unit"), "docker": ("log_container", "container"),
         "podman": ("log_container", "container"), "file": ("log_path", "log file")}

#: The options of every module that reads the server log (documented in plugins/doc_fragments/sglang_log.py).
LOG_ARGUMENT_SPEC = dict(
    log_source=dict(type="str", default="none", choices=list(LOG_SOURCES)),
    log_unit=dict(type="str", default="sglang-server.service"),
    log_container=dict(type="str", default="sglang-server"),
    log_path=dict(type="path"),
    log_since=dict(type="str"),
    log_max_bytes=dict(type="int", default=8388608),
    log_max_lines=dict(type="int", default=100000),
)

_DURATION_RE = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_ABSOLUTE_RE = re.compile(r"^\s*(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2})?)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def log_argument_spec(**defaults):
    """A copy of :data:`LOG_ARGUMENT_SPEC` for a module's ``argument_spec``, with the given option defaults changed
    (e.g. ``log_since="1h"``; the module documents the changed default). KeyError for an unknown option."""
    spec = dict((name, dict(opt)) for name, opt in LOG_ARGUMENT_SPEC.items())
    for name, value in defaults.items():
        spec[name]["default"] = value
    return spec


def parse_since(value):
    """``log_since`` -> None (unset or empty), ``("relative", seconds)`` or ``("absolute", "YYYY-MM-DD HH:MM:SS")``.

    Raises ValueError naming the option, the value and the accepted forms."""
    if value is None or str(value).strip() == "":
        return None
    m = _DURATION_RE.match(str(value))
    if m:
        return ("relative", int(m.group(1)) * _UNIT_SECONDS[m.group(2)])
    m = _ABSOLUTE_RE.match(str(value))
    if m:
        clock = m.group(2) if m.group(2).count(":") == 2 else m.group(2) + ":00"
        return ("absolute", "%s %s" % (m.group(1), clock))
    raise ValueError("log_since=%r is not a duration like 30m, 2h, 900s, 1d or a local time like '2026-11-20 09:14:00'; "
                     "set it to one of those forms or leave it unset" % (value,))


def window_start(since, now=None):
    """The start of a parsed ``log_since`` window as local time text ``YYYY-MM-DD HH:MM:SS`` (comparable with SGLang's
    line timestamps as text), or None without a window. ``now``: a ``datetime`` (default: the local time now)."""
    if since is None:
        return None
    if since[0] == "absolute":
        return since[1]
    return ((now or datetime.datetime.now()) - datetime.timedelta(seconds=since[1])).strftime(_TIME_FORMAT)


def check_log_options(params):
    """Messages for bad log options in ``params`` (a module's params): the option, the value, why and the fix."""
    errors = []
    src = params.get("log_source") or "none"
    if src in NEEDS and not params.get(NEEDS[src][0]):
        option, what = NEEDS[src]
        errors.append("log_source=%s needs %s (the %s to read); set it or use log_source=none" % (src, option, what))
    try:
        parse_since(params.get("log_since"))
    except ValueError as exc:
        errors.append(str(exc))
    for name in ("log_max_bytes", "log_max_lines"):
        if params.get(name) is not None and params[name] < 1:
            errors.append("%s=%r must be at least 1" % (name, params[name]))
    return errors


def _keep_newest(data, max_bytes, info):
    """The newest ``max_bytes`` of ``data`` (bytes), cut at a line start; fills ``bytes``, ``lines``, ``truncated``."""
    if len(data) > max_bytes:
        data = data[-max_bytes:]
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else data
        info["truncated"] = True
    text = to_text(data, errors="surrogate_or_replace")
    info["bytes"] = len(data)
    info["lines"] = text.count("\n")
    return text


def filter_since(text, start):
    """The lines of ``text`` at or after ``start`` (``YYYY-MM-DD HH:MM:SS``) by SGLang's own line timestamps; a line
    without a timestamp (a traceback, a continuation) goes with the last stamped line before it, and lines before the
    first stamped one are dropped."""
    kept, keep = [], False
    for line in text.splitlines(True):
        stamp = split_prefix(line)["time"]
        if stamp is not None:
            keep = stamp >= start
        if keep:
            kept.append(line)
    return "".join(kept)


def _read_file(params, since, info):
    path = params["log_path"]
    max_bytes = params["log_max_bytes"]
    info["path"] = path
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            handle.seek(max(0, size - max_bytes - 1))
            data = handle.read()
    except (IOError, OSError) as exc:
        info.update(status="error", msg="cannot read log_path=%s: %s; set log_path to the server's log file" % (path, exc))
        return ""
    if size > max_bytes:
        info["truncated"] = True
    text = _keep_newest(data, max_bytes, info)
    if info["since"] is not None:
        text = filter_since(text, info["since"])
        info["lines_in_window"] = text.count("\n")
    info["status"] = "ok"
    return text


def command(params, binary, since):
    """The argv that reads the log of ``params["log_source"]`` (journald, docker or podman) with ``binary``."""
    src = params["log_source"]
    if src == "journald":
        cmd = [binary, "--no-pager", "-o", "short-iso", "-u", params["log_unit"], "-n", str(params["log_max_lines"])]
        if since is not None:
            cmd += ["--since", "-%ds" % since[1] if since[0] == "relative" else since[1]]
        return cmd
    cmd = [binary, "logs", "--tail", str(params["log_max_lines"])]
    if since is not None:
        cmd += ["--since", "%ds" % since[1] if since[0] == "relative" else since[1].replace(" ", "T")]
    return cmd + [params["log_container"]]


def _read_command(module, params, since, info):
    src = params["log_source"]
    name = "journalctl" if src == "journald" else src
    binary = module.get_bin_path(name)
    if not binary:
        info.update(status="error", msg="%s is not installed on this host (log_source=%s); install it or choose another "
                                        "log_source" % (name, src))
        return ""
    cmd = command(params, binary, since)
    info["command"] = cmd
    rc, out, err = module.run_command(cmd, check_rc=False, environ_update={"LC_ALL": "C", "LANGUAGE": "C"})
    info["rc"] = rc
    if rc != 0:
        info.update(status="error", msg="%s exited %d: %s" % (" ".join(cmd), rc, (err or out).strip()[-500:]))
        return ""
    # docker/podman logs write the container's stdout to stdout and its stderr (where SGLang logs) to stderr
    data = (out or "") + ("\n" if out and not out.endswith("\n") else "") + (err or "") if src != "journald" else (out or "")
    text = _keep_newest(data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data, params["log_max_bytes"], info)
    info["status"] = "ok"
    return text


def read_log(module, params, now=None):
    """Read the server log as ``params`` (a module's params with the :data:`LOG_ARGUMENT_SPEC` options) say, through
    ``module`` (``get_bin_path``, ``run_command``).

    Returns ``(text, info)``; ``info``: ``status`` (``ok``, ``error`` or ``skipped`` for ``log_source=none``),
    ``source``, ``since`` (the window's start, local time text, or None), ``truncated`` (the ``log_max_bytes`` cap cut
    older text), and with a read ``bytes``, ``lines``, ``command`` + ``rc`` (journald, docker, podman) or ``path`` (+
    ``lines_in_window`` with a window), or ``msg`` on error. Bad options (see :func:`check_log_options`) are the
    caller's to refuse first; a bad ``log_since`` here gives ``status: error``.
    """
    src = params.get("log_source") or "none"
    info = {"source": src, "since": None, "truncated": False}
    if src == "none":
        info["status"] = "skipped"
        return "", info
    try:
        since = parse_since(params.get("log_since"))
    except ValueError as exc:
        info.update(status="error", msg=str(exc))
        return "", info
    info["since"] = window_start(since, now)
    if src == "file":
        return _read_file(params, since, info), info
    return _read_command(module, params, since, info), info
