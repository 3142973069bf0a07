"""The storage-truth fixture apps (tests/_store_apps.py) keep their word, checked without Reticle: every route
driven over plain HTTP, and each behaviour read back from the store itself.  A plain save is a row (with its
api_token); "ghost" and "rollback" answer a success and leave no row; "wrongrow" renames the other row; the
forms post/redirect/get (303) to a flash; the script tag is printed when asked for and not otherwise."""

import json
import re
import types
import urllib.error
import urllib.parse
import urllib.request

import pytest

from _store_apps import NodeJsonStore, PhpStore

FAKE_DAEMON = types.SimpleNamespace(url="http://127.0.0.1:9")  # only its URL is used, for the script tag
TAG = '<script src="http://127.0.0.1:9/reticle.js"></script>'


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a 303 is the answer under test, not a hop


_OPENER = urllib.request.build_opener(_NoRedirect)


def call(url, form=None, data=None):
    """GET `url`, or POST `form` (urlencoded) or `data` (JSON), following no redirect -> (status, headers, body)."""
    body, headers = None, {}
    if form is not None:
        body = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif data is not None:
        body = json.dumps(data).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=body, headers=headers)
    try:
        with _OPENER.open(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read().decode("utf-8")
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.headers, err.read().decode("utf-8")


def titles(app):
    return {row["id"]: row["title"] for row in app.rows()}


@pytest.fixture(scope="module")
def pg_cluster():
    from _postgres import APP_PASSWORD, start_cluster
    with start_cluster(logical=False) as cluster:
        yield cluster.port, APP_PASSWORD


@pytest.fixture(params=["sqlite", "pgsql"])
def php_store(request, tmp_path):
    if request.param == "pgsql":
        from _store_apps import need_php
        need_php("pgsql")  # before a cluster is started for nothing
        port, password = request.getfixturevalue("pg_cluster")
        app = PhpStore(tmp_path, FAKE_DAEMON, dsn="pgsql", pg_port=port, pg_password=password)
        assert app.watch_url.startswith("postgresql://app:") and app.watch_url.endswith(":%d/notes" % port)
    else:
        app = PhpStore(tmp_path, FAKE_DAEMON)
        assert app.watch_url == "sqlite:///" + app.db_path and app.watch_url.startswith("sqlite:////")
    try:
        yield app
    finally:
        app.close()


def test_the_php_store_saves_lies_and_renames_as_it_says(php_store):
    app = php_store
    start = titles(app)  # a PostgreSQL database outlives one app: only what this test adds is looked at
    status, _, page = call(app.url + "/notes")
    assert status == 200 and TAG in page.split("</head>")[0] and "href='/notes/new'" in page
    status, _, page = call(app.url + "/notes/new")
    assert status == 200 and "method='post' action='/notes/new'" in page and "Title" in page and "Save note" in page

    # a plain title: saved, with a token, then 303 to the flash
    status, headers, _ = call(app.url + "/notes/new", form={"title": "Groceries"})
    assert status == 303 and headers["Location"] == "/notes?flash=saved"
    (first, title), = set(titles(app).items()) - set(start.items())
    assert title == "Groceries"
    token = next(row["api_token"] for row in app.rows() if row["id"] == first)
    assert re.fullmatch(r"tok_[0-9a-f]{16}", token)
    status, _, page = call(app.url + "/notes?flash=saved")
    assert status == 200 and "Note saved." in page and "<li data-id='%d'>" % first in page and "Groceries" in page
    assert token not in page

    # ghost and rollback: the same redirect and flash, and nothing in the store
    before = titles(app)
    for title in ("ghost note", "rollback note"):
        status, headers, _ = call(app.url + "/notes/new", form={"title": title})
        assert (status, headers["Location"]) == (303, "/notes?flash=saved"), title
        assert titles(app) == before, title
    # too short: the form again under 200, the error above it, nothing saved
    status, _, page = call(app.url + "/notes/new", form={"title": "a"})
    assert status == 200 and '<p class=\'error\'>Title must be at least 2 characters.</p>' in page
    assert "action='/notes/new'" in page and titles(app) == before

    call(app.url + "/notes/new", form={"title": "Books"})
    (second, _), = set(titles(app).items()) - set(before.items())
    status, _, page = call(app.url + "/notes/%d/edit" % second)
    assert status == 200 and "action='/notes/%d/rename'" % second in page and "Rename" in page
    assert "value='Books'" in page
    assert call(app.url + "/notes/999999/edit")[0] == 404

    # a rename renames its own row; a "wrongrow" one the row before it
    status, headers, _ = call(app.url + "/notes/%d/rename" % second, form={"title": "Books to read"})
    assert (status, headers["Location"]) == (303, "/notes?flash=renamed")
    assert titles(app)[second] == "Books to read" and titles(app)[first] == "Groceries"
    assert "Note renamed." in call(app.url + "/notes?flash=renamed")[2]
    before = titles(app)  # the wrong row: id - 1, or (PostgreSQL's rollback spent an id) the smallest other
    wrong = second - 1 if second - 1 in before else min(i for i in before if i != second)
    status, headers, _ = call(app.url + "/notes/%d/rename" % second, form={"title": "wrongrow list"})
    assert (status, headers["Location"]) == (303, "/notes?flash=renamed")
    assert titles(app) == {**before, wrong: "wrongrow list"} and wrong != second

    # the fetch endpoint: the same three behaviours, in JSON
    before = titles(app)
    status, _, body = call(app.url + "/api/notes", data={"title": "From the API"})
    new = json.loads(body)
    assert status == 201 and new["ok"] is True and titles(app) == {**before, new["id"]: "From the API"}
    before = titles(app)
    for title in ("ghost api", "rollback api"):
        status, _, body = call(app.url + "/api/notes", data={"title": title})
        assert (status, json.loads(body)) == (201, {"ok": True}) and titles(app) == before, title
    status, _, body = call(app.url + "/api/notes", data={"title": "x"})
    assert status == 422 and json.loads(body)["ok"] is False and titles(app) == before

    status, _, page = call(app.url + "/app")
    assert status == 200 and TAG in page and 'id="title"' in page and "<button>Add</button>" in page
    assert 'role="status"' in page and "'/api/notes'" in page and "Saved!" in page
    assert not any(row["api_token"] in page for row in app.rows())


def test_the_node_json_store_saves_lies_and_renames_as_it_says(tmp_path):
    app = NodeJsonStore(tmp_path, FAKE_DAEMON)
    try:
        assert app.watch_url == "file://" + app.file and app.watch_url.startswith("file:///")
        assert app.rows() == []  # the file is written at start
        status, _, page = call(app.url + "/")
        assert status == 200 and TAG in page.split("</head>")[0] and "<button>Add</button>" in page
        assert 'role="status"' in page and "Saved!" in page and "'/api/notes'" in page

        ids = []
        for title in ("Groceries", "Books"):
            status, _, body = call(app.url + "/api/notes", data={"title": title})
            answer = json.loads(body)
            assert status == 201 and answer["ok"] is True
            ids.append(answer["id"])
        assert ids == [1, 2] and app.rows() == [{"id": 1, "title": "Groceries"}, {"id": 2, "title": "Books"}]
        with open(app.file, encoding="utf-8") as fh:
            assert json.load(fh) == {"notes": app.rows()}

        status, _, body = call(app.url + "/api/notes", data={"title": "ghost note"})
        assert (status, json.loads(body)) == (201, {"ok": True}) and len(app.rows()) == 2
        status, _, body = call(app.url + "/api/notes", data={"title": "a"})
        assert status == 422 and json.loads(body)["ok"] is False and len(app.rows()) == 2
        status, _, body = call(app.url + "/api/notes")
        assert status == 200 and json.loads(body) == {"notes": app.rows()}

        status, _, body = call(app.url + "/api/notes/2/rename", data={"title": "Books to read"})
        assert (status, json.loads(body)) == (200, {"ok": True})
        assert titles(app) == {1: "Groceries", 2: "Books to read"}
        status, _, body = call(app.url + "/api/notes/2/rename", data={"title": "wrongrow list"})
        assert (status, json.loads(body)) == (200, {"ok": True})
        assert titles(app) == {1: "wrongrow list", 2: "Books to read"}  # the wrong row
        assert call(app.url + "/api/notes/9/rename", data={"title": "Nope"})[0] == 404

        status, _, body = call(app.url + "/api/notes", data={"title": "Third"})
        assert status == 201 and json.loads(body)["id"] == 3  # ids keep increasing
    finally:
        app.close()


def test_without_the_tag_no_script_is_printed(tmp_path):
    from _store_apps import need_node, need_php
    need_php("sqlite")
    need_node()
    for app in (PhpStore(tmp_path, FAKE_DAEMON, tag=False), NodeJsonStore(tmp_path, None)):
        try:
            page = call(app.url + "/")[2] if isinstance(app, NodeJsonStore) else call(app.url + "/notes")[2]
            assert "<script src" not in page and "reticle.js" not in page
        finally:
            app.close()
