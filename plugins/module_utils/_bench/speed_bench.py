# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""NVIDIA SPEED-Bench (the ``nvidia/SPEED-Bench`` data set, arXiv 2604.09557) as benchmark workloads.

What is on disk (the data set card's ``dataset_info``; NVIDIA Model-Optimizer ``examples/specdec_bench``):

* six configs, each one split ``test`` stored as **Parquet**: ``qualitative`` (880 rows: 11 categories x 80 - coding,
  humanities, math, multilingual, qa, rag, reasoning, roleplay, stem, summarization, writing) and ``throughput_1k``,
  ``throughput_2k``, ``throughput_8k``, ``throughput_16k``, ``throughput_32k`` (1,536 rows each, input lengths of about
  1k ... 32k tokens counted with tiktoken ``o200k_base``; categories are entropy tiers: ``low_entropy``, ``mixed``,
  ``high_entropy``, 512 each);
* one row: ``question_id`` (str), ``category`` (str), ``sub_category`` (str), ``turns`` (list of str: the user turns,
  in order), ``source`` (str: the upstream data set), ``src_id`` (str), ``difficulty`` (str), ``multiturn`` (bool);
* rows whose source forbids redistribution ship a placeholder: their first turn starts with :data:`TURNS_PLACEHOLDER`
  (followed by a template, or alone). NVIDIA's ``examples/specdec_bench/prepare_data.py --config <config>`` fetches the
  sources and writes the resolved split to ``data/speed/<config>/test.parquet`` (same columns).

Loading (:func:`load_parquet`, :func:`drop_placeholders`): a ``.parquet`` workload file is read with **pyarrow** (the
only way to read Parquet from Python; not in the standard library, so it is imported when a Parquet file is read, and
its absence is a :class:`WorkloadError` that names the package and the JSONL alternative). Each row becomes a workload
row of the ``turns`` shape (``workloads.parse_row``): the first turn is the prompt, every turn a turn of the multi-turn
replay, ``category`` the row's category (so ``workload_categories: [coding]`` keeps the 80 coding prompts of the
qualitative split), ``source`` ``<config>/<file>:<row>`` (1-based). JSONL exports (``Dataset.to_json``: the same
columns, one row per line; or AIPerf's ``messages`` form) need no extra package: ``workloads.load_file`` reads them as
any ``turns``/``messages`` file. In both, rows still holding the placeholder are left out, and counted; a file whose
rows are mostly placeholders (more than :data:`MAX_UNRESOLVED_SHARE`) is refused with the fix.
"""

from __future__ import annotations

import os
import re

from ansible_collections.llmops.sglang.plugins.module_utils._bench.workloads import WorkloadError, parse_row

#: The text SPEED-Bench puts in place of prompts it may not redistribute (Model-Optimizer specdec_bench ``speed.py``).
TURNS_PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
#: The share of unresolved rows above which a file is refused rather than loaded without them.
MAX_UNRESOLVED_SHARE = 0.5
CONFIGS = ("qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k", "throughput_32k")
_CONFIG_RE = re.compile(r"^(qualitative|throughput_\d+k)$")
_PREPARE = ("resolve it first with NVIDIA Model-Optimizer's examples/specdec_bench/prepare_data.py --config %s (it writes "
            "data/speed/%s/test.parquet) and point the workload at that file")


def config_of(path):
    """The SPEED-Bench config a file belongs to, from the nearest folder of its path named like one (``qualitative``,
    ``throughput_<n>k``), e.g. ``.../throughput_16k/test-00000-of-00001.parquet`` -> ``throughput_16k``; None when no
    folder is."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    for part in reversed(parts[:-1]):
        if _CONFIG_RE.match(part):
            return part
    return None


def is_placeholder(turns):
    """True when any turn (a list of str) is, or starts with, :data:`TURNS_PLACEHOLDER` (an unresolved row)."""
    for turn in turns or ():     # a loop, not any() over a generator: the large-file load checks ~90k rows
        if isinstance(turn, str) and turn.lstrip().startswith(TURNS_PLACEHOLDER):
            return True
    return False


def _row_turns(row):
    if isinstance(row.get("turns"), list):
        return row["turns"]
    return [m.get("content") for m in (row.get("messages") or []) if isinstance(m, dict)]


def drop_placeholders(rows, path):
    """``(kept rows, number left out)``: the rows of ``path`` without those whose turns still hold the placeholder.

    Works on parsed workload rows (``turns``) and raw SPEED-Bench rows alike. Raises :class:`WorkloadError` when every
    row, or more than :data:`MAX_UNRESOLVED_SHARE` of them, is unresolved, naming the file, the count and the fix
    (NVIDIA's prepare_data.py)."""
    kept = [r for r in rows if not is_placeholder(_row_turns(r))]
    left = len(rows) - len(kept)
    if left and (not kept or left > MAX_UNRESOLVED_SHARE * len(rows)):
        config = config_of(path) or "<config>"
        raise WorkloadError("workload %s: %d of %d SPEED-Bench rows are unresolved placeholders ('%s...'), more than %d %%: "
                            "the downloaded split holds no prompt text for sources it may not redistribute; %s"
                            % (path, left, len(rows), TURNS_PLACEHOLDER[:40], int(MAX_UNRESOLVED_SHARE * 100),
                               _PREPARE % (config, config)))
    return kept, left


def _read_parquet(path):
    """The rows of a Parquet file as a list of dicts (pyarrow). Raises WorkloadError without pyarrow or for a file it
    cannot read."""
    try:
        import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise WorkloadError("workload %s: reading a .parquet file needs the Python package pyarrow on the controller (%s); "
                            "install it into the Python that runs ansible-playbook (pip install pyarrow), or give a JSONL "
                            "export of the split instead (datasets' Dataset.to_json: one row per line, read without pyarrow)"
                            % (path, exc))
    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:  # pylint: disable=broad-except
        raise WorkloadError("workload %s: pyarrow cannot read it as Parquet (%s: %s); check that the download is complete "
                            "(the data set's files are test-*.parquet under <config>/)" % (path, type(exc).__name__, exc))


def load_parquet(path):
    """``(rows, unresolved)``: the workload rows of one SPEED-Bench Parquet file (see the module docstring) and how many
    placeholder rows were left out.

    Each Parquet row needs ``turns`` (a non-empty list of str) and may carry ``category`` (str), ``question_id``; other
    columns are ignored. Raises :class:`WorkloadError` (naming the file, the row and the fix) without pyarrow, for an
    unreadable file, a row without turns, an empty file, or mostly unresolved placeholders."""
    raw = _read_parquet(path)
    if not raw:
        raise WorkloadError("workload %s: the Parquet file holds no rows; give a SPEED-Bench split file" % path)
    config = config_of(path)
    where = "%s/%s" % (config, os.path.basename(path)) if config else os.path.basename(path)
    kept, unresolved = drop_placeholders(raw, path)
    kept_ids = set(id(k) for k in kept)
    rows = []
    for i, obj in enumerate(raw, 1):
        if id(obj) not in kept_ids:
            continue
        turns = obj.get("turns")
        if not isinstance(turns, list):
            raise WorkloadError("workload %s row %d: no 'turns' list (columns: %s); a SPEED-Bench split has question_id, "
                                "category, sub_category, turns, source, src_id, difficulty, multiturn - is this the right file?"
                                % (path, i, ", ".join(sorted(obj)) or "none"))
        row = parse_row({"turns": list(turns), "category": obj.get("category")}, path, i)
        row["source"] = "%s:%d" % (where, i)
        rows.append(row)
    return rows, unresolved
