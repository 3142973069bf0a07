"""Devices: browsers the daemon starts itself (DESIGN section 8), with real Chromium, a real
daemon and a real MCP client (the `mcp` SDK's Streamable HTTP client).

Every device a test opens is closed by the test or by its daemon's planned stop; the Chromium of
a person's tab is the harness's own and is closed in teardown."""

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import tornado.web
from tornado.testing import AsyncHTTPTestCase
from tornado.testing import gen_test

import reticle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(_harness.chromium_path() is None, reason="Chromium is not installed "
                                 "(sh tests/bootstrap.sh installs it)")]

STAGING = "staging.example.test"

# A page with no script tag whose button ignores synthetic clicks, as some apps do.
PLAIN = """<!doctype html><title>plain</title>
<button id="send">Send</button><p id="out"></p>
<script>
document.getElementById('send').addEventListener('click', function (e) {
  if (!e.isTrusted) return;
  fetch('/api/send', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"n":1}'})
    .then(function (r) { return r.json(); })
    .then(function () { document.getElementById('out').textContent = 'sent'; });
});
</script>"""

# The same page with the script tag a person adds: in a device it must connect once, not twice.
TAGGED = PLAIN.replace("<title>plain</title>", '<title>tagged</title><script src="%(daemon)s/reticle.js"></script>')

# Every event of interest is reported to the server with its isTrusted flag.
EVENTS = """<!doctype html><title>events</title>
<button id="b">Go</button> <input id="i" placeholder="Name">
<div id="src" style="width:60px;height:60px;background:#c33">from</div>
<div id="dst" style="width:90px;height:90px;background:#33c;margin-top:20px">to</div>
<script>
function rec(e) {
  var name = e.type + (e.key ? ':' + e.key : '') + ':' + e.isTrusted;
  navigator.sendBeacon('/api/log', name);
}
var b = document.getElementById('b'), i = document.getElementById('i');
['click', 'dblclick', 'mouseover'].forEach(function (t) { b.addEventListener(t, rec); });
['keydown', 'input'].forEach(function (t) { i.addEventListener(t, rec); });
document.getElementById('src').addEventListener('mousedown', rec);
document.getElementById('dst').addEventListener('mouseup', rec);
</script>"""

# What this browser kept from before: reported to the server, then set for the next visit.
STATEFUL = """<!doctype html><title>state</title><button id="send">Send</button>
<script>
navigator.sendBeacon('/api/state', JSON.stringify({cookie: document.cookie,
  local: localStorage.getItem('k'), session: sessionStorage.getItem('k')}));
document.cookie = 'c=1; path=/';
localStorage.setItem('k', 'v');
sessionStorage.setItem('k', 'v');
document.getElementById('send').addEventListener('click', function (e) {
  fetch('/api/send', {method: 'POST', body: JSON.stringify({trusted: e.isTrusted})});
});
</script>"""


# A page that wiretaps everything a page script can reach: the socket API, message ports and
# window messages, JSON, console; and then tries every string it saw as a device credential.
SNOOP = """<!doctype html><title>snoop</title><input id="pw" type="text" placeholder="Secret">
<button id="send">Send</button>
<script>
var seen = [], tried = {}, last = '';
function leak(x) { try { seen.push(typeof x === 'string' ? x : JSON.stringify(x)); } catch (e) {} }
var OS = WebSocket.prototype.send, OW = window.WebSocket, OP = MessagePort.prototype.postMessage;
WebSocket.prototype.send = function (d) { leak(this.url); leak(d); return OS.apply(this, arguments); };
window.WebSocket = function (u, p) { leak(String(u)); return p ? new OW(u, p) : new OW(u); };
window.WebSocket.prototype = OW.prototype;
window.addEventListener('message', function (e) { leak(e.data); grab(e.ports && e.ports[0]); }, true);
// whoever holds the relay's port could write frames to the device's socket: try to get it
var got = [];
function grab(p) {
  if (!p || got.indexOf(p) >= 0) return;
  got.push(p);
  for (var id = 1; id < 6; id++) OP.call(p, {op: 'send', id: id, data: '{"kind":"event","event":{"type":"x"}}'});
}
MessagePort.prototype.postMessage = function (d) { grab(this); leak(d); return OP.apply(this, arguments); };
var DS = Object.getOwnPropertyDescriptor(MessagePort.prototype, 'onmessage');
Object.defineProperty(MessagePort.prototype, 'onmessage', {configurable: true,
  set: function (f) { grab(this); DS.set.call(this, f); }, get: function () { return DS.get.call(this); }});
var ED = Object.getOwnPropertyDescriptor(MessageEvent.prototype, 'data'),
  EP = Object.getOwnPropertyDescriptor(MessageEvent.prototype, 'ports');
Object.defineProperty(MessageEvent.prototype, 'data', {configurable: true,
  get: function () { grab(this.target instanceof MessagePort && this.target); return ED.get.call(this); }});
Object.defineProperty(MessageEvent.prototype, 'ports', {configurable: true,
  get: function () { var v = EP.get.call(this); grab(v && v[0]); return v; }});
var SI = Event.prototype.stopImmediatePropagation;
Event.prototype.stopImmediatePropagation = function () {
  try { grab(EP.get.call(this)[0]); } catch (e) {} return SI.apply(this, arguments); };
var JP = JSON.parse; JSON.parse = function (t) { seen.push(String(t)); return JP.apply(JSON, arguments); };
['log', 'warn', 'error', 'info', 'debug'].forEach(function (k) {
  var o = console[k];
  console[k] = function () { leak(Array.prototype.join.call(arguments, ' ')); return o.apply(console, arguments); };
});
function tryAll() {
  var text = seen.join(' ') + ' ' + document.documentElement.outerHTML + document.getElementById('pw').value;
  var re = /device=([A-Za-z0-9_%%-]+)/g, m;
  while ((m = re.exec(text))) {
    if (tried[m[1]]) continue;
    tried[m[1]] = 1;
    var ws = new OW('ws://127.0.0.1:%(port)s/reticle?device=' + m[1]);
    ws.onopen = function () { navigator.sendBeacon('/api/stolen', 'opened'); };
  }
  var body = JSON.stringify({seen: seen.length, tried: Object.keys(tried),
    ports: got.length, hunter: text.indexOf('hunter2') >= 0, text: text.slice(-20000)});
  if (body !== last) navigator.sendBeacon('/api/snoop', body);
  last = body;
}
setInterval(tryAll, 150);
document.getElementById('send').addEventListener('click', function () {
  fetch('/api/send', {method: 'POST', body: document.getElementById('pw').value});
});
</script>"""


# A page that makes its SDK report a payment the browser never got a 200 for: an XHR aborted at
# once (the browser cancels it), whose status it fakes as 200 before the SDK reads it.
FORGE = """<!doctype html><title>forge</title><button id="pay">Go</button>
<script>
document.getElementById('pay').addEventListener('click', function () {
  var x = new XMLHttpRequest();
  x.open('POST', '/api/pay');
  Object.defineProperty(x, 'status', {get: function () { return 200; }});
  Object.defineProperty(x, 'statusText', {get: function () { return 'OK'; }});
  x.send('{"amount": 100}');
  x.abort();
  document.title = 'paid';
});
</script>"""


# Every kind of dialog: on load, from a click, a confirm whose answer the server hears.
DIALOGS = """<!doctype html><title>dialogs</title><button id="del">Ask</button><p id="out"></p>
<script>
alert('welcome');
document.getElementById('del').addEventListener('click', function () {
  var yes = confirm('Remove it?');
  document.getElementById('out').textContent = yes ? 'removed' : 'kept';
  navigator.sendBeacon('/api/confirm', String(yes));
});
</script>"""


# A button whose handler keeps the page's main thread busy for 40 s.
HANG = """<!doctype html><title>hang</title><button id="h">Hang</button>
<script>
document.getElementById('h').addEventListener('click', function () {
  var t = Date.now();
  while (Date.now() - t < 40000) {}
});
</script>"""


class Recorder(tornado.web.RequestHandler):
    def initialize(self, log):
        self.log = log

    def post(self, what):
        self.log.append((what, self.request.body.decode("utf-8", "replace"), self.request.host))
        self.set_status(201)
        self.write({"ok": True})


