"""Acting and proving, end to end: a fixture app with a small JSON API whose
faults are switched on the server side, driven in headless Chromium through
a real MCP client.  Each fault gets its verdict, and `yes` once it is off."""

import asyncio
import json
import time

import pytest
import tornado.web
import tornado.websocket

from _harness import Live, TemplatePage, chromium_path, wait_until

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="needs Chromium (sh tests/bootstrap.sh)")

FAULTS = {}

APP = """<!doctype html>
<html><head><title>Fixture shop</title>
<style>
  .pulse { animation: pulse 60ms linear 1; }
  @keyframes pulse { from { opacity: 0.5; } to { opacity: 1; } }
</style>
<script src="%(daemon)s/reticle.js"></script></head>
<body>
<h1>Fixture shop</h1>
<p id="status" role="status"></p>
<p id="items">Items: 0</p>
<div id="box">box</div>
<button id="pay">Pay</button>
<button id="order">Send order</button>
<button id="bulk">Import items</button>
<button id="profile">Save profile</button>
<button id="add">Add to cart</button>
<button id="sync">Sync now</button>
<button id="export">Export</button>
<button id="ping">Ping</button>
<button id="noop">Noop</button>
<button id="theme">Dark theme</button>
<button id="go">Open orders</button>
<button id="animate">Animate</button>
<label>Name <input id="name" name="name"></label>
<script>
  function $(id) { return document.getElementById(id); }
  function post(url, body) {
    return fetch(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body || {})});
  }
  var cart = {count: 0};
  var subs = [];
  var store = {getState: function () { return {cart: cart}; },
               subscribe: function (f) { subs.push(f); return function () {}; }};
  reticle.registerStore("shop", store);
  function setCart(c) { cart = {count: c}; subs.forEach(function (f) { f(store.getState()); }); }
  // Bug: shows success whatever the server said.
  $("pay").onclick = function () { post("/api/pay", {amount: 5}).then(function () { $("status").textContent = "Payment received"; }); };
  $("order").onclick = function () {
    post("/api/order", {sku: "tea"}).then(function (r) { return r.json(); }).then(function (j) {
      if (j.retry) { return post("/api/order", {sku: "tea"}); }  // Bug: retries a write that succeeded.
    }).then(function () { $("status").textContent = "Order sent"; });
  };
  $("bulk").onclick = function () { post("/api/bulk").then(function (r) { return r.json(); }).then(function () { $("status").textContent = "Imported"; }); };
  $("profile").onclick = function () {
    post("/api/profile", {name: "ann"}).then(function (r) { return r.json(); }).then(function (j) {
      if (j.warn) { console.error("profile cache desync: " + j.warn); }
      $("status").textContent = "Saved";
    });
  };
  $("add").onclick = function () {
    post("/api/cart").then(function (r) { return r.json(); }).then(function (j) {
      $("items").textContent = "Items: " + j.count;
      setCart(j.count + (j.skew || 0));  // Bug: the store drifts from what is rendered.
    });
  };
  $("sync").onclick = function () { post("/api/sync").then(function () { $("status").textContent = "Synced"; }); };
  $("export").onclick = function () { post("/api/export").then(function () { $("status").textContent = "Export started"; }); };
  $("ping").onclick = function () { reticle.signal("pinged", {n: 1}); };
  $("noop").onclick = function () {};
  $("theme").onclick = function () { localStorage.setItem("theme", "dark"); };
  $("go").onclick = function () { history.pushState({}, "", "/orders"); $("status").textContent = "Orders"; };
  $("animate").onclick = function () { var b = $("box"); b.classList.remove("pulse"); void b.offsetWidth; b.classList.add("pulse"); };
</script>
</body></html>
"""


