"""A small Flask app for the failure dialects of issue 46 #4: what a fetch-and-swap answer carries (real
htmx 2), and Astro's action envelopes.  It runs in a thread of the test process (`DialectsServer`); every page
loads the SDK with the script tag, and a device opens the same URLs.

- `/htmx/<how>/`: a notes form under real htmx (`hx-post`, the script from tests/.js/node_modules/htmx.org).
  The server answers 200 either way (htmx 2 swaps no 4xx or 5xx answer by default, so htmx apps answer a
  refusal 200):
  - `after`: `hx-target="this" hx-swap="afterend"`: the answer lands right after the form; refused,
    `<p class="error">That title is taken.</p>` (marked, no word of failure).
  - `outer`: `hx-target="#messages" hx-swap="outerHTML"`: the answer replaces the message box after the form;
    refused, `<div id="messages"><span class="text-danger">That title is taken.</span></div>`.
  - `end`: `hx-target="#log" hx-swap="beforeend"`: the answer is appended to a log below the form; refused,
    `<li class="invalid">That title is taken.</li>`.
  - `oob`: `hx-target="this" hx-swap="outerHTML"`: the answer is the form again, with an out-of-band
    `<div id="flash" hx-swap-oob="true">` that lands in the page's header; refused, its
    `<p class="flash-box error">That title is taken.</p>`.
  - `words`: `hx-target="#messages"` (innerHTML): refused, `<p>Could not save the note.</p>` (words, no mark).
  A saved note answers "Saved “<title>”." in the same places (the `oob` flash `<p class="notice">`), marked as
  nothing.  `app.refuse` makes the next saves refused.
- `/astro/`: a page that calls an Astro action the way Astro's client does (`POST /_actions/notes.create`,
  a JSON body, `Accept: application/json`) and trusts the HTTP status: it says "Saved" for any 2xx (the
  planted bug).  The action answers with Astro's own bodies (ASTRO_*): a success is 200
  `application/json+devalue`; `app.astro` picks a failure: "error" (an ActionError CONFLICT, 409
  `application/json`), "error-200" (the same envelope under HTTP 200, as a proxy or a hand-rolled handler
  answers it), "input" (an ActionInputError, 400), "data-failure" (a 200 whose devalue data says
  `ok: false`).

The truth is `app.notes()`: the titles the server stored.
"""

import os
import threading

from flask import Flask, Response, request
from werkzeug.serving import make_server

from _harness import NODE_MODULES

HTMX_JS = os.path.join(NODE_MODULES, "htmx.org", "dist", "htmx.min.js")
REFUSED = "That title is taken."

# Astro's answers, as astro 5 (packages/astro/src/actions/runtime/server.ts, serializeActionResult) writes them:
# data through devalue's stringify (a flat array, index 0 the root, every value an index into it; a Date as
# ["Date", iso]), errors as JSON.stringify({...error, message}) of an ActionError (its class fields type, code,
# status, then the message) or {type, issues, fields} of an ActionInputError (zod's issues).
ASTRO_DATA = ('[{"ok":1,"note":2},true,{"id":3,"title":4,"created":5},7,"Groceries",'
              '["Date","2025-03-01T09:30:00.000Z"]]')
ASTRO_ERROR = '{"type":"AstroActionError","code":"CONFLICT","status":409,"message":"That title is taken."}'
ASTRO_INPUT_ERROR = ('{"type":"AstroActionInputError","issues":[{"code":"too_small","minimum":1,"type":"string",'
                     '"inclusive":true,"exact":false,"message":"String must contain at least 1 character(s)",'
                     '"path":["title"]}],"fields":{"title":["String must contain at least 1 character(s)"]}}')
# astro 4.15's ActionInputError: the whole error spread (code, status and the message too)
ASTRO4_INPUT_ERROR = ('{"type":"AstroActionInputError","code":"BAD_REQUEST","status":400,"issues":[{"code":'
                      '"too_small","minimum":1,"type":"string","inclusive":true,"exact":false,"message":"String '
                      'must contain at least 1 character(s)","path":["title"]}],"fields":{"title":["String must '
                      'contain at least 1 character(s)"]},"message":"Failed to validate: title"}')
# an action that returns its failure as data instead of throwing: {ok: false, error: "That title is taken."}
ASTRO_DATA_FAILURE = '[{"ok":1,"error":2},false,"That title is taken."]'
DEVALUE = "application/json+devalue"
# (HTTP status, content type, body) of each answer app.astro picks
ASTRO_ANSWERS = {
    "data": (200, DEVALUE, ASTRO_DATA),
    "error": (409, "application/json", ASTRO_ERROR),
    "error-200": (200, "application/json", ASTRO_ERROR),
    "input": (400, "application/json", ASTRO_INPUT_ERROR),
    "data-failure": (200, DEVALUE, ASTRO_DATA_FAILURE),
}

