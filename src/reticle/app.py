"""Application factory.

make_app(hub): the routes, the OpenAPI document that describes them, and the request log.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Tuple

import tornado.web

from .constants import (MAX_BATCH, MAX_JSON_DEPTH, SESSION_MAX_AGE_S, WS_MAX_MESSAGE_BYTES, WS_PING_INTERVAL_S,
    __version__, _emit, _log)
from .errors import ConfigError
from .handlers import (_BaseHandler, _NotFoundHandler, _OtlpHandler, _SdkHandler, _ServerRecordsHandler, _SseHandler,
    _SseMessageHandler, _StatusHandler, _StopHandler, _StreamableHandler)
from .hub import Hub
from .websocket import _BridgeHandler


class _OpenApiHandler(_BaseHandler):
    def get(self) -> None:
        self.send_json(_openapi(self.hub))


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
