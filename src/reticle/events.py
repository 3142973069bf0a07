"""Events and requests.

What each event type the SDK sends is, as one table of records, and what a
request is and whether it matches: the bridge, the predicates, the verdict
rules and the tools all ask here.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, Dict, FrozenSet, List, Optional


class _EventType:
    """One event type (or a family of them, `dom.*`), whole: every question the code asks of a
    type is a flag of its record."""

    __slots__ = ("name", "churn", "high_value", "ui", "effect", "busy", "frame", "bucket", "console")

    def __init__(self, name: str, bucket: Optional[str], churn: bool = False, high_value: bool = False,
                 ui: bool = False, effect: bool = False, busy: bool = False, frame: bool = False,
                 console: Optional[str] = None) -> None:
        self.name = name
        self.bucket = bucket          # the reticle_observe filter that names it ("dom", "net", ...)
        self.churn = churn            # evicted first when a buffer is full, sampled first under a flood
        self.high_value = high_value  # has a rate reserve of its own (requests, errors, routes, signals)
        self.ui = ui                  # the UI moved (for "the UI advanced under a failed request")
        self.effect = effect          # a consequence of an act (for "the act had no effect")
        self.busy = busy              # keeps the page from being settled
        self.frame = frame            # a WebSocket, EventSource or streamed-response message (or open/close)
        self.console = console        # the console level it stands for (uncaught errors are "error")


_EVENT_TYPES: Dict[str, _EventType] = {t.name: t for t in (
    _EventType("net.request", "net", high_value=True, effect=True, busy=True),
    _EventType("net.pending", "net", high_value=True, effect=True),
    _EventType("net.ws", "net", churn=True, effect=True, busy=True, frame=True),
    _EventType("net.sse", "net", churn=True, effect=True, busy=True, frame=True),
    _EventType("net.stream", "net", effect=True, busy=True, frame=True),
    _EventType("dom.added", "dom", churn=True, ui=True, effect=True, busy=True),
    _EventType("dom.removed", "dom", churn=True, ui=True, effect=True, busy=True),
    _EventType("dom.attr", "dom", churn=True, ui=True, effect=True, busy=True),
    _EventType("dom.text", "dom", churn=True, ui=True, effect=True),
    _EventType("dom.*", "dom", churn=True),
    _EventType("anim.start", "animation", churn=True, effect=True),
    _EventType("anim.*", "animation", churn=True),
    _EventType("route.change", "route", high_value=True, ui=True, effect=True),
    _EventType("route.*", "route"),
    _EventType("state.change", "state", high_value=True, ui=True, effect=True),
    _EventType("state.*", "state"),
    _EventType("storage.change", "storage", high_value=True, effect=True),
    _EventType("storage.*", "storage"),
    _EventType("signal", "signal", high_value=True, effect=True),
    _EventType("ui.alert", "ui", high_value=True, effect=True),
    _EventType("ui.status", "ui", high_value=True, effect=True),  # a status message (its text decides)
    _EventType("ui.scan", "ui", high_value=True),  # a new document looked for what it tells the user
    _EventType("ui.gone", "ui", high_value=True),  # a message shown before is no longer shown
    _EventType("ui.returned", "ui", high_value=True),  # a posted form came back with no redirect, no mark, no success
    _EventType("ui.*", "ui"),
    _EventType("console.error", "console", high_value=True, console="error"),
    _EventType("console.warn", None, high_value=True, console="warn"),
    _EventType("console.log", None, console="log"),
    _EventType("console.info", None, console="info"),
    _EventType("console.debug", None, console="debug"),
    _EventType("error.uncaught", "console", high_value=True, console="error"),
    _EventType("error.*", "console"),
    _EventType("page.health", "perf", churn=True),
    _EventType("perf.*", "perf", churn=True),
    _EventType("focus.*", None, churn=True),
    _EventType("server.request", "server", high_value=True),  # from the app's middleware, never the page
    _EventType("server.untied", "server", high_value=True),   # no record could be tied to a document request
    _EventType("server.*", "server"),
    _EventType("store.commit", "server", high_value=True),  # what a watched store committed, never the page
    _EventType("store.*", "server"),
    _EventType("truncated", None, high_value=True),
    _EventType("blind-spot", None, high_value=True),
)}
_OTHER_EVENT = _EventType("?", None)


def _event_type(etype: str) -> _EventType:
    """The record of an event type: its own, else its family's (`dom.*`), else a plain one.
    A page may send any type; one the table does not know is kept, counted and never churn."""
    rec = _EVENT_TYPES.get(etype)
    if rec is None:
        family, dot, _ = etype.partition(".")
        rec = _EVENT_TYPES.get(family + ".*", _OTHER_EVENT) if dot else _OTHER_EVENT
    return rec


def _event_types(flag: str) -> FrozenSet[str]:
    """The (exact) event types whose record has `flag` set."""
    return frozenset(name for name, rec in _EVENT_TYPES.items() if "*" not in name and getattr(rec, flag))


_FRAME_TYPES = _event_types("frame")
_UI_EVENTS = _event_types("ui")
_CONSOLE_TYPES = _event_types("console")


# ---- calls: the one place that says what a request is and whether it matches ----

_WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
_DEV_URL = re.compile(r"/(@vite|__vite|_next/webpack-hmr|__webpack_hmr|sockjs-node|@react-refresh)|hot-update")


def _is_write(d: dict) -> bool:
    return str(d.get("method", "")).upper() in _WRITE_METHODS


def _is_dev(d: dict) -> bool:
    """Dev tooling traffic (HMR sockets, hot updates) that no verdict counts."""
    return bool(_DEV_URL.search(str(d.get("url", ""))))


def _calls(window: List[dict]) -> List[dict]:
    """The completed calls of a window, in order."""
    return [e["data"] for e in window if e["type"] == "net.request"]


def _request_key(e: dict) -> str:
    """Which request an event belongs to.  Pages number their requests afresh in each document,
    so an id is only unique with its document; a document request is the exception: its
    arrival, in the next document, carries the id its leaving announced."""
    d = e["data"]
    rid = d.get("requestId")
    if rid is None:
        return "#%s" % e.get("seq", e["t"])
    if d.get("initiator") == "document":
        return "doc:%s" % rid
    return "%s:%s" % (e.get("doc", ""), rid)


def _still_open(window: List[dict]) -> Dict[str, dict]:
    """Requests started in the window (dev tooling aside) with no completion in it."""
    open_ids: Dict[str, dict] = {}
    for e in window:
        d = e["data"]
        if e["type"] == "net.pending" and not _is_dev(d):
            open_ids[_request_key(e)] = d
        elif e["type"] == "net.request":
            open_ids.pop(_request_key(e), None)
    return open_ids


def _call_failed(d: dict) -> bool:
    """A completed call failed: the page said not ok, it answered 400 or more, or it errored."""
    if d.get("ok") is False:
        return True
    status = d.get("status")
    return isinstance(status, int) and status >= 400 or (d.get("error") is not None and d.get("ok") is not True)


def _call_matches(d: dict, f: dict, pending: bool = False) -> bool:
    """Does call `d` match the filters `f` (method, urlContains, status, ok, header)?

    The network tool, the `net` kind and the contradictions all ask this one
    function.  A call still pending has no status yet: with `pending=True` it
    matches on method and URL alone (it may yet answer as asked); otherwise a
    pending call never matches a status or `ok` filter."""
    if f.get("method") and str(d.get("method", "")).upper() != f["method"].upper():
        return False
    if f.get("urlContains") and f["urlContains"] not in str(d.get("url", "")):
        return False
    if pending:
        return True
    if d.get("pending") and ("status" in f or "ok" in f):
        return False
    if "status" in f and d.get("status") != f["status"]:
        return False
    if "ok" in f and (not _call_failed(d)) != f["ok"]:
        return False
    if f.get("header"):
        headers = d["responseHeaders"] if isinstance(d.get("responseHeaders"), dict) else {}
        value = headers.get(str(f["header"].get("name", "")).lower())
        if value is None:
            return False
        if "equals" in f["header"] and value != f["header"]["equals"]:
            return False
        if "contains" in f["header"] and f["header"]["contains"] not in value:
            return False
    return True


def _frames(window: List[dict]) -> List[dict]:
    """The messages of a window (not the opens and closes), dev tooling aside."""
    return [e["data"] for e in window if e["type"] in _FRAME_TYPES
            and e["data"].get("direction") in ("in", "out") and not _is_dev(e["data"])]


def _call_label(d: dict) -> str:
    method = d.get("method") or ("LOAD" if d.get("initiator") == "document" else "GET")
    return "%s %s" % (str(method).upper(), d.get("url") or "?")


def _net_key_url(url: Any) -> str:
    """A request's URL as both records can say it: scheme, host and path, no query or fragment
    (the SDK redacts secrets in the query)."""
    try:
        parts = urllib.parse.urlsplit(str(url or ""))
        port = parts.port
    except ValueError:
        return ""
    if not parts.hostname:
        return ""
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    host = parts.hostname.lower() if ":" not in parts.hostname else "[%s]" % parts.hostname.lower()
    return "%s://%s%s%s" % (parts.scheme.lower(), host, "" if port in (None, default) else ":%d" % port,
                            parts.path or "/")


def _hide_redirected_status(data: dict) -> None:
    """A page's report of a document load that was redirected: Navigation Timing gives the status of the
    page the redirects led to, not of the request (a form POST answered 302), which is hidden from the
    page; it says so (`statusKnown: false`, `finalStatus`).  In a device the browser's record gave the
    request's own status (_browser_values, `statusFrom: "browser"`), which stands."""
    if data.get("initiator") == "document" and data.get("redirected") and data.get("statusKnown") is not False \
            and data.get("statusFrom") != "browser":
        data["finalStatus"] = data.get("status")
        data["status"] = None
        data["statusKnown"] = False
        data["statusNote"] = ("it was answered with a redirect (3xx; the browser does not say which) to %s, "
                              "which answered %s" % (data.get("finalUrl") or "another page", data["finalStatus"]))
