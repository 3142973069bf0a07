"""The PostgreSQL watch (src/reticle/store_postgres.py) against real PostgreSQL clusters, no mocks.

A cluster started with wal_level=logical is watched through a temporary logical replication slot: what
committed shows row by row (table, key, values), rolled-back work never does, and no slot outlives the
watch, not even one whose process was killed.  A cluster at the default wal_level (replica), and a role
without REPLICATION, fall back to the statistics: the watch starts, says why it is limited and the exact
fix, and names the tables written.  The password of a URL never shows.  The module is used through the
built reticle.py, as the daemon uses it.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from _harness import ROOT, free_port, wait_until
from _postgres import APP_PASSWORD, start_cluster, psql

try:
    import psycopg
except ImportError:
    pytest.skip('psycopg is not installed: pip install "psycopg[binary]" (tests/requirements.txt pins it)',
                allow_module_level=True)

import reticle

Reader = reticle._PostgresReader
_StoreError = reticle._StoreError


def _url(port, db="postgres", user="app", password=APP_PASSWORD, scheme="postgresql"):
    return "%s://%s:%s@127.0.0.1:%d/%s" % (scheme, user, password, port, db)


@pytest.fixture(scope="module")
def logical():
    with start_cluster(logical=True) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def replica():
    with start_cluster(logical=False) as cluster:
        yield cluster


@pytest.fixture
def db(logical, request):
    """A fresh database of its own on the logical cluster (named for the test), with a `notes` table."""
    name = "t_" + request.node.name.lower().replace("[", "_").replace("]", "")[:50]
    psql(logical, 'DROP DATABASE IF EXISTS "%s"' % name)
    psql(logical, 'CREATE DATABASE "%s"' % name)
    psql(logical, "CREATE TABLE notes (id serial PRIMARY KEY, title text, done boolean NOT NULL DEFAULT false)",
         db=name)
    return name


@contextlib.contextmanager
def connected(cluster, db):
    """The app's side: an autocommit connection to `db` over TCP, with the password."""
    conn = psycopg.connect(_url(cluster.port, db), autocommit=True)
    try:
        yield conn
    finally:
        conn.close()


@contextlib.contextmanager
def watching(url):
    """A reader on `url`, opened (-> (reader, how it watches)), closed at the end."""
    reader = Reader(url)
    try:
        how = reader.open()
        yield reader, how
    finally:
        reader.close()


def slots(cluster):
    """The names of the cluster's replication slots that Reticle made."""
    out = psql(cluster, "SELECT string_agg(slot_name, ',') FROM pg_replication_slots WHERE slot_name LIKE 'reticle\\_%'")
    return [s for s in out.split(",") if s]


# -- row by row, through logical decoding ------------------------------------------------------------------

def test_committed_inserts_updates_and_deletes_come_with_table_key_and_values(logical, db):
    with watching(_url(logical.port, db)) as (reader, how), connected(logical, db) as app:
        assert "logical decoding" in how and reader.limited == ""
        assert reader.poll() is None
        app.execute("INSERT INTO notes (id, title) VALUES (17, 'Buy milk')")
        app.execute("UPDATE notes SET done = true WHERE id = 17")
        app.execute("DELETE FROM notes WHERE id = 17")
        got = reader.poll()
        assert got == {"changes": [
            {"op": "insert", "table": "notes", "key": {"id": 17}, "values": {"id": 17, "title": "Buy milk", "done": False}},
            {"op": "update", "table": "notes", "key": {"id": 17}, "values": {"id": 17, "title": "Buy milk", "done": True}},
            {"op": "delete", "table": "notes", "key": {"id": 17}, "values": {"id": 17}},
        ], "uncompared": [], "transactions": 3}
        assert reader.poll() is None
        assert reader.known_tables == ["notes"]


def test_what_committed_before_open_is_not_reported(logical, db):
    with connected(logical, db) as app:
        app.execute("INSERT INTO notes (title) VALUES ('before')")
        with watching(_url(logical.port, db)) as (reader, _):
            assert reader.poll() is None
            app.execute("INSERT INTO notes (title) VALUES ('after')")
            got = reader.poll()
    assert [c["values"]["title"] for c in got["changes"]] == ["after"]


