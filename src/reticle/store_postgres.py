"""PostgreSQL truth.

A read-only watch of one PostgreSQL database that says what was committed, row by row: a temporary
logical replication slot with the built-in `test_decoding` plugin, read over an ordinary connection
with the SQL interface (`pg_logical_slot_get_changes`), so only committed transactions ever show and a
killed daemon leaves no slot behind (the server drops a temporary slot when its session ends).  Where
logical decoding is off (`wal_level` below logical) or refused (a role without REPLICATION), the watch
still starts and says so in `limited`: it then sees only which tables were written, from PostgreSQL's
statistics.  psycopg 3 is imported when a watch opens, never at import (`pip install "reticle[postgres]"`).

`_PostgresReader` is called from one worker thread, one call at a time.  It keeps two connections, both
in autocommit and read-only: one holds the slot and does nothing else (an error in a session drops its
temporary slots), the other reads the catalogue, the statistics and the rows `rows()` asks for.  A slot
keeps the server's WAL from the last poll on, so a watch should be polled now and then, or closed.
"""

from __future__ import annotations

import re
import secrets
import urllib.parse
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from .errors import _StoreError

_PG_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2")
_PG_FORMS = ("postgresql://user:password@host:port/database (or postgres://, postgresql+psycopg://, "
             "postgresql+psycopg2://), with query parameters such as ?sslmode=require if need be")
_PG_INSTALL = 'pip install "reticle[postgres]" (it installs psycopg[binary])'
_PG_CHANGES_CAP = 500          # changes one poll returns; the rest are counted in "more"
_PG_TEXT_CAP = 300             # characters of a text value kept
_PG_TABLES_SAID = 40           # tables an error lists
_PG_ROWS_TIMEOUT = "10s"       # how long rows() may read
_PG_GET_CHANGES = ("SELECT data FROM pg_logical_slot_get_changes(%s, NULL, NULL, 'include-xids', '0', "
                   "'skip-empty-xacts', '1', 'include-timestamp', '0')")
_PG_SEES_TABLES = ("only which tables were written shows (from PostgreSQL's statistics, a second or so late, "
                   "rolled-back writes included), never the rows")
_PG_INTEGER_TYPES = frozenset(("smallint", "integer", "bigint", "oid"))
_PG_NUMBER_TYPES = frozenset(("real", "double precision", "numeric"))


# ---- the URL: where, who, and never the password ----

class _PgAddress:
    """A PostgreSQL URL taken apart (no I/O): what psycopg connects with, and how to name it without
    the password (`name`, `where`, `scrub`)."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url.strip())
        if parts.scheme.lower() not in _PG_SCHEMES or not parts.netloc and not parts.path.strip("/"):
            raise _StoreError("%s is not a PostgreSQL URL" % _pg_hide_password(url),
                             "write it as " + _PG_FORMS, code="store_invalid")
        userinfo, _, hostport = parts.netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        self.user = urllib.parse.unquote(user)
        self.password: Optional[str] = urllib.parse.unquote(password) if colon else None
        self.host, port = _pg_host_port(hostport)
        params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        self.host = params.pop("host", self.host)
        self.user = params.pop("user", self.user)
        self.password = params.pop("password", self.password)
        self.dbname = params.pop("dbname", urllib.parse.unquote(parts.path.lstrip("/")))
        self.port = _pg_port(params.pop("port", port), url)
        if not self.dbname:
            raise _StoreError("%s names no database" % _pg_hide_password(url), "write it as " + _PG_FORMS,
                             code="store_invalid")
        self.params = params
        host = self.host or "localhost"
        self.where = "%s:%d" % ("[%s]" % host if ":" in host else host, self.port)
        self.name = "postgresql %s%s/%s" % (self.user + "@" if self.user else "", self.where, self.dbname)

    def connect_args(self) -> Dict[str, Any]:
        """The keyword arguments of psycopg.connect: the URL's own parameters win over the defaults."""
        args: Dict[str, Any] = {"connect_timeout": "5", "application_name": "reticle"}
        args.update(self.params)
        args.update(port=self.port, dbname=self.dbname, autocommit=True)
        for key, value in (("host", self.host), ("user", self.user), ("password", self.password)):
            if value:
                args[key] = value
        return args

    def scrub(self, text: str) -> str:
        """`text` (a driver's or server's message) with the password, should it appear, hidden."""
        return text.replace(self.password, "***") if self.password else text


