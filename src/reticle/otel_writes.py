"""What database spans wrote.

A request's writes read from the OpenTelemetry database spans of its trace, whatever level made them: a
driver's SQL statement (pg, mysql2, sqlite3, SQLAlchemy, Prisma's engine, Drizzle), an ORM's operation
(TypeORM, Sequelize, Prisma Client, Mongoose) or a store's command (MongoDB, Redis).  An ORM span and the
driver's spans under it describe one piece of work: the driver's statements say what was written, the
ORM's span says which row where they do not.  A span of a kind Reticle does not know how to read is
named, so that "0 writes" beside it is unknown rather than evidence.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Dict, List, Optional, Set, Tuple

from .middleware import _OP_MAY_BE, SERVER_SQL_CAP, _scrub_server, _sql_keys, _sql_write
from .util import _loads


_OTEL_TX = re.compile(r"^\s*(BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK)\b", re.I)
# The instrumentations that trace a transaction's BEGIN, COMMIT and ROLLBACK (their drivers send them as
# statements), so that a write outside a traced transaction was autocommitted.  Others (Python's DB-API,
# sqlite3 and SQLAlchemy instrumentations: the driver begins and commits without a statement) show no
# transaction at all, so whether such a write was kept is unknown; a service whose spans have shown a
# transaction statement is learned to be of the first kind (_OtelTraces.tx_services).
_OTEL_TX_SCOPES = ("@opentelemetry/instrumentation-pg", "@opentelemetry/instrumentation-mysql",
                   "@opentelemetry/instrumentation-mysql2")
_COMMIT_UNTRACED = "its commit is not traced (no BEGIN/COMMIT spans)"
# The languages (OpenTelemetry's telemetry.sdk.language) whose database drivers commit a statement made outside a
# transaction by themselves: Node's pg, mysql2 and SQLite drivers, Go's database/sql, JDBC, ADO.NET, Ruby's.
# Python's DB-API does not (a connection opens a transaction that must be committed), so there it stays unknown.
# An ORM's operation traced alone (no driver span under it) is judged the same way: TypeORM's save, Sequelize's
# and Prisma's writes end in their own COMMIT or in the driver's autocommit.
_AUTOCOMMIT_LANGUAGES = frozenset(("nodejs", "go", "java", "dotnet", "ruby"))
# Stores whose every command is applied when it answers (no transaction is open unless the app starts one)
_APPLIED_STORES = frozenset(("mongodb", "redis"))

# The operations of ORM, ODM and document-store spans that write, by name (lower case, without `_`, `-`, `.`
# or spaces), each with its kind of write: insert, update, delete, or where the span does not say which,
# upsert (insert or update) and write (any of them: a bulk write).
_OP_WRITES: Dict[str, str] = {
    # TypeORM's EntityManager (instrumentation-typeorm: db.operation.name is the method's name)
    "save": "upsert", "insert": "insert", "update": "update", "upsert": "upsert", "delete": "delete",
    "remove": "delete", "softdelete": "update", "softremove": "update", "restore": "update", "recover": "update",
    "increment": "update", "decrement": "update",
    # Sequelize's query types (its spans carry the SQL too)
    "bulkupdate": "update", "bulkdelete": "delete", "bulkinsert": "insert", "replace": "insert",
    # Prisma Client's methods (prisma:client:operation's `method`)
    "create": "insert", "createmany": "insert", "createmanyandreturn": "insert", "updatemany": "update",
    "updatemanyandreturn": "update", "deletemany": "delete",
    # Mongoose's document and query operations, and the MongoDB driver's commands
    "insertmany": "insert", "insertone": "insert", "updateone": "update", "replaceone": "update",
    "findoneandupdate": "update", "findoneandreplace": "update", "findbyidandupdate": "update",
    "deleteone": "delete", "findoneanddelete": "delete", "findoneandremove": "delete", "findbyidanddelete": "delete",
    "findbyidandremove": "delete", "findandmodify": "update", "bulkwrite": "write",
}
# ... and those that only read.  Any other operation of a span without a statement is not read: its writes,
# and so the request's "0 writes", are unknown.
_OP_READS = frozenset((
    "select", "find", "findone", "findoneby", "findby", "findoneorfail", "findmany", "findunique",
    "finduniqueorthrow", "findfirst", "findfirstorthrow", "findall", "findandcount", "findandcountall",
    "findbyids", "findbyid", "count", "countdocuments", "estimateddocumentcount", "distinct", "aggregate",
    "groupby", "exists", "getmore", "findraw", "aggregateraw", "$queryraw", "$queryrawunsafe", "$queryrawtyped",
    "showtables", "showindexes", "describe", "version", "foreignkeys", "showconstraints",
    "hello", "ismaster", "ping", "buildinfo", "endsessions", "killcursors", "listcollections", "listindexes",
    "listdatabases", "createindexes", "saslstart", "saslcontinue", "explain", "collstats", "dbstats",
))
# Redis: the commands that change data (every other command reads, but for scripts, which may do anything)
_REDIS_DELETES = frozenset(("DEL", "UNLINK", "GETDEL"))
_REDIS_WRITES = frozenset((
    "SET", "SETEX", "PSETEX", "SETNX", "MSET", "MSETNX", "GETSET", "GETEX", "SETRANGE", "APPEND", "SETBIT",
    "BITFIELD", "BITOP", "INCR", "INCRBY", "INCRBYFLOAT", "DECR", "DECRBY", "HSET", "HMSET", "HSETNX",
    "HINCRBY", "HINCRBYFLOAT", "HDEL", "LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "LPOP", "RPOP", "LSET",
    "LINSERT", "LREM", "LTRIM", "LMOVE", "BLMOVE", "RPOPLPUSH", "BRPOPLPUSH", "LMPOP", "BLMPOP", "BLPOP",
    "BRPOP", "SADD", "SREM", "SPOP", "SMOVE", "SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE", "ZADD", "ZREM",
    "ZINCRBY", "ZPOPMIN", "ZPOPMAX", "BZPOPMIN", "BZPOPMAX", "ZMPOP", "BZMPOP", "ZREMRANGEBYSCORE",
    "ZREMRANGEBYRANK", "ZREMRANGEBYLEX", "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE", "ZRANGESTORE", "XADD",
    "XDEL", "XTRIM", "PFADD", "PFMERGE", "GEOADD", "GEOSEARCHSTORE", "EXPIRE", "PEXPIRE", "EXPIREAT",
    "PEXPIREAT", "PERSIST", "RENAME", "RENAMENX", "COPY", "MOVE", "RESTORE", "JSON.SET", "JSON.DEL",
    "JSON.MERGE", "JSON.ARRAPPEND", "JSON.NUMINCRBY",
))
_REDIS_SCRIPTS = frozenset(("EVAL", "EVALSHA", "FCALL", "FLUSHDB", "FLUSHALL"))
_REDIS_TX = {"MULTI": "BEGIN", "EXEC": "COMMIT", "DISCARD": "ROLLBACK"}
# A span's family, from its instrumentation's name first (TypeORM's spans say `postgres`, not which ORM)
_FAMILY_WORDS = ("typeorm", "sequelize", "mongoose", "mongodb", "redis", "drizzle")
_ORM_FAMILIES = frozenset(("typeorm", "sequelize", "prisma", "mongoose", "drizzle"))
_CONNECT_NAME = re.compile(r"(?:^|[.:\s_-])connect(?:ion)?$", re.I)
_INTERNAL = ("family", "store", "level", "start", "end", "alone")   # what a write carries while it is read, not after


def _db_span(sp: dict) -> bool:
    """Is this a database span: one with db.system (db.system.name), Prisma Client's operation span, or
    Drizzle's statement span (neither of which says db.system)?"""
    a = sp["attrs"]
    return bool(a.get("db.system") or a.get("db.system.name") or "drizzle.query.text" in a
                or (sp["scope"] == "prisma" and sp["name"] == "prisma:client:operation"))


