# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed state of a host, read once, and what it says about the tasks that would change it.

The nvidia_driver role reads the state of the host in one command (``READ_STATE_SCRIPT``: installed packages,
files, glob matches, systemd units) instead of one task per package, file and unit. The parser below turns
that output into a dict, and the helpers answer the questions the role's ``when`` conditions ask:

- ``packages_missing``: which of the named packages ``package: state=present`` would install. A name that
  carries a version, an architecture, a module stream or a glob (``=<>:@*?[``) is never taken as installed,
  so its task always runs; only plain names reported installed by dpkg/rpm are skipped.
- ``unit_ready``: whether ``systemd_service: enabled=true state=started`` would change nothing (unit file
  state exactly ``enabled`` and active state exactly ``active``).

The helpers only ever say "nothing to do" when the read proves it; anything unknown means "run the task".
"""
from __future__ import annotations

# One POSIX shell program; its arguments are sections: --pkg NAME..., --file PATH..., --glob PATTERN...,
# --unit NAME.... It only reads. Lines: pkg<TAB>name<TAB>status<TAB>version, file<TAB>path<TAB>0|1,
# glob<TAB>pattern<TAB>path (regular files), unit<TAB>name<TAB>load_state<TAB>unit_file_state<TAB>active_state.
READ_STATE_SCRIPT = r"""
mode=
for a in "$@"; do
  case "$a" in
    --pkg|--file|--glob|--unit) mode=$a; continue ;;
  esac
  case "$mode" in
    --pkg)
      if command -v dpkg-query >/dev/null 2>&1; then
        dpkg-query -W -f='pkg\t${Package}\t${db:Status-Status}\t${Version}\n' "$a" 2>/dev/null || true
      elif command -v rpm >/dev/null 2>&1; then
        rpm -q --qf 'pkg\t%{NAME}\tinstalled\t%{VERSION}-%{RELEASE}\n' "$a" 2>/dev/null | grep '^pkg' || true
      fi ;;
    --file)
      if [ -e "$a" ]; then printf 'file\t%s\t1\n' "$a"; else printf 'file\t%s\t0\n' "$a"; fi ;;
    --glob)
      for f in $a; do if [ -f "$f" ]; then printf 'glob\t%s\t%s\n' "$a" "$f"; fi; done ;;
    --unit)
      load=$(systemctl show --property=LoadState --value "$a" 2>/dev/null)
      enabled=$(systemctl is-enabled "$a" 2>/dev/null)
      active=$(systemctl is-active "$a" 2>/dev/null)
      printf 'unit\t%s\t%s\t%s\t%s\n' "$a" "$load" "$enabled" "$active" ;;
  esac
done
exit 0
"""

_NOT_PLAIN = set("=<>:@*?[ ")


def parse_state(text):
    """The output of READ_STATE_SCRIPT as {packages: {name: version}, files: {path: bool}, globs: {pattern: [path]},
    units: {name: {exists, load_state, unit_file_state, active_state}}}. Unknown lines are ignored."""
    state = {"packages": {}, "files": {}, "globs": {}, "units": {}}
    for line in (text or "").splitlines():
        fields = line.rstrip("\r").split("\t")
        kind = fields[0]
        if kind == "pkg" and len(fields) >= 4:
            if fields[2].strip() == "installed":
                state["packages"][fields[1]] = fields[3]
        elif kind == "file" and len(fields) >= 3:
            state["files"][fields[1]] = fields[2].strip() == "1"
        elif kind == "glob" and len(fields) >= 3:
            state["globs"].setdefault(fields[1], []).append(fields[2])
        elif kind == "unit" and len(fields) >= 5:
            load = fields[2].strip()
            state["units"][fields[1]] = {
                "exists": load not in ("", "not-found"),
                "load_state": load,
                "unit_file_state": fields[3].strip(),
                "active_state": fields[4].strip(),
            }
    for pattern in state["globs"]:
        state["globs"][pattern] = sorted(set(state["globs"][pattern]))
    return state


def packages_missing(names, state):
    """The names that are not proven installed (kept in order, duplicates dropped)."""
    installed = (state or {}).get("packages") or {}
    missing = []
    for name in names or []:
        name = str(name)
        if name in missing:
            continue
        if not name or _NOT_PLAIN & set(name) or name not in installed:
            missing.append(name)
    return missing


def unit_ready(state, name):
    """True when the unit is enabled and active, so enabled=true/state=started would change nothing."""
    unit = ((state or {}).get("units") or {}).get(name) or {}
    return bool(unit.get("exists")) and unit.get("unit_file_state") == "enabled" and unit.get("active_state") == "active"


def unit_exists(state, name):
    """True when systemd knows the unit (a unit file, masked included); False when it is not found or was not read."""
    unit = ((state or {}).get("units") or {}).get(name) or {}
    return bool(unit.get("exists"))


def file_exists(state, path):
    """True or False as read; None when the path was not read."""
    return ((state or {}).get("files") or {}).get(path)


def glob_matches(state, pattern):
    """The paths the pattern matched (sorted; [] when none or not read)."""
    return list(((state or {}).get("globs") or {}).get(pattern) or [])


def read_argv(packages=None, files=None, globs=None, units=None):
    """The argv of the one read: /bin/sh -c READ_STATE_SCRIPT llmops-host-state --pkg ... --file ... --glob ... --unit ...."""
    argv = ["/bin/sh", "-c", READ_STATE_SCRIPT, "llmops-host-state"]
    for flag, values in (("--pkg", packages), ("--file", files), ("--glob", globs), ("--unit", units)):
        values = [str(v) for v in (values or []) if str(v)]
        if values:
            argv.append(flag)
            argv.extend(values)
    return argv
