"""What database spans wrote (otel_writes.py): ORM operations and store commands read as writes of their
table or collection, keyed where the span names the row, an ORM's span and the driver's statements under
(or beside) it counted once, and spans Reticle cannot read named so that "0 writes" beside them is unknown.

The spans are recorded by hand in the shapes the real instrumentations emit (their attribute names and
values as their sources write them): TypeORM's (@opentelemetry/instrumentation-typeorm 0.22, as a probe of
TypeORM 1.1 over pg printed them), Sequelize's (instrumentation-sequelize 0.15, and the older db.statement
names), Prisma's (@prisma/instrumentation: prisma:client:operation's method and model, the engine's
prisma:engine:db_query), Mongoose's and MongoDB's (instrumentation-mongoose 0.46, instrumentation-mongodb
0.52), Redis's (instrumentation-redis-4 and ioredis, redis-common's statement serializer) and Drizzle's own
(drizzle-orm's drizzle.driver.execute).  The real TypeORM instrumentation on a real Express app is in
tests/test_otel.py."""

import json

import reticle

BASE = 1_700_000_000_000_000_000
SERVER = "00f067aa0ba902b7"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def span(scope, title, sid, parent=SERVER, start=1, end=9, error=False, kind=3, **attrs):
    """One span of the trace, its times in ms after the request began, its attributes by keyword (dots as __);
    short span ids are padded to 16 hex digits."""
    return scope, {"traceId": TRACE, "spanId": sid.rjust(16, "0"), "parentSpanId": parent.rjust(16, "0"),
                   "name": title, "kind": kind,
                   "startTimeUnixNano": str(BASE + start * 1_000_000), "endTimeUnixNano": str(BASE + end * 1_000_000),
                   "status": {"code": 2 if error else 0},
                   "attributes": [{"key": k.replace("__", "."), "value": value(v)} for k, v in attrs.items()]}


def value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, list):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    return {"stringValue": v}


def request(*spans, path="/contacts", method="POST", status=201, language="nodejs"):
    """The record of a POST whose trace holds `spans` (a SERVER span of instrumentation-http above them)."""
    server = span("@opentelemetry/instrumentation-http", "POST", SERVER, "b7ad6b7169203331", 0, 20, kind=2,
                  http__request__method=method, url__path=path, http__response__status_code=status)
    scopes = {}
    for scope, sp in (server,) + spans:
        scopes.setdefault(scope, []).append(sp)
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "shop"}},
                               {"key": "telemetry.sdk.language", "value": {"stringValue": language}}]}
    payload = {"resourceSpans": [{"resource": resource, "scopeSpans": [
        {"scope": {"name": scope}, "spans": sps} for scope, sps in scopes.items()]}]}
    got, refused = reticle._otel_spans(payload)
    assert refused == []
    rec = reticle._otel_record(next(s for s in got if s["kind"] == 2), got, [])
    return rec


def writes(rec):
    return [(w["op"], w["table"], w["committed"], w.get("keys")) for w in rec["writes"]]


TYPEORM = "@opentelemetry/instrumentation-typeorm"
PG = "@opentelemetry/instrumentation-pg"
PG_ATTRS = {"db__system": "postgresql", "db__name": "postgres", "net__peer__name": "127.0.0.1"}


def typeorm(name, op, query, sid="a1", start=1, end=9, table="contact", parent=SERVER, **more):
    return span(TYPEORM, name, sid, parent, start, end, db__system__name="postgres", db__namespace="postgres",
                db__operation__name=op, db__query__text=query, db__collection__name=table, **more)


def pg(sql, sid, parent, start, **more):
    name = "pg-pool.connect" if sql is None else "pg.query:%s postgres" % sql.split()[0]
    attrs = dict(PG_ATTRS, **({} if sql is None else {"db__statement": sql}), **more)
    return span(PG, name, sid, parent, start, start + 1, **attrs)


# -- TypeORM ----------------------------------------------------------------------------------------------

