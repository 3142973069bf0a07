"""Flows (DESIGN section 10): save a verified journey, replay it, and `reticle verify` it for CI,
with real Chromium, a real daemon and a real MCP client against the server-rendered forms fixture
(a login and an add form, both full-page posts with post/redirect/get).  The truth is checked on the
server: what was posted, what was stored."""

import contextlib
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _forms_app import PASSWORD, FormsApp  # noqa: E402
from _harness import RETICLE_PY, AppServer, Browser, Daemon, Mcp, chromium_path, daemon_env, wait_until  # noqa: E402

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed")]

SECRET_ENV = "RETICLE_SECRET_PASSWORD"


def _keep(stack, thing):
    stack.callback(thing.close)
    return thing


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    project = tmp_path_factory.mktemp("project")
    with contextlib.ExitStack() as stack:
        daemon = _keep(stack, Daemon(tmp_path_factory.mktemp("flows") / "state", cwd=str(project),
                                     env={SECRET_ENV: PASSWORD, "RETICLE_DEVICE_BUDGET": "40/600"}))
        forms = FormsApp(daemon.url)
        app = _keep(stack, AppServer(forms.routes()))
        _keep(stack, Browser(app.url + "/login"))
        mcp = _keep(stack, Mcp(daemon.url + "/mcp"))
        wait_until(lambda: mcp.ok("reticle_sessions")["sessions"], 20, what="the tab to connect")
        yield {"daemon": daemon, "app": app, "forms": forms, "mcp": mcp, "project": project}


def _posts(forms, path):
    return [fields for p, fields in forms.posts if p == path]


ADD_UNTIL = {"kind": "allOf", "predicates": [{"kind": "net", "method": "POST", "urlContains": "/records", "ok": True},
                                              {"kind": "text", "contains": "Record 'Ann' added"}]}


def _journey(world):
    """Log in and add a record, verified step by step, the way an agent would."""
    mcp, app = world["mcp"], world["app"]
    nav = mcp.ok("reticle_navigate", {"url": app.url + "/login"})
    assert nav["confirmed"], nav
    first = mcp.ok("reticle_act", {"target": {"label": "Username"}, "action": "fill", "args": {"value": "ann"}})
    # the password field by ref, as an agent does after a snapshot: saved on its role and name
    ref = mcp.ok("reticle_query", {"label": "Password"})["elements"][0]["ref"]
    mcp.ok("reticle_act", {"ref": ref, "action": "fill", "args": {"value": PASSWORD}})
    login = mcp.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Log in"}, "action": "click",
                                            "until": {"kind": "text", "contains": "Welcome back"},
                                            "timeout_ms": 8000})
    assert login["verified"] == "yes", login
    mcp.ok("reticle_act", {"target": {"label": "Name"}, "action": "fill", "args": {"value": "Ann"}})
    add = mcp.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Add record"}, "action": "click",
                                          "until": ADD_UNTIL, "timeout_ms": 8000})
    assert add["verified"] == "yes", add
    shown = mcp.ok("reticle_assert", {"predicate": {"kind": "text", "contains": "Ann"}})
    assert shown["verified"] == "yes", shown
    return first["since"]


