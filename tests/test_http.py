"""Every route, status code and refusal of both seed pages, in process.

The application is served by ``AsyncHTTPTestCase``.  Held-open SSE streams and
requests a normal client cannot send (no Host header, a body that trickles,
a chunked body over the limit) use a raw socket opened and closed by
``RawConnection``; everything else uses ``self.http_client.fetch``.
"""

import asyncio
import json
import logging
import os
import re
import shutil
import tempfile
import uuid

import pytest
from tornado.testing import AsyncHTTPTestCase
from tornado.testing import ExpectLog
from tornado.testing import gen_test

import reticle

LISTED_TOOLS = len(reticle._build_registry().names())

TOKEN = "t0ken-" + "a" * 40
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.fixture(autouse=True)
def _isolated_env(clean_env):
    """Every test here runs with RETICLE_* cleared and a tmp RETICLE_STATE_DIR."""
    yield


def rpc(method, mid=1, params=None):
    msg = {"jsonrpc": "2.0", "id": mid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method="notifications/initialized"):
    return {"jsonrpc": "2.0", "method": method}


INITIALIZE = rpc("initialize", 1, {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "pytest", "version": "1"}})


class RawResponse:
    def __init__(self, raw):
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.code = int(lines[0].split()[1]) if lines[0] else 0
        self.headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def json(self):
        body = self.body
        if self.headers.get("transfer-encoding") == "chunked":
            body = dechunk(body)
        return json.loads(body)


def dechunk(body):
    out = b""
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += body[:size]
        body = body[size + 2:]
    return out


class RawConnection:
    """A plain TCP connection to the test server, closed by close()."""

    def __init__(self, port):
        self.port = port
        self.reader = None
        self.writer = None
        self.buffer = b""

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def send(self, data):
        self.writer.write(data)
        await self.writer.drain()

    async def read_until(self, marker, timeout=5.0):
        while marker not in self.buffer:
            chunk = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not chunk:
                raise EOFError("connection closed; got %r" % self.buffer[-500:])
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(marker)
        return head + marker

    async def read_to_eof(self, timeout=5.0):
        while True:
            try:
                chunk = await asyncio.wait_for(self.reader.read(65536), timeout)
            except (ConnectionResetError, BrokenPipeError):
                break
            if not chunk:
                break
            self.buffer += chunk
        data, self.buffer = self.buffer, b""
        return data

    async def close(self):
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionResetError, BrokenPipeError):
                pass
            self.writer = None


