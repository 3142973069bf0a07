"""Devices on browsers Reticle did not start (src/reticle/endpoints.py): a Chromium the test starts itself
with --remote-debugging-port, reached by its http:// address, by its ws:// URL and through a proxy that
forwards one tokenised URL and serves no /json routes (as a hosted browser does); the user's own tab
attached and left as it was; failures named with their fix; a browser on another host in a network
namespace where the machine allows one.  Real Chromium, a real daemon, the `mcp` SDK's client."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pytest
import tornado.httpclient
import tornado.web
import tornado.websocket

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(_harness.chromium_path() is None, reason="Chromium is not installed "
                                 "(sh tests/bootstrap.sh installs it)")]

# A notes page: Save posts the note and says what the server answered.  /lying says "Saved" whatever came back.
NOTES = """<!doctype html><title>notes</title><p id="who">%(who)s</p>
<input id="title" aria-label="Title" value="Buy milk"><button id="save">Save</button><p id="out"></p>
<script>
document.getElementById('save').addEventListener('click', function () {
  fetch('%(target)s', {method: 'POST', headers: {'Content-Type': 'application/json'},
                       body: JSON.stringify({title: document.getElementById('title').value})})
    .then(function (r) { document.getElementById('out').textContent = (r.ok || %(lie)s) ? 'Saved' : 'Failed'; });
});
</script>"""


class _Page(tornado.web.RequestHandler):
    def initialize(self, app, target, lie):
        self.app, self.target, self.lie = app, target, lie

    def get(self):
        who = self.get_cookie("user") or "nobody"
        self.set_header("Content-Type", "text/html")
        self.write(NOTES % {"who": "Signed in as " + who, "target": self.target, "lie": self.lie})


class _Login(tornado.web.RequestHandler):
    def get(self):
        self.set_cookie("user", self.get_argument("as", "ada"))
        self.redirect("/account")


class _Save(tornado.web.RequestHandler):
    def initialize(self, app, status, delay=0.0):
        self.app, self.status, self.delay = app, status, delay

    async def post(self):
        if self.delay:
            await tornado.gen.sleep(self.delay)
        self.app.saves.append((self.request.path, self.get_cookie("user"), self.request.body.decode()))
        self.set_status(self.status)
        self.write({"ok": self.status < 400})


class NotesApp(_harness.AppServer):
    def __init__(self, host="127.0.0.1"):
        self.saves = []
        routes = [(r"/login", _Login),
                  (r"/(?:account)?", _Page, {"app": self, "target": "/api/save", "lie": "false"}),
                  (r"/lying", _Page, {"app": self, "target": "/api/broken", "lie": "true"}),
                  (r"/slow", _Page, {"app": self, "target": "/api/slow", "lie": "false"}),
                  (r"/api/save", _Save, {"app": self, "status": 201}),
                  (r"/api/broken", _Save, {"app": self, "status": 500}),
                  (r"/api/slow", _Save, {"app": self, "status": 201, "delay": 4.0})]
        self.host = host
        super().__init__(routes)
        self.url = "http://%s:%d" % (host, self.port)

    def _run(self, routes):  # on self.host (a test host address in a network namespace's link, say)
        import asyncio
        import tornado.httpserver
        import tornado.netutil
        asyncio.set_event_loop(asyncio.new_event_loop())
        self.loop = tornado.ioloop.IOLoop.current()
        self.server = tornado.httpserver.HTTPServer(tornado.web.Application(routes, log_function=lambda h: None))
        self.server.add_sockets(tornado.netutil.bind_sockets(self.port, getattr(self, "host", "127.0.0.1")))
        self._ready.set()
        self.loop.start()
        self.server.stop()
        self.loop.close(all_fds=True)


# What a browser container runs beside Chrome (socat in most images): Chrome's DevTools listen on loopback
# only, so a forwarder on the container's own address hands connections to them.
FORWARDER = """
import asyncio, sys
async def pipe(r, w):
    try:
        while (data := await r.read(65536)):
            w.write(data)
            await w.drain()
    finally:
        w.close()
async def take(r, w):
    r2, w2 = await asyncio.open_connection("127.0.0.1", int(sys.argv[3]))
    await asyncio.gather(pipe(r, w2), pipe(r2, w), return_exceptions=True)
async def main():
    server = await asyncio.start_server(take, sys.argv[1], int(sys.argv[2]))
    await server.serve_forever()
