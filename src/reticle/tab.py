"""Tabs.

What the daemon knows of one tab: its events (a bounded store), its health, its open requests, the
marks of its acts, the commands in flight and the reports held for a device; and the connected tab
that commands are sent to.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import operator
import re
import urllib.parse
from typing import Any, Awaitable, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Protocol, Tuple

import tornado.ioloop

from .calls import DIALOG_SILENT_MS, STUCK_COMMAND_S, _command_budget, _progress_note
from .constants import (ARRIVAL_WAIT_MS, BACKGROUND_MS, COMMAND_TIMEOUT_S, EVENT_CAP_AGE_MS, EVENT_CAP_BYTES,
    EVENT_CAP_COUNT, NAV_WAIT_S, NET_CONFIRM_S, OTEL_GRACE_MS, PLAIN_EVENT_BYTES, SERVER_GRACE_MS, STRANDED_MS,
    THROTTLED_AFTER_MS, _PAGE_BLIND_SPOTS, _bridge_log, _emit)
from .errors import _TabGone, ToolError
from .events import (_call_label, _event_type, _event_types, _hide_redirected_status, _is_write, _net_key_url,
    _request_key)
from .server_records import _ServerTickets
from .stores import _watched_stores
from .util import _dumps, _origin_of, _short
from .wire import _take_wire_status


# ---- what a tab asks of those around it: its socket, the bridge that holds it, the device that owns it ----
# The tab stands below them (the bridge, the devices and the socket handler all hold tabs), so it names
# what it needs of each as a small Protocol; _BridgeHandler, _Bridge and _Device are the ones there are.

class _Socket(Protocol):
    """The tab's socket (_BridgeHandler): a command goes out on it, and a tab that is replaced or gone
    closes it."""

    session: Optional["_BrowserSession"]
    replaced: bool

    def send_json(self, obj: Any) -> None: ...

    def close(self, code: Optional[int] = None, reason: Optional[str] = None) -> None: ...


class _TabHost(Protocol):
    """What a tab asks of the bridge that holds it (_Bridge): the daemon's clock, the events a tab may
    send per second, waiting for a reloading tab to come back, marking a request a fault answered, and
    recording a step of the tab's journey."""

    @property
    def events_per_second(self) -> int: ...

    def clock(self) -> float: ...

    def wait_back(self, session: "_BrowserSession", timeout: float) -> Awaitable[bool]: ...

    def mark_fault(self, session: "_BrowserSession", event: dict) -> None: ...

    def record_step(self, session_id: str, step: dict) -> None: ...


class _Ledger(Protocol):
    """A browser's own record of the requests its page made (_NetRecord): it confirms a page's report."""

    def confirm(self, data: dict, late: bool) -> Optional[str]: ...


class _TabDevice:
    """What a tab asks of the device that owns it (_Device, a browser the daemon started): the browser's
    own record of the page's requests, which each report the page makes must match, and, while the tab
    sends it an act, how many acts are in flight (real input is honoured only then) and how a dialog the
    act opens is answered.  A tab whose page runs in a browser Reticle did not start has no device."""

    net: _Ledger
    acting: int
    dialog_policy: Optional[dict]
    attached = False  # the user's own tab in a browser of theirs (a CDP endpoint), not a page Reticle opened


_CHURN_TYPES: Dict[str, bool] = {}  # event type -> churn?  (a page sends few types: a small memo)
_HIGH_VALUE_SET = _event_types("high_value")
# the frame path's common case (_TabIntake._ingest_plain): the fields it reads of every event at once
_GET_TYPE, _GET_DATA, _GET_T, _GET_DOC = map(operator.itemgetter, ("type", "data", "t", "documentId"))
_DICT_ONLY = frozenset((dict,))
_NUMBER_CLASSES = frozenset((int, float))
# The event types _TabIntake._observe learns from (requests, dialogs, health, routes, blind spots); it
# runs for any other only while a dialog is open.  A type _observe comes to read must be added here.
_OBSERVED_TYPES = frozenset(("page.dialog", "net.request", "net.pending", "net.ws", "page.health", "route.change",
                             "blind-spot"))


# ---- what a tab sends: a report checked at the door, a plain frame taken whole ----

def _malformed_call(data: dict) -> str:
    """What is wrong with the fields of a reported request (`data` of a net.request) that decide a
    verdict, or "": a status is an integer from 0 to 999 or absent (a pending or failed request),
    `ok` a boolean or absent and, with a status of 1 or more, the one that status gives (200-399)
    (with none, true only for a one-way beacon), a method and a URL strings or absent.  A page can
    patch what its SDK reads (a status that returns "200"): such a report is refused, not read."""
    status, ok = data.get("status"), data.get("ok")
    if status is not None and (status.__class__ is not int or not 0 <= status <= 999):
        return "status %s is not an integer from 0 to 999" % _short(_dumps(status), 40)
    if ok is not None and ok.__class__ is not bool:
        return "ok %s is not a boolean" % _short(_dumps(ok), 40)
    if ok is not None and status and ok is not (200 <= status < 400):
        return "ok %s contradicts status %d" % (_dumps(ok), status)
    if ok is True and not status and data.get("oneWay") is not True:  # only a beacon is ok with no answer
        return "ok true with no status"
    for name in ("method", "url"):
        if data.get(name) is not None and not isinstance(data[name], str):
            return "%s is not a string" % name
    return ""


def _refused_report(store: "_EventStore", tab_id: str, data: dict, now: float) -> dict:
    """A reported request whose verdict fields have the wrong type (_malformed_call) is refused: not
    stored, counted in `store` as the blind spot `malformed-request` (named under integrity).  ->
    the blind-spot event (at `now`) that says what was wrong, to keep in its place."""
    problem = _malformed_call(data)
    label = "%s %s" % (_short(str(data.get("method") or "GET"), 16),
                       _net_key_url(data.get("url")) or _short(str(data.get("url")).split("?")[0], 200))
    store.note_blind_spot("malformed-request", 1, label)
    _emit(_bridge_log, logging.WARNING, "request_malformed", sessionId=tab_id, request=_short(label, 200),
          problem=problem)
    return {"t": now, "type": "blind-spot", "data": {
        "reason": "malformed-request", "count": 1,
        "detail": _short("the page reported %s with %s; the report was refused" % (label, problem), 300)}}


class _PlainFrame(NamedTuple):
    """What _plain_frame reads of a plain frame, field by field over all its events."""
    types: List[str]
    datas: List[dict]
    pts: List[float]
    doc: str                  # the frame's one documentId, cut to 64 characters
    counts: Dict[str, int]    # events of each type
    high: int                 # high-value events (the events-per-second cap has a share of its own for them)
    observed: bool            # some event is of a type _TabIntake._observe learns from


# event types only the daemon writes (the app's middleware, its spans, a watched store): a page's are refused
_DAEMON_ONLY = ("server.", "store.")


def _plain_frame(events: List[Any], frame_bytes: int) -> Optional[_PlainFrame]:
    """A frame of events the frame path can take whole, read, or None: every event an object with a type
    (a string of at most 64 characters, not server.* or store.*, not page.dialog), object data, a number `t` and
    the frame's one documentId (a string), none with an actionId, and on average at most
    PLAIN_EVENT_BYTES of the frame an event.  Each check is a pass over the frame in C (map, set,
    Counter), not Python code run for every event."""
    if frame_bytes > len(events) * PLAIN_EVENT_BYTES:
        return None
    try:
        types = list(map(_GET_TYPE, events))
        datas = list(map(_GET_DATA, events))
        pts = list(map(_GET_T, events))
        docs = set(map(_GET_DOC, events))
        counts = collections.Counter(types)
    except (KeyError, TypeError):  # an event that is no object, lacks a field, or has an unhashable one
        return None
    if len(docs) != 1:
        return None
    doc = docs.pop()
    if doc.__class__ is not str or set(map(type, datas)) != _DICT_ONLY or not _NUMBER_CLASSES.issuperset(
            map(type, pts)) or any(map(dict.__contains__, events, itertools.repeat("actionId"))):
        return None
    high = 0
    for etype, count in counts.items():
        if etype.__class__ is not str or len(etype) > 64 or etype.startswith(_DAEMON_ONLY) or etype == "page.dialog":
            return None
        high += count if etype in _HIGH_VALUE_SET else 0
    return _PlainFrame(types, datas, pts, doc[:64], counts, high, not _OBSERVED_TYPES.isdisjoint(counts))


