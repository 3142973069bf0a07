"""Fixture apps of three shapes from APP-SHAPES.md, each with a save that can fail on
the server, for browser tests that check the truth on the server.

- `/fragments/` swaps HTML fragments in the htmx style (a tiny vanilla XHR swapper):
  POST /profile answers 200 with "<p role=status>Profile saved</p>", or on fault an error
  fragment with role=alert (still 200); an empty name re-renders the field with
  aria-invalid and its error text (retargeted by an `HX-Retarget` header).  "Run chain"
  posts twice to /queue/join with different JSON bodies (fn_index 1, then 2).
- `/jobs/` is a queue + stream app: POST /jobs answers 200 {"job": id}, the page shows
  "Profile saved" at once (the planted bug), then reads GET /jobs/<id>/stream
  (text/event-stream) with fetch and a reader; when the stream says success false it shows
  the declared error toast `.toast-error`, else the declared info toast `.toast-info`
  "Profile stored".  `/jobs/?toast=0` shows no toast, so only the stream tells.
- `/socket/` is server-driven UI over a WebSocket at /ws with socket.io-style framing:
  a click sends `42["save",{...}]`, the server pushes `42["update",{...}]`, or on fault
  `42["error",{"text":"Save failed"}]`, which the page shows with role=alert.
  The jobs page also has "Load feed" (GET /feed: FEED_ROWS NDJSON lines in one burst, read
  by the page with text()), "Peek at the big feed" (GET /feed?big=1: BIG_FEED_BYTES the page
  never reads) and "Read one tick" (GET /ticker: an endless event stream the page cancels
  after one message).
- `/components/` saves the same way from inside a web component's open shadow root and shows
  the answer in another component's closed shadow root, as design systems do.
- `/many-components/` mounts 2,100 components with a shadow root each, more than the SDK
  searches for alerts.
- `/arrival/` is a server-rendered page that already shows an error (role=alert) on load,
  beside alerts that are not on screen (hidden, inside a template, text in a script); its
  buttons make a field invalid ("Check email"), fill an assertive region ("Go offline"),
  unhide an alert ("Show notice"), add one alert twice ("Warn twice") and open an
  alertdialog around an invalid field ("Ask to confirm").

Use: `shapes = Shapes()`, then `Live(tmp, NOT_FOUND, path="/fragments/",
routes=shapes.routes)` (routes is called with the daemon's URL).  The test flips
`shapes.fault` (the next saves fail) and `shapes.hold_streams` (a job's stream stays open
after its first progress message), and reads the truth from `shapes.saved()` (profiles
saved, with the shape that saved them), `shapes.joins()` (bodies posted to /queue/join),
`shapes.jobs()` (id -> name, status queued|running|done|failed), `shapes.socket_messages()`
(frames the server received) and `shapes.tickers_open` (/ticker streams still connected);
`shapes.reset()` clears all of it and stops the jobs of an earlier test.
"""

import asyncio
import itertools
import json
import threading

import tornado.iostream
import tornado.web
import tornado.websocket

from _harness import TemplatePage

FEED_ROWS = 520
BIG_FEED_BYTES = 16 << 20
NOT_FOUND = "<!doctype html><title>Not found</title><p>not found</p>"

_HEAD = """<!doctype html><html><head><meta charset="utf-8"><title>Profile</title>
<script src="%(daemon)s/reticle.js"></script>
<style>.toast-error{background:#fdd;padding:4px}.error{color:#b00}</style></head>"""

