# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Maintainer script: the collection's role variables, read from every ``roles/*/meta/argument_specs.yml``.

The variable check of preflight (``plugins/plugin_utils/_vars/checks.py``) needs, for every role of the collection,
each option's ``type``, ``elements``, ``choices``, ``no_log`` and ``default``. It used to read the sibling roles'
``meta/argument_specs.yml`` at run time; it now reads the table this script writes,
``plugins/plugin_utils/_vars/role_specs.py`` (marked GENERATED). The role list is the ``roles/`` directory: a role
added later is in the table (and its prefix in the misspelling check) after one ``generate``.

Commands::

    python3 scripts/role_variables.py generate   # write plugins/plugin_utils/_vars/role_specs.py
    python3 scripts/role_variables.py check      # exit 1 when that file is stale (the unit test runs this)

Options of all entry points of a role are merged (the first entry point, in file order, wins for a name that several
entry points document). Needs PyYAML (it comes with ansible-core).
"""

from __future__ import annotations

import argparse
import os
import pprint
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROLES_DIR = os.path.join(ROOT, "roles")
TABLE_PATH = os.path.join(ROOT, "plugins", "plugin_utils", "_vars", "role_specs.py")
#: The attributes of an argument_specs option the checks use; descriptions stay in the roles.
KEPT = ("type", "elements", "choices", "no_log", "default")

HEADER = '''# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# GENERATED FILE - do not edit. Regenerate with:  python3 scripts/role_variables.py generate
# (reads roles/*/meta/argument_specs.yml; tests/unit/plugins/plugin_utils/_vars/test_role_specs.py fails when it is stale).
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Every role variable of the collection, from the roles' ``meta/argument_specs.yml`` (the one place each is documented).

``ROLES``: the role names, sorted (the directories of ``roles/`` that have a ``meta/argument_specs.yml``).
``ROLE_VARIABLES``: ``{role: {variable: {"type": ..., "elements": ..., "choices": [...], "no_log": True,
"default": ...}}}``, options of all entry points merged; an attribute the spec does not set is left out (no ``type``
means ``str``, Ansible's default). Defaults are as written in the spec (a string may be a Jinja template).
Standard library only (nothing but literals); read by plugins/plugin_utils/_vars/checks.py.
"""

from __future__ import annotations

'''


def collect(roles_dir=ROLES_DIR):
    """``{role: {variable: {attribute: value}}}`` for every ``<roles_dir>/<role>/meta/argument_specs.yml``.

    Raises ValueError when a spec is not a mapping with ``argument_specs``.
    """
    table = {}
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if not os.path.isfile(path):
            continue
        with open(path) as handle:
            doc = yaml.safe_load(handle)
        if not isinstance(doc, dict) or not isinstance(doc.get("argument_specs"), dict):
            raise ValueError("%s: no argument_specs mapping" % path)
        options = {}
        for entry in doc["argument_specs"].values():
            for name, option in ((entry or {}).get("options") or {}).items():
                if name not in options:
                    options[name] = dict((k, (option or {})[k]) for k in KEPT if k in (option or {}))
        table[role] = options
    return table


def _assign(name, value):
    """``NAME = (`` + the pretty-printed value indented by 4 + ``)``: pep8-clean whatever the value's width."""
    text = pprint.pformat(value, width=140, compact=True, sort_dicts=True)
    return "%s = (\n%s\n)\n" % (name, "\n".join("    " + line for line in text.splitlines()))


def render_table(table):
    """Source text of plugins/plugin_utils/_vars/role_specs.py for :func:`collect`'s table."""
    return HEADER + _assign("ROLES", tuple(sorted(table))) + "\n" + _assign("ROLE_VARIABLES", table)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("cmd", choices=("generate", "check"))
    args = parser.parse_args(argv)
    text = render_table(collect())
    if args.cmd == "check":
        with open(TABLE_PATH) as handle:
            current = handle.read()
        if current != text:
            print("%s is stale: run python3 scripts/role_variables.py generate" % TABLE_PATH, file=sys.stderr)
            return 1
        print("up to date")
        return 0
    with open(TABLE_PATH, "w") as handle:
        handle.write(text)
    print("wrote %s" % TABLE_PATH)
    return 0


if __name__ == "__main__":
    sys.exit(main())
