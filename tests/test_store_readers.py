"""Storage truth without a browser: the store readers on real files (SQLite through the standard library, JSON
files and folders), and the rules and the `stored` predicate over windows built by hand."""

import json
import sqlite3

import pytest

import reticle
from _events import call, ev

parse = reticle.parse_predicate


def reader(url, tmp_path):
    r = reticle._store_reader(url, str(tmp_path))
    r.open()
    return r


def test_sqlite_changes_are_named_by_key_whatever_the_table_shape(tmp_path):
    """Inserts, updates (with the columns that changed) and deletes, by primary key, by rowid for a table
    without one, by a composite key in a WITHOUT ROWID table; a rolled-back transaction is no change; a table
    created after the watch began is read whole; a secret-named column is redacted."""
    db = str(tmp_path / "app.db")
    c = sqlite3.connect(db)
    c.executescript("CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, password TEXT);"
                    "CREATE TABLE tags (name TEXT);"
                    "CREATE TABLE pairs (a TEXT, b INTEGER, note TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID;"
                    "INSERT INTO notes (title, password) VALUES ('one', 'hunter2');")
    c.commit()
    r = reader("sqlite:///" + db, tmp_path)
    assert r.poll() is None
    c.execute("UPDATE notes SET title = 'uno' WHERE id = 1")
    c.execute("INSERT INTO tags VALUES ('red')")
    c.execute("INSERT INTO pairs VALUES ('x', 2, 'n')")
    c.commit()
    got = r.poll()["changes"]
    assert {(ch["op"], ch["table"], json.dumps(ch["key"], sort_keys=True)) for ch in got} == {
        ("update", "notes", '{"id": 1}'), ("insert", "tags", '{"rowid": 1}'), ("insert", "pairs", '{"a": "x", "b": 2}')}
    update = next(ch for ch in got if ch["op"] == "update")
    assert update["changed"] == ["title"] and update["values"]["password"] == "[redacted]"
    assert "hunter2" not in json.dumps(got)
    c.execute("BEGIN")
    c.execute("DELETE FROM notes")
    c.rollback()
    assert r.poll() is None
    c.executescript("CREATE TABLE later (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO later (v) VALUES ('a');"
                    "DELETE FROM tags;")
    got = r.poll()["changes"]
    assert sorted((ch["op"], ch["table"]) for ch in got) == [("delete", "tags"), ("insert", "later")]
    assert r.rows("notes", {"id": "1"}, 5) == ([{"id": 1, "title": "uno", "password": "[redacted]"}], 1)
    with pytest.raises(reticle.ToolError) as err:
        r.rows("notes", {"colour": "red"}, 5)
    assert err.value.code == "store_invalid" and "title" in err.value.error
    r.close()
    c.close()


def test_a_table_past_the_cap_is_named_never_guessed(tmp_path, monkeypatch):
    """A table bigger than STORE_TABLE_ROWS_CAP is not compared row by row: a change to it is named as a table
    too big to compare, and a `stored` check on it is unknown."""
    monkeypatch.setattr(reticle, "STORE_TABLE_ROWS_CAP", 10)
    db = str(tmp_path / "big.db")
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, v TEXT)")
    c.executemany("INSERT INTO events (v) VALUES (?)", [("e%d" % i,) for i in range(20)])
    c.commit()
    r = reader("sqlite:///" + db, tmp_path)
    c.execute("INSERT INTO events (v) VALUES ('new')")
    c.commit()
    got = r.poll()
    assert got["changes"] == [] and got["uncompared"] == ["events"]
    k = watched({"sqlite big.db": ["events"]})
    window = [ev(10, "store.commit", store="sqlite big.db", changes=[], uncompared=["events"])]
    res = reticle._judge(parse({"kind": "stored", "table": "events", "where": {"v": "new"}}), obs(window, k))
    assert res.get("inconclusive") and "too big to compare" in res["inconclusive"], res
    r.close()
    c.close()


def test_a_sqlite_file_that_does_not_exist_yet_is_read_once_the_app_makes_it(tmp_path):
    db = str(tmp_path / "later.db")
    r = reticle._store_reader("sqlite:///" + db, str(tmp_path))
    assert "does not exist yet" in r.open()
    assert r.poll() is None
    c = sqlite3.connect(db)
    c.executescript("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t (v) VALUES ('first');")
    c.close()
    assert [(ch["op"], ch["values"]["v"]) for ch in r.poll()["changes"]] == [("insert", "first")]
    r.close()


