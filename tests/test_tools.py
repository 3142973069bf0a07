"""The tool registry: schemas, argument validation and the no-browser answers."""

import asyncio
import json

import jsonschema
import pytest

import reticle

DIALECT = "https://json-schema.org/draft/2020-12/schema"
EXPECTED_TOOLS = (
    "reticle_sessions", "reticle_navigate", "reticle_snapshot", "reticle_query", "reticle_inspect",
    "reticle_act", "reticle_act_sequence", "reticle_act_and_wait", "reticle_observe", "reticle_network",
    "reticle_console", "reticle_wait_for", "reticle_assert", "reticle_state", "reticle_capabilities",
    "reticle_fault", "reticle_open", "reticle_close", "reticle_screenshot",
    "reticle_flow_save", "reticle_flow_list", "reticle_flow_replay", "reticle_watch_db",
)
REGISTRY = reticle._build_registry()
TOOLS = REGISTRY.listed()
# Tools that need a connected tab (reticle_open starts a browser, reticle_close needs a device:
# tests/test_devices.py covers both).
BROWSER_TOOLS = [t for t in TOOLS if t.name not in ("reticle_sessions", "reticle_open", "reticle_close",
                                                    "reticle_flow_list", "reticle_watch_db")]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    return reticle.Hub(state_dir=str(tmp_path_factory.mktemp("tools") / "state"))


def call(hub, name, arguments):
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}}
    return asyncio.run(hub.dispatcher.handle(message, reticle._CallContext("test", "test")))


