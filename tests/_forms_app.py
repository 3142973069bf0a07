"""A small server-rendered app for the document tests: classic HTML forms, no
JavaScript framework, every page rendered on the server.

The shape is post/redirect/get, as Django, Rails, Laravel and PHP apps have it:

- ``/login``: a login form; a right password answers 302 to ``/records``, a
  wrong one re-renders the form with 200 and an error.
- ``/records``: the list, a one-shot flash message, an "Add record" form and
  an admin-style "Action:" select.  A good name answers 302 back to the list
  with "Record 'X' added"; an empty or duplicate name re-renders with 200 and
  the error next to the field (``aria-invalid`` and ``aria-describedby``);
  with ``fault`` on, the add answers a 500 error page.
- ``/records/<id>/delete``: GET shows "Are you sure?" with a form, POST
  deletes and answers 302 to the list.
- ``/spa``: a client-routed page whose "New record" link fetches ``/spa/view``
  (the add form) and swaps it in; the view it leaves has a "Name" field too.

The data lives in memory on a `FormsApp`, so tests can check the truth on the
server (``app.records``, ``app.posts``) and switch ``app.fault`` on and off;
``app.slow_get`` makes every page load that many seconds slow.
Every page carries the reticle script tag pointing at the daemon."""

import asyncio
import html

import tornado.web

