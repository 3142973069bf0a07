"""Hostile clients against a real daemon subprocess, with raw sockets and a
real stdio proxy: what only the whole process shows (the header timeout, what
reaches the log, the stdio transport).  In-process probes are in
test_http.py::HardeningTest and test_bridge.py."""

import io
import json
import logging
import socket
import subprocess
import sys
import time

import pytest
from tornado.testing import AsyncHTTPTestCase
from tornado.testing import gen_test

import reticle
from _harness import RETICLE_PY
from _harness import ROOT
from _harness import Daemon
from _harness import daemon_env
from _harness import free_port

SECRET = "s3cret-" + "q" * 40


def strict_json(data):
    def refuse(name):
        raise ValueError("%s is not JSON" % name)
    return json.loads(data, parse_constant=refuse)


def raw_request(port, data, timeout=5.0):
    """Send bytes, read until the server closes; -> the response bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        out = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
    return out


@pytest.fixture
def token_daemon(tmp_path):
    d = Daemon(tmp_path / "state", env=daemon_env(tmp_path / "state", RETICLE_TOKEN=SECRET))
    try:
        d.wait_ready()
        yield d
    finally:
        d.stop()


# The header-timeout daemon runs `reticle serve` with HEADER_TIMEOUT_S set to this (the same code reads
# it), so that the test waits 2 s for the close, not reticle's 10.
HEADER_TIMEOUT_S = 2.0
SERVE_WITH_SHORT_HEADER_TIMEOUT = ("import sys, reticle; reticle.HEADER_TIMEOUT_S = %r; "
                                   "sys.exit(reticle.main(sys.argv[1:]))" % HEADER_TIMEOUT_S)


def test_incomplete_request_headers_are_closed_after_the_header_timeout(tmp_path):
    d = Daemon(tmp_path / "state", env={"RETICLE_TOKEN": SECRET}, cwd=ROOT,
               command=[sys.executable, "-c", SERVE_WITH_SHORT_HEADER_TIMEOUT])
    try:
        with socket.create_connection(("127.0.0.1", d.port), timeout=30) as sock:
            sock.sendall(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            started = time.monotonic()
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            waited = time.monotonic() - started
    finally:
        d.close()
    assert data == b""  # closed, never answered
    assert HEADER_TIMEOUT_S - 1 < waited < HEADER_TIMEOUT_S + 5, waited


def test_no_token_reaches_the_log_and_every_line_is_json(token_daemon):
    port = token_daemon.port
    q = "token=" + SECRET
    requests = [
        "TRACE /status?%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % q,
        "TRACE /status?%s HTTP/1.1\r\nHost: evil.com\r\n\r\n" % q,
        "FOO /mcp?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n" % (q, SECRET),
        "GET /nowhere?%s HTTP/1.1\r\nHost: evil.com\r\n\r\n" % q,
        "GET /mcp?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: v1.x.y\r\n\r\n" % q,
        "POST /mcp/message?sessionId=nope&%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}" % q,
        "GET /reticle?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.com\r\n\r\n" % q,
    ]
    for body in ("[" * 100000, '{"jsonrpc":"2.0","id":1,"method":"\\ud800"}', '{"jsonrpc":"2.0","id":1e999}'):
        requests.append("POST /mcp?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s"
                        % (q, len(body), body))
    for req in requests:
        head = raw_request(port, req.replace("HTTP/1.1\r\n", "HTTP/1.1\r\nConnection: close\r\n", 1).encode())
        code = int(head.split(b" ", 2)[1])
        assert code < 500, head[:300]
    token_daemon.stop()
    log = token_daemon.log()
    assert SECRET not in log
    lines = [ln for ln in log.splitlines() if ln.strip()]
    assert lines
    for line in lines:
        entry = json.loads(line)  # every line is one JSON object
        assert entry["level"] != "error", entry


def test_the_stdio_proxy_answers_hostile_lines_with_json_rpc_errors(tmp_path):
    lines = {
        "[" * 100000: -32700,
        '{"a":' * 100000: -32700,
        '{"jsonrpc":"2.0","id":1,"method":"\\ud800"}': -32700,
        '{"jsonrpc":"2.0","id":1e999,"method":"ping"}': -32700,
        '{"jsonrpc":"2.0","id":NaN,"method":"ping"}': -32700,
        '{"jsonrpc":"2.0","id":null,"method":"ping"}': -32600,
        "[" + ",".join(['{"jsonrpc":"2.0","id":1,"method":"ping"}'] * (reticle.MAX_BATCH + 1)) + "]": -32600,
    }
    stdin = "".join(line + "\n" for line in lines) + '{"jsonrpc":"2.0","id":"last","method":"ping"}\n'
    proc = subprocess.run([sys.executable, RETICLE_PY, "mcp", "--port", str(free_port())], input=stdin.encode(),
                          capture_output=True, timeout=60, env=daemon_env(tmp_path / "state"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    replies = [strict_json(line) for line in proc.stdout.decode("utf-8").splitlines()]
    assert sorted(r["error"]["code"] for r in replies if "error" in r) == sorted(lines.values())
    assert [r["result"] for r in replies if r.get("id") == "last"] == [{}]
    assert b"Traceback" not in proc.stderr


class _Boom(reticle._BaseHandler):
    def get(self):
        raise RuntimeError("a bug while serving " + self.request.uri)


class UncaughtExceptionLogTest(AsyncHTTPTestCase):
    """The log line of an uncaught exception: JSON, with the path and no token."""

    def get_app(self):
        import tempfile
        self.hub = reticle.Hub(state_dir=tempfile.mkdtemp(prefix="reticle-boom-"), port=0, token=SECRET)
        app = reticle.make_app(self.hub)
        app.add_handlers(r".*", [(r"/boom", _Boom, {"hub": self.hub})])
        return app

    @gen_test
    async def test_the_uri_and_its_token_are_kept_out_of_the_line(self):
        out = io.StringIO()
        handler = logging.StreamHandler(out)
        handler.setFormatter(reticle._JsonFormatter())
        loggers = [logging.getLogger(n) for n in ("reticle", "tornado")]
        for logger in loggers:
            logger.addHandler(handler)
        try:
            resp = await self.http_client.fetch(self.get_url("/boom?token=" + SECRET), raise_error=False,
                                                headers={"Authorization": "Bearer " + SECRET})
        finally:
            for logger in loggers:
                logger.removeHandler(handler)
        assert resp.code == 500
        assert json.loads(resp.body)["error"] == "internal server error"
        lines = out.getvalue().splitlines()
        entries = [json.loads(line) for line in lines]
        crash = [e for e in entries if e["event"] == "http_uncaught_exception"]
        assert crash and crash[0]["path"] == "/boom" and "RuntimeError" in crash[0]["exc"]
        assert SECRET not in out.getvalue()


def test_the_formatter_redacts_anything_that_looks_like_a_token():
    record = logging.LogRecord("tornado.application", logging.ERROR, __file__, 1,
                               "Uncaught exception GET /mcp/sse?token=%s&x=1 (127.0.0.1)\n%r", (SECRET, {
                                   "Authorization": "bearer " + SECRET, "hello": '{"token": "%s"}' % SECRET}), None)
    line = reticle._JsonFormatter().format(record)
    assert SECRET not in line
    assert "token=[redacted]&x=1" in json.loads(line)["event"]


def test_a_repeated_outside_error_is_written_five_times_a_minute_then_counted():
    """Issue 19 #6: an accept loop failing with EMFILE must not write hundreds of thousands of lines."""
    flt = reticle._RepeatFilter()

    def rec(name="asyncio", msg="Exception in callback BaseSelectorEventLoop._accept_connection"):
        return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, (), None)
    kept = [flt.filter(rec()) for _ in range(1000)]
    assert kept.count(True) == 5
    assert all(flt.filter(rec("reticle.bridge", "x")) for _ in range(100))  # reticle's own lines are its own


