"""Faults.

A fault makes one tab's matching requests fail (or wait) so that an agent can prove the app tells
the user.  In a device it acts in the browser's network layer (CDP Fetch: the request never
reaches the server unless it is only delayed); in a tab with the script tag it acts in the SDK's
fetch and XHR wrappers.  Every request a fault touched is marked on the page's own record of it
(`faulted: true`, `faultId`), so no verdict mistakes a fault's answer for the server's.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import logging
import re
import secrets
import time
import urllib.parse
from typing import Any, Awaitable, Dict, List, Optional, Protocol, Tuple

from .browser import _device_log
from .constants import _emit
from .bridge import _Bridge
from .devices import _Counted, _Device, _DeviceManager
from .errors import _CdpError, ToolError
from .middleware import _cookie_mark
from .tab import _BrowserSession
from .util import _dumps, _wall_iso


class _FaultsHost(Protocol):
    """What the faults ask of the daemon (the Hub): its tabs and devices, whether it hears
    OpenTelemetry, its clock, and tasks it holds."""

    @property
    def bridge(self) -> _Bridge: ...

    @property
    def devices(self) -> _DeviceManager: ...

    @property
    def otel(self) -> _Counted: ...

    def clock(self) -> float: ...

    def spawn(self, coro: Awaitable) -> "asyncio.Task": ...


FAULT_TTL_MS_DEFAULT = 600000        # a fault expires this long after it was set, unless ttlMs says
FAULT_MAX_PER_TAB = 32
FAULT_HIT_KEEP_MS = 120000           # a request a device fault touched is matched to the page's record within this
_FAULT_CDP_TYPES = {"document": "Document", "fetch": "Fetch", "xhr": "XHR", "websocket": "WebSocket",
                    "eventsource": "EventSource", "script": "Script", "stylesheet": "Stylesheet", "image": "Image",
                    "font": "Font", "media": "Media", "other": "Other"}
_FAULT_SDK_TYPES = ("fetch", "xhr", "websocket")
_FAULT_DEVICE_COVERS = ["documents", "form posts", "fetch", "XHR", "WebSocket handshakes", "EventSource",
                        "scripts, styles, images and fonts"]
_FAULT_SDK_COVERS = ["fetch", "XHR", "WebSocket handshakes"]
_FAULT_SDK_MISSES = ["documents and form posts", "EventSource", "scripts, styles and images",
                     "requests made by workers"]


class _Fault:
    """One fault: what it matches, what it answers, how often and until when, and whose it is."""

    def __init__(self, fid: str, owner: str, session_id: str, spec: dict, now_ms: float) -> None:
        match = spec["match"]
        self.id = fid
        self.owner = owner
        self.session_id = session_id
        self.url_contains = str(match["urlContains"])
        self.method = str(match["method"]).upper() if match.get("method") else None
        self.resource_type = str(match["resourceType"]).lower() if match.get("resourceType") else None
        self.respond = dict(spec["respond"]) if spec.get("respond") else None
        self.delay_ms = int(spec.get("delayMs") or 0)
        self.abort = bool(spec.get("abort"))
        self.times = spec.get("times")
        self.ttl_ms = int(spec.get("ttlMs") or FAULT_TTL_MS_DEFAULT)
        self.created = now_ms
        self.expires = now_ms + self.ttl_ms
        self.expires_wall = time.time() + self.ttl_ms / 1000.0
        self.hits = 0
        self.cleared = False

    def live(self, now_ms: float) -> bool:
        return not self.cleared and now_ms < self.expires and (self.times is None or self.hits < self.times)

    def fits(self, method: Any, url: Any, rtype: Optional[str] = None) -> bool:
        if self.method and str(method or "GET").upper() != self.method:
            return False
        if self.url_contains not in str(url or ""):
            return False
        if self.resource_type in ("fetch", "xhr") and rtype in ("fetch", "xhr"):
            return True  # the browser's network layer does not always tell fetch from XHR
        return not (self.resource_type and rtype and rtype != self.resource_type)

    def what(self) -> str:
        if self.abort:
            return "aborted" + (" after %d ms" % self.delay_ms if self.delay_ms else "")
        if self.respond:
            late = " after %d ms" % self.delay_ms if self.delay_ms else ""
            return "answered %s%s" % (self.respond.get("status"), late)
        return "delayed %d ms" % self.delay_ms

    def public(self, now_ms: float) -> dict:
        match: Dict[str, Any] = {"urlContains": self.url_contains}
        if self.method:
            match["method"] = self.method
        if self.resource_type:
            match["resourceType"] = self.resource_type
        out: Dict[str, Any] = {"faultId": self.id, "sessionId": self.session_id, "match": match, "does": self.what(),
                               "hits": self.hits, "live": self.live(now_ms), "expiresAt": _wall_iso(self.expires_wall)}
        if self.times is not None:
            out["times"] = self.times
            out["remaining"] = max(0, self.times - self.hits)
        return out

    def for_sdk(self, now_ms: float) -> dict:
        """What the SDK's wrappers need (no owner, no session)."""
        out: Dict[str, Any] = {"id": self.id, "urlContains": self.url_contains, "method": self.method,
                               "resourceType": self.resource_type, "delayMs": self.delay_ms, "abort": self.abort,
                               "expiresInMs": max(0, round(self.expires - now_ms))}
        if self.respond:
            out["respond"] = self.respond
        if self.times is not None:
            out["remaining"] = max(0, self.times - self.hits)
        return out


