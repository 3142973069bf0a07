"""Storage truth: the app's own store watched read-only as a witness (stores.py, store_judge.py).

Real stacks with no server voice (plain PHP on PDO SQLite, a Node app keeping a JSON file, the plain PHP form
of test_server keeping a JSON list), in real Chromium, in a device and through the script tag; the truth is read
from the store by the test itself, every case repeated.
"""

import hashlib
import json
import os
import sqlite3
import time

import pytest

from _harness import Daemon, Mcp, chromium_path  # noqa: F401  (a browser test module: conftest marks it `browser`)
from _store_apps import NodeJsonStore, PhpStore, need_node, need_php
from test_server import PhpNotes, _note, open_tab


def error(mcp, name, args):
    data, is_error = mcp.call(name, args)
    assert is_error, data
    return data


def watch(mcp, url):
    out = mcp.ok("reticle_watch_db", {"url": url})
    assert out["watching"]["store"] and out["watching"]["how"], out
    return out


def fill_and_click(mcp, sid, button, title, until=None, timeout_ms=6000, label="Title"):
    mcp.ok("reticle_act", {"sessionId": sid, "action": "fill", "target": {"label": label}, "args": {"value": title}})
    args = {"sessionId": sid, "action": "click", "timeout_ms": timeout_ms, "detail": "full",
            "target": {"role": "button", "name": button}}
    if until is not None:
        args["until"] = until
    return mcp.ok("reticle_act_and_wait", args, timeout=60)


def titles(app):
    return [r["title"] for r in app.rows()]


def closing(app, browser):
    if browser is not None:
        browser.close()
    app.close()


@pytest.fixture(scope="module")
def cluster():
    """A PostgreSQL cluster with wal_level=logical for the module (tests/_postgres.py)."""
    from _postgres import start_cluster
    with start_cluster(logical=True) as c:
        yield c