_HEAD = """<!doctype html><html><head><meta charset="utf-8"><title>Notes</title>
<script src="%(daemon)s/reticle.js"></script>%(more)s
<style>.error,.text-danger,.invalid{color:#b00}</style></head>"""

# how each htmx page posts: (attributes of the form, what stands around it)
HTMX_FORMS = {
    "after": ('hx-target="this" hx-swap="afterend"', ""),
    "outer": ('hx-target="#messages" hx-swap="outerHTML"', '<div id="messages"></div>'),
    "end": ('hx-target="#log" hx-swap="beforeend"', '<ul id="log"></ul>'),
    "oob": ('hx-target="this" hx-swap="outerHTML"', ""),
    "words": ('hx-target="#messages"', '<div id="messages"></div>'),
}


def _form(how):
    attrs, _ = HTMX_FORMS[how]
    return ('<form id="note-form" hx-post="/htmx/%s/notes" %s><label>Title <input name="title"></label>'
            '<button>Save</button></form>' % (how, attrs))


def htmx_page(daemon, how):
    """A notes page under htmx: a header with the flash slot, the form, and what its answers land in."""
    return (_HEAD % {"daemon": daemon, "more": '<script src="/htmx.js"></script>'}
            + '<body><header><a href="/">Notes</a><div id="flash"></div></header><main><h1>Notes</h1>'
            + _form(how) + HTMX_FORMS[how][1] + "</main></body></html>")


def htmx_answer(how, title, saved):
    """The fragment the server answers a post with (200 either way)."""
    said = "Saved \u201c%s\u201d." % title if saved else REFUSED
    if how == "after":
        return '<p class="%s">%s</p>' % ("saved" if saved else "error", said)
    if how == "outer":
        return '<div id="messages"><span class="%s">%s</span></div>' % ("saved" if saved else "text-danger", said)
    if how == "end":
        return '<li class="%s">%s</li>' % ("saved" if saved else "invalid", said)
    if how == "oob":
        box = '<p class="notice">Note saved.</p>' if saved else '<p class="flash-box error">%s</p>' % REFUSED
        return _form("oob") + '<div id="flash" hx-swap-oob="true">%s</div>' % box
    return "<p>%s</p>" % (said if saved else "Could not save the note.")


ASTRO_PAGE = """<body><main><h1>Notes</h1>
<form id="note-form"><label>Title <input name="title"></label><button>Save</button></form>
<p id="said"></p>
<script>
  // Astro's client: POST /_actions/<name>, JSON, Accept: application/json; this page trusts the status
  document.getElementById("note-form").addEventListener("submit", function (e) {
    e.preventDefault();
    var title = e.target.elements.title.value;
    fetch("/_actions/notes.create", {method: "POST", body: JSON.stringify({title: title}),
                                     headers: {"Accept": "application/json", "Content-Type": "application/json"}})
      .then(function (r) { return r.text().then(function () { if (r.ok) document.getElementById("said").textContent = "Saved"; }); });
  });
</script></main></body></html>"""


class DialectsApp:
    """The server side: its store of notes is the truth a test checks."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        with self._lock:
            self.refuse = False  # the next htmx saves are refused
            self.astro = "data"  # the answer the next Astro action gives (ASTRO_ANSWERS)
            self._notes = []

    def notes(self):
        with self._lock:
            return list(self._notes)

    def _store(self, title):
        with self._lock:
            self._notes.append(title)

    def flask(self, daemon):
        """The Flask app; its pages carry `daemon`'s script tag."""
        app = Flask(__name__)

        @app.get("/htmx.js")
        def htmx_js():
            with open(HTMX_JS, "rb") as fh:
                return Response(fh.read(), mimetype="application/javascript")

        @app.get("/htmx/<how>/")
        def htmx(how):
            return htmx_page(daemon, how) if how in HTMX_FORMS else ("not found", 404)

        @app.post("/htmx/<how>/notes")
        def htmx_notes(how):
            title = request.form.get("title", "")
            saved = not self.refuse
            if saved:
                self._store(title)
            return htmx_answer(how, title, saved)

        @app.get("/astro/")
        def astro():
            return _HEAD % {"daemon": daemon, "more": ""} + ASTRO_PAGE

        @app.post("/_actions/notes.create")
        def astro_action():
            status, ctype, body = ASTRO_ANSWERS[self.astro]
            if self.astro == "data":
                self._store(str((request.get_json(silent=True) or {}).get("title", "")))
            return Response(body, status=status, content_type=ctype)

        return app


class DialectsServer:
    """`app`'s Flask app on a free port of 127.0.0.1, in a thread of its own (werkzeug's threaded server)."""

    def __init__(self, app, daemon):
        self._server = make_server("127.0.0.1", 0, app.flask(daemon), threaded=True)
        self.url = "http://127.0.0.1:%d" % self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self):
        self._server.shutdown()
        self._thread.join(10)
