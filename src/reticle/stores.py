"""Stores.

Storage truth: the app's own store (a SQLite file, a PostgreSQL database, JSON files) watched
read-only as a witness.  What it committed while a tab acted joins that tab's window as `store.commit`
events, so the verdict rules and the `stored` predicate read the rows the store really kept, on any
stack, whether or not its server can speak.  Every read runs on one worker thread, never on the IOLoop;
polling runs only while a tab acts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
import re
import sqlite3
import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Tuple

from .constants import (STORE_ACT_MS, STORE_CHANGES_CAP, STORE_JSON_BYTES_CAP, STORE_LINGER_MS, STORE_MAX,
    STORE_POLL_MS, STORE_ROWS_CAP, STORE_TABLE_ROWS_CAP, _emit, _log)
from .errors import _StoreError
from .middleware import _scrub_server
from .store_postgres import _PostgresReader

_STORE_FORMS = ("sqlite:////absolute/path.db (four slashes), sqlite:///relative.db (from the project folder), "
                "postgresql://user:password@host:port/database, file:///absolute/path.json (or a folder of .json "
                "files)")

# a column or key whose name says its value is a secret: its value never leaves the daemon
_SECRET_COLUMN = re.compile(r"pass(word|wd|phrase|code)?$|secret|token|api_?key|private_?key|credential|"
                            r"session_?(id|key)|cookie|salt|hash|otp|cvv|cvc|card_?number|ssn", re.I)


def _store_value(name: str, value: Any) -> Any:
    """A column's value as evidence: a secret-named column's redacted, a blob by its size, text cut and
    scrubbed of secret shapes, numbers, booleans and null as they are."""
    if _SECRET_COLUMN.search(str(name)):
        return "[redacted]" if value is not None else None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "<%d bytes>" % len(bytes(value))
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True, default=str)
    return _scrub_server(str(value)[:300])


def _store_row(row: Dict[str, Any]) -> Dict[str, Any]:
    return {str(k)[:80]: _store_value(k, v) for k, v in list(row.items())[:40]}


# ---- what a reader is: the interface every kind of store speaks, called on the worker thread only ----

class _StoreReader(Protocol):
    """One store, read-only: `open` starts the watch (-> how it watches), `poll` says what committed
    since the last poll (None: nothing), `rows` reads a table's current rows now."""

    kind: str
    name: str
    limited: str

    def open(self) -> str: ...

    def poll(self) -> Optional[dict]: ...

    def rows(self, table: str, where: Dict[str, Any], limit: int) -> Tuple[List[dict], int]: ...

    def tables(self) -> List[str]: ...

    def close(self) -> None: ...


def _diff_tables(old: Dict[str, Any], new: Dict[str, Any],
                 render: Optional[Callable[[str, Any], Dict[str, Any]]] = None) -> Tuple[List[dict], List[str]]:
    """What changed between two snapshots {table: {key: row} | ("uncompared", signature)}: (changes,
    tables that changed but are too big to compare).  A change is {op, table, key, values[, changed]};
    `render` makes a row as kept (a tuple, say) into its values as evidence, for changed rows only."""
    def shown(table: str, row: Any) -> Dict[str, Any]:
        return render(table, row) if render is not None else row
    changes: List[dict] = []
    uncompared: List[str] = []
    for table in sorted(set(old) | set(new)):
        before, after = old.get(table, {}), new.get(table, {})
        if isinstance(before, tuple) or isinstance(after, tuple):
            if before != after:
                uncompared.append(table)
            continue
        if before == after:
            continue
        for key, row in after.items():
            if key not in before:
                values = shown(table, row)
                changes.append({"op": "insert", "table": table, "key": _key_of(key, values), "values": values})
            elif before[key] != row:
                values, was = shown(table, row), shown(table, before[key])
                changed = sorted(c for c in values if was.get(c) != values.get(c))
                changes.append({"op": "update", "table": table, "key": _key_of(key, values), "values": values,
                                "changed": changed})
        for key, row in before.items():
            if key not in after:
                values = shown(table, row)
                changes.append({"op": "delete", "table": table, "key": _key_of(key, values), "values": values})
    return changes, uncompared


