# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin Jinja filters over ``module_utils/host_state.py``: one read of a host's installed state, and the answers
the nvidia_driver role's conditions need from it.

Filters:
  host_state_argv({packages, files, globs, units})  -> argv of the one read-only command
  host_state(stdout)                                -> {packages: {name: version}, files: {path: bool}, globs: {...}, units: {...}}
  packages_missing(names, state)                    -> [name, ...] not proven installed
  unit_ready(state, name)                           -> bool: enabled and active
  unit_exists(state, name)                          -> bool
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils import host_state as hs


def host_state_argv(what):
    """argv of the read (a command task, check_mode false, changed_when false)."""
    if not isinstance(what, dict):
        raise AnsibleFilterError("host_state_argv expects a dict with packages, files, globs and units (lists), got %r" % (what,))
    return hs.read_argv(what.get("packages"), what.get("files"), what.get("globs"), what.get("units"))


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


class FilterModule(object):
    """llmops.sglang host state filters."""

    def filters(self):
        return {
            "host_state_argv": host_state_argv,
            "host_state": host_state,
            "packages_missing": packages_missing,
            "unit_ready": unit_ready,
            "unit_exists": unit_exists,
        }
