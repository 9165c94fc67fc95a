"""The generated table of role variables (plugins/plugin_utils/_vars/role_specs.py) against the roles' argument specs.

It fails when a role's meta/argument_specs.yml changed (or a role was added) without ``python3 scripts/role_variables.py
generate``."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from ansible_collections.llmops.sglang.plugins.plugin_utils._vars import role_specs

REPO = Path(__file__).resolve().parents[5]


def _script():
    spec = importlib.util.spec_from_file_location("role_variables_script", str(REPO / "scripts" / "role_variables.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_table_is_current():
    script = _script()
    current = (REPO / "plugins" / "plugin_utils" / "_vars" / "role_specs.py").read_text()
    assert current == script.render_table(script.collect()), "role_specs.py is stale: run python3 scripts/role_variables.py generate"


def test_the_roles_are_the_roles_directory():
    assert list(role_specs.ROLES) == sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/meta/argument_specs.yml"))


def test_values_written_by_hand_from_the_specs():
    # roles/iommu/meta/argument_specs.yml: iommu_mode is a str with five choices, default auto
    expected = {"type": "str", "default": "auto", "choices": ["auto", "translated", "passthrough", "off", "unmanaged"]}
    assert role_specs.ROLE_VARIABLES["iommu"]["iommu_mode"] == expected
    # roles/nccl: nccl_gpu_indices is a list of int, default []
    assert role_specs.ROLE_VARIABLES["nccl"]["nccl_gpu_indices"] == {"type": "list", "elements": "int", "default": []}
    # roles/sglang_server: the API key is no_log
    assert role_specs.ROLE_VARIABLES["sglang_server"]["sglang_server_api_key"]["no_log"] is True


def test_a_new_role_is_picked_up(tmp_path):
    (tmp_path / "speculative_tuning" / "meta").mkdir(parents=True)
    (tmp_path / "speculative_tuning" / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      speculative_tuning_trials:\n        type: int\n        default: 3\n"
        "        description: [x]\n  other:\n    options:\n      speculative_tuning_trials:\n        type: str\n")
    (tmp_path / "no_specs" / "tasks").mkdir(parents=True)
    table = _script().collect(str(tmp_path))
    # the first entry point wins; a directory without a spec is no role of the table
    assert table == {"speculative_tuning": {"speculative_tuning_trials": {"type": "int", "default": 3}}}
