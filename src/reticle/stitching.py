"""Stitching server records into tabs.

Each record the app's middleware sends, and each set of OpenTelemetry spans, goes into the window of
the tab that was issued its mark, under the document and id it was issued for, once; a request the
tab's own page did not send is refused.  A navigation's record whose mark no tab holds is tied to a
tab's document request by method, path and time when exactly one fits (tying.py).
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any, Dict, List, Optional, Protocol, Tuple

from .bridge import _Bridge
from .errors import _HttpRefusal
from .middleware import SERVER_MAX_RECORDS, SERVER_REDIRECT_MS, SERVER_TICKET_SITES
from .server_records import _clean_job_record, _clean_server_record
from .tab import _BrowserSession
from .tying import TIED_BY, _fact, _origin_key, _Ties


class _StitchHost(Protocol):
    """What stitching asks of the daemon (the Hub): its tabs, its clock, the server-truth counters and
    the ties of records that carry no mark a tab holds (tying.py)."""

    @property
    def bridge(self) -> _Bridge: ...

    @property
    def server_truth(self) -> Dict[str, Any]: ...

    @property
    def server_jobs(self) -> Dict[str, Tuple[float, dict]]: ...

    @property
    def ties(self) -> _Ties: ...

    def clock(self) -> float: ...


def _server_sender_refused(rec: dict, owner: _BrowserSession) -> Optional[str]:
    """Why a record's request is not its tab's own, or None.  The browser says who sent a request
    (Sec-Fetch-Site, Origin, Referer; no page can set them): only the tab's own origin, or the user,
    counts.  A page on another port of the same host can read a navigation's cookie mark (cookies
    ignore ports) and send it along, but its requests are `same-site`, or carry its own origin."""
    tab = urllib.parse.urlsplit(owner.url)
    origin = "%s://%s" % (tab.scheme, tab.netloc)
    site, sender = rec.pop("site"), rec.pop("from")
    if rec["via"] == "cookie" and rec["host"].lower() != tab.netloc.lower():
        return "a cookie mark on a request to another host than the tab's (%s)" % rec["host"]
    if site:
        return None if site in SERVER_TICKET_SITES else "a request sent by a %s page (Sec-Fetch-Site)" % site
    if sender:
        return None if sender.lower() == origin.lower() else "a request sent by %s" % sender
    return "a cookie mark on a request whose sender the browser did not name" if rec["via"] == "cookie" else None


def _replaces_spans(hub: _StitchHost, secret: str, rec: dict, sessions: List[Any]) -> bool:
    """A middleware's record for a request whose mark its OpenTelemetry spans already spent (the exporter
    can be first on a loaded machine): the middleware's record, which sees commits, takes the spans'
    record's place under the same document and id (its late spans no longer join it) -> whether it did."""
    otel: Any = getattr(hub, "otel", None)
    spent = otel.done.get(secret) if otel is not None and rec["via"] == "header" else None
    if otel is None or spent is None or spent[1].get("source") != "otel" or spent[0] not in sessions:
        return False
    owner, old = spent[0], spent[1]   # (owner, record, the trace's kept spans)
    if _server_sender_refused(rec, owner) is not None:
        return False
    rec["documentId"], rec["requestId"] = old["documentId"], old["requestId"]
    old.clear()
    old.update(rec)  # the event the tab stored holds this dict: its window now reads the middleware's record
    del otel.done[secret]
    owner.server_otel = max(0, owner.server_otel - 1)
    owner._wake()
    return True


JOB_WAIT_MS = 10_000   # a job's record that came before its request's waits this long for it


def _add_job(rec: dict, job: dict, after_ms: float) -> bool:
    """Add what a job did to the record of the request that started it (its writes, marked with the job's
    thread and when it ended; its exception, unless the request raised one; what it logged) -> whether the
    record names that job."""
    entry = next((q for q in rec.get("queued") or () if q["job"] == job["job"]), None)
    if entry is None or entry.get("done"):
        return False
    entry.update(done=True, ms=job["ms"], afterMs=round(max(0.0, after_ms)))
    room = max(0, 50 - len(rec["writes"]))
    rec["writes"] = rec["writes"] + [dict(w, job=job["thread"]) for w in job["writes"][:room]]
    if job["exception"] and not rec.get("exception"):
        rec["exception"] = job["exception"]
    rec["logged"] = (rec.get("logged") or []) + job["logged"][:10]
    return True


def _stitch_job(hub: _StitchHost, raw: dict, sessions: List[Any], now: float) -> bool:
    """A job's record: into the record of the request that started it, in whichever tab holds it; one that came
    first waits JOB_WAIT_MS for it (_jobs_waiting) -> whether it joined a record now."""
    job = _clean_job_record(raw)
    if job is None:
        return False
    for owner in sessions:
        for e in reversed(owner.store.query(prefix="server.request")):
            if _add_job(e["data"], job, now - e["t"]):
                owner._wake()
                return True
    for key, (t, _) in list(hub.server_jobs.items()):
        if now - t > JOB_WAIT_MS:
            del hub.server_jobs[key]
    if len(hub.server_jobs) < 256:
        hub.server_jobs[job["job"]] = (now, job)
    return False


