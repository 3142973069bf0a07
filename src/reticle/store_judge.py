"""Judging storage truth.

The `stored` predicate and what a watched store's commits tell the verdict rules (stores.py watches
them): the rows the store kept during the act, named; a write request of the act answered as a success
during which the store committed nothing; an update or delete of another row than the one the request's
path names.  Pure: every function reads the window and what the session knows.
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from .causes import _caused_by_act
from .constants import STORE_LATE_MS
from .events import _WRITE_METHODS, _call_failed, _call_label, _is_dev
from .observation import _Observation, _leaf_key, _leaves
from .server_judge import _ID_SEGMENT, _names_table, _path_row
from .stores import _same, _watched_stores
from .tab import _Known
from .util import _short

_STORE_WATCH = ("let Reticle watch the app's database itself: reticle_watch_db {url} (or reticle serve "
                "--watch-db URL, RETICLE_WATCH_DB), with the URL the app's configuration names")


def _store_commits(window: List[dict], store: Optional[str] = None, unread: bool = False) -> List[dict]:
    """The store.commit events' data of a window (of one store, when named: its name or file name); with
    `unread`, only the reads that failed (a store that could not be read while the tab acted), else none of them."""
    out = [e["data"] for e in window if e["type"] == "store.commit" and bool(e["data"].get("unread")) == unread]
    if store:
        out = [c for c in out if store == c.get("store") or str(c.get("store", "")).endswith(store)]
    return out


def _table_is(have: str, want: str) -> bool:
    """Table names compared without case and schema (public.notes is notes); a JSON key path exactly."""
    a, b = str(have).lower(), str(want).lower()
    return a == b or a.split(".")[-1] == b.split(".")[-1] and "." not in b


def _change_matches(ch: dict, p: dict) -> bool:
    if not _table_is(ch.get("table", ""), p["table"]):
        return False
    if p.get("op") and ch.get("op") != p["op"]:
        return False
    values = ch.get("values") or {}
    return all(_same(values.get(k), v) for k, v in (p.get("where") or {}).items())


def _change_text(ch: dict) -> str:
    """One change as an answer names it: "notes +1: id 17, title 'Buy milk'" (secret columns left out)."""
    sign = {"insert": "+1", "update": "~1", "delete": "-1"}.get(ch.get("op", ""), "?")
    key = ch.get("key") or {}
    values = ch.get("values") or {}
    shown = list(key.items()) + [(k, v) for k, v in values.items() if k not in key and v != "[redacted]"
                                 and (ch.get("op") != "update" or k in (ch.get("changed") or values))]
    cols = ", ".join("%s %s" % (k, repr(_short(v, 60)) if isinstance(v, str) else v) for k, v in shown[:4])
    return "%s %s%s" % (ch.get("table"), sign, ": " + cols if cols else "")


def _commits_text(commits: List[dict], cap: int = 3) -> str:
    changes = [ch for c in commits for ch in c.get("changes") or ()]
    said = "; ".join(_change_text(ch) for ch in changes[:cap])
    more = len(changes) - cap + sum(int(c.get("more") or 0) for c in commits)
    unseen = sorted({t for c in commits for t in c.get("uncompared") or ()})
    if more > 0:
        said += " (and %d more)" % more
    if unseen:
        said += "%schanged, too big to compare: %s" % ("; " if said else "", ", ".join(unseen[:3]))
    return said or "a commit that changed no row"


# ---- the `stored` predicate ----

def _describe_stored(p: dict) -> str:
    where = ", ".join("%s=%r" % kv for kv in (p.get("where") or {}).items())
    return "%s row%s of %s%s%s%s" % ("a stored" if not p.get("now") else "a", "" if p.get("min", 1) == 1 else
                                     "s (at least %d)" % p["min"], p["table"], " where %s" % where if where else "",
                                     " by %s" % p["op"] if p.get("op") else "",
                                     " in %s" % p["store"] if p.get("store") else "")


async def _read_stored(session: Any, p: dict) -> Any:
    """`now: true`: the store's current rows of the table (read-only, on the stores' worker thread)."""
    if not p.get("now"):
        return None
    stores = _watched_stores(session)
    if stores is None:
        return {"unwatched": True}
    return await stores.rows(p.get("store"), p["table"], p.get("where") or {}, 5)


def _judge_stored(p: dict, obs: _Observation) -> dict:
    """A `stored` leaf: the act's committed changes (or, with now, the store's rows now) include at least
    `min` rows of `table` whose columns equal `where`.  No store watched: unknown, saying how; the table
    too big to compare, or changed while another tab acted too: unknown; else it fails when the act's
    timeout runs out (a job the request queued may write the row after its answer)."""
    want = p.get("min", 1)
    expected = _describe_stored(p)
    if p.get("now"):
        read = obs.live.get(_leaf_key(p))
        if not isinstance(read, dict) or read.get("unwatched"):
            return {"pass": False, "assertion": "stored.unwatched", "decided": True, "decidedBy": "unknowable",
                    "inconclusive": "no store is watched, so the rows cannot be read; %s" % _STORE_WATCH}
        if read["total"] >= want:
            return {"pass": True, "assertion": "stored.now",
                    "evidence": {"store": read["store"], "rows": read["rows"][:3], "total": read["total"]}}
        return {"pass": False, "assertion": "stored.now", "expected": expected,
                "observed": "%d matching row(s) in %s" % (read["total"], read["store"]),
                "failureReason": "%s holds %d row(s) of %s matching, not %d" % (read["store"], read["total"],
                                                                                p["table"], want)}
    known = obs.known
    if known is None or not known.stores:
        return {"pass": False, "assertion": "stored.unwatched", "decided": True, "decidedBy": "unknowable",
                "inconclusive": "no store is watched, so what was stored cannot be known; %s" % _STORE_WATCH}
    window = obs.events(p)
    commits = _store_commits(window, p.get("store"))
    own = [c for c in commits if not c.get("shared")]
    unread = _store_commits(window, p.get("store"), unread=True)
    hits = [ch for c in own for ch in c.get("changes") or () if _change_matches(ch, p)]
    if len(hits) >= want:
        return {"pass": True, "assertion": "stored.present",
                "evidence": {"stored": [_change_text(ch) for ch in hits[:3]]}}
    if any(_change_matches(ch, p) for c in commits if c.get("shared") for ch in c.get("changes") or ()):
        return {"pass": False, "assertion": "stored.shared", "inconclusive": (
            "%s was committed while another tab acted on the same store, so whose act stored it cannot be told; "
            "repeat with one tab acting" % expected)}
    if unread:
        return {"pass": False, "assertion": "stored.unread", "inconclusive": (
            "%s could not be read during the act (%s), so whether it stored %s is not known"
            % (unread[0]["store"], _short(unread[0]["unread"], 200), expected))}
    big = [t for c in commits for t in c.get("uncompared") or () if _table_is(t, p["table"])]
    if big:
        return {"pass": False, "assertion": "stored.uncompared", "decided": True, "decidedBy": "unknowable",
                "inconclusive": "table %s changed, but it is too big to compare row by row, so which rows were "
                                "stored cannot be known; check it with {kind: \"stored\", now: true}" % big[0]}
    tables = [t for name, ts in known.store_tables.items() if not p.get("store") or name.endswith(p["store"])
              for t in ts]
    out: Dict[str, Any] = {"pass": False, "assertion": "stored.present", "expected": expected,
                           "observed": _commits_text(own) if own else "no commit in the window"}
    if tables and not any(_table_is(t, p["table"]) for t in tables):
        out.update(decided=True, decidedBy="no-such-table", failureReason=(
            "the watched store has no table %r (its tables: %s)" % (p["table"], ", ".join(tables[:12]))))
        return out
    out["failureReason"] = "the store committed no %s%s" % (
        expected, " (it committed: %s)" % _commits_text(own) if own else " (it committed nothing in the window)")
    return out  # not decided: a job the request queued may still write it, within the act's timeout


# ---- what the rules read: the act's saves, and the store's commits during them ----

def _act_writes(window: List[dict], floor: float, known: _Known) -> List[dict]:
    """The act's write requests (POST, PUT, PATCH, DELETE; a form post too) that the server answered as a
    success (2xx or 3xx), the page's own timers' aside."""
    out = []
    for e in window:
        d = e["data"]
        if e["type"] != "net.request" or (d.get("method") or "").upper() not in _WRITE_METHODS or _is_dev(d):
            continue
        if _call_failed(d) or not _caused_by_act(e, floor, known, repeats=True):
            continue
        out.append(d)
    return out


def _path_of(d: dict) -> str:
    parts = urllib.parse.urlsplit(str(d.get("url") or ""))
    return parts.path or "/"


def _named_tables(d: dict, known: _Known) -> List[str]:
    """The store tables a write's path names (/notes/new names notes; /api/cart-items names cart_items)."""
    segments = [s for s in _path_of(d).split("/") if s and not _ID_SEGMENT.match(s)]
    tables = sorted({t for ts in known.store_tables.values() for t in ts})
    for s in reversed(segments):
        hit = [t for t in tables if _names_table(s, t)]
        if hit:
            return hit
    return []


