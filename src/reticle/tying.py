"""Tying records by method, path and time.

A form post or a link made through the script tag carries Reticle's mark only in a cookie (no page can
set a navigation's headers), and OpenTelemetry reads trace context from headers alone: the request's
SERVER span comes under a trace id no tab was issued.  Such a record, or a middleware record whose mark
no tab holds, is tied to the one document request of one tab on its origin that fits its method, path
and time, and says so (`matchedBy`).  When none fits it lands nowhere; when several requests fit it (two
tabs posting one form at once), or several records fit one request, none is tied, a record tied before
is withdrawn, and each request's tab is told (a `server.untied` event), so its verdict says that no
record could be tied to the request, never a clean yes.
"""

from __future__ import annotations

import collections
import urllib.parse
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

import tornado.ioloop

from .constants import TIE_SETTLE_MS
from .events import _call_label
from .tab import _BrowserSession

TIE_EARLY_MS = 1000.0      # a server may begin a request this long before the daemon files the page's word of it
TIE_LATE_MS = 250.0        # ... and end it this long after the daemon filed its answer (clock conversion, rounding)
TIE_LOOKBACK_MS = 30000.0  # document requests (and unattributed records) this recent are matched
TIE_KEPT = 256             # unattributed records remembered, and records tied, at most (the oldest go first)
TIED_BY = "method, path and time"

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", "")


def _origin_key(host: Any, port: Any, scheme: Any = "http") -> Optional[str]:
    """"loopback:3000" for a host and port as a span or a page's URL names them (every loopback name
    is one), None without a usable port."""
    host = str(host or "").strip().lower()
    if host.count(":") == 1 and not host.startswith("["):
        host, _, given = host.partition(":")
        port = port or given
    try:
        number = int(port) if port not in (None, "") else {"http": 80, "https": 443}.get(str(scheme).lower())
    except (TypeError, ValueError):
        return None
    if number is None:
        return None
    return "%s:%d" % ("loopback" if host in _LOOPBACK_NAMES else host, number)


def _url_origin(url: str) -> Optional[str]:
    """The origin key (_origin_key) of a URL such as a tab's page or its socket's Origin, or None."""
    try:
        parts = urllib.parse.urlsplit(url)
        return _origin_key(parts.hostname, parts.port, parts.scheme)
    except ValueError:
        return None


def _target(url: str) -> Tuple[str, str]:
    """(path, query) of a URL or a request target, percent-decoded: how a page and a server each name
    one request (the page an absolute URL, a span `url.path` or `http.target`)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "", ""
    return urllib.parse.unquote(parts.path or "/"), urllib.parse.unquote(parts.query)


def _fact(key: str, origin: Optional[str], method: str, target: str, start: float, end: float,
          source: str, sender: Optional[Callable[[Any], bool]] = None) -> Optional[dict]:
    """What a record that came with no mark a tab holds says of its request, for tying: its origin, method,
    path and query, and when it was served on the daemon's clock; `sender`, when the record can say it,
    whether a tab's own page sent it (_server_sender_refused).  None without an origin or a method."""
    if origin is None or not method:
        return None
    path, query = _target(target)
    return {"key": key, "origin": origin, "method": method.upper(), "path": path, "query": query,
            "start": start, "end": max(start, end), "source": source, "sender": sender}