def _pg_hide_password(url: str) -> str:
    """The URL as it may be shown: whatever follows `user:` up to the last `@`, and a `password=`
    parameter's value, hidden."""
    url = re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", url)
    head, at, tail = url.rpartition("@")
    if not at:
        return url
    start = head.find("://") + 3 if "://" in head else 0
    user, colon, _ = head[start:].partition(":")
    return head[:start] + user + (":***" if colon else "") + "@" + tail


def _pg_host_port(hostport: str) -> Tuple[str, str]:
    """(host, port text) of a URL's `host:port`, `[v6]:port`, or a percent-encoded socket folder."""
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else ""
    host, _, port = hostport.partition(":")
    return urllib.parse.unquote(host), port


def _pg_port(text: str, url: str) -> int:
    """The port a URL says (5432 when it says none), or _StoreError (store_invalid)."""
    if not text:
        return 5432
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise _StoreError("the port of %s is not a port number: %r" % (_pg_hide_password(url), text),
                         "write it as " + _PG_FORMS, code="store_invalid")
    return int(text)


def _pg_driver() -> Any:
    """psycopg 3, imported now (reticle.py never needs it at import), or _StoreError with the install."""
    try:
        import psycopg
    except ImportError:
        raise _StoreError("watching PostgreSQL needs psycopg 3, which is not installed",
                         _PG_INSTALL) from None
    return psycopg


def _pg_connect_error(exc: Exception, address: _PgAddress) -> _StoreError:
    """A failed connection as one _StoreError: what PostgreSQL (or the network) said, named by host:port
    and never with the password, and the fix."""
    text = address.scrub(str(exc)).strip()
    where, user, db = address.where, address.user or "(the default user)", address.dbname
    if "Connection refused" in text or "No such file or directory" in text:
        return _StoreError("nothing accepts connections at %s (refused): PostgreSQL does not run there" % where,
                          "start PostgreSQL, or correct the host and port in the URL")
    if "authentication failed" in text or "no password supplied" in text or re.search(r'role ".*" does not', text):
        return _StoreError("PostgreSQL at %s refused the login of user %s (wrong user or password)" % (where, user),
                          "put the app's own user and password in the URL")
    if "pg_hba.conf" in text:
        return _StoreError("PostgreSQL at %s does not let user %s connect to %s (pg_hba.conf)" % (where, user, db),
                          "use the app's own URL, or allow it in pg_hba.conf and reload PostgreSQL")
    if re.search(r'database ".*" does not exist', text):
        return _StoreError("PostgreSQL at %s has no database %s" % (where, db),
                          "correct the database in the URL, or create it (createdb %s)" % db)
    if "resolve host" in text or "translate host name" in text:
        return _StoreError("the host of %s is not known: %s" % (address.name, text.splitlines()[0]),
                          "correct the host in the URL")
    if "timeout expired" in text:
        waited = address.connect_args()["connect_timeout"]
        return _StoreError("PostgreSQL at %s did not answer within %s s" % (where, waited),
                          "check that it is up and reachable, or correct the host and port in the URL")
    return _StoreError("cannot connect to %s: %s" % (address.name, " ".join(text.split())[:300]),
                      "check that PostgreSQL is up and the URL is the app's own")


