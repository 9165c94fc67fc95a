# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thin Jinja2 filter over ``plugins/module_utils/_tune/decision.py`` for the sglang_server role.

* ``decision_text | llmops.sglang.spec_tuned_settings(current, path, host)`` -> the speculative settings of the
  tuning decision recorded on the host (``playbooks/spec_tune.yml``), refused when it was measured on another
  model, SGLang version, tensor-parallel size or GPU (``spec_decision.tuned_settings``).

A refusal raises ``AnsibleFilterError`` whose message names the variable, the differences and the fix.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils._tune.decision import SpecDecisionError, tuned_settings


def spec_tuned_settings(text, current, path="", host=""):
    """The recorded decision's sglang_server_speculative_* settings, checked against ``current`` (see tuned_settings)."""
    try:
        return tuned_settings(text, current or {}, path, host)
    except SpecDecisionError as exc:
        raise AnsibleFilterError("sglang_server: %s" % exc)


class FilterModule(object):
    """llmops.sglang filters over the speculative-tuning decision."""

    def filters(self):
        return {"spec_tuned_settings": spec_tuned_settings}
