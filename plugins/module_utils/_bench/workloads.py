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
built-in set).

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
``*.json``/``*.jsonl`` files, sorted, not recursive) or a glob. Every problem raises :class:`WorkloadError` naming the
file, the line and the fix, before any request is sent.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import random

from ansible_collections.llmops.sglang.plugins.module_utils._bench.builtin_prompts import BUILTIN_PROMPTS

# Workload names that are not files.
RANDOM_IDS = "random-ids"
BUILTIN = "builtin"
AUTO = "auto"
NAMED_WORKLOADS = (AUTO, RANDOM_IDS, BUILTIN)
FILE_EXTENSIONS = (".json", ".jsonl", ".parquet")
UNCATEGORIZED = "uncategorized"
# A row's prompt text is capped so that a corrupt file cannot ship gigabytes as module arguments.
MAX_PROMPT_CHARS = 400000


class WorkloadError(Exception):
    """A workload that cannot be used. The message names the file, the line (when there is one) and the fix."""


def _where(path, line):
    return "%s line %d" % (path, line) if line else path


def _row_error(path, line, why, fix):
    return WorkloadError("workload %s: %s; %s" % (_where(path, line), why, fix))


_ROW_SHAPES = ("'prompt' (text), 'messages' (OpenAI chat messages), 'conversations' (ShareGPT) or 'turns' "
               "(MT-Bench/SPEED-Bench questions)")


def parse_row(obj, path, line):
    """One workload row (dict, see the module docstring) from a decoded JSON object.

    ``path``/``line`` (1-based; 0 = unknown) only name the place in errors. Raises WorkloadError for an object that
    is not a dict, has no prompt of a known shape, an empty prompt, a bad ``category`` or ``output_len``.
    """
    if not isinstance(obj, dict):
        raise _row_error(path, line, "a row must be a JSON object, got %s" % type(obj).__name__,
                         "write one object per row with %s" % _ROW_SHAPES)
    prompt = None
    messages = None
    turns = None
    system = []
    if "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise _row_error(path, line, "'prompt' must be a non-empty string, got %r" % (str(prompt)[:60] if prompt is not None else None,),
                             "give the prompt text, or drop the row")
    elif "messages" in obj:
        messages = obj["messages"]
        if not isinstance(messages, list) or not messages:
            raise _row_error(path, line, "'messages' must be a non-empty list of {role, content}", "use the OpenAI chat format")
        for i, msg in enumerate(messages):
            if (not isinstance(msg, dict) or msg.get("role") not in ("system", "user", "assistant", "tool", "developer")
                    or not isinstance(msg.get("content"), str)):
                raise _row_error(path, line, "messages[%d] is %r: each message needs a role (system/user/assistant) and a "
                                 "string content" % (i, str(msg)[:80]), "use the OpenAI chat format")
        if messages[-1]["role"] == "assistant":
            messages = messages[:-1]
        if not any(m["role"] == "user" and m["content"].strip() for m in messages):
            raise _row_error(path, line, "'messages' has no non-empty user message", "add the user turn the model should answer")
        turns = [m["content"] for m in messages if m["role"] == "user" and m["content"].strip()]
        system = [m["content"] for m in messages if m["role"] in ("system", "developer") and m["content"].strip()]
    elif "conversations" in obj:
        conv = obj["conversations"]
        if not isinstance(conv, list):
            raise _row_error(path, line, "'conversations' must be a list of {from, value}", "use the ShareGPT format")
        turns = [t["value"] for t in conv if isinstance(t, dict) and t.get("from") in ("human", "user")
                 and isinstance(t.get("value"), str) and t["value"].strip()]
        system = [t["value"] for t in conv if isinstance(t, dict) and t.get("from") == "system"
                  and isinstance(t.get("value"), str) and t["value"].strip()]
        for turn in conv:
            if isinstance(turn, dict) and turn.get("from") in ("human", "user") and isinstance(turn.get("value"), str):
                prompt = turn["value"]
                break
        if prompt is None or not prompt.strip():
            raise _row_error(path, line, "the conversation has no non-empty human turn ({\"from\": \"human\", \"value\": ...})",
                             "drop the row or add the human turn")
    elif "turns" in obj:
        turns = obj["turns"]
        if not isinstance(turns, list) or not turns or not isinstance(turns[0], str) or not turns[0].strip():
            raise _row_error(path, line, "'turns' must be a non-empty list whose first item is the question text",
                             "use the MT-Bench question format {\"category\": ..., \"turns\": [\"...\"]}")
        if not all(isinstance(t, str) for t in turns):
            raise _row_error(path, line, "'turns' must be a list of strings (one per user turn)",
                             "use the MT-Bench question format {\"category\": ..., \"turns\": [\"...\", \"...\"]}")
        prompt = turns[0]
        turns = [t for t in turns if t.strip()]
    else:
        raise _row_error(path, line, "row without a prompt (keys: %s)" % (", ".join(sorted(obj)) or "none"),
                         "give each row one of %s" % _ROW_SHAPES)
    if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
        raise _row_error(path, line, "the prompt has %d characters, more than %d" % (len(prompt), MAX_PROMPT_CHARS),
                         "shorten it (the load generator receives every prompt as module data)")
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
    if sum(len(t) for t in turns) + sum(len(t) for t in system) > MAX_PROMPT_CHARS:
        raise _row_error(path, line, "the conversation's turns have more than %d characters" % MAX_PROMPT_CHARS,
                         "shorten it (the load generator receives every prompt as module data)")
    return {"prompt": prompt, "messages": messages, "category": category.strip(), "output_len": out_len,
            "source": "%s:%d" % (os.path.basename(path), line) if line else os.path.basename(path),
            "turns": turns, "system": "\n\n".join(system) if system else None}