class _Api(tornado.web.RequestHandler):
    async def post(self, name):
        fault = FAULTS.get(name)
        if name == "pay":
            if fault:
                self.set_status(500)
                self.write({"error": "card processor down"})
            else:
                self.write({"ok": True, "paid": 5})
        elif name == "order":
            self.write({"ok": True, "retry": bool(fault)})
        elif name == "bulk":
            results = [{"id": 1, "ok": True}, {"id": 2, "ok": not fault, "error": "duplicate sku" if fault else None}]
            self.write({"results": results})
        elif name == "profile":
            self.write({"ok": True, "warn": "stale etag" if fault else None})
        elif name == "cart":
            self.write({"count": 1, "skew": 1 if fault else 0})
        elif name == "sync":
            if fault:
                await asyncio.sleep(6)
            self.write({"ok": True})
        elif name == "export":
            if fault:
                self.set_status(202)
                self.write({"queued": True})
            else:
                self.write({"ok": True, "url": "/exports/1.csv"})
        else:
            self.set_status(404)


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    live = Live(tmp_path_factory.mktemp("verdicts"), APP, routes=[(r"/api/(\w+)", _Api)])
    yield live.mcp
    live.close()


@pytest.fixture(autouse=True)
def fresh(request):
    FAULTS.clear()
    if "shop" in request.fixturenames:
        mcp = request.getfixturevalue("shop")
        nav = mcp.ok("reticle_navigate", {"url": "/"})
        assert nav["confirmed"] is True, nav
    yield


def act_and_wait(mcp, button, until=None, **extra):
    args = {"target": {"role": "button", "name": button}, "action": "click"}
    if button == "Pay":  # a payment control: the SDK refuses it without confirmDangerous
        args["args"] = {"confirmDangerous": True}
    if until is not None:
        args["until"] = until
    args.setdefault("detail", "full")
    args.update(extra)
    return mcp.ok("reticle_act_and_wait", args, timeout=60)


def faulty_then_fixed(shop, fault, button, until, **extra):
    """act_and_wait with FAULTS[fault] on -> its result; then, with the fault off on a reloaded
    page, the same act must verify (so the faulty verdict came from the fault, not the test)."""
    FAULTS[fault] = True
    try:
        faulty = act_and_wait(shop, button, until, **extra)
    finally:
        FAULTS[fault] = False
    shop.ok("reticle_navigate", {"reload": True})
    fixed = act_and_wait(shop, button, until)
    assert fixed["verified"] == "yes", fixed
    return faulty


def test_a_destructive_control_needs_confirm_dangerous(shop):
    data, is_error = shop.call("reticle_act", {"target": {"role": "button", "name": "Pay"}, "action": "click"})
    assert is_error and "confirmDangerous" in data["error"]
    assert shop.ok("reticle_network", {"urlContains": "/api/pay"})["calls"] == []


def test_green_ui_over_a_failed_payment_is_no(shop):
    FAULTS["pay"] = True
    r = act_and_wait(shop, "Pay", {"kind": "text", "contains": "Payment received"})
    assert r["verified"] == "no", r
    assert r["verifiedReason"] == "contradicted"
    assert r["contradictions"][0]["kind"] == "ui-advanced-request-failed"
    assert "500" in r["because"]
    FAULTS["pay"] = False
    shop.ok("reticle_navigate", {"reload": True})
    r = act_and_wait(shop, "Pay", {"kind": "allOf", "predicates": [
        {"kind": "text", "contains": "Payment received"},
        {"kind": "net", "method": "POST", "urlContains": "/api/pay", "status": 200}]})
    assert r["verified"] == "yes", r
    assert r["honesty"]["grade"] == "net"


def test_double_post_fails_an_exact_count(shop):
    until = {"kind": "net", "method": "POST", "urlContains": "/api/order", "count": 1}
    r = faulty_then_fixed(shop, "order", "Send order", until)
    assert r["verified"] == "no", r
    assert r["verdict"]["assertion"] == "net.count" and r["verdict"]["decidedBy"] == "count-exceeded"
    assert "saw 2" in r["because"]


def test_per_item_failures_inside_a_200_are_no(shop):
    until = {"kind": "net", "urlContains": "/api/bulk", "status": 200}
    r = faulty_then_fixed(shop, "bulk", "Import items", until)
    assert r["verified"] == "no", r
    assert r["contradictions"][0]["kind"] == "partial-failure-in-ok-response"
    assert "1 of 2 results FAILED" in r["contradictions"][0]["counter"]


def test_console_error_after_the_click(shop):
    FAULTS["profile"] = True
    act_and_wait(shop, "Save profile", {"kind": "text", "contains": "Saved"})
    r = shop.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "console", "level": "error", "absent": True}})
    assert r["verified"] == "no", r
    assert "profile cache desync" in r["because"]
    FAULTS["profile"] = False
    shop.ok("reticle_navigate", {"reload": True})
    act_and_wait(shop, "Save profile", {"kind": "text", "contains": "Saved"})
    r = shop.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "console", "level": "error", "absent": True}})
    assert r["verified"] == "yes", r