def test_relative_and_absolute_sqlite_urls_resolve_as_sqlalchemy_writes_them(tmp_path):
    assert reticle._store_reader("sqlite:///rel/app.db", "/srv/project").path == "/srv/project/rel/app.db"
    assert reticle._store_reader("sqlite:////abs/app.db", "/srv/project").path == "/abs/app.db"
    assert reticle._store_reader("sqlite+pysqlite:////abs/app.db?mode=rw", "/x").path == "/abs/app.db"
    assert reticle._store_reader("file:///abs/data.json", "/x").path == "/abs/data.json"
    assert reticle._store_url_safe("postgresql://app:s3cret@db:5432/notes") == "postgresql://app:***@db:5432/notes"


def test_json_files_are_compared_item_by_item(tmp_path):
    """A file's key paths to lists of objects are its tables, items by id (else by content); an object of objects
    is keyed by its keys; a file caught mid-write is read again at the next poll; a folder's files are prefixed by
    their names."""
    f = tmp_path / "db.json"
    f.write_text(json.dumps({"notes": [{"id": 1, "title": "a"}], "meta": {"users": {"u1": {"name": "Ann"}}},
                             "log": ["x"]}))
    r = reader("file://" + str(f), tmp_path)
    assert sorted(r.tables()) == ["meta.users", "notes"]
    f.write_text(json.dumps({"notes": [{"id": 1, "title": "b"}, {"id": 2, "title": "c", "token": "t0k"}],
                             "meta": {"users": {}}, "log": ["x", "y"]}))
    got = r.poll()["changes"]
    assert sorted((ch["op"], ch["table"], json.dumps(ch["key"])) for ch in got) == [
        ("delete", "meta.users", '{"key": "u1"}'), ("insert", "notes", '{"id": 2}'), ("update", "notes", '{"id": 1}')]
    assert "t0k" not in json.dumps(got)
    f.write_text('{"notes": [{"id": 1, "ti')  # mid-write
    assert r.poll() is None
    f.write_text(json.dumps({"notes": [{"id": 1, "title": "b"}, {"id": 2, "title": "c", "token": "t0k"},
                                       {"id": 3, "title": "d"}], "meta": {"users": {}}}))
    assert [(ch["op"], ch["key"]) for ch in r.poll()["changes"]] == [("insert", {"id": 3})]
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "posts.json").write_text(json.dumps([{"slug": "a", "t": 1}]))
    r2 = reader("file://" + str(folder), tmp_path)
    (folder / "posts.json").write_text(json.dumps([{"slug": "a", "t": 1}, {"slug": "b", "t": 2}]))
    assert [(ch["table"], ch["key"]) for ch in r2.poll()["changes"]] == [("posts", {"slug": "b"})]
    assert r2.rows("posts", {"t": 2}, 5)[1] == 1


# ---- the rules and the `stored` predicate over windows built by hand ----

def watched(tables=None, polled=()):
    k = reticle._Known([], {}, None, "http://x", (), {}, polled=tuple(polled))
    tables = {"sqlite app.db": ["notes", "audit"]} if tables is None else tables
    k.stores = tuple(tables)
    k.store_tables = dict(tables)
    return k


def obs(window, k, now=5000.0):
    o = reticle._Observation(window, k, now=now, since=0.0, url="http://x/", after_act=True)
    return o


def commit(t, *changes, shared=False):
    return ev(t, "store.commit", store="sqlite app.db", changes=list(changes), uncompared=[], shared=shared)


def row(op, table, key, **values):
    return {"op": op, "table": table, "key": key, "values": dict(key, **values)}


NOTE = row("insert", "notes", {"id": 7}, title="Buy milk")
SETTLE = {"kind": "settled", "quietMs": 300}


