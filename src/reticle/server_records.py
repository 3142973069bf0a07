"""Server records.

The daemon's side of the middleware: a record checked and cleaned, the tickets that bind a tab's
requests to it (each record is stitched into its tab by stitching.py).
"""

from __future__ import annotations

import collections
import secrets
from typing import Any, Dict, List, Optional, Tuple

from .middleware import (SERVER_SQL_CAP, SERVER_TICKETS, SERVER_WRITE_OPS, SERVER_TICKETS_KEPT,
    SERVER_TICKET_AFTER_MS, _MARK_RE)


# ---- the daemon's side: stitch records into the tab whose mark they carry ----

def _clean_server_record(raw: Any) -> Optional[dict]:
    """A record from the middleware, kept to its known fields with their types and caps, or None."""
    if not isinstance(raw, dict) or not isinstance(raw.get("mark"), str):
        return None
    m = _MARK_RE.match(raw["mark"])
    if m is None:
        return None

    def text(v: Any, cap: int) -> Optional[str]:
        return v[:cap] if isinstance(v, str) else None

    def exc(v: Any) -> Optional[dict]:
        if not isinstance(v, dict):
            return None
        frames = [f[:300] for f in v.get("frames") or [] if isinstance(f, str)][:5]
        out = {"type": text(v.get("type"), 120) or "Exception", "message": text(v.get("message"), 300) or "",
               "frames": frames}
        if isinstance(v.get("handledBy"), str):
            out["handledBy"] = v["handledBy"][:120]
        if isinstance(v.get("after"), str):   # raised after the answer was sent, in this work
            out["after"] = v["after"][:60]
        return out
    status = raw.get("status")
    # only the secret counts: the document and request a record lands under are the ones the daemon
    # issued that secret to (_ServerTickets), never what a sender appends to it
    rec: Dict[str, Any] = {"mark": m.group(1), "site": text(raw.get("site"), 20), "from": text(raw.get("from"), 300),
           "method": (text(raw.get("method"), 16) or "").upper(), "path": text(raw.get("path"), 2048) or "/",
           "host": text(raw.get("host"), 300) or "", "via": "cookie" if raw.get("via") == "cookie" else "header",
           "status": status if isinstance(status, int) and not isinstance(status, bool) else None,
           "view": text(raw.get("view"), 200),
           "ms": raw.get("ms") if isinstance(raw.get("ms"), (int, float)) else None,
           "exception": exc(raw.get("exception")),
           "statements": raw.get("statements") if isinstance(raw.get("statements"), int) else 0}
    queued = raw.get("queued")
    if isinstance(queued, list) and queued:   # the jobs it started on threads of their own (their records follow)
        rec["queued"] = [{"job": q["job"][:32], "thread": str(q.get("thread") or "")[:80]}
                         for q in queued[:8] if isinstance(q, dict) and isinstance(q.get("job"), str)]
    at = raw.get("at")
    if isinstance(at, (int, float)) and not isinstance(at, bool) and 0 < at < 1e14:
        rec["at"] = float(at)   # when the request began (wall clock, ms): for tying a record whose mark no tab holds
    watched = raw.get("watched")
    if isinstance(watched, list):   # what watched the app's writes ([]: nothing did); absent: not said
        rec["watched"] = [w[:40] for w in watched[:8] if isinstance(w, str)]
    unseen = raw.get("unseen")
    if isinstance(unseen, list) and unseen:   # drivers the app may write through that nothing watches
        rec["unseen"] = [u[:40] for u in unseen[:4] if isinstance(u, str)]
    logged = []
    given = raw.get("logged")
    for e in given[:20] if isinstance(given, list) else []:
        if isinstance(e, dict):
            entry: Dict[str, Any] = {"logger": text(e.get("logger"), 120) or "",
                                     "level": text(e.get("level"), 16) or "ERROR",
                                     "message": text(e.get("message"), 300) or ""}
            if exc(e.get("exception")):
                entry["exception"] = exc(e.get("exception"))
            logged.append(entry)
    rec["logged"] = logged
    rec["writes"] = _clean_writes(raw.get("writes"))
    return rec