def test_store_disagrees_with_the_rendered_number(shop):
    until = {"kind": "allOf", "predicates": [{"kind": "text", "contains": "Items: 1"},
                                             {"kind": "state", "store": "shop", "path": "cart.count", "equals": 1}]}
    r = faulty_then_fixed(shop, "cart", "Add to cart", until, timeout_ms=1500)
    assert r["verified"] == "no", r
    assert "cart.count is 2" in r["because"]


def test_request_that_never_settles_is_unknown(shop):
    until = {"kind": "net", "urlContains": "/api/sync", "status": 200}
    r = faulty_then_fixed(shop, "sync", "Sync now", until, timeout_ms=1000)
    assert r["verified"] == "unknown", r
    assert "in flight" in r["because"]
    [label] = r["unsettled"]["stillInFlight"]
    assert label.startswith("POST ") and label.endswith("/api/sync")


def test_a_202_that_never_reconciles_is_unknown(shop):
    r = faulty_then_fixed(shop, "export", "Export", {"kind": "net", "urlContains": "/api/export"})
    assert r["verified"] == "unknown", r
    assert r["verifiedReason"] == "outcome_pending"


def test_a_signal_before_the_act_does_not_count_after_it(shop):
    shop.ok("reticle_act", {"target": {"role": "button", "name": "Ping"}, "action": "click"})
    shop.ok("reticle_act", {"target": {"role": "button", "name": "Noop"}, "action": "click"})
    r = shop.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "signal", "name": "pinged"}})
    assert r["verified"] == "no", r
    assert r["verifiedReason"] == "assertion_failed" and r["assertion"] == "signal.absent", r
    assert "signal 'pinged' did not fire" in r["because"]
    r = act_and_wait(shop, "Ping", {"kind": "signal", "name": "pinged", "dataMatches": {"n": {"$gte": 1}}})
    assert r["verified"] == "yes", r
    assert r["honesty"]["grade"] == "signal"


def test_already_true_before_the_act_is_unknown(shop):
    r = act_and_wait(shop, "Ping", {"kind": "text", "contains": "Fixture shop"})
    assert r["verified"] == "unknown"
    assert r["verifiedReason"] == "already_true"


def test_a_click_that_changed_nothing_proves_nothing(shop):
    r = act_and_wait(shop, "Noop", {"kind": "console", "level": "error", "absent": True})
    assert r["verified"] == "unknown", r
    assert [c["kind"] for c in r["contradictions"]] == ["action-had-no-effect"]
    r = act_and_wait(shop, "Ping", {"kind": "console", "level": "error", "absent": True})
    assert r["verified"] == "yes", r