@pytest.fixture(scope="module")
def app():
    log = []
    server = _harness.AppServer([(r"/api/(\w+)", Recorder, {"log": log}),
                                 (r"/plain", _harness.TemplatePage, {"template": PLAIN, "daemon": ""}),
                                 (r"/events", _harness.TemplatePage, {"template": EVENTS, "daemon": ""}),
                                 (r"/state", _harness.TemplatePage, {"template": STATEFUL, "daemon": ""}),
                                 (r"/forge", _harness.TemplatePage, {"template": FORGE, "daemon": ""}),
                                 (r"/dialogs", _harness.TemplatePage, {"template": DIALOGS, "daemon": ""}),
                                 (r"/hang", _harness.TemplatePage, {"template": HANG, "daemon": ""})])
    server.log = log
    yield server
    server.close()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    # Chromium resolves the staging host name to this machine's fixture server.
    # 4 x 8 starts for all clients together cover this module's devices (the budget's tests have daemons of their own)
    d = _harness.Daemon(tmp_path_factory.mktemp("devices") / "state", env={
        "RETICLE_BROWSER_ARGS": '--host-resolver-rules="MAP %s 127.0.0.1"' % STAGING, "RETICLE_DEVICE_BUDGET": "8/600"})
    yield d
    d.close()


def device_processes(profile):
    """Pids of processes whose command line names `profile`."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                if profile.encode() in fh.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


def prove_send(mcp, app, url):
    opened = mcp.ok("reticle_open", {"url": url})
    sid = opened["sessionId"]
    found = mcp.ok("reticle_query", {"by": "role", "value": "button", "name": "Send", "sessionId": sid})
    assert found["count"] == 1
    before = len([x for x in app.log if x[0] == "send"])
    res = mcp.ok("reticle_act_and_wait", {
        "ref": found["elements"][0]["ref"], "action": "click", "sessionId": sid,
        "until": {"kind": "net", "method": "POST", "urlContains": "/api/send", "status": 201}})
    assert res["verified"] == "yes", res
    assert res["effect"]["input"] == "cdp"
    sends = [x for x in app.log if x[0] == "send"]
    assert len(sends) == before + 1 and sends[-1][1] == '{"n":1}'
    return opened, sends[-1]


def test_an_uninstrumented_loopback_page_is_verified_with_real_input(mcp, app):
    opened, _ = prove_send(mcp, app, app.url + "/plain")
    assert opened["sessionId"].startswith("device-") and opened["started"] is True
    sessions = mcp.ok("reticle_sessions")["sessions"]
    assert [s["sessionId"] for s in sessions] == [opened["sessionId"]]
    assert sessions[0]["device"] == {"deviceId": opened["deviceId"], "input": "cdp", "headed": False}


def test_a_non_loopback_host_is_verified_through_the_device_capability(mcp, app):
    url = "http://%s:%d/plain" % (STAGING, app.port)
    opened, send = prove_send(mcp, app, url)
    assert send[2] == "%s:%d" % (STAGING, app.port)  # the browser really asked for the staging host
    session = [s for s in mcp.ok("reticle_sessions")["sessions"] if s["sessionId"] == opened["sessionId"]][0]
    assert session["url"].startswith("http://%s:" % STAGING)


def test_a_page_with_the_script_tag_connects_once_and_reuse_navigates(daemon, mcp, app):
    first = mcp.ok("reticle_open", {"url": app.url + "/plain"})
    tagged = _harness.AppServer([(r"/.*", _harness.TemplatePage, {"template": TAGGED, "daemon": daemon.url})])
    try:
        again = mcp.ok("reticle_open", {"url": tagged.url + "/"})
        assert again["started"] is False and again["sessionId"] == first["sessionId"]
        time.sleep(0.5)  # the tag's own copy of the SDK has run by now, and would have connected
        sessions = mcp.ok("reticle_sessions")["sessions"]
        assert len(sessions) == 1 and sessions[0]["url"].startswith(tagged.url), sessions
        assert [x["sessionId"] for x in daemon.status()["devices"]] == [first["sessionId"]]
    finally:
        tagged.close()


def test_a_fresh_open_keeps_the_device_and_drops_cookies_and_storage(mcp, app):
    def visit(**extra):
        before = len([x for x in app.log if x[0] == "state"])
        opened = mcp.ok("reticle_open", dict({"url": app.url + "/state"}, **extra))
        _harness.wait_until(lambda: len([x for x in app.log if x[0] == "state"]) > before, 10,
                            what="the page to report what it kept")
        return opened, json.loads([x for x in app.log if x[0] == "state"][-1][1])

    first, seen = visit()
    assert first["started"] is True and seen == {"cookie": "", "local": None, "session": None}, seen
    again, seen = visit()
    assert again["started"] is False and seen == {"cookie": "c=1", "local": "v", "session": "v"}, seen
    fresh, seen = visit(fresh=True)
    assert seen == {"cookie": "", "local": None, "session": None}, seen
    assert (fresh["started"], fresh["fresh"]) == (False, True), fresh
    assert (fresh["sessionId"], fresh["deviceId"]) == (first["sessionId"], first["deviceId"])
    # the same session drives the new tab with real input, and the old tab is gone
    sessions = mcp.ok("reticle_sessions")["sessions"]
    assert [x["sessionId"] for x in sessions] == [first["sessionId"]], sessions
    before = len([x for x in app.log if x[0] == "send"])
    res = mcp.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Send"}, "action": "click",
                                          "until": {"kind": "net", "method": "POST", "urlContains": "/api/send"}})
    assert res["verified"] == "yes" and res["effect"]["input"] == "cdp", res
    sends = [x for x in app.log if x[0] == "send"]
    assert len(sends) == before + 1 and json.loads(sends[-1][1]) == {"trusted": True}
    shot = mcp.ok("reticle_screenshot", {})
    assert os.path.getsize(shot["path"]) > 0


def test_a_caller_with_a_device_means_it_when_it_names_no_session(daemon, mcp, app):
    other = _harness.Mcp(daemon.url + "/mcp")
    bystander = _harness.Mcp(daemon.url + "/mcp")
    try:
        mine = mcp.ok("reticle_open", {"url": app.url + "/plain"})
        theirs = other.ok("reticle_open", {"url": app.url + "/events"})
        assert mine["sessionId"] != theirs["sessionId"]
        # each caller's calls without a sessionId go to its own device, never to the other one
        assert mcp.ok("reticle_query", {"by": "role", "value": "button", "name": "Send"})["count"] == 1
        assert other.ok("reticle_query", {"by": "role", "value": "button", "name": "Go"})["count"] == 1
        assert mcp.ok("reticle_query", {"by": "role", "value": "button", "name": "Go"})["count"] == 0
        res = mcp.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Send"}, "action": "click",
                                              "until": {"kind": "net", "method": "POST", "urlContains": "/api/send"}})
        assert res["verified"] == "yes", res
        # a caller with no device of its own still has to say which tab it means
        refused, is_error = bystander.call("reticle_query", {"by": "role", "value": "button"})
        assert is_error and "multiple sessions connected" in refused["error"], refused
    finally:
        other.call("reticle_close", {})
        other.close()
        bystander.close()


def test_a_device_belongs_to_the_client_that_opened_it(daemon, mcp, app):
    """Issue 27 #8: every call another client makes on a device (Streamable HTTP, SSE, or stdio through
    `reticle mcp`, each its own client) is refused with code device_not_yours, naming reticle_open;
    nothing it asked for happens; reticle_sessions still lists the device as another client's."""
    owner = _harness.Mcp(daemon.url + "/mcp")
    try:
        sid = owner.ok("reticle_open", {"url": app.url + "/plain"})["sessionId"]
        sends = len([x for x in app.log if x[0] == "send"])
        click = {"target": {"role": "button", "name": "Send"}, "action": "click"}
        calls = [("reticle_query", {"by": "role", "value": "button"}), ("reticle_snapshot", {}),
                 ("reticle_inspect", {"ref": "e1"}), ("reticle_act", click),
                 ("reticle_act_sequence", {"steps": [click]}),
                 ("reticle_act_and_wait", dict(click, until={"kind": "net", "urlContains": "/api/send"})),
                 ("reticle_navigate", {"url": app.url + "/events"}), ("reticle_screenshot", {}),
                 ("reticle_observe", {"since": 0}), ("reticle_network", {}), ("reticle_console", {}),
                 ("reticle_wait_for", {"predicate": {"kind": "text", "contains": "Send"}}),
                 ("reticle_assert", {"predicate": {"kind": "text", "contains": "Send"}}), ("reticle_state", {}),
                 ("reticle_capabilities", {}), ("reticle_flow_save", {"name": "taken"}),
                 ("reticle_flow_replay", {"name": "taken"}), ("reticle_fault", {"list": True}),
                 ("reticle_fault", {"match": {"urlContains": "/api/send"}, "respond": {"status": 500}})]
        for name, args in calls:
            data, is_error = mcp.call(name, dict(args, sessionId=sid))
            assert is_error and data["code"] == "device_not_yours", (name, data)
            assert "another MCP client" in data["error"] and "reticle_open" in data["recovery"], (name, data)
        data, is_error = mcp.call("reticle_snapshot", {})  # the only tab: still not this caller's
        assert is_error and data["code"] == "device_not_yours", data

        async def from_sse_and_stdio():
            from mcp import ClientSession
            from mcp.client.sse import sse_client
            from mcp.client.stdio import StdioServerParameters
            from mcp.client.stdio import stdio_client
            stdio = StdioServerParameters(command=sys.executable, env=_harness.daemon_env(daemon.state_dir),
                                          args=[_harness.RETICLE_PY, "mcp", "--port", str(daemon.port)])
            out = []
            for opened in (sse_client(daemon.url + "/mcp/sse"), stdio_client(stdio)):
                async with opened as streams:
                    async with ClientSession(streams[0], streams[1]) as session:
                        await session.initialize()
                        result = await session.call_tool("reticle_act", dict(click, sessionId=sid))
                        out.append((result.is_error, json.loads(result.content[0].text)))
            return out

        for is_error, data in asyncio.run(from_sse_and_stdio()):
            assert is_error and data["code"] == "device_not_yours", data
        time.sleep(0.5)
        assert len([x for x in app.log if x[0] == "send"]) == sends, "a refused click reached the app"
        assert not os.path.exists(os.path.join(os.getcwd(), ".reticle", "flows", "taken.json"))  # the daemon's cwd
        tab = [t for t in mcp.ok("reticle_sessions")["sessions"] if t["sessionId"] == sid][0]
        assert tab["device"]["yours"] is False and "reticle_open" in tab["device"]["note"], tab
        tab = [t for t in owner.ok("reticle_sessions")["sessions"] if t["sessionId"] == sid][0]
        assert "yours" not in tab["device"] and tab["url"].endswith("/plain"), tab
        # its own client still drives it, with no sessionId too
        res = owner.ok("reticle_act_and_wait", dict(click, until={"kind": "net", "method": "POST",
                                                                  "urlContains": "/api/send", "status": 201}))
        assert res["verified"] == "yes", res
        assert owner.ok("reticle_fault", {"list": True, "sessionId": sid})["faults"] == []
    finally:
        owner.call("reticle_close", {})
        owner.close()


