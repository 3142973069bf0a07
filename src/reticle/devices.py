"""Devices.

A device is a browser the daemon starts and owns (DESIGN section 8).  The
daemon speaks the Chrome DevTools Protocol to it over tornado.websocket,
injects the SDK into every document before any page script, and turns the
SDK's act requests into real input (Input.*, event.isTrusted true).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hmac
import json
import logging
import os
import re
import secrets
import shutil
import signal
import time
import urllib.parse
from typing import Any, Awaitable, Dict, List, Optional, Protocol, Tuple, cast

import tornado.ioloop

from .browser import (_BrowserProcess, _CDP_MODIFIERS, _CdpClient, _browser_values, _cdp_key, _confirm_key,
    _device_log, _find_browser, _initiator_stack)
from .constants import DEVICE_LOST_NOTE, SERVER_MARK_COOKIE, _emit
from .endpoints import _Endpoint, _connect_endpoint, _link_addresses, _match_tab, _pick_endpoint
from .errors import _CdpError, ConfigError, ToolError
from .bridge import _Bridge
from .sdk import _sdk_source
from .tab import _BrowserSession, _TabDevice
from .util import _StateDir, _dumps, _env_int, _is_loopback_host, _pid_alive, _script_with, _short, _wall_iso


class _DeviceFaults(Protocol):
    """The daemon's faults as its devices use them (_Faults): a device's network layer follows its tab's
    faults, and a closed device's tab has none."""

    def sync_device(self, device: "_Device") -> Awaitable[None]: ...

    def drop_tab(self, sid: str) -> None: ...


class _Counted(Protocol):
    """A part of the daemon that counts what it received (_OtelTraces: spans, logs, ...)."""

    @property
    def stats(self) -> Dict[str, int]: ...


class _DeviceHost(Protocol):
    """What the devices ask of the daemon (the Hub): its tabs, its faults, whether it hears OpenTelemetry,
    its state directory and address, tasks it holds, and whether it is stopping."""

    @property
    def bridge(self) -> _Bridge: ...

    @property
    def faults(self) -> _DeviceFaults: ...

    @property
    def otel(self) -> _Counted: ...

    @property
    def state(self) -> _StateDir: ...

    @property
    def port(self) -> int: ...

    @property
    def host(self) -> str: ...

    @property
    def scheme(self) -> str: ...

    @property
    def stop_reason(self) -> str: ...

    def spawn(self, coro: Awaitable) -> "asyncio.Task": ...


DEVICE_BUDGET_DEFAULT = (5, 600.0)         # starts per session key per window (RETICLE_DEVICE_BUDGET)
MAX_DEVICES_DEFAULT = 4                    # alive at once (RETICLE_MAX_DEVICES)
DEVICE_IDLE_S = 600.0                      # a device closes when its session key is idle this long
DEVICE_EVICT_IDLE_S = 120                  # ... or, when all are taken and another client needs one, this long
DEVICE_BUDGET_ALL_SCALE = 4                # all session keys together: 4 x RETICLE_DEVICE_BUDGET


DEVICE_CONNECT_TIMEOUT_S = 15.0            # navigation until the injected SDK's hello
DEVICE_VIEWPORT = (1280, 800)
SPARE_DEVICES_DEFAULT = 1                  # spare browsers kept started once a device was asked for


SCREENSHOT_INLINE_MAX_WIDTH = 1280
SCREENSHOT_MAX_HEIGHT = 16384              # a full-page capture stops here: a taller PNG overruns CDP's read buffer
SCREENSHOT_INLINE_MAX_HEIGHT = 4096        # the inline JPEG shows at most this many pixels of height
RELAY_WORLD = "reticle-relay"              # the isolated world that alone holds a device's bridge tickets
RELAY_BINDING = "__reticleRelayTicket"     # the CDP binding, installed in that world only, that asks for one
TICKET_UNUSED_S = 30.0                     # a ticket no socket used within this long is void
TICKETS_PER_DOCUMENT = 8                   # unused tickets one document may hold at once
NET_RECORD_MAX = 4000                      # requests of the browser's own record (CDP Network) kept per device

# The device's bridge relay.  It runs in an isolated world of each top-level document, where no
# page script can reach it: it asks the daemon for a one-use ticket over a CDP binding that only
# this world can call, opens the bridge socket with it, and hands the SDK (in the page's world) a
# MessagePort that carries frames to and from that socket.  The ticket never enters the page's
# world, so a page script cannot read it, replay it or open a socket of its own with it.
_RELAY_JS = r"""#include src/sdk/relay.js"""


# ---- one device's parts: the relay and its tickets, its network record, its input ----

class _RelayTickets:
    """A device's bridge relay (_RELAY_JS, in the isolated world RELAY_WORLD) and its tickets.

    A ticket is 32 random bytes minted for one document's relay when that relay asks over its CDP
    binding, good for one socket, void once another document of the device asks (a navigation
    rotates it) or after TICKET_UNUSED_S unused, and gone with the device."""

    def __init__(self, device: "_Device") -> None:
        self.device = device
        self.nonce = secrets.token_urlsafe(16)  # pairs the SDK with its relay's port; grants nothing
        self.tickets: Dict[str, dict] = {}      # ticket -> {"context", "page", "minted", "used"}

    def source(self) -> str:
        """The relay of _RELAY_JS for this device, run in the isolated world RELAY_WORLD."""
        return _script_with(_RELAY_JS, base=self.device.bridge_base() + "?device=", nonce=self.nonce,
                            binding=RELAY_BINDING)

    def mint(self, context: Any = None, page: Optional[str] = None) -> str:
        """A one-use bridge ticket for the document whose relay runs in `context`.

        A ticket asked for by another document voids every unused one of the documents before
        it: the device's bridge credential rotates with each navigation."""
        now = time.monotonic()
        for t, info in list(self.tickets.items()):
            stale = info["context"] != context or info["page"] != page or now - info["minted"] > TICKET_UNUSED_S
            if info["used"] or stale:
                del self.tickets[t]
        if len(self.tickets) >= TICKETS_PER_DOCUMENT:
            del self.tickets[min(self.tickets, key=lambda t: self.tickets[t]["minted"])]
        ticket = secrets.token_urlsafe(32)
        self.tickets[ticket] = {"context": context, "page": page, "minted": now, "used": False}
        return ticket

    def redeem(self, ticket: str) -> str:
        """'ok' (and the ticket is spent), 'used' (a socket already opened with it) or 'void'."""
        for t, info in list(self.tickets.items()):
            if hmac.compare_digest(t.encode(), ticket.encode("utf-8", "replace")):
                if info["used"]:
                    return "used"
                if time.monotonic() - info["minted"] > TICKET_UNUSED_S:
                    del self.tickets[t]
                    return "void"
                info["used"] = True
                return "ok"
        return "void"

    def holds(self, ticket: str) -> bool:
        return any(hmac.compare_digest(t.encode(), ticket.encode("utf-8", "replace")) for t in self.tickets)

    async def answer(self, context: Any, page: Optional[str]) -> None:
        """Hand the relay that asked (in `context`) a new ticket, into its isolated world only."""
        ticket = self.mint(context, page)
        try:
            await self.device.cdp.call("Runtime.evaluate", {
                "expression": "globalThis.__reticleRelayOpen(%s)" % _dumps(ticket), "contextId": context}, page)
        except _CdpError as exc:  # the document went away before its ticket arrived
            self.tickets.pop(ticket, None)
            _emit(_device_log, logging.INFO, "device_ticket_undelivered", deviceId=self.device.id, why=str(exc))


