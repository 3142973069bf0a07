"""Real MCP clients (the `mcp` SDK) and curl against a real daemon subprocess."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request

import mcp
import pytest
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from _harness import RETICLE_PY
from _harness import daemon_env
from _harness import free_port
from _harness import get_status
from _harness import mcp_session
from _harness import port_listens
from _harness import wait_until

import reticle  # noqa: E402

LISTED_TOOLS = len(reticle._build_registry().names())

CURL = "/usr/bin/curl"
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


async def exercise(read, write):
    """initialize, list the tools, read a resource, call reticle_sessions; returns what it saw."""
    seen = {}
    async with mcp.ClientSession(read, write) as session:
        init = await session.initialize()
        seen["version"] = init.protocol_version
        seen["server"] = init.server_info.name
        seen["instructions"] = init.instructions
        seen["tools"] = [t.name for t in (await session.list_tools()).tools]
        resource = await session.read_resource("reticle://docs/cheatsheet")
        seen["cheatsheet"] = resource.contents[0].text
        live = await session.read_resource("reticle://sessions")
        seen["live"] = json.loads(live.contents[0].text)
        result = await session.call_tool("reticle_sessions", {})
        seen["is_error"] = result.is_error
        seen["sessions"] = result.structured_content
        with pytest.raises(MCPError) as bad:
            await session.call_tool("reticle_inspect", {"ref": 5})
        seen["bad_code"] = bad.value.error.code
        seen["bad_message"] = str(bad.value)
        no_browser = await session.call_tool("reticle_snapshot", {})
        seen["no_browser"] = no_browser.is_error, no_browser.structured_content
    return seen


def check(seen):
    assert seen["version"] in VERSIONS
    assert seen["server"] == "reticle"
    assert "unknown" in seen["instructions"]
    assert len(seen["tools"]) == LISTED_TOOLS
    assert "reticle_sessions" in seen["tools"]
    assert seen["cheatsheet"].startswith("# Reticle cheat sheet")
    assert seen["live"]["sessions"] == []
    assert seen["is_error"] is False
    assert seen["sessions"]["sessions"] == []
    assert "no browser session is connected" in seen["sessions"]["why"]
    assert seen["sessions"]["next_action"]["action"] == "open_app"
    assert seen["bad_code"] == -32602
    assert "/ref" in seen["bad_message"]
    no_browser, body = seen["no_browser"]
    assert no_browser is True
    assert "no browser session is connected" in body["error"]


def stdio_params(port, state_dir):
    return StdioServerParameters(command=sys.executable, args=[RETICLE_PY, "mcp", "--port", str(port)],
                                 env=daemon_env(state_dir))


def test_sse_client(module_daemon):
    async def run():
        async with sse_client(module_daemon.url + "/mcp/sse") as (read, write):
            return await exercise(read, write)

    check(asyncio.run(run()))


def test_streamable_http_client(module_daemon):
    async def run():
        async with streamable_http_client(module_daemon.url + "/mcp") as streams:
            return await exercise(streams[0], streams[1])

    check(asyncio.run(run()))


def test_streamable_http_client_at_the_root(module_daemon):
    async def run():
        async with streamable_http_client(module_daemon.url + "/") as streams:
            return await exercise(streams[0], streams[1])

    check(asyncio.run(run()))


def test_stdio_client(module_daemon):
    async def run():
        async with stdio_client(stdio_params(module_daemon.port, module_daemon.state_dir)) as (read, write):
            return await exercise(read, write)

    check(asyncio.run(run()))
    assert get_status(module_daemon.port)["running"] is True


def test_curl_walk_through(module_daemon):
    """The seed's own walk-through: curl -N the stream, curl -X POST tools/list, 202, list on the stream."""
    stream = subprocess.Popen([CURL, "-sS", "-N", module_daemon.url + "/mcp/sse"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert stream.stdout.readline() == b"event: endpoint\n"
        data = stream.stdout.readline().decode()
        assert data.startswith("data: /mcp/message?sessionId=")
        endpoint = data[len("data: "):].strip()
        assert stream.stdout.readline() == b"\n"
        post = subprocess.run(
            [CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", module_daemon.url + endpoint,
             "-H", "Content-Type: application/json", "-d", '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'],
            capture_output=True, timeout=10)
        assert post.stdout == b"202"
        assert stream.stdout.readline() == b"event: message\n"
        line = stream.stdout.readline().decode()
        assert line.startswith("data: ")
        reply = json.loads(line[len("data: "):])
        assert reply["id"] == 1
        assert len(reply["result"]["tools"]) == LISTED_TOOLS
    finally:
        stream.terminate()
        stream.wait(5)
        stream.stdout.close()


def test_stdout_carries_json_rpc_only(module_daemon):
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "ping"},
             {"jsonrpc": "2.0", "id": 3, "method": "server/discover"},
             {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "reticle_sessions"}}]
    stdin = "".join(json.dumps(m) + "\n" for m in lines) + "not json\n"
    proc = subprocess.run([sys.executable, RETICLE_PY, "mcp", "--port", str(module_daemon.port)],
                          input=stdin.encode(), capture_output=True, timeout=30,
                          env=daemon_env(module_daemon.state_dir))
    assert proc.returncode == 0
    replies = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    by_id = {r["id"]: r for r in replies}
    assert set(by_id) == {1, 2, 3, 4, None}
    assert by_id[1]["result"]["protocolVersion"] == "2024-11-05"
    assert by_id[2]["result"] == {}
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[4]["result"]["structuredContent"]["sessions"] == []
    assert by_id[None]["error"]["code"] == -32700