def _document_requests(tab: _BrowserSession, now: float) -> List[dict]:
    """The tab's document requests of the last TIE_LOOKBACK_MS that the SDK marked for the server (a form
    post, a link, a navigation it announced), each with its method, path and query, and the time it may
    have been served in: begun after the daemon heard it announced, less TIE_EARLY_MS (but never before
    its document's first event: an earlier document's request is not this one), and before the daemon
    heard it answered (`answered`; while it is in flight, now).  One that its own record answers (by its
    mark: the middleware read the cookie) is left out; each says whether the tab was told that no record
    could be tied to it."""
    first: Dict[Any, float] = {}
    answered: Dict[str, float] = {}
    own: Set[Tuple[Any, str]] = set()
    untied: Set[Tuple[Any, str]] = set()
    announced: List[dict] = []
    for e in tab.store.query(now - TIE_LOOKBACK_MS):
        d, etype = e["data"], e["type"]
        if "doc" in e:
            first.setdefault(e["doc"], e["t"])
        if etype == "server.request" and not d.get("matchedBy") or etype == "server.untied":
            (own if etype == "server.request" else untied).add((d.get("documentId"), str(d.get("requestId"))))
        elif d.get("initiator") != "document":
            continue
        elif etype == "net.request":
            answered.setdefault(str(d.get("requestId")), e["t"])
        elif etype == "net.pending" and d.get("serverMark") and isinstance(d.get("method"), str):
            announced.append(e)
    out = []
    for e in announced:
        d = e["data"]
        path, query = _target(str(d.get("url") or ""))
        done = answered.get(str(d.get("requestId")))
        key = (e.get("doc"), str(d["serverMark"]))
        if key in own:
            continue
        out.append({"tab": tab, "doc": key[0], "mark": key[1], "label": _call_label(d), "method": d["method"].upper(),
                    "path": path, "query": query, "lower": max(e["t"] - TIE_EARLY_MS, first.get(key[0], e["t"])),
                    "answered": done if done is not None and done >= e["t"] else now,
                    "untied": key in untied})
    return out


def _on_origin(tabs: Iterable[_BrowserSession], origin: str) -> List[_BrowserSession]:
    """The tabs whose page is on `origin` (an origin key: _origin_key)."""
    return [t for t in tabs if _url_origin(t.origin or t.url) == origin]


def _fits(req: dict, fact: dict) -> bool:
    """Does a record fit a document request: the same method and path (and query, when both name one),
    begun within the time the request may have begun in (_document_requests), and ended by its answer
    (give or take TIE_LATE_MS)?"""
    if req["method"] != fact["method"] or req["path"] != fact["path"]:
        return False
    if req["query"] and fact["query"] and req["query"] != fact["query"]:
        return False
    return req["lower"] <= fact["start"] <= req["answered"] and fact["end"] <= req["answered"] + TIE_LATE_MS