FRAGMENTS_PAGE = _HEAD + """<body><h1>Profile (fragments)</h1>
<div id="name-field"><label>Name <input name="name" id="name"></label></div>
<button data-post="/profile" data-include="#name" data-target="#result">Save profile</button>
<button id="chain">Run chain</button>
<div id="result"></div>
<div id="chain-result" role="status"></div>
<script>
  // a tiny htmx-style swapper: XHR POST, the answer's HTML replaces the target's content;
  // an HX-Retarget response header picks another target
  document.addEventListener("click", function (e) {
    var b = e.target.closest("[data-post]");
    if (!b) return;
    var x = new XMLHttpRequest();
    x.open("POST", b.getAttribute("data-post"));
    x.setRequestHeader("Content-Type", "application/x-www-form-urlencoded");
    x.setRequestHeader("HX-Request", "true");
    x.onload = function () {
      var target = x.getResponseHeader("HX-Retarget") || b.getAttribute("data-target");
      document.querySelector(target).innerHTML = x.responseText;
    };
    var field = document.querySelector(b.getAttribute("data-include"));
    x.send("name=" + encodeURIComponent(field ? field.value : ""));
  });
  function join(fnIndex, data) {
    return fetch("/queue/join", {method: "POST", headers: {"Content-Type": "application/json"},
                                 body: JSON.stringify({fn_index: fnIndex, data: data, session_hash: "abc"})})
      .then(function (r) { return r.json(); });
  }
  document.getElementById("chain").onclick = function () {
    var name = document.getElementById("name").value;
    join(1, [name]).then(function (a) { return join(2, [a.output]); }).then(function (b) {
      document.getElementById("chain-result").textContent = "Chain done: " + b.output;
    });
  };
</script></body></html>"""

JOBS_PAGE = _HEAD + """<body><h1>Profile (jobs)</h1>
<label>Name <input id="name"></label>
<button id="save">Save profile</button>
<button id="feed">Load feed</button>
<button id="peek">Peek at the big feed</button>
<button id="tick">Read one tick</button>
<button id="awkward">Read the awkward stream</button>
<div id="status" role="status"></div>
<div id="rows"></div>
<progress id="bar" max="3" value="0"></progress>
<div id="toasts"></div>
<script>
  // a selector that does not parse is ignored (with a warning) and the others still count
  reticle.describe({toasts: {error: [".toast-error", "[[not a selector"], info: ".toast-info"}});
  var showToast = new URLSearchParams(location.search).get("toast") !== "0";
  function $(id) { return document.getElementById(id); }
  function readEvents(res, onMessage) {
    var reader = res.body.getReader(), dec = new TextDecoder(), buf = "";
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) return;
        buf += dec.decode(r.value, {stream: true});
        var i;
        while ((i = buf.indexOf("\\n\\n")) >= 0) {
          var block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          var data = block.split("\\n").filter(function (l) { return l.indexOf("data:") === 0; })
            .map(function (l) { return l.slice(5).trim(); }).join("\\n");
          if (data && onMessage(JSON.parse(data)) === false) return reader.cancel();
        }
        return pump();
      });
    }
    return pump();
  }
  $("feed").onclick = function () {
    fetch("/feed").then(function (r) { return r.text(); }).then(function (t) {
      var lines = t.split("\\n").filter(Boolean);
      $("rows").textContent = lines.length + " rows, last " + JSON.parse(lines[lines.length - 1]).row;
    });
  };
  $("peek").onclick = function () {
    // looks at the status only and never reads the body
    fetch("/feed?big=1").then(function (r) { $("rows").textContent = "big feed " + r.status; });
  };
  $("tick").onclick = function () {
    // reads one message of an endless stream, then lets go of it
    fetch("/ticker").then(function (r) {
      var reader = r.body.getReader();
      return reader.read().then(function (x) {
        $("rows").textContent = "tick read: " + new TextDecoder().decode(x.value).trim();
        return reader.cancel();
      });
    });
  };
  $("awkward").onclick = function () {
    fetch("/awkward").then(function (r) { return r.text(); }).then(function (t) {
      $("rows").textContent = "awkward stream read, " + t.length + " characters";
    });
  };
  $("save").onclick = function () {
    fetch("/jobs", {method: "POST", headers: {"Content-Type": "application/json"},
                    body: JSON.stringify({name: $("name").value})})
      .then(function (r) { return r.json(); })
      .then(function (j) {
        $("status").textContent = "Profile saved";  // optimistic: the planted bug
        return fetch("/jobs/" + j.job + "/stream").then(function (res) {
          return readEvents(res, function (m) {
            if (m.msg === "progress") $("bar").value = m.step;
            if (m.msg !== "process_completed") return true;
            if (showToast) {
              var t = document.createElement("div");
              t.className = m.success ? "toast-info" : "toast-error";
              t.textContent = m.success ? "Profile stored" : "Save failed: " + m.output.error;
              $("toasts").appendChild(t);
            }
            return false;  // done: the page lets go of the stream
          });
        });
      });
  };
</script></body></html>"""