class SseStream(RawConnection):
    """GET an SSE route over HTTP/1.0 (no chunking) and read its frames."""

    async def start(self, path, headers=None):
        await self.open()
        lines = ["GET %s HTTP/1.0" % path, "Host: 127.0.0.1:%d" % self.port, "Accept: text/event-stream"]
        lines += ["%s: %s" % kv for kv in (headers or {}).items()]
        await self.send(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.response = RawResponse(await self.read_until(b"\r\n\r\n"))
        return self.response

    async def frame(self, timeout=5.0):
        """The next frame as {"event", "data", "comments"}; comments are their own frames."""
        raw = (await self.read_until(b"\n\n", timeout)).decode("utf-8")
        frame = {"event": None, "data": None, "comments": []}
        for line in raw.strip("\n").split("\n"):
            if line.startswith(":"):
                frame["comments"].append(line[1:].strip())
            elif line.startswith("event:"):
                frame["event"] = line[len("event:"):].strip()
            elif line.startswith("data:"):
                frame["data"] = line[len("data:"):].strip()
        return frame

    async def message(self, timeout=5.0):
        """The next `message` frame's JSON, skipping comments."""
        while True:
            frame = await self.frame(timeout)
            if frame["event"] in ("message", None) and frame["data"] is not None:
                return json.loads(frame["data"])


class ReticleTestCase(AsyncHTTPTestCase):
    hub_kwargs = {}

    def setUp(self):
        self.state_dir = tempfile.mkdtemp(prefix="reticle-http-")
        self.streams = []
        super().setUp()

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def get_app(self):
        self.hub = reticle.Hub(state_dir=self.state_dir, port=0, **self.hub_kwargs)
        return reticle.make_app(self.hub)

    async def fetch(self, path, method="GET", body=None, headers=None, **kwargs):
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            headers = dict(headers or {}, **{"Content-Type": "application/json"})
        if body is not None and "Content-Type" not in (headers or {}):
            headers = dict(headers or {}, **{"Content-Type": "application/json"})
        return await self.http_client.fetch(self.get_url(path), method=method, body=body, headers=headers,
                                            raise_error=False, allow_nonstandard_methods=True, **kwargs)

    async def ka_fetch(self, path, method="GET", body=None, headers=None):
        """One request on this test's keep-alive connection (a sessionless client is its connection:
        the rate limiter keys it so); the connection is opened again after the server closes it."""
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        data = body.encode() if isinstance(body, str) else (body or b"")
        conn = getattr(self, "_ka", None)
        if conn is None:
            conn = self._ka = await RawConnection(self.get_http_port()).open()
            self.streams.append(conn)
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1:%d" % self.get_http_port(),
                 "Content-Length: %d" % len(data)]
        if data:
            lines.append("Content-Type: application/json")
        lines += ["%s: %s" % kv for kv in (headers or {}).items()]
        await conn.send(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        resp = RawResponse(await conn.read_until(b"\r\n\r\n"))
        length = int(resp.headers.get("content-length", "0"))
        while len(conn.buffer) < length:
            chunk = await asyncio.wait_for(conn.reader.read(65536), 5)
            if not chunk:
                break
            conn.buffer += chunk
        resp.body, conn.buffer = conn.buffer[:length], conn.buffer[length:]
        if resp.headers.get("connection", "").lower() == "close":
            self._ka = None
            await conn.close()
        return resp

    async def stream(self, path, headers=None):
        s = SseStream(self.get_http_port())
        self.streams.append(s)
        await s.start(path, headers)
        return s

    async def close_streams(self):
        for s in self.streams:
            await s.close()
        self.streams = []

    async def raw(self, data, timeout=5.0):
        conn = await RawConnection(self.get_http_port()).open()
        try:
            await conn.send(data)
            return RawResponse(await conn.read_to_eof(timeout))
        finally:
            await conn.close()

    async def assert_still_serving(self):
        resp = await self.fetch("/status")
        self.assertEqual(resp.code, 200, resp.body)
        self.assertIs(json.loads(resp.body)["running"], True)

    def assert_refusal(self, resp, code, error=None):
        self.assertEqual(resp.code, code, resp.body)
        self.assertTrue(resp.headers["Content-Type"].startswith("application/json"))
        body = json.loads(resp.body)
        self.assertEqual(set(body), {"error", "detail"})
        self.assertTrue(body["detail"])
        if error is not None:
            self.assertEqual(body["error"], error)
        return body

    async def sse_session(self):
        """Open /mcp/sse and return (stream, POST path from the endpoint frame)."""
        s = await self.stream("/mcp/sse")
        frame = await s.frame()
        self.assertEqual(frame["event"], "endpoint")
        return s, frame["data"]


class HttpSseTransportTest(ReticleTestCase):
    """seeds/http-transport.md"""

    @gen_test
    async def test_endpoint_frame_comes_first(self):
        s = await self.stream("/mcp/sse")
        self.assertEqual(s.response.code, 200)
        self.assertTrue(s.response.headers["content-type"].startswith("text/event-stream"))
        frame = await s.frame()
        self.assertEqual(frame["event"], "endpoint")
        path, _, query = frame["data"].partition("?")
        self.assertEqual(path, "/mcp/message")
        self.assertTrue(query.startswith("sessionId="))
        self.assertRegex(query[len("sessionId="):], UUID_RE)
        await self.close_streams()

    @gen_test
    async def test_each_stream_gets_its_own_session(self):
        _, first = await self.sse_session()
        _, second = await self.sse_session()
        self.assertNotEqual(first, second)
        await self.close_streams()

    @gen_test
    async def test_post_answers_202_and_the_reply_arrives_on_the_stream(self):
        s, endpoint = await self.sse_session()
        resp = await self.fetch(endpoint, "POST", INITIALIZE)
        self.assertEqual(resp.code, 202)
        self.assertNotIn(b"result", resp.body)
        reply = await s.message()
        self.assertEqual(reply["id"], 1)
        self.assertEqual(reply["result"]["protocolVersion"], "2025-06-18")
        self.assertEqual((await self.fetch(endpoint, "POST", notification())).code, 202)
        for mid in ("list-a", 42):
            self.assertEqual((await self.fetch(endpoint, "POST", rpc("tools/list", mid))).code, 202)
        replies = {}
        for _ in range(2):
            msg = await s.message()
            replies[msg["id"]] = msg
        self.assertEqual(sorted(replies, key=str), [42, "list-a"])
        for msg in replies.values():
            self.assertEqual(len(msg["result"]["tools"]), LISTED_TOOLS)
        await self.close_streams()

    @gen_test
    async def test_replies_go_to_their_own_stream(self):
        s1, e1 = await self.sse_session()
        s2, e2 = await self.sse_session()
        self.assertEqual((await self.fetch(e2, "POST", rpc("ping", "two"))).code, 202)
        self.assertEqual((await self.fetch(e1, "POST", rpc("ping", "one"))).code, 202)
        self.assertEqual((await s1.message())["id"], "one")
        self.assertEqual((await s2.message())["id"], "two")
        await self.close_streams()

    @gen_test
    async def test_tool_call_over_sse(self):
        s, endpoint = await self.sse_session()
        call = rpc("tools/call", 5, {"name": "reticle_sessions", "arguments": {}})
        self.assertEqual((await self.fetch(endpoint, "POST", call)).code, 202)
        reply = await s.message()
        self.assertEqual(reply["id"], 5)
        self.assertEqual(reply["result"]["structuredContent"]["sessions"], [])
        await self.close_streams()

    @gen_test
    async def test_missing_session_id_is_400(self):
        resp = await self.fetch("/mcp/message", "POST", rpc("ping"))
        self.assert_refusal(resp, 400, "missing sessionId")
        resp = await self.fetch("/mcp/message?sessionId=", "POST", rpc("ping"))
        self.assert_refusal(resp, 400, "missing sessionId")
        await self.assert_still_serving()

    @gen_test
    async def test_unknown_session_is_404(self):
        resp = await self.fetch("/mcp/message?sessionId=%s" % uuid.uuid4(), "POST", rpc("ping"))
        self.assert_refusal(resp, 404, "session not found")
        await self.assert_still_serving()

    @gen_test
    async def test_closed_stream_is_404(self):
        s, endpoint = await self.sse_session()
        await s.close()
        for _ in range(100):
            if not self.hub.sse_streams:
                break
            await asyncio.sleep(0.01)
        resp = await self.fetch(endpoint, "POST", rpc("ping"))
        self.assert_refusal(resp, 404, "session not found")

    @gen_test
    async def test_not_ready_is_503(self):
        s, endpoint = await self.sse_session()
        self.hub.mcp_ready = False
        with ExpectLog("reticle", "http", level=logging.WARNING):  # a 5xx is logged as a warning
            self.assert_refusal(await self.fetch("/mcp/sse"), 503, "MCP server not ready")
            self.assert_refusal(await self.fetch(endpoint, "POST", rpc("ping")), 503, "MCP server not ready")
        self.hub.mcp_ready = True
        self.assertEqual((await self.fetch(endpoint, "POST", rpc("ping", 3))).code, 202)
        self.assertEqual((await s.message())["id"], 3)
        await self.close_streams()
        await self.assert_still_serving()

    @gen_test
    async def test_not_json_is_400(self):
        s, endpoint = await self.sse_session()
        resp = await self.fetch(endpoint, "POST", "{not json", {"Content-Type": "application/json"})
        body = self.assert_refusal(resp, 400, "invalid JSON")
        self.assertIn("the body is not JSON", body["detail"])
        await self.close_streams()

    @gen_test
    async def test_shutdown_frame_before_the_stream_closes(self):
        s, _ = await self.sse_session()
        await self.hub.shutdown("planned test stop")
        frame = await s.frame()
        self.assertEqual(frame["event"], "shutdown")
        self.assertEqual(json.loads(frame["data"])["reason"], "planned test stop")
        self.assertEqual(await s.read_to_eof(), b"")
        await self.close_streams()

    @gen_test
    async def test_keepalive_comment(self):
        self.hub.keepalive_s = 0.05
        s, _ = await self.sse_session()
        frame = await s.frame(timeout=2.0)
        self.assertIsNone(frame["event"])
        self.assertIsNone(frame["data"])
        self.assertEqual(frame["comments"], ["keepalive"])
        await self.close_streams()

    @gen_test
    async def test_status_counts_the_sse_client(self):
        await self.sse_session()
        status = json.loads((await self.fetch("/status")).body)
        self.assertEqual(status["mcpClients"], 1)
        await self.close_streams()


class StreamableHttpTest(ReticleTestCase):
    """seeds/http-mcp-streamable.md"""

    async def post(self, payload, path="/mcp", headers=None):
        return await self.fetch(path, "POST", payload, headers)

    async def initialize(self):
        resp = await self.post(INITIALIZE)
        self.assertEqual(resp.code, 200)
        return resp.headers["Mcp-Session-Id"]

    @gen_test
    async def test_single_message_on_both_paths(self):
        for path in ("/mcp", "/"):
            resp = await self.post(rpc("ping", "p"), path)
            self.assertEqual(resp.code, 200)
            self.assertTrue(resp.headers["Content-Type"].startswith("application/json"))
            self.assertEqual(json.loads(resp.body), {"jsonrpc": "2.0", "id": "p", "result": {}})

    @gen_test
    async def test_batch_on_both_paths(self):
        for path in ("/mcp", "/"):
            batch = [INITIALIZE, notification(), rpc("tools/list", 2), rpc("resources/list", 3),
                     notification("notifications/cancelled")]
            resp = await self.post(batch, path)
            self.assertEqual(resp.code, 200)
            replies = json.loads(resp.body)
            self.assertIsInstance(replies, list)
            self.assertEqual(sorted(r["id"] for r in replies), [1, 2, 3])

    @gen_test
    async def test_notifications_only_is_204_without_body(self):
        for path in ("/mcp", "/"):
            for payload in (notification(), [notification(), notification("notifications/cancelled")]):
                resp = await self.post(payload, path)
                self.assertEqual(resp.code, 204)
                self.assertEqual(resp.body, b"")

    @gen_test
    async def test_empty_batch_is_invalid_request(self):
        for path in ("/mcp", "/"):
            resp = await self.post([], path)
            self.assertEqual(resp.code, 200)
            error = json.loads(resp.body)["error"]
            self.assertEqual(error["code"], -32600)
            self.assertIn("empty batch", error["message"])

    @gen_test
    async def test_message_without_jsonrpc_or_string_method_is_invalid_request(self):
        needs = 'needs "jsonrpc": "2.0" and a string "method"'
        not_an_object = "a JSON-RPC message must be an object"
        for payload, reason in (({"id": 1, "method": "ping"}, needs), ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, needs),
                                ({"jsonrpc": "2.0", "id": 1, "method": 7}, needs), ({"jsonrpc": "2.0", "id": 1}, needs),
                                (5, not_an_object), ("x", not_an_object)):
            resp = await self.fetch("/mcp", "POST", json.dumps(payload), {"Content-Type": "application/json"})
            self.assertEqual(resp.code, 200)
            error = json.loads(resp.body)["error"]
            self.assertEqual(error["code"], -32600, payload)
            self.assertIn(reason, error["message"], payload)

    @gen_test
    async def test_other_methods_are_method_not_found(self):
        for method in ("prompts/list", "server/discover", "sampling/createMessage"):
            resp = await self.post(rpc(method, 8))
            self.assertEqual(resp.code, 200)
            reply = json.loads(resp.body)
            self.assertEqual(reply["id"], 8)
            self.assertEqual(reply["error"]["code"], -32601)
            self.assertIn("Method not found: %s." % method, reply["error"]["message"])

    @gen_test
    async def test_malformed_json_is_parse_error(self):
        for body in ('{"jsonrpc": "2.0", "id": 1,', "", "\xff", "[1, 2"):
            resp = await self.fetch("/mcp", "POST", body, {"Content-Type": "application/json"})
            self.assertEqual(resp.code, 200)
            reply = json.loads(resp.body)
            self.assertEqual(reply["error"]["code"], -32700)
            self.assertTrue(reply["error"]["message"].startswith("Parse error: "), reply)
            self.assertIsNone(reply["id"])
        await self.assert_still_serving()

    @gen_test
    async def test_session_id_minted_on_sessionless_initialize(self):
        sid = await self.initialize()
        self.assertTrue(sid.startswith("v1."))
        self.assertTrue(self.hub.signer.verify(sid))
        self.assertTrue(all(33 <= ord(c) <= 126 for c in sid))
        again = await self.post(INITIALIZE, headers={"Mcp-Session-Id": sid})
        self.assertEqual(again.code, 200)
        self.assertNotIn("Mcp-Session-Id", again.headers)
        other = await self.post(rpc("tools/list", 2), headers={"Mcp-Session-Id": sid})
        self.assertEqual(other.code, 200)
        self.assertNotIn("Mcp-Session-Id", other.headers)
        self.assertEqual(len(json.loads(other.body)["result"]["tools"]), LISTED_TOOLS)

    @gen_test
    async def test_no_session_id_without_initialize(self):
        resp = await self.post(rpc("ping"))
        self.assertNotIn("Mcp-Session-Id", resp.headers)
        failed = await self.post(rpc("initialize", 1, []))
        error = json.loads(failed.body)["error"]
        self.assertEqual(error["code"], -32602)
        self.assertIn("params must be an object", error["message"])
        self.assertNotIn("Mcp-Session-Id", failed.headers)

    @gen_test
    async def test_initialize_in_a_batch_mints_a_session_id(self):
        resp = await self.post([INITIALIZE, notification()], "/")
        self.assertTrue(self.hub.signer.verify(resp.headers["Mcp-Session-Id"]))

    @gen_test
    async def test_tampered_session_id_is_404(self):
        sid = await self.initialize()
        version, payload, mac = sid.split(".")
        flip = {"A": "B"}.get(payload[0], "A")
        for bad in (version + "." + flip + payload[1:] + "." + mac, sid[:-2] + ("AA" if sid[-2:] != "AA" else "BB"),
                    "v2." + payload + "." + mac, sid + "x", "not-a-session", str(uuid.uuid4())):
            for path in ("/mcp", "/"):
                resp = await self.post(rpc("ping"), path, {"Mcp-Session-Id": bad})
                body = self.assert_refusal(resp, 404, "MCP_SESSION_UNKNOWN")
                self.assertIn("initialize", body["detail"])
        await self.assert_still_serving()

    @gen_test
    async def test_session_id_signed_by_another_machine_is_404(self):
        foreign = reticle._SessionSigner(os.urandom(32)).mint()
        resp = await self.post(rpc("ping"), headers={"Mcp-Session-Id": foreign})
        self.assert_refusal(resp, 404, "MCP_SESSION_UNKNOWN")
        await self.assert_still_serving()

    @gen_test
    async def test_session_id_survives_a_restart(self):
        # A second Hub on the same state dir is the same machine after a restart.
        previous = reticle.Hub(state_dir=self.state_dir)
        sid = previous.signer.mint()
        self.assertTrue(self.hub.signer.verify(sid))
        resp = await self.post(rpc("ping", 4), headers={"Mcp-Session-Id": sid})
        self.assertEqual(resp.code, 200)
        self.assertEqual(json.loads(resp.body)["id"], 4)

    @gen_test
    async def test_get_stream_of_comments_on_both_paths(self):
        sid = await self.initialize()
        self.hub.keepalive_s = 0.05
        for path in ("/mcp", "/"):
            s = await self.stream(path, {"Mcp-Session-Id": sid})
            self.assertEqual(s.response.code, 200)
            self.assertTrue(s.response.headers["content-type"].startswith("text/event-stream"))
            opened = await s.frame()
            self.assertEqual(len(opened["comments"]), 1)
            self.assertTrue(opened["comments"][0].startswith("stream open"), opened)
            self.assertIsNone(opened["data"])
            keepalive = await s.frame(timeout=2.0)
            self.assertEqual(keepalive["comments"], ["keepalive"])
            self.assertIsNone(keepalive["data"])
        await self.close_streams()

    @gen_test
    async def test_get_stream_ends_with_a_shutdown_frame(self):
        sid = await self.initialize()
        s = await self.stream("/mcp", {"Mcp-Session-Id": sid})
        await s.frame()
        await self.hub.shutdown("bye")
        frame = await s.frame()
        self.assertEqual(frame["event"], "shutdown")
        self.assertEqual(json.loads(frame["data"]), {"reason": "bye"})
        await self.close_streams()

    @gen_test
    async def test_get_without_session_id_is_400(self):
        for path in ("/mcp", "/"):
            resp = await self.fetch(path)
            body = self.assert_refusal(resp, 400, "missing Mcp-Session-Id")
            self.assertIn("GET %s needs the Mcp-Session-Id header" % path, body["detail"])
        await self.assert_still_serving()

    @gen_test
    async def test_get_with_unknown_session_id_is_404(self):
        for path in ("/mcp", "/"):
            resp = await self.fetch(path, headers={"Mcp-Session-Id": "v1.AAAA.BBBB"})
            self.assert_refusal(resp, 404, "MCP_SESSION_UNKNOWN")
        await self.assert_still_serving()

    @gen_test
    async def test_delete_is_405_with_no_body(self):
        resp = await self.fetch("/mcp", "DELETE")
        self.assertEqual(resp.code, 405)
        self.assertEqual(resp.body, b"")
        sid = await self.initialize()
        resp = await self.fetch("/mcp", "DELETE", headers={"Mcp-Session-Id": sid})
        self.assertEqual(resp.code, 405)
        self.assertEqual(resp.body, b"")
        await self.assert_still_serving()

    @gen_test
    async def test_no_delete_alias_at_the_root(self):
        resp = await self.fetch("/", "DELETE")
        self.assertEqual(resp.code, 405)

    @gen_test
    async def test_no_cors_headers(self):
        resp = await self.post(rpc("ping"), headers={"Origin": "http://localhost:5173"})
        self.assertEqual(resp.code, 200)
        self.assertFalse([h for h in resp.headers if h.lower().startswith("access-control-")])


