###############################################################################
# Application factory #########################################################
###############################################################################

_MIDDLEWARE_CODES = {"403": "Host, Origin or Referer not allowed, or the token is missing or wrong",
                     "408": "the request body was not complete within 10 s",
                     "413": "the request body is over 4 MiB",
                     "429": "rate limited for this session key; see Retry-After"}

# path regex, handler, extra kwargs, OpenAPI path, {method: (operationId, summary, {status: text})}
_ROUTES: List[Tuple[str, Any, dict, str, dict]] = [
    (r"/status", _StatusHandler, {}, "/status",
     {"get": ("status", "Daemon status (cheap JSON)", {"200": "status JSON"})}),
    (r"/openapi\.json", _OpenApiHandler, {}, "/openapi.json",
     {"get": ("openapi", "This document", {"200": "OpenAPI 3.1 JSON"})}),
    (r"/reticle\.js", _SdkHandler, {}, "/reticle.js",
     {"get": ("sdk", "The in-page SDK (application/javascript, ETag)",
              {"200": "the SDK", "304": "not modified (If-None-Match)"})}),
    (r"/reticle", _BridgeHandler, {}, "/reticle",
     {"get": ("bridge", "WebSocket upgrade for the in-page SDK",
              {"101": "switching protocols", "400": "not a WebSocket upgrade", "403": "origin or host refused"})}),
    (r"/mcp/sse", _SseHandler, {}, "/mcp/sse",
     {"get": ("mcpSse", "Open an MCP HTTP+SSE session; the first frame is `endpoint`",
              {"200": "text/event-stream", "503": "MCP server not ready"})}),
    (r"/mcp/message", _SseMessageHandler, {}, "/mcp/message",
     {"post": ("mcpMessage", "Send one JSON-RPC message into an SSE session; the reply arrives on the stream",
               {"202": "accepted", "400": "missing sessionId, or not one JSON-RPC message",
                "404": "session not found", "503": "MCP server not ready"})}),
    (r"/mcp", _StreamableHandler, {}, "/mcp",
     {"post": ("mcpPost", "Send MCP JSON-RPC messages (one or a batch)",
               {"200": "response(s); Mcp-Session-Id on initialize; for a tools/call with _meta.progressToken "
                       "from a client that accepts text/event-stream, an SSE stream: its progress "
                       "notifications, then its response", "204": "notifications only",
                "404": "MCP_SESSION_UNKNOWN"}),
      "get": ("mcpGet", "Server-to-client stream of SSE comments",
              {"200": "text/event-stream", "400": "missing Mcp-Session-Id", "404": "MCP_SESSION_UNKNOWN"}),
      "delete": ("mcpDelete", "End a session: not supported", {"405": "always, no body"})}),
    (r"/stop", _StopHandler, {}, "/stop",
     {"post": ("stop", "Planned stop (needs the pairing token)", {"202": "stopping"})}),
    (r"/server-records", _ServerRecordsHandler, {}, "/server-records",
     {"post": ("serverRecords", "What the app's server did for marked requests (middleware; needs the pairing token)",
               {"200": "{stitched, unmatched, invalid, refused}", "400": "not {records: [...]}"}),
      "get": ("serverRecordsProof", "The daemon's proof that it knows the pairing token, for the middleware's "
              "challenge (asked before the token is sent)", {"200": "{proof}", "400": "no valid challenge"})}),
    (r"/v1/traces", _OtlpHandler, {"what": "traces"}, "/v1/traces",
     {"post": ("otlpTraces", "OTLP/HTTP traces from the app's OpenTelemetry exporter (JSON or protobuf, gzip; "
               "needs the pairing token)", {"200": "ExportTraceServiceResponse: {} or partialSuccess",
                                             "400": "a body that is not OTLP", "415": "not JSON or protobuf"})}),
    (r"/v1/logs", _OtlpHandler, {"what": "logs"}, "/v1/logs",
     {"post": ("otlpLogs", "OTLP/HTTP logs (error logs of traced requests; JSON or protobuf, gzip; needs the "
               "pairing token)", {"200": "ExportLogsServiceResponse: {}", "400": "a body that is not OTLP",
                                  "415": "not JSON or protobuf"})}),
    (r"/", _StreamableHandler, {"root": True}, "/",
     {"post": ("mcpRootPost", "Alias of POST /mcp",
               {"200": "response(s); Mcp-Session-Id on initialize; an SSE stream for a tools/call with "
                       "_meta.progressToken, as POST /mcp", "204": "notifications only",
                "404": "MCP_SESSION_UNKNOWN"}),
      "get": ("mcpRootGet", "Alias of GET /mcp",
              {"200": "text/event-stream", "400": "missing Mcp-Session-Id", "404": "MCP_SESSION_UNKNOWN"})}),
]