def test_a_verified_journey_saves_replays_and_fails_where_the_app_broke(world):
    mcp, forms, project = world["mcp"], world["forms"], world["project"]
    since = _journey(world)
    assert list(forms.records.values()) == ["Ann"]
    saved = mcp.ok("reticle_flow_save", {"name": "add-record", "since": since})
    path = project / ".reticle" / "flows" / "add-record.json"
    assert saved["saved"] == str(path) and saved["steps"] == 6 and saved["secrets"] == [SECRET_ENV], saved
    text = path.read_text()
    flow = json.loads(text)
    assert flow["format"] == 1 and flow["name"] == "add-record" and flow["startUrl"].endswith("/login")
    assert PASSWORD not in text and '"ref"' not in text and not re.search(r'"e\d+"', text), text
    steps = flow["steps"]
    assert [s.get("action") or "assert" for s in steps] == ["fill", "fill", "click", "fill", "click", "assert"]
    assert steps[0]["target"] == {"label": "Username"} and steps[0]["args"] == {"value": "ann"}
    assert steps[1]["target"] == {"role": "textbox", "name": "Password"}, steps[1]
    assert steps[1]["args"] == {"value": "${%s}" % SECRET_ENV} and steps[1]["secret"] == SECRET_ENV
    assert steps[2]["until"] == {"kind": "text", "contains": "Welcome back"} and steps[2]["verified"] == "yes"
    assert steps[4]["until"] == ADD_UNTIL and steps[5]["assert"] == {"kind": "text", "contains": "Ann"}
    listed = mcp.ok("reticle_flow_list")
    assert [f["name"] for f in listed["flows"]] == ["add-record"] and listed["flows"][0]["steps"] == 6

    # green: the replay logs in with the password from the environment and adds the record again
    forms.records.clear()
    logins = len(_posts(forms, "/login"))
    out = mcp.ok("reticle_flow_replay", {"name": "add-record"}, timeout=60)
    assert out["verified"] == "yes", out
    assert [s["verified"] for s in out["steps"]] == ["yes"] * 6, out["steps"]
    assert list(forms.records.values()) == ["Ann"]
    assert _posts(forms, "/login")[logins:] == [{"csrfmiddlewaretoken": _posts(forms, "/login")[-1]["csrfmiddlewaretoken"],
                                                  "username": "ann", "password": PASSWORD, "go": "login"}]

    # a server-side fault: the add step is `no`, with the 500 as its evidence; later steps are skipped
    forms.records.clear()
    forms.fault = True
    try:
        out = mcp.ok("reticle_flow_replay", {"name": "add-record"}, timeout=60)
    finally:
        forms.fault = False
    assert out["verified"] == "no" and out["failedStep"] == 4, out
    failing = out["steps"][4]
    assert failing["verified"] == "no" and "500" in json.dumps(failing), failing
    assert failing["predicate"] == ADD_UNTIL and failing["evidence"]
    assert [s["verified"] for s in out["steps"]] == ["yes"] * 4 + ["no", "skipped"]
    assert forms.records == {}

    # the button renamed: the target does not resolve, the nearest candidates are named, nothing is posted
    forms.add_label = "Save record"
    adds = len(_posts(forms, "/records"))
    try:
        out = mcp.ok("reticle_flow_replay", {"name": "add-record"}, timeout=60)
    finally:
        forms.add_label = "Add record"
    assert out["verified"] == "no" and out["failedStep"] == 4, out
    miss = out["steps"][4]
    assert miss["verifiedReason"] == "target_missing", miss
    assert any("Save record" in c for c in miss["evidence"]["nearest"]), miss
    assert len(_posts(forms, "/records")) == adds and forms.records == {}


def _refused(mcp, name, args):
    """The error text of a call that must fail (a tool error, or a JSON-RPC error for bad arguments)."""
    try:
        data, is_error = mcp.call(name, args)
    except Exception as exc:  # the mcp client raises on JSON-RPC errors
        return str(exc)
    assert is_error, (name, args, data)
    return data["error"]


def test_flow_names_steps_and_secrets_are_checked(world):
    mcp, project = world["mcp"], world["project"]
    for bad in ("../escape", "a/b", "..", ".hidden", "x" * 70):
        error = _refused(mcp, "reticle_flow_save", {"name": bad, "steps": [{"action": "click", "target": {"text": "Go"}}]})
        assert "name" in error, (bad, error)
    assert "not a flow name" in _refused(mcp, "reticle_flow_save", {"name": "../escape", "steps": [
        {"action": "click", "target": {"text": "Go"}}]})
    assert not (project / "escape.json").exists() and not (project / ".reticle" / "escape.json").exists()
    assert "target" in _refused(mcp, "reticle_flow_save", {"name": "bad-steps", "steps": [{"action": "click"}]})
    assert "ref" in _refused(mcp, "reticle_flow_save", {"name": "refs", "steps": [{"action": "click", "ref": "e7"}]})
    assert not (project / ".reticle" / "flows" / "bad-steps.json").exists()
    data, is_error = mcp.call("reticle_flow_replay", {"flow": {"format": 1, "name": "s", "steps": [
        {"action": "fill", "target": {"label": "Name"}, "args": {"value": "${RETICLE_SECRET_NOPE}"}}]}})
    assert is_error and data.get("variable") == "RETICLE_SECRET_NOPE" and data.get("setup") is True, data
    data, is_error = mcp.call("reticle_flow_replay", {"name": "never-saved"})
    assert is_error and "no flow" in data["error"], data