asyncio.run(main())
"""


class UserChrome:
    """A Chromium the user started by hand: --remote-debugging-port, a profile of its own, one tab on `url`;
    `prefix` runs it elsewhere (`ip netns exec NS`), its DevTools reached on `address` through a forwarder
    there as in a browser container.  Ended (its process groups) at close."""

    def __init__(self, url="about:blank", address="127.0.0.1", prefix=()):
        self.port = _harness.free_port()
        inner = self.port if address == "127.0.0.1" else _harness.free_port()
        self.address = address
        self.http = "http://%s:%d" % (address, self.port)
        self.profile = tempfile.mkdtemp(prefix="reticle-user-chrome-")
        args = list(prefix) + [_harness.chromium_path(), "--headless=new", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               "--disable-dev-shm-usage", "--user-data-dir=" + self.profile,
                               "--remote-debugging-port=%d" % inner, url]
        if os.geteuid() == 0:
            args.insert(len(prefix) + 1, "--no-sandbox")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.forwarder = None
        if inner != self.port:
            self.forwarder = subprocess.Popen(list(prefix) + [sys.executable, "-c", FORWARDER, address,
                                                              str(self.port), str(inner)],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _harness.wait_until(lambda: self._get("/json/version") is not None, 20, what="the user's Chromium")
        self.ws = self._get("/json/version")["webSocketDebuggerUrl"]

    def _get(self, path, method="GET"):
        try:
            req = urllib.request.Request(self.http + path, method=method)
            with urllib.request.urlopen(req, timeout=2) as resp:
                return json.load(resp)
        except (OSError, ValueError):
            return None

    def pages(self):
        return [t for t in self._get("/json/list") or [] if t.get("type") == "page"]

    def new_tab(self, url):
        return self._get("/json/new?" + url, method="PUT")

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(10)

    def close(self):
        if self.proc.poll() is None:
            self.kill()
        if self.forwarder is not None:
            self.forwarder.kill()
            self.forwarder.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)


class _Forward(tornado.websocket.WebSocketHandler):
    """The proxy's one route: a socket opened with the right token is joined to the browser's DevTools socket."""

    def initialize(self, upstream, token):
        self.upstream, self.token, self.peer = upstream, token, None

    async def get(self, *args, **kwargs):
        if self.get_query_argument("token", "") != self.token:
            self.set_status(403)
            self.finish("bad token")
            return
        await super().get(*args, **kwargs)

    async def open(self):
        self.peer = await tornado.websocket.websocket_connect(self.upstream, max_message_size=256 << 20)

        async def pump():
            while True:
                msg = await self.peer.read_message()
                if msg is None:
                    self.close()
                    return
                await self.write_message(msg)

        tornado.ioloop.IOLoop.current().spawn_callback(pump)

    async def on_message(self, message):
        await self.peer.write_message(message)

    def on_close(self):
        if self.peer is not None:
            self.peer.close()


class TokenProxy(_harness.AppServer):
    """A hosted browser's front door: ws://.../browser?token=T is the browser, every other URL (and /json/*) 404."""

    def __init__(self, upstream, token):
        super().__init__([(r"/browser", _Forward, {"upstream": upstream, "token": token})])
        self.ws = "ws://127.0.0.1:%d/browser?token=%s" % (self.port, token)


@pytest.fixture(scope="module")
def app():
    a = NotesApp()
    yield a
    a.close()


@pytest.fixture
def chrome(app):
    c = UserChrome(app.url + "/account")
    yield c
    c.close()


def endpoint_daemon(tmp_path, *endpoints, env=None, args=()):
    argv = list(args)
    for ep in endpoints:
        argv += ["--cdp-endpoint", ep]
    return _harness.Daemon(tmp_path / ("state-%d" % time.monotonic_ns()), args=argv, env=env)


def save(mcp, sid, status=None, urlpart="/api/", timeout_ms=8000):
    until = {"kind": "net", "method": "POST", "urlContains": urlpart}
    if status is not None:
        until["status"] = status
    return mcp.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Save"}, "action": "click",
                                           "sessionId": sid, "until": until, "timeout_ms": timeout_ms}, timeout=90)