_JSON = "application/json"
_VISIBLE_ASCII = {"type": "string", "pattern": "^[!-~]{1,256}$"}
_SSE = "text/event-stream"
# Schemas of what the daemon writes (components/schemas).  They document; nothing validates against them.
_OPENAPI_SCHEMAS: Dict[str, dict] = {
    "Refusal": {"type": "object", "required": ["error", "detail"], "additionalProperties": False,
                "description": "Every refusal by the guard, the limits or a route.",
                "properties": {"error": {"type": "string"}, "detail": {"type": "string"}}},
    "JsonRpcPayload": {
        "description": "One JSON-RPC 2.0 message, or a batch of at most %d. Any JSON is accepted: what "
                       "is not a valid message is answered with a JSON-RPC error (-32700 parse error, "
                       "-32600 invalid request, -32601 method not found, -32602 invalid params), never "
                       "with an HTTP error. Messages are objects {jsonrpc: \"2.0\", id: string|number, "
                       "method, params?}; an id must not be null. NaN, Infinity, nesting deeper than %d "
                       "and lone surrogates are parse errors." % (MAX_BATCH, MAX_JSON_DEPTH)},
    "JsonRpcMessage": {"type": "object", "description": "One JSON-RPC 2.0 message (request or notification)."},
    "JsonRpcResponse": {
        "type": "object", "required": ["jsonrpc", "id"],
        "properties": {"jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "number", "null"]},
                       "result": {},
                       "error": {"type": "object", "required": ["code", "message"],
                                 "properties": {"code": {"type": "integer"}, "message": {"type": "string"},
                                                "data": {}}}}},
    "JsonRpcReply": {"anyOf": [{"$ref": "#/components/schemas/JsonRpcResponse"},
                               {"type": "array", "minItems": 1, "maxItems": MAX_BATCH,
                                "items": {"$ref": "#/components/schemas/JsonRpcResponse"}}]},
    "Status": {"type": "object", "required": ["running", "version", "pid", "port", "startedAt", "sessions",
                                              "mcpClients", "devices"],
               "properties": {"running": {"type": "boolean"}, "version": {"type": "string"},
                              "pid": {"type": "integer"}, "port": {"type": "integer"},
                              "startedAt": {"type": "string"}, "uptimeMs": {"type": "integer"},
                              "sessions": {"type": "array", "items": {"type": "object"}},
                              "mcpClients": {"type": "integer"}, "devices": {"type": "array"},
                              "why": {"type": "string"}}},
    "Proof": {"type": "object", "required": ["proof"], "additionalProperties": False,
              "description": "HMAC-SHA256, keyed by the pairing token, of the challenge and the address served.",
              "properties": {"proof": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}},
    "Stopping": {"type": "object", "required": ["stopping", "pid"],
                 "properties": {"stopping": {"const": True}, "pid": {"type": "integer"}}},
}