def _store_silence(c_window: List[dict], floor: float, known: _Known, p: dict) -> Optional[Tuple[str, str]]:
    """Why the act's saves may not have stored anything, as (reason, because), or None: the act made a write
    request the server answered as a success, and the watched stores committed nothing during the act
    (store_saw_nothing), or could not be read (store_unread), or only while another tab acted too
    (store_shared), or only beside the page's own timed writes (store_background), or only to other tables
    than the one its path names (store_wrote_elsewhere).  A positive `stored` leaf decides it instead."""
    if not known.stores or any(leaf["kind"] == "stored" and not neg for leaf, neg in _leaves(p)):
        return None
    window = [e for e in c_window if e["t"] >= floor]
    writes = _act_writes(window, floor, known)
    if not writes:
        return None
    label = "%s → %s" % (_call_label(dict(writes[0], url=_path_of(writes[0]))), writes[0].get("status"))
    unread = _store_commits(window, unread=True)
    commits = _store_commits(window)
    if unread and not commits:
        return "store_unread", (
            "the server answered %s, but %s could not be read during the act (%s), so what it committed is not "
            "known; it is read again at the next act" % (label, unread[0]["store"], _short(unread[0]["unread"], 200)))
    stores = ", ".join(known.stores[:3])
    fix = ("check what it stored: {kind: \"stored\", table, where} (the row the act should have written), or the "
           "record read back after reticle_navigate {reload: true}")
    if not commits:
        return "store_saw_nothing", (
            "the server answered %s, but no watched store (%s) committed anything during the act, so the save this "
            "asserts may not have happened (a save that changes nothing is legitimate, so this is not a no); %s"
            % (label, stores, fix))
    own = [c for c in commits if not c.get("shared")]
    if not own:
        return "store_shared", (
            "the server answered %s, and the store committed while another tab acted on it too, so whose act "
            "stored what cannot be told; repeat with one tab acting" % label)
    named = [t for d in writes for t in _named_tables(d, known)]
    changed = {ch.get("table", "") for c in own for ch in c.get("changes") or ()} | {
        t for c in own for t in c.get("uncompared") or ()}
    timed = [e["data"] for e in window if e["type"] == "net.request" and _call_label(e["data"]) in known.polled
             and (e["data"].get("method") or "").upper() in _WRITE_METHODS]
    if named and not any(_table_is(t, n) for t in changed for n in named):
        return "store_wrote_elsewhere", (
            "the server answered %s and the store committed (%s), but nothing to %s, the table its path names, so "
            "the save this asserts may not have happened; %s" % (label, _commits_text(own), named[0], fix))
    if timed and not named:
        return "store_background", (
            "the server answered %s and the store committed (%s), but the page's own timed write %s ran in the "
            "same window, so which commit was the act's cannot be told; %s" % (
                label, _commits_text(own), _call_label(timed[0]), fix))
    return None


