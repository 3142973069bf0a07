"""The SDK's observers in headless Chromium, each read back through a real
MCP client: XHR, WebSocket and EventSource frames, every console level,
storage and cookies, focus, store diffs, page health, and the caps that
announce themselves (DOM burst, snapshot size)."""

import json

import pytest
import tornado.web
import tornado.websocket

from _harness import Live, chromium_path, wait_until

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="needs Chromium (sh tests/bootstrap.sh)")

PAGE = """<!doctype html><html><head><title>Observers</title>
<script src="%(daemon)s/reticle.js"></script></head><body>
<input id="field" aria-label="Field">
<button id="xhr">XHR</button>
<button id="ws">Socket</button>
<button id="sse">Stream</button>
<button id="logs">Logs</button>
<button id="store">Store</button>
<button id="cookie">Cookie</button>
<button id="burst">Burst</button>
<div id="list"></div>
<dialog open aria-label="Export"><p>Export ready</p><button>Close export</button></dialog>
<script>
  function $(id) { return document.getElementById(id); }
  var state = {count: 0, user: {name: "ann"}}, subs = [];
  var store = {getState: function () { return state; }, subscribe: function (f) { subs.push(f); return function () {}; }};
  reticle.registerStore("app", store);
  reticle.describe({testids: ["declared-id"], signals: ["saved"], stores: ["app"], flows: [{name: "checkout", steps: ["pay"]}]});
  $("xhr").onclick = function () { var x = new XMLHttpRequest(); x.open("GET", "/api/missing"); x.send(); };
  $("ws").onclick = function () {
    var ws = new WebSocket("ws://" + location.host + "/echo");
    ws.onopen = function () { ws.send("hello over ws"); };
  };
  $("sse").onclick = function () { var es = new EventSource("/events"); es.onmessage = function () { es.close(); }; };
  $("logs").onclick = function () { console.log("plain log"); console.info("an info"); console.warn("a warning"); console.debug("a debug"); };
  $("store").onclick = function () { state = Object.assign({}, state, {count: state.count + 1}); subs.forEach(function (f) { f(state); }); };
  $("cookie").onclick = function () { document.cookie = "flavour=oat; path=/"; sessionStorage.setItem("step", "2"); };
  $("burst").onclick = function () {
    var list = $("list");
    for (var i = 0; i < 3000; i++) { var li = document.createElement("p"); li.textContent = "row " + i; list.appendChild(li); }
  };
</script></body></html>
"""


class _Echo(tornado.websocket.WebSocketHandler):
    def on_message(self, message):
        self.write_message("echo: " + message)


class _Events(tornado.web.RequestHandler):
    def get(self):
        self.set_header("Content-Type", "text/event-stream")
        self.write("data: first server event\n\n")


class _Missing(tornado.web.RequestHandler):
    def get(self):
        self.set_status(404)
        self.write("nope")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    live = Live(tmp_path_factory.mktemp("observers"), PAGE,
                routes=[(r"/echo", _Echo), (r"/events", _Events), (r"/api/missing", _Missing)])
    yield live.mcp
    live.close()


def click(mcp, name):
    mcp.ok("reticle_act", {"target": {"role": "button", "name": name}, "action": "click"})


def events(mcp, *types):
    return [e for e in mcp.ok("reticle_observe", {"since": 0, "max_events": 2000})["events"] if e["type"] in types]


def test_xhr_is_observed_like_fetch(page):
    click(page, "XHR")
    calls = wait_until(lambda: [c for c in page.ok("reticle_network", {"urlContains": "/api/missing"})["calls"]
                                if not c.get("pending")], what="the XHR")
    assert calls[-1]["status"] == 404 and calls[-1]["method"] == "GET"
    assert calls[-1].get("initiator") == "xhr"


def test_websocket_and_event_source_frames(page):
    click(page, "Socket")
    frames = wait_until(lambda: [e for e in events(page, "net.ws") if e["data"].get("direction") == "in"],
                        what="the echoed frame")
    assert "echo: hello over ws" in json.dumps(frames)
    assert any(e["data"].get("direction") == "out" for e in events(page, "net.ws"))
    click(page, "Stream")
    sse = wait_until(lambda: [e for e in events(page, "net.sse") if e["data"].get("direction") == "in"],
                     what="the server event")
    assert "first server event" in json.dumps(sse)


def test_every_console_level(page):
    click(page, "Logs")
    wait_until(lambda: len(page.ok("reticle_console")["logs"]) >= 4, what="four console lines")
    levels = {x["level"]: x["text"] for x in page.ok("reticle_console")["logs"]}
    assert levels["log"] == "plain log" and levels["warn"] == "a warning"
    assert levels["info"] == "an info" and levels["debug"] == "a debug"
    only_warn = page.ok("reticle_console", {"level": "warn"})["logs"]
    assert [x["text"] for x in only_warn] == ["a warning"]


def test_store_diffs_and_capabilities(page):
    click(page, "Store")
    diffs = wait_until(lambda: [e for e in events(page, "state.change") if e["data"].get("path") == "count"],
                       what="a state.change")
    assert diffs[-1]["data"]["from"] == 0 and diffs[-1]["data"]["to"] == 1
    caps = page.ok("reticle_capabilities")
    assert "declared-id" in caps["testids"] and "saved" in caps["signals"]
    assert caps["flows"][0]["name"] == "checkout" and "app" in caps["stores"]


def test_cookies_session_storage_and_focus(page):
    click(page, "Cookie")
    changes = wait_until(lambda: events(page, "storage.change"), what="storage changes")
    keys = {e["data"].get("key") for e in changes}
    assert {"flavour", "step"} <= keys
    page.ok("reticle_act", {"target": {"label": "Field"}, "action": "focus"})
    focus = wait_until(lambda: events(page, "focus.change"), what="a focus change")
    assert "Field" in json.dumps(focus[-1]["data"])


def test_a_dom_burst_is_capped_and_says_so(page):
    click(page, "Burst")
    truncated = wait_until(lambda: [e for e in events(page, "truncated") if e["data"].get("what") == "dom"],
                           what="a truncated event")
    assert truncated[-1]["data"]["count"] > 0
    snap = page.ok("reticle_snapshot")
    assert snap["truncated"] is True
    assert snap["capped"] == {"nodes": 400, "depth": 20}
    # the open dialog after 3,000 rows is still in the capped tree: dialogs come first
    first = snap["tree"].splitlines()[:3]
    assert first[0].startswith('- dialog "Export"') and any('button "Close export"' in ln for ln in first)
    assert snap["dialogsFirst"] == 1


def test_page_health_arrives_every_five_seconds(page):
    health = wait_until(lambda: events(page, "page.health"), 12, what="page.health")
    assert health[-1]["data"]["hidden"] is False
    summary = page.ok("reticle_sessions")["sessions"][0]
    assert summary["throttled"] is False
