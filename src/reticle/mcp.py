"""MCP protocol.

JSON-RPC for MCP, independent of the transport: initialize and version negotiation, the tools and
resources lists, tool calls with progress, batches; and the instructions an agent reads first.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from .calls import _CallContext, _PROGRESS, _Progress, _progress_token
from .constants import (DEFAULT_PORT, LATEST_PROTOCOL, MAX_BATCH, MAX_BATCH_REPLY_BYTES, PROTOCOL_VERSIONS,
    __version__, _emit, _log)
from .errors import RpcError
from .predicates import _predicate_grammar_doc
from .toolbox import _ToolRegistry
from .util import _dumps


INSTRUCTIONS = (
    "Reticle reads the running web app's program truth (network, console, errors, routes, DOM, "
    "storage, app state, signals) and returns verdicts. Loop: reticle_sessions (is a tab "
    "connected? if not, reticle_open {url} opens the app in a browser of Reticle's own) -> "
    "reticle_snapshot or reticle_query (find refs) -> reticle_act_and_wait with an "
    "`until` predicate, or reticle_assert after acting. Only reticle_act_and_wait and "
    "reticle_assert produce a verdict; every other tool proves nothing. Only verified: \"yes\" is "
    "a pass: \"unknown\" means Reticle could not tell, so report it as unknown and never weaken a "
    "check to make it pass. Omit sessionId when one tab is connected. The predicate grammar is "
    "the reticle://predicates resource."
)

CHEATSHEET = """# Reticle cheat sheet

1. `reticle_sessions`: is a tab connected? If not, `reticle_open {url}` opens the app in a
   browser of Reticle's own (no script tag needed), or add
   `<script src="http://127.0.0.1:4400/reticle.js"></script>` to the app's dev HTML and load it.
2. `reticle_snapshot {mode: "interactive"}` or `reticle_query {by, value}`: find refs (e7).
3. `reticle_act_and_wait {ref, action, until: <predicate>}`: act and get a verdict.
4. `reticle_assert {predicate}`: check what happened since the last act.
5. `reticle_fault {match: {urlContains, method}, respond: {status: 500}}`: make a write fail on
   purpose, then prove the app tells the user; `{clear: true}` ends it.

_Verdicts: `verified: "yes"` is the only pass. `"no"` names the failing evidence;
`"unknown"` means Reticle could not tell (tab lost, request in flight, body not captured,
evidence evicted): report it as unknown and never weaken the check.