def _store_wrong_rows(window: List[dict], p: dict, floor: Optional[float], known: Optional[_Known]) -> List[dict]:
    """An update or delete the store committed during the act to a table the act's write path names, keyed
    otherwise than the row that path names (/notes/3/rename updated id 2): the wrong row (observed: `no`)."""
    if known is None or not known.stores:
        return []
    since = floor if floor is not None else (window[0]["t"] if window else 0.0)
    own = [c for c in _store_commits([e for e in window if e["t"] >= since]) if not c.get("shared")]
    out = []
    for d in _act_writes([e for e in window if e["t"] >= since], since, known):
        named = _path_row(_path_of(d))
        if named is None:
            continue
        segment, row = named
        hits = [ch for c in own for ch in c.get("changes") or () if ch.get("op") in ("update", "delete")
                and _names_table(segment, ch.get("table") or "") and ch.get("key") and len(ch["key"]) == 1]
        if not hits or any(str(next(iter(ch["key"].values()))) == row for ch in hits):
            continue
        ch = hits[0]
        out.append({"claim": "the assertion held", "counter": "%s names row %s of %s, but the store committed %s %s "
                    "keyed %s" % (_call_label(dict(d, url=_path_of(d))), row, ch["table"], ch["op"], ch["table"],
                                  ", ".join("%s %s" % kv for kv in ch["key"].items())),
                    "stored": _change_text(ch)})
    return out[:2]