class _NetRecord:
    """The browser's own record (CDP Network) of the requests a device's page made, against which
    the page's reports are checked, and the main frame's document loads it tells the tab of.

    Each CDP request is one chain: the request, the redirects it followed and how it ended (the
    final status, or failed).  A page's report claims one finished chain of the same method and
    URL (the URL resolved by the daemon against the document's URL, never by the page), and a
    chain confirms one report only: one real 200 cannot vouch for a later report."""

    def __init__(self, device: "_Device") -> None:
        self.device = device
        self.chains: "collections.OrderedDict[str, dict]" = collections.OrderedDict()  # CDP requestId -> chain
        self.by_key: Dict[Tuple[str, str], List[dict]] = {}  # (METHOD, key URL) of each hop -> its chains, in order

    def _session(self) -> Optional["_BrowserSession"]:
        return self.device.manager.hub.bridge.sessions.get(self.device.session_id)

    def on_event(self, method: str, params: dict) -> None:
        """Keep the browser's record of each request its page made, then let the tab's held
        reports that it now confirms through."""
        rid = str(params.get("requestId", ""))
        if params.get("type") == "Document" and params.get("frameId") == self.device.target:
            self._on_document(method, rid, params)
        chain = self.chains.get(rid)
        if method == "Network.requestWillBeSent":
            request = params.get("request") or {}
            hop = (str(request.get("method") or "GET").upper(), _confirm_key(request.get("url")))
            if chain is None or not isinstance(params.get("redirectResponse"), dict):
                chain = {"method": hop[0], "url": hop[1], "status": None, "done": False, "used": False,
                         "error": None, "redirects": 0, "hops": [hop], "document":
                         params.get("type") == "Document" and params.get("frameId") == self.device.target,
                         "stack": _initiator_stack(params.get("initiator"))}
                self.chains[rid] = chain
                self.chains.move_to_end(rid)
                while len(self.chains) > NET_RECORD_MAX:
                    self.chains.popitem(last=False)[1]["used"] = True  # forgotten: it confirms nothing more
            else:
                chain["redirects"] += 1
                chain["hops"].append(hop)
                code = params["redirectResponse"].get("status")
                chain.setdefault("codes", []).append(int(code) if isinstance(code, (int, float)) else 0)
            self.by_key.setdefault(hop, []).append(chain)
            if len(self.by_key) > 2 * NET_RECORD_MAX or len(self.by_key[hop]) > NET_RECORD_MAX:
                self._prune()
            return
        if chain is None or chain["done"]:
            return
        if method == "Network.responseReceived":
            status = (params.get("response") or {}).get("status")
            chain["status"] = int(status) if isinstance(status, (int, float)) and not isinstance(status, bool) else 0
        elif method == "Network.loadingFailed":
            chain["status"], chain["error"] = 0, _short(str(params.get("errorText") or "failed"), 120)
        else:
            return
        chain["done"] = True
        session = self._session()
        if session is not None and session.intake.held:
            session.intake.admit_held(confirmed_only=True)

    def _prune(self) -> None:
        """Forget the chains that confirmed a report or fell out of the record."""
        for key in list(self.by_key):
            live = [c for c in self.by_key[key] if not c["used"]]
            if live:
                self.by_key[key] = live
            else:
                del self.by_key[key]

    def claim(self, data: dict, late: bool) -> Optional[dict]:
        """The browser's chain that a page's report (`data` of a net.request) names, now spent, or
        None.  Its method and URL (resolved against the document's URL here) must be the
        chain's; of the finished chains not yet spent, the first whose status the report says
        wins, else (once no chain of that request is still under way, or `late`) the first."""
        if data.get("initiator") == "document":
            return self._claim_document(data)
        method = str(data.get("method") or "GET").upper()
        key = (method, _confirm_key(self.resolve(data.get("url"))))
        chains = [c for c in self.by_key.get(key, ()) if not c["used"]] if key[1] else []
        if chains:
            self.by_key[key] = chains  # the spent and the forgotten go
        done = [c for c in chains if c["done"]]
        if not done:
            return None
        said = data.get("status")
        agree = [c for c in done if c["status"] == said or (said == 200 and c["status"] == 304) or (
            not said and c["status"] == 0)]
        if agree:
            chain = agree[0]
        elif late or len(done) == len(chains):
            chain = done[0]
        else:
            return None  # the one it names may still be under way
        chain["used"] = True
        return chain

    def _claim_document(self, data: dict) -> Optional[dict]:
        """The main frame's load that a page's document report names, now spent, or None: the newest
        finished one not yet spent with a hop at the report's URL (and method, when the page knew it)."""
        method = data.get("method") if data.get("methodKnown") and isinstance(data.get("method"), str) else None
        key = _confirm_key(self.resolve(data.get("url")))
        for chain in reversed(self.chains.values()) if key else ():
            if chain["document"] and chain["done"] and not chain["used"] and any(
                    url == key and (method is None or m == method.upper()) for m, url in chain["hops"]):
                chain["used"] = True
                return chain
        return None

    def confirm(self, data: dict, late: bool) -> Optional[str]:
        """A page's report (`data` of a net.request) confirmed by the chain it claims (claim), made to
        say what the browser saw (_browser_values) -> what the page said otherwise ("" for nothing),
        or None: no chain of the browser's record confirms it (yet)."""
        chain = self.claim(data, late)
        return None if chain is None else _browser_values(data, chain, self.resolve(data.get("url")))

    def resolve(self, url: Any) -> str:
        """A URL a page reported, resolved against the main frame's URL by the daemon (a page can
        make its own URL resolution lie)."""
        text = url if isinstance(url, str) else ""
        try:
            return urllib.parse.urljoin(self.device.url, text)
        except ValueError:
            return text

    def _on_document(self, method: str, rid: str, params: dict) -> None:
        """The browser's own word that the tab's main frame is loading a new document (a form post
        whose page script announced nothing included): the tab's session is between documents at
        once, as the SDK's announcement of a form submission makes it, until the next document
        connects.  A navigation that brings no document (failed, cancelled, a download, a 204)
        ends it."""
        session = self._session()
        if session is None:
            return
        if method == "Network.requestWillBeSent" and not params.get("redirectResponse"):
            request = params.get("request") or {}
            session.documents.document_on_its_way(rid, str(request.get("method") or "GET").upper(),
                                        _short(str(request.get("url") or ""), 2048))
        elif method == "Network.loadingFailed" or (method == "Network.responseReceived" and (
                (params.get("response") or {}).get("status") in (204, 205))):
            session.documents.document_not_coming(rid)


class _DeviceInput:
    """Real input for a device's page (Input.*, event.isTrusted true), as its SDK asks during an act."""

    def __init__(self, device: "_Device") -> None:
        self.device = device

    async def dispatch(self, req: dict) -> None:
        """Dispatch one action as real input (Input.*), as the SDK asked."""
        action = req.get("action")
        x, y = float(req.get("x", 0)), float(req.get("y", 0))
        call = self.device.cdp.call
        page = self.device.page

        def mouse(kind: str, px: float, py: float, **extra: Any) -> Awaitable[dict]:
            params = {"type": kind, "x": px, "y": py, "modifiers": 0}
            params.update(extra)
            return call("Input.dispatchMouseEvent", params, page)

        hold = min(30.0, max(0.0, float(req.get("holdMs") or 0) / 1000.0))
        if action in ("click", "dblclick", "hover"):
            await mouse("mouseMoved", x, y)
            if action == "hover":
                await asyncio.sleep(hold)
                return
            for count in ((1, 2) if action == "dblclick" else (1,)):
                await mouse("mousePressed", x, y, button="left", buttons=1, clickCount=count)
                if action == "click":
                    await asyncio.sleep(hold)
                await mouse("mouseReleased", x, y, button="left", buttons=0, clickCount=count)
        elif action == "drag":
            tx, ty = float(req.get("toX", x)), float(req.get("toY", y))
            await mouse("mouseMoved", x, y)
            await mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
            for step in range(1, 6):
                await mouse("mouseMoved", x + (tx - x) * step / 5, y + (ty - y) * step / 5, button="left", buttons=1)
            await mouse("mouseReleased", tx, ty, button="left", buttons=0, clickCount=1)
        elif action == "type":
            text = str(req.get("text", ""))
            if len(text) > 200:
                await call("Input.insertText", {"text": text}, page)
                return
            for ch in text:
                await self._key("Enter" if ch == "\n" else ch, 0)
        elif action == "press":
            mods = 0
            for m in req.get("modifiers") or ():
                mods |= _CDP_MODIFIERS.get(str(m), 0)
            await self._key(str(req.get("key") or "Enter"), mods)
        else:
            raise ToolError("the device cannot dispatch %r as real input" % action, code="input_refused")

    async def _key(self, key: str, mods: int) -> None:
        vk, code, text = _cdp_key(key)
        if mods & (2 | 4):
            text = ""  # a shortcut types nothing
        down = {"type": "keyDown" if text else "rawKeyDown", "key": key, "code": code,
                "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk, "modifiers": mods}
        if text:
            down["text"] = text
            down["unmodifiedText"] = text
        call, page = self.device.cdp.call, self.device.page
        await call("Input.dispatchKeyEvent", down, page)
        await call("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk,
                                              "nativeVirtualKeyCode": vk, "modifiers": mods}, page)


