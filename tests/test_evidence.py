"""Evidence that names the code: the app frame that sent a request, logged an error or threw, mapped
through the page's source map, and the component that rendered a message; checked in real Chromium on
a plain page with a script file, a page whose script points to a map that is not there, and a real Vite
dev server serving TypeScript (its source maps inline)."""

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import urllib.request

import pytest
import tornado.web
from hypothesis import given, settings, strategies as st

import reticle

from _harness import AppServer, Browser, Daemon, Live, Mcp, end_group, free_port, port_listens, wait_until
from _harness import chromium_path  # also marks this module's tests `browser`

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_MODULES = os.path.join(HERE, ".otel", "node_modules")


def line_of(text, needle):
    """The 1-based line of `text` that holds `needle` (the truth a frame is checked against)."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


# ---- a plain page, its code in /app.js -------------------------------------------------------------

APP_JS = """// the page's own script: every failure below is sent, logged or thrown from here
function saveProfile() {
  return fetch('/api/save', {method: 'POST', body: '{"name":"Ada"}'});
}
function reportFailure(why) {
  console.error('profile save failed: ' + why);
}
function onSave() {
  saveProfile().then(function (res) {
    if (!res.ok) reportFailure('status ' + res.status);
  });
}
function onCrash() {
  throw new Error('profile widget crashed');
}
document.getElementById('save').addEventListener('click', onSave);
document.getElementById('crash').addEventListener('click', onCrash);
"""

PLAIN = """<!doctype html><html><head><title>Profile</title>
<script src="%(daemon)s/reticle.js"></script></head><body>
<button id="save">Save</button><button id="crash">Crash</button>
<script src="/%(script)s"></script></body></html>"""


class _Script(tornado.web.RequestHandler):
    def initialize(self, body):
        self.body = body

    def get(self):
        self.set_header("Content-Type", "application/javascript")
        self.write(self.body)


class _Save(tornado.web.RequestHandler):
    def post(self):
        self.set_status(500)
        self.write({"error": "database is locked"})


class _Page(tornado.web.RequestHandler):
    def initialize(self, html, hits=None):
        self.html = html
        self.hits = hits if hits is not None else []

    def get(self):
        self.hits.append(self.request.headers.get("User-Agent", ""))
        self.write(self.html)


class _Missing(tornado.web.RequestHandler):
    """A source map that is not there (404), each request for it counted."""

    def initialize(self, asked):
        self.asked = asked

    def get(self):
        self.asked.append(self.request.path)
        self.send_error(404)


def _plain(tmp, script, body, asked=None):
    return Live(tmp, PLAIN.replace("%(script)s", script),
                routes=[(r"/" + script, _Script, {"body": body}), (r"/api/save", _Save),
                        (r"/.*\.map", _Missing, {"asked": asked if asked is not None else []})])


def _act(mcp, sid, button, until=None):
    args = {"action": "click", "target": {"role": "button", "name": button}, "timeout_ms": 4000}
    if sid:
        args["sessionId"] = sid
    if until is not None:
        args["until"] = until
    return mcp.ok("reticle_act_and_wait", args, timeout=60)


def test_a_plain_page_names_the_line_that_sent_logged_and_threw(tmp_path):
    live = _plain(tmp_path, "app.js", APP_JS)
    try:
        out = _act(live.mcp, None, "Save", until={"kind": "text", "contains": "Saved"})
        assert out["verified"] == "no", out
        sent = "saveProfile at app.js:%d" % line_of(APP_JS, "fetch('/api/save'")
        text = repr(out)
        assert re.search(r"POST \S*/api/save answered 500, sent by " + re.escape(sent), text), text
        net = live.mcp.ok("reticle_network", {"urlContains": "/api/save"})
        assert net["calls"][-1]["at"] == sent, net
        logged = "reportFailure at app.js:%d" % line_of(APP_JS, "console.error(")
        console = live.mcp.ok("reticle_console", {"level": "error"})
        assert [x["at"] for x in console["logs"]] == [logged], console
        out = _act(live.mcp, None, "Crash")  # no consequence declared: the act is judged on what failed
        assert out["verified"] == "no", out
        thrown = "onCrash at app.js:%d" % line_of(APP_JS, "throw new Error")
        assert "(at %s)" % thrown in repr(out), out
    finally:
        live.close()


@contextlib.contextmanager
def _device_on(tmp_path, routes):
    """A daemon, the app (`routes`) and an MCP client, the app's / opened in a device: yields (mcp, sid)."""
    with contextlib.ExitStack() as stack:
        daemon = Daemon(tmp_path / "state")
        stack.callback(daemon.close)
        app = AppServer(routes)
        stack.callback(app.close)
        mcp = Mcp(daemon.url + "/mcp")
        stack.callback(mcp.close)
        yield mcp, mcp.ok("reticle_open", {"url": app.url + "/"}, timeout=60)["sessionId"]


