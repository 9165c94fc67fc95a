# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over ``plugins/plugin_utils/_vars/checks.py`` (the preflight check of every role variable; preflight itself
runs it in the action ``llmops.sglang.preflight_check``).

``argument_specs`` are parsed ``meta/argument_specs.yml`` documents (one or a list); None (the default) means the
collection's own roles, from the generated table ``plugins/plugin_utils/_vars/role_specs.py``.

* ``values | llmops.sglang.variable_problems(argument_specs, context)`` -> list of
  ``"<variable>=<value>: <reason>. Fix: <fix>"`` ([] when every variable passes)
* ``argument_specs | llmops.sglang.checked_variables`` -> names the check knows (argument_specs options and RULES)
* ``argument_specs | llmops.sglang.known_variables`` -> those, the playbook variables and the facts roles publish
  (every name that is not a misspelling; internal ``<role>__*`` names are never checked)
* ``names | llmops.sglang.unknown_variables(argument_specs)`` -> ``"<variable>: not a variable ... Fix: ..."`` for
  names with a role prefix that are no variable of the collection (misspellings), the closest valid name as the fix;
  values are never shown
"""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.plugin_utils._vars.checks import unknown_variables, variable_problems
from ansible_collections.llmops.sglang.plugins.plugin_utils._vars.checks import checked_variables as _checked_variables
from ansible_collections.llmops.sglang.plugins.plugin_utils._vars.checks import known_variables as _known_variables


def checked_variables(argument_specs=None):
    """Sorted names of every variable in the given argument_specs documents and in the RULES table."""
    return sorted(_checked_variables(argument_specs))


def known_variables(argument_specs=None):
    """Sorted names that are no misspelling: argument_specs options, RULES, playbook variables and published facts."""
    return sorted(_known_variables(argument_specs))


class FilterModule(object):
    """llmops.sglang variable checks."""

    def filters(self):
        return {"variable_problems": variable_problems, "checked_variables": checked_variables, "unknown_variables": unknown_variables,
                "known_variables": known_variables}