async def _answer_device_dialog(device: "_Device", params: dict) -> None:
    """An alert, confirm, prompt or beforeunload blocks a device's page (and every command) until
    it is answered: answer it at once.  Dismissed, unless the act that raised it asked for
    `dialog: "accept"`; a beforeunload during a load the daemon itself started is accepted
    (the agent asked to leave).  The tab's answers name it (_with_health)."""
    kind = str(params.get("type") or "alert")
    policy = device.dialog_policy
    if policy is not None:
        accept = bool(policy.get("accept"))
    else:
        accept = kind == "beforeunload" and device.loading is not None and device.loading.locked()
    answer: Dict[str, Any] = {"accept": accept}
    if accept and kind == "prompt":
        answer["promptText"] = str((policy or {}).get("promptText", params.get("defaultPrompt") or ""))
    record = {"dialogType": kind, "message": _short(str(params.get("message") or ""), 300),
              "url": _short(str(params.get("url") or ""), 300), "handled": "accepted" if accept else "dismissed"}
    _emit(_device_log, logging.INFO, "device_dialog", deviceId=device.id, dialogType=kind, handled=record["handled"])
    try:
        await device.cdp.call("Page.handleJavaScriptDialog", answer, device.page, timeout=5.0)
    except _CdpError as exc:
        record["handled"] = "failed: %s" % _short(str(exc), 120)
    session = device.manager.hub.bridge.sessions.get(device.session_id)
    if session is not None:
        session.note_dialog(record)


# ---- the device: a browser of Reticle's own, with the SDK in every document ----

