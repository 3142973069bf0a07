"""Errors.

Every error Reticle raises on purpose, in one place, each with what went wrong and what to do instead.
A tool's error reaches the agent as `isError: true` with {error, recovery, code}; the code is one of
_ERROR_CODES, stable across releases, and the one thing a caller branches on (never the prose).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

# Each code a tool error can carry, and what it tells the caller.  The README's reference lists them.
_ERROR_CODES: Dict[str, str] = {
    "bad_argument": "the call's arguments are missing, conflict or are out of range (the schema could not say)",
    "predicate_invalid": "the predicate does not parse: no verdict was produced",
    "no_tab": "no tab is connected: open the app (a device, or a page with the script tag)",
    "tab_ambiguous": "several tabs are connected: name one in sessionId",
    "tab_unknown": "no connected tab has that sessionId",
    "tab_away": "the tab is between documents or reloading: wait for it, or open the app in a device",
    "tab_gone": "the tab went away after the command was sent: whether it ran is not known",
    "tab_disconnected": "the tab disconnected before the command was sent: nothing ran",
    "tab_throttled": "the tab is hidden or silent and the call asked not to drive such a tab: nothing ran",
    "not_answering": "the page is connected but did not answer: reload it",
    "dialog_open": "a dialog is open in a person's tab and blocks the page",
    "target_missing": "no element matches the target",
    "target_ambiguous": "several elements match the target",
    "target_unboxed": "the element has no box (hidden or empty)",
    "page_refused": "the page refused the command (the SDK said why)",
    "page_unexpected": "the page answered something Reticle did not expect",
    "page_not_connected": "a page loaded but its SDK did not connect in time",
    "navigation_failed": "the browser could not load or reload the page",
    "device_required": "only a device (a browser Reticle started) can do this",
    "device_not_yours": "the tab is a device another MCP client opened",
    "device_not_found": "no such device is open",
    "device_starting": "this client's device is still starting",
    "device_limit": "as many devices are open as the daemon allows",
    "device_budget": "the device-start budget of this period is spent",
    "browser_missing": "no Chromium-family browser was found to start a device",
    "browser_failed": "the device's browser failed to start, exited or stopped answering",
    "endpoint_unreachable": "the CDP endpoint does not answer, refuses or speaks another protocol (the fix is named)",
    "endpoint_refused": "a CDP endpoint named by a tool call, or on a host nobody named: only the user names one",
    "attach_no_match": "no tab of the endpoint's browser shows that URL (its tabs are listed)",
    "input_refused": "a page asked for real input outside an act, or for an action a device cannot dispatch",
    "fault_limit": "the tab already has as many faults as allowed",
    "fault_not_found": "no fault of yours has that id on this tab",
    "fault_unsupported": "that fault cannot act where the tab's page runs (the script tag's wrappers)",
    "flow_invalid": "the flow is not a valid Reticle flow (the message lists the problems)",
    "flow_not_found": "no saved flow has that name",
    "flow_name_invalid": "the name is not a valid flow name",
    "journey_unsavable": "the tab's journey cannot be saved as a flow (unverified, unreplayable or mixed origins)",
    "path_refused": "a flow or login file would be read or written outside the project's own folder",
    "secret_missing": "a flow needs a RETICLE_SECRET_* variable that is not set",
    "secret_refused": "a flow may not read that variable or type that secret into that origin",
    "auth_not_found": "no saved login state has that name",
    "auth_invalid": "the saved login state is not readable or not one Reticle wrote",
    "auth_failed": "the saved login no longer logs in and could not be made again",
    "daemon_unreachable": "the daemon could not be reached or did not answer",
    "store_invalid": "the store URL is not one Reticle can watch (the message lists the forms accepted)",
    "store_unavailable": "the store cannot be watched now (refused, gone, a driver missing): the message says the fix",
    "store_not_watched": "no watched store has that name, or no store is watched",
    "tool_failed": "the tool failed for a reason without a code of its own",
}


class ReticleError(Exception):
    """Base class of every error reticle raises on purpose."""


class ToolError(ReticleError):
    """A tool ran and failed: becomes ``isError: true`` with {error, recovery, code}.  `code` is
    machine-readable (callers branch on it, never on the prose); each subclass has its own."""

    code = "tool_failed"

    def __init__(self, error: str, recovery: str = "", code: Optional[str] = None, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.recovery = recovery
        if code is not None:
            self.code = code
        self.extra = extra

    def payload(self) -> dict:
        out = {"error": self.error, "code": self.code}
        if self.recovery:
            out["recovery"] = self.recovery
        out.update(self.extra)
        return out


class RpcError(ReticleError):
    """A JSON-RPC error answered to the client (code, message, data)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def payload(self) -> dict:
        err = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class _HttpRefusal(ReticleError):
    """An HTTP refusal answered as JSON {error, detail} with a status code."""

    def __init__(self, status: int, error: str, detail: str, headers: Optional[dict] = None) -> None:
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail
        self.headers = headers or {}


class ConfigError(ReticleError):
    """Bad configuration: the daemon refuses to start with one sentence."""


class PredicateError(ToolError):
    """A predicate that does not parse: no verdict is produced."""

    code = "predicate_invalid"


class _TabGone(ToolError):
    """The tab went away (unloaded, replaced or closed) after a command was sent to it,
    so whether the command ran is not known."""

    code = "tab_gone"


class _CdpError(ToolError):
    """A CDP call answered an error, or the connection went away: a tool that meets it fails
    with isError, not as a crash."""

    code = "browser_failed"

    def __init__(self, error: str) -> None:
        super().__init__(error, "the device's browser may have gone; reticle_close it and open it again")


class _StoreError(ToolError):
    """A store that cannot be watched or read (its URL, its server, its driver): what was wrong and
    the fix.  `code` is store_invalid for the URL itself, store_unavailable for the rest."""

    code = "store_unavailable"


class _PbError(ValueError):
    """A protobuf body that is not a well-formed OTLP message (said where)."""


class _SpanRefused(ValueError):
    """One span of a batch that cannot be read (its message says why); the rest of the batch is kept."""


class _FlowFailed(Exception):
    """A flow that is not yes as a pytest test (the text says why)."""
