"""HTTP handlers.

The daemon's HTTP surface: the base handler every route goes through (the guard, bounded bodies,
JSON errors), status, the SDK, the server's records and OTLP, and the MCP transports (HTTP+SSE,
Streamable HTTP) as the seeds specify them.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import time
import uuid
from typing import TYPE_CHECKING, Any, Awaitable, cast, List, Optional, Tuple

import tornado.http1connection
import tornado.ioloop
import tornado.iostream
import tornado.web

from .calls import _CallContext, _wants_progress
from .constants import (BODY_TIMEOUT_S, BULK_BODY_AFTER, BULK_BODY_BYTES_S, MAX_BATCH, MAX_BODY_BYTES,
    MAX_SSE_STREAMS, SESSIONLESS_SCALE, SESSIONLESS_TARPIT_S, _emit, _log)
from .errors import _HttpRefusal
from .guard import _guess_key
from .mcp import _rpc_error
from .middleware import _PROOF_CHALLENGE_RE, _daemon_proof
from .otel import OTEL_MEDIA
from .stitching import _stitch_server_records
from .util import _batch_over_limit, _dumps, _loads, _short

if TYPE_CHECKING:
    from .hub import Hub


def _log_handler_exception(handler: tornado.web.RequestHandler, typ: Any, value: Any, tb: Any) -> None:
    """One JSON log line naming the path, never the query (it may hold ?token=),
    instead of Tornado's line with the whole URI."""
    if isinstance(value, tornado.web.HTTPError):
        _emit(_log, logging.INFO, "http_error", status=value.status_code, method=handler.request.method,
              path=handler.request.path)
        return
    _log.error("http_uncaught_exception", exc_info=(typ, value, tb),
               extra={"fields": {"method": handler.request.method, "path": handler.request.path,
                                 "peer": handler.request.remote_ip}})


class _AnyMethod(tuple):
    """SUPPORTED_METHODS that lets every method reach prepare(), so that the
    guard and the rate limiter see TRACE and friends before the 405."""

    def __contains__(self, method: object) -> bool:
        return True


_HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


def _implemented_methods(handler: tornado.web.RequestHandler) -> Tuple[str, ...]:
    """The standard methods a handler class defines itself, for Allow."""
    return tuple(m for m in _HTTP_METHODS
                 if getattr(type(handler), m.lower(), None) is not getattr(tornado.web.RequestHandler, m.lower()))


