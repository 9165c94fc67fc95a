# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""How large a model's weights are, from the model directory's own files (standard library only).

Sources, best first:

* ``model.safetensors.index.json`` (Hugging Face sharded checkpoints, written by ``save_pretrained`` /
  ``huggingface_hub.split_torch_state_dict_into_shards``): ``{"metadata": {"total_size": <bytes>}, "weight_map":
  {tensor: shard}}``; ``total_size`` is the sum of the tensors' byte sizes (dtype size x elements), the memory the
  weights take on the GPUs before any KV cache;
* the sizes of the ``*.safetensors`` files (a single-file checkpoint has no index; a safetensors file is an
  8-byte header length, a JSON header of a few KiB and the raw tensors, so its size is the weights' size to
  within a few KiB);
* ``config.json`` only describes the model (``torch_dtype``, ``quantization_config``, ``architectures``): it is
  reported alongside, never used to guess a size.

:func:`read_model_dir` reads those files on the host (gpu_facts ``model_dir``, for preflight's memory and disk
checks); :func:`weights_size` works on their text (also the filter ``llmops.sglang.model_weights_size``).
"""
from __future__ import annotations

import glob
import json
import os

GIB = 1073741824


def _json(text, what):
    if text is None or str(text).strip() == "":
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError("%s is not valid JSON: %s" % (what, exc))
    if not isinstance(data, dict):
        raise ValueError("%s is not a JSON object" % what)
    return data


def weights_size(index_text=None, safetensors_sizes=None, config_text=None):
    """Size of the weights of one model directory.

    ``index_text``: the text of ``model.safetensors.index.json`` or None; ``safetensors_sizes``: byte sizes of
    the directory's ``*.safetensors`` files (list of int) or None; ``config_text``: the text of ``config.json``
    or None.

    Returns ``{"bytes": int | None, "gib": float (bytes / 2**30, 0.0 when unknown), "source": "index" | "files" |
    None, "detail": str, "architectures": list, "torch_dtype": str | None, "quantization": str | None}``.
    Raises ValueError when a given text is not a JSON object, or ``metadata.total_size`` is not a positive
    integer (the message names the file and the value).
    """
    config = _json(config_text, "config.json") or {}
    quant = config.get("quantization_config")
    out = {"bytes": None, "gib": 0.0, "source": None, "detail": "no model.safetensors.index.json and no *.safetensors file",
           "architectures": list(config.get("architectures") or []), "torch_dtype": config.get("torch_dtype") or config.get("dtype"),
           "quantization": quant.get("quant_method") if isinstance(quant, dict) else None}
    index = _json(index_text, "model.safetensors.index.json")
    if index is not None:
        total = (index.get("metadata") or {}).get("total_size")
        if isinstance(total, bool) or not isinstance(total, (int, float)) or total <= 0 or int(total) != total:
            raise ValueError("model.safetensors.index.json metadata.total_size=%r is not a positive number of bytes" % (total,))
        shards = sorted(set((index.get("weight_map") or {}).values()))
        out.update(bytes=int(total), source="index",
                   detail="model.safetensors.index.json metadata.total_size = %d bytes over %d shard(s)" % (int(total), len(shards)))
    else:
        sizes = [int(s) for s in (safetensors_sizes or []) if isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0]
        if sizes:
            out.update(bytes=sum(sizes), source="files",
                       detail="%d *.safetensors file(s), %d bytes in all" % (len(sizes), sum(sizes)))
    if out["bytes"]:
        out["gib"] = round(out["bytes"] / float(GIB), 3)
    return out


def _text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def read_model_dir(path):
    """Read a model directory on the host, read-only: what preflight's memory and disk checks need.

    ``path``: the directory (an absolute path; the model path of the server).
    Returns ``{"path": str, "exists": bool (a directory), "config_json": bool (config.json is there: the weights are
    downloaded already), "weights": the dict of :func:`weights_size` or None, "error": str or None}``. ``weights`` comes
    from ``model.safetensors.index.json``, else (no index) the sizes of the ``*.safetensors`` files, with ``config.json``
    alongside; a missing directory gives ``weights`` with ``gib`` 0. A file that is not valid (an index that is not JSON,
    a ``total_size`` that is not a positive number of bytes) gives ``weights`` None and ``error`` naming it. Never raises.
    """
    path = str(path)
    out = {"path": path, "exists": os.path.isdir(path), "config_json": os.path.isfile(os.path.join(path, "config.json")),
           "weights": None, "error": None}
    index_text = _text(os.path.join(path, "model.safetensors.index.json"))
    sizes = []
    if index_text is None:
        for name in sorted(glob.glob(os.path.join(glob.escape(path), "*.safetensors"))):
            try:
                if os.path.isfile(name):
                    sizes.append(os.path.getsize(name))
            except OSError:
                continue
    try:
        out["weights"] = weights_size(index_text, sizes, _text(os.path.join(path, "config.json")))
    except ValueError as exc:
        out["error"] = str(exc)
    return out