def _key_of(key: Any, row: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """A snapshot's row key as {column: value}; None for a row with no key of its own (a JSON item
    without an id, compared by content)."""
    if isinstance(key, tuple) and key and key[0] == "#":
        return None
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], tuple):
        return dict(zip(key[0], key[1]))
    return None


# ---- SQLite: the standard library's sqlite3, opened read-only, a commit seen through data_version ----

def _sqlite_ident(name: str) -> str:
    return '"%s"' % name.replace('"', '""')


class _SqliteReader:
    """A SQLite file opened read-only (URI mode=ro), never in a transaction longer than one snapshot's
    reads.  `PRAGMA data_version` changes when another connection commits (any process, WAL or rollback
    journal); only then are the tables read again and compared with the last snapshot, within
    STORE_TABLE_ROWS_CAP rows a table and STORE_ROWS_CAP in all (a bigger table is named, not compared)."""

    kind = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = "sqlite %s" % path
        self.limited = ""
        self.conn: Optional[sqlite3.Connection] = None
        self.version: Optional[int] = None
        self.snap: Dict[str, Any] = {}
        self.cols: Dict[str, List[str]] = {}

    def _render(self, table: str, values: Tuple[Any, ...]) -> Dict[str, Any]:
        return _store_row(dict(zip(self.cols.get(table, ()), values)))

    def _connect(self) -> bool:
        if self.conn is not None:
            return True
        if not os.path.isfile(self.path):
            return False
        uri = "file:%s?mode=ro" % urllib.parse.quote(os.path.abspath(self.path))
        self.conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=0.5)
        self.conn.execute("PRAGMA query_only = 1")
        return True

    def open(self) -> str:
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise _StoreError("cannot watch %s: its folder %s does not exist" % (self.path, folder),
                             "give the path of the app's database file (sqlite:////absolute/path.db)")
        try:
            there = self._connect()
            if there:
                self.version, self.snap = self._read_version(), self._snapshot()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise _StoreError("cannot read %s as a SQLite database: %s" % (self.path, exc),
                             "check the path: it must be the app's SQLite file, readable by the daemon") from None
        if not there:
            return ("SQLite file %s does not exist yet: watched from when the app creates it (its first commit "
                    "then counts as the rows it holds)" % self.path)
        return ("SQLite file %s, read-only: a commit is seen through PRAGMA data_version, its rows by comparing "
                "%d table(s)" % (self.path, len(self.snap)))

    def _read_version(self) -> int:
        assert self.conn is not None
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def tables(self) -> List[str]:
        if not self._connect():
            return []
        assert self.conn is not None
        return [r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]

    def _keys(self, table: str) -> Tuple[List[str], bool]:
        """(primary key columns, whether rows have a rowid)."""
        assert self.conn is not None
        info = self.conn.execute("PRAGMA table_info(%s)" % _sqlite_ident(table)).fetchall()
        pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        sql = self.conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        return pk, not (sql and sql[0] and re.search(r"\)\s*WITHOUT\s+ROWID", sql[0], re.I))

    def _snapshot(self) -> Dict[str, Any]:
        """Every table's rows by key, in one read transaction (a consistent picture of one commit)."""
        assert self.conn is not None
        out: Dict[str, Any] = {}
        budget = STORE_ROWS_CAP
        self.conn.execute("BEGIN")
        try:
            for table in self.tables():
                pk, rowid = self._keys(table)
                t = _sqlite_ident(table)
                count = self.conn.execute("SELECT count(*) FROM %s" % t).fetchone()[0]
                if count > min(STORE_TABLE_ROWS_CAP, budget):
                    top = self.conn.execute("SELECT max(rowid) FROM %s" % t).fetchone()[0] if rowid else None
                    out[table] = ("uncompared", count, top)
                    continue
                budget -= count
                keyed = pk or ["rowid"]
                cur = self.conn.execute("SELECT %s, * FROM %s" % (", ".join(
                    _sqlite_ident(c) if pk else "rowid" for c in keyed), t))
                cols = [d[0] for d in cur.description][len(keyed):]
                self.cols[table] = cols
                names = tuple(keyed)
                n = len(keyed)
                out[table] = {(names, values[:n]): values[n:] for values in cur}
        finally:
            self.conn.execute("COMMIT")
        return out

    def poll(self) -> Optional[dict]:
        fresh = self.conn is None
        if not self._connect():
            return None
        version = self._read_version()
        if not fresh and version == self.version:
            return None
        snap = self._snapshot()  # a read the app's commit kept busy raises: the version is read again next poll
        self.version = version
        changes, uncompared = _diff_tables({} if fresh else self.snap, snap, self._render)
        self.snap = snap
        if not changes and not uncompared:
            return None
        return {"changes": changes, "uncompared": uncompared}

    def rows(self, table: str, where: Dict[str, Any], limit: int) -> Tuple[List[dict], int]:
        names = self.tables()
        if table not in names:
            raise _StoreError("%s has no table %r (its tables: %s)" % (self.name, table, ", ".join(names) or "none"),
                             "name one of its tables", code="store_invalid")
        assert self.conn is not None
        cols = [r[1] for r in self.conn.execute("PRAGMA table_info(%s)" % _sqlite_ident(table))]
        bad = [c for c in where if c not in cols]
        if bad:
            raise _StoreError("table %s has no column %s (its columns: %s)" % (table, ", ".join(bad), ", ".join(cols)),
                             "name columns of the table in `where`", code="store_invalid")
        cond = " AND ".join("CAST(%s AS TEXT) = ?" % _sqlite_ident(c) for c in where) or "1"
        args = [_sqlite_text(v) for v in where.values()]
        t = _sqlite_ident(table)
        total = self.conn.execute("SELECT count(*) FROM %s WHERE %s" % (t, cond), args).fetchone()[0]
        cur = self.conn.execute("SELECT * FROM %s WHERE %s LIMIT %d" % (t, cond, limit), args)
        names = [d[0] for d in cur.description]
        return [_store_row(dict(zip(names, r))) for r in cur], int(total)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _sqlite_text(v: Any) -> str:
    """A `where` value as SQLite's CAST(... AS TEXT) writes it: true is 1, 2.0 is 2.0, null is ''."""
    if isinstance(v, bool):
        return "1" if v else "0"
    return "" if v is None else str(v)