def test_every_kind_and_combinator_against_the_live_page(shop):
    act_and_wait(shop, "Dark theme", {"kind": "storage", "key": "theme", "changed": True})
    checks = [
        ({"kind": "storage", "area": "local", "key": "theme", "equals": "dark"}, "yes"),
        ({"kind": "storage", "key": "no-such-key", "absent": True}, "yes"),
        ({"kind": "element", "query": {"role": "button", "name": "Pay"}, "state": "enabled"}, "yes"),
        ({"kind": "element", "query": {"role": "button", "name": "Pay"}, "state": ["visible", "enabled"]}, "yes"),
        ({"kind": "element", "query": {"role": "button", "name": "Pay"}, "state": "disabled"}, "no"),
        ({"kind": "element", "query": {"role": "button", "name": "Refund"}, "absent": True}, "yes"),
        ({"kind": "text", "contains": "Fixture shop"}, "yes"),
        ({"kind": "state", "path": "cart.count", "equals": 0}, "yes"),
        ({"kind": "route", "pathname": "/"}, "yes"),
        ({"kind": "console", "absent": True}, "yes"),
        ({"kind": "settled", "quietMs": 50}, "yes"),
        ({"kind": "not", "predicate": {"kind": "text", "contains": "Exploded"}}, "yes"),
        ({"kind": "anyOf", "predicates": [{"kind": "text", "contains": "nope"}, {"kind": "text", "contains": "Pay"}]}, "yes"),
        ({"kind": "allOf", "predicates": [{"kind": "text", "contains": "Pay"}, {"kind": "route", "pathname": "/x"}]}, "no"),
        ({"kind": "element", "query": {"role": "button", "name": "Refund"}}, "no"),
    ]
    for predicate, want in checks:
        r = shop.ok("reticle_assert", {"detail": "full", "predicate": predicate})
        assert r["verified"] == want, (predicate, r)
    presence = shop.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "text", "contains": "Fixture shop"}})
    assert presence["verified"] == "yes" and "presence" in presence["advice"]
    consequence = shop.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "storage", "key": "theme", "equals": "dark"}})
    assert "advice" not in consequence
    miss = shop.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "element", "query": {"role": "button", "name": "Refund"}}})
    assert "no button named 'Refund'; saw:" in miss["because"] and "'Pay'" in miss["because"]
    r = act_and_wait(shop, "Open orders", {"kind": "route", "pathname": "/orders"})
    assert r["verified"] == "yes", r
    r = act_and_wait(shop, "Animate", {"kind": "animation", "name": "pulse", "completed": True})
    assert r["verified"] == "yes", r
    r = act_and_wait(shop, "Ping")  # no until: wait for the page to settle
    assert r["verified"] == "yes", r
    assert r["verdict"]["pass"] is True


def test_tolerated_spellings_reach_the_same_verdict(shop):
    act_and_wait(shop, "Pay", {"kind": "net", "urlContains": "/api/pay"})
    spellings = [
        {"type": "net", "url": "/api/pay", "status": 200},
        {"kind": "text", "text": "Payment received"},
        {"kind": "text", "value": "Payment received"},
        {"kind": "route", "path": "/"},
        {"kind": "route", "url": "/"},
        {"kind": "console", "level": "error", "textContains": "x", "absent": True},
        {"kind": "element", "role": "button", "name": "Pay"},
        {"kind": "allOf", "of": [{"kind": "text", "contains": "Pay"}]},
        {"kind": "not", "of": {"kind": "text", "contains": "Exploded"}},
    ]
    for predicate in spellings:
        r = shop.ok("reticle_assert", {"detail": "full", "predicate": predicate})
        assert r["verified"] == "yes", (predicate, r)
    r = shop.ok("reticle_assert", {"until": {"kind": "signal", "data": {"n": 1}, "name": "pinged"}})
    assert r["verified"] == "no", r
    assert r["verifiedReason"] == "assertion_failed", r
    assert "signal 'pinged' did not fire" in r["because"]


def test_malformed_predicates_give_no_verdict(shop):
    since = shop.ok("reticle_navigate", {"reload": True})["since"]
    data, is_error = shop.call("reticle_assert", {"detail": "full", "predicate": {"kind": "net", "urlcontains": "/api"}})
    assert is_error and "verified" not in data
    assert "unknown field urlcontains" in data["error"] and "urlContains" in data["accepts"]
    data, is_error = shop.call("reticle_act_and_wait", {"target": {"role": "button", "name": "Pay"}, "action": "click",
                                                        "until": {"allOf": []}})
    assert is_error and "verified" not in data and "no `kind`" in data["error"]
    # nothing was clicked: no request to /api/pay after the malformed call
    calls = shop.ok("reticle_network", {"urlContains": "/api/pay", "since": since})["calls"]
    assert calls == []


NO_BODIES = """<!doctype html><html><head><title>No bodies</title>
<script src="%(daemon)s/reticle.js" data-capture-bodies="false"></script></head><body>
<button id="save">Save draft</button><p id="out"></p>
<script>
  document.getElementById("save").onclick = function () {
    fetch("/api/profile", {method: "POST", body: "{}"}).then(function () { document.getElementById("out").textContent = "Saved"; });
  };
</script></body></html>
"""


def test_a_write_whose_body_was_not_captured_is_unknown(tmp_path):
    live = Live(tmp_path, NO_BODIES, routes=[(r"/api/(\w+)", _Api)])
    try:
        r = act_and_wait(live.mcp, "Save draft", {"kind": "net", "method": "POST", "urlContains": "/api/profile",
                                                  "status": 200})
        assert r["verified"] == "unknown", r
        assert r["verifiedReason"] == "outcome_unread"
        calls = live.mcp.ok("reticle_network", {"urlContains": "/api/profile"})
        assert calls["bodiesNotCaptured"] is True
    finally:
        live.close()