def _untagged_routes():
    """The plain page without its script tag (a device injects the SDK), app.js and the failing save."""
    page = PLAIN.replace('<script src="%(daemon)s/reticle.js"></script>', "").replace("%(script)s", "app.js")
    return [(r"/app.js", _Script, {"body": APP_JS}), (r"/api/save", _Save), (r"/", _Page, {"html": page})]


def test_in_a_device_the_injected_sdk_names_the_same_lines(tmp_path):
    """No script tag: the daemon's own Chromium injects the SDK (its frames have no URL and are skipped)."""
    with _device_on(tmp_path, _untagged_routes()) as (mcp, sid):
        out = _act(mcp, sid, "Save")
        assert out["verified"] == "no", out
        sent = "saveProfile at app.js:%d" % line_of(APP_JS, "fetch('/api/save'")
        assert re.search(r"POST \S*/api/save answered 500, sent by " + re.escape(sent), repr(out)), out
        console = mcp.ok("reticle_console", {"level": "error", "sessionId": sid})
        assert [x["at"] for x in console["logs"]] == ["reportFailure at app.js:%d" % line_of(APP_JS, "console.error(")]


BLAME = ("Error.prepareStackTrace = function () {\n"
         "  return 'Error\\n    at blameSomeoneElse (' + location.origin + '/src/innocent/Unrelated.ts:99:1)';\n"
         "};\n")


def test_in_a_device_the_sender_is_the_browsers_initiator_stack_whatever_the_page_makes_stacks_say(tmp_path):
    """A page that overrides Error.prepareStackTrace makes every stack it can build blame someone else: in a
    device the sender of a browser-confirmed request comes from the browser's own initiator stack; with the
    script tag the answer says the stack was the page's."""
    page = PLAIN.replace('<script src="%(daemon)s/reticle.js"></script>', "").replace("%(script)s", "app.js")
    page = page.replace("<title>Profile</title>", "<title>Profile</title><script>%s</script>" % BLAME)
    routes = [(r"/app.js", _Script, {"body": APP_JS}), (r"/api/save", _Save), (r"/", _Page, {"html": page})]
    sent = "saveProfile at app.js:%d" % line_of(APP_JS, "fetch('/api/save'")
    with _device_on(tmp_path, routes) as (mcp, sid):
        out = _act(mcp, sid, "Save")
        assert out["verified"] == "no", out
        assert re.search(r"answered 500, sent by " + re.escape(sent) + r"(?! \(the page)", repr(out)), out
        assert "Unrelated.ts" not in repr(out), out
        net = mcp.ok("reticle_network", {"urlContains": "/api/save", "sessionId": sid})
        assert net["calls"][-1]["at"] == sent, net
    live = Live(tmp_path / "tag", PLAIN.replace("%(script)s", "app.js").replace(
        "<title>Profile</title>", "<title>Profile</title><script>%s</script>" % BLAME),
        routes=[(r"/app.js", _Script, {"body": APP_JS}), (r"/api/save", _Save)])
    try:
        out = _act(live.mcp, None, "Save", until={"kind": "text", "contains": "Saved"})
        assert "(the page's stack)" in repr(out), out  # what the page's stack said, and that it was the page's
    finally:
        live.close()


# A page that patches the built-ins the SDK calls, each to lie (or to do nothing), once the SDK has started:
# before it captured them, the SDK's URLs, names, matches and messages came out as the page chose.
LIES = """(function () {
  function lie() { return 'FORGED'; }
  var S = String.prototype, A = Array.prototype;
  S.replace = lie; S.split = function () { return ['FORGED']; }; S.slice = lie; S.toLowerCase = lie; S.trim = lie;
  S.indexOf = function () { return 0; }; S.charAt = lie; S.concat = lie;
  RegExp.prototype.exec = function () { return null; }; RegExp.prototype.test = function () { return true; };
  RegExp.prototype[Symbol.replace] = lie; RegExp.prototype[Symbol.split] = function () { return ['FORGED']; };
  String.prototype[Symbol.replace] = lie; String.prototype[Symbol.split] = function () { return ['FORGED']; };
  A.push = function () { return 0; }; A.join = lie; A.map = function () { return ['FORGED']; };
  A.filter = function () { return []; }; A.forEach = function () {}; A.slice = function () { return []; };
  A.some = function () { return false; }; A.indexOf = function () { return 0; };
  Object.keys = function () { return []; }; Array.isArray = function () { return false; };
  Object.defineProperty(Object.prototype, 'toJSON', {value: function () { return {forged: true}; },
                                                    writable: true, configurable: true});
  JSON.stringify = function () { return '{"forged":true}'; };
  Math.round = function () { return 0; }; Math.min = function () { return 0; }; Date.now = function () { return 0; };
  Function.prototype.call = function () { return 'FORGED'; };
  Function.prototype.apply = function () { return 'FORGED'; };
  Element.prototype.getAttribute = lie; Element.prototype.closest = function () { return null; };
  Element.prototype.hasAttribute = function () { return true; }; Node.prototype.contains = function () { return false; };
  Map.prototype.get = lie; Map.prototype.has = function () { return false; }; Map.prototype.set = function () { return this; };
  Set.prototype.has = function () { return true; }; Set.prototype.add = function () { return this; };
  WebSocket.prototype.send = function () {}; Storage.prototype.getItem = lie;
  EventTarget.prototype.dispatchEvent = function () { return true; };
  document.addEventListener('DOMContentLoaded', function () {
    document.body.insertAdjacentHTML('beforeend', 'a-b'.split('-').length === 1 && /x/.test('y') ?
                                     '<p>the lies hold</p>' : '<p>no lies</p>');
  });
})();
"""


