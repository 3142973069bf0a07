"""Real Django, Flask and FastAPI apps with Reticle's server middleware, for tests/test_server.py
and bench/server_truth.py.  Run as `python tests/_server_apps.py FRAMEWORK PORT DB [DAEMON_URL]`:
it serves on 127.0.0.1:PORT until killed.  Every app has the same routes:

  GET  /              a page (with the SDK's script tag when DAEMON_URL is given) whose buttons
                      fetch the routes below and show what the server answered
  POST /api/noop      answers {"ok": true} and writes nothing (the silent no-op)
  POST /api/save      inserts one row into `profile` and commits (Django: through the ORM, with RETURNING)
  POST /api/create    inserts one row with RETURNING (Django's ORM, SQLAlchemy Core's insert().returning())
  POST /api/background  inserts a row, answers 200; then work the framework runs for the request after the
                      answer fails in audit_task (FastAPI BackgroundTasks, Flask call_on_close: raises;
                      Django on_commit(robust=True): raises, Django logs it at ERROR)
  POST /api/pretty    (Flask) inserts a row and answers JSON indented as Flask's debug mode writes it
  POST /api/contact/N/rename        renames contact N (the table `contact` holds ids 1-3)
  POST /api/contact/N/rename_wrong  the bug: renames contact N-1 and answers as if it renamed N
  POST /api/contacts  (FastAPI, Flask) adds a contact and its audit row; /api/v2/contacts, the bug, adds only
                      the audit row and answers as if it added the contact
  POST /api/raw_save  (Flask) inserts a profile through a raw sqlite3 connection beside the app's engine
  POST /api/rollback  inserts a row, then rolls the transaction back; answers 200
  POST /api/tagged    (Django) in one atomic block: inserts a profile, get_or_create's the existing tag
                      'vip', then a nested atomic block (a savepoint) inserts a draft profile and creates
                      'vip' again: IntegrityError, rolled back to the savepoint; the outer block commits
  POST /api/logged    catches its own exception, logs it at ERROR, answers 200 "ok" (Flask, with
                      SHOP_LOGGED_WRITES=1: inserts a row first)
  POST /api/boom      raises (uncaught): the framework answers 500
  POST /form          a form post: inserts a row, then redirects (303) to /done; with no name it
                      writes nothing and redirects (303) back to / (the empty save the server refused)
  GET/POST /notes/new  (Flask, Django) a classic form: saved and 303 to /done, or rendered again under 200 with its
                      error (Flask: a flash <div> when empty, <p class="error"> when too short; Django: its
                      errorlist); the title "quiet" renders it again saying nothing
  GET/POST /notes/later, /notes/<id>/rename  (Django) the note form whose save runs on another thread a second
                      after its 303 (table `note`): "nothing..." writes nothing, "rollback..." rolls back,
                      a rename to "wrongrow..." renames note id-1
  GET  /done          the page the form post lands on (Flask, with SHOP_LATE_RECORD=S: its record comes S
                      seconds after the page, a record delayed on purpose; SHOP_LATE_PAGE=S does so for GET /)
  GET  /journal       (Flask) a plain HTML form whose posts write through a raw sqlite3 connection in an explicit
                      BEGIN ... COMMIT (statements OpenTelemetry's sqlite3 instrumentation traces, so the spans
                      show the commit), then 303 to /done: POST /journal saves; /journal/logged saves, then catches
                      an exception, logs it at ERROR and records it on the request's span (the swallowed failure);
                      /journal/noop writes nothing; the "forged" button swaps the SDK's mark cookie for a mark no
                      tab holds as the page leaves

FRAMEWORK is flask, django, fastapi, sqlite3 (Flask on a raw sqlite3 connection per request, the
Flask tutorial's shape, watched by reticle.watch_sqlite3 unless SHOP_UNWATCHED=1: then only the
middleware's default watch sees it) or files (Flask keeping its profiles in a JSON file: a store
nothing can watch).  SHOP_PLAIN=1 serves it without Reticle's middleware; SHOP_IMPORT=module imports
that module at start (a database driver the app loaded that nothing watches).
"""

