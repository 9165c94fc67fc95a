"""Tests of plugins/module_utils/_gpu/model_dir.py (size of the weights from a model directory's files)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._gpu.model_dir import weights_size

INDEX = json.dumps({"metadata": {"total_size": 15231233024},
                    "weight_map": {"lm_head.weight": "model-00004-of-00004.safetensors",
                                   "model.embed_tokens.weight": "model-00001-of-00004.safetensors",
                                   "model.layers.0.mlp.down_proj.weight": "model-00002-of-00004.safetensors",
                                   "model.layers.1.mlp.down_proj.weight": "model-00003-of-00004.safetensors"}})
CONFIG = json.dumps({"architectures": ["Qwen2ForCausalLM"], "torch_dtype": "bfloat16",
                     "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})


def test_index_total_size_wins():
    out = weights_size(INDEX, [1, 2, 3], CONFIG)
    # 15231233024 B / 2^30 = 14.185 GiB
    assert (out["bytes"], out["gib"], out["source"]) == (15231233024, 14.185, "index")
    assert out["detail"] == "model.safetensors.index.json metadata.total_size = 15231233024 bytes over 4 shard(s)"
    assert (out["architectures"], out["torch_dtype"], out["quantization"]) == (["Qwen2ForCausalLM"], "bfloat16", "fp8")


def test_file_sizes_without_an_index():
    out = weights_size(None, [4 * 1073741824, 1073741824 // 2])
    assert (out["bytes"], out["gib"], out["source"]) == (4831838208, 4.5, "files")


def test_nothing_readable():
    out = weights_size(None, [], None)
    assert (out["bytes"], out["gib"], out["source"]) == (None, 0.0, None)


@pytest.mark.parametrize("index,fragment", [
    ("{not json", "model.safetensors.index.json is not valid JSON"),
    ("[1, 2]", "model.safetensors.index.json is not a JSON object"),
    ('{"metadata": {}}', "metadata.total_size=None is not a positive number of bytes"),
    ('{"metadata": {"total_size": -5}}', "metadata.total_size=-5 is not a positive number of bytes"),
    ('{"metadata": {"total_size": 1.5}}', "metadata.total_size=1.5 is not a positive number of bytes"),
])
def test_bad_index_is_named(index, fragment):
    with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace(".", r"\.")):
        weights_size(index)


def test_read_model_dir_files_without_an_index(tmp_path):
    from ansible_collections.llmops.sglang.plugins.module_utils._gpu.model_dir import read_model_dir
    for name, size in (("model-00001-of-00002.safetensors", 3 * 1073741824), ("model-00002-of-00002.safetensors", 1073741824),
                       ("README.md", 999)):
        with open(str(tmp_path / name), "wb") as handle:
            handle.truncate(size)
    out = read_model_dir(str(tmp_path))
    # 3 GiB + 1 GiB of *.safetensors (README.md is not a weight file); no config.json: not downloaded as a whole
    assert (out["exists"], out["config_json"], out["error"]) == (True, False, None)
    assert (out["weights"]["bytes"], out["weights"]["gib"], out["weights"]["source"]) == (4294967296, 4.0, "files")


def test_read_model_dir_missing_and_broken(tmp_path):
    from ansible_collections.llmops.sglang.plugins.module_utils._gpu.model_dir import read_model_dir
    missing = read_model_dir(str(tmp_path / "not-there"))
    assert (missing["exists"], missing["config_json"], missing["weights"]["gib"], missing["weights"]["source"]) == (False, False, 0.0, None)
    (tmp_path / "model.safetensors.index.json").write_text("{not json")
    (tmp_path / "config.json").write_text("{}")
    broken = read_model_dir(str(tmp_path))
    assert broken["weights"] is None and broken["config_json"] is True
    assert broken["error"].startswith("model.safetensors.index.json is not valid JSON")