def _pg_ident(name: str) -> str:
    """`name` as an SQL identifier in a sentence the user may paste (quoted only when it must be)."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"%s"' % name.replace('"', '""')


# ---- test_decoding's text: one line per change ----

class _PgLine(NamedTuple):
    """One change as test_decoding says it: the op (insert, update, delete, truncate), the tables
    ((schema, table) pairs: one, or several for a truncate), the new tuple and the old key or tuple
    ({column: value}; None when not said)."""

    op: str
    tables: List[Tuple[str, str]]
    new: Optional[Dict[str, Any]]
    old: Optional[Dict[str, Any]]


_PG_IDENT_RE = re.compile(r'"((?:[^"]|"")*)"|([^\s".:,\[]+)')
_PG_COLUMN_RE = re.compile(r'(?:"((?:[^"]|"")*)"|([^\s"\[]+))\[((?:[^\[\]]|\[\])*)\]:'
                           r"(?:'((?:[^']|'')*)'|(\S+))", re.S)
_PG_OPS = {"INSERT": "insert", "UPDATE": "update", "DELETE": "delete", "TRUNCATE": "truncate"}
_PG_UNCHANGED = object()   # a TOASTed value an update did not change: test_decoding does not print it


def _pg_name(text: str, pos: int) -> Tuple[Tuple[str, str], int]:
    """The qualified table name (schema, table) at text[pos:], and where it ends; ValueError if none."""
    names = []
    for _ in range(2):
        m = _PG_IDENT_RE.match(text, pos)
        if m is None:
            raise ValueError("no name at %d" % pos)
        names.append(m.group(1).replace('""', '"') if m.group(1) is not None else m.group(2))
        pos = m.end() + 1 if text.startswith(".", m.end()) and len(names) == 1 else m.end()
    return (names[0], names[1]), pos


def _pg_header(data: str) -> Tuple[str, List[Tuple[str, str]], int]:
    """(op, tables, where the tuple starts) of a `table s.t: OP: ...` line; ValueError if it is not one."""
    tables, pos = [], len("table ")
    while True:
        name, pos = _pg_name(data, pos)
        tables.append(name)
        if not data.startswith(", ", pos):
            break
        pos += 2
    op, colon, _ = data[pos + 2:].partition(":")
    if not data.startswith(": ", pos) or not colon or op not in _PG_OPS:
        raise ValueError("not a change: %r" % data[:80])
    return _PG_OPS[op], tables, pos + 2 + len(op) + 2


def _pg_tuple(data: str, pos: int, stop: str = "") -> Tuple[Dict[str, Any], int]:
    """The columns `name[type]:value` from data[pos:] up to the end or the marker `stop`: {column: value}
    (each value typed as rows() types it), and where it ended."""
    out: Dict[str, Any] = {}
    while pos < len(data) and not (stop and data.startswith(stop, pos)):
        m = _PG_COLUMN_RE.match(data, pos)
        if m is None:
            raise ValueError("no column at %d of %r" % (pos, data[:80]))
        name = m.group(1).replace('""', '"') if m.group(1) is not None else m.group(2)
        if m.group(4) is not None:
            out[name] = _pg_typed(m.group(4).replace("''", "'"), m.group(3))
        elif m.group(5) == "unchanged-toast-datum":
            out[name] = _PG_UNCHANGED
        else:
            out[name] = None if m.group(5) == "null" else _pg_typed(m.group(5), m.group(3))
        pos = m.end() + 1
    return {k: v for k, v in out.items() if v is not _PG_UNCHANGED}, pos


def _pg_parse(data: str) -> _PgLine:
    """One line of test_decoding that starts with `table `, read; ValueError if it cannot be."""
    op, tables, pos = _pg_header(data)
    rest = data[pos:]
    if op == "truncate" or rest == "(no-tuple-data)":
        return _PgLine(op, tables, None, None)
    if rest.startswith("old-key: "):
        old, pos = _pg_tuple(data, pos + len("old-key: "), "new-tuple: ")
        new, _ = _pg_tuple(data, pos + len("new-tuple: "))
        return _PgLine(op, tables, new, old)
    values, _ = _pg_tuple(data, pos)
    return _PgLine(op, tables, None, values) if op == "delete" else _PgLine(op, tables, values, None)


def _pg_typed(text: Optional[str], type_name: str) -> Any:
    """A column's text (its type's output, as test_decoding prints it and `::text` reads it) as JSON:
    integers, numbers and booleans as such, NULL as None, anything else as text cut at _PG_TEXT_CAP."""
    if text is None:
        return None
    if type_name in _PG_INTEGER_TYPES and re.fullmatch(r"-?\d+", text):
        return int(text)
    if type_name in _PG_NUMBER_TYPES and re.fullmatch(r"-?\d+", text):
        return int(text)
    if type_name in _PG_NUMBER_TYPES and re.fullmatch(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        return float(text)
    if type_name == "boolean" and text in ("true", "false"):
        return text == "true"
    return text[:_PG_TEXT_CAP]


def _pg_table_name(schema: str, table: str) -> str:
    """How answers name a table: bare in `public`, `schema.table` elsewhere."""
    return table if schema == "public" else "%s.%s" % (schema, table)


def _pg_pick(columns: List[str], row: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """{column: value} of `columns` (a primary key) in `row`; None when the key or a value is not known."""
    if not columns or row is None or any(c not in row for c in columns):
        return None
    return {c: row[c] for c in columns}


def _pg_change(line: _PgLine, primary_key: List[str]) -> dict:
    """A decoded insert, update or delete as the dict poll() answers: op, table, key, values (and, for an
    update that changed its key, the key it had: old_key)."""
    schema, table = line.tables[0]
    row = line.old if line.op == "delete" else line.new
    change = {"op": line.op, "table": _pg_table_name(schema, table), "key": _pg_pick(primary_key, row),
              "values": dict(row or {})}
    old_key = _pg_pick(primary_key, line.old) if line.op == "update" else None
    if old_key is not None and old_key != change["key"]:
        change["old_key"] = old_key
    return change


# ---- the catalogue: tables, columns, primary keys ----

_PG_TABLES_SQL = ("SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema NOT IN "
                  "('pg_catalog', 'information_schema') AND table_schema NOT LIKE 'pg\\_%' ORDER BY 1, 2")
_PG_COLUMNS_SQL = ("SELECT a.attname, format_type(a.atttypid, NULL) FROM pg_attribute a "
                   "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
                   "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
                   "ORDER BY a.attnum")
_PG_PRIMARY_KEY_SQL = ("SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
                       "JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) "
                       "WHERE i.indisprimary AND n.nspname = %s AND c.relname = %s "
                       "ORDER BY array_position(i.indkey::int2[], a.attnum)")
_PG_STATS_SQL = "SELECT schemaname, relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"


def _pg_tables(conn: Any) -> Dict[str, Tuple[str, str]]:
    """The tables (and views) the role can see: {name as answers say it: (schema, table)}, each table of
    `public` also under `public.table`."""
    out: Dict[str, Tuple[str, str]] = {}
    for schema, table in conn.execute(_PG_TABLES_SQL).fetchall():
        out[_pg_table_name(schema, table)] = (schema, table)
    for schema, table in list(out.values()):
        out.setdefault("%s.%s" % (schema, table), (schema, table))
    return out


def _pg_said(tables: Dict[str, Tuple[str, str]]) -> List[str]:
    """The names of _pg_tables' answer as answers say them (without the `public.` aliases), sorted."""
    return sorted(name for name, (schema, table) in tables.items() if name == _pg_table_name(schema, table))


