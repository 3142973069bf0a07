"""The browser bridge end to end: real headless Chromium loads a page served
on 127.0.0.1 that includes the script tag, and a real MCP client reads what
the SDK saw.  Hostile input on the WebSocket is sent with a raw client."""

import json
import re

import pytest
import tornado.web
import tornado.websocket

from _harness import observe_all, AppServer, Browser, Daemon, Live, Mcp, TemplatePage, chromium_path, wait_until

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="needs Chromium (sh tests/bootstrap.sh)")

PAGE = """<!doctype html>
<html><head><title>Shop</title>
<script src="%(daemon)s/reticle.js"></script></head>
<body>
<h1>Checkout</h1>
<form id="checkout" onsubmit="event.preventDefault()">
  <label>Email <input name="email" type="email" placeholder="you@example.com"></label>
  <label>Password <input name="password" type="password"></label>
  <label>Plan <select name="plan"><option>basic</option><option>pro</option></select></label>
  <label><input type="checkbox" name="terms"> I agree</label>
  <button type="submit" data-testid="pay">Pay</button>
</form>
<p data-testid="count">0</p>
<button id="inc">Increment</button>
<button id="fail">Load broken</button>
<button id="log">Log error</button>
<button id="throw">Throw</button>
<button id="route">Next step</button>
<script>
  var state = {cart: {items: [{id: 1, name: "tea"}], total: 5}, user: {name: "ann"}};
  var subs = [];
  window.shop = {
    getState: function () { return state; },
    setState: function (p) { state = Object.assign({}, state, p); subs.forEach(function (f) { f(state); }); },
    subscribe: function (f) { subs.push(f); return function () {}; }
  };
  reticle.registerStore("shop", window.shop);
  var n = 0;
  document.getElementById("inc").onclick = function () {
    n += 1; document.querySelector("[data-testid=count]").textContent = String(n);
  };
  document.getElementById("fail").onclick = function () { fetch("/api/broken").then(function (r) { return r.text(); }); };
  document.getElementById("log").onclick = function () { console.error("payment widget exploded"); };
  document.getElementById("throw").onclick = function () { setTimeout(function () { throw new Error("kaboom"); }); };
  document.getElementById("route").onclick = function () { history.pushState({}, "", "/step2"); };
</script>
</body></html>
"""



class _Broken(tornado.web.RequestHandler):
    def get(self):
        self.set_status(500)
        self.write({"error": "database on fire"})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    live = Live(tmp_path_factory.mktemp("bridge"), PAGE, routes=[(r"/api/broken", _Broken)])
    yield {"daemon": live.daemon, "app": live.app, "browser": live.browser, "mcp": live.mcp}
    live.close()


def _ref(mcp, **query):
    found = mcp.ok("reticle_query", query)
    assert found["count"] == 1, found
    return found["elements"][0]["ref"]


def test_tab_appears_in_sessions(world):
    sessions = world["mcp"].ok("reticle_sessions")["sessions"]
    assert len(sessions) == 1
    s = sessions[0]
    assert s["url"].startswith(world["app"].url)
    assert s["title"] == "Shop"
    # no data-session-id on the page: the SDK made one, "s" and a v4 UUID
    assert re.fullmatch(r"s[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", s["sessionId"]), s
    assert world["daemon"].status()["sessions"][0]["sessionId"] == s["sessionId"]


def test_a_link_cannot_fix_a_tabs_session_id(world):
    """The SDK takes its session id from its own tab's storage, never from the URL, which any link can set
    (?__reticle_session= once fixed it, so a page of another port could claim the tab)."""
    mcp = world["mcp"]
    before = {s["sessionId"] for s in mcp.ok("reticle_sessions")["sessions"]}
    nav = mcp.ok("reticle_navigate", {"url": world["app"].url + "/?__reticle_session=s-fixed-by-a-link"})
    assert nav["confirmed"] is True, nav
    after = {s["sessionId"] for s in mcp.ok("reticle_sessions")["sessions"]}
    assert "s-fixed-by-a-link" not in after and after == before, (before, after)


