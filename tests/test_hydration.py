"""Issue 29 #6: hydration.  A server-rendered page whose framework has not attached its handlers yet
answers a click with nothing, and a framework that re-renders a field throws away what was filled.
Real React 18 (the UMD builds tests/bootstrap.sh installs) hydrates a page shaped as Next.js serves
it (`#__next`, `__NEXT_DATA__`) when the test opens a gate, so "before hydration" is a state the test
holds, not a race; a page that mounts its form afresh resets what was filled.  The truth is what the
server received."""

import json
import os
import threading
import time

import pytest
import tornado.web

from _harness import Live, ScriptFiles, TemplatePage, chromium_path, react_umd

UMD = react_umd("production.min")

pytestmark = [
    pytest.mark.skipif(chromium_path() is None, reason="needs Chromium (sh tests/bootstrap.sh)"),
    pytest.mark.skipif(not all(os.path.exists(p) for p in UMD.values()),
                       reason="needs React's UMD builds (sh tests/bootstrap.sh installs them with npm)"),
]

PLAIN = """<!doctype html><html><head><title>Home</title><script src="%(daemon)s/reticle.js"></script></head>
<body><main><h1>Home</h1></main></body></html>"""

# The server's HTML is what App renders with an empty name, so hydrateRoot adopts it as it is.
NEXT_SHAPED = """<!doctype html><html><head><title>Profile</title><script src="%(daemon)s/reticle.js"></script>
</head><body><div id="__next"><main><h1>Profile</h1><button type="button">Save</button><p id="out"></p></main></div>
<script id="__NEXT_DATA__" type="application/json">{"props":{"pageProps":{}},"page":"/"}</script>
<script src="/umd/react.js"></script><script src="/umd/react-dom.js"></script>
<script>
  var e = React.createElement;
  function App() {
    var said = React.useState(''), out = said[0], setOut = said[1];
    function save() {
      fetch('/api/save', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"name":"ada"}'})
        .then(function (r) { return r.json(); }).then(function (j) { setOut('Saved ' + j.name); });
    }
    return e('main', null, e('h1', null, 'Profile'), e('button', {type: 'button', onClick: save}, 'Save'),
             e('p', {id: 'out'}, out));
  }
  // the bundle "arrives" when the test opens the gate
  fetch('/gate').then(function () { ReactDOM.hydrateRoot(document.getElementById('__next'), e(App)); });
</script></body></html>"""

# A form its script mounts afresh when the test opens the gate (as a client-only framework replaces
# the server's markup): a value filled before that is gone, and Save posts what the field holds.
REMOUNT = """<!doctype html><html><head><title>Notes</title><script src="%(daemon)s/reticle.js"></script></head>
<body><main id="app"></main>
<script>
  function mount() {
    document.getElementById('app').innerHTML = '<label>Title <input name="title"></label>' +
      '<button type="button">Save</button><p id="out"></p>';
    document.querySelector('#app button').onclick = function () {
      var title = document.querySelector('#app input').value;
      fetch('/api/save', {method: 'POST', headers: {'Content-Type': 'application/json'},
                          body: JSON.stringify({name: title})})
        .then(function (r) { return r.json(); })
        .then(function (j) {
          document.getElementById('out').textContent = 'Saved "' + j.name + '"';
          document.querySelector('#app input').value = '';  // cleared for the next note, as a todo list does
        });
    };
  }
  mount();
  fetch('/gate').then(function () { mount(); document.getElementById('out').textContent = 'Form mounted again'; });
</script></body></html>"""


class _State:
    def __init__(self):
        self.gate = threading.Event()
        self.saved = []

    def reset(self):
        self.gate.clear()
        self.saved.clear()


STATE = _State()


class _Gate(tornado.web.RequestHandler):
    async def get(self):
        import asyncio
        while not STATE.gate.is_set():
            await asyncio.sleep(0.05)
        self.write("open")


class _Save(tornado.web.RequestHandler):
    def post(self):
        name = json.loads(self.request.body)["name"]
        STATE.saved.append(name)
        self.write({"ok": True, "name": name})


class _Streamed(tornado.web.RequestHandler):
    """A plain page (no framework) whose body is still being parsed for 0.8 s after its head arrived."""

    def initialize(self, daemon):
        self.daemon = daemon

    async def get(self):
        import asyncio
        self.set_header("Content-Type", "text/html")
        self.write(PLAIN.split("<body>")[0] % {"daemon": self.daemon} + "<body>")
        await self.flush()
        await asyncio.sleep(0.8)
        self.write("<main><h1>Streamed</h1></main></body></html>")


def _routes(daemon):
    def page(html):
        return {"template": html, "daemon": daemon}
    return [(r"/umd/(react\.js|react-dom\.js)", ScriptFiles, {"files": UMD}), (r"/gate", _Gate), (r"/api/save", _Save),
            (r"/next/", TemplatePage, page(NEXT_SHAPED)), (r"/remount/", TemplatePage, page(REMOUNT)),
            (r"/streamed/", _Streamed, {"daemon": daemon})]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    lv = Live(tmp_path_factory.mktemp("hydration"), PLAIN, routes=_routes)
    yield lv
    STATE.gate.set()
    lv.close()


def go(live, path):
    STATE.reset()
    return live.mcp.ok("reticle_navigate", {"url": live.app.url + path}, timeout=30)


def open_gate_in(seconds):
    timer = threading.Timer(seconds, STATE.gate.set)
    timer.start()
    return timer


SAVE = {"target": {"role": "button", "name": "Save"}, "action": "click"}
POSTED = {"kind": "net", "method": "POST", "urlContains": "/api/save", "status": 200}