@tornado.web.stream_request_body
class _BaseHandler(tornado.web.RequestHandler):
    """Guard, limits and JSON errors for every HTTP route and every method.

    prepare() runs the guard, then the rate limiter, then answers 405 (with
    Allow) for a method the route does not serve, in that order, so that a
    hostile request is refused the same way whatever its method.  A refusal
    sent before the body was read closes the connection and says so."""

    SUPPORTED_METHODS = _AnyMethod(_HTTP_METHODS)
    allow_listed_origins = False  # /reticle.js also admits RETICLE_ALLOWED_ORIGINS pages
    unnamed_pages = False  # /reticle.js also admits a browser request that names no page (no secret in it)
    _body_timer: Any = None
    _work: Optional["asyncio.Task"] = None

    def initialize(self, hub: "Hub") -> None:
        self.hub = hub

    def allowed_methods(self) -> Tuple[str, ...]:
        return _implemented_methods(self)

    def method_refusal(self) -> Optional[_HttpRefusal]:
        """A 405 for a method this route does not serve, else None."""
        if self.request.method in _implemented_methods(self):
            return None
        allow = ", ".join(self.allowed_methods())
        return _HttpRefusal(405, "method not allowed", "%s %s is not served; this route allows %s"
                            % (self.request.method, self.request.path, allow), {"Allow": allow})

    def media_type_refusal(self) -> Optional[_HttpRefusal]:
        """A 415 for a POST/PUT/PATCH whose body is not declared application/json.  A page may send
        text/plain, a form or a typeless Blob to any origin without a CORS preflight; it can send
        application/json only after one, which this daemon never grants."""
        if self.request.method not in ("POST", "PUT", "PATCH"):
            return None
        headers = self.request.headers
        if headers.get("Content-Length", "0").strip() == "0" and "Transfer-Encoding" not in headers:
            return None  # no body at all: nothing a page could smuggle
        declared = self.request.headers.get("Content-Type", "")
        if declared.split(";", 1)[0].strip().lower() == "application/json":
            return None
        return _HttpRefusal(415, "unsupported media type", "%s %s needs Content-Type: application/json (got %s)"
                            % (self.request.method, self.request.path, _short(declared, 80) if declared else "none"))

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.clear_header("Server")

    def verified_session_id(self) -> Optional[str]:
        """The request's Mcp-Session-Id when this machine signed it (checked once per request)."""
        if not hasattr(self, "_verified_sid"):
            sid = self.request.headers.get("Mcp-Session-Id")
            self._verified_sid = sid if sid and self.hub.signer.verify(sid) else None
        return self._verified_sid

    def session_key(self) -> str:
        sid = self.verified_session_id()
        if sid:
            return sid
        sse = self.get_query_argument("sessionId", None)
        if sse and sse in self.hub.sse_streams:
            return "sse:" + sse
        # Without a session, each connection is a client of its own: every local client has the
        # same peer address, and one flooding it must not lock out `reticle status` or a new client.
        address = getattr(getattr(self.request.connection, "context", None), "address", None)
        if isinstance(address, tuple) and len(address) >= 2:
            return "conn:%s:%s" % (address[0], address[1])
        return "addr:%s" % self.request.remote_ip

    async def prepare(self) -> None:
        self._chunks: List[bytes] = []
        self._size = 0
        self._body_timer = None
        try:
            self.hub.guard.check_http(self.request, self.hub.allowed_origins if self.allow_listed_origins else (),
                                      self.unnamed_pages)
            self.charge(1)
            refusal = self.method_refusal() or self.media_type_refusal()
            if refusal is not None:
                raise refusal
            length = self.request.headers.get("Content-Length")
            if length is not None:
                if not length.isdigit():
                    raise _HttpRefusal(400, "bad request", "Content-Length %r is not a number" % length)
                if int(length) > MAX_BODY_BYTES:
                    raise _HttpRefusal(413, "payload too large", "the body is %s bytes; at most %d are accepted"
                                       % (length, MAX_BODY_BYTES))
        except _HttpRefusal as refusal:
            if getattr(self, "_tarpit", False):
                await asyncio.sleep(SESSIONLESS_TARPIT_S)  # a flood of new connections waits its turn
            self.refuse(refusal, close=True)
            return
        if self.request.method in ("POST", "PUT", "PATCH"):
            self._body_timer = tornado.ioloop.IOLoop.current().call_later(BODY_TIMEOUT_S, self._body_too_slow)

    def charge(self, cost: int) -> None:
        """Count `cost` requests against this session key; a 429 refusal when over."""
        key = self.session_key()
        wait = self.hub.limiter.check(key, cost)
        if wait is None and key.startswith("conn:"):
            # every client without a session also shares SESSIONLESS_SCALE x the rate: new
            # connections are not a way around the limit
            wait = self.hub.limiter.check("sessionless", cost, SESSIONLESS_SCALE)
            if wait is not None:
                self._tarpit = True
        if wait is not None:
            raise _HttpRefusal(429, "rate limited",
                               "more than %g requests/s (burst %g) for this session; a batch counts each of "
                               "its messages; retry after %.2f s" % (self.hub.limiter.rate, self.hub.limiter.burst,
                                                                      wait),
                               {"Retry-After": str(max(1, int(wait + 0.999)))})

    def data_received(self, chunk: bytes) -> Optional[Awaitable[None]]:
        if self._finished:
            return None
        self._size += len(chunk)
        if self._size > MAX_BODY_BYTES:
            self.refuse(_HttpRefusal(413, "payload too large", "the body is over %d bytes" % MAX_BODY_BYTES),
                        close=True)
            return None
        self._chunks.append(chunk)
        if self._size > BULK_BODY_AFTER:
            # Bulk bodies (a 4 MiB batch) share BULK_BODY_BYTES_S: past it, this connection is not
            # read until the second ends, so that a flood of big bodies (a new session for each)
            # cannot take the event loop from the small requests of every other client.
            window, now = self.hub.bulk_window, time.monotonic()
            if now - window[0] >= 1.0:
                window[0], window[1] = now, 0
            window[1] += min(len(chunk), self._size - BULK_BODY_AFTER)
            if window[1] > BULK_BODY_BYTES_S:
                return asyncio.sleep(max(0.0, 1.0 - (now - window[0])))
        return None

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if not self._finished:
            self.refuse(_HttpRefusal(408, "request timeout",
                                     "the request body was not complete within %g s" % BODY_TIMEOUT_S), close=True)

    def body(self) -> bytes:
        if self._body_timer is not None:
            tornado.ioloop.IOLoop.current().remove_timeout(self._body_timer)
            self._body_timer = None
        return b"".join(self._chunks)

    def refuse(self, refusal: _HttpRefusal, close: bool = False) -> None:
        """Answer JSON {error, detail}.  close: refused before the body was read
        (prepare, an oversize or slow body), so the connection cannot be reused:
        say `Connection: close` and close it."""
        if self._finished:
            return
        self.clear()
        self.set_status(refusal.status)
        for k, v in refusal.headers.items():
            self.set_header(k, v)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        if close:
            self.set_header("Connection", "close")
            if isinstance(self.request.connection, tornado.http1connection.HTTP1Connection):
                self.request.connection.no_keep_alive = True
        _emit(_log, logging.INFO, "http_refused", status=refusal.status, method=self.request.method,
              path=self.request.path, peer=self.request.remote_ip, detail=refusal.detail)
        self.finish(_dumps({"error": refusal.error, "detail": refusal.detail}))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "application/json; charset=utf-8")
        detail = self._reason
        if self.settings.get("serve_traceback") and "exc_info" in kwargs:
            import traceback
            detail = "".join(traceback.format_exception(*kwargs["exc_info"]))
        self.finish(_dumps({"error": self._reason.lower(), "detail": detail}))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        _log_handler_exception(self, typ, value, tb)

    async def run_cancellable(self, coro: Awaitable) -> Tuple[bool, Any]:
        """Run coro as a task that on_connection_close cancels, so that a client
        that hangs up does not leave its call running to the end.
        -> (False, None) when it was cancelled so, else (True, its result)."""
        work = self._work = asyncio.ensure_future(coro)
        try:
            await asyncio.wait({work})
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            self._work = None
        if work.cancelled():
            return False, None
        return True, work.result()

    def on_connection_close(self) -> None:
        super().on_connection_close()  # fails a body still arriving, so the handler ends
        if self._work is not None:
            _emit(_log, logging.INFO, "mcp_call_cancelled", path=self.request.path, reason="client disconnected")
            self._work.cancel()

    def on_finish(self) -> None:
        if self._body_timer is not None:
            tornado.ioloop.IOLoop.current().remove_timeout(self._body_timer)
            self._body_timer = None

    def send_json(self, obj: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(_dumps(obj))


class _NotFoundHandler(_BaseHandler):
    """Every unknown path, whatever the method: a JSON 404 (after the guard)."""

    def _not_found(self, *args: Any) -> None:
        self.send_json({"error": "not found", "detail": "no route %s %s; see /openapi.json"
                        % (self.request.method, self.request.path)}, 404)

    def method_refusal(self) -> Optional[_HttpRefusal]:
        if self.request.method in _HTTP_METHODS:
            return None
        return _HttpRefusal(404, "not found", "no route %s %s; see /openapi.json"
                            % (self.request.method, self.request.path))

    get = post = put = delete = patch = head = options = _not_found


class _StatusHandler(_BaseHandler):
    def get(self) -> None:
        self.send_json(self.hub.status())


class _SdkHandler(_BaseHandler):
    """GET /reticle.js: the in-page SDK (no token inside, ever).  It holds no secret, so a loopback
    browser request that names no page (Django's default Referrer-Policy `same-origin` on a page of
    another port sends neither Origin nor Referer) gets it; a request naming a page off loopback, a
    foreign Host (DNS rebinding) or a peer off loopback is refused as on every route, and the
    refusal is kept (Hub.note_refusal) for reticle_sessions to name."""

    allow_listed_origins = True
    unnamed_pages = True

    def refuse(self, refusal: _HttpRefusal, close: bool = False) -> None:
        if not self._finished:
            self.hub.note_refusal("script", "%d %s: %s" % (refusal.status, refusal.error, refusal.detail),
                                  _script_refusal_fix(refusal, self.hub.public_origin()))
        super().refuse(refusal, close)

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Content-Type-Options", "nosniff")

    def get(self) -> None:
        self.set_header("Content-Type", "application/javascript; charset=utf-8")
        self.write(self.hub.sdk_source())


def _script_refusal_fix(refusal: _HttpRefusal, origin: str) -> str:
    """What to do about a refused script load, from what the guard said."""
    detail = refusal.detail
    if refusal.status == 429:
        return "wait a second: the page (or something else on this machine) asked too often"
    if "the Host header" in detail:
        return "load the script as %s/reticle.js, not through a name that resolves to this machine" % origin
    if "header" in detail:
        return ("open the app on localhost or 127.0.0.1, or list its origin in RETICLE_ALLOWED_ORIGINS (the SDK "
                "then needs data-allow-non-localhost and data-token=\"<pairing token>\" on its script tag)")
    return "load the page in a browser on this machine (the daemon serves loopback clients only)"


class _StopHandler(_BaseHandler):
    """POST /stop: a planned stop; needs the token even from loopback."""

    def post(self) -> None:
        guard = self.hub.guard
        try:
            ok = guard.token_attempt(_guess_key(self.request), guard.presented_token(self.request))
        except _HttpRefusal as refusal:
            self.refuse(refusal)
            return
        if not ok:
            self.refuse(_HttpRefusal(403, "forbidden", "stopping the daemon needs the pairing token "
                                     "(Authorization: Bearer <token>); `reticle stop` sends it"))
            return
        self.send_json({"stopping": True, "pid": os.getpid()}, 202)
        self.hub.request_stop("stop requested")


class _ServerRecordsHandler(_BaseHandler):
    """POST /server-records: what the app's middleware saw (Server truth).  Past the guard, the
    pairing token is required even from loopback: records from a process that cannot
    authenticate are refused, so no page or stranger can write server truth into a tab.
    GET /server-records?challenge=<hex> answers the middleware's challenge (_daemon_proof) before
    it sends the token, so the token goes to this daemon only."""

    def get(self) -> None:
        challenge = self.get_query_argument("challenge", "")
        if not _PROOF_CHALLENGE_RE.match(challenge):
            self.refuse(_HttpRefusal(400, "bad request", "challenge must be 32 to 128 lower-case hex characters "
                                     "(got %s)" % (_short(repr(challenge), 80) if challenge else "none")))
            return
        conn = self.request.connection
        if not isinstance(conn, tornado.http1connection.HTTP1Connection) or conn.stream.socket is None:
            self.refuse(_HttpRefusal(400, "bad request", "the proof is given over an HTTP/1 connection only"))
            return
        local = conn.stream.socket.getsockname()
        self.send_json({"proof": _daemon_proof(self.hub.token(), local[0], local[1], challenge)})

    def post(self) -> None:
        guard = self.hub.guard
        try:
            ok = guard.token_attempt(self.request.remote_ip or "", guard.presented_token(self.request))
            if not ok:
                raise _HttpRefusal(403, "forbidden", "server records need the pairing token (Authorization: Bearer "
                                   "<token>); the middleware reads RETICLE_TOKEN or the state directory's token file")
            try:
                body = _loads(self.body().decode("utf-8", "replace"))
            except ValueError as exc:
                raise _HttpRefusal(400, "bad request", "the body is not JSON: %s" % exc) from None
            self.send_json(_stitch_server_records(self.hub, body))
        except _HttpRefusal as refusal:
            self.refuse(refusal)


class _OtlpHandler(_BaseHandler):
    """POST /v1/traces and /v1/logs: OTLP/HTTP from the app's OpenTelemetry exporter (JSON or
    protobuf, gzip or not).  Past the guard, the pairing token is required even from loopback
    (OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer <token>).  Answers OTLP's success shape, in the
    request's media type: empty, or a partialSuccess counting the spans refused (no valid ids)."""

    def initialize(self, hub: "Hub", what: str = "traces") -> None:
        self.hub = hub
        self.what = what

    def media_type_refusal(self) -> Optional[_HttpRefusal]:
        """The guard's 415 rule, admitting application/x-protobuf as well: a page can send neither
        without a CORS preflight, which this daemon never grants."""
        if self.request.method == "POST" and self.media() in OTEL_MEDIA:
            return None
        refusal = super().media_type_refusal()
        if refusal is not None:
            refusal = _HttpRefusal(415, "unsupported media type", "OTLP bodies are application/json or "
                                   "application/x-protobuf (got %s)" % (_short(self.media(), 60) or "none"))
        return refusal

    def media(self) -> str:
        return self.request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()

    async def post(self) -> None:
        guard = self.hub.guard
        try:
            if not guard.token_attempt(self.request.remote_ip or "", guard.presented_token(self.request)):
                raise _HttpRefusal(403, "forbidden", "OTLP export needs the pairing token: set OTEL_EXPORTER_OTLP_"
                                   "HEADERS=Authorization=Bearer%20<token> (`reticle token` prints it)")
            media = self.media()
            if media not in OTEL_MEDIA:
                raise _HttpRefusal(415, "unsupported media type", "OTLP bodies are application/json or "
                                   "application/x-protobuf (got %s)" % (_short(media, 60) or "none"))
            bad = await self.hub.otel.take(self.hub, self.body(), media,
                                           self.request.headers.get("Content-Encoding", ""), self.what)
            self.answer(media, bad)
        except _HttpRefusal as refusal:
            self.refuse(refusal)

    def answer(self, media: str, refused: List[str]) -> None:
        """OTLP's Export*ServiceResponse: empty, or partialSuccess {rejectedSpans, errorMessage} naming why
        the spans refused were refused (the rest of the batch was taken)."""
        rejected = len(refused)
        why = "; ".join("%d span(s) %s" % (n, reason) for reason, n in collections.Counter(refused).most_common())
        self.set_status(200)
        if media == "application/json":
            self.set_header("Content-Type", "application/json")
            self.finish(_dumps({"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": why}}
                               if rejected else {}))
            return
        self.set_header("Content-Type", "application/x-protobuf")
        if not rejected:
            self.finish(b"")
            return
        text = why.encode("utf-8")
        inner = b"\x08" + _pb_varint_bytes(rejected) + b"\x12" + _pb_varint_bytes(len(text)) + text
        self.finish(b"\x0a" + _pb_varint_bytes(len(inner)) + inner)