def test_a_page_that_patches_every_built_in_the_sdk_calls_changes_nothing_it_reports(tmp_path):
    """Once the SDK has started (a device injects it before any page script; a script tag runs it where it
    stands), a page that makes String, Array, RegExp, JSON, Function, Map, the DOM's methods and the socket lie
    changes neither the verdict nor one word of its evidence: the SDK calls only what it captured."""
    routes = _untagged_routes()
    page = routes[-1][2]["html"].replace("<button", "<script>%s</script><button" % LIES, 1)
    routes[-1] = (r"/", _Page, {"html": page})
    sent = "saveProfile at app.js:%d" % line_of(APP_JS, "fetch('/api/save'")
    logged = "reportFailure at app.js:%d" % line_of(APP_JS, "console.error(")
    with _device_on(tmp_path, routes) as (mcp, sid):
        out = _act(mcp, sid, "Save")
        assert out["verified"] == "no", out
        assert re.search(r"POST http://127\.0\.0\.1:\d+/api/save answered 500, sent by " + re.escape(sent), repr(out)), out
        console = mcp.ok("reticle_console", {"level": "error", "sessionId": sid})
        assert [(x["text"], x["at"]) for x in console["logs"]] == [("profile save failed: status 500", logged)], console
        session = next(s for s in mcp.ok("reticle_sessions")["sessions"] if s["sessionId"] == sid)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", session["url"]), session
        found = mcp.ok("reticle_query", {"by": "role", "value": "button", "name": "Crash", "sessionId": sid})
        assert found["count"] == 1, found
        everything = repr((out, console, session, found))
        assert "FORGED" not in everything and "forged" not in everything, everything
        held = mcp.ok("reticle_assert", {"predicate": {"kind": "text", "contains": "the lies hold"}, "sessionId": sid})
        assert held["verified"] == "yes", held  # the page's lies were in force all along
    live = Live(tmp_path / "tag", PLAIN.replace("%(script)s", "app.js").replace(
        "<button", "<script>%s</script><button" % LIES, 1), routes=[(r"/app.js", _Script, {"body": APP_JS}),
                                                                   (r"/api/save", _Save)])
    try:
        out = _act(live.mcp, None, "Save", until={"kind": "text", "contains": "Saved"})
        assert out["verified"] == "no", out
        assert re.search(r"POST http://127\.0\.0\.1:\d+/api/save answered 500", repr(out)), out
        assert "FORGED" not in repr(out) and "forged" not in repr(out), out
    finally:
        live.close()


def test_a_script_in_the_page_itself_is_named_by_its_line_and_the_page_is_never_fetched_again(tmp_path):
    """A GET of a page's URL could do something (a logout link, a confirm page): only script files are
    fetched for their maps, so a failure sent from an inline script keeps its generated line."""
    inline = ("<!doctype html><html><head><title>Inline</title></head><body><button id=save>Save</button>\n"
              "<script>\ndocument.getElementById('save').onclick = function saveInline() {\n"
              "  fetch('/api/save', {method: 'POST', body: '{}'});\n};\n</script></body></html>")
    hits = []
    with _device_on(tmp_path, [(r"/api/save", _Save), (r"/", _Page, {"html": inline, "hits": hits})]) as (mcp, sid):
        out = _act(mcp, sid, "Save")
        assert out["verified"] == "no", out
        assert "sent by saveInline at /:%d" % line_of(inline, "fetch('/api/save'") in repr(out), out
        assert len(hits) == 1, hits  # the browser's load, and nothing from the daemon