def _cdp_pattern(text: str) -> str:
    """A CDP Fetch urlPattern matching any URL that contains `text` (`*`, `?` and `\\` escaped)."""
    return "*" + re.sub(r"([*?\\])", r"\\\1", text) + "*"


class _Faults:
    """Every fault of one daemon, per tab.  A fault acts on the tab it was set on and on no other;
    only the client that set it lists or clears it; it ends with its ttl, its `times`, a clear, or
    the tab (a closed device, a tab that went away and did not come back)."""

    def __init__(self, hub: _FaultsHost) -> None:
        self.hub = hub
        self.tabs: Dict[str, Dict[str, _Fault]] = {}
        self.hits: Dict[str, collections.deque] = {}       # session id -> [fault id, method, url, t, used]
        self.device_patterns: Dict[str, Tuple[str, ...]] = {}  # CDP page session -> patterns enabled
        self.listening: set = set()
        self.timers: Dict[str, Any] = {}

    # -- bookkeeping ------------------------------------------------------------------------------
    def _tab_alive(self, sid: str) -> bool:
        bridge = self.hub.bridge
        return sid in bridge.sessions or sid in bridge.departed or self.hub.devices.for_session(sid) is not None

    def live(self, sid: str) -> List[_Fault]:
        if sid in self.tabs and not self._tab_alive(sid):
            self.drop_tab(sid)
        now = self.hub.clock()
        return [f for f in self.tabs.get(sid, {}).values() if f.live(now)]

    def known(self, sid: str, fid: Any) -> Optional[_Fault]:
        return self.tabs.get(sid, {}).get(fid) if isinstance(fid, str) else None

    def drop_tab(self, sid: str) -> None:
        for fid in self.tabs.pop(sid, {}):
            timer = self.timers.pop(fid, None)
            if timer is not None:
                timer.cancel()
        self.hits.pop(sid, None)

    def add(self, session: "_BrowserSession", owner: str, spec: dict) -> _Fault:
        tab = self.tabs.setdefault(session.id, {})
        for fid in [k for k, f in tab.items() if not f.live(self.hub.clock())]:
            del tab[fid]
        if len(tab) >= FAULT_MAX_PER_TAB:
            raise ToolError("tab %s already has %d faults (at most %d)" % (session.id, len(tab), FAULT_MAX_PER_TAB),
                            "clear some with reticle_fault {clear: true}", code="fault_limit")
        fault = _Fault("f" + secrets.token_hex(4), owner, session.id, spec, self.hub.clock())
        tab[fault.id] = fault
        loop = asyncio.get_running_loop()
        self.timers[fault.id] = loop.call_later(fault.ttl_ms / 1000.0, lambda: self.hub.spawn(self.sync(session.id)))
        return fault

    def clear(self, sid: str, owner: str, which: Any) -> List[str]:
        tab = self.tabs.get(sid, {})
        gone = [f for f in tab.values() if f.owner == owner and (which is True or f.id == which)]
        for f in gone:
            f.cleared = True
            del tab[f.id]
            timer = self.timers.pop(f.id, None)
            if timer is not None:
                timer.cancel()
        return [f.id for f in gone]

    def take(self, sid: str, method: Any, url: Any, rtype: Optional[str]) -> Optional[_Fault]:
        """The first live fault of tab `sid` that fits this request, its hit counted and noted."""
        for fault in self.live(sid):
            if fault.fits(method, url, rtype):
                fault.hits += 1
                hits = self.hits.setdefault(sid, collections.deque(maxlen=500))
                hits.append([fault.id, str(method or "GET").upper(), str(url or ""), self.hub.clock(), False])
                return fault
        return None

    # -- the page's records: a request a fault touched says so ---------------------------------------
    def mark(self, session: "_BrowserSession", event: dict) -> None:
        """Set `faulted`/`faultId` on a completed request's record when a fault of this tab touched it,
        and take them off when none did (a page cannot claim a fault it never met)."""
        data = event["data"]
        claimed = data.pop("faultId", None)
        data.pop("faulted", None)
        data.pop("faultAnswered", None)
        fault = self.known(session.id, claimed)
        if fault is not None and (session.device is None or fault.resource_type == "websocket"):
            # the SDK's wrappers applied it (fetch and XHR with the script tag; WebSockets everywhere)
            if event["type"] == "net.request" or data.get("direction") == "open":
                fault.hits += 1
            data["faulted"] = True
            data["faultId"] = fault.id
            data["faultAnswered"] = bool(fault.respond or fault.abort)   # it never reached the server
            return
        if session.device is None or event["type"] != "net.request":
            return
        horizon = self.hub.clock() - FAULT_HIT_KEEP_MS
        method = str(data.get("method") or "GET").upper()
        for hit in self.hits.get(session.id, ()):
            fault = self.known(session.id, hit[0])
            if hit[4] or hit[3] < horizon or hit[1] != method or fault is None:
                continue
            if fault.fits(method, data.get("url")) or data.get("url") == hit[2]:
                hit[4] = True
                data["faulted"] = True
                data["faultId"] = fault.id
                data["faultAnswered"] = bool(fault.respond or fault.abort)
                return

    # -- putting faults in force -----------------------------------------------------------------------
    async def sync(self, sid: str) -> None:
        """Put tab `sid`'s live faults in force: Fetch patterns in a device, the SDK's list with the
        script tag."""
        device = self.hub.devices.for_session(sid)
        if device is not None:
            await self.sync_device(device)
        session = self.hub.bridge.get(sid)
        if session is None or session.handler is None:
            return
        now = self.hub.clock()
        # the SDK applies the faults of a script-tag tab, and a device's WebSocket faults (the
        # browser's network layer does not hold WebSocket handshakes)
        faults = [f.for_sdk(now) for f in self.live(sid) if device is None or f.resource_type == "websocket"]
        await session.command("fault_set", {"faults": faults})

    async def sync_device(self, device: "_Device") -> None:
        """Make a device's CDP Fetch interception match the tab's live faults (WebSocket faults are the
        SDK's); Fetch.enable/disable is sent only when the patterns changed."""
        page = device.page
        if page is None or device.closed or device.cdp.closed:
            return
        if device.id not in self.listening:
            self.listening.add(device.id)
            device.cdp.listeners.append(lambda method, params, s: self._on_cdp(device, method, params, s))
        patterns = []
        for fault in self.live(device.session_id):
            if fault.resource_type == "websocket":
                continue  # the SDK's WebSocket wrapper drops those (sync)
            pattern: Dict[str, Any] = {"urlPattern": _cdp_pattern(fault.url_contains), "requestStage": "Request"}
            if fault.resource_type in ("fetch", "xhr"):
                patterns.append(dict(pattern, resourceType="Fetch"))
                pattern["resourceType"] = "XHR"
            elif fault.resource_type:
                pattern["resourceType"] = _FAULT_CDP_TYPES[fault.resource_type]
            patterns.append(pattern)
        if self.hub.otel.stats["spans"]:
            # the daemon hears OpenTelemetry: a document request's trace context is added here (_traced)
            patterns.append({"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"})
        key = tuple(sorted(_dumps(p) for p in patterns))
        if self.device_patterns.get(page, ()) == key:
            return
        if patterns:
            await device.cdp.call("Fetch.enable", {"patterns": patterns, "handleAuthRequests": False}, page)
            self.device_patterns[page] = key
        else:
            await device.cdp.call("Fetch.disable", {}, page)
            self.device_patterns.pop(page, None)

    def _on_cdp(self, device: "_Device", method: str, params: dict, session: Optional[str]) -> None:
        if method == "Fetch.requestPaused" and session is not None:
            self.hub.spawn(self._paused(device, params, session))

    def _traced(self, device: "_Device", params: dict, rid: Any) -> dict:
        """Fetch.continueRequest's arguments for a request let go: the page's own navigation (a form
        post, a link; its top frame, its tab's origin) that carries the SDK's cookie mark and no trace
        context gets `traceparent: 00-<mark>-<random>-01`, the mark being a trace id the daemon issued
        to this tab, so stock OpenTelemetry server instrumentation files its spans under it.  A page
        cannot set a document request's headers; the redirect it leads to is not marked again (its
        record would join the post's trace)."""
        out: Dict[str, Any] = {"requestId": rid}
        req = params.get("request") or {}
        headers: Dict[str, Any] = req["headers"] if isinstance(req.get("headers"), dict) else {}
        session = self.hub.bridge.get(device.session_id) if device.session_id else None
        if (params.get("resourceType") != "Document" or params.get("frameId") != device.target or session is None
                or params.get("redirectedRequestId") or any(k.lower() == "traceparent" for k in headers)):
            return out
        mark = _cookie_mark(next((str(v) for k, v in headers.items() if k.lower() == "cookie"), None))
        try:
            tab, to = urllib.parse.urlsplit(session.url or ""), urllib.parse.urlsplit(str(req.get("url") or ""))
        except ValueError:  # a URL urllib cannot split (an unclosed IPv6 bracket): not the tab's own
            return out
        # a mark the tab holds is one the daemon issued (32 hex digits): nothing else needs checking
        if (mark is None or (tab.scheme, tab.netloc) != (to.scheme, to.netloc)
                or not session.server_tickets.holds(mark, self.hub.clock())):
            return out
        out["headers"] = [{"name": str(k), "value": str(v)} for k, v in headers.items()] + [
            {"name": "traceparent", "value": "00-%s-%s-01" % (mark, secrets.token_hex(8))}]
        return out

    async def _paused(self, device: "_Device", params: dict, page: str) -> None:
        """A request the browser holds for us: answer it as the fault says, or let it go."""
        req = params.get("request") or {}
        rid = params.get("requestId")
        rtype = str(params.get("resourceType") or "other").lower()
        fault = self.take(device.session_id, req.get("method"), req.get("url"), rtype) if page == device.page else None
        call = device.cdp.call
        try:
            if fault is None:
                await call("Fetch.continueRequest", self._traced(device, params, rid), page)
                if not self.live(device.session_id):
                    self.hub.spawn(self.sync_device(device))
                return
            _emit(_device_log, logging.INFO, "fault_hit", faultId=fault.id, sessionId=device.session_id,
                  method=req.get("method"), resourceType=rtype, does=fault.what())
            if fault.delay_ms:
                await asyncio.sleep(fault.delay_ms / 1000.0)
            if fault.abort:
                await call("Fetch.failRequest", {"requestId": rid, "errorReason": "Failed"}, page)
            elif fault.respond:
                r = fault.respond
                headers = [{"name": str(k), "value": str(v)} for k, v in (r.get("headers") or {}).items()]
                if not any(h["name"].lower() == "content-type" for h in headers):
                    headers.append({"name": "Content-Type", "value": "text/plain; charset=utf-8"})
                body = str(r.get("body") if r.get("body") is not None else "Reticle fault %s" % fault.id)
                await call("Fetch.fulfillRequest", {"requestId": rid, "responseCode": int(r["status"]),
                                                    "responseHeaders": headers,
                                                    "body": base64.b64encode(body.encode("utf-8")).decode("ascii")},
                           page)
            else:
                await call("Fetch.continueRequest", {"requestId": rid}, page)
            if fault.times is not None and fault.hits >= fault.times:
                self.hub.spawn(self.sync_device(device))
        except _CdpError as exc:  # the page navigated away or the browser went: nothing is left to answer
            _emit(_device_log, logging.INFO, "fault_unanswered", sessionId=device.session_id, why=str(exc))
