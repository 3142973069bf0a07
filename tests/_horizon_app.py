"""Fixture pages for the horizon and the ways apps tell failure (issue 18), served by one
tornado app.  Every page loads the SDK with the script tag; a device opens the same URLs.

- `/same/` "same error twice": Save posts to /same/save (200, JSON) and the page writes the
  answer's message into elements that stay in place: a persistent `role=alert` paragraph set to
  the same text again, or (with `?html=1`) an alert whose innerHTML is re-set to the same markup.
  `?ok=1` makes the save work ("Saved" in a status region); `?banner=1` adds a standing failure
  banner in the page header that the act never involves.
- `/ui/<name>/<fail|ok>`: Save posts to /api/ok (200) and then shows the example (fail) or the
  success twin (ok) of the `_FAILURE_UI` record `name`.
- `/dj/`: a server-rendered form that posts (a document navigation) to /dj/add, which redirects
  back with a Django messages list (`?fail=1`: an error the words do not give away).
- `/swap/`: Save posts to /swap/save (200) and the answer's fragment is swapped in 150 ms after
  the response (a fragment library's settle delay): an error on fault, else "Saved".
- `/sock/`: Save sends one WebSocket message to /sock/ws; the server answers 1.2 s later with
  `{"ok": false, "error": "..."}` (shown in an error box) or `{"ok": true}` ("Saved").
- `/status/`: Check posts to /api/ok and shows "0 errors found" in a status region (it logs one
  console error at load).
- `/late/`: a page whose body stays empty for 1.5 s after it loads.
- `/slow/`: a form post whose answer (the form again, its field `aria-invalid`) streams slowly: the
  new document starts at once and shows the invalid field 0.6 s later.

`app.fault` makes the next answers fail; `app.saves` counts what the server received.
"""

import asyncio
import json
import threading

import tornado.web
import tornado.websocket

import reticle

_HEAD = """<!doctype html><html><head><meta charset="utf-8"><title>%s</title>
<script src="__DAEMON__/reticle.js"></script></head>"""


def _page(title, body):
    return _HEAD % title + "<body>" + body + "</body></html>"


SAME = _page("Same", """
<header id="top"></header>
<main><form id="f" onsubmit="return false">
<label>Email <input name="email" value="not-an-email"></label>
<p role="alert" id="err"></p><div role="alert" id="box"></div><p role="status" id="ok"></p>
<button type="button" id="save">Save</button></form></main>
<script>
var q = new URLSearchParams(location.search);
if (q.get('banner')) document.getElementById('top').innerHTML =
  '<div role="alert">Scheduled maintenance tonight: saving may fail</div>';
document.getElementById('save').onclick = function () {
  fetch('/same/save' + location.search, {method: 'POST', body: '{"email": "x"}'}).then(function (r) {
    return r.json();
  }).then(function (d) {
    if (d.ok) { document.getElementById('ok').textContent = 'Saved'; return; }
    if (q.get('html')) document.getElementById('box').innerHTML = '<b>' + d.message + '</b>';
    else document.getElementById('err').textContent = d.message;
  });
};
</script>""")

UI = _page("UI", """<main><h1>Profile</h1><div id="out"></div><button type="button" id="save">Save</button></main>
<script>
var HTML = __HTML__;
document.getElementById('save').onclick = function () {
  fetch('/api/ok', {method: 'POST', body: '{}'}).then(function (r) { return r.json(); }).then(function () {
    document.getElementById('out').innerHTML = HTML;
  });
};
</script>""")

DJ_FORM = _page("Admin", """<main><h1>Add record</h1>__MESSAGES__
<form method="post" action="/dj/add__QUERY__"><label>Title <input name="title" value="A"></label>
<button type="submit">Save</button></form></main>""")

SWAP = _page("Swap", """<main><form onsubmit="return false"><div id="target"></div>
<button type="button" id="save">Save</button></form></main>
<script>
document.getElementById('save').onclick = function () {
  fetch('/swap/save', {method: 'POST', body: 'x=1'}).then(function (r) { return r.text(); }).then(function (t) {
    setTimeout(function () { document.getElementById("target").innerHTML = t; }, 150);
  });
};
</script>""")

SOCK = _page("Socket", """<main><div id="out"></div><button type="button" id="save">Save</button></main>
<script>
var ws = new WebSocket('ws://' + location.host + '/sock/ws');
ws.onmessage = function (m) {
  var d = JSON.parse(m.data);
  var out = document.getElementById('out');
  if (d.ok) out.innerHTML = '<p role="status">Saved</p>';
  else out.innerHTML = '<div class="alert alert-danger">' + d.error + '</div>';
};
document.getElementById('save').onclick = function () { ws.send(JSON.stringify({save: 1})); };
</script>""")