# ---- JSON files: a committed change is the file's new content ----

_JSON_KEYS = ("id", "_id", "uuid", "key", "slug")


class _JsonReader:
    """A JSON file (or a folder of .json files) an app keeps its data in, its items kept as the file holds them
    (compared whole, rendered as evidence only when they changed).  A change is seen by the file's
    size and modification time, then its content's hash; its "tables" are the key paths to lists of
    objects (`notes` in {"notes": [...]}; a file holding a list is its own name), items keyed by their id
    (id, _id, uuid, key, slug) or else by content.  A file caught mid-write (not valid JSON) is read again
    at the next poll."""

    kind = "file"

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = "file %s" % path
        self.limited = ""
        self.stamp: Dict[str, Tuple[int, int]] = {}
        self.digest: Dict[str, str] = {}
        self.snap: Dict[str, Any] = {}
        self.bad: Dict[str, str] = {}

    def _files(self) -> List[str]:
        if os.path.isdir(self.path):
            return sorted(os.path.join(self.path, n) for n in os.listdir(self.path) if n.endswith(".json"))
        return [self.path] if os.path.isfile(self.path) else []

    def open(self) -> str:
        if not os.path.exists(self.path) and not os.path.isdir(os.path.dirname(os.path.abspath(self.path))):
            raise _StoreError("cannot watch %s: neither it nor its folder exists" % self.path,
                             "give the path of the JSON file the app writes (file:///absolute/path.json)")
        self.snap = self._snapshot(force=True)
        files = self._files()
        return ("%s %s, read-only: a change is its new content, compared item by item (%d table(s))"
                % ("folder" if os.path.isdir(self.path) else "JSON file", self.path, len(self.snap))
                if files else "JSON file %s does not exist yet: watched from when the app writes it" % self.path)

    def _snapshot(self, force: bool = False) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        folder = os.path.isdir(self.path)
        for f in self._files():
            st = os.stat(f)
            prefix = os.path.splitext(os.path.basename(f))[0] if folder else ""
            if st.st_size > STORE_JSON_BYTES_CAP:
                out[prefix or os.path.basename(f)] = ("uncompared", st.st_size, st.st_mtime_ns)
                continue
            with open(f, "rb") as fh:
                raw = fh.read()
            try:
                value = json.loads(raw.decode("utf-8"))
                self.bad.pop(f, None)
            except ValueError as exc:
                self.bad[f] = str(exc)[:120]
                for k, v in self.snap.items():   # mid-write: keep what it held, read again next poll
                    if not prefix or k == prefix or k.startswith(prefix + "."):
                        out[k] = v
                continue
            for table, rows in _json_tables(value, os.path.splitext(os.path.basename(f))[0], prefix):
                out[table] = rows
        return out

    def _changed(self) -> bool:
        stamp = {}
        for f in self._files():
            st = os.stat(f)
            stamp[f] = (st.st_size, st.st_mtime_ns)
        if stamp == self.stamp and not self.bad:
            return False
        self.stamp = stamp
        digest = {}
        for f in stamp:
            with open(f, "rb") as fh:
                digest[f] = hashlib.sha256(fh.read()).hexdigest()
        if digest == self.digest and not self.bad:
            return False
        self.digest = digest
        return True

    def tables(self) -> List[str]:
        return sorted(self.snap)

    def poll(self) -> Optional[dict]:
        if not self._changed():
            return None
        snap = self._snapshot()
        changes, uncompared = _diff_tables(self.snap, snap, lambda table, item: _store_row(item))
        self.snap = snap
        if not changes and not uncompared:
            return None
        return {"changes": changes, "uncompared": uncompared}

    def rows(self, table: str, where: Dict[str, Any], limit: int) -> Tuple[List[dict], int]:
        self._changed()
        self.snap = self._snapshot()
        rows = self.snap.get(table)
        if rows is None:
            raise _StoreError("%s has no table %r (its key paths to lists of items: %s)" % (
                self.name, table, ", ".join(sorted(self.snap)) or "none"), "name one of them", code="store_invalid")
        if isinstance(rows, tuple):
            raise _StoreError("%s is too big to read (over %d bytes)" % (self.name, STORE_JSON_BYTES_CAP),
                             "check the rows another way", code="store_unavailable")
        found = [r for r in rows.values() if all(_same(r.get(k), v) for k, v in where.items())]
        return [_store_row(r) for r in found[:limit]], len(found)

    def close(self) -> None:
        self.snap = {}