import html
import json
import logging
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import reticle  # noqa: E402

log = logging.getLogger("shop.views")
PLAIN = bool(os.environ.get("SHOP_PLAIN"))  # serve the app without Reticle's middleware

PAGE = """<!doctype html><html><head><title>Profile</title>%(script)s</head><body>
<h1>Profile</h1>
<button id="noop" onclick="go('/api/noop')">Save (no-op)</button>
<button id="save" onclick="go('/api/save')">Save</button>
<button id="rollback" onclick="go('/api/rollback')">Save (rollback)</button>
<button id="logged" onclick="go('/api/logged')">Save (logged)</button>
<button id="boom" onclick="go('/api/boom')">Save (boom)</button>
<button id="xhr" onclick="goXhr('/api/save')">Save (xhr)</button>
<button id="create" onclick="go('/api/create')">Create</button>
<button id="pretty" onclick="go('/api/pretty')">Save (pretty)</button>
<button id="background" onclick="go('/api/background')">Save (background)</button>
<button id="tagged" onclick="go('/api/tagged')">Save (tagged)</button>
<button id="rename" onclick="go('/api/contact/3/rename')">Rename contact 3</button>
<button id="rename-wrong" onclick="go('/api/contact/3/rename_wrong')">Rename contact 3 (wrong row)</button>
<button id="add-contact" onclick="go('/api/contacts')">Add contact</button>
<button id="add-contact-audit" onclick="go('/api/v2/contacts')">Add contact (audit only)</button>
<button id="raw" onclick="go('/api/raw_save')">Save (raw)</button>
<form method="post" action="/form"><input name="name" value="ada"><button id="post">Post form</button></form>
<form method="post" action="/form"><input name="name" value=""><button id="empty">Send blank</button></form>
<p id="out"></p>
<script>
function go(path) {
  fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"name":"ada"}'})
    .then(function (r) { return r.text(); })
    .then(function () { document.getElementById('out').textContent = 'Saved profile ' + path; });
}
function goXhr(path) {
  var xhr = new XMLHttpRequest();
  xhr.open('POST', path);
  xhr.setRequestHeader('Content-Type', 'application/json');
  xhr.onload = function () { document.getElementById('out').textContent = 'Saved profile (xhr) ' + path; };
  xhr.send('{"name":"ada"}');
}
</script></body></html>"""
DONE = ("<!doctype html><html><head><title>Done</title>%(script)s</head><body><p>Form saved</p>"
        "<p id='cookies'></p><script>document.getElementById('cookies').textContent = "
        "'cookies: [' + document.cookie + ']';</script></body></html>")


# A classic server-rendered form (post/redirect/get): a good title is saved and redirects (303) to /done; a bad one
# renders the form again under 200 with the error: Flask as its tutorial does (a flash <div> above the form for a
# missing title, words only) or with <p class="error"> above it (too short); Django as its forms render
# (<ul class="errorlist"> beside the field; the form is novalidate, so the server, not the browser, checks it).
# The title "quiet" renders the form again and says nothing.
NOTE = ("<!doctype html><html><head><title>New note</title>%(script)s</head><body><header><nav><a href='/'>Home</a>"
        "</nav></header><main><h1>New note</h1>%(message)s<form method='post' action='/notes/new' novalidate>%(fields)s"
        "<button>Save note</button></form></main></body></html>")


def note_page(daemon, message="", fields=None, title=""):
    """The NOTE page: `message` above the form, `fields` (else one title field holding `title`) in it."""
    if fields is None:
        fields = "<label>Title <input name='title' value='%s'></label>" % html.escape(title, quote=True)
    script = '<script src="%s/reticle.js"></script>' % daemon if daemon else ""
    return NOTE % {"script": script, "message": message, "fields": fields}


