# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin Jinja filters over ``plugin_utils/_host/installed_state.py``: one read of a host's installed state, and the answers
the nvidia_driver role's conditions need from it.

Filters:
  host_state_argv({packages, files, globs, units})  -> argv of the one read-only command
  host_state(stdout)                                -> {packages: {name: version}, files: {path: bool}, globs: {...}, units: {...}}
  packages_missing(names, state)                    -> [name, ...] not proven installed
  unit_ready(state, name)                           -> bool: enabled and active
  unit_exists(state, name)                          -> bool
  file_matches(state, path, content=None, owner=None, group=None, mode=None, state_wanted='file')
                                                    -> bool: copy/file would change nothing
  deb_installed(url, state)                         -> bool: apt deb=url would change nothing
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._host import installed_state as hs


def host_state_argv(what):
    """argv of the read (a command task, check_mode false, changed_when false)."""
    if not isinstance(what, dict):
        raise AnsibleFilterError("host_state_argv expects a dict with packages, files, globs and units (lists), got %r" % (what,))
    return hs.read_argv(what.get("packages"), what.get("files"), what.get("globs"), what.get("units"), bool(what.get("secure_boot")))


def host_state(stdout):
    """The parsed output of the read."""
    return hs.parse_state(stdout)


def packages_missing(names, state):
    """The names that package state=present would have to install."""
    return hs.packages_missing(names, state)


def unit_ready(state, name):
    """True when systemd_service enabled=true state=started would change nothing."""
    return hs.unit_ready(state, name)


def unit_exists(state, name):
    """True when systemd knows the unit."""
    return hs.unit_exists(state, name)


def file_matches(state, path, content=None, owner=None, group=None, mode=None, state_wanted="file"):
    """True when copy (content, owner, group, mode) or file (state directory/absent) would change nothing."""
    if state_wanted not in ("file", "directory", "absent"):
        raise AnsibleFilterError("file_matches: state_wanted must be file, directory or absent, got %r" % (state_wanted,))
    return hs.file_matches(state, path, content, owner, group, mode, state_wanted)


def deb_installed(url, state):
    """True when apt deb=url state=present would change nothing (package_version_arch.deb installed at that version)."""
    return hs.deb_installed(url, state)


class FilterModule(object):
    """llmops.sglang host state filters."""

    def filters(self):
        return {
            "host_state_argv": host_state_argv,
            "host_state": host_state,
            "packages_missing": packages_missing,
            "unit_ready": unit_ready,
            "unit_exists": unit_exists,
            "file_matches": file_matches,
            "deb_installed": deb_installed,
        }