def _line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def _json_array_items(text, path):
    """Yield ``(line, obj)`` for each element of the JSON array ``text`` (top-level ``[...]``)."""
    dec = json.JSONDecoder()
    n = len(text)
    pos = text.index("[") + 1
    ws = " \t\r\n"
    expect_item = True
    while True:
        while pos < n and text[pos] in ws:
            pos += 1
        if pos >= n:
            raise WorkloadError("workload %s: the JSON array is not closed (missing ']'); fix the file" % _where(path, _line_of(text, n)))
        if text[pos] == "]":
            return
        if not expect_item:
            if text[pos] != ",":
                raise WorkloadError("workload %s: malformed JSON: expected ',' or ']' between rows; fix the file"
                                    % _where(path, _line_of(text, pos)))
            pos += 1
            expect_item = True
            continue
        try:
            obj, end = dec.raw_decode(text, pos)
        except ValueError as exc:
            raise WorkloadError("workload %s: malformed JSON: %s; fix the row (validate with python -m json.tool)"
                                % (_where(path, _line_of(text, getattr(exc, "pos", pos) or pos)), getattr(exc, "msg", exc)))
        yield _line_of(text, pos), obj
        pos = end
        expect_item = False


def load_file(path):
    """All rows of one workload file (``.json`` or ``.jsonl``), as dicts (see :func:`parse_row`).

    ``.jsonl``: one JSON object per non-blank line. ``.json``: a JSON array of rows (ShareGPT), or JSON Lines in a
    ``.json`` file. Raises WorkloadError for an unreadable, empty or malformed file, an unknown extension, or a bad row.
    """
    ext = os.path.splitext(path)[1].lower()
    if ext not in FILE_EXTENSIONS:
        raise WorkloadError("workload %s: unknown format %r; use a .json file (ShareGPT array or JSON array of rows), a "
                            ".jsonl file (one row per line) or a SPEED-Bench .parquet file" % (path, ext or "(no extension)"))
    # SPEED-Bench's Parquet splits, and its unresolved placeholder rows in any format: speed_bench.py
    from ansible_collections.llmops.sglang.plugins.module_utils._bench import speed_bench  # pylint: disable=import-outside-toplevel
    if ext == ".parquet":
        return speed_bench.load_parquet(path)[0]
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except (IOError, OSError) as exc:
        raise WorkloadError("workload %s: cannot read it: %s; check the path and its permissions on the controller" % (path, exc))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise WorkloadError("workload %s line %d: not UTF-8 (%s); convert the file to UTF-8"
                            % (path, raw.count(b"\n", 0, exc.start) + 1, exc.reason))
    if not text.strip():
        raise WorkloadError("workload %s: the file is empty; give a file with at least one prompt row" % path)
    rows = []
    stripped = text.lstrip()
    if ext == ".json" and stripped.startswith("["):
        for line, obj in _json_array_items(text, path):
            rows.append(parse_row(obj, path, line))
    elif ext == ".json" and not stripped.startswith("{"):
        raise WorkloadError("workload %s line %d: unknown format: a .json workload is a JSON array of rows (ShareGPT) "
                            "or JSON Lines; fix the file" % (path, _line_of(text, len(text) - len(stripped))))
    else:
        for i, line_text in enumerate(text.splitlines(), 1):
            if not line_text.strip():
                continue
            try:
                obj = json.loads(line_text)
            except ValueError as exc:
                raise WorkloadError("workload %s line %d: malformed JSON (%s); each line must be one JSON object"
                                    % (path, i, getattr(exc, "msg", exc)))
            rows.append(parse_row(obj, path, i))
    if not rows:
        raise WorkloadError("workload %s: the file holds no rows; give at least one prompt row" % path)
    return speed_bench.drop_placeholders(rows, path)[0]


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
    for path in resolve_files(locate(spec, basedir)):
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except (IOError, OSError) as exc:
            raise WorkloadError("workload %s: cannot read %s on the controller (%s); check its permissions" % (spec, path, exc))
        digest.update(os.path.basename(path).encode("utf-8") + b"\0" + hashlib.sha256(data).digest())
    return "sha256:" + digest.hexdigest()


def builtin_rows():
    """The built-in category-labelled prompt set (module ``workload_builtin``) as rows."""
    return [{"prompt": text, "messages": None, "category": cat, "output_len": None, "source": "builtin:%d" % (i + 1)}
            for i, (cat, text) in enumerate(BUILTIN_PROMPTS)]


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


def load_workload(spec, categories=None, limit=0, seed=1):
    """Rows of a workload spec on the controller: ``builtin``, or files (a file, directory or glob).

    Returns ``(name, rows)``: ``name`` is what records carry as ``dataset_name`` (``builtin``, or the spec as given).
    ``categories`` filters rows; ``limit`` > 0 keeps a seeded category-stratified sample of at most that many rows.
    Raises WorkloadError for every problem (unreadable/empty/malformed file, unknown format, a row without a prompt,
    a filter that matches nothing). ``random-ids``/``auto`` are not loaded here (they need no rows).
    """
    if spec in (RANDOM_IDS, AUTO):
        raise WorkloadError("workload %r needs no prompt rows; load_workload is for builtin and files" % spec)
    if spec == BUILTIN:
        rows = builtin_rows()
    else:
        rows = []
        for path in resolve_files(spec):
            rows.extend(load_file(path))
    rows = filter_categories(rows, categories, spec)
    return spec, sample_rows(rows, limit, seed)


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