def php_store(kind, tmp_path, daemon, request):
    if kind == "sqlite":
        return PhpStore(tmp_path, daemon)
    need_php("pgsql")
    pytest.importorskip("psycopg", reason="pip install 'reticle[postgres]' (psycopg) to watch PostgreSQL")
    from _postgres import APP_PASSWORD
    c = request.getfixturevalue("cluster")
    return PhpStore(tmp_path, daemon, dsn="pgsql", pg_port=c.port, pg_password=APP_PASSWORD,
                    dbname="notes_%s" % os.path.basename(str(tmp_path)).replace("-", "_")[-40:].lower())


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_php_form_with_no_server_voice(kind, device, tmp_path, daemon, mcp, request):
    """Post/redirect/get on plain PHP with PDO on SQLite and on PostgreSQL (logical decoding), nothing in the app
    reporting: a healthy save is yes naming the row the store kept (its secret column never shown); a save that
    writes nothing under the same success flash, and one whose transaction rolled back, are never yes; a rename
    that updates another row than the one its path names is no; the truth is the store's rows, read here."""
    app = php_store(kind, tmp_path, daemon, request)
    sid, browser = open_tab(mcp, app, device=device, path="/notes/new")
    try:
        watch(mcp, app.watch_url)
        for n in range(2):
            title = "Buy milk %d" % n
            out = fill_and_click(mcp, sid, "Save note", title)
            row = [r for r in app.rows() if r["title"] == title]
            assert out["verified"] == "yes" and len(row) == 1, out
            assert "the store: notes +1: id %d, title %r" % (row[0]["id"], title) in out["because"], out["because"]
            assert out["stored"] == ["notes +1: id %d, title %r" % (row[0]["id"], title)], out
            assert row[0]["api_token"] not in json.dumps(out), "a secret column's value reached the answer"
            assert "s3cret" not in json.dumps(out)
            mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/new"})
        for word in ("ghost", "rollback"):
            for n in range(2):
                before = app.rows()
                out = fill_and_click(mcp, sid, "Save note", "%s note %d" % (word, n))
                assert app.rows() == before
                assert out["verified"] == "unknown" and out["verifiedReason"] == "store_saw_nothing", out
                assert "no watched store" in out["because"] and "committed anything" in out["because"], out
                mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/new"})
        target = app.rows()[-1]
        for n in range(2):
            mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/%d/edit" % target["id"]})
            before = {r["id"]: r["title"] for r in app.rows()}
            out = fill_and_click(mcp, sid, "Rename", "wrongrow %d" % n)
            after = {r["id"]: r["title"] for r in app.rows()}
            assert after[target["id"]] == before[target["id"]], "the fixture renamed the named row"
            assert out["verified"] == "no", out
            assert any(c["kind"] == "store-wrong-row" and "names row %d of notes" % target["id"] in c["counter"]
                       for c in out["contradictions"]), out
        mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/%d/edit" % target["id"]})
        out = fill_and_click(mcp, sid, "Rename", "Renamed right")
        assert out["verified"] == "yes", out
        assert {r["id"]: r["title"] for r in app.rows()}[target["id"]] == "Renamed right"
        assert "notes ~1: id %d, title 'Renamed right'" % target["id"] in out["because"], out["because"]
    finally:
        closing(app, browser)


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_stored_predicate_reads_the_row_itself(kind, device, tmp_path, daemon, mcp, request):
    """{kind: "stored", table, where}: yes when the store committed that row during the act, no once the act's
    timeout ran out (a job may write it after the answer) when the save wrote nothing under its success flash;
    with now: true it reads the store's rows as they are."""
    app = php_store(kind, tmp_path, daemon, request)
    sid, browser = open_tab(mcp, app, device=device, path="/notes/new")
    try:
        watch(mcp, app.watch_url)
        for n in range(2):
            title = "Eggs %d" % n
            out = fill_and_click(mcp, sid, "Save note", title, until={"kind": "stored", "table": "notes",
                                                                       "where": {"title": title}, "op": "insert"})
            assert out["verified"] == "yes" and title in titles(app), out
            mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/new"})
            out = fill_and_click(mcp, sid, "Save note", "ghost %d" % n, timeout_ms=3000,
                                 until={"kind": "stored", "table": "notes", "where": {"title": "ghost %d" % n}})
            assert out["verified"] == "no" and "ghost %d" % n not in titles(app), out
            mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/new"})
        out = mcp.ok("reticle_assert", {"sessionId": sid, "predicate": {"kind": "stored", "table": "notes", "now": True,
                                                                        "where": {"title": "Eggs 1"}}})
        assert out["verified"] == "yes", out
        out = mcp.ok("reticle_assert", {"sessionId": sid, "predicate": {"kind": "stored", "table": "nope",
                                                                        "now": True}})
        assert out["verified"] != "yes" and "notes" in json.dumps(out), out
    finally:
        closing(app, browser)


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_fetch_json_endpoint(kind, device, tmp_path, daemon, mcp, request):
    """The same PHP app's fetch endpoint (201 {ok: true} either way): the save that stored the row is yes; the one
    that stored nothing is no, whatever the page says ("Saved!"): a 201 Created says a resource was created, and
    the watched store kept none (where a 303 after a form post that stored nothing is only unknown)."""
    app = php_store(kind, tmp_path, daemon, request)
    sid, browser = open_tab(mcp, app, device=device, path="/app")
    try:
        watch(mcp, app.watch_url)
        for n in range(2):
            out = fill_and_click(mcp, sid, "Add", "Call mum %d" % n)
            assert out["verified"] == "yes" and "Call mum %d" % n in titles(app), out
            assert "the store: notes +1" in out["because"], out["because"]
            before = app.rows()
            out = fill_and_click(mcp, sid, "Add", "ghost %d" % n)
            assert out["verified"] == "no" and [c["kind"] for c in out["contradictions"]] == ["store-created-nothing"]
            assert "POST /api/notes answered 201 Created" in out["because"], out["because"]
            assert app.rows() == before
            mcp.ok("reticle_navigate", {"sessionId": sid, "reload": True})
    finally:
        closing(app, browser)


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
def test_a_node_app_keeping_a_json_file(device, tmp_path, daemon, mcp):
    """A Node app on the built-in http module writing a JSON file: the healthy save is yes naming the item, the
    silent one (201 {ok: true}, nothing written) no; `stored` reads the file's key path `notes`."""
    need_node()
    app = NodeJsonStore(tmp_path, daemon)
    sid, browser = open_tab(mcp, app, device=device)
    try:
        watch(mcp, app.watch_url)
        for n in range(2):
            out = fill_and_click(mcp, sid, "Add", "Walk dog %d" % n)
            assert out["verified"] == "yes" and "Walk dog %d" % n in titles(app), out
            assert "notes +1: id" in out["because"] and "Walk dog %d" % n in out["because"], out["because"]
            before = app.rows()
            out = fill_and_click(mcp, sid, "Add", "ghost %d" % n)
            assert out["verified"] == "no" and out["contradictions"][0]["kind"] == "store-created-nothing", out
            assert app.rows() == before
            out = fill_and_click(mcp, sid, "Add", "ghost again %d" % n,
                                 until={"kind": "stored", "table": "notes", "where": {"title": "ghost again %d" % n}})
            assert out["verified"] == "no", out
    finally:
        closing(app, browser)


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
def test_a_json_list_without_ids_is_compared_by_content(device, tmp_path, daemon, mcp):
    """test_server's plain PHP form keeps a bare JSON list of {title}: its save is yes naming the item, and the
    form that comes back saying nothing is still never yes (the store saw nothing)."""
    app = PhpNotes(tmp_path, daemon)
    sid, browser = open_tab(mcp, app, device=device, path="/notes/new")
    try:
        watch(mcp, "file://" + app.store)
        out = _note(mcp, sid, "Buy milk")
        assert out["verified"] == "yes" and app.rows() == 1, out
        assert "+1: title 'Buy milk'" in out["because"], out["because"]
        mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/new"})
        out = _note(mcp, sid, "quiet")
        assert out["verified"] == "unknown" and app.rows() == 1, out
    finally:
        closing(app, browser)