def _db_family(sp: dict) -> str:
    """typeorm, sequelize, prisma, mongoose, mongodb, redis, drizzle, or sql for every other database span."""
    family = _scope_family(sp["scope"])
    if family:
        return family
    if sp["name"].startswith("prisma:"):
        return "prisma"
    system = str(sp["attrs"].get("db.system.name") or sp["attrs"].get("db.system") or "").lower()
    if system in ("mongodb", "mongoose", "redis"):
        return system
    return "drizzle" if "drizzle.query.text" in sp["attrs"] else "sql"


@functools.lru_cache(maxsize=256)
def _scope_family(scope: str) -> str:
    """The family an instrumentation's name says, or "" (every span is asked: its scope is read once)."""
    low = scope.lower()
    return "prisma" if low == "prisma" else next((word for word in _FAMILY_WORDS if word in low), "")


def _db_store(family: str) -> str:
    """The store a family's spans talk to, for telling an ORM's work from another store's: mongodb, redis, sql."""
    return {"mongoose": "mongodb", "mongodb": "mongodb", "redis": "redis"}.get(family, "sql")


def _db_statement(a: dict) -> str:
    text = a.get("db.query.text") or a.get("db.statement") or a.get("drizzle.query.text")
    return text if isinstance(text, str) else ""