def _pg_stat_counts(conn: Any) -> Dict[str, Tuple[int, int, int]]:
    """{table: (rows inserted, updated, deleted)} from the statistics, read afresh (the session's cached
    snapshot of them cleared first)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return {_pg_table_name(s, t): (i or 0, u or 0, d or 0) for s, t, i, u, d in conn.execute(_PG_STATS_SQL)}


def _pg_where(where: Dict[str, Any], sql: Any) -> Tuple[Any, List[str]]:
    """The WHERE clause (psycopg.sql) of `where`, each column compared as text, and its parameters."""
    parts, params = [], []
    for column, value in where.items():
        if value is None:
            parts.append(sql.SQL("{} IS NULL").format(sql.Identifier(column)))
            continue
        parts.append(sql.SQL("{}::text = %s").format(sql.Identifier(column)))
        params.append(("true" if value else "false") if isinstance(value, bool) else str(value))
    if not parts:
        return sql.SQL(""), params
    return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(parts), params


def _pg_limits(text: str, role: str, needs_role: bool) -> str:
    """`limited` when wal_level is `text`, not logical: what shows, and the exact fix."""
    fix = "run `ALTER SYSTEM SET wal_level = logical;` as a superuser, then restart PostgreSQL"
    if needs_role:
        fix += ", and `ALTER ROLE %s WITH REPLICATION;`" % _pg_ident(role)
    return "PostgreSQL's wal_level is %s, not logical, so %s: %s." % (text, _PG_SEES_TABLES, fix)


def _pg_refusal(exc: Any, role: str) -> str:
    """`limited` when the server refused to make the slot (exc, a psycopg error): why, and the fix."""
    said = " ".join(str(exc).split())[:200]
    state = getattr(exc, "sqlstate", "") or ""
    if state == "42501":
        return ("the role %s may not use logical decoding (it is neither a superuser nor has REPLICATION), so "
                "%s: run `ALTER ROLE %s WITH REPLICATION;` as a superuser, then watch again."
                % (role, _PG_SEES_TABLES, _pg_ident(role)))
    if state == "58P01":
        fix = ("install PostgreSQL's contrib modules, which hold the test_decoding plugin (postgresql-contrib on "
               "most systems), then watch again")
    elif "max_replication_slots" in said or state == "53400":
        fix = ("free a replication slot, or run `ALTER SYSTEM SET max_replication_slots = 10;` as a superuser "
               "and restart PostgreSQL")
    elif "recovery" in said:
        fix = "watch the primary server instead of this standby"
    else:
        fix = "see PostgreSQL's message"
    return "PostgreSQL refused logical decoding (%s), so %s: %s." % (said, _PG_SEES_TABLES, fix)


def _pg_holder(conn: Any) -> str:
    """Which transaction held the slot's start up (logical decoding waits for those running then)."""
    row = conn.execute(
        "SELECT pid, coalesce(application_name, ''), state, round(extract(epoch FROM now() - xact_start)) "
        "FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() "
        "ORDER BY xact_start LIMIT 1").fetchone()
    if row is None:
        return "a transaction that was running then (a prepared one, or one that ended since) held it up"
    return ("a transaction that wrote and is still open (pid %s, application %r, %s, for %s s) holds it up"
            % (row[0], row[1], row[2], row[3]))


