"""Server truth: real Django, Flask and FastAPI apps with Reticle's middleware, driven in
headless Chromium (the script tag) and in devices, judged through the `server` predicate and
the verdict rules; plus the pure judge from a table, and the daemon's records route."""

import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

import reticle
from _harness import AppProcess, Browser, Daemon, Mcp, daemon_env, free_port, wait_until
from _harness import chromium_path  # noqa: F401  (a browser test module: conftest marks it `browser`)

HERE = os.path.dirname(os.path.abspath(__file__))
APPS = os.path.join(HERE, "_server_apps.py")
FRAMEWORKS = ("flask", "django", "fastapi")


class App(AppProcess):
    """One of tests/_server_apps.py's apps as a child process, finding the daemon through the
    environment as a user's app would (RETICLE_PORT, RETICLE_STATE_DIR for the token)."""

    def __init__(self, framework, tmp, daemon=None, script=True, env=None):
        super().__init__(tmp, "app")
        self.db = os.path.join(str(tmp), "%s-%d.sqlite3" % (framework, self.port))
        extra = {"RETICLE_PORT": daemon.port if daemon else free_port()}
        if daemon:
            extra["RETICLE_STATE_DIR"] = daemon.state_dir
        extra.update(env or {})
        self.start([sys.executable, APPS, framework, str(self.port), self.db, daemon.url if daemon and script else ""],
                   daemon_env(extra.pop("RETICLE_STATE_DIR", str(tmp / "nostate")), **extra), HERE, wait=20)

    def rows(self):
        import sqlite3
        with sqlite3.connect(self.db) as conn:
            return conn.execute("SELECT COUNT(*) FROM profile").fetchone()[0]


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path / "state")
    yield d
    d.close()


def open_tab(mcp, app, device=False, path="/"):
    """A tab on the app's `path`: a device (the SDK injected), or Chromium with the app's script tag."""
    before = {s["sessionId"] for s in mcp.ok("reticle_sessions")["sessions"]}
    if device:
        return mcp.ok("reticle_open", {"url": app.url + path}, timeout=60)["sessionId"], None
    browser = Browser(app.url + path)
    try:
        sessions = wait_until(lambda: [s for s in mcp.ok("reticle_sessions")["sessions"]
                                       if s["sessionId"] not in before and s["url"].startswith(app.url)],
                              20, what="the tab to connect")
    except BaseException:
        browser.close()
        raise
    return sessions[0]["sessionId"], browser


def act(mcp, sid, button, until=None, timeout_ms=6000):
    args = {"action": "click", "target": {"role": "button", "name": button},
            "sessionId": sid, "timeout_ms": timeout_ms, "detail": "full"}
    if until is not None:
        args["until"] = until
    return mcp.ok("reticle_act_and_wait", args, timeout=60)


WRITE = {"kind": "server", "method": "POST", "writes": {"table": "profile"}}
def saved(path):
    return {"kind": "text", "contains": "Saved profile " + path}


# -- real apps, real Chromium with the script tag ---------------------------------------------------

@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_server_truth_in_a_real_app_with_the_script_tag(framework, tmp_path, daemon, mcp):
    app = App(framework, tmp_path, daemon)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        # a page that says "Saved" while nothing was written: no
        out = act(mcp, sid, "Save (no-op)", dict(WRITE, urlContains="/api/noop"))
        assert out["verified"] == "no", out
        assert "0 writes" in out["because"], out["because"]
        assert app.rows() == 0
        # a real write: yes, with the server's summary in the evidence
        out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "yes", out
        assert app.rows() == 1
        assert any("POST /api/save → 200" in s and "view save_profile" in s and "1 write" in s
                   for s in out["server"]), out["server"]
        # a rolled-back write is not a write
        out = act(mcp, sid, "Save (rollback)", dict(WRITE, urlContains="/api/rollback"))
        assert out["verified"] == "no", out
        assert app.rows() == 1
        # the UI says "Saved profile", the server caught and logged an exception under its 200: not yes
        out = act(mcp, sid, "Save (logged)", saved("/api/logged"))
        assert out["verified"] == "no", out
        assert out["verifiedReason"] == "contradicted" and "server-logged-error" in out["because"], out["because"]
        assert "shop.views" in out["because"]
        # an uncaught exception: no, naming the app's own frame with its file and line
        out = act(mcp, sid, "Save (boom)", saved("/api/boom"))
        assert out["verified"] == "no", out
        assert "server-exception" in out["because"] and "ValueError" in out["because"], out["because"]
        assert "_server_apps.py:" in out["because"] and " fail_inside" in out["because"], out["because"]
        # the no-until settle counts it as a failure in sight
        out = act(mcp, sid, "Save (boom)", None)
        assert out["verified"] == "no" and out["verifiedReason"] == "failure_observed", out
        assert "the server raised ValueError" in out["because"], out["because"]
        # not: an absence of exceptions holds over a clean save, and is violated by the crash
        out = act(mcp, sid, "Save", {"kind": "not", "predicate": {"kind": "server", "exception": True}})
        assert out["verified"] == "yes", out
        out = act(mcp, sid, "Save (boom)", {"kind": "not", "predicate": {"kind": "server", "exception": True}})
        assert out["verified"] == "no", out
        # that no was decided by the server's record, maybe before the browser saw its 500: let it land
        mcp.ok("reticle_assert", {"predicate": {"kind": "net", "urlContains": "/api/boom", "status": 500},
                                  "since": out["since"], "timeout_ms": 3000, "sessionId": sid})
        # a form post's write is seen across its redirect
        before = app.rows()
        out = act(mcp, sid, "Post form", {"kind": "allOf", "predicates": [
            {"kind": "server", "method": "POST", "urlContains": "/form", "status": 303,
             "writes": {"table": "profile", "op": "insert", "count": 1}},
            {"kind": "server", "method": "GET", "urlContains": "/done", "status": 200}]})
        assert out["verified"] == "yes", (out["because"], out.get("server"), out.get("contradictions"))
        assert app.rows() == before + 1
        # the page it lands on never sees the mark's cookie, and no storage event reports it
        seen = mcp.ok("reticle_assert", {"predicate": {"kind": "text", "contains": "cookies: ["}, "sessionId": sid,
                                         "timeout_ms": 3000})
        assert seen["verified"] in ("yes", "unknown"), seen
        clean = mcp.ok("reticle_assert", {"predicate": {"kind": "text", "contains": "__reticle_mark", "absent": True},
                                          "sessionId": sid, "detail": "full"})
        assert clean["pass"] is True, clean
        events = mcp.ok("reticle_observe", {"since": 0, "filters": ["storage"], "sessionId": sid})["events"]
        assert not any("__reticle" in json.dumps(e) for e in events), events
    finally:
        if browser is not None:
            browser.close()
        app.close()
    assert "Traceback" not in daemon.log()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_device_marks_its_requests_without_a_script_tag(framework, tmp_path, daemon, mcp):
    app = App(framework, tmp_path, daemon, script=False)
    try:
        sid, _ = open_tab(mcp, app, device=True)
        out = act(mcp, sid, "Save (no-op)", dict(WRITE, urlContains="/api/noop"))
        assert out["verified"] == "no", out
        out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "yes", out
        out = act(mcp, sid, "Save (boom)", saved("/api/boom"))
        assert out["verified"] == "no" and "_server_apps.py:" in out["because"], out
        out = act(mcp, sid, "Post form", dict(WRITE, urlContains="/form"))
        assert out["verified"] == "yes", out
        mcp.ok("reticle_close", {"sessionId": sid})
    finally:
        app.close()


@pytest.mark.parametrize("framework", ("django", "fastapi", "sqlite3"))
def test_inserts_with_returning_count_their_rows(framework, tmp_path, daemon, mcp):
    """Django's ORM on SQLite, SQLAlchemy's insert().returning() and a raw sqlite3 connection under
    watch_sqlite3: each create is one insert, as the database did it (sqlite3 says 0 rows until fetched)."""
    app = App(framework, tmp_path, daemon)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(3):
            out = act(mcp, sid, "Create", {"kind": "server", "method": "POST", "urlContains": "/api/create",
                                           "writes": {"table": "profile", "op": "insert", "count": 1}})
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
            assert any("insert profile ×1" in line for line in out["server"]), out["server"]
            out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
        assert app.rows() == 6
        out = act(mcp, sid, "Save (no-op)", dict(WRITE, urlContains="/api/noop"))
        assert out["verified"] == "no" and "0 writes" in out["because"], out
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_writes_nobody_can_watch_are_unknown_saying_how_to_watch_them(tmp_path, daemon, mcp):
    """An app keeping its data where no watcher sees (a JSON file): its "0 writes" is no evidence."""
    app = App("files", tmp_path, daemon)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for button, path in (("Save", "/api/save"), ("Save (no-op)", "/api/noop")):
            out = act(mcp, sid, button, dict(WRITE, urlContains=path))
            assert out["verified"] == "unknown", out
            assert "nothing watches" in out["because"] and "reticle.watch_sqlite3(conn)" in out["because"], out
            assert any("writes not watched" in line for line in out["server"]), out["server"]
        out = act(mcp, sid, "Save", {"kind": "server", "urlContains": "/api/save", "writes": {"count": 0}})
        assert out["verified"] == "unknown", out
        # what it can know it still says: the request and its status
        out = act(mcp, sid, "Save", {"kind": "server", "urlContains": "/api/save", "status": 200})
        assert out["verified"] == "yes", out
    finally:
        if browser is not None:
            browser.close()
        app.close()


# -- watched by default, rows named by the request, 303s that wrote nothing (issue 36) ---------------