class _Ties:
    """The daemon's ties of records that came with no mark a tab holds to the tabs' document requests:
    the unattributed records lately heard on an origin a tab is on (each may fit a request another
    one fits), and the records tied (a record tied is withdrawn once a second one fits its request)."""

    def __init__(self) -> None:
        self.seen: "collections.OrderedDict[str, dict]" = collections.OrderedDict()
        self.tied: "collections.OrderedDict[Tuple[str, Any, str], Tuple[str, dict]]" = collections.OrderedDict()
        self.stats = {"tied": 0, "untied": 0, "withdrawn": 0}

    def tie(self, tabs: Iterable[_BrowserSession], fact: dict, now: float) -> Optional[dict]:
        """The document request (of _document_requests) to file a record under, or None.  Only a request
        of a tab on the record's origin counts, and only one whose page the record says sent it (`sender`).
        It is tied when it is the one request the record fits and no other record heard lately fits it
        (a request its own record answers is none of these: _document_requests).  Otherwise every request
        it fits is told why none was tied, and a record tied to one before is withdrawn."""
        on_origin = _on_origin(tabs, fact["origin"])
        if not on_origin:
            return None
        self._remember(fact, now)
        fits, rivals = self._fitting(on_origin, fact, now)
        if not fits:
            return None
        if len(fits) == 1 and not rivals and not fits[0]["untied"] and self._key(fits[0]) not in self.tied:
            return fits[0]
        self._refuse(fact, fits, rivals, now)
        return None

    def _fitting(self, tabs: Iterable[_BrowserSession], fact: dict, now: float) -> Tuple[List[dict], List[str]]:
        """The document requests of `tabs` that `fact` fits, and the other records heard lately that fit one
        of those."""
        fits = [r for t in tabs for r in _document_requests(t, now)
                if _fits(r, fact) and (fact["sender"] is None or fact["sender"](t))]
        rivals = [k for k, other in self.seen.items()
                  if k != fact["key"] and any(_fits(r, other) for r in fits)]
        return fits, rivals

    def _refuse(self, fact: dict, fits: List[dict], rivals: List[str], now: float) -> None:
        """None of the requests `fact` fits can have a record tied: each is told why, a record tied withdrawn."""
        why = ("%d requests of %s %s fit it by time (more than one tab sent it at once), so none could be told "
               "apart" % (len(fits), fact["method"], fact["path"]) if len(fits) > 1 else
               "%d server records fit it by method, path and time (another client sent %s %s at the same moment), "
               "so neither could be told apart" % (len(rivals) + 1, fact["method"], fact["path"]))
        for req in fits:
            self._untie(req, why, now)

    def filed(self, fact: dict, req: dict, event: dict, tabs: Callable[[], Iterable[_BrowserSession]]) -> None:
        """The record of `fact` was filed under `req` as `event` (the tab's server.request event).  The event
        says when it `settles`: TIE_SETTLE_MS after it came (a rival record in the next export batch), and
        not before TIE_EARLY_MS past the request's start on the server, the last moment at which another
        tab's word of a post could come and still fit it (_fits: on a loaded machine a second tab clicking
        the same button may be heard of a second after the first was served).  Then it is weighed again
        against every tab's requests (`tabs`) and withdrawn if another fits, or marked `settled`; a verdict
        reads it no sooner (observe.py)."""
        event["settles"] = max(event["t"] + TIE_SETTLE_MS, fact["start"] + TIE_EARLY_MS)
        self.tied[self._key(req)] = (fact["key"], event)
        while len(self.tied) > TIE_KEPT:
            self.tied.popitem(last=False)
        self.stats["tied"] += 1
        delay = max(0.0, event["settles"] - event["t"]) / 1000.0
        tornado.ioloop.IOLoop.current().call_later(delay, self._settle, fact, req, event, tabs)

    def _settle(self, fact: dict, req: dict, event: dict, tabs: Callable[[], Iterable[_BrowserSession]]) -> None:
        """A tied record's time to settle has come (filed): it stands if it still fits its request alone and
        no other record fits that request; otherwise every request it fits is told why, and it is withdrawn."""
        if event["type"] != "server.request" or self.tied.get(self._key(req), (None, None))[1] is not event:
            return
        now = req["tab"].clock()
        fits, rivals = self._fitting(_on_origin(tabs(), fact["origin"]), fact, now)
        if [self._key(r) for r in fits] == [self._key(req)] and not rivals:
            req["tab"].settle_server_record(event)
            return
        self._refuse(fact, fits or [req], rivals, now)

    def replaced(self, tab: _BrowserSession, doc: Any, mark: str) -> None:
        """The request's own record came (the middleware read its cookie mark): a record tied to it before
        is withdrawn, and that one stands."""
        held = self.tied.pop((tab.id, doc, mark), None)
        if held is not None:
            tab.withdraw_server_record(held[1], "the request's own record (by its mark) came after it")

    def _key(self, req: dict) -> Tuple[str, Any, str]:
        return req["tab"].id, req["doc"], req["mark"]

    def _remember(self, fact: dict, now: float) -> None:
        """Keep the record as a possible rival of later ones (TIE_KEPT, TIE_LOOKBACK_MS)."""
        self.seen[fact["key"]] = {k: v for k, v in fact.items() if k != "sender"}
        self.seen.move_to_end(fact["key"])
        while self.seen and (len(self.seen) > TIE_KEPT
                             or next(iter(self.seen.values()))["end"] < now - TIE_LOOKBACK_MS):
            self.seen.popitem(last=False)

    def _untie(self, req: dict, why: str, now: float) -> None:
        """No record can be tied to `req`: its tab is told why, once, and a record tied to it is withdrawn."""
        held = self.tied.pop(self._key(req), None)
        if held is not None:
            req["tab"].withdraw_server_record(held[1], why)
            self.stats["withdrawn"] += 1
        if not req["untied"]:
            req["untied"] = True
            self.stats["untied"] += 1
            req["tab"].add_server_untied({"documentId": req["doc"], "requestId": req["mark"], "label": req["label"],
                                          "why": why})
