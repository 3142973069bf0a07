"""Browser bridge.

All the tabs of one daemon: attaching a tab's socket (bound to its origin), resuming a reloaded
tab, departed tabs kept for a while, and finding the tab a call means.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

import tornado.ioloop

from .constants import (DEPARTED_KEEP_MS, EVENTS_PER_SECOND_DEFAULT, FRAME_BYTES_ALL_TABS_S, FRAME_BYTES_PER_TAB_S,
    MAX_DEPARTED, MAX_SESSIONS, NAV_WAIT_S, _bridge_log, _emit)
from .errors import ToolError
from .events import _FRAME_TYPES, _call_label
from .tab import _BrowserSession, _Socket, _socket_origin
from .util import _env_byte_rate, _short


async def _poll(check: Callable[[], bool], timeout: float, step: float, clock: Callable[[], float]) -> bool:
    """Check every `step` s until `check()` holds (True) or `timeout` s pass on `clock` (the daemon's, ms)
    (False)."""
    deadline = clock() + timeout * 1000.0
    while not check():
        left = (deadline - clock()) / 1000.0
        if left <= 0:
            return False
        await asyncio.sleep(min(step, left))
    return True


_SOCKET_REFUSAL_FIX = ("the SDK tries again by itself; if this repeats, reload the page, and check that it is "
                       "on localhost or 127.0.0.1 (or allow-listed with RETICLE_ALLOWED_ORIGINS and given the token)")


class _FaultMarker(Protocol):
    """The daemon's faults as the bridge's tabs use them (_Faults): a completed request is marked."""

    def mark(self, session: _BrowserSession, event: dict) -> None: ...


class _StepLog(Protocol):
    """The daemon's journeys (_Journeys): each tab's steps, recorded as they happen."""

    def record(self, session_id: str, step: dict) -> None: ...


class _BridgeHost(Protocol):
    """What the bridge asks of the daemon that holds it (the Hub): its clock, its record of what was
    refused to a page, its public origin, its faults and its journeys."""

    @property
    def refusals(self) -> collections.deque: ...

    @property
    def faults(self) -> _FaultMarker: ...

    @property
    def journeys(self) -> _StepLog: ...

    def clock(self) -> float: ...

    def note_refusal(self, what: str, reason: str, fix: str) -> None: ...

    def public_origin(self) -> str: ...


# ---- the bridge: every tab of the daemon, found by id, the only tab, or the next to connect ----

class _Bridge:
    """All browser sessions of one daemon, keyed by the id the page chose."""

    def __init__(self, hub: _BridgeHost) -> None:
        self.hub = hub
        self.clock = hub.clock
        self.sessions: Dict[str, _BrowserSession] = {}
        self.pending_handshakes = 0
        self.pending: "collections.OrderedDict[Any, None]" = collections.OrderedDict()  # sockets before hello
        self.refusals: collections.deque = hub.refusals  # the hub's record of what it refused a page
        self.ever_connected = 0
        self.events_per_second = EVENTS_PER_SECOND_DEFAULT
        self.frame_window = [0.0, 0]  # [start (clock ms), frame bytes read in it], all tabs together
        # the fairness caps on event frames (frame_pause); make_app(tab_byte_rate=, total_byte_rate=) sets them too
        self.tab_byte_rate = _env_byte_rate("RETICLE_TAB_BYTES_PER_S", FRAME_BYTES_PER_TAB_S)
        self.total_byte_rate = _env_byte_rate("RETICLE_ALL_TABS_BYTES_PER_S", FRAME_BYTES_ALL_TABS_S)
        # Tabs that went away recently, kept so that a reload (same id, new
        # socket) keeps its buffer and cursors instead of starting blind.
        self.departed: Dict[str, Tuple[_BrowserSession, float]] = {}
        # every tab that went away (id -> when, the page it left): a call naming one is told where it went
        self.left: "collections.OrderedDict[str, Tuple[float, str]]" = collections.OrderedDict()

    def live(self) -> List[_BrowserSession]:
        return list(self.sessions.values())

    def every_tab(self) -> List[_BrowserSession]:
        """The live tabs and those that left lately (a server record may still come for them)."""
        return self.live() + [s for s, _ in self.departed.values()]

    def frame_pause(self, session: "_BrowserSession", size: int) -> float:
        """After a frame of events from `session`: 0.0, or the seconds until that tab may send again,
        once it has sent `tab_byte_rate` this second (or all tabs together `total_byte_rate`).  The
        bridge then stops reading its socket that long: a tab that floods is slowed by its own
        socket (its SDK's queue fills and says so), and other tabs and clients keep their share."""
        now = self.clock()
        mine, shared = session.frame_window, self.frame_window
        for window in (mine, shared):
            if now - window[0] >= 1000.0:
                window[0], window[1] = now, 0
            window[1] += size
        over = [w for w, cap in ((mine, self.tab_byte_rate), (shared, self.total_byte_rate)) if w[1] > cap]
        if not over:
            return 0.0
        wait_ms = 1000.0 - (now - max(w[0] for w in over))
        session.paused_ms += wait_ms
        return max(0.0, wait_ms / 1000.0)

    def get(self, session_id: str) -> Optional[_BrowserSession]:
        return self.sessions.get(session_id)

    def note_refusal(self, reason: str, fix: str = "") -> None:
        self.hub.note_refusal("socket", reason, fix or _SOCKET_REFUSAL_FIX)
        _emit(_bridge_log, logging.WARNING, "bridge_refused", reason=reason)

    def why(self) -> str:
        origin = self.hub.public_origin()
        text = ("no browser session is connected. Load the app in a browser with "
                '<script src="%s/reticle.js"></script> in its dev HTML (the page must be on '
                "localhost or 127.0.0.1, or allow-listed with RETICLE_ALLOWED_ORIGINS and given the "
                "token), then call reticle_sessions again; or let Reticle open the app itself: "
                "reticle_open {url} starts a browser with the SDK injected." % origin)
        if self.ever_connected:
            text = "every tab that connected has gone (%d seen since start). " % self.ever_connected + text
        if self.refusals:
            last = self.refusals[-1]
            text = ("NOTE: the daemon refused a page's %s recently (%s: %s); %s. " % (
                "script load (/reticle.js)" if last["what"] == "script" else "bridge socket", last["at"],
                last["reason"], last["fix"])) + text
        return text

    def resolve(self, session_id: Optional[str]) -> _BrowserSession:
        if session_id:
            s = self.sessions.get(session_id)
            if s is None:
                live = ", ".join("%s (%s)" % (x.id, x.url) for x in self.sessions.values()) or "none"
                if session_id in self.left:
                    raise ToolError(self._away(session_id) + "; connected now: %s" % live,
                                    "bring the tab back to a page with the script tag (it is the same session "
                                    "then), or open the app in a device: reticle_open {url}", code="tab_away")
                raise ToolError("unknown sessionId %r; connected sessions: %s" % (session_id, live),
                                "pass one of the connected ids, or omit sessionId when one tab is connected",
                                code="tab_unknown")
            return s
        if not self.sessions:
            raise ToolError(self.why(), "connect a tab (see reticle_sessions), then retry", code="no_tab")
        if len(self.sessions) == 1:
            return next(iter(self.sessions.values()))
        # Several tabs: never guess between live ones.  A lone tab that is
        # not hidden or silent among throttled ones is the only implicit pick.
        awake = [s for s in self.sessions.values() if not s.throttled()]
        if len(awake) == 1:
            return awake[0]
        raise ToolError("multiple sessions connected — pass sessionId: %s" % ", ".join(
            "%s (%s)" % (s.id, s.url) for s in self.sessions.values()), "pass sessionId", code="tab_ambiguous")

    def attach(self, handler: _Socket,
               hello: dict) -> Tuple[Optional[_BrowserSession], Optional[Tuple[int, str]]]:
        """Bind a hello to its session: a known or just-departed id is taken over (its pending commands
        fail, an older socket is closed as replaced), a new one is created; (None, close code) when the
        daemon already holds MAX_SESSIONS tabs."""
        sid = hello["sessionId"]
        self._reap_departed()
        old = self.sessions.get(sid)
        if old is None and sid in self.departed:
            old = self.departed.pop(sid)[0]
            self.sessions[sid] = old
        if old is None and len(self.sessions) >= MAX_SESSIONS:
            self.note_refusal("session limit reached (%d tabs)" % MAX_SESSIONS)
            return None, (1013, "session limit reached")
        origin = _socket_origin(handler)
        if old is not None and old.device is None and old.origin != origin:
            # a tab's id is no credential: a page of another origin (another port) claiming it is refused,
            # and the tab's own socket is left as it is
            claimed = origin or "a client sending no Origin"
            self.note_refusal("session %s claimed from %s; it belongs to %s" % (sid, claimed, old.origin or
                                                                                 "a client sending no Origin"))
            return None, (1008, ("session %s belongs to a page of another origin; a page of %s cannot take it "
                                 "over" % (sid, claimed))[:120])
        if old is not None:
            session = old
            old_handler = old.handler
            old.fail_pending("the tab %s was replaced by a newer connection before the command answered" % sid)
            session.handler = handler
            session.origin = origin  # a device's tab may be taken to another origin
            session.generation += 1
            session.reconnects += 1
            session.connected_at = self.clock()
            session.requests.clear()      # a new document: the old one's requests can no longer answer
            session.health.new_document()  # a new document answers for itself
            session.documents.arrived(hello)
            session.update_identity(hello)
            if old_handler is not None and old_handler is not handler:
                old_handler.replaced = True
                reason = ("session replaced by a newer connection claiming the same id (%s)" % sid)[:120]
                old_handler.close(1008, reason)
            _emit(_bridge_log, logging.INFO, "session_replaced", sessionId=sid, url=session.url)
        else:
            session = _BrowserSession(self, handler, hello)
            self.sessions[sid] = session
            _emit(_bridge_log, logging.INFO, "session_connected", sessionId=sid, url=session.url)
        self.ever_connected += 1
        return session, None

    def detach(self, handler: _Socket) -> None:
        session = handler.session
        if session is None or session.handler is not handler:
            return
        session.handler = None
        session.left_at = self.clock()
        session.fail_pending("the tab %s disconnected before the command answered" % session.id)
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
            self.departed[session.id] = (session, self.clock())
            self.left[session.id] = (self.clock(), session.url)
            self.left.move_to_end(session.id)
            while len(self.left) > 512:
                self.left.popitem(last=False)
            self._reap_departed()
            while len(self.departed) > MAX_DEPARTED:  # oldest first: dicts keep insertion order
                del self.departed[next(iter(self.departed))]
        _emit(_bridge_log, logging.INFO, "session_disconnected", sessionId=session.id)
        # the buffer of a tab that does not come back is freed when its keep ends, not at the next connect
        keep = DEPARTED_KEEP_MS
        tornado.ioloop.IOLoop.current().call_later(keep / 1000.0 + 0.05, lambda: self._reap_departed(keep))

    def _away(self, session_id: str) -> str:
        """Where a tab that went away went, as far as the daemon knows: the page it left, when, and the
        document request it left by (its status, when the next page reported it)."""
        at, url = self.left[session_id]
        gone = self.departed.get(session_id)
        last = [e["data"] for e in gone[0].store.query(prefix="net.") if e["data"].get("initiator") == "document"] \
            if gone is not None else []
        went = " by %s%s" % (_call_label(last[-1]), " (answered %s)" % last[-1]["status"]
                             if last[-1].get("status") else "") if last else ""
        return ("tab %s left %s%s %d s ago and has not connected since: the page it went to has no Reticle script "
                "tag (an error page its server answered without the app's layout, another site) or the tab "
                "closed; it is the same session, %s, again once the tab loads a page with the tag"
                % (session_id, _short(url, 200), went, (self.clock() - at) / 1000.0, session_id))

    def _reap_departed(self, keep_ms: float = DEPARTED_KEEP_MS) -> None:
        now = self.clock()
        for sid, (_, gone_at) in list(self.departed.items()):
            if now - gone_at > keep_ms:
                del self.departed[sid]

    async def wait_back(self, session: _BrowserSession, timeout: float) -> bool:
        """Wait up to `timeout` s for `session` (the same tab) to connect again."""
        return await _poll(lambda: session.handler is not None and self.sessions.get(session.id) is session,
                           timeout, 0.025, self.clock)

    def mark_fault(self, session: _BrowserSession, event: dict) -> None:
        """Mark a tab's completed request that a fault of the daemon answered (_Faults.mark)."""
        self.hub.faults.mark(session, event)

    def record_step(self, session_id: str, step: dict) -> None:
        """Record a step of a tab's journey (_Journeys.record: what a flow is saved from)."""
        self.hub.journeys.record(session_id, step)

    def _returning(self, session_id: Optional[str]) -> Optional[_BrowserSession]:
        """A tab that left less than NAV_WAIT_S ago and may be loading its next document."""
        now = self.clock()
        recent = [s for s, _ in self.departed.values()
                  if s.left_at is not None and now - s.left_at < NAV_WAIT_S * 1000.0]
        if session_id:
            return next((s for s in recent if s.id == session_id), None)
        return recent[-1] if len(recent) == 1 and not self.sessions else None

    async def resolve_soon(self, session_id: Optional[str]) -> _BrowserSession:
        """resolve(), but a tab between two documents is waited for (up to NAV_WAIT_S) instead
        of being reported gone: a form post or a link replaces the page, not the tab."""
        try:
            return self.resolve(session_id)
        except ToolError:
            back = self._returning(session_id)
            if back is None or back.left_at is None:
                raise
            # (a tagged tab's next page connects at once, or has no tag: tab_away after STRANDED_MS)
            if not await self.wait_back(back, back.documents.back_within(
                    NAV_WAIT_S - (self.clock() - back.left_at) / 1000.0)):
                raise
            return back

    async def wait_reconnect(self, session_id: str, generation: int, timeout: float) -> bool:
        """Wait up to `timeout` s for a newer connection (a later generation) of the tab."""
        def back() -> bool:
            s = self.sessions.get(session_id)
            return s is not None and s.generation > generation and s.handler is not None
        return await _poll(back, timeout, 0.05, self.clock)

    def close_all(self) -> None:
        for s in list(self.sessions.values()):
            if s.handler is not None:
                s.handler.close(1001, "reticle daemon stopping")


def _act_command(args: dict) -> dict:
    if not args.get("ref") and not args.get("target"):
        raise ToolError("%s needs a `ref` (from snapshot/query) or a `target` such as "
                        '{"role": "button", "name": "Save"}.' % args.get("action", "the action"),
                        "take a reticle_snapshot first, or pass target", code="bad_argument")
    cmd = {"action": args["action"], "args": args.get("args", {})}
    if args.get("ref"):
        cmd["ref"] = args["ref"]
    else:
        cmd["target"] = args["target"]
    return cmd


def _summarise(events: List[dict]) -> dict:
    c = collections.Counter(e["type"] for e in events)
    messages = sum(1 for e in events if e["type"] in _FRAME_TYPES and e["data"].get("direction") in ("in", "out"))
    return {
        "total": len(events),
        "network": c["net.request"] + messages,
        "messages": messages,
        "domAdded": c["dom.added"], "domRemoved": c["dom.removed"],
        "domChanged": c["dom.attr"] + c["dom.text"],
        "routeChanges": c["route.change"],
        "consoleErrors": c["console.error"] + c["error.uncaught"],
        "animations": sum(v for k, v in c.items() if k.startswith("anim.")),
        "signals": c["signal"],
    }