def test_a_postgresql_watch_leaves_no_slot_and_no_password_behind(tmp_path, cluster):
    """A daemon watching PostgreSQL from the command line holds one temporary logical slot while it runs; stopped,
    or killed, it leaves none; the password is in no status, log line or answer."""
    pytest.importorskip("psycopg", reason="pip install 'reticle[postgres]' (psycopg) to watch PostgreSQL")
    from _postgres import APP_PASSWORD, psql
    url = "postgresql://app:%s@127.0.0.1:%d/postgres" % (APP_PASSWORD, cluster.port)

    def slots():
        return psql(cluster, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'reticle%'")
    for how in ("stop", "kill"):
        d = Daemon(tmp_path / ("state-" + how), args=["--watch-db", url])
        try:
            stores = d.status_at_start["serverTruth"]["stores"]
            assert stores[0]["kind"] == "postgresql" and "logical" in stores[0]["how"], stores
            assert slots().strip() == "1"
            assert APP_PASSWORD not in json.dumps(d.status())
            if how == "kill":
                d.proc.kill()
                d.proc.wait(10)
        finally:
            d.stop()
        for _ in range(50):
            if slots().strip() == "0":
                break
            time.sleep(0.1)
        assert slots().strip() == "0", how
        with open(d.log_path) as fh:
            assert APP_PASSWORD not in fh.read()


def test_two_tabs_acting_on_one_store_at_once_are_told_apart_or_said_to_be_shared(tmp_path, daemon, mcp):
    """Two tabs acting on the same store at the same time: a commit cannot be told to be one's or the other's,
    so each verdict says so (unknown, store_shared; a `stored` check unknown) rather than guessing; once only
    one tab acts, its save is yes again.  Reading stops when no tab acts."""
    need_php("sqlite")
    app = PhpStore(tmp_path, daemon)
    sid_a, browser_a = open_tab(mcp, app, path="/notes/new")
    sid_b, browser_b = open_tab(mcp, app, path="/notes/new")
    try:
        watch(mcp, app.watch_url)
        for n in range(2):
            for sid in (sid_a, sid_b):
                mcp.ok("reticle_act", {"sessionId": sid, "action": "fill", "target": {"label": "Title"},
                                       "args": {"value": "Shared %s %d" % (sid[-4:], n)}})
            out = mcp.ok("reticle_act_and_wait", {"sessionId": sid_a, "action": "click", "detail": "full",
                                                  "target": {"role": "button", "name": "Save note"}}, timeout=60)
            assert "Shared %s %d" % (sid_a[-4:], n) in titles(app)
            assert out["verified"] == "unknown" and out["verifiedReason"] == "store_shared", out
            out = mcp.ok("reticle_act_and_wait", {
                "sessionId": sid_b, "action": "click", "detail": "full", "target": {"role": "button", "name": "Save note"},
                "until": {"kind": "stored", "table": "notes", "where": {"title": "Shared %s %d" % (sid_b[-4:], n)}}},
                timeout=60)
            assert out["verified"] == "unknown" and "another tab" in out["because"], out
            for sid in (sid_a, sid_b):
                mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/new"})
        time.sleep(5.5)  # past the bare acts' 5 s: one tab acting alone
        out = fill_and_click(mcp, sid_a, "Save note", "Alone")
        assert out["verified"] == "yes" and "Alone" in titles(app), out
        time.sleep(2)  # past the act's linger: nothing reads the store now
        reads = daemon.status()["serverTruth"]["stores"][0]["reads"]
        time.sleep(1)
        assert daemon.status()["serverTruth"]["stores"][0]["reads"] == reads
    finally:
        browser_b.close()
        closing(app, browser_a)


def test_a_watched_sqlite_file_is_left_byte_identical(tmp_path, daemon, mcp):
    """Only Reticle touches the file during the run (watch, acts that poll it, reads of its rows, unwatch): the
    database file is byte for byte as it was, in rollback-journal and WAL mode alike (and in rollback-journal
    mode its whole folder; a WAL database with no connection open gets SQLite's side files, the WAL empty)."""
    from test_server import App
    app = App("flask", tmp_path, daemon)
    sid, browser = open_tab(mcp, app)
    try:
        for mode in ("delete", "wal"):
            folder = tmp_path / mode
            folder.mkdir()
            db = str(folder / "app.db")
            conn = sqlite3.connect(db)
            conn.execute("PRAGMA journal_mode=%s" % mode)
            conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT)")
            conn.executemany("INSERT INTO notes (title) VALUES (?)", [("n%d" % i,) for i in range(50)])
            conn.commit()
            conn.close()

            def picture(folder=folder):
                return {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in sorted(os.listdir(folder))}
            before = picture()
            watch(mcp, "sqlite:///" + db)
            assert mcp.ok("reticle_watch_db", {"url": "sqlite:///" + db})["watching"].get("already")
            for _ in range(3):  # acts poll the store; a bare act keeps polling for a while after it
                mcp.ok("reticle_act", {"sessionId": sid, "action": "hover", "target": {"role": "button",
                                                                                       "name": "Save (no-op)"}})
            mcp.ok("reticle_navigate", {"sessionId": sid, "reload": True})
            got = mcp.ok("reticle_assert", {"sessionId": sid, "predicate": {"kind": "stored", "table": "notes",
                                                                            "now": True, "where": {"title": "n7"}}})
            assert got["verified"] == "yes", got
            mcp.ok("reticle_watch_db", {"url": "sqlite:///" + db, "unwatch": True})
            after = picture()
            assert after["app.db"] == before["app.db"], mode
            if mode == "delete":
                assert after == before  # not one file added, removed or changed
            else:  # a WAL database none of whose connections is open gets the side files every reader makes, empty
                assert set(after) - set(before) <= {"app.db-wal", "app.db-shm"}
                assert os.path.getsize(str(folder / "app.db-wal")) == 0
    finally:
        closing(app, browser)