@pytest.mark.parametrize("how", ["http", "ws", "proxy"])
def test_a_device_opens_in_the_users_browser_and_closing_it_leaves_the_browser(tmp_path, app, chrome, how):
    proxy = TokenProxy(chrome.ws, "s3cret-t0ken") if how == "proxy" else None
    endpoint = {"http": chrome.http, "ws": chrome.ws, "proxy": proxy and proxy.ws}[how]
    d = endpoint_daemon(tmp_path, endpoint)
    client = _harness.Mcp(d.url + "/mcp")
    try:
        before = chrome.pages()
        opened = client.ok("reticle_open", {"url": app.url + "/"})
        assert opened["browser"]["endpoint"].startswith(("http://127.0.0.1", "ws://127.0.0.1"))
        assert "s3cret" not in json.dumps(opened)
        assert len(chrome.pages()) == len(before) + 1  # a tab of its own, in a context of its own
        n = len(app.saves)
        res = save(client, opened["sessionId"], 201)
        assert res["verified"] == "yes", res
        assert res["effect"]["input"] == "cdp"
        assert app.saves[n:] == [("/api/save", None, '{"title":"Buy milk"}')]  # no cookie of the user's tab
        status = d.status()
        assert [e["endpoint"] for e in status["cdpEndpoints"]] == [opened["browser"]["endpoint"]]
        assert status["cdpEndpoints"][0]["devices"] == 1
        closed = client.ok("reticle_close", {})
        assert closed["closed"] is True
        _harness.wait_until(lambda: [p["id"] for p in chrome.pages()] == [p["id"] for p in before], 10,
                            what="the device's tab gone, the user's tab kept")
        assert chrome.proc.poll() is None  # the browser itself still runs
        assert d.status()["cdpEndpoints"][0]["devices"] == 0
    finally:
        client.close()
        d.close()
        if proxy is not None:
            proxy.close()
    assert "s3cret" not in d.log()  # the endpoint's token is never written down


def test_a_failing_write_is_no_with_the_evidence_a_launched_device_gives(tmp_path, app, chrome):
    verdicts = []
    for args in ([chrome.http], []):
        d = endpoint_daemon(tmp_path, *args)
        client = _harness.Mcp(d.url + "/mcp")
        try:
            opened = client.ok("reticle_open", {"url": app.url + "/lying"})
            assert ("browser" in opened) == bool(args)
            res = client.ok("reticle_act_and_wait", {
                "target": {"role": "button", "name": "Save"}, "action": "click", "sessionId": opened["sessionId"],
                "until": {"kind": "text", "contains": "Saved"}, "timeout_ms": 8000}, timeout=60)
            verdicts.append(res)
        finally:
            client.close()
            d.close()
    on_endpoint, launched = verdicts
    assert on_endpoint["verified"] == launched["verified"] == "no", verdicts
    assert on_endpoint["verifiedReason"] == launched["verifiedReason"]
    assert "/api/broken" in on_endpoint["because"] and "500" in on_endpoint["because"]
    assert on_endpoint["because"] == launched["because"]


def test_two_daemons_on_one_browser_keep_their_own_cookies(tmp_path, app, chrome):
    one, two = endpoint_daemon(tmp_path, chrome.http), endpoint_daemon(tmp_path, chrome.http)
    a, b = _harness.Mcp(one.url + "/mcp"), _harness.Mcp(two.url + "/mcp")
    try:
        first = a.ok("reticle_open", {"url": app.url + "/login?as=grace"})
        second = b.ok("reticle_open", {"url": app.url + "/account"})
        shown_a = a.ok("reticle_query", {"by": "text", "value": "Signed in as", "sessionId": first["sessionId"]})
        shown_b = b.ok("reticle_query", {"by": "text", "value": "Signed in as", "sessionId": second["sessionId"]})
        assert "grace" in json.dumps(shown_a["elements"])
        assert "nobody" in json.dumps(shown_b["elements"]) and "grace" not in json.dumps(shown_b)
        n = len(app.saves)
        assert save(b, second["sessionId"], 201)["verified"] == "yes"
        assert app.saves[n:][0][1] is None  # the second daemon's device sent no cookie of the first's
        # each daemon sees its own tab only
        assert [s["sessionId"] for s in a.ok("reticle_sessions")["sessions"]] == [first["sessionId"]]
    finally:
        a.close()
        b.close()
        one.close()
        two.close()


