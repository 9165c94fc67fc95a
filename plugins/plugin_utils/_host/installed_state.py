# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
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

import hashlib
import re

# One POSIX shell program; its arguments are sections: --pkg NAME..., --file PATH..., --glob PATTERN...,
# --unit NAME..., --secure-boot. It only reads. Lines: pkg<TAB>name<TAB>status<TAB>version,
# file<TAB>path<TAB>0|1<TAB>owner:group:octal mode:type<TAB>sha1 (regular files), secure_boot<TAB>line (each line of mokutil --sb-state,
# else the EFI variable, else why it is unknown or off),
# glob<TAB>pattern<TAB>path (regular files), unit<TAB>name<TAB>load_state<TAB>unit_file_state<TAB>active_state.
READ_STATE_SCRIPT = r"""
mode=
for a in "$@"; do
  case "$a" in
    --pkg|--file|--glob|--unit) mode=$a; continue ;;
    --secure-boot) mode=--secure-boot ;;
  esac
  case "$mode" in
    --pkg)
      if command -v dpkg-query >/dev/null 2>&1; then
        dpkg-query -W -f='pkg\t${Package}\t${db:Status-Status}\t${Version}\n' "$a" 2>/dev/null || true
      elif command -v rpm >/dev/null 2>&1; then
        rpm -q --qf 'pkg\t%{NAME}\tinstalled\t%{VERSION}-%{RELEASE}\n' "$a" 2>/dev/null | grep '^pkg' || true
      fi ;;
    --file)
      if [ -e "$a" ]; then
        attrs=$(stat -c '%U:%G:%a:%F' "$a" 2>/dev/null)
        sum=
        if [ -f "$a" ] && [ ! -L "$a" ]; then sum=$(sha1sum < "$a" 2>/dev/null | cut -d' ' -f1); fi
        printf 'file\t%s\t1\t%s\t%s\n' "$a" "$attrs" "$sum"
      else printf 'file\t%s\t0\t\t\n' "$a"; fi ;;
    --secure-boot)
      f=/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c
      if command -v mokutil >/dev/null 2>&1; then sb=$(mokutil --sb-state 2>&1)
      elif [ -r "$f" ]; then
        v=$(od -An -t u1 -j4 -N1 "$f" | tr -d ' ')
        if [ "$v" = 1 ]; then sb="SecureBoot enabled (EFI variable)"; else sb="SecureBoot disabled (EFI variable)"; fi
      elif [ -d /sys/firmware/efi ]; then sb="SecureBoot unknown (EFI, no mokutil)"
      else sb="SecureBoot disabled (no EFI: legacy BIOS boot or container)"; fi
      printf '%s\n' "$sb" | while IFS= read -r l; do printf 'secure_boot\t%s\n' "$l"; done
      mode= ;;
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
    """The output of READ_STATE_SCRIPT as {packages: {name: version}, files: {path: bool}, file_attrs: {path: {owner, group,
    mode, type, sha1}}, globs: {pattern: [path]}, units: {name: {exists, load_state, unit_file_state, active_state}},
    secure_boot: [lines]}. Unknown lines are ignored."""
    state = {"packages": {}, "files": {}, "file_attrs": {}, "globs": {}, "units": {}, "secure_boot": []}
    for line in (text or "").splitlines():
        fields = line.rstrip("\r").split("\t")
        kind = fields[0]
        if kind == "pkg" and len(fields) >= 4:
            if fields[2].strip() == "installed":
                state["packages"][fields[1]] = fields[3]
        elif kind == "file" and len(fields) >= 3:
            state["files"][fields[1]] = fields[2].strip() == "1"
            attrs = (fields[3].strip() if len(fields) > 3 else "").split(":", 3)
            state["file_attrs"][fields[1]] = {
                "owner": attrs[0] if len(attrs) == 4 else "", "group": attrs[1] if len(attrs) == 4 else "",
                "mode": attrs[2].zfill(4) if len(attrs) == 4 else "", "type": attrs[3] if len(attrs) == 4 else "",
                "sha1": fields[4].strip() if len(fields) > 4 else "",
            }
        elif kind == "secure_boot" and len(fields) >= 2:
            state["secure_boot"].append("\t".join(fields[1:]).strip())
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


def read_argv(packages=None, files=None, globs=None, units=None, secure_boot=False):
    """The argv of the one read: /bin/sh -c READ_STATE_SCRIPT llmops-host-state --pkg ... --file ... --glob ... --unit ...
    [--secure-boot]."""
    argv = ["/bin/sh", "-c", READ_STATE_SCRIPT, "llmops-host-state"]
    for flag, values in (("--pkg", packages), ("--file", files), ("--glob", globs), ("--unit", units)):
        values = [str(v) for v in (values or []) if str(v)]
        if values:
            argv.append(flag)
            argv.extend(values)
    if secure_boot:
        argv.append("--secure-boot")
    return argv


def file_matches(state, path, content=None, owner=None, group=None, mode=None, state_wanted="file"):
    """True when the path is already what copy (content, owner, group, mode), file state=directory (state_wanted
    "directory") or file state=absent ("absent") would leave, so the task would change nothing. Not read: False."""
    files = (state or {}).get("files") or {}
    if path not in files:
        return False
    exists = files[path]
    if state_wanted == "absent":
        return exists is False
    if not exists:
        return False
    attrs = ((state or {}).get("file_attrs") or {}).get(path) or {}
    kind = "directory" if state_wanted == "directory" else "regular file"
    if attrs.get("type") not in ((kind, "regular empty file") if kind == "regular file" else (kind,)):
        return False
    if owner is not None and attrs.get("owner") != str(owner):
        return False
    if group is not None and attrs.get("group") != str(group):
        return False
    if mode is not None and attrs.get("mode") != str(mode).zfill(4):
        return False
    if content is not None:
        data = content.encode("utf-8") if not isinstance(content, bytes) else content
        if attrs.get("sha1") != hashlib.sha1(data).hexdigest():
            return False
    return True


_DEB_NAME = re.compile(r"^([a-z0-9][a-z0-9+.-]+)_([^_/]+)_([a-z0-9-]+)\.deb$")


def deb_installed(url, state):
    """True when the .deb the URL names (Debian file name package_version_arch.deb) is installed at exactly that version,
    so apt deb=URL state=present would change nothing. Any other file name: False (the apt task runs)."""
    name = str(url or "").rstrip("/").rsplit("/", 1)[-1]
    match = _DEB_NAME.match(name.replace("%3a", ":").replace("%3A", ":"))
    if not match:
        return False
    installed = ((state or {}).get("packages") or {}).get(match.group(1))
    return installed is not None and installed == match.group(2)