def _same(have: Any, want: Any) -> bool:
    """Values compared as text (3 is "3"; true is 1, as SQLite keeps it)."""
    if isinstance(have, bool) or isinstance(want, bool):
        return str(int(have) if isinstance(have, bool) else have) == str(int(want) if isinstance(want, bool) else want)
    return ("" if have is None else str(have)) == ("" if want is None else str(want))


def _json_tables(value: Any, stem: str, prefix: str) -> Iterator[Tuple[str, Dict[Any, Dict[str, Any]]]]:
    """The "tables" of a JSON document: (key path, {key: item}) for each list of objects in it (and for
    an object of objects, keyed by their keys), at most three levels deep."""
    def walk(v: Any, path: str, depth: int) -> Iterator[Tuple[str, Dict[Any, Dict[str, Any]]]]:
        if isinstance(v, list) and (not v or all(isinstance(x, dict) for x in v)):
            yield path or stem, _json_items(v)
        elif isinstance(v, dict) and depth < 3:
            if v and path and all(isinstance(x, dict) and any(not isinstance(y, (dict, list)) for y in x.values())
                                  for x in v.values()):  # an object of records (each with a field of its own)
                yield path, {(("key",), (k,)): dict(x, key=k) for k, x in v.items()}
                return
            for k, x in v.items():
                if isinstance(x, (list, dict)):
                    yield from walk(x, "%s.%s" % (path, k) if path else str(k), depth + 1)
    yield from walk(value, prefix, 0)


def _json_items(items: List[dict]) -> Dict[Any, Dict[str, Any]]:
    field = next((f for f in _JSON_KEYS if items and all(f in x for x in items)), None)
    out: Dict[Any, Dict[str, Any]] = {}
    for x in items:
        if field is not None:
            out[((field,), (x[field],))] = dict(x)
        else:
            digest = hashlib.sha256(json.dumps(x, sort_keys=True, default=str).encode()).hexdigest()[:16]
            n = sum(1 for k in out if k[1] == digest)
            out[("#", digest, n)] = dict(x)
    return out