@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
def test_a_raw_sqlite3_app_that_never_calls_watch_is_watched(device, tmp_path, daemon, mcp):
    """The Flask tutorial's raw sqlite3 connection with no reticle.watch_sqlite3 call: the middleware
    watches it (the interpreter's sqlite3.connect audit event), so a save is yes, a no-op is no (0
    writes) and a rollback is never yes; before, all three said "writes not watched" and the settle over
    the rollback was yes.  Each case three times."""
    app = App("sqlite3", tmp_path, daemon, script=not device, env={"SHOP_UNWATCHED": "1"})
    browser = None
    try:
        sid, browser = open_tab(mcp, app, device=device)
        for n in range(3):
            out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))
            assert out["verified"] == "yes" and any("1 write (insert profile" in line for line in out["server"]), \
                (n, out["because"], out.get("server"))
            out = act(mcp, sid, "Save (no-op)", saved("/api/noop"))  # (the text is new: the act before saved)
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_wrote_nothing"), (n, out)
            out = act(mcp, sid, "Save (no-op)", dict(WRITE, urlContains="/api/noop"))
            assert out["verified"] == "no" and "0 writes" in out["because"], (n, out)
            for until in (saved("/api/rollback"), dict(WRITE, urlContains="/api/rollback"), None):
                out = act(mcp, sid, "Save (rollback)", until)
                assert out["verified"] == "no", (n, until, out["because"], out.get("server"))
        assert app.rows() == 3
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_a_raw_connection_beside_a_watched_engine_is_seen_not_0_writes(tmp_path, daemon, mcp):
    """A Flask app on a SQLAlchemy engine that also writes through sqlite3.connect(...): the raw write is
    recorded once (not "0 writes", which made a `server writes` predicate no), and the engine's own writes
    are not recorded twice."""
    app = App("flask", tmp_path, daemon)
    browser = None
    once = {"kind": "server", "method": "POST", "writes": {"table": "profile", "op": "insert", "count": 1}}
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(3):
            out = act(mcp, sid, "Save (raw)", dict(once, urlContains="/api/raw_save"))
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
            out = act(mcp, sid, "Save", dict(once, urlContains="/api/save"))
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
        assert app.rows() == 6
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_a_driver_the_app_loaded_that_nothing_watches_makes_0_writes_unknown(tmp_path, daemon, mcp):
    """pymysql loaded in the app's process, no watcher for it: the app may write through it unseen, so a
    save the watched engine saw is still yes, but "0 writes" is no evidence (unknown, naming it)."""
    pytest.importorskip("pymysql")
    app = App("flask", tmp_path, daemon, env={"SHOP_IMPORT": "pymysql"})
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "yes", out
        out = act(mcp, sid, "Save (no-op)", dict(WRITE, urlContains="/api/noop"))
        assert out["verified"] == "unknown" and "pymysql, which nothing watches" in out["because"], out
        out = act(mcp, sid, "Save (no-op)", saved("/api/noop"))
        assert out["verified"] == "unknown" and "pymysql" in out["because"], out
    finally:
        if browser is not None:
            browser.close()
        app.close()


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
def test_a_django_form_post_answered_303_that_wrote_nothing_is_never_yes(device, tmp_path, daemon, mcp):
    """Post/redirect/get: the blank form is answered 303 like a good one and writes nothing; the settle
    over it is unknown (server_wrote_nothing), the real post yes.  Each twice."""
    app = App("django", tmp_path, daemon, script=not device)
    browser = None
    try:
        sid, browser = open_tab(mcp, app, device=device)
        for n in range(2):
            before = app.rows()
            out = act(mcp, sid, "Send blank", None)
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_wrote_nothing"), (n, out)
            assert "POST /form → 303" in out["because"], out["because"]
            assert app.rows() == before
            mcp.ok("reticle_navigate", {"url": app.url + "/", "sessionId": sid}, timeout=30)
            out = act(mcp, sid, "Post form", None)
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
            assert app.rows() == before + 1
            mcp.ok("reticle_navigate", {"url": app.url + "/", "sessionId": sid}, timeout=30)
    finally:
        if browser is not None:
            browser.close()
        app.close()


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
def test_a_redirects_record_that_lands_late_is_waited_for_never_a_no(device, tmp_path, daemon, mcp):
    """POST /form -> 303 -> GET /done, the record of GET /done delayed on purpose (1.5 s after the page,
    SHOP_LATE_RECORD): a `server GET /done 200` leaf waits for it and holds once it lands (never `no` while
    it is on its way); with a delay past the act's timeout it is unknown, saying the record never came; a
    request the act never made is `no`."""
    posted = {"kind": "server", "method": "POST", "urlContains": "/form", "status": 303,
              "writes": {"table": "profile", "op": "insert", "count": 1}}
    done = {"kind": "server", "method": "GET", "urlContains": "/done", "status": 200}
    for delay, timeout_ms, expected in (("1.5", 6000, "yes"), ("8", 2500, "unknown")):
        app = App("flask", tmp_path, daemon, script=not device, env={"SHOP_LATE_RECORD": delay})
        browser = None
        try:
            sid, browser = open_tab(mcp, app, device=device)
            rows = app.rows()
            started = time.monotonic()
            out = act(mcp, sid, "Post form", {"kind": "allOf", "predicates": [posted, done]}, timeout_ms=timeout_ms)
            assert app.rows() == rows + 1
            assert out["verified"] == expected, (delay, out["because"], out.get("server"))
            if expected == "yes":
                assert time.monotonic() - started >= 1.4, out  # the verdict waited for the record
            else:
                assert "GET /done" in out["because"] and "never arrived" in out["because"], out["because"]
        finally:
            if browser is not None:
                browser.close()
            app.close()
    app = App("flask", tmp_path, daemon, script=not device)
    browser = None
    try:
        sid, browser = open_tab(mcp, app, device=device)
        out = act(mcp, sid, "Post form", {"kind": "server", "method": "GET", "urlContains": "/elsewhere"})
        assert out["verified"] == "no", out
    finally:
        if browser is not None:
            browser.close()
        app.close()


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
def test_an_acts_answer_names_the_server_records_of_its_own_requests_alone(device, tmp_path, daemon, mcp):
    """The page load before an act whose record lands during the act (GET /'s record a second late on purpose,
    SHOP_LATE_PAGE, as an exporter's batched spans land) is not the act's: the answer's server line and its
    `because` name the act's POST alone, and a `server GET /` leaf over the act does not hold on it."""
    app = App("flask", tmp_path, daemon, script=not device, env={"SHOP_LATE_PAGE": "1"})
    browser = None
    try:
        sid, browser = open_tab(mcp, app, device=device)
        for n in range(2):
            mcp.ok("reticle_navigate", {"url": app.url + "/", "sessionId": sid}, timeout=30)
            out = mcp.ok("reticle_act_and_wait", {
                "action": "click", "target": {"role": "button", "name": "Save"}, "sessionId": sid, "timeout_ms": 6000,
                "until": {"kind": "allOf", "predicates": [{"kind": "settled", "quietMs": 2000}, {
                    "kind": "not", "predicate": {"kind": "server", "method": "GET", "urlContains": "/"}}]}},
                timeout=60)
            assert out["verified"] == "yes", (n, out)
            assert [s.split(",")[0] for s in out["server"]] == ["POST /api/save → 200"], (n, out["server"])
            assert out["because"].split("the server: ")[1].startswith("POST /api/save → 200"), (n, out["because"])
            assert "GET / →" not in out["because"], (n, out["because"])
        # the page load's record did come, into the tab (not lost): the window from the navigation holds it
        seen = mcp.ok("reticle_observe", {"since": 0, "sessionId": sid, "filters": ["server"]})["events"]
        assert any(e["data"].get("method") == "GET" and e["data"].get("path") == "/" for e in seen), seen
    finally:
        if browser is not None:
            browser.close()
        app.close()


@pytest.mark.parametrize("plain", [False, True], ids=["middleware", "plain"])
def test_a_redirected_form_posts_status_through_the_tag_is_unknown_at_once(plain, tmp_path, daemon, mcp):
    """A page's scripts never see the status of a full-page post answered by a redirect (the browser gives
    them the page it led to): through the script tag a `net` status over POST /form → 303 is unknown at once,
    not at the timeout, saying so and what decides it (the server's record when the app reports one, else a
    device or a `server` predicate); a device, which reads the browser's own record, decides it.  Twice each."""
    app = App("flask", tmp_path, daemon, env={"SHOP_PLAIN": "1"} if plain else None)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n, status in enumerate((303, 200)):
            mcp.ok("reticle_navigate", {"url": app.url + "/", "sessionId": sid}, timeout=30)
            started = time.monotonic()
            out = act(mcp, sid, "Post form", {"kind": "net", "method": "POST", "urlContains": "/form", "status": status},
                      timeout_ms=8000)
            took = time.monotonic() - started
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "inconclusive"), (n, out)
            assert took < 3, (n, took, out["because"])  # the timeout is 8 s
            assert "the browser hides the status of a full-page post answered by a redirect from the page's " \
                   "scripts" in out["because"], out["because"]
            assert ("a device (reticle_open)" if plain else "the app's server says it answered 303") \
                in out["because"], out["because"]
        browser.close()
        browser = None
        sid, _ = open_tab(mcp, app, device=True)
        out = act(mcp, sid, "Post form", {"kind": "net", "method": "POST", "urlContains": "/form", "status": 303})
        assert out["verified"] == "yes", out
    finally:
        if browser is not None:
            browser.close()
        app.close()


@pytest.mark.parametrize("framework", ("flask", "fastapi", "sqlite3"))
def test_the_wrong_row_is_a_contradiction(framework, tmp_path, daemon, mcp):
    """POST /api/contact/3/rename_wrong renames contact 2 and answers as if it renamed 3: its path names
    row 3 of the table it updated, the server updated another, so the text and the `server writes update
    contact` checks that held are no; the right rename is yes.  Twice each."""
    app = App(framework, tmp_path, daemon)
    browser = None
    update = {"kind": "server", "method": "POST", "writes": {"table": "contact", "op": "update"}}
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(2):
            mcp.ok("reticle_navigate", {"reload": True, "sessionId": sid}, timeout=30)  # a page saying nothing yet
            out = act(mcp, sid, "Rename contact 3", saved("/api/contact/3/rename"))
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
            for until in (saved("/api/contact/3/rename_wrong"), update):
                out = act(mcp, sid, "Rename contact 3 (wrong row)", until)
                assert out["verified"] == "no" and out["verifiedReason"] == "contradicted", (n, until, out)
                assert "names row 3 of contact, but the server updated contact keyed 2" in out["because"], out
    finally:
        if browser is not None:
            browser.close()
        app.close()


@pytest.mark.parametrize("framework", ("fastapi", "flask"))
def test_a_save_that_wrote_only_its_audit_row_is_not_a_clean_yes(framework, tmp_path, daemon, mcp):
    """POST /api/v2/contacts writes the audit row but not the contact its path names; once the tab's records
    have shown the app writing `contact`, that is unknown (server_wrote_elsewhere), not yes."""
    app = App(framework, tmp_path, daemon)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(2):
            out = act(mcp, sid, "Add contact", saved("/api/contacts"))
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
            out = act(mcp, sid, "Add contact (audit only)", saved("/api/v2/contacts"))
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_wrote_elsewhere"), (n, out)
            assert "insert audit ×1" in out["because"] and "nothing to contact" in out["because"], out["because"]
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_body_contains_matches_the_body_as_the_server_sent_it(tmp_path, daemon, mcp):
    app = App("flask", tmp_path, daemon)
    browser = None
    pretty = {"kind": "net", "method": "POST", "urlContains": "/api/pretty", "status": 200}
    try:
        sid, browser = open_tab(mcp, app)
        for needle in ('"ok": true', '"ok":true', '"note": "saved  twice"', '{\n  "ok": true'):
            out = act(mcp, sid, "Save (pretty)", dict(pretty, bodyContains=needle))
            assert out["verified"] == "yes", (needle, out["because"])
        out = act(mcp, sid, "Save (pretty)", dict(pretty, bodyContains='"id": 8'))
        assert out["verified"] == "no", out
        assert '"id": 7' in out["because"] and "it was:" in out["because"], out["because"]
    finally:
        if browser is not None:
            browser.close()
        app.close()