def objects_in(schema):
    """Every sub-schema that declares object properties."""
    if isinstance(schema, dict):
        if "properties" in schema:
            yield schema
        for value in schema.values():
            yield from objects_in(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from objects_in(value)


def test_the_listed_tools_are_those_of_the_design():
    assert sorted(REGISTRY.names()) == sorted(EXPECTED_TOOLS)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_schema_is_draft_2020_12_and_closed(tool):
    schema = tool.schema
    assert schema["$schema"] == DIALECT
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    for obj in objects_in(schema):
        assert obj.get("additionalProperties") is False, obj


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_description_is_one_paragraph(tool):
    assert tool.description.strip()
    assert "\n\n" not in tool.description


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_example_is_valid(tool):
    jsonschema.Draft202012Validator(tool.schema).validate(tool.example)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_unknown_field_names_it_and_the_accepted_fields(hub, tool):
    reply = call(hub, tool.name, dict(tool.example, bogusField=1))
    error = reply["error"]
    assert error["code"] == -32602
    assert "bogusField" in error["message"]
    assert error["data"]["path"] == "/"
    accepted = sorted(tool.schema["properties"])
    assert sorted(error["data"]["accepted"]) == accepted
    for field in accepted:
        assert field in error["message"]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_arguments_must_be_an_object(hub, tool):
    reply = call(hub, tool.name, ["not", "an", "object"])
    assert reply["error"]["code"] == -32602
    # names the tool, what it wanted and what it got
    assert reply["error"]["message"].startswith(tool.name + ":")
    assert "must be a JSON object, got list" in reply["error"]["message"]


def test_wrong_type_names_the_path(hub):
    error = call(hub, "reticle_inspect", {"ref": 5})["error"]
    assert error["code"] == -32602
    assert "/ref" in error["message"]
    assert error["data"]["path"] == "/ref"
    assert error["data"]["accepted"] == ["ref", "sessionId", "detail"]


@pytest.mark.parametrize("name, args", [("reticle_open", {"url": "http://localhost:5173/", "fresh": "yes"}),
                                         ("reticle_flow_replay", {"name": "login", "fresh": 1})])
def test_fresh_must_be_a_boolean(hub, name, args):
    error = call(hub, name, args)["error"]
    assert error["code"] == -32602 and error["data"]["path"] == "/fresh", error
    assert "/fresh" in error["message"] and "boolean" in error["message"], error
    assert call(hub, "reticle_sessions", {})["result"]  # and the daemon keeps serving


def test_flow_saves_replayed_must_be_a_boolean(hub):
    error = call(hub, "reticle_flow_save", {"name": "again", "replayed": "yes"})["error"]
    assert error["code"] == -32602 and error["data"]["path"] == "/replayed", error
    assert "boolean" in error["message"] and "replayed" in error["data"]["accepted"], error
    assert call(hub, "reticle_sessions", {})["result"]  # and the daemon keeps serving


def test_missing_required_field(hub):
    error = call(hub, "reticle_inspect", {})["error"]
    assert error["code"] == -32602
    assert "'ref' is a required property" in error["message"]
    assert error["data"]["path"] == "/"
    assert "ref" in error["data"]["accepted"]


def test_nested_path_and_the_fields_of_the_nested_object(hub):
    error = call(hub, "reticle_act_sequence", {"steps": [{"action": "explode"}]})["error"]
    assert error["code"] == -32602
    assert error["data"]["path"] == "/steps/0/action"
    assert "/steps/0/action" in error["message"]
    assert sorted(error["data"]["accepted"]) == ["action", "args", "ref", "target"]


def test_unknown_field_inside_a_nested_object(hub):
    error = call(hub, "reticle_act", {"action": "click", "target": {"testid": "pay", "css": "#pay"}})["error"]
    assert error["code"] == -32602
    assert error["data"]["path"] == "/target"
    assert "css" in error["message"]
    assert "testid" in error["data"]["accepted"]


def test_oversized_string_is_refused_before_the_handler(hub):
    error = call(hub, "reticle_navigate", {"url": "http://x/" + "a" * (reticle.MAX_STRING_ARG + 1)})["error"]
    assert error["code"] == -32602
    assert "Nothing ran" in error["message"]


@pytest.mark.parametrize("name", ["reticle_nope", "", None, 7, "reticle_flow_heal", "reticle_verify"])
def test_unknown_tool(hub, name):
    error = call(hub, name, {})["error"]
    assert error["code"] == -32602
    assert error["message"].startswith("Unknown tool %r." % (name,))
    assert "reticle_sessions" in error["message"]
    assert sorted(error["data"]["available"]) == sorted(EXPECTED_TOOLS)


@pytest.mark.parametrize("tool", BROWSER_TOOLS, ids=lambda t: t.name)
def test_browser_tool_without_a_browser_says_how_to_connect(hub, tool):
    result = call(hub, tool.name, tool.example)["result"]
    assert result["isError"] is True
    body = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == body
    assert "no browser session is connected" in body["error"]
    assert "/reticle.js" in body["error"]
    assert "connect a tab" in body["recovery"]
    assert "reticle_sessions" in body["recovery"]


def test_reticle_sessions_empty_list_carries_why_and_next_action(hub):
    result = call(hub, "reticle_sessions", {})["result"]
    assert not result.get("isError")
    body = result["structuredContent"]
    assert body["sessions"] == []
    assert "no browser session is connected" in body["why"]
    next_action = body["next_action"]
    assert next_action["action"] == "open_app"
    assert "/reticle.js" in next_action["reason"]
    assert "/reticle.js" in next_action["snippet"]
    assert next_action["snippet"].startswith("<script")


def test_registry_refuses_a_duplicate():
    registry = reticle._ToolRegistry()
    tool = TOOLS[0]
    registry.add(tool)
    with pytest.raises(ValueError, match="%s registered twice" % tool.name):
        registry.add(tool)


def test_a_tool_with_an_invalid_schema_cannot_be_made():
    async def handler(hub, args, ctx):
        return {}

    with pytest.raises(jsonschema.exceptions.SchemaError, match="'no-such-type' is not valid"):
        reticle._Tool("bad", "bad", {"type": "no-such-type"}, handler)


def compact_size(obj):
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def test_the_tool_list_fits_its_budget():
    """What the model reads of tools/list on every turn (each tool's name, description and input schema)
    is at most 10,250 bytes of compact JSON in all (10,000 until the 23rd tool, reticle_watch_db, and the
    `stored` kind in every verdict tool's predicate list); the client-side conventions beside it (title,
    annotations, outputSchema, which clients act on and do not put before the model) keep the whole
    list under 14,000."""
    tools = [t.describe() for t in reticle._build_registry().listed()]
    read = [{k: t[k] for k in ("name", "description", "inputSchema")} for t in tools]
    assert compact_size({"tools": read}) <= 10250, "the model's part of tools/list is %d bytes" % compact_size(
        {"tools": read})
    assert compact_size({"tools": tools}) <= 14000, "tools/list is %d bytes" % compact_size({"tools": tools})
    for tool in tools:
        assert "$schema" not in tool["inputSchema"]
        assert len(tool["description"]) <= 160 or tool["name"] in ("reticle_act_and_wait", "reticle_assert"), tool


@pytest.mark.parametrize("name", ["reticle_act_and_wait", "reticle_assert"])
def test_the_verdict_tools_carry_the_predicate_digest(name):
    description = reticle._build_registry().get(name).description
    for kind in reticle._PREDICATE_KINDS:
        assert kind + "{" in description, kind
    assert "reticle://predicates" in description


def test_the_strict_schema_still_checks_what_the_lean_one_does_not_show():
    tool = reticle._build_registry().get("reticle_act")
    assert "minProperties" not in json.dumps(tool.describe())
    with pytest.raises(reticle.RpcError, match="target"):
        tool.check({"action": "click", "target": {}})
    with pytest.raises(reticle.RpcError, match="unknown field 'colour'"):
        tool.check({"action": "click", "target": {"role": "button", "colour": "red"}})


READ_ONLY = ("reticle_sessions", "reticle_snapshot", "reticle_query", "reticle_inspect", "reticle_observe",
             "reticle_network", "reticle_console", "reticle_state", "reticle_capabilities", "reticle_flow_list",
             "reticle_wait_for", "reticle_assert")
DESTRUCTIVE = ("reticle_close", "reticle_act", "reticle_act_sequence", "reticle_act_and_wait", "reticle_flow_replay",
               "reticle_flow_save")
OPEN_WORLD = ("reticle_open", "reticle_navigate", "reticle_flow_replay")
IDEMPOTENT = ("reticle_open", "reticle_navigate", "reticle_close", "reticle_flow_save", "reticle_watch_db")


@pytest.mark.parametrize("tool", [t.describe() for t in TOOLS], ids=lambda t: t["name"])
def test_every_tool_has_a_title_and_true_annotations(tool):
    """MCP 2025-06-18: a display title, and hints clients auto-approve and group tools by.  A tool that
    acts states every hint, because MCP's defaults (destructive, open world) would claim more than is
    true; a read-only one states the two that mean something for it."""
    name, hints = tool["name"], tool["annotations"]
    assert isinstance(tool["title"], str) and 0 < len(tool["title"]) <= 20 and "reticle" not in tool["title"]
    assert hints["readOnlyHint"] is (name in READ_ONLY)
    assert hints["openWorldHint"] is (name in OPEN_WORLD)
    if name in READ_ONLY:
        assert set(hints) == {"readOnlyHint", "openWorldHint"}
    else:
        assert set(hints) == {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
        assert hints["destructiveHint"] is (name in DESTRUCTIVE)
        assert hints["idempotentHint"] is (name in IDEMPOTENT)


def test_the_titles_are_distinct():
    titles = [t.describe()["title"] for t in TOOLS]
    assert len(set(titles)) == len(titles)


VERDICT_TOOLS = ("reticle_act_and_wait", "reticle_assert", "reticle_flow_replay")


@pytest.mark.parametrize("tool", [t for t in TOOLS if t.output_schema is not None], ids=lambda t: t.name)
def test_an_output_schema_is_an_object_schema_the_client_can_check(tool):
    schema = tool.describe()["outputSchema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["required"]
    assert "additionalProperties" not in schema  # answers may carry more than the stable fields


@pytest.mark.parametrize("name", VERDICT_TOOLS)
def test_the_verdict_tools_declare_their_verdict(name):
    schema = REGISTRY.get(name).describe()["outputSchema"]
    assert schema["properties"]["verified"] == {"enum": ["yes", "no", "unknown"]}
    assert {"verified", "because"} <= set(schema["required"])


def test_the_empty_answers_hold_their_schemas(hub):
    """reticle_sessions and reticle_flow_list answer without a browser; their answers hold what they declare."""
    for name in ("reticle_sessions", "reticle_flow_list"):
        result = call(hub, name, {})["result"]
        assert not result.get("isError")
        assert REGISTRY.get(name).output_problem(result) is None
        jsonschema.validate(result["structuredContent"], REGISTRY.get(name).describe()["outputSchema"])


@pytest.mark.expect_reticle_errors
def test_in_check_mode_an_answer_that_breaks_its_schema_is_logged_as_a_bug(monkeypatch, caplog):
    """The suite runs every dispatcher with RETICLE_CHECK_OUTPUT=1: an answer off its declared shape
    logs mcp_internal_error (which fails the test that saw it), and the answer still goes out."""
    monkeypatch.setenv("RETICLE_CHECK_OUTPUT", "1")

    async def call_tool(name, args, ctx):
        return reticle._tool_result({"verified": "maybe", "verifiedReason": "x", "because": "y"})

    async def read_live(uri):
        return {}

    dispatcher = reticle._McpDispatcher(reticle._build_registry(), call_tool, read_live)
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "reticle_assert", "arguments": {"predicate": {"kind": "settled"}}}}
    with caplog.at_level("ERROR", logger="reticle"):
        reply = asyncio.run(dispatcher.handle(message, reticle._CallContext("test", "test")))
    assert reply["result"]["structuredContent"]["verified"] == "maybe"
    bugs = [r for r in caplog.records if r.getMessage() == "mcp_internal_error"]
    assert bugs and "reticle_assert" in str(bugs[0].fields) and "/verified" in str(bugs[0].fields)
    monkeypatch.setenv("RETICLE_CHECK_OUTPUT", "0")
    quiet = reticle._McpDispatcher(reticle._build_registry(), call_tool, read_live)
    caplog.clear()
    with caplog.at_level("ERROR", logger="reticle"):
        asyncio.run(quiet.handle(message, reticle._CallContext("test", "test")))
    assert not [r for r in caplog.records if r.getMessage() == "mcp_internal_error"]


def test_a_flow_replays_through_the_verdict_core_not_the_tool_entry_points():
    """A replayed step and the tool it stands for run the same core (Observe, then Answer): the
    replay never calls an MCP tool handler of an act or a verdict, and each handler is the core."""
    replay = set(reticle._replay_step.__code__.co_names)
    assert not replay & {"_tool_act", "_tool_assert", "_tool_act_and_wait"}, replay
    assert {"_act_once", "_assert_verdict", "_act_and_wait_verdict"} <= replay
    for tool, core in (("_tool_act", "_act_once"), ("_tool_assert", "_assert_verdict"),
                       ("_tool_act_and_wait", "_act_and_wait_verdict")):
        assert core in getattr(reticle, tool).__code__.co_names, tool


def test_the_registry_registers_every_tool_one_way():
    """One record per tool: a tool given the tab of `sessionId` takes `detail`, one that resolves its
    tab itself (a device, a journey to save) does not; the quiet spellings come from the record."""
    for spec in reticle._TOOL_SPECS:
        tool = REGISTRY.get(spec.name)
        given = "sessionId" in spec.props and not spec.own_tab
        assert tool.needs_session is given and ("detail" in tool.schema["properties"]) is given, spec.name
        assert tool.quiet == spec.quiet, spec.name
    assert [s.name for s in reticle._TOOL_SPECS] == [t.name for t in REGISTRY.listed()]
    assert REGISTRY.get("reticle_act_and_wait").quiet == ("predicate",)
    assert not REGISTRY.get("reticle_flow_save").needs_session and not REGISTRY.get("reticle_open").needs_session


@pytest.mark.parametrize("name", ["reticle_observe", "reticle_network", "reticle_console"])
def test_a_window_s_end_is_listed_where_it_is_not_another_name(name):
    """`until` is the end of the window (a cursor) on the reading tools, so the model is shown it; on
    wait_for and assert it is another spelling of `predicate` and stays out of the list."""
    listed = REGISTRY.get(name).describe()["inputSchema"]["properties"]
    assert "since" in listed and "until" in listed, sorted(listed)
    for alias in ("reticle_wait_for", "reticle_assert"):
        assert "until" not in REGISTRY.get(alias).describe()["inputSchema"]["properties"]
