# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Server-sent events framing and the stream chunk formats of SGLang's HTTP API.

Formats (SGLANG_FACTS.md section 4.3/4.4, SGLang 0.5.9 ``entrypoints/http_server.py``):

* SSE framing (WHATWG "server-sent events"): events separated by a blank line; each ``data:`` line
  adds one line to the event's data (one optional space after the colon is dropped); lines starting
  with ``:`` are comments; LF or CRLF line ends. SGLang sends ``data: {json}\\n\\n`` and ends with
  ``data: [DONE]\\n\\n``.
* ``POST /generate`` stream chunk: ``{"text": <cumulative text>, "output_ids": [<cumulative ids>],
  "meta_info": {"id", "finish_reason": null | {"type": "length"|"stop"|"abort", ...},
  "prompt_tokens", "completion_tokens" (cumulative), ...}}``; the finishing chunk adds
  ``e2e_latency`` (s) and, with speculative decoding, ``spec_verify_ct``, ``spec_accept_length``,
  ``spec_accept_rate``, ... An error arrives as ``{"error": {"message": ...}}``.
* ``POST /v1/completions`` chunk: ``{"object": "text_completion", "choices": [{"text": <incremental>,
  "finish_reason": null|"stop"|"length"|"abort"}], "usage": null | {...}}``; with
  ``stream_options.include_usage`` a last chunk has ``"choices": []`` and ``usage`` =
  ``{"prompt_tokens", "completion_tokens", "total_tokens"}``.
* ``POST /v1/chat/completions`` chunk: as above with ``"object": "chat.completion.chunk"`` and
  ``choices[].delta.{role, content, reasoning_content}``.