@pytest.mark.parametrize("framework", ("flask", "django", "fastapi", "sqlite3"))
def test_what_the_server_did_decides_every_verdict(framework, tmp_path, daemon, mcp):
    """Issue 28.1: whatever the predicate, the server's record of the act's requests is waited for and
    heard: a logged error, a rollback, a failure in work run after the answer are `no`; a write that
    persisted nothing is never a clean `yes`; a healthy save stays `yes`.  Each case three times."""
    app = App(framework, tmp_path, daemon)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(3):
            out = act(mcp, sid, "Save", saved("/api/save"))
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
            assert "the server: POST /api/save → 200" in out["because"] and "1 write" in out["because"], out
            out = act(mcp, sid, "Save (logged)", saved("/api/logged"))
            assert (out["verified"], out["verifiedReason"]) == ("no", "contradicted"), (n, out["because"])
            assert "shop.views" in out["because"], out["because"]
            out = act(mcp, sid, "Save (rollback)", saved("/api/rollback"))
            assert (out["verified"], out["verifiedReason"]) == ("no", "contradicted"), (n, out["because"])
            assert "server-rolled-back" in out["because"] and "insert profile" in out["because"], out["because"]
            out = act(mcp, sid, "Save (background)", saved("/api/background"))
            assert (out["verified"], out["verifiedReason"]) == ("no", "contradicted"), (n, out["because"])
            assert "audit_task" in out["because"] and "POST /api/background" in out["because"], out["because"]
            for until in (saved("/api/noop"), None):
                out = act(mcp, sid, "Save (no-op)", until)
                assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_wrote_nothing"), \
                    (n, until, out["because"], out.get("server"), out.get("trace"))
                # the advice shows how to see the write, never a check under which this failed save would pass
                assert "read it back" in out["because"] and "count: 0" not in out["because"], out["because"]
        declared = {"kind": "server", "method": "POST", "urlContains": "/api/noop", "writes": {"count": 0}}
        out = act(mcp, sid, "Save (no-op)", {"kind": "allOf", "predicates": [saved("/api/noop"), declared]})
        assert out["verified"] == "yes", out["because"]
        out = act(mcp, sid, "Save", None)
        assert out["verified"] == "yes", out["because"]
        # the act's timeline draws the server's record under the request it answers
        out = mcp.ok("reticle_act_and_wait", {"action": "click", "target": {"role": "button", "name": "Save (rollback)"},
                                              "sessionId": sid, "until": saved("/api/rollback"), "timeline": True},
                     timeout=60)
        with open(out["timeline"]["path"], encoding="utf-8") as fh:
            svg = fh.read()
        request, record = svg.index(">POST /api/rollback 200"), svg.index("↳ POST /api/rollback → 200")
        assert request < record and "rolled back" in svg[record:], svg
    finally:
        if browser is not None:
            browser.close()
        app.close()
    assert "Traceback" not in daemon.log()


def test_a_write_rolled_back_to_a_savepoint_is_no_rollback_of_a_save_that_commits(tmp_path, daemon, mcp):
    """Django: a nested atomic block (a savepoint, as get_or_create's create branch) whose write is
    undone by an IntegrityError while the outer block commits its own write is a healthy save:
    `yes`, the undone write not counted as kept; a real rollback of the transaction stays `no`."""
    app = App("django", tmp_path, daemon)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(3):
            before = app.rows()
            out = act(mcp, sid, "Save (tagged)", saved("/api/tagged"))
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
            assert app.rows() == before + 1
            assert "1 write (insert profile" in out["because"] and "1 rolled back" in out["because"], out["because"]
            kept = {"kind": "server", "method": "POST", "urlContains": "/api/tagged", "writes": {"table": "profile",
                                                                                                 "count": 1}}
            out = act(mcp, sid, "Save (tagged)", kept)
            assert out["verified"] == "yes", (n, out["because"])
            undone = {"kind": "server", "urlContains": "/api/tagged", "committed": False}
            out = act(mcp, sid, "Save (tagged)", undone)
            assert out["verified"] == "yes", (n, out["because"])
            out = act(mcp, sid, "Save (rollback)", saved("/api/rollback"))
            assert (out["verified"], out["verifiedReason"]) == ("no", "contradicted"), (n, out["because"])
            assert "server-rolled-back" in out["because"], out["because"]
    finally:
        if browser is not None:
            browser.close()
        app.close()
    assert "Traceback" not in daemon.log()


@pytest.mark.parametrize("framework", ("django", "fastapi"))
def test_what_the_server_did_decides_verdicts_in_a_device(framework, tmp_path, daemon, mcp):
    app = App(framework, tmp_path, daemon, script=False)
    try:
        sid, _ = open_tab(mcp, app, device=True)
        for n in range(2):
            out = act(mcp, sid, "Save", saved("/api/save"))
            assert out["verified"] == "yes", (n, out["because"])
            for button, path in (("Save (logged)", "/api/logged"), ("Save (rollback)", "/api/rollback"),
                                 ("Save (background)", "/api/background")):
                out = act(mcp, sid, button, saved(path))
                assert (out["verified"], out["verifiedReason"]) == ("no", "contradicted"), (n, button, out["because"])
            out = act(mcp, sid, "Save (no-op)", saved("/api/noop"))
            assert out["verifiedReason"] == "server_wrote_nothing", (n, out["because"])
        mcp.ok("reticle_close", {"sessionId": sid})
    finally:
        app.close()


def test_flow_save_suggests_a_server_check_over_each_write_when_the_app_reports_them(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    d = Daemon(tmp_path / "state", env={"RETICLE_PROJECT_DIR": str(project)})
    m = Mcp(d.url + "/mcp")
    app = App("fastapi", tmp_path, d)
    browser = None
    try:
        sid, browser = open_tab(m, app)
        out = act(m, sid, "Save", saved("/api/save"))
        assert out["verified"] == "yes", out["because"]
        saved_flow = m.ok("reticle_flow_save", {"name": "save-profile", "since": out["since"], "sessionId": sid})
        hints = saved_flow.get("suggestions") or []
        assert len(hints) == 1 and '"kind": "server", "method": "POST", "urlContains": "/api/save"' in hints[0], \
            saved_flow
        out = act(m, sid, "Save", {"kind": "allOf", "predicates": [saved("/api/save"), dict(WRITE, urlContains="/api/save")]})
        assert out["verified"] == "yes", out["because"]
        again = m.ok("reticle_flow_save", {"name": "save-checked", "since": out["since"], "sessionId": sid})
        assert "suggestions" not in again, again
    finally:
        if browser is not None:
            browser.close()
        app.close()
        m.close()
        d.close()


def test_verify_teeth_lies_to_each_write_and_only_a_server_check_keeps_its_teeth(tmp_path):
    """Issue 28.5: `verify --teeth` also answers each write as the server answered it in the plain run,
    without sending it (the lie).  Text, and a status check, are still yes under the lie: toothless
    ("never checks that the write was kept"); a `server` check is not (no record comes for a request the
    server never saw).  The lie never reaches the server."""
    import xml.etree.ElementTree as ET
    from _harness import RETICLE_PY
    project = tmp_path / "project"
    flows = project / ".reticle" / "flows"
    flows.mkdir(parents=True)
    d = Daemon(tmp_path / "state")
    app = App("fastapi", tmp_path, d, script=False)
    try:
        click = {"target": {"role": "button", "name": "Save"}, "action": "click"}
        checks = {"text-only": saved("/api/save"),
                  "status": {"kind": "allOf", "predicates": [saved("/api/save"), {
                      "kind": "net", "method": "POST", "urlContains": "/api/save", "status": 200}]},
                  "server": {"kind": "allOf", "predicates": [saved("/api/save"), dict(WRITE, urlContains="/api/save")]}}
        for name, until in checks.items():
            (flows / (name + ".json")).write_text(json.dumps({"format": 1, "name": name, "startUrl": app.url + "/",
                                                              "steps": [dict(click, until=until)]}))
        junit, report = tmp_path / "junit.xml", tmp_path / "report.html"
        run = subprocess.run([sys.executable, RETICLE_PY, "verify", "--teeth", "--json", "--junit", str(junit),
                              "--report", str(report)], cwd=str(project), capture_output=True, text=True,
                             env=daemon_env(d.state_dir, RETICLE_PORT=str(d.port)), timeout=400)
        out = json.loads(run.stdout)
        assert out["exitCode"] == 4, run.stdout + run.stderr
        by = {f["name"]: f for f in out["flows"]}
        assert all(f["verified"] == "yes" for f in by.values()), run.stdout
        # a 500 is seen by every check (a failed call in sight): only the lie tells them apart
        assert by["text-only"]["toothless"] == ["POST /api/save (lie)"], by["text-only"]
        assert by["status"]["toothless"] == ["POST /api/save (lie)"], by["status"]
        assert by["server"]["toothless"] == [], by["server"]
        lies = {n: [t for t in f["teeth"] if t["as"] == "lie"] for n, f in by.items()}
        assert all(len(ts) == 1 for ts in lies.values()), lies
        assert lies["server"][0]["verified"] != "yes" and "/api/save" in lies["server"][0]["because"], lies["server"]
        assert all("answer" not in w for f in by.values() for w in f.get("writes") or ()), "the lie's body leaked"
        assert app.rows() == 3, app.rows()   # the three plain runs; neither the 500 nor the lie reached the server
        failures = [c.find("failure") for c in ET.parse(str(junit)).getroot().iter("testcase")
                    if c.find("failure") is not None]
        assert len(failures) == 2, junit.read_text()
        assert all("never checks that the write was kept" in f.get("message") for f in failures)
        html = report.read_text()
        assert html.count("answered as before, never sent (lie)") == 3 and "TOOTHLESS for POST /api/save (lie)" in html
        table = reticle._verify_table(out["flows"])
        assert table.count("TOOTHLESS for POST /api/save (lie)") == 2, table
    finally:
        app.close()
        d.close()


def test_without_the_middleware_a_server_predicate_is_unknown_saying_how_to_install(tmp_path, daemon, mcp):
    app = App("flask", tmp_path, daemon, env={"SHOP_PLAIN": "1"})
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"), timeout_ms=2000)
        assert out["verified"] == "unknown", out
        assert "reticle.wsgi" in out["because"] and "reticle.DjangoMiddleware" in out["because"], out["because"]
        assert app.rows() == 1
        # and where nothing needs it, nothing changes
        out = act(mcp, sid, "Save", {"kind": "net", "method": "POST", "urlContains": "/api/save", "status": 200})
        assert out["verified"] == "yes", out
        assert "server" not in out
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_a_request_made_outside_the_browser_is_never_reported_into_a_tab(tmp_path, daemon, mcp):
    app = App("fastapi", tmp_path, daemon)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))  # the middleware is known to this tab
        since = mcp.ok("reticle_observe", {"window_ms": 1, "sessionId": sid}).get("cursor")
        forged = "%032x.docid.n1" % 12345
        for headers in ({}, {"X-Reticle-Mark": forged}, {"Cookie": "__reticle_mark=" + forged}):
            req = urllib.request.Request(app.url + "/api/boom", data=b"{}", method="POST", headers=headers)
            with pytest.raises(urllib.error.HTTPError):
                urllib.request.urlopen(req, timeout=10)
        time.sleep(1.0)
        events = mcp.ok("reticle_observe", {"since": 0, "filters": ["server"], "max_events": 2000,
                                             "sessionId": sid})["events"]
        assert events and not any(e["data"]["path"] == "/api/boom" for e in events), events
        assert since is None or isinstance(since, (int, float))
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_two_tabs_on_two_apps_see_only_their_own_records(tmp_path, daemon, mcp):
    flask_app = App("flask", tmp_path, daemon)
    fastapi_app = App("fastapi", tmp_path, daemon)
    browsers = []
    try:
        sid_a, b = open_tab(mcp, flask_app)
        browsers.append(b)
        sid_b, b = open_tab(mcp, fastapi_app)
        browsers.append(b)
        assert act(mcp, sid_a, "Save", dict(WRITE, urlContains="/api/save"))["verified"] == "yes"
        assert act(mcp, sid_b, "Save (no-op)", dict(WRITE, urlContains="/api/noop"))["verified"] == "no"
        assert act(mcp, sid_a, "Post form", dict(WRITE, urlContains="/form"))["verified"] == "yes"
        assert act(mcp, sid_b, "Post form", dict(WRITE, urlContains="/form"))["verified"] == "yes"
        for sid, app in ((sid_a, flask_app), (sid_b, fastapi_app)):
            events = mcp.ok("reticle_observe", {"since": 0, "filters": ["server"], "max_events": 2000,
                                                 "sessionId": sid})["events"]
            hosts = {e["data"]["host"] for e in events}
            assert hosts == {app.url.split("//")[1]}, (sid, hosts)
        paths_a = {e["data"]["path"] for e in mcp.ok("reticle_observe", {
            "since": 0, "filters": ["server"], "sessionId": sid_a})["events"]}
        assert "/api/noop" not in paths_a
    finally:
        for b in browsers:
            b.close()
        flask_app.close()
        fastapi_app.close()