SLOW_FORM = _page("Slow", """<main><form method="post" action="/slow/add"><label>Title <input name="title"></label>
<button type="submit">Save</button></form></main>""")

LATE = _HEAD % "Late" + """<body><script>
setTimeout(function () { document.body.insertAdjacentHTML('beforeend', '<h1>Hello</h1>'); }, 1500);
</script></body></html>"""

STATUS = _page("Status", """<main><div role="status" id="s"></div><button type="button" id="check">Check</button></main>
<script>
console.error('status page: a warning at load');
document.getElementById('check').onclick = function () {
  fetch('/api/ok', {method: 'POST', body: '{}'}).then(function () {
    document.getElementById('s').textContent = '0 errors found';
  });
};
</script>""")


class HorizonApp:
    """The server side: `fault` (the next answers fail), `saves` (what the server received)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self):
        with self._lock:
            self.fault = False
            self.saves = 0

    def saved(self):
        with self._lock:
            self.saves += 1
            return not self.fault

    def routes(self, daemon):
        app = self

        class Page(tornado.web.RequestHandler):
            def initialize(self, html):
                self.html = html

            def get(self, *args):
                self.set_header("Content-Type", "text/html")
                self.write(self.html.replace("__DAEMON__", daemon))

        class SameSave(tornado.web.RequestHandler):
            def post(self):
                app.saved()
                ok = self.get_query_argument("ok", None) == "1"
                self.write({"ok": True} if ok else {"message": "Enter a valid email address."})

        class Ok(tornado.web.RequestHandler):
            def post(self):
                app.saved()
                self.write({"ok": True})

        class Ui(tornado.web.RequestHandler):
            def get(self, name, way):
                rec = {r.name: r for r in reticle._FAILURE_UI}[name]
                html = rec.example if way == "fail" else rec.success
                self.set_header("Content-Type", "text/html")
                self.write(UI.replace("__DAEMON__", daemon).replace("__HTML__", json.dumps(html)))

        class DjForm(tornado.web.RequestHandler):
            def get(self):
                msg = self.get_query_argument("msg", "")
                messages = ""
                if msg == "error":
                    messages = '<ul class="messages" role="status"><li class="error">Nothing was changed.</li></ul>'
                elif msg == "success":
                    messages = ('<ul class="messages" role="status"><li class="success">The record "A" was added '
                                'successfully.</li></ul>')
                query = "?fail=1" if self.get_query_argument("fail", None) else ""
                self.set_header("Content-Type", "text/html")
                self.write(DJ_FORM.replace("__DAEMON__", daemon).replace("__MESSAGES__", messages)
                           .replace("__QUERY__", query))

        class DjAdd(tornado.web.RequestHandler):
            def post(self):
                app.saved()
                fail = self.get_query_argument("fail", None)
                self.redirect("/dj/?msg=%s%s" % ("error" if fail else "success", "&fail=1" if fail else ""))

        class SwapSave(tornado.web.RequestHandler):
            def post(self):
                ok = app.saved()
                self.write('<p role="status">Saved</p>' if ok else
                           '<div class="alert alert-danger">Nothing was saved.</div>')

        class SlowAdd(tornado.web.RequestHandler):
            """The form re-rendered with its field marked invalid, streamed slowly: the head at once,
            the form 0.6 s later (the new document arrives before it says what it shows)."""

            async def post(self):
                app.saved()
                self.set_header("Content-Type", "text/html")
                self.write((_HEAD % "Slow") .replace("__DAEMON__", daemon) + "<body><main>")
                await self.flush()
                await asyncio.sleep(0.6)
                self.write('<form method="post" action="/slow/add"><label>Title <input name="title" '
                           'aria-invalid="true" aria-describedby="e"></label><span id="e">Enter a title.</span>'
                           '<button type="submit">Save</button></form></main></body></html>')

        class SockWs(tornado.websocket.WebSocketHandler):
            def check_origin(self, origin):
                return True

            async def on_message(self, message):
                ok = app.saved()
                await asyncio.sleep(1.2)
                try:
                    await self.write_message(json.dumps({"ok": True} if ok else
                                                        {"ok": False, "error": "The server refused the change."}))
                except tornado.websocket.WebSocketClosedError:
                    pass

        return [
            (r"/same/", Page, {"html": SAME}), (r"/same/save", SameSave), (r"/api/ok", Ok),
            (r"/ui/([a-z-]+)/(fail|ok)", Ui), (r"/dj/", DjForm), (r"/dj/add", DjAdd),
            (r"/swap/", Page, {"html": SWAP}), (r"/swap/save", SwapSave),
            (r"/sock/", Page, {"html": SOCK}), (r"/sock/ws", SockWs), (r"/status/", Page, {"html": STATUS}),
            (r"/late/", Page, {"html": LATE}), (r"/slow/", Page, {"html": SLOW_FORM}), (r"/slow/add", SlowAdd),
        ]
