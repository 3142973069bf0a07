"""WebSocket handler.

The browser bridge's socket: the handshake (origin, token or a device's ticket), the hello, frames
in (bounded, rate-limited) and commands out.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING, Any, Awaitable, Optional

import tornado.http1connection
import tornado.ioloop
import tornado.web
import tornado.websocket

from .constants import (BRIDGE_PROTOCOL, MAX_PENDING_HANDSHAKES, SERVER_MARK_COOKIE, SERVER_MARK_HEADER, _bridge_log,
    _emit)
from .devices import _Device
from .errors import _HttpRefusal
from .guard import _guess_key
from .handlers import _AnyMethod, _HTTP_METHODS, _log_handler_exception
from .tab import _BrowserSession
from .util import _dumps, _is_loopback_host, _loads_frame, _origin_host, _quietly, _split_host_header

if TYPE_CHECKING:
    from .hub import Hub


_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def _ws_reason(reason: str) -> str:
    data = reason.encode("utf-8")[:123]
    return data.decode("utf-8", "ignore")


def _bridge_device(handler: "_BridgeHandler", capability: str, origin: Optional[str]) -> Optional[_Device]:
    """A device's relay at the bridge (prepare): its one-use ticket stands in for the loopback/origin check
    (the page may be a staging host), and binds the socket to that device's session.  -> the device, or
    None once the upgrade is refused: a second socket for a live device, a ticket not issued (or expired,
    rotated, closed; counted as a wrong guess of a secret), or one presented from another machine."""
    request = handler.request
    # a ticket comes from this machine, or from the host of the browser a device on a CDP endpoint runs in
    peers = {d.peer for d in handler.hub.devices.devices.values() if d.peer}
    device, state = handler.hub.devices.for_ticket(capability, str(request.remote_ip)) if _is_loopback_host(
        request.remote_ip) or request.remote_ip in peers else (None, "void")
    if state == "used" and device is not None:
        _emit(_bridge_log, logging.WARNING, "device_second_socket", deviceId=device.id,
              sessionId=device.session_id, origin=str(origin)[:200], peer=request.remote_ip)
        handler._refuse(403, "this device ticket already opened the device's bridge socket; a second socket "
                        "for a live device session is refused")
        return None
    if device is None or state != "ok":
        _emit(_bridge_log, logging.WARNING, "device_ticket_refused", origin=str(origin)[:200],
              peer=request.remote_ip)
        try:  # a wrong capability counts as a wrong guess of a secret
            handler.hub.guard.token_attempt(_guess_key(request), capability)
        except _HttpRefusal as refusal:
            handler._refuse(refusal.status, refusal.detail, refusal.error, refusal.headers)
            return None
        handler._refuse(403, "the device ticket is not one this daemon issued, has expired or was rotated by "
                        "a navigation, or its device has closed" if _is_loopback_host(request.remote_ip)
                        or request.remote_ip in peers
                        else "a device ticket is accepted from this machine only, not from %s" % request.remote_ip)
        return None
    return device


def _admit_upgrade(handler: "_BridgeHandler") -> None:
    """Admit a bridge upgrade or refuse it before the handshake (_BridgeHandler.prepare), in order: a
    device's one-use ticket (from this machine only) stands in for the origin check; else the origin must be
    allowed; then the token, Host (DNS rebinding) and peer checks; a non-upgrade GET is 400, another method
    429 or 405.  `needs_token` records whether the hello must still bring the pairing token."""
    guard = handler.hub.guard
    origin = handler.request.headers.get("Origin")
    capability = handler.get_query_argument("device", None)
    if capability is not None:
        handler.device = _bridge_device(handler, capability, origin)
        if handler.device is None:
            return
    elif origin is not None and not guard.ws_origin_allowed(origin):
        handler._refuse(403, "the origin %r is not allowed at the bridge; pages must be on localhost or "
                        "listed in RETICLE_ALLOWED_ORIGINS" % origin)
        return
    try:
        token_ok = handler.device is not None or guard.token_attempt(_guess_key(handler.request),
                                                                     guard.presented_token(handler.request))
    except _HttpRefusal as refusal:
        handler._refuse(refusal.status, refusal.detail, refusal.error, refusal.headers)
        return
    peer_ok = _is_loopback_host(handler.request.remote_ip)
    host_ok = _is_loopback_host(_split_host_header(handler.request.headers.get("Host")))
    if not host_ok and not token_ok and _is_loopback_host(handler.hub.host):
        handler._refuse(403, "the Host header %r does not name a loopback host (DNS rebinding?)"
                        % handler.request.headers.get("Host"))
        return
    if not peer_ok and not token_ok and not handler.hub.allowed_origins:
        handler._refuse(403, "the peer %s is not loopback and presented no token" % handler.request.remote_ip)
        return
    origin_local = origin is not None and _is_loopback_host(_origin_host(origin))
    handler.needs_token = not (origin_local and peer_ok and host_ok) and not token_ok
    if handler.request.method == "GET" and handler.request.headers.get("Upgrade", "").lower() != "websocket":
        handler._refuse(400, "GET /reticle is the WebSocket bridge for the in-page SDK; send a WebSocket "
                        "upgrade (Upgrade: websocket)", "not a WebSocket upgrade")
        return
    if handler.request.method != "GET":
        wait = handler.hub.limiter.check("addr:%s" % handler.request.remote_ip)
        if wait is not None:
            handler._refuse(429, "rate limited; retry after %.2f s" % wait, "rate limited",
                            {"Retry-After": str(max(1, int(wait + 0.999)))})
            return
        handler._refuse(405, "%s /reticle is not served; the bridge is a WebSocket upgrade (GET)"
                        % handler.request.method, "method not allowed", {"Allow": "GET"})


class _BridgeHandler(tornado.websocket.WebSocketHandler):
    """GET /reticle: the browser bridge (hello, event(s), command, command_result; marks: more server marks)."""

    def initialize(self, hub: "Hub") -> None:
        self.hub = hub
        self.session: Optional[_BrowserSession] = None
        self.document: Optional[str] = None  # the document whose server marks this socket hands out
        self.replaced = False
        self.needs_token = True
        self.device: Optional[_Device] = None
        self._hello_timer: Any = None
        self._counted = False
        self._closing = False

    SUPPORTED_METHODS = _AnyMethod(_HTTP_METHODS)  # every method meets the guard, then the 405

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        _log_handler_exception(self, typ, value, tb)

    def _refuse(self, status: int, detail: str, error: str = "forbidden", headers: Optional[dict] = None) -> None:
        self.hub.bridge.note_refusal(detail)
        self.set_status(status)
        for k, v in (headers or {}).items():
            self.set_header(k, v)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Connection", "close")
        if isinstance(self.request.connection, tornado.http1connection.HTTP1Connection):
            self.request.connection.no_keep_alive = True
        self.finish(_dumps({"error": error, "detail": detail}))

    def prepare(self) -> None:
        """Admit the upgrade or refuse it before the handshake (_admit_upgrade: who may open the bridge)."""
        _admit_upgrade(self)

    def check_origin(self, origin: str) -> bool:
        if self.device is not None:
            return True  # prepare() checked this device's capability; its pages may be on any origin
        return self.hub.guard.ws_origin_allowed(origin)

    def get_compression_options(self) -> Optional[dict]:
        return None

    def open(self) -> None:
        bridge = self.hub.bridge
        if bridge.pending_handshakes >= MAX_PENDING_HANDSHAKES:
            # the socket that has waited longest without a hello makes room: sockets that never
            # speak cannot keep a real tab (whose hello comes at once) out; it may try again
            oldest = next(iter(bridge.pending), None)
            if oldest is None:
                bridge.note_refusal("too many pending handshakes (%d)" % MAX_PENDING_HANDSHAKES)
                self.close(1013, "too many pending handshakes")
                return
            bridge.note_refusal("too many pending handshakes (%d): the oldest, silent since it opened, was "
                                "closed" % MAX_PENDING_HANDSHAKES)
            oldest._end_handshake()
            oldest.close(1013, "too many pending handshakes; this socket sent no hello")
        bridge.pending_handshakes += 1
        bridge.pending[self] = None
        self._counted = True
        self.set_nodelay(True)  # commands are small and latency-bound: no Nagle delay
        self._hello_timer = tornado.ioloop.IOLoop.current().call_later(
            self.hub.hello_timeout_s, self._hello_timeout)

    def _hello_timeout(self) -> None:
        self._hello_timer = None
        if self.session is None:
            # 1013, not 1008: a page busy at load (a long script) sends its hello late; its SDK
            # tries again, where 1008 would stop it for good
            self.hub.bridge.note_refusal("a socket sent no hello within %g s" % self.hub.hello_timeout_s)
            self.close(1013, "hello timeout; try again")

    def _end_handshake(self) -> None:
        if self._hello_timer is not None:
            tornado.ioloop.IOLoop.current().remove_timeout(self._hello_timer)
            self._hello_timer = None
        self.hub.bridge.pending.pop(self, None)
        if self._counted:
            self._counted = False
            self.hub.bridge.pending_handshakes -= 1

    def close(self, code: Optional[int] = None, reason: Optional[str] = None) -> None:
        self._closing = True  # frames already in flight are not read after this
        super().close(code, _ws_reason(reason) if reason else reason)

    def on_message(self, message: Any) -> Optional[Awaitable[None]]:
        """Handle one frame from the page (untrusted): the first must be a hello; then events (ingested,
        with a pause before the next frame when the page floods), command results, device input and an
        identity update.  Binary, non-JSON or non-object frames close the socket with 1008; an unknown
        kind becomes a blind-spot event.  Returns the pause to await, if any."""
        if self._closing:
            return None  # refused (1013, 1008, ...): a hello that was in flight must not register a session
        size = len(message)
        if isinstance(message, bytes):
            self.close(1008, "invalid message: binary frames are not accepted")
            return None
        try:
            msg = _loads_frame(message)
        except ValueError:
            self.close(1008, "invalid message: not JSON")
            return None
        if not isinstance(msg, dict):
            self.close(1008, "invalid message: expected a JSON object")
            return None
        kind = msg.get("kind")
        session = self.session
        if session is None:
            if kind != "hello":
                self.close(1008, "invalid message: the first message must be a hello")
                return None
            self._hello(msg)
            return None
        if kind in ("events", "event"):
            events = msg.get("events") if kind == "events" else [msg.get("event")]
            session.ingest(events if isinstance(events, list) else [None], size)
            pause = self.hub.bridge.frame_pause(session, size)
            if pause > 0:
                return asyncio.sleep(pause)  # no next frame is read until then (Tornado awaits it)
        elif kind == "command_result":
            session.last_seen = self.hub.clock()
            session.resolve_command(msg)
        elif kind == "input" and session.device is not None:
            self.hub.devices.on_input(session, msg)
        elif kind == "marks" and self.document is not None:
            self._send_marks(False)  # each batch voids the tab's oldest marks past SERVER_TICKETS_KEPT
        elif kind == "hello":
            if msg.get("sessionId") != session.id:
                self.close(1008, "hello already received")
                return None
            session.update_identity(msg)
        else:
            session.ingest([{"type": "blind-spot", "data": {
                "reason": "unknown-message-kind", "count": 1,
                "detail": "the page sent a message of kind %r, which this daemon ignores" % str(kind)[:40]}}], 0)
        return None

    def _hello(self, msg: dict) -> None:
        """Register the page's session from its hello, or close (1008/1013) saying why: protocol version,
        session id shape, a session claimed by the wrong device capability, a missing or wrong pairing
        token.  A registered session gets its server mark and the tab's live faults."""
        version = msg.get("protocolVersion")
        if version != BRIDGE_PROTOCOL:
            self.hub.bridge.note_refusal("protocol version mismatch (%r)" % version)
            self.close(1008, "protocol version mismatch — the page runs an SDK for protocol %r, this "
                             "daemon speaks %d; reload the page" % (version, BRIDGE_PROTOCOL))
            return
        sid = msg.get("sessionId")
        if not isinstance(sid, str) or not _SESSION_ID_RE.match(sid):
            self.close(1008, "invalid message: hello.sessionId must be 1-128 characters of A-Z a-z 0-9 _ . : -")
            return
        if not isinstance(msg.get("url", ""), str):
            self.close(1008, "invalid message: hello.url must be a string")
            return
        owner = self.hub.devices.for_session(sid)
        if owner is not self.device:
            self.hub.bridge.note_refusal("session %s claimed with %s" % (sid, "another device's capability" if
                                         self.device is not None else "no device capability"))
            self.close(1008, "this device capability belongs to another session" if self.device is not None
                       else "session %s belongs to a device; only its own pages may use it" % sid)
            return
        try:
            token_ok = self.hub.guard.token_attempt(
                _guess_key(self.request), msg.get("token") if isinstance(msg.get("token"), str) else None)
        except _HttpRefusal as refusal:
            self.hub.bridge.note_refusal(refusal.detail)
            self.close(1013, "too many wrong tokens; try again later")
            return
        if self.needs_token and not token_ok:
            self.hub.bridge.note_refusal("authentication failed for %s (a page off loopback, or a client "
                                         "without an Origin, needs the pairing token in its hello)"
                                         % (self.request.headers.get("Origin") or "a client sending no Origin"))
            self.close(1008, "authentication failed")
            return
        self._end_handshake()
        session, closing = self.hub.bridge.attach(self, msg)
        if closing is not None:
            self.close(*closing)
            return
        assert session is not None  # attach() gives a session or a close code, never neither
        session.device = self.device
        self.session = session
        # the SDK marks its requests for the app's middleware with these (Server truth)
        if session is not None and msg.get("serverMark") is True:
            self.document = str(msg.get("documentId") or "")[:64]
            self._send_marks(True)
        if session is not None and self.hub.faults.live(session.id):  # a new document gets the tab's faults
            self.hub.spawn(_quietly(self.hub.faults.sync(session.id)))

    def _send_marks(self, reset: bool) -> None:
        """Hand this socket's document a batch of one-use server marks (reset: they replace the SDK's pool)."""
        assert self.session is not None and self.document is not None
        marks = self.session.server_tickets.issue(self.document, self.hub.clock())
        self.send_json({"kind": "mark", "marks": marks, "reset": reset, "header": SERVER_MARK_HEADER,
                        "cookie": SERVER_MARK_COOKIE})

    def on_close(self) -> None:
        self._end_handshake()
        self.hub.bridge.detach(self)

    def send_json(self, obj: Any) -> None:
        try:
            self.write_message(_dumps(obj))
        except tornado.websocket.WebSocketClosedError:
            _emit(_bridge_log, logging.DEBUG, "send_on_closed_socket")