def test_failed_fetch_appears_with_status_and_timing(world):
    mcp = world["mcp"]
    mcp.ok("reticle_act", {"target": {"text": "Load broken"}, "action": "click"})
    calls = wait_until(lambda: [c for c in mcp.ok("reticle_network", {"urlContains": "/api/broken"})["calls"]
                                if not c.get("pending")], what="the broken call to complete")
    call = calls[-1]
    assert call["status"] == 500
    assert call["method"] == "GET"
    assert isinstance(call["ms"], (int, float)) and call["ms"] >= 0
    assert "database on fire" in call.get("responseBody", "")
    # a filter that matches nothing gets a hint, not a bare empty list
    none = mcp.ok("reticle_network", {"urlContains": "/api/nothing-like-this"})
    assert none["calls"] == [] and none["hint"]["totalInWindow"] >= 1


def test_console_error_and_uncaught_error(world):
    mcp = world["mcp"]
    mcp.ok("reticle_act", {"target": {"text": "Log error"}, "action": "click"})
    mcp.ok("reticle_act", {"target": {"text": "Throw"}, "action": "click"})
    logs = wait_until(lambda: [x for x in mcp.ok("reticle_console", {"level": "error"})["logs"]
                               if "kaboom" in x["text"]], what="the uncaught error")
    assert logs[-1].get("uncaught") is True
    # the window is the last act's (issue 18): the first act's error is there from `since: 0` only
    texts = [x["text"] for x in mcp.ok("reticle_console", {"level": "error"})["logs"]]
    assert not any("payment widget exploded" in t for t in texts), texts
    texts = [x["text"] for x in mcp.ok("reticle_console", {"level": "error", "since": 0})["logs"]]
    assert any("payment widget exploded" in t for t in texts)


def test_push_state_is_a_route_change(world):
    mcp = world["mcp"]
    mcp.ok("reticle_act", {"target": {"text": "Next step"}, "action": "click"})
    events = wait_until(lambda: mcp.ok("reticle_observe", {"since": 0, "filters": ["route"]})["events"],
                        what="a route change")
    assert events[-1]["type"] == "route.change"
    assert events[-1]["data"]["to"].endswith("/step2")


def test_store_is_read_by_state(world):
    mcp = world["mcp"]
    whole = mcp.ok("reticle_state")
    assert "shop" in whole["storeNames"]
    got = mcp.ok("reticle_state", {"store": "shop", "path": "cart.items.length"})
    assert got["found"] is True and got["value"] == 1
    miss = mcp.ok("reticle_state", {"store": "shop", "path": "cart.nope"})
    assert miss["found"] is False
    assert set(miss["availableKeys"]) >= {"items", "total"}


def test_snapshot_refs_are_found_again_by_query(world):
    mcp = world["mcp"]
    snap = mcp.ok("reticle_snapshot", {"mode": "interactive"})
    tree = snap["tree"]
    for needle in ('textbox "Email', 'combobox "Plan', 'checkbox "I agree', 'button "Pay"'):
        assert needle in tree, tree
    pay_line = [ln for ln in tree.splitlines() if 'button "Pay"' in ln][0]
    ref = pay_line.split("(ref=")[1].split(")")[0]
    assert _ref(mcp, by="role", value="button", name="Pay") == ref
    assert _ref(mcp, testid="pay") == ref
    assert _ref(mcp, by="placeholder", value="you@example") == _ref(mcp, by="label", value="Email")


def test_rerender_keeps_the_ref(world):
    mcp = world["mcp"]
    before = _ref(mcp, testid="count")
    mcp.ok("reticle_act", {"target": {"text": "Increment"}, "action": "click"})
    wait_until(lambda: mcp.ok("reticle_query", {"testid": "count"})["elements"][0].get("name") != "0"
               or mcp.ok("reticle_query", {"testid": "count"})["elements"][0].get("text") not in (None, "0"),
               what="the count to change")
    assert _ref(mcp, testid="count") == before
    inspected = mcp.ok("reticle_inspect", {"ref": before})
    assert inspected["ref"] == before


def test_stale_ref_is_a_clear_error(world):
    data, is_error = world["mcp"].call("reticle_inspect", {"ref": "e99999"})
    assert is_error
    assert "e99999" in data["error"]