def test_a_page_in_a_device_never_sees_its_bridge_ticket_and_cannot_take_the_session(daemon, mcp):
    """Issue 19 #1: a page that hooks the socket API, ports, messages, JSON and console sees no
    credential; every string it tries as one is refused; the device's own socket stays."""
    log = []
    page = SNOOP.replace("%(port)s", str(daemon.port))
    snoop = _harness.AppServer([(r"/api/(\w+)", Recorder, {"log": log}),
                                (r"/", _harness.TemplatePage, {"template": page, "daemon": ""})])
    try:
        sid = mcp.ok("reticle_open", {"url": snoop.url + "/"})["sessionId"]
        mcp.ok("reticle_act", {"target": {"role": "textbox", "name": "Secret"}, "action": "fill",
                               "args": {"value": "hunter2"}, "sessionId": sid})
        res = mcp.ok("reticle_act_and_wait", {
            "target": {"role": "button", "name": "Send"}, "action": "click", "sessionId": sid,
            "until": {"kind": "net", "method": "POST", "urlContains": "/api/send", "status": 201}})
        assert res["verified"] == "yes", res
        # a second document of the same device: its ticket is a new one, and the page hunts again
        mcp.ok("reticle_open", {"url": snoop.url + "/?again=1"})
        time.sleep(1.0)  # the page hunts every 150 ms
        reports = [json.loads(x[1]) for x in log if x[0] == "snoop"]
        assert any(r["hunter"] for r in reports), "the page's hooks did not even see the fill: the test is blind"
        assert not any(r["tried"] for r in reports), reports[-1]["tried"]
        assert not any(r["ports"] for r in reports), "the page got hold of the relay's port"
        assert not [x for x in log if x[0] == "stolen"]
        assert "device_second_socket" not in daemon.log()
        sessions = mcp.ok("reticle_sessions")["sessions"]
        assert [x["sessionId"] for x in sessions] == [sid] and "?again=1" in sessions[0]["url"], sessions
    finally:
        mcp.call("reticle_close", {})
        snoop.close()


def test_a_request_the_browser_never_made_cannot_make_yes_and_is_flagged(mcp, app):
    """Issue 19 #4: in a device, the page's reports are checked against the browser's own network
    record; a forged POST /api/pay 200 is not counted, and integrity names it."""
    sid = mcp.ok("reticle_open", {"url": app.url + "/forge"})["sessionId"]
    until = {"kind": "net", "method": "POST", "urlContains": "/api/pay", "status": 200}
    res = mcp.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Go"}, "action": "click",
                                          "sessionId": sid, "until": until, "timeout_ms": 3000})
    assert res["verified"] != "yes", res
    res = mcp.ok("reticle_assert", {"predicate": until, "sessionId": sid})
    assert res["verified"] != "yes", res
    # the browser sent it and cancelled it (issue 27 #7: its record wins, and the page's 200 is named)
    assert any("misreported" in i for i in res.get("integrity", [])), res
    res = mcp.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Go"}, "action": "click",
                                          "sessionId": sid, "until": {"kind": "settled", "quietMs": 200}})
    calls = mcp.ok("reticle_network", {"sessionId": sid, "since": 0, "method": "POST"})["calls"]
    assert calls and all(c.get("status") == 0 and c.get("error") for c in calls), calls


# Issue 27 #7: pages that make their SDK report a save the browser did not see succeed.
# (a) URL broken for one path and a fetch input whose URL the SDK reads and whose string the browser
# sends: the SDK says POST /api/save (relative, unresolved), the browser sends GET /ok.
FORGE_URL = """<!doctype html><title>forge-url</title><button id="save">Save</button><p id="out"></p>
<script>
var U = window.URL;
window.URL = function (u, b) {
  if (String(u) === '/api/save') throw new TypeError('no');
  return b === undefined ? new U(u) : new U(u, b);
};
window.URL.prototype = U.prototype;
document.getElementById('save').addEventListener('click', function () {
  fetch({url: '/api/save', method: 'POST', toString: function () { return '/ok'; }})
    .then(function (r) { document.getElementById('out').textContent = 'saved ' + r.status; });
});
</script>"""

# (b) Response.prototype.status patched to say "200" (a string) for a real 500.
FORGE_TYPE = """<!doctype html><title>forge-type</title><button id="save">Save</button><p id="out"></p>
<script>
var D = Object.getOwnPropertyDescriptor(Response.prototype, 'status');
Object.defineProperty(Response.prototype, 'status', {configurable: true, get: function () {
  var s = D.get.call(this);
  return s === 500 ? '200' : s;
}});
document.getElementById('save').addEventListener('click', function () {
  fetch('/api/save', {method: 'POST', body: '{}'})
    .then(function (r) { document.getElementById('out').textContent = 'saved ' + r.status; });
});
</script>"""

# (c) One real 200 save, then status patched to say 200 for every later (real 500) one.
FORGE_LATER = """<!doctype html><title>forge-later</title><button id="save">Save</button><p id="out"></p>
<script>
var saves = 0;
document.getElementById('save').addEventListener('click', function () {
  fetch('/api/save', {method: 'POST', body: '{}'}).then(function (r) {
    saves += 1;
    document.getElementById('out').textContent = 'saved ' + saves;
    Object.defineProperty(Response.prototype, 'status', {configurable: true, get: function () { return 200; }});
  });
});
</script>"""

# (d) A document load it never made: the SDK links an arriving document to the navigation its last
# page announced in sessionStorage, so the page writes its own announcement (POST /api/save) and reloads.
FORGE_DOC = """<!doctype html><title>forge-doc</title><button id="save">Save</button>
<script>
document.getElementById('save').addEventListener('click', function () {
  var forged = JSON.stringify({id: 'dforged', requestId: 'dforged', method: 'POST', methodKnown: true,
    url: location.origin + '/api/save', urlKnown: true, initiator: 'document', cause: 'form',
    navigationType: 'reload', at: Date.now()});
  window.addEventListener('pagehide', function () { sessionStorage.setItem('__reticle_doc_pending', forged); });
  location.reload();
});
</script>"""

