# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin Jinja2 filters over ``plugins/plugin_utils/_watch/rules.py`` for the speculative_watch role.

* ``inputs | llmops.sglang.watch_evidence`` -> what one GPU host's rules are rendered from (``rules.host_evidence``).
* ``evidence | llmops.sglang.watch_host_files(options)`` -> ``{"rules": rule-file dict, "targets": file_sd list}``.
* ``options | llmops.sglang.watch_fleet_files`` -> ``{"rules": rule-file dict, "dashboard": Grafana JSON model}``.
* ``decision | llmops.sglang.watch_drift(live, accept_length_margin, min_gain)`` -> does the decision still hold
  (``drift.drift``; playbooks/spec_watch.yml).

A refusal raises ``AnsibleFilterError`` whose message names the variable, the value, why, and the fix.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._watch import drift, rules

_EVIDENCE_KEYS = ("host", "target", "version", "expected", "verification", "rows", "model", "accept_length")


def watch_evidence(inputs):
    """``inputs``: dict with the keys of :func:`rules.host_evidence` (``host``, ``target``, ``version``, ``expected``,
    ``verification``, ``rows``, ``model``, ``accept_length``; empty strings count as unset)."""
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("watch_evidence: expected a dict of %s, got %r" % (", ".join(_EVIDENCE_KEYS), inputs))
    unknown = sorted(set(inputs) - set(_EVIDENCE_KEYS))
    if unknown:
        raise AnsibleFilterError("watch_evidence: unknown key(s) %s; use %s" % (", ".join(unknown), ", ".join(_EVIDENCE_KEYS)))
    args = dict((k, None if inputs.get(k) in ("", None) else inputs.get(k)) for k in _EVIDENCE_KEYS)
    try:
        return rules.host_evidence(**args)
    except rules.WatchError as exc:
        raise AnsibleFilterError("speculative_watch: %s" % exc)


def watch_host_files(evidence, options=None):
    """The rules (thresholds) and file_sd targets of one host."""
    try:
        return {"rules": rules.render_host_rules(evidence, options), "targets": rules.render_targets(evidence)}
    except rules.WatchError as exc:
        raise AnsibleFilterError("speculative_watch: %s" % exc)


def watch_fleet_files(options=None):
    """The fleet's alert rules and the Grafana dashboard."""
    try:
        return {"rules": rules.render_alerts(options), "dashboard": rules.render_dashboard(options)}
    except rules.WatchError as exc:
        raise AnsibleFilterError("speculative_watch: %s" % exc)


def watch_drift(decision, live, accept_length_margin=0.15, min_gain=0.0):
    """The drift verdict of one host (see :func:`drift.drift`)."""
    try:
        return drift.drift(decision, live, accept_length_margin, min_gain)
    except (drift.DriftError, TypeError, ValueError, KeyError) as exc:
        raise AnsibleFilterError("spec_watch: %s" % exc)


class FilterModule(object):
    """llmops.sglang filters of the speculation health watch."""

    def filters(self):
        return {"watch_evidence": watch_evidence, "watch_host_files": watch_host_files, "watch_fleet_files": watch_fleet_files,
                "watch_drift": watch_drift}
