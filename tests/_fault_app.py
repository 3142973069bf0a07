"""The fixture app of tests/test_faults.py: one page that saves with fetch, with XHR, with a form
post and as a SvelteKit form action (a JSON envelope under HTTP 200), and opens a WebSocket.  The server counts every write and socket it received, so a test can
tell a fault's answer from the server's."""

import tornado.gen
import tornado.web
import tornado.websocket

PAGE = """<!doctype html><html><head><title>faults</title>%(tag)s</head><body>
<h1>Notes</h1>
<button id="save">Save</button> <button id="xsave">Save with XHR</button>
<form method="post" action="/form"><input name="note" value="hi"><button>Post the form</button></form>
<button id="ws">Connect</button> <button id="quiet">Save quietly</button> <button id="many">Store all 30</button>
<button id="sk">Create note</button> <button id="slow">Save slowly</button>
<div id="msg"></div>
<script>
function show(text, failed) {
  var m = document.getElementById('msg');
  m.textContent = text;
  if (failed) m.setAttribute('role', 'alert'); else m.removeAttribute('role');
}
document.getElementById('save').addEventListener('click', function () {
  show('');
  fetch('/api/save', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"note":"hi"}'})
    .then(function (r) { return r.text().then(function (t) { return [r.status, t]; }); })
    .then(function (a) { show(a[0] === 200 ? 'Saved' : 'Save failed (' + a[0] + ')', a[0] !== 200); },
          function () { show('Save failed (network)', true); });
});
document.getElementById('xsave').addEventListener('click', function () {
  show('');
  var x = new XMLHttpRequest();
  x.open('POST', '/api/xsave');
  x.setRequestHeader('Content-Type', 'application/json');
  x.onload = function () { show(x.status === 200 ? 'Saved' : 'Save failed (' + x.status + ')', x.status !== 200); };
  x.onerror = function () { show('Save failed (network)', true); };
  x.send('{"note":"x"}');
});
document.getElementById('quiet').addEventListener('click', function () {
  fetch('/api/quiet', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"note":"q"}'})
    .then(function (r) { return r.text(); }, function () {});
});
document.getElementById('slow').addEventListener('click', function () {
  // answered 1.5 s later, and the page busy for 300 ms after sending it (a heavy render): a plain act returns
  // long after the write began and long before it is answered (--teeth must still find the write)
  fetch('/api/slow', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"note":"s"}'})
    .then(function (r) { return r.text(); }, function () {});
  var until = Date.now() + 300;
  while (Date.now() < until) { /* busy */ }
});
document.getElementById('many').addEventListener('click', function () {
  // thirty writes to thirty paths, one after the other whatever each answered (issue 27: --teeth's bound)
  show('');
  var i = 0;
  function next() {
    if (i === 30) { show('Stored all'); return; }
    var n = i++;
    fetch('/api/many/' + n, {method: 'POST', body: String(n)}).then(next, next);
  }
  next();
});
document.getElementById('sk').addEventListener('click', function () {
  // what SvelteKit's use:enhance does: POST ?/create, read the action's JSON envelope (data by devalue)
  show('');
  var body = new FormData();
  body.append('title', 'Milk');
  fetch('/sk?/create', {method: 'POST', headers: {'x-sveltekit-action': 'true', accept: 'application/json'}, body: body})
    .then(function (r) { return r.json(); })
    .then(function (res) {
      if (res.type === 'success') show('Note created');
      else if (res.type === 'failure') { var d = JSON.parse(res.data); show(d[d[0].message], true); }
      else show('Something went wrong', true);
    }, function () { show('Something went wrong', true); });
});
document.getElementById('ws').addEventListener('click', function () {
  show('');
  var s = new WebSocket('ws://' + location.host + '/ws');
  s.onopen = function () { s.send('ping'); };
  s.onmessage = function (e) { show('Live: ' + e.data); };
  s.onerror = function () { show('Connection failed', true); };
});
</script></body></html>"""


class FaultApp:
    """The server side: `writes` lists (path, body) of every write received, `sockets` counts
    the WebSocket handshakes that arrived."""

    def __init__(self, daemon_url, tag=True):
        self.tag = '<script src="%s/reticle.js"></script>' % daemon_url if tag else ""
        self.writes = []
        self.sockets = 0

    def count(self, path):
        return sum(1 for p, _ in self.writes if p == path)

    def routes(self):
        return [(r"/api/(save|xsave|quiet|many/[0-9]+)", _Save, {"app": self}), (r"/api/slow", _Slow, {"app": self}),
                (r"/form", _Form, {"app": self}),
                (r"/sk", _SvelteKitAction, {"app": self}),
                (r"/ws", _Socket, {"app": self}), (r"/.*", _Page, {"app": self})]


class _Base(tornado.web.RequestHandler):
    def initialize(self, app):
        self.app = app


class _Page(_Base):
    def get(self):
        self.set_header("Content-Type", "text/html")
        self.write(PAGE % {"tag": self.app.tag})


class _Save(_Base):
    def post(self, which):
        self.app.writes.append(("/api/" + which, self.request.body.decode()))
        self.set_header("Content-Type", "application/json")
        self.write('{"saved": true}')


class _Slow(_Base):
    async def post(self):
        self.app.writes.append(("/api/slow", self.request.body.decode()))
        await tornado.gen.sleep(1.5)
        self.set_header("Content-Type", "application/json")
        self.write('{"saved": true}')


class _SvelteKitAction(_Base):
    """A SvelteKit form action's answer as its client reads it: HTTP 200, a JSON envelope."""

    def post(self):
        self.app.writes.append(("/sk", self.request.body.decode(errors="replace")))
        self.set_header("Content-Type", "application/json")
        self.write('{"type":"success","status":200,"data":"[{\\"id\\":1},7]"}')


class _Form(_Base):
    def post(self):
        self.app.writes.append(("/form", self.request.body.decode()))
        self.redirect("/?posted=1", status=303)


class _Socket(tornado.websocket.WebSocketHandler):
    def initialize(self, app):
        self.app = app

    def check_origin(self, origin):
        return True

    def open(self):
        self.app.sockets += 1

    def on_message(self, message):
        self.write_message("pong")