def test_a_typeorm_save_over_pg_is_the_insert_its_statements_show_once():
    """The save span was counted as a statement and its INSERT beneath it dropped (a child of a database span):
    `statements: 1, writes: []`.  Now the driver's statements speak for the ORM's operation: one insert of
    contact, committed by its traced COMMIT; the pool's connect span is no statement."""
    rec = request(typeorm("save contact", "save", '{"targetOrEntity":"Contact","maybeEntityOrOptions":{"name":"ada"}}'),
                  pg(None, "b1", "a1", 2), pg("START TRANSACTION", "b2", "a1", 3),
                  pg('INSERT INTO "contact"("name") VALUES ($1) RETURNING "id"', "b3", "a1", 4),
                  pg("COMMIT", "b4", "a1", 5))
    assert writes(rec) == [("insert", "contact", True, None)]
    assert rec["statements"] == 3 and rec["dbUnread"] == []


def test_a_typeorm_rename_is_an_update_keyed_by_the_entity_the_orm_saved():
    """pg records no parameter values, so `WHERE "id" = $2` names no row; the save span's entity does."""
    rec = request(typeorm("select contact", "select", 'SELECT "Contact"."id" FROM "contact" "Contact" WHERE '
                          '(("Contact"."id" = :orm_param_0)) LIMIT 1', "a0", 1, 2),
                  pg('SELECT "Contact"."id" FROM "contact" "Contact" WHERE (("Contact"."id" = $1)) LIMIT 1', "b0",
                     "a0", 1),
                  typeorm("save contact", "save", '{"targetOrEntity":"Contact","maybeEntityOrOptions":{"id":4,'
                          '"name":"bob"}}', "a1", 3, 12),
                  pg('SELECT "Contact"."id" FROM "contact" "Contact" WHERE "Contact"."id" = $1', "b1", "a1", 4),
                  pg("START TRANSACTION", "b2", "a1", 5),
                  pg('UPDATE "contact" SET "name" = $1 WHERE "id" = $2', "b3", "a1", 6), pg("COMMIT", "b4", "a1", 7))
    assert writes(rec) == [("update", "contact", True, [4])]


def test_a_typeorm_save_that_changed_nothing_wrote_nothing():
    """An unchanged entity's save runs only its SELECT: the statements say no write, whatever the ORM asked."""
    rec = request(typeorm("save contact", "save", '{"targetOrEntity":"Contact","maybeEntityOrOptions":{"id":4}}'),
                  pg('SELECT "Contact"."id" FROM "contact" "Contact" WHERE "Contact"."id" = $1', "b1", "a1", 2))
    assert writes(rec) == [] and rec["statements"] == 1


def test_typeorm_operations_traced_alone_are_writes_of_their_table_keyed_by_their_arguments():
    """suppressInternalInstrumentation: no driver span under the ORM's.  Each operation is read from the op
    table, its row from the method's arguments (criteria, the entity's id); a save is an insert or an update
    (upsert); Node's drivers commit, so it was kept; a find writes nothing."""
    cases = [
        ("save", '{"targetOrEntity":"Contact","maybeEntityOrOptions":{"name":"ada"}}', ("upsert", None)),
        ("save", '{"targetOrEntity":"Contact","maybeEntityOrOptions":{"id":4,"name":"bob"}}', ("upsert", [4])),
        ("save", '{"targetOrEntity":[{"id":4},{"id":5}]}', ("upsert", [4, 5])),
        ("update", '{"target":"Contact","criteria":1,"partialEntity":{"name":"cy"}}', ("update", [1])),
        ("update", '{"target":"Contact","criteria":{"id":1},"partialEntity":{"name":"dee"}}', ("update", [1])),
        ("update", '{"target":"Contact","criteria":{"email":"a@b.c"},"partialEntity":{"name":"x"}}', ("update", None)),
        ("delete", '{"targetOrEntity":"Contact","criteria":999}', ("delete", [999])),
        ("insert", '{"target":"Contact","entity":{"name":"eve"}}', ("insert", None)),
        ("remove", '{"targetOrEntity":"Contact","maybeEntityOrOptions":{"name":"gone","id":3}}', ("delete", [3])),
        ("increment", '{"entityClass":"Contact","conditions":{"id":6},"propertyPath":"visits","value":1}',
         ("update", [6])),
        ("softDelete", '{"targetOrEntity":"Contact","criteria":"5d8f6c52-2b7e-4a53-9f0e-1c2d3e4f5a6b"}',
         ("update", ["5d8f6c52-2b7e-4a53-9f0e-1c2d3e4f5a6b"])),
    ]
    for op, query, (kind, keys) in cases:
        rec = request(typeorm("%s contact" % op, op, query))
        assert writes(rec) == [(kind, "contact", True, keys)], (op, query, rec["writes"])
        assert rec["writes"][0]["sql"] == "typeorm %s contact" % op   # what it did, none of the entity's values
    for op in ("find", "findOne", "count", "findAndCount"):
        rec = request(typeorm("%s contact" % op, op, '{"entityClass":"Contact","options":{"where":{"id":4}}}'))
        assert writes(rec) == [] and rec["statements"] == 1 and rec["dbUnread"] == [], op
    rec = request(typeorm("save contact", "save", '{"targetOrEntity":"Contact"}'), language="python")
    assert writes(rec) == [("upsert", "contact", None, None)]   # a driver that does not commit by itself