def _churn_memo(etype: str) -> bool:
    churn = _CHURN_TYPES.get(etype)
    if churn is None:
        churn = _event_type(etype).churn
        if len(_CHURN_TYPES) < 512:
            _CHURN_TYPES[etype] = churn
    return churn


# ---- the ring buffer: one per tab, churn evicted first, every loss counted ----

class _EventStore:
    """One browser session's ring buffer: at most EVENT_CAP_COUNT events,
    EVENT_CAP_AGE_MS old and EVENT_CAP_BYTES big.  Churn (DOM, animation,
    health) is evicted before anything else, and every eviction is counted
    with the newest cursor it removed, so a result whose window reaches back
    past it can say its evidence was lost."""

    def __init__(self, clock: Callable[[], float], cap_count: int = EVENT_CAP_COUNT,
                 cap_age_ms: float = EVENT_CAP_AGE_MS, cap_bytes: int = EVENT_CAP_BYTES) -> None:
        self._clock = clock
        self.cap_count = cap_count
        self.cap_age_ms = cap_age_ms
        self.cap_bytes = cap_bytes
        # the events, and beside them their sizes (a deque each, not one of pairs: a pair would be one more
        # object per event to allocate, free and have the garbage collector walk)
        self._churn: collections.deque = collections.deque()
        self._kept: collections.deque = collections.deque()
        self._sizes: Dict[str, collections.deque] = {"churn": collections.deque(), "other": collections.deque()}
        self.bytes = 0
        self.seq = 0
        self.total = 0
        self.evicted = {"churn": 0, "other": 0}
        self.evicted_upto = {"churn": -1.0, "other": -1.0}
        self.sampled = 0
        self.sampled_upto = -1.0
        self._blind_spots: collections.Counter = collections.Counter()
        self._page_spots: Dict[str, Tuple[int, str]] = {}   # reason -> (count now, detail) on this document

    def __len__(self) -> int:
        return len(self._churn) + len(self._kept)

    def add_batch(self, items: List[Tuple[dict, int]]) -> None:
        """Store (event, size) pairs; the caller applies the caps once after (add_frame)."""
        self.add_frame([item[0] for item in items], [item[1] for item in items])

    def add_frame(self, events: List[dict], sizes: List[int]) -> None:
        """Store a frame's events, each with its size; the caller applies the caps once after: the frame
        path's add."""
        seq = self.seq
        churn_append, kept_append = self._churn.append, self._kept.append
        churn_size, kept_size = self._sizes["churn"].append, self._sizes["other"].append
        memo = _CHURN_TYPES
        for event, size in zip(events, sizes):
            seq += 1
            event["seq"] = seq
            churn = memo.get(event["type"])
            if churn is None:
                churn = _churn_memo(event["type"])
            if churn:
                churn_append(event)
                churn_size(size)
            else:
                kept_append(event)
                kept_size(size)
        self.total += seq - self.seq
        self.bytes += sum(sizes)
        self.seq = seq

    def cursors(self, n: int) -> range:
        """The next `n` cursors (seq), taken: for events the caller numbers as it builds them (add_run)."""
        self.seq += n
        return range(self.seq - n + 1, self.seq + 1)

    def add_run(self, events: List[dict], types: List[str], counts: Dict[str, int], estimate: int) -> None:
        """Store a frame's events, numbered (cursors), of `types` (counted in `counts`), with `estimate`,
        about what they take in memory together, in place of a size each: the events of each class
        (churn, other) share all of it.  A class is evicted oldest first and a frame's events of one
        class sit side by side, so at most one frame of each is ever part gone, and evicting one class
        first never frees what the other still holds: the byte cap holds as with a size each, and nothing
        walks every event."""
        self.total += len(events)
        flags = {etype: _churn_memo(etype) for etype in counts}
        n_churn = sum(count for etype, count in counts.items() if flags[etype])
        if n_churn == len(events) or not n_churn:
            parts = [(self._churn if n_churn else self._kept, "churn" if n_churn else "other", events)]
        else:
            others = {etype: not churn for etype, churn in flags.items()}
            parts = [(self._churn, "churn", list(itertools.compress(events, map(flags.__getitem__, types)))),
                     (self._kept, "other", list(itertools.compress(events, map(others.__getitem__, types))))]
        for dq, which, part in parts:
            share = max(1, estimate // len(part))
            dq.extend(part)
            self._sizes[which].extend(itertools.repeat(share, len(part)))
            self.bytes += share * len(part)

    def add(self, event: dict, size: int, trim: bool = True) -> None:
        """Store one event; `trim=False` leaves the caps to one `trim(now)` per frame."""
        self.add_frame([event], [size])
        if trim:
            self.trim(event["t"])

    def note_blind_spot(self, reason: str, count: int = 1, detail: str = "") -> None:
        """Count something the page could not observe (a malformed frame, a dropped event...).
        A part of the page that cannot be read (a cross-origin frame, a closed shadow root) is
        a level, not a tally: the page reports how many it has now."""
        reason, count = reason[:64], max(0, count)  # a count never takes away what was seen
        if reason in _PAGE_BLIND_SPOTS:
            self._page_spots[reason] = (count, detail[:300])
        else:
            self._blind_spots[reason] += count

    def new_document(self) -> None:
        """The page's unreadable parts were the old document's; the new one reports its own."""
        self._page_spots.clear()

    def page_blind_spots(self) -> Dict[str, Tuple[int, str]]:
        return {k: v for k, v in self._page_spots.items() if v[0]}

    def blind_spot_counts(self) -> Dict[str, int]:
        out = {k: v for k, v in self._blind_spots.items() if v}
        out.update({k: v[0] for k, v in self._page_spots.items() if v[0]})
        return out

    def note_sampled(self, count: int, t: float) -> None:
        self.sampled += count
        self.sampled_upto = max(self.sampled_upto, t)

    def _evict(self, dq: collections.deque, which: str) -> None:
        event = dq.popleft()
        self.bytes -= self._sizes[which].popleft()
        self.evicted[which] += 1
        self.evicted_upto[which] = max(self.evicted_upto[which], event["t"])

    def _evict_many(self, dq: collections.deque, which: str, count: int) -> None:
        """_evict `count` times over (count <= len(dq)), in one loop: a full buffer evicts a frame's worth."""
        popleft, size = dq.popleft, self._sizes[which].popleft
        freed = 0
        newest = self.evicted_upto[which]
        for _ in range(count):
            t = popleft()["t"]
            freed += size()
            if t > newest:
                newest = t
        self.bytes -= freed
        self.evicted[which] += count
        self.evicted_upto[which] = newest

    def trim(self, now: float) -> None:
        """Apply the age, count and byte caps: churn goes first, oldest first."""
        horizon = now - self.cap_age_ms
        churn, kept = self._churn, self._kept
        for dq, which in ((churn, "churn"), (kept, "other")):
            while dq and dq[0]["t"] < horizon:
                self._evict(dq, which)
        over = len(churn) + len(kept) - self.cap_count
        if over > 0 and churn:  # the count cap in bulk, churn first: what the loop below does one by one
            first = min(over, len(churn))
            self._evict_many(churn, "churn", first)
            over -= first
        if over > 0 and kept:
            first = min(over, len(kept))
            self._evict_many(kept, "other", first)
            over -= first
        while over > 0 or self.bytes > self.cap_bytes:
            if churn:
                self._evict(churn, "churn")
            elif kept:
                self._evict(kept, "other")
            else:
                break
            over -= 1

    def query(self, since: float = 0.0, until: Optional[float] = None,
              prefix: Optional[str] = None) -> List[dict]:
        out = []
        for dq in (self._kept, self._churn):
            for event in dq:
                t = event["t"]
                if t < since or (until is not None and t > until):
                    continue
                if prefix is not None and not event["type"].startswith(prefix):
                    continue
                out.append(event)
        out.sort(key=lambda e: e["seq"])
        return out

    def loss_since(self, since: float) -> Optional[dict]:
        """What this store lost that a window starting at `since` would have held."""
        loss = {}
        if self.evicted_upto["other"] >= since:
            loss["evicted"] = self.evicted["other"]
        if self.evicted_upto["churn"] >= since:
            loss["evictedChurn"] = self.evicted["churn"]
        if self.sampled_upto >= since:
            loss["sampled"] = self.sampled
        return loss or None

    def stats(self) -> dict:
        return {"events": len(self), "bytes": self.bytes, "total": self.total,
                "evicted": dict(self.evicted), "sampled": self.sampled}


_SCALAR_CLASSES = frozenset((int, float, bool, type(None)))


def _event_bytes(data: Any) -> int:
    """About what an event's data takes in memory once parsed (its strings, plus some 100 bytes a
    value): a frame's bytes shared evenly would count a 900 KB body in a frame of 200 events as
    4.5 KB, and the per-tab byte cap would not hold.  The frame path's sum: what _event_bytes_walk
    gives, in one pass over an object of scalars and objects of scalars (most events) of at most 400
    values in all, where the walk's order cannot change the sum; anything else is walked."""
    if data.__class__ is not dict:
        return _event_bytes_walk(data)
    seen = 1 + 2 * len(data)
    if seen > 400:
        return _event_bytes_walk(data)
    try:  # 512, the object's 100 + 40 a key, and each key's length + 64 (a parsed object's keys are strings)
        total = 612 + 104 * len(data) + sum(map(len, data))
    except TypeError:  # a key that is no string: not parsed JSON
        return _event_bytes_walk(data)
    scalars = _SCALAR_CLASSES
    for value in data.values():
        cls = value.__class__
        if cls is str:
            total += len(value) + 64
        elif cls in scalars:
            total += 32
        elif cls is dict:
            seen += 2 * len(value)
            if seen > 400:
                return _event_bytes_walk(data)
            try:
                total += 100 + 104 * len(value) + sum(map(len, value))
            except TypeError:
                return _event_bytes_walk(data)
            for inner in value.values():
                cls = inner.__class__
                if cls is str:
                    total += len(inner) + 64
                elif cls in scalars:
                    total += 32
                else:
                    return _event_bytes_walk(data)
        else:
            return _event_bytes_walk(data)
    return total if seen <= 400 else _event_bytes_walk(data)


def _event_bytes_walk(data: Any) -> int:
    """_event_bytes of any value: a walk of at most 400 values."""
    total, stack, seen = 512, [data], 0
    while stack and seen < 400:
        v = stack.pop()
        seen += 1
        if isinstance(v, str):
            total += len(v) + 64
        elif isinstance(v, dict):
            total += 100 + 40 * len(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            total += 60 + 8 * len(v)
            stack.extend(v)
        else:
            total += 32
    return total


# ---- what a verdict knows of the tab beside its window, and the commands to it ----

class _Known:
    """What a session knows beside its window, for the verdict rules: the
    requests still open, the blind-spot counts and what the buffer lost
    since the window's start."""

    __slots__ = ("open_requests", "blind_spots", "loss", "origin", "background", "unreadable", "server_seen",
                 "polled", "stuck", "server_missing", "server_untied", "server_grace", "unconfirmed", "server_tables",
                 "server_hint", "stores", "store_tables", "store_polled_at")

    def __init__(self, open_requests: List[dict], blind_spots: Dict[str, int], loss: Optional[dict],
                 origin: str = "", background: Tuple[str, ...] = (),
                 unreadable: Optional[Dict[str, Tuple[int, str]]] = None, server_seen: int = 0,
                 polled: Tuple[str, ...] = ()) -> None:
        self.open_requests = open_requests
        self.server_seen = server_seen      # records the app's middleware reported for this tab (Server truth)
        self.server_grace: float = SERVER_GRACE_MS  # how long a record may follow its request (longer from spans)
        self.stuck = ""                     # why the page does not answer commands (a dialog, a busy thread)
        self.server_missing: Tuple[str, ...] = ()  # the act's answered marked requests with no record by the cap
        # ... of them, the document requests no record could be tied to (tying.py): (label, why or "")
        self.server_untied: Tuple[Tuple[str, str], ...] = ()
        self.blind_spots = blind_spots
        self.unreadable = unreadable or {}  # parts of the page now that cannot be read: reason -> (count, detail)
        self.loss = loss
        self.origin = origin                # the page's scheme://host:port
        self.background = background        # what the page sends on its own: writes before the window, and
                                            # requests it repeated before it (autosave, polling)
        self.polled = polled                # of those, the ones it made twice or more (a timer, not a person)
        self.unconfirmed: List[dict] = []   # in a device: reports held until the browser confirms them (t: came)
        self.server_tables: FrozenSet[str] = frozenset()  # tables the tab's server records have written
        self.server_hint = ""               # why spans that reach the daemon land in no tab (_SpanSources)
        self.stores: Tuple[str, ...] = ()   # the stores the daemon watches (Storage truth), by name
        self.store_tables: Dict[str, List[str]] = {}  # ... and their tables at their last read
        self.store_polled_at = 0.0          # when they were last read (the daemon's clock)


def _server_knowledge(session: "_BrowserSession", known: "_Known") -> None:
    """What a verdict knows of the tab's server beside its window: the tables its records have written
    (what its paths may name), and, for a tab no record ever reached while spans do reach the daemon,
    why none could be attributed (_SpanSources), named in a `server` check's unknown."""
    stores = _watched_stores(session)
    if stores is not None:
        known.stores, known.store_tables, known.store_polled_at = stores.names(), stores.tables(), stores.polled_at
    if session.server_seen:
        known.server_tables = frozenset(w["table"].lower().split(".")[-1] for e in session.store.query(
            prefix="server.request") for w in e["data"].get("writes") or () if w.get("table"))
        return
    otel = getattr(getattr(getattr(session, "bridge", None), "hub", None), "otel", None)
    found = otel.sources.unattributed(session.clock(), url=session.origin or session.url) if otel is not None else []
    if found:  # (the services that answered this page's origin, when any did: _SpanSources.unattributed)
        known.server_hint = "OpenTelemetry spans reach the daemon, but none can be attributed to a tab: %s" % (
            "; ".join("service %s%s: %s; %s" % (f["service"], " (it answers this page's origin)"
                                                  if f.get("answersOrigin") else "", f["cause"], f["fix"])
                      for f in found[:2]))


# the codes a page may give a refused command (anything else it says is "page_refused")
_PAGE_ERROR_CODES = ("target_missing", "target_ambiguous")


def _command_result(reply: dict) -> Any:
    """A page's reply to a command -> its result; a refusal is a ToolError with the page's code when it is
    a known one (_PAGE_ERROR_CODES), else "page_refused"."""
    if not reply.get("ok"):
        error = str(reply.get("error") or "the page refused the command")[:4096]
        code = reply.get("code") if reply.get("code") in _PAGE_ERROR_CODES else "page_refused"
        raise ToolError(error, str(reply.get("recovery") or ""), code=code)
    return reply.get("result")


# ---- the parts of a tab: each keeps one kind of state, on the daemon's clock (_clock_ms) ----

class _TabHealth:
    """How a tab is doing as far as the daemon can tell: hidden or focused (its page.health events),
    a dialog open in a person's tab, the dialogs a device answered, and the last command the page
    did not answer.  Whether it answers is a question of these and of how long it has been silent,
    which the tab passes in (`silent_ms`)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.hidden = False
        self.focused = True
        self.dialogs: collections.deque = collections.deque(maxlen=16)  # (t, record) of dialogs a device answered
        self.dialog_open: Optional[dict] = None  # a dialog the SDK saw open in a person's tab (no device answers it)
        self.unanswered: Optional[Tuple[float, str]] = None  # (when, command) the page last failed to answer

    def throttled(self, silent_ms: int) -> bool:
        return (self.hidden or silent_ms > THROTTLED_AFTER_MS) and self.not_answering(silent_ms) is None

    def not_answering(self, silent_ms: int) -> Optional[str]:
        """Why the page does not answer commands (a dialog open, the main thread busy), or None while
        it answers (as far as anyone knows: the last command was answered)."""
        if self.dialog_open is not None:
            d = self.dialog_open
            return ("a %s dialog (%s) is open in the tab; the page is blocked until the person closes it"
                    % (d["dialogType"], _short(d.get("message") or "", 80) or "no text"))
        if self.unanswered is None:
            return None
        when, name = self.unanswered
        if not self.hidden and silent_ms > DIALOG_SILENT_MS:
            return ("the page's main thread is busy or blocked: '%s' got no answer %d ms ago and nothing was heard "
                    "from the page for %d ms" % (name, self._clock() - when, silent_ms))
        return "the page did not answer '%s' (%d ms ago)" % (name, self._clock() - when)

    def new_document(self) -> None:
        """A new document answers for itself: no command it failed, no dialog open in it."""
        self.unanswered = self.dialog_open = None

    def page_dialog(self, data: dict, t: float) -> Optional[str]:
        """The SDK saw the page open (or close) alert/confirm/prompt or a beforeunload prompt in a
        person's tab -> the type of a dialog that just opened (commands waiting on the page then
        fail: it cannot answer), else None."""
        kind = str(data.get("dialogType") or "")
        if kind not in ("alert", "confirm", "prompt", "beforeunload"):
            return None
        if data.get("phase") == "closed":
            self.dialog_open = None
            return None
        record = {"dialogType": kind, "message": _short(str(data.get("message") or ""), 300),
                  "handled": "left open for the person (Reticle cannot close a dialog in your tab)"}
        self.dialog_open = record
        self.dialogs.append((t, record))
        return kind

    def dialogs_since(self, since: Any) -> List[dict]:
        """The dialogs seen from the cursor `since` on (none when `since` is not a cursor)."""
        return [d for t, d in self.dialogs if isinstance(since, (int, float)) and t >= since]


class _OpenRequests:
    """The requests a tab's page has open (a net.pending its net.request has not answered yet), among
    them the documents on their way to the tab (a form post or link the page announced, a load its
    device's browser started): at most 1000, each with `startedAt` on the daemon's clock."""

    def __init__(self) -> None:
        self._open: Dict[str, dict] = {}

    def all(self) -> List[dict]:
        return list(self._open.values())

    def since(self, t: float) -> List[dict]:
        """Requests still open that started at or after `t` (each with `startedAt`)."""
        return [d for d in self._open.values() if d.get("startedAt", 0) >= t]

    def document_since(self, t: float) -> bool:
        """Is a document request that started at or after `t` still open (a page on its way)?"""
        return any(d.get("initiator") == "document" and d.get("startedAt", 0) >= t for d in self._open.values())

    def started(self, event: dict, data: dict) -> None:
        """A net.pending: the request is open until its net.request answers it."""
        if len(self._open) < 1000:
            key = _request_key(event)
            self._open[key] = dict(data, startedAt=event["t"], _key=key)

    def answered(self, event: dict) -> None:
        self._open.pop(_request_key(event), None)

    def document_on_its_way(self, rid: str, method: str, url: str, now: float) -> bool:
        """A device's browser started loading a document (its navigation `rid`): open as the SDK records a
        form submission it announces.  False when 1000 are open already (it is not recorded)."""
        if len(self._open) >= 1000:
            return False
        key = "browser:" + rid
        self._open[key] = {"requestId": key, "method": method, "methodKnown": True, "url": url, "urlKnown": True,
                           "initiator": "document", "cause": "browser", "startedAt": now, "_key": key}
        return True

    def document_not_coming(self, rid: Optional[str]) -> None:
        """The browser's navigation `rid` (every one, with None) brought no document after all (a
        download, a 204, a failure).  Once the browser loads no document in the tab, the page's own
        announcements of one (a form post answered by a download) are over too: none will arrive."""
        for key in [k for k, d in self._open.items() if d.get("cause") == "browser" and (
                rid is None or k == "browser:" + rid)]:
            self._open.pop(key, None)
        if not any(d.get("cause") == "browser" for d in self._open.values()):
            for key in [k for k, d in self._open.items() if d.get("initiator") == "document"]:
                self._open.pop(key, None)

    def clear(self) -> None:
        """A new document: the old one's requests can no longer answer."""
        self._open.clear()


class _ActMarks:
    """The cursors a tab's windows start from: its last act and its last navigation (the floor), and,
    per act, when it ran on the page's own clock.  Events are stamped when they reach the daemon;
    under a backlog an event the page produced before the act can arrive after the act's cursor, and
    a window that starts at an act drops such events by their page time (`pt`, compared only with
    the page's own clock, on the same document)."""

    def __init__(self) -> None:
        self.last_act: Optional[float] = None
        self.last_act_action: Optional[str] = None
        self.last_nav: Optional[float] = None
        # every act's cursor, oldest first -> (documentId, page time it ran at), or None while its page has not
        # said (a click that left its page, a form post's, often never does)
        self._page: Dict[float, Optional[Tuple[str, float]]] = {}

    def act(self, now: float, action: Optional[str]) -> float:
        self.last_act = now
        self.last_act_action = action
        self._page[now] = None
        # kept as long as known() looks back (BACKGROUND_MS): an act's request whose mark was dropped
        # would read as unprompted, a repeated save as a timer's poll (outside the horizon)
        while len(self._page) > 32 and (len(self._page) > 4096 or next(iter(self._page)) < now - BACKGROUND_MS - 2000):
            del self._page[next(iter(self._page))]
        return now

    def navigation(self, now: float) -> float:
        self.last_nav = now
        return now

    def floor(self) -> float:
        """Events count from the last act or navigation on."""
        marks = [m for m in (self.last_act, self.last_nav) if m is not None]
        return max(marks) if marks else 0.0

    def note_page_time(self, since: float, result: Any) -> None:
        """Remember when, on the page's own clock, the act at `since` ran (the `pt` and `documentId`
        of its command's result)."""
        if since in self._page and isinstance(result, dict) and isinstance(result.get("pt"), (int, float)) \
                and result.get("documentId"):
            self._page[since] = (str(result["documentId"]), float(result["pt"]))

    def page_time(self, since: float) -> Optional[Tuple[str, float]]:
        """(documentId, page time) of the act at cursor `since`, or None when `since` is no act's."""
        return self._page.get(since)

    def acts(self) -> List[float]:
        """The cursors of the acts remembered, oldest first: each act's, whether or not its page said
        when it ran (a form post's click answers from a page already leaving, often with nothing)."""
        return list(self._page)


class _PendingCommands:
    """The commands sent to a tab that still wait for its answer: a future each, under the id the
    page's reply echoes (c1, c2, ...)."""

    def __init__(self) -> None:
        self._futures: Dict[str, asyncio.Future] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._futures)

    def open(self) -> Tuple[str, asyncio.Future]:
        """A new command id and the future its reply resolves."""
        self._next += 1
        cid = "c%d" % self._next
        fut = asyncio.get_running_loop().create_future()
        self._futures[cid] = fut
        return cid, fut

    def close(self, cid: str) -> None:
        self._futures.pop(cid, None)

    def resolve(self, msg: dict) -> None:
        """The page's reply to a command: its future gets the message (a late or unknown id is ignored)."""
        fut = self._futures.get(str(msg.get("id")))
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def fail(self, error: Callable[[], Exception]) -> None:
        """Every command still waiting fails with an `error()` of its own, and none waits any more."""
        for fut in list(self._futures.values()):
            if not fut.done():
                fut.set_exception(error())
        self._futures.clear()


