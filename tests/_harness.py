"""Real things for the browser tests: a reticle daemon subprocess, an app
server on 127.0.0.1, headless Chromium, and a real MCP client (the `mcp`
SDK's Streamable HTTP client) kept open on a background event loop."""

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import tornado.httpserver
import tornado.ioloop
import tornado.netutil
import tornado.web

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RETICLE_PY = os.path.join(ROOT, "reticle.py")

# Variables that would change how a daemon or the CLI behaves under test.
RETICLE_ENV = ("RETICLE_STATE_DIR", "RETICLE_TOKEN", "RETICLE_HOST", "RETICLE_PORT",
               "RETICLE_RATE_LIMIT", "RETICLE_ALLOWED_ORIGINS", "RETICLE_BROWSER_ARGS",
               "RETICLE_DEVICE_BUDGET", "RETICLE_MAX_DEVICES")


def free_port():
    """A TCP port nothing listens on right now (bind port 0, read it back)."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_listens(port, host="127.0.0.1"):
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def get_status(port, timeout=1.0):
    """The daemon's /status JSON, or None when nothing answers."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/status" % port, timeout=timeout) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


def serve_hub(tmp_path, server_class=tornado.httpserver.HTTPServer):
    """In process: a new reticle.Hub (state in tmp_path/state) serving make_app() on a free loopback
    port, for the tests that need the daemon's own objects beside a real socket.  Call from inside a
    running event loop; -> (hub, server); stop the server when done."""
    import reticle
    hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    hub.port = sockets[0].getsockname()[1]
    server = server_class(reticle.make_app(hub))
    server.add_sockets(sockets)
    return hub, server


