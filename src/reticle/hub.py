"""Hub.

One daemon's whole state in one object: make_app() serves it, and everything below reaches the
daemon through it (the bridge and its tabs, the devices, the faults, the journeys, the server's
records, the registry of tools).  Nothing is global, so two daemons can live in one process (the
tests run many) and a host application can serve one of its own.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import time
from typing import Any, Awaitable, Dict, List, Optional, Protocol, Tuple

from .bridge import _Bridge
from .calls import _CALL_DEADLINE, _CallContext, _tool_result
from .constants import (DEFAULT_HOST, DEFAULT_PORT, HELLO_TIMEOUT_S, REFUSALS_KEPT,
    SESSION_MAX_AGE_S, SSE_KEEPALIVE_S, __version__, _emit, _log)
from .devices import _DeviceManager, _endpoints_status
from .errors import ToolError
from .faults import _Faults
from .frames import _Frames
from .guard import _Guard, _RateLimiter
from .journal import _Journeys
from .mcp import _McpDispatcher
from .otel import _OtelTraces
from .registry import _build_registry
from .sdk import _sdk_source
from .signing import _SessionSigner
from .stores import _Stores
from .tab import _BrowserSession
from .tools import _describe_session, _tool_sessions
from .tying import _Ties
from .util import _StateDir, _clock_ms, _normalise_origin, _parse_rate, _short, _wall_iso


class _Stream(Protocol):
    """An MCP client's held-open event stream (_SseHandler, the GET of Streamable HTTP): told the daemon
    is stopping, it sends its last frame and closes."""

    def sse_stop(self, reason: str) -> None: ...


class Hub:
    """All of one daemon's state.  make_app() serves it; nothing is global."""

    def __init__(self, state_dir: Optional[str] = None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 token: Optional[str] = None, allowed_origins: Optional[List[str]] = None,
                 rate: Optional[Tuple[float, float]] = None, scheme: str = "http") -> None:
        """A daemon's whole state, before it serves: the state directory (token, machine key), the guard
        and rate limiter, the tool registry and MCP dispatcher, the bridge, devices, faults and journeys.
        Nothing listens until `_serve` (or a caller's own server over `make_app`) runs it."""
        self.state = _StateDir(state_dir)
        self.host = host
        self.port = port
        self.scheme = scheme
        self._token = token
        self._token_cache: Tuple[float, str] = (-1.0, "")
        self.signer = _SessionSigner(self.state.machine_key(), SESSION_MAX_AGE_S)
        if allowed_origins is None:
            allowed_origins = [o for o in os.environ.get("RETICLE_ALLOWED_ORIGINS", "").split(",") if o.strip()]
        self.allowed_origins = tuple(filter(None, (_normalise_origin(o) for o in allowed_origins)))
        rate = rate or _parse_rate(os.environ.get("RETICLE_RATE_LIMIT"))
        self.limiter = _RateLimiter(*rate)
        self.keepalive_s = SSE_KEEPALIVE_S
        self.hello_timeout_s = HELLO_TIMEOUT_S
        self._t0 = time.monotonic()
        self.started_at = time.time()
        self.registry = _build_registry()
        self.dispatcher = _McpDispatcher(self.registry, self.call_tool, self.read_live, self.public_origin)
        # what was refused to a page lately (a script load, a bridge socket), for reticle_sessions
        self.refusals: collections.deque = collections.deque(maxlen=REFUSALS_KEPT)
        self.bridge = _Bridge(self)
        self.devices = _DeviceManager(self)
        self.journeys = _Journeys()
        # what the apps' middleware sent (Server truth)
        self.server_truth: Dict[str, Any] = {"received": 0, "stitched": 0, "tied": 0, "unmatched": 0, "invalid": 0,
                                             "refused": 0, "lastRefused": None, "droppedByApps": 0,
                                             "lastDropAt": None}
        self.otel = _OtelTraces()   # spans waiting for their trace's SERVER span (Server truth)
        self.server_jobs: Dict[str, Tuple[float, dict]] = {}  # jobs' records that came before their request's
        self.ties = _Ties()         # records with no mark a tab holds, tied to document requests by time
        self.faults = _Faults(self)
        self.project_dir = os.environ.get("RETICLE_PROJECT_DIR") or os.getcwd()
        self.frames = _Frames(self.project_dir)  # the pages' source maps: where a request was sent from
        self.guard = _Guard(self)
        self.stores = _Stores(self.project_dir, self.clock, self.spawn)  # the app's stores watched (Storage truth)
        self.sse_streams: Dict[str, _Stream] = {}
        self.get_streams: set = set()
        self.bulk_window = [0.0, 0]  # [start (monotonic s), bulk body bytes read in it] (data_received)
        self.clients: Dict[str, float] = {}  # MCP session id -> when last heard (Hub.clock, ms)
        self.mcp_ready = True
        self.tasks: set = set()
        self.stop_event: Optional[asyncio.Event] = None
        self.stop_reason = ""
        self._sdk: Optional[str] = None

    def note_refusal(self, what: str, reason: str, fix: str) -> None:
        """Keep what was refused to a page (`what`: "script" or "socket"), why and what to do, the
        last REFUSALS_KEPT of them: reticle_sessions names them while no tab is connected."""
        self.refusals.append({"at": _wall_iso(), "what": what, "reason": _short(reason, 300), "fix": fix})

    # -- clock and ids --------------------------------------------------------
    def clock(self) -> float:
        """Milliseconds since the daemon started: the cursor clock, the daemon's one clock (_clock_ms)."""
        return _clock_ms(self._t0)

    def token(self) -> str:
        """The pairing token: the one given to the constructor, else RETICLE_TOKEN, else the state
        directory's token file (re-read when the file changes, so a rotated token takes effect)."""
        if self._token:
            return self._token
        env = os.environ.get("RETICLE_TOKEN", "").strip()
        if env:
            return env
        path = self.state.file("token")
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            mtime = -2.0
        if mtime != self._token_cache[0]:
            self._token_cache = (mtime, self.state.token())
        return self._token_cache[1]

    def public_origin(self) -> str:
        """The origin a client on this machine reaches the daemon at (a wildcard bind is named 127.0.0.1)."""
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = "[%s]" % host
        return "%s://%s:%d" % (self.scheme, host, self.port)

    # -- tasks ------------------------------------------------------------------
    def spawn(self, coro: Awaitable) -> "asyncio.Task":
        """Run `coro` as a task the Hub holds until it is done (so it is not garbage-collected mid-way)."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def touch_client(self, session_id: str) -> None:
        """Note that an MCP client with this session id was just heard from; status counts clients heard
        in the last ten minutes (the table is pruned to those when it grows past a thousand)."""
        self.clients[session_id] = self.clock()
        if len(self.clients) > 1000:
            horizon = self.clock() - 600_000
            self.clients = {k: v for k, v in self.clients.items() if v > horizon}

    def default_session(self, args: dict, ctx: _CallContext) -> Optional[str]:
        """The tab a call means: its `sessionId`, else the device this caller opened, else none
        (the bridge then takes the only tab, and never guesses between several)."""
        if args.get("sessionId"):
            return args["sessionId"]
        own = self.devices.owned_by(ctx.session_key)
        return own.session_id if own is not None and own.ready and not own.closed else None

    async def resolve_tab(self, args: dict, ctx: _CallContext) -> "_BrowserSession":
        """The tab a call means (default_session, resolved by the bridge), refused when it is a
        device another client opened: a device belongs to the client that opened it (its session
        key: the Mcp-Session-Id of Streamable HTTP and of each `reticle mcp` proxy, the stream of
        SSE), as its close and its faults do; one the CLI opened (`reticle drive`) is anyone's."""
        session = await self.bridge.resolve_soon(self.default_session(args, ctx))
        device = self.devices.for_session(session.id)
        if device is not None and device.owner != ctx.session_key and not device.owner.startswith("cli:"):
            raise ToolError("tab %s is a device another MCP client opened; only that client may act on it, read it, "
                            "navigate it, take its screenshots or save its flows (its pages carry that client's "
                            "cookies)" % session.id,
                            "open your own device with reticle_open {url} (it answers your sessionId), or name "
                            "a tab of yours in sessionId", code="device_not_yours")
        return session

    # -- MCP ----------------------------------------------------------------------
    async def call_tool(self, name: str, args: dict, ctx: _CallContext) -> dict:
        """Run one tool and return its MCP tool result; a ToolError, an unknown name or a crash is an
        `isError` result naming what went wrong, never an exception, so the daemon keeps serving."""
        tool = self.registry.get(name)
        if tool is None:  # the MCP layer checks the name first; a direct caller may not have
            return _tool_result({"error": "unknown tool %r" % name,
                                 "recovery": "call one of: %s" % ", ".join(self.registry.names())}, True)
        self.devices.touch(ctx.session_key)
        try:
            session = await self.resolve_tab(args, ctx) if tool.needs_session else None
            budget = args.get("timeout_ms") if isinstance(args, dict) else None
            token = _CALL_DEADLINE.set(self.clock() + budget + 500 if isinstance(budget, int) and
                                       not isinstance(budget, bool) and budget > 0 else None)
            try:
                return _tool_result(await tool.handler(self, session, args, ctx))
            finally:
                _CALL_DEADLINE.reset(token)
        except ToolError as exc:
            return _tool_result(exc.payload(), is_error=True)
        except Exception as exc:
            _emit(_log, logging.ERROR, "tool_crashed", tool=name, error=repr(exc))
            return _tool_result({"error": "internal error in %s: %s" % (name, exc),
                                 "recovery": "this is a Reticle bug; the daemon keeps serving"}, True)

    async def read_live(self, uri: str) -> Any:
        """The live MCP resources' content (today: the sessions list, whatever the uri)."""
        return await _tool_sessions(self, None, {}, _CallContext("resource", "resource"))

    # -- status ---------------------------------------------------------------------
    def status(self) -> dict:
        """What GET /status and `reticle status` show: version, pid, port, uptime, live sessions, MCP
        clients, devices and the server-truth counters."""
        horizon = self.clock() - 600_000  # MCP clients heard in the last ten minutes
        otel: Dict[str, Any] = dict(self.otel.stats)
        unattributed = self.otel.sources.unattributed(self.clock())
        if unattributed:  # spans that land in no tab: why, and the fix for that stack
            otel["unattributed"] = unattributed
        out = {"running": True, "version": __version__, "pid": os.getpid(), "port": self.port,
               "startedAt": _wall_iso(self.started_at), "uptimeMs": int(self.clock()),
               "sessions": [_describe_session(s) for s in self.bridge.live()],
               "mcpClients": len(self.sse_streams) + sum(1 for v in self.clients.values() if v > horizon),
               "devices": self.devices.describe(),
               "cdpEndpoints": _endpoints_status(self.devices),
               # counts only (what a refusal named stays in the log): the middleware's records, the spans
               "serverTruth": {"middleware": {k: v for k, v in self.server_truth.items() if isinstance(v, int)},
                               "openTelemetry": otel, "tiedByTime": dict(self.ties.stats),
                               "stores": self.stores.describe()}}
        if not out["sessions"]:
            out["why"] = self.bridge.why()
        return out

    def sdk_source(self) -> str:
        """The in-page SDK as served at /reticle.js: the embedded source with this daemon's version, limits and
        convention tables filled in (built once)."""
        if self._sdk is None:
            self._sdk = _sdk_source()
        return self._sdk

    # -- stopping -------------------------------------------------------------------
    def request_stop(self, reason: str) -> None:
        """Ask the running daemon to stop (for `reason`, logged); `_serve` shuts down in order."""
        self.stop_reason = reason
        if self.stop_event is not None:
            self.stop_event.set()

    async def shutdown(self, reason: str) -> None:
        """Planned stop: shutdown frame on every stream, close every socket."""
        self.mcp_ready = False
        for stream in list(self.sse_streams.values()) + list(self.get_streams):
            stream.sse_stop(reason)
        await self.devices.close_all("the daemon is stopping")
        self.bridge.close_all()
        self.otel.close()
        await self.stores.close()
        if self.frames.parser is not None:
            self.frames.parser.shutdown(wait=False, cancel_futures=True)
        for _ in range(20):
            if not self.sse_streams and not self.get_streams:
                break
            await asyncio.sleep(0.01)