# A healthy save whose fetch follows a 303 to the record it made.
REDIRECTED = """<!doctype html><title>redirected</title><button id="save">Save</button><p id="out"></p>
<script>
document.getElementById('save').addEventListener('click', function () {
  fetch('/api/save?then=303', {method: 'POST', body: '{}'})
    .then(function (r) { document.getElementById('out').textContent = 'saved ' + r.status; });
});
</script>"""


class Saver(tornado.web.RequestHandler):
    """POST /api/save answers the next status of `plan` (500 once it is empty), or 303 to /ok with
    ?then=303; GET /ok is 200."""

    def initialize(self, plan):
        self.plan = plan

    def post(self):
        if self.get_query_argument("then", "") == "303":
            self.redirect("/ok", status=303)
            return
        self.set_status(self.plan.pop(0) if self.plan else 500)
        self.write({"saved": self.get_status() == 200})

    def get(self):
        self.write({"ok": True})


@pytest.fixture(scope="module")
def forger():
    plan = []
    server = _harness.AppServer([(r"/api/save", Saver, {"plan": plan}), (r"/ok", Saver, {"plan": plan}),
                                 (r"/url", _harness.TemplatePage, {"template": FORGE_URL, "daemon": ""}),
                                 (r"/type", _harness.TemplatePage, {"template": FORGE_TYPE, "daemon": ""}),
                                 (r"/later", _harness.TemplatePage, {"template": FORGE_LATER, "daemon": ""}),
                                 (r"/redirected", _harness.TemplatePage, {"template": REDIRECTED, "daemon": ""}),
                                 (r"/doc", _harness.TemplatePage, {"template": FORGE_DOC, "daemon": ""})])
    server.plan = plan
    yield server
    server.close()


def save(mcp, sid, until):
    return mcp.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Save"}, "action": "click",
                                           "sessionId": sid, "until": until, "timeout_ms": 3000})


SAVED_200 = {"kind": "net", "method": "POST", "urlContains": "/api/save", "status": 200}
SAVED_OK = {"kind": "net", "method": "POST", "urlContains": "/api/save", "ok": True}


def test_a_page_that_breaks_url_cannot_pass_off_another_request_as_its_save(mcp, forger):
    """Issue 27 #7 (a): the SDK reports POST /api/save 200 (a relative URL: the page broke URL for
    it) while the browser sent GET /ok; the daemon resolves the URL itself and finds no such request."""
    sid = mcp.ok("reticle_open", {"url": forger.url + "/url"})["sessionId"]
    res = save(mcp, sid, SAVED_200)
    assert res["verified"] != "yes", res
    res = mcp.ok("reticle_assert", {"predicate": SAVED_OK, "sessionId": sid})
    assert res["verified"] != "yes", res
    assert any("never made" in i for i in res.get("integrity", [])), res
    assert "saved 200" in json.dumps(mcp.ok("reticle_snapshot", {"sessionId": sid})), "the forged save never ran"


def test_a_status_of_the_wrong_type_is_refused_at_ingest(mcp, forger):
    """Issue 27 #7 (b): Response.prototype.status says "200" for a real 500: the report is refused
    as malformed (never read as ok: true) and named under integrity."""
    del forger.plan[:]
    sid = mcp.ok("reticle_open", {"url": forger.url + "/type"})["sessionId"]
    res = save(mcp, sid, SAVED_OK)
    assert res["verified"] != "yes", res
    res = mcp.ok("reticle_assert", {"predicate": SAVED_OK, "sessionId": sid})
    assert res["verified"] != "yes", res
    assert any("malformed" in i for i in res.get("integrity", [])), res
    assert "saved 200" in json.dumps(mcp.ok("reticle_snapshot", {"sessionId": sid})), "the page did not forge"


def test_one_real_success_does_not_vouch_for_later_failures(mcp, forger):
    """Issue 27 #7 (c): after one real 200 save (yes), the page makes its SDK say 200 for real 500s;
    each browser record confirms one report, the browser's status counts, integrity names it."""
    forger.plan[:] = [200]
    sid = mcp.ok("reticle_open", {"url": forger.url + "/later"})["sessionId"]
    assert save(mcp, sid, SAVED_200)["verified"] == "yes"
    for n in (2, 3):
        res = save(mcp, sid, SAVED_200)
        assert res["verified"] != "yes", res
        assert "saved %d" % n in json.dumps(mcp.ok("reticle_snapshot", {"sessionId": sid}))
    res = mcp.ok("reticle_assert", {"predicate": SAVED_OK, "sessionId": sid})
    assert res["verified"] != "yes", res
    assert any("misreported" in i for i in res.get("integrity", [])), res
    calls = mcp.ok("reticle_network", {"sessionId": sid, "since": 0})
    assert [c.get("status") for c in calls["calls"] if "/api/save" in c.get("url", "")] == [200, 500, 500], calls


def test_a_document_load_the_browser_never_made_cannot_make_yes(mcp, forger):
    """Issue 27 #7 (d): the page makes its SDK report a POST /api/save document load (a forged
    announcement, then a reload): the browser's record has only the reload (GET), so no `yes`."""
    sid = mcp.ok("reticle_open", {"url": forger.url + "/doc"})["sessionId"]
    doc_save = dict(SAVED_200, urlContains="/api/save")
    res = save(mcp, sid, doc_save)
    assert res["verified"] != "yes", res
    time.sleep(reticle.NET_CONFIRM_S + 0.5)
    res = mcp.ok("reticle_assert", {"predicate": doc_save, "sessionId": sid, "since": 0})
    assert res["verified"] != "yes", res
    assert any("never made" in i for i in res.get("integrity", [])), res


def test_a_fetch_that_follows_a_303_is_still_confirmed(mcp, forger):
    """A device's record of a fetch that followed a redirect is one chain: the page's report of it
    (POST, its first URL, the final 200) is confirmed, and the answer is clean."""
    sid = mcp.ok("reticle_open", {"url": forger.url + "/redirected"})["sessionId"]
    res = save(mcp, sid, SAVED_200)
    assert res["verified"] == "yes" and not res.get("integrity"), res


def test_dialogs_never_hang_a_device_and_are_named_in_the_answer(mcp, app):
    """Issue 19 #5: an alert on load, a confirm from a click: answered at once (dismissed unless
    the act says accept), named in the answer, and the tab keeps answering."""
    t0 = time.monotonic()
    sid = mcp.ok("reticle_open", {"url": app.url + "/dialogs"})["sessionId"]  # alert() on load
    assert time.monotonic() - t0 < 8
    button = {"role": "button", "name": "Ask"}
    res = mcp.ok("reticle_act_and_wait", {"target": button, "action": "click", "sessionId": sid,
                                          "until": {"kind": "text", "contains": "kept"}, "timeout_ms": 3000})
    assert res["verified"] == "yes", res
    assert "confirm dialog (Remove it?) was dismissed" in res.get("warning", ""), res
    res = mcp.ok("reticle_act", {"target": button, "action": "click", "args": {"dialog": "accept"},
                                 "sessionId": sid})
    assert [d["handled"] for d in res["dialogs"]] == ["accepted"], res
    _harness.wait_until(lambda: [x[1] for x in app.log if x[0] == "confirm"][-1:] == ["true"], 5,
                        what="the accepted confirm to reach the server")
    shot = mcp.ok("reticle_screenshot", {"sessionId": sid})  # the page still answers everything
    assert os.path.getsize(shot["path"]) > 0
    nav = mcp.ok("reticle_navigate", {"reload": True, "sessionId": sid})
    assert nav["confirmed"], nav