def test_a_source_map_that_is_not_there_leaves_the_generated_frame(tmp_path):
    body = APP_JS + "//# sourceMappingURL=bundle.js.map\n"
    asked = []
    live = _plain(tmp_path, "bundle.js", body, asked)
    try:
        out = _act(live.mcp, None, "Save", until={"kind": "text", "contains": "Saved"})
        assert out["verified"] == "no", out
        assert "sent by saveProfile at bundle.js:%d" % line_of(body, "fetch('/api/save'") in repr(out), out
        assert asked == ["/bundle.js.map"], asked  # looked for once, its absence remembered
        console = live.mcp.ok("reticle_console", {"level": "error"})
        assert [x["at"] for x in console["logs"]] == ["reportFailure at bundle.js:%d" % line_of(body, "console.error(")]
    finally:
        live.close()


# ---- a real Vite dev server: TypeScript, its source maps inline -----------------------------------

class ViteApp:
    """tests/_vite_app (React 19 without JSX, TypeScript modules), or another `folder` (tests/_vite_vue:
    Vue single-file components through @vitejs/plugin-vue), under `vite` in a temporary copy beside
    tests/.otel's node_modules; its index.html's script tag points at `daemon`."""

    def __init__(self, tmp, daemon, folder="_vite_app", needs="vite"):
        bin_ = os.path.join(NODE_MODULES, "vite", "bin", "vite.js")
        if not os.path.isfile(bin_) or not os.path.isdir(os.path.join(NODE_MODULES, needs)):
            pytest.skip("%s is not installed in tests/.otel (tests/bootstrap.sh)" % needs)
        self.root = os.path.join(str(tmp), "vite-app")
        shutil.copytree(os.path.join(HERE, folder), self.root)
        os.symlink(NODE_MODULES, os.path.join(self.root, "node_modules"))
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self._log = open(os.path.join(str(tmp), "vite.log"), "wb")
        env = dict(os.environ, VITE_RETICLE_JS=daemon.url + "/reticle.js")
        self.proc = subprocess.Popen(["node", bin_, "--port", str(self.port), "--host", "127.0.0.1", "--strictPort"],
                                     env=env, cwd=self.root, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            wait_until(lambda: port_listens(self.port) or self.proc.poll() is not None, 60, what="vite")
            assert self.proc.poll() is None, open(self._log.name).read()
            urllib.request.urlopen(self.url + "/", timeout=60).read()
        except BaseException:
            self.close()
            raise

    def source(self, path):
        with open(os.path.join(self.root, path)) as fh:
            return fh.read()

    def close(self):
        end_group(self.proc)  # vite's own processes with it
        self._log.close()


@contextlib.contextmanager
def _vite_page(tmp_path, folder="_vite_app", needs="vite"):
    """A daemon (the Vite app's folder its project), the app under `vite`, an MCP client and Chromium with
    the page's Save button rendered: yields (app, mcp)."""
    with contextlib.ExitStack() as stack:
        daemon = Daemon(tmp_path / "state", env={"RETICLE_PROJECT_DIR": str(tmp_path / "vite-app")})
        stack.callback(daemon.close)
        app = ViteApp(tmp_path, daemon, folder, needs)
        stack.callback(app.close)
        mcp = Mcp(daemon.url + "/mcp")
        stack.callback(mcp.close)
        stack.callback(Browser(app.url + "/").close)
        wait_until(lambda: mcp.ok("reticle_sessions")["sessions"], 30, what="the Vite page to connect")
        wait_until(lambda: mcp.ok("reticle_query", {"by": "role", "value": "button", "name": "Save"})["elements"], 60,
                   what="the app to render")
        yield app, mcp


def test_a_vite_apps_typescript_is_named_through_its_source_map(tmp_path):
    with _vite_page(tmp_path) as (app, mcp):
        out = _act(mcp, None, "Save", until={"kind": "text", "contains": "Saved"})
        assert out["verified"] == "no", out
        api = app.source("src/lib/api.ts")
        # the message decides (the component that rendered it named); the request's sender (Vite answers a
        # POST it has no route for with 404) is the TypeScript line, not the served JavaScript's
        assert "the page showed 'Could not save your profile' as an alert, rendered by SaveStatus" in repr(out), out
        net = mcp.ok("reticle_network", {"urlContains": "/api/save"})
        assert net["calls"][-1]["status"] == 404 and net["calls"][-1]["at"] == \
            "saveProfile at src/lib/api.ts:%d" % line_of(api, "await fetch("), net
        console = mcp.ok("reticle_console", {"level": "error"})
        assert any(x.get("at") == "reportFailure at src/lib/api.ts:%d" % line_of(api, "console.error(")
                   for x in console["logs"]), console


def test_a_vue_message_is_named_by_its_single_file_component(tmp_path):
    with _vite_page(tmp_path, "_vite_vue", needs="@vitejs/plugin-vue") as (app, mcp):
        out = _act(mcp, None, "Save", until={"kind": "text", "contains": "Saved"})
        assert out["verified"] == "no", out
        # Vue's dev build marks each element with its component, the SFC compiler the component's file
        assert "'Could not save your profile' as an alert, rendered by SaveStatus at " \
               "src/components/SaveStatus.vue" in repr(out), out
        net = mcp.ok("reticle_network", {"urlContains": "/api/save"})
        sfc = app.source("src/components/ProfileForm.vue")
        assert net["calls"][-1]["at"] == "onSave at src/components/ProfileForm.vue:%d" % line_of(sfc, "await fetch("), net


# ---- the parts, on their own: a stack's app frame, a source map's mappings ---------------------------

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def vlq(n):
    """The test's own Base64 VLQ encoder (the Source Map format), to check the daemon's decoder against."""
    v = (-n << 1) | 1 if n < 0 else n << 1
    out = ""
    while True:
        digit, v = v & 31, v >> 5
        out += B64[digit | (32 if v else 0)]
        if not v:
            return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(1 << 40), 1 << 40), min_size=1, max_size=6))