def _pb_varint_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


if TYPE_CHECKING:
    _SseHost = _BaseHandler  # the mixin is only ever mixed into a _BaseHandler: the handler API it uses
else:
    _SseHost = object


class _SseMixin(_SseHost):
    """Server-Sent Events on a held-open GET."""

    _sse_closed: asyncio.Event
    _sse_shutdown: Optional[str]

    def streams_full(self) -> bool:
        """Refuse (503, Retry-After) a stream beyond MAX_SSE_STREAMS: each one holds a descriptor."""
        held = len(self.hub.sse_streams) + len(self.hub.get_streams)
        if held < MAX_SSE_STREAMS:
            return False
        refusal = _HttpRefusal(503, "too many streams", "%d event streams are open, the most this daemon "
                               "holds; close one or retry later" % held, {"Retry-After": "5"})
        self.refuse(refusal)
        return True

    def sse_open(self) -> None:
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache, no-transform")
        self.set_header("Connection", "keep-alive")
        self.set_header("X-Accel-Buffering", "no")
        self._sse_closed = asyncio.Event()
        self._sse_shutdown = None

    def _sse_gone(self) -> bool:
        """The client's side of the stream is closed (tornado serves a held GET on an HTTP/1 connection)."""
        conn = self.request.connection
        return not isinstance(conn, tornado.http1connection.HTTP1Connection) or conn.stream.closed()

    async def sse_write(self, text: str) -> bool:
        """Write one frame; False (and nothing written) once the stream is gone."""
        if self._finished or self._sse_gone():
            self._sse_closed.set()
            return False
        try:
            self.write(text)
            await self.flush()
            return True
        except tornado.iostream.StreamClosedError:
            self._sse_closed.set()
            return False

    async def sse_hold(self) -> None:
        """Keep the stream open with comment keepalives until closed or stopped."""
        while not self._sse_closed.is_set():
            try:
                await asyncio.wait_for(self._sse_closed.wait(), self.hub.keepalive_s)
            except asyncio.TimeoutError:
                await self.sse_write(": keepalive\n\n")
        if self._sse_shutdown is not None and not self._sse_gone():
            await self.sse_write("event: shutdown\ndata: %s\n\n" % _dumps({"reason": self._sse_shutdown}))
        if not self._finished and not self._sse_gone():
            self.finish()

    def sse_stop(self, reason: str) -> None:
        self._sse_shutdown = reason
        self._sse_closed.set()

    def on_connection_close(self) -> None:
        closed = getattr(self, "_sse_closed", None)
        if closed is not None:
            closed.set()
        super().on_connection_close()