# -- a spy page on another port of the same host: reads the navigation's mark, replays it -------------

SPY = """<!doctype html><html><head><title>Spy</title></head><body><iframe name="sink" sandbox></iframe><script>
var VICTIM = '%s', seen = {};
function replay(v) {
  document.cookie = '__reticle_mark=' + v + '; path=/form; max-age=60';  // cookies ignore ports
  for (var i = 0; i < 2; i++)
    fetch(VICTIM + '/form', {method: 'POST', mode: 'no-cors', credentials: 'include', body: 'name=mallory',
                             headers: {'Content-Type': 'application/x-www-form-urlencoded'}}).catch(function () {});
  var f = document.createElement('form');
  f.method = 'post'; f.action = VICTIM + '/form'; f.target = 'sink';
  var field = document.createElement('input');
  field.name = 'name'; field.value = 'mallory';
  f.appendChild(field); document.body.appendChild(f); f.submit(); f.remove();
}
setInterval(function () {
  var m = /(?:^|; )__reticle_mark=([^;]+)/.exec(document.cookie);
  if (!m || seen[m[1]]) return;
  seen[m[1]] = true;
  fetch('/seen?v=' + encodeURIComponent(m[1]));
  [0, 150, 400, 900].forEach(function (ms) { setTimeout(function () { replay(m[1]); }, ms); });
}, 5);
</script></body></html>"""


class SpyServer:
    """The spy's own origin: 127.0.0.1 on another port, serving SPY at every path (at /form it
    reads cookies scoped to the victim's /form), and noting each mark it read (GET /seen)."""

    def __init__(self, victim):
        import http.server
        import threading
        self.seen = []
        spy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.startswith("/seen?v="):
                    spy.seen.append(self.path)
                body = (SPY % victim).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def devtools_port(browser):
    try:
        with open(os.path.join(browser.profile, "DevToolsActivePort")) as fh:
            return fh.read().split()
    except OSError:
        return None