def test_vlq_values_read_back(values):
    assert reticle._vlq("".join(vlq(v) for v in values)) == values


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=B64 + ",;!é", max_size=200), st.integers(1, 5), st.integers(1, 80))
def test_any_mappings_are_read_or_refused_with_a_value_error(mappings, line, col):
    try:
        sm = reticle._SourceMap({"version": 3, "sources": ["a.ts"], "names": ["f"], "mappings": mappings})
    except ValueError:
        return
    hit = sm.lookup(line, col)
    assert hit is None or (isinstance(hit[1], int) and hit[0].endswith("a.ts"))


def test_a_hand_made_map_places_a_generated_column_on_its_source_line():
    # generated line 1: col 0 -> a.ts line 1; col 10 -> b.ts line 5, named "save"; line 2: nothing
    mappings = vlq(0) + vlq(0) + vlq(0) + vlq(0) + "," + vlq(10) + vlq(1) + vlq(4) + vlq(2) + vlq(0) + ";"
    sm = reticle._SourceMap({"version": 3, "sources": ["a.ts", "b.ts"], "names": ["save"], "mappings": mappings,
                             "sourceRoot": "src/"}, "http://127.0.0.1:5173/assets/app.js.map")
    assert sm.lookup(1, 5) == ("http://127.0.0.1:5173/assets/src/a.ts", 1, "")
    assert sm.lookup(1, 11) == ("http://127.0.0.1:5173/assets/src/b.ts", 5, "save")
    assert sm.lookup(2, 1) is None and sm.lookup(9, 1) is None
    with pytest.raises(ValueError):
        reticle._SourceMap({"version": 3, "sections": []})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 3), st.integers(0, 9)), max_size=8),
                min_size=1, max_size=4), st.integers(1, 5), st.integers(1, 80))
def test_a_lookup_by_binary_search_is_the_last_segment_at_or_before_the_column(lines, line, col):
    """Absolute segments (column, source, line) per generated line, encoded as deltas: the lookup gives
    what a scan of that line's segments, in column order, would."""
    encoded, prev = [], [0, 0]
    for segs in lines:
        parts, at = [], 0
        for c, src, ln in sorted(set(segs)):
            parts.append(vlq(c - at) + vlq(src - prev[0]) + vlq(ln - prev[1]) + vlq(0))
            at, prev = c, [src, ln]
        encoded.append(",".join(parts))
    sm = reticle._SourceMap({"version": 3, "sources": ["a", "b", "c", "d"], "mappings": ";".join(encoded)})
    row = sorted(set(lines[line - 1])) if line <= len(lines) else []
    before = [seg for seg in row if seg[0] <= col - 1]
    expected = None if not before else (["a", "b", "c", "d"][before[-1][1]], before[-1][2] + 1, "")
    assert sm.lookup(line, col) == expected


def test_a_map_over_the_segment_cap_is_refused_and_the_cache_keeps_a_bounded_number_of_segments(monkeypatch):
    line = ",".join(["AAAA", "CAAA"] * 50)  # 100 segments a line
    with pytest.raises(ValueError, match="segments"):
        monkeypatch.setattr(reticle, "FRAME_MAP_SEGMENTS", 999)
        reticle._SourceMap({"version": 3, "sources": ["a"], "mappings": ";".join([line] * 10)})
    monkeypatch.setattr(reticle, "FRAME_MAP_SEGMENTS", 1_000_000)
    monkeypatch.setattr(reticle, "FRAME_SEGMENTS_KEPT", 2500)
    frames = reticle._Frames()
    loop = asyncio.new_event_loop()
    try:
        for n in range(5):
            fut = loop.create_future()
            fut.set_result(reticle._SourceMap({"version": 3, "sources": ["a"], "mappings": ";".join([line] * 10)}))
            frames._file("http://127.0.0.1:1/%d.js" % n, fut)
    finally:
        loop.close()
    assert frames.kept_segments() <= 2500 and list(frames.maps) == ["http://127.0.0.1:1/%d.js" % n for n in (3, 4)]