# ---- a store URL, as the app's own configuration writes it ----

def _store_reader(url: str, project_dir: str) -> _StoreReader:
    """The reader for a store URL (see _STORE_FORMS), or _StoreError (store_invalid) saying what is accepted."""
    if not isinstance(url, str) or not url.strip():
        raise _StoreError("no store URL given; accepted: %s" % _STORE_FORMS, "pass the app's database URL",
                         code="store_invalid")
    url = url.strip()
    scheme = url.split(":", 1)[0].lower()
    if scheme.startswith("sqlite"):
        rest = url.split(":", 1)[1]
        if not rest.startswith("///") or len(rest) <= 3:
            raise _StoreError("%r is not a SQLite file URL (an in-memory database cannot be watched); accepted: %s"
                             % (_store_url_safe(url), _STORE_FORMS), "write the file's path after sqlite:///",
                             code="store_invalid")
        path = urllib.parse.unquote(rest[3:].split("?", 1)[0])
        if path.strip("/") == ":memory:":
            raise _StoreError("an in-memory SQLite database cannot be watched; accepted: %s" % _STORE_FORMS,
                             "write the file's path after sqlite:///", code="store_invalid")
        return _SqliteReader(os.path.normpath(path if os.path.isabs(path) else os.path.join(project_dir, path)))
    if scheme.startswith("postgres"):
        return _PostgresReader(url)
    if scheme == "file":
        parts = urllib.parse.urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise _StoreError("%r names another host; only a file on this machine can be watched" % url,
                             "write file:///absolute/path.json", code="store_invalid")
        path = urllib.parse.unquote(parts.path or url[5:])
        return _JsonReader(os.path.normpath(path if os.path.isabs(path) else os.path.join(project_dir, path)))
    raise _StoreError("%r is not a store Reticle can watch (%s); accepted: %s" % (
        _store_url_safe(url), "MySQL is not supported yet" if scheme.startswith(("mysql", "mariadb")) else
        "unknown scheme %r" % scheme, _STORE_FORMS), "pass one of the accepted forms", code="store_invalid")