def _db_op(sp: dict, family: str, text: str) -> str:
    """The operation a span names: db.operation.name (db.operation), Prisma's `method`, else for Redis the
    statement's first word and for MongoDB the span's name (mongodb.insert), as given."""
    a = sp["attrs"]
    op = a.get("db.operation.name") or a.get("db.operation") or (a.get("method") if family == "prisma" else None)
    if isinstance(op, str) and op.strip():
        return op.strip()[:60]
    if family == "redis":
        return (text.split(None, 1)[0] if text.strip() else re.sub(r"^redis-", "", sp["name"]))[:60]
    if family == "mongodb":   # Node's mongodb.insert; other SDKs name the command in the statement or the name
        word = sp["name"][len("mongodb."):] if sp["name"].startswith("mongodb.") else \
            text.split(None, 1)[0] if _is_sql(text) else sp["name"].replace(" ", ".").split(".")[-1]
        return word[:60]
    return ""


def _op_key(op: str) -> str:
    return re.sub(r"[\s_.-]", "", op).lower()


def _is_sql(text: str) -> bool:
    """A statement that is SQL, not a document (an ORM's arguments, a MongoDB command: JSON)."""
    return bool(text.strip()) and text.lstrip()[:1] not in ("{", "[")


def _db_kind(sp: dict) -> Tuple[str, str]:
    """What a database span is, cheaply (each span is asked as it arrives): ("sql", "") a statement to parse,
    ("tx", BEGIN, COMMIT, ROLLBACK or ABORT), ("write", its kind) an operation that writes, ("read", ""),
    ("connect", "") a connection or pool span, which says nothing of data, or ("unread", the operation) a
    span Reticle does not know how to read."""
    family = _db_family(sp)
    text = _db_statement(sp["attrs"])
    if family == "redis":
        return _redis_kind(_db_op(sp, family, text).upper())
    documents = family in ("mongodb", "mongoose")
    if not documents and _is_sql(text):
        m = _OTEL_TX.match(text)
        if m:
            return "tx", _tx_word(m.group(1))
        return "sql", ""
    op = _db_op(sp, family, text)
    key = _op_key(op)
    if not documents and not text and not key:
        m = _OTEL_TX.match(sp["name"])   # an instrumentation that names its span by the statement alone
        if m:
            return "tx", _tx_word(m.group(1))
    if family == "mongodb" and key in ("committransaction", "aborttransaction"):
        return "tx", "COMMIT" if key == "committransaction" else "ABORT"
    if key in _OP_WRITES:
        return "write", _OP_WRITES[key]
    if key in _OP_READS:
        return "read", ""
    if not text and (key in ("connect", "connection") or (not key and _CONNECT_NAME.search(sp["name"]))):
        return "connect", ""
    return "unread", op or sp["name"][:60]