# What each operation takes and writes beyond the refusals: parameters, request body, and the
# content of each status that has a body ("-" for none).  Refusal statuses carry Refusal JSON.
_OPENAPI_OPS: Dict[str, dict] = {
    "status": {"content": {"200": (_JSON, "Status")}},
    "openapi": {"content": {"200": (_JSON, None)}},
    "sdk": {"content": {"200": ("application/javascript", "string"), "304": "-"}},
    "bridge": {"content": {"101": "-"}},
    "mcpSse": {"content": {"200": (_SSE, "string")}},
    "mcpMessage": {"params": [{"name": "sessionId", "in": "query", "required": True, "schema": _VISIBLE_ASCII,
                               "description": "The id the endpoint frame of GET /mcp/sse announced."}],
                   "body": ({"$ref": "#/components/schemas/JsonRpcMessage"}, True),
                   "content": {"202": ("text/plain", "string")}},
    "mcpPost": {"body": ({"$ref": "#/components/schemas/JsonRpcPayload"}, False),
                "content": {"200": (_JSON, "JsonRpcReply"), "204": "-"}},
    "mcpRootPost": {"body": ({"$ref": "#/components/schemas/JsonRpcPayload"}, False),
                    "content": {"200": (_JSON, "JsonRpcReply"), "204": "-"}},
    "mcpGet": {"content": {"200": (_SSE, "string")}},
    "mcpRootGet": {"content": {"200": (_SSE, "string")}},
    "mcpDelete": {"content": {"405": "-"}},
    "stop": {"content": {"202": (_JSON, "Stopping")}},
    "serverRecordsProof": {"params": [{"name": "challenge", "in": "query", "required": True,
                                       "schema": {"type": "string", "pattern": "^[0-9a-f]{32,128}$"},
                                       "description": "Random hex the middleware chose."}],
                           "content": {"200": (_JSON, "Proof")}},
}


def _openapi_content(spec: Any) -> Optional[dict]:
    if spec == "-":
        return None
    mime, schema = spec
    if schema is None:
        body: dict = {"type": "object"}
    elif schema == "string":
        body = {"type": "string"}
    else:
        body = {"$ref": "#/components/schemas/%s" % schema}
    return {mime: {"schema": body}}