class StatusAndOpenApiTest(ReticleTestCase):
    # path, method, the codes the seeds and DESIGN section 4 say it can answer
    CONTRACT = [
        ("/mcp/sse", "get", {"200", "503", "403", "429"}),
        ("/mcp/message", "post", {"202", "400", "404", "503", "403", "408", "413", "429"}),
        ("/mcp", "post", {"200", "204", "404", "403", "408", "413", "429"}),
        ("/mcp", "get", {"200", "400", "404", "403", "408", "429"}),
        ("/mcp", "delete", {"405", "403", "408", "429"}),
        ("/", "post", {"200", "204", "404", "403", "408", "413", "429"}),
        ("/", "get", {"200", "400", "404", "403", "408", "429"}),
        ("/status", "get", {"200", "403", "429"}),
        ("/openapi.json", "get", {"200", "403", "429"}),
    ]
    OPERATION_IDS = {("/mcp", "post"): "mcpPost", ("/mcp", "get"): "mcpGet", ("/mcp", "delete"): "mcpDelete",
                     ("/", "post"): "mcpRootPost", ("/", "get"): "mcpRootGet"}

    @gen_test
    async def test_status(self):
        resp = await self.fetch("/status")
        self.assertEqual(resp.code, 200)
        self.assertTrue(resp.headers["Content-Type"].startswith("application/json"))
        self.assertEqual(resp.headers["Cache-Control"], "no-store")
        status = json.loads(resp.body)
        self.assertTrue({"running", "version", "pid", "port", "startedAt", "sessions", "mcpClients",
                         "devices"} <= set(status))
        self.assertIs(status["running"], True)
        self.assertEqual(status["version"], reticle.__version__)
        self.assertEqual(status["pid"], os.getpid())
        self.assertEqual(status["sessions"], [])
        self.assertEqual(status["devices"], [])
        self.assertEqual(status["mcpClients"], 0)
        self.assertIn("no browser session", status["why"])

    @gen_test
    async def test_openapi_lists_every_route_and_status_code(self):
        resp = await self.fetch("/openapi.json")
        self.assertEqual(resp.code, 200)
        doc = json.loads(resp.body)
        self.assertTrue(doc["openapi"].startswith("3.1"))
        self.assertEqual(doc["info"]["version"], reticle.__version__)
        paths = doc["paths"]
        for path, method, codes in self.CONTRACT:
            self.assertIn(path, paths)
            self.assertIn(method, paths[path], (path, method))
            listed = set(paths[path][method]["responses"])
            self.assertLessEqual(codes, listed, (path, method, codes - listed))
            for code, response in paths[path][method]["responses"].items():
                self.assertRegex(code, r"^[1-5][0-9][0-9]$")
                self.assertTrue(response["description"])
        for (path, method), op_id in self.OPERATION_IDS.items():
            self.assertEqual(paths[path][method]["operationId"], op_id)
        self.assertNotIn("delete", paths["/"])
        for _, _, _, path, methods in reticle._ROUTES:
            for method in methods:
                self.assertIn(method, paths[path])

    @gen_test
    async def test_openapi_documents_the_session_header(self):
        doc = json.loads((await self.fetch("/openapi.json")).body)
        for path in ("/mcp", "/"):
            params = {p["name"]: p for p in doc["paths"][path]["get"]["parameters"]}
            self.assertIs(params["Mcp-Session-Id"]["required"], True)
            params = {p["name"]: p for p in doc["paths"][path]["post"]["parameters"]}
            self.assertIs(params["Mcp-Session-Id"]["required"], False)

    @gen_test
    async def test_unknown_path_is_a_json_404(self):
        resp = await self.fetch("/nope")
        body = self.assert_refusal(resp, 404, "not found")
        self.assertIn("no route GET /nope", body["detail"])