def test_query_with_no_match_gives_a_hint(world):
    found = world["mcp"].ok("reticle_query", {"by": "role", "value": "button", "name": "Refund everything"})
    assert found["count"] == 0
    assert "hint" in found


def test_reload_replaces_the_session(world):
    mcp, daemon = world["mcp"], world["daemon"]
    before = mcp.ok("reticle_sessions")["sessions"][0]
    nav = mcp.ok("reticle_navigate", {"reload": True})
    assert nav["confirmed"] is True
    after = mcp.ok("reticle_sessions")["sessions"]
    assert len(after) == 1
    assert after[0]["sessionId"] == before["sessionId"]
    assert after[0]["attachment"]["reconnects"] == before["attachment"]["reconnects"] + 1
    assert len(daemon.status()["sessions"]) == 1


def test_snapshot_diff(world):
    mcp = world["mcp"]
    mcp.ok("reticle_navigate", {"url": "/"})
    first = mcp.ok("reticle_snapshot", {"diff": True})
    assert first["mode"] == "full"
    again = mcp.ok("reticle_snapshot", {"diff": True})
    assert again["mode"] == "unchanged"
    mcp.ok("reticle_act", {"target": {"text": "Increment"}, "action": "click"})
    delta = wait_until(lambda: (lambda d: d if d["mode"] == "delta" else None)(mcp.ok("reticle_snapshot", {"diff": True})),
                       what="a delta")
    assert delta["changedCount"] == 1, delta
    assert delta["changed"][0]["from"].endswith(': "0"') and delta["changed"][0]["to"].endswith(': "1"')


def test_act_sequence_fills_a_form(world):
    mcp = world["mcp"]
    mcp.ok("reticle_navigate", {"url": "/"})
    result = mcp.ok("reticle_act_sequence", {"steps": [
        {"target": {"label": "Email"}, "action": "fill", "args": {"value": "ann@example.com"}},
        {"target": {"label": "Plan"}, "action": "select", "args": {"value": "pro"}},
        {"target": {"label": "I agree"}, "action": "check"},
    ]})
    assert result["since"] > 0
    email = mcp.ok("reticle_query", {"by": "label", "value": "Email"})["elements"][0]
    assert email["value"] == "ann@example.com"
    terms = mcp.ok("reticle_query", {"by": "role", "value": "checkbox", "name": "I agree"})["elements"][0]
    assert "checked" in terms["states"]
    plan = mcp.ok("reticle_query", {"by": "label", "value": "Plan"})["elements"][0]
    assert plan["value"] == "pro"


def test_navigate_to_a_url_and_back(world):
    mcp = world["mcp"]
    nav = mcp.ok("reticle_navigate", {"url": "/elsewhere"})
    assert nav["confirmed"] is True and nav["url"].endswith("/elsewhere")
    assert mcp.ok("reticle_assert", {"predicate": {"kind": "route", "pathname": "/elsewhere"}})["verified"] == "yes"
    data, is_error = mcp.call("reticle_navigate", {"url": "javascript:alert(1)"})
    assert is_error and "http" in data["error"]
    assert mcp.ok("reticle_navigate", {"url": "/"})["confirmed"] is True


def test_query_counts_are_exact(world):
    mcp = world["mcp"]
    buttons = mcp.ok("reticle_query", {"by": "role", "value": "button"})
    assert buttons["count"] == 6
    assert mcp.ok("reticle_query", {"by": "role", "value": "button", "count_only": True})["count"] == 6
    limited = mcp.ok("reticle_query", {"by": "role", "value": "button", "limit": 2})
    assert len(limited["elements"]) == 2 and limited["count"] == 6