Because /generate chunks repeat the whole text and id list, parsing every chunk with ``json.loads``
costs O(n^2) over an n-token output. :func:`generate_chunk_progress` reads only the few fields the
client needs from the trailing ``meta_info`` object and parses the JSON fully only for the final
chunk or an error.
"""

from __future__ import annotations

import json

DONE = b"[DONE]"


class SSEDecoder(object):
    """Incremental SSE decoder: :meth:`feed` raw body bytes, get complete event data payloads.

    Payloads are ``bytes`` (``json.loads`` accepts them). Multi-line data are joined with ``\\n``.
    Events without a ``data`` field (comments, ``event:``/``id:``-only events) are skipped.
    """

    __slots__ = ("_buf", "_cr")

    def __init__(self):
        self._buf = b""
        self._cr = False

    def feed(self, data):
        """Add ``data`` (bytes) and return the list of payloads of the events completed by it."""
        buf = self._buf + data if self._buf else data
        if self._cr or b"\r" in data:
            self._cr = True
            buf = buf.replace(b"\r\n", b"\n")
        out = []
        pos = 0
        while True:
            end = buf.find(b"\n\n", pos)
            if end < 0:
                break
            block = buf[pos:end]
            pos = end + 2
            if block.startswith(b"data: ") and b"\n" not in block:
                out.append(block[6:])
                continue
            payload = _event_data(block)
            if payload is not None:
                out.append(payload)
        self._buf = buf[pos:] if pos else buf
        return out

    def pending(self):
        """Bytes received but not yet part of a complete event (for diagnostics)."""
        return self._buf


def _event_data(block):
    """The data of one event block (lines separated by ``\\n``), or None when it has no data line."""
    lines = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, sep, value = line.partition(b":")
        if field != b"data":
            continue
        if value.startswith(b" "):
            value = value[1:]
        lines.append(value if sep else b"")
    if not lines:
        return None
    return b"\n".join(lines)


def iter_sse_payloads(data):
    """All event payloads (bytes) of a complete SSE body ``data`` (bytes or str)."""
    if not isinstance(data, bytes):
        data = data.encode("utf-8")
    dec = SSEDecoder()
    out = dec.feed(data)
    rest = dec.pending()
    if rest.strip():
        out.extend(dec.feed(b"\n\n"))
    return out


def _int_after(payload, key_pos, key_len):
    """Parse the JSON integer that follows the key at ``key_pos`` (``"key": 123``); None if not an int."""
    i = payload.find(b":", key_pos + key_len)
    if i < 0:
        return None
    i += 1
    n = len(payload)
    while i < n and payload[i] in b" \t\r\n":
        i += 1
    j = i
    while j < n and 48 <= payload[j] <= 57:
        j += 1
    if j == i:
        return None
    return int(payload[i:j])


_META = b'"meta_info"'
_COMPLETION = b'"completion_tokens"'
_FINISH = b'"finish_reason"'


class GenerateChunk(object):
    """What the benchmark client needs from one /generate stream chunk.

    Attributes:
      completion_tokens (int or None): cumulative output tokens (``meta_info.completion_tokens``).
      finished (bool): ``meta_info.finish_reason`` was not null (the request's last chunk).
      error (str): an error message ('' when none): an ``{"error": ...}`` chunk or an ``abort`` finish.
      meta (dict or None): the full ``meta_info`` of a finished chunk (parsed once), else None.
      done (bool): the ``[DONE]`` terminator.
      text (str or None): the cumulative ``text`` of a finished chunk (the whole output), else None.
    """

    __slots__ = ("completion_tokens", "finished", "error", "meta", "done", "text")

    def __init__(self, completion_tokens=None, finished=False, error="", meta=None, done=False, text=None):
        self.completion_tokens = completion_tokens
        self.finished = finished
        self.error = error
        self.meta = meta
        self.done = done
        self.text = text


def _error_text(err):
    if isinstance(err, dict):
        msg = err.get("message") or err.get("msg") or json.dumps(err, sort_keys=True)
        code = err.get("code") or err.get("type")
        return "%s (%s)" % (msg, code) if code else str(msg)
    return str(err)


def generate_chunk_progress(payload):
    """Read one /generate SSE payload (bytes) cheaply; return a :class:`GenerateChunk`.

    Only the trailing ``meta_info`` object is scanned on running chunks (``rfind`` from the end,
    then the integer after ``"completion_tokens"`` and the null test of ``"finish_reason"``), so
    the cost does not grow with the cumulative ``text``/``output_ids``. A JSON key inside the text
    cannot match because its quotes would be escaped. The finished chunk, an error chunk, or a
    chunk without ``meta_info`` is parsed with ``json.loads``.

    Raises ValueError (``json`` decoding) only for a payload that is neither ``[DONE]`` nor JSON.
    """
    if payload == DONE:
        return GenerateChunk(done=True)
    mi = payload.rfind(_META)
    if mi >= 0:
        fi = payload.find(_FINISH, mi)
        ci = payload.find(_COMPLETION, mi)
        if fi >= 0 and ci >= 0:
            j = payload.find(b":", fi + len(_FINISH)) + 1
            while payload[j:j + 1] == b" ":
                j += 1
            if payload.startswith(b"null", j):
                return GenerateChunk(completion_tokens=_int_after(payload, ci, len(_COMPLETION)))
    data = json.loads(payload)
    if not isinstance(data, dict):
        return GenerateChunk(error="unexpected /generate chunk (not an object): %s" % payload[:200].decode("utf-8", "replace"))
    if "error" in data:
        return GenerateChunk(error=_error_text(data["error"]), finished=True)
    meta = data.get("meta_info")
    if not isinstance(meta, dict):
        return GenerateChunk(error="/generate chunk without meta_info: %s" % payload[:200].decode("utf-8", "replace"))
    fin = meta.get("finish_reason")
    err = ""
    if isinstance(fin, dict) and fin.get("type") == "abort":
        err = "request aborted by the server: %s" % (fin.get("message") or json.dumps(fin, sort_keys=True))
    text = data.get("text") if fin is not None else None
    return GenerateChunk(completion_tokens=meta.get("completion_tokens"), finished=fin is not None,
                         error=err, meta=meta if fin is not None else None, text=text if isinstance(text, str) else None)


class OpenAIChunk(object):
    """One OpenAI-compatible stream chunk (``/v1/completions`` or ``/v1/chat/completions``).

    Attributes:
      text (str): the incremental text of choice 0 (``text`` or ``delta.content`` +
        ``delta.reasoning_content``), '' when none.
      finish_reason (str or None): ``stop``/``length``/``abort``... of choice 0.
      usage (dict or None): ``usage`` when present (``prompt_tokens``, ``completion_tokens``, ...).
      error (str): an error message ('' when none).
      done (bool): the ``[DONE]`` terminator.
      spec (dict or None): the request's speculative-decoding details, ``sglext.spec_tokens_details`` of the
        response-level chunk SGLang 0.5.23 sends after the finish chunk when the request set
        ``return_spec_tokens_details`` (``spec_verify_ct``, ``spec_num_correct_drafts``, ``spec_num_proposed_drafts``,
        ``spec_accept_length``, ...; the first choice's when ``n > 1`` sent a list). Source: SGLang 0.5.23
        ``entrypoints/openai/protocol.py`` ``SpecTokensDetails``/``SglExt`` and ``serving_completions.py``
        (the ``choices: []`` chunk with ``sglext``). None when absent.
    """

    __slots__ = ("text", "finish_reason", "usage", "error", "done", "spec")

    def __init__(self, text="", finish_reason=None, usage=None, error="", done=False, spec=None):
        self.text = text
        self.finish_reason = finish_reason
        self.usage = usage
        self.error = error
        self.done = done
        self.spec = spec


def parse_openai_chunk(payload):
    """Parse one OpenAI SSE payload (bytes or str) into an :class:`OpenAIChunk`.

    Raises ValueError when the payload is neither ``[DONE]`` nor a JSON object.
    """
    if payload == DONE or payload == "[DONE]":
        return OpenAIChunk(done=True)
    data = json.loads(payload)
    if not isinstance(data, dict):
        raise ValueError("OpenAI stream chunk is not a JSON object: %r" % (payload[:200],))
    if "error" in data and data["error"]:
        return OpenAIChunk(error=_error_text(data["error"]))
    if data.get("object") == "error":
        return OpenAIChunk(error=_error_text(data))
    text = ""
    finish = None
    choices = data.get("choices") or []
    if choices:
        ch = choices[0]
        finish = ch.get("finish_reason")
        if "delta" in ch:
            delta = ch.get("delta") or {}
            text = (delta.get("reasoning_content") or "") + (delta.get("content") or "")
        else:
            text = ch.get("text") or ""
    err = ""
    if finish == "abort":
        err = "request aborted by the server (finish_reason abort)"
    spec = None
    ext = data.get("sglext")
    if isinstance(ext, dict):
        spec = ext.get("spec_tokens_details")
        if isinstance(spec, list):
            spec = spec[0] if spec else None
        if not isinstance(spec, dict):
            spec = None
    return OpenAIChunk(text=text, finish_reason=finish, usage=data.get("usage"), error=err, spec=spec)