def test_bad_store_arguments_say_what_is_accepted(tmp_path, daemon, mcp):
    """A URL that is no store, an in-memory database, MySQL, a folder that does not exist and a PostgreSQL server on
    another host each get a clear error naming what is accepted, and the daemon keeps serving; a `stored`
    check with no store watched is unknown naming the fix; a page cannot plant a store commit."""
    for url, code, says in (("http://x/", "store_invalid", "sqlite:////"), ("sqlite://", "store_invalid", "in-memory"),
                            ("sqlite:///:memory:", "store_invalid", "in-memory"),
                            ("mysql://u:hunter2@localhost/db", "store_invalid", "MySQL"),
                            ("sqlite:////no/such/folder/app.db", "store_unavailable", "does not exist"),
                            ("postgresql://u:hunter2@db.example.com/app", "store_invalid", "--watch-db")):
        err = error(mcp, "reticle_watch_db", {"url": url})
        assert err["code"] == code and says in err["error"] + err.get("recovery", ""), (url, err)
        assert "hunter2" not in json.dumps(err)
    assert mcp.ok("reticle_sessions") is not None
    from test_server import App
    app = App("flask", tmp_path, daemon)
    sid, browser = open_tab(mcp, app)
    try:
        out = mcp.ok("reticle_assert", {"sessionId": sid, "predicate": {"kind": "stored", "table": "notes"}})
        assert out["verified"] == "unknown" and "reticle_watch_db" in out["because"], out
        err = error(mcp, "reticle_assert", {"sessionId": sid, "predicate": {"kind": "stored", "where": {"a": 1}}})
        assert err["code"] == "predicate_invalid" and "table" in err["error"], err
        mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/"})
    finally:
        closing(app, browser)