def test_a_failed_orm_operation_wrote_nothing():
    rec = request(typeorm("save contact", "save", '{"targetOrEntity":"Contact"}', error=True))
    assert writes(rec) == [("upsert", "contact", False, None)]
    assert rec["writes"][0]["note"].startswith("the statement failed")


# -- Sequelize --------------------------------------------------------------------------------------------

SEQUELIZE = "@opentelemetry/instrumentation-sequelize"


def sequelize(op, sql, sid, start=1, table="Contacts", **more):
    return span(SEQUELIZE, "Sequelize %s" % op, sid, SERVER, start, start + 3, db__system__name="postgres",
                db__namespace="shop", db__operation__name=op, db__query__text=sql, db__collection__name=table, **more)


def test_sequelize_spans_are_read_from_their_sql_and_once_over_pg():
    insert = 'INSERT INTO "Contacts" ("id","name","createdAt","updatedAt") VALUES (DEFAULT,$1,$2,$3) RETURNING "id";'
    rec = request(sequelize("INSERT", insert, "c1"), pg(insert, "d1", "c1", 2))
    assert writes(rec) == [("insert", "Contacts", True, None)] and rec["statements"] == 1
    rec = request(sequelize("UPDATE", 'UPDATE "Contacts" SET "name"=$1,"updatedAt"=$2 WHERE "id" = $3', "c1"))
    assert writes(rec) == [("update", "Contacts", True, None)]
    # the older instrumentation's names (opentelemetry-instrumentation-sequelize: db.statement, db.sql.table)
    rec = request(span("opentelemetry-instrumentation-sequelize", "Sequelize BULKDELETE", "c1", db__system="mysql",
                       db__operation="BULKDELETE", db__statement="DELETE FROM `Contacts` WHERE `id` IN (7, 8)",
                       db__sql__table="Contacts"))
    assert writes(rec) == [("delete", "Contacts", True, [7, 8])]


def test_a_sequelize_transaction_rolled_back_is_no_write_kept():
    rec = request(sequelize("START", "START TRANSACTION;", "c0", 1, table=None),
                  sequelize("INSERT", 'INSERT INTO "Contacts" ("id","name") VALUES (DEFAULT,$1) RETURNING "id";', "c1", 3),
                  sequelize("ROLLBACK", "ROLLBACK;", "c2", 5, table=None))
    assert writes(rec) == [("insert", "Contacts", False, None)] and rec["writes"][0]["note"] == "rolled back"


# -- Prisma -----------------------------------------------------------------------------------------------

def prisma_op(method, model="Contact", sid="e1", start=1, end=12):
    attrs = {"method": method, "name": "%s.%s" % (model, method) if model else method}
    if model:
        attrs["model"] = model
    return span("prisma", "prisma:client:operation", sid, SERVER, start, end, kind=1, **attrs)


def test_a_prisma_create_is_the_insert_of_its_engine_query_under_it():
    """The client's operation span says no db.system; its engine's db_query under prisma:engine:query carries
    the SQL (the engine span between them is no database span)."""
    rec = request(prisma_op("create"),
                  span("prisma", "prisma:engine:query", "e2", "e1", 2, 10, kind=1),
                  span("prisma", "prisma:engine:connection", "e3", "e2", 2, 3, db__system="postgresql"),
                  span("prisma", "prisma:engine:db_query", "e4", "e2", 4, 6, db__system="postgresql",
                       db__query__text='INSERT INTO "public"."Contact" ("name") VALUES ($1) RETURNING '
                                       '"public"."Contact"."id"'))
    assert writes(rec) == [("insert", "public.Contact", True, None)] and rec["statements"] == 1
    assert rec["dbUnread"] == []