def daemon_env(state_dir, **extra):
    """The environment of a daemon under test: this process's, without any RETICLE_* setting
    that would change its behaviour, RETICLE_STATE_DIR=state_dir, then `extra` (a value of None
    removes that variable)."""
    env = {k: v for k, v in os.environ.items() if k not in RETICLE_ENV}
    env["RETICLE_STATE_DIR"] = str(state_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env["RETICLE_CHECK_OUTPUT"] = "1"  # every tool answer of the suite is checked against its outputSchema
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


def chromium_path():
    for name in (os.environ.get("RETICLE_CHROME"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Daemon:
    """`python reticle.py serve --port N` as a child process, the one daemon of the tests and
    the benches.

    `state_dir` is its private RETICLE_STATE_DIR; its output goes to `daemon-<port>.log` next
    to that folder (appended, so a restart on the same port keeps both runs).  `env` adds to
    daemon_env() (None removes a variable), `args` go after `serve --port N`, and `command`
    replaces `python reticle.py` (say, `python -m reticle`, with `cwd`).  With `ready` (the
    default) the constructor waits for /status and keeps its answer in `status_at_start`; a
    daemon that does not answer plain HTTP (`--tls`) is made with ready=False.

    stop() ends it (SIGTERM, then SIGKILL) and returns the exit code; close() stops it too,
    then fails if the daemon logged an internal error: a crashed tool answers isError and the
    daemon keeps serving, so a test could pass over it otherwise."""

    def __init__(self, state_dir, port=None, args=(), env=None, command=None, cwd=None,
                 ready=True, timeout=30.0):
        self.state_dir = str(state_dir)
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log_path = os.path.join(os.path.dirname(self.state_dir), "daemon-%d.log" % self.port)
        os.makedirs(self.state_dir, exist_ok=True)
        self._log = open(self.log_path, "ab")
        argv = list(command or [sys.executable, RETICLE_PY]) + ["serve", "--port", str(self.port)] + list(args)
        self.proc = subprocess.Popen(argv, env=daemon_env(self.state_dir, **(env or {})), cwd=cwd,
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        self.status_at_start = None
        if ready:
            try:
                self.status_at_start = self.wait_ready(timeout)
            except BaseException:
                self.stop()
                raise

    @property
    def pid(self):
        return self.proc.pid

    def wait_ready(self, timeout=30.0):
        """-> the first /status answer; raises with the daemon's log if it exits or never answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            status = get_status(self.port)
            if status is not None:
                return status
            time.sleep(0.02)
        raise RuntimeError("the daemon did not come up on port %d:\n%s" % (self.port, self.log()))

    def status(self):
        with urllib.request.urlopen(self.url + "/status", timeout=5) as resp:
            return json.load(resp)

    def token(self):
        with open(os.path.join(self.state_dir, "token")) as fh:
            return fh.read().strip()

    def log(self):
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")

    def stop(self, timeout=5.0):
        """SIGTERM, then SIGKILL; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def close(self):
        """stop(), then fail if the daemon (any run on this port) logged a tool crash or an internal error."""
        self.stop()
        bugs = [ln for ln in self.log().splitlines(True)
                if '"event":"tool_crashed"' in ln or '"event":"mcp_internal_error"' in ln]
        if bugs:
            raise AssertionError("the daemon logged internal errors:\n" + "".join(bugs[:5]))
        raw = non_json_tracebacks(self.log())
        if raw:
            raise AssertionError("the daemon wrote a traceback that is not a JSON log line:\n" + raw[:3000])


def non_json_tracebacks(log):
    """The part of a daemon's log from the first traceback written outside a JSON line, or ""."""
    lines = log.splitlines()
    for n, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)") or line.startswith("Task exception was never"):
            return "\n".join(lines[n:n + 40])
    return ""


def end_group(proc, timeout=10.0):
    """SIGTERM to a child started with start_new_session (a dev server and its own workers), SIGKILL if
    it is still there after `timeout` s; nothing if it has exited."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class AppProcess:
    """An app under test as a child process on a free port of 127.0.0.1 (the one wrapper every test of a
    real app uses): `start` runs it with its output in a log file under `tmp` and waits until it listens,
    failing with what it printed if it ends first; `log()` reads that output, `close()` ends the app (its
    whole process group with `group`, for a dev server and its own workers)."""

    group = False

    def __init__(self, tmp, name):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log_path = os.path.join(str(tmp), "%s-%d.log" % (name, self.port))
        self.proc = None
        self._log = None

    def start(self, argv, env, cwd, wait=30, what="the app to listen", then=None):
        """Run `argv`; wait up to `wait` s until the port listens, then `then()` (a first request, say)."""
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=cwd,
                                     start_new_session=self.group)
        try:
            wait_until(lambda: port_listens(self.port) or self.proc.poll() is not None, wait, what=what)
            assert self.proc.poll() is None, self.log()
            if then is not None:
                then()
        except BaseException:
            self.close()
            raise

    def log(self):
        if self._log is not None and not self._log.closed:
            self._log.flush()
        with open(self.log_path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")

    def close(self):
        if self.proc is not None:
            if self.group:
                end_group(self.proc)
            elif self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        if self._log is not None:
            self._log.close()


class AppServer:
    """A tornado app on 127.0.0.1 in its own thread; `routes` are tornado rules."""

    def __init__(self, routes):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(routes,), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("app server did not start")

    def _run(self, routes):
        asyncio.set_event_loop(asyncio.new_event_loop())
        self.loop = tornado.ioloop.IOLoop.current()
        app = tornado.web.Application(routes, log_function=lambda h: None)
        self.server = tornado.httpserver.HTTPServer(app)
        self.server.add_sockets(tornado.netutil.bind_sockets(self.port, "127.0.0.1"))
        self._ready.set()
        self.loop.start()
        self.server.stop()
        self.loop.close(all_fds=True)

    def close(self):
        self.loop.add_callback(self.loop.stop)
        self._thread.join(10)


class Browser:
    """Headless Chromium on one URL, with a fresh profile removed at close."""

    def __init__(self, url, extra_args=()):
        exe = chromium_path()
        if exe is None:
            raise RuntimeError("Chromium is not installed; run sh tests/bootstrap.sh")
        self.profile = tempfile.mkdtemp(prefix="reticle-chrome-")
        args = [exe, "--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-extensions", "--mute-audio",
                "--user-data-dir=" + self.profile, "--remote-debugging-port=0"] + list(extra_args) + [url]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        # Its own process group, so that close() ends the helper processes too
        # (they would otherwise write into the profile after it is removed).
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers of the group
        except (ProcessLookupError, PermissionError):
            pass
        shutil.rmtree(self.profile, ignore_errors=True)


@contextlib.asynccontextmanager
async def mcp_session(transport, url=None, port=None, state_dir=None, script=RETICLE_PY):
    """An initialized `mcp` SDK ClientSession to a daemon, over one of the SDK's three clients:
    "streamable-http" (POST url + "/mcp"), "sse" (url + "/mcp/sse") or "stdio" (`reticle mcp --port
    PORT` run from `script` as a child, with the daemon's state directory).  The one way the tests open
    an MCP client; each test file asks it for the transport it is about.  The session's `init_result`
    is the daemon's answer to initialize."""
    from mcp import ClientSession
    if transport == "streamable-http":
        from mcp.client.streamable_http import streamable_http_client
        opened = streamable_http_client(url + "/mcp")
    elif transport == "sse":
        from mcp.client.sse import sse_client
        opened = sse_client(url + "/mcp/sse")
    elif transport == "stdio":
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client
        opened = stdio_client(StdioServerParameters(command=sys.executable,
                                                    args=[script, "mcp", "--port", str(port)],
                                                    env=daemon_env(state_dir)))
    else:
        raise ValueError("transport is streamable-http, sse or stdio, not %r" % transport)
    async with opened as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            session.init_result = await session.initialize()  # what the daemon answered to initialize
            yield session


class Mcp:
    """An MCP client for synchronous tests: mcp_session's Streamable HTTP client, held open on a
    background loop.  `call`/`ok` answer a tool's structured result, `raw_call` the whole
    CallToolResult, `run` any coroutine of the session (a resource read, say)."""

    def __init__(self, url):
        self._url = url[:-len("/mcp")] if url.endswith("/mcp") else url
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._main_future = asyncio.run_coroutine_threadsafe(self._main(), self._loop)
        if not self._ready.wait(15):
            raise RuntimeError("MCP client did not initialize: %r" % self._error)
        if self._error is not None:
            raise self._error

    async def _main(self):
        self._stop = asyncio.Event()
        try:
            async with mcp_session("streamable-http", self._url) as session:
                self.session = session
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # surfaced to the constructor
            self._error = exc
            self._ready.set()

    def run(self, make, timeout=60):
        """Run `make(session)` (a coroutine) on the client's loop -> its result."""
        return asyncio.run_coroutine_threadsafe(make(self.session), self._loop).result(timeout)

    def raw_call(self, name, args=None, timeout=60):
        """-> the whole MCP CallToolResult (content blocks and all)."""
        return self.run(lambda session: session.call_tool(name, args or {}), timeout)

    def call(self, name, args=None, timeout=30):
        """-> (structured result, is_error)."""
        result = self.raw_call(name, args, timeout)
        data = json.loads(result.content[0].text)
        return data, bool(result.is_error)

    def ok(self, name, args=None, timeout=30):
        data, is_error = self.call(name, args, timeout)
        assert not is_error, "%s failed: %s" % (name, data)
        return data

    def close(self):
        if hasattr(self, "_stop"):
            self._loop.call_soon_threadsafe(self._stop.set)
            try:
                self._main_future.result(10)
            except Exception:
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def observe_all(mcp, since=0, filters=None):
    """Every event since `since` (of the `filters` buckets or types), following reticle_observe's
    `next` pages: one answer stops at 32 KiB."""
    got = []
    while True:
        args = {"since": since, "max_events": 2000}
        if filters:
            args["filters"] = list(filters)
        out = mcp.ok("reticle_observe", args)
        got = [e for e in got if e["t"] < since] + out["events"]
        if "next" not in out:
            return got
        since = out["next"]["since"]


def wait_until(predicate, timeout=10.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.1f s waiting for %s (last: %r)" % (timeout, what, last))


NODE_MODULES = os.path.join(ROOT, "tests", ".js", "node_modules")  # what tests/bootstrap.sh installs with npm


def react_umd(build):
    """React 18's UMD files (`build`: "development" or "production.min"), by the name a page loads them under."""
    return {"react.js": os.path.join(NODE_MODULES, "react", "umd", "react.%s.js" % build),
            "react-dom.js": os.path.join(NODE_MODULES, "react-dom", "umd", "react-dom.%s.js" % build)}


class ScriptFiles(tornado.web.RequestHandler):
    """Serves files as JavaScript: `files` maps the name the route captures to a path on disk."""

    def initialize(self, files):
        self.files = files

    def get(self, name):
        self.set_header("Content-Type", "application/javascript")
        with open(self.files[name], "rb") as fh:
            self.write(fh.read())


class TemplatePage(tornado.web.RequestHandler):
    """Serves `template % {"daemon": <daemon url>}` as an HTML page."""

    def initialize(self, template, daemon):
        self.template = template
        self.daemon = daemon

    def get(self, *args):
        self.set_header("Content-Type", "text/html")
        self.write(self.template % {"daemon": self.daemon})


class Live:
    """A daemon, an app server whose catch-all route serves `template`, a
    headless Chromium tab on it, and an MCP client: everything a browser test
    needs, started in order and closed in reverse.  `server`, instead of the
    routes and the template: a callable that starts the app (another framework's
    server, say) given the daemon's URL, and returns it with its `url` and `close()`."""

    def __init__(self, tmp, template, routes=(), path="/", env=None, server=None):
        self._open = []
        try:
            self.daemon = self._keep(Daemon(os.path.join(str(tmp), "state"), env=env))
            if callable(routes):  # routes that render pages need the daemon's URL for their script tag
                routes = routes(self.daemon.url)
            self.app = self._keep(server(self.daemon.url) if server is not None else AppServer(list(routes) + [
                (r"/.*", TemplatePage, {"template": template, "daemon": self.daemon.url})]))
            self.browser = self._keep(Browser(self.app.url + path))
            self.mcp = self._keep(Mcp(self.daemon.url + "/mcp"))
            wait_until(lambda: self.mcp.ok("reticle_sessions")["sessions"], 20, what="the tab to connect")
        except BaseException:
            self.close()
            raise

    def _keep(self, thing):
        self._open.append(thing)
        return thing

    def close(self):
        while self._open:
            self._open.pop().close()