class _SseHandler(_SseMixin, _BaseHandler):
    """GET /mcp/sse: one MCP session per stream (seeds/http-transport.md)."""

    async def get(self) -> None:
        """GET /mcp/sse: the legacy SSE transport.  Refused (503) while MCP is not ready and past
        MAX_SSE_STREAMS; else the endpoint frame, then replies and keepalives until the client hangs up,
        which cancels the session's calls in flight and closes the device it owned."""
        if not self.hub.mcp_ready:
            self.refuse(_HttpRefusal(503, "MCP server not ready",
                                     "the daemon is up but not serving MCP yet (or is stopping); retry"))
            return
        if self.streams_full():
            return
        self.sse_open()
        self.sse_id = str(uuid.uuid4())
        self.ctx = _CallContext("sse", "sse:" + self.sse_id, notify=self.deliver)
        self.calls: set = set()  # this session's calls in flight, cancelled when the stream drops
        self.hub.sse_streams[self.sse_id] = self
        _emit(_log, logging.INFO, "mcp_client_connected", transport="sse", session=self.sse_id)
        try:
            if await self.sse_write("event: endpoint\ndata: /mcp/message?sessionId=%s\n\n" % self.sse_id):
                await self.sse_hold()
        finally:
            self.hub.sse_streams.pop(self.sse_id, None)
            own = self.hub.devices.owned_by(self.ctx.session_key)
            if own is not None:  # an SSE client that hung up is gone for good: so is its device
                self.hub.spawn(self.hub.devices.close(own, "its MCP client's stream closed"))
            for task in list(self.calls):
                task.cancel()
            if self.calls:
                _emit(_log, logging.INFO, "mcp_call_cancelled", transport="sse", session=self.sse_id,
                      calls=len(self.calls), reason="the stream closed")
            _emit(_log, logging.INFO, "mcp_client_disconnected", transport="sse", session=self.sse_id)

    async def deliver(self, message: Any) -> None:
        await self.sse_write("event: message\ndata: %s\n\n" % _dumps(message))