JOURNAL = ("<!doctype html><html><head><title>Journal</title>%(script)s</head><body><h1>Journal</h1>"
           "<form method='post' action='/journal'><label>Entry <input name='entry' value='ada'></label>"
           "<button>Save entry</button><button formaction='/journal/logged'>Save entry (logged)</button>"
           "<button formaction='/journal/noop'>Save entry (no-op)</button>"
           "<button onclick=\"window.addEventListener('beforeunload', forge)\">Save entry (forged)</button></form>"
           "<script>function forge() { document.cookie = '__reticle_mark=%(forged)s; path=/journal'; }</script>"
           "</body></html>")


def journal_entry(db, name):
    """One row written as the Flask tutorial's raw sqlite3 apps can: BEGIN, INSERT, COMMIT on a cursor."""
    import sqlite3
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        cur = conn.cursor()
        cur.execute("BEGIN")
        cur.execute("INSERT INTO profile (name) VALUES (?)", (name,))
        cur.execute("COMMIT")
    finally:
        conn.close()


def swallowed_failure():
    """An exception caught, logged at ERROR and recorded on the request's span (OpenTelemetry's API, when the
    app runs under it), then answered as a success."""
    try:
        fail_inside()
    except ValueError as exc:
        log.exception("could not save the entry")
        try:
            from opentelemetry import trace
        except ImportError:
            return
        trace.get_current_span().record_exception(exc)


def page(daemon, body):
    script = '<script src="%s/reticle.js"></script>' % daemon if daemon else ""
    return body % {"script": script}


def fail_inside():
    raise ValueError("profile store unavailable")


SCHEMA = ("CREATE TABLE IF NOT EXISTS profile (id INTEGER PRIMARY KEY, name TEXT)",
          "CREATE TABLE IF NOT EXISTS contact (id INTEGER PRIMARY KEY, name TEXT)",
          "INSERT OR IGNORE INTO contact (id, name) VALUES (1, 'ann'), (2, 'bo'), (3, 'cy')",
          "CREATE TABLE IF NOT EXISTS tag (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
          "INSERT OR IGNORE INTO tag (id, name) VALUES (1, 'vip')",
          "CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY, what TEXT)",
          "CREATE TABLE IF NOT EXISTS note (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")


class SqlProfile:
    """The routes' work on a SQLAlchemy engine, shared by the Flask and the FastAPI app (each only wires
    it to its own request and response types)."""

    def __init__(self, db):
        import sqlalchemy
        self.engine = reticle.watch_sqlalchemy(sqlalchemy.create_engine("sqlite:///" + db))
        with self.engine.begin() as conn:
            for sql in SCHEMA:
                conn.exec_driver_sql(sql)
        self.profile = sqlalchemy.Table("profile", sqlalchemy.MetaData(),
                                        sqlalchemy.Column("id", sqlalchemy.Integer, primary_key=True),
                                        sqlalchemy.Column("name", sqlalchemy.Text))

    def insert(self, name):
        with self.engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO profile (name) VALUES (?)", (name,))
        return {"ok": True}

    def create(self):
        with self.engine.begin() as conn:
            new_id = conn.execute(self.profile.insert().values(name="ada").returning(self.profile.c.id)).scalar()
        return {"ok": True, "id": new_id}

    def rename(self, contact_id, wrong=False):
        with self.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE contact SET name = ? WHERE id = ?",
                                 ("renamed", contact_id - 1 if wrong else contact_id))
        return {"ok": True}

    def add_contact(self, audit_only=False):
        with self.engine.begin() as conn:
            if not audit_only:
                conn.exec_driver_sql("INSERT INTO contact (name) VALUES (?)", ("dee",))
            conn.exec_driver_sql("INSERT INTO audit (what) VALUES (?)", ("contact added",))
        return {"ok": True}

    def raw_insert(self, db):
        import sqlite3
        conn = sqlite3.connect(db)
        try:
            conn.execute("INSERT INTO profile (name) VALUES (?)", ("raw",))
            conn.commit()
        finally:
            conn.close()
        return {"ok": True}

    def rollback(self):
        with self.engine.connect() as conn:
            conn.exec_driver_sql("INSERT INTO profile (name) VALUES (?)", ("ada",))
            conn.rollback()
        return {"ok": True}


