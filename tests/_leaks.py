"""A pytest plugin (loaded by conftest.py): what a test opens, it closes in its own teardown.

A WebSocket client left open is collected whenever the garbage collector next runs, and its finaliser
then fails whichever test happens to be running (tornado warns "Unclosed WebSocketClientConnection").
So each WebSocket client (tornado's, the test's own or one Reticle opens in-process) and each child
process is noted with the test or the wider fixture that was running when it was made, and
where in the code; at the end of that test's teardown (or that fixture's finalisation) whatever of it
is still open is closed and the test fails there, naming what it left and where it was opened.
"""

import subprocess
import traceback
import weakref

import pytest
import tornado.websocket

_owners = ["(outside any test)"]   # the test or non-function fixture being set up or run, innermost last
_made = weakref.WeakKeyDictionary()  # a client or process -> (owner, where it was made)


def _where():
    """The innermost frames of the suite's own code that made the thing (not tornado's, asyncio's or this file's)."""
    frames = [f for f in traceback.extract_stack()[:-2] if f.filename != __file__
              and ("/tests/" in f.filename or "reticle" in f.filename.rsplit("/", 1)[-1] or "test_" in f.filename)]
    return " <- ".join("%s:%d %s" % (f.filename.rsplit("/", 1)[-1], f.lineno, f.name) for f in frames[-1:-4:-1])


def _note(thing):
    try:
        _made[thing] = (_owners[-1], _where())
    except TypeError:  # not weak-referenceable: nothing to follow
        pass


_ws_init = tornado.websocket.WebSocketClientConnection.__init__
_popen_init = subprocess.Popen.__init__


def _ws_noted(self, *args, **kwargs):
    _ws_init(self, *args, **kwargs)
    _note(self)


def _popen_noted(self, *args, **kwargs):
    _popen_init(self, *args, **kwargs)
    _note(self)


def _still_open(thing):
    """What is left open of `thing`, in words, or ""."""
    if isinstance(thing, tornado.websocket.WebSocketClientConnection):
        if thing.protocol is not None:
            return "a WebSocket client (never closed)"
        if not thing.connect_future.done():
            return "a WebSocket client (still connecting)"
        return ""
    if isinstance(thing, subprocess.Popen) and thing.returncode is None and thing.poll() is None:
        return "a child process (pid %d: %s)" % (thing.pid, " ".join(map(str, thing.args))[:120]
                                                 if isinstance(thing.args, (list, tuple)) else thing.args)
    return ""


def _close(thing):
    if isinstance(thing, tornado.websocket.WebSocketClientConnection):
        try:
            thing.close()
        except Exception:
            pass
        thing.protocol = None
        if not thing.connect_future.done():
            thing.connect_future.cancel()
    elif isinstance(thing, subprocess.Popen):
        thing.kill()
        try:
            thing.wait(5)
        except subprocess.TimeoutExpired:
            pass


def left_open(owner):
    """Close what `owner` made and left open; a line per thing, naming where it was made."""
    lines = []
    for thing, (made_by, where) in list(_made.items()):
        if made_by != owner:
            continue
        what = _still_open(thing)
        if what:
            lines.append("%s, opened at %s" % (what, where))
            _close(thing)
        _made.pop(thing, None)
    return lines


def pytest_configure(config):
    tornado.websocket.WebSocketClientConnection.__init__ = _ws_noted
    subprocess.Popen.__init__ = _popen_noted


def pytest_unconfigure(config):
    tornado.websocket.WebSocketClientConnection.__init__ = _ws_init
    subprocess.Popen.__init__ = _popen_init


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _owners.append(item.nodeid)
    try:
        return (yield)
    finally:
        _owners.pop()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    if fixturedef.scope == "function":
        return (yield)
    _owners.append("fixture %s (%s)" % (fixturedef.argname, fixturedef.scope))
    try:
        return (yield)
    finally:
        _owners.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    lines = left_open(item.nodeid)
    if lines:
        pytest.fail("%s left open at its teardown (each test closes what it opens):\n  %s"
                    % (item.nodeid, "\n  ".join(lines)), pytrace=False)
    return result


def pytest_fixture_post_finalizer(fixturedef, request):
    if fixturedef.scope != "function":
        lines = left_open("fixture %s (%s)" % (fixturedef.argname, fixturedef.scope))
        if lines:
            pytest.fail("the fixture %s left open when it was finalised:\n  %s" % (fixturedef.argname,
                                                                                 "\n  ".join(lines)), pytrace=False)