def _clean_writes(given: Any) -> List[dict]:
    """A record's writes kept to their known fields with their types and caps: op (insert, update, delete, or
    upsert and write where an ORM's span does not say which), table, rows, committed, sql, note, params, keys."""
    writes: List[dict] = []
    for w in given[:50] if isinstance(given, list) else []:
        if isinstance(w, dict) and w.get("op") in SERVER_WRITE_OPS:
            writes.append({"op": w["op"], "table": w["table"][:200] if isinstance(w.get("table"), str) else "",
                           "rows": w.get("rows") if isinstance(w.get("rows"), int) else None,
                           "committed": w.get("committed") if isinstance(w.get("committed"), bool) else None,
                           "sql": w["sql"][:SERVER_SQL_CAP + 1] if isinstance(w.get("sql"), str) else "",
                           "note": w["note"][:120] if isinstance(w.get("note"), str) else None,
                           "params": w["params"][:300] if isinstance(w.get("params"), str) else None})
            keys = w.get("keys")
            if isinstance(keys, list) and keys:
                writes[-1]["keys"] = [k if isinstance(k, int) and not isinstance(k, bool) else str(k)[:64]
                                      for k in keys[:20] if isinstance(k, (int, str))]
    return writes


def _clean_job_record(raw: Any) -> Optional[dict]:
    """A job's record (work a marked request started on a thread of its own): its id and thread, and what it
    wrote, raised and logged, cleaned as a request's are; or None."""
    if not isinstance(raw, dict) or not isinstance(raw.get("job"), str) or not raw["job"]:
        return None
    rec = _clean_server_record(dict(raw, mark="0" * 32))
    if rec is None:
        return None
    return {"job": raw["job"][:32], "thread": str(raw.get("thread") or "")[:80], "writes": rec["writes"],
            "exception": rec["exception"], "logged": rec["logged"], "ms": rec["ms"]}


class _ServerTickets:
    """The one-use marks the daemon issued one tab: secret -> [document, id, void after (ms) or None].
    The SDK puts one on each request of its document the server may see (a header, or for a
    navigation a cookie that lives seconds); a record carrying it lands under that document and id,
    once.  A document's marks stay good until the tab moves to another document, then for
    SERVER_TICKET_AFTER_MS (its last requests' records are still on their way)."""

    def __init__(self) -> None:
        self.live: "collections.OrderedDict[str, List[Any]]" = collections.OrderedDict()
        self.issued = 0
        self.doc: Optional[str] = None

    def issue(self, doc: str, now: float) -> List[List[str]]:
        """SERVER_TICKETS new [id, secret] pairs for document `doc`; the other documents' marks start to expire."""
        if doc != self.doc:
            for ticket in self.live.values():
                if ticket[0] != doc and ticket[2] is None:
                    ticket[2] = now + SERVER_TICKET_AFTER_MS
            self.doc = doc
        out = []
        for _ in range(SERVER_TICKETS):
            self.issued += 1
            secret, tid = secrets.token_hex(16), "m%d" % self.issued
            self.live[secret] = [doc, tid, None]
            out.append([tid, secret])
        while len(self.live) > SERVER_TICKETS_KEPT:
            self.live.popitem(last=False)
        return out

    def holds(self, secret: str, now: float) -> bool:
        ticket = self.live.get(secret)
        return ticket is not None and (ticket[2] is None or now < ticket[2])

    def redirect_only(self, secret: str) -> bool:
        """Whether a held mark is good now only for the redirect that led to a record already taken."""
        ticket = self.live.get(secret)
        return ticket is not None and len(ticket) > 3

    def take(self, secret: str, again_until: Optional[float] = None, then_redirect: bool = False) -> Tuple[str, str]:
        """(document, id) of a held mark, which is then spent, or with again_until, good for one
        more request until then: the request its redirect leads to, or with then_redirect (the
        page a navigation ended on reported first), only the redirect that led there."""
        doc, tid = self.live.pop(secret)[:2]
        if again_until is not None:
            self.live[secret] = [doc, tid, again_until] + (["redirect"] if then_redirect else [])
        return doc, tid