def test_connections_beyond_the_cap_are_closed_at_once_and_the_daemon_serves(tmp_path):
    """Issue 19 #6: a flood of connections cannot take every descriptor."""
    import asyncio

    import tornado.httpserver
    import tornado.netutil

    async def run():
        hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        port = sockets[0].getsockname()[1]
        server = reticle._CappedHTTPServer(reticle.make_app(hub))
        server.cap = 8
        server.add_sockets(sockets)
        held = []
        try:
            for _ in range(8):
                r, w = await asyncio.open_connection("127.0.0.1", port)
                held.append(w)
            await asyncio.sleep(0.1)
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"GET /status HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            assert await asyncio.wait_for(r.read(), 5) == b""  # closed at once, unanswered
            w.close()
            for x in held:
                x.close()
            await asyncio.sleep(0.2)
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"GET /status HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            assert (await asyncio.wait_for(r.read(), 5)).startswith(b"HTTP/1.1 200")
            w.close()
        finally:
            server.stop()
            await server.close_all_connections()
    asyncio.run(run())


def test_a_rate_limited_daemon_is_a_busy_daemon_not_a_stranger(tmp_path):
    """Issue 19 #7: `reticle status`, `mcp`, `verify` and `stop` probe /status; a 429 from a daemon
    under load must not read as "held by another process that is not a Reticle daemon"."""
    import asyncio

    import tornado.httpserver
    import tornado.netutil

    async def run():
        hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
        hub.limiter = reticle._RateLimiter(0.001, 1)
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        port = sockets[0].getsockname()[1]
        server = tornado.httpserver.HTTPServer(reticle.make_app(hub))
        server.add_sockets(sockets)
        real_key = reticle._BaseHandler.session_key
        reticle._BaseHandler.session_key = lambda self: "everyone"  # one bucket, already spent
        try:
            hub.limiter.check("everyone")
            probe = await reticle._probe_port(port)
            assert probe["state"] == "daemon" and probe.get("busy") is True, probe
        finally:
            reticle._BaseHandler.session_key = real_key
            server.stop()
            await server.close_all_connections()
    asyncio.run(run())