def test_several_tabs_need_a_session_id(world):
    mcp, app = world["mcp"], world["app"]
    first = mcp.ok("reticle_sessions")["sessions"][0]["sessionId"]
    second = Browser(app.url + "/")
    try:
        sessions = wait_until(lambda: (lambda s: s if len(s) == 2 else None)(mcp.ok("reticle_sessions")["sessions"]),
                              20, what="a second tab")
        ids = [s["sessionId"] for s in sessions]
        data, is_error = mcp.call("reticle_query", {"testid": "pay"})
        assert is_error and "multiple sessions connected" in data["error"]
        assert all(i in data["error"] for i in ids)
        assert mcp.ok("reticle_query", {"testid": "pay", "sessionId": first})["count"] == 1
        data, is_error = mcp.call("reticle_query", {"testid": "pay", "sessionId": "s-nobody"})
        assert is_error and "s-nobody" in data["error"] and first in data["error"]
    finally:
        second.close()
    wait_until(lambda: len(mcp.ok("reticle_sessions")["sessions"]) == 1, 20, what="the second tab to go")
    assert mcp.ok("reticle_query", {"testid": "pay"})["count"] == 1


SECRET_PAGE = """<!doctype html><html><head><title>Login</title>
<script src="%(daemon)s/reticle.js"></script></head><body>
<label>Password <input type="password" id="pw"></label>
<button id="login">Log in</button>
<script>
document.getElementById("login").onclick = function () {
  fetch("/api/login", {method: "POST", headers: {"Content-Type": "application/json",
        "Authorization": "Bearer sk-live-0123456789abcdefghijklmnop"},
        body: JSON.stringify({user: "ann", password: "hunter2-secret"})}).then(function (r) { return r.text(); });
  console.log("session token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXBhcnQ");
};
</script></body></html>
"""


class _Login(tornado.web.RequestHandler):
    def post(self):
        self.write({"ok": True, "token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXBhcnQ",
                    "apiKey": "AKIAIOSFODNN7EXAMPLE"})


def test_secrets_are_redacted_before_they_leave_the_page(tmp_path):
    live = Live(tmp_path, SECRET_PAGE, routes=[(r"/api/login", _Login)])
    mcp = live.mcp
    try:
        mcp.ok("reticle_act", {"target": {"label": "Password"}, "action": "fill", "args": {"value": "hunter2-secret"}})
        mcp.ok("reticle_act", {"target": {"role": "button", "name": "Log in"}, "action": "click"})
        calls = wait_until(lambda: [c for c in mcp.ok("reticle_network", {"urlContains": "/api/login"})["calls"]
                                    if not c.get("pending")], what="login")
        wait_until(lambda: mcp.ok("reticle_console")["logs"], what="the console line")
        seen = json.dumps([calls, mcp.ok("reticle_console"), mcp.ok("reticle_observe", {"since": 0}),
                           mcp.ok("reticle_snapshot"), mcp.ok("reticle_query", {"by": "label", "value": "Password"})])
        for secret in ("hunter2-secret", "sk-live-0123456789abcdefghijklmnop", "c2lnbmF0dXJlLXBhcnQ",
                       "AKIAIOSFODNN7EXAMPLE"):
            assert secret not in seen, secret
        assert "redacted" in json.dumps(calls)
        assert '"user": "ann"' in calls[-1]["requestBody"] or '"user":"ann"' in calls[-1]["requestBody"]
    finally:
        live.close()


def test_off_loopback_pages_need_opt_in_and_the_token(tmp_path):
    app_port_holder = {}
    daemon = None
    app = AppServer([(r"/api/login", _Login), (r"/(\w*)", _OffLoopbackPage, {"holder": app_port_holder})])
    origin = "http://app.test:%d" % app.port
    daemon = Daemon(tmp_path / "state", env={"RETICLE_ALLOWED_ORIGINS": origin})
    app_port_holder["daemon"] = daemon.url
    app_port_holder["token"] = daemon.token()
    resolver = "--host-resolver-rules=MAP app.test 127.0.0.1"
    plain = Browser(origin + "/plain", extra_args=[resolver])
    mcp = Mcp(daemon.url + "/mcp")
    try:
        import time
        time.sleep(3)
        assert mcp.ok("reticle_sessions")["sessions"] == [], "the SDK must refuse to run off loopback by default"
        opted = Browser(origin + "/optin", extra_args=[resolver])
        try:
            sessions = wait_until(lambda: mcp.ok("reticle_sessions")["sessions"], 20, what="the opted-in tab")
            assert sessions[0]["url"].startswith(origin)
        finally:
            opted.close()
    finally:
        mcp.close()
        plain.close()
        app.close()
        daemon.close()