class _HeldReports:
    """In a device, the requests the page reported that the browser has not confirmed yet (see
    _TabIntake._must_confirm), in the page's order, each with its deadline on the daemon's clock
    (NET_CONFIRM_S after it came).  One the browser confirms is admitted (`admit`, which stores it);
    one it never confirms is refused: kept as `net.unmade` and counted as the blind spot
    `request-not-made`, which the verdict names under integrity."""

    def __init__(self, clock: Callable[[], float], store: _EventStore, tab_id: str,
                 made: Callable[[dict, bool], bool], admit: Callable[[dict, int], None],
                 wake: Callable[[], None]) -> None:
        self._clock = clock
        self._store = store
        self._tab_id = tab_id
        self._made = made          # did the browser make the request this report names (late: its deadline passed)?
        self._admit = admit
        self._wake = wake
        self.items: List[Tuple[float, dict, int]] = []  # (deadline, event, size)
        self._timer: Any = None

    def __len__(self) -> int:
        return len(self.items)

    def hold(self, event: dict, size: int) -> None:
        if len(self.items) >= 2000:
            self._refuse(self.items.pop(0))
        self.items.append((self._clock() + NET_CONFIRM_S * 1000.0, event, size))
        if self._timer is None:
            self._timer = tornado.ioloop.IOLoop.current().call_later(NET_CONFIRM_S, self._due)

    def _due(self) -> None:
        self._timer = None
        self.release(confirmed_only=False)
        if self.items:
            self._timer = tornado.ioloop.IOLoop.current().call_later(
                max(0.01, (self.items[0][0] - self._clock()) / 1000.0), self._due)

    def release(self, confirmed_only: bool) -> None:
        """Let held reports through in the page's order: each the browser confirms now is admitted; one
        past its deadline that it never confirmed is refused (unless `confirmed_only`).  A report
        still waiting stops the ones after it.  Whoever waits for the tab's events is woken."""
        now = self._clock()
        while self.items:
            deadline, event, size = self.items[0]
            if self._made(event, not confirmed_only and now >= deadline):
                self.items.pop(0)
                self._admit(event, size)
            elif not confirmed_only and now >= deadline:
                self._refuse(self.items.pop(0))
            else:
                break
        self._wake()

    def pending(self) -> List[dict]:
        """The held reports, each its data with `heldAt` (when it came), in the page's order."""
        return [dict(event["data"], heldAt=event["t"]) for _, event, _ in self.items]

    def misreported(self, data: dict, said: str) -> None:
        """A report the browser confirmed with values of its own (`data` has them now; the page `said`
        otherwise): counted as the blind spot `request-misreported`, which the verdict names."""
        label = "%s %s" % (data.get("method") or "GET", _net_key_url(data.get("url")) or _short(data.get("url"), 200))
        detail = "the page reported %s with %s; the browser's values count" % (label, said)
        self._store.add({"t": self._clock(), "type": "blind-spot", "data": {
            "reason": "request-misreported", "count": 1, "detail": _short(detail, 300)}}, 64)
        self._store.note_blind_spot("request-misreported", 1, label)
        _emit(_bridge_log, logging.WARNING, "request_misreported", sessionId=self._tab_id, request=_short(label, 200),
              said=_short(said, 80))

    def _refuse(self, item: Tuple[float, dict, int]) -> None:
        """A report the browser never confirmed: kept as `net.unmade` (no net predicate reads it) and
        counted as the blind spot `request-not-made`."""
        _, event, size = item
        data = event["data"]
        event["type"] = "net.unmade"
        event["t"] = self._clock()
        self._store.add(event, size)
        url = data.get("url")
        label = "%s %s → %s" % (data.get("method") or "GET", _net_key_url(url) or _short(str(url).split("?")[0], 200),
                                data.get("status"))
        self._store.add({"t": self._clock(), "type": "blind-spot", "data": {
            "reason": "request-not-made", "count": 1,
            "detail": "the page reported %s, which the browser never made" % _short(label, 200)}}, 64)
        self._store.note_blind_spot("request-not-made", 1, label)
        _emit(_bridge_log, logging.WARNING, "request_not_made", sessionId=self._tab_id, request=_short(label, 200))


