"""A small HTTP/1.1 server protocol on asyncio (standard library only) for the simulator.

Keep-alive and pipelined requests (served one at a time per connection), ``Content-Length`` and
``Transfer-Encoding: chunked`` request bodies, full responses with ``Content-Length``, and streamed
responses: chunked transfer encoding for HTTP/1.1 clients, close-delimited for HTTP/1.0 clients.
Writes go straight to the transport (no per-chunk coroutine); ``paused`` reflects transport flow
control so the scheduler can hold back a stream whose client does not read.
"""
from __future__ import annotations

import asyncio
import json

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large",
           422: "Unprocessable Entity", 431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}
MAX_HEAD = 65536
MAX_BODY = 64 * 1024 * 1024


class BadRequest(Exception):
    """Malformed HTTP request (answered with 400 and the connection closed)."""
    pass


def _dechunk(buf):
    """Decode a chunked body at the start of ``buf``: ``(body, consumed)`` or None when incomplete."""
    pos = 0
    out = bytearray()
    while True:
        end = buf.find(b"\r\n", pos)
        if end < 0:
            return None
        size_text = bytes(buf[pos:end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadRequest("bad chunk size")
        pos = end + 2
        if size == 0:
            trailer_end = buf.find(b"\r\n\r\n", pos - 2)
            if trailer_end < 0:
                return None
            return bytes(out), trailer_end + 4
        if len(buf) < pos + size + 2:
            return None
        out += buf[pos:pos + size]
        pos += size + 2


class HttpConn(asyncio.Protocol):
    """One client connection. ``app.handle(conn, method, path, query, headers, body)`` serves a request
    and must finish it with :meth:`send` or :meth:`start_stream` ... :meth:`end_stream`."""

    def __init__(self, app):
        self.app = app
        self.transport = None
        self.peer = ("127.0.0.1", 0)
        self.buf = bytearray()
        self.busy = False
        self.closed = False
        self.paused = False
        self.keep_alive = True
        self.chunked_out = False
        self.http_version = "1.1"
        self.method = ""
        self.path = ""
        self.request = None       # list of engine Requests being served (a batch has several), aborted on disconnect
        self.on_lost = None

    # -- asyncio.Protocol ------------------------------------------------------------------------
    def connection_made(self, transport):
        """Remember the transport and the peer (for access lines)."""
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (peer[0], peer[1])

    def connection_lost(self, exc):
        """The client went away: abort the request it was waiting for."""
        self.closed = True
        for req in self.request or ():
            if not req.finished:
                req.aborted = True
        if self.on_lost is not None:
            self.on_lost()
        self.app.connection_gone(self)

    def pause_writing(self):
        """Transport buffer above the high-water mark: the scheduler holds this stream back."""
        self.paused = True

    def resume_writing(self):
        """Transport drained: the stream may advance again."""
        self.paused = False
        self.app.engine_wake()

    def data_received(self, data):
        """Buffer bytes; parse the next request unless one is being served."""
        self.buf += data
        if not self.busy:
            self._parse()

    # -- request parsing ---------------------------------------------------------------------------
    def _parse(self):
        if self.busy or self.closed:
            return
        idx = self.buf.find(b"\r\n\r\n")
        if idx < 0:
            if len(self.buf) > MAX_HEAD:
                self._fail(431, "request head too large")
            return
        try:
            head = bytes(self.buf[:idx]).decode("latin-1")
            lines = head.split("\r\n")
            method, target, version = lines[0].split(" ", 2)
            if not version.startswith("HTTP/1."):
                raise BadRequest("unsupported protocol %r" % version)
            headers = {}
            for line in lines[1:]:
                if not line:
                    continue
                name, _unused, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            rest = self.buf[idx + 4:]
            if "chunked" in headers.get("transfer-encoding", "").lower():
                decoded = _dechunk(rest)
                if decoded is None:
                    if len(rest) > MAX_BODY:
                        self._fail(413, "request body too large")
                    return
                body, consumed = decoded
            else:
                length = int(headers.get("content-length", "0") or "0")
                if length < 0 or length > MAX_BODY:
                    self._fail(413, "request body too large")
                    return
                if len(rest) < length:
                    return
                body, consumed = bytes(rest[:length]), length
        except (ValueError, BadRequest) as exc:
            self._fail(400, "malformed request: %s" % exc)
            return
        del self.buf[:idx + 4 + consumed]
        self.http_version = version[5:]
        conn_hdr = headers.get("connection", "").lower()
        self.keep_alive = (self.http_version == "1.1" and conn_hdr != "close") or conn_hdr == "keep-alive"
        self.method = method
        path, _unused, query = target.partition("?")
        self.path = path
        self.busy = True
        self.app.handle(self, method, path, query, headers, body)

    def _fail(self, status, message):
        self.keep_alive = False
        self.method = self.method or "GET"
        self.send(status, json.dumps({"detail": message}).encode())

    # -- responses --------------------------------------------------------------------------------
    def _head(self, status, ctype, length=None, extra=None):
        reason = REASONS.get(status, "OK")
        self.app.log_access(self, status, reason)
        lines = ["HTTP/1.1 %d %s" % (status, reason), "server: uvicorn", "content-type: %s" % ctype]
        if length is not None:
            lines.append("content-length: %d" % length)
        for key, value in (extra or {}).items():
            lines.append("%s: %s" % (key, value))
        if not self.keep_alive:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send(self, status, body=b"", ctype="application/json", extra=None):
        """Full response with Content-Length, then the connection is ready for the next request."""
        if self.closed:
            self._done()
            return
        # HEAD: the GET's head (content-length included) and no body, as uvicorn answers it
        self.transport.write(self._head(status, ctype, len(body), extra) + (b"" if self.method == "HEAD" else body))
        self._done()

    def send_json(self, status, obj, compact=False, extra=None):
        """Full JSON response; ``compact`` uses OpenAI-style separators (no spaces)."""
        if compact:
            data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
        else:
            data = json.dumps(obj).encode("utf-8")
        self.send(status, data, "application/json", extra)

    def start_stream(self, status=200, ctype="text/event-stream; charset=utf-8"):
        """Send the head of a streamed response (chunked for HTTP/1.1 keep-alive, close-delimited otherwise)."""
        if self.closed:
            return
        if self.http_version == "1.1" and self.keep_alive:
            self.chunked_out = True
            self.transport.write(self._head(status, ctype, None, {"transfer-encoding": "chunked", "cache-control": "no-cache"}))
        else:
            self.chunked_out = False
            self.keep_alive = False
            self.transport.write(self._head(status, ctype, None, {"cache-control": "no-cache"}))

    def write_chunk(self, payload):
        """Send ``payload`` (bytes, one or more SSE events) as one HTTP chunk."""
        if self.closed:
            return
        if self.chunked_out:
            self.transport.write(b"%x\r\n%b\r\n" % (len(payload), payload))
        else:
            self.transport.write(payload)

    def end_stream(self):
        """Terminate a streamed response and get ready for the next request."""
        if not self.closed and self.chunked_out:
            self.transport.write(b"0\r\n\r\n")
        self._done()

    def _done(self):
        self.busy = False
        self.request = None
        self.on_lost = None
        self.chunked_out = False
        if self.closed:
            return
        if not self.keep_alive:
            self.transport.close()
            return
        if self.buf:
            asyncio.get_event_loop().call_soon(self._parse)