SOCKET_PAGE = _HEAD + """<body><h1>Profile (socket)</h1>
<label>Name <input id="name"></label>
<button id="save">Save profile</button>
<div id="status"></div>
<div id="errors"></div>
<script>
  function $(id) { return document.getElementById(id); }
  var ws = new WebSocket("ws://" + location.host + "/ws");
  ws.onopen = function () { $("status").textContent = "Connected"; };
  ws.onmessage = function (e) {
    var m = /^42(.*)$/.exec(e.data);
    if (!m) return;
    var packet = JSON.parse(m[1]), name = packet[0], body = packet[1];
    if (name === "update") $(body.id).textContent = body.text;
    if (name === "error") {
      var a = document.createElement("div");
      a.setAttribute("role", "alert");
      a.textContent = body.text;
      $("errors").appendChild(a);
    }
  };
  $("save").onclick = function () {
    $("status").textContent = "Saving...";
    ws.send("42" + JSON.stringify(["save", {name: $("name").value}]));
  };
</script></body></html>"""

# A design system's components: the form and its message live in shadow trees, the message in
# a closed one (only the SDK's attachShadow patch can see it).  The save answers as /fragments/.
COMPONENTS_PAGE = _HEAD + """<body><h1>Profile (components)</h1>
<ds-form></ds-form><ds-toaster></ds-toaster>
<script>
customElements.define('ds-toaster', class extends HTMLElement {
  constructor() { super(); this.root = this.attachShadow({mode: 'closed'}); }
  show(html) { this.root.innerHTML = '<div class="toast">' + html + '</div>'; }
});
customElements.define('ds-form', class extends HTMLElement {
  constructor() {
    super();
    var root = this.attachShadow({mode: 'open'});
    root.innerHTML = '<label>Name <input id="name"></label> <button>Save profile</button>';
    root.querySelector('button').addEventListener('click', function () {
      var body = 'name=' + encodeURIComponent(root.getElementById('name').value);
      fetch('/profile', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: body})
        .then(function (r) { return r.text(); })
        .then(function (html) { document.querySelector('ds-toaster').show(html); });
    });
  }
});
</script></body></html>"""

# More components than the SDK searches for alerts (2,000 shadow roots): it must say so.
MANY_COMPONENTS_PAGE = _HEAD + """<body><h1>Catalogue</h1><div id="host"></div>
<script>
customElements.define('ds-card', class extends HTMLElement {
  constructor() { super(); this.attachShadow({mode: 'open'}).innerHTML = '<span>card</span>'; }
});
var host = document.getElementById('host');
for (var i = 0; i < 2100; i++) host.appendChild(document.createElement('ds-card'));
</script></body></html>"""

ARRIVAL_PAGE = _HEAD + """<body><h1>Account</h1>
<p class="error" role="alert">Your session expired,<script>var inAlert = "script text";</script>
<style>.error b{font-weight:bold}</style> please sign in again</p>
<div role="alert" id="notice" hidden>Your card expires this month</div>
<template><p role="alert">An alert inside a template</p></template>
<script>var notShown = "<p role=alert>alert text inside a script</p>";</script>
<form><label>Email <input id="email" name="email"></label>
<span id="email-error" class="error"></span>
<button type="button" id="check">Check email</button></form>
<div aria-live="assertive" id="live"></div>
<div id="warnings"></div>
<button id="offline">Go offline</button>
<button id="show">Show notice</button>
<button id="twice">Warn twice</button>
<button id="confirm">Ask to confirm</button>
<script>
  function $(id) { return document.getElementById(id); }
  $("offline").onclick = function () { $("live").textContent = "Connection lost"; };
  $("show").onclick = function () { $("notice").hidden = false; };
  $("confirm").onclick = function () {
    var d = document.createElement("div");
    d.setAttribute("role", "alertdialog");
    d.innerHTML = 'Type DELETE to confirm <input aria-label="Confirmation" aria-invalid="true" ' +
      'aria-describedby="confirm-error"> <span id="confirm-error">Type DELETE exactly</span>';
    document.body.appendChild(d);
  };
  $("twice").onclick = function () {
    for (var i = 0; i < 2; i++) {
      var w = document.createElement("p");
      w.setAttribute("role", "alert");
      w.textContent = "Disk almost full";
      $("warnings").appendChild(w);
    }
  };
  document.getElementById("check").onclick = function () {
    var f = document.getElementById("email");
    f.setAttribute("aria-describedby", "email-error");
    document.getElementById("email-error").textContent = "Enter a valid email address";
    f.setAttribute("aria-invalid", "true");
  };
</script></body></html>"""