def test_attaching_reads_the_users_logged_in_tab_and_detaching_leaves_it(tmp_path, app, chrome):
    chrome.new_tab(app.url + "/login?as=ada")  # the developer logs in by hand in their own browser
    _harness.wait_until(lambda: any(p["url"] == app.url + "/account" and "ada" not in p["url"]
                                    for p in chrome.pages()) and len(chrome.pages()) == 2, 10, what="login")
    d = endpoint_daemon(tmp_path, chrome.http)
    client = _harness.Mcp(d.url + "/mcp")
    try:
        before = chrome.pages()
        opened = client.ok("reticle_open", {"url": app.url + "/account", "attach": True})
        assert "the user's own tab" in opened["note"]
        assert len(chrome.pages()) == len(before)  # nothing opened
        shown = client.ok("reticle_query", {"by": "text", "value": "Signed in as", "sessionId": opened["sessionId"]})
        assert "ada" in json.dumps(shown["elements"])
        n = len(app.saves)
        res = save(client, opened["sessionId"], 201)
        assert res["verified"] == "yes", res
        assert "the user's own tab" in res["attached"]  # every answer over the tab says whose it is
        assert app.saves[n:] == [("/api/save", "ada", '{"title":"Buy milk"}')]  # sent with the user's login
        listed = client.ok("reticle_sessions")["sessions"][0]["device"]
        assert listed["attached"] is True and listed["endpoint"] == chrome.http
        shown = subprocess.run([sys.executable, _harness.RETICLE_PY, "status", "--port", str(d.port)],
                               capture_output=True, text=True, timeout=30, env=_harness.daemon_env(d.state_dir))
        assert "devices open in the browser at %s (--cdp-endpoint): 1 now" % chrome.http in shown.stdout, shown
        assert "(the user's own tab, attached)" in shown.stdout
        closed = client.ok("reticle_close", {})
        assert closed["detached"] is True and closed["closed"] is False
        after = chrome.pages()
        assert sorted(p["id"] for p in after) == sorted(p["id"] for p in before)  # every tab still open
        assert chrome.proc.poll() is None
        # attaching to a tab no one has open names the tabs there
        data, is_error = client.call("reticle_open", {"url": app.url + "/nowhere", "attach": True})
        assert is_error and data["code"] == "attach_no_match", data
        assert app.url + "/account" in data["error"]
    finally:
        client.close()
        d.close()


def test_a_browser_killed_mid_act_gives_unknown_and_a_clear_message(tmp_path, app, chrome):
    d = endpoint_daemon(tmp_path, chrome.http)
    client = _harness.Mcp(d.url + "/mcp")
    try:
        opened = client.ok("reticle_open", {"url": app.url + "/slow"})
        killer = threading.Timer(1.5, chrome.kill)
        killer.start()
        t0 = time.monotonic()
        res = save(client, opened["sessionId"], 201, "/api/slow", timeout_ms=30000)
        killer.join()
        assert res["verified"] == "unknown", res
        assert res["verifiedReason"] == "observation_lost"
        assert "connection was lost" in res["because"] and chrome.http in res["because"]
        assert time.monotonic() - t0 < 15, (time.monotonic() - t0, json.dumps(res)[:3000])  # not the act's 30 s
        data, is_error = client.call("reticle_open", {"url": app.url + "/"})
        assert is_error and data["code"] == "endpoint_unreachable", data
        assert chrome.http in data["error"] and "--remote-debugging-port" in data["recovery"]
    finally:
        client.close()
        d.close()


def test_endpoints_that_cannot_be_used_are_named_with_their_fix(tmp_path, app):
    dead = "http://127.0.0.1:%d" % _harness.free_port()
    not_cdp = app.url  # a web app, not a browser
    echo = _harness.AppServer([(r"/echo", _Echo)])
    d = endpoint_daemon(tmp_path, dead)
    client = _harness.Mcp(d.url + "/mcp")
    try:
        data, is_error = client.call("reticle_open", {"url": app.url + "/"})
        assert is_error and data["code"] == "endpoint_unreachable"
        assert dead in data["error"] and "refused" in data["error"]
        assert "--remote-debugging-port" in data["recovery"]
        assert d.status()["running"]  # the daemon keeps serving
    finally:
        client.close()
        d.close()
    for endpoint, words in ((not_cdp, "not a DevTools endpoint"),
                            ("ws://127.0.0.1:%d/echo" % echo.port, "speaks another protocol")):
        d = endpoint_daemon(tmp_path, endpoint)
        client = _harness.Mcp(d.url + "/mcp")
        try:
            data, is_error = client.call("reticle_open", {"url": app.url + "/"}, timeout=60)
            assert is_error and data["code"] == "endpoint_unreachable", data
            assert words in data["error"], data
        finally:
            client.close()
            d.close()
    echo.close()
    bad = subprocess.run([sys.executable, _harness.RETICLE_PY, "serve", "--port", str(_harness.free_port()),
                          "--cdp-endpoint", "ftp://127.0.0.1:9222"], capture_output=True, text=True, timeout=30,
                         env=_harness.daemon_env(tmp_path / "bad"))
    assert bad.returncode != 0 and "is not a CDP endpoint" in bad.stderr and "ws://" in bad.stderr