def test_a_stuck_device_tab_waits_timeout_ms_is_not_answering_never_yes_and_reloads(mcp, app):
    """Issue 19 #5: a page whose main thread is busy: a command waits what timeout_ms allows (not 8 s),
    reticle_sessions shows it not answering (not throttled), a route assert over it is unknown (not yes
    from the cached URL), a screenshot fails fast, and reticle_navigate {reload: true} brings it back."""
    sid = mcp.ok("reticle_open", {"url": app.url + "/hang"})["sessionId"]
    t0 = time.monotonic()
    res, is_error = mcp.call("reticle_act_and_wait", {"target": {"role": "button", "name": "Hang"}, "action": "click",
                                                      "sessionId": sid, "timeout_ms": 1500})
    took = time.monotonic() - t0
    assert took < 5, (took, res)  # timeout_ms 1500 (+0.5 s), not the fixed 8 s
    assert is_error and res["code"] == "not_answering", res
    time.sleep(5)  # nothing heard from the page since: its main thread is busy
    tab = [s for s in mcp.ok("reticle_sessions", {})["sessions"] if s["sessionId"] == sid][0]
    assert tab["answering"] is False and tab["throttled"] is False, tab
    assert "main thread is busy" in tab["notAnswering"], tab
    res = mcp.ok("reticle_assert", {"predicate": {"kind": "route", "pathname": "/hang"}, "sessionId": sid})
    assert res["verified"] == "unknown" and res["verifiedReason"] == "not_answering", res
    t0 = time.monotonic()  # a live read of the page waits what timeout_ms allows
    res = mcp.ok("reticle_assert", {"predicate": {"kind": "text", "contains": "Hang"}, "sessionId": sid,
                                    "timeout_ms": 1000})
    assert res["verified"] == "unknown" and time.monotonic() - t0 < 4, res
    t0 = time.monotonic()
    res, is_error = mcp.call("reticle_screenshot", {"sessionId": sid})
    assert is_error and res["code"] == "not_answering" and time.monotonic() - t0 < 2, res
    t0 = time.monotonic()
    nav = mcp.ok("reticle_navigate", {"reload": True, "sessionId": sid})
    assert nav["confirmed"] and time.monotonic() - t0 < 8, nav
    res = mcp.ok("reticle_assert", {"predicate": {"kind": "route", "pathname": "/hang"}, "sessionId": sid})
    assert res["verified"] == "yes", res
    tab = [s for s in mcp.ok("reticle_sessions", {})["sessions"] if s["sessionId"] == sid][0]
    assert tab["answering"] is True, tab


def test_every_act_in_a_device_is_trusted_input(mcp, app):
    sid = mcp.ok("reticle_open", {"url": app.url + "/events"})["sessionId"]
    del app.log[:]

    def act(action, target, args=None):
        res = mcp.ok("reticle_act", {"target": target, "action": action, "args": args or {}, "sessionId": sid})
        assert res["input"] == "cdp", res
        return res

    button, field = {"role": "button", "name": "Go"}, {"placeholder": "Name"}
    act("hover", button)
    act("click", button)
    act("dblclick", button)
    typed = act("type", field, {"text": "ab"})
    assert typed["result"]["effect"]["valueChanged"] is True
    act("press", field, {"key": "Enter"})
    seq = mcp.ok("reticle_act_sequence", {"sessionId": sid, "steps": [
        {"target": {"text": "from"}, "action": "drag", "args": {"toRef": mcp.ok(
            "reticle_query", {"by": "text", "value": "to", "sessionId": sid})["elements"][0]["ref"]}}]})
    assert seq["input"] == "cdp" and seq["steps"][0]["input"] == "cdp", seq
    want = {"mouseover:true", "click:true", "dblclick:true", "keydown:a:true", "keydown:b:true", "input:true",
            "keydown:Enter:true", "mousedown:true", "mouseup:true"}
    got = _harness.wait_until(lambda: want <= {x[1] for x in app.log if x[0] == "log"} and app.log, 5,
                              what="every event to be reported")
    events = {x[1] for x in got if x[0] == "log"}
    assert not [e for e in events if e.endswith(":false")], events