class _SnapshotCache:
    """The last snapshot of each (scope, mode) of a tab, as lines without focus and with the route it
    was taken on, for the next one's diff (_snapshot_answer); a navigation forgets them all."""

    def __init__(self) -> None:
        self._last: Dict[Tuple[Optional[str], str], Tuple[str, List[str]]] = {}

    def remember(self, scope: Optional[str], mode: str,
                 result: dict) -> Tuple[Optional[Tuple[str, List[str]]], Tuple[str, List[str]]]:
        """Keep the page's snapshot `result` as the last of its (scope, mode) -> (the one it replaces, or
        None, and this one), each as (route, lines)."""
        tree = str(result.get("tree", ""))
        route = str((result.get("status") or {}).get("route", ""))
        lines = [re.sub(r" \[focused\]|,focused|focused,", "", ln) for ln in tree.splitlines()]
        key = (scope, mode)
        prev = self._last.get(key)
        self._last[key] = (route, lines)
        return prev, (route, lines)

    def clear(self) -> None:
        self._last.clear()


def _socket_origin(handler: Any) -> str:
    """The Origin header a tab's socket was opened with (scheme://host:port, lower case), or "" (a client
    that sends none); a browser sets it, and no page can."""
    request = getattr(handler, "request", None)
    origin = request.headers.get("Origin") if request is not None else None
    return _origin_of(origin) if isinstance(origin, str) and origin != "null" else ""