def _tx_word(word: str) -> str:
    word = word.upper()
    return "BEGIN" if word.startswith(("BEGIN", "START")) else "COMMIT" if word == "END" else word


def _redis_kind(command: str) -> Tuple[str, str]:
    if command in _REDIS_TX:
        return "tx", _REDIS_TX[command]
    if command in _REDIS_DELETES:
        return "write", "delete"
    if command in _REDIS_WRITES:
        return "write", "upsert"
    if command in _REDIS_SCRIPTS:
        return "unread", command
    if command in ("CONNECT", "AUTH", "HELLO", "SELECT", "QUIT"):
        return "connect", ""
    return "read", ""


def _db_learned(sp: dict) -> Tuple[bool, bool]:
    """(readable, a transaction statement of a SQL store) for one database span: whether the service's
    database instrumentation is one Reticle reads, and whether it traces its transactions."""
    kind, word = _db_kind(sp)
    return kind not in ("unread", "connect"), kind == "tx" and word != "ABORT" and _db_store(_db_family(sp)) == "sql"


# ---- one span's write ----

def _json_doc(text: str) -> Any:
    """A span's statement read as JSON (an ORM's arguments, a MongoDB command), or None."""
    if not text or len(text) > 65536 or text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        return _loads(text)
    except ValueError:
        return None


def _key_value(v: Any) -> Optional[Any]:
    """A primary key value as a span can name one: a whole number, a short string (not a scrubbed `?`), or
    MongoDB's extended JSON {"$oid": ...}; else None."""
    if isinstance(v, dict) and isinstance(v.get("$oid"), str):
        v = v["$oid"]
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip() and v != "?" and len(v) <= 64:
        return v
    return None


def _keys_of(v: Any, field: Tuple[str, ...] = ("id", "_id")) -> Optional[List[Any]]:
    """The keys a value names: itself (a scalar key), a list of keys, an object's `id` (`_id`) field, a list
    of such objects, or a field's {"$in": [...]}; None when it names none (or only some)."""
    one = _key_value(v)
    if one is not None:
        return [one]
    if isinstance(v, list) and 0 < len(v) <= 20:
        parts = [_keys_of(x, field) for x in v]
        return None if any(p is None for p in parts) else [k for p in parts if p for k in p]
    if isinstance(v, dict):
        for name in field:
            if name in v:
                inner = v[name]
                if isinstance(inner, dict) and isinstance(inner.get("$in"), list):
                    inner = inner["$in"]
                return _keys_of(inner, ()) if not isinstance(inner, dict) or "$oid" in inner else None
    return None


def _typeorm_keys(doc: Any) -> Optional[List[Any]]:
    """The row a TypeORM operation names, from its statement (the method's arguments by parameter name, as
    instrumentation-typeorm writes them): a criteria or conditions value, else the entity's id."""
    if not isinstance(doc, dict):
        return None
    for name, value in doc.items():
        low = name.lower()
        if ("option" in low and "entity" not in low) or low in ("propertypath", "value", "conflictpaths") or (
                isinstance(value, str) and ("target" in low or "class" in low)):
            continue   # the entity's class name, options, an increment's column and amount
        keys = _keys_of(value)
        if keys is not None:
            return keys
    return None


def _mongo_keys(doc: Any, depth: int = 0) -> Optional[List[Any]]:
    """The `_id` a MongoDB command or Mongoose operation names (an update's filter, an insert's document),
    where the statement keeps values (the instrumentation's enhanced reporting; by default they are `?`)."""
    if depth > 5:
        return None
    if isinstance(doc, dict):
        if "_id" in doc:
            return _keys_of({"_id": doc["_id"]}, ("_id",))
        values = list(doc.values())
    elif isinstance(doc, list):
        values = doc[:20]
    else:
        return None
    for v in values:
        if isinstance(v, (dict, list)):
            keys = _mongo_keys(v, depth + 1)
            if keys is not None:
                return keys
    return None


