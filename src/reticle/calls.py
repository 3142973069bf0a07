"""Tool calls.

What one MCP tool call carries while it runs: its context (who called, how to report progress),
its deadline, the budgets of the commands it sends a page, and the shape of a tool result.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any, Awaitable, Callable, List, Optional

from .constants import _emit, _log
from .util import _dumps


class _CallContext:
    """Who is calling: the transport and the session key (for limits), and `notify`, how a message
    the server starts (a progress notification) reaches this caller, where the transport can."""

    __slots__ = ("transport", "session_key", "client", "notify")

    def __init__(self, transport: str, session_key: str, client: Optional[dict] = None,
                 notify: Optional[Callable[[dict], Awaitable[None]]] = None) -> None:
        self.transport = transport
        self.session_key = session_key
        self.client = client
        self.notify = notify


PROGRESS_EVERY_S = 0.5  # a call that carries _meta.progressToken hears from the daemon this often


class _Progress:
    """The progress of one tools/call that asked for it (params._meta.progressToken): what it waits
    for now (`note`, set by the waiting code through _progress_note) and the notifications/progress
    the dispatcher's ticker sends while the call runs."""

    def __init__(self, token: Any, notify: Callable[[dict], Awaitable[None]], tool: str) -> None:
        self.token = token
        self.notify = notify
        self.note = "running %s" % tool
        self.count = 0

    async def send(self, message: Optional[str] = None, progress: Optional[float] = None) -> None:
        """One notifications/progress; progress only ever grows, as MCP requires."""
        self.count = max(self.count + 1, int(progress or 0))
        params = {"progressToken": self.token, "progress": self.count, "message": message or self.note}
        try:
            await self.notify({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        except Exception as exc:  # a client gone mid-call loses its progress, not its answer
            _emit(_log, logging.DEBUG, "mcp_progress_dropped", error=repr(exc))

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            await self.send()


# The call being served, as context variables rather than parameters: what it waits for is said, and its
# deadline kept, by code many calls deep (a bridge command, a wait for the next document) that every tool
# reaches by a different road; threading them through would add a parameter to most functions of the
# bridge, for two values nothing else reads.
_PROGRESS: "contextvars.ContextVar[Optional[_Progress]]" = contextvars.ContextVar("reticle_progress", default=None)
# when the tool call being served must answer by (on the daemon's clock, ms: Hub.clock), from its `timeout_ms`:
# no command to the page waits past it, so a page that stopped answering cannot hold a call past its budget
_CALL_DEADLINE: "contextvars.ContextVar[Optional[float]]" = contextvars.ContextVar("reticle_deadline", default=None)
COMMAND_FLOOR_S = 0.25      # a command sent once the call's budget is spent still gets this long
DIALOG_SILENT_MS = 5_500    # a tab that did not answer and was not heard from for this long is busy
STUCK_COMMAND_S = 2.0       # what a command waits, at most, for a tab that did not answer the last one


def _command_budget(timeout: float, now: float) -> float:
    """How long (s) a command to the page may wait: its own `timeout` (s), cut to what is left at `now`
    (the daemon's clock, ms) of the tool call's `timeout_ms` (never below COMMAND_FLOOR_S)."""
    deadline = _CALL_DEADLINE.get()
    if deadline is None:
        return timeout
    return min(timeout, max(COMMAND_FLOOR_S, (deadline - now) / 1000.0))


def _progress_note(text: str) -> None:
    """Say what the running tool call waits for (the next progress notification carries it); a no-op
    for a call that asked for no progress.  The waiting code calls it once where it starts waiting."""
    progress = _PROGRESS.get()
    if progress is not None:
        progress.note = text[:200]


def _progress_token(params: dict) -> Any:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def _wants_progress(payload: Any) -> bool:
    """A single tools/call that asked for progress (the Streamable HTTP answer then becomes an SSE stream)."""
    return (isinstance(payload, dict) and payload.get("method") == "tools/call" and "id" in payload
            and isinstance(payload.get("params"), dict) and _progress_token(payload["params"]) is not None)


class _WithContent(dict):
    """A tool's result object plus further MCP content blocks (an image) kept out of it."""

    def __init__(self, obj: dict, blocks: List[dict]) -> None:
        super().__init__(obj)
        self.blocks = blocks


def _tool_result(obj: Any, is_error: bool = False) -> dict:
    if not isinstance(obj, dict):
        obj = {"result": obj}
    blocks = getattr(obj, "blocks", [])
    obj = dict(obj)
    out = {"content": [{"type": "text", "text": _dumps(obj)}] + blocks, "structuredContent": obj}
    if is_error:
        out["isError"] = True
    return out