WITH_FRAME = """<!doctype html><html><head><title>Framed</title>
<script src="%(daemon)s/reticle.js"></script></head><body>
<p>Main page</p>
<iframe src="%(daemon)s/status" title="another origin"></iframe>
</body></html>
"""


NO_FRAME = """<!doctype html><html><head><title>Plain</title>
<script src="%(daemon)s/reticle.js"></script></head><body>
<p>Main page</p>
<iframe src="%(daemon)s/status" style="display:none" title="a hidden channel"></iframe>
<iframe src="%(daemon)s/status" width="0" height="0" style="border:0" title="a tracker"></iframe>
<button id="mount">Show the card form</button>
<script>
document.getElementById('mount').addEventListener('click', function () {
  var f = document.createElement('iframe');  // a payment provider's form, mounted on demand
  f.src = '%(daemon)s/status';
  f.title = 'card form';
  document.body.appendChild(f);
});
</script></body></html>
"""


def _until_framed(live, predicate, framed=True):
    """Assert `predicate` once the page has (or no longer has) its cross-origin frame in view."""
    def ready():
        r = live.mcp.ok("reticle_assert", {"detail": "full", "predicate": predicate})
        return r if ("cross-origin-iframe" in r.get("coverage", "")) == framed else None
    return wait_until(ready, what="the frame blind spot to be %s" % ("reported" if framed else "gone"))


def test_a_part_of_the_page_that_cannot_be_read_is_named_never_an_absence_or_a_miss(tmp_path):
    live = Live(tmp_path, WITH_FRAME, routes=lambda daemon: [
        (r"/plain", TemplatePage, {"template": NO_FRAME, "daemon": daemon})])
    try:
        absent = {"kind": "text", "contains": "Payment failed", "absent": True}
        missing = {"kind": "text", "contains": "Payment complete"}
        r = _until_framed(live, absent)
        assert (r["verified"], r["verifiedReason"]) == ("unknown", "absence_blind_spot"), r
        # a miss is no proof either: what was looked for may be inside the frame
        r = live.mcp.ok("reticle_assert", {"detail": "full", "predicate": missing})
        assert (r["verified"], r["verifiedReason"]) == ("unknown", "presence_blind_spot"), r
        assert "cross-origin frame" in r["because"] and "/status" in r["because"], r["because"]
        button = live.mcp.ok("reticle_assert", {"predicate": {"kind": "element", "query": {
            "by": "role", "value": "button", "name": "Pay now"}}})
        assert button["verifiedReason"] == "presence_blind_spot", button
        present = live.mcp.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "text", "contains": "Main page"}})
        assert present["verified"] == "yes", "a presence check is not weakened by the blind spot"
        both = live.mcp.ok("reticle_assert", {"predicate": {"kind": "allOf", "predicates": [
            missing, {"kind": "signal", "name": "paid"}]}})
        assert (both["verified"], both["verifiedReason"]) == ("no", "assertion_failed"), both
        # the next document has no frame in view (two hidden ones hide nothing from the user): the
        # blind spot went with the old one
        live.mcp.ok("reticle_navigate", {"url": live.app.url + "/plain"})
        r = _until_framed(live, absent, framed=False)
        assert r["verified"] == "yes", r
        r = live.mcp.ok("reticle_assert", {"predicate": missing})
        assert (r["verified"], r["verifiedReason"]) == ("no", "assertion_failed"), r
        # a frame mounted later, after a click, is seen as soon as it is there
        live.mcp.ok("reticle_act", {"target": {"role": "button", "name": "Show the card form"}, "action": "click"})
        r = _until_framed(live, missing)
        assert r["verifiedReason"] == "presence_blind_spot", r
    finally:
        live.close()


# -- the traps of real apps: background writes, a status bar, a flood, a socket --------------------

