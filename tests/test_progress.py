"""Progress notifications and cancellation over the three MCP transports, with real clients (the `mcp`
SDK's Streamable HTTP, HTTP+SSE and stdio clients), a real daemon and a real tab in headless Chromium.

A call that carries _meta.progressToken and waits hears notifications/progress at least once a second,
each saying what it waits for; notifications/cancelled stops the wait and the call is not answered."""

import asyncio
import json
import time
import urllib.request

import anyio
import pytest

from _harness import Live
from _harness import chromium_path
from _harness import mcp_session
from _harness import wait_until

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed")

PAGE = """<!doctype html><title>progress</title><script src="%(daemon)s/reticle.js"></script>
<p id="out">here</p>"""
NEVER = {"kind": "text", "contains": "never-on-this-page"}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    world = Live(tmp_path_factory.mktemp("progress"), PAGE)
    try:
        yield world
    finally:
        world.close()


def client(transport, live):
    """An initialized mcp ClientSession over `transport` to the live daemon."""
    daemon = live.daemon
    return mcp_session(transport, daemon.url, daemon.port, daemon.state_dir)


def cancellations(live):
    return [json.loads(ln) for ln in live.daemon.log().splitlines()
            if '"event":"mcp_call_cancelled"' in ln and "notifications/cancelled" in ln]


@pytest.mark.parametrize("transport", ["streamable-http", "sse", "stdio"])
def test_a_wait_of_2_5_s_reports_progress_at_least_once_a_second(live, transport):
    heard = []

    async def on_progress(progress, total, message):
        heard.append((time.monotonic(), progress, message))

    async def run():
        async with client(transport, live) as session:
            started = time.monotonic()
            result = await session.call_tool("reticle_wait_for", {"predicate": NEVER, "timeout_ms": 2500},
                                             progress_callback=on_progress)
            return started, time.monotonic(), result

    started, ended, result = asyncio.run(run())
    assert not result.is_error and result.structured_content["pass"] is False
    assert result.structured_content["timedOut"] is True
    assert ended - started >= 2.4
    times = [started] + [t for t, _, _ in heard]
    assert len(heard) >= 3, heard
    assert max(b - a for a, b in zip(times, times[1:])) <= 1.0, times
    assert ended - times[-1] <= 1.0
    progress = [p for _, p, _ in heard]
    assert progress == sorted(set(progress)), "progress must grow with every notification: %r" % progress
    for _, _, message in heard:
        assert message.startswith("waiting for") and "never-on-this-page" in message, message


@pytest.mark.parametrize("transport", ["streamable-http", "sse", "stdio"])
def test_a_call_that_asks_for_no_progress_hears_none_and_answers_as_before(live, transport):
    async def run():
        async with client(transport, live) as session:
            return await session.call_tool("reticle_wait_for", {"predicate": {"kind": "text", "contains": "here"},
                                                                "timeout_ms": 1000})

    result = asyncio.run(run())
    assert not result.is_error and result.structured_content["pass"] is True


@pytest.mark.parametrize("transport", ["streamable-http", "sse", "stdio"])
def test_a_cancelled_wait_stops_and_the_daemon_serves_on(live, transport):
    """The SDK cancels a call it stops waiting for with notifications/cancelled (through the stdio proxy
    too); the daemon stops that wait at once instead of running it for its 20 s."""
    before = len(cancellations(live))

    async def run():
        async with client(transport, live) as session:
            with anyio.move_on_after(1.0):
                await session.call_tool("reticle_wait_for", {"predicate": NEVER, "timeout_ms": 20000})
            started = time.monotonic()
            after = await session.call_tool("reticle_sessions", {})
            return time.monotonic() - started, after

    took, after = asyncio.run(run())
    assert not after.is_error and after.structured_content["sessions"]
    assert took < 2.0
    got = wait_until(lambda: len(cancellations(live)) > before, 5, what="the daemon to cancel the wait")
    assert got


def test_notifications_cancelled_over_raw_http_sse_stops_the_wait_and_nothing_answers_it(live):
    """HTTP+SSE without an SDK: the POST answers 202, the call's reply would come on the stream; a
    notifications/cancelled for its id means no reply comes, and the next call answers at once."""
    daemon = live.daemon
    frames = []

    async def run():
        import tornado.httpclient
        got_endpoint = asyncio.Event()
        buffer = [b""]

        def on_chunk(chunk):
            buffer[0] += chunk
            while b"\n\n" in buffer[0]:
                frame, buffer[0] = buffer[0].split(b"\n\n", 1)
                frames.append(frame.decode())
                if frame.startswith(b"event: endpoint"):
                    got_endpoint.set()

        http = tornado.httpclient.AsyncHTTPClient(force_instance=True)
        stream = asyncio.ensure_future(http.fetch(daemon.url + "/mcp/sse", streaming_callback=on_chunk,
                                                  request_timeout=30, raise_error=False))
        await asyncio.wait_for(got_endpoint.wait(), 5)
        endpoint = daemon.url + [f for f in frames if f.startswith("event: endpoint")][0].split("data: ", 1)[1]

        async def post(message):
            resp = await http.fetch(endpoint, method="POST", body=json.dumps(message),
                                    headers={"Content-Type": "application/json"}, raise_error=False)
            assert resp.code == 202, resp.code

        await post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "raw", "version": "0"}}})
        await post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await post({"jsonrpc": "2.0", "id": "long", "method": "tools/call",
                    "params": {"name": "reticle_wait_for", "arguments": {"predicate": NEVER, "timeout_ms": 4000},
                               "_meta": {"progressToken": "tok"}}})
        await asyncio.sleep(1.2)
        await post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}})
        await post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "reticle_sessions", "arguments": {}}})
        await asyncio.sleep(4.0)  # past the cancelled wait's own end
        stream.cancel()
        http.close()

    asyncio.run(run())
    messages = [json.loads(f.split("data: ", 1)[1]) for f in frames if f.startswith("event: message")]
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert progress and all(m["params"]["progressToken"] == "tok" for m in progress)
    assert not [m for m in messages if m.get("id") == "long"], "a cancelled call is not answered"
    assert [m for m in messages if m.get("id") == 2 and m["result"]["structuredContent"]["sessions"]]
    with urllib.request.urlopen(daemon.url + "/status", timeout=5) as resp:
        assert json.loads(resp.read())["running"] is True


@pytest.mark.parametrize("tool,args", [
    ("reticle_act_and_wait", {"target": {"text": "here"}, "action": "hover", "until": NEVER, "timeout_ms": 1500}),
    ("reticle_assert", {"predicate": NEVER, "timeout_ms": 1500}),
])
def test_the_verdict_tools_say_what_they_wait_for(live, tool, args):
    heard = []

    async def on_progress(progress, total, message):
        heard.append(message)

    async def run():
        async with client("streamable-http", live) as session:
            return await session.call_tool(tool, args, progress_callback=on_progress)

    result = asyncio.run(run())
    assert not result.is_error and result.structured_content["verified"] in ("no", "unknown")
    assert len(heard) >= 2 and all("never-on-this-page" in m for m in heard[-2:]), heard