def test_a_rolled_back_transaction_reports_nothing(logical, db):
    with watching(_url(logical.port, db)) as (reader, _), connected(logical, db) as app:
        with pytest.raises(RuntimeError):
            with app.transaction():
                app.execute("INSERT INTO notes (title) VALUES ('never')")
                app.execute("UPDATE notes SET title = 'never either'")
                raise RuntimeError("roll back")
        assert reader.poll() is None
        assert psql(logical, "SELECT count(*) FROM notes", db=db) == "0"


def test_one_transaction_of_several_statements_is_one_transaction_in_order(logical, db):
    psql(logical, "CREATE TABLE tags (note_id int, tag text, PRIMARY KEY (note_id, tag))", db=db)
    with watching(_url(logical.port, db)) as (reader, _), connected(logical, db) as app:
        with app.transaction():
            app.execute("INSERT INTO notes (id, title) VALUES (1, 'a'), (2, 'b')")
            app.execute("INSERT INTO tags VALUES (1, 'home')")
            app.execute("UPDATE notes SET id = 3 WHERE id = 2")
            app.execute("DELETE FROM notes WHERE id = 1")
        got = reader.poll()
    assert got["transactions"] == 1 and got["uncompared"] == []
    assert [(c["op"], c["table"], c["key"]) for c in got["changes"]] == [
        ("insert", "notes", {"id": 1}), ("insert", "notes", {"id": 2}),
        ("insert", "tags", {"note_id": 1, "tag": "home"}),
        ("update", "notes", {"id": 3}), ("delete", "notes", {"id": 1})]
    assert got["changes"][3]["old_key"] == {"id": 2}  # the key an update changed: what it was


TRICKY = ["it's: a 'quoted' [x] title", "a:b c[text]:'d' e", "line one\nline two", "  spaces  ", "", "null",
          "O''Brien", "'", "ends with a quote'", "'' x[int]:1", "\u00e9t\u00e9 \u2603"]


def test_text_with_quotes_spaces_colons_and_brackets_round_trips(logical, db):
    psql(logical, 'CREATE TABLE odd (id bigint PRIMARY KEY, "Odd Col" text, tags text[], price numeric, '
                  'ratio float8, flag boolean, note text, at date)', db=db)
    with watching(_url(logical.port, db)) as (reader, _), connected(logical, db) as app:
        for i, text in enumerate(TRICKY):
            app.execute('INSERT INTO odd VALUES (%s, %s, %s, 12.50, 0.25, true, NULL, \'2024-02-29\')',
                        (i, text, [text, "x y"]))
        app.execute("INSERT INTO notes (title) VALUES (%s)", ("x" * 1000,))
        got = reader.poll()
        rows, total = reader.rows("odd", {}, 100)
    values = [c["values"] for c in got["changes"] if c["table"] == "odd"]
    assert [v["Odd Col"] for v in values] == TRICKY
    assert values[0] == {"id": 0, "Odd Col": TRICKY[0], "tags": '{"it\'s: a \'quoted\' [x] title","x y"}',
                         "price": 12.5, "ratio": 0.25, "flag": True, "note": None, "at": "2024-02-29"}
    assert rows == values and total == len(TRICKY)  # rows() reads each value as poll() says it
    long = next(c for c in got["changes"] if c["table"] == "notes")
    assert long["values"]["title"] == "x" * 300


def test_an_update_that_leaves_a_large_value_alone_says_the_values_it_knows(logical, db):
    psql(logical, "CREATE TABLE docs (id int PRIMARY KEY, body text, n int)", db=db)
    psql(logical, "INSERT INTO docs SELECT 1, string_agg(md5(i::text), '') , 0 FROM generate_series(1, 400) AS i", db=db)
    with watching(_url(logical.port, db)) as (reader, _), connected(logical, db) as app:
        app.execute("UPDATE docs SET n = 1")  # body, stored out of line, unchanged: the decoding does not say it
        got = reader.poll()
        assert got["changes"] == [{"op": "update", "table": "docs", "key": {"id": 1}, "values": {"id": 1, "n": 1}}]
        rows, _ = reader.rows("docs", {"id": 1}, 1)
        assert len(rows[0]["body"]) == 300 and rows[0]["n"] == 1


