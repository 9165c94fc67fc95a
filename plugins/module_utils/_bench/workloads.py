# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Benchmark workloads: prompt files read on the controller, the built-in prompt set, per-level selection.

Standard library only (it is imported by the ``serving_benchmark`` action plugin on the controller and by the
module on the load generator). A *row* is a plain dict, the shape that travels from the controller to the load
generator as module data::

    {"prompt": "text" | None, "messages": [{"role": "user", "content": "..."}] | None,
     "category": "coding", "output_len": 256 | None, "source": "file.jsonl:12",
     "turns": ["first user turn", "second user turn", ...], "system": "system prompt" | None}

Exactly one of ``prompt`` / ``messages`` is set. ``turns`` lists the row's user turns in order (one for a ``prompt``
row) and ``system`` its system prompt (OpenAI ``system`` messages joined by blank lines, ShareGPT ``system`` turns or
a top-level ``system`` key); the multi-turn replay (:mod:`conversations`) sends them turn by turn with the server's
own answers in place of the file's assistant turns. ``output_len`` (tokens) is None when the row did not give one (the
benchmark's ``output_len`` applies). ``source`` names the file and line the row came from (``builtin:<n>`` for the
built-in set, ``builtin-long:<category>:<tokens>`` for the long-context set).

File formats (one file may mix row shapes; the shape is decided per row):

* ShareGPT JSON (``sharegpt_*.json``, as ``sglang.bench_serving --dataset-name sharegpt`` reads it): a JSON array of
  ``{"conversations": [{"from": "human", "value": "..."}, {"from": "gpt", "value": "..."}, ...]}``; the prompt is the
  first ``human``/``user`` turn (bench_serving uses the first turn too); every ``human``/``user`` turn is a turn of
  the multi-turn replay.
* JSONL (or a JSON array) of ``{"prompt": "..."}`` or OpenAI ``{"messages": [{"role", "content"}, ...]}`` rows (the
  chat backend sends the messages as they are; ``/generate`` sends their contents joined by blank lines).