def _openapi(hub: "Hub") -> dict:
    """The OpenAPI 3.1 document, generated from _ROUTES and _OPENAPI_OPS.

    Every documented status names its body (Refusal JSON for the guard's,
    the limits' and the routes' refusals) and its headers (Retry-After on
    429, Allow on 405, Mcp-Session-Id on an initialize)."""
    paths: Dict[str, dict] = {}
    for _, _, _, path, methods in _ROUTES:
        item = paths.setdefault(path, {})
        for method, (op_id, summary, codes) in methods.items():
            extra = _OPENAPI_OPS.get(op_id, {})
            responses = {code: {"description": text} for code, text in codes.items()}
            for code, text in _MIDDLEWARE_CODES.items():
                responses.setdefault(code, {"description": text})
            if method in ("post", "put", "patch"):
                responses.setdefault("415", {"description": "a body not declared Content-Type: application/json"})
            for code, response in responses.items():
                spec = extra.get("content", {}).get(code, (_JSON, "Refusal") if code >= "400" else "-")
                content = _openapi_content(spec)
                if content:
                    response["content"] = content
                if code == "429":
                    response["headers"] = {"Retry-After": {"required": True, "schema": {"type": "string"},
                                                           "description": "seconds until a retry is allowed"}}
                if code == "405":
                    response["headers"] = {"Allow": {"required": True, "schema": {"type": "string"}}}
            if op_id in ("mcpPost", "mcpRootPost"):
                responses["200"]["headers"] = {"Mcp-Session-Id": {
                    "required": False, "schema": {"type": "string"},
                    "description": "a new session id, on a successful initialize sent without one"}}
            op: dict = {"operationId": op_id, "summary": summary, "responses": responses}
            params = list(extra.get("params", ()))
            if path in ("/mcp", "/") and method in ("post", "get"):
                params.append({"name": "Mcp-Session-Id", "in": "header", "required": method == "get",
                               "schema": _VISIBLE_ASCII,
                               "description": "A session id this machine issued on initialize (at most %d "
                                              "days old); any other answers 404 MCP_SESSION_UNKNOWN"
                                              % (SESSION_MAX_AGE_S // 86400)})
            if params:
                op["parameters"] = params
            if "body" in extra:
                schema, required = extra["body"]
                op["requestBody"] = {"required": required, "content": {_JSON: {"schema": schema}}}
            item[method] = op
    return {"openapi": "3.1.0",
            "info": {"title": "Reticle daemon", "version": __version__,
                     "description": "Generated from the route table. Documents behaviour; never "
                                    "validates requests. Loopback clients need no token; any other "
                                    "needs the pairing token (Authorization: Bearer, or ?token=)."},
            "servers": [{"url": hub.public_origin()}],
            "paths": paths,
            "components": {"schemas": _OPENAPI_SCHEMAS}}


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
        self.server_truth: Dict[str, Any] = {"received": 0, "stitched": 0, "unmatched": 0, "invalid": 0,
                                             "refused": 0, "lastRefused": None, "droppedByApps": 0,
                                             "lastDropAt": None}
        self.otel = _OtelTraces()   # spans waiting for their trace's SERVER span (Server truth)
        self.faults = _Faults(self)
        self.project_dir = os.environ.get("RETICLE_PROJECT_DIR") or os.getcwd()
        self.guard = _Guard(self)
        self.sse_streams: Dict[str, _SseHandler] = {}
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
        out = {"running": True, "version": __version__, "pid": os.getpid(), "port": self.port,
               "startedAt": _wall_iso(self.started_at), "uptimeMs": int(self.clock()),
               "sessions": [_describe_session(s) for s in self.bridge.live()],
               "mcpClients": len(self.sse_streams) + sum(1 for v in self.clients.values() if v > horizon),
               "devices": self.devices.describe(),
               # counts only (what a refusal named stays in the log): the middleware's records, the spans
               "serverTruth": {"middleware": {k: v for k, v in self.server_truth.items() if isinstance(v, int)},
                               "openTelemetry": dict(self.otel.stats)}}
        if not out["sessions"]:
            out["why"] = self.bridge.why()
        return out

    def sdk_source(self) -> str:
        """The in-page SDK as served at /reticle.js: the embedded source with this daemon's version and
        limits filled in (built once)."""
        if self._sdk is None:
            config = {"version": __version__, "protocolVersion": BRIDGE_PROTOCOL,
                      "maxMessageBytes": WS_MAX_MESSAGE_BYTES}
            self._sdk = (_SDK_JS.replace("__RETICLE_VERSION__", __version__)
                         .replace("/*__RETICLE_CONFIG__*/null", _dumps(config)))
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
        for _ in range(20):
            if not self.sse_streams and not self.get_streams:
                break
            await asyncio.sleep(0.01)


class _ReticleApp(tornado.web.Application):
    """The daemon's Tornado application: the one thing it adds is the Hub it serves, as `app.hub`."""

    hub: Hub


def make_app(hub: Optional[Hub] = None, tab_byte_rate: Optional[int] = None, total_byte_rate: Optional[int] = None,
             **settings: Any) -> tornado.web.Application:
    """The one factory: tests, the CLI and host applications all use it.  `tab_byte_rate` and
    `total_byte_rate` replace the bridge's fairness caps (event-frame bytes read per second, per tab and
    for all tabs; by default RETICLE_TAB_BYTES_PER_S, RETICLE_ALL_TABS_BYTES_PER_S, else 1 MiB and 4 MiB);
    the other settings are Tornado's."""
    hub = hub if hub is not None else Hub()
    for name, cap in (("tab_byte_rate", tab_byte_rate), ("total_byte_rate", total_byte_rate)):
        if cap is not None:
            if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
                raise ConfigError("make_app(%s=%r): give a whole number of bytes per second above 0" % (name, cap))
            setattr(hub.bridge, name, cap)
    routes = [tornado.web.url(path, handler, dict(hub=hub, **extra)) for path, handler, extra, _, _ in _ROUTES]
    settings.setdefault("websocket_ping_interval", WS_PING_INTERVAL_S)
    settings.setdefault("websocket_max_message_size", WS_MAX_MESSAGE_BYTES)
    settings.setdefault("default_handler_class", _NotFoundHandler)
    settings.setdefault("default_handler_args", {"hub": hub})
    settings.setdefault("compress_response", False)
    settings.setdefault("log_function", _log_request)
    app = _ReticleApp(routes, **settings)
    app.hub = hub
    return app


def _log_request(handler: tornado.web.RequestHandler) -> None:
    status = handler.get_status()
    level = logging.DEBUG if status < 400 else logging.INFO
    if status >= 500:
        level = logging.WARNING
    _emit(_log, level, "http", method=handler.request.method, path=handler.request.path, status=status,
          ms=round(handler.request.request_time() * 1000, 2))