def test_prisma_client_operations_alone_are_writes_of_their_model():
    """With the engine's spans left out (ignoreSpanTypes), the client's operation is the write: method and model."""
    for method, kind in (("create", "insert"), ("createMany", "insert"), ("update", "update"),
                         ("updateMany", "update"), ("upsert", "upsert"), ("delete", "delete"),
                         ("deleteMany", "delete")):
        rec = request(prisma_op(method))
        assert writes(rec) == [(kind, "Contact", True, None)], method
    assert writes(request(prisma_op("findMany"))) == []
    rec = request(prisma_op("$executeRaw", model=None))
    assert writes(rec) == [] and rec["dbUnread"] == ["prisma's $executeRaw"]


# -- Mongoose and MongoDB -------------------------------------------------------------------------------

MONGOOSE = "@opentelemetry/instrumentation-mongoose"
MONGODB = "@opentelemetry/instrumentation-mongodb"
OID = "65f1c0ffee00000000000004"


def mongoose(model, op, sid, start, end, statement=None, collection="contacts"):
    more = {"db__statement": statement} if statement else {}
    return span(MONGOOSE, "mongoose.%s.%s" % (model, op), sid, SERVER, start, end, db__system="mongoose",
                db__operation=op, db__mongodb__collection=collection, db__name="shop", **more)


def mongodb(op, sid, start, end, statement, collection="contacts"):
    return span(MONGODB, "mongodb.%s" % op, sid, SERVER, start, end, db__system="mongodb", db__operation=op,
                db__name="shop", db__mongodb__collection=collection, db__statement=statement,
                db__connection_string="mongodb://127.0.0.1:27017/shop")


def test_a_mongoose_save_beside_the_drivers_insert_is_one_insert():
    """Mongoose does not make its span current, so the driver's command is its sibling, within its time: one
    write, the driver's, applied when it answered (MongoDB commits a lone command)."""
    rec = request(mongoose("Contact", "save", "f1", 1, 9),
                  mongodb("insert", "f2", 3, 6, '{"_id":"?","name":"?","__v":"?"}'), language="python")
    assert writes(rec) == [("insert", "contacts", True, None)] and rec["statements"] == 2


def test_a_mongoose_update_keyed_by_its_condition_keys_the_drivers_command():
    rec = request(mongoose("Contact", "findOneAndUpdate", "f1", 1, 9,
                           '{"condition":{"_id":"%s"},"updates":{"$set":{"name":"Ada"}}}' % OID),
                  mongodb("findAndModify", "f2", 3, 6, '{"findAndModify":"?","query":{"_id":"?"},'
                                                       '"update":{"$set":{"name":"?"}},"new":"?"}'))
    assert writes(rec) == [("update", "contacts", True, [OID])]


def test_mongodb_commands_alone_are_writes_keyed_by_the_id_their_statement_keeps():
    rec = request(mongodb("update", "f1", 1, 3, '{"update":"contacts","updates":[{"q":{"_id":"%s"},'
                                                '"u":{"$set":{"name":"Ada"}}}],"ordered":true}' % OID))
    assert writes(rec) == [("update", "contacts", True, [OID])]
    rec = request(mongodb("delete", "f1", 1, 3, '{"delete":"?","deletes":[{"q":{"_id":"?"},"limit":"?"}]}'))
    assert writes(rec) == [("delete", "contacts", True, None)]   # the default statement scrubs the values
    rec = request(mongodb("findAndModify", "f1", 1, 3, '{"findAndModify":"?","query":{"_id":"?"},"remove":"?"}'))
    assert writes(rec) == [("delete", "contacts", True, None)]
    assert writes(request(mongodb("find", "f1", 1, 3, '{"find":"?","filter":{"_id":"?"}}'))) == []
    # the semantic conventions' newer names
    rec = request(span(MONGODB, "update carts", "f1", db__system__name="mongodb", db__operation__name="update",
                       db__collection__name="carts"))
    assert writes(rec) == [("update", "carts", True, None)]