class _SseMessageHandler(_BaseHandler):
    """POST /mcp/message?sessionId=: 202 now, the reply on the stream."""

    async def post(self) -> None:
        """POST /mcp/message?sessionId=...: one JSON-RPC message for an open SSE session, accepted with
        202 and answered on that session's stream.  A missing or unknown session, a stopping daemon or a
        body that is not one JSON object is refused with the status that says which."""
        sid = self.get_query_argument("sessionId", None)
        if not sid:
            self.refuse(_HttpRefusal(400, "missing sessionId",
                                     "POST to the path of the endpoint frame that GET /mcp/sse sent first"))
            return
        stream = cast(Optional[_SseHandler], self.hub.sse_streams.get(sid))  # the hub's streams are these
        if stream is None:
            self.refuse(_HttpRefusal(404, "session not found",
                                     "that SSE session is not open (the stream dropped?); reconnect to "
                                     "/mcp/sse and handshake again"))
            return
        if not self.hub.mcp_ready:
            self.refuse(_HttpRefusal(503, "MCP server not ready", "the daemon is stopping; retry shortly"))
            return
        try:
            message = _loads(self.body())
        except ValueError as exc:
            # Answered twice: 400 here, and the JSON-RPC parse error on the stream, where a
            # client matching replies by id is waiting.
            self.refuse(_HttpRefusal(400, "invalid JSON", "the body is not JSON (%s); send one JSON-RPC "
                                     "message per POST" % exc))
            self._track(stream, stream.deliver(_rpc_error(None, -32700, "Parse error: %s" % exc)))
            return
        if not isinstance(message, dict):
            self.refuse(_HttpRefusal(400, "invalid message", "send one JSON-RPC message (an object) per POST"))
            return
        self.set_status(202)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish("Accepted")
        self._track(stream, self._answer(stream, message))

    def _track(self, stream: _SseHandler, coro: Awaitable) -> None:
        task = self.hub.spawn(coro)
        stream.calls.add(task)
        task.add_done_callback(stream.calls.discard)

    async def _answer(self, stream: _SseHandler, message: dict) -> None:
        reply = await self.hub.dispatcher.handle(message, stream.ctx)
        if reply is not None:
            await stream.deliver(reply)


