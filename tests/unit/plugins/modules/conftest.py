"""Module tests run many modules in one process next to controller-side tests (filters, roles).

ansible-core keeps module warnings in a module-global registry and, once any controller code has been
imported in the process (``ansible.module_utils._internal.is_controller``), sends ``warn()`` to the
controller's Display instead of the module result. Reset both around every module test so a module's
``warnings`` are what that module alone returned.
"""
from __future__ import annotations

import pytest
from ansible.module_utils import _internal as ansible_internal
from ansible.module_utils.common import warnings as ansible_warnings


@pytest.fixture(autouse=True)
def _module_side_warnings(monkeypatch):
    monkeypatch.setattr(ansible_internal, "is_controller", False, raising=False)
    for name in ("_global_warnings", "_global_deprecations"):
        registry = getattr(ansible_warnings, name, None)
        if registry is not None:
            registry.clear()
    yield