@pytest.fixture
def spawned_daemon_port(tmp_path):
    """A free port and a state dir; any daemon that appears there is stopped at teardown."""
    port = free_port()
    state = tmp_path / "state"
    yield port, state
    if port_listens(port):
        subprocess.run([sys.executable, RETICLE_PY, "stop", "--port", str(port)], env=daemon_env(state),
                       capture_output=True, timeout=20)
    record = state / ("daemon-%d.json" % port)
    if record.exists():
        pid = json.loads(record.read_text())["pid"]
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    wait_until(lambda: not port_listens(port), 10, what="port %d to close" % port)


def test_stdio_lists_tools_with_no_daemon_and_the_first_call_starts_one(spawned_daemon_port):
    port, state = spawned_daemon_port
    assert not port_listens(port)

    async def run():
        async with mcp_session("stdio", port=port, state_dir=state) as session:
            tools = (await session.list_tools()).tools
            resources = (await session.list_resources()).resources
            usage = (await session.read_resource("reticle://docs/usage")).contents[0].text
            await session.send_ping()
            listening_before_call = port_listens(port)
            result = await session.call_tool("reticle_sessions", {})
            status = get_status(port)
            again = await session.call_tool("reticle_sessions", {})
            return tools, resources, usage, listening_before_call, result, status, again

    tools, resources, usage, listening_before_call, result, status, again = asyncio.run(run())
    assert len(tools) == LISTED_TOOLS
    assert len(resources) == 4
    assert "reticle_act_and_wait" in usage
    assert listening_before_call is False
    assert result.is_error is False
    assert result.structured_content["sessions"] == []
    assert again.is_error is False
    assert status["running"] is True
    assert status["port"] == port
    assert (state / ("daemon-%d.json" % port)).exists()
    # the daemon outlives the stdio proxy that started it
    assert get_status(port)["running"] is True


def test_stdio_restarts_a_daemon_that_died(spawned_daemon_port):
    port, state = spawned_daemon_port

    async def run():
        async with mcp_session("stdio", port=port, state_dir=state) as session:
            first = await session.call_tool("reticle_sessions", {})
            pid = get_status(port)["pid"]
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda: not port_listens(port), 10, what="the killed daemon's port to close")
            second = await session.call_tool("reticle_sessions", {})
            third = await session.call_tool("reticle_sessions", {})
            return first, pid, second, third

    first, pid, second, third = asyncio.run(run())
    assert first.is_error is False
    # issue 2: "restarts it on the next call if it died"; a refused connection sent nothing,
    # so the very next call can start a daemon and be answered
    assert second.is_error is False, second.structured_content
    assert third.is_error is False, third.structured_content
    status = get_status(port)
    assert status["running"] is True
    assert status["pid"] != pid


