# -*- coding: utf-8 -*-
"""The layout rules of docs/architecture.md, checked on the source tree (issue #24).

- Target code (plugins/modules, plugins/module_utils) never imports controller code (plugins/plugin_utils):
  a module is shipped to the managed host with the module_utils it imports and nothing else.
- Every file of the private subpackages is headed as private to the collection (community.docker 5.0 wording).
- module_utils and plugin_utils hold only private subpackages (no flat file a user could mistake for an API).
- The unit tests mirror the tree: each tests/unit/plugins/<kind>/<_group>/ names an existing group.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
PRIVATE_NOTE = "is **PRIVATE** to the collection"


def _imports(path):
    """Dotted names imported by one Python file (``import x``, ``from x import y``, ``from ..x import y``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: kept as written ('..plugin_utils._host' still names plugin_utils)
                names.append("." * node.level + (node.module or ""))
            elif node.module:
                names.append(node.module)
    return names


def _target_files():
    return sorted(list((PLUGINS / "modules").glob("*.py")) + list((PLUGINS / "module_utils").rglob("*.py")))


def test_target_code_never_imports_controller_code():
    offenders = {str(p.relative_to(ROOT)): n for p in _target_files() for n in _imports(p) if "plugin_utils" in n}
    assert offenders == {}


def test_there_is_target_code_to_check():
    # guards the test above against an empty glob (a moved tree would make it pass vacuously)
    assert len(_target_files()) > 20
    assert any(".module_utils._server" in n for n in _imports(PLUGINS / "modules" / "speculative_check.py"))


@pytest.mark.parametrize("kind", ["module_utils", "plugin_utils"])
def test_only_private_subpackages(kind):
    top = sorted(p.name for p in (PLUGINS / kind).iterdir() if p.name != "__pycache__")
    assert top and all(name.startswith("_") and (PLUGINS / kind / name).is_dir() for name in top), top


@pytest.mark.parametrize("kind", ["module_utils", "plugin_utils"])
def test_every_private_file_is_headed_private(kind):
    missing = [str(p.relative_to(ROOT)) for p in sorted((PLUGINS / kind).rglob("*.py"))
               if p.name != "__init__.py" and PRIVATE_NOTE not in "".join(p.read_text(encoding="utf-8").splitlines(True)[:8])]
    assert missing == []


@pytest.mark.parametrize("kind", ["module_utils", "plugin_utils"])
def test_unit_tests_mirror_the_groups(kind):
    tests = ROOT / "tests" / "unit" / "plugins" / kind
    groups = {p.name for p in (PLUGINS / kind).iterdir() if p.is_dir() and p.name.startswith("_")}
    test_groups = {p.name for p in tests.iterdir() if p.is_dir() and p.name.startswith("_")}
    assert test_groups <= groups, test_groups - groups