def _store_created_nothing(window: List[dict], p: dict, floor: Optional[float],
                           known: Optional[_Known]) -> List[dict]:
    """A write of the act answered 201 Created while no watched store committed anything during the act: the
    server said it created a resource that the store never kept (observed: `no`).  A 2xx or 3xx of another
    kind that stored nothing is only unknown (rule 12f: a save that changes nothing is legitimate); a 201 says
    something was created.  A positive `stored` leaf, or a `net` leaf asking for that 201, reads it itself."""
    if known is None or not known.stores or any(leaf["kind"] == "stored" and not neg for leaf, neg in _leaves(p)):
        return []
    since = floor if floor is not None else (window[0]["t"] if window else 0.0)
    mine = [e for e in window if e["t"] >= since]
    if _store_commits(mine) or _store_commits(mine, unread=True):
        return []  # something was committed, or what was cannot be known
    created = [d for d in _act_writes(mine, since, known) if d.get("status") == 201]
    return [{"claim": "%s answered 201 Created" % _call_label(dict(d, url=_path_of(d))),
             "counter": "no watched store (%s) committed anything during the act: the resource it says it created "
                        "was not kept" % ", ".join(known.stores[:3])} for d in created[:1]]


def _store_awaited(window: List[dict], floor: float, known: _Known) -> List[str]:
    """The tables the act's answered writes name (their paths: POST /notes/later names note) to which no watched
    store has committed yet: what a job the request queued may still write after its answer (Observe waits for
    it within the act's timeout).  [] when nothing is awaited."""
    if not known.stores:
        return []
    mine = [e for e in window if e["t"] >= floor]
    named = sorted({t for d in _act_writes(mine, floor, known) for t in _named_tables(d, known)})
    if not named:
        return []
    changed = {ch.get("table", "") for c in _store_commits(mine) if not c.get("shared")
               for ch in c.get("changes") or ()}
    return [] if any(_table_is(t, n) for t in changed for n in named) else named


def _store_kept_for(window: List[dict], floor: float, known: _Known, path: str) -> bool:
    """Did a watched store commit, during the act, a change to a table the request path names (the request's own
    write, or one a job it queued made after its answer)?"""
    if not known.stores:
        return False
    named = _named_tables({"url": path}, known)
    return bool(named) and any(_table_is(ch.get("table", ""), n) for c in _store_commits(
        [e for e in window if e["t"] >= floor]) if not c.get("shared") for ch in c.get("changes") or () for n in named)


def _late_text(window: List[dict], floor: float, known: Optional[_Known]) -> Dict[int, str]:
    """For each store commit that came STORE_LATE_MS or more after the act's last write was answered: by its
    position among the window's commits, ", written 1.0 s after the answer" (the job's write, after the request)."""
    mine = [e for e in window if e["t"] >= floor]
    answers = [e["t"] for e in mine if e["type"] == "net.request"
               and (e["data"].get("method") or "").upper() in _WRITE_METHODS]
    if not answers:
        return {}
    last = max(answers)
    commits = [e for e in mine if e["type"] == "store.commit" and not e["data"].get("shared")
               and not e["data"].get("unread")]
    return {i: " (written %.1f s after the answer, outside the request)" % ((e["t"] - last) / 1000.0)
            for i, e in enumerate(commits) if e["t"] - last >= STORE_LATE_MS}


def _store_summary(window: List[dict], floor: float) -> str:
    """What the watched stores committed in the window from `floor`, for a verdict's `because`: each commit's
    changes, and when one came well after the act's answer, how long after (a job's write)."""
    own = [c for c in _store_commits([e for e in window if e["t"] >= floor]) if not c.get("shared")]
    if not own:
        return ""
    late = _late_text(window, floor, None)
    said = "; ".join(_commits_text([c]) + late.get(i, "") for i, c in enumerate(own[:4]))
    return said + (" (and %d more commits)" % (len(own) - 4) if len(own) > 4 else "")