@pytest.mark.parametrize("name, window, k, reason, word", [
    ("nothing-committed", [call(10, url="http://x/notes/new", status=303)], watched(), "store_saw_nothing",
     "no watched store"),
    ("only-shared", [call(10, url="http://x/api/notes"), commit(20, NOTE, shared=True)], watched(), "store_shared",
     "another tab"),
    ("elsewhere", [call(10, url="http://x/api/notes"), commit(20, row("insert", "audit", {"id": 1}, what="x"))],
     watched(), "store_wrote_elsewhere", "nothing to notes"),
    ("beside-a-timer", [call(5, url="http://x/api/draft"), call(10, url="http://x/api/save"),
                        commit(20, row("insert", "audit", {"id": 1}))],
     watched(polled=("POST http://x/api/draft",)), "store_background", "timed write"),
    ("stored", [call(10, url="http://x/api/notes"), commit(20, NOTE)], watched(), "proved", "notes +1: id 7"),
    ("a-failed-write-is-not-a-save", [call(10, url="http://x/api/notes", status=422)], watched(), None, ""),
    ("no-store-watched", [call(10, url="http://x/api/notes")], watched({}), "proved", "settled"),
])
def test_what_the_store_did_decides_the_act(name, window, k, reason, word):
    p = parse(SETTLE)
    got = reticle._decide({"pass": True, "evidence": {}}, reticle._contradictions(window, p, 0.0, k), window, k,
                          0.0, p)
    if reason is None:
        assert not got[1].startswith("store_"), got
        return
    assert got[1] == reason and word in got[2], got


def test_a_201_that_stored_nothing_is_no_and_a_wrong_row_is_named():
    k = watched()
    p = parse(SETTLE)
    window = [call(10, url="http://x/api/notes", status=201)]
    cs = reticle._contradictions(window, p, 0.0, k)
    assert [c["kind"] for c in cs] == ["store-created-nothing"]
    assert reticle._decide({"pass": True, "evidence": {}}, cs, window, k, 0.0, p)[0] == "no"
    window = [call(10, url="http://x/notes/3/rename", status=303), commit(20, row("update", "notes", {"id": 2},
                                                                                   title="x"))]
    cs = reticle._contradictions(window, p, 0.0, k)
    assert [c["kind"] for c in cs] == ["store-wrong-row"] and "names row 3 of notes" in cs[0]["counter"]
    window = [call(10, url="http://x/notes/3/rename", status=303), commit(20, row("update", "notes", {"id": 3}))]
    assert reticle._contradictions(window, p, 0.0, k) == []


def test_the_stored_predicate_over_a_window():
    k = watched()
    window = [call(10, url="http://x/api/notes"), commit(20, NOTE)]
    ok = reticle._judge(parse({"kind": "stored", "table": "notes", "where": {"title": "Buy milk", "id": "7"}}),
                        obs(window, k))
    assert ok["pass"] and ok["evidence"]["stored"] == ["notes +1: id 7, title 'Buy milk'"]
    miss = reticle._judge(parse({"kind": "stored", "table": "notes", "where": {"title": "Eggs"}}), obs(window, k))
    assert not miss["pass"] and "Buy milk" in miss["failureReason"]
    later = reticle._judge(parse({"kind": "stored", "table": "notes", "op": "delete"}), obs(window, k))
    assert not later.get("decided"), "a job may still write it after the answer: it fails when the act's time runs out"
    nope = reticle._judge(parse({"kind": "stored", "table": "nope"}), obs(window, k))
    assert nope["decidedBy"] == "no-such-table" and "notes" in nope["failureReason"]
    none = reticle._judge(parse({"kind": "stored", "table": "notes"}), obs(window, watched({})))
    assert "reticle_watch_db" in none["inconclusive"]
    with pytest.raises(reticle.PredicateError):
        parse({"kind": "stored", "where": {"a": 1}})
    with pytest.raises(reticle.PredicateError):
        parse({"kind": "stored", "table": "t", "op": "upsert"})
    assert reticle._describe_predicate(parse({"kind": "stored", "table": "notes", "where": {"id": 3}})) == \
        "a stored row of notes where id=3"