class AuthorizationTest(ReticleTestCase):
    """DESIGN section 5, loopback tier: a DNS-rebound page is a loopback peer with a foreign Host."""

    ROUTES = [("/status", "GET"), ("/openapi.json", "GET"), ("/reticle.js", "GET"), ("/mcp/sse", "GET"),
              ("/mcp/message?sessionId=x", "POST"), ("/mcp", "POST"), ("/mcp", "GET"), ("/mcp", "DELETE"),
              ("/", "POST"), ("/", "GET"), ("/nope", "GET")]

    async def route(self, path, method, headers):
        body = json.dumps(rpc("ping")) if method == "POST" else None
        return await self.fetch(path, method, body, headers)

    @gen_test
    async def test_foreign_host_is_403_on_every_route(self):
        for host in ("evil.com", "evil.com:%d" % self.get_http_port(), "127.0.0.1.evil.com",
                     "localhost.evil.com", "127.1", "0.0.0.0"):
            for path, method in self.ROUTES:
                resp = await self.route(path, method, {"Host": host})
                body = self.assert_refusal(resp, 403, "forbidden")
                self.assertIn("Host", body["detail"])
        await self.assert_still_serving()

    @gen_test
    async def test_a_cross_site_request_without_origin_or_referer_is_403_on_every_route(self):
        """Issue 19 #23: a page with referrerpolicy=no-referrer sends neither header, but the
        browser still says Sec-Fetch-Site."""
        for site in ("cross-site", "same-site"):
            for path, method in self.ROUTES:
                if path == "/reticle.js":
                    continue  # it holds no secret: test_the_script_loads_whatever_the_pages_referrer_policy
                resp = await self.route(path, method, {"Sec-Fetch-Site": site})
                body = self.assert_refusal(resp, 403, "forbidden")
                self.assertIn("no Origin and no Referer", body["detail"])
        # the same page that names itself (a loopback Referer), a same-origin or a typed-in request is served
        for headers in ({"Sec-Fetch-Site": "cross-site", "Referer": "http://localhost:5173/"},
                        {"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}):
            self.assertEqual((await self.fetch("/reticle.js", "GET", None, headers)).code, 200, headers)
        await self.assert_still_serving()

    @gen_test
    async def test_the_script_loads_whatever_the_pages_referrer_policy(self):
        """Issue 27 #1: a Django page (Referrer-Policy: same-origin, the default) on 127.0.0.1:8000, or
        a page on localhost:8000, loads http://127.0.0.1:<port>/reticle.js as a same-site or cross-site
        request with no Origin and no Referer: the script (no secret in it) is served.  A page that
        names itself off loopback, a DNS-rebound Host, and every route that acts or reads are still
        refused, and each refused script load is kept for reticle_sessions with what to do."""
        for site in ("same-site", "cross-site"):
            resp = await self.fetch("/reticle.js", "GET", None, {"Sec-Fetch-Site": site, "Sec-Fetch-Dest": "script"})
            self.assertEqual(resp.code, 200, site)
            self.assertIn(b"reticle", resp.body)
            for path, method in self.ROUTES:
                if path != "/reticle.js":
                    resp = await self.route(path, method, {"Sec-Fetch-Site": site})
                    self.assert_refusal(resp, 403, "forbidden")
        self.assertEqual(list(self.hub.refusals), [])
        hostile = ({"Sec-Fetch-Site": "cross-site", "Referer": "http://evil.com/page"},
                   {"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.com"},
                   {"Sec-Fetch-Site": "cross-site", "Host": "evil.com:%d" % self.get_http_port()})
        for headers in hostile:
            self.assert_refusal(await self.fetch("/reticle.js", "GET", None, headers), 403, "forbidden")
        refused = list(self.hub.refusals)
        self.assertEqual([r["what"] for r in refused], ["script"] * 3)
        self.assertIn("http://evil.com/page", refused[0]["reason"])
        self.assertIn("RETICLE_ALLOWED_ORIGINS", refused[1]["fix"])
        self.assertIn("not through a name that resolves", refused[2]["fix"])
        answer = (await self.hub.call_tool("reticle_sessions", {}, reticle._CallContext("t", "t")))["structuredContent"]
        self.assertEqual([r["reason"] for r in answer["refused"]], [r["reason"] for r in refused[::-1]])
        self.assertIn("script load", answer["why"])
        self.assertIn("Host header", answer["next_action"]["reason"])
        await self.assert_still_serving()

    @gen_test
    async def test_missing_host_is_403(self):
        resp = await self.raw(b"GET /status HTTP/1.0\r\n\r\n")
        self.assertEqual(resp.code, 403)
        self.assertEqual(set(resp.json()), {"error", "detail"})
        self.assertEqual(resp.json()["error"], "forbidden")
        self.assertIn("the Host header is missing", resp.json()["detail"])
        await self.assert_still_serving()

    @gen_test
    async def test_foreign_origin_or_referer_is_403(self):
        for headers, culprit in (({"Origin": "http://evil.com"}, "Origin"),
                                 ({"Origin": "https://127.0.0.1.evil.com"}, "Origin"),
                                 ({"Origin": "null"}, "Origin"), ({"Origin": "file://"}, "Origin"),
                                 ({"Referer": "http://evil.com/x"}, "Referer"),
                                 ({"Origin": "http://localhost:5173", "Referer": "http://evil.com/page"}, "Referer")):
            for path, method in self.ROUTES:
                resp = await self.route(path, method, headers)
                body = self.assert_refusal(resp, 403, "forbidden")
                # the detail names the header at fault and its value
                self.assertIn("the %s header '%s' is not a loopback page" % (culprit, headers[culprit]),
                              body["detail"], (path, method))
        await self.assert_still_serving()

    @gen_test
    async def test_loopback_host_origin_and_referer_pass(self):
        port = self.get_http_port()
        for headers in ({}, {"Host": "localhost:%d" % port}, {"Host": "[::1]:%d" % port},
                        {"Host": "127.0.0.1"}, {"Origin": "http://localhost:5173"},
                        {"Origin": "http://127.0.0.1:%d" % port}, {"Origin": "http://[::1]:9000"},
                        {"Referer": "http://127.0.0.1:9000/page"}):
            resp = await self.fetch("/status", headers=headers)
            self.assertEqual(resp.code, 200, headers)

    @gen_test
    async def test_a_token_is_not_needed_from_loopback(self):
        self.hub._token = TOKEN
        self.assertEqual((await self.fetch("/status")).code, 200)

    @gen_test
    async def test_no_token_configured_means_no_token_tier_fallback(self):
        for path, headers in (("/status?token=", {"Host": "evil.com"}),
                              ("/status", {"Host": "evil.com", "Authorization": "Bearer "})):
            body = self.assert_refusal(await self.fetch(path, headers=headers), 403, "forbidden")
            self.assertIn("the Host header 'evil.com' does not name a loopback host", body["detail"])
            self.assertIn("pairing token", body["detail"])


class DaemonProofTest(ReticleTestCase):
    """Issue 27 #4: GET /server-records?challenge= proves the daemon knows the token, bound to the
    address the client reached, without the client sending the token; a page cannot ask for it."""

    @gen_test
    async def test_the_proof_needs_the_token_and_names_the_address_served(self):
        challenge = "0123456789abcdef" * 2
        resp = await self.fetch("/server-records?challenge=" + challenge)
        self.assertEqual(resp.code, 200, resp.body)
        proof = json.loads(resp.body)["proof"]
        port = self.get_http_port()
        self.assertEqual(proof, reticle._daemon_proof(self.hub.token(), "127.0.0.1", port, challenge))
        for wrong in (("x" + self.hub.token()[1:], "127.0.0.1", port), (self.hub.token(), "127.0.0.1", port + 1),
                      (self.hub.token(), "::1", port)):
            self.assertNotEqual(proof, reticle._daemon_proof(wrong[0], wrong[1], wrong[2], challenge))
        self.assertNotEqual(proof, json.loads((await self.fetch("/server-records?challenge=" + "1" * 32)).body)["proof"])
        for bad in ("", "?challenge=", "?challenge=XYZ", "?challenge=" + "a" * 31, "?challenge=" + "a" * 129):
            body = self.assert_refusal(await self.fetch("/server-records" + bad), 400, "bad request")
            self.assertIn("32 to 128 lower-case hex", body["detail"])
        for headers in ({"Origin": "http://evil.com"}, {"Sec-Fetch-Site": "cross-site"}, {"Host": "evil.com"}):
            self.assert_refusal(await self.fetch("/server-records?challenge=" + challenge, "GET", None, headers), 403)


class TokenTierTest(ReticleTestCase):
    """DESIGN section 5, token tier (the daemon bound beyond loopback)."""

    hub_kwargs = {"token": TOKEN, "host": "0.0.0.0"}

    @gen_test
    async def test_bearer_token_passes_with_a_foreign_host(self):
        for path, method in AuthorizationTest.ROUTES[:3]:
            resp = await self.fetch(path, method, headers={"Host": "lan-box:4400",
                                                           "Authorization": "Bearer " + TOKEN})
            self.assertEqual(resp.code, 200, path)
        resp = await self.fetch("/mcp", "POST", rpc("ping"), headers={
            "Host": "192.168.1.20:4400", "Origin": "http://192.168.1.20:4400", "Authorization": "Bearer " + TOKEN})
        self.assertEqual(resp.code, 200)

    @gen_test
    async def test_query_token_passes_with_a_foreign_host(self):
        resp = await self.fetch("/status?token=" + TOKEN, headers={"Host": "evil.com"})
        self.assertEqual(resp.code, 200)
        resp = await self.fetch("/mcp?token=" + TOKEN, "POST", rpc("ping", 2), headers={"Host": "evil.com"})
        self.assertEqual(json.loads(resp.body)["id"], 2)

    @gen_test
    async def test_sse_with_query_token(self):
        s = await self.stream("/mcp/sse?token=" + TOKEN)
        self.assertEqual(s.response.code, 200)
        self.assertEqual((await s.frame())["event"], "endpoint")
        await self.close_streams()

    @gen_test
    async def test_wrong_token_is_403(self):
        for headers, path in (({"Authorization": "Bearer wrong"}, "/status"),
                              ({"Authorization": "Bearer " + TOKEN[:-1]}, "/status"),
                              ({"Authorization": "Bearer " + TOKEN + "x"}, "/status"),
                              ({"Authorization": "Basic " + TOKEN}, "/status?token=nope"),
                              ({}, "/status?token=" + TOKEN.upper()),
                              ({}, "/status")):
            resp = await self.fetch(path, headers=dict(headers, Host="evil.com"))
            self.assert_refusal(resp, 403, "forbidden")
        body = self.assert_refusal(await self.fetch("/status?token=nope", headers={"Host": "evil.com"}), 403)
        self.assertIn("wrong", body["detail"])
        self.assertNotIn(TOKEN, body["detail"])
        await self.assert_still_serving()

    @gen_test
    async def test_stop_needs_the_token_even_from_loopback(self):
        resp = await self.fetch("/stop", "POST", {})
        body = self.assert_refusal(resp, 403, "forbidden")
        self.assertIn("stopping the daemon needs the pairing token", body["detail"])
        await self.assert_still_serving()


class LimitsTest(ReticleTestCase):
    """403/408/413/429 as JSON {error, detail}; the server keeps serving after each."""

    def request_head(self, method, path, extra):
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1:%d" % self.get_http_port(),
                 "Content-Type: application/json", "Connection: close"] + extra
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    @gen_test
    async def test_413_by_content_length(self):
        for path in ("/mcp", "/mcp/message?sessionId=x", "/"):
            head = self.request_head("POST", path, ["Content-Length: %d" % (reticle.MAX_BODY_BYTES + 1)])
            resp = await self.raw(head)
            self.assertEqual(resp.code, 413, resp.body)
            self.assertEqual(resp.json()["error"], "payload too large")
        await self.assert_still_serving()

    @gen_test
    async def test_exactly_the_limit_is_accepted(self):
        body = json.dumps(rpc("ping", 1, {"pad": ""}))
        body = body.replace('"pad": ""', '"pad": "%s"' % ("x" * (reticle.MAX_BODY_BYTES - len(body))))
        self.assertEqual(len(body), reticle.MAX_BODY_BYTES)
        resp = await self.fetch("/mcp", "POST", body, {"Content-Type": "application/json"})
        self.assertEqual(resp.code, 200)

    @gen_test
    async def test_413_by_a_chunked_body(self):
        conn = await RawConnection(self.get_http_port()).open()
        try:
            await conn.send(self.request_head("POST", "/mcp", ["Transfer-Encoding: chunked"]))
            chunk = b"x" * (1 << 20)
            for _ in range(5):
                await conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await conn.send(b"0\r\n\r\n")
            resp = RawResponse(await conn.read_to_eof())
        finally:
            await conn.close()
        self.assertEqual(resp.code, 413, resp.body[:300])
        self.assertEqual(resp.json()["error"], "payload too large")
        await self.assert_still_serving()

    @gen_test
    async def test_408_for_a_slow_body(self):
        self._saved_timeout = reticle.BODY_TIMEOUT_S
        reticle.BODY_TIMEOUT_S = 0.3
        conn = await RawConnection(self.get_http_port()).open()
        try:
            body = json.dumps(rpc("ping")).encode()
            await conn.send(self.request_head("POST", "/mcp", ["Content-Length: %d" % len(body)]))
            await conn.send(body[:5])
            resp = RawResponse(await conn.read_to_eof(timeout=5.0))
        finally:
            reticle.BODY_TIMEOUT_S = self._saved_timeout
            await conn.close()
        self.assertEqual(resp.code, 408, resp.body)
        body = resp.json()
        self.assertEqual(body["error"], "request timeout")
        await self.assert_still_serving()

    @gen_test
    async def test_a_body_that_arrives_in_time_is_answered(self):
        conn = await RawConnection(self.get_http_port()).open()
        try:
            body = json.dumps(rpc("ping", 6)).encode()
            await conn.send(self.request_head("POST", "/mcp", ["Content-Length: %d" % len(body)]))
            for i in range(0, len(body), 8):
                await conn.send(body[i:i + 8])
                await asyncio.sleep(0.01)
            resp = RawResponse(await conn.read_to_eof())
        finally:
            await conn.close()
        self.assertEqual(resp.code, 200)
        self.assertEqual(resp.json()["id"], 6)

    @gen_test
    async def test_bad_content_length_is_400(self):
        resp = await self.raw(self.request_head("POST", "/mcp", ["Content-Length: -5"]))
        self.assertEqual(resp.code, 400)
        self.assertEqual(resp.json()["error"], "bad request")
        self.assertIn("Content-Length '-5'", resp.json()["detail"])
        await self.assert_still_serving()


class RateLimitTest(ReticleTestCase):
    hub_kwargs = {"rate": (1, 2)}

    @gen_test
    async def test_429_with_retry_after_then_serves_again(self):
        codes = [(await self.ka_fetch("/status")).code for _ in range(2)]
        self.assertEqual(codes, [200, 200])
        resp = await self.ka_fetch("/status")
        self.assertEqual(resp.code, 429)
        body = json.loads(resp.body)
        self.assertEqual(body["error"], "rate limited")
        self.assertIn("retry", body["detail"])
        retry_after = int(resp.headers["retry-after"])
        self.assertGreaterEqual(retry_after, 1)
        # another client (a connection of its own, no session) is not held up by this one's flood
        await self.assert_still_serving()
        await self.close_streams()
        await asyncio.sleep(retry_after + 0.05)
        await self.assert_still_serving()

    @gen_test
    async def test_limits_are_per_session_key(self):
        for _ in range(3):
            await self.fetch("/status")
        sid = reticle.Hub(state_dir=self.state_dir).signer.mint()
        resp = await self.fetch("/mcp", "POST", rpc("ping"), {"Mcp-Session-Id": sid})
        self.assertEqual(resp.code, 200)


def strict_json(data):
    """json.loads that refuses NaN and Infinity, as JSON parsers and the MCP SDK do."""
    def refuse(name):
        raise ValueError("%s is not JSON" % name)
    return json.loads(data, parse_constant=refuse)


class _Errors(logging.Handler):
    """Every record at ERROR or above on reticle's, tornado's and asyncio's loggers."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []
        self.loggers = [logging.getLogger(n) for n in ("reticle", "tornado", "asyncio")]

    def emit(self, record):
        self.records.append(record)

    def __enter__(self):
        for logger in self.loggers:
            logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        for logger in self.loggers:
            logger.removeHandler(self)


class HardeningTest(ReticleTestCase):
    """Issue 13: the hostile-client probes, each a regression test."""

    hub_kwargs = {"token": TOKEN}

    async def post_raw(self, path, body, headers=None):
        return await self.fetch(path, "POST", body, dict(headers or {}, **{"Content-Type": "application/json"}))

    # -- issue 19 #3: bodies a page can send without a CORS preflight ------------------------
    @gen_test(timeout=30)
    async def test_every_post_route_accepts_only_application_json_bodies(self):
        body = json.dumps(INITIALIZE)
        for path in ("/mcp", "/", "/mcp/message?sessionId=x", "/stop"):
            for declared in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                             "multipart/form-data; boundary=x", "application/jsonx", None):
                headers = {"Content-Type": declared} if declared else {}
                resp = await self.http_client.fetch(
                    self.get_url(path), method="POST", body=body, headers=headers,
                    raise_error=False) if declared else await self._post_typeless(path, body)
                self.assertEqual(resp.code, 415, (path, declared, resp.body))
                self.assertIn(b"application/json", resp.body)
        ok = await self.fetch("/mcp", "POST", body, {"Content-Type": "Application/JSON; charset=utf-8"})
        self.assertEqual(ok.code, 200)

    async def _post_typeless(self, path, body):
        """A POST with a body and no Content-Type at all (what fetch() sends for a typeless Blob)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.get_http_port())
        data = body.encode()
        writer.write(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                     % (path.encode(), self.get_http_port(), len(data)) + data)
        raw = await reader.read()
        writer.close()
        head, _, rest = raw.partition(b"\r\n\r\n")

        class Resp:
            code = int(head.split()[1])
            body = rest
        return Resp

    # -- issue 19 #6: held-open streams are capped ------------------------------------------------
    @gen_test(timeout=60)
    async def test_streams_beyond_the_cap_are_503_and_the_daemon_keeps_serving(self):
        for _ in range(reticle.MAX_SSE_STREAMS):
            s = await self.stream("/mcp/sse")
            self.assertEqual(s.response.code, 200)
        refused = await self.stream("/mcp/sse")
        self.assertEqual(refused.response.code, 503)
        self.assertEqual(refused.response.headers.get("retry-after"), "5")
        status = await self.fetch("/status")
        self.assertEqual(status.code, 200)
        await self.close_streams()
        self.assertTrue(await self.until(lambda: not self.hub.sse_streams, 5.0))
        again = await self.stream("/mcp/sse")
        self.assertEqual(again.response.code, 200)
        await self.close_streams()

    # -- 1. amplification --------------------------------------------------------------
    @gen_test(timeout=30)
    async def test_a_batch_over_the_limit_is_one_32600_and_runs_nothing(self):
        batch = [rpc("tools/list", i) for i in range(reticle.MAX_BATCH + 1)]
        resp = await self.fetch("/mcp", "POST", batch)
        self.assertEqual(resp.code, 200)
        reply = strict_json(resp.body)
        self.assertIsInstance(reply, dict)
        self.assertEqual(reply["error"]["code"], -32600)
        self.assertIn(str(reticle.MAX_BATCH), reply["error"]["message"])
        resp = await self.fetch("/mcp", "POST", batch[:reticle.MAX_BATCH])
        self.assertEqual(len(strict_json(resp.body)), reticle.MAX_BATCH)

    @gen_test(timeout=60)
    async def test_a_4mb_batch_of_80000_requests_is_refused_small_and_fast(self):
        body = "[" + ",".join('{"jsonrpc":"2.0","id":%d,"method":"tools/list"}' % i for i in range(80000)) + "]"
        self.assertLess(len(body), reticle.MAX_BODY_BYTES)
        hub = self.hub
        hub.limiter = reticle._RateLimiter(1e9, 1e9)  # the batch limit alone must hold
        started = asyncio.get_running_loop().time()
        resp, status = await asyncio.gather(self.post_raw("/mcp", body), self.fetch("/status"))
        self.assertLess(asyncio.get_running_loop().time() - started, 5.0)
        self.assertEqual(status.code, 200)
        self.assertLess(len(resp.body), 1000)
        self.assertEqual(strict_json(resp.body)["error"]["code"], -32600)

    @gen_test
    async def test_a_batch_reply_over_the_byte_limit_is_32600_for_the_rest(self):
        one = len((await self.fetch("/mcp", "POST", rpc("tools/list"))).body)
        limit = reticle.MAX_BATCH_REPLY_BYTES
        reticle.MAX_BATCH_REPLY_BYTES = int(one * 2.5)
        try:
            resp = await self.fetch("/mcp", "POST", [rpc("tools/list", i) for i in range(5)])
        finally:
            reticle.MAX_BATCH_REPLY_BYTES = limit
        replies = strict_json(resp.body)
        self.assertEqual([("result" in r) for r in replies], [True, True, False, False, False])
        self.assertEqual({r["error"]["code"] for r in replies[2:]}, {-32600})
        self.assertEqual([r["id"] for r in replies], [0, 1, 2, 3, 4])

    @gen_test
    async def test_the_rate_limiter_counts_each_message_of_a_batch(self):
        self.hub.limiter = reticle._RateLimiter(1, 20)
        sid = self.hub.signer.mint()  # one client: its session
        resp = await self.fetch("/mcp", "POST", [rpc("ping", i) for i in range(20)], {"Mcp-Session-Id": sid})
        self.assertEqual(len(strict_json(resp.body)), 20)
        self.assert_refusal(await self.fetch("/mcp", "POST", rpc("ping"), {"Mcp-Session-Id": sid}), 429,
                            "rate limited")
        self.assert_refusal(await self.fetch("/mcp", "POST", [rpc("ping", i) for i in range(5)],
                                             {"Mcp-Session-Id": sid}), 429)

    # -- 3, 4, 5. input no parser should choke on -------------------------------------------
    HOSTILE = {
        "deep arrays": "[" * 100000,
        "deep objects": '{"a":' * 100000,
        "valid but too deep": "[" * (reticle.MAX_JSON_DEPTH + 1) + "]" * (reticle.MAX_JSON_DEPTH + 1),
        "lone surrogate": '{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
        "lone surrogate in params": '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\\udc00":1}}',
        "id 1e999": '{"jsonrpc":"2.0","id":1e999,"method":"ping"}',
        "id NaN": '{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
        "id -Infinity": '{"jsonrpc":"2.0","id":-Infinity,"method":"ping"}',
    }

    @gen_test(timeout=30)
    async def test_hostile_json_is_a_parse_error_on_streamable_http(self):
        with _Errors() as errors:
            for name, body in self.HOSTILE.items():
                resp = await self.post_raw("/mcp", body)
                self.assertEqual(resp.code, 200, (name, resp.body[:300]))
                reply = strict_json(resp.body)
                self.assertEqual(reply["error"]["code"], -32700, name)
                self.assertIsNone(reply["id"])
        self.assertEqual(errors.records, [])
        await self.assert_still_serving()

    @gen_test(timeout=30)
    async def test_hostile_json_is_a_parse_error_on_http_sse(self):
        s, endpoint = await self.sse_session()
        with _Errors() as errors:
            for name, body in self.HOSTILE.items():
                resp = await self.post_raw(endpoint, body)
                self.assert_refusal(resp, 400, "invalid JSON")
                reply = await s.message()
                self.assertEqual(reply["error"]["code"], -32700, name)
            # The session still works after all of it.
            self.assertEqual((await self.fetch(endpoint, "POST", rpc("ping", "after"))).code, 202)
            self.assertEqual((await s.message())["id"], "after")
        self.assertEqual(errors.records, [])
        await self.close_streams()

    @gen_test
    async def test_a_valid_surrogate_pair_still_works(self):
        resp = await self.post_raw("/mcp", '{"jsonrpc":"2.0","id":"\\ud83d\\ude00","method":"ping"}')
        self.assertEqual(strict_json(resp.body), {"jsonrpc": "2.0", "id": "\U0001F600", "result": {}})

    # -- 6. every method through the guard and the limiter -------------------------------
    @gen_test
    async def test_other_methods_meet_the_guard_then_405_with_allow(self):
        with _Errors() as errors:
            for path, allow in (("/status", "GET"), ("/mcp", "GET, POST, DELETE"), ("/", "GET, POST"),
                                ("/mcp/message", "POST"), ("/stop", "POST")):
                for method in ("TRACE", "PATCH", "PUT", "FOO"):
                    self.assert_refusal(await self.fetch(path, method, headers={"Host": "evil.com"}), 403)
                    resp = await self.fetch(path, method)
                    self.assert_refusal(resp, 405, "method not allowed")
                    self.assertEqual(resp.headers["Allow"], allow, (path, method))
            resp = await self.fetch("/", "DELETE")
            self.assertEqual((resp.code, resp.headers["Allow"]), (405, "GET, POST"))
            self.assert_refusal(await self.fetch("/nowhere", "TRACE"), 404, "not found")
        self.assertEqual(errors.records, [])

    @gen_test
    async def test_other_methods_are_rate_limited(self):
        self.hub.limiter = reticle._RateLimiter(1, 2)
        sid = self.hub.signer.mint()  # a 405 closes the connection: the key that persists is a session's
        codes = [(await self.fetch("/status", "TRACE", headers={"Mcp-Session-Id": sid})).code for _ in range(3)]
        self.assertEqual(codes, [405, 405, 429])

    # -- refusals say Connection: close -------------------------------------------------------
    @gen_test
    async def test_refusals_before_the_body_say_connection_close(self):
        self.hub.limiter = reticle._RateLimiter(0.01, 1)
        for host, code in (("evil.com", 403), ("127.0.0.1", 429)):
            conn = await RawConnection(self.get_http_port()).open()
            try:
                if code == 429:  # the one request of this connection's bucket
                    await conn.send(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    self.assertEqual(RawResponse(await conn.read_until(b"\r\n\r\n")).code, 200)
                    conn.buffer = b""
                # A keep-alive request: only the server's refusal may end the connection.
                await conn.send(("GET /status HTTP/1.1\r\nHost: %s\r\n\r\n" % host).encode())
                resp = RawResponse(await conn.read_to_eof(3))  # returns at EOF: the server closed it
            finally:
                await conn.close()
            self.assertEqual(resp.code, code)
            self.assertEqual(resp.headers.get("connection"), "close", resp.headers)

    # -- 7. a dropped stream cancels its call ----------------------------------------------------
    async def silent_tab(self):
        """A bridge socket that says hello and never answers a command."""
        import tornado.websocket
        conn = await tornado.websocket.websocket_connect(tornado.httpclient.HTTPRequest(
            "ws://127.0.0.1:%d/reticle" % self.get_http_port(), headers={"Origin": "http://localhost:5173"}))
        await conn.write_message(json.dumps({"kind": "hello", "protocolVersion": 1, "sessionId": "s-silent",
                                             "url": "http://localhost:5173/", "title": "t", "adapters": []}))
        for _ in range(200):
            if "s-silent" in self.hub.bridge.sessions:
                break
            await asyncio.sleep(0.01)
        return conn, self.hub.bridge.sessions["s-silent"]

    async def until(self, predicate, timeout=3.0):
        for _ in range(int(timeout / 0.02)):
            if predicate():
                return True
            await asyncio.sleep(0.02)
        return predicate()

    @gen_test(timeout=30)
    async def test_a_dropped_sse_stream_cancels_its_call(self):
        tab, session = await self.silent_tab()
        try:
            with _Errors() as errors:
                s, endpoint = await self.sse_session()
                call = rpc("tools/call", 9, {"name": "reticle_snapshot", "arguments": {}})
                self.assertEqual((await self.fetch(endpoint, "POST", call)).code, 202)
                self.assertTrue(await self.until(lambda: session.pending))
                await s.close()
                # The command would time out after COMMAND_TIMEOUT_S; cancelled, it is gone at once.
                self.assertTrue(await self.until(lambda: not session.pending and not self.hub.tasks, 2.0))
            self.assertEqual(errors.records, [])
        finally:
            tab.close()

    @gen_test(timeout=30)
    async def test_a_dropped_streamable_post_cancels_its_call(self):
        tab, session = await self.silent_tab()
        try:
            body = json.dumps(rpc("tools/call", 9, {"name": "reticle_snapshot", "arguments": {}}))
            conn = await RawConnection(self.get_http_port()).open()
            await conn.send(("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
            self.assertTrue(await self.until(lambda: session.pending))
            await conn.close()
            self.assertTrue(await self.until(lambda: not session.pending, 2.0))
        finally:
            tab.close()

    # -- 8, 10. protocol details -----------------------------------------------------------------
    @gen_test
    async def test_resources_read_with_an_object_uri_is_32602(self):
        resp = await self.fetch("/mcp", "POST", rpc("resources/read", 1, {"uri": {"a": 1}}))
        self.assertEqual(strict_json(resp.body)["error"]["code"], -32602)

    @gen_test
    async def test_a_null_id_is_invalid_request(self):
        reply = strict_json((await self.fetch("/mcp", "POST", rpc("tools/list", None))).body)
        self.assertEqual(reply["error"]["code"], -32600)
        self.assertNotIn("result", reply)

    @gen_test
    async def test_the_bearer_scheme_is_case_insensitive(self):
        for scheme in ("bearer", "BEARER", "Bearer"):
            resp = await self.fetch("/status", headers={"Host": "evil.com", "Authorization": scheme + " " + TOKEN})
            self.assertEqual(resp.code, 200, scheme)

    @gen_test
    async def test_wrong_token_guesses_are_limited_per_peer(self):
        burst = int(reticle.AUTH_FAIL_RATE[1])
        codes = [(await self.fetch("/status?token=guess%d" % i, headers={"Host": "evil.com"})).code
                 for i in range(burst + 1)]
        self.assertEqual(codes, [403] * burst + [429])
        resp = await self.fetch("/status", headers={"Host": "evil.com", "Authorization": "Bearer " + TOKEN})
        body = self.assert_refusal(resp, 429, "too many wrong tokens")  # even the right one, while over
        self.assertGreaterEqual(int(resp.headers["Retry-After"]), 1)
        self.assertNotIn(TOKEN, body["detail"])
        # A loopback client that presents no token is not locked out by someone else's guesses.
        await self.assert_still_serving()

    @gen_test
    async def test_a_pages_wrong_guesses_do_not_lock_out_the_right_token(self):
        """Issue 19 #15: every local browser is 127.0.0.1; a hostile page's wrong guesses lock out
        that page only."""
        burst = int(reticle.AUTH_FAIL_RATE[1])
        for origin in ("http://evil.test", None):
            headers = {"Origin": origin} if origin else {"Sec-Fetch-Site": "cross-site"}
            codes = [(await self.fetch("/status?token=guess%d" % i, headers=headers)).code for i in range(burst + 1)]
            self.assertEqual(codes[-1], 429, (origin, codes))
        resp = await self.fetch("/status", headers={"Host": "evil.com", "Authorization": "Bearer " + TOKEN})
        self.assertEqual(resp.code, 200, resp.body)  # a client (no Origin, no Sec-Fetch-Site) with the token
        resp = await self.fetch("/status?token=" + TOKEN, headers={"Origin": "http://evil.test"})
        self.assertEqual(resp.code, 429)  # the page that guessed stays locked out

    @gen_test
    async def test_a_30_day_old_session_id_is_unknown(self):
        import time
        signer = self.hub.signer
        for age, code in ((reticle.SESSION_MAX_AGE_S + 60, 404), (time.time(), 404),
                          (reticle.SESSION_MAX_AGE_S - 3600, 200)):
            sid = signer.mint(now=time.time() - age)
            resp = await self.fetch("/mcp", "POST", rpc("ping"), {"Mcp-Session-Id": sid})
            self.assertEqual(resp.code, code, age)
            if code == 404:
                self.assertEqual(json.loads(resp.body)["error"], "MCP_SESSION_UNKNOWN")