class Shapes:
    """The server side of the fixture apps: its state is the truth a test checks."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.reset()

    def reset(self):
        with self._lock:
            self.generation = getattr(self, "generation", 0) + 1  # jobs of an earlier test stop
            self.fault = False  # the next saves fail on the server
            self.hold_streams = False  # job streams stay open after their first progress message
            self._saved = []
            self._joins = []
            self._jobs = {}
            self._socket = []
            self.tickers_open = 0  # /ticker streams whose connection the browser still holds

    def _save(self, name, via):
        """Save a profile unless the fault is on; -> whether it was saved."""
        with self._lock:
            if self.fault:
                return False
            self._saved.append({"name": name, "via": via})
            return True

    def saved(self):
        with self._lock:
            return [dict(x) for x in self._saved]

    def joins(self):
        with self._lock:
            return [dict(x) for x in self._joins]

    def jobs(self):
        with self._lock:
            return {k: dict(v) for k, v in self._jobs.items()}

    def socket_messages(self):
        with self._lock:
            return list(self._socket)

    def routes(self, daemon):
        """Tornado rules for every shape; pages carry the daemon's script tag."""
        def page(path, template):
            return (path, TemplatePage, {"template": template, "daemon": daemon})
        return [
            page(r"/fragments/", FRAGMENTS_PAGE),
            page(r"/jobs/", JOBS_PAGE),
            page(r"/socket/", SOCKET_PAGE),
            page(r"/arrival/", ARRIVAL_PAGE),
            page(r"/components/", COMPONENTS_PAGE),
            page(r"/many-components/", MANY_COMPONENTS_PAGE),
            (r"/profile", _Profile, {"shapes": self}),
            (r"/queue/join", _Join, {"shapes": self}),
            (r"/jobs", _Jobs, {"shapes": self}),
            (r"/jobs/(\d+)/stream", _JobStream, {"shapes": self}),
            (r"/ws", _Socket, {"shapes": self}),
            (r"/feed", _Feed),
            (r"/ticker", _Ticker, {"shapes": self}),
            (r"/awkward", _Awkward),
        ]


class _Profile(tornado.web.RequestHandler):
    def initialize(self, shapes):
        self.shapes = shapes

    def post(self):
        name = self.get_argument("name", "").strip()
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("X-Request-Id", "profile-%d" % len(self.shapes.saved()))
        self.set_header("X-Session-Token", "st-3f9a8b7c6d5e4f3a2b1c")
        if not name:
            self.set_header("HX-Retarget", "#name-field")
            self.write('<label>Name <input name="name" id="name" aria-invalid="true" '
                       'aria-describedby="name-error"></label>'
                       '<span id="name-error" class="error">Name is required</span>')
            return
        if self.shapes._save(name, "fragments"):
            self.write("<p role=status>Profile saved</p>")
        else:
            self.write("<p class=error role=alert>Could not save your profile</p>")


class _Join(tornado.web.RequestHandler):
    def initialize(self, shapes):
        self.shapes = shapes

    def post(self):
        body = json.loads(self.request.body)
        with self.shapes._lock:
            self.shapes._joins.append(body)
        data = body.get("data") or [""]
        for n in range(35):
            self.set_header("X-Trace-%02d" % n, "t%d" % n)
        self.set_header("X-Long", "v" * 400)
        self.write({"fn_index": body.get("fn_index"), "output": "%s/%s" % (data[0], body.get("fn_index"))})


class _Jobs(tornado.web.RequestHandler):
    def initialize(self, shapes):
        self.shapes = shapes

    def post(self):
        body = json.loads(self.request.body)
        job = str(next(self.shapes._ids))
        with self.shapes._lock:
            self.shapes._jobs[job] = {"name": body.get("name", ""), "status": "queued",
                                      "generation": self.shapes.generation}
        self.write({"job": job})