def _redis_target(text: str, command: str) -> Tuple[str, Optional[List[Any]]]:
    """(table, keys) of a Redis command's key as its statement names it: `cart:42` and `cart:42:items` are of row
    42 of `cart` (the usual type:id naming); a key without a `:` is a table of its own.  DEL and UNLINK name
    every key."""
    args = [a for a in text.split()[1:] if not a.startswith("[")]
    if not args or args[0] == "?":   # no statement, or one whose arguments are all masked
        return "", None
    names = [n.split(":") for n in (args if command in ("DEL", "UNLINK") else args[:1])]
    table = names[0][0]
    keys = [n[1] for n in names if n[0] == table and len(n) > 1 and n[1]]
    return table[:200], ([k[:64] for k in keys[:20]] if keys and len(keys) == len(names) else None)


def _sql_params(a: dict) -> Any:
    """A statement's parameter values where the span records them: Drizzle's drizzle.query.params, pg's
    db.postgresql.values (its enhanced reporting)."""
    given = a.get("drizzle.query.params")
    if isinstance(given, str):
        try:
            given = _loads(given[:65536])
        except ValueError:
            given = None
    if isinstance(given, list):
        return given
    values = a.get("db.postgresql.values")
    return values if isinstance(values, list) else None


def _db_write(sp: dict, kind: str, what: str) -> Optional[dict]:
    """The write of one database span ({op, table, sql, keys?, rows?, committed}), or None: a statement parsed
    (kind and table from db.operation.name and db.collection.name / db.sql.table where the span says them, its
    keys from the statement and its recorded parameters), or an operation as _OP_WRITES and the Redis tables
    say, named by its family and keyed where its statement names the row."""
    a = sp["attrs"]
    family = _db_family(sp)
    text = _db_statement(a)
    if kind == "sql":
        w = _sql_statement_write(sp, text)
    elif kind == "write":
        w = _op_write(sp, family, what, text)
    else:
        return None
    if w is None:
        return None
    rows = a.get("db.response.affected_rows", a.get("db.rows_affected"))
    if isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0:
        w["rows"] = rows
    w["committed"] = False if sp["error"] else True
    if sp["error"]:
        w["note"] = "the statement failed (its span's status is ERROR)"
    w.update(family=family, store=_db_store(family), start=sp["start"], end=sp["end"])
    return w


def _sql_statement_write(sp: dict, text: str) -> Optional[dict]:
    a = sp["attrs"]
    op = _op_key(str(a.get("db.operation.name") or a.get("db.operation") or ""))
    table = a.get("db.collection.name") or a.get("db.sql.table")
    parsed = _sql_write(text)
    if parsed is None and op in _OP_WRITES and _OP_WRITES[op] in ("insert", "update", "delete") and table:
        parsed = {"op": _OP_WRITES[op], "table": str(table)[:200], "sql": _scrub_server(text[:SERVER_SQL_CAP])}
    if parsed is None:
        return None
    if table:
        parsed["table"] = str(table)[:200]
    keys = _sql_keys(text, _sql_params(a))
    if keys:
        parsed["keys"] = keys
    parsed["level"] = "statement"
    return parsed


def _op_write(sp: dict, family: str, kind: str, text: str) -> dict:
    """An ORM's or store's operation as a write: its table (db.collection.name, db.sql.table,
    db.mongodb.collection; Prisma's model; the Redis key's type), its keys where its statement names them."""
    a = sp["attrs"]
    op = _db_op(sp, family, text)
    keys: Optional[List[Any]] = None
    if family == "redis":
        table, keys = _redis_target(text, op.upper())
    elif family == "prisma":
        table = str(a.get("model") or "")[:200]
    else:
        table = next((str(a[k])[:200] for k in ("db.collection.name", "db.sql.table", "db.mongodb.collection")
                      if isinstance(a.get(k), str) and a[k] and a[k] != "$cmd"), "")
        doc = _json_doc(text)
        keys = _typeorm_keys(doc) if family == "typeorm" else _mongo_keys(doc) if family in ("mongodb", "mongoose") \
            else None
        if family == "mongodb" and _op_key(op) == "findandmodify" and re.search(r'"remove"\s*:\s*(?:true|"\?")', text):
            kind = "delete"
    w: Dict[str, Any] = {"op": kind, "table": table, "sql": _scrub_server("%s %s%s" % (family, op, " " + table
                                                                                        if table else ""))}
    if keys:
        w["keys"] = keys
    # an ORM's operation speaks for the statements beneath it; a store's command is the statement itself
    w["level"] = "operation" if family in _ORM_FAMILIES else "statement"
    return w