class _Device(_TabDevice):
    """One browser the daemon started: its process (_BrowserProcess), CDP connection, the page it
    drives, and the parts that answer that page: its relay and tickets (_RelayTickets), the
    browser's record of its requests (_NetRecord), real input (_DeviceInput) and dialogs.

    Its bridge socket opens with a ticket: 32 random bytes minted for one
    document's relay (the isolated world of _RELAY_JS) when that relay asks
    over its CDP binding, good for one socket, void once another document of
    the device asks (a navigation rotates it), and gone with the device.  No
    page script sees one; the bridge accepts it from this device's session id
    alone, and it is never the pairing token."""

    def __init__(self, manager: "_DeviceManager", owner: str, headed: bool, viewport: Tuple[int, int],
                 endpoint: Optional[_Endpoint] = None) -> None:
        """A browser Reticle starts and drives over CDP for one MCP client (`owner`): its process,
        profile, CDP client and page target, its relay tickets, and the browser's own record of the
        requests its page made (to check the page's reports against).  With an `endpoint`, a browser
        context of its own in a browser the user runs (endpoints.py), or the user's own tab (`attached`)."""
        self.manager = manager
        self.endpoint = endpoint
        self.attached = False                    # the user's own tab: detached, never closed, at the end
        self.script_ids: List[str] = []          # what _prepare_page registered, removed when an attached tab is left
        self.peer: Optional[str] = None          # an endpoint off loopback: the address its pages connect from
        self.local: Optional[str] = None         # ... and this machine's address as that browser reaches it
        self.lost: Optional[str] = None          # why the browser went away while the device lived
        self.id = "d" + secrets.token_hex(4)
        self.session_id = "device-" + self.id
        self.relay = _RelayTickets(self)
        self.net: _NetRecord = _NetRecord(self)
        self.inputs = _DeviceInput(self)
        self.process = _BrowserProcess(self.id)
        self.dialog_policy: Optional[dict] = None     # during an act: {"accept": bool, "promptText": str}
        self.owner = owner
        self.headed = headed
        self.viewport = viewport
        self.cdp = _CdpClient()
        self.page: Optional[str] = None          # the flat CDP session of the page target
        self.target: Optional[str] = None
        self.context: Optional[str] = None       # a browser context of its own, after a fresh open
        self.loading: Optional[asyncio.Lock] = None  # one load (navigation, fresh context) at a time
        self.started_at = time.time()
        self.auth_pending: Optional[dict] = None  # a setup flow's saved state, restored by the next navigate
        self.url = ""
        self.closed = False
        self.closing: Optional["asyncio.Future[None]"] = None  # the one close in progress, every caller awaits it
        self.ready = False                       # started and its page connected
        self.acting = 0                          # act commands in flight: input is honoured only then
        self.phases: Dict[str, int] = {}
        self.scripts: Optional[Tuple[str, str]] = None  # (the SDK, the relay) until the page has them
        self._start_t0: Optional[float] = None   # a start of its own (no spare): its phases count from the launch

    @property
    def proc(self) -> Any:
        return self.process.proc

    @property
    def profile(self) -> str:
        return self.process.profile

    @property
    def tickets(self) -> Dict[str, dict]:
        return self.relay.tickets

    def mint_ticket(self, context: Any = None, page: Optional[str] = None) -> str:
        return self.relay.mint(context, page)

    def describe(self) -> dict:
        out = {"deviceId": self.id, "sessionId": self.session_id, "url": self.url,
               "pid": self.proc.pid if self.proc is not None else None, "headed": self.headed,
               "viewport": {"width": self.viewport[0], "height": self.viewport[1]},
               "startedAt": _wall_iso(self.started_at)}
        if self.endpoint is not None:
            out["browser"] = {"endpoint": self.endpoint.shown, "product": self.endpoint.browser or None,
                              "attached": self.attached}
        return out

    def bridge_base(self) -> str:
        """Where this device's pages open the bridge: this machine's loopback, or, for a browser on another
        host, the address of this machine that host reached it by (the daemon must listen there)."""
        hub = self.manager.hub
        host = self.local if self.peer is not None and self.local else "127.0.0.1"
        return "%s://%s:%d/reticle" % ("wss" if hub.scheme == "https" else "ws",
                                       "[%s]" % host if ":" in host else host, hub.port)

    def _scripts(self) -> Tuple[str, str]:
        """The two scripts of every document (injected_source, _RelayTickets.source), built once per set-up."""
        if self.scripts is None:
            self.scripts = (self.injected_source(), self.relay.source())
        return self.scripts

    def injected_source(self) -> str:
        """The SDK with this device's config, run in top-level http(s) documents only.  It carries
        no credential: its bridge socket is the relay's (_RelayTickets.source)."""
        sdk = _sdk_source(device=True, bridge=self.bridge_base(), relay=self.relay.nonce, sessionId=self.session_id)
        return ("(function () {\nif (window.top !== window || !/^https?:$/.test(location.protocol)) return;\n"
                + sdk + "\n})();")

    async def start(self, exe: str, url: str) -> None:
        """Launch, attach to the start-up tab, inject, then load `url`.

        The set-up calls go out together and are all answered before the
        navigation starts: Page.navigate is handled in the browser process and
        may overtake them, and a renderer swap would then lose them."""
        t0 = await self.launch(exe)
        self._start_t0 = t0
        targets = (await self.cdp.call("Target.getTargets")).get("targetInfos", [])
        pages = [t for t in targets if t.get("type") == "page"]
        if pages:
            self.target = pages[0]["targetId"]  # the start-up tab: one renderer fewer than a new one
        else:
            self.target = (await self.cdp.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        self.page = (await self.cdp.call("Target.attachToTarget", {"targetId": self.target, "flatten": True}))[
            "sessionId"]
        self.phases["attachedMs"] = round((time.monotonic() - t0) * 1000)
        self.cdp.listeners.append(self._on_event)
        await self._prepare_page()
        self.phases["injectedMs"] = round((time.monotonic() - t0) * 1000)
        await self.navigate(url)
        self.phases["navigatedMs"] = round((time.monotonic() - t0) * 1000)

    async def warm(self, exe: str) -> None:
        """A spare: everything of a start but the load.  The browser is launched, and its page is a
        new tab in a new browser context of its own (nobody's cookies or storage, not even the empty
        start-up tab's), attached, with this device's SDK registered for every document."""
        t0 = await self.launch(exe)
        self.context, self.target, self.page = await _context_tab(self)
        self.cdp.listeners.append(self._on_event)
        await self._prepare_page()
        self.phases["warmMs"] = round((time.monotonic() - t0) * 1000)

    async def adopt(self, url: str, viewport: Tuple[int, int]) -> None:
        """A warmed spare becomes this caller's device: its viewport, then the load of `url`."""
        t0 = time.monotonic()
        if viewport != self.viewport:
            self.viewport = viewport
            await self.cdp.call("Emulation.setDeviceMetricsOverride", {"width": viewport[0], "height": viewport[1],
                                                                       "deviceScaleFactor": 1, "mobile": False},
                                self.page)
        await self.navigate(url)
        self.phases["spareNavigatedMs"] = round((time.monotonic() - t0) * 1000)

    async def launch(self, exe: str) -> float:
        """Start the browser process and connect to its DevTools endpoint -> the monotonic start time."""
        await self.process.spawn(exe, self.headed, self.viewport)
        t0 = time.monotonic()
        self.manager.records.write(self)
        self._scripts()  # while the browser boots: nothing of the start waits for these two strings then
        ws_url = await self.process.devtools_url()
        self.phases["launchMs"] = round((time.monotonic() - t0) * 1000)
        await self.cdp.connect(ws_url)
        # A browser that exits (a headed window closed by hand, a crash) takes its device with it.
        reader = self.cdp.reader
        assert reader is not None  # connect() started it
        reader.add_done_callback(lambda _: None if self.closed else self.manager.hub.spawn(
            self.manager.close(self, "the browser went away")))
        return t0

    async def _prepare_page(self) -> None:
        """Register the SDK and the relay for every document of the page, and the records the device reads;
        the user's own tab (attached) keeps its size and focus."""
        width, height = self.viewport
        sdk, relay = self._scripts()
        emulation = [] if self.attached else [
            self.cdp.call("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, self.page),
            self.cdp.call("Emulation.setFocusEmulationEnabled", {"enabled": True}, self.page)]
        got = await asyncio.gather(
            self.cdp.call("Page.addScriptToEvaluateOnNewDocument", {"source": sdk}, self.page),
            self.cdp.call("Page.addScriptToEvaluateOnNewDocument", {"source": relay, "worldName": RELAY_WORLD},
                          self.page),
            self.cdp.call("Runtime.addBinding", {"name": RELAY_BINDING, "executionContextName": RELAY_WORLD},
                          self.page),
            self.cdp.call("Runtime.enable", {}, self.page),  # Runtime.bindingCalled is sent only then
            # the browser's own record of the page's requests, against which the page's reports are checked
            self.cdp.call("Network.enable", {"maxTotalBufferSize": 0, "maxResourceBufferSize": 0}, self.page),
            self.cdp.call("Page.enable", {}, self.page), *emulation)
        self.script_ids = [str(g.get("identifier")) for g in got[:2] if g.get("identifier")]
        if self.manager.hub.otel.stats["spans"]:  # the daemon hears OpenTelemetry: documents get trace context
            await self.manager.hub.faults.sync_device(self)
        self.scripts = None  # 240 KB a device need not keep: a fresh context builds them again

    def _on_event(self, method: str, params: dict, session: Optional[str]) -> None:
        if session == self.page and method == "Runtime.bindingCalled" and params.get("name") == RELAY_BINDING:
            # only the relay's isolated world has this binding: the page's own scripts cannot call it
            if self._start_t0 is not None and "askedMs" not in self.phases:  # the first page's SDK runs
                self.phases["askedMs"] = round((time.monotonic() - self._start_t0) * 1000)
            self.manager.hub.spawn(self.relay.answer(params.get("executionContextId"), session))
        elif session == self.page and method.startswith("Network."):
            self.net.on_event(method, params)
        elif session == self.page and method == "Page.downloadWillBegin" and params.get("frameId") == self.target:
            tab = self.manager.hub.bridge.sessions.get(self.session_id)
            if tab is not None:
                tab.documents.document_not_coming(None)
        elif session == self.page and method == "Page.javascriptDialogOpening":
            self.manager.hub.spawn(_answer_device_dialog(self, params))
        elif session == self.page and method == "Page.frameNavigated":
            frame = params.get("frame") or {}
            if not frame.get("parentId"):
                self.url = str(frame.get("url", ""))[:4096]
        elif session == self.page and method == "Page.navigatedWithinDocument" and params.get("frameId") == self.target:
            self.url = str(params.get("url", ""))[:4096]  # what the page's relative URLs resolve against now
        elif method == "Target.detachedFromTarget" and params.get("sessionId") == self.page:
            self.manager.hub.spawn(self.manager.close(self, "the page was closed"))

    async def navigate(self, url: str) -> None:
        if self.auth_pending is not None:  # a logged-in start: its cookies and storage before the first load
            state, self.auth_pending = self.auth_pending, None
            await _device_restore_state(self, state)
        result = await self.cdp.call("Page.navigate", {"url": url}, self.page)
        if result.get("errorText"):
            raise ToolError("the device could not load %s: %s" % (url, result["errorText"]),
                            "check that the app is running and the URL is right", code="navigation_failed")
        self.url = url

    async def capture(self, fmt: str, clip: Optional[dict] = None, full_page: bool = False,
                      quality: Optional[int] = None) -> bytes:
        params: Dict[str, Any] = {"format": fmt, "captureBeyondViewport": bool(full_page or clip)}
        if clip is not None:
            params["clip"] = clip
        if quality is not None:
            params["quality"] = quality
        result = await self.cdp.call("Page.captureScreenshot", params, self.page, timeout=30.0)
        return base64.b64decode(result.get("data", ""))

    async def layout(self) -> dict:
        return await self.cdp.call("Page.getLayoutMetrics", {}, self.page)


async def _fresh_context(device: _Device) -> None:
    """Move the device's page into a new, empty browser context: no cookies, storage, cache,
    service workers or session storage from before.  The old tab and its context go; the
    session id stays, so the new tab's SDK reconnects as the same session."""
    context, target, page = await _context_tab(device)
    old_target, old_context = device.target, device.context
    device.target, device.page, device.context = target, page, context

    async def close_old() -> None:
        try:
            await device.cdp.call("Target.closeTarget", {"targetId": old_target})
        except _CdpError as exc:  # already gone: nothing of it is left to leak
            _emit(_device_log, logging.INFO, "device_old_tab_gone", deviceId=device.id, why=str(exc))

    await asyncio.gather(device._prepare_page(), close_old())
    await device.manager.hub.faults.sync_device(device)  # the tab's faults follow it into the new context
    if old_context:  # its renderer winds down on its own time; the next page need not wait for it
        device.manager.hub.spawn(_dispose_context(device, old_context))

async def _dispose_context(device: _Device, context: str) -> None:
    try:
        await device.cdp.call("Target.disposeBrowserContext", {"browserContextId": context})
    except _CdpError as exc:
        _emit(_device_log, logging.INFO, "device_context_kept", deviceId=device.id, why=str(exc))


# ---- a device in a browser Reticle did not start (endpoints.py): its own context there, or the user's tab ----

async def _context_tab(device: _Device) -> Tuple[str, str, str]:
    """A new, empty browser context of the device's and a blank tab in it, attached -> (context, target, page
    session).  On an endpoint the context is disposed by the browser when Reticle's connection ends (a daemon
    killed mid-run leaves nothing open in the user's browser)."""
    made = await device.cdp.call("Target.createBrowserContext",
                                 {"disposeOnDetach": True} if device.endpoint is not None else {})
    context = made["browserContextId"]
    target = (await device.cdp.call("Target.createTarget", {"url": "about:blank", "browserContextId": context}))[
        "targetId"]
    page = (await device.cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
    return context, target, page


async def _remote_connect(device: _Device) -> None:
    """Connect a device to its endpoint's browser (endpoint_unreachable naming the endpoint and the fix
    otherwise), learn where that browser reaches this daemon, and end the device when the connection goes."""
    ep = device.endpoint
    assert ep is not None
    t0 = time.monotonic()
    await _connect_endpoint(ep, device.cdp)
    device.phases["connectMs"] = round((time.monotonic() - t0) * 1000)
    if not ep.loopback:  # its pages open the bridge from that host, to this machine's address on the link
        device.local, peer = _link_addresses(device.cdp)
        device.peer = peer or ep.host
        hub_host = device.manager.hub.host
        if hub_host not in ("0.0.0.0", "::", "") and hub_host != device.local:
            device.cdp.close()
            raise ToolError("the browser at %s is on another host, and its pages could not reach this daemon, "
                            "which listens on %s only" % (ep.shown, hub_host),
                            "serve with --host 0.0.0.0 (or --host %s; RETICLE_TOKEN set, 32 characters or more) "
                            "so that its pages reach the bridge, or run the browser on this machine's network"
                            % (device.local or "this machine's address"), code="endpoint_unreachable")
    device.scripts = None  # built again with the bridge address of this connection
    reader = device.cdp.reader
    assert reader is not None

    def gone(_: Any) -> None:
        if not device.closed:
            device.lost = ("%s: the DevTools connection to %s closed (the browser exited, or the link to it "
                           "broke); what the act did after that is not known, and reticle_open starts a new device"
                           % (DEVICE_LOST_NOTE, ep.shown))
            device.manager.hub.spawn(device.manager.close(device, "the browser connection was lost"))

    reader.add_done_callback(gone)


async def _remote_start(device: _Device, url: str) -> None:
    """A device on an endpoint: a browser context of its own there, a new tab in it, the SDK registered,
    `url` loaded."""
    await _remote_connect(device)
    t0 = time.monotonic()
    device.context, device.target, device.page = await _context_tab(device)
    device.cdp.listeners.append(device._on_event)
    await device._prepare_page()
    device.phases["injectedMs"] = round((time.monotonic() - t0) * 1000)
    await device.navigate(url)


async def _remote_attach(device: _Device, url: str) -> None:
    """The user's own tab showing `url` (endpoints._match_tab), attached: the SDK registered for its next
    documents and run in the one it shows now (the relay in its isolated world), nothing reloaded."""
    await _remote_connect(device)
    targets = (await device.cdp.call("Target.getTargets")).get("targetInfos", [])
    found, seen = _match_tab(targets, url)
    if found is None:
        device.cdp.close()
        raise ToolError("no tab of the browser at %s shows %s; its tabs: %s" % (
            device.endpoint.shown if device.endpoint else "?", url[:200], "; ".join(seen[:10]) or "none"),
            "pass the URL of one of those tabs, or open %s in that browser first" % url[:200], code="attach_no_match")
    device.attached = True
    device.target, device.context = found["targetId"], found.get("browserContextId")
    device.url = str(found.get("url", url))[:4096]
    device.page = (await device.cdp.call("Target.attachToTarget", {"targetId": device.target, "flatten": True}))[
        "sessionId"]
    device.cdp.listeners.append(device._on_event)
    await device._prepare_page()
    sdk, relay = device._scripts()
    await device.cdp.call("Runtime.evaluate", {"expression": sdk}, device.page)
    world = await device.cdp.call("Page.createIsolatedWorld", {"frameId": device.target, "worldName": RELAY_WORLD},
                                  device.page)
    await device.cdp.call("Runtime.evaluate", {"expression": relay, "contextId": world.get("executionContextId")},
                          device.page)


async def _start_device(device: _Device, url: str, viewport: Tuple[int, int], exe: Optional[str],
                        attach: bool) -> None:
    """Start a device on `url`: a spare adopted (no `exe`), the user's tab attached, a context of its own on an
    endpoint, or a browser launched from `exe`."""
    if exe is None:
        await device.adopt(url, viewport)
    elif attach:
        await _remote_attach(device, url)
    elif device.endpoint is not None:
        await _remote_start(device, url)
    else:
        await device.start(exe, url)


def _attach_refusal(endpoints: List[_Endpoint], with_options: bool) -> None:
    """Refuse an attach with no endpoint to attach in, or with options that would change the user's tab."""
    if not endpoints:
        raise ToolError("attach reads a tab of a browser you already run, and this daemon was given none",
                        "start that browser with --remote-debugging-port=9222 and the daemon with "
                        "`reticle serve --cdp-endpoint http://127.0.0.1:9222` (or RETICLE_CDP_ENDPOINT)",
                        code="bad_argument")
    if with_options:
        raise ToolError("attach uses the user's tab as it is: fresh, auth and headed do not go with it",
                        "drop them, or open a device of its own (without attach)", code="bad_argument")


async def _remote_release(device: _Device) -> None:
    """The end of a device on an endpoint: its own context disposed (its tabs with it), or the user's tab left
    as it was (Reticle's scripts, binding and records removed, the tab detached); the browser stays."""
    try:
        await asyncio.wait_for(_remote_let_go(device), 5.0)
    except asyncio.TimeoutError:
        _emit(_device_log, logging.INFO, "device_release_failed", deviceId=device.id, why="timed out")


async def _remote_let_go(device: _Device) -> None:
    cdp, page = device.cdp, device.page
    if cdp.closed:
        return
    try:
        if device.attached and page:
            await asyncio.gather(*[cdp.call("Page.removeScriptToEvaluateOnNewDocument", {"identifier": i}, page,
                                            timeout=2.0) for i in device.script_ids],
                                 cdp.call("Runtime.removeBinding", {"name": RELAY_BINDING}, page, timeout=2.0),
                                 cdp.call("Network.disable", {}, page, timeout=2.0),
                                 cdp.call("Fetch.disable", {}, page, timeout=2.0), return_exceptions=True)
            await cdp.call("Target.detachFromTarget", {"sessionId": page}, timeout=2.0)
        elif device.context:
            await cdp.call("Target.disposeBrowserContext", {"browserContextId": device.context}, timeout=3.0)
    except _CdpError as exc:
        _emit(_device_log, logging.INFO, "device_release_failed", deviceId=device.id, why=str(exc)[:200])


# ---- a logged-in start: a setup flow's browser state, read from and restored into a device over CDP ----
# The state is the context's cookies and the page origin's localStorage and sessionStorage.  It is
# read in an isolated world and restored by a script in one (the page's own scripts see neither), and
# it never enters a log, an answer or an error message.


def _device_of(session: _BrowserSession) -> Optional[_Device]:
    """The device that owns a tab, whole: the tab knows it only as a _TabDevice (what the tab itself
    asks of it), and _Device is the one kind of device there is."""
    return cast(Optional[_Device], session.device)
AUTH_WORLD = "reticle-auth"                # the isolated world that reads and restores a saved state
_AUTH_MARK = "__reticle_auth_restored"     # sessionStorage key: this tab's origin got its saved storage
_AUTH_COOKIE_KEYS = ("name", "value", "domain", "path", "secure", "httpOnly", "sameSite", "expires")
_AUTH_READ_JS = r"""#include src/sdk/auth_read.js"""
_AUTH_RESTORE_JS = r"""#include src/sdk/auth_restore.js"""


async def _device_read_state(device: "_Device") -> dict:
    """A device's browser state: every cookie of its browser context, and the localStorage and
    sessionStorage of its page's origin (read in an isolated world of the top document)."""
    context = {"browserContextId": device.context} if device.context else {}
    cookies = (await device.cdp.call("Storage.getCookies", context)).get("cookies") or []
    kept = [{k: c[k] for k in _AUTH_COOKIE_KEYS if k in c and not (k == "expires" and c.get("session"))}
            for c in cookies if isinstance(c, dict) and c.get("name") != SERVER_MARK_COOKIE]  # one-use marks stay
    world = await device.cdp.call("Page.createIsolatedWorld", {"frameId": device.target, "worldName": AUTH_WORLD},
                                  device.page)
    got = await device.cdp.call("Runtime.evaluate", {"expression": _script_with(_AUTH_READ_JS, mark=_AUTH_MARK),
                                                     "contextId": world.get("executionContextId"),
                                                     "returnByValue": True}, device.page)
    value = (got.get("result") or {}).get("value")
    origins = [value] if isinstance(value, dict) and str(value.get("origin", "")).startswith("http") else []
    return {"format": 1, "cookies": kept, "origins": origins}


async def _device_restore_state(device: "_Device", state: dict) -> None:
    """Before a load: set the saved cookies in the device's context, and register a script (in an
    isolated world) that writes an origin's saved storage on that origin's first document of the tab."""
    cookies = [{k: c[k] for k in _AUTH_COOKIE_KEYS if k in c} for c in state.get("cookies") or []
               if isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("value"), str)]
    if cookies:
        params: Dict[str, Any] = {"cookies": cookies}
        if device.context:
            params["browserContextId"] = device.context
        await device.cdp.call("Storage.setCookies", params)
    origins = [o for o in state.get("origins") or [] if isinstance(o, dict) and isinstance(o.get("origin"), str)]
    if origins:
        source = _script_with(_AUTH_RESTORE_JS, origins=origins, mark=_AUTH_MARK)
        await device.cdp.call("Page.addScriptToEvaluateOnNewDocument", {"source": source, "worldName": AUTH_WORLD},
                              device.page)


# ---- the device manager: start budgets, records of live browsers, a spare, ownership ----

class _StartBudget:
    """How many devices one session key may start per window (RETICLE_DEVICE_BUDGET), and all keys
    together (DEVICE_BUDGET_ALL_SCALE x it): a new session for every start is no way around it."""

    def __init__(self, raw: Optional[str]) -> None:
        self.budget = self.parse(raw)
        self.starts: Dict[str, collections.deque] = {}

    @staticmethod
    def parse(raw: Optional[str]) -> Tuple[int, float]:
        if not raw or not raw.strip():
            return DEVICE_BUDGET_DEFAULT
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)\s*", raw)
        if not m or int(m.group(1)) < 1:
            raise ConfigError("RETICLE_DEVICE_BUDGET=%r is not understood; use STARTS/SECONDS, for example 5/600."
                              % raw)
        return int(m.group(1)), float(m.group(2))

    def check(self, key: str) -> None:
        """Refuse a start the budget of `key`, or of all keys together, has no room for."""
        count, window = self.budget
        now = time.time()
        for who, limit in ((key, count), ("*", count * DEVICE_BUDGET_ALL_SCALE)):
            starts = self.starts.setdefault(who, collections.deque())
            while starts and starts[0] <= now - window:
                starts.popleft()
            if len(starts) >= limit:
                next_at = starts[0] + window
                raise ToolError("device-start budget spent: %d starts per %g s for %s (RETICLE_DEVICE_BUDGET%s); "
                                "the next start is allowed at %s, in %d s."
                                % (limit, window, "this session key" if who == key else "all clients together",
                                   "" if who == key else " x %d" % DEVICE_BUDGET_ALL_SCALE, _wall_iso(next_at),
                                   max(1, int(next_at - now + 0.999))),
                                "reuse the open device (reticle_open reuses the caller's own) or wait",
                                nextStartAt=_wall_iso(next_at), retryAfterS=max(1, int(next_at - now + 0.999)),
                                code="device_budget")

    def spend(self, key: str) -> None:
        """Count a start of `key` (after check(), which made its record)."""
        self.starts[key].append(time.time())
        self.starts["*"].append(time.time())

    def forget_old(self) -> None:
        horizon = time.time() - self.budget[1]
        for key in [k for k, starts in self.starts.items() if not starts or starts[-1] <= horizon]:
            del self.starts[key]


class _DeviceRecords:
    """The state directory's devices/: one record (pid, profile, daemon pid) per live device, so
    that the next daemon can end the browsers and remove the profiles of one killed with SIGKILL."""

    def __init__(self, hub: _DeviceHost) -> None:
        self.hub = hub

    def _dir(self) -> str:
        path = os.path.join(self.hub.state.ensure(), "devices")
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def write(self, device: "_Device") -> None:
        record = {"pid": device.proc.pid, "profile": device.profile, "daemonPid": os.getpid(),
                  "port": self.hub.port, "startedAt": _wall_iso(device.started_at)}
        path = os.path.join(self._dir(), device.id + ".json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(_dumps(record))

    def drop(self, device: "_Device") -> None:
        try:
            os.unlink(os.path.join(self._dir(), device.id + ".json"))
        except OSError:
            pass

    def reap_orphans(self) -> int:
        """End the browsers and remove the profiles of devices whose daemon is gone.

        Blocking (it waits up to 2 s for a killed group): run it off the loop."""
        folder = os.path.join(self.hub.state.path, "devices")  # made by the first device, not here
        try:
            names = os.listdir(folder)
        except OSError:
            return 0
        reaped = 0
        for name in names:
            path = os.path.join(folder, name)
            try:
                with open(path) as fh:
                    record = json.load(fh)
                pid, profile, owner = int(record["pid"]), str(record["profile"]), int(record["daemonPid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if owner != os.getpid() and _pid_alive(owner):
                continue  # another live daemon's device
            if _pid_alive(pid) and _is_device_process(pid, profile):
                _end_orphan(pid)
            if os.path.basename(profile).startswith("reticle-device-"):
                shutil.rmtree(profile, ignore_errors=True)
            try:
                os.unlink(path)
            except OSError:
                pass
            reaped += 1
            _emit(_device_log, logging.INFO, "device_orphan_reaped", pid=pid, profile=profile, daemonPid=owner)
        return reaped


def _end_orphan(pid: int) -> None:
    """Kill an orphaned browser's process group and wait (up to 2 s) for it to go."""
    try:
        if os.name == "posix":
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    deadline = time.monotonic() + 2.0
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


class _SparePool:
    """Spare browsers (warmed: launched, a page in a context of its own, SDK registered) that the
    next reticle_open adopts instead of launching one; they count in the manager's max_devices."""

    def __init__(self, manager: "_DeviceManager") -> None:
        self.manager = manager
        self.want = max(0, _env_int("RETICLE_SPARE_DEVICES", SPARE_DEVICES_DEFAULT))
        self.spares: List[_Device] = []
        self.tasks: Dict[str, "asyncio.Task[Any]"] = {}  # device id -> its warm-up

    def top_up(self) -> None:
        """Start spares in the background until `want` are kept, within max_devices."""
        manager = self.manager
        while (len(self.spares) < self.want and not manager.hub.stop_reason and not manager.endpoints
               and len(manager.devices) + len(self.spares) < manager.max_devices):
            try:
                exe = _find_browser()
            except ToolError:
                return
            spare = _Device(manager, "", False, DEVICE_VIEWPORT)
            self.spares.append(spare)
            self.tasks[spare.id] = manager.hub.spawn(self._warm(spare, exe))

    async def _warm(self, spare: _Device, exe: str) -> None:
        try:
            await spare.warm(exe)
        except BaseException as exc:
            _emit(_device_log, logging.INFO, "device_spare_failed", deviceId=spare.id, why=str(exc)[:300])
            await self.manager.close(spare, "the spare did not start: %s" % exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        spare.ready = True
        _emit(_device_log, logging.INFO, "device_spare_ready", deviceId=spare.id, pid=spare.proc.pid, **spare.phases)

    async def take(self) -> Optional[_Device]:
        """The oldest spare, once warm (one still starting is waited for: it is further along than a new
        launch), or None when it failed; the caller starts a browser of its own then."""
        while self.spares:
            spare = self.spares.pop(0)
            task = self.tasks.pop(spare.id, None)
            if task is not None and not task.done():
                await asyncio.wait({task})
            if spare.ready and not spare.closed and not spare.cdp.closed:
                spare.ready = False  # ready again once its page connected for its new owner
                return spare
            await self.manager.close(spare, "the spare was not usable")
        return None

    async def give_up_one(self) -> bool:
        """Close the newest spare to make room for a device -> whether there was one."""
        if not self.spares:
            return False
        spare = self.spares[-1]
        task = self.tasks.pop(spare.id, None)
        if task is not None and not task.done():
            task.cancel()
        await self.manager.close(spare, "a device needed its place")
        return True

    async def close_all(self, why: str) -> None:
        spares, self.spares = list(self.spares), []
        for spare in spares:
            task = self.tasks.pop(spare.id, None)
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(*(self.manager.close(s, why) for s in spares))


class _DeviceManager:
    """The devices of one daemon: start budget per session key (_StartBudget), a cap on how many
    live at once, idle close, spare browsers (_SparePool), reaping of a killed daemon's orphans.

    Each device leaves a record (pid, profile, daemon pid) in the state
    directory's devices/ while it lives (_DeviceRecords), so that the next daemon can end the
    browsers and remove the profiles of one that was killed with SIGKILL."""

    def __init__(self, hub: _DeviceHost) -> None:
        self.hub = hub
        self.devices: Dict[str, _Device] = {}
        self.last_used: Dict[str, float] = {}
        self.budget = _StartBudget(os.environ.get("RETICLE_DEVICE_BUDGET"))
        self.records = _DeviceRecords(hub)
        self.max_devices = _env_int("RETICLE_MAX_DEVICES", MAX_DEVICES_DEFAULT)
        self.idle_s = DEVICE_IDLE_S
        self._idle_timer: Any = None
        self.pool = _SparePool(self)
        self.asked_at: Optional[float] = None  # when a device was last asked for (spares idle out after)
        self.endpoints: List[_Endpoint] = []   # browsers the user runs (--cdp-endpoint): devices open there

    @property
    def spares(self) -> List[_Device]:
        return self.pool.spares

    @property
    def spare_tasks(self) -> Dict[str, "asyncio.Task[Any]"]:
        return self.pool.tasks

    def top_up(self) -> None:
        self.pool.top_up()

    def reap_orphans(self) -> int:
        """End the browsers and remove the profiles of devices whose daemon is gone (blocking)."""
        return self.records.reap_orphans()

    # -- lookups --------------------------------------------------------------
    def for_ticket(self, ticket: Optional[str], peer: str = "127.0.0.1") -> Tuple[Optional[_Device], str]:
        """(the device whose relay was given `ticket`, 'ok' | 'used' | 'void'); an 'ok' spends it.  A ticket
        counts from this machine (`peer` loopback), or from the host of the device's own browser when that
        runs on another host (a CDP endpoint off loopback), never from another."""
        if not ticket:
            return None, "void"
        for device in self.devices.values():
            if device.relay.holds(ticket):
                if not _is_loopback_host(peer) and peer != device.peer:
                    return None, "void"
                return device, device.relay.redeem(ticket)
        return None, "void"

    def for_session(self, session_id: Optional[str]) -> Optional[_Device]:
        for device in self.devices.values():
            if device.session_id == session_id:
                return device
        return None

    def owned_by(self, key: str) -> Optional[_Device]:
        for device in self.devices.values():
            if device.owner == key:
                return device
        return None

    def describe(self) -> List[dict]:
        return [d.describe() for d in self.devices.values()]

    def touch(self, key: str) -> None:
        self.last_used[key] = time.monotonic()

    # -- open and close -----------------------------------------------------------
    async def _make_room(self) -> None:
        """At the cap, close the device whose client has been silent longest, if that is more than
        DEVICE_EVICT_IDLE_S (a client that crashed, or one holding devices it does not use); else refuse.
        A spare browser counts too, and gives its place up first."""
        if len(self.devices) + len(self.spares) < self.max_devices:
            return
        if await self.pool.give_up_one():
            return
        now = time.monotonic()
        idle = [(now - self.last_used.get(d.owner, now), d) for d in self.devices.values() if d.ready]
        idle.sort(key=lambda x: -x[0])
        if idle and idle[0][0] > DEVICE_EVICT_IDLE_S:
            silent, device = idle[0]
            _emit(_device_log, logging.WARNING, "device_evicted", deviceId=device.id, silentS=round(silent))
            await self.close(device, "its client was silent for %d s and another client needed a device" % silent)
            return
        raise ToolError("at most %d devices may be open at once (RETICLE_MAX_DEVICES); %d are open, and every "
                        "one was used in the last %d s." % (self.max_devices, len(self.devices), DEVICE_EVICT_IDLE_S),
                        "close one with reticle_close, wait, or raise RETICLE_MAX_DEVICES", code="device_limit")

    async def open(self, key: str, url: str, headed: bool = False, viewport: Optional[Tuple[int, int]] = None,
                   fresh: bool = False, auth: Optional[dict] = None, attach: bool = False) -> Tuple[_Device, bool]:
        """The caller's device on `url` (reused when it has one; in a new, empty browser context
        when `fresh`; starting from a setup flow's saved state `auth`; the user's own tab showing `url`
        in the browser of a CDP endpoint when `attach`) -> (device, started)."""
        viewport = viewport or DEVICE_VIEWPORT
        if attach:
            _attach_refusal(self.endpoints, fresh or auth is not None or headed)
        own = self.owned_by(key)
        if own is not None and not own.ready:
            raise ToolError("this caller's device is still starting.", "wait for the reticle_open that started it",
                            code="device_starting")
        if (own is not None and own.headed == headed and own.viewport == viewport and not own.cdp.closed
                and not attach and not own.attached):
            await self.load(own, url, fresh, auth)
            self.touch(key)
            return own, False
        if own is not None:
            await self.close(own, "replaced by a device with other settings")
        self.asked_at = time.monotonic()
        spare_fits = bool(self.spares) and not headed and not self.endpoints  # an adopted spare takes no new place
        self.budget.check(key)
        if not spare_fits:
            await self._make_room()  # a device counts from the moment it starts, a spare from its launch
        exe = "" if self.endpoints else _find_browser()
        self.budget.spend(key)
        device = (await self.pool.take()) if spare_fits else None
        spare = device is not None
        if device is None:
            device = _Device(self, key, headed, viewport, _pick_endpoint(self.endpoints, _in_use(self)))
        device.owner = key
        device.auth_pending = auth
        self.devices[device.id] = device
        self.touch(key)
        try:
            t0 = time.monotonic()
            await _start_device(device, url, viewport, exe if not spare else None, attach)
            await self.wait_connected(device, -1)
            device.phases["connectedMs"] = round((time.monotonic() - t0) * 1000)
        except BaseException as exc:
            await self.close(device, "start failed: %s" % exc)
            if isinstance(exc, _CdpError):
                raise ToolError("the device failed while starting: %s" % exc, "retry; check the daemon log",
                                code="browser_failed") from exc
            raise
        device.ready = True
        self._ensure_idle_timer()
        self.touch(key)
        _emit(_device_log, logging.INFO, "device_started", deviceId=device.id,
              pid=device.proc.pid if device.proc is not None else None, sessionId=device.session_id, headed=headed,
              browser=device.endpoint.shown if device.endpoint is not None else exe, attached=device.attached,
              spare=spare, **device.phases)
        if not key.startswith("cli:"):  # `reticle drive`/`demo` open one device and end: no spare for them
            self.pool.top_up()
        return device, True

    async def load(self, device: _Device, url: str, fresh: bool = False,
                   auth: Optional[dict] = None) -> _BrowserSession:
        """Load `url` in a running device (first in a new, empty browser context when `fresh` or
        when it starts from a setup flow's saved state `auth`) and wait for its page to connect."""
        if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
            # every load of a device, not only reticle_open's: a flow's startUrl may say file:, data:,
            # chrome: or view-source:, and a fresh replay must not open it
            raise ToolError("a device opens http: and https: pages only, not %r" % url[:200],
                            'use a full URL such as "http://localhost:5173/"', setup=True, code="bad_argument")
        if device.attached and (fresh or auth is not None):
            raise ToolError("the device is the user's own tab (attached): it is never moved to a new, empty browser "
                            "context", "open a device of its own (reticle_open without attach) for a fresh start",
                            code="bad_argument")
        if device.loading is None:
            device.loading = asyncio.Lock()
        async with device.loading:  # two loads at once would each close the tab the other made
            session = self.hub.bridge.get(device.session_id)
            generation = session.generation if session is not None else -1
            try:
                if fresh or auth is not None:
                    await _fresh_context(device)
                device.auth_pending = auth
                await device.navigate(url)
            except _CdpError as exc:
                raise ToolError("the device's browser did not answer (%s)." % exc,
                                "reticle_close it, then open again", code="browser_failed") from exc
            return await self.wait_connected(device, generation)

    async def wait_connected(self, device: _Device, generation: int) -> _BrowserSession:
        deadline = time.monotonic() + DEVICE_CONNECT_TIMEOUT_S
        while time.monotonic() < deadline:
            session = self.hub.bridge.get(device.session_id)
            if session is not None and session.handler is not None and session.generation > generation:
                return session
            if device.closed or device.cdp.closed:
                break
            await asyncio.sleep(0.005)
        raise ToolError("the device loaded %s but its page did not connect to the bridge within %d s (a page "
                        "that is not http(s), or one whose Content-Security-Policy blocks the socket?)"
                        % (device.url, DEVICE_CONNECT_TIMEOUT_S), "check the URL; reticle_sessions shows the tabs",
                        code="page_not_connected")

    async def close(self, device: _Device, why: str) -> None:
        """Close a device for good (idempotent): Browser.close, then the process group is killed if need
        be, its profile removed, its record and faults dropped and its tab's socket closed.  Every wait
        is bounded, so a hung browser cannot hold the caller.  A second caller awaits the first one's
        close rather than returning before the browser is gone (a spare's cancelled warm-up and the
        daemon's stop both close it: the stop must not finish first), and cancelling a caller does not
        stop the close."""
        if device.closing is None:
            device.closing = asyncio.ensure_future(self._close(device, why))
        await asyncio.shield(device.closing)

    async def _close(self, device: _Device, why: str) -> None:
        device.closed = True
        self.devices.pop(device.id, None)
        if device in self.spares:
            self.spares.remove(device)
        if device.endpoint is not None:  # never the user's browser, windows or tabs (a close runs once)
            await _remote_release(device)
        try:
            if not device.cdp.closed and device.endpoint is None:
                await asyncio.wait_for(device.cdp.call("Browser.close", timeout=2.0), 2.5)
        except (_CdpError, asyncio.TimeoutError):
            pass
        device.cdp.close()
        await device.process.end()
        self.records.drop(device)
        self.hub.faults.drop_tab(device.session_id)
        session = self.hub.bridge.get(device.session_id)
        if session is not None and session.handler is not None:
            session.handler.close(1001, "the device closed")
        _emit(_device_log, logging.INFO, "device_closed", deviceId=device.id, why=why)

    async def close_all(self, why: str) -> None:
        await asyncio.gather(self.pool.close_all(why), *(self.close(d, why) for d in list(self.devices.values())))
        if self._idle_timer is not None:
            self._idle_timer.stop()
            self._idle_timer = None

    def _ensure_idle_timer(self) -> None:
        if self._idle_timer is None:
            self._idle_timer = tornado.ioloop.PeriodicCallback(self._close_idle, 15000)
            self._idle_timer.start()

    def _close_idle(self) -> None:
        now = time.monotonic()
        owners = {d.owner for d in self.devices.values()}
        for key in [k for k, t in self.last_used.items() if now - t > self.idle_s and k not in owners]:
            del self.last_used[key]
        self.budget.forget_old()
        for device in list(self.devices.values()):
            if device.owner.startswith("cli:"):
                continue  # `reticle drive` and `reticle demo` keep theirs until they end
            if now - self.last_used.get(device.owner, now) > self.idle_s:
                self.hub.spawn(self.close(device, "its session key was idle for %d s" % self.idle_s))
        if self.spares and (self.asked_at is None or now - self.asked_at > self.idle_s):
            self.hub.spawn(self.pool.close_all("no device was asked for in %d s" % self.idle_s))

    # -- trusted input ------------------------------------------------------------
    def on_input(self, session: _BrowserSession, msg: dict) -> None:
        """The SDK of a device asks for real input during an act; answer on its socket (_device_input)."""
        self.hub.spawn(_device_input(self, session, msg))


def _in_use(manager: _DeviceManager) -> List[Optional[_Endpoint]]:
    """The endpoint of each live device (None for a browser Reticle launched): what each endpoint holds."""
    return [d.endpoint for d in manager.devices.values()]


def _endpoints_status(manager: _DeviceManager) -> List[dict]:
    """The endpoints devices open on, each with how many live devices it holds (/status)."""
    in_use = _in_use(manager)
    return [ep.describe(in_use.count(ep)) for ep in manager.endpoints]


async def _device_input(manager: _DeviceManager, session: _BrowserSession, msg: dict) -> None:
    """Dispatch the real input a device's SDK asked for during an act, and answer on its socket."""
    device = manager.for_session(session.id)
    rid = msg.get("id")
    reply: Dict[str, Any] = {"kind": "input_result", "id": rid, "ok": True}
    try:
        if device is None or device.closed or not device.acting:
            raise ToolError("real input is only dispatched in a device while an act runs", code="input_refused")
        await device.inputs.dispatch(msg)
    except (ToolError, ValueError, TypeError) as exc:  # _CdpError is a ToolError; bad numbers too
        reply = {"kind": "input_result", "id": rid, "ok": False, "error": str(exc)[:500]}
    handler = session.handler
    if handler is not None:
        handler.send_json(reply)


def _is_device_process(pid: int, profile: str) -> bool:
    """Is `pid` still the browser that used `profile` (not a recycled pid)?"""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return profile.encode() in fh.read()
    except FileNotFoundError:
        return os.path.isdir("/proc/self") is False  # no /proc (macOS): trust the record
    except OSError:
        return False
