"""tests/_leaks.py: what a test opens and leaves open fails that test, at its own teardown, naming
where it was opened; the next test runs clean (before, the finaliser of a leaked WebSocket client ran
whenever the garbage collector did, and failed whichever test was running then)."""

import os

TESTS = os.path.dirname(os.path.abspath(__file__))

INNER = '''
import gc
import subprocess
import sys

import tornado.testing
import tornado.web
import tornado.websocket


class Echo(tornado.websocket.WebSocketHandler):
    def on_message(self, message):
        self.write_message(message)


class Sockets(tornado.testing.AsyncHTTPTestCase):
    def get_app(self):
        return tornado.web.Application([(r"/ws", Echo)])

    @tornado.testing.gen_test
    async def test_leaves_a_client_open(self):
        conn = await tornado.websocket.websocket_connect("ws://127.0.0.1:%d/ws" % self.get_http_port())
        await conn.write_message("hi")
        assert await conn.read_message() == "hi"

    @tornado.testing.gen_test
    async def test_closes_its_client(self):
        conn = await tornado.websocket.websocket_connect("ws://127.0.0.1:%d/ws" % self.get_http_port())
        conn.close()


KEPT = []


def test_leaves_a_process_running():
    KEPT.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))


def test_runs_next_and_collects_garbage():
    gc.collect()  # a leaked client's finaliser would run here, and fail this test
'''


def test_what_a_test_leaves_open_fails_that_test_at_its_teardown(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", TESTS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "_leaks", "-W", "error", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines([
        "*test_closes_its_client PASSED*",
        "*test_leaves_a_client_open PASSED*",
        "*test_leaves_a_client_open ERROR*",
        "*test_leaves_a_process_running PASSED*",
        "*test_leaves_a_process_running ERROR*",
        "*test_runs_next_and_collects_garbage PASSED*",
    ])
    result.stdout.fnmatch_lines(["*a WebSocket client (never closed), opened at test_inner.py:*"
                                 "test_leaves_a_client_open*"])
    result.stdout.fnmatch_lines(["*a child process (pid *time.sleep(60)*), opened at test_inner.py:*"])