* Question files (MT-Bench ``question.jsonl``, SPEED-Bench's splits exported as JSONL):
  ``{"category": "...", "turns": ["first turn", ...]}``; the first turn is the prompt, and every turn a turn of the
  multi-turn replay.
* SPEED-Bench's Parquet files (``<config>/test-*.parquet``, needs pyarrow on the controller): :mod:`speed_bench`.
  SPEED-Bench rows still holding its placeholder (not resolved with NVIDIA's prepare_data.py) are left out in every
  format; a file that is mostly placeholders is refused.

Every row may carry ``category`` (str) and ``output_len`` (int >= 1). A workload spec is a file, a directory (its
``*.json``/``*.jsonl`` files, sorted, not recursive) or a glob.

Unusable rows are skipped and counted by reason, as ``bench_serving`` drops the ShareGPT conversations it cannot use
(:data:`SKIP_REASONS`): ``not UTF-8`` and ``not JSON`` (a JSON Lines line), ``not an object``, ``no prompt key``, ``too
few turns`` (a ShareGPT ``conversations`` list of fewer than 2 turns: bench_serving's own filter), ``no human turn``,
``empty value``, ``bad field`` (a ``category``, ``output_len``, ``system`` or message of the wrong type) and ``too
long``. A file is refused whole (:class:`WorkloadError` naming the file, its first skipped lines with their reasons and
the fix, before any request is sent) only when no row is usable, or when the skipped share of its rows is above
``max_skipped_fraction`` (:data:`MAX_SKIPPED_FRACTION`, 0.5: a file that is mostly broken is the wrong file), or when it
cannot be read at all (unreadable, empty, unknown format, a JSON array that is not valid JSON: bench_serving's
``json.load`` refuses those too). :func:`load_workload_counted` returns the counts (:func:`skip_counts`).

Large files (the real ``ShareGPT_V3_unfiltered_cleaned_split.json`` has ~94k conversations, ~650 MB) are read in
:data:`READ_CHUNK` pieces and parsed row by row: the file's text is never held whole, only the usable rows' user turns
(``benchmarks/dataset_load.py`` measures it against bench_serving's ``json.load``). An optional ``progress`` callback
is called every :data:`PROGRESS_BYTES` bytes of a file at least that large, and once at its end.
"""

from __future__ import annotations

import codecs
import functools
import gc
import glob
import hashlib
import json
import os
import random
import re

from ansible_collections.llmops.sglang.plugins.module_utils._bench.builtin_prompts import BUILTIN_PROMPTS, CATEGORIES

# Workload names that are not files.
RANDOM_IDS = "random-ids"
BUILTIN = "builtin"
BUILTIN_LONG = "builtin-long"
AUTO = "auto"
NAMED_WORKLOADS = (AUTO, RANDOM_IDS, BUILTIN, BUILTIN_LONG)
# builtin-long: one row per (category, target input length in tokens), the lengths spanning the report's input-length
# buckets (<2k, 2k-8k, 8k-16k, >16k); words are estimated at TOKENS_PER_WORD tokens (about what BPE tokenizers give
# for English prose; the server's own prompt_tokens is what the report buckets by).
LONG_LENGTHS = (1000, 4000, 12000, 20000)
TOKENS_PER_WORD = 1.3
FILE_EXTENSIONS = (".json", ".jsonl", ".parquet")
UNCATEGORIZED = "uncategorized"
# A row's prompt text is capped so that a corrupt file cannot ship gigabytes as module arguments.
MAX_PROMPT_CHARS = 400000
# Why a row is skipped: the reason names of the counts (summary.json, summary.md, the play's output).
NOT_UTF8 = "not UTF-8"
NOT_JSON = "not JSON"
NOT_OBJECT = "not an object"
NO_PROMPT = "no prompt key"
TOO_FEW_TURNS = "too few turns"
NO_HUMAN_TURN = "no human turn"
EMPTY_VALUE = "empty value"
BAD_FIELD = "bad field"
TOO_LONG = "too long"
# a SPEED-Bench row whose turns still hold the data set's placeholder (speed_bench.py; resolved by NVIDIA's prepare_data.py)
PLACEHOLDER = "SPEED-Bench placeholder"
SKIP_REASONS = (NOT_UTF8, NOT_JSON, NOT_OBJECT, NO_PROMPT, TOO_FEW_TURNS, NO_HUMAN_TURN, EMPTY_VALUE, BAD_FIELD, TOO_LONG,
                PLACEHOLDER)
# Default of ``max_skipped_fraction``: a file whose skipped share of rows is above it is refused (the wrong file).
MAX_SKIPPED_FRACTION = 0.5
# Skipped rows a refusal or the counts name (file and line), the first ones of the file.
FIRST_SKIPPED = 5
# Bytes read at a time from a workload file, and the progress interval of a long load. A chunk decodes to up to 4 bytes
# a character (any emoji in it); 4 MiB chunks made the load spend almost half its CPU time in the kernel, touching fresh
# pages (benchmarks/dataset_load.py, docs/benchmark.md), 256 KiB ones reuse the freed memory.
READ_CHUNK = 256 * 1024
PROGRESS_BYTES = 128 * 1024 * 1024


class WorkloadError(Exception):
    """A workload that cannot be used. The message names the file, the line (when there is one) and the fix."""


class RowError(WorkloadError):
    """One unusable row: ``reason`` is one of :data:`SKIP_REASONS` (the loaders skip the row and count it)."""

    def __init__(self, msg, reason, why=""):
        super(RowError, self).__init__(msg)
        self.reason = reason
        self.why = why


def _where(path, line):
    return "%s line %d" % (path, line) if line else path


def _row_error(path, line, why, fix, reason=BAD_FIELD):
    return RowError("workload %s: %s; %s" % (_where(path, line), why, fix), reason, why)


_ROW_SHAPES = ("'prompt' (text), 'messages' (OpenAI chat messages), 'conversations' (ShareGPT) or 'turns' "
               "(MT-Bench/SPEED-Bench questions)")


# os.path.basename of a row's file, remembered (every row of a file names it in its source)
_basename = functools.lru_cache(maxsize=16)(os.path.basename)


def parse_row(obj, path, line):
    """One workload row (dict, see the module docstring) from a decoded JSON object.

    ``path``/``line`` (1-based; 0 = unknown) only name the place in errors. Raises :class:`RowError` (a WorkloadError)
    whose ``reason`` is one of :data:`SKIP_REASONS` for an object that is not a dict (``not an object``), has no prompt
    key of a known shape (``no prompt key``), a ShareGPT conversation of fewer than 2 turns (``too few turns``, as
    bench_serving filters), no user turn (``no human turn``; a system turn is never taken for it, a leading assistant
    turn is skipped), an empty prompt or first user turn (``empty value``), a prompt above :data:`MAX_PROMPT_CHARS`
    (``too long``) or a bad ``category``, ``output_len``, ``system`` or message (``bad field``).
    """
    if not isinstance(obj, dict):
        raise _row_error(path, line, "a row must be a JSON object, got %s" % type(obj).__name__,
                         "write one object per row with %s" % _ROW_SHAPES, NOT_OBJECT)
    prompt = None
    messages = None
    turns = None
    system = []
    if "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise _row_error(path, line, "'prompt' must be a non-empty string, got %r" % (str(prompt)[:60] if prompt is not None else None,),
                             "give the prompt text, or drop the row",
                             EMPTY_VALUE if prompt is None or isinstance(prompt, str) else BAD_FIELD)
    elif "messages" in obj:
        messages = obj["messages"]
        if not isinstance(messages, list):
            raise _row_error(path, line, "'messages' must be a non-empty list of {role, content}", "use the OpenAI chat format")
        for i, msg in enumerate(messages):
            if (not isinstance(msg, dict) or msg.get("role") not in ("system", "user", "assistant", "tool", "developer")
                    or not isinstance(msg.get("content"), str)):
                raise _row_error(path, line, "messages[%d] is %r: each message needs a role (system/user/assistant) and a "
                                 "string content" % (i, str(msg)[:80]), "use the OpenAI chat format")
        if messages and messages[-1]["role"] == "assistant":
            messages = messages[:-1]
        if not any(m["role"] == "user" for m in messages):
            raise _row_error(path, line, "'messages' has no user message", "add the user turn the model should answer",
                             NO_HUMAN_TURN)
        if not any(m["role"] == "user" and m["content"].strip() for m in messages):
            raise _row_error(path, line, "'messages' has no non-empty user message", "add the user turn the model should answer",
                             EMPTY_VALUE)
        turns = [m["content"] for m in messages if m["role"] == "user" and m["content"].strip()]
        system = [m["content"] for m in messages if m["role"] in ("system", "developer") and m["content"].strip()]
    elif "conversations" in obj:
        conv = obj["conversations"]
        if not isinstance(conv, list):
            raise _row_error(path, line, "'conversations' must be a list of {from, value}", "use the ShareGPT format")
        if len(conv) < 2:
            raise _row_error(path, line, "the conversation has %d turn(s); bench_serving keeps conversations of at least 2"
                             % len(conv), "drop the row or add the turns", TOO_FEW_TURNS)
        # one pass (the large-file load parses ~94k of these): the prompt is the first human/user turn with a string
        # value (an empty one is refused below); turns and system keep the non-blank ones, in order
        turns = []
        for turn in conv:
            if isinstance(turn, dict):
                value = turn.get("value")
                if isinstance(value, str):
                    who = turn.get("from")
                    if who == "human" or who == "user":
                        if prompt is None:
                            prompt = value
                        if value.strip():
                            turns.append(value)
                    elif who == "system" and value.strip():
                        system.append(value)
        if prompt is None:
            raise _row_error(path, line, "the conversation has no human turn ({\"from\": \"human\", \"value\": ...})",
                             "drop the row or add the human turn", NO_HUMAN_TURN)
        if not prompt.strip():
            raise _row_error(path, line, "the conversation's first human turn has an empty value",
                             "drop the row or write the human turn", EMPTY_VALUE)
    elif "turns" in obj:
        turns = obj["turns"]
        if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
            raise _row_error(path, line, "'turns' must be a list of strings (one per user turn)",
                             "use the MT-Bench question format {\"category\": ..., \"turns\": [\"...\", \"...\"]}")
        if not turns:
            raise _row_error(path, line, "'turns' must be a non-empty list whose first item is the question text",
                             "use the MT-Bench question format {\"category\": ..., \"turns\": [\"...\"]}", NO_HUMAN_TURN)
        if not turns[0].strip():
            raise _row_error(path, line, "'turns' must be a non-empty list whose first item is the question text (it is empty)",
                             "use the MT-Bench question format {\"category\": ..., \"turns\": [\"...\"]}", EMPTY_VALUE)
        prompt = turns[0]
        turns = [t for t in turns if t.strip()]
    else:
        raise _row_error(path, line, "row without a prompt (keys: %s)" % (", ".join(sorted(obj)) or "none"),
                         "give each row one of %s" % _ROW_SHAPES, NO_PROMPT)
    if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
        raise _row_error(path, line, "the prompt has %d characters, more than %d" % (len(prompt), MAX_PROMPT_CHARS),
                         "shorten it (the load generator receives every prompt as module data)", TOO_LONG)
    category = obj.get("category", UNCATEGORIZED)
    if category is None:
        category = UNCATEGORIZED
    if not isinstance(category, str) or not category.strip():
        raise _row_error(path, line, "'category' must be a non-empty string, got %r" % (category,), "name the category or drop the key")
    out_len = obj.get("output_len")
    if out_len is not None and (isinstance(out_len, bool) or not isinstance(out_len, int) or out_len < 1):
        raise _row_error(path, line, "'output_len' must be an integer >= 1 (tokens), got %r" % (out_len,),
                         "give a token count or drop the key (the benchmark's output_len applies)")
    top_system = obj.get("system")
    if top_system is not None:
        if not isinstance(top_system, str):
            raise _row_error(path, line, "'system' must be a string (the system prompt), got %s" % type(top_system).__name__,
                             "give the system prompt as text or drop the key")
        if top_system.strip():
            system.insert(0, top_system)
    if turns is None:
        turns = [prompt]
    if sum(map(len, turns)) + sum(map(len, system)) > MAX_PROMPT_CHARS:
        raise _row_error(path, line, "the conversation's turns have more than %d characters" % MAX_PROMPT_CHARS,
                         "shorten it (the load generator receives every prompt as module data)", TOO_LONG)
    return {"prompt": prompt, "messages": messages, "category": category.strip(), "output_len": out_len,
            "source": "%s:%d" % (_basename(path), line) if line else _basename(path),
            "turns": turns, "system": "\n\n".join(system) if system else None}


class _Skips(object):
    """The rows of one file, used and skipped: ``rows`` (every row seen), ``skipped`` ({reason: count}) and ``first``
    (the first :data:`FIRST_SKIPPED` skipped rows as ``(line, reason, why)``)."""

    def __init__(self):
        self.rows = 0
        self.skipped = {}
        self.first = []

    def count(self, reason, n):
        """``n`` of the rows already seen skipped for ``reason``, without a line (rows left out after parsing)."""
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n

    def skip(self, line, reason, why):
        self.rows += 1
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if len(self.first) < FIRST_SKIPPED:
            self.first.append((line, reason, why))


class _Reader(object):
    """Text of a workload file read :data:`READ_CHUNK` bytes at a time (UTF-8, a BOM dropped), with the line number of
    any position of the text still held, and the progress callback. Only the unparsed rest is kept (``text[pos:]``).

    Each refill decodes one bytes object: the unparsed rest encoded back to UTF-8 (exact: strict UTF-8 decoding never
    yields a lone surrogate), the undecoded end of the last chunk (a character cut by the chunk's end) and the new
    chunk. The text is never concatenated as str: the chunk of a file with any emoji decodes to 4 bytes a character, and
    a str copy of it cost more than the bytes one."""

    def __init__(self, fh, path, size, progress):
        self.fh, self.path, self.size, self.progress = fh, path, size, progress
        self.text = ""
        self.tail = b""          # bytes of a character cut by the last chunk's end (not decoded yet)
        self.bom = True          # no character decoded yet
        self.pos = 0
        self.line = 1            # the line of text[self.line_pos]
        self.line_pos = 0
        self.read_bytes = 0
        self.next_report = PROGRESS_BYTES
        self.eof = False
        self.rows = 0
        # refill before a row when less text than this is left, so that a row cut by the chunk's end is rare (it costs a
        # failed parse and json's error message, which counts the lines of the whole text)
        self.low = max(1, READ_CHUNK // 32)

    def more(self):
        """Append the next chunk to the text (dropping what was parsed); False at the end of the file."""
        if self.eof:
            return False
        chunk = self.fh.read(READ_CHUNK)
        self.read_bytes += len(chunk)
        rest = self.text[self.pos:]
        data = rest.encode("utf-8") + self.tail + chunk if rest or self.tail else chunk
        try:
            new, used = codecs.utf_8_decode(data, "strict", not chunk)
        except UnicodeDecodeError as exc:
            line = self.line_of(self.pos) + data.count(b"\n", 0, exc.start)
            raise WorkloadError("workload %s line %d: not UTF-8 (%s); convert the file to UTF-8" % (self.path, line, exc.reason))
        if self.bom and new:     # the file's first character: a BOM is dropped (as the utf-8-sig codec does)
            self.bom = False
            if new[0] == "\ufeff":
                new = new[1:]
        self.line = self.line_of(self.pos)
        self.text = new
        self.tail = data[used:]
        self.pos = self.line_pos = 0
        if not chunk:
            self.eof = True
        self.report()
        return bool(chunk) or len(new) > len(rest)

    def line_of(self, pos):
        """Line (1-based) of ``text[pos]``; positions only move forward (the newlines are counted once)."""
        self.line += self.text.count("\n", self.line_pos, pos)
        self.line_pos = pos
        return self.line

    def report(self, done=False):
        if self.progress is None or self.size < PROGRESS_BYTES:
            return
        if done or self.read_bytes >= self.next_report:
            self.progress(self.path, self.read_bytes, self.size, self.rows)
            while self.next_report <= self.read_bytes:
                self.next_report += PROGRESS_BYTES

    def skip_ws(self):
        """Move past whitespace; the next character, or "" at the end of the file."""
        while True:
            self.pos = _WHITESPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""


_WHITESPACE = re.compile(r"[ \t\r\n]*")
_SEPARATOR = re.compile(r"[ \t\r\n]*,[ \t\r\n]*")


def _array_rows(reader, add):
    """Each element of a top-level JSON array (``text[pos] == "["``) to ``add(line, obj)``. A JSON array that is not valid
    JSON is refused whole (bench_serving's ``json.load`` refuses it too); an element may span chunks."""
    dec = json.JSONDecoder()
    path = reader.path
    reader.pos += 1
    expect_item = True
    while True:
        c = reader.skip_ws()
        if c == "":
            raise WorkloadError("workload %s: the JSON array is not closed (missing ']'); fix the file"
                                % _where(path, reader.line_of(len(reader.text))))
        if c == "]":
            reader.pos += 1
            if reader.skip_ws() != "":
                raise WorkloadError("workload %s: malformed JSON: text after the closing ']'; fix the file"
                                    % _where(path, reader.line_of(reader.pos)))
            return
        if not expect_item:
            if c != ",":
                raise WorkloadError("workload %s: malformed JSON: expected ',' or ']' between rows; fix the file"
                                    % _where(path, reader.line_of(reader.pos)))
            reader.pos += 1
            expect_item = True
            continue
        if not reader.eof and len(reader.text) - reader.pos < reader.low:
            reader.more()
        while True:
            try:
                obj, end = dec.raw_decode(reader.text, reader.pos)
            except ValueError as exc:
                if not reader.eof:    # the element may go on in the next chunk: read it, parse again
                    reader.more()
                    continue
                raise WorkloadError("workload %s: malformed JSON: %s; fix the row (validate with python -m json.tool)"
                                    % (_where(path, reader.line_of(max(getattr(exc, "pos", reader.pos) or reader.pos, reader.pos))),
                                       getattr(exc, "msg", exc)))
            if end < len(reader.text) or reader.eof:
                break
            reader.more()             # a number at the chunk's end may go on in the next one
        add(reader.line_of(reader.pos), obj)
        reader.rows += 1
        reader.pos = end
        expect_item = False
        sep = _SEPARATOR.match(reader.text, end)    # the usual ",\n  " up to the next row, in one step
        if sep is not None and sep.end() < len(reader.text):
            reader.pos = sep.end()
            expect_item = True


def _line_rows(fh, path, size, progress, skips, add):
    """Each non-blank line of a JSON Lines file to ``add(line, obj)``; a line that is not UTF-8 or not JSON is skipped
    into ``skips``."""
    read = 0
    next_report = PROGRESS_BYTES
    for i, raw in enumerate(fh, 1):
        read += len(raw)
        if progress is not None and size >= PROGRESS_BYTES and read >= next_report:
            progress(path, read, size, skips.rows)
            next_report += PROGRESS_BYTES
        if i == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            skips.skip(i, NOT_UTF8, "not UTF-8 (%s)" % exc.reason)
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            skips.skip(i, NOT_JSON, "malformed JSON (%s)" % getattr(exc, "msg", exc))
            continue
        add(i, obj)
    if progress is not None and size >= PROGRESS_BYTES:
        progress(path, read, size, skips.rows)


def _first_byte(fh):
    """The first byte of the file that is not a BOM or whitespace (b"" for none) and its line; the file is rewound."""
    line = 1
    start = True
    try:
        while True:
            chunk = fh.read(65536)
            if not chunk:
                return b"", line
            if start and chunk.startswith(codecs.BOM_UTF8):
                chunk = chunk[len(codecs.BOM_UTF8):]
            start = False
            stripped = chunk.lstrip(b" \t\r\n")
            if stripped:
                return stripped[:1], line + chunk.count(b"\n", 0, len(chunk) - len(stripped))
            line += chunk.count(b"\n")
    finally:
        fh.seek(0)


def read_file(path, progress=None):
    """The usable rows of one workload file and its skips: ``(rows, skips)``.

    ``rows``: dicts (see :func:`parse_row`); ``skips``: ``rows`` (every row seen, int), ``skipped`` ({reason: count},
    reasons of :data:`SKIP_REASONS`) and ``first`` (the first skipped rows, ``[(line, reason, why)]``). ``.jsonl``: one
    JSON object per non-blank line; ``.json``: a JSON array of rows (ShareGPT), or JSON Lines in a ``.json`` file.
    ``progress(path, bytes_read, file_bytes, rows)`` is called every :data:`PROGRESS_BYTES` of a file at least that
    large, and at its end. Raises WorkloadError for an unreadable or empty file, an unknown extension, a JSON array
    that is not valid JSON, or text that is not UTF-8 in it (a JSON Lines line that is not UTF-8 is skipped).
    """
    ext = os.path.splitext(path)[1].lower()
    if ext not in FILE_EXTENSIONS:
        raise WorkloadError("workload %s: unknown format %r; use a .json file (ShareGPT array or JSON array of rows), a "
                            ".jsonl file (one row per line) or a SPEED-Bench .parquet file" % (path, ext or "(no extension)"))
    # SPEED-Bench's Parquet splits, and its unresolved placeholder rows in any format: speed_bench.py
    from ansible_collections.llmops.sglang.plugins.module_utils._bench import speed_bench  # pylint: disable=import-outside-toplevel
    skips = _Skips()
    if ext == ".parquet":
        rows, unresolved = speed_bench.load_parquet(path)
        skips.rows = len(rows) + unresolved
        skips.count(PLACEHOLDER, unresolved)
        return rows, skips
    rows = []

    def add(line, obj):
        skips.rows += 1
        try:
            rows.append(parse_row(obj, path, line))
        except RowError as exc:
            skips.rows -= 1
            skips.skip(line, exc.reason, exc.why)

    # The loader makes no reference cycles; the cyclic GC would only rescan the growing list of rows again and again
    # (about 7 % of the load time of a 58 MB file). It is switched back on when the file is read.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            first, line = _first_byte(fh)
            if not first:
                raise WorkloadError("workload %s: the file is empty; give a file with at least one prompt row" % path)
            if ext == ".json" and first == b"[":
                reader = _Reader(fh, path, size, progress)
                reader.skip_ws()
                _array_rows(reader, add)
                reader.report(done=True)
            elif ext == ".json" and first != b"{":
                raise WorkloadError("workload %s line %d: unknown format: a .json workload is a JSON array of rows (ShareGPT) "
                                    "or JSON Lines; fix the file" % (path, line))
            else:
                _line_rows(fh, path, size, progress, skips, add)
    except (IOError, OSError) as exc:
        raise WorkloadError("workload %s: cannot read it: %s; check the path and its permissions on the controller" % (path, exc))
    finally:
        if gc_was_on:
            gc.enable()
    rows, unresolved = speed_bench.drop_placeholders(rows, path)
    skips.count(PLACEHOLDER, unresolved)
    return rows, skips


def check_skips(path, rows, skips, max_skipped_fraction=MAX_SKIPPED_FRACTION, limit_name="workload_max_skipped_fraction"):
    """Refuse a file (WorkloadError) when no row of it is usable, or when its skipped share of rows is above
    ``max_skipped_fraction`` (0..1; ``limit_name`` names that setting in the message). The message names the file, its
    first skipped lines with their reasons, and the fix."""
    skipped = sum(skips.skipped.values())
    if not skips.rows:
        raise WorkloadError("workload %s: the file holds no rows; give at least one prompt row" % path)
    first = "; ".join("line %d: %s (%s)" % (line, reason, why) for line, reason, why in skips.first)
    more = ", ..." if skipped > len(skips.first) else ""
    if not rows:
        raise WorkloadError("workload %s: none of its %d row(s) is usable (%s); first: %s%s; give a file with %s"
                            % (path, skips.rows, _reason_counts(skips.skipped), first, more, _ROW_SHAPES))
    if float(skipped) / skips.rows > max_skipped_fraction:
        raise WorkloadError("workload %s: %d of its %d rows are unusable (%.0f %%, above %s=%s: a file that is mostly broken is "
                            "likely the wrong file) (%s); first: %s%s; fix the rows, point the workload at the right file, "
                            "or raise %s" % (path, skipped, skips.rows, 100.0 * skipped / skips.rows, limit_name,
                                             max_skipped_fraction, _reason_counts(skips.skipped), first, more, limit_name))


def _reason_counts(skipped):
    """``2 no human turn, 1 not JSON``: the counts, largest first (then by name)."""
    return ", ".join("%d %s" % (n, reason) for reason, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))


def skip_counts(per_file):
    """The counts of a workload's files, ``per_file`` ``[(path, rows, skips)]`` (from :func:`read_file`), as a dict:

    ``rows`` (rows seen), ``used`` (rows usable, before the category filter and the sample), ``skipped`` ({reason:
    count}), ``first_skipped`` (the first :data:`FIRST_SKIPPED` skipped rows, ``[{"source": "file:line", "reason"}]``),
    ``files`` (base names) and ``text``, e.g. ``9 of 12 rows used; skipped: 2 no human turn, 1 not JSON (lines 11, 14,
    ...)`` (lines as ``file:line`` when the workload has several files)."""
    total, used, skipped, first = 0, 0, {}, []
    for path, rows, skips in per_file:
        total += skips.rows
        used += len(rows)
        for reason, n in skips.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + n
        for line, reason, _why in skips.first:
            first.append({"source": "%s:%d" % (os.path.basename(path), line), "reason": reason, "line": line})
    first = first[:FIRST_SKIPPED]
    text = "%d of %d rows used" % (used, total)
    n_skipped = sum(skipped.values())
    if n_skipped:
        text += "; skipped: %s" % _reason_counts(skipped)
    if first:  # rows left out after parsing (SPEED-Bench placeholders) have no line
        where = ", ".join(str(f["line"]) if len(per_file) == 1 else f["source"] for f in first)
        text += " (%s %s%s)" % ("line" if n_skipped == 1 and len(per_file) == 1 else "lines" if len(per_file) == 1 else "at", where,
                                ", ..." if n_skipped > len(first) else "")
    return {"rows": total, "used": used, "skipped": skipped,
            "first_skipped": [{"source": f["source"], "reason": f["reason"]} for f in first],
            "files": [os.path.basename(p) for p, _r, _s in per_file], "text": text}


def load_file(path, max_skipped_fraction=MAX_SKIPPED_FRACTION, progress=None):
    """The usable rows of one workload file (``.json``, ``.jsonl`` or SPEED-Bench ``.parquet``), as dicts (see :func:`parse_row`); unusable rows are
    skipped (:func:`read_file`). Raises WorkloadError as :func:`read_file` does, and when the file is refused whole
    (:func:`check_skips`: no usable row, or a skipped share above ``max_skipped_fraction``)."""
    rows, skips = read_file(path, progress)
    check_skips(path, rows, skips, max_skipped_fraction)
    return rows


def resolve_files(spec):
    """Paths of a workload spec: a file, a directory (its *.json/*.jsonl, sorted) or a glob (sorted matches).

    Raises WorkloadError when nothing matches.
    """
    spec = os.path.expanduser(spec)
    if os.path.isdir(spec):
        files = sorted(os.path.join(spec, f) for f in os.listdir(spec)
                       if os.path.splitext(f)[1].lower() in FILE_EXTENSIONS and os.path.isfile(os.path.join(spec, f)))
        if not files:
            raise WorkloadError("workload %s: the directory holds no .json or .jsonl file; put prompt files there or name a file"
                                % spec)
        return files
    if any(c in spec for c in "*?["):
        files = sorted(f for f in glob.glob(spec) if os.path.isfile(f))
        if not files:
            raise WorkloadError("workload %s: the glob matches no file (on the controller); check the pattern" % spec)
        return files
    if not os.path.exists(spec):
        raise WorkloadError("workload %r: no such file or directory on the controller, and not one of %s; give a prompt "
                            "file, a directory or a glob, or a named workload" % (spec, ", ".join(NAMED_WORKLOADS)))
    return [spec]


def locate(spec, basedir):
    """Where a file workload ``spec`` is read from: as given (absolute, ``~``, or relative to the current directory
    when that exists or a glob matches there), else relative to ``basedir`` (the playbook's directory). Named
    workloads (:data:`NAMED_WORKLOADS`) are returned unchanged. The serving_benchmark action plugin and the
    benchmark fingerprint both resolve a spec with this function, so they read the same files."""
    if spec in NAMED_WORKLOADS or not spec:
        return spec
    given = os.path.expanduser(spec)
    if os.path.isabs(given) or os.path.exists(given) or glob.glob(given) or not basedir:
        return spec
    return os.path.join(basedir, spec)


def content_digest(spec, basedir=None):
    """``sha256:<64 hex>`` of what a workload spec sends, by content: a file workload hashes the name (base name) and
    the bytes of every file :func:`resolve_files` reads, in that order (a prompt file edited in place, or a file
    added to a workload directory, gives a new digest; a file touched without change does not); ``builtin`` and
    ``auto`` (builtin with speculative decoding) hash the built-in prompt set (a collection upgrade that changes
    it is a new question); ``random-ids`` and "" give "" (nothing is read). Raises :class:`WorkloadError` as
    :func:`resolve_files` does, or naming the file that cannot be read."""
    if not spec or spec == RANDOM_IDS:
        return ""
    digest = hashlib.sha256()
    if spec in (BUILTIN, AUTO):
        digest.update(json.dumps(BUILTIN_PROMPTS, sort_keys=True, separators=(",", ":")).encode("utf-8"))
        return "sha256:" + digest.hexdigest()
    if spec == BUILTIN_LONG:
        digest.update(json.dumps(builtin_long_rows(), sort_keys=True, separators=(",", ":")).encode("utf-8"))
        return "sha256:" + digest.hexdigest()
    for path in resolve_files(locate(spec, basedir)):
        data = hashlib.sha256()
        try:
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(READ_CHUNK), b""):    # a 650 MB ShareGPT file is never held whole
                    data.update(chunk)
        except (IOError, OSError) as exc:
            raise WorkloadError("workload %s: cannot read %s on the controller (%s); check its permissions" % (spec, path, exc))
        digest.update(os.path.basename(path).encode("utf-8") + b"\0" + data.digest())
    return "sha256:" + digest.hexdigest()


def builtin_rows():
    """The built-in category-labelled prompt set (module ``workload_builtin``) as rows."""
    return [{"prompt": text, "messages": None, "category": cat, "output_len": None, "source": "builtin:%d" % (i + 1)}
            for i, (cat, text) in enumerate(BUILTIN_PROMPTS)]


def builtin_long_rows(lengths=LONG_LENGTHS, categories=CATEGORIES, tokens_per_word=TOKENS_PER_WORD, output_len=None):
    """The long-context workload (``workload: builtin-long``) built from the built-in prompt set, as rows.

    A draft model trained on short sequences accepts fewer drafts on long inputs (EAGLE3 Qwen3-8B: accept length 2.30
    at 2k tokens, 2.04 at 4k, 1.69 at 8k, 1.29 at 12k, 1.09 at 16k; vllm-project/speculators #684, SGLang #6783). For
    each category (``categories`` order) and each target length (``lengths``, tokens, in order) one row: a reference
    document made of the category's built-in prompts, taken in turn from the first, until the document and the task
    together reach ``int(target / tokens_per_word)`` words, then the task (the category's ``i``-th prompt for the
    ``i``-th length)::

        {"prompt": "Reference material:\n\n<doc>\n\nTask: <task>", "category": "rag", "output_len": None,
         "source": "builtin-long:rag:4000", "messages": None}

    Words are whitespace-separated (``str.split``). ``output_len`` (int tokens or None: the benchmark's) is set on every
    row. Raises WorkloadError for an unknown category, a length < 1 or ``tokens_per_word`` <= 0. Deterministic.
    """
    if not tokens_per_word or tokens_per_word <= 0:
        raise WorkloadError("builtin-long: tokens_per_word must be > 0, got %r" % (tokens_per_word,))
    rows = []
    for cat in categories:
        if cat not in CATEGORIES:
            raise WorkloadError("builtin-long: unknown category %r; the built-in set has %s" % (cat, ", ".join(CATEGORIES)))
        texts = [t for c, t in BUILTIN_PROMPTS if c == cat]
        for i, target in enumerate(lengths):
            if not isinstance(target, int) or target < 1:
                raise WorkloadError("builtin-long: lengths must be integers >= 1 token, got %r" % (target,))
            words_goal = int(target / tokens_per_word)
            task = texts[i % len(texts)]
            doc, words, j = [], len(task.split()), 0
            while words < words_goal:
                piece = texts[j % len(texts)]
                doc.append(piece)
                words += len(piece.split())
                j += 1
            rows.append({"prompt": "Reference material:\n\n%s\n\nTask: %s" % ("\n\n".join(doc), task), "messages": None,
                         "category": cat, "output_len": output_len, "source": "%s:%s:%d" % (BUILTIN_LONG, cat, target)})
    return rows


def filter_categories(rows, categories, what):
    """Rows whose category is in ``categories`` (None/empty = all). Raises WorkloadError when none is left."""
    if not categories:
        return rows
    wanted = set(c.strip() for c in categories)
    kept = [r for r in rows if r["category"] in wanted]
    if not kept:
        have = sorted(set(r["category"] for r in rows))
        raise WorkloadError("workload %s: the category filter %s matches no row; its categories are %s; fix workload_categories"
                            % (what, sorted(wanted), ", ".join(have)))
    missing = sorted(wanted - set(r["category"] for r in kept))
    if missing:
        raise WorkloadError("workload %s: the category filter names %s, which no row carries (its categories are %s); fix "
                            "workload_categories" % (what, missing, ", ".join(sorted(set(r["category"] for r in rows)))))
    return kept


def sample_rows(rows, limit, seed):
    """At most ``limit`` rows, a seeded sample that keeps every category's share (deterministic for ``seed``)."""
    if limit is None or limit <= 0 or len(rows) <= limit:
        return list(rows)
    return stratified(rows, limit, seed)


def stratified(rows, n, seed):
    """``n`` rows in round-robin over the categories (each category's rows shuffled with ``seed``, category order sorted
    and rotated by ``seed``); cycles when ``n`` exceeds the rows. Deterministic for ``(rows, n, seed)``."""
    rng = random.Random(seed)
    by_cat = {}
    for r in rows:
        by_cat.setdefault(r["category"], []).append(r)
    cats = sorted(by_cat)
    for c in cats:
        rng.shuffle(by_cat[c])
    start = seed % len(cats) if cats else 0
    cats = cats[start:] + cats[:start]
    out = []
    idx = dict((c, 0) for c in cats)
    while len(out) < n:
        for c in cats:
            if len(out) >= n:
                break
            lst = by_cat[c]
            out.append(lst[idx[c] % len(lst)])
            idx[c] += 1
    return out


def load_workload_counted(spec, categories=None, limit=0, seed=1, max_skipped_fraction=MAX_SKIPPED_FRACTION, progress=None,
                          limit_name="workload_max_skipped_fraction"):
    """Rows of a workload spec on the controller, with the skip counts: ``(name, rows, counts)``.

    ``builtin``, ``builtin-long`` (:func:`builtin_long_rows`), or files (a file, directory or glob, each read with
    :func:`read_file` and refused whole by :func:`check_skips`: no usable row, or a skipped share above
    ``max_skipped_fraction`` (0..1), ``limit_name`` naming that setting). ``name`` is what records carry as
    ``dataset_name`` (``builtin``, ``builtin-long``, or the spec as given); ``counts`` is :func:`skip_counts` of the
    files (None for the built-in sets). ``categories`` filters rows; ``limit`` > 0 keeps a seeded
    category-stratified sample of at most that many rows. ``progress``: see :func:`read_file`. Raises WorkloadError for
    every problem (unreadable/empty file, unknown format, a refused file, a filter that matches nothing).
    ``random-ids``/``auto`` are not loaded here (they need no rows).
    """
    if spec in (RANDOM_IDS, AUTO):
        raise WorkloadError("workload %r needs no prompt rows; load_workload is for builtin and files" % spec)
    counts = None
    if spec == BUILTIN:
        rows = builtin_rows()
    elif spec == BUILTIN_LONG:
        rows = builtin_long_rows()
    else:
        rows = []
        per_file = []
        for path in resolve_files(spec):
            file_rows, skips = read_file(path, progress)
            check_skips(path, file_rows, skips, max_skipped_fraction, limit_name)
            per_file.append((path, file_rows, skips))
            rows.extend(file_rows)
        counts = skip_counts(per_file)
    rows = filter_categories(rows, categories, spec)
    return spec, sample_rows(rows, limit, seed), counts


def load_workload(spec, categories=None, limit=0, seed=1, max_skipped_fraction=MAX_SKIPPED_FRACTION):
    """Rows of a workload spec on the controller: ``(name, rows)`` of :func:`load_workload_counted` (without the counts)."""
    name, rows, _counts = load_workload_counted(spec, categories, limit, seed, max_skipped_fraction)
    return name, rows


def validate_rows(rows, what="prompts"):
    """Check rows that arrived as module data (the shape :func:`parse_row` returns). Raises WorkloadError."""
    if not isinstance(rows, list) or not rows:
        raise WorkloadError("%s: empty; a text workload needs at least one prompt row" % what)
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise WorkloadError("%s[%d]: a row must be a dict, got %s" % (what, i, type(r).__name__))
        src = r.get("source") or "%s[%d]" % (what, i)
        if r.get("prompt") is None and r.get("messages") is None:
            raise WorkloadError("%s[%d] (%s): row without a prompt; give 'prompt' or 'messages'" % (what, i, src))
        row = parse_row(dict((k, v) for k, v in r.items() if v is not None and k not in ("source", "turns")), src, 0)
        row["source"] = src
        turns = r.get("turns")
        if turns is not None:
            if (not isinstance(turns, list) or not turns
                    or not all(isinstance(t, str) and t.strip() for t in turns)):
                raise WorkloadError("%s[%d] (%s): 'turns' must be a non-empty list of non-empty strings (the user turns in "
                                    "order), got %r" % (what, i, src, str(turns)[:80]))
            row["turns"] = list(turns)
        out.append(row)
    return out


def row_text(row):
    """The prompt as plain text: ``prompt``, or the contents of ``messages`` joined by blank lines (for /generate and
    /v1/completions, which take text without a chat template)."""
    if row.get("prompt") is not None:
        return row["prompt"]
    return "\n\n".join(m["content"] for m in row["messages"] if m["content"])


def row_turns(row, max_turns=0):
    """The row's user turns (list of str, in order), at most ``max_turns`` of them (0 = all)."""
    turns = row.get("turns") or [row_text(row)]
    return list(turns[:max_turns] if max_turns and max_turns > 0 else turns)


def row_messages(row):
    """The prompt as OpenAI chat messages (the chat backend; the server applies the chat template)."""
    if row.get("messages") is not None:
        return row["messages"]
    return [{"role": "user", "content": row["prompt"]}]