BLANK = dict(WRITE, urlContains="/form")
UNTHROTTLED = ("--disable-background-timer-throttling", "--disable-renderer-backgrounding",
               "--disable-backgrounding-occluded-windows")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_spy_page_on_another_port_plants_no_server_record(framework, tmp_path, daemon, mcp):
    app = App(framework, tmp_path, daemon)
    spy = SpyServer(app.url)
    browser = None
    try:
        before = {s["sessionId"] for s in mcp.ok("reticle_sessions")["sessions"]}
        # two tabs of one browser (one cookie jar): the victim app, and the spy's page opened beside it
        browser = Browser(app.url + "/", extra_args=UNTHROTTLED)
        devtools = wait_until(lambda: devtools_port(browser), 20, what="Chromium's DevTools port")
        urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/json/new?%s/form" % (
            devtools[0], spy.url), method="PUT"), timeout=10).close()
        sid = wait_until(lambda: [s["sessionId"] for s in mcp.ok("reticle_sessions")["sessions"]
                                  if s["sessionId"] not in before and s["url"].startswith(app.url)],
                         20, what="the tab to connect")[0]
        act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))  # the middleware is known to this tab
        rows = app.rows()
        # the empty save the server refused: the spy reads its mark and posts a real write with it
        out = act(mcp, sid, "Send blank", BLANK)
        wait_until(lambda: spy.seen and app.rows() > rows, 15, what="the spy to replay the mark")
        time.sleep(2.5)  # the spy's last replays and their records
        assert out["verified"] != "yes", out
        again = mcp.ok("reticle_assert", {"predicate": BLANK, "since": out["since"], "sessionId": sid,
                                          "detail": "full"})
        assert again["verified"] != "yes", again
        records = [e["data"] for e in mcp.ok("reticle_observe", {"since": 0, "filters": ["server"],
                                                                  "max_events": 2000, "sessionId": sid})["events"]]
        posts = [r for r in records if r["method"] == "POST" and r["path"] == "/form"]
        assert [(r["status"], len(r["writes"])) for r in posts] == [(303, 0)], posts  # the victim's own, only
        # the healthy path, with the spy still replaying every mark it reads
        out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "yes", out
        out = act(mcp, sid, "Save (xhr)", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "yes", out
        time.sleep(1.5)  # the spy's replays of the old mark are done: it could only void the next one
        out = act(mcp, sid, "Post form", {"kind": "allOf", "predicates": [
            {"kind": "server", "method": "POST", "urlContains": "/form", "status": 303,
             "writes": {"table": "profile", "op": "insert", "count": 1}},
            {"kind": "server", "method": "GET", "urlContains": "/done", "status": 200}]})
        assert out["verified"] == "yes", (out["because"], out.get("server"))
        time.sleep(2.0)
        records = [e["data"] for e in mcp.ok("reticle_observe", {"since": 0, "filters": ["server"],
                                                                  "max_events": 2000, "sessionId": sid})["events"]]
        posts = [r for r in records if r["method"] == "POST" and r["path"] == "/form"]
        assert [(r["status"], len(r["writes"])) for r in posts] == [(303, 0), (303, 1)], posts
        assert len(spy.seen) >= 2, spy.seen
    finally:
        if browser is not None:
            browser.close()
        spy.close()
        app.close()


# -- the middleware with no daemon, and the daemon's route ------------------------------------------

def plain_wsgi_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


def environ(**headers):
    env = {"REQUEST_METHOD": "POST", "PATH_INFO": "/api/save", "HTTP_HOST": "127.0.0.1:1"}
    env.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
    return env


def test_the_app_runs_normally_with_no_daemon(tmp_path, monkeypatch):
    monkeypatch.setenv("RETICLE_PORT", str(free_port()))  # nothing listens there
    monkeypatch.setenv("RETICLE_TOKEN", "t" * 48)
    app = reticle.wsgi(plain_wsgi_app)
    statuses = []
    # an unmarked request is never queued and starts nothing
    assert b"".join(app(environ(), lambda s, h: statuses.append(s))) == b"ok"
    assert app.reticle_reporter.queue.qsize() == 0 and app.reticle_reporter._thread is None
    # marked ones are answered at once; their records are dropped and counted, never raised
    for n in range(3):
        assert b"".join(app(environ(**{"X-Reticle-Mark": "%032x.d.n%d" % (1, n)}),
                            lambda s, h: statuses.append(s))) == b"ok"
    assert statuses == ["200 OK"] * 4
    wait_until(lambda: app.reticle_reporter.dropped_total >= 3, 10, what="the records to be dropped")
    assert "did not answer" in app.reticle_reporter.last_error


def redirecting_wsgi_app(environ, start_response):
    start_response("303 See Other", [("Location", environ["HTTP_X_TO"])])
    return [b""]


async def redirecting_asgi_app(scope, receive, send):
    to = dict(scope["headers"])[b"x-to"]
    await send({"type": "http.response.start", "status": 303, "headers": [(b"location", to)]})
    await send({"type": "http.response.body", "body": b""})


def asgi_call(app, headers):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)
    scope = {"type": "http", "method": "POST", "path": "/form", "headers": [
        (k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(app(scope, receive, send))
    return [(k.decode(), v.decode()) for k, v in sent[0]["headers"]]


def test_the_middleware_names_the_sender_and_carries_a_navigations_mark_across_its_redirect():
    """Who sent a marked request as the browser says (Sec-Fetch-Site; else Origin, else Referer's
    origin) goes into its record; a navigation marked by cookie that redirects on its own host gets
    its mark again in an HttpOnly cookie scoped to where it leads, any other answer to it removes
    the spent mark; a header mark sets no cookie."""
    mark = "%032x" % 5
    wsgi_app, asgi_app = reticle.wsgi(redirecting_wsgi_app), reticle.asgi(redirecting_asgi_app)
    records = []
    wsgi_app.reticle_reporter.put = records.append
    asgi_app.reticle_reporter.put = records.append

    def wsgi_call(headers):
        got = []
        env = environ(**headers)
        env["PATH_INFO"] = "/form"
        b"".join(wsgi_app(env, lambda status, hs: got.extend(hs)))
        return got
    cookie = "sid=1; __reticle_mark=" + mark
    for call in (wsgi_call, lambda h: asgi_call(asgi_app, h)):
        del records[:]
        out = call({"Host": "127.0.0.1:1", "Cookie": cookie, "Sec-Fetch-Site": "same-origin", "X-To": "/done?x=1"})
        assert ("Set-Cookie", "__reticle_mark=%s; Path=/done; Max-Age=10; SameSite=Strict; HttpOnly" % mark) in [
            (k.title(), v) for k, v in out], out
        assert records[-1]["site"] == "same-origin" and records[-1]["via"] == "cookie"
        out = call({"Host": "127.0.0.1:1", "Cookie": cookie, "Referer": "http://127.0.0.1:1/page?q=1",
                    "X-To": "http://127.0.0.1:1/a;b/c"})
        assert ("Set-Cookie", "__reticle_mark=%s; Path=/; Max-Age=10; SameSite=Strict; HttpOnly" % mark) in [
            (k.title(), v) for k, v in out], out  # a path a cookie attribute could misread: the root
        assert (records[-1]["site"], records[-1]["from"]) == (None, "http://127.0.0.1:1")
        # a page on another port replaying a mark it read: its answers neither carry the mark on nor clear
        # it, so they cannot void (or plant) the cookie the tab's own redirect carries to the same path
        for sender in ({"Sec-Fetch-Site": "same-site", "X-To": "/done"}, {"Sec-Fetch-Site": "cross-site", "X-To": "http://127.0.0.1:2/"},
                       {"Referer": "http://127.0.0.1:9/spy?q=1", "X-To": "/done"}, {"Origin": "http://127.0.0.1:9", "X-To": "http://127.0.0.1:2/"}):
            out = call(dict(sender, Host="127.0.0.1:1", Cookie=cookie))
            assert not [k for k, _ in out if k.lower() == "set-cookie"], (sender, out)
        # a redirect to another host, or any other answer: the spent mark is removed from the request's path
        out = call({"Host": "127.0.0.1:1", "Cookie": cookie, "X-To": "http://127.0.0.1:2/done"})
        assert [v for k, v in out if k.lower() == "set-cookie"] == [
            "__reticle_mark=; Path=/form; Max-Age=0; SameSite=Strict"], out
        # a header mark sets no cookie
        out = call({"Host": "127.0.0.1:1", "X-Reticle-Mark": mark, "X-To": "/done", "Origin": "http://127.0.0.1:1"})
        assert not [k for k, _ in out if k.lower() == "set-cookie"], out
        assert records[-1]["from"] == "http://127.0.0.1:1" and len(records) == 8


def test_a_real_app_with_no_daemon_serves_and_writes(tmp_path):
    app = App("django", tmp_path, daemon=None)
    try:
        for mark in ("", "%032x.d.n1" % 7):
            req = urllib.request.Request(app.url + "/api/save", data=b"{}", method="POST",
                                         headers={"X-Reticle-Mark": mark} if mark else {})
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status == 200
        assert app.rows() == 2
    finally:
        app.close()
    assert "Traceback" not in app.log()


# -- the middleware adds the script tag (issue 27 #2) ------------------------------------------------

PAGE_HTML = "<!doctype html><html><head><title>t</title></head><body>hi</body></html>"


def flask_pages():
    import flask
    app = flask.Flask("pages")
    app.get("/page", endpoint="page")(lambda: PAGE_HTML)
    app.get("/tagged", endpoint="tagged")(lambda: PAGE_HTML.replace("</head>", '<script src="/x/reticle.js"></script>'
                                                                                 "</head>"))
    app.get("/json", endpoint="json")(lambda: {"html": "</head>"})
    app.get("/gzip", endpoint="gzip")(lambda: flask.Response(PAGE_HTML, headers={"Content-Encoding": "gzip"}))
    app.get("/stream", endpoint="stream")(lambda: flask.Response(iter(["<html><head>", "</head><body>", "x</body>"]),
                                                                 mimetype="text/html"))
    return app


def test_wsgi_inject_adds_the_tag_to_whole_html_pages_only(monkeypatch):
    monkeypatch.setenv("RETICLE_PORT", "4517")
    plain = flask_pages().test_client()
    app = flask_pages()
    app.wsgi_app = reticle.wsgi(app.wsgi_app, inject=True)
    client = app.test_client()
    tag = b'<script src="http://127.0.0.1:4517/reticle.js"></script>'
    resp = client.get("/page")
    assert resp.status_code == 200 and resp.data == PAGE_HTML.encode().replace(b"</head>", tag + b"</head>")
    assert int(resp.headers["Content-Length"]) == len(resp.data)
    for path in ("/tagged", "/json", "/gzip", "/stream"):  # has one; not HTML; compressed; a stream
        got, want = client.get(path), plain.get(path)
        assert (got.data, got.headers.get("Content-Length")) == (want.data, want.headers.get("Content-Length")), path
    opt_in = flask_pages()
    opt_in.wsgi_app = reticle.wsgi(opt_in.wsgi_app)
    assert opt_in.test_client().get("/page").data == PAGE_HTML.encode()  # inject is opt-in for wsgi()


def run_asgi(app, path):
    """One GET through an ASGI app's own interface -> (start message, body parts)."""
    sent = []
    asked = []

    async def receive():
        asked.append(1)
        if len(asked) > 1:  # the client stays connected until the app has answered
            await asyncio.Event().wait()
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1:8000")], "client": ("127.0.0.1", 5), "server": ("127.0.0.1", 8000)}
    asyncio.run(app(scope, receive, send))
    return sent[0], [m.get("body", b"") for m in sent[1:]]


def test_asgi_inject_adds_the_tag_to_whole_html_pages_only(monkeypatch):
    import fastapi
    from fastapi.responses import HTMLResponse, StreamingResponse
    monkeypatch.setenv("RETICLE_PORT", "4518")
    api = fastapi.FastAPI()
    api.get("/page", response_class=HTMLResponse)(lambda: PAGE_HTML)
    api.get("/json")(lambda: {"html": "</head>"})
    api.get("/stream")(lambda: StreamingResponse(iter([b"<html><head>", b"</head><body>x</body>"]),
                                                 media_type="text/html"))
    app = reticle.asgi(api, inject=True)
    start, body = run_asgi(app, "/page")
    page = b"".join(body)
    assert page == PAGE_HTML.encode().replace(b"</head>", b'<script src="http://127.0.0.1:4518/reticle.js">'
                                              b"</script></head>")
    assert dict(start["headers"])[b"content-length"] == str(len(page)).encode()
    assert run_asgi(app, "/json")[1] == run_asgi(api, "/json")[1]
    assert run_asgi(app, "/stream")[1] == run_asgi(api, "/stream")[1]  # streamed as it came, part by part
    assert b"".join(run_asgi(reticle.asgi(api), "/page")[1]) == PAGE_HTML.encode()  # opt-in


class Squatter:
    """A plain socket server on a loopback port (not Reticle): it keeps every byte it is sent and answers
    each request 200 with a JSON `proof` of the right shape, the most tempting lie it can tell."""

    def __init__(self):
        import socket
        import threading
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(3)
                data = b""
                try:
                    while True:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                        self.received += chunk
                        while b"\r\n\r\n" in data:
                            head, _, data = data.partition(b"\r\n\r\n")
                            length = [int(x.split(b":")[1]) for x in head.split(b"\r\n")
                                      if x.lower().startswith(b"content-length:")]
                            data = data[length[0]:] if length else data
                            self.requests += 1
                            body = json.dumps({"proof": "ab" * 32}).encode()
                            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                                         b"\r\n%s" % (len(body), body))
                except OSError:
                    pass

    def close(self):
        self.sock.close()


class WarningRecords(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


def test_a_squatting_listener_never_receives_the_token_and_the_real_daemon_does(tmp_path, monkeypatch, daemon):
    """Issue 27 #4: a process that holds RETICLE_PORT while the daemon is away is asked for a proof
    (a challenge only the daemon that knows the token answers) before the token is sent: it gets
    no token, the records are dropped and counted, and the app's log says so once.  The real daemon
    proves itself and gets the records."""
    squatter = Squatter()
    warnings = WarningRecords()
    logging.getLogger("reticle.server").addHandler(warnings)
    try:
        monkeypatch.setenv("RETICLE_STATE_DIR", daemon.state_dir)
        monkeypatch.delenv("RETICLE_TOKEN", raising=False)
        monkeypatch.setenv("RETICLE_PORT", str(squatter.port))
        app = reticle.wsgi(plain_wsgi_app)
        for n in range(3):
            b"".join(app(environ(**{"X-Reticle-Mark": "%032x.d.n%d" % (1, n)}), lambda s, h: None))
        reporter = app.reticle_reporter
        wait_until(lambda: squatter.requests >= 1, 15, what="the reporter to reach the squatter")
        time.sleep(0.5)
        assert daemon.token().encode() not in squatter.received and b"Bearer" not in squatter.received
        wait_until(lambda: getattr(reporter, "unproven", 0) >= 3, 15, what="the records to be dropped as unproven")
        b"".join(app(environ(**{"X-Reticle-Mark": "%032x.d.n9" % 1}), lambda s, h: None))
        wait_until(lambda: reporter.unproven >= 4, 15, what="a later batch dropped too")
        assert squatter.requests >= 2 and b"GET /server-records?challenge=" in squatter.received
        assert daemon.token().encode() not in squatter.received and b"Bearer" not in squatter.received
        assert b"POST" not in squatter.received
        assert reporter.dropped_total >= 4 and reporter.sent == 0, reporter.last_error
        said = [m for m in warnings.records if "is not the Reticle daemon" in m]
        assert len(said) == 1 and str(squatter.port) in said[0], warnings.records
        monkeypatch.setenv("RETICLE_PORT", str(daemon.port))  # the real daemon: proven, records sent
        real = reticle.wsgi(plain_wsgi_app)
        b"".join(real(environ(**{"X-Reticle-Mark": "%032x.d.n1" % 2}), lambda s, h: None))
        wait_until(lambda: real.reticle_reporter.sent >= 1, 15, what="the daemon to take the record")
        assert real.reticle_reporter.unproven == 0
    finally:
        logging.getLogger("reticle.server").removeHandler(warnings)
        squatter.close()


def post_records(daemon, body, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(daemon.url + "/server-records", data=json.dumps(body).encode(), method="POST",
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_records_from_a_process_that_cannot_authenticate_are_refused(daemon):
    rec = {"mark": "%032x" % 1, "method": "POST", "path": "/x", "status": 200}
    status, body = post_records(daemon, {"records": [rec]})
    assert status == 403 and "pairing token" in body["detail"], body
    status, body = post_records(daemon, {"records": [rec]}, token="not-the-token")
    assert status == 403, body
    status, body = post_records(daemon, {"records": "nope"}, token=daemon.token())
    assert status == 400 and "records" in body["detail"], body
    status, body = post_records(daemon, {"records": [rec, {"mark": "bad"}]}, token=daemon.token())
    assert status == 200 and body == {"stitched": 0, "tied": 0, "unmatched": 1, "invalid": 1, "refused": 0}, body
    assert daemon.status()["running"] is True


# -- the grammar and the pure judge, from tables ----------------------------------------------------

@pytest.mark.parametrize("raw, fragment", [
    ({"kind": "server", "writes": {"tables": "x"}}, "unknown field writes.tables"),
    ({"kind": "server", "writes": {"op": "upsert"}}, "writes/op"),
    ({"kind": "server", "writes": {"count": 1, "min": 1}}, "count or min"),
    ({"kind": "server", "exception": "yes"}, "exception"),
    ({"kind": "server", "rows": 1}, "unknown field rows"),
])
def test_server_predicate_errors_name_its_fields(raw, fragment):
    with pytest.raises(reticle.PredicateError) as err:
        reticle.parse_predicate(raw)
    assert fragment in err.value.error and "writes" in err.value.error and "committed" in err.value.error


def test_the_predicates_resource_documents_the_server_kind():
    doc = reticle._predicate_grammar_doc()["kinds"]["server"]
    assert set(doc["schema"]["properties"]) >= {"method", "urlContains", "status", "exception", "logged", "writes",
                                                "committed", "count"}
    reticle.parse_predicate(doc["example"])
    assert "server{" in reticle._PREDICATE_DIGEST


def record(**kw):
    base = {"method": "POST", "path": "/api/save", "status": 200, "view": "save", "exception": None,
            "logged": [], "writes": []}
    base.update(kw)
    return base


INSERT = {"op": "insert", "table": "profile", "rows": 1, "committed": True}
ROLLED = dict(INSERT, committed=False)
NOOP_UPDATE = {"op": "update", "table": "profile", "rows": 0, "committed": True}


@pytest.mark.parametrize("rec, pred, matches", [
    (record(writes=[INSERT]), {"writes": {"table": "profile"}}, True),
    (record(writes=[INSERT]), {"writes": {"table": "PROFILE", "op": "insert", "count": 1}}, True),
    (record(writes=[INSERT]), {"writes": {"op": "update"}}, False),
    (record(writes=[ROLLED]), {"writes": {"table": "profile"}}, False),             # rolled back: no write
    (record(writes=[ROLLED]), {"writes": {"table": "profile"}, "committed": False}, True),
    (record(writes=[NOOP_UPDATE]), {"writes": {"table": "profile"}}, False),        # 0 rows: no write
    (record(writes=[dict(INSERT, rows=None)]), {"writes": {"count": 1}}, True),    # no row count: counts 1
    (record(writes=[INSERT, INSERT]), {"writes": {"min": 2}}, True),
    (record(writes=[INSERT]), {"committed": True}, True),
    (record(writes=[ROLLED]), {"committed": True}, False),
    (record(), {"exception": False, "logged": False}, True),
    (record(exception={"type": "ValueError"}), {"exception": False}, False),
    (record(logged=[{"logger": "x"}]), {"logged": True}, True),
    (record(), {"method": "get"}, False),
    (record(), {"method": "post", "urlContains": "/api/", "status": 200}, True),
    (record(watched=[]), {"writes": {"count": 0}}, False),                          # nobody watched: not 0
    (record(watched=[]), {"committed": False}, False),
    (record(watched=[]), {"status": 200}, True),
    (record(watched=["sqlite3"]), {"writes": {"count": 0}}, True),
    (record(writes=[dict(INSERT, op="update", keys=[3])]), {"writes": {"op": "update", "key": 3}}, True),
    (record(writes=[dict(INSERT, op="update", keys=[2])]), {"writes": {"op": "update", "key": 3}}, False),
    (record(writes=[dict(INSERT, op="delete", keys=[4, 5], rows=2)]), {"writes": {"key": ["5", 4]}}, True),
    (record(writes=[dict(INSERT, op="delete", keys=[4, 5], rows=2)]), {"writes": {"key": 4}}, False),
    (record(writes=[dict(INSERT, op="update")]), {"writes": {"key": 3}}, False),     # no keys: not these
])
def test_the_server_judge_from_a_table(rec, pred, matches):
    p = reticle.parse_predicate(dict(pred, kind="server"))
    assert reticle._server_matches(rec, p) is matches


def window(*records):
    return [{"t": float(i), "type": "server.request", "data": r} for i, r in enumerate(records)]


def test_server_contradictions_from_a_table():
    boom = record(status=200, exception={"type": "ValueError", "message": "m", "frames": ["views.py:42 save"]})
    logged = record(logged=[{"logger": "app", "level": "ERROR", "message": "oops"}])
    text = {"kind": "text", "contains": "Saved"}
    assert [c["kind"] for c in reticle._server_contradictions(window(boom, logged), text)] == [
        "server-exception", "server-logged-error"]
    assert "views.py:42 save" in reticle._server_contradictions(window(boom), text)[0]["counter"]
    assert reticle._server_contradictions(window(record(writes=[INSERT])), text) == []
    asks = reticle.parse_predicate({"kind": "server", "exception": True})
    assert reticle._server_contradictions(window(boom), asks) == []
    negated = reticle.parse_predicate({"kind": "not", "predicate": asks})
    assert len(reticle._server_contradictions(window(boom), negated)) == 1
    assert reticle._server_summary(window(record(writes=[INSERT]))) == [
        "POST /api/save → 200, view save, 1 write (insert profile ×1), no exception"]
    assert reticle._server_summary([]) is None


@pytest.mark.parametrize("sql, op, table", [
    ('INSERT INTO "profile" ("name") VALUES (%s)', "insert", "profile"),
    ("insert or replace into profile values (1)", "insert", "profile"),
    ("UPDATE `shop`.`profile` SET name = ?", "update", "shop.profile"),
    ("/* hint */ DELETE FROM profile WHERE id = 1", "delete", "profile"),
    ("SELECT * FROM profile", None, None),
    ("SAVEPOINT s1", None, None),
])
def test_statements_are_named_by_kind_and_table(sql, op, table):
    w = reticle._sql_write(sql)
    assert (w and w["op"], w and w["table"]) == (op, table)


def test_the_app_frames_skip_installed_packages_and_name_file_and_line():
    try:
        json.loads("{")  # raises inside the standard library
    except ValueError as exc:
        frames = reticle._exception_record(exc)["frames"]
    assert frames and frames[0].startswith("test_server.py:") or frames[0].startswith("tests/test_server.py:")
    assert all("json" not in f.split(":")[0] for f in frames), frames


@pytest.mark.parametrize("params", [False, True])
def test_parameter_values_are_recorded_only_when_asked_and_secret_names_are_redacted(tmp_path, params):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = reticle.watch_sqlalchemy(sqlalchemy.create_engine("sqlite:///%s" % (tmp_path / "p.sqlite3")))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE account (name TEXT, password TEXT)")
    rec = reticle._begin_record("%032x" % 3, "POST", "/signup", "127.0.0.1:1", "header", params)
    token = reticle._current_request().set(rec)
    try:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("INSERT INTO account VALUES (:name, :password)"),
                         {"name": "ada", "password": "hunter2"})
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("DELETE FROM account"))
            conn.rollback()
    finally:
        reticle._current_request().reset(token)
    out = reticle._finish_record(rec)
    assert [(w["op"], w["table"], w["rows"], w["committed"]) for w in out["writes"]] == [
        ("insert", "account", 1, True), ("delete", "account", 1, False)]
    assert "hunter2" not in json.dumps(out) and "_params" not in out
    if params:
        assert "'ada'" in out["writes"][0]["params"], out["writes"][0]
    else:
        assert "params" not in out["writes"][0] and "'ada'" not in json.dumps(out)


def test_a_bind_named_otherwise_is_as_secret_as_the_column_it_goes_to(tmp_path):
    """params=True through a real SQLAlchemy engine: `password = :pw` and an INSERT's (api_key) VALUES (:k)
    keep their values out of the record, though the binds' own names say nothing secret."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = reticle.watch_sqlalchemy(sqlalchemy.create_engine("sqlite:///%s" % (tmp_path / "b.sqlite3")))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE account (id INTEGER PRIMARY KEY, name TEXT, password TEXT, api_key TEXT)")
        conn.exec_driver_sql("INSERT INTO account (name) VALUES ('ada')")
    rec = reticle._begin_record("%032x" % 5, "POST", "/account/1", "127.0.0.1:1", "header", True)
    token = reticle._current_request().set(rec)
    try:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("UPDATE account SET password = :pw WHERE id = :id"), {"pw": "hunter2", "id": 1})
            conn.execute(sqlalchemy.text("INSERT INTO account (name, api_key) VALUES (:n, :k)"),
                         {"n": "bob", "k": "k-998877"})
    finally:
        reticle._current_request().reset(token)
    out = reticle._finish_record(rec)
    text = json.dumps(out)
    assert "hunter2" not in text and "k-998877" not in text, text
    assert [w["params"] for w in out["writes"]] == ["pw=[redacted], id=1", "n='bob', k=[redacted]"], out["writes"]


LITERAL_SQL = [
    "INSERT INTO users (name, password, api_key) VALUES ('bob', 'hunter2-Qx', 'k-998877'), ('al', 'pw-77', 'k-2')",
    "UPDATE users SET password_hash = 'pbkdf2_sha256$600000$s4lt$h4sh', name = 'bob' WHERE id = 31337",
    "insert or replace into users values ('bob', 'hunter2-Qx', 4111111111111111, -12.5e3, X'0fab')",
    "UPDATE users SET note = E'it''s bob', n = 0x1f WHERE users.id = 31337",
]
LITERALS = ("bob", "hunter2", "k-998877", "pw-77", "pbkdf2", "31337", "4111", "12.5", "0fab", "0x1f", "it''s")


@pytest.mark.parametrize("sql", LITERAL_SQL)
def test_sql_literals_are_never_recorded_unless_parameters_are(sql):
    w = reticle._sql_write(sql)
    assert not [v for v in LITERALS if v in w["sql"]], w["sql"]
    assert w["sql"].count("?") >= 2 and w["table"] == "users"
    kept = reticle._sql_write(sql, True)["sql"]     # parameter recording on: values kept, named secret columns not
    assert "password" not in sql or "hunter2" not in kept and "pbkdf2" not in kept and "k-998877" not in kept, kept
    assert "bob" in kept, kept


@pytest.mark.parametrize("params", [False, True])
def test_literal_sql_through_a_real_engine_reaches_no_record(tmp_path, params):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = reticle.watch_sqlalchemy(sqlalchemy.create_engine("sqlite:///%s" % (tmp_path / "l.sqlite3")))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, password TEXT, "
                             "api_key TEXT, password_hash TEXT)")
    rec = reticle._begin_record("%032x" % 4, "POST", "/signup", "127.0.0.1:1", "header", params)
    token = reticle._current_request().set(rec)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO users (name, password, api_key) VALUES ('bob', 'hunter2-Qx', 'k-9')")
            conn.exec_driver_sql("UPDATE users SET password_hash = 'pbkdf2$s4lt' WHERE id = 1")
    finally:
        reticle._current_request().reset(token)
    out = json.dumps(reticle._finish_record(rec))
    assert "hunter2" not in out and "pbkdf2" not in out and "k-9" not in out, out
    assert ("'bob'" in out) is params, out
    sql = 'INSERT INTO "app_contact" ("name", "v2") VALUES (%s, %s) RETURNING "app_contact"."id"'
    assert reticle._sql_write(sql)["sql"] == sql    # placeholders and identifiers survive
    assert reticle._sql_write("UPDATE t2 SET a = $1, b = :b, c = ? WHERE t2.id = %(id)s")["sql"] == \
        "UPDATE t2 SET a = $1, b = :b, c = ? WHERE t2.id = %(id)s"


def test_savepoints_through_real_drivers_undo_only_the_writes_made_inside_them(tmp_path):
    """SQLAlchemy's begin_nested and raw sqlite3 SAVEPOINT / ROLLBACK TO / RELEASE: a write rolled
    back to a savepoint is not kept and is no rollback of the request's transaction; one released
    with its savepoint commits with the transaction; one in a transaction rolled back is."""
    import sqlite3
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = reticle.watch_sqlalchemy(sqlalchemy.create_engine("sqlite:///%s" % (tmp_path / "s.sqlite3")))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")

    def recorded(work):
        rec = reticle._begin_record("%032x" % 5, "POST", "/save", "127.0.0.1:1", "header")
        token = reticle._current_request().set(rec)
        try:
            work()
        finally:
            reticle._current_request().reset(token)
        return reticle._clean_server_record(dict(reticle._finish_record(rec), mark="%032x" % 5))

    def nested():
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t (name) VALUES ('kept')")
            inner = conn.begin_nested()
            conn.exec_driver_sql("INSERT INTO t (name) VALUES ('undone')")
            inner.rollback()
            with conn.begin_nested():
                conn.exec_driver_sql("UPDATE t SET name = 'released' WHERE id = 1")

    raw = reticle.watch_sqlite3(sqlite3.connect(str(tmp_path / "r.sqlite3"), isolation_level=None))
    raw.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")

    def by_hand(end):
        def work():
            raw.execute("BEGIN")
            raw.execute("INSERT INTO t (name) VALUES ('kept')")
            raw.execute("SAVEPOINT a")
            raw.execute("INSERT INTO t (name) VALUES ('undone')")
            raw.execute("ROLLBACK TO SAVEPOINT a")
            raw.execute("RELEASE SAVEPOINT a")
            raw.execute(end)
        return work

    for rec, kept in ((recorded(nested), True), (recorded(by_hand("COMMIT")), True),
                      (recorded(by_hand("ROLLBACK")), False)):
        fates = [(w["op"], w["committed"], w["note"]) for w in rec["writes"]]
        window = [{"type": "server.request", "doc": "d", "data": dict(rec, documentId="d", requestId="1")}]
        found = [c["kind"] for c in reticle._server_contradictions(window, {"kind": "text", "contains": "x"})]
        assert ("insert", False, reticle._SAVEPOINT_NOTE) in fates, fates
        if kept:
            assert fates[0] == ("insert", True, None) and found == [], (fates, found)
        else:
            assert fates[0] == ("insert", False, "rolled back") and found == ["server-rolled-back"], (fates, found)
    raw.close()


@pytest.mark.parametrize("sql, params, keys", [
    ("UPDATE contact SET name = ? WHERE id = ?", ("x", 3), [3]),
    ('UPDATE "app_contact" SET "name" = %s WHERE "app_contact"."id" = %s', ["x", 2], [2]),
    ('DELETE FROM "app_contact" WHERE "app_contact"."id" IN (%s, %s)', [4, 5], [4, 5]),
    ("update contact set name = 'a and id = 9 ?' where id = 3", None, [3]),          # expanded by sqlite3's trace
    ("UPDATE contact SET name = 'x?' WHERE contact.id = 'c-1'", None, ["c-1"]),
    ("UPDATE t SET a = ?, b = 'x?' WHERE owner = ? AND id = ?", [1, 7, 8], [8]),
    ("UPDATE t SET a = :a WHERE id = :pk", {"a": "secret", "pk": 9}, [9]),
    ("UPDATE t SET a = $1 WHERE id = $2 AND owner = $3", [1, 7, 8], [7]),
    ("UPDATE t SET a = ? WHERE id = ? OR 1 = 1", [1, 7], None),
    ("UPDATE t SET a = ? WHERE name = ?", [1, 7], None),
    ("UPDATE t SET a = 1 WHERE id = (SELECT max(id) FROM t)", None, None),
    ("INSERT INTO t (id) VALUES (?)", [1], None),
])
def test_a_write_names_its_rows_by_primary_key_and_nothing_else(sql, params, keys):
    rec = reticle._begin_record("%032x" % 5, "POST", "/x", "127.0.0.1:1", "header")
    token = reticle._current_request().set(rec)
    try:
        reticle._note_statement(sql, 1, 1, True, params)
    finally:
        reticle._current_request().reset(token)
    w = reticle._finish_record(rec)["writes"][0] if rec["writes"] else {}
    assert w.get("keys") == keys, (sql, w)
    assert "secret" not in json.dumps(w) and "params" not in w


@pytest.mark.parametrize("framework", ("django", "fastapi", "sqlite3"))
def test_an_update_to_the_wrong_row_is_no_when_the_key_is_asserted(framework, tmp_path, daemon, mcp):
    app = App(framework, tmp_path, daemon)
    browser = None
    renamed = {"kind": "server", "method": "POST", "urlContains": "/rename",
               "writes": {"table": "contact", "op": "update", "key": 3, "count": 1}}
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(2):
            out = act(mcp, sid, "Rename contact 3", renamed)
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
            assert any("update contact ×1 [key 3]" in line for line in out["server"]), out["server"]
            out = act(mcp, sid, "Rename contact 3 (wrong row)", renamed)
            assert out["verified"] == "no", (n, out["because"], out.get("server"))
            assert "[key 2]" in out["because"], out["because"]
    finally:
        if browser is not None:
            browser.close()
        app.close()


@pytest.mark.parametrize("pred, contradicted", [
    ({"kind": "text", "contains": "Saved"}, True),
    ({"kind": "net", "urlContains": "/api/boom", "status": 500}, False),   # the failure it asks for
    ({"kind": "net", "urlContains": "/api/boom", "ok": False}, False),
    ({"kind": "net", "urlContains": "/api/other", "status": 500}, True),
    ({"kind": "server", "status": 500}, False),
    ({"kind": "server", "exception": True}, False),
    ({"kind": "not", "predicate": {"kind": "net", "status": 500}}, True),
])
def test_a_server_failure_the_predicate_asks_for_is_no_contradiction(pred, contradicted):
    boom = record(path="/api/boom", status=500, exception={"type": "ValueError", "message": "m", "frames": []})
    found = reticle._server_contradictions(window(boom), reticle.parse_predicate(pred))
    assert bool(found) is contradicted, found


def test_a_background_request_that_logs_is_not_the_acts_failure():
    logged = dict(record(path="/api/poll", logged=[{"logger": "app", "level": "ERROR", "message": "x"}]),
                  documentId="d1", requestId="m7")  # the id the daemon issued with the request's mark
    events = [{"t": 0.0, "type": "net.pending", "doc": "d1", "data": {
        "requestId": "n7", "serverMark": "m7", "method": "POST", "url": "http://127.0.0.1:1/api/poll"}},
              {"t": 1.0, "type": "server.request", "data": logged}]
    text = {"kind": "text", "contains": "Saved"}
    assert len(reticle._server_contradictions(events, text)) == 1
    known = reticle._Known([], {}, None, "http://127.0.0.1:1", ("POST http://127.0.0.1:1/api/poll",),
                           polled=("POST http://127.0.0.1:1/api/poll",))
    assert reticle._server_contradictions(events, text, known) == []


# -- the bridge's side in-process: the mark, forged events, the cookie's host ---------------------

import tornado.httpclient  # noqa: E402
import tornado.websocket  # noqa: E402
from tornado.testing import AsyncHTTPTestCase, gen_test  # noqa: E402


class MarkTest(AsyncHTTPTestCase):
    TOKEN = "k" * 48

    def setUp(self):
        import tempfile
        self.state = tempfile.TemporaryDirectory(prefix="reticle-server-")
        self.sockets = []
        super().setUp()

    def tearDown(self):
        for s in self.sockets:
            s.close()
        super().tearDown()
        self.state.cleanup()

    def get_app(self):
        self.hub = reticle.Hub(state_dir=self.state.name, port=0, token=self.TOKEN)
        return reticle.make_app(self.hub)

    async def tab(self, sid, mark=True, doc="doc1"):
        req = tornado.httpclient.HTTPRequest("ws://127.0.0.1:%d/reticle" % self.get_http_port(),
                                             headers={"Origin": "http://localhost:5173"})
        conn = await tornado.websocket.websocket_connect(req)
        self.sockets.append(conn)
        hello = {"kind": "hello", "protocolVersion": 1, "sessionId": sid, "url": "http://localhost:5173/",
                 "title": "t", "adapters": [], "documentId": doc}
        if mark:
            hello["serverMark"] = True
        await conn.write_message(json.dumps(hello))
        return conn

    async def post(self, records):
        resp = await self.http_client.fetch(self.get_url("/server-records"), method="POST", raise_error=False,
                                            body=json.dumps({"records": records}),
                                            headers={"Authorization": "Bearer " + self.TOKEN,
                                                     "Content-Type": "application/json"})
        return resp.code, json.loads(resp.body)

    @gen_test
    async def test_each_tab_gets_its_own_mark_and_only_its_records(self):
        a, b = await self.tab("s-a"), await self.tab("s-b")
        mark_a = json.loads(await a.read_message())
        mark_b = json.loads(await b.read_message())
        assert mark_a["kind"] == "mark" and mark_a["header"] == "X-Reticle-Mark" and mark_a["reset"] is True
        (id_a, secret_a), (_, secret_b) = mark_a["marks"][0], mark_b["marks"][0]
        assert secret_a != secret_b and len(secret_a) == 32
        rec = {"method": "POST", "path": "/api/save", "status": 200, "host": "localhost:5173", "via": "header"}
        # the ids a sender appends are ignored: a record lands under the document and id the mark was issued for
        code, body = await self.post([dict(rec, mark=secret_a + ".otherdoc.n3"),
                                      dict(rec, mark=secret_b, path="/b"),
                                      dict(rec, mark="%032x" % 9)])
        assert (code, body) == (200, {"stitched": 2, "tied": 0, "unmatched": 1, "invalid": 0, "refused": 0})
        sa, sb = self.hub.bridge.get("s-a"), self.hub.bridge.get("s-b")
        got_a = reticle._server_records(sa.window(0))
        assert [(r["path"], r["documentId"], r["requestId"]) for r in got_a] == [("/api/save", "doc1", id_a)]
        assert [r["path"] for r in reticle._server_records(sb.window(0))] == ["/b"]

    @gen_test
    async def test_the_middlewares_record_takes_the_place_of_spans_that_came_first(self):
        """A Flask app under the middleware and stock OpenTelemetry both: on a loaded machine the exporter's
        spans can reach the daemon before the middleware's record and spend the mark, and the tab read
        "commit unknown" from them (a false unknown seen in a loaded run). The middleware's record, which
        sees commits, takes their place under the same id; late spans of that trace no longer join it."""
        conn = await self.tab("s-both")
        (rid, secret), = json.loads(await conn.read_message())["marks"][:1]
        attrs = lambda **kv: [{"key": k.replace("_", "."), "value": {"stringValue": str(v)} if isinstance(v, str)  # noqa: E731
                                else {"intValue": str(v)}} for k, v in kv.items()]
        spans = {"resourceSpans": [{"resource": {"attributes": attrs(service_name="shop",
                                                                      telemetry_sdk_language="python")},
                                    "scopeSpans": [{"scope": {"name": "opentelemetry.instrumentation.flask"}, "spans": [
            {"traceId": secret, "spanId": "aa" * 8, "parentSpanId": "bb" * 8, "name": "POST /api/save", "kind": 2,
             "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000050000000",
             "attributes": attrs(**{"http_request_method": "POST", "url_path": "/api/save",
                                    "http_response_status_code": 200, "server_address": "localhost:5173"})},
            {"traceId": secret, "spanId": "cc" * 8, "parentSpanId": "aa" * 8, "name": "INSERT", "kind": 3,
             "startTimeUnixNano": "1700000000010000000", "endTimeUnixNano": "1700000000020000000",
             "attributes": attrs(db_system="sqlite", db_statement="INSERT INTO profile (name) VALUES (?)")}]}]}]}
        resp = await self.http_client.fetch(self.get_url("/v1/traces"), method="POST", body=json.dumps(spans),
                                            headers={"Authorization": "Bearer " + self.TOKEN,
                                                     "Content-Type": "application/json"})
        assert resp.code == 200
        session = self.hub.bridge.get("s-both")
        for _ in range(100):
            if reticle._server_records(session.window(0)):
                break
            await asyncio.sleep(0.02)
        first = reticle._server_records(session.window(0))
        assert [(r.get("source"), [w["committed"] for w in r["writes"]]) for r in first] == [("otel", [None])], first
        code, body = await self.post([{"method": "POST", "path": "/api/save", "status": 200, "host": "localhost:5173",
                                       "via": "header", "mark": secret, "watched": ["sqlalchemy"],
                                       "writes": [{"op": "insert", "table": "profile", "rows": 1, "committed": True}]}])
        assert (code, body["stitched"]) == (200, 1), body
        got = reticle._server_records(session.window(0))
        assert [(r.get("source"), r["requestId"], [w["committed"] for w in r["writes"]]) for r in got] == [
            (None, rid, [True])], got

    @gen_test
    async def test_a_cookie_mark_counts_only_from_the_tabs_own_origin(self):
        a = await self.tab("s-c")
        marks = json.loads(await a.read_message())["marks"]
        rec = {"method": "GET", "path": "/done", "status": 200, "via": "cookie", "site": "same-origin",
               "mark": marks[0][1]}
        code, body = await self.post([dict(rec, host="127.0.0.1:9999"), dict(rec, host="LOCALHOST:5173")])
        assert body == {"stitched": 1, "tied": 0, "unmatched": 0, "invalid": 0, "refused": 1}, body

    @gen_test
    async def test_a_mark_counts_once_only_from_the_tabs_own_document_and_changes_with_it(self):
        a = await self.tab("s-f")
        first = json.loads(await a.read_message())
        secrets_ = [m[1] for m in first["marks"]]
        assert len(set(secrets_)) == len(secrets_) == reticle.SERVER_TICKETS
        rec = {"method": "POST", "path": "/form", "status": 200, "host": "localhost:5173", "via": "cookie"}
        code, body = await self.post([
            # another port of the same host replayed it: the browser says same-site, or names that origin
            dict(rec, mark=secrets_[0], site="same-site"), dict(rec, mark=secrets_[0], site="cross-site"),
            dict(rec, mark=secrets_[0], **{"from": "http://localhost:9999"}),
            dict(rec, mark=secrets_[0], **{"from": "null"}),
            dict(rec, mark=secrets_[0]),  # a cookie mark whose sender nobody names
            dict(rec, mark=secrets_[0], site="same-origin"),  # the tab's own navigation: taken
            dict(rec, mark=secrets_[0], site="same-origin"),  # and only once
            dict(rec, mark=secrets_[1], via="header", **{"from": "http://localhost:5173"}),
            dict(rec, mark=secrets_[2], via="header")])  # a header no other origin can read or send
        assert body == {"stitched": 3, "tied": 0, "unmatched": 1, "invalid": 0, "refused": 5}, body
        assert "POST /form" in self.hub.server_truth["lastRefused"], self.hub.server_truth
        # a navigation that redirects: its mark is good once more, for the request the redirect leads to
        code, body = await self.post([dict(rec, mark=secrets_[4], site="same-origin", status=303),
                                      dict(rec, mark=secrets_[4], site="same-origin", method="GET", path="/done"),
                                      dict(rec, mark=secrets_[4], site="same-origin", method="GET", path="/x")])
        assert body == {"stitched": 2, "tied": 0, "unmatched": 1, "invalid": 0, "refused": 0}, body
        # the page the redirect led to reported first (a WSGI record goes when the body closes): the
        # mark is then good once more for the redirect only, never for another page
        code, body = await self.post([dict(rec, mark=secrets_[5], site="same-origin", method="GET", path="/done"),
                                      dict(rec, mark=secrets_[5], site="same-origin", method="GET", path="/x"),
                                      dict(rec, mark=secrets_[5], site="same-origin", status=303),
                                      dict(rec, mark=secrets_[5], site="same-origin", status=303)])
        assert body == {"stitched": 2, "tied": 0, "unmatched": 2, "invalid": 0, "refused": 0}, body
        landed = [e["data"] for e in self.hub.bridge.get("s-f").window(0) if e["type"] == "server.request"]
        assert [(r["method"], r["status"]) for r in landed[-2:]] == [("GET", 200), ("POST", 303)], landed[-2:]
        assert landed[-1]["requestId"] == landed[-2]["requestId"]
        # a page asks for more, for its own document only
        await a.write_message(json.dumps({"kind": "marks"}))
        more = json.loads(await a.read_message())
        assert more["reset"] is False and not {m[1] for m in more["marks"]} & set(secrets_)
        # a new document gets new marks; the old document's are void once SERVER_TICKET_AFTER_MS pass
        b = await self.tab("s-f", doc="doc2")
        fresh = json.loads(await b.read_message())
        assert not {m[1] for m in fresh["marks"]} & set(secrets_)
        session = self.hub.bridge.get("s-f")
        now = session.clock()
        session.clock = lambda: now + reticle.SERVER_TICKET_AFTER_MS + 1
        self.hub.clock = session.clock
        code, body = await self.post([dict(rec, mark=secrets_[3], site="same-origin"),
                                      dict(rec, mark=fresh["marks"][0][1], site="same-origin")])
        assert body == {"stitched": 1, "tied": 0, "unmatched": 1, "invalid": 0, "refused": 0}, body
        got = reticle._server_records(session.window(0))
        assert [(r["documentId"], r["requestId"]) for r in got][-1] == ("doc2", fresh["marks"][0][0])

    @gen_test
    async def test_a_page_cannot_write_server_records_through_its_socket(self):
        a = await self.tab("s-d", mark=False)
        await a.write_message(json.dumps({"kind": "event", "event": {
            "type": "server.request", "data": {"method": "POST", "path": "/api/save", "status": 200,
                                               "writes": [{"op": "insert", "table": "t", "committed": True}]}}}))
        # nor a watched store's commits (Storage truth), alone or in a frame of plain events
        forged = {"type": "store.commit", "data": {"store": "sqlite /app.db", "changes": [
            {"op": "insert", "table": "notes", "key": {"id": 1}, "values": {"id": 1, "title": "x"}}]}}
        await a.write_message(json.dumps({"kind": "event", "event": forged}))
        await a.write_message(json.dumps({"kind": "events", "events": [
            dict(forged, t=1, documentId="d1"), {"type": "dom.added", "data": {}, "t": 2, "documentId": "d1"}]}))
        await a.write_message(json.dumps({"kind": "event", "event": {"type": "signal", "data": {"name": "x"}}}))
        for _ in range(100):
            s = self.hub.bridge.get("s-d")
            if s is not None and s.window(0, prefix="signal"):
                break
            await asyncio.sleep(0.01)
        assert reticle._server_records(s.window(0)) == [] and s.server_seen == 0
        assert [e for e in s.window(0) if e["type"].startswith("store.")] == []
        assert s.store.blind_spot_counts().get("forged-server-event") == 3
        # and an SDK that does not ask for a mark is sent none
        a2 = await self.tab("s-e", mark=False)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(a2.read_message(), 0.3)


@pytest.mark.parametrize("text, secret", [
    ("login failed: password=hunter2", "hunter2"),
    ("UPDATE users SET password = 'hunter2' WHERE id = 1", "hunter2"),
    ("charge failed for key sk_live_abcdefghijklmnopqrstu", "sk_live_abcdefghijklmnopqrstu"),
    ('upstream said {"api_key": "k-123456"}', "k-123456"),
    ("Authorization: Bearer abcdefghijklmnopq", "abcdefghijklmnopq"),
])
def test_what_the_server_says_is_redacted_as_bodies_are(text, secret):
    assert secret not in reticle._scrub_server(text)
    try:
        raise ValueError(text)
    except ValueError as exc:
        assert secret not in json.dumps(reticle._exception_record(exc))
    assert secret not in json.dumps(reticle._sql_write("INSERT INTO log (line) VALUES ('%s')" % text) or {})


def test_plain_words_are_not_redacted():
    assert reticle._scrub_server("bypass=1 token_count=5 profile store unavailable") == \
        "bypass=1 token_count=5 profile store unavailable"
    assert reticle._scrub_server("csrftoken=abc") == "csrftoken=[redacted]"


def _note(mcp, sid, title, timeout_ms=6000):
    """Type `title` into the classic form and post it; the verdict of the post, with no `until`."""
    mcp.ok("reticle_act", {"sessionId": sid, "action": "fill", "target": {"label": "Title"}, "args": {"value": title}})
    return mcp.ok("reticle_act_and_wait", {"sessionId": sid, "action": "click", "timeout_ms": timeout_ms,
                                           "target": {"role": "button", "name": "Save note"}, "detail": "full"},
                  timeout=60)


class PhpNotes(AppProcess):
    """tests/_php_notes/index.php under PHP's built-in server: a plain PHP form keeping its notes in a JSON file."""

    def __init__(self, tmp, daemon):
        php = shutil.which("php")
        if php is None:
            pytest.skip("php is not installed (sh tests/bootstrap.sh browser installs php-cli)")
        super().__init__(tmp, "php")
        self.store = os.path.join(str(tmp), "notes-%d.json" % self.port)
        env = dict(os.environ, NOTES_FILE=self.store,
                   RETICLE_SCRIPT='<script src="%s/reticle.js"></script>' % daemon.url)
        self.start([php, "-S", "127.0.0.1:%d" % self.port, os.path.join(HERE, "_php_notes", "index.php")], env, HERE)

    def rows(self):
        if not os.path.exists(self.store):
            return 0
        with open(self.store, encoding="utf-8") as f:
            return len(json.load(f))


# what each app's form says when the title is too short, and when it is missing
_SAYS = {"flask": ("Title must be at least 2 characters", "Title is required"),
         "django": ("Ensure this value has at least 2 characters", "This field is required"),
         "php": ("Title must be at least 2 characters", "Title must be at least 2 characters")}


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
@pytest.mark.parametrize("framework", ["flask", "django", "php"])
def test_a_classic_form_that_comes_back_is_never_a_clean_yes(framework, device, tmp_path, daemon, mcp):
    """Post/redirect/get, on real Flask, Django and plain PHP forms, in a device and through the tag, with no
    server voice (the page alone tells): the post that saved redirects (yes); one rendered again under 200
    with its error marked anywhere in the page (<p class="error"> above the form, Django's errorlist) or said
    above it in words (the Flask tutorial's flash) is no; one rendered again saying nothing is unknown
    (form_came_back), never yes.  The truth is the rows in the app's database (PHP: its JSON file)."""
    app = PhpNotes(tmp_path, daemon) if framework == "php" else \
        App(framework, tmp_path, daemon, env={"SHOP_PLAIN": "1"})
    sid, browser = open_tab(mcp, app, device=device, path="/notes/new")
    try:
        for n in range(2):
            rows = app.rows()
            out = _note(mcp, sid, "a")  # too short
            assert out["verified"] == "no" and _SAYS[framework][0] in out["because"], (n, out["because"])
            out = _note(mcp, sid, "")  # missing
            assert out["verified"] == "no" and _SAYS[framework][1] in out["because"], (n, out["because"])
            out = _note(mcp, sid, "quiet")  # the form again, and not a word
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "form_came_back"), (n, out["because"])
            assert app.rows() == rows  # none of the three saved anything
            out = _note(mcp, sid, "Groceries %d" % n)
            assert out["verified"] == "yes", (n, out["because"])
            assert app.rows() == rows + 1
            mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + "/notes/new"})
    finally:
        if browser is not None:
            browser.close()
        app.close()