class _JobStream(tornado.web.RequestHandler):
    """The job runs while its stream is read: progress messages, then process_completed."""

    def initialize(self, shapes):
        self.shapes = shapes

    async def send(self, message):
        self.write("event: message\ndata: %s\n\n" % json.dumps(message))
        await self.flush()

    async def get(self, job):
        shapes = self.shapes
        with shapes._lock:
            record = shapes._jobs.get(job)
        if record is None:
            raise tornado.web.HTTPError(404)
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        with shapes._lock:
            record["status"] = "running"
        await self.send({"msg": "process_starts", "session_token": "tok-9f8e7d6c5b4a39281706"})
        for step in (1, 2, 3):
            await self.send({"msg": "progress", "step": step})
            await asyncio.sleep(0.05)
            while shapes.hold_streams:
                await asyncio.sleep(0.05)
            if record["generation"] != shapes.generation:
                return
        ok = shapes._save(record["name"], "jobs")
        with shapes._lock:
            record["status"] = "done" if ok else "failed"
        output = {"saved": record["name"]} if ok else {"error": "Could not save profile"}
        await self.send({"msg": "process_completed", "success": ok, "output": output})


class _Feed(tornado.web.RequestHandler):
    """FEED_ROWS lines of NDJSON in one burst: more than the SDK's per-stream caps.  With
    ?big=1, BIG_FEED_BYTES of 1 KiB lines instead, more than the SDK reads for a page that
    reads none of them (it stops early; the connection may stall, so the writes time out)."""

    async def get(self):
        self.set_header("Content-Type", "application/x-ndjson")
        if self.get_argument("big", None):
            pad = "x" * 1000
            try:
                for row in range(1, BIG_FEED_BYTES // 1024 + 1):
                    self.write(json.dumps({"row": row, "pad": pad}) + "\n")
                    if row % 256 == 0:
                        await asyncio.wait_for(self.flush(), 5)
            except (asyncio.TimeoutError, tornado.iostream.StreamClosedError):
                pass
            return
        for row in range(1, FEED_ROWS + 1):
            self.write(json.dumps({"row": row}) + "\n")
            if row % 100 == 0:
                await self.flush()


# An event stream cut in awkward places: CRLF and CR line ends (one CRLF split between two
# writes), a message split mid-line, a comment, a multi-line data field, an id, an event
# name, a field with no colon, and a last event with no blank line after it.
AWKWARD_PIECES = [
    ": a comment\r\n",
    "event: progress\r\nid: 7\r\ndata: {\"step\": ",
    "1,\r",
    "\ndata: \"of\": 2}\r\n\r\n",
    "data: first line\rdata: second line\r\r",
    "data\ndata:no space\n\n",
    "data: the end",
]


class _Awkward(tornado.web.RequestHandler):
    async def get(self):
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        for piece in AWKWARD_PIECES:
            self.write(piece)
            await self.flush()
            await asyncio.sleep(0.03)


class _Ticker(tornado.web.RequestHandler):
    """An endless event stream (a tick every 50 ms) until the browser closes the connection."""

    def initialize(self, shapes):
        self.shapes = shapes
        self.closed = False

    def on_connection_close(self):
        self.closed = True

    async def get(self):
        self.set_header("Content-Type", "text/event-stream")
        with self.shapes._lock:
            self.shapes.tickers_open += 1
        try:
            tick = 0
            while not self.closed:
                tick += 1
                self.write("data: tick %d\n\n" % tick)
                try:
                    await self.flush()
                except tornado.iostream.StreamClosedError:
                    break
                await asyncio.sleep(0.05)
        finally:
            with self.shapes._lock:
                self.shapes.tickers_open -= 1


class _Socket(tornado.websocket.WebSocketHandler):
    def initialize(self, shapes):
        self.shapes = shapes

    def on_message(self, message):
        with self.shapes._lock:
            self.shapes._socket.append(message)
        if not message.startswith("42"):
            return
        name, body = json.loads(message[2:])
        if name != "save":
            return
        if self.shapes._save(body.get("name", ""), "socket"):
            self.write_message('42' + json.dumps(["update", {"id": "status", "text": "Saved profile"}]))
        else:
            self.write_message('42' + json.dumps(["error", {"text": "Save failed"}]))

