# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""HTTP helpers for a running SGLang server, over ansible's ``fetch_url`` (inside a module) or
``open_url`` (plain Python: filters, tests, benchmarks scripts).

Endpoints (SGLang ``entrypoints/http_server.py``, SGLANG_FACTS.md section 4):

* ``GET /health``: 200 when the server answers a 1-token generation, 503 while starting, shutting down
  or when the detokenizer did not answer within ``SGLANG_HEALTH_CHECK_TIMEOUT`` (20 s). Empty body.
* ``GET /server_info`` (0.5.9+; 0.5.4 only has ``/get_server_info``, still present but deprecated
  later): every server arg at top level, scheduler info, ``internal_states`` (one per DP rank, with
  ``avg_spec_accept_length`` once a Decode log interval has passed), ``version``. A PD router answers
  ``{"decode": [{...}], ...}``; :meth:`SGLangClient.server_info` unwraps the first decode server.
* ``GET /model_info`` (0.5.9+; 0.5.4 ``/get_model_info``): ``model_path``, ``architectures`` (the target's).
* ``POST /generate`` non-stream: ``{"text", "output_ids", "meta_info"}``; ``meta_info`` on the final
  answer carries the spec fields (0.5.9: ``spec_accept_length`` = completion_tokens / spec_verify_ct,
  ``spec_accept_rate``, ``spec_accept_token_num``, ``spec_draft_token_num``, ``spec_verify_ct``;
  0.5.23 renames the counts ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts``).
* ``GET /metrics``: Prometheus text, 404 without ``--enable-metrics``.

The API key (``--api-key``) is sent as ``Authorization: Bearer <key>``. Errors are raised as
:class:`SGLangHTTPError` (or :class:`SGLangNotReady`) whose message names the URL, the HTTP status
(``-1`` = no HTTP answer: refused, reset, timed out) and the start of the body; they never carry a
traceback. Durations are seconds.
"""
from __future__ import annotations

import json
import socket
import time
from urllib.error import HTTPError, URLError  # the error classes open_url raises (stdlib, Python 3 only)
from urllib.parse import urlsplit

from ansible.module_utils.common.text.converters import to_native, to_text
from ansible.module_utils.urls import fetch_url, open_url

#: HTTP status used when no HTTP answer came back (refused, reset, timeout, DNS).
NO_RESPONSE = -1

#: Spec fields of ``meta_info`` (0.5.4 -> 0.5.23) copied by :func:`spec_fields_from_meta_info`.
META_SPEC_FIELDS = (
    "spec_accept_length", "spec_accept_rate", "spec_verify_ct", "spec_accept_token_num", "spec_draft_token_num",
    "spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_cap_length", "spec_accept_histogram",
)
_LOOPBACK = ("127.", "localhost", "::1", "[::1]")


class SGLangHTTPError(Exception):
    """An SGLang endpoint did not answer as expected.

    Attributes: ``url``, ``status`` (HTTP status, ``-1`` without an HTTP answer), ``body`` (first 2000
    characters of the answer, text), ``reason`` (transport message).
    """

    def __init__(self, message, url=None, status=None, body=None, reason=None):
        super(SGLangHTTPError, self).__init__(message)
        self.url = url
        self.status = status
        self.body = body
        self.reason = reason

    def as_dict(self):
        """The error as plain data for module results."""
        return {"msg": str(self), "url": self.url, "status": self.status, "body": self.body, "reason": self.reason}


class SGLangNotReady(SGLangHTTPError):
    """The readiness wait gave up. ``attempts`` is the list of ``{"t_s", "status", "reason"}`` polls; ``cause`` says why:
    ``"timeout"`` (no 200 in time), ``"status"`` (an HTTP status that is not retried) or ``"watch"`` (the ``watch``
    callback of :meth:`SGLangClient.wait_ready` stopped the wait, e.g. the server's systemd unit failed)."""

    def __init__(self, message, url=None, status=None, body=None, reason=None, attempts=None, elapsed_s=None, cause="timeout"):
        super(SGLangNotReady, self).__init__(message, url=url, status=status, body=body, reason=reason)
        self.attempts = attempts or []
        self.elapsed_s = elapsed_s
        self.cause = cause

    def as_dict(self):
        result = super(SGLangNotReady, self).as_dict()
        result.update(attempts=self.attempts, elapsed_s=self.elapsed_s, status_counts=status_counts(self.attempts), cause=self.cause)
        return result


def status_counts(attempts):
    """``{"503": 4, "-1": 2}``: how often each status came back in a list of polls."""
    counts = {}
    for attempt in attempts:
        key = str(attempt.get("status"))
        counts[key] = counts.get(key, 0) + 1
    return counts


def validate_base_url(url):
    """Return ``url`` without a trailing ``/``; raise ValueError naming the value when it is not ``http(s)://host[:port]``."""
    if not isinstance(url, str) or not url:
        raise ValueError("url=%r is not an SGLang base URL; give one like http://127.0.0.1:30000" % (url,))
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("url=%r is not an SGLang base URL (need http:// or https:// and a host); "
                         "give one like http://127.0.0.1:30000" % (url,))
    try:
        parts.port
    except ValueError:
        raise ValueError("url=%r has an invalid port; give one like http://127.0.0.1:30000" % (url,))
    return url.rstrip("/")


#: The options of every module that talks HTTP to a running SGLang server (speculative_check, serving_benchmark,
#: production_concurrency), documented once in the doc fragment ``llmops.sglang.sglang_http``. ``timeout`` is not one
#: of them: each module limits something else with it (a short request, a whole streamed generation, one /metrics read).
HTTP_ARGUMENT_SPEC = dict(
    url=dict(type="str", default="http://127.0.0.1:30000"),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
)


def http_argument_spec():
    """A copy of :data:`HTTP_ARGUMENT_SPEC` for a module's ``argument_spec`` (AnsibleModule may change what it is given)."""
    return dict((name, dict(opt)) for name, opt in HTTP_ARGUMENT_SPEC.items())


def module_client(module, timeout):
    """The :class:`SGLangClient` of a module with the :data:`HTTP_ARGUMENT_SPEC` options: its ``url``, ``api_key`` (an
    empty key sends no header) and ``validate_certs``, requests through ``fetch_url``, ``timeout`` seconds per request.
    Raises ValueError for a malformed ``url`` (see :func:`validate_base_url`)."""
    p = module.params
    return SGLangClient(p["url"], api_key=p.get("api_key") or None, timeout=timeout, module=module,
                        validate_certs=p.get("validate_certs", True))


def spec_fields_from_meta_info(meta_info):
    """The speculative-decoding view of a final ``meta_info`` (from /generate, stream or not).

    Returns a dict: ``accept_length`` (``spec_accept_length``, or completion_tokens / spec_verify_ct when
    only the counts are given; None without spec fields), ``verify_ct``, ``completion_tokens``,
    ``accept_rate_reported`` (``spec_accept_rate`` as the server computed it), ``draft_token_num``
    (``spec_draft_token_num`` or ``spec_num_proposed_drafts``), ``accept_token_num``
    (``spec_accept_token_num`` or ``spec_num_correct_drafts``), ``e2e_latency_s``, ``finish_reason``,
    and ``raw`` (the spec fields as received).
    """
    meta_info = meta_info or {}
    raw = dict((k, meta_info[k]) for k in META_SPEC_FIELDS if k in meta_info)
    completion = meta_info.get("completion_tokens")
    verify_ct = meta_info.get("spec_verify_ct")
    accept_length = meta_info.get("spec_accept_length")
    if accept_length is None and verify_ct and completion is not None:
        accept_length = round(float(completion) / float(verify_ct), 4)
    return {
        "accept_length": accept_length,
        "verify_ct": verify_ct,
        "completion_tokens": completion,
        "accept_rate_reported": meta_info.get("spec_accept_rate"),
        "draft_token_num": meta_info.get("spec_draft_token_num", meta_info.get("spec_num_proposed_drafts")),
        "accept_token_num": meta_info.get("spec_accept_token_num", meta_info.get("spec_num_correct_drafts")),
        "e2e_latency_s": meta_info.get("e2e_latency"),
        "finish_reason": meta_info.get("finish_reason"),
        "raw": raw,
    }


def unwrap_server_info(data):
    """``/server_info`` as a flat dict: a PD router's ``{"decode": [{...}]}`` gives its first decode server."""
    if isinstance(data, dict) and "decode" in data and isinstance(data["decode"], list) and data["decode"] \
            and isinstance(data["decode"][0], dict) and "model_path" not in data:
        return data["decode"][0]
    return data


def avg_spec_accept_length(server_info):
    """``internal_states[*].avg_spec_accept_length`` averaged over DP ranks (lifetime value), None if absent."""
    states = (server_info or {}).get("internal_states") or []
    vals = [s.get("avg_spec_accept_length") for s in states if isinstance(s, dict)]
    vals = [float(v) for v in vals if isinstance(v, (int, float))]
    return round(sum(vals) / len(vals), 4) if vals else None


def last_gen_throughput(server_info):
    """``internal_states[*].last_gen_throughput`` summed over DP ranks (tok/s), None if absent."""
    states = (server_info or {}).get("internal_states") or []
    vals = [float(s["last_gen_throughput"]) for s in states if isinstance(s, dict) and isinstance(s.get("last_gen_throughput"), (int, float))]
    return round(sum(vals), 4) if vals else None


class SGLangClient(object):
    """Client for one SGLang server.

    ``base_url``: ``http(s)://host:port`` (ValueError when malformed). ``api_key``: sent as a Bearer token.
    ``timeout``: seconds per request. ``module``: an AnsibleModule; when given, requests go through
    ``fetch_url`` (honouring the module's ``validate_certs``), else through ``open_url``.
    ``use_proxy``: default False for loopback hosts (so an ``http_proxy`` in the environment cannot
    capture 127.0.0.1), True otherwise.
    """

    def __init__(self, base_url, api_key=None, timeout=30.0, module=None, validate_certs=True, use_proxy=None):
        self.base_url = validate_base_url(base_url)
        self.api_key = api_key
        self.timeout = float(timeout)
        self.module = module
        self.validate_certs = validate_certs
        if use_proxy is None:
            host = urlsplit(self.base_url).hostname or ""
            use_proxy = not (host.startswith(_LOOPBACK) or host in _LOOPBACK)
        self.use_proxy = use_proxy

    def _headers(self, payload):
        headers = {"Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = "Bearer %s" % self.api_key
        return headers

    def request(self, method, path, payload=None, timeout=None):
        """One HTTP request; never raises for HTTP or transport errors.

        Returns ``{"url", "status" (int, -1 without an HTTP answer), "body" (text), "reason", "elapsed_s"}``.
        """
        url = self.base_url + path
        data = json.dumps(payload).encode("utf-8") if payload is not None else None
        headers = self._headers(payload)
        timeout = self.timeout if timeout is None else float(timeout)
        start = time.monotonic()
        status, body, reason = NO_RESPONSE, b"", ""
        if self.module is not None:
            resp, info = fetch_url(self.module, url, data=data, headers=headers, method=method,
                                   timeout=timeout, use_proxy=self.use_proxy)
            status = int(info.get("status", NO_RESPONSE))
            reason = to_text(info.get("msg", ""))
            if resp is not None:
                try:
                    body = resp.read()
                except (socket.timeout, socket.error, OSError) as exc:
                    status, reason = NO_RESPONSE, "reading the answer failed: %s" % to_native(exc)
            # on an HTTP error fetch_url returns the HTTPError as resp, its body already read into info["body"]
            body = body or info.get("body") or b""
        else:
            try:
                resp = open_url(url, data=data, headers=headers, method=method, timeout=timeout,
                                validate_certs=self.validate_certs, use_proxy=self.use_proxy)
                body = resp.read()
                status = int(resp.getcode())
                reason = "OK"
            except HTTPError as exc:
                status = int(exc.code)
                reason = to_text(exc.reason)
                try:
                    body = exc.read()
                except Exception:  # pylint: disable=broad-except
                    body = b""
            except (URLError, socket.timeout, socket.error, OSError) as exc:
                status, reason = NO_RESPONSE, "connection failure: %s" % to_native(getattr(exc, "reason", exc))
            except Exception as exc:  # pylint: disable=broad-except
                # http.client.RemoteDisconnected / BadStatusLine and friends: no usable HTTP answer
                status, reason = NO_RESPONSE, "connection failure: %s: %s" % (type(exc).__name__, to_native(exc))
        return {
            "url": url,
            "status": status,
            "body": to_text(body, errors="surrogate_or_replace"),
            "reason": reason,
            "elapsed_s": round(time.monotonic() - start, 3),
        }

    @staticmethod
    def _error(what, answer):
        body = (answer.get("body") or "")[:2000]
        if answer["status"] == NO_RESPONSE:
            msg = "%s: no HTTP answer from %s (%s)" % (what, answer["url"], answer.get("reason"))
        else:
            msg = "%s: %s answered HTTP %s%s" % (what, answer["url"], answer["status"],
                                                 (": " + body[:300]) if body else "")
        return SGLangHTTPError(msg, url=answer["url"], status=answer["status"], body=body, reason=answer.get("reason"))

    def get_json(self, path, what=None):
        """GET ``path`` and decode JSON; raises SGLangHTTPError on a non-200 answer or a body that is not JSON."""
        answer = self.request("GET", path)
        what = what or ("GET %s" % path)
        if answer["status"] != 200:
            raise self._error(what, answer)
        try:
            return json.loads(answer["body"])
        except ValueError:
            raise SGLangHTTPError("%s: %s answered 200 with a body that is not JSON: %r" % (what, answer["url"], answer["body"][:300]),
                                  url=answer["url"], status=200, body=answer["body"][:2000])

    def _get_json_fallback(self, paths, what):
        last_error = None
        for path in paths:
            try:
                data = self.get_json(path, what=what)
                return path, data
            except SGLangHTTPError as exc:
                last_error = exc
                if exc.status != 404:
                    raise
        raise last_error

    def server_info(self):
        """``/server_info``, falling back to ``/get_server_info`` on 404 (SGLang 0.5.4). PD routers are unwrapped.

        Returns ``(endpoint_used, info_dict)``; raises SGLangHTTPError.
        """
        path, data = self._get_json_fallback(("/server_info", "/get_server_info"), "server info")
        data = unwrap_server_info(data)
        if not isinstance(data, dict):
            raise SGLangHTTPError("server info: %s%s answered JSON that is not an object: %r" % (self.base_url, path, str(data)[:300]),
                                  url=self.base_url + path, status=200)
        return path, data

    def model_info(self):
        """``/model_info``, falling back to ``/get_model_info`` on 404. Returns ``(endpoint_used, dict)``."""
        return self._get_json_fallback(("/model_info", "/get_model_info"), "model info")

    def health(self, path="/health", timeout=None):
        """One poll of ``path``; returns the request() dict (status 200 = ready, 503 = starting)."""
        return self.request("GET", path, timeout=timeout)

    def wait_ready(self, timeout_s=600.0, interval_s=5.0, path="/health", sleep=time.sleep, clock=time.monotonic, watch=None):
        """Poll ``path`` until it answers 200, retrying 503s and connection failures until ``timeout_s``.

        Returns ``{"ready": True, "elapsed_s", "attempts": [{"t_s", "status", "reason"}], "status_counts"}``.
        Raises SGLangNotReady after ``timeout_s`` seconds with every status seen, the last reason and body.
        Statuses other than 200/503/-1 (e.g. 401 for a wrong API key, 404 for a wrong URL) are not retried.

        ``watch``: optional callable ``answer -> None | str``, called after every poll with the request() dict of that poll
        (the server's systemd unit is checked this way by ``llmops.sglang.sglang_ready``). A 200 answer is ready whatever it
        returns; otherwise a non-empty str stops the wait at once with SGLangNotReady(cause="watch") whose message is that
        str (checked before the status and the time).
        """
        start = clock()
        attempts = []
        while True:
            elapsed = clock() - start
            remaining = timeout_s - elapsed
            per_call = max(1.0, min(self.timeout, remaining)) if remaining > 0 else 1.0
            answer = self.health(path, timeout=per_call)
            attempts.append({"t_s": round(clock() - start, 3), "status": answer["status"], "reason": answer["reason"]})
            verdict = watch(answer) if watch is not None else None
            if answer["status"] == 200:
                return {"ready": True, "elapsed_s": round(clock() - start, 3), "attempts": attempts,
                        "status_counts": status_counts(attempts)}
            if verdict:
                raise SGLangNotReady(verdict, url=answer["url"], status=answer["status"], body=answer["body"][:2000],
                                     reason=answer["reason"], attempts=attempts, elapsed_s=round(clock() - start, 3), cause="watch")
            if answer["status"] not in (503, NO_RESPONSE):
                raise SGLangNotReady(
                    "readiness: %s answered HTTP %s, which is not retried (503 and connection failures are); "
                    "check the url and api_key. Body: %s" % (answer["url"], answer["status"], answer["body"][:300]),
                    url=answer["url"], status=answer["status"], body=answer["body"][:2000], reason=answer["reason"],
                    attempts=attempts, elapsed_s=round(clock() - start, 3), cause="status")
            elapsed = clock() - start
            if elapsed + interval_s > timeout_s:
                raise SGLangNotReady(
                    "readiness: %s did not answer 200 within %g s (%d polls, statuses %s, last: %s %s)"
                    % (answer["url"], timeout_s, len(attempts), status_counts(attempts), answer["status"],
                       answer["reason"] or answer["body"][:200]),
                    url=answer["url"], status=answer["status"], body=answer["body"][:2000], reason=answer["reason"],
                    attempts=attempts, elapsed_s=round(elapsed, 3))
            sleep(interval_s)

    def generate_probe(self, prompt="Count from 1 to 200, separated by commas:", max_new_tokens=128, input_ids=None):
        """Non-stream ``/generate`` with ``temperature 0`` and ``ignore_eos`` so exactly ``max_new_tokens`` are made.

        Returns ``{"endpoint", "elapsed_s", "completion_tokens", "prompt_tokens", "text_head" (first 200
        characters), "meta_info", "spec" (see spec_fields_from_meta_info), "tok_per_s" (completion_tokens /
        e2e_latency, or / elapsed_s when e2e_latency is absent)}``. Raises SGLangHTTPError on a non-200
        answer, a body that is not JSON, or an ``error`` object in the answer.
        """
        payload = {"sampling_params": {"temperature": 0, "max_new_tokens": int(max_new_tokens), "ignore_eos": True}, "stream": False}
        if input_ids is not None:
            payload["input_ids"] = list(input_ids)
        else:
            payload["text"] = prompt
        answer = self.request("POST", "/generate", payload)
        if answer["status"] != 200:
            raise self._error("probe generation", answer)
        try:
            data = json.loads(answer["body"])
        except ValueError:
            raise SGLangHTTPError("probe generation: %s answered 200 with a body that is not JSON: %r" % (answer["url"], answer["body"][:300]),
                                  url=answer["url"], status=200, body=answer["body"][:2000])
        if isinstance(data, list):
            data = data[0] if data else {}
        if not isinstance(data, dict) or "error" in data or "meta_info" not in data:
            raise SGLangHTTPError("probe generation: %s answered without meta_info: %s" % (answer["url"], answer["body"][:300]),
                                  url=answer["url"], status=200, body=answer["body"][:2000])
        meta = data["meta_info"] or {}
        spec = spec_fields_from_meta_info(meta)
        completion = meta.get("completion_tokens")
        seconds = meta.get("e2e_latency") or answer["elapsed_s"]
        return {
            "endpoint": "/generate",
            "elapsed_s": answer["elapsed_s"],
            "completion_tokens": completion,
            "prompt_tokens": meta.get("prompt_tokens"),
            "text_head": to_text(data.get("text", ""))[:200],
            "meta_info": meta,
            "spec": spec,
            "tok_per_s": round(float(completion) / float(seconds), 2) if completion and seconds else None,
        }

    def metrics_text(self):
        """``/metrics`` text, or None when the server answers 404 (started without ``--enable-metrics``). Raises otherwise."""
        answer = self.request("GET", "/metrics")
        if answer["status"] == 404:
            return None
        if answer["status"] != 200:
            raise self._error("metrics", answer)
        return answer["body"]
