"""The JSON-RPC dispatcher as pure async functions: no transport, no socket."""

import asyncio
import json

import pytest

import reticle

LISTED_TOOLS = len(reticle._build_registry().names())

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
RESOURCES = ("reticle://docs/usage", "reticle://docs/cheatsheet", "reticle://predicates",
             "reticle://sessions")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    # One hub for the module: the dispatcher keeps no per-call state.
    return reticle.Hub(state_dir=str(tmp_path_factory.mktemp("mcp") / "state"))


def ctx():
    return reticle._CallContext("test", "test")


def rpc(hub, message):
    return asyncio.run(hub.dispatcher.handle(message, ctx()))


def rpc_payload(hub, payload):
    return asyncio.run(hub.dispatcher.handle_payload(payload, ctx()))


def request(method, params=None, mid=1):
    msg = {"jsonrpc": "2.0", "id": mid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def initialize(version):
    return request("initialize", {"protocolVersion": version, "capabilities": {},
                                  "clientInfo": {"name": "pytest", "version": "1"}})


@pytest.mark.parametrize("version", VERSIONS)
def test_initialize_echoes_each_supported_version(hub, version):
    reply = rpc(hub, initialize(version))
    assert reply["id"] == 1
    result = reply["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"] == {"tools": {}, "resources": {}}
    assert result["serverInfo"]["name"] == "reticle"
    assert result["serverInfo"]["version"] == reticle.__version__
    assert "unknown" in result["instructions"]
    assert "reticle_act_and_wait" in result["instructions"]
    assert "reticle_assert" in result["instructions"]


@pytest.mark.parametrize("version", ["2099-01-01", "1.0", "", None, 7])
def test_initialize_unknown_version_answers_the_newest(hub, version):
    reply = rpc(hub, initialize(version))
    assert reply["result"]["protocolVersion"] == "2025-11-25"


def test_initialize_without_params(hub):
    reply = rpc(hub, request("initialize"))
    assert reply["result"]["protocolVersion"] == "2025-11-25"


def test_ping(hub):
    assert rpc(hub, request("ping", mid="p")) == {"jsonrpc": "2.0", "id": "p", "result": {}}


def test_tools_list(hub):
    tools = rpc(hub, request("tools/list"))["result"]["tools"]
    names = [t["name"] for t in tools]
    assert len(names) == LISTED_TOOLS
    assert len(set(names)) == LISTED_TOOLS
    assert "reticle_sessions" in names
    for tool in tools:
        assert set(tool) >= {"name", "description", "inputSchema"}
        assert tool["description"].strip()


def test_resources_list(hub):
    resources = rpc(hub, request("resources/list"))["result"]["resources"]
    assert sorted(r["uri"] for r in resources) == sorted(RESOURCES)
    for r in resources:
        assert r["name"] and r["mimeType"]


@pytest.mark.parametrize("uri", RESOURCES)
def test_resources_read(hub, uri):
    contents = rpc(hub, request("resources/read", {"uri": uri}))["result"]["contents"]
    assert len(contents) == 1
    assert contents[0]["uri"] == uri
    assert contents[0]["text"].strip()
    if contents[0]["mimeType"] == "application/json":
        json.loads(contents[0]["text"])


def test_usage_resource_names_every_tool(hub):
    text = rpc(hub, request("resources/read", {"uri": "reticle://docs/usage"}))["result"]["contents"][0]["text"]
    for name in hub.registry.names():
        assert name in text


def test_sessions_resource_is_live_and_empty(hub):
    text = rpc(hub, request("resources/read", {"uri": "reticle://sessions"}))["result"]["contents"][0]["text"]
    data = json.loads(text)
    assert data["sessions"] == []
    assert "no browser session is connected" in data["why"]


def test_unknown_resource(hub):
    reply = rpc(hub, request("resources/read", {"uri": "reticle://nope"}))
    assert reply["error"]["code"] == -32002
    assert "reticle://docs/usage" in reply["error"]["message"]


@pytest.mark.parametrize("method", ["nope", "prompts/list", "server/discover", "tools/delete", ""])
def test_unknown_method(hub, method):
    reply = rpc(hub, request(method, mid=9))
    assert reply["id"] == 9
    assert reply["error"]["code"] == -32601
    # the message names the method it did not find and the ones there are
    assert "Method not found: %s." % method in reply["error"]["message"]
    assert "tools/call" in reply["error"]["message"]


NEEDS_JSONRPC_AND_METHOD = 'needs "jsonrpc": "2.0" and a string "method"'
ID_TYPE = "id must be a string or a number"
NOT_AN_OBJECT = "a JSON-RPC message must be an object"


@pytest.mark.parametrize("message, reason", [
    ({"id": 1, "method": "ping"}, NEEDS_JSONRPC_AND_METHOD),                    # no jsonrpc
    ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, NEEDS_JSONRPC_AND_METHOD),  # wrong jsonrpc
    ({"jsonrpc": "2.0", "id": 1}, NEEDS_JSONRPC_AND_METHOD),                    # no method
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, NEEDS_JSONRPC_AND_METHOD),       # method not a string
    ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}, ID_TYPE),           # id not a string or number
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, ID_TYPE),               # a boolean is not an id
    ("ping", NOT_AN_OBJECT),
    (42, NOT_AN_OBJECT),
    (None, NOT_AN_OBJECT),
])
def test_invalid_request(hub, message, reason):
    reply = rpc(hub, message)
    assert reply["jsonrpc"] == "2.0"
    assert reply["error"]["code"] == -32600
    assert reason in reply["error"]["message"]