def audit_task():
    time.sleep(0.3)
    raise RuntimeError("audit log unavailable")


def logged_failure():
    try:
        fail_inside()
    except ValueError:
        log.exception("could not save the profile")
    return "ok"


def late_record(flask, body, setting="SHOP_LATE_RECORD"):
    """/done's answer (/'s with SHOP_LATE_PAGE); with SHOP_LATE_RECORD=S (Flask) its record reaches the daemon S
    seconds after the browser has the page: the middleware sends a record when the server closes the body, and a
    close callback (Flask's call_on_close) runs before that."""
    response = flask.make_response(body)
    delay = float(os.environ.get(setting) or 0)
    if delay:
        response.call_on_close(lambda: time.sleep(delay))
    return response


def flask_app(db, daemon):
    import flask
    store = SqlProfile(db)
    app = flask.Flask("shop")
    app.get("/", endpoint="index")(lambda: late_record(flask, page(daemon, PAGE), "SHOP_LATE_PAGE"))
    app.get("/done", endpoint="done")(lambda: late_record(flask, page(daemon, DONE)))
    app.post("/api/noop", endpoint="noop")(lambda: {"ok": True})
    app.post("/api/save", endpoint="save_profile")(lambda: store.insert("ada"))
    app.post("/api/rollback", endpoint="rollback_profile")(store.rollback)
    app.post("/api/boom", endpoint="boom_profile")(fail_inside)
    app.post("/api/create", endpoint="create_profile")(store.create)

    @app.post("/api/logged")
    def logged_profile():
        if os.environ.get("SHOP_LOGGED_WRITES"):
            store.insert("ada")  # a half-done save: the row is written, then the failure is logged
        return logged_failure()

    @app.post("/api/background")
    def background_profile():
        response = flask.jsonify(store.insert("ada"))
        response.call_on_close(audit_task)
        return response

    app.post("/api/pretty", endpoint="pretty")(lambda: flask.Response(
        json.dumps(dict(store.insert("ada"), id=7, note="saved  twice"), indent=2) + "\n",
        mimetype="application/json"))
    app.post("/api/contact/<int:cid>/rename", endpoint="rename")(lambda cid: store.rename(cid))
    app.post("/api/contact/<int:cid>/rename_wrong", endpoint="rename_wrong")(lambda cid: store.rename(cid, True))
    app.post("/api/contacts", endpoint="add_contact")(store.add_contact)
    app.post("/api/v2/contacts", endpoint="add_contact_audit")(lambda: store.add_contact(True))
    app.post("/api/raw_save", endpoint="raw_save")(lambda: store.raw_insert(db))

    @app.route("/notes/new", methods=["GET", "POST"])
    def new_note():
        title = (flask.request.form.get("title") or "").strip()
        if flask.request.method == "GET" or title == "quiet":
            return note_page(daemon, title=title)
        if not title:
            return note_page(daemon, "<div class='flash'>Title is required.</div>")
        if len(title) < 2:
            return note_page(daemon, "<p class='error'>Title must be at least 2 characters.</p>", title=title)
        store.insert(title)
        return flask.redirect("/done", 303)

    @app.post("/form")
    def form_profile():
        if not flask.request.form.get("name"):
            return flask.redirect("/?refused=name", 303)
        store.insert(flask.request.form.get("name"))
        return flask.redirect("/done", 303)

    app.get("/journal", endpoint="journal_page")(lambda: page(daemon, JOURNAL % {"script": "%(script)s",
                                                                                 "forged": "%032x" % 46}))

    @app.post("/journal")
    def journal():
        journal_entry(db, flask.request.form.get("entry") or "")
        return flask.redirect("/done", 303)

    @app.post("/journal/logged")
    def journal_logged():
        journal_entry(db, flask.request.form.get("entry") or "")
        swallowed_failure()
        return flask.redirect("/done", 303)

    app.post("/journal/noop", endpoint="journal_noop")(lambda: flask.redirect("/done", 303))

    if not PLAIN:
        app.wsgi_app = reticle.wsgi(app.wsgi_app)
    return app


