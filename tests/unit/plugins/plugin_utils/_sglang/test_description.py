"""The sglang_server role's one variable table (plugins/plugin_utils/_sglang/description.py).

The consistency tests read the role's hand-written YAML (defaults/main.yml, meta/argument_specs.yml) and compare each
variable with its row: a default, a type or a choice changed in one place alone fails here, naming the variable and both
values. The other tests check what is derived from the table with values written out by hand.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import description as d
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import launch
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import quoting

ROLE = Path(__file__).resolve().parents[5] / "roles" / "sglang_server"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
SPEC = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
VARS = (ROLE / "vars" / "main.yml").read_text()


# ---------------------------------------------------------------------------------------------
# the YAML agrees with the table

def test_defaults_name_every_variable_of_the_table_and_no_other():
    assert sorted(set(DEFAULTS) - set(d.BY_NAME)) == [], "in defaults/main.yml but not in the table (_sglang/description.py)"
    assert sorted(set(d.BY_NAME) - set(DEFAULTS)) == [], "in the table (_sglang/description.py) but not in defaults/main.yml"


def test_argument_spec_names_every_variable_of_the_table_and_no_other():
    assert sorted(set(SPEC) - set(d.BY_NAME)) == [], "in meta/argument_specs.yml but not in the table (_sglang/description.py)"
    assert sorted(set(d.BY_NAME) - set(SPEC)) == [], "in the table (_sglang/description.py) but not in meta/argument_specs.yml"


@pytest.mark.parametrize("row", d.VARIABLES, ids=lambda v: v.name)
def test_defaults_main_yml_agrees_with_the_table(row):
    assert row.name in DEFAULTS, "%s: in the table but not in defaults/main.yml" % row.name
    assert DEFAULTS[row.name] == row.default and type(DEFAULTS[row.name]) is type(row.default), (
        "%s: defaults/main.yml says %r, the table (_sglang/description.py) says %r. Fix: change both, or neither"
        % (row.name, DEFAULTS[row.name], row.default))


@pytest.mark.parametrize("row", d.VARIABLES, ids=lambda v: v.name)
def test_argument_specs_yml_agrees_with_the_table(row):
    spec = SPEC.get(row.name)
    assert spec is not None, "%s: in the table but not in meta/argument_specs.yml" % row.name
    assert spec.get("description"), "%s: meta/argument_specs.yml has no description" % row.name
    got = {"type": spec.get("type"), "elements": spec.get("elements"), "default": spec.get("default"),
           "choices": tuple(spec["choices"]) if spec.get("choices") else None}
    want = {"type": row.type, "elements": row.elements, "default": row.default, "choices": row.choices}
    assert got == want, ("%s: meta/argument_specs.yml says %r, the table (_sglang/description.py) says %r. Fix: change both, or neither"
                         % (row.name, got, want))
    # a null default is written by leaving default: out (ansible-lint / validate_argument_spec read both alike)
    assert row.default is not None or "default" not in spec, "%s: write no default: for a null default" % row.name


def test_every_secret_is_no_log_in_the_argument_spec():
    assert sorted(n for n, s in SPEC.items() if s.get("no_log")) == ["sglang_server_api_key", "sglang_server_hf_token"]
    assert sorted(d.names("secret")) == ["sglang_server_api_key", "sglang_server_hf_token"]


def test_vars_main_yml_lists_no_variable_by_hand():
    # the description, the destination values and the validation key are derived from the table: vars/main.yml names
    # none of the renderer's options (it did, 45 + 21 + 10 times, before the table)
    listed = sorted(k for k in d.OPTIONS if "sglang_server_" + k in VARS)
    assert listed == [], "vars/main.yml lists %s by hand; derive it from the table" % listed


def test_the_table_is_well_formed():
    assert len(d.VARIABLES) == len(d.BY_NAME) == 85  # 83 + speculative_adaptive(_config)
    for row in d.VARIABLES:
        assert set(row.destinations) <= set(d.DESTINATION_KINDS), row.name
        assert (row.env is not None) == ("secret" in row.destinations), row.name
        assert not row.flags or row.unset != d.NOT_AN_OPTION, "%s: a flag but no renderer option" % row.name
        assert row.fingerprinted or not row.destinations, "%s: checked for its destination but not in the key" % row.name
        assert row.fingerprinted or row.unset == d.NOT_AN_OPTION, "%s: rendered but not in the key" % row.name


# ---------------------------------------------------------------------------------------------
# what is derived from it (expected values by hand)

def test_the_renderers_option_map_is_the_tables():
    assert launch.OPTIONS is d.OPTIONS
    assert len(d.OPTIONS) == 45
    # renderer defaults differ from the role's defaults on purpose: unset = not rendered
    assert d.OPTIONS["enable_metrics"] == ("bool", False)
    assert d.OPTIONS["decode_log_interval"] == ("int", None)
    assert d.OPTIONS["port"] == ("int", 30000)
    assert d.OPTIONS["speculative_num_steps"] == ("int", None)
    assert d.OPTIONS["extra_env"] == ("dict", None)
    assert "version_force" not in d.OPTIONS and "image" not in d.OPTIONS
    assert launch._MANAGED_FLAGS is d.MANAGED_FLAGS
    assert d.MANAGED_FLAGS["--tp"] == d.MANAGED_FLAGS["--tensor-parallel-size"] == d.MANAGED_FLAGS["--tp-size"] == "tp_size"
    assert d.MANAGED_FLAGS["--speculative-num-steps"] == "speculative_num_steps"
    assert d.MANAGED_FLAGS["--nccl-init-addr"] == "dist_init_addr"
    assert "--hf-token" not in d.MANAGED_FLAGS
    assert len(d.MANAGED_FLAGS) == 45


def test_names_by_kind():
    assert d.names("path") == ["sglang_server_engine_bin", "sglang_server_hf_cache_dir", "sglang_server_model_dir",
                               "sglang_server_config_dir", "sglang_server_nccl_env_file"]
    assert d.names("argv") == ["sglang_server_container_options", "sglang_server_extra_args", "sglang_server_ulimits"]
    assert d.names("image") == ["sglang_server_image", "sglang_server_image_force"]
    assert "sglang_server_ready_timeout" not in d.names("fingerprinted")
    assert "sglang_server_version" in d.names("fingerprinted")
    with pytest.raises(ValueError, match="unknown kind 'units'"):
        d.names("units")


def _inputs(**changes):
    values = dict((row.name, row.default) for row in d.VARIABLES)
    values.update(("sglang_server_" + k, v) for k, v in changes.items())
    return values


def test_server_description_takes_the_tuned_and_multinode_values():
    inputs = _inputs(model_path="/models/m", speculative_num_steps=3, nnodes=1)
    desc = d.server_description(inputs)
    assert len(desc) == 46 and desc["model_path"] == "/models/m" and desc["speculative_num_steps"] == 3
    assert desc["version_force"] is False and "image" not in desc
    tuned = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 2, "speculative_eagle_topk": 1,
             "speculative_num_draft_tokens": 3, "speculative_draft_model_path": None, "arm": "s2", "time": "t", "path": "/p"}
    desc = d.server_description(inputs, tuned, {"nnodes": 2, "node_rank": 1, "dist_init_addr": "10.0.0.1:20000"})
    assert (desc["speculative_algorithm"], desc["speculative_num_steps"]) == ("EAGLE", 2)
    assert "arm" not in desc and "time" not in desc
    assert (desc["nnodes"], desc["node_rank"], desc["dist_init_addr"]) == (2, 1, "10.0.0.1:20000")
    with pytest.raises(ValueError, match="sglang_server_tp_size"):
        d.server_description(dict((k, v) for k, v in inputs.items() if k != "sglang_server_tp_size"))


def test_destination_checks_use_the_descriptions_resolved_value():
    inputs = _inputs(model_path="/models/m")
    desc = d.server_description(inputs, {"speculative_draft_model_path": "/d\nExecStartPre=/bin/true"})
    with pytest.raises(quoting.DestinationError) as err:
        quoting.server_destinations(inputs, desc)
    assert err.value.variable == "sglang_server_speculative_draft_model_path"
    assert quoting.server_destinations(inputs, d.server_description(inputs))["image"]["tag"] == "v0.5.9-cu130-runtime"


def test_validation_key_changes_with_every_fingerprinted_input_and_only_those():
    inputs = _inputs(model_path="/models/m")
    desc = d.server_description(inputs)
    base = d.validation_key(inputs, desc, {"gpu_count": 4}, {})
    assert len(base) == 64 and base == d.validation_key(dict(inputs), dict(desc), {"gpu_count": 4}, None)
    assert d.validation_key(inputs, desc, {"gpu_count": 2}, {}) != base           # the context
    assert d.validation_key(inputs, desc, {"gpu_count": 4}, {"arm": "a"}) != base  # the decision
    assert d.validation_key(_inputs(model_path="/models/m", version="0.5.10"), desc, {"gpu_count": 4}, {}) != base
    assert d.validation_key(_inputs(model_path="/models/m", gpus=[0, 1]), desc, {"gpu_count": 4}, {}) != base
    assert d.validation_key(_inputs(model_path="/models/m", api_key="sk-1"), desc, {"gpu_count": 4}, {}) != base
    # the readiness timeout is read after the render: not in the key
    assert d.validation_key(_inputs(model_path="/models/m", ready_timeout=60), desc, {"gpu_count": 4}, {}) == base
    with pytest.raises(ValueError, match="sglang_server_image_pull"):
        d.validation_key(dict((k, v) for k, v in inputs.items() if k != "sglang_server_image_pull"), desc)