def test_a_mongoose_save_alone_is_an_upsert_and_an_aborted_transaction_leaves_its_commit_unknown():
    assert writes(request(mongoose("Contact", "save", "f1", 1, 9))) == [("upsert", "contacts", True, None)]
    rec = request(mongodb("insert", "f1", 1, 3, '{"_id":"?","name":"?"}'),
                  span(MONGODB, "mongodb.abortTransaction", "f2", SERVER, 4, 5, db__system="mongodb",
                       db__operation="abortTransaction", db__mongodb__collection="$cmd"))
    assert writes(rec) == [("insert", "contacts", None, None)]


# -- Redis -------------------------------------------------------------------------------------------------

REDIS = "@opentelemetry/instrumentation-redis-4"
IOREDIS = "@opentelemetry/instrumentation-ioredis"


def redis(command, statement, sid="9a1", start=1, scope=REDIS):
    name = "redis-%s" % command if scope == REDIS else command.lower()
    return span(scope, name, sid, SERVER, start, start + 1, db__system="redis", db__statement=statement,
                net__peer__name="127.0.0.1")


def test_redis_write_commands_are_writes_of_the_key_they_name():
    """The key's `type:id` naming is the table and row (cart:42 is row 42 of cart), read from the statement
    redis-common's serializer writes (the values left out)."""
    assert writes(request(redis("SET", "SET cart:42 [1 other arguments]"))) == [("upsert", "cart", True, ["42"])]
    assert writes(request(redis("HSET", "HSET session:ab cart [1 other arguments]"))) == [
        ("upsert", "session", True, ["ab"])]
    assert writes(request(redis("DEL", "DEL cart:42 cart:43", scope=IOREDIS))) == [("delete", "cart", True, ["42", "43"])]
    assert writes(request(redis("INCR", "INCR visits", scope=IOREDIS))) == [("upsert", "visits", True, None)]
    assert writes(request(redis("RPUSH", "RPUSH cart:42:items [1 other arguments]"))) == [
        ("upsert", "cart", True, ["42"])]   # a key of row 42's, as /carts/42/items names it
    assert writes(request(redis("DEL", "DEL cart:42 session:ab", scope=IOREDIS))) == [
        ("delete", "cart", True, None)]     # keys of two types: no one row
    for command, statement in (("GET", "GET cart:42"), ("HGETALL", "HGETALL session:ab"), ("TTL", "TTL cart:42")):
        rec = request(redis(command, statement))
        assert writes(rec) == [] and rec["dbUnread"] == [], command


def test_a_redis_transaction_discarded_is_no_write_and_a_script_is_not_read():
    rec = request(redis("MULTI", "MULTI", "9a1", 1), redis("SET", "SET cart:42 [1 other arguments]", "9a2", 3),
                  redis("DISCARD", "DISCARD", "9a3", 5))
    assert writes(rec) == [("upsert", "cart", False, ["42"])]
    rec = request(redis("EVALSHA", "EVALSHA 9f1c 1 cart:42"))
    assert writes(rec) == [] and rec["dbUnread"] == ["%s's EVALSHA" % REDIS]


# -- Drizzle ---------------------------------------------------------------------------------------------

def drizzle(sql, params, sid="da1", start=1, end=9):
    return span("drizzle-orm", "drizzle.driver.execute", sid, SERVER, start, end, kind=1,
                drizzle__query__name="", drizzle__query__text=sql, drizzle__query__params=json.dumps(params))


def test_a_drizzle_statement_is_keyed_by_the_parameters_it_records():
    sql = 'update "contacts" set "name" = $1 where "contacts"."id" = $2'
    assert writes(request(drizzle(sql, ["Ada", 4]))) == [("update", "contacts", True, [4])]
    rec = request(drizzle(sql, ["Ada", 4]), pg(sql, "db1", "da1", 3))   # the driver's span under it: one write
    assert writes(rec) == [("update", "contacts", True, [4])] and rec["statements"] == 1


# -- what is not read ------------------------------------------------------------------------------------

