"""Shared fixtures: a hub factory on a temporary state dir, and a real daemon.

Every fixture points RETICLE_STATE_DIR at a temporary directory, so no test
ever reads or writes ``~/.reticle``.
"""

import logging
import os
import sys

import pytest

from _harness import RETICLE_ENV
from _harness import ROOT
from _harness import Daemon
from _harness import Mcp

# _leaks: each test closes what it opens (a WebSocket client, a child process) in its own teardown;
# pytester: tests/test_leaks.py runs a small suite to show it
pytest_plugins = ["_leaks", "pytester"]

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
# Every dispatcher of the suite (in this process and in the daemons it starts) checks each tool answer
# against the tool's outputSchema and logs a violation as an internal error, which fails the test.
os.environ["RETICLE_CHECK_OUTPUT"] = "1"


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
        yield d
    finally:
        d.close()


@pytest.fixture
def mcp(daemon):
    """The one MCP client fixture: the `mcp` SDK's Streamable HTTP client on the test's `daemon` (a module
    may bring its own daemon); at teardown it closes the device it opened, if it still has one."""
    client = Mcp(daemon.url + "/mcp")
    try:
        yield client
    finally:
        try:
            client.call("reticle_close", {}, timeout=10)  # this client's device, if it still has one
        except Exception:
            pass  # the test stopped its daemon: nothing is left to close
        finally:
            client.close()


@pytest.fixture(scope="module")
def module_daemon(tmp_path_factory):
    """One daemon shared by a module's tests (they must not stop it)."""
    d = Daemon(tmp_path_factory.mktemp("module-daemon") / "state")
    try:
        yield d
    finally:
        d.close()


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
    config.addinivalue_line("markers", "browser: drives real headless Chromium (select with -m browser)")


def pytest_collection_modifyitems(config, items):
    """Every test in a module that drives Chromium through the harness is marked `browser`,
    so `-m "not browser"` runs the fast tests alone."""
    for item in items:
        module = getattr(item, "module", None)
        if getattr(module, "chromium_path", None) is not None:
            item.add_marker(pytest.mark.browser)