# ---- a trace's writes ----

def _db_ancestors(spans: List[dict], db: List[dict]) -> Dict[str, List[dict]]:
    """Each database span's database ancestors, nearest first, through the trace's other spans (Prisma's
    engine spans sit between its client operation and its statements)."""
    parent = {s["spanId"]: s["parentSpanId"] for s in spans}
    by_id = {s["spanId"]: s for s in db}
    out: Dict[str, List[dict]] = {}
    for s in db:
        chain: List[dict] = []
        p: Optional[str] = s["parentSpanId"]
        seen: Set[str] = set()
        while p and p not in seen and len(seen) < 64:
            if p == s["spanId"]:   # parents that lead back to the span itself are no ancestry, whatever a sender says
                chain = []
                break
            seen.add(p)
            if p in by_id:
                chain.append(by_id[p])
            p = parent.get(p)
        out[s["spanId"]] = chain
    return out


def _db_label(sp: dict, op: str) -> str:
    """An unread span as an answer names it: its instrumentation and operation."""
    who = sp["scope"] or str(sp["attrs"].get("db.system.name") or sp["attrs"].get("db.system") or "unnamed")
    return "%s's %s" % (who[:80], op[:40]) if op else who[:80]


def _db_units(db: List[dict], ancestors: Dict[str, List[dict]]) -> Tuple[List[dict], List[str]]:
    """The spans that speak for a trace's database work, and the labels of those none can read.  A span with
    database spans under it (an ORM's operation over the driver's statements, SQLAlchemy's over the DB-API's)
    speaks through them.  One Reticle cannot read is spoken for by its nearest readable ancestor when nothing
    under that ancestor could be read either (an ORM over a driver Reticle does not know); else it is named."""
    inner = {a["spanId"] for chain in ancestors.values() for a in chain}
    leaves = [(sp, _db_kind(sp)) for sp in db if sp["spanId"] not in inner]
    read_under = {a["spanId"] for sp, (kind, _) in leaves if kind not in ("unread", "connect")
                  for a in ancestors[sp["spanId"]]}
    units: List[dict] = []
    unread: List[str] = []
    taken = set()
    for sp, (kind, what) in leaves:
        if kind == "unread":
            stand = next((a for a in ancestors[sp["spanId"]] if _db_kind(a)[0] not in ("unread", "connect")), None)
            if stand is None or stand["spanId"] in read_under:
                label = _db_label(sp, what)
                if label not in unread:
                    unread.append(label)
                continue
            sp, (kind, what) = stand, _db_kind(stand)
        if sp["spanId"] not in taken:
            taken.add(sp["spanId"])
            units.append(dict(span=sp, kind=kind, what=what, alone=sp["spanId"] not in inner))
    units.sort(key=lambda u: u["span"]["start"] or 0)
    return units, unread


def _same_table(a: str, b: str) -> bool:
    def bare(t: str) -> str:
        return t.lower().split(".")[-1].strip('`"[]')
    return bool(a and b) and bare(a) == bare(b)


def _write_fits(general: dict, w: dict) -> bool:
    """Can the operation `general` (an ORM's) be the write w (a statement's): the same table and kind, or a
    kind it may stand for (a save is an insert or an update)?"""
    return (not general["table"] or _same_table(general["table"], w["table"])) and (
        general["op"] == w["op"] or w["op"] in _OP_MAY_BE.get(general["op"], ()))


def _key_from_above(w: dict, above: List[dict]) -> None:
    """A statement's write that does not name its row takes the key of the ORM operation above it that does."""
    if w.get("keys"):
        return
    for a in above:
        kind, what = _db_kind(a)
        general = _db_write(a, kind, what) if kind in ("write", "sql") else None
        if general is not None and general.get("keys") and _write_fits(general, w):
            w["keys"] = general["keys"]
            return