def test_the_daemon_watches_what_the_command_line_and_environment_name(tmp_path):
    """--watch-db and RETICLE_WATCH_DB are watched from the start (in /status); a URL that is no store refuses the
    start with one sentence."""
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.json")
    sqlite3.connect(a).execute("CREATE TABLE t (id INTEGER PRIMARY KEY)").connection.close()
    with open(b, "w") as fh:
        json.dump({"items": []}, fh)
    d = Daemon(tmp_path / "state", args=["--watch-db", "sqlite:///" + a], env={"RETICLE_WATCH_DB": "file://" + b})
    try:
        stores = d.status_at_start["serverTruth"]["stores"]
        assert [s["store"] for s in stores] == ["sqlite " + a, "file " + b], stores
        assert [s["by"] for s in stores] == ["--watch-db", "RETICLE_WATCH_DB"]
    finally:
        d.close()
    bad = Daemon(tmp_path / "state2", args=["--watch-db", "mysql://root:hunter2@localhost/x"], ready=False)
    try:
        assert bad.proc.wait(20) != 0
    finally:
        bad.stop()
    with open(bad.log_path) as fh:
        log = fh.read()
    assert "MySQL" in log and "hunter2" not in log, log


def _note_rows(app):
    with sqlite3.connect(app.db) as conn:
        return [r[0] for r in conn.execute("SELECT title FROM note ORDER BY id")]


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
def test_a_save_a_job_makes_after_the_answer_is_waited_for(device, tmp_path, daemon, mcp):
    """Django with Reticle's middleware, its save run on another thread a second after the 303 (a job queue in
    the same process): the request itself wrote nothing, so the verdict waits, within the act's timeout, for the
    watched store to commit to the table the path names: yes naming the row and when it landed; the job that
    writes nothing or rolls back is never yes, also under the old advice (a `server` check of 0 writes); the job
    that renames another row than the one the path names is no.  The truth is the app's SQLite file."""
    from test_server import App
    app = App("django", tmp_path, daemon)
    sid, browser = open_tab(mcp, app, device=device, path="/notes/later")
    try:
        watch(mcp, "sqlite:///" + app.db)
        for n in range(2):
            mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/later"})
            out = fill_and_click(mcp, sid, "Save note", "Later %d" % n)
            assert "Later %d" % n in _note_rows(app)
            assert out["verified"] == "yes", out
            # named with when it landed: by the store, and by the middleware, which saw the job start
            assert "note +1" in out["because"] and "s after the answer" in out["because"], out
            for title in ("nothing %d" % n, "rollback %d" % n):
                for until in (None, {"kind": "server", "method": "POST", "writes": {"count": 0}}):
                    mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/later"})
                    out = fill_and_click(mcp, sid, "Save note", title, until=until)
                    time.sleep(1.2)  # the job has run by now
                    assert title not in _note_rows(app)
                    assert out["verified"] != "yes", (title, until, out)
        target = len(_note_rows(app))
        for n in range(2):
            mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/%d/rename" % target})
            out = fill_and_click(mcp, sid, "Save note", "wrongrow %d" % n)
            time.sleep(0.3)
            assert _note_rows(app)[target - 2] == "wrongrow %d" % n
            assert out["verified"] == "no" and any(c["kind"] == "store-wrong-row" for c in out["contradictions"]), out
    finally:
        closing(app, browser)


def test_verify_watches_a_store_while_flows_replay(tmp_path):
    """`reticle verify --watch-db URL`: a saved flow whose save writes nothing under its success flash is yes
    without the watch (the page alone says "saved") and not yes with it; the healthy flow stays yes; a URL that is
    no store is a setup error naming what is accepted."""
    from _harness import free_port
    from test_flows import _exits, _verify, _write_flow
    need_php("sqlite")
    port = free_port()
    project = tmp_path / "project"
    app = PhpStore(tmp_path, None, tag=False)
    try:
        for name, title in (("healthy", "Verified note"), ("silent", "ghost verified")):
            _write_flow(project, name, app.url + "/notes/new", [
                {"action": "fill", "target": {"label": "Title"}, "args": {"value": title}},
                {"action": "click", "target": {"role": "button", "name": "Save note"},
                 "until": {"kind": "text", "contains": "Note saved."}}])
        run = _verify(project, tmp_path / "state", port, "healthy", "silent")
        _exits(run, 0)
        run = _verify(project, tmp_path / "state", port, "healthy", "silent", "--watch-db", app.watch_url, "--json")
        verdicts = {r["name"]: r["verified"] for r in json.loads(run.stdout)["flows"]}
        assert verdicts == {"healthy": "yes", "silent": "unknown"}, run.stdout + run.stderr
        assert "watching sqlite " + app.db_path in run.stderr
        assert titles(app).count("Verified note") == 2
        run = _verify(project, tmp_path / "state", port, "healthy", "--watch-db", "mysql://u:hunter2@h/db")
        assert run.returncode != 0 and "MySQL" in run.stdout + run.stderr and "hunter2" not in run.stdout + run.stderr
    finally:
        app.close()
