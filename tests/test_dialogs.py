"""Dialogs in a person's own tab (issue 19 #5): the script tag, no device.  The SDK reports
alert/confirm/prompt before they block the page, the daemon fails its commands to the blocked tab at
once with what to do, reticle_sessions shows the tab not answering, and no verdict over it is `yes`.
The dialog is closed the way a person would, here through the test browser's own DevTools port."""

import asyncio
import json
import os
import threading
import time
import urllib.request

import pytest
import tornado.websocket

from _harness import Live, TemplatePage, chromium_path, wait_until

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="needs Chromium (sh tests/bootstrap.sh)")

PAGE = """<!doctype html><html><head><title>Dialogs</title>
<script src="%(daemon)s/reticle.js"></script></head><body>
<button id="ask">Ask</button><p id="out">waiting</p>
<script>
document.getElementById("ask").addEventListener('click', function () {
  var yes = confirm("Keep the order?");
  document.getElementById('out').textContent = yes ? 'deleted' : 'kept';
});
</script></body></html>"""

# Pages that ask before they are left, in the two ways a page can.
LEAVE = {
    "/leave-listener": """<!doctype html><html><head><title>Draft</title>
<script src="%(daemon)s/reticle.js"></script></head><body><p>draft</p><script>
window.addEventListener('beforeunload', function (e) { e.preventDefault(); e.returnValue = 'unsaved'; });
</script></body></html>""",
    "/leave-property": """<!doctype html><html><head><title>Draft</title>
<script src="%(daemon)s/reticle.js"></script></head><body><p>draft</p><script>
window.onbeforeunload = function () { return 'unsaved'; };
</script></body></html>"""}


@pytest.fixture
def live(tmp_path):
    world = Live(tmp_path, PAGE)
    yield world
    world.close()


def devtools_page(browser):
    """The WebSocket URL of the test browser's page target (its DevTools port is in the profile)."""
    path = os.path.join(browser.profile, "DevToolsActivePort")
    wait_until(lambda: os.path.exists(path), 10, what="DevToolsActivePort")
    with open(path) as fh:
        port = fh.read().split()[0]
    targets = json.load(urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port, timeout=5))
    return [t for t in targets if t.get("type") == "page"][0]["webSocketDebuggerUrl"]


class Person:
    """The person at the test browser: attached to its page over DevTools before the dialog opens
    (Chromium shows a dialog to a DevTools client only then), and answers it when told."""

    def __init__(self, browser):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        url = devtools_page(browser)

        async def connect():
            return await tornado.websocket.websocket_connect(url)
        self.ws = self._run(connect())
        self._next = 0
        self._run(self._call("Page.enable", {}))

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    async def _call(self, method, params):
        self._next += 1
        mid = self._next
        self.ws.write_message(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(await self.ws.read_message())
            if msg.get("id") == mid:
                return msg

    def click(self, x, y):
        """A real click, so the page has the user activation a beforeunload prompt needs."""
        for kind in ("mousePressed", "mouseReleased"):
            self._run(self._call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                              "clickCount": 1}))

    def answer(self, accept):
        return self._run(self._call("Page.handleJavaScriptDialog", {"accept": accept}))

    def close(self):
        self.loop.call_soon_threadsafe(self.ws.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def test_a_dialog_in_a_persons_tab_fails_commands_fast_and_is_named(live):
    mcp = live.mcp
    sid = mcp.ok("reticle_sessions")["sessions"][0]["sessionId"]
    person = Person(live.browser)
    try:
        check_dialog(mcp, sid, person)
    finally:
        person.close()


def check_dialog(mcp, sid, person):
    t0 = time.monotonic()
    res, is_error = mcp.call("reticle_act", {"target": {"role": "button", "name": "Ask"}, "action": "click",
                                             "sessionId": sid})
    assert time.monotonic() - t0 < 5, res  # not the 8 s a command waited before
    assert is_error and res["code"] == "dialog_open", res
    assert "confirm dialog (Keep the order?) is open" in res["error"], res
    t0 = time.monotonic()
    res, is_error = mcp.call("reticle_query", {"by": "text", "value": "kept", "sessionId": sid})
    assert is_error and res["code"] == "dialog_open" and time.monotonic() - t0 < 2, res
    assert "close the dialog" in res["recovery"], res
    tab = mcp.ok("reticle_sessions")["sessions"][0]
    assert tab["answering"] is False and "confirm dialog" in tab["notAnswering"], tab
    res = mcp.ok("reticle_assert", {"predicate": {"kind": "route", "pathname": "/"}, "sessionId": sid})
    assert res["verified"] == "unknown" and res["verifiedReason"] == "not_answering", res
    assert "confirm dialog (Keep the order?)" in res["warning"], res
    assert person.answer(False).get("error") is None
    wait_until(lambda: mcp.ok("reticle_sessions")["sessions"][0]["answering"], 5, what="the tab to answer again")
    res = mcp.ok("reticle_assert", {"predicate": {"kind": "text", "contains": "kept"}, "sessionId": sid})
    assert res["verified"] == "yes", res


@pytest.mark.parametrize("path", sorted(LEAVE))
def test_a_beforeunload_prompt_in_a_persons_tab_is_reported(tmp_path, path):
    live = Live(tmp_path, PAGE, routes=lambda url: [(path, TemplatePage, {"template": LEAVE[path], "daemon": url})],
                path=path)
    try:
        mcp = live.mcp
        sid = mcp.ok("reticle_sessions")["sessions"][0]["sessionId"]
        person = Person(live.browser)
        try:
            person.click(20, 20)
            mcp.call("reticle_navigate", {"reload": True, "sessionId": sid})  # the page asks before it goes
            tab = mcp.ok("reticle_sessions")["sessions"][0]
            assert tab["answering"] is False and "beforeunload dialog" in tab["notAnswering"], tab
            t0 = time.monotonic()
            res, is_error = mcp.call("reticle_snapshot", {"sessionId": sid})
            assert is_error and res["code"] == "dialog_open" and time.monotonic() - t0 < 2, res
            assert person.answer(False).get("error") is None  # stay on the page
            wait_until(lambda: mcp.ok("reticle_sessions")["sessions"][0]["answering"], 8,
                       what="the tab to answer again")
        finally:
            person.close()
    finally:
        live.close()