class _StreamableHandler(_SseMixin, _BaseHandler):
    """POST/GET/DELETE /mcp and POST/GET / (seeds/http-mcp-streamable.md)."""

    def initialize(self, hub: "Hub", root: bool = False) -> None:
        self.hub = hub
        self.root = root

    def _session(self, required: bool) -> Tuple[bool, Optional[str]]:
        sid = self.request.headers.get("Mcp-Session-Id")
        if sid is None:  # present but empty is an id this machine did not issue: 404 below
            if required:
                self.refuse(_HttpRefusal(400, "missing Mcp-Session-Id",
                                         "GET %s needs the Mcp-Session-Id header that initialize returned"
                                         % self.request.path))
                return False, None
            return True, None
        if self.verified_session_id() is None:
            self.refuse(_HttpRefusal(404, "MCP_SESSION_UNKNOWN",
                                     "this machine did not issue that Mcp-Session-Id; initialize again "
                                     "without it"))
            return False, None
        return True, sid

    async def post(self) -> None:
        """POST /mcp: the Streamable HTTP transport.  A message or batch (at most MAX_BATCH; a larger one
        is refused unparsed, and each extra message is charged to the rate limit) is answered as JSON, or
        as an SSE stream of progress then the reply when the client asked for progress and accepts it.
        A successful initialize without a session id gets a new signed one in Mcp-Session-Id."""
        ok, sid = self._session(required=False)
        if not ok:
            return
        body = self.body()
        many = _batch_over_limit(body)
        if many:
            # refused before it is parsed: parsing 4 MiB of messages that will not run would hold
            # the event loop, and every other client, for a third of a second
            try:
                self.charge(MAX_BATCH)
            except _HttpRefusal as refusal:
                self.refuse(refusal)
                return
            self.send_json(_rpc_error(None, -32600, "Invalid Request: a batch holds at most %d messages; this one "
                                                    "holds more (%s), so none ran" % (MAX_BATCH, many)))
            return
        try:
            payload = _loads(body)
        except ValueError as exc:
            self.send_json(_rpc_error(None, -32700, "Parse error: %s" % exc))
            return
        if isinstance(payload, list) and len(payload) > 1:
            try:
                self.charge(min(len(payload), MAX_BATCH + 1) - 1)  # prepare() counted the first
            except _HttpRefusal as refusal:
                self.refuse(refusal)
                return
        ctx = _CallContext("streamable-http", sid or "addr:%s" % self.request.remote_ip)
        if sid:
            self.hub.touch_client(sid)
        streamed = _wants_progress(payload) and "text/event-stream" in self.request.headers.get("Accept", "")
        if streamed:  # the answer becomes an SSE stream: the call's progress, then its reply
            self.sse_open()
            ctx.notify = self.sse_message
        answered, out = await self.run_cancellable(self.hub.dispatcher.handle_payload(payload, ctx))
        if not answered:
            return  # the client hung up and its call was cancelled: nobody to answer
        reply = out[0]
        if streamed:
            if reply is not None:
                await self.sse_message(reply)
            if not self._finished and not self._sse_gone():
                self.finish()
            return
        if reply is None:
            self.set_status(204)
            self.finish()
            return
        if sid is None and _has_initialize_result(payload, reply):
            new_sid = self.hub.signer.mint()
            self.hub.touch_client(new_sid)
            self.set_header("Mcp-Session-Id", new_sid)
        self.send_json(reply)

    async def sse_message(self, message: dict) -> None:
        await self.sse_write("event: message\ndata: %s\n\n" % _dumps(message))

    async def get(self) -> None:
        ok, sid = self._session(required=True)
        if not ok or self.streams_full():
            return
        self.sse_open()
        self.hub.get_streams.add(self)
        try:
            if await self.sse_write(": stream open; reticle sends no server-initiated messages\n\n"):
                await self.sse_hold()
        finally:
            self.hub.get_streams.discard(self)

    def allowed_methods(self) -> Tuple[str, ...]:
        # DELETE /mcp is a documented operation (it answers 405 itself); the root has none.
        return ("GET", "POST") if self.root else ("GET", "POST", "DELETE")

    def method_refusal(self) -> Optional[_HttpRefusal]:
        if self.root and self.request.method == "DELETE":  # no DELETE alias at the root
            return _HttpRefusal(405, "method not allowed", "DELETE / is not served; sessions end by "
                                "not being used", {"Allow": "GET, POST"})
        return super().method_refusal()

    def delete(self) -> None:
        self.set_status(405)
        self.set_header("Allow", "GET, POST")
        self.finish()


def _has_initialize_result(payload: Any, reply: Any) -> bool:
    msgs = payload if isinstance(payload, list) else [payload]
    init_ids = [m.get("id") for m in msgs if isinstance(m, dict) and m.get("method") == "initialize" and "id" in m]
    replies = reply if isinstance(reply, list) else [reply]
    return any(isinstance(r, dict) and "result" in r and r.get("id") in init_ids for r in replies)