def _pg_tables_said(data: str) -> List[Tuple[str, str]]:
    """The tables a line of test_decoding names ([] when it cannot be read at all)."""
    try:
        return _pg_header(data)[1]
    except ValueError:
        return []


def _pg_resolve(conn: Any, table: str, store: str) -> Tuple[str, str]:
    """(schema, table) of a table as answers name it; _StoreError (store_invalid) naming those there are."""
    names = _pg_tables(conn)
    if table in names:
        return names[table]
    said = _pg_said(names)
    shown = ", ".join(said[:_PG_TABLES_SAID]) + (" and %d more" % (len(said) - _PG_TABLES_SAID)
                                                   if len(said) > _PG_TABLES_SAID else "")
    raise _StoreError("%s has no table %r (its tables: %s)" % (store, table, shown or "none"),
                     "name one of them", code="store_invalid")


def _pg_read_rows(conn: Any, sql: Any, table: Tuple[str, str], columns: List[Tuple[str, str]],
                  where: Dict[str, Any], order: List[str], limit: int) -> Tuple[List[dict], int]:
    """Count and read the rows of `table` matching `where` in one read-only snapshot, at most `limit` in
    `order` (the primary key), each column typed as poll() types it; `sql` is psycopg.sql."""
    clause, params = _pg_where(where, sql)
    source = sql.SQL("FROM {}.{} AS r").format(sql.Identifier(table[0]), sql.Identifier(table[1])) + clause
    listed = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c, _ in columns)
    query = sql.SQL("SELECT {} ").format(listed) + source
    if order:  # qualified, so that the key's own values order the rows, not their text (the list's names)
        query += sql.SQL(" ORDER BY ") + sql.SQL(", ").join(sql.SQL("r.{}").format(sql.Identifier(c)) for c in order)
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute("SET LOCAL statement_timeout = '%s'" % _PG_ROWS_TIMEOUT)
        total = conn.execute(sql.SQL("SELECT count(*) ") + source, params).fetchone()[0]
        got = conn.execute(query + sql.SQL(" LIMIT %s"), params + [limit]).fetchall() if limit else []
    return [{c: _pg_typed(v, t) for (c, t), v in zip(columns, row)} for row in got], int(total)