def test_an_instrumentation_reticle_cannot_read_is_named_and_an_orm_over_a_known_driver_is_read():
    acme = span("@acme/otel-orm", "persist Contact", "ac1", db__system="postgresql", db__operation="persist")
    rec = request(acme)
    assert writes(rec) == [] and rec["dbUnread"] == ["@acme/otel-orm's persist"]
    _, sp = acme
    sp = dict(sp, spanId="ac2".rjust(16, "0"))
    rec = request(("@acme/otel-orm", sp), pg('INSERT INTO "contact"("name") VALUES ($1)', "ad1", "ac2", 3))
    assert writes(rec) == [("insert", "contact", True, None)] and rec["dbUnread"] == []
    rec = request(pg(None, "ad1", SERVER, 1))   # a pool's connect span says nothing of data
    assert writes(rec) == [] and rec["statements"] == 0 and rec["dbUnread"] == []


def test_an_orm_operation_beside_a_statement_of_another_table_stays_its_own_write():
    rec = request(mongoose("Contact", "save", "f1", 1, 9),
                  mongodb("insert", "f2", 3, 6, '{"_id":"?"}', collection="audit"))
    assert sorted(writes(rec)) == [("insert", "audit", True, None), ("upsert", "contacts", True, None)]


# -- what the judge makes of them -------------------------------------------------------------------------

def record(rec, **more):
    out = reticle._clean_server_record(dict(rec, mark=TRACE))
    out.update(source="otel", service="shop", dbTraced=True, dbUnread=rec["dbUnread"], **more)
    return out


def test_writes_beside_a_span_not_read_are_unknown_not_zero():
    rec = record(request(span("@acme/otel-orm", "persist Contact", "ac1", db__system="postgresql",
                              db__operation="persist")))
    line = reticle._server_line(rec)
    assert "writes unknown (instrumentation @acme/otel-orm's persist not read)" in line, line
    assert not reticle._writes_observed(rec)
    for leaf in ({"kind": "server", "writes": {"table": "contact"}}, {"kind": "server", "committed": True},
                 {"kind": "server", "writes": {"count": 0}}):
        assert reticle._server_match(rec, leaf) is None, leaf
    why = reticle._server_unsure_why(rec, {"kind": "server", "writes": {"table": "contact"}})
    assert "@acme/otel-orm's persist, which Reticle does not know how to read" in why, why
    rec["writes"] = [{"op": "insert", "table": "audit", "committed": True, "rows": None}]
    assert "1 write (insert audit ×≥1) seen (not read: @acme/otel-orm's persist)" in reticle._server_line(rec)


def test_an_upsert_satisfies_a_write_of_its_table_and_leaves_its_kind_unknown():
    rec = record(request(typeorm("save contact", "save", '{"targetOrEntity":"Contact"}')))
    assert reticle._server_match(rec, {"kind": "server", "writes": {"table": "contact"}}) is True
    assert reticle._server_match(rec, {"kind": "server", "writes": {"table": "contact", "op": "insert"}}) is None
    assert reticle._server_match(rec, {"kind": "server", "writes": {"table": "contact", "op": "delete"}}) is False
    assert reticle._server_match(rec, {"kind": "server", "writes": {"table": "notes"}}) is False
    why = reticle._server_unsure_why(rec, {"kind": "server", "writes": {"table": "contact", "op": "insert"}})
    assert "upsert contact (an ORM's operation that may be insert or update)" in why, why


def test_a_rename_of_another_row_than_the_path_names_is_contradicted():
    merged = request(typeorm("save contact", "save", '{"targetOrEntity":"Contact","maybeEntityOrOptions":{"id":5,'
                             '"name":"bob"}}'), pg("START TRANSACTION", "b2", "a1", 2),
                     pg('UPDATE "contact" SET "name" = $1 WHERE "id" = $2', "b3", "a1", 3), pg("COMMIT", "b4", "a1", 4),
                     path="/contacts/4/rename", status=200)
    alone = request(typeorm("save contact", "save", '{"targetOrEntity":"Contact","maybeEntityOrOptions":{"id":5}}'),
                    path="/contacts/4/rename", status=200)
    for rec, verb in ((merged, "updated"), (alone, "saved")):
        window = [{"type": "server.request", "t": 1.0, "data": record(rec)}]
        found = reticle._c_server_wrong_row(window, {"kind": "text", "contains": "Saved"}, None, None)
        assert [c["counter"] for c in found] == [
            "POST /contacts/4/rename names row 4 of contact, but the server %s contact keyed 5" % verb], found
        right = record(dict(rec, path="/contacts/5/rename"))
        assert reticle._c_server_wrong_row([dict(window[0], data=right)], {"kind": "text"}, None, None) == []


