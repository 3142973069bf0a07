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
- `/job/`: Save posts to /job/start (200, the job accepted) and then reads the job's result streamed
  from /job/stream (a progress line at once, the outcome 0.5 s later): `{"success": false, ...}` on
  fault (shown in an error box), else "Imported" in a status region.
- `/status/`: Check posts to /api/ok and shows "0 errors found" in a status region (it logs one
  console error at load).
- `/timer/`: Save submits the form by `form.submit()` from a timer (no submit event, so the page's
  script cannot announce the post); /timer/add answers after 0.8 s with a redirect to the messages page.
- `/wire/<sf|sa|dash>/` wire formats: Save makes a React Router single-fetch form action (202, the
  streamed body carries the redirect, then a client-side navigation to /wire/sf/done), a React server
  action (`text/x-component`, `{"ok":false,"message":...}`, rendered into a plain div), or a Dash
  callback (200 JSON whose `children` "Error: ... Nothing was saved." is rendered into a plain div);
  `/wire/cb/` is the same callback on an endpoint of the app's own naming (/wire/cb/callback, props
  under `props`); `?ok=1` makes the action and the callbacks succeed.
- `/wire/<sk|skd|ts>/` (issue 29): SvelteKit's `use:enhance` form action, exact wire copies of SvelteKit 2:
  `sk` posts to `?/create` (200 with a `failure` envelope, status 422, its devalue `data` carrying the
  message shown in a plain `<p class="error">`; `?ok=1`: a `success` envelope, "Saved"); `skd`'s action
  answers a `redirect` envelope and the page loads /wire/skd/notes/9/__data.json, whose second node is an
  `error` node (404, +error.svelte renders "Not Found"; `?ok=1`: a data node, the note). Both pages carry
  SvelteKit's route announcer (`#svelte-announcer`, "untitled page" after a navigation). `ts` posts a
  Turbo form whose answer is a Turbo Stream (`text/vnd.turbo-stream.html`) appended to #messages.