# ---- the reader ----

class _PostgresReader:
    """One PostgreSQL database watched read-only (see the module's docstring): `open` starts the watch,
    `poll` says what committed since the last poll (the first poll: since open), `rows` reads rows now,
    `close` ends it.  After a lost connection, poll raises once and the next poll watches afresh."""

    kind = "postgresql"
    start_timeout_s = 15.0   # how long making the slot may wait for the transactions running then

    def __init__(self, url: str) -> None:
        self._address = _PgAddress(url)
        self.name = self._address.name
        self.limited = ""
        self.known_tables: List[str] = []
        self._pg: Any = None
        self._query: Any = None          # reads the catalogue, the statistics and rows()
        self._slot_conn: Any = None      # holds the slot, and does nothing else
        self._slot = ""
        self._counts: Optional[Dict[str, Tuple[int, int, int]]] = None   # the statistics, in fallback
        self._keys: Dict[Tuple[str, str], List[str]] = {}
        self._wanted = False

    # -- starting and ending ----------------------------------------------
    def open(self) -> str:
        """Connect and start watching from now: -> how it watches, in one sentence.  _StoreError when it
        cannot watch at all (no psycopg, nothing listening, login refused, no such database, stuck)."""
        self.close()
        self._pg = _pg_driver()
        self._wanted = True
        try:
            return self._start()
        except _StoreError:
            self.close()
            raise

    def _start(self) -> str:
        """Connect, and make the slot (or read the statistics, in fallback): the watch's baseline."""
        try:
            self._query = self._connect()
            level = self._query.execute("SHOW wal_level").fetchone()[0]
            if level != "logical":
                self.limited = _pg_limits(level, self._role(), not self._may_replicate())
            else:
                self.limited = ""
                self._start_slot()
            if self.limited:
                self._counts = _pg_stat_counts(self._query)
            self.known_tables = _pg_said(_pg_tables(self._query))
        except self._pg.Error as exc:
            self._drop_connections()
            raise _pg_connect_error(exc, self._address) from None
        except _StoreError:
            self._drop_connections()
            raise
        if self.limited:
            return ("watching which tables of %s change, from PostgreSQL's statistics, not row by row (see "
                    "limited)" % self.name)
        return ("watching each committed row change of %s through logical decoding (temporary slot %s, dropped "
                "when the watch or its connection ends)" % (self.name, self._slot))

    def close(self) -> None:
        """Drop the slot (the server would at the session's end anyway) and close both connections;
        closing twice, or what never opened, does nothing."""
        self._wanted = False
        self._drop_connections()

    def _drop_connections(self) -> None:
        """Close the connections (the slot dropped first), keeping whether the watch is wanted."""
        slot_conn, query, slot = self._slot_conn, self._query, self._slot
        self._slot_conn = self._query = None
        self._slot, self._counts, self._keys = "", None, {}
        if slot_conn is not None and slot:
            try:
                slot_conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            except Exception:  # the session is gone, and the slot with it
                pass
        for conn in (slot_conn, query):
            try:
                if conn is not None:
                    conn.close()
            except Exception:  # closing what is already broken
                pass

    def _connect(self) -> Any:
        """One more connection, autocommit and read-only, never ended for being idle between polls (the
        slot would go with it); the driver's error when it cannot."""
        conn = self._pg.connect(**self._address.connect_args())
        conn.execute("SET default_transaction_read_only = on")
        if conn.info.server_version >= 140000:
            conn.execute("SET idle_session_timeout = 0")
        return conn

    def _role(self) -> str:
        return str(self._query.execute("SELECT current_user").fetchone()[0])

    def _may_replicate(self) -> bool:
        """Whether the role is a superuser or has REPLICATION (what logical decoding asks)."""
        row = self._query.execute("SELECT rolsuper OR rolreplication FROM pg_roles WHERE rolname = current_user"
                                  ).fetchone()
        return bool(row and row[0])

    def _start_slot(self) -> None:
        """Make the temporary slot on a connection of its own, or set `limited` when the server refuses
        logical decoding; _StoreError when a running transaction holds the start up past start_timeout_s."""
        self._slot_conn = self._connect()
        slot = "reticle_" + secrets.token_hex(6)
        self._slot_conn.execute("SET statement_timeout = %d" % int(self.start_timeout_s * 1000))
        try:
            self._slot_conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding', true)", (slot,))
        except self._pg.errors.QueryCanceled:
            raise _StoreError("PostgreSQL at %s could not start the watch within %g s: %s"
                             % (self._address.where, self.start_timeout_s, _pg_holder(self._query)),
                             "end that transaction (commit it or roll it back), then watch again") from None
        except self._pg.Error as exc:
            self.limited = _pg_refusal(exc, self._role())
            self._slot_conn.close()
            self._slot_conn = None
            return
        self._slot_conn.execute("SET statement_timeout = 0")
        self._slot = slot

    # -- what committed -----------------------------------------------------
    def poll(self) -> Optional[dict]:
        """What committed since the last poll: {changes, uncompared, transactions[, more]}, or None when
        nothing did (`more`: how many changes were not listed, beyond the cap; their tables are in
        `uncompared`).  _StoreError when the watch is not open, or was lost now (the next poll starts it again:
        what committed in between is not known)."""
        if not self._wanted:
            raise _StoreError("%s is not watched (open it first)" % self.name, "open the watch, then poll")
        if not (self._slot or self.limited and self._counts is not None):
            self._drop_connections()
            self._start()   # a lost watch, started again: from now on
            return None
        try:
            return self._read_stats() if self._slot_conn is None else self._read_changes()
        except self._pg.Error as exc:
            self._drop_connections()
            raise _StoreError("the watch of %s was lost (%s): what committed since the last poll is not known"
                             % (self.name, " ".join(self._address.scrub(str(exc)).split())[:200]),
                             "nothing to do: the next poll watches again, once PostgreSQL answers") from None

    def _read_changes(self) -> Optional[dict]:
        """Take what the slot decoded since the last poll (committed transactions only)."""
        changes: List[dict] = []
        uncompared: Dict[str, None] = {}
        more = transactions = 0
        for (data,) in self._slot_conn.cursor().stream(_PG_GET_CHANGES, (self._slot,)):
            if data.startswith("COMMIT"):
                transactions += 1
            if not data.startswith("table "):
                continue
            try:
                line = _pg_parse(data) if len(changes) < _PG_CHANGES_CAP else None
                tables = line.tables if line is not None else _pg_header(data)[1]
            except ValueError:  # a line this reader cannot take apart: its table changed, its row is not known
                tables, line = _pg_tables_said(data), None
            if line is not None and line.op != "truncate":
                changes.append(_pg_change(line, self._primary_key(*line.tables[0])))
                continue
            more += line is None
            for schema, table in tables:
                uncompared[_pg_table_name(schema, table)] = None
        return self._answer(changes, list(uncompared), transactions, more)

    def _answer(self, changes: List[dict], uncompared: List[str], transactions: Optional[int],
                more: int) -> Optional[dict]:
        """poll()'s answer (None when nothing changed), the tables it names now known."""
        if not changes and not uncompared:
            return None
        seen = {c["table"] for c in changes} | set(uncompared)
        self.known_tables = sorted(set(self.known_tables) | seen)
        out: dict = {"changes": changes, "uncompared": uncompared, "transactions": transactions}
        if more:
            out["more"] = more
        return out

    def _read_stats(self) -> Optional[dict]:
        """The fallback: the tables whose write counters grew since the last poll, rows not known
        (transactions: None, since commits are not seen one by one)."""
        counts = _pg_stat_counts(self._query)
        before = self._counts or {}
        grew = [t for t, c in sorted(counts.items()) if any(a > b for a, b in zip(c, before.get(t, (0, 0, 0))))]
        self._counts = counts
        return self._answer([], grew, None, 0)

    def _primary_key(self, schema: str, table: str) -> List[str]:
        """The primary key's columns of schema.table, in order ([] when it has none), looked up once."""
        if (schema, table) not in self._keys:
            rows = self._query.execute(_PG_PRIMARY_KEY_SQL, (schema, table)).fetchall()
            self._keys[(schema, table)] = [r[0] for r in rows]
        return self._keys[(schema, table)]

    # -- reading rows now ---------------------------------------------------
    def tables(self) -> List[str]:
        """The tables the role can see, read now, as rows() and poll() name them."""
        conn = self._query_conn()
        try:
            names = _pg_tables(conn)
        except self._pg.Error as exc:
            raise self._read_error(exc) from None
        self.known_tables = _pg_said(names)
        return self.known_tables

    def rows(self, table: str, where: Dict[str, Any], limit: int) -> Tuple[List[dict], int]:
        """The current rows of `table` whose columns equal `where` (compared as text: 3 == "3"), at most
        `limit`, and how many match in all; one read-only transaction."""
        conn = self._query_conn()
        try:
            schema, name = _pg_resolve(conn, table, self.name)
            columns = conn.execute(_PG_COLUMNS_SQL, (schema, name)).fetchall()
            unknown = sorted(set(where) - {c for c, _ in columns})
            if unknown:
                raise _StoreError("%s has no column %s (its columns: %s)" % (table, ", ".join(unknown), ", ".join(
                    c for c, _ in columns)), "name columns of the table in where", code="store_invalid")
            order = self._primary_key(schema, name)
            return _pg_read_rows(conn, self._pg.sql, (schema, name), columns, where, order, max(0, int(limit)))
        except self._pg.Error as exc:
            raise self._read_error(exc) from None

    def _query_conn(self) -> Any:
        """The connection rows() reads on, made again if it broke; _StoreError when not open or unreachable."""
        if not self._wanted or self._pg is None:
            raise _StoreError("%s is not watched (open it first)" % self.name, "open the watch, then read")
        if self._query is None or self._query.closed or getattr(self._query, "broken", False):
            try:
                self._query = self._connect()
            except self._pg.Error as exc:
                raise _pg_connect_error(exc, self._address) from None
        return self._query

    def _read_error(self, exc: Exception) -> _StoreError:
        return _StoreError("reading %s failed: %s" % (self.name, " ".join(self._address.scrub(str(exc)).split())[:300]),
                          "check that PostgreSQL is up; a read that takes over %s is stopped" % _PG_ROWS_TIMEOUT)