def _without_doubles(writes: List[dict]) -> List[dict]:
    """An ORM operation traced beside its driver's statements rather than above them (Mongoose does not make
    its span the current one) is the same work: where statements of its store that fit it (_write_fits) ran within
    its time, they say what it wrote (and take its key), and the operation is no write of its own."""
    out = []
    for w in writes:
        if w["level"] == "operation" and w["alone"] and w["start"] and w["end"]:
            within = [o for o in writes if o["level"] == "statement" and o["store"] == w["store"] and o["start"]
                      and o["end"] and w["start"] <= o["start"] and o["end"] <= w["end"] and _write_fits(w, o)]
            for o in within:
                if not o.get("keys") and w.get("keys"):
                    o["keys"] = w["keys"]
            if within:
                continue
        out.append(w)
    return out


def _otel_writes(spans: List[dict], tx_traced: bool = False) -> Tuple[List[dict], int, List[str]]:
    """The writes of a trace's database spans, in the order they started, with commit or rollback where a
    transaction's statements are traced (BEGIN ... COMMIT/ROLLBACK, Redis's MULTI ... EXEC/DISCARD); the number
    of database statements and operations seen; and the spans that could not be read (_db_label).  A write
    outside a traced transaction was autocommitted where the instrumentation traces transaction statements
    (`tx_traced`: the service has shown one, or its instrumentation is one of _OTEL_TX_SCOPES), where the
    service's language's drivers autocommit (_AUTOCOMMIT_LANGUAGES), or in MongoDB and Redis; elsewhere its
    commit is unknown (committed None)."""
    db = [s for s in spans if _db_span(s)]
    if not db:
        return [], 0, []
    ancestors = _db_ancestors(spans, db)
    units, unread = _db_units(db, ancestors)
    writes: List[dict] = []
    pending: Dict[str, List[dict]] = {}   # store -> the writes of its open transaction
    statements = 0
    for unit in units:
        sp, kind, what = unit["span"], unit["kind"], unit["what"]
        if kind == "connect":
            continue
        statements += 1
        if kind == "tx":
            _tx_step(_db_store(_db_family(sp)), what, pending, writes)
            continue
        w = _db_write(sp, kind, what)
        if w is None:
            continue
        _key_from_above(w, ancestors[sp["spanId"]])
        w["alone"] = unit["alone"]
        if w["store"] not in pending and w["committed"] and not (
                w["store"] in _APPLIED_STORES or tx_traced or sp["scope"] in _OTEL_TX_SCOPES
                or sp.get("language") in _AUTOCOMMIT_LANGUAGES):
            w["committed"], w["note"] = None, _COMMIT_UNTRACED
        writes.append(w)
        if w["store"] in pending and w["committed"]:
            pending[w["store"]].append(w)
    for left in pending.values():
        for w in left:
            w["committed"], w["note"] = False, "never committed (no COMMIT in the trace)"
    kept = [{k: v for k, v in w.items() if k not in _INTERNAL} for w in _without_doubles(writes)]
    return kept[:50], statements, unread[:3]


def _tx_step(store: str, word: str, pending: Dict[str, List[dict]], writes: List[dict]) -> None:
    """A transaction statement of `store`: BEGIN opens one (its writes wait for its end), COMMIT keeps them,
    ROLLBACK undoes them; MongoDB's abortTransaction leaves every MongoDB write before it of unknown commit
    (which of them the transaction held is not traced)."""
    if word == "BEGIN":
        pending[store] = []
    elif word == "ABORT":
        for w in writes:
            if w["store"] == "mongodb" and w["committed"]:
                w["committed"], w["note"] = None, "a MongoDB transaction was aborted in this request"
    elif word == "ROLLBACK":
        for w in pending.pop(store, []):
            w["committed"], w["note"] = False, "rolled back"
    else:
        pending.pop(store, None)