class _OffLoopbackPage(tornado.web.RequestHandler):
    def initialize(self, holder):
        self.holder = holder

    def get(self, which):
        attrs = ""
        if which == "optin":
            attrs = ' data-allow-non-localhost="true" data-token="%s"' % self.holder["token"]
        self.set_header("Content-Type", "text/html")
        self.write('<!doctype html><html><head><title>Off</title><script src="%s/reticle.js"%s></script>'
                   '</head><body><button>Hi</button></body></html>' % (self.holder["daemon"], attrs))


SHARED_PAGE = """<!doctype html><html><head><title>Shared</title>
<script src="%(daemon)s/reticle.js" data-session-id="s-shared-tab"></script></head>
<body><p>shared</p>
<script>setInterval(function () { for (var i = 0; i < 5; i++) { reticle.signal("tick"); } }, 4);</script></body></html>"""


def test_reconnects_after_a_daemon_restart_and_never_after_1008(tmp_path):
    import time
    daemon = Daemon(tmp_path / "state")
    app = AppServer([(r"/.*", TemplatePage, {"template": SHARED_PAGE, "daemon": daemon.url})])
    first = Browser(app.url + "/")
    second = None
    try:
        mcp = Mcp(daemon.url + "/mcp")
        try:
            wait_until(lambda: mcp.ok("reticle_sessions")["sessions"], 20, what="the tab")
        finally:
            mcp.close()
        port = daemon.port
        daemon.close()
        time.sleep(1.0)
        daemon = Daemon(tmp_path / "state", port=port)  # same port, a new process: the SDK's backoff finds it
        mcp = Mcp(daemon.url + "/mcp")
        try:
            s = wait_until(lambda: mcp.ok("reticle_sessions")["sessions"], 20, what="the tab to reconnect")
            assert s[0]["sessionId"] == "s-shared-tab"
            # While the daemon was down the page kept ticking: the offline queue kept 500
            # frames and said how many it dropped.
            spots = wait_until(lambda: [e for e in mcp.ok("reticle_observe", {"since": 0, "filters": ["blind-spot"]})
                                        ["events"] if e["data"].get("reason") == "offline-queue-overflow"],
                               10, what="the offline-queue blind spot")
            assert spots[0]["data"]["count"] > 0
            ticks = observe_all(mcp, 0, ["signal"])
            assert len(ticks) >= 500
            # A second tab claims the same id: the first is closed with 1008 and must not come back.
            second = Browser(app.url + "/")
            wait_until(lambda: (mcp.ok("reticle_sessions")["sessions"] or [{}])[0]
                       .get("attachment", {}).get("reconnects", 0) >= 1, 20, what="the replacement")
            time.sleep(3.5)  # longer than the SDK's first backoff steps
            after = mcp.ok("reticle_sessions")["sessions"]
            assert len(after) == 1
            assert after[0]["attachment"]["reconnects"] == 1, "a tab closed with 1008 retried"
        finally:
            mcp.close()
    finally:
        if second is not None:
            second.close()
        first.close()
        app.close()
        daemon.close()


def test_snapshot_scope_by_selector_and_by_ref(world):
    mcp = world["mcp"]
    mcp.ok("reticle_navigate", {"url": "/"})
    form = mcp.ok("reticle_snapshot", {"scope": "#checkout"})
    assert 'button "Pay"' in form["tree"] and "Increment" not in form["tree"]
    pay = [ln for ln in form["tree"].splitlines() if 'button "Pay"' in ln][0].split("(ref=")[1].split(")")[0]
    just_pay = mcp.ok("reticle_snapshot", {"scope": pay})
    assert 'button "Pay"' in just_pay["tree"] and "Email" not in just_pay["tree"]
    missing = mcp.ok("reticle_snapshot", {"scope": "#no-such-thing"})
    assert missing["scopeMissing"] is True and missing["tree"] == ""
    status = mcp.ok("reticle_snapshot", {"mode": "status"})
    assert status["tree"] == "" and status["status"]["title"] == "Shop"