def test_a_read_the_apps_lock_kept_busy_is_made_again_at_the_next_poll(tmp_path):
    """The app holds its database locked while a poll reads (rollback journal, an exclusive transaction): that
    poll fails, and what was committed before and during the lock is still reported by the next one.  (The
    reader takes a commit as seen only once its rows were read, so a lock taken between its two reads loses
    nothing either; that race is not made here.)"""
    db = str(tmp_path / "busy.db")
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    r = reader("sqlite:///" + db, tmp_path)
    c.execute("BEGIN EXCLUSIVE")
    c.execute("INSERT INTO t (v) VALUES ('held')")
    c.execute("COMMIT")
    c.execute("BEGIN EXCLUSIVE")
    c.execute("INSERT INTO t (v) VALUES ('second')")
    with pytest.raises(sqlite3.OperationalError):
        r.poll()  # the app's exclusive lock: nothing can be read now
    c.execute("COMMIT")
    assert sorted(ch["values"]["v"] for ch in r.poll()["changes"]) == ["held", "second"]
    r.close()
    c.close()


def test_a_store_that_could_not_be_read_during_the_act_is_said_never_guessed():
    """A failed read of the store while the tab acted (gone, refused, busy) is in the window: the act's save is
    unknown (store_unread), a 201 is not called a lie, and a `stored` check is unknown; the answer names it."""
    k = watched()
    p = parse(SETTLE)
    lost = ev(15, "store.commit", store="sqlite app.db", changes=[], uncompared=[], unread="database is locked")
    window = [call(10, url="http://x/api/notes", status=201), lost]
    cs = reticle._contradictions(window, p, 0.0, k)
    assert cs == []
    got = reticle._decide({"pass": True, "evidence": {}}, cs, window, k, 0.0, p)
    assert got[:2] == ("unknown", "store_unread") and "database is locked" in got[2], got
    res = reticle._judge(parse({"kind": "stored", "table": "notes"}), obs(window, k))
    assert "could not be read" in res["inconclusive"], res


def test_the_daemons_stores_tell_an_acting_tab_when_a_read_failed(tmp_path):
    """_Stores: a read the app's exclusive lock refuses while a tab acts reaches that tab as an unread commit,
    and the watch's description says the error; once the lock is gone, the commits reach it; a tab that does not
    act gets nothing."""
    import asyncio

    class Tab:
        def __init__(self, tid):
            self.id = tid
            self.got = []

        def add_store_commit(self, data):
            self.got.append(data)

    async def run():
        db = str(tmp_path / "app.db")
        c = sqlite3.connect(db, isolation_level=None)
        c.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT)")
        clock = [0.0]
        stores = reticle._Stores(str(tmp_path), lambda: clock[0], asyncio.ensure_future)
        await stores.watch("sqlite:///" + db, "test")
        acting, idle = Tab("a"), Tab("b")
        await stores.before_act(acting)
        c.execute("BEGIN EXCLUSIVE")
        c.execute("INSERT INTO notes (title) VALUES ('x')")
        await stores.catch_up()
        assert acting.got and acting.got[-1]["unread"] and "locked" in acting.got[-1]["unread"], acting.got
        assert "locked" in stores.describe()[0]["error"]
        c.execute("COMMIT")
        await stores.catch_up()
        assert [ch["values"]["title"] for ch in acting.got[-1]["changes"]] == ["x"]
        assert idle.got == []
        stores.end_act(acting)
        await stores.close()
        c.close()
    asyncio.run(run())


def test_a_json_items_secret_or_long_field_changing_alone_is_a_change(tmp_path):
    """Items are compared as the file holds them, not as they are shown: a password reset (a secret field, shown
    redacted) or an edit past the 300th character of a long text is an update, named without the secret."""
    f = tmp_path / "users.json"
    body = "x" * 400
    f.write_text(json.dumps({"users": [{"id": 1, "password": "old-hunter2", "bio": body}]}))
    r = reader("file://" + str(f), tmp_path)
    f.write_text(json.dumps({"users": [{"id": 1, "password": "new-hunter2", "bio": body}]}))
    got = r.poll()["changes"]
    assert [(ch["op"], ch["key"]) for ch in got] == [("update", {"id": 1})] and "hunter2" not in json.dumps(got)
    f.write_text(json.dumps({"users": [{"id": 1, "password": "new-hunter2", "bio": body + "y"}]}))
    assert [(ch["op"], ch["key"]) for ch in r.poll()["changes"]] == [("update", {"id": 1})]