def test_a_table_outside_public_is_named_with_its_schema(logical, db):
    psql(logical, 'CREATE SCHEMA "My S"; CREATE TABLE "My S"."we.ird" ("Key [k]" int PRIMARY KEY, v text)', db=db)
    with watching(_url(logical.port, db)) as (reader, _), connected(logical, db) as app:
        app.execute('INSERT INTO "My S"."we.ird" VALUES (7, \'seven\')')
        got = reader.poll()
        assert got["changes"] == [{"op": "insert", "table": "My S.we.ird", "key": {"Key [k]": 7},
                                   "values": {"Key [k]": 7, "v": "seven"}}]
        assert reader.rows("My S.we.ird", {"Key [k]": "7"}, 5) == ([{"Key [k]": 7, "v": "seven"}], 1)


def test_a_table_without_a_primary_key_and_a_truncate(logical, db):
    psql(logical, "CREATE TABLE log (line text)", db=db)
    with watching(_url(logical.port, db)) as (reader, _), connected(logical, db) as app:
        app.execute("INSERT INTO log VALUES ('one')")
        app.execute("DELETE FROM log")
        app.execute("TRUNCATE notes")
        got = reader.poll()
    assert got["changes"] == [{"op": "insert", "table": "log", "key": None, "values": {"line": "one"}},
                              {"op": "delete", "table": "log", "key": None, "values": {}}]
    assert got["uncompared"] == ["notes"] and got["transactions"] == 3


def test_more_than_500_changes_in_a_poll_are_counted_not_listed(logical, db):
    with watching(_url(logical.port, db)) as (reader, _), connected(logical, db) as app:
        app.execute("INSERT INTO notes (title) SELECT 'n' || i FROM generate_series(1, 620) AS i")
        got = reader.poll()
        assert len(got["changes"]) == 500 and got["more"] == 120 and got["transactions"] == 1
        assert got["uncompared"] == ["notes"]  # changed beyond what is listed
        assert reader.poll() is None


# -- reading rows now ---------------------------------------------------------------------------------------

def test_rows_filters_by_where_compared_as_text_and_counts(logical, db):
    with connected(logical, db) as app:
        app.execute("INSERT INTO notes (id, title, done) SELECT i, 'n' || (i % 3), i % 2 = 0 "
                    "FROM generate_series(1, 30) AS i")
        app.execute("INSERT INTO notes (id, title) VALUES (31, NULL)")
    with watching(_url(logical.port, db)) as (reader, _):
        rows, total = reader.rows("notes", {"title": "n1", "done": True}, 3)
        assert total == 5 and rows == [{"id": 4, "title": "n1", "done": True}, {"id": 10, "title": "n1", "done": True},
                                       {"id": 16, "title": "n1", "done": True}]
        assert reader.rows("notes", {"id": "17"}, 10) == reader.rows("notes", {"id": 17}, 10) == (
            [{"id": 17, "title": "n2", "done": False}], 1)
        assert reader.rows("notes", {"title": None}, 10) == ([{"id": 31, "title": None, "done": False}], 1)
        assert reader.rows("notes", {}, 0) == ([], 31)
        assert reader.rows("public.notes", {"id": 99}, 10) == ([], 0)
        assert reader.tables() == ["notes"]
        assert reader.poll() is None  # reading is not writing


def test_rows_of_an_unknown_table_or_column_is_store_invalid_naming_what_there_is(logical, db):
    psql(logical, "CREATE TABLE tags (tag text)", db=db)
    with watching(_url(logical.port, db)) as (reader, _):
        with pytest.raises(_StoreError) as err:
            reader.rows("note", {}, 10)
        assert err.value.code == "store_invalid" and "notes, tags" in err.value.error and "'note'" in err.value.error
        with pytest.raises(_StoreError) as err:
            reader.rows("notes", {"titel": "x"}, 10)
        assert err.value.code == "store_invalid" and "id, title, done" in err.value.error
        with pytest.raises(_StoreError) as err:
            reader.rows('notes; DROP TABLE "tags"', {}, 10)
        assert err.value.code == "store_invalid"
        assert reader.rows("tags", {}, 1) == ([], 0)
        assert reader.poll() is None  # the slot outlived the refusals


# -- the URL, the password and failing to connect ----------------------------------------------------------