PASSWORD = "correct horse"
CSRF = "csrf-4f9a1c0e7b2d"

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>%(title)s</title>
<script src="%(daemon)s/reticle.js"></script>
<style>.error { color: #b00 } .flash { background: #efe }</style></head>
<body>
<header><a href="/records">Records admin</a></header>
<main>
<h1>%(title)s</h1>
%(body)s
</main>
<footer><p>Fixture app</p></footer>
</body></html>
"""


class FormsApp:
    """The in-memory truth of the fixture and its tornado routes."""

    def __init__(self, daemon_url):
        self.daemon = daemon_url
        self.records = {}  # id -> name
        self.next_id = 1
        self.fault = False
        self.add_label = "Add record"  # the add button's text (a test renames it)
        self.posts = []  # (path, {field: value}) of every POST the server answered
        self.slow_get = 0.0  # seconds every GET waits before it is answered (a slow page load)

    def add(self, name):
        rid = self.next_id
        self.next_id += 1
        self.records[rid] = name
        return rid

    def routes(self):
        kw = {"app": self}
        return [
            (r"/login", _Login, kw),
            (r"/records", _Records, kw),
            (r"/records/(\d+)/delete", _Delete, kw),
            (r"/spa", _Spa, kw), (r"/spa/view", _SpaView, kw),
        ]


class _Base(tornado.web.RequestHandler):
    def initialize(self, app):
        self.app = app

    async def prepare(self):
        if self.request.method == "GET" and self.app.slow_get:
            await asyncio.sleep(self.app.slow_get)
        if self.request.method == "POST":
            fields = {k: self.get_body_argument(k) for k in self.request.body_arguments}
            self.app.posts.append((self.request.path, fields))

    def page(self, title, body, status=200):
        self.set_status(status)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(_PAGE % {"title": html.escape(title), "body": body, "daemon": self.app.daemon})

    def flash_then_redirect(self, message, to):
        self.set_cookie("flash", message.replace(" ", "_").replace("'", "~"))
        self.redirect(to, status=302)

    def take_flash(self):
        raw = self.get_cookie("flash")
        if not raw:
            return ""
        self.clear_cookie("flash")
        return '<p class="flash" role="status">%s</p>' % html.escape(raw.replace("_", " ").replace("~", "'"))


class _Login(_Base):
    def get(self, error=""):
        err = '<p class="error" id="login-error" role="alert">%s</p>' % html.escape(error) if error else ""
        self.page("Log in", """%s
<form method="post" action="/login" aria-label="Log in">
  <input type="hidden" name="csrfmiddlewaretoken" value="%s">
  <p><label for="username">Username</label> <input id="username" name="username"></p>
  <p><label for="password">Password</label> <input id="password" name="password" type="password"></p>
  <p><button type="submit" name="go" value="login">Log in</button></p>
</form>""" % (err, CSRF))

    def post(self):
        if self.get_body_argument("password", "") != PASSWORD:
            self.get("Please enter a correct username and password.")
            return
        self.set_cookie("user", self.get_body_argument("username", ""))
        self.flash_then_redirect("Welcome back", "/records")


class _Records(_Base):
    def get(self, error="", value=""):
        rows = "".join('<li>%s <a href="/records/%d/delete">Delete</a></li>' % (html.escape(n), rid)
                       for rid, n in sorted(self.app.records.items()))
        invalid = ' aria-invalid="true" aria-describedby="name-error"' if error else ""
        err = '<p class="error" id="name-error">%s</p>' % html.escape(error) if error else ""
        self.page("Records", """%(flash)s
<form method="get" action="/records" aria-label="Bulk actions">
  <label>Action: <select name="action">
    <option value="" selected>---------</option>
    <option value="delete_selected">Delete selected records</option>
  </select></label>
  <button type="submit" name="index" value="0">Go</button>
</form>
<ul aria-label="All records">%(rows)s</ul>
<form method="post" action="/records" aria-label="Add record">
  <p><label for="name">Name</label> <input id="name" name="name" value="%(value)s"%(invalid)s>%(err)s</p>
  <p><label for="note">Note</label> <textarea id="note" name="note"></textarea></p>
  <p><button type="submit" name="_save" value="1">%(add)s</button></p>
</form>""" % {"flash": self.take_flash(), "rows": rows or "<li>No records yet</li>",
              "value": html.escape(value), "invalid": invalid, "err": err,
              "add": html.escape(self.app.add_label)})

    def post(self):
        name = self.get_body_argument("name", "").strip()
        if self.app.fault:
            self.set_status(500)
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(_PAGE % {"title": "Server Error (500)", "daemon": self.app.daemon,
                                 "body": "<p>Something went wrong. Try again later.</p>"})
            return
        if not name:
            self.get("This field is required.", name)
            return
        if name in self.app.records.values():
            self.get("Record with this Name already exists.", name)
            return
        self.app.add(name)
        self.flash_then_redirect("Record '%s' added" % name, "/records")


class _Delete(_Base):
    def get(self, rid):
        name = self.app.records.get(int(rid))
        if name is None:
            raise tornado.web.HTTPError(404)
        self.page("Are you sure?", """<p>Are you sure you want to delete the record "%s"?</p>
<form method="post" aria-label="Confirm delete">
  <button type="submit" name="post" value="yes">Yes, I'm sure</button>
  <a href="/records">No, take me back</a>
</form>""" % html.escape(name))

    def post(self, rid):
        name = self.app.records.pop(int(rid), None)
        if name is None:
            raise tornado.web.HTTPError(404)
        self.flash_then_redirect("Record '%s' deleted" % name, "/records")


class _Spa(_Base):
    """A client-routed page: its "New record" link fetches the next view (slow with ``slow_get``) and
    swaps it in with pushState.  The view it leaves has a field labelled Name too (a search)."""

    def get(self):
        self.page("Records app", """<nav><a href="/spa/new" id="go">New record</a></nav>
<div id="view"><p><label for="q">Name</label> <input id="q" name="q"></p><p>Search records by name.</p></div>
<script>
document.getElementById('go').addEventListener('click', function (ev) {
  ev.preventDefault();
  fetch('/spa/view').then(function (r) { return r.text(); }).then(function (view) {
    document.getElementById('view').innerHTML = view;
    history.pushState({}, '', '/spa/new');
  });
});
</script>""")


class _SpaView(_Base):
    def get(self):
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish("""<form method="post" action="/records" aria-label="Add record">
<p><label for="name">Name</label> <input id="name" name="name"></p>
<p><button type="submit" name="_save" value="1">Add record</button></p></form>""")
