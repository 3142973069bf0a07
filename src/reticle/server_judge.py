"""Judging server truth.

The `server` predicate and the server's contradictions: what the app's server did for the tab's
requests (its records, rows and commits), judged in the daemon.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from .constants import RETRY_GRACE_MS, SERVER_GRACE_MS, TIE_SETTLE_MS
from .events import _WRITE_METHODS, _call_label
from .middleware import _OP_MAY_BE, _SAVEPOINT_NOTE
from .observation import _Observation, _leaves
from .tab import _Known
from .util import _short


# ---- how each kind describes itself ----


# ---- the server kind: a pure judge over the window's server records (Server truth section) ----

def _server_records(window: List[dict]) -> List[dict]:
    return [e["data"] for e in window if e["type"] == "server.request"]


def _jobs_running(window: List[dict]) -> List[str]:
    """The jobs the window's requests started on threads of their own whose records have not come:
    "POST /notes/later's job on thread Thread-3"."""
    return ["%s's job on thread %s" % (_server_label(r), q["thread"]) for r in _server_records(window)
            for q in r.get("queued") or () if not q.get("done")]


def _server_label(r: dict) -> str:
    return "%s %s" % (r.get("method") or "?", r.get("path") or "/")


def _writes_text(writes: List[dict]) -> str:
    """" (insert notes ×1 [key 5], update tags ×≥1)": what writes did, for a server line."""
    return " (%s)" % ", ".join(
        "%s %s ×%s%s" % (w["op"], w["table"], "≥1" if w.get("rows") is None else w["rows"],
                         " [key %s]" % ", ".join(str(k) for k in w["keys"][:5]) if w.get("keys") else "")
        for w in writes[:3]) if writes else ""


def _server_line(r: dict) -> str:
    """One request as the server saw it: "POST /profile → 200, view save_profile, 0 writes, no exception"."""
    writes = [w for w in r.get("writes") or [] if w.get("committed")]
    rolled = [w for w in r.get("writes") or [] if w.get("committed") is False]
    unsure = [w for w in r.get("writes") or [] if w.get("committed") is None]
    parts = ["%s → %s" % (_server_label(r), r.get("status"))]
    if r.get("view"):
        parts.append("view %s" % r["view"])
    if r.get("dbUnread") and not r.get("writes"):  # spans Reticle cannot read: not "0 writes" either
        parts.append("writes unknown (instrumentation %s not read)" % "; ".join(r["dbUnread"]))
    elif r.get("dbTraced") is False:  # spans without database instrumentation: not "0 writes"
        parts.append("writes unknown (no database spans)")
    elif _server_unwatched(r):
        parts.append("writes not watched")
    else:
        blind = (" seen (not watched: %s)" % ", ".join(r["unseen"]) if r.get("unseen") else
                 " seen (not read: %s)" % "; ".join(r["dbUnread"]) if r.get("dbUnread") else "")
        parts.append("%d write%s%s%s" % (len(writes), "" if len(writes) == 1 else "s", _writes_text(writes), blind))
    if unsure:
        parts.append("%d write%s of unknown commit%s" % (len(unsure), "" if len(unsure) == 1 else "s",
                                                          _writes_text(unsure)))
    if rolled:
        parts.append("%d rolled back" % len(rolled))
    exc = r.get("exception")
    if exc:
        parts.append("raised %s: %s%s%s" % (exc.get("type"), _short(exc.get("message") or "", 80),
                                            " at %s" % exc["frames"][0] if exc.get("frames") else "",
                                            " after its answer, in %s" % exc["after"] if exc.get("after") else ""))
    else:
        parts.append("no exception")
    logged = [e for e in r.get("logged") or [] if not (exc and e.get("exception"))]
    if logged:
        parts.append("logged %s %s: %s" % (logged[0].get("level"), logged[0].get("logger"),
                                           _short(logged[0].get("message") or "", 80)))
    for q in r.get("queued") or ():  # the jobs it started on threads of their own (their writes are above)
        done = [w for w in r.get("writes") or () if w.get("job") == q["thread"]]
        parts.append("its job on thread %s %s" % (q["thread"], "ended %.1f s after the answer, %d write%s" % (
            q.get("afterMs", 0) / 1000.0, len(done), "" if len(done) == 1 else "s") if q.get("done")
            else "had not ended"))
    if r.get("source") == "otel":  # where the facts came from (the middleware's records say nothing more)
        parts.append("from OpenTelemetry spans")
    if r.get("matchedBy"):  # tied to the tab's document request by what it did, not by a mark (tying.py)
        parts.append("matched by %s, %s" % (r["matchedBy"], "the request carried no mark" if r.get("source") == "otel"
                                           else "the request's mark was no tab's"))
    return ", ".join(parts)


def _server_unwatched(r: dict) -> bool:
    """Did nothing watch the database writes of the app that served r (no Django middleware,
    watch_sqlalchemy or watch_sqlite3 in its process)?  Its "0 writes" would be no evidence."""
    return r.get("watched") == []


def _writes_observed(r: dict) -> bool:
    """Are the database writes of the app that served r observed, whatever the source: the middleware
    watched its database (Django's ORM, SQLAlchemy, sqlite3), or the service's OpenTelemetry spans have
    shown database statements (dbTraced), and its trace holds no database span Reticle could not read
    (dbUnread)?  Only then is "0 writes" evidence of writing nothing."""
    if r.get("source") == "otel":
        return bool(r.get("dbTraced")) and not r.get("dbUnread")
    return bool(r.get("watched"))


_SERVER_WATCH = ("watch them: Django's ORM through reticle.DjangoMiddleware, SQLAlchemy with "
                 "reticle.watch_sqlalchemy(engine), a raw sqlite3 connection with "
                 "reticle.watch_sqlite3(conn)")


def _server_rows(r: dict, spec: dict, committed: Optional[bool] = True) -> int:
    """Rows the request wrote that match spec {table?, op?}: committed writes only (or, with
    committed False, only those rolled back; None, only those whose commit is unknown); a statement
    that changed 0 rows wrote nothing, and one whose driver gives no row count counts 1."""
    n = 0
    for w in r.get("writes") or []:
        if w.get("committed") is not committed:
            continue
        if spec.get("op") and w.get("op") != spec["op"]:
            continue
        if spec.get("table") and w.get("table", "").lower().split(".")[-1] != spec["table"].lower().split(".")[-1]:
            continue
        if "key" in spec and not _server_keys_hold(w, spec["key"]):
            continue
        n += 1 if w.get("rows") is None else w["rows"]
    return n


def _server_key_set(key: Any) -> set:
    return {str(k) for k in (key if isinstance(key, list) else [key])}


def _server_keys_hold(w: dict, key: Any) -> bool:
    """Did write w name its rows by exactly these primary key values (compared as text: 3 is "3")?"""
    return isinstance(w.get("keys"), list) and _server_key_set(w["keys"]) == _server_key_set(key)


def _server_match(r: dict, p: dict) -> Optional[bool]:
    """Does record r satisfy `server` leaf p, whatever what cannot be seen did?  True or False; None
    when that decides it: a write whose commit is unknown (kept, the leaf holds; rolled back, it does
    not, or the other way round), a write whose kind its span does not say (an ORM's save: an insert
    or an update) when the leaf asks for a kind, or, when the leaf counts writes, a database connection
    the app may have written through unseen (the record's `unseen`) or a database span Reticle could
    not read (`dbUnread`)."""
    if not ("writes" in p or "committed" in p):
        return _server_matches(r, p)
    if not _server_matches(r, {k: v for k, v in p.items() if k not in ("writes", "committed")}):
        return False
    if len({_server_matches(v, p) for v in _server_variants(r, p.get("writes", {}).get("op"))}) > 1:
        return None
    found = _server_matches(r, p)
    if (r.get("unseen") or r.get("dbUnread")) and "writes" in p and (not found or "count" in p["writes"]):
        spec = p["writes"]
        if not found and "count" in spec and _server_rows(r, spec, p.get("committed") is not False) > spec["count"]:
            return False   # more than asked was seen: nothing unseen undoes that
        return None
    if r.get("dbUnread") and "writes" not in p and not found:
        return None   # a commit (or rollback) asked for, none seen, and a span not read may hold it
    return found


def _server_variants(r: dict, op: Optional[str]) -> List[dict]:
    """Record r as each of what it may have been: its writes of unknown commit all kept, then all rolled
    back; and where the leaf asks for a kind of write (`op`), its writes whose kind the span did not say
    (_OP_MAY_BE) all of that kind, then all of another they may be."""
    writes = r.get("writes") or []
    commits: List[Optional[bool]] = [True, False] if any(w.get("committed") is None for w in writes) else [None]
    vague = op is not None and any(w.get("op") in _OP_MAY_BE for w in writes)

    def as_(w: dict, commit: Optional[bool], other: Optional[bool]) -> dict:
        w = dict(w)
        if commit is not None and w.get("committed") is None:
            w["committed"] = commit
        may = _OP_MAY_BE.get(w.get("op") or "")
        if other is not None and may:
            w["op"] = next(m for m in may if m != op) if other else op if op in may else may[0]
        return w
    return [dict(r, writes=[as_(w, commit, other) for w in writes])
            for commit in commits for other in ([False, True] if vague else [None])]


def _server_matches(r: dict, p: dict) -> bool:
    """Does record r satisfy the `server` leaf p's filters (method, urlContains, status, exception,
    logged, writes, committed)?  A record whose writes nobody watched satisfies no writes filter."""
    if p.get("method") and (r.get("method") or "").upper() != p["method"].upper():
        return False
    if p.get("urlContains") and p["urlContains"] not in (r.get("path") or ""):
        return False
    if "status" in p and r.get("status") != p["status"]:
        return False
    if "exception" in p and bool(r.get("exception")) != p["exception"]:
        return False
    if "logged" in p and bool(r.get("logged")) != p["logged"]:
        return False
    if ("writes" in p or "committed" in p) and _server_unwatched(r):
        return False    # what an unwatched app wrote is not known (see _judge_server)
    if "writes" in p:
        spec = p["writes"]
        n = _server_rows(r, spec, p.get("committed") is not False)
        if "count" in spec and n != spec["count"]:
            return False
        if "count" not in spec and n < spec.get("min", 1):
            return False
    elif "committed" in p:
        if p["committed"] and not _server_rows(r, {}, True):
            return False
        if not p["committed"] and not _server_rows(r, {}, False):
            return False
    return True


def _server_unreported(now: float, window: List[dict],
                       grace_ms: Optional[float] = None) -> Tuple[List[dict], List[dict]]:
    """The tab's marked requests in the window that no server record answers yet, as (awaiting,
    unreported): awaiting = still open, or answered less than grace_ms (SERVER_GRACE_MS; OTEL_GRACE_MS
    for a tab whose records come from batched spans) ago (the record may be on its way); unreported =
    answered longer ago than that.  A record answers the request the SDK put its mark on
    (net.pending's serverMark: the id the daemon issued with the mark).  A request a fault answered or
    aborted (reticle_fault, verify --teeth; not one it only delayed) never reached the server: no
    record is owed for it.  A document request no record could be tied to (a server.untied event:
    several fitted it by method, path and time) is unreported at once: no record is on its way."""
    grace = SERVER_GRACE_MS if grace_ms is None else grace_ms
    reported = {(r.get("documentId"), r.get("requestId")) for r in _server_records(window)}
    untied = {(e["data"].get("documentId"), e["data"].get("requestId")) for e in window if e["type"] == "server.untied"}
    done = {}
    faulted = set()
    for e in window:
        if e["type"] == "net.request" and e["data"].get("requestId"):
            done[str(e["data"]["requestId"])] = e["t"]
            if e["data"].get("faultAnswered"):
                faulted.add(str(e["data"]["requestId"]))
    awaiting: List[dict] = []
    unreported: List[dict] = []
    for e in window:
        d = e["data"]
        if e["type"] != "net.pending" or not d.get("serverMarked") or not d.get("requestId"):
            continue
        if (e.get("doc"), str(d.get("serverMark"))) in reported or str(d["requestId"]) in faulted:
            continue
        t = done.get(str(d["requestId"]))
        late = (e.get("doc"), str(d.get("serverMark"))) in untied or (t is not None and now - t >= grace)
        (unreported if late else awaiting).append(d)
    return awaiting, unreported


def _server_cookie_only(unreported: List[dict], known: "_Known", window: List[dict]) -> str:
    """Why a navigation's record never came once spans feed this daemon, or "": with the script tag a
    form post or link carries its mark only in a cookie (no page can set a navigation's headers), and
    OpenTelemetry reads trace context from headers alone, so its spans are tied to it by method, path
    and time only when exactly one fits (tying.py); none did, or several (the tab's server.untied)."""
    doc = next((d for d in unreported if d.get("initiator") == "document" and d.get("serverMark")), None)
    if doc is None or known.server_grace <= SERVER_GRACE_MS:
        return ""
    why = next((str(e["data"].get("why") or "") for e in window if e["type"] == "server.untied"
                and str(e["data"].get("requestId")) == str(doc["serverMark"])), "")
    return ("%s is a navigation: with the script tag its mark reaches the server only in a cookie, which "
            "OpenTelemetry does not read (no page can set a navigation's headers), so its spans are tied to this "
            "tab by method, path and time only when exactly one fits, and %s; open the page as a device "
            "(reticle_open), which adds the navigation's trace context" % (_call_label(doc), why or "none did"))


def _describe_server(p: dict) -> str:
    bits = ["server %s%s" % (p.get("method", "").upper() + " " if p.get("method") else "",
                             p.get("urlContains") or "request")]
    if "status" in p:
        bits.append("→ %d" % p["status"])
    if "exception" in p:
        bits.append("raising" if p["exception"] else "without an exception")
    if "logged" in p:
        bits.append("logging an error" if p["logged"] else "logging no error")
    if "writes" in p:
        w = p["writes"]
        n = "%d" % w["count"] if "count" in w else "at least %d" % w.get("min", 1)
        bits.append("writing %s row(s)%s%s%s" % (n, " by %s" % w["op"] if w.get("op") else "",
                                                 " to %s" % w["table"] if w.get("table") else "",
                                                 " keyed %s" % ", ".join(sorted(_server_key_set(w["key"])))
                                                 if "key" in w else ""))
    if "committed" in p:
        bits.append("committed" if p["committed"] else "rolled back")
    return " ".join(bits)


_SERVER_INSTALL = (
    "add Reticle's server middleware: Django: MIDDLEWARE += [\"reticle.DjangoMiddleware\"] (under DEBUG); "
    "Flask/any WSGI app: app.wsgi_app = reticle.wsgi(app.wsgi_app); FastAPI/Starlette/any ASGI app: "
    "app = reticle.asgi(app); SQLAlchemy writes: reticle.watch_sqlalchemy(engine); raw sqlite3 writes: "
    "reticle.watch_sqlite3(conn); "
    "`reticle init` adds or prints it; any other stack: its OpenTelemetry exporter pointed at the daemon "
    "(`reticle init` prints how); what a store committed, on any stack: reticle_watch_db {url} and a "
    "{kind: \"stored\"} check")


def _server_blind(p: dict, records: List[dict]) -> Optional[dict]:
    """A `writes` or `committed` leaf over records that cannot say what was written, known as soon as
    the record is there (decided: no later event changes it): a service without database spans, an
    app whose database nothing watches, a write whose rows have no primary key to compare."""
    traced = [r for r in records if r.get("dbTraced") is False and _server_matches(
        r, {k: p[k] for k in ("method", "urlContains", "status") if k in p})]
    if traced and ("writes" in p or "committed" in p) and traced[0].get("dbUnread"):
        return {"pass": False, "assertion": "server.writes-unknown", "decided": True, "decidedBy": "unknowable",
                "inconclusive": _server_unread_why(traced[0])}
    if traced and ("writes" in p or "committed" in p):
        return {"pass": False, "assertion": "server.writes-unknown", "decided": True, "decidedBy": "unknowable",
                "inconclusive": "the OpenTelemetry spans of %s carry no database statement, and that service has "
                                "sent no database span yet: without database instrumentation its writes are "
                                "unknown, not 0 (add the instrumentation of its database client, or, where none "
                                "exists, let Reticle watch the database itself: reticle_watch_db {url} or --watch-db "
                                "URL, then check the row with {kind: \"stored\", table, where})"
                                % _server_label(traced[0])}
    blind = [r for r in records if _server_unwatched(r) and ("writes" in p or "committed" in p) and _server_matches(
        r, {k: v for k, v in p.items() if k not in ("writes", "committed", "count")})]
    if blind:
        return {"pass": False, "assertion": "server.unwatched", "decided": True, "decidedBy": "unknowable",
                "inconclusive": "the server answered %s → %s, but nothing watches the app's database writes, so "
                                "what it wrote cannot be known; %s" % (_server_label(blind[0]), blind[0].get("status"),
                                                                       _SERVER_WATCH)}
    keyless = [w for r in records if "key" in p.get("writes", {}) and _server_matches(
        r, dict(p, writes={k: v for k, v in p["writes"].items() if k not in ("key", "count", "min")}))
        for w in r.get("writes") or [] if w.get("committed") and w.get("keys") is None
        and w["op"] == p["writes"].get("op", w["op"])]
    if keyless:
        return {"pass": False, "assertion": "server.keys", "decided": True, "decidedBy": "unknowable", "inconclusive": (
            "the server's %s of %s does not name its rows by primary key (%s), so which rows it wrote cannot "
            "be known; assert the rows read back instead" % (keyless[0]["op"], keyless[0]["table"],
                                                             keyless[0].get("sql") or "its SQL was not recorded"))}
    return None


def _judge_server(p: dict, obs: _Observation) -> dict:
    """A `server` leaf judged over the act's records (_judge_leaf_records), where a failure the server
    itself reported decides before an unknown: a request the leaf names (method, URL) that raised or
    logged an error is `no`, even when whether its write was kept cannot be known, as every other
    predicate of the act reads that error (the server's contradictions)."""
    res = _judge_leaf_records(p, obs)
    if not res.get("inconclusive") or p.get("exception") or p.get("logged") or (p.get("status") or 0) >= 500:
        return res  # a leaf that asks for the failure is not failed by it
    named = {k: p[k] for k in ("method", "urlContains") if k in p}
    window = obs.events(p)
    failing = [r for r in _server_failures(window, p, obs.known) if _server_matches(r, named)]
    if not failing:
        # a trace's logs come in their own batches, after its spans: an unknowable answer over spans is
        # final only once the logs of their requests had the grace to land (an ERROR among them decides)
        young = [e["t"] for e in window if e["type"] == "server.request" and e["data"].get("source") == "otel"
                 and _server_matches(e["data"], named) and obs.now - e["t"] < obs.known.server_grace]
        if young and res.get("decided"):
            return dict(res, decided=False, decidedBy=None, retryAfterMs=round(obs.known.server_grace - obs.now
                                                                               + min(young)))
        return res
    return {"pass": False, "assertion": "server.failed", "decided": True, "decidedBy": "server-failed",
            "expected": _describe_server(p), "observed": [_server_line(r) for r in failing[:3]],
            "failureReason": "%s, which decides it whatever else is unknown (%s)" % (
                _failure_counter(failing[0]), res["inconclusive"])}


def _jobs_undecided(matched: List[dict], p: dict) -> Optional[dict]:
    """A `server` leaf declaring 0 writes over requests that handed their work to a job (a thread they started):
    while the job runs, not known yet; once it ended writing nothing at all, unknowable (a job that saves
    nothing cannot be told from one that failed to: declaring "no write" must never pass a failed save)."""
    if p.get("writes", {}).get("count") != 0:
        return None
    running = [r for r in matched if r.get("queued") and not all(q.get("done") for q in r["queued"])]
    if running:
        return {"pass": False, "assertion": "server.awaiting", "retryAfterMs": 100,
                "inconclusive": "the job %s started has not ended: what it writes is not known yet"
                                % _server_label(running[0])}
    idle = [r for r in matched if r.get("queued") and not any(w.get("job") for w in r.get("writes") or ())]
    if idle:
        return {"pass": False, "assertion": "server.job-wrote-nothing", "decided": True, "decidedBy": "unknowable",
                "inconclusive": "%s handed its work to a job (thread %s) that wrote nothing, and a job that saves "
                                "nothing cannot be told from one that failed to; check the saved data itself (a "
                                "stored predicate on a watched store, or the record read back)" % (
                                    _server_label(idle[0]), idle[0]["queued"][0]["thread"])}
    return None


def _judge_leaf_records(p: dict, obs: _Observation) -> dict:
    """What the server did for the tab's requests (the app's middleware reports them).  Rules, in
    order: a count that is exceeded fails at once; a match passes (a count once no marked request is
    still awaited); a marked request whose record may still arrive keeps it open; no record ever for
    this tab means the middleware is absent (unknown, saying how to install it); a marked request
    never reported makes a miss unknown; else it fails, decided once every request is answered."""
    window = obs.events(p)
    records = _server_records(window)
    states = [(r, _server_match(r, p)) for r in records]
    matched = [r for r, state in states if state]
    unsure = [r for r, state in states if state is None]
    awaiting, unreported = _server_unreported(obs.now, window, obs.known.server_grace)
    expected = _describe_server(p)
    if "count" in p and len(matched) > p["count"]:
        return {"pass": False, "assertion": "server.count", "expected": "%d × %s" % (p["count"], expected),
                "observed": [_server_line(r) for r in matched[:8]], "decided": True, "decidedBy": "count-exceeded",
                "failureReason": "expected exactly %d matching server request(s), saw %d" % (p["count"], len(matched))}
    if (jobs := _jobs_undecided(matched, p)) is not None:  # 0 writes declared over a job that did nothing
        return jobs
    if matched and ("count" not in p or (len(matched) == p["count"] and not awaiting and not unsure)):
        return {"pass": True, "assertion": "server.present",
                "evidence": {"server": [_server_line(r) for r in matched[:5]]}}
    if awaiting:
        return {"pass": False, "assertion": "server.awaiting", "retryAfterMs": obs.known.server_grace,
                "inconclusive": "the server's record of %s has not arrived yet" % _call_label(awaiting[0])}
    cookie_only = _server_cookie_only(unreported, obs.known, window)
    # known before the timeout: a navigation's record can never come through spans with the script tag, nor
    # a request's from a service whose spans land in no tab (a record that is only late may still come: waits)
    hint = obs.known.server_hint
    final = {"decided": True, "decidedBy": "unknowable"} if (cookie_only or (hint and unreported)) \
        and not obs.open else {}
    if not obs.known.server_seen:
        return dict(final, **{"pass": False, "assertion": "server.absent", "inconclusive": (
            "no server record ever arrived for this tab, so what the server did cannot be known; %s"
            % (cookie_only or hint or _SERVER_INSTALL))})
    if unreported:
        hint = ("; it carried the app's own traceparent, so its OpenTelemetry spans are under a trace id the "
                "daemon did not issue and cannot be attributed to this tab" if unreported[0].get("ownTrace")
                else "; " + cookie_only if cookie_only else "")
        known_now = not obs.open and (hint or not unreported[0].get("serverMark"))  # nothing could still bring it
        return {"pass": False, "assertion": "server.unreported", "inconclusive": (
            "%s was marked for the server, but no record of it arrived (the middleware does not cover that "
            "route, or dropped it while the daemon was away, or the browser said another page sent it)%s"
            % (_call_label(unreported[0]), hint) if unreported[0].get("serverMark") else
            "%s went to the server without a mark (the tab had none left from the daemon), so what the "
            "server did for it cannot be known" % _call_label(unreported[0])),
            **({"decided": True, "decidedBy": "unknowable"} if known_now else {})}
    blind = _server_blind(p, records)
    if blind is not None:
        return blind
    if unsure:
        return {"pass": False, "assertion": "server.unseen", "decided": True, "decidedBy": "unknowable",
                "inconclusive": _server_unsure_why(unsure[0], p)}
    observed = [_server_line(r) for r in records[-8:]]
    # (when each came, and how long it must stand: a record tied by time may yet be withdrawn, tying.py)
    near = [(e["t"], e.get("settles", e["t"] + TIE_SETTLE_MS) - e["t"] if e["data"].get("matchedBy")
             else RETRY_GRACE_MS) for e in window if e["type"] == "server.request"
            and _server_matches(e["data"], {k: p[k] for k in ("method", "urlContains") if k in p})]
    made = _server_made(window, p)
    if made and not near:
        # the tab made that request (a redirect's document request included) and its record has not landed:
        # only a record that arrived and differs, or a request never made, is a `no`; this one may still come
        return {"pass": False, "assertion": "server.awaiting", "retryAfterMs": obs.known.server_grace,
                "expected": expected, "observed": observed or "no server request in this window",
                "inconclusive": "the tab made %s, but the server's record of it never arrived (the middleware or "
                                "the spans do not cover that route, or the record is still on its way)%s"
                                % (made, "; the server did: %s" % "; ".join(observed[-3:]) if observed else "")}
    out = {"pass": False, "assertion": "server.count" if "count" in p else "server.present", "expected": expected,
           "observed": observed or "no server request in this window",
           "failureReason": "no server request matched %s%s" % (
               expected, "; the server did: %s" % "; ".join(observed[-3:]) if observed else "")}
    if near and not obs.open_since(window[0]["t"] if window else 0):
        # the request happened and the server did otherwise: final once a follow-up request had its chance
        came, hold = near[-1]
        age = obs.now - came
        if age >= max(RETRY_GRACE_MS, hold):
            out.update(decided=True, decidedBy="answered-otherwise")
        else:
            out["retryAfterMs"] = round(max(RETRY_GRACE_MS, hold) - age)
    return out


def _server_made(window: List[dict], p: dict) -> str:
    """The label of a request the tab made in the window that `server` leaf p's method and urlContains name,
    or "": a fetch, XHR or document it reported, and the request a redirect made (a document or fetch that
    arrived at another URL: after a 301, 302 or 303 the browser follows a POST with a GET, after a 307 or
    308 with the same method, and which one it was the page cannot tell)."""
    want = (p.get("method") or "").upper()
    for e in window:
        if e["type"] not in ("net.request", "net.pending"):
            continue
        d = e["data"]
        tried = [((d.get("method") or "").upper(), {(d.get("method") or "").upper()}, d.get("url"))]
        if d.get("redirected") and d.get("finalUrl"):
            tried.append(("GET", {"GET", (d.get("method") or "").upper()}, d.get("finalUrl")))
        for label, methods, url in tried:
            if not isinstance(url, str) or (want and want not in methods):
                continue
            parts = urllib.parse.urlsplit(url)
            path = parts.path + ("?" + parts.query if parts.query else "")
            if not p.get("urlContains") or p["urlContains"] in path:
                return "%s %s" % (want or label, path)
    return ""


def _server_unsure_why(r: dict, p: dict) -> str:
    """Why record r can neither satisfy nor fail `server` leaf p (see _server_match), in the order _server_match
    weighs it: a commit not traced, a write whose kind its span did not say, spans not read, a driver unwatched."""
    unsure = [w for w in r.get("writes") or [] if w.get("committed") is None]
    vague = [w for w in r.get("writes") or [] if w.get("op") in _OP_MAY_BE]
    if unsure and len({_server_matches(v, p) for v in _server_variants(r, None)}) > 1:
        return ("the server answered %s → %s and ran %s %s, but its OpenTelemetry spans show no BEGIN or COMMIT, "
                "so whether that write was kept or rolled back cannot be known; %s" % (
                    _server_label(r), r.get("status"), unsure[0]["op"], unsure[0]["table"], _commit_advice(r)))
    if vague and p.get("writes", {}).get("op"):
        return ("the server answered %s → %s and its spans name %s %s (an ORM's operation that may be %s), so "
                "whether it was the %s this asks for cannot be known from them; ask for the write without its kind "
                "(writes: {table}), or watch the database itself (reticle_watch_db {url}) and check the row with "
                "{kind: \"stored\", table, where}" % (_server_label(r), r.get("status"), vague[0]["op"],
                                                      vague[0]["table"] or "a table",
                                                      " or ".join(_OP_MAY_BE[vague[0]["op"]]), p["writes"]["op"]))
    if r.get("dbUnread") and not r.get("unseen"):
        return _server_unread_why(r)
    return ("the server answered %s → %s, but the app may also write through %s, which nothing watches, so what it "
            "wrote cannot be known from what was seen (%s)" % (_server_label(r), r.get("status"),
                                                               ", ".join(r.get("unseen") or []), _server_line(r)))


def _server_unread_why(r: dict) -> str:
    """Why what the server wrote cannot be known from spans Reticle could not read (the record's dbUnread)."""
    return ("the server answered %s → %s, but its OpenTelemetry spans hold database work of %s, which Reticle does "
            "not know how to read, so what it wrote cannot be known from them (%s); watch the database itself "
            "(reticle_watch_db {url}) and check the row with {kind: \"stored\", table, where}"
            % (_server_label(r), r.get("status"), "; ".join(r["dbUnread"]), _server_line(r)))


def _commit_advice(r: dict) -> str:
    """How to make a write's commit known, for the stack that served r."""
    if any(s.startswith("opentelemetry.instrumentation.") for s in r.get("dbScopes") or ()):  # Python's names
        return ("Reticle's Python middleware sees commits (reticle.wsgi, reticle.asgi or reticle.DjangoMiddleware, "
                "beside the tracing or instead of it)")
    return ("Reticle's Python middleware sees commits in a Python app (reticle.wsgi, reticle.asgi, "
            "reticle.DjangoMiddleware); in another stack, watch the database itself (reticle_watch_db {url}: it "
            "sees only what was committed) or trace the transaction statements (a driver "
            "instrumentation that records BEGIN and COMMIT, such as pg's or mysql2's)")


def _act_server_records(window: List[dict], known: Optional["_Known"] = None) -> List[dict]:
    """The server records of the window, but for the requests the page sends on a timer (polling,
    autosave: known.polled); the same save clicked again is the act's, as in _horizon."""
    background = known.polled if known is not None else ()
    if not background:
        return _server_records(window)
    labels: Dict[Tuple[Any, str], str] = {(e.get("doc"), str(e["data"].get("serverMark"))): _call_label(e["data"])
                                          for e in window if e["type"] == "net.pending" and e["data"].get("serverMark")}
    return [r for r in _server_records(window)
            if labels.get((r.get("documentId"), str(r.get("requestId"))), "") not in background]


def _server_rolled_back(window: List[dict], p: Optional[dict] = None,
                        known: Optional["_Known"] = None) -> List[dict]:
    """Server records of the act's requests with a write the request began and rolled back (or never
    committed), unless the predicate asks for one (a positive `server` leaf with committed: false)."""
    if p is not None and any(leaf["kind"] == "server" and leaf.get("committed") is False and not neg
                             for leaf, neg in _leaves(p)):
        return []
    return [r for r in _act_server_records(window, known)
            if any(_rolled_back_write(w) for w in r.get("writes") or [])]


def _rolled_back_write(w: dict) -> bool:
    """A write whose transaction rolled back (or never committed): one rolled back only to a
    savepoint, in a transaction that went on (get_or_create's IntegrityError, a nested atomic block
    that failed), is not kept but is no rollback of what the request did."""
    return w.get("committed") is False and w.get("note") != _SAVEPOINT_NOTE


def _server_failures(window: List[dict], p: Optional[dict] = None, known: Optional["_Known"] = None) -> List[dict]:
    """Server records in the window that raised or logged an error, unless the predicate itself
    asks for that (a positive `server` leaf with exception: true, logged: true or a 5xx status),
    or the request is one the page sends on a timer (polling, autosave: see _act_server_records)."""
    wants = [leaf if leaf["kind"] == "server" else {k: leaf[k] for k in ("method", "urlContains") if k in leaf}
             for leaf, neg in (_leaves(p) if p is not None else []) if not neg and (
                 (leaf["kind"] == "server" and (leaf.get("exception") or leaf.get("logged")))
                 or (leaf["kind"] in ("server", "net") and (leaf.get("status") or 0) >= 500)
                 or (leaf["kind"] == "net" and leaf.get("ok") is False))]
    return [r for r in _act_server_records(window, known) if (r.get("exception") or r.get("logged"))
            and not any(_server_matches(r, leaf) for leaf in wants)]


def _failure_counter(r: dict) -> str:
    """What a failing record says: "the server raised X (msg) at f under POST /x → 500" or "logged ..."."""
    exc = r.get("exception")
    if exc:
        return "the server raised %s (%s)%s under %s → %s%s" % (
            exc.get("type"), _short(exc.get("message") or "", 100),
            " at %s" % exc["frames"][0] if exc.get("frames") else "", _server_label(r), r.get("status"),
            ", after its answer (in work run for the request: %s)" % exc["after"] if exc.get("after") else "")
    e = r["logged"][0]
    return "the server logged %s from %s (%s) under %s → %s" % (
        e.get("level"), e.get("logger"), _short(e.get("message") or "", 100), _server_label(r), r.get("status"))


def _server_contradictions(window: List[dict], p: dict, known: Optional["_Known"] = None) -> List[dict]:
    """A request the act caused that raised on the server (before its answer or after it, in work
    run for it), logged an error, or rolled back a write it began, disagrees with a passing
    predicate (observed tier: `no`), whatever status the browser saw: findings with their kind
    (server-exception, server-logged-error, server-rolled-back) and tier."""
    out = []
    for r in _server_failures(window, p, known)[:3]:
        out.append({"kind": "server-exception" if r.get("exception") else "server-logged-error", "tier": "observed",
                    "claim": "the assertion held", "counter": _failure_counter(r), "server": _server_line(r)})
    for r in _server_rolled_back(window, p, known)[:2]:
        w = next(w for w in r["writes"] if _rolled_back_write(w))
        out.append({"kind": "server-rolled-back", "tier": "observed", "claim": "the assertion held",
                    "counter": "the server began %s %s and %s under %s → %s" % (
                        w["op"], w["table"], "rolled it back" if (w.get("note") or "rolled back") == "rolled back"
                        else "never committed it", _server_label(r), r.get("status")),
                    "server": _server_line(r)})
    return out


# ---- rows named by the request: its path says which row of which table it acts on ----
# `/contacts/4/rename`: the last resource segment followed by an id names row 4 of the table that segment
# names (contacts, contact; cart_items for items); an update or delete of that table keyed otherwise
# is the wrong row.  Limits: only the last id of the path counts (a parent's id, /projects/3/tasks/9, is
# not the written row), a write whose keys are not known says nothing, and a predicate that declares the
# row it expects (`server` writes with that `key`) is believed.

_ID_SEGMENT = re.compile(r"^(\d{1,19}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
                         r"|[0-9a-fA-F]{24})$")   # ... or a MongoDB ObjectId


def _names_table(segment: str, table: str) -> bool:
    """Does a path segment name a table: the same word, singular or plural, or its last part
    (`items` for cart_items)?"""
    a = segment.lower().replace("-", "_")
    b = table.lower().split(".")[-1].strip('`"[]')
    if not a or not b or _ID_SEGMENT.match(a):
        return False
    singular = {a, a[:-1] if a.endswith("s") else a, a[:-2] if a.endswith("es") else a,
                a[:-3] + "y" if a.endswith("ies") else a}
    return b in singular or b in {a + "s", a + "es"} or any(b.endswith("_" + s) for s in singular | {a})


def _path_row(path: str) -> Optional[Tuple[str, str]]:
    """The last (resource segment, id) pair of a request's path: /contacts/4/rename -> ("contacts", "4")."""
    segments = [urllib.parse.unquote(s) for s in path.split("?", 1)[0].split("/") if s]
    pairs = [(segments[i], segments[i + 1]) for i in range(len(segments) - 1)
             if _ID_SEGMENT.match(segments[i + 1]) and not _ID_SEGMENT.match(segments[i])]
    return pairs[-1] if pairs else None


_DONE = {"update": "updated", "delete": "deleted", "upsert": "saved", "write": "wrote"}


def _c_server_wrong_row(window: List[dict], p: dict, action_since: Optional[float],
                        known: Optional["_Known"]) -> List[dict]:
    declared = [leaf["writes"]["key"] for leaf, neg in _leaves(p) if leaf["kind"] == "server" and not neg
                and "key" in leaf.get("writes", {})]
    out = []
    for r in _act_server_records(window, known):
        named = _path_row(r.get("path") or "") if (r.get("method") or "").upper() in _WRITE_METHODS else None
        if named is None:
            continue
        segment, row = named
        hits = [w for w in r.get("writes") or [] if w["op"] in ("update", "delete", "upsert", "write")
                and w.get("committed") is not False
                and _names_table(segment, w.get("table") or "")]
        if not hits or not all(isinstance(w.get("keys"), list) for w in hits) \
                or any(row in _server_key_set(w["keys"]) for w in hits) \
                or any(_server_key_set(key) & _server_key_set(w["keys"]) for key in declared for w in hits):
            continue
        w = hits[0]
        out.append({"claim": "the assertion held", "server": _server_line(r), "counter": (
            "%s names row %s of %s, but the server %s %s keyed %s" % (
                _server_label(r), row, w["table"], _DONE.get(w["op"], w["op"]), w["table"],
                ", ".join(str(k) for k in w["keys"][:5])))})
    return out[:2]


def _c_server_exception(window: List[dict], p: dict, action_since: Optional[float],
                        known: Optional["_Known"]) -> List[dict]:
    return [{k: v for k, v in c.items() if k not in ("kind", "tier")}
            for c in _server_contradictions(window, p, known) if c["kind"] == "server-exception"]


def _c_server_logged(window: List[dict], p: dict, action_since: Optional[float],
                     known: Optional["_Known"]) -> List[dict]:
    return [{k: v for k, v in c.items() if k not in ("kind", "tier")}
            for c in _server_contradictions(window, p, known) if c["kind"] == "server-logged-error"]


def _c_server_rolled_back(window: List[dict], p: dict, action_since: Optional[float],
                          known: Optional["_Known"]) -> List[dict]:
    return [{k: v for k, v in c.items() if k not in ("kind", "tier")}
            for c in _server_contradictions(window, p, known) if c["kind"] == "server-rolled-back"]