class _Slow(tornado.web.RequestHandler):
    """A script that answers after 1.8 s (past a verdict's 1.5 s wait), its map beside it."""

    async def get(self):
        if self.request.path.endswith(".map"):
            self.write({"version": 3, "sources": ["src/slow.ts"], "names": [], "mappings": "AAAA"})
            return
        await asyncio.sleep(1.8)
        self.set_header("Content-Type", "application/javascript")
        self.write("function slow() {}\n//# sourceMappingURL=slow.js.map\n")


def test_a_map_read_that_outlives_the_wait_is_filed_and_reads_at_once_are_bounded(monkeypatch):
    """A read still running when the verdict's wait ends is filed in the cache when it ends (it stayed in
    `loading` for good before); past FRAME_MAPS_KEPT reads at once, no new one starts."""
    server = AppServer([(r"/.*", _Slow)])
    try:
        frames = reticle._Frames()
        frame = {"fn": "", "url": server.url + "/slow.js", "line": 1, "col": 1}
        window = [{"type": "console.error", "data": {"text": "x", "stack": "Error\n    at slow (%s:1:1)" % frame["url"]}}]

        async def run():
            await reticle._locate(frames, server.url, window)
            first = window[0]["data"]["at"]
            assert first == "slow at slow.js:1" and list(frames.loading) == [frame["url"]], (first, frames.loading)
            await asyncio.sleep(1.0)
            assert frames.loading == {} and frames.maps[frame["url"]] is not None
            await reticle._locate(frames, server.url, window)
            assert window[0]["data"]["at"] == "slow at src/slow.ts:1"
            monkeypatch.setattr(reticle, "FRAME_MAPS_KEPT", 0)
            assert await frames._map(server.url + "/other.js", server.url) is None and frames.loading == {}
        asyncio.run(run())
    finally:
        server.close()


def test_the_app_frame_skips_libraries_and_an_at_the_page_sent_is_replaced():
    stack = ("Error\n    at window.fetch (http://127.0.0.1:5173/node_modules/.vite/deps/react.js?v=1a2b3c:9:1)\n"
             "    at Object.saveProfile [as save] (http://127.0.0.1:5173/src/api.ts?t=123:42:9)\n"
             "    at onClick (http://127.0.0.1:5173/src/App.tsx:7:3)")
    assert reticle._app_frame(stack) == {"fn": "saveProfile", "url": "http://127.0.0.1:5173/src/api.ts?t=123",
                                         "line": 42, "col": 9}
    assert reticle._frame_file("webpack-internal:///(app-pages-browser)/./app/page.js") == "app/page.js"
    window = [{"type": "net.request", "data": {"method": "POST", "url": "/api/save", "status": 500,
                                               "stack": stack, "at": "src/forged.ts:1"}},
              {"type": "console.error", "data": {"text": "x", "at": "src/forged.ts:2"}}]
    asyncio.run(reticle._locate(None, "", window))
    assert window[0]["data"]["at"] == "saveProfile at src/api.ts:42"
    assert "at" not in window[1]["data"]  # no stack: nothing to name, and not the page's word either


@pytest.mark.parametrize("engine,stack,expected", [
    ("spidermonkey", "fetch@http://127.0.0.1:5173/node_modules/.vite/deps/react.js?v=1a2b3c:9:1\n"
                     "saveProfile@http://127.0.0.1:5173/src/api.ts?t=123:42:9\n"
                     "onClick@http://127.0.0.1:5173/src/App.tsx:7:3\n",
     {"fn": "saveProfile", "url": "http://127.0.0.1:5173/src/api.ts?t=123", "line": 42, "col": 9}),
    ("spidermonkey-async-inner", "async*onSave/<@http://127.0.0.1:5173/src/App.tsx:12:5\n",
     {"fn": "onSave", "url": "http://127.0.0.1:5173/src/App.tsx", "line": 12, "col": 5}),
    ("spidermonkey-anonymous", "@http://127.0.0.1:5173/app.js:3:10\n",
     {"fn": "", "url": "http://127.0.0.1:5173/app.js", "line": 3, "col": 10}),
    ("javascriptcore", "saveProfile@http://localhost:3000/static/js/main.js:2:1187\n"
                       "global code@http://localhost:3000/static/js/main.js:5:3",
     {"fn": "saveProfile", "url": "http://localhost:3000/static/js/main.js", "line": 2, "col": 1187}),
    ("javascriptcore-global", "global code@http://localhost:3000/app.js:5:3",
     {"fn": "", "url": "http://localhost:3000/app.js", "line": 5, "col": 3}),
    ("reticle-only", "send@http://127.0.0.1:4400/reticle.js:1:1", None),
])
def test_stacks_of_firefox_and_safari_are_read_like_chromes(engine, stack, expected):
    """SpiderMonkey's and JavaScriptCore's `fn@url:line:col` lines name the app's frame as V8's do."""
    assert reticle._app_frame(stack) == expected