def test_status_route_with_urllib(module_daemon):
    with urllib.request.urlopen(module_daemon.url + "/status", timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        assert json.loads(resp.read())["port"] == module_daemon.port


def test_ipv6_loopback_is_served_too(module_daemon):
    import socket

    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        sock = socket.create_connection(("::1", module_daemon.port), timeout=5)
    except OSError:
        pytest.skip("::1 is not available here")
    with sock:
        sock.sendall(b"GET /status HTTP/1.0\r\nHost: [::1]:%d\r\n\r\n" % module_daemon.port)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 200")
    assert json.loads(data.partition(b"\r\n\r\n")[2])["running"] is True


def test_the_real_daemon_keeps_serving_after_refusals(module_daemon):
    url = module_daemon.url
    attempts = [
        ([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: evil.com", url + "/status"], b"403"),
        ([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Origin: null", url + "/status"], b"403"),
        ([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Mcp-Session-Id: v1.x.y",
          "-H", "Content-Type: application/json", "-d", "{}", url + "/mcp"], b"404"),
        ([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Content-Type: application/json",
          "-d", "{nope",
          url + "/mcp"], b"200"),
        # a body a page could send without a CORS preflight (a form, text/plain) is refused
        ([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-d", "{}", url + "/mcp"], b"415"),
        ([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Content-Type: application/json",
          "--data-binary", "@-", url + "/mcp"], b"413"),
        ([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", url + "/mcp"], b"405"),
        ([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Content-Type: application/json",
          "-d", "{}", url + "/mcp/message"], b"400"),
    ]
    big = b"x" * (4 * 1024 * 1024 + 1)
    for cmd, expected in attempts:
        proc = subprocess.run(cmd, input=big if "@-" in cmd else None, capture_output=True, timeout=20)
        assert proc.stdout == expected, (cmd, proc.stdout)
        assert get_status(module_daemon.port)["running"] is True


def test_stdio_with_a_stranger_on_the_port_answers_one_clear_error(tmp_path):
    import contextlib
    import socket
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen(8)
        port = stranger.getsockname()[1]

        async def run():
            async with mcp_session("stdio", port=port, state_dir=tmp_path / "state") as session:
                tools = (await session.list_tools()).tools
                result = await session.call_tool("reticle_sessions", {})
                return tools, result

        tools, result = asyncio.run(run())
    assert len(tools) == LISTED_TOOLS, "the tools are listed even though no daemon can start"
    assert result.is_error is True
    error = result.structured_content["error"]
    assert "not a Reticle daemon" in error and str(port) in error
    assert "RETICLE_PORT" in result.structured_content["recovery"]


def test_three_racing_proxies_start_exactly_one_daemon(spawned_daemon_port):
    port, state = spawned_daemon_port

    async def one():
        async with mcp_session("stdio", port=port, state_dir=state) as session:
            return await session.call_tool("reticle_sessions", {})

    async def race():
        return await asyncio.gather(one(), one(), one())

    results = asyncio.run(race())
    assert all(r.is_error is False for r in results), [r.structured_content for r in results]
    log = (state / ("daemon-%d.log" % port)).read_text()
    assert log.count('"event":"reticle_daemon_ready"') == 1, log
    assert "reticle_daemon_start_failed" not in log, "a second daemon was spawned and lost the port"
    assert not (state / ("daemon-%d.lock" % port)).exists(), "the spawn lock is released"


def test_stdio_with_an_unusable_state_dir_answers_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    port = free_port()

    async def run():
        async with mcp_session("stdio", port=port, state_dir=blocker / "state") as session:
            sessions = (await session.read_resource("reticle://sessions")).contents[0].text
            return sessions, await session.call_tool("reticle_sessions", {})

    sessions, result = asyncio.run(run())
    assert "no Reticle daemon runs" in sessions
    assert result.is_error is True
    assert "RETICLE_STATE_DIR" in result.structured_content["error"]
    assert not port_listens(port)