REAL = """<!doctype html>
<html><head><title>Notebook</title><script src="%(daemon)s/reticle.js"></script></head>
<body>
<div id="bar" role="status">Cell 2/2 · kernel idle</div>
<button id="run">Run cell</button> <pre id="out"></pre>
<button id="save">Save and log</button>
<button id="send">Send over socket</button> <p id="pushed"></p>
<script>
  function $(id) { return document.getElementById(id); }
  setInterval(function () { fetch("/real/autosave", {method: "PUT", body: "{}"}); }, 250);
  $("run").onclick = function () {
    fetch("/real/run", {method: "POST", body: JSON.stringify({code: "1+1"})})
      .then(function (r) { return r.json(); }).then(function (j) { $("out").textContent = j.result; });
  };
  $("save").onclick = function () {
    fetch("/real/save", {method: "POST", body: "{}"}).then(function (r) { return r.json(); }).then(function () {
      for (var i = 0; i < 2500; i++) console.log("log line " + i);
      reticle.signal("saved", {});
    });
  };
  var ws = new WebSocket("ws://" + location.host + "/real/ws");
  ws.onmessage = function (e) {
    var m = JSON.parse(e.data.replace(/^\\d+/, ""));
    $("pushed").textContent = m[1].text;
  };
  $("send").onclick = function () { ws.send(JSON.stringify({op: "save", name: "ann"})); };
</script>
</body></html>"""

REAL_TRUTH = {"saves": 0, "runs": 0, "socket_saves": 0}


class _Real(tornado.web.RequestHandler):
    def put(self, name):
        self.set_status(204)

    def post(self, name):
        REAL_TRUTH[name + "s"] += 1
        self.write({"result": "2"} if name == "run" else {"ok": True})


class _RealSocket(tornado.websocket.WebSocketHandler):
    def on_message(self, message):
        if json.loads(message).get("op") == "save":
            REAL_TRUTH["socket_saves"] += 1
            self.write_message('42["update",{"id":"pushed","text":"Saved profile"}]')


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    live = Live(tmp_path_factory.mktemp("real"), REAL,
                routes=[(r"/real/ws", _RealSocket), (r"/real/(autosave|run|save)", _Real)])
    yield live
    live.close()


def click(mcp, button, **extra):
    return mcp.ok("reticle_act_and_wait", dict({"target": {"role": "button", "name": button}, "action": "click",
                                                "detail": "full"}, **extra), timeout=60)


def test_a_204_autosave_does_not_disturb_a_verdict_and_text_can_be_exact(real):
    mcp = real.mcp
    # a notebook that has been open a moment: its timer has saved before the act (a save answered, not one still
    # in flight: on a loaded machine the first may not have come back yet, and a write never seen answered before
    # the act is not known to be the page's own)
    wait_until(lambda: [c for c in mcp.ok("reticle_network", {"since": 0, "method": "PUT"})["calls"]
                        if c.get("status") == 204], 10, what="an autosave answered")
    runs = REAL_TRUTH["runs"]
    out = click(mcp, "Run cell", until={"kind": "allOf", "predicates": [
        {"kind": "net", "method": "POST", "urlContains": "/real/run", "status": 200},
        {"kind": "text", "equals": "2"}]})
    assert REAL_TRUTH["runs"] == runs + 1
    assert (out["verified"], out["verifiedReason"]) == ("yes", "proved"), out
    autosaves = [c for c in mcp.ok("reticle_network", {"since": 0, "method": "PUT"})["calls"] if c.get("status") == 204]
    assert autosaves, "the page's own 204 autosaves ran beside the verdict"
    loose = mcp.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "text", "contains": "2"}})
    assert loose["verified"] == "yes" and "`equals`" in loose["advice"], loose
    pattern = mcp.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "text", "matches": "^2$"}})
    assert pattern["verified"] == "yes", pattern
    wrong = mcp.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "text", "equals": "3"}})
    assert (wrong["verified"], wrong["verifiedReason"]) == ("no", "assertion_failed"), wrong


def test_evidence_evicted_by_a_flood_is_unknown_never_no(real):
    mcp = real.mcp
    saves = REAL_TRUTH["saves"]
    out = click(mcp, "Save and log", timeout_ms=6000, until={"kind": "allOf", "predicates": [
        {"kind": "net", "method": "POST", "urlContains": "/real/save", "status": 200},
        {"kind": "signal", "name": "saved"}]})
    assert REAL_TRUTH["saves"] == saves + 1, "the save happened on the server"
    assert out["verified"] != "no", out
    if out["verified"] == "unknown":
        assert out["verifiedReason"] == "evidence_lost" and "evicted" in out["because"], out
    else:
        assert not out["honesty"]["integrity"]["issues"], "a yes only when nothing was lost: %s" % out