@pytest.mark.parametrize("url, name", [
    ("postgresql://app:pw@127.0.0.1:5433/notes", "postgresql app@127.0.0.1:5433/notes"),
    ("postgres://app:pw@db.local/notes", "postgresql app@db.local:5432/notes"),
    ("postgresql+psycopg://app:pw@[::1]:6000/notes?sslmode=require", "postgresql app@[::1]:6000/notes"),
    ("postgresql+psycopg2://a%40b:p%3Aw@h:1/my%20db", "postgresql a@b@h:1/my db"),
    ("postgresql://app@%2Fvar%2Frun%2Fpostgresql/notes", "postgresql app@/var/run/postgresql:5432/notes"),
    ("postgresql:///notes?host=/tmp&user=me&password=pw", "postgresql me@/tmp:5432/notes"),
])
def test_urls_are_named_without_their_password(url, name):
    reader = Reader(url)
    assert reader.name == name and reader.kind == "postgresql"
    reader.close()  # never opened: nothing to do


@pytest.mark.parametrize("url", ["mysql://app:pw@h/db", "postgresql://app:pw@h:port/db", "postgresql://app:pw@h/",
                                 "postgresql://app:pw@h:70000/db", "sqlite:///x.db", "postgresql:",
                                 "postgres://h/?user=app&password=pw", "pgsql://app:p@w@h/db"])
def test_a_malformed_url_is_store_invalid_without_the_password(url):
    with pytest.raises(_StoreError) as err:
        Reader(url)
    assert err.value.code == "store_invalid" and "postgresql://user:password@host:port/database" in err.value.recovery
    assert "pw" not in str(err.value.payload()) and "p@w" not in str(err.value.payload())


def test_a_wrong_password_names_host_port_and_the_fix_never_the_password(logical):
    reader = Reader(_url(logical.port, password="Wr0ng-Secret"))
    with pytest.raises(_StoreError) as err:
        reader.open()
    payload = str(err.value.payload())
    assert err.value.code == "store_unavailable" and "127.0.0.1:%d" % logical.port in err.value.error
    assert "password" in err.value.error and "user and password" in err.value.recovery
    assert "Wr0ng-Secret" not in payload and "Wr0ng-Secret" not in reader.name
    reader.close()


def test_a_closed_port_names_host_port_and_the_fix():
    port = free_port()
    reader = Reader(_url(port, password="Secret-On-A-Dead-Port"))
    with pytest.raises(_StoreError) as err:
        reader.open()
    assert err.value.code == "store_unavailable" and "127.0.0.1:%d" % port in err.value.error
    assert "start PostgreSQL" in err.value.recovery and "Secret-On-A-Dead-Port" not in str(err.value.payload())
    reader.close()


def test_a_missing_database_is_named_with_the_fix(logical):
    with pytest.raises(_StoreError) as err:
        Reader(_url(logical.port, db="nodb")).open()
    assert "has no database nodb" in err.value.error and "createdb nodb" in err.value.recovery


def test_the_password_shows_nowhere_when_it_works(logical, db):
    with watching(_url(logical.port, db)) as (reader, how):
        assert APP_PASSWORD not in reader.name + how + reader.limited
        assert reader.name == "postgresql app@127.0.0.1:%d/%s" % (logical.port, db)
        with pytest.raises(_StoreError) as err:
            reader.rows("nothing", {}, 1)
        assert APP_PASSWORD not in str(err.value.payload())