def _notes_in(app):
    import sqlite3
    with sqlite3.connect(app.db) as conn:
        return [r[0] for r in conn.execute("SELECT title FROM note ORDER BY id")]


@pytest.mark.parametrize("device", [False, True], ids=["tag", "device"])
def test_a_job_the_request_starts_on_a_thread_is_heard_under_its_request(device, tmp_path, daemon, mcp):
    """Django with Reticle's middleware and no store watched, its save run on a thread the request starts a
    second after its 303: the middleware records the thread's work as the request's job and the daemon adds it
    to the request's record, so the verdict waits for it: the healthy save is yes naming the job's write and
    when it ended; the job that writes nothing is never yes, also under the old advice (a `server` check of 0
    writes); the one that rolls back, or renames another row than the one the path names, is no.  The truth
    is the app's SQLite file."""
    app = App("django", tmp_path, daemon)
    sid, browser = open_tab(mcp, app, device=device, path="/notes/later")
    zero = {"kind": "server", "method": "POST", "writes": {"count": 0}}

    def post(path, title, until=None):
        mcp.ok("reticle_navigate", {"sessionId": sid, "url": app.url + path})
        mcp.ok("reticle_act", {"sessionId": sid, "action": "fill", "target": {"label": "Title"},
                               "args": {"value": title}})
        args = {"sessionId": sid, "action": "click", "target": {"role": "button", "name": "Save note"},
                "detail": "full", "timeout_ms": 6000}
        if until is not None:
            args["until"] = until
        return mcp.ok("reticle_act_and_wait", args, timeout=60)
    try:
        for n in range(2):
            out = post("/notes/later", "Later %d" % n)
            assert "Later %d" % n in _notes_in(app)
            assert out["verified"] == "yes", out
            assert "its job on thread" in out["because"] and "s after the answer, 1 write" in out["because"], out
            out = post("/notes/later", "nothing %d" % n)
            assert out["verified"] == "unknown" and out["verifiedReason"] == "server_wrote_nothing", out
            assert "0 writes" in out["because"] and "its job on thread" in out["because"], out["because"]
            out = post("/notes/later", "nothing again %d" % n, zero)  # the old advice: never a yes
            assert out["verified"] == "unknown" and "handed its work to a job" in out["because"], out
            for until in (None, zero):
                out = post("/notes/later", "rollback %d" % n, until)
                assert "rollback %d" % n not in _notes_in(app)
                assert out["verified"] == "no", (until, out)
                assert any(c["kind"] == "server-rolled-back" for c in out["contradictions"]), out
        target = len(_notes_in(app))
        for n in range(2):
            for until in (None, zero):
                out = post("/notes/%d/rename" % target, "wrongrow %d %s" % (n, bool(until)), until)
                assert _notes_in(app)[target - 2].startswith("wrongrow %d" % n)
                assert out["verified"] == "no" and any(c["kind"] == "server-wrong-row" for c in out["contradictions"]), \
                    (until, out)
    finally:
        if browser is not None:
            browser.close()
        app.close()