# ---- the timeline: a resource link on an act's answer, and each step of verify's report ----------

def test_an_acts_timeline_is_an_svg_linked_beside_its_answer(tmp_path):
    live = _plain(tmp_path, "app.js", APP_JS)
    try:
        args = {"action": "click", "target": {"role": "button", "name": "Save"}, "timeline": True,
                "until": {"kind": "text", "contains": "Saved"}, "timeout_ms": 4000}
        result = live.mcp.raw_call("reticle_act_and_wait", args)
        out = result.structured_content
        assert out["verified"] == "no" and not result.is_error, out
        links = [b for b in result.content if b.type == "resource_link"]
        assert len(links) == 1 and links[0].mime_type == "image/svg+xml", result.content
        path = out["timeline"]["path"]
        assert str(links[0].uri) == "file://" + path and os.stat(path).st_mode & 0o077 == 0
        with open(path, encoding="utf-8") as fh:
            svg = fh.read()
        assert svg.startswith("<svg") and "<script" not in svg and "href" not in svg
        assert "POST /api/save 500" in svg and "sent by saveProfile at app.js:%d" % line_of(APP_JS, "fetch('/api/save'") in svg
        assert "console.error: profile save failed: status 500" in svg and "at reportFailure at app.js" in svg and "judged at" in svg and ": no</text>" in svg
        plain = live.mcp.ok("reticle_act_and_wait", {"action": "click", "target": {"role": "button", "name": "Save"}})
        assert "timeline" not in plain  # only when asked
    finally:
        live.close()


def test_the_verify_report_draws_each_steps_timeline_open_where_it_failed(tmp_path):
    import json
    import sys
    from _harness import RETICLE_PY, daemon_env
    app = AppServer(_untagged_routes())
    try:
        flows = tmp_path / "app" / ".reticle" / "flows"
        flows.mkdir(parents=True)
        (flows / "save.json").write_text(json.dumps({"format": 1, "name": "save", "startUrl": app.url + "/", "steps": [
            {"assert": {"kind": "text", "contains": "Crash"}},
            {"action": "click", "target": {"role": "button", "name": "Save"},
             "until": {"kind": "text", "contains": "Saved"}, "timeout_ms": 4000}]}))
        report = tmp_path / "report.html"
        run = subprocess.run([sys.executable, RETICLE_PY, "verify", "--report", str(report), "--json"],
                             cwd=str(tmp_path / "app"), capture_output=True, text=True, timeout=180,
                             env=daemon_env(str(tmp_path / "state"), RETICLE_PORT=str(free_port())))
        assert run.returncode == 1, run.stdout + run.stderr
        steps = json.loads(run.stdout)["flows"][0]["steps"]
        assert [s["verified"] for s in steps] == ["yes", "no"] and all("timeline" in s for s in steps), steps
        assert reticle._results_problem(json.loads(run.stdout)) is None
        text = report.read_text()
        assert text.count("<svg") == 2 and "<script" not in text
        opened = re.findall(r"<details( open)?><summary>timeline of step (\d)", text)
        assert opened == [("", "0"), (" open", "1")], opened
        failing = text[text.index("timeline of step 1"):]
        assert "POST /api/save 500" in failing and "sent by saveProfile at app.js:%d" % line_of(APP_JS, "fetch(") in failing
        # looked at in Chromium: the report as a picture, kept beside the test's other output
        shot = tmp_path / "report.png"
        args = [chromium_path(), "--headless=new", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                "--user-data-dir=" + str(tmp_path / "shot-profile"), "--window-size=1200,1400",
                "--screenshot=" + str(shot), "file://" + str(report)]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        subprocess.run(args, capture_output=True, timeout=60)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        print("the report as Chromium draws it: %s" % shot)
    finally:
        app.close()


# ---- what a page can aim the daemon's fetches at: only its own origin, only script and map files ----------

class _Recorder(tornado.web.RequestHandler):
    """Every request of another service on this machine, recorded (none should come)."""

    def initialize(self, seen, body=""):
        self.seen, self.body = seen, body

    def get(self):
        self.seen.append("GET " + self.request.uri)
        self.set_header("Content-Type", "application/javascript")
        self.write(self.body)

    def post(self):
        self.seen.append("POST " + self.request.uri)
        self.write("[]")