def test_params_must_be_an_object(hub):
    reply = rpc(hub, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1, 2]})
    assert reply["error"]["code"] == -32602
    assert "params must be an object" in reply["error"]["message"]


@pytest.mark.parametrize("method", ["notifications/initialized", "notifications/cancelled", "ping",
                                    "tools/list", "anything/else"])
def test_notifications_answer_nothing(hub, method):
    assert rpc(hub, {"jsonrpc": "2.0", "method": method}) is None


def test_client_responses_answer_nothing(hub):
    assert rpc(hub, {"jsonrpc": "2.0", "id": 3, "result": {}}) is None


def test_batch_mixing_requests_and_notifications(hub):
    batch = [initialize("2025-06-18"),
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             request("tools/list", mid=2),
             {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}},
             request("ping", mid="three"),
             request("nope", mid=4)]
    replies, was_batch = rpc_payload(hub, batch)
    assert was_batch is True
    by_id = {r["id"]: r for r in replies}
    assert sorted(by_id, key=str) == [1, 2, 4, "three"]
    assert by_id[1]["result"]["protocolVersion"] == "2025-06-18"
    assert len(by_id[2]["result"]["tools"]) == LISTED_TOOLS
    assert by_id["three"]["result"] == {}
    assert by_id[4]["error"]["code"] == -32601
    assert "Method not found: nope." in by_id[4]["error"]["message"]


def test_batch_of_notifications_only(hub):
    replies, was_batch = rpc_payload(hub, [{"jsonrpc": "2.0", "method": "notifications/initialized"},
                                           {"jsonrpc": "2.0", "method": "notifications/cancelled"}])
    assert replies is None
    assert was_batch is True


def test_empty_batch(hub):
    reply, was_batch = rpc_payload(hub, [])
    assert reply["error"]["code"] == -32600
    assert "empty batch" in reply["error"]["message"]
    assert reply["id"] is None
    assert was_batch is False


def test_batch_with_an_invalid_member(hub):
    replies, _ = rpc_payload(hub, [request("ping", mid=1), 7])
    by_id = {r["id"]: r for r in replies}
    assert sorted(by_id, key=str) == [1, None]
    assert by_id[1]["result"] == {}
    assert by_id[None]["error"]["code"] == -32600
    assert NOT_AN_OBJECT in by_id[None]["error"]["message"]


def test_single_message_payload(hub):
    reply, was_batch = rpc_payload(hub, request("ping", mid=5))
    assert reply == {"jsonrpc": "2.0", "id": 5, "result": {}}
    assert was_batch is False


def test_tools_call_reticle_sessions(hub):
    result = rpc(hub, request("tools/call", {"name": "reticle_sessions", "arguments": {}}))["result"]
    assert "isError" not in result
    assert result["structuredContent"]["sessions"] == []
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_tools_call_without_arguments(hub):
    result = rpc(hub, request("tools/call", {"name": "reticle_sessions"}))["result"]
    assert result["structuredContent"]["sessions"] == []
