# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Mooncake-style request traces: the reader and the prompts built from ``hash_ids`` (standard library only).

Format (one JSON object per line, the Mooncake FAST'25 trace ``mooncake_trace.jsonl``, which
``sglang.bench_serving --dataset-name mooncake``, NVIDIA aiperf ``--custom-dataset-type mooncake_trace``
and vLLM's benchmarks read)::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}

* ``timestamp`` (number, ms since the trace start; optional only when no line has one),
* ``input_length`` (int >= 1, prompt tokens), ``output_length`` (int >= 1, output tokens),
* ``hash_ids`` (list of int, optional): one id per ``block_size``-token block of the prompt, in order;
  two requests whose lists start with the same ids share those prompt blocks (a prefix). The
  Mooncake traces use 512-token blocks (Mooncake's trace README and NVIDIA Dynamo's data generator:
  "block_size ... is assumed to be 512"; aiperf's default for this format is 512 too).

Prompts (:func:`build_prompts`) are token ids: block ``h`` is 512 ids drawn from
``random.Random("<seed>:<h>")`` whose first two ids encode ``h`` (``h mod R``, ``h div R mod R`` over
the id range R), so two different ids never produce the same block and two requests share exactly
their common leading blocks (the first id of the next block differs unless the two hash ids are
congruent modulo R = 29000, then the second does). Prompt tokens past ``len(hash_ids) * block_size`` are
unique to the request. This differs from bench_serving 0.5.9, which sends text (``f"{hash_id}" +
" ".join(["hi"] * 512)`` per id) through a tokenizer; ids need none and give exact lengths.
"""

from __future__ import annotations

import json
import math
import random

from ansible_collections.llmops.sglang.plugins.module_utils._bench.client import TOKEN_ID_MAX, TOKEN_ID_MIN, Prompt, _WORDS

MOONCAKE_BLOCK_SIZE = 512
_RANGE = TOKEN_ID_MAX - TOKEN_ID_MIN


class TraceError(ValueError):
    """An unusable trace: the message names the line, the field, the value and the fix."""


class TraceRecord(object):
    """One trace line: ``timestamp_ms`` (float), ``input_length``, ``output_length`` (int tokens), ``hash_ids`` (list of int), ``line`` (1-based)."""

    __slots__ = ("timestamp_ms", "input_length", "output_length", "hash_ids", "line")

    def __init__(self, timestamp_ms, input_length, output_length, hash_ids, line=0):
        self.timestamp_ms = timestamp_ms
        self.input_length = input_length
        self.output_length = output_length
        self.hash_ids = hash_ids
        self.line = line


def _int_field(obj, key, lineno, minimum):
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < minimum:
        raise TraceError("trace line %d: %s=%r must be an integer >= %d (tokens)" % (lineno, key, v, minimum))
    return int(v)


def parse_mooncake(text, limit=0):
    """Parse Mooncake JSONL ``text`` (str) into :class:`TraceRecord` s sorted by timestamp (stable).

    Blank lines are skipped. ``limit`` > 0 keeps the first ``limit`` lines of the file (before
    sorting), as bench_serving's ``--num-prompts`` slices the trace. A line without ``timestamp``
    gets 0 when no line has one (then every request is sent at once); mixing is refused.

    Raises TraceError naming the line for invalid JSON, a line that is not an object, a missing or
    non-integer ``input_length``/``output_length`` (< 1), a negative or non-numeric ``timestamp``,
    ``hash_ids`` that is not a list of integers >= 0, or an empty trace.
    """
    recs = []
    with_ts = 0
    for lineno, raw in enumerate((text or "").splitlines(), 1):
        raw = raw.strip()
        if not raw:
            continue
        if limit and len(recs) >= limit:
            break
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise TraceError("trace line %d is not JSON (%s): %r" % (lineno, exc, raw[:120]))
        if not isinstance(obj, dict):
            raise TraceError("trace line %d is not a JSON object: %r" % (lineno, raw[:120]))
        in_len = _int_field(obj, "input_length", lineno, 1)
        out_len = _int_field(obj, "output_length", lineno, 1)
        ts = obj.get("timestamp")
        if ts is not None:
            if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts < 0 or math.isinf(ts) or math.isnan(ts):
                raise TraceError("trace line %d: timestamp=%r must be a number >= 0 (ms since the trace start)" % (lineno, ts))
            with_ts += 1
        hids = obj.get("hash_ids", [])
        if not isinstance(hids, list) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in hids):
            raise TraceError("trace line %d: hash_ids=%r must be a list of integers >= 0 (one per prompt block)" % (lineno, hids))
        recs.append(TraceRecord(float(ts) if ts is not None else None, in_len, out_len, list(hids), lineno))
    if not recs:
        raise TraceError("the trace has no request line; give Mooncake JSONL lines like "
                         '{"timestamp": 0, "input_length": 512, "output_length": 64, "hash_ids": [0]}')
    if with_ts and with_ts != len(recs):
        missing = [r.line for r in recs if r.timestamp_ms is None][:5]
        raise TraceError("trace lines %s have no timestamp while others do; give every line a timestamp (ms) or none" % missing)
    for r in recs:
        if r.timestamp_ms is None:
            r.timestamp_ms = 0.0
    recs.sort(key=lambda r: r.timestamp_ms)
    return recs


def _block_tokens(h, block_size, seed):
    rng = random.Random("%d:%d" % (seed, h))
    head = [TOKEN_ID_MIN + h % _RANGE, TOKEN_ID_MIN + (h // _RANGE) % _RANGE]
    return (head + [rng.randrange(TOKEN_ID_MIN, TOKEN_ID_MAX) for _i in range(max(block_size - 2, 0))])[:block_size]


def build_prompts(records, block_size=MOONCAKE_BLOCK_SIZE, seed=1, text=False):
    """Prompts (:class:`bench_client.Prompt`) for trace ``records``, in order.

    Each prompt is exactly ``input_length`` tokens: the blocks of its ``hash_ids`` (``block_size``
    tokens each, the same tokens for the same id in every request), cut at ``input_length``, then
    request-unique tokens if the prompt is longer than its blocks. ``output_length`` becomes the
    prompt's output length. With ``text=True`` (the openai-chat backend) each token id becomes one
    word (``w<id>``), about one token each with a real tokenizer; the server's count is then authoritative.

    Raises TraceError for ``block_size`` < 1.
    """
    if block_size is None or block_size < 1:
        raise TraceError("block_size=%r must be >= 1 token (Mooncake traces use 512)" % (block_size,))
    cache = {}
    prompts = []
    for i, r in enumerate(records):
        ids = []
        for h in r.hash_ids:
            if len(ids) >= r.input_length:
                break
            blk = cache.get(h)
            if blk is None:
                blk = cache[h] = _block_tokens(h, block_size, seed)
            ids.extend(blk)
        ids = ids[:r.input_length]
        if len(ids) < r.input_length:
            rng = random.Random("%d:req:%d" % (seed, i))
            ids.extend(rng.randrange(TOKEN_ID_MIN, TOKEN_ID_MAX) for _j in range(r.input_length - len(ids)))
        prompt = " ".join(_WORDS[t % len(_WORDS)] + str(t) for t in ids) if text else ids
        prompts.append(Prompt(prompt, r.input_length, r.output_length))
    return prompts


def shared_prefix_len(a, b, block_size=MOONCAKE_BLOCK_SIZE):
    """Tokens two trace records are meant to share: common leading ``hash_ids`` x ``block_size``, capped by both lengths."""
    n = 0
    for x, y in zip(a.hash_ids, b.hash_ids):
        if x != y:
            break
        n += 1
    return min(n * block_size, a.input_length, b.input_length)
