"""Server truth: real Django, Flask and FastAPI apps with Reticle's middleware, driven in
headless Chromium (the script tag) and in devices, judged through the `server` predicate and
the verdict rules; plus the pure judge from a table, and the daemon's records route."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

import reticle
from _harness import Browser, Daemon, Mcp, chromium_path, daemon_env, free_port, port_listens, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
APPS = os.path.join(HERE, "_server_apps.py")
FRAMEWORKS = ("flask", "django", "fastapi")


class App:
    """One of tests/_server_apps.py's apps as a child process, finding the daemon through the
    environment as a user's app would (RETICLE_PORT, RETICLE_STATE_DIR for the token)."""

    def __init__(self, framework, tmp, daemon=None, script=True, env=None):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.db = os.path.join(str(tmp), "%s-%d.sqlite3" % (framework, self.port))
        extra = {"RETICLE_PORT": daemon.port if daemon else free_port()}
        if daemon:
            extra["RETICLE_STATE_DIR"] = daemon.state_dir
        extra.update(env or {})
        self.log_path = os.path.join(str(tmp), "app-%d.log" % self.port)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, APPS, framework, str(self.port), self.db,
                                      daemon.url if daemon and script else ""],
                                     env=daemon_env(extra.pop("RETICLE_STATE_DIR", str(tmp / "nostate")), **extra),
                                     stdout=self._log, stderr=subprocess.STDOUT, cwd=HERE)
        try:
            wait_until(lambda: port_listens(self.port) or self.proc.poll() is not None, 20, what="the app to listen")
            assert self.proc.poll() is None, self.log()
        except BaseException:
            self.close()
            raise

    def log(self):
        self._log.flush()
        with open(self.log_path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")

    def rows(self):
        import sqlite3
        with sqlite3.connect(self.db) as conn:
            return conn.execute("SELECT COUNT(*) FROM profile").fetchone()[0]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path / "state")
    yield d
    d.close()


@pytest.fixture
def mcp(daemon):
    m = Mcp(daemon.url + "/mcp")
    yield m
    m.close()


def open_tab(mcp, app, device=False):
    """A tab on the app: a device (the SDK injected), or Chromium with the app's script tag."""
    before = {s["sessionId"] for s in mcp.ok("reticle_sessions")["sessions"]}
    if device:
        return mcp.ok("reticle_open", {"url": app.url + "/"}, timeout=60)["sessionId"], None
    browser = Browser(app.url + "/")
    try:
        sessions = wait_until(lambda: [s for s in mcp.ok("reticle_sessions")["sessions"]
                                       if s["sessionId"] not in before and s["url"].startswith(app.url)],
                              20, what="the tab to connect")
    except BaseException:
        browser.close()
        raise
    return sessions[0]["sessionId"], browser


def act(mcp, sid, button, until=None, timeout_ms=6000):
    args = {"action": "click", "target": {"role": "button", "name": button},
            "sessionId": sid, "timeout_ms": timeout_ms, "detail": "full"}
    if until is not None:
        args["until"] = until
    return mcp.ok("reticle_act_and_wait", args, timeout=60)