def test_navigate_answers_once_the_framework_has_hydrated(live):
    """reticle_navigate waits for the framework it recognises (here Next.js's markers, React's fiber
    on the app's root element) and says so; a plain page names no framework."""
    opened = open_gate_in(1.0)
    nav = go(live, "/next/")
    opened.join()
    assert nav["confirmed"] is True, nav
    assert nav["hydration"]["framework"] == "Next.js" and nav["hydration"]["hydrated"] is True, nav
    assert nav["hydration"]["waitedMs"] >= 500, nav
    out = live.mcp.ok("reticle_act_and_wait", dict(SAVE, until=POSTED, timeout_ms=4000))
    assert out["verified"] == "yes", out
    assert STATE.saved == ["ada"]
    nav = go(live, "/")
    assert nav["confirmed"] is True and "hydration" not in nav, nav


def test_an_act_waits_for_hydration_and_a_page_that_never_hydrates_is_named(live):
    """Before: a click on the server's button before React attached its handler did nothing, and
    `until` the save was a `no` for a save that works.  Now the act waits for hydration (bounded);
    when it does not come, the click is still made and the answer says the page had not hydrated."""
    nav = go(live, "/next/")  # the gate stays shut: the page never hydrates
    assert nav["hydration"] == {"framework": "Next.js", "hydrated": False, "waitedMs": nav["hydration"]["waitedMs"]}
    assert "had not hydrated" in nav["note"], nav
    out = live.mcp.ok("reticle_act_and_wait", dict(SAVE, until=POSTED, timeout_ms=6000))
    assert out["verified"] == "no", out  # nothing was sent: the app's handlers never came
    assert out["effect"]["hydration"]["hydrated"] is False, out
    assert STATE.saved == []
    opened = open_gate_in(1.0)
    started = time.monotonic()
    out = live.mcp.ok("reticle_act_and_wait", dict(SAVE, until=POSTED, timeout_ms=6000, detail="full"))
    opened.join()
    assert out["verified"] == "yes", out
    hydration = out["effect"]["effect"]["hydration"]
    assert hydration["framework"] == "Next.js" and hydration["hydrated"] is True, out
    assert 500 <= hydration["waitedMs"] <= 3000 and time.monotonic() - started < 6, out
    assert STATE.saved == ["ada"]


def test_a_value_the_page_reset_before_the_submit_is_never_a_clean_yes(live):
    """A value filled, then thrown away by the page re-rendering its form, then Save: the server got an
    empty title and answered 200 "Saved" (a clean `yes` before).  The submit's answer names the field
    and the verdict is unknown (fill_reset).  Filled again, the same submit is `yes`."""
    nav = go(live, "/remount/")
    assert "hydration" not in nav, nav
    title = {"target": {"label": "Title"}, "action": "fill", "args": {"value": "Milk"}}
    live.mcp.ok("reticle_act", title)
    STATE.gate.set()
    live.mcp.ok("reticle_wait_for", {"predicate": {"kind": "text", "contains": "Form mounted again"}, "timeout_ms": 5000})
    out = live.mcp.ok("reticle_act_and_wait", dict(SAVE, until=POSTED, timeout_ms=4000))
    assert STATE.saved == [""]  # the truth: the title never reached the server
    assert out["verified"] == "unknown" and out["verifiedReason"] == "fill_reset", out
    assert "'Title'" in out["because"] and "replaced" in out["because"], out
    assert out["effect"]["resetFields"][0]["field"] == "Title", out
    live.mcp.ok("reticle_act", title)
    out = live.mcp.ok("reticle_act_and_wait", dict(SAVE, until=POSTED, timeout_ms=4000))
    assert out["verified"] == "yes", out
    assert STATE.saved == ["", "Milk"]


def test_a_value_left_alone_submits_clean(live):
    """The healthy journey: fill, Save, with no re-render between: yes, with no reset named.  The page
    clears the field after the save: that is the save's doing, so the next act names no reset either."""
    go(live, "/remount/")
    live.mcp.ok("reticle_act", {"target": {"label": "Title"}, "action": "fill", "args": {"value": "Eggs"}})
    out = live.mcp.ok("reticle_act_and_wait", dict(SAVE, until=POSTED, timeout_ms=4000))
    assert out["verified"] == "yes" and "effect" not in out, out
    assert STATE.saved == ["Eggs"]
    out = live.mcp.ok("reticle_act_and_wait", dict(SAVE, until={"kind": "text", "contains": 'Saved ""'},
                                                   timeout_ms=4000))
    assert out["verified"] == "yes" and "effect" not in out, out
    assert STATE.saved == ["Eggs", ""]


def test_in_a_device_open_answers_once_hydrated_and_real_input_reaches_the_handler(live):
    """reticle_open waits for hydration as reticle_navigate does, and real input (CDP) after it saves."""
    STATE.reset()
    opened = open_gate_in(1.5)
    dev = live.mcp.ok("reticle_open", {"url": live.app.url + "/next/"}, timeout=90)
    opened.join()
    try:
        assert dev["hydration"]["framework"] == "Next.js" and dev["hydration"]["hydrated"] is True, dev
        plain = live.mcp.ok("reticle_open", {"url": live.app.url + "/streamed/"}, timeout=90)
        assert "hydration" not in plain, plain  # waited only while it was parsed: no framework to name
        live.mcp.ok("reticle_navigate", {"url": live.app.url + "/next/", "sessionId": dev["sessionId"]})
        out = live.mcp.ok("reticle_act_and_wait", dict(SAVE, until=POSTED, timeout_ms=4000, sessionId=dev["sessionId"]))
        assert out["verified"] == "yes", out
        assert STATE.saved == ["ada"]
    finally:
        live.mcp.ok("reticle_close", {"sessionId": dev["sessionId"]})
