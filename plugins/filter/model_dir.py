# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Jinja filter over ``module_utils/_gpu/model_dir.py`` (the module gpu_facts reads a model directory with it).

Filters:
  model_weights_size(index_text, safetensors_sizes=None, config_text=None)
      -> {bytes, gib, source (index | files | null), detail, architectures, torch_dtype, quantization}
      ``index_text``: text of model.safetensors.index.json ('' when absent); ``safetensors_sizes``: byte sizes of the
      directory's *.safetensors files; ``config_text``: text of config.json. A file that is not a JSON object, or a
      metadata.total_size that is not a positive number of bytes, raises AnsibleFilterError naming it.
"""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils._gpu.model_dir import weights_size


def model_weights_size(index_text, safetensors_sizes=None, config_text=None):
    """Weights' size from the model directory's files (see module_utils/_gpu/model_dir.weights_size)."""
    try:
        return weights_size(index_text or None, safetensors_sizes, config_text or None)
    except ValueError as exc:
        raise AnsibleFilterError("model directory metadata: %s. Fix: repair or re-download the model, or set preflight_model_size_gib "
                                 "(GiB of weights) so preflight does not read it" % exc)


class FilterModule(object):
    """llmops.sglang model-directory filters."""

    def filters(self):
        return {"model_weights_size": model_weights_size}