Bug-catching predicates: `{kind: "net", urlContains, status, count}`,
`{kind: "net", bodyContains}`, `{kind: "console", level: "error", absent: true}`,
`{kind: "element", query: {...}, absent: true}`, `{kind: "state", path, equals}`.
"""


def _negotiate(requested: Any) -> str:
    return requested if requested in PROTOCOL_VERSIONS else LATEST_PROTOCOL


def _usage_markdown(registry: _ToolRegistry) -> str:
    lines = ["# Reticle tools", "", INSTRUCTIONS, ""]
    for tool in registry.listed():
        lines.append("## %s" % tool.name)
        lines.append("")
        lines.append(tool.description)
        lines.append("")
        required = set(tool.schema.get("required", ()))
        for field, spec in tool.schema["properties"].items():
            kind = spec.get("type") or ("one of " + ", ".join(map(str, spec["enum"])) if "enum" in spec else "any")
            if isinstance(kind, list):
                kind = " or ".join(kind)
            lines.append("- `%s` (%s%s)%s" % (field, kind, ", required" if field in required else "",
                                               ": " + spec["description"] if spec.get("description") else ""))
        if not tool.schema["properties"]:
            lines.append("- no arguments")
        lines.append("")
        lines.append("Example: `%s`" % _dumps(tool.example))
        lines.append("")
    return "\n".join(lines)


class _McpDispatcher:
    """JSON-RPC for MCP, independent of any transport.

    ``call_tool(name, args, ctx)`` runs a validated tool and
    ``read_live(uri)`` answers live resources; the daemon wires them to the
    hub, the stdio proxy to its daemon forwarder.
    """

    def __init__(self, registry: _ToolRegistry,
                 call_tool: Callable[[str, dict, _CallContext], Awaitable[dict]],
                 read_live: Callable[[str], Awaitable[Any]],
                 origin: Callable[[], str] = lambda: "http://127.0.0.1:%d" % DEFAULT_PORT,
                 tick: bool = True) -> None:
        self.registry = registry
        self._call_tool = call_tool
        self._read_live = read_live
        self.ticks = tick  # False in the stdio proxy: it relays the daemon's progress instead of its own
        self.check_output = os.environ.get("RETICLE_CHECK_OUTPUT") == "1"
        self.running: Dict[Tuple[str, str], "asyncio.Task[Any]"] = {}  # (session key, request id) -> call
        self.static_resources = {
            "reticle://docs/usage": ("Reticle tool surface", "text/markdown", lambda: _usage_markdown(registry)),
            "reticle://docs/cheatsheet": ("Reticle cheat sheet", "text/markdown",
                                          lambda: CHEATSHEET.replace("http://127.0.0.1:4400", origin())),
            "reticle://predicates": ("Predicate grammar", "application/json",
                                     lambda: _dumps(_predicate_grammar_doc())),
        }

    def resources(self) -> List[dict]:
        out = [{"uri": uri, "name": name, "mimeType": mime} for uri, (name, mime, _) in self.static_resources.items()]
        out.append({"uri": "reticle://sessions", "name": "Connected browser sessions (live)",
                    "mimeType": "application/json"})
        return out

    async def handle_payload(self, payload: Any, ctx: _CallContext) -> Tuple[Any, bool]:
        """One message or a batch -> (response or list of responses or None, was_batch)."""
        if isinstance(payload, list):
            if not payload:
                return _rpc_error(None, -32600, "Invalid Request: empty batch"), False
            if len(payload) > MAX_BATCH:
                return _rpc_error(None, -32600, "Invalid Request: a batch holds at most %d messages; this one "
                                                "holds %d, so none ran" % (MAX_BATCH, len(payload))), False
            replies = await asyncio.gather(*(self.handle(m, ctx) for m in payload))
            return _bound_batch([r for r in replies if r is not None]), True
        return await self.handle(payload, ctx), False

    async def handle(self, msg: Any, ctx: _CallContext) -> Optional[dict]:
        """Answer one JSON-RPC message: a result or error reply for a request, None for a notification, a
        client's response or a cancelled tools/call.  Malformed messages get the JSON-RPC error code that
        names what is wrong (-32600 shape, -32602 params); an unexpected crash is -32603 and the dispatcher
        keeps serving."""
        if not isinstance(msg, dict):
            return _rpc_error(None, -32600, "Invalid Request: a JSON-RPC message must be an object")
        mid = msg.get("id")
        has_id = "id" in msg
        if has_id and not (isinstance(mid, (str, int, float)) and not isinstance(mid, bool)):
            # MCP forbids a null id: it would make the request indistinguishable from an error reply.
            return _rpc_error(None, -32600, "Invalid Request: id must be a string or a number%s"
                              % (", not null" if mid is None else ""))
        method = msg.get("method")
        if msg.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if method is None and ("result" in msg or "error" in msg) and msg.get("jsonrpc") == "2.0":
                return None  # a response from the client; we never ask, so nothing to match
            return _rpc_error(mid, -32600, 'Invalid Request: needs "jsonrpc": "2.0" and a string "method"')
        if not has_id:
            if method == "notifications/cancelled":
                self.cancel(msg.get("params"), ctx)
            return None  # notifications: initialized, anything else is ignored
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _rpc_error(mid, -32602, "params must be an object")
        try:
            if method == "tools/call":
                result = await self._tracked(mid, params, ctx)
                if result is None:
                    return None  # cancelled by the client: MCP sends no answer
            else:
                result = await self._method(method, params, ctx)
        except RpcError as exc:
            return {"jsonrpc": "2.0", "id": mid, "error": exc.payload()}
        except Exception as exc:  # a bug must not take the transport down
            _emit(_log, logging.ERROR, "mcp_internal_error", method=method, error=repr(exc))
            return _rpc_error(mid, -32603, "Internal error: %s" % exc)
        return {"jsonrpc": "2.0", "id": mid, "result": result}

    def cancel(self, params: Any, ctx: _CallContext) -> None:
        """notifications/cancelled: stop the caller's own call of that requestId (another caller's
        ids are not reachable: the key holds the session); an unknown or finished id is ignored."""
        rid = params.get("requestId") if isinstance(params, dict) else None
        task = self.running.get((ctx.session_key, _dumps(rid)))
        if task is not None and not task.done():
            _emit(_log, logging.INFO, "mcp_call_cancelled", transport=ctx.transport, reason="notifications/cancelled",
                  requestId=rid)
            task.cancel()

    async def _tracked(self, mid: Any, params: dict, ctx: _CallContext) -> Optional[dict]:
        """A tools/call as a task that notifications/cancelled can stop, with a progress ticker beside it
        when the call carries _meta.progressToken and the transport can carry notifications.
        -> the result, or None when the client cancelled it."""
        key = (ctx.session_key, _dumps(mid))
        token = _progress_token(params)
        progress = _Progress(token, ctx.notify, str(params.get("name"))) if (
            token is not None and ctx.notify is not None) else None
        run = contextvars.copy_context()
        run.run(_PROGRESS.set, progress)
        work = run.run(asyncio.ensure_future, self._method("tools/call", params, ctx))  # the task copies `run`
        ticker = asyncio.ensure_future(progress.tick()) if progress is not None and self.ticks else None
        if key not in self.running:
            self.running[key] = work
        try:
            try:
                await asyncio.wait({work})
            except asyncio.CancelledError:
                work.cancel()  # the transport dropped the caller: stop the call too
                raise
        finally:
            if ticker is not None:
                ticker.cancel()
            if self.running.get(key) is work:
                del self.running[key]
        if work.cancelled():
            return None
        return work.result()

    async def _method(self, method: str, params: dict, ctx: _CallContext) -> Any:
        """The result of one MCP method (initialize, ping, tools/list|call, resources/list|read, ...), or an
        RpcError naming the method or argument that was wrong.  tools/call validates the arguments
        against the tool's schema before the tool runs."""
        if method == "initialize":
            ctx.client = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else None
            return {
                "protocolVersion": _negotiate(params.get("protocolVersion")),
                "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": "reticle", "version": __version__},
                "instructions": INSTRUCTIONS,
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [t.describe() for t in self.registry.listed()]}
        if method == "tools/call":
            name = params.get("name")
            tool = self.registry.get(name) if isinstance(name, str) else None
            if tool is None:
                raise RpcError(-32602, "Unknown tool %r. Available tools: %s" % (
                    name, ", ".join(self.registry.names())), {"available": self.registry.names()})
            args = params.get("arguments")
            args = {} if args is None else args
            tool.check(args)
            result = await self._call_tool(tool.name, args, ctx)
            problem = tool.output_problem(result) if self.check_output else None
            if problem:  # check mode (the test suite): an answer that breaks its declared shape is a bug
                _emit(_log, logging.ERROR, "mcp_internal_error", method=method, error=problem)
            return result
        if method == "resources/list":
            return {"resources": self.resources()}
        if method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str):
                raise RpcError(-32602, "resources/read needs params.uri, a string such as reticle://sessions")
            if uri in self.static_resources:
                _, mime, make = self.static_resources[uri]
                return {"contents": [{"uri": uri, "mimeType": mime, "text": make()}]}
            if uri == "reticle://sessions":
                live = await self._read_live(uri)
                return {"contents": [{"uri": uri, "mimeType": "application/json", "text": _dumps(live)}]}
            raise RpcError(-32002, "Resource not found: %r. Available: %s" % (
                uri, ", ".join(r["uri"] for r in self.resources())), {"uri": uri})
        raise RpcError(-32601, "Method not found: %s. Methods: initialize, ping, tools/list, tools/call, "
                               "resources/list, resources/read" % method)


def _rpc_error(mid: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": message}}


def _bound_batch(replies: List[dict]) -> Optional[List[dict]]:
    """A batch's replies, each beyond MAX_BATCH_REPLY_BYTES in total replaced
    by a -32600 error naming the limit (the work ran; its answer is too big to
    send in one batch)."""
    total = 0
    out = []
    for reply in replies:
        total += len(_dumps(reply).encode("utf-8"))
        if total > MAX_BATCH_REPLY_BYTES:
            reply = _rpc_error(reply.get("id"), -32600, "Invalid Request: the batch's replies exceed %d bytes; "
                               "send this request again on its own or in a smaller batch" % MAX_BATCH_REPLY_BYTES)
            total += 200
        out.append(reply)
    return out or None