class _Echo(tornado.websocket.WebSocketHandler):
    def on_message(self, message):
        pass  # a WebSocket that never answers DevTools' calls


def test_an_endpoint_named_by_a_tool_call_is_refused(mcp, app):
    for key in ("cdpEndpoint", "wsEndpoint", "browserUrl"):
        data, is_error = mcp.call("reticle_open", {"url": app.url + "/", key: "http://127.0.0.1:9222"})
        assert is_error and data["code"] == "endpoint_refused", data
        assert "--cdp-endpoint" in data["recovery"]
    data, is_error = mcp.call("reticle_open", {"url": app.url + "/", "attach": True})
    assert is_error and data["code"] == "bad_argument" and "--cdp-endpoint" in data["recovery"]
    listed = mcp.run(lambda s: s.list_tools())
    schema = [t for t in listed.tools if t.name == "reticle_open"][0].input_schema
    assert "attach" in schema["properties"] and "cdpEndpoint" not in schema["properties"]


@pytest.fixture
def test_host():
    """A host of its own: a network namespace joined to this one by a veth link (this side .1, that side .2),
    where the machine allows one (root and iproute2); skipped elsewhere."""
    if shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("a network namespace needs root and iproute2's ip")
    n = os.getpid() % 200 + 20
    ns, here, there = "rt%d" % os.getpid(), "10.231.%d.1" % n, "10.231.%d.2" % n
    veth = "rv%d" % os.getpid()
    steps = [["ip", "netns", "add", ns], ["ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "p"],
             ["ip", "link", "set", veth + "p", "netns", ns], ["ip", "addr", "add", here + "/24", "dev", veth],
             ["ip", "link", "set", veth, "up"],
             ["ip", "netns", "exec", ns, "ip", "addr", "add", there + "/24", "dev", veth + "p"],
             ["ip", "netns", "exec", ns, "ip", "link", "set", veth + "p", "up"],
             ["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"]]
    try:
        for step in steps:
            got = subprocess.run(step, capture_output=True, text=True, timeout=10)
            if got.returncode != 0:
                pytest.skip("this machine allows no network namespace here: %s" % got.stderr.strip()[:200])
        yield {"ns": ns, "here": here, "there": there}
    finally:
        subprocess.run(["ip", "link", "del", veth], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def test_a_browser_on_another_host_reaches_the_daemon_it_was_named_to(tmp_path, test_host):
    app = NotesApp(test_host["here"])  # the app where that host reaches it
    chrome = UserChrome("about:blank", address=test_host["there"], prefix=("ip", "netns", "exec", test_host["ns"]))
    token = "t" * 40
    wide = endpoint_daemon(tmp_path, chrome.http, args=("--host", "0.0.0.0"), env={"RETICLE_TOKEN": token})
    narrow = endpoint_daemon(tmp_path, chrome.http)
    try:
        client = _harness.Mcp(wide.url + "/mcp")
        try:
            opened = client.ok("reticle_open", {"url": app.url + "/"})
            assert opened["browser"]["endpoint"] == chrome.http
            n = len(app.saves)
            res = save(client, opened["sessionId"], 201)
            assert res["verified"] == "yes", res
            assert app.saves[n:] == [("/api/save", None, '{"title":"Buy milk"}')]
            client.ok("reticle_close", {})
        finally:
            client.close()
        client = _harness.Mcp(narrow.url + "/mcp")
        try:  # a daemon on loopback alone: said at once, not a page that never connects
            t0 = time.monotonic()
            data, is_error = client.call("reticle_open", {"url": app.url + "/"}, timeout=60)
            assert is_error and data["code"] == "endpoint_unreachable", data
            assert "listens on 127.0.0.1 only" in data["error"] and "--host 0.0.0.0" in data["recovery"]
            assert time.monotonic() - t0 < 10
        finally:
            client.close()
    finally:
        wide.close()
        narrow.close()
        chrome.close()
        app.close()


def test_verify_spreads_its_jobs_over_the_endpoints_given(tmp_path, app):
    browsers = [UserChrome(), UserChrome()]
    project = tmp_path / "project"
    flows = project / ".reticle" / "flows"
    flows.mkdir(parents=True)
    step = {"action": "click", "target": {"role": "button", "name": "Save"},
            "until": {"kind": "net", "method": "POST", "urlContains": "/api/save", "status": 201}}
    for i in range(4):
        (flows / ("save-%d.json" % i)).write_text(json.dumps(
            {"name": "save-%d" % i, "startUrl": app.url + "/", "steps": [step], "format": 1}))
    port = _harness.free_port()
    seen = {"a": 0, "b": 0}
    stop = threading.Event()

    def count():  # how many device tabs each browser held at once, at most
        while not stop.is_set():
            for key, b in zip("ab", browsers):
                seen[key] = max(seen[key], len([p for p in b.pages() if p["url"].startswith(app.url)]))
            time.sleep(0.05)

    watcher = threading.Thread(target=count, daemon=True)
    watcher.start()
    try:
        got = subprocess.run([sys.executable, _harness.RETICLE_PY, "verify", "--jobs", "2", "--json", "--port",
                              str(port), "--cdp-endpoint", browsers[0].http, "--cdp-endpoint", browsers[1].http],
                             cwd=str(project), capture_output=True, text=True, timeout=240,
                             env=_harness.daemon_env(tmp_path / "verify-state", RETICLE_PROJECT_DIR=str(project)))
    finally:
        stop.set()
        watcher.join(5)
        for b in browsers:
            b.close()
    assert got.returncode == 0, got.stderr[-3000:]
    results = json.loads(got.stdout)["flows"]
    assert sorted(r["name"] for r in results) == ["save-%d" % i for i in range(4)]
    assert all(r["verified"] == "yes" for r in results), results
    assert seen == {"a": 1, "b": 1}, seen  # one device on each browser, none launched
    assert "devices on http://127.0.0.1:%d" % browsers[0].port in got.stderr


def test_a_device_on_an_endpoint_takes_faults_screenshots_and_timelines(tmp_path, app, chrome):
    d = endpoint_daemon(tmp_path, chrome.http)
    client = _harness.Mcp(d.url + "/mcp")
    try:
        opened = client.ok("reticle_open", {"url": app.url + "/"})
        sid = opened["sessionId"]
        fault = client.ok("reticle_fault", {"match": {"urlContains": "/api/save", "method": "POST"},
                                            "respond": {"status": 500}, "sessionId": sid})
        assert fault["in"] == "device", fault
        n = len(app.saves)
        res = client.ok("reticle_act_and_wait", {
            "target": {"role": "button", "name": "Save"}, "action": "click", "sessionId": sid, "timeline": True,
            "until": {"kind": "text", "contains": "Saved"}, "timeout_ms": 6000}, timeout=60)
        assert res["verified"] != "yes", res  # the page said Failed under the 500 the fault gave
        assert len(app.saves) == n  # answered in the browser: the server never saw it
        assert "faulted" in json.dumps(res)
        with open(res["timeline"]["path"], encoding="utf-8") as fh:
            assert "/api/save" in fh.read()  # the act drawn, its faulted request in it
        shot = client.ok("reticle_screenshot", {"sessionId": sid})
        with open(shot["path"], "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
        assert shot["width"] == 1280
    finally:
        client.close()
        d.close()


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_daemon_ending_leaves_the_users_browser_as_it_was(tmp_path, app, chrome, how):
    """A planned stop disposes of the device's context; a daemon killed with SIGKILL leaves it to the browser,
    which disposes of a context made for one connection when that connection ends.  Either way the user's
    browser and tab stay, and nothing of Reticle's is left in it."""
    d = endpoint_daemon(tmp_path, chrome.http)
    client = _harness.Mcp(d.url + "/mcp")
    before = chrome.pages()
    try:
        client.ok("reticle_open", {"url": app.url + "/"})
        assert len(chrome.pages()) == len(before) + 1
    finally:
        client.close()
        if how == "kill":
            d.proc.kill()
            d.proc.wait(10)
        d.close()
    _harness.wait_until(lambda: [p["id"] for p in chrome.pages()] == [p["id"] for p in before], 10,
                        what="the device's tab gone with its daemon, the user's tab kept")
    assert chrome.proc.poll() is None
