"""Shared fixtures: a hub factory on a temporary state dir, and a real daemon.

Every fixture points RETICLE_STATE_DIR at a temporary directory, so no test
ever reads or writes ``~/.reticle``.
"""

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RETICLE_PY = os.path.join(REPO, "reticle.py")
if REPO not in sys.path:
    sys.path.insert(0, REPO)
import _harness  # noqa: E402  (tests/ is on sys.path: pytest puts it there)

# Variables that would change how a daemon or the CLI behaves under test.
RETICLE_ENV = ("RETICLE_STATE_DIR", "RETICLE_TOKEN", "RETICLE_HOST", "RETICLE_PORT",
               "RETICLE_RATE_LIMIT", "RETICLE_ALLOWED_ORIGINS")


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


def wait_for(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def daemon_env(state_dir, **extra):
    env = {k: v for k, v in os.environ.items() if k not in RETICLE_ENV}
    env["RETICLE_STATE_DIR"] = str(state_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Daemon:
    """`python reticle.py serve --port N` as a child process."""

    def __init__(self, state_dir, port=None, args=(), env=None):
        self.state_dir = str(state_dir)
        self.port = port or free_port()
        self.log_path = os.path.join(self.state_dir, "..", "daemon-test-%d.log" % self.port)
        os.makedirs(self.state_dir, exist_ok=True)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, RETICLE_PY, "serve", "--port", str(self.port)] + list(args),
            env=env or daemon_env(self.state_dir), stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    @property
    def pid(self):
        return self.proc.pid

    def wait_ready(self, timeout=10.0):
        status = wait_for(lambda: self.proc.poll() is not None or get_status(self.port), timeout)
        if not isinstance(status, dict):
            raise RuntimeError("the daemon did not come up on port %d:\n%s" % (self.port, self.log()))
        return status

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
        raw = _harness.non_json_tracebacks(self.log())
        if raw:
            raise AssertionError("the daemon wrote a traceback that is not a JSON log line:\n" + raw)
        return self.proc.returncode


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No RETICLE_* from the outside; RETICLE_STATE_DIR is a fresh tmp dir."""
    for name in RETICLE_ENV:
        monkeypatch.delenv(name, raising=False)
    state = tmp_path / "state"
    monkeypatch.setenv("RETICLE_STATE_DIR", str(state))
    return state


@pytest.fixture
def state_dir(clean_env):
    return clean_env


@pytest.fixture
def make_hub(state_dir):
    """Hub factory on the temporary state dir: make_hub(token=..., rate=...)."""
    import reticle

    def factory(**kwargs):
        kwargs.setdefault("state_dir", str(state_dir))
        return reticle.Hub(**kwargs)

    return factory


@pytest.fixture
def daemon(tmp_path):
    """A running daemon on a free port with its own state dir; stopped at teardown."""
    d = Daemon(tmp_path / "daemon-state")
    try:
        d.wait_ready()
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="module")
def module_daemon(tmp_path_factory):
    """One daemon shared by a module's tests (they must not stop it)."""
    d = Daemon(tmp_path_factory.mktemp("module-daemon") / "state")
    try:
        d.wait_ready()
        yield d
    finally:
        d.stop()


class _ErrorRecords(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(autouse=True)
def no_internal_errors(request):
    """Fail any test during which reticle (in this process) logged a bug: a tool that
    crashed or a JSON-RPC method that reached the internal-error path.  Expected
    errors are marked with @pytest.mark.expect_reticle_errors."""
    handler = _ErrorRecords()
    logger = logging.getLogger("reticle")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    bugs = [r for r in handler.records if r.getMessage() in ("tool_crashed", "mcp_internal_error")]
    if bugs and not request.node.get_closest_marker("expect_reticle_errors"):
        pytest.fail("reticle logged internal errors: %s" % [getattr(r, "fields", r.getMessage()) for r in bugs])


def pytest_configure(config):
    config.addinivalue_line("markers", "expect_reticle_errors: the test provokes reticle's internal-error path")
