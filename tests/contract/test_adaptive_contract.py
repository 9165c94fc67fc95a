"""SGLang's adaptive speculative decoding, checked against the published wheels' own source.

* which versions' parsers have ``--speculative-adaptive`` and ``--speculative-adaptive-config`` (by hand: 0.5.14 and
  0.5.23 of the modelled versions), and that the renderer's list (``adaptive.versions_with_adaptive``, from the
  generated table) is the same;
* ``speculative/adaptive_spec_params.py``: the built-in table ``DEFAULT_ADAPTIVE_CONFIG``, the per-bucket field defaults
  of ``AdaptiveStepSlot.__init__`` and every reason ``adaptive_unsupported_reason`` returns, against the renderer's
  copies (a refusal quotes SGLang's reason, so the text must be SGLang's);
* ``arg_groups/speculative_hook.py``: the ``speculative_adaptive disabled: <reason>. Falling back to static speculative
  params.`` line that speculative_check and the simulator look for.

The wheels are fetched like tests/contract/test_sglang_contract.py does (``pip download --no-deps`` into
.cache/sglang-wheels; a failed download fails, it never skips). Standard library + ast: nothing is imported from them.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import adaptive
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang import launch as sa

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARAMS = "sglang/srt/speculative/adaptive_spec_params.py"
HOOK = "sglang/srt/arg_groups/speculative_hook.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("sglang_contract_script_adaptive", os.path.join(ROOT, "scripts", "sglang_contract.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


contract = _load_script()


@pytest.fixture(scope="module")
def wheels():
    """``{profile: (Wheel, flags)}`` of every modelled version."""
    out = {}
    try:
        for profile, requirement in contract.VERSIONS:
            wheel = contract.Wheel(contract.wheel_path(requirement))
            out[profile] = (wheel, contract.extract_flags(wheel))
    except contract.ContractError as err:
        pytest.fail("SGLang contract: %s" % err, pytrace=False)
    return out


def _function(tree, name, cls=None):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and cls and node.name == cls:
            return _function(node, name)
        if isinstance(node, ast.FunctionDef) and node.name == name and not cls:
            return node
    raise AssertionError("%s%s not found" % (cls + "." if cls else "", name))


def _text_pattern(node):
    """A regex for the string an expression builds (f-string holes become ``.*``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".*" for v in node.values)
    raise AssertionError("not a string: %s" % ast.dump(node))


def test_versions_with_the_adaptive_flags(wheels):
    having = [p for p, (_w, flags) in wheels.items() if adaptive.FLAG in flags and adaptive.CONFIG_FLAG in flags]
    assert having == ["0.5.14", "0.5.23"]
    assert list(adaptive.versions_with_adaptive()) == having
    for profile in having:
        flags = wheels[profile][1]
        assert flags[adaptive.FLAG]["takes_value"] is False
        assert flags[adaptive.CONFIG_FLAG]["takes_value"] is True
        assert wheels[profile][0].has(PARAMS)
    for profile in [p for p in wheels if p not in having]:
        assert not wheels[profile][0].has(PARAMS), profile


@pytest.mark.parametrize("profile", ["0.5.14", "0.5.23"])
def test_default_table_and_field_defaults_are_sglangs(wheels, profile):
    tree = ast.parse(wheels[profile][0].text(PARAMS))
    table = None
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "DEFAULT_ADAPTIVE_CONFIG":
            table = ast.literal_eval(node.value)
    assert table == adaptive.DEFAULT_TABLES[profile]
    init = _function(tree, "__init__", cls="AdaptiveStepSlot")
    defaults = {}
    for node in ast.walk(init):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and getattr(node.func.value, "id", "") == "cfg"):
            defaults[node.args[0].value] = ast.literal_eval(node.args[1])
    assert defaults == adaptive.FIELD_DEFAULTS


# one description per disabling condition, and the reason SGLang returns for it (by hand, from the wheel's text)
BASE = {"model_path": "/models/m", "model_architecture": "LlamaForCausalLM", "speculative_algorithm": "EAGLE3",
        "speculative_draft_model_path": "/models/d", "speculative_adaptive": True}
CONDITIONS = [
    ("algorithm", dict(BASE, speculative_algorithm="STANDALONE"), "speculative_algorithm=STANDALONE (only EAGLE/EAGLE3 are supported)"),
    ("topk", dict(BASE, speculative_eagle_topk=4), "speculative_eagle_topk=4 (only topk=1 is supported)"),
    ("multi-layer eagle", dict(BASE, extra_args=["--enable-multi-layer-eagle"]),
     "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)"),
    ("two-batch overlap", dict(BASE, extra_args=["--enable-two-batch-overlap"]),
     "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend wrapper)"),
    ("pd-mux", dict(BASE, extra_args=["--enable-pdmux"]),
     "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)"),
]
DP = {"0.5.14": (dict(BASE, extra_args=["--enable-dp-attention", "--dp-size", "2"]),
                 "enable_dp_attention=True is not supported (adaptive tier decisions are not synchronized across DP ranks)"),
      "0.5.23": (dict(BASE, extra_args=["--attn-dp-size", "2"]),
                 "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)")}


@pytest.mark.parametrize("profile", ["0.5.14", "0.5.23"])
def test_every_refusal_quotes_a_reason_sglang_returns(wheels, profile):
    tree = ast.parse(wheels[profile][0].text(PARAMS))
    func = _function(tree, "adaptive_unsupported_reason")
    patterns = [_text_pattern(n.value) for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None
                and not (isinstance(n.value, ast.Constant) and n.value.value is None)]
    # 0.5.14: six conditions; 0.5.23 adds the platform worker (not modelled: CUDA images only)
    assert len(patterns) == {"0.5.14": 6, "0.5.23": 7}[profile]
    cases = CONDITIONS + [("attention dp", DP[profile][0], DP[profile][1])]
    matched = set()
    for name, desc, reason in cases:
        with pytest.raises(sa.SGLangArgsError) as err:
            sa.render_launch(desc, profile)
        assert "speculative_adaptive disabled: %s. Falling back" % reason in str(err.value), name
        hits = [p for p in patterns if re.fullmatch(p, reason)]
        assert hits, "%s: %r is not a reason SGLang %s returns" % (name, reason, profile)
        matched.update(hits)
    assert len(matched) == 6


@pytest.mark.parametrize("profile", ["0.5.14", "0.5.23"])
def test_the_disabled_line_is_sglangs(wheels, profile):
    tree = ast.parse(wheels[profile][0].text(HOOK))
    func = _function(tree, "_maybe_disable_adaptive")
    texts = [_text_pattern(n.args[0]) for n in ast.walk(func)
             if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "warning"]
    assert len(texts) == 1
    line = adaptive.DISABLED_PREFIX + "topk=4 (x)" + adaptive.DISABLED_SUFFIX
    assert re.fullmatch(texts[0], line)