def _jobs_waiting(hub: _StitchHost, rec: dict) -> None:
    """A request's record that names jobs whose records came before it: what they did joins it now."""
    for q in rec.get("queued") or ():
        waiting = hub.server_jobs.pop(q["job"], None)
        if waiting is not None:
            _add_job(rec, waiting[1], 0.0)


def _tie_record(hub: _StitchHost, rec: dict, at: Any, sessions: List[Any], now: float) -> bool:
    """A navigation's record (its mark rode in a cookie) whose mark no tab holds, filed under the one
    document request of one tab that its method, path and time fit, and whose page the browser says
    sent it (tying.py), marked `matchedBy` -> whether it was.  `at` is when the request began on the
    wall clock (ms; a middleware too old to say it is never tied)."""
    if rec["via"] != "cookie" or not isinstance(at, (int, float)) or isinstance(at, bool):
        return False
    start = at - (time.time() * 1000.0 - hub.clock())
    origin = _origin_key(rec["host"], None)
    said = dict(rec)  # (the record as it came: the sender's fields leave it once it is filed)

    def sent_by(tab: Any) -> bool:
        return _server_sender_refused(dict(said), tab) is None
    fact = _fact("mw:%s:%s" % (rec["mark"], at), origin, rec["method"], rec["path"], start,
                 start + (rec["ms"] or 0.0), "middleware", sent_by)
    req = hub.ties.tie(sessions, fact, now) if fact is not None else None
    if fact is None or req is None:
        return False
    _server_sender_refused(rec, req["tab"])  # (takes the sender's fields out of the record)
    rec.pop("mark")
    rec["documentId"], rec["requestId"], rec["matchedBy"] = req["doc"], req["mark"], TIED_BY
    hub.ties.filed(fact, req, req["tab"].add_server_record(rec), hub.bridge.every_tab)
    return True


def _stitch_server_records(hub: _StitchHost, body: Any) -> dict:
    """Put each record into the window of the tab that was issued its mark, under the document and
    id the mark was issued for, once.  A mark no tab holds (a request made outside any Reticle tab,
    a stale tab, a mark already spent) is counted as unmatched; a request the tab's own document did
    not send (another origin replaying a mark) is refused, counted, and spends nothing."""
    if not isinstance(body, dict) or not isinstance(body.get("records"), list):
        raise _HttpRefusal(400, "bad request", "expected a JSON object {records: [...], dropped?: int}")
    records = body["records"]
    if len(records) > SERVER_MAX_RECORDS:
        raise _HttpRefusal(413, "payload too large", "at most %d records per POST" % SERVER_MAX_RECORDS)
    sessions = hub.bridge.every_tab()
    stats = hub.server_truth
    dropped = body.get("dropped")
    if isinstance(dropped, int) and not isinstance(dropped, bool) and dropped > 0:
        stats["droppedByApps"] += dropped
        stats["lastDropAt"] = hub.clock()
    stitched = unmatched = invalid = refused = tied = 0
    now = hub.clock()
    for raw in records:
        if isinstance(raw, dict) and raw.get("job"):
            stitched += 1 if _stitch_job(hub, raw, sessions, now) else 0
            continue
        rec = _clean_server_record(raw)
        if rec is None:
            invalid += 1
            continue
        at = rec.pop("at", None)
        secret = rec["mark"]
        owner = next((s for s in sessions if s.server_tickets.holds(secret, now)), None)
        if owner is None and _tie_record(hub, rec, at, sessions, now):
            tied += 1
            continue
        rec.pop("mark")
        if owner is None and _replaces_spans(hub, secret, rec, sessions):
            stitched += 1
            continue
        if owner is None:
            unmatched += 1
            continue
        why = _server_sender_refused(rec, owner)
        if why is not None:
            refused += 1
            stats["lastRefused"] = "%s %s: %s" % (rec["method"], rec["path"][:200], why)
            continue
        redirected = rec["via"] == "cookie" and 300 <= (rec["status"] or 0) < 400
        tickets = owner.server_tickets
        if tickets.redirect_only(secret):
            if not redirected:
                unmatched += 1
                continue
            rec["documentId"], rec["requestId"] = tickets.take(secret)
        else:
            # a navigation's mark: the redirect's record and that of the page it led to may come in
            # either order (a WSGI record is sent when the server closes the body), so the first of
            # the two leaves the mark good for the other (a non-3xx first: for a 3xx only)
            rec["documentId"], rec["requestId"] = tickets.take(
                secret, now + SERVER_REDIRECT_MS if rec["via"] == "cookie" else None, not redirected)
        _jobs_waiting(hub, rec)
        if rec["via"] == "cookie":  # a record of spans tied to this navigation by time gives way to its own
            hub.ties.replaced(owner, rec["documentId"], rec["requestId"])
        owner.add_server_record(rec)
        stitched += 1
    stats["received"] += len(records)
    stats["stitched"] += stitched
    stats["tied"] += tied
    stats["unmatched"] += unmatched
    stats["invalid"] += invalid
    stats["refused"] += refused
    return {"stitched": stitched, "tied": tied, "unmatched": unmatched, "invalid": invalid, "refused": refused}