def test_socket_messages_are_matched_by_the_frame_kind_and_hide_nothing_from_net(real):
    mcp = real.mcp
    before = REAL_TRUTH["socket_saves"]
    out = click(mcp, "Send over socket", until={
        "kind": "frame", "direction": "in", "urlContains": "/real/ws", "path": "1.text", "equals": "Saved profile"})
    assert REAL_TRUTH["socket_saves"] == before + 1
    assert (out["verified"], out["verifiedReason"]) == ("yes", "proved"), out
    sent = mcp.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "frame", "direction": "out", "contains": '"op":"save"'}})
    assert sent["verified"] == "yes", sent
    # a socket on another URL could not have been that request (issue 18): a miss, with the messages named
    miss = mcp.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "net", "method": "POST", "urlContains": "/profile"}})
    assert (miss["verified"], miss["verifiedReason"]) == ("no", "assertion_failed"), miss
    assert "WebSocket" in miss["because"] and "frame" in miss["because"], miss["because"]
    blind = mcp.ok("reticle_assert", {"detail": "full", "predicate": {"kind": "net", "urlContains": "/real/ws"}})
    assert (blind["verified"], blind["verifiedReason"]) == ("unknown", "inconclusive"), blind
    assert "WebSocket" in blind["because"] and "frame" in blind["because"], blind["because"]
    sockets = mcp.ok("reticle_network", {})["sockets"]
    assert sockets[0]["messagesIn"] >= 1 and sockets[0]["messagesOut"] >= 1, sockets
    assert out["trace"]["summary"]["messages"] >= 2, out["trace"]


def test_the_cheat_sheet_names_this_daemon_and_a_diff_compares_with_the_last_snapshot(real):
    mcp = real.mcp
    cheat = mcp.run(lambda session: session.read_resource("reticle://docs/cheatsheet"), 10)
    text = cheat.contents[0].text
    assert real.daemon.url + "/reticle.js" in text and "127.0.0.1:4400" not in text
    mcp.ok("reticle_snapshot", {"mode": "interactive"})
    mcp.ok("reticle_snapshot", {"mode": "interactive"})
    diff = mcp.ok("reticle_snapshot", {"mode": "interactive", "diff": True})
    assert diff["mode"] == "unchanged", diff


def test_storage_contains(shop):
    act_and_wait(shop, "Dark theme", {"kind": "storage", "area": "local", "key": "theme", "contains": "dar",
                                      "changed": True})
    r = shop.ok("reticle_assert", {"predicate": {"kind": "storage", "area": "local", "key": "theme", "contains": "ark"}})
    assert r["verified"] == "yes", r
    r = shop.ok("reticle_assert", {"predicate": {"kind": "storage", "area": "local", "key": "theme", "contains": "light"}})
    assert (r["verified"], r["verifiedReason"]) == ("no", "assertion_failed") and "does not contain" in r["because"], r


# -- what an agent pays: decided failures, compact answers ------------------------------------------

COST = """<!doctype html>
<html><head><title>Cost</title><script src="%(daemon)s/reticle.js"></script></head>
<body><p id="msg" role="status"></p>
<button id="broken">Save broken</button>
<button id="healthy">Save healthy</button>
<button id="retry">Save with retry</button>
<button id="late">Save then show late</button>
<button id="noisy">Save and complain</button>
<script>
  function $(id) { return document.getElementById(id); }
  function save(path) { return fetch(path, {method: "POST", body: JSON.stringify({name: "ann"})}); }
  $("broken").onclick = function () { save("/cost/broken").then(function () { $("msg").textContent = "Saved"; }); };
  $("healthy").onclick = function () { save("/cost/healthy").then(function () { $("msg").textContent = "Saved"; }); };
  $("retry").onclick = function () {
    save("/cost/flaky").then(function (r) {
      if (r.ok) { $("msg").textContent = "Saved"; return; }
      setTimeout(function () { save("/cost/flaky").then(function () { $("msg").textContent = "Saved"; }); }, 200);
    });
  };
  $("late").onclick = function () {
    save("/cost/healthy").then(function () { setTimeout(function () { $("msg").textContent = "Saved late"; }, 800); });
  };
  $("noisy").onclick = function () {
    save("/cost/healthy").then(function () { console.error("cache desync"); fetch("/cost/track", {method: "POST"}); });
  };
</script></body></html>"""

