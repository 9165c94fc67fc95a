# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""The systemd reads of the target side, parsed once in Python: ``systemctl show`` output, the state of a unit
(ActiveState, SubState, NRestarts) and the systemd EnvironmentFile the sglang_server role writes (its 0600 secret file).

Stdlib only; runs on the target inside a module (``llmops.sglang.sglang_ready``).
"""
from __future__ import annotations

#: The properties :func:`unit_state` asks ``systemctl show`` for.
UNIT_STATE_PROPERTIES = ("ActiveState", "SubState", "NRestarts")


def parse_systemctl_show(text):
    """``{property: value}`` of the text ``systemctl show UNIT [-p NAME ...]`` prints (one ``NAME=value`` a line).

    ``text``: str. Lines without ``=`` (blank lines, systemctl's messages) are skipped; a value keeps everything after
    the first ``=`` (``Environment=A=1 B=2`` gives ``{"Environment": "A=1 B=2"}``), stripped of surrounding blanks;
    a property printed twice keeps its last value. An ``Exec*`` value that opens ``{`` and does not close ``}`` on its
    line (systemd prints ``ExecStart={ path=... ; argv[]=... }`` over several lines) is joined with the following lines,
    up to the one ending ``}``, by single newlines. Never raises for any str input; values stay str (``NRestarts="3"``).
    """
    parsed = {}
    name, pending = None, []
    for line in (text or "").splitlines():
        if name is not None:
            pending.append(line)
            if line.rstrip().endswith("}"):
                parsed[name] = "\n".join(pending).strip()
                name, pending = None, []
            continue
        if "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip()
        if key.startswith("Exec") and value.lstrip().startswith("{") and not value.rstrip().endswith("}"):
            name, pending = key, [value]
            continue
        parsed[key] = value.strip()
    if name is not None:  # an unterminated multi-line value: keep what came
        parsed[name] = "\n".join(pending).strip()
    return parsed


def unit_state_from_show(props):
    """``{"active_state", "sub_state", "restarts"}`` of parsed ``systemctl show`` properties (see :func:`parse_systemctl_show`).

    ``active_state``: ActiveState, ``"unknown"`` when absent or empty; ``sub_state``: SubState, ``""`` when absent;
    ``restarts``: NRestarts as int (the unit's automatic restarts since it was last started by hand), 0 when absent,
    empty or not a number (systemd older than 235 has no NRestarts).
    """
    try:
        restarts = int(props.get("NRestarts") or 0)
    except ValueError:
        restarts = 0
    return {"active_state": props.get("ActiveState") or "unknown", "sub_state": props.get("SubState", ""), "restarts": restarts}


def unit_state(run_command, unit):
    """The state of ``unit`` now, as :func:`unit_state_from_show` gives it.

    ``run_command``: a callable ``argv list -> (rc, stdout, stderr)`` (``AnsibleModule.run_command``). A ``systemctl`` that
    fails (rc != 0, not installed) gives ``{"active_state": "unknown", "sub_state": "", "restarts": 0}``; never raises.
    """
    argv = ["systemctl", "show", unit] + ["--property=%s" % p for p in UNIT_STATE_PROPERTIES]
    try:
        rc, out, dummy = run_command(argv)
    except (OSError, ValueError):
        rc, out = 1, ""
    if rc != 0:
        out = ""
    return unit_state_from_show(parse_systemctl_show(out))


def unquote_env_value(value):
    r"""Undo the quoting of a systemd EnvironmentFile value as the sglang_server role writes it (``systemd_env_value``).

    ``'single'`` is literal; ``"double"`` drops the backslash before any character (``\\ \" \$ \``` ...); anything else is
    returned as it is. ``value``: str; returns str.
    """
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        out, i, body = [], 0, value[1:-1]
        while i < len(body):
            if body[i] == "\\" and i + 1 < len(body):
                i += 1
            out.append(body[i])
            i += 1
        return "".join(out)
    return value


def read_env_file(path):
    """``{NAME: value}`` of a systemd EnvironmentFile at ``path`` (str), values unquoted by :func:`unquote_env_value`.

    Blank lines, ``#`` comments and lines without ``=`` are skipped. A file that does not exist gives ``{}``; a file
    that exists but cannot be read raises OSError (the caller names the path and the fix).
    """
    out = {}
    try:
        handle = open(path)
    except FileNotFoundError:
        return {}
    with handle:
        for line in handle:
            line = line.rstrip("\n")
            if not line or line.lstrip().startswith("#") or "=" not in line:
                continue
            name, value = line.split("=", 1)
            out[name.strip()] = unquote_env_value(value)
    return out