def test_without_psycopg_open_says_what_to_install():
    code = ("import sys; sys.modules['psycopg'] = None; import reticle\n"
            "r = reticle._PostgresReader('postgresql://app:pw@127.0.0.1:1/db')\n"
            "try:\n    r.open()\nexcept reticle._StoreError as e:\n    print(e.code, '|', e.error, '|', e.recovery)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("store_unavailable | ") and 'pip install "reticle[postgres]"' in out.stdout


# -- no slot outlives its watch ---------------------------------------------------------------------------

def test_close_drops_the_slot_and_closing_twice_is_fine(logical, db):
    reader = Reader(_url(logical.port, db))
    reader.open()
    assert len(slots(logical)) == 1
    reader.close()
    reader.close()
    assert slots(logical) == []
    with pytest.raises(_StoreError):
        reader.poll()  # not watched any more


def test_a_killed_process_leaves_no_slot(logical, db):
    code = ("import sys, time, reticle\n"
            "r = reticle._PostgresReader(sys.argv[1])\nr.open()\nprint('open', flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, _url(logical.port, db)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "open", proc.stderr.read() if proc.poll() is not None else ""
        assert len(slots(logical)) == 1
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        wait_until(lambda: slots(logical) == [], timeout=20, what="the killed watch's slot to go")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


def test_a_lost_connection_is_said_once_then_the_watch_starts_again(logical, db):
    with watching(_url(logical.port, db)) as (reader, _), connected(logical, db) as app:
        psql(logical, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'reticle' "
                      "AND datname = '%s'" % db)
        wait_until(lambda: slots(logical) == [], timeout=20, what="the terminated watch's slot to go")
        with pytest.raises(_StoreError) as err:
            reader.rows("notes", {}, 1)
        assert err.value.code == "store_unavailable" and APP_PASSWORD not in str(err.value.payload())
        assert reader.rows("notes", {}, 1) == ([], 0)  # a connection of its own again
        app.execute("INSERT INTO notes (title) VALUES ('unseen')")
        with pytest.raises(_StoreError) as err:
            reader.poll()
        assert "was lost" in err.value.error and APP_PASSWORD not in str(err.value.payload())
        assert reader.poll() is None and len(slots(logical)) == 1  # watching again, from now on
        app.execute("INSERT INTO notes (title) VALUES ('after')")
        assert [c["values"]["title"] for c in reader.poll()["changes"]] == ["after"]
        assert reader.rows("notes", {}, 5)[1] == 2


def test_a_server_that_ends_idle_sessions_does_not_end_the_watch(logical, db):
    psql(logical, "ALTER DATABASE \"%s\" SET idle_session_timeout = '300ms'" % db)
    with watching(_url(logical.port, db)) as (reader, _):
        time.sleep(1.2)  # idle between two polls, longer than the server allows an idle session
        psql(logical, "INSERT INTO notes (title) VALUES ('kept')", db=db)
        assert [c["values"]["title"] for c in reader.poll()["changes"]] == ["kept"]


def test_a_writing_transaction_left_open_holds_the_start_up_and_is_named(logical, db):
    with connected(logical, db) as app:
        app.execute("BEGIN")
        app.execute("INSERT INTO notes (title) VALUES ('open')")
        reader = Reader(_url(logical.port, db))
        reader.start_timeout_s = 1.5
        started = time.monotonic()
        with pytest.raises(_StoreError) as err:
            reader.open()
        assert time.monotonic() - started < 15
        assert "still open" in err.value.error and "commit it or roll it back" in err.value.recovery
        app.execute("ROLLBACK")
        reader.close()
    assert slots(logical) == []


# -- the fallback: which tables, from the statistics ---------------------------------------------------------

def _fallback_poll(reader, table):
    """Poll until the statistics show `table` written (they are sent a second or so after a commit)."""
    seen = []

    def shown():
        got = reader.poll()
        if got is not None:
            seen.append(got)
        return any(table in g["uncompared"] for g in seen)

    wait_until(shown, timeout=20, interval=0.3, what="%s in uncompared" % table)
    return seen


def test_at_wal_level_replica_the_watch_names_the_tables_written_and_the_fix(replica):
    psql(replica, "CREATE TABLE notes (id serial PRIMARY KEY, title text); CREATE TABLE other (id int)")
    with watching(_url(replica.port)) as (reader, how), connected(replica, "postgres") as app:
        assert "ALTER SYSTEM SET wal_level = logical" in reader.limited and "restart PostgreSQL" in reader.limited
        assert "statistics" in how and APP_PASSWORD not in how + reader.limited
        app.execute("INSERT INTO notes (title) VALUES ('a')")
        seen = _fallback_poll(reader, "notes")
        assert all(g["changes"] == [] and g["transactions"] is None and "other" not in g["uncompared"] for g in seen)
        assert reader.rows("notes", {"title": "a"}, 5) == ([{"id": 1, "title": "a"}], 1)
    assert slots(replica) == []


def test_a_role_without_replication_falls_back_with_the_alter_role_fix(logical, db):
    psql(logical, "DROP ROLE IF EXISTS plain; CREATE ROLE plain LOGIN PASSWORD 'plain-pw'")
    psql(logical, "GRANT ALL ON notes TO plain", db=db)
    url = "postgresql://plain:plain-pw@127.0.0.1:%d/%s" % (logical.port, db)
    with watching(url) as (reader, _), connected(logical, db) as app:
        assert "ALTER ROLE plain WITH REPLICATION;" in reader.limited and "plain-pw" not in reader.limited
        app.execute("UPDATE notes SET title = 'x'")  # no row: nothing written
        app.execute("INSERT INTO notes (title) VALUES ('b')")
        _fallback_poll(reader, "notes")
    assert slots(logical) == []