COST_TRUTH = {"flaky": 0, "healthy": 0, "broken": 0, "track": 0}


class _Cost(tornado.web.RequestHandler):
    def post(self, name):
        COST_TRUTH[name] += 1
        if name == "broken" or (name == "flaky" and COST_TRUTH["flaky"] % 2 == 1):
            self.set_status(500)
            self.write({"error": "database is locked"})
        else:
            self.write({"ok": True, "id": COST_TRUTH[name]})


@pytest.fixture(scope="module")
def cost(tmp_path_factory):
    live = Live(tmp_path_factory.mktemp("cost"), COST, routes=[(r"/cost/(broken|healthy|flaky|track)", _Cost)])
    yield live.mcp
    live.close()


def text_and_content(mcp, name, args):
    """The tool's text block as the model reads it, and its structured content."""
    text = mcp.raw_call(name, args).content[0].text
    return text, json.loads(text)


def save_until(path, status=200):
    return {"kind": "net", "method": "POST", "urlContains": path, "status": status}


def test_a_write_answered_otherwise_is_decided_at_once_in_a_compact_answer(cost):
    before = COST_TRUTH["broken"]
    started = time.monotonic()
    text, out = text_and_content(cost, "reticle_act_and_wait", {"target": {"role": "button", "name": "Save broken"},
                                                         "action": "click", "until": save_until("/cost/broken")})
    took = time.monotonic() - started
    assert COST_TRUTH["broken"] == before + 1
    assert (out["verified"], out["verifiedReason"], out["decidedBy"]) == ("no", "assertion_failed", "answered-otherwise")
    assert "500" in out["because"], out
    assert took < 3.5, "decided before the 4 s timeout (took %.2f s)" % took
    assert len(text.encode("utf-8")) < 600, "the answer a model reads is %d bytes: %s" % (len(text), text)
    text, out = text_and_content(cost, "reticle_act_and_wait", {"target": {"role": "button", "name": "Save healthy"},
                                                         "action": "click", "until": save_until("/cost/healthy")})
    assert (out["verified"], out["verifiedReason"]) == ("yes", "proved"), out
    assert out["evidence"]["url"] == "/cost/healthy" and out["evidence"]["status"] == 200, out
    assert len(text.encode("utf-8")) < 600, "the answer a model reads is %d bytes: %s" % (len(text), text)
    full = cost.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Save healthy"}, "action": "click",
                                            "until": save_until("/cost/healthy"), "detail": "full"})
    assert {"verdict", "honesty", "trace", "effect"} <= set(full), sorted(full)


def test_a_client_that_retries_after_200_ms_is_yes_not_a_decided_no(cost):
    before = COST_TRUTH["flaky"]
    out = act_and_wait(cost, "Save with retry", save_until("/cost/flaky"))
    assert COST_TRUTH["flaky"] == before + 2, "a failure, then a retry that saved"
    assert (out["verified"], out["verifiedReason"]) == ("yes", "proved"), out


def test_a_ui_that_updates_800_ms_after_its_response_is_yes(cost):
    out = act_and_wait(cost, "Save then show late", {"kind": "allOf", "predicates": [
        save_until("/cost/healthy"), {"kind": "text", "contains": "Saved late"}]})
    assert (out["verified"], out["verifiedReason"]) == ("yes", "proved"), out


def test_violated_absences_are_decided(cost):
    out = act_and_wait(cost, "Save and complain", {"kind": "console", "level": "error", "absent": True})
    assert (out["verified"], out["verdict"]["decidedBy"]) == ("no", "absence-violated"), out
    out = act_and_wait(cost, "Save and complain", {"kind": "not", "predicate": {
        "kind": "net", "method": "POST", "urlContains": "/cost/track"}})
    assert (out["verified"], out["verdict"]["decidedBy"]) == ("no", "absence-violated"), out