def django_app(db, daemon):
    import django
    from django.conf import settings
    settings.configure(
        DEBUG=True, SECRET_KEY="test-only", ROOT_URLCONF=__name__, ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        MIDDLEWARE=[] if PLAIN else ["reticle.DjangoMiddleware"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": db}},
        LOGGING_CONFIG=None)
    django.setup()
    from django.db import IntegrityError, connection, models, transaction
    from django.http import HttpResponse, HttpResponseRedirect, JsonResponse
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt
    with connection.cursor() as cur:
        for sql in SCHEMA:
            cur.execute(sql)

    class Profile(models.Model):
        name = models.TextField()

        class Meta:
            app_label = "shop"
            db_table = "profile"

    class Contact(models.Model):
        name = models.TextField()

        class Meta:
            app_label = "shop"
            db_table = "contact"

    class Tag(models.Model):
        name = models.TextField(unique=True)

        class Meta:
            app_label = "shop"
            db_table = "tag"

    def index(request):
        return HttpResponse(page(daemon, PAGE))

    @csrf_exempt
    def tagged_profile(request):
        with transaction.atomic():
            profile = Profile.objects.create(name="ada")
            tag, _ = Tag.objects.get_or_create(name="vip")   # the row exists: found, nothing written
            try:
                with transaction.atomic():   # a savepoint: get_or_create's create branch has this shape
                    Profile.objects.create(name="draft")
                    Tag.objects.create(name="vip")
            except IntegrityError:
                pass
        return JsonResponse({"ok": True, "id": profile.pk, "tag": tag.pk})

    def done(request):
        return HttpResponse(page(daemon, DONE))

    @csrf_exempt
    def noop(request):
        return JsonResponse({"ok": True})

    @csrf_exempt
    def save_profile(request):
        Profile.objects.create(name="ada")
        return JsonResponse({"ok": True})

    @csrf_exempt
    def background_profile(request):
        with transaction.atomic():
            Profile.objects.create(name="ada")
            transaction.on_commit(audit_task, robust=True)
        return JsonResponse({"ok": True})

    @csrf_exempt
    def create_profile(request):
        return JsonResponse({"ok": True, "id": Profile.objects.create(name="ada").pk})

    @csrf_exempt
    def rename(request, cid):
        contact = Contact.objects.get(pk=cid)
        contact.name = "renamed"
        contact.save()
        return JsonResponse({"ok": True})

    @csrf_exempt
    def rename_wrong(request, cid):
        Contact.objects.filter(pk=cid - 1).update(name="renamed")
        return JsonResponse({"ok": True})

    @csrf_exempt
    def rollback_profile(request):
        try:
            with transaction.atomic():
                with connection.cursor() as cur:
                    cur.execute("INSERT INTO profile (name) VALUES (%s)", ["ada"])
                raise RuntimeError("undo")
        except RuntimeError:
            pass
        return JsonResponse({"ok": True})

    @csrf_exempt
    def logged_profile(request):
        return HttpResponse(logged_failure())

    @csrf_exempt
    def boom_profile(request):
        fail_inside()

    from django import forms

    class NoteForm(forms.Form):
        title = forms.CharField(min_length=2, max_length=200)

    @csrf_exempt
    def new_note(request):
        form = NoteForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and request.POST.get("title") == "quiet":
            return HttpResponse(note_page(daemon, title="quiet"))
        if request.method == "POST" and form.is_valid():
            with connection.cursor() as cur:
                cur.execute("INSERT INTO profile (name) VALUES (%s)", [form.cleaned_data["title"]])
            return _see_other("/done")
        return HttpResponse(note_page(daemon, fields=form.as_p()))

    def later(work):
        """The save the way a job queue in the same process runs it: on another thread, a second after the
        answer (Django's connection per thread, closed when the job ends)."""
        def job():
            try:
                work()
            finally:
                connection.close()
        threading.Timer(1.0, job).start()

    @csrf_exempt
    def note_later(request):
        """POST /notes/later: 303 to /done at once; the note is saved a second later, by the title's first word:
        a plain title inserted; "nothing" writes nothing; "rollback" inserts in a transaction that fails."""
        if request.method != "POST":
            return HttpResponse(note_page(daemon).replace("/notes/new", "/notes/later"))
        title = request.POST.get("title", "")

        def save():
            if title.startswith("nothing"):
                return
            try:
                with transaction.atomic():
                    with connection.cursor() as cur:
                        cur.execute("INSERT INTO note (title) VALUES (%s)", [title])
                    if title.startswith("rollback"):
                        raise RuntimeError("the job failed")
            except RuntimeError:
                pass
        later(save)
        return _see_other("/done")

    @csrf_exempt
    def note_rename_later(request, nid):
        """POST /notes/<id>/rename: 303 at once; the rename runs a second later ("wrongrow": of note id-1)."""
        if request.method != "POST":
            return HttpResponse(note_page(daemon).replace("/notes/new", "/notes/%d/rename" % nid))
        title = request.POST.get("title", "")

        def rename_job():
            with connection.cursor() as cur:
                cur.execute("UPDATE note SET title = %s WHERE id = %s",
                            [title, nid - 1 if title.startswith("wrongrow") else nid])
        later(rename_job)
        return _see_other("/done")

    @csrf_exempt
    def form_profile(request):
        if not request.POST.get("name"):
            return _see_other("/?refused=name")
        with connection.cursor() as cur:
            cur.execute("INSERT INTO profile (name) VALUES (%s)", [request.POST.get("name")])
        return _see_other("/done")

    def _see_other(to):
        resp = HttpResponseRedirect(to)
        resp.status_code = 303
        return resp

    global urlpatterns
    urlpatterns = [path("", index), path("done", done), path("api/noop", noop), path("api/save", save_profile),
                   path("api/rollback", rollback_profile), path("api/logged", logged_profile),
                   path("api/boom", boom_profile), path("form", form_profile), path("notes/new", new_note), path("api/create", create_profile),
                   path("api/background", background_profile), path("api/tagged", tagged_profile),
                   path("api/contact/<int:cid>/rename", rename), path("api/contact/<int:cid>/rename_wrong", rename_wrong),
                   path("notes/later", note_later), path("notes/<int:nid>/rename", note_rename_later)]
    from django.core.wsgi import get_wsgi_application
    return get_wsgi_application()


def fastapi_app(db, daemon):
    import fastapi
    from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse
    store = SqlProfile(db)
    app = fastapi.FastAPI()
    app.get("/", response_class=HTMLResponse, name="index")(lambda: page(daemon, PAGE))
    app.get("/done", response_class=HTMLResponse, name="done")(lambda: page(daemon, DONE))
    app.post("/api/noop", name="noop")(lambda: {"ok": True})
    app.post("/api/save", name="save_profile")(lambda: store.insert("ada"))
    app.post("/api/rollback", name="rollback_profile")(store.rollback)
    app.post("/api/logged", response_class=PlainTextResponse, name="logged_profile")(logged_failure)
    app.post("/api/boom", name="boom_profile")(fail_inside)
    app.post("/api/create", name="create_profile")(store.create)

    @app.post("/api/background")
    def background_profile(tasks: fastapi.BackgroundTasks):
        tasks.add_task(audit_task)
        return store.insert("ada")
    app.post("/api/contact/{cid}/rename", name="rename")(lambda cid: store.rename(int(cid)))
    app.post("/api/contact/{cid}/rename_wrong", name="rename_wrong")(lambda cid: store.rename(int(cid), True))
    app.post("/api/contacts", name="add_contact")(lambda: store.add_contact())
    app.post("/api/v2/contacts", name="add_contact_audit")(lambda: store.add_contact(True))

    @app.post("/form")
    async def form_profile(request: fastapi.Request):
        name = (await request.body()).decode().split("=")[-1]
        if not name:
            return RedirectResponse("/?refused=name", 303)
        store.insert(name)
        return RedirectResponse("/done", 303)

    return app if PLAIN else reticle.asgi(app)


def sqlite3_app(db, daemon):
    """Flask on raw sqlite3, as the Flask tutorial builds it: one connection per request in `g`."""
    import sqlite3

    import flask
    app = flask.Flask("shop")
    with sqlite3.connect(db) as conn:
        for sql in SCHEMA:
            conn.execute(sql)

    def get_db():
        if "db" not in flask.g:
            conn = sqlite3.connect(db)
            flask.g.db = conn if os.environ.get("SHOP_UNWATCHED") else reticle.watch_sqlite3(conn)
        return flask.g.db

    @app.teardown_appcontext
    def close_db(exc=None):
        conn = flask.g.pop("db", None)
        if conn is not None:
            conn.close()

    def insert():
        get_db().execute("INSERT INTO profile (name) VALUES (?)", ("ada",))
        get_db().commit()
        return {"ok": True}

    def create():
        new_id = get_db().execute("INSERT INTO profile (name) VALUES (?) RETURNING id", ("ada",)).fetchone()[0]
        get_db().commit()
        return {"ok": True, "id": new_id}

    def rollback():
        get_db().execute("INSERT INTO profile (name) VALUES (?)", ("ada",))
        get_db().rollback()
        return {"ok": True}

    def rename(cid, wrong=False):
        get_db().execute("UPDATE contact SET name = ? WHERE id = ?", ("renamed", cid - 1 if wrong else cid))
        get_db().commit()
        return {"ok": True}

    app.get("/", endpoint="index")(lambda: page(daemon, PAGE))
    app.get("/done", endpoint="done")(lambda: page(daemon, DONE))
    app.post("/api/noop", endpoint="noop")(lambda: {"ok": True})
    app.post("/api/save", endpoint="save_profile")(insert)
    app.post("/api/create", endpoint="create_profile")(create)

    @app.post("/api/background")
    def background_profile():
        response = flask.jsonify(insert())
        response.call_on_close(audit_task)
        return response
    app.post("/api/rollback", endpoint="rollback_profile")(rollback)
    app.post("/api/logged", endpoint="logged_profile")(logged_failure)
    app.post("/api/boom", endpoint="boom_profile")(fail_inside)
    app.post("/api/contact/<int:cid>/rename", endpoint="rename")(lambda cid: rename(cid))
    app.post("/api/contact/<int:cid>/rename_wrong", endpoint="rename_wrong")(lambda cid: rename(cid, True))

    @app.post("/form")
    def form_profile():
        get_db().execute("INSERT INTO profile (name) VALUES (?)", (flask.request.form.get("name"),))
        get_db().commit()
        return flask.redirect("/done", 303)

    if not PLAIN:
        app.wsgi_app = reticle.wsgi(app.wsgi_app)
    return app


def files_app(db, daemon):
    """Flask keeping its profiles in a JSON file: a store no watcher can see ("writes not watched")."""
    import flask
    app = flask.Flask("shop")
    path = db + ".json"

    def insert():
        rows = []
        if os.path.exists(path):
            with open(path) as fh:
                rows = json.load(fh)
        with open(path, "w") as fh:
            json.dump(rows + [{"name": "ada"}], fh)
        return {"ok": True}

    app.get("/", endpoint="index")(lambda: page(daemon, PAGE))
    app.post("/api/noop", endpoint="noop")(lambda: {"ok": True})
    app.post("/api/save", endpoint="save_profile")(insert)
    if not PLAIN:
        app.wsgi_app = reticle.wsgi(app.wsgi_app)
    return app


def serve(framework, port, db, daemon):
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if os.environ.get("SHOP_IMPORT"):
        __import__(os.environ["SHOP_IMPORT"])
    if framework == "fastapi":
        import uvicorn
        uvicorn.run(fastapi_app(db, daemon), host="127.0.0.1", port=port, log_level="warning")
        return
    from werkzeug.serving import run_simple
    app = {"flask": flask_app, "sqlite3": sqlite3_app, "django": django_app, "files": files_app}[framework](db, daemon)
    run_simple("127.0.0.1", port, app, threaded=True)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