class FetchOriginCase(__import__("tornado.testing").testing.AsyncHTTPTestCase):
    """A page's socket opened from origin A (the browser's Origin header) that reports its URL as on B
    (its hello and route changes are the page's own word) and stacks naming B's scripts, a side-effecting
    path on A (/logout;.js) and a script on A whose map is named /account/delete?confirm=1: the daemon
    fetches from A only, only script files and .map files, and B hears nothing."""

    def setUp(self):
        self.b_seen, self.a_seen = [], []
        self.b = AppServer([(r"/.*", _Recorder, {"seen": self.b_seen})])
        mapped = "function saveProfile() {}\n//# sourceMappingURL=/account/delete?confirm=1\n"
        self.a = AppServer([(r"/.*", _Recorder, {"seen": self.a_seen, "body": mapped})])
        super().setUp()

    def tearDown(self):
        for ws in getattr(self, "sockets", []):
            ws.close()
        super().tearDown()
        self.a.close()
        self.b.close()

    def get_app(self):
        import tempfile
        self.hub = reticle.Hub(state_dir=tempfile.mkdtemp(prefix="reticle-frames-"), port=0)
        return reticle.make_app(self.hub)

    async def _tab(self):
        import json
        import tornado.httpclient
        import tornado.websocket
        conn = await tornado.websocket.websocket_connect(tornado.httpclient.HTTPRequest(
            "ws://127.0.0.1:%d/reticle" % self.get_http_port(), headers={"Origin": self.a.url}))
        self.sockets = [conn]
        await conn.write_message(json.dumps({"kind": "hello", "protocolVersion": reticle.BRIDGE_PROTOCOL,
                                             "sessionId": "s-spoof", "url": self.b.url + "/", "title": "t",
                                             "adapters": []}))
        stacks = ["Error\n    at evil (%s/admin/reset-password.js:1:1)" % self.b.url,
                  "Error\n    at evil (webpack-internal:///(app-pages-browser)/./app/page.js:3:4)",
                  "Error\n    at evil (%s/logout;.js:1:1)" % self.a.url,
                  "Error\n    at evil (%s/logout%%3b.js:1:1)" % self.a.url,
                  "Error\n    at saveProfile (%s/app.js:1:10)" % self.a.url]
        events = [{"type": "route.change", "data": {"from": self.b.url + "/", "to": self.b.url + "/x",
                                                     "kind": "push"}}]
        events += [{"type": "console.error", "data": {"text": "boom %d" % n, "stack": stack}}
                   for n, stack in enumerate(stacks)]
        for event in events:
            await conn.write_message(json.dumps({"kind": "event", "event": event}))
        for _ in range(200):
            session = self.hub.bridge.sessions.get("s-spoof")
            if session is not None and len(session.store.query(prefix="console.")) == len(stacks):
                return session
            await asyncio.sleep(0.01)
        raise AssertionError("the tab's events did not arrive")

    @__import__("tornado.testing").testing.gen_test(timeout=20)
    async def test_a_page_cannot_aim_the_map_fetcher_at_another_service_or_a_side_effect(self):
        import json
        session = await self._tab()
        assert session.origin == self.a.url
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "reticle_console", "arguments": {"level": "error", "since": 0}}})
        resp = await self.http_client.fetch(self.get_url("/mcp"), method="POST", body=body,
                                            headers={"Content-Type": "application/json"})
        logs = json.loads(resp.body)["result"]["structuredContent"]["logs"]
        assert [x["at"] for x in logs][-1] == "saveProfile at app.js:1", logs
        await asyncio.sleep(0.3)
        assert self.b_seen == [], self.b_seen   # the service the page pointed at heard nothing
        # on its own origin: its script and Next.js dev's frame mapper (a fixed path), never /logout;.js or
        # a "map" at /account/delete?confirm=1
        assert sorted(x.split("?")[0] for x in self.a_seen) == ["GET /__nextjs_original-stack-frame",
                                                               "GET /app.js"], self.a_seen


def test_a_timeline_of_any_page_text_is_well_formed_svg():
    """Page text holding what XML cannot (U+0001, U+000B, ESC, U+FFFE, a lone surrogate) or markup
    becomes an SVG that parses, the markup as text."""
    import xml.etree.ElementTree as ET
    nasty = "saved\x01\x0b\x1b[31m\ufffe\ud800 <script>alert(1)</script> & ]]>"
    tl = {"act": nasty, "end": 120, "verdict": "no", "rows": [
        {"k": "msg", "s": 10, "e": 50, "t": nasty, "fail": True, "at": nasty},
        {"k": "req", "s": 5, "e": 90, "t": "POST /api/\x07save", "fail": True}]}
    svg = reticle._timeline_svg(tl)
    root = ET.fromstring(svg.encode("utf-8", "surrogatepass"))
    assert root.tag.endswith("svg")
    text = "".join(root.itertext())
    assert "<script>alert(1)</script>" in text and "\x01" not in text and "\ufffe" not in text