def test_a_mongodb_object_id_in_the_path_names_its_row():
    assert reticle._path_row("/contacts/%s/rename" % OID) == ("contacts", OID)


def test_a_span_not_read_under_an_orm_whose_other_statements_are_read_is_named():
    """The ORM's operation speaks for what is under it only where nothing there could be read: beside a read
    INSERT, a span of another instrumentation stays what it is, unread."""
    rec = request(typeorm("save contact", "save", '{"targetOrEntity":"Contact"}'),
                  pg('INSERT INTO "contact"("name") VALUES ($1)', "b1", "a1", 2),
                  span("@acme/driver", "persist", "ac3", "a1", 4, 5, db__system="postgresql", db__operation="persist"))
    assert writes(rec) == [("insert", "contact", True, None)] and rec["dbUnread"] == ["@acme/driver's persist"]


def test_a_redis_command_whose_arguments_are_masked_names_no_key():
    rec = request(span("opentelemetry.instrumentation.redis", "SET", "9a1", db__system="redis",
                       db__statement="SET ? ?"))
    assert writes(rec) == [("upsert", "", True, None)]


# -- in the daemon: records filed from spans as they arrive ----------------------------------------------

class _Tab:
    """What _OtelTraces asks of a tab: its URL, its tickets, its records."""

    def __init__(self):
        self.url = "http://127.0.0.1:3000/"
        self.server_tickets = reticle._ServerTickets()
        self.server_otel = 0
        self.records = []

    def add_server_record(self, rec):
        self.records.append(rec)

    def _wake(self):
        pass


class _Host:
    def __init__(self, tab):
        self.bridge = type("Bridge", (), {"sessions": {"s1": tab}, "departed": {},
                                          "every_tab": lambda _self: [tab]})()
        self.devices = type("Devices", (), {"devices": {}})()
        self.faults = None

    def clock(self):
        return 1000.0

    def spawn(self, coro):
        coro.close()


def absorb(otel, host, trace, *spans, service="shop"):
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}},
                               {"key": "telemetry.sdk.language", "value": {"stringValue": "nodejs"}}]}
    payload = {"resourceSpans": [{"resource": resource, "scopeSpans": [
        {"scope": {"name": scope}, "spans": [dict(sp, traceId=trace)]} for scope, sp in spans]}]}
    got, refused = reticle._otel_spans(payload)
    assert refused == []
    otel.absorb(host, got, [])


def test_an_orm_span_that_ends_after_the_request_re_reads_its_statements_once():
    """The driver's statements come with the SERVER span; TypeORM's save span, their parent, comes in a later
    batch (it ends last).  The record is read again with it: one update, keyed by the entity, not two writes."""
    tab = _Tab()
    host = _Host(tab)
    otel = reticle._OtelTraces()
    trace = tab.server_tickets.issue("d1", 1000.0)[0][1]
    server = span("@opentelemetry/instrumentation-http", "POST", SERVER, "b7ad6b7169203331", 0, 20, kind=2,
                  http__request__method="POST", url__path="/contacts/4/rename", http__response__status_code=200)
    absorb(otel, host, trace, server, pg("START TRANSACTION", "b2", "a1", 2),
           pg('UPDATE "contact" SET "name" = $1 WHERE "id" = $2', "b3", "a1", 3), pg("COMMIT", "b4", "a1", 4))
    assert len(tab.records) == 1
    rec = tab.records[0]
    assert writes(rec) == [("update", "contact", True, None)] and rec["dbTraced"] is True
    absorb(otel, host, trace, typeorm("save contact", "save", '{"targetOrEntity":"Contact","maybeEntityOrOptions":'
                                      '{"id":4,"name":"bob"}}', end=25))
    assert writes(rec) == [("update", "contact", True, [4])] and rec["statements"] == 3