class _TabIntake:
    """A tab's frames coming in: the events its page sends (untrusted), checked and kept (ingest: most
    frames whole, the rest event by event), sampled past the tab's rate, a device's reports held until
    its browser confirms them, and what each kept event teaches the tab (_observe)."""

    def __init__(self, tab: "_BrowserSession") -> None:
        self.tab = tab
        # the frame path's sampling (ingest), on the daemon's clock
        self._window_start = 0.0
        self._window_count = 0
        self._window_high = 0
        self._window_sampled = 0
        self.held = _HeldReports(tab.clock, tab.store, tab.id, self._browser_made, self._admit, tab._wake)

    # -- events ---------------------------------------------------------------
    def ingest(self, events: List[Any], frame_bytes: int) -> None:
        """Take one frame's events from the page (untrusted) into the store.  Malformed events and forged
        server.* ones become blind spots; past `events_per_second` events are dropped (high-value ones
        have a cap of their own, so churn cannot crowd them out) and a blind spot counts the drops.
        Each kept event gets the daemon's clock (one cursor each) and its document; a report the
        browser must confirm is held until it does.  This is the bridge's hot path: most frames are
        taken whole (_ingest_plain), the rest event by event (_ingest_each), where what holds for the
        whole frame (the device, the caps, the document) is looked up once, not per event."""
        tab = self.tab
        now = tab.bridge.clock()
        tab.last_seen = now
        if not events:
            return
        size = max(1, frame_bytes // len(events))
        cap = tab.bridge.events_per_second
        if now - self._window_start >= 1000.0:
            self._next_sampling_window(now, cap)
        if not self._ingest_plain(events, now, frame_bytes, cap):
            self._ingest_each(events, now, size, cap)
        tab.store.trim(now)
        tab._wake()

    def _ingest_each(self, events: List[Any], now: float, size: int, cap: int) -> None:
        """ingest's loop, event by event: for any frame _ingest_plain does not take."""
        tab = self.tab
        dropped = 0
        kept: List[dict] = []
        sizes: List[int] = []
        keep, keep_size, observed, high_set = kept.append, sizes.append, _OBSERVED_TYPES, _HIGH_VALUE_SET
        confirm, health = isinstance(tab.device, _TabDevice), tab.health  # a device's reports wait for the browser
        n_high, n_other = self._window_high, self._window_count
        last_doc: Any = None  # a frame's events mostly share their document: its checks run once
        doc = ""
        for index, raw in enumerate(events):
            etype = raw.get("type") if raw.__class__ is dict or isinstance(raw, dict) else None
            if etype.__class__ is not str and not isinstance(etype, str):
                tab.store.note_blind_spot("malformed-event")
                continue
            if len(etype) > 64:
                etype = etype[:64]
            if etype.startswith(_DAEMON_ONLY):  # only the app's middleware, or a watched store, reports these
                tab.store.note_blind_spot("forged-server-event")
                continue
            # Ordinary events share `cap` per second; high-value ones (requests, errors, signals...) have their own.
            if etype in high_set:
                n_high += 1
                over = n_high > cap
            else:
                n_other += 1
                over = n_other > cap
            if over:
                dropped += 1
                continue
            data = raw.get("data")
            if data.__class__ is not dict and not isinstance(data, dict):
                data = {} if data is None else {"value": data}  # downstream code reads fields: an object each
            if etype == "net.request" and _malformed_call(data):  # refused, a blind spot in its place
                keep(_refused_report(tab.store, tab.id, data, now + index * 0.001))
                keep_size(64)
                continue
            if etype == "net.request" and "stackFrom" in data:
                data = {k: v for k, v in data.items() if k != "stackFrom"}  # only the browser's record says it
            value = raw.get("documentId")
            has_doc = value is not None and value == last_doc  # only ever a string, so only a string equals it
            if not has_doc and value is not None and isinstance(value, str):
                last_doc, doc, has_doc = value, value[:64], True
                if tab.arriving is not None and doc == tab.arriving[0]:
                    tab.arriving = None
            pt, action = raw.get("t"), raw.get("actionId")
            has_pt = pt.__class__ is float or isinstance(pt, (int, float))
            # a microsecond apart: every event has its own cursor, so an answer can stop between two
            if has_pt and has_doc and action is None:  # most events: built whole, `seq` (the store's) last
                event = {"t": now + index * 0.001, "type": etype, "data": data, "pt": pt, "doc": doc, "seq": 0}
            else:
                event = {"t": now + index * 0.001, "type": etype, "data": data}
                if has_pt:
                    event["pt"] = pt
                if action is not None and isinstance(action, str):
                    event["actionId"] = action[:32]
                if has_doc:
                    event["doc"] = doc
            if confirm and self._must_confirm(event):
                self.held.hold(event, size)
                continue
            if etype in observed or health.dialog_open is not None:  # from any other, _observe learns nothing
                self._observe(event)
            value = _event_bytes(data)
            keep(event)
            keep_size(value if value >= size else size)
        self._window_high, self._window_count = n_high, n_other
        tab.store.add_frame(kept, sizes)
        if dropped:
            self._window_sampled += dropped
            tab.store.note_sampled(dropped, now)

    def _ingest_plain(self, events: List[Any], now: float, frame_bytes: int, cap: int) -> bool:
        """The frame path's common case, the frame taken whole in a few passes instead of a loop of checks
        per event: a plain frame (_plain_frame) with none of its events over the caps, none a device
        must confirm, and no dialog open.  It stores what _ingest_each would, sized as one run
        (_EventStore.add_run) rather than event by event; False, having changed nothing, otherwise."""
        tab = self.tab
        plain = _plain_frame(events, frame_bytes)
        n = len(events)
        if plain is None or tab.health.dialog_open is not None or self._window_high + plain.high > cap or \
                self._window_count + n - plain.high > cap:
            return False
        if "net.request" in plain.counts and (tab.device is not None or any(
                _malformed_call(d) or "stackFrom" in d
                for t, d in zip(plain.types, plain.datas) if t == "net.request")):
            return False  # a device confirms what its page reports; a malformed report is refused one by one
        self._window_high += plain.high
        self._window_count += n - plain.high
        if tab.arriving is not None and plain.doc == tab.arriving[0]:
            tab.arriving = None
        doc = plain.doc
        built = [{"t": now + index * 0.001, "type": etype, "data": data, "pt": pt, "doc": doc, "seq": seq}
                 for index, seq, etype, data, pt in zip(range(n), tab.store.cursors(n), plain.types, plain.datas,
                                                        plain.pts)]
        for event in built if plain.observed else ():
            if event["type"] in _OBSERVED_TYPES:
                self._observe(event)
        tab.store.add_run(built, plain.types, plain.counts, 3 * frame_bytes + 512 * n)
        return True

    def _next_sampling_window(self, now: float, cap: int) -> None:
        """A new second of the events-per-second cap: the last one's drops become one blind spot."""
        if self._window_sampled:
            self.tab.store.add({"t": now, "type": "blind-spot", "data": {
                "reason": "sampled", "count": self._window_sampled,
                "detail": "the page sent more than %d events/s; churn events were dropped" % cap}}, 64)
        self._window_start = now
        self._window_count = 0
        self._window_high = 0
        self._window_sampled = 0

    # -- a device's page reports, checked against the browser's own record -----------------
    def _must_confirm(self, event: dict) -> bool:
        """In a device, a request the page reports (fetch, XHR, beacon, a document load) counts only
        once the browser's network record shows it, and then as the browser says it (_browser_made): a
        page script can forge an event into its SDK's socket, but not make the browser have made
        the request, nor change what the browser saw of it."""
        if not isinstance(self.tab.device, _TabDevice) or event["type"] != "net.request":
            return False
        return bool(self.held) or not self._browser_made(event, False)  # a held one first: the page's order

    def unconfirmed(self) -> List[dict]:
        return self.held.pending()

    def admit_held(self, confirmed_only: bool) -> None:
        """Let held reports through in the page's order (_HeldReports.release)."""
        self.held.release(confirmed_only)

    # -- what a kept event teaches the tab ------------------------------------
    def _browser_made(self, event: dict, late: bool) -> bool:
        """Did the tab's device's browser make the request a page report names?  If so, the report now
        says what the browser saw (_NetRecord.confirm), and a page that said otherwise is named."""
        tab = self.tab
        said = tab.device.net.confirm(event["data"], late) if isinstance(tab.device, _TabDevice) else None
        if said:
            self.held.misreported(event["data"], said)
        return said is not None

    def _admit(self, event: dict, size: int) -> None:
        """A held report the browser confirmed joins the store as of now (_HeldReports.release), with
        `came`: when the page sent it (whether an act prompted it is judged by that)."""
        tab = self.tab
        event["came"], event["t"] = event["t"], tab.clock()
        self._observe(event)
        tab.store.add(event, size)

    def _page_dialog(self, data: dict, t: float) -> None:
        """The SDK saw a dialog open or close in a person's tab (_TabHealth.page_dialog): while it is open,
        commands fail fast and waiting ones are failed (the page cannot answer).  In a device the
        device answers dialogs itself (_answer_device_dialog), so these are only kept."""
        tab = self.tab
        if tab.device is not None:
            return
        kind = tab.health.page_dialog(data, t)
        if kind is None:
            return
        _emit(_bridge_log, logging.INFO, "tab_dialog_open", sessionId=tab.id, dialogType=kind)
        why = tab.not_answering() or "a dialog is open"
        tab.pending.fail(lambda: ToolError(why + "; whether the command finished is not known",
                                            "ask the person to close the dialog in the browser, then check",
                                            code="dialog_open"))


    def _observe(self, event: dict) -> None:
        """What the session learns from one kept event beyond storing it: open requests (pending until
        answered), a document request's status hidden behind redirects, the tab's visibility and focus,
        its URL after a route change, and the page's own blind spots."""
        tab = self.tab
        etype = event["type"]
        data = event["data"] if isinstance(event["data"], dict) else {}
        health = tab.health
        if etype == "page.dialog":
            self._page_dialog(data, event["t"])
        elif health.dialog_open is not None:
            health.dialog_open = None  # the page runs again, so its dialog closed
        if etype in ("net.request", "net.pending", "net.ws"):
            tab.bridge.mark_fault(tab, event)  # faulted: true only for a fault of this tab
        if etype == "net.pending" and data.get("requestId"):
            tab.requests.started(event, data)
        elif etype == "net.request" and data.get("requestId"):
            tab.requests.answered(event)
            _take_wire_status(data)
            _hide_redirected_status(data)
        elif etype == "page.health":
            health.hidden = bool(data.get("hidden"))
            health.focused = bool(data.get("focused", True))
        elif etype == "route.change" and isinstance(data.get("to"), str):
            tab.url = data["to"][:4096]
        elif etype == "blind-spot":
            try:
                count = int(data["count"]) if data.get("count") is not None else 1
            except (TypeError, ValueError, OverflowError):  # OverflowError: an infinity (_loads_frame)
                count = 1
            tab.store.note_blind_spot(str(data.get("reason", "unknown")), count, str(data.get("detail") or ""))


class _TabCommands:
    """The commands the daemon sends a tab: each waits for the page's answer within its budget, a person's
    tab blocked by a dialog is not sent one, and in a device an act's real input is allowed only while
    the act runs (the page's replies resolve them: _BrowserSession.resolve_command)."""

    def __init__(self, tab: "_BrowserSession") -> None:
        self.tab = tab

    async def send(self, name: str, args: dict, timeout: float = COMMAND_TIMEOUT_S) -> Any:
        """Send one command to the page and return its result, waiting at most `timeout` and never past
        the tool call's `timeout_ms`; a person's tab blocked by an open dialog fails at once.  ToolError
        when the tab is gone, does not answer (saying whether it is still heard from) or refuses (with
        the page's code when it is a known one)."""
        tab = self.tab
        handler = tab.handler
        if handler is None:
            raise ToolError("the tab %s disconnected before %s could run." % (tab.id, name),
                            "call reticle_sessions and retry on the live tab", code="tab_disconnected")
        if tab.health.dialog_open is not None and tab.device is None:
            raise ToolError("command '%s' was not sent: %s." % (name, tab.not_answering()),
                            "ask the person to close the dialog in the browser, then retry", code="dialog_open")
        timeout = _command_budget(min(timeout, STUCK_COMMAND_S) if tab.health.unanswered is not None else timeout,
                                  tab.clock())
        cid, fut = tab.pending.open()
        device = tab.device if name in ("act", "act_sequence") else None
        if device is not None:  # in a device the SDK asks the daemon for real input (Devices section)
            args = dict(args, input="cdp")
            device.acting += 1
            device.dialog_policy = _dialog_policy(args)
        handler.send_json({"kind": "command", "id": cid, "sessionId": tab.id, "name": name, "args": args})
        try:
            reply = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            tab.health.unanswered = (tab.clock(), name)
            note = ""
            if tab.last_seen_ms() <= 2000:
                note = " The page is alive (heard %d ms ago) but did not answer this command." % tab.last_seen_ms()
            raise ToolError("command '%s' timed out after %d ms.%s" % (name, timeout * 1000, note),
                            "reticle_sessions shows the tab's health; reload the page if it is stuck (in a device: "
                            "reticle_navigate {reload: true})", code="not_answering") from None
        finally:
            tab.pending.close(cid)
            if device is not None:
                device.acting -= 1
                if not device.acting:
                    device.dialog_policy = None
        return _command_result(reply)


class _TabDocuments:
    """The documents of a tab: the one it is on, one on its way (a new page said hello, its first events
    still travelling; a navigation a device's browser started), and waiting for the next one.  The
    document id and the arrival stay the tab's (everything reads them); this part moves them on."""

    def __init__(self, tab: "_BrowserSession") -> None:
        self.tab = tab

    def navigating(self) -> bool:
        """The page is leaving its document: it reported a navigation (a form post, a link) whose
        next document has not connected yet.  Judging the page now would judge the one going away."""
        tab = self.tab
        return tab.requests.document_since(tab.now() - NAV_WAIT_S * 1000.0)

    def arrived(self, hello: dict) -> None:
        """A hello on a live session.  From a new document, its first events (the request that
        brought it, with its status) travel in the frames after the hello: until one lands, or
        ARRIVAL_WAIT_MS pass, the tab is still between documents."""
        tab = self.tab
        doc = str(hello.get("documentId") or "")[:64]
        if doc and doc != tab.document_id:
            tab.arriving = (doc, tab.now() + ARRIVAL_WAIT_MS)
            tab.store.new_document()
        tab.document_id = doc or tab.document_id

    def between_documents(self) -> bool:
        """Is the tab between two documents: gone from its socket, a new document's first events still
        on their way, or a navigation on its way?  A question only: call expire_arrival() first."""
        tab = self.tab
        return tab.handler is None or tab.arriving is not None or self.navigating()

    def expire_arrival(self) -> None:
        """A new document whose first events did not come within ARRIVAL_WAIT_MS is no longer waited
        for, and the window says so (a blind spot), so a verdict that needed the request that brought
        it is unknown, not a false no."""
        tab = self.tab
        if tab.arriving is not None and tab.now() >= tab.arriving[1]:
            tab.store.add({"t": tab.now(), "type": "blind-spot", "data": {
                "kind": "arrival-unseen", "reason": "arrival-unseen", "count": 1, "documentId": tab.arriving[0],
                "detail": "the new page said hello but sent nothing within %d ms" % ARRIVAL_WAIT_MS}}, 128)
            tab.arriving = None

    async def next_document(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the tab's next document to connect.
        False when the tab closed, crashed, or its next document never came."""
        tab = self.tab
        _progress_note("waiting for the next document of tab %s to connect" % tab.id)
        until = tab.now() + timeout * 1000.0
        while True:
            self.expire_arrival()
            if not self.between_documents():
                return True
            left = self.back_within((until - tab.now()) / 1000.0)
            if left <= 0 or getattr(tab.device, "lost", None):  # a device whose browser went: none will come
                return False
            if tab.handler is None:  # waited for whole, in slices: a device's browser may be found gone meanwhile
                back_by = tab.now() + left * 1000.0
                while not await tab.bridge.wait_back(tab, min(left, 0.25)):
                    left = (back_by - tab.now()) / 1000.0
                    if left <= 0 or getattr(tab.device, "lost", None):
                        return False
            else:
                await tab.wait_change(min(0.05, left))

    def back_within(self, seconds: float) -> float:
        """How long (s) to wait for the tab's next document, at most `seconds`.  With the script tag a page's
        SDK connects within a moment of the old page going, so a tagged tab whose socket left waits only
        until STRANDED_MS after that (then it is stranded: see stranded()); a device's tab, as given."""
        tab = self.tab
        if tab.handler is None and tab.device is None and tab.left_at is not None:
            return min(seconds, (tab.left_at + STRANDED_MS - tab.now()) / 1000.0)
        return seconds

    def stranded(self) -> Optional[str]:
        """What a tagged tab left for when it is stranded on a page without the script tag (its socket
        left STRANDED_MS ago and no document came back), or None: the document request it made last,
        with the status the server gave it when a record says."""
        tab = self.tab
        if tab.handler is not None or tab.device is not None or tab.left_at is None \
                or tab.now() - tab.left_at < STRANDED_MS:
            return None
        docs = [e for e in tab.window(tab.left_at - NAV_WAIT_S * 1000.0)
                if e["type"] in ("net.pending", "net.request") and (e.get("data") or {}).get("initiator") == "document"]
        if not docs:
            return "another page"
        d = docs[-1]["data"]
        path = urllib.parse.urlsplit(str(d.get("url") or "")).path or "/"
        status = d.get("status")
        if status is None:
            status = next((e["data"].get("status") for e in reversed(tab.window(docs[-1]["t"]))
                           if e["type"] == "server.request" and e["data"].get("path") == path), None)
        return "%s %s%s" % (str(d.get("method") or "GET").upper(), path[:200],
                            " → %s" % status if status is not None else "")

    def document_on_its_way(self, rid: str, method: str, url: str) -> None:
        """A device's browser started loading a new document in this tab (_NetRecord._on_document):
        recorded as the SDK records a form submission it announces, an open document request, so
        the tab is between documents (navigating) until the next document connects."""
        tab = self.tab
        if tab.requests.document_on_its_way(rid, method, url, tab.now()):
            tab._wake()

    def document_not_coming(self, rid: Optional[str]) -> None:
        """The browser's navigation `rid` (every one, with None) brought no document after all
        (_OpenRequests.document_not_coming)."""
        tab = self.tab
        tab.requests.document_not_coming(rid)
        tab._wake()


def _asked_at(store: _EventStore, doc: Any, mark: Any) -> Optional[float]:
    """When (the daemon's clock) the page announced the request a server record answers (its net.pending, by
    document and mark), or None when that is not in the store (yet)."""
    return next((e["t"] for e in store.query(prefix="net.pending") if e.get("doc") == doc
                 and mark is not None and str(e["data"].get("serverMark")) == str(mark)), None)


class _BrowserSession:
    """One tab, whichever socket carries it: its identity, the document it is on and one on its way,
    its health, act marks, open requests and snapshots (each a part of its own, above), what the
    verdict rules read of it (now, window, known, floor), its frames coming in (its intake, below)
    and the commands the daemon sends it (command; the page's replies resolve them)."""

    def __init__(self, bridge: _TabHost, handler: _Socket, hello: dict) -> None:
        """A tab as the daemon knows it, from its hello: the socket, the event store and the parts,
        the sampling windows of its frames, and the document it is on."""
        self.bridge = bridge
        self.clock: Callable[[], float] = bridge.clock  # the daemon's one clock (_clock_ms)
        self.handler: Optional[_Socket] = handler
        self.id = hello["sessionId"]
        self.generation = 0
        self.connected_at = self.clock()
        self.first_connected_at = self.connected_at
        self.reconnects = 0
        self.store = _EventStore(self.clock)
        self.pending = _PendingCommands()
        self.marks = _ActMarks()
        self.requests = _OpenRequests()
        self.health = _TabHealth(self.clock)
        self.snapshots = _SnapshotCache()
        self.left_at: Optional[float] = None       # when the last socket went away (the daemon's clock)
        # the frame path's pacing (_Bridge.frame_pause), on the daemon's clock
        self.frame_window = [0.0, 0]  # [start (clock ms), frame bytes read in it] for this tab
        self.paused_ms = 0.0          # how long the bridge stopped reading this tab (_Bridge.frame_pause)
        self._changed: Optional[asyncio.Future] = None
        self.device: Optional[_TabDevice] = None  # set when a device the daemon started owns this tab
        self.origin = _socket_origin(handler)  # the browser's Origin of its socket: only it may take the tab over
        self.document_id = str(hello.get("documentId") or "")[:64]
        # (documentId, until): a hello whose events are still on the way
        self.arriving: Optional[Tuple[str, float]] = None
        self.server_tickets = _ServerTickets()   # the one-use marks the SDK puts on its requests (Server truth)
        self.server_seen = 0                      # records the app's middleware reported for this tab
        self.server_otel = 0                      # of them, records made from OpenTelemetry spans
        self.update_identity(hello)
        self.intake = _TabIntake(self)  # after the store and the parts it feeds
        self.commands = _TabCommands(self)
        self.documents = _TabDocuments(self)

    def update_identity(self, hello: dict) -> None:
        self.url = str(hello.get("url", ""))[:4096]
        self.title = str(hello.get("title", ""))[:512]
        adapters = hello["adapters"] if isinstance(hello.get("adapters"), list) else []
        self.adapters = [str(a)[:128] for a in adapters[:32]]
        self.sdk_version = str(hello.get("sdkVersion", ""))[:64]
        self.has_capabilities = bool(hello.get("hasCapabilities"))
        self.last_seen = self.clock()

    # -- health -------------------------------------------------------------
    def last_seen_ms(self) -> int:
        return int(self.clock() - self.last_seen)

    def throttled(self) -> bool:
        return self.health.throttled(self.last_seen_ms())

    def not_answering(self) -> Optional[str]:
        """Why the page does not answer commands, or None (_TabHealth.not_answering)."""
        return self.health.not_answering(self.last_seen_ms())

    def refuse_if_throttled(self, refuse: Optional[bool]) -> None:
        if refuse and self.throttled():
            raise ToolError("the tab is throttled (hidden, or silent for %d ms); nothing was driven."
                            % self.last_seen_ms(), "bring the tab to the front and retry", code="tab_throttled")

    def note_dialog(self, record: dict) -> None:
        """A dialog the device answered: kept for the answers (_with_health) and as an event."""
        now = self.clock()
        self.health.dialogs.append((now, record))
        self.store.add({"t": now, "type": "dialog", "data": dict(record)}, 256)
        self._wake()

    # -- documents ------------------------------------------------------------
    def now(self) -> float:
        return self.clock()

    def open_since(self, t: float) -> List[dict]:
        """Requests still open that started at or after `t` (each with `startedAt`)."""
        return self.requests.since(t)

    # -- what the verdict rules read -----------------------------------------
    def unconfirmed(self) -> List[dict]:
        """A device's page reports still waiting for its browser's confirmation (_TabIntake)."""
        return self.intake.unconfirmed()

    def known(self, floor: float) -> "_Known":
        parts = urllib.parse.urlsplit(self.url)
        origin = "%s://%s" % (parts.scheme, parts.netloc) if parts.scheme and parts.netloc else ""
        before = self.store.query(max(0.0, floor - BACKGROUND_MS), floor, prefix="net.request")
        seen = collections.Counter(_call_label(e["data"]) for e in before)
        writes = {_call_label(e["data"]) for e in before if _is_write(e["data"])}
        background = tuple(sorted(label for label, n in seen.items() if n >= 2 or label in writes))
        # a timer's requests: made twice or more before, each on its own (not within 2 s after an act)
        acts = self.marks.acts()
        unprompted = collections.Counter(_call_label(e["data"]) for e in before if not any(
            0 <= e.get("came", e["t"]) - a <= 2000 for a in acts))
        known = _Known(self.requests.all(), self.store.blind_spot_counts(), self.store.loss_since(floor),
                       origin, background, self.store.page_blind_spots(), self.server_seen,
                       polled=tuple(sorted(label for label, n in unprompted.items() if n >= 2)))
        known.stuck = self.not_answering() or ""
        known.server_grace = self.server_grace()
        known.unconfirmed = self.unconfirmed()
        _server_knowledge(self, known)
        return known

    # -- cursors --------------------------------------------------------------
    @property
    def last_act(self) -> Optional[float]:
        """The cursor of the tab's last act, or None (_ActMarks)."""
        return self.marks.last_act

    def mark_act(self, action: Optional[str]) -> float:
        return self.marks.act(self.clock(), action)

    def note_act_page_time(self, since: float, result: Any) -> None:
        self.marks.note_page_time(since, result)

    def window(self, since: float, until: Optional[float] = None, prefix: Optional[str] = None) -> List[dict]:
        """Events from `since` on; when `since` is an act, none the page made before it; and no server record
        of a request the page made before `since` (a page load's record that came late is not the act's)."""
        events = [e for e in self.store.query(since, until, prefix) if e.get("asked", since) >= since]
        mark = self.marks.page_time(since)
        if mark is None:
            return events
        doc, pt = mark
        return [e for e in events if e.get("doc") != doc or "pt" not in e or e["pt"] >= pt]

    def mark_navigation(self) -> float:
        self.snapshots.clear()
        return self.marks.navigation(self.clock())

    def floor(self) -> float:
        """Events count from the last act or navigation on."""
        return self.marks.floor()

    # -- what the page answers ------------------------------------------------
    def resolve_command(self, msg: dict) -> None:
        self.health.unanswered = None  # the page answers again
        self.pending.resolve(msg)

    def fail_pending(self, why: str) -> None:
        self.pending.fail(lambda: _TabGone(why, "call reticle_sessions and retry on the live tab"))

    def add_server_record(self, rec: dict) -> dict:
        """What the app's server did for one of this tab's requests (Server truth section) -> its event."""
        self.server_seen += 1
        event = {"t": self.clock(), "type": "server.request", "data": rec}
        asked = _asked_at(self.store, rec.get("documentId"), rec.get("requestId"))
        if asked is not None:  # when the request it answers was made: a window from later leaves it out
            event["asked"] = asked
        self.store.add(event, 256 + len(_dumps(rec)))
        self._wake()
        return event

    def settle_server_record(self, event: dict) -> None:
        """A record tied by method, path and time (tying.py) has stood its time: a verdict may read it."""
        event["settled"] = True
        self._wake()

    def add_server_untied(self, data: dict) -> None:
        """No server record could be tied to one of this tab's document requests (tying.py): which one, why."""
        self.store.add({"t": self.clock(), "type": "server.untied", "data": data}, 256 + len(_dumps(data)))
        self._wake()

    def withdraw_server_record(self, event: dict, why: str) -> None:
        """A record tied to a request by method, path and time (tying.py) no longer counts: another fits
        that request too, or the request's own record came.  Its event stays, as `server.withdrawn`."""
        event["type"] = "server.withdrawn"
        event["data"]["withdrawn"] = why
        self._wake()

    def add_store_commit(self, data: dict) -> None:
        """What a watched store committed while this tab acted (Storage truth: stores.py)."""
        self.store.add({"t": self.clock(), "type": "store.commit", "data": data}, 256 + len(_dumps(data)))
        self._wake()

    def server_grace(self) -> float:
        """How long (ms) a marked request's record may follow its answer: longer once spans feed this
        tab, or come from a service seen answering this tab's origin (exporters batch them), else
        SERVER_GRACE_MS.  Spans of another app on the same daemon change nothing here."""
        otel = getattr(getattr(self.bridge, "hub", None), "otel", None)
        return OTEL_GRACE_MS if self.server_otel or (otel is not None and otel.serves(self.url)) else SERVER_GRACE_MS

    # -- waking ---------------------------------------------------------------
    def _wake(self) -> None:
        """Wake whoever waits for this tab's next event (wait_change)."""
        changed = self._changed
        if changed is not None and not changed.done():
            changed.set_result(None)

    async def wait_change(self, timeout: float) -> None:
        """Sleep until the next event arrives or `timeout` seconds pass."""
        if timeout <= 0:
            return
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._changed), timeout)
        except asyncio.TimeoutError:
            pass


# ---- one tab: its socket, its state and its commands ----

    # -- frames in -------------------------------------------------------------
    def ingest(self, events: List[Any], frame_bytes: int) -> None:
        """Take one frame's events from the page (_TabIntake.ingest)."""
        self.intake.ingest(events, frame_bytes)

    # -- commands -------------------------------------------------------------
    async def command(self, name: str, args: dict, timeout: float = COMMAND_TIMEOUT_S) -> Any:
        """Send one command to the page and return its result (_TabCommands.send)."""
        return await self.commands.send(name, args, timeout)


def _dialog_policy(cmd: dict) -> Optional[dict]:
    """How an act's dialogs are answered: {"accept", "promptText"} from its args' `dialog`
    ("accept" | "dismiss"), or None (dismiss)."""
    raw = cmd.get("steps")
    steps: List[Any] = raw if isinstance(raw, list) else [cmd]
    for step in steps:
        act_args: Dict[str, Any] = {}
        if isinstance(step, dict) and isinstance(step.get("args"), dict):
            act_args = step["args"]
        choice = act_args.get("dialog")
        if choice in ("accept", "dismiss"):
            return {"accept": choice == "accept", "promptText": str(act_args.get("promptText", ""))}
    return None