def test_screenshots_are_pngs_of_the_viewport_and_inline_adds_a_jpeg(mcp, app):
    sid = mcp.ok("reticle_open", {"url": app.url + "/plain", "viewport": {"width": 800, "height": 600}})["sessionId"]
    shot = mcp.ok("reticle_screenshot", {"sessionId": sid})
    with open(shot["path"], "rb") as fh:
        png = fh.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (800, 600)
    assert (shot["width"], shot["height"], shot["bytes"]) == (800, 600, len(png))
    assert os.path.dirname(shot["path"]).endswith("screenshots")
    result = mcp.raw_call("reticle_screenshot", {"sessionId": sid, "inline": True})
    assert not result.is_error
    images = [c for c in result.content if c.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/jpeg"
    jpeg = base64.b64decode(images[0].data)
    assert jpeg[:2] == b"\xff\xd8"
    assert reticle._jpeg_size(jpeg) == (800, 600)
    element = mcp.ok("reticle_query", {"by": "role", "value": "button", "sessionId": sid})["elements"][0]
    small = mcp.ok("reticle_screenshot", {"sessionId": sid, "ref": element["ref"]})
    assert 0 < small["width"] < 200 and 0 < small["height"] < 100


def test_a_screenshot_answers_a_resource_link_to_its_png(mcp, app):
    """MCP 2025-06-18 resource_link: the PNG's file:// URI, MIME type and size beside the JSON text;
    `inline` keeps its image block after the link."""
    sid = mcp.ok("reticle_open", {"url": app.url + "/plain", "viewport": {"width": 640, "height": 400}})["sessionId"]
    for inline in (False, True):
        result = mcp.raw_call("reticle_screenshot", {"sessionId": sid, "inline": inline})
        assert not result.is_error
        data = json.loads(result.content[0].text)
        links = [c for c in result.content if c.type == "resource_link"]
        assert len(links) == 1, result.content
        link = links[0]
        assert str(link.uri) == "file://" + urllib.parse.quote(data["path"])
        assert link.mime_type == "image/png" and link.size == data["bytes"] == os.path.getsize(data["path"])
        assert link.name == os.path.basename(data["path"])
        with urllib.request.urlopen(str(link.uri)) as fh:  # the link opens the very file
            assert fh.read()[:8] == b"\x89PNG\r\n\x1a\n"
        assert [c.type for c in result.content] == ["text", "resource_link"] + (["image"] if inline else [])


def test_a_wide_page_is_inlined_at_most_1280_px_wide(mcp, app):
    sid = mcp.ok("reticle_open", {"url": app.url + "/plain", "viewport": {"width": 1600, "height": 500}})["sessionId"]
    result = mcp.raw_call("reticle_screenshot", {"sessionId": sid, "inline": True})
    data = json.loads(result.content[0].text)
    assert (data["width"], data["height"]) == (1600, 500)
    jpeg = base64.b64decode([c for c in result.content if c.type == "image"][0].data)
    assert reticle._jpeg_size(jpeg) == (1280, 400)


def test_a_32000_px_page_is_captured_to_its_cap_and_the_device_survives(mcp):
    """Issue 19 #20: a 1280x32000 full-page capture overran CDP's read buffer and took the device down."""
    tall = _harness.AppServer([(r"/.*", _harness.TemplatePage, {"template": (
        '<!doctype html><title>tall</title><div style="height:32000px;background:linear-gradient(red,blue)">'
        '</div>'), "daemon": ""})])
    try:
        sid = mcp.ok("reticle_open", {"url": tall.url + "/"})["sessionId"]
        result = mcp.raw_call("reticle_screenshot", {"sessionId": sid, "fullPage": True, "inline": True})
        data = json.loads(result.content[0].text)
        assert data["height"] == reticle.SCREENSHOT_MAX_HEIGHT and data["truncated"]["pageHeight"] >= 32000, data
        jpeg = base64.b64decode([c for c in result.content if c.type == "image"][0].data)
        assert reticle._jpeg_size(jpeg)[1] <= reticle.SCREENSHOT_INLINE_MAX_HEIGHT
        assert mcp.ok("reticle_screenshot", {"sessionId": sid})["height"] == 800  # the device is still there
    finally:
        mcp.call("reticle_close", {})
        tall.close()


def test_a_persons_tab_keeps_the_synthetic_path_and_has_no_screenshots(daemon, mcp, app):
    page = _harness.AppServer([(r"/.*", _harness.TemplatePage, {"template": TAGGED, "daemon": daemon.url})])
    browser = _harness.Browser(page.url + "/")
    try:
        sessions = _harness.wait_until(lambda: mcp.ok("reticle_sessions")["sessions"], 20, what="the tab")
        sid = sessions[0]["sessionId"]
        res = mcp.ok("reticle_act", {"target": {"role": "button", "name": "Send"}, "action": "click",
                                     "sessionId": sid})
        assert res["input"] == "synthetic"
        data, is_error = mcp.call("reticle_screenshot", {"sessionId": sid})
        assert is_error and "a tab a person opened" in data["error"] and "reticle_open" in data["recovery"]
        # and the page that ignores synthetic clicks did ignore this one
        time.sleep(0.3)
        assert not mcp.ok("reticle_network", {"sessionId": sid, "method": "POST"})["calls"]
    finally:
        browser.close()
        page.close()


def test_a_wrong_url_scheme_is_refused_before_any_browser_starts(mcp):
    data, is_error = mcp.call("reticle_open", {"url": "file:///etc/passwd"})
    assert is_error and "http: and https:" in data["error"]


def test_the_budget_refuses_with_the_next_allowed_time(tmp_path, app):
    d = _harness.Daemon(tmp_path / "state", env={"RETICLE_DEVICE_BUDGET": "1/600"})
    client = _harness.Mcp(d.url + "/mcp")
    try:
        client.ok("reticle_open", {"url": app.url + "/plain"})
        client.ok("reticle_close", {})
        t0 = time.time()
        data, is_error = client.call("reticle_open", {"url": app.url + "/plain"})
        assert is_error, data
        assert "budget" in data["error"] and "next start is allowed at" in data["error"]
        assert data["nextStartAt"] in data["error"]
        next_at = time.mktime(time.strptime(data["nextStartAt"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        assert t0 + 590 <= next_at <= t0 + 601
        assert d.status()["devices"] == []
    finally:
        client.close()
        d.close()


def test_the_fifth_device_is_refused_with_the_limit_named(tmp_path, app):
    d = _harness.Daemon(tmp_path / "state")
    clients = []
    try:
        for _ in range(4):
            clients.append(_harness.Mcp(d.url + "/mcp"))
            clients[-1].ok("reticle_open", {"url": app.url + "/plain"})
        assert len(d.status()["devices"]) == 4
        clients.append(_harness.Mcp(d.url + "/mcp"))
        data, is_error = clients[-1].call("reticle_open", {"url": app.url + "/plain"})
        assert is_error and "at most 4 devices" in data["error"] and "RETICLE_MAX_DEVICES" in data["error"], data
        assert len(d.status()["devices"]) == 4
        clients[0].ok("reticle_close", {})
        clients[-1].ok("reticle_open", {"url": app.url + "/plain"})  # room again
    finally:
        for c in clients:
            c.close()
        d.close()  # the planned stop closes all four
    records = os.path.join(d.state_dir, "devices")
    assert os.listdir(records) == []


def test_the_budget_holds_across_new_sessions_and_a_client_closes_only_its_own(tmp_path, app):
    """Issue 19 #16: a new initialize before each start is no way around the budget, and one
    client cannot close another's device."""
    d = _harness.Daemon(tmp_path / "state", env={"RETICLE_DEVICE_BUDGET": "1/600"})
    clients = []
    try:
        for n in range(5):
            clients.append(_harness.Mcp(d.url + "/mcp"))
            if n < 4:
                clients[-1].ok("reticle_open", {"url": app.url + "/plain"})
                if n < 3:
                    clients[-1].ok("reticle_close", {})
        data, is_error = clients[-1].call("reticle_open", {"url": app.url + "/plain"})
        assert is_error and "all clients together" in data["error"], data
        victim = d.status()["devices"][0]["sessionId"]
        data, is_error = clients[-1].call("reticle_close", {"sessionId": victim})
        assert is_error and "belongs to another client" in data["error"], data
        assert [x["sessionId"] for x in d.status()["devices"]] == [victim]
    finally:
        for c in clients:
            c.close()
        d.close()


def test_a_close_cancelled_half_way_is_finished_by_the_next_one(tmp_path, app):
    """A daemon's stop cancels a spare still warming up, whose clean-up closes it; the stop closes it
    too.  The second close may not return before the browser is gone, and cancelling the first may not
    stop the close (it did: the second returned at once, the daemon exited, and the browser lived on
    with its profile, one orphan per test run)."""
    async def run():
        hub, server = _harness.serve_hub(tmp_path)
        manager = hub.devices
        manager.pool.want = 0  # no spare warming beside it at the test's end
        try:
            device, _ = await manager.open("key-1", app.url + "/plain")
            profile = device.process.profile
            assert device_processes(profile)
            first = asyncio.ensure_future(manager.close(device, "the warm-up was cancelled"))
            await asyncio.sleep(0)  # the first close has begun: it waits for Browser.close
            first.cancel()
            await manager.close(device, "the daemon is stopping")
            assert device_processes(profile) == [], "the second close returned with the browser alive"
            assert not os.path.exists(profile)
        finally:
            await manager.close_all("the test ended")
            server.stop()

    asyncio.run(run())


def test_a_silent_clients_device_makes_room_for_another(tmp_path, app):
    """Issue 19 #16: at the cap, the device of a client silent for DEVICE_EVICT_IDLE_S (one that
    crashed) is closed for a client that needs one; a device in use is not."""
    async def run():
        hub, server = _harness.serve_hub(tmp_path)
        manager = hub.devices
        manager.max_devices = 1
        try:
            first, _ = await manager.open("key-1", app.url + "/plain")
            try:
                await manager.open("key-2", app.url + "/plain")
                raise AssertionError("a device in use was taken")
            except reticle.ToolError as exc:
                assert "every one was used in the last" in exc.error, exc.error
            manager.last_used["key-1"] -= reticle.DEVICE_EVICT_IDLE_S + 1  # its client went silent
            second, started = await manager.open("key-2", app.url + "/plain")
            assert started and first.closed and list(manager.devices) == [second.id]
        finally:
            await manager.close_all("the test ended")
            server.stop()

    asyncio.run(run())


def test_a_sigkilled_daemons_browsers_are_reaped_by_the_next_start(tmp_path, app):
    d = _harness.Daemon(tmp_path / "state")
    client = _harness.Mcp(d.url + "/mcp")
    try:
        client.ok("reticle_open", {"url": app.url + "/plain"})
        records = os.path.join(d.state_dir, "devices")
        # the device and the spare started beside it once a device was asked for: both leave a record
        names = _harness.wait_until(lambda: len(os.listdir(records)) == 2 and os.listdir(records), 10,
                                    what="the device's and the spare's records")
        profiles = []
        for name in names:
            with open(os.path.join(records, name)) as fh:
                profiles.append(json.load(fh)["profile"])
        _harness.wait_until(lambda: all(os.path.isdir(p) and device_processes(p) for p in profiles), 10,
                            what="both browsers")
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
    finally:
        client.close()
        d.stop()  # already gone: this only closes its log
    time.sleep(0.3)
    # a browser that writes to the dead daemon's stderr pipe may end on its own; one left is the reaper's work
    assert any(device_processes(p) for p in profiles), "a killed daemon's browsers outlive it: work for the reaper"
    again = _harness.Daemon(tmp_path / "state", port=d.port)
    try:  # (reaped beside serving: the new daemon answers at once, the reaping ends soon after)
        _harness.wait_until(lambda: os.listdir(records) == [], 20, what="the dead daemon's devices reaped")
        for profile in profiles:
            assert device_processes(profile) == []
            assert not os.path.exists(profile)
    finally:
        again.close()


def test_a_missing_browser_is_one_sentence(tmp_path):
    d = _harness.Daemon(tmp_path / "state", env={"PATH": str(tmp_path), "RETICLE_BROWSER": None})
    client = _harness.Mcp(d.url + "/mcp")
    try:
        data, is_error = client.call("reticle_open", {"url": "http://127.0.0.1:9/"})
        assert is_error
        error = data["error"]
        assert "RETICLE_BROWSER" in error and "apt-get install chromium" in error
        assert error.endswith(".") and error.count(". ") == 0, error
    finally:
        client.close()
        d.close()


def test_reticle_demo_prints_both_verdicts_and_a_screenshot(tmp_path):
    env = dict(os.environ, RETICLE_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run([sys.executable, _harness.RETICLE_PY, "demo"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout
    assert "starting" in table and "connected in" in table
    rows = [line for line in table.splitlines() if line.startswith(("add a note", "save the profile"))]
    assert len(rows) == 2 and "  yes  " in rows[0] and "  no  " in rows[1], table
    path = table.split("screenshot: ", 1)[1].split(" (", 1)[0]
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.listdir(str(tmp_path / "state" / "devices")) == []


def test_reticle_drive_keeps_a_device_until_interrupted(tmp_path, app):
    port = _harness.free_port()
    env = dict(os.environ, RETICLE_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.Popen([sys.executable, _harness.RETICLE_PY, "drive", app.url + "/plain", "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        second = proc.stdout.readline()
        assert first.startswith("session device-"), first + proc.stderr.read() if proc.poll() else first
        assert "http://127.0.0.1:%d/mcp" % port in second
        with urllib.request.urlopen("http://127.0.0.1:%d/status" % port, timeout=5) as resp:
            status = json.load(resp)
        assert [x["sessionId"] for x in status["devices"]] == [first.split()[1]]
        pid = status["devices"][0]["pid"]
        shown = subprocess.run([sys.executable, _harness.RETICLE_PY, "status", "--port", str(port)], env=env,
                               capture_output=True, text=True, timeout=30)
        assert "devices: 1" in shown.stdout and "(a device Reticle started)" in shown.stdout, shown.stdout
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
        assert not reticle._pid_alive(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


class CapabilityTest(AsyncHTTPTestCase):
    """The bridge accepts a device capability from that device's session only (DESIGN 5 and 8).

    The device here is the manager's own record with a minted capability but no browser: what is
    tested is the bridge's check, over a real socket."""

    def setUp(self):
        import tempfile

        self.state_dir = tempfile.TemporaryDirectory(prefix="reticle-cap-")
        self.sockets = []
        super().setUp()

    def tearDown(self):
        for ws in self.sockets:
            ws.close()
        super().tearDown()
        self.state_dir.cleanup()

    def get_app(self):
        self.hub = reticle.Hub(state_dir=self.state_dir.name)
        self.device = reticle._Device(self.hub.devices, "k", False, (800, 600))
        self.hub.devices.devices[self.device.id] = self.device
        return reticle.make_app(self.hub)

    async def _device_page(self, ticket=None):
        """A page of the device (a staging origin, a ticket its relay was given) says hello.
        -> (its socket, the session the bridge made, or None after a second)."""
        ws = await self._connect("?device=" + (ticket or self.device.mint_ticket(1, "page")), "http://%s" % STAGING)
        ws.write_message(self.hello(self.device.session_id))
        for _ in range(100):
            if self.hub.bridge.get(self.device.session_id):
                break
            await asyncio.sleep(0.01)
        return ws, self.hub.bridge.get(self.device.session_id)

    async def _connect(self, query, origin):
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        headers = {"Origin": origin} if origin else {}
        req = HTTPRequest(self.get_url("/reticle" + query).replace("http:", "ws:"), headers=headers)
        conn = await websocket_connect(req)
        self.sockets.append(conn)
        return conn

    def hello(self, sid):
        return json.dumps({"kind": "hello", "protocolVersion": reticle.BRIDGE_PROTOCOL, "sessionId": sid,
                           "url": "http://%s/" % STAGING})

    @gen_test
    async def test_the_devices_capability_admits_its_page_from_any_origin(self):
        ws, session = await self._device_page()
        self.assertIsNotNone(session)
        self.assertIs(session.device, self.device)

    @gen_test
    async def test_a_wrong_capability_is_refused_at_the_upgrade(self):
        from tornado.httpclient import HTTPClientError

        ticket = self.device.mint_ticket(1, "page")
        for cap in ("wrong", ticket[:-1] + ("A" if ticket[-1] != "A" else "B"), self.hub.token()):
            with self.assertRaises(HTTPClientError) as caught:
                await self._connect("?device=" + cap, "http://%s" % STAGING)
            self.assertEqual(caught.exception.code, 403)

    @gen_test
    async def test_a_capability_is_refused_for_another_session(self):
        ws = await self._connect("?device=" + self.device.mint_ticket(1, "page"), "http://%s" % STAGING)
        ws.write_message(self.hello("someone-else"))
        msg = await ws.read_message()
        self.assertIsNone(msg)
        self.assertEqual(ws.close_code, 1008)
        self.assertIn("another session", ws.close_reason)
        self.assertIsNone(self.hub.bridge.get("someone-else"))

    @gen_test
    async def test_a_loopback_page_cannot_claim_a_devices_session(self):
        ws = await self._connect("", "http://127.0.0.1:5173")
        ws.write_message(self.hello(self.device.session_id))
        msg = await ws.read_message()
        self.assertIsNone(msg)
        self.assertEqual(ws.close_code, 1008)
        self.assertIsNone(self.hub.bridge.get(self.device.session_id))

    @gen_test
    async def test_input_asked_for_outside_an_act_is_refused_and_the_bridge_stays_up(self):
        ws = await self._connect("?device=" + self.device.mint_ticket(1, "page"), "http://%s" % STAGING)
        ws.write_message(self.hello(self.device.session_id))
        for frame in ({"kind": "input", "id": "i1", "action": "click", "x": 10, "y": 10},
                      {"kind": "input", "id": "i2", "action": "click", "x": "not a number"}):
            ws.write_message(json.dumps(frame))
            reply = json.loads(await ws.read_message())
            self.assertEqual(reply["id"], frame["id"])
            self.assertIs(reply["ok"], False)
            self.assertIn("while an act runs", reply["error"])
        self.device.acting = 1  # as during an act: now the malformed one is refused on its numbers
        ws.write_message(json.dumps({"kind": "input", "id": "i3", "action": "click", "x": "not a number"}))
        reply = json.loads(await ws.read_message())
        self.assertEqual((reply["id"], reply["ok"]), ("i3", False))
        self.assertIn("not a number", reply["error"])
        self.device.acting = 0
        self.assertIsNotNone(self.hub.bridge.get(self.device.session_id).handler)

    @gen_test
    async def test_a_second_socket_with_a_used_ticket_is_refused_and_logged_as_a_warning(self):
        from tornado.httpclient import HTTPClientError

        ticket = self.device.mint_ticket(1, "page")
        ws, session = await self._device_page(ticket)
        self.assertIsNotNone(session)
        with self.assertLogs("reticle.bridge", "WARNING") as logged:
            with self.assertRaises(HTTPClientError) as caught:
                await self._connect("?device=" + ticket, "http://evil.test")
        self.assertEqual(caught.exception.code, 403)
        self.assertTrue(any("device_second_socket" in line for line in logged.output), logged.output)
        # the live session keeps its own socket
        self.assertIs(self.hub.bridge.get(self.device.session_id).handler, session.handler)

    @gen_test
    async def test_a_ticket_rotates_when_another_document_asks(self):
        from tornado.httpclient import HTTPClientError

        old = self.device.mint_ticket(1, "page")
        new = self.device.mint_ticket(2, "page")  # the next document's relay asked: a navigation
        with self.assertRaises(HTTPClientError) as caught:
            await self._connect("?device=" + old, "http://%s" % STAGING)
        self.assertEqual(caught.exception.code, 403)
        ws, session = await self._device_page(new)
        self.assertIsNotNone(session)

    @gen_test
    async def test_an_unused_ticket_expires(self):
        from tornado.httpclient import HTTPClientError

        ticket = self.device.mint_ticket(1, "page")
        self.device.tickets[ticket]["minted"] -= reticle.TICKET_UNUSED_S + 1
        with self.assertRaises(HTTPClientError) as caught:
            await self._connect("?device=" + ticket, "http://%s" % STAGING)
        self.assertEqual(caught.exception.code, 403)

    @gen_test
    async def test_wrong_capabilities_are_limited_as_wrong_tokens(self):
        from tornado.httpclient import HTTPClientError

        codes = []
        for i in range(30):
            with self.assertRaises(HTTPClientError) as caught:
                await self._connect("?device=guess%d" % i, "http://%s" % STAGING)
            codes.append(caught.exception.code)
        self.assertEqual(codes[0], 403)
        self.assertIn(429, codes)
        # the device's own pages are not locked out by someone else's guessing
        ws, session = await self._device_page()
        self.assertIsNotNone(session)


def test_a_device_closes_when_its_browser_dies_or_its_key_idles(tmp_path, app):
    """In process: the daemon's own Hub serving on a real port, with real browsers."""
    async def run():
        hub, server = _harness.serve_hub(tmp_path)
        manager = hub.devices

        async def gone(device):
            """Closed all the way: out of the manager, its profile removed (in a thread) and then its record."""
            record = str(tmp_path / "state" / "devices" / (device.id + ".json"))
            for _ in range(200):
                if device.id not in manager.devices and not os.path.exists(device.profile) \
                        and not os.path.exists(record):
                    return True
                await asyncio.sleep(0.025)
            return False

        try:
            device, started = await manager.open("key-1", app.url + "/plain")
            assert started and device_processes(device.profile)
            os.killpg(device.proc.pid, signal.SIGKILL)  # the browser dies under the daemon
            assert await gone(device)
            assert hub.bridge.get(device.session_id) is None or hub.bridge.get(device.session_id).handler is None

            device, _ = await manager.open("key-2", app.url + "/plain")
            manager.idle_s = 0.3
            manager._close_idle()
            await asyncio.sleep(0.1)
            assert device.id in manager.devices, "a key used just now is not idle"
            await asyncio.sleep(0.3)
            manager._close_idle()
            assert await gone(device)
            assert device_processes(device.profile) == []
            assert os.listdir(str(tmp_path / "state" / "devices")) == []
        finally:
            await manager.close_all("the test ended")
            server.stop()

    asyncio.run(run())


def test_a_held_click_is_held_by_real_input(mcp, app):
    sid = mcp.ok("reticle_open", {"url": app.url + "/plain"})["sessionId"]
    res = mcp.ok("reticle_act", {"target": {"role": "button", "name": "Send"}, "action": "click",
                                 "args": {"holdMs": 400}, "sessionId": sid})
    assert res["input"] == "cdp"
    assert 400 <= res["result"]["effect"]["heldMs"] < 2000, res


def log_events(d, event):
    return [json.loads(ln) for ln in d.log().splitlines() if '"event":"%s"' % event in ln]


def test_a_new_clients_open_adopts_the_spare_and_shares_nothing_with_the_last(tmp_path, app):
    """The first reticle_open starts its browser and, once it answered, a spare in the background;
    the next client's open adopts the spare (no launch) in a browser of its own: none of the first
    client's cookies, local or session storage.  A new spare replaces the one used."""
    d = _harness.Daemon(tmp_path / "state")
    first, second = _harness.Mcp(d.url + "/mcp"), _harness.Mcp(d.url + "/mcp")
    try:
        a = first.ok("reticle_open", {"url": app.url + "/state"})
        assert a["started"] is True
        _harness.wait_until(lambda: log_events(d, "device_spare_ready"), 20, what="the spare to be warm")
        b = second.ok("reticle_open", {"url": app.url + "/state", "viewport": {"width": 700, "height": 500}})
        assert b["started"] is True and b["sessionId"] != a["sessionId"]
        assert b["viewport"] == {"width": 700, "height": 500}
        started = log_events(d, "device_started")
        assert [s["spare"] for s in started] == [False, True]
        assert started[1]["deviceId"] == log_events(d, "device_spare_ready")[0]["deviceId"] == b["deviceId"]
        pids = {dev["deviceId"]: dev["pid"] for dev in d.status()["devices"]}
        assert pids[a["deviceId"]] != pids[b["deviceId"]]
        states = _harness.wait_until(lambda: [json.loads(x[1]) for x in app.log if x[0] == "state"][-2:]
                                     if len([x for x in app.log if x[0] == "state"]) >= 2 else None, 10,
                                     what="both pages to report what they kept")
        assert states[1] == {"cookie": "", "local": None, "session": None}, states
        width = second.ok("reticle_query", {"by": "role", "value": "button", "sessionId": b["sessionId"]})
        assert width["elements"]
        shot = second.ok("reticle_screenshot", {"sessionId": b["sessionId"]})
        assert (shot["width"], shot["height"]) == (700, 500)
        _harness.wait_until(lambda: len(log_events(d, "device_spare_ready")) == 2, 20, what="a new spare")
    finally:
        first.close()
        second.close()
        d.close()
    assert os.listdir(os.path.join(d.state_dir, "devices")) == []  # the stop closed the spare too


def test_the_spare_counts_in_the_device_limit(tmp_path, app):
    d = _harness.Daemon(tmp_path / "state", env={"RETICLE_MAX_DEVICES": "2"})
    clients = [_harness.Mcp(d.url + "/mcp") for _ in range(3)]
    records = os.path.join(d.state_dir, "devices")
    try:
        clients[0].ok("reticle_open", {"url": app.url + "/plain"})
        _harness.wait_until(lambda: log_events(d, "device_spare_ready"), 20, what="the spare")
        assert len(os.listdir(records)) == 2  # one device and one spare: the limit is reached
        clients[1].ok("reticle_open", {"url": app.url + "/plain"})  # adopts the spare
        time.sleep(1.0)
        assert len(os.listdir(records)) == 2, "no new spare past the limit"
        data, is_error = clients[2].call("reticle_open", {"url": app.url + "/plain"})
        assert is_error and "at most 2 devices" in data["error"]
        assert len(log_events(d, "device_spare_ready")) == 1
    finally:
        for c in clients:
            c.close()
        d.close()


def test_no_spare_with_reticle_spare_devices_0(tmp_path, app):
    d = _harness.Daemon(tmp_path / "state", env={"RETICLE_SPARE_DEVICES": "0"})
    client = _harness.Mcp(d.url + "/mcp")
    try:
        client.ok("reticle_open", {"url": app.url + "/plain"})
        time.sleep(1.5)
        assert len(os.listdir(os.path.join(d.state_dir, "devices"))) == 1
        assert not log_events(d, "device_spare_ready")
    finally:
        client.close()
        d.close()


def test_spares_close_with_the_idle_devices(tmp_path, monkeypatch):
    """In the daemon's own objects on a real loop: a warmed spare is a real browser, and the idle sweep
    that closes idle devices closes it once no device was asked for in the idle time."""
    monkeypatch.setenv("RETICLE_STATE_DIR", str(tmp_path / "state"))

    async def run():
        hub = reticle.Hub(state_dir=str(tmp_path / "state"))
        manager = hub.devices
        manager.asked_at = time.monotonic()
        manager.top_up()
        assert len(manager.spares) == 1
        spare = manager.spares[0]
        await asyncio.wait_for(manager.spare_tasks[spare.id], 30)
        assert spare.ready and spare.context and device_processes(spare.profile)
        manager._close_idle()  # asked for just now: the spare stays
        await asyncio.sleep(0.2)
        assert manager.spares == [spare]
        manager.asked_at = time.monotonic() - manager.idle_s - 1
        manager._close_idle()
        await asyncio.wait_for(asyncio.gather(*list(hub.tasks)), 15)
        assert manager.spares == [] and spare.closed
        assert device_processes(spare.profile) == [] and not os.path.exists(spare.profile)

    asyncio.run(run())


def test_a_devices_page_whose_socket_drops_connects_again_with_a_new_ticket(tmp_path, app):
    """In process: the page's first socket spent the one ticket its relay asked for; when the bridge
    drops that socket (1013, try again), the SDK opens another one and the relay asks for a new ticket,
    so the same session is connected again."""
    async def run():
        hub, server = _harness.serve_hub(tmp_path)
        manager = hub.devices
        try:
            device, started = await manager.open("key-1", app.url + "/plain")
            session = hub.bridge.get(device.session_id)
            assert started and session is not None and session.handler is not None
            first = set(device.tickets)
            assert len(first) == 1 and all(t["used"] for t in device.tickets.values()), device.tickets
            generation = session.generation
            session.handler.close(1013, "the test drops the socket")
            back = await manager.wait_connected(device, generation)
            assert back.handler is not None and back.generation > generation
            assert set(device.tickets) - first, "the second socket opened without a ticket of its own"
        finally:
            await manager.close_all("the test ended")
            server.stop()

    asyncio.run(run())


def test_a_devtools_connect_cancelled_or_closed_midway_leaves_no_socket_open():
    """A spare closed while its browser's DevTools socket is still being made (close_all cancels its
    start): the socket, once made, is closed at once, not left for the garbage collector (a loaded run
    found one left open by a spare's start). The DevTools end here is a slow WebSocket server."""
    import tornado.web
    import tornado.websocket

    opened, closed = [], []

    class SlowDevTools(tornado.websocket.WebSocketHandler):
        async def prepare(self):
            await asyncio.sleep(0.4)   # the handshake answers late, as a busy browser's does

        def open(self):
            opened.append(1)

        def on_close(self):
            closed.append(1)

    async def run():
        server = tornado.httpserver.HTTPServer(tornado.web.Application([(r"/devtools", SlowDevTools)]))
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        server.add_sockets(sockets)
        url = "ws://127.0.0.1:%d/devtools" % sockets[0].getsockname()[1]
        try:
            cancelled = reticle._CdpClient()
            task = asyncio.ensure_future(cancelled.connect(url))
            await asyncio.sleep(0.1)
            task.cancel()
            closed_early = reticle._CdpClient()
            connecting = asyncio.ensure_future(closed_early.connect(url))
            await asyncio.sleep(0.1)
            closed_early.close()
            with pytest.raises(reticle._CdpError):
                await connecting
            for _ in range(100):
                if len(closed) == 2:
                    break
                await asyncio.sleep(0.02)
            assert len(opened) == 2 and len(closed) == 2, (opened, closed)
        finally:
            server.stop()
    asyncio.run(run())