def test_a_service_whose_database_spans_are_all_unread_has_unknown_writes_naming_them():
    tab = _Tab()
    host = _Host(tab)
    otel = reticle._OtelTraces()
    acme = span("@acme/otel-orm", "persist Contact", "ac1", db__system="postgresql", db__operation="persist")
    absorb(otel, host, "ab" * 16, acme, service="notes")   # a trace no tab was issued: learned from all the same
    trace = tab.server_tickets.issue("d1", 1000.0)[0][1]
    server = span("@opentelemetry/instrumentation-http", "POST", SERVER, "b7ad6b7169203331", 0, 20, kind=2,
                  http__request__method="POST", url__path="/notes", http__response__status_code=201)
    absorb(otel, host, trace, server, service="notes")   # a request that made no database span at all
    rec = tab.records[0]
    assert rec["dbTraced"] is False and rec["dbUnread"] == ["@acme/otel-orm's persist"]
    assert "writes unknown (instrumentation @acme/otel-orm's persist not read)" in reticle._server_line(rec)
    blind = reticle._server_blind({"kind": "server", "writes": {"table": "notes"}}, [rec])
    assert blind["assertion"] == "server.writes-unknown" and "does not know how to read" in blind["inconclusive"]


def test_spans_that_name_themselves_or_each_other_as_parents_are_still_read():
    rec = request(pg('INSERT INTO "contact"("name") VALUES ($1)', "b1", "b1", 2),
                  pg('UPDATE "notes" SET "t" = 1 WHERE "id" = 3', "b2", "b3", 4),
                  pg('DELETE FROM "tags" WHERE "id" = 5', "b3", "b2", 6))
    assert sorted(writes(rec)) == [("delete", "tags", True, [5]), ("insert", "contact", True, None),
                                   ("update", "notes", True, [3])]


SCOPES = [TYPEORM, PG, SEQUELIZE, "prisma", MONGOOSE, MONGODB, REDIS, IOREDIS, "drizzle-orm", "@acme/otel-orm", ""]
KEYS = ["db.system", "db.system.name", "db.operation", "db.operation.name", "db.statement", "db.query.text",
        "db.collection.name", "db.sql.table", "db.mongodb.collection", "drizzle.query.text", "drizzle.query.params",
        "db.postgresql.values", "method", "model", "db.response.affected_rows"]
TEXTS = ["save", "update", "SET cart:42 ?", "DEL a:1 b", '{"_id":{"$in":[1,"x",{"$oid":"a"}]}}', "[1, [2, {}]]",
         '{"criteria":[{"id":1},{"id":null}],"targetOrEntity":{"_id":"?"}}', "UPDATE t SET a=1 WHERE id = $1",
         "BEGIN", "COMMIT", "ROLLBACK", "MULTI", "EXEC", "abortTransaction", "findAndModify", "", " ", "?", "$cmd"]


def test_any_database_span_is_read_or_named_without_raising():
    """Spans a sender makes up (any of the attributes Reticle reads, of any type, under any instrumentation's
    name, parents pointing anywhere) give writes, a count and labels, never an exception."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    values = st.one_of(st.sampled_from(TEXTS), st.text(max_size=30), st.integers(-3, 10**20), st.booleans(),
                       st.lists(st.one_of(st.integers(), st.sampled_from(TEXTS)), max_size=4))
    one = st.tuples(st.sampled_from(SCOPES), st.sampled_from(["a1", "a2", "a3", "a4"]),
                    st.sampled_from(["a1", "a2", "a3", "a4", SERVER, "ff"]), st.integers(0, 20), st.integers(0, 20),
                    st.booleans(), st.dictionaries(st.sampled_from(KEYS), values, max_size=6))

    @settings(max_examples=400, deadline=None)
    @given(st.lists(one, max_size=5))
    def check(made):
        spans = []
        for scope, sid, parent, start, length, error, attrs in made:
            attrs = {k.replace(".", "__"): v for k, v in attrs.items()}
            spans.append(span(scope, "prisma:client:operation" if scope == "prisma" else "x", sid, parent, start,
                              start + length, error, **attrs))
        rec = request(*spans)
        assert isinstance(rec["writes"], list) and isinstance(rec["statements"], int)
        assert all(isinstance(label, str) for label in rec["dbUnread"])
        reticle._clean_writes(rec["writes"])
    check()