def _store_url_safe(url: str) -> str:
    """A store URL fit to print: its password replaced by ***."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<a store URL>"
    if parts.password is None:
        return url
    netloc = "%s:***@%s" % (parts.username or "", parts.netloc.rsplit("@", 1)[1])
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


STORE_ACT_CAP_MS = 120_000  # an act whose end was never said (it raised) stops counting as acting after this
STORE_IDLE_DRAIN_MS = 60_000  # a PostgreSQL slot is drained this often while no tab acts (its WAL is let go)


def _watched_stores(session: Any) -> Optional["_Stores"]:
    """The stores the daemon of a tab watches, when it watches any (Storage truth); else None."""
    stores = getattr(getattr(getattr(session, "bridge", None), "hub", None), "stores", None)
    return stores if isinstance(stores, _Stores) and stores.watches else None


# ---- the daemon's stores: watched while tabs act, commits pushed into the acting tabs' windows ----

class _Acting(Protocol):
    """What the stores ask of a tab: its id, its clock, and a place for a commit."""

    @property
    def id(self) -> str: ...

    def add_store_commit(self, data: dict) -> None: ...


class _Watch:
    """One watched store: its reader, how it watches, who asked for it, what it last said."""

    __slots__ = ("url", "reader", "how", "by", "commits", "error", "reads")

    def __init__(self, url: str, reader: _StoreReader, by: str) -> None:
        self.url = url
        self.reader = reader
        self.how = ""
        self.by = by
        self.commits = 0
        self.error = ""
        self.reads = 0      # polls made (they stop when no tab acts)

    def describe(self) -> dict:
        out = {"store": self.reader.name, "kind": self.reader.kind, "how": self.how, "by": self.by,
               "commitsSeen": self.commits, "reads": self.reads}
        if self.reader.limited:
            out["limited"] = self.reader.limited
        if self.error:
            out["error"] = self.error
        return out


class _Stores:
    """The stores one daemon watches (Storage truth).  Polling (every STORE_POLL_MS on one worker thread)
    runs only while a tab acts: from an act until its verdict, plus STORE_LINGER_MS (a bare act: STORE_ACT_MS).
    Each commit seen goes to every tab acting then, marked `shared` when more than one was (whose it was
    cannot be told).  `catch_up` reads every store now, so a verdict judges what was committed before it."""

    def __init__(self, project_dir: str, clock: Callable[[], float],
                 spawn: Callable[[Any], Any]) -> None:
        self.project_dir = project_dir
        self.clock = clock
        self.spawn = spawn
        self.watches: Dict[str, _Watch] = {}
        self.acting: Dict[str, Tuple[_Acting, float]] = {}  # tab id -> (tab, acting until, on the daemon's clock)
        self.polled_at = 0.0
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._poller: Optional[Any] = None
        self._idler: Optional[Any] = None
        self._lock = asyncio.Lock()

    def _run(self, fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="reticle-store")
        return asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # -- watching ------------------------------------------------------------
    async def watch(self, url: str, by: str) -> dict:
        """Watch the store at `url` (read-only): -> what it watches and how; _StoreError when it cannot."""
        reader = _store_reader(url, self.project_dir)
        if reader.name in self.watches:
            return dict(self.watches[reader.name].describe(), already=True)
        if len(self.watches) >= STORE_MAX:
            raise _StoreError("already watching %d stores, the most a daemon watches" % STORE_MAX,
                             "watch fewer stores", code="store_unavailable")
        watch = _Watch(url, reader, by)
        async with self._lock:
            try:
                watch.how = await self._run(reader.open)
            except _StoreError:
                await self._run(reader.close)
                raise
            except Exception as exc:  # a driver's own error: said, never a crash
                await self._run(reader.close)
                raise _StoreError("cannot watch %s: %s" % (reader.name, _scrub_server(str(exc))[:300]),
                                 "check that the store is up and the URL is the app's own") from None
        self.watches[reader.name] = watch
        if reader.kind == "postgresql" and (self._idler is None or self._idler.done()):
            self._idler = self.spawn(self._idle_loop())
        _emit(_log, 20, "store.watch", store=reader.name, how=watch.how)
        return watch.describe()

    async def unwatch(self, name: str) -> None:
        watch = self.watches.pop(name, None)
        if watch is not None:
            async with self._lock:
                await self._run(watch.reader.close)

    def names(self) -> Tuple[str, ...]:
        return tuple(self.watches)

    def describe(self) -> List[dict]:
        return [w.describe() for w in self.watches.values()]

    def tables(self) -> Dict[str, List[str]]:
        """The tables each store had at its last read (what a request's path may name)."""
        out: Dict[str, List[str]] = {}
        for name, w in self.watches.items():
            snap = getattr(w.reader, "snap", None)
            out[name] = sorted(snap) if isinstance(snap, dict) else list(getattr(w.reader, "known_tables", ()))
        return out

    # -- acting --------------------------------------------------------------
    async def before_act(self, tab: _Acting) -> None:
        """Before `tab` acts: read every store now (what was committed before the act is not the act's),
        then count the tab as acting until end_act."""
        if not self.watches:
            return
        await self.catch_up()
        self.acting[tab.id] = (tab, self.clock() + STORE_ACT_CAP_MS)
        if self._poller is None or self._poller.done():
            self._poller = self.spawn(self._poll_loop())

    def end_act(self, tab: _Acting, linger_ms: float = STORE_LINGER_MS) -> None:
        """The act's verdict is given (or, for a bare act, linger_ms STORE_ACT_MS): it stays acting a little
        longer, for a commit the act's work makes late."""
        if tab.id in self.acting:
            self.acting[tab.id] = (tab, self.clock() + linger_ms)

    def bare_act(self, tab: _Acting) -> None:
        self.end_act(tab, STORE_ACT_MS)

    def _still_acting(self) -> List[_Acting]:
        now = self.clock()
        for key, (_, until) in list(self.acting.items()):
            if until < now:
                del self.acting[key]
        return [tab for tab, _ in self.acting.values()]

    async def _poll_loop(self) -> None:
        while self._still_acting() and self.watches:
            await self.catch_up()
            await asyncio.sleep(STORE_POLL_MS / 1000.0)

    async def _idle_loop(self) -> None:
        """A logical replication slot keeps the server's write-ahead log from its last read on: while no tab
        acts, a watched PostgreSQL store is still drained every STORE_IDLE_DRAIN_MS (into no tab's window), so
        a long-idle watch of a busy database holds no log files."""
        while any(w.reader.kind == "postgresql" for w in self.watches.values()):
            await asyncio.sleep(STORE_IDLE_DRAIN_MS / 1000.0)
            if not self._still_acting():
                await self.catch_up()

    async def catch_up(self) -> bool:
        """Read every watched store now; each commit found goes into the windows of the tabs acting.
        -> whether any commit was found."""
        found = False
        async with self._lock:
            for watch in list(self.watches.values()):
                watch.reads += 1
                try:
                    got = await self._run(watch.reader.poll)
                    watch.error = ""
                except Exception as exc:  # the store went away, refused or was busy: said, never lost silently
                    watch.error = _scrub_server(str(getattr(exc, "error", None) or exc))[:300]
                    for tab in self._still_acting():
                        tab.add_store_commit({"store": watch.reader.name, "kind": watch.reader.kind, "changes": [],
                                              "uncompared": [], "unread": watch.error})
                    continue
                if got:
                    found = True
                    watch.commits += 1
                    self._deliver(watch, got)
            self.polled_at = self.clock()
        return found

    def _deliver(self, watch: _Watch, got: dict) -> None:
        tabs = self._still_acting()
        # every reader's rows are redacted here too, whatever the reader did (a secret column is never evidence)
        changes = [dict(ch, values=_store_row(ch.get("values") or {}),
                        key=_store_row(ch["key"]) if isinstance(ch.get("key"), dict) else None)
                   for ch in got.get("changes") or [] if isinstance(ch, dict)]
        data: Dict[str, Any] = {"store": watch.reader.name, "kind": watch.reader.kind,
                                "changes": changes[:STORE_CHANGES_CAP],
                "uncompared": (got.get("uncompared") or [])[:20], "shared": len(tabs) > 1}
        if len(changes) > STORE_CHANGES_CAP:
            data["more"] = len(changes) - STORE_CHANGES_CAP
        if got.get("more"):
            data["more"] = data.get("more", 0) + int(got["more"])
        for tab in tabs:
            tab.add_store_commit(dict(data, tabs=len(tabs)))

    async def rows(self, store: Optional[str], table: str, where: Dict[str, Any], limit: int) -> dict:
        """The current rows of `table` (in `store`, or the one store that has it) whose columns equal `where`."""
        watch = self.find(store, table)
        async with self._lock:
            rows, total = await self._run(watch.reader.rows, table, where, limit)
        return {"store": watch.reader.name, "table": table, "rows": [_store_row(r) for r in rows], "total": total}

    def find(self, store: Optional[str], table: Optional[str] = None) -> _Watch:
        """The watch a predicate's `store` names (its name, URL, or file name), or the only one (or the
        one whose tables include `table`)."""
        if not self.watches:
            raise _StoreError("no store is watched", "watch the app's database: reticle serve --watch-db URL, "
                             "RETICLE_WATCH_DB, or the tool reticle_watch_db", code="store_not_watched")
        if store:
            for name, w in self.watches.items():
                if store in (name, w.url, os.path.basename(name.split(" ", 1)[-1])) or name.endswith(store):
                    return w
            raise _StoreError("no watched store is %r (watched: %s)" % (store, ", ".join(self.watches)),
                             "name one of the watched stores, or leave `store` out", code="store_not_watched")
        if len(self.watches) == 1 or table is None:
            return next(iter(self.watches.values()))
        having = [w for name, w in self.watches.items() if table in self.tables().get(name, [])]
        return having[0] if having else next(iter(self.watches.values()))

    async def close(self) -> None:
        """Stop watching: every reader closed (a PostgreSQL slot dropped), the worker thread ended."""
        for watch in list(self.watches.values()):
            try:
                await self._run(watch.reader.close)
            except Exception:  # closing what may already be gone
                pass
        self.watches.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