- `/plain/<form|htmx>/` (issue 29 #4): failures told in plain text.  `form`: Save posts (fetch) to
  /plain/save, a React Router single-fetch answer (200) whose data says "Name is required", shown in a
  plain `<span>` inside the form (`?ok=1`: "Saved").  `htmx`: the form is posted the way htmx's
  `hx-post`/`hx-target` does it (fetch with HX-Request, the answer's HTML swapped into #result, after
  the form): "That email address is not valid." (`?ok=1`: "Thanks, you're subscribed.").  The form
  carries "Required fields are marked *" from the start.  `form?echo=1`: the name typed is "Fix the failed
  build", and the page shows it back ("Added: Fix the failed build"): the person's words, no failure.
- `/toast/` (issue 29 #3): Save posts to /toast/save; the answer is told in a sonner-style toast at the
  foot of the body (`<li data-sonner-toast data-type=… role=status>`, outside the form): "Could not save
  the note" (an error toast, on fault, removed after 3 s) or "Note saved" (removed after 0.6 s).
- `/beacon/` (issue 29 #7): Save posts to /api/ok (200, "Saved"), then sends an analytics beacon by fetch
  to another origin (http://127.0.0.2:9, nothing listens) and logs `console.error` when that send fails.
  `?words=1`: the log says "[analytics] failed to send event todo_created" (no network wording, no URL).
- `/frag/`: an htmx-style fragment save: Save posts to /frag/save, which answers 200 with the HTML of an
  error ("Title must be at least 2 characters."), swapped into a `role=alert` element outside the form and
  every landmark (`hx-target="#messages" hx-swap="innerHTML"`): a second attempt re-renders the same error.
- `/classic/`: a classic post/redirect/get form, no script of its own: a title of 2 characters or more
  answers 303 to `/classic/?saved=1` ("Note saved"); a shorter one answers 200 with the same form again
  and `<p class="error">Title must be at least 2 characters.</p>` in it (no ARIA, no framework).
- `/sonner/`: a vue-sonner toaster (its DOM as vue-sonner 1 renders it: a polite live region holding an
  `ol[data-sonner-toaster]` whose `li[data-sonner-toast]` carries `data-type`): Save posts to /api/ok and
  shows a success toast "Saved" that is removed after 1.5 s.
- `/dl/`: a form post answered by a CSV download (`?empty=1`: a 204): no new document comes.
- `/late/`: a page whose body stays empty for 1.5 s after it loads.
- `/turbo/`: a Rails-shaped notes form under real Turbo Drive (@hotwired/turbo 8): Save posts with fetch;
  a title is answered 303 to `/turbo/?saved=1` ("Note saved", which Turbo fetches and renders), a blank one
  (or `app.fault`) 422 with the form again and its `#error_explanation` ("Title can't be blank").
- `/run/`: a server-driven run over a WebSocket (Streamlit's shape): Save is acknowledged at once
  ("Running…"), its outcome ("Saved", or "The server refused the change." on fault) comes 1.5 s later.
- `/slow/`: a form post whose answer (the form again, its field `aria-invalid`) streams slowly: the
  new document starts at once and shows the invalid field 0.6 s later (`/slower/`: 2.2 s, longer than a new
  page's look is first awaited; `/slowest/`: 6 s, past the horizon's cap).

`app.fault` makes the next answers fail; `app.saves` counts what the server received.
"""

import asyncio
import json
import os
import threading

import tornado.escape
import tornado.web
import tornado.websocket

import reticle
from _harness import NODE_MODULES, ScriptFiles

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

# Hotwire Turbo 8 (tests/.js, installed by tests/bootstrap.sh) drives this form: it posts with fetch,
# follows the 303 itself and renders the page it lands on; a 422 answer is rendered in place.
TURBO_JS = os.path.join(NODE_MODULES, "@hotwired", "turbo", "dist", "turbo.es2017-umd.js")
TURBO_FORM = """<!doctype html><html><head><meta charset="utf-8"><title>Notes</title>
<script src="__DAEMON__/reticle.js"></script><script src="/turbo.js"></script></head>
<body><main><h1>Notes</h1>__MESSAGES__<form method="post" action="/turbo/add"><label>Title <input name="title"
value="__VALUE__"></label><button type="submit">Save</button></form></main></body></html>"""
TURBO_ERRORS = ('<div id="error_explanation"><h2>1 error prohibited this note from being saved:</h2>'
                "<ul><li>Title can't be blank</li></ul></div>")

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

def _socket_page(title, path):
    """Save sends on the WebSocket at `path`; an `ack` shows "Running…", the outcome "Saved" or the error."""
    return _page(title, """<main><div id="out"></div><button type="button" id="save">Save</button></main>
<script>
var ws = new WebSocket('ws://' + location.host + '__PATH__');
ws.onmessage = function (m) {
  var d = JSON.parse(m.data);
  var out = document.getElementById('out');
  if (d.type === 'ack') out.innerHTML = '<p>Running…</p>';
  else if (d.ok) out.innerHTML = '<p role="status">Saved</p>';
  else out.innerHTML = '<div class="alert alert-danger">' + d.error + '</div>';
};
document.getElementById('save').onclick = function () { ws.send(JSON.stringify({save: 1})); };
</script>""".replace("__PATH__", path))


SOCK = _socket_page("Socket", "/sock/ws")  # the outcome 1.2 s after the save
# A server-driven run (Streamlit's shape): the save is acknowledged at once ("Running…"), its outcome comes
# 1.5 s later on the same socket.
RUN = _socket_page("Run", "/run/ws")

JOB = _page("Job", """<main><div id="out"></div><button type="button" id="save">Save</button></main>
<script>
document.getElementById('save').onclick = function () {
  fetch('/job/start', {method: 'POST', body: '{}'}).then(function (r) { return r.json(); }).then(function () {
    return fetch('/job/stream');
  }).then(function (r) { return r.text(); }).then(function (t) {
    var lines = t.trim().split('\\n'), d = JSON.parse(lines[lines.length - 1]);
    document.getElementById('out').innerHTML = d.success ? '<p role="status">Imported</p>' :
      '<div class="alert alert-danger">' + d.error + '</div>';
  });
};
</script>""")

TIMER_FORM = _page("Timer", """<main><h1>Add record</h1><form id="f" method="post" action="/timer/add">
<label>Title <input name="title" value="A"></label><button type="button" id="save">Save</button></form></main>
<script>
document.getElementById('save').onclick = function () {
  setTimeout(function () { document.getElementById('f').submit(); }, 20);  // no submit event fires
};
</script>""")

WIRE = _page("Wire", """<main><h1>Notes</h1><div id="out"></div><button type="button" id="save">Save</button></main>
<div id="svelte-announcer" aria-live="assertive" aria-atomic="true" style="position: absolute; left: 0; top: 0;
 clip: rect(0 0 0 0); clip-path: inset(50%); overflow: hidden; white-space: nowrap; width: 1px; height: 1px"></div>
<script>
var kind = '__KIND__', out = document.getElementById('out');
document.getElementById('save').onclick = function () {
  if (kind === 'sf') {
    fetch('/wire/sf/new.data' + location.search, {method: 'POST', body: 'title=A'}).then(function (r) {
      return r.text();
    }).then(function (t) {
      var m = /"redirect","([^"]*)"/.exec(t);
      if (m) { history.pushState({}, '', m[1]); out.textContent = 'Created'; }
    });
  } else if (kind === 'sa') {
    fetch('/wire/sa/notes' + location.search, {method: 'POST', headers: {'Next-Action': '7f3a'}, body: '["A"]'})
      .then(function (r) { return r.text(); }).then(function (t) {
        var d = JSON.parse(t.split('\\n')[1].slice(2));
        out.textContent = d.ok ? 'Saved' : d.message;
      });
  } else if (kind === 'sk' || kind === 'skd') {
    var fd = new FormData(); fd.append('title', '');
    fetch(location.pathname + '?/create' + location.search.replace('?', '&'), {method: 'POST', body: fd,
      headers: {'accept': 'application/json', 'x-sveltekit-action': 'true'}}).then(function (r) {
        return r.json();
      }).then(function (res) {
        if (res.type === 'failure') {
          out.innerHTML = '<p class="error">' + JSON.parse(res.data)[2] + '</p>';
        } else if (res.type === 'success') {
          out.textContent = 'Saved';
        } else if (res.type === 'redirect') {
          return fetch(res.location + '/__data.json?x-sveltekit-invalidated=01' + location.search.replace('?', '&'))
            .then(function (r) { return r.json(); }).then(function (d) {
              history.pushState({}, '', res.location);
              var node = d.nodes[1];
              out.innerHTML = node.type === 'error' ? '<h1>' + node.status + '</h1><p>' + node.error.message + '</p>'
                : '<h1>Note 9</h1>';
            });
        }
        document.getElementById('svelte-announcer').textContent = 'untitled page';
      });
  } else if (kind === 'ts') {
    fetch('/wire/ts/messages', {method: 'POST', body: 'content=Hello',
      headers: {'accept': 'text/vnd.turbo-stream.html, text/html, application/xhtml+xml'}}).then(function (r) {
        return r.text();
      }).then(function (t) {
        var a = t.indexOf('<template>'), b = t.indexOf('</template>');
        out.insertAdjacentHTML('beforeend', a >= 0 && b > a ? t.slice(a + 10, b) : '');
      });
  } else if (kind === 'cb') {
    fetch('/wire/cb/callback' + location.search, {method: 'POST', headers: {'Content-Type': 'application/json'},
      body: '{"inputs":[{"id":"save","property":"n_clicks","value":1}]}'}).then(function (r) { return r.json(); })
      .then(function (d) { out.textContent = d.props.children; });
  } else {
    fetch('/_dash-update-component' + location.search, {method: 'POST', headers: {'Content-Type': 'application/json'},
      body: '{"output":"out.children"}'}).then(function (r) { return r.json(); }).then(function (d) {
        out.textContent = d.response.out.children;
      });
  }
};
</script>""")

PLAIN = _page("Plain", """<main><h1>Subscribe</h1>
<form id="f" onsubmit="return false"><p class="hint">Required fields are marked *</p>
<label>Name * <input name="name" value=""></label><span class="msg" id="msg"></span>
<button type="button" id="save">Save</button></form><div id="result"></div></main>
<script>
var kind = '__KIND__', q = location.search;
if (q.indexOf('echo=1') >= 0) document.querySelector('[name=name]').value = 'Fix the failed build';
document.getElementById('save').onclick = function () {
  if (kind === 'form') {
    fetch('/plain/save.data' + q, {method: 'POST', body: 'name='}).then(function (r) { return r.json(); })
      .then(function (d) { document.getElementById('msg').textContent = d[4]; });
  } else {
    fetch('/plain/email' + q, {method: 'POST', body: 'email=ada',
      headers: {'HX-Request': 'true', 'HX-Target': 'result', 'HX-Current-URL': location.href}})
      .then(function (r) { return r.text(); }).then(function (t) {
        var target = document.getElementById('result');
        target.classList.add('htmx-swapping');
        setTimeout(function () {
          target.innerHTML = t; target.classList.remove('htmx-swapping'); target.classList.add('htmx-settling');
          setTimeout(function () { target.classList.remove('htmx-settling'); }, 20);
        }, 0);
      });
  }
};
</script>""")

TOAST = _page("Toast", """<main><h1>Note</h1><form id="f" onsubmit="return false">
<label>Title <input name="title" value="A"></label><button type="button" id="save">Save</button></form></main>
<section aria-label="Notifications"><ol data-sonner-toaster id="toaster"></ol></section>
<script>
function toast(type, text, ms) {
  var li = document.createElement('li');
  li.setAttribute('data-sonner-toast', ''); li.setAttribute('data-type', type); li.setAttribute('role', 'status');
  li.setAttribute('aria-live', 'polite'); li.textContent = text;
  document.getElementById('toaster').appendChild(li);
  setTimeout(function () { li.remove(); }, ms);
}
document.getElementById('save').onclick = function () {
  fetch('/toast/save', {method: 'POST', body: '{"title": "A"}'}).then(function (r) {
    if (r.ok) toast('success', 'Note saved', 600); else toast('error', 'Could not save the note', 3000);
  });
};
</script>""")

FRAG = _page("Fragment", """<div role="alert" id="messages"></div>
<main><form id="f" onsubmit="return false"><label>Title <input name="title" value="x"></label>
<button type="button" id="save">Save</button></form></main>
<script>
document.getElementById('save').onclick = function () {
  fetch('/frag/save', {method: 'POST', body: 'title=x'}).then(function (r) { return r.text(); })
    .then(function (html) { document.getElementById('messages').innerHTML = html; });
};
</script>""")

CLASSIC = _page("Notes", """<main><h1>Notes</h1>__SAVED__<form method="post" action="/classic/" id="note">
<p><label for="title">Title</label> <input id="title" name="title" value="__VALUE__"></p>__ERROR__
<p class="help">Give the note a short title.</p>
<p><button type="submit">Save</button></p></form></main>""")

SONNER = _page("Sonner", """<main><h1>Todos</h1><label>Todo <input id="todo" value="milk"></label>
<button type="button" id="save">Save</button></main>
<section aria-label="Notifications alt+T" tabindex="-1" aria-live="polite" aria-relevant="additions text"
 aria-atomic="false"><ol dir="ltr" tabindex="-1" data-sonner-toaster="true" data-theme="light"
 data-y-position="bottom" data-x-position="right" style="--offset: 32px; --width: 356px; --gap: 14px;"></ol></section>
<script>
document.getElementById('save').onclick = function () {
  fetch('/api/ok', {method: 'POST', body: '{}'}).then(function () {
    var li = document.createElement('li');
    li.setAttribute('data-sonner-toast', ''); li.setAttribute('data-styled', 'true');
    li.setAttribute('data-mounted', 'true'); li.setAttribute('data-type', 'success');
    li.setAttribute('data-visible', 'true'); li.setAttribute('tabindex', '0');
    li.innerHTML = '<div data-icon=""></div><div data-content=""><div data-title="">Saved</div></div>';
    document.querySelector('[data-sonner-toaster]').appendChild(li);
    setTimeout(function () { li.remove(); }, 1500);
  });
};
</script>""")

BEACON = _page("Beacon", """<main><div id="out"></div><button type="button" id="save">Save</button></main>
<script>
document.getElementById('save').onclick = function () {
  fetch('/api/ok', {method: 'POST', body: '{}'}).then(function () {
    document.getElementById('out').textContent = 'Saved';
    return fetch('http://127.0.0.2:9/collect', {method: 'POST', mode: 'no-cors', body: 'e=save'});
  }).catch(function (e) {
    if (location.search.indexOf('words=1') >= 0) console.error('[analytics] failed to send event todo_created');
    else console.error('analytics send failed: ' + e);
  });
};
</script>""")

EXPORT = _page("Export", """<main><h1>Export rows</h1><form method="post" action="/dl/export__QUERY__">
<button type="submit">Save</button></form></main>""")

SLOW_FORM = _page("Slow", """<main><form method="post" action="/slow/add"><label>Title <input name="title"></label>
<button type="submit">Save</button></form></main>""")
# the same form whose answer takes longer to finish than a new page's look is first awaited (SCAN_WAIT_MS)
SLOWER_FORM = SLOW_FORM.replace("/slow/add", "/slow/add?after=2.2")
SLOWEST_FORM = SLOW_FORM.replace("/slow/add", "/slow/add?after=6")

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

        class FragSave(tornado.web.RequestHandler):
            def post(self):
                app.saved()
                self.set_header("Content-Type", "text/html; charset=utf-8")
                self.write("<p>Title must be at least 2 characters.</p>")

        class Classic(tornado.web.RequestHandler):
            def page(self, saved="", value="", error=""):
                self.set_header("Content-Type", "text/html")
                self.write(CLASSIC.replace("__DAEMON__", daemon).replace("__SAVED__", saved)
                           .replace("__VALUE__", value).replace("__ERROR__", error))

            def get(self):
                self.page('<p class="flash">Note saved</p>' if self.get_query_argument("saved", "") else "")

            def post(self):
                title = self.get_body_argument("title", "").strip()
                if len(title) < 2:
                    self.page(value=tornado.escape.xhtml_escape(title),
                              error='<p class="error">Title must be at least 2 characters.</p>')
                    return
                app.saved()
                self.redirect("/classic/?saved=1", status=303)

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

        def turbo_page(messages, value=""):
            return (TURBO_FORM.replace("__DAEMON__", daemon).replace("__MESSAGES__", messages)
                    .replace("__VALUE__", value))

        class TurboForm(tornado.web.RequestHandler):
            def get(self):
                saved = self.get_query_argument("saved", None)
                self.write(turbo_page('<p role="status">Note saved</p>' if saved else ""))

        class TurboAdd(tornado.web.RequestHandler):
            """Rails' way: a 303 to the list when the note was saved, the form again with its errors (422)."""

            def post(self):
                title = self.get_body_argument("title", "")
                if app.saved() and title:
                    self.redirect("/turbo/?saved=1", status=303)
                    return
                self.set_status(422)
                self.write(turbo_page(TURBO_ERRORS, title))

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
                await asyncio.sleep(float(self.get_argument("after", "0.6")))
                self.write('<form method="post" action="/slow/add"><label>Title <input name="title" '
                           'aria-invalid="true" aria-describedby="e"></label><span id="e">Enter a title.</span>'
                           '<button type="submit">Save</button></form></main></body></html>')

        class TimerAdd(tornado.web.RequestHandler):
            """A slow server (0.8 s) that then redirects to the messages page."""

            async def post(self):
                ok = app.saved()
                await asyncio.sleep(0.8)
                self.redirect("/dj/?msg=%s" % ("success" if ok else "error"))

        class WirePage(tornado.web.RequestHandler):
            def get(self, kind):
                self.set_header("Content-Type", "text/html")
                self.write(WIRE.replace("__DAEMON__", daemon).replace("__KIND__", kind))

        class SingleFetch(tornado.web.RequestHandler):
            """React Router single fetch: a form action that redirects answers 202, its streamed body
            carrying the redirect."""

            async def post(self):
                app.saved()
                self.set_status(202)
                self.set_header("Content-Type", "text/x-script")
                self.write('[{"_1":2},"root",{"_3":4},')
                await self.flush()
                await asyncio.sleep(0.1)
                self.write('"redirect","/wire/sf/done","status",302,"revalidate",true]')

        class SvelteKitPage(tornado.web.RequestHandler):
            """A SvelteKit page: GET renders it; POST `?/create` is its form action, answered as SvelteKit 2
            answers a `use:enhance` fetch (200 and a JSON envelope)."""

            def get(self, kind):
                self.set_header("Content-Type", "text/html")
                self.write(WIRE.replace("__DAEMON__", daemon).replace("__KIND__", kind))

            def post(self, kind):
                app.saved()
                ok = self.get_query_argument("ok", None) == "1"
                self.set_header("Content-Type", "application/json")
                if kind == "skd":
                    self.write('{"type":"redirect","status":303,"location":"/wire/skd/notes/9"}')
                elif ok:
                    self.write('{"type":"success","status":200,"data":"[{\\"id\\":1},9]"}')
                else:
                    self.write('{"type":"failure","status":422,"data":"[{\\"title\\":1,\\"message\\":2},'
                               '\\"\\",\\"Title is required\\"]"}')

        class SvelteKitData(tornado.web.RequestHandler):
            """The note page's `__data.json`: the layout's data node, then the page's (an `error` node: 404)."""

            def get(self):
                ok = self.get_query_argument("ok", None) == "1"
                self.set_header("Content-Type", "application/json")
                page = ('{"type":"data","data":[{"note":1},{"id":2},9],"uses":{"params":["id"]}}' if ok else
                        '{"type":"error","error":{"message":"Not Found"},"status":404}')
                self.write('{"type":"data","nodes":[{"type":"data","data":[{"user":1},null],"uses":{}},%s]}' % page)

        class TurboStream(tornado.web.RequestHandler):
            def post(self):
                app.saved()
                self.set_header("Content-Type", "text/vnd.turbo-stream.html; charset=utf-8")
                self.write('<turbo-stream action="append" target="messages"><template><div id="message_9">Hello'
                           '</div></template></turbo-stream>')

        class PlainPage(tornado.web.RequestHandler):
            def get(self, kind):
                self.set_header("Content-Type", "text/html")
                self.write(PLAIN.replace("__DAEMON__", daemon).replace("__KIND__", kind))

        class PlainSave(tornado.web.RequestHandler):
            """React Router 7 single fetch: the action's data, 200, the message as the app chose to word it."""

            def post(self):
                app.saved()
                ok = self.get_query_argument("ok", None) == "1"
                self.set_header("Content-Type", "text/x-script")
                echo = self.get_query_argument("echo", None) == "1"
                said = "Added: Fix the failed build" if echo else "Saved" if ok else "Name is required"
                self.write('[{"_1":2},"data",{"_3":4},"fieldError","%s"]' % said)

        class PlainEmail(tornado.web.RequestHandler):
            """An htmx endpoint: 200 and the fragment to swap in."""

            def post(self):
                app.saved()
                ok = self.get_query_argument("ok", None) == "1"
                self.set_header("Content-Type", "text/html")
                self.write('<p>Thanks, you&#39;re subscribed.</p>' if ok else
                           '<p class="field">That email address is not valid.</p>')

        class ToastSave(tornado.web.RequestHandler):
            def post(self):
                if not app.saved():
                    self.set_status(500)
                self.write({"ok": self.get_status() < 400})

        class ServerAction(tornado.web.RequestHandler):
            def post(self):
                app.saved()
                ok = self.get_query_argument("ok", None) == "1"
                self.set_header("Content-Type", "text/x-component")
                self.write('0:{"a":"$@1","f":"","b":"dev"}\n' +
                           ('1:{"ok":true,"id":7}' if ok else
                            '1:{"ok":false,"message":"A note with that title exists."}'))

        class DashCallback(tornado.web.RequestHandler):
            def post(self):
                app.saved()
                ok = self.get_query_argument("ok", None) == "1"
                text = "Saved 3 rows." if ok else "Error: the row is locked. Nothing was saved."
                self.write({"multi": True, "response": {"out": {"children": text}}})

        class JsonCallback(tornado.web.RequestHandler):
            """A dashboard's one callback endpoint (not Dash's name): 200 with the new props."""

            def post(self):
                app.saved()
                ok = self.get_query_argument("ok", None) == "1"
                text = "Saved 3 rows." if ok else "Error: the row is locked. Nothing was saved."
                self.write({"props": {"children": text}})

        class ExportPage(tornado.web.RequestHandler):
            def get(self):
                query = "?empty=1" if self.get_query_argument("empty", None) else ""
                self.set_header("Content-Type", "text/html")
                self.write(EXPORT.replace("__DAEMON__", daemon).replace("__QUERY__", query))

        class Export(tornado.web.RequestHandler):
            """A form post that brings no new document: a CSV download, or (`?empty=1`) a 204."""

            def post(self):
                app.saved()
                if self.get_query_argument("empty", None):
                    self.set_status(204)
                    return
                self.set_header("Content-Type", "text/csv")
                self.set_header("Content-Disposition", 'attachment; filename="rows.csv"')
                self.write("id,title\n1,A\n")

        class JobStart(tornado.web.RequestHandler):
            def post(self):
                self.write({"accepted": True, "job": 1})

        class JobStream(tornado.web.RequestHandler):
            """The job's result, streamed: a progress line at once, the outcome 0.5 s later."""

            async def get(self):
                ok = app.saved()
                self.set_header("Content-Type", "application/x-ndjson")
                self.write('{"progress": 0.1}\n')
                await self.flush()
                await asyncio.sleep(0.5)
                self.write(json.dumps({"success": True} if ok else
                                      {"success": False, "error": "The import failed: row 3 is invalid."}) + "\n")

        class SockWs(tornado.websocket.WebSocketHandler):
            """A save over the socket: acknowledged at once when `ack`, its outcome `delay` s later."""

            def initialize(self, delay, ack=False):
                self.delay = delay
                self.ack = ack

            def check_origin(self, origin):
                return True

            async def on_message(self, message):
                ok = app.saved()
                try:
                    if self.ack:
                        await self.write_message(json.dumps({"type": "ack"}))
                    await asyncio.sleep(self.delay)
                    await self.write_message(json.dumps({"ok": True} if ok else
                                                        {"ok": False, "error": "The server refused the change."}))
                except tornado.websocket.WebSocketClosedError:
                    pass

        return [
            (r"/same/", Page, {"html": SAME}), (r"/same/save", SameSave), (r"/api/ok", Ok),
            (r"/ui/([a-z-]+)/(fail|ok)", Ui), (r"/dj/", DjForm), (r"/dj/add", DjAdd),
            (r"/swap/", Page, {"html": SWAP}), (r"/swap/save", SwapSave),
            (r"/sock/", Page, {"html": SOCK}), (r"/sock/ws", SockWs, {"delay": 1.2}), (r"/run/", Page, {"html": RUN}),
            (r"/run/ws", SockWs, {"delay": 1.5, "ack": True}), (r"/status/", Page, {"html": STATUS}),
            (r"/late/", Page, {"html": LATE}), (r"/slow/", Page, {"html": SLOW_FORM}), (r"/slower/", Page, {"html": SLOWER_FORM}),
            (r"/slowest/", Page, {"html": SLOWEST_FORM}), (r"/slow/add", SlowAdd),
            (r"/wire/(sf|sa|dash|cb|ts)/", WirePage), (r"/wire/cb/callback", JsonCallback),
            (r"/wire/(sk|skd)/", SvelteKitPage), (r"/wire/skd/notes/9/__data.json", SvelteKitData),
            (r"/wire/ts/messages", TurboStream), (r"/plain/(form|htmx)/", PlainPage),
            (r"/plain/save.data", PlainSave), (r"/plain/email", PlainEmail),
            (r"/toast/", Page, {"html": TOAST}), (r"/toast/save", ToastSave), (r"/beacon/", Page, {"html": BEACON}),
            (r"/frag/", Page, {"html": FRAG}), (r"/classic/", Classic), (r"/frag/save", FragSave), (r"/sonner/", Page, {"html": SONNER}),
            (r"/wire/sf/new.data", SingleFetch),
            (r"/wire/sa/notes", ServerAction), (r"/_dash-update-component", DashCallback),
            (r"/dl/", ExportPage), (r"/dl/export", Export),
            (r"/job/", Page, {"html": JOB}), (r"/job/start", JobStart), (r"/job/stream", JobStream),
            (r"/timer/", Page, {"html": TIMER_FORM}), (r"/timer/add", TimerAdd),
            (r"/(turbo\.js)", ScriptFiles, {"files": {"turbo.js": TURBO_JS}}), (r"/turbo/", TurboForm), (r"/turbo/add", TurboAdd),
        ]
