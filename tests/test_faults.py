"""Faults on purpose (`reticle_fault`, issue 21): a request made to fail in a device's network layer
and in the SDK's wrappers with the script tag, with real Chromium, a real daemon and real MCP
clients.  The truth is checked on the server: the fixture counts every write and WebSocket
handshake it received, so a fault's answer is never mistaken for the server's."""

import contextlib
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fault_app import FaultApp  # noqa: E402
from _harness import AppServer, Browser, Daemon, Mcp, chromium_path, wait_until  # noqa: E402

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed")

SAVE = {"target": {"role": "button", "name": "Save"}, "action": "click"}
XSAVE = {"target": {"role": "button", "name": "Save with XHR"}, "action": "click"}
SAVED_200 = {"kind": "net", "method": "POST", "urlContains": "/api/save", "status": 200}
SAVED_TEXT = {"kind": "text", "contains": "Saved"}
FAULT_500 = {"match": {"urlContains": "/api/save", "method": "POST"}, "respond": {"status": 500}}


def _keep(stack, thing):
    stack.callback(thing.close)
    return thing


@pytest.fixture(scope="module")
def device_world(tmp_path_factory):
    """Two clients, each with a device of its own on the fixture (no script tag)."""
    with contextlib.ExitStack() as stack:
        daemon = _keep(stack, Daemon(tmp_path_factory.mktemp("faults-dev") / "state",
                                     env={"RETICLE_DEVICE_BUDGET": "40/600"}))
        app = FaultApp(daemon.url, tag=False)
        server = _keep(stack, AppServer(app.routes()))
        mcp = _keep(stack, Mcp(daemon.url + "/mcp"))
        other = _keep(stack, Mcp(daemon.url + "/mcp"))
        sid = mcp.ok("reticle_open", {"url": server.url + "/"})["sessionId"]
        other_sid = other.ok("reticle_open", {"url": server.url + "/"})["sessionId"]
        yield {"daemon": daemon, "app": app, "server": server, "mcp": mcp, "other": other, "sid": sid,
               "other_sid": other_sid, "kind": "device"}


@pytest.fixture(scope="module")
def tag_world(tmp_path_factory):
    """Two person's tabs (the script tag) on the fixture and one client."""
    with contextlib.ExitStack() as stack:
        daemon = _keep(stack, Daemon(tmp_path_factory.mktemp("faults-tag") / "state"))
        app = FaultApp(daemon.url, tag=True)
        server = _keep(stack, AppServer(app.routes()))
        _keep(stack, Browser(server.url + "/?tab=1"))
        _keep(stack, Browser(server.url + "/?tab=2"))
        mcp = _keep(stack, Mcp(daemon.url + "/mcp"))
        other = _keep(stack, Mcp(daemon.url + "/mcp"))
        sessions = wait_until(lambda: (lambda s: s if len(s) == 2 else None)(mcp.ok("reticle_sessions")["sessions"]),
                              20, what="both tabs to connect")
        by_tab = {s["url"].rsplit("=", 1)[-1]: s["sessionId"] for s in sessions}
        yield {"daemon": daemon, "app": app, "server": server, "mcp": mcp, "other": other, "sid": by_tab["1"],
               "other_sid": by_tab["2"], "kind": "tag"}


@pytest.fixture(params=["device", "tag"])
def world(request):
    w = request.getfixturevalue(request.param + "_world")
    for client, sid in ((w["mcp"], w["sid"]), (w["other"], w["other_sid"])):
        client.ok("reticle_fault", {"clear": True, "sessionId": sid})
        client.ok("reticle_navigate", {"url": w["server"].url + "/", "sessionId": sid})
    return w


def _act(w, step, until, sid=None, client=None, **extra):
    args = dict(step, until=until, sessionId=sid or w["sid"], timeout_ms=6000, **extra)
    return (client or w["mcp"]).ok("reticle_act_and_wait", args)


def _fault(w, spec, sid=None, client=None):
    return (client or w["mcp"]).ok("reticle_fault", dict(spec, sessionId=sid or w["sid"]))


def test_a_write_faulted_to_500_never_reaches_the_server_and_its_proof_is_no(world):
    w, app = world, world["app"]
    before = app.count("/api/save")
    fault = _fault(w, FAULT_500)
    assert fault["faultId"].startswith("f") and fault["in"] == ("device" if w["kind"] == "device" else "sdk"), fault
    assert "fetch" in fault["covers"] and fault["expiresAt"] and fault["ttlMs"] == 600000, fault
    if w["kind"] == "tag":
        assert "documents and form posts" in fault["notCovered"], fault
    out = _act(w, SAVE, SAVED_200)
    assert out["verified"] == "no", out
    assert fault["faultId"] in out["because"] and "The deciding evidence was faulted on purpose" in out["because"]
    # decided failures work on a faulted request as on a real one: no waiting for the timeout
    assert out["decidedBy"] == "answered-otherwise", out
    assert app.count("/api/save") == before, "a faulted write reached the server"
    calls = w["mcp"].ok("reticle_network", {"urlContains": "/api/save", "sessionId": w["sid"]})["calls"]
    assert calls[-1]["status"] == 500 and calls[-1]["faulted"] is True and calls[-1]["faultId"] == fault["faultId"]
    seen = [e["data"] for e in w["mcp"].ok("reticle_observe", {"since": out["since"], "filters": ["net"],
                                                                "sessionId": w["sid"]})["events"]
            if e["type"] == "net.request"]
    assert any(d.get("faulted") and d.get("faultId") == fault["faultId"] for d in seen), seen
    # a presence check of the text alone is `no` too: the page told the user
    assert w["mcp"].ok("reticle_assert", {"predicate": SAVED_TEXT, "sessionId": w["sid"]})["verified"] == "no"
    listed = w["mcp"].ok("reticle_fault", {"list": True, "sessionId": w["sid"]})["faults"]
    assert [(f["faultId"], f["hits"]) for f in listed] == [(fault["faultId"], 1)], listed

    # clear restores it: the same act is `yes`, and the write arrives
    cleared = w["mcp"].ok("reticle_fault", {"clear": fault["faultId"], "sessionId": w["sid"]})
    assert cleared["cleared"] == [fault["faultId"]] and cleared["faults"] == []
    out = _act(w, SAVE, SAVED_200)
    assert out["verified"] == "yes" and "faulted" not in out["because"], out
    assert app.count("/api/save") == before + 1
    calls = w["mcp"].ok("reticle_network", {"urlContains": "/api/save", "sessionId": w["sid"]})["calls"]
    assert "faulted" not in calls[-1], calls[-1]


def test_an_xhr_write_is_faulted_too(world):
    w, app = world, world["app"]
    before = app.count("/api/xsave")
    fault = _fault(w, {"match": {"urlContains": "/api/xsave", "resourceType": "xhr"}, "respond": {"status": 503}})
    out = _act(w, XSAVE, {"kind": "net", "method": "POST", "urlContains": "/api/xsave", "ok": True})
    assert out["verified"] == "no" and fault["faultId"] in out["because"], out
    assert app.count("/api/xsave") == before
    calls = w["mcp"].ok("reticle_network", {"urlContains": "/api/xsave", "sessionId": w["sid"]})["calls"]
    assert calls[-1]["status"] == 503 and calls[-1]["faultId"] == fault["faultId"], calls


def test_abort_with_times_1_is_spent_once(world):
    w, app = world, world["app"]
    before = app.count("/api/save")
    fault = _fault(w, {"match": {"urlContains": "/api/save"}, "abort": True, "times": 1})
    first = _act(w, SAVE, SAVED_TEXT)
    assert first["verified"] == "no" and fault["faultId"] in first["because"], first
    assert app.count("/api/save") == before
    second = _act(w, SAVE, SAVED_TEXT)
    assert second["verified"] == "yes", second
    assert app.count("/api/save") == before + 1
    assert w["mcp"].ok("reticle_fault", {"list": True, "sessionId": w["sid"]})["faults"] == []


def test_a_delay_holds_the_request_and_it_still_lands(world):
    w, app = world, world["app"]
    before = app.count("/api/save")
    fault = _fault(w, {"match": {"urlContains": "/api/save"}, "delayMs": 900})
    t0 = time.monotonic()
    out = _act(w, SAVE, SAVED_200)
    assert out["verified"] == "yes", out
    assert time.monotonic() - t0 >= 0.9
    assert app.count("/api/save") == before + 1
    call = w["mcp"].ok("reticle_network", {"urlContains": "/api/save", "sessionId": w["sid"]})["calls"][-1]
    assert call["status"] == 200 and call["faultId"] == fault["faultId"] and call["ms"] >= 850, call


def test_one_tabs_fault_leaves_another_tab_and_client_alone(world):
    w, app = world, world["app"]
    fault = _fault(w, FAULT_500)
    before = app.count("/api/save")
    # the other tab saves for real
    out = _act(w, SAVE, SAVED_200, sid=w["other_sid"], client=w["other"])
    assert out["verified"] == "yes", out
    assert app.count("/api/save") == before + 1
    # the other client neither sees nor clears the fault
    if w["kind"] == "device":  # a device that is not its own refuses it everything (issue 27 #8)
        for args in ({"list": True}, {"clear": fault["faultId"]}, FAULT_500):
            data, is_error = w["other"].call("reticle_fault", dict(args, sessionId=w["sid"]))
            assert is_error and data["code"] == "device_not_yours", data
    else:
        assert w["other"].ok("reticle_fault", {"list": True, "sessionId": w["sid"]})["faults"] == []
        data, is_error = w["other"].call("reticle_fault", {"clear": fault["faultId"], "sessionId": w["sid"]})
        assert is_error and "no fault" in data["error"], data
    # and the fault still holds on its own tab
    assert _act(w, SAVE, SAVED_200)["verified"] == "no"
    assert app.count("/api/save") == before + 1


def test_a_fault_expires_with_its_ttl(world):
    w, app = world, world["app"]
    _fault(w, dict(FAULT_500, ttlMs=300))
    time.sleep(0.5)
    before = app.count("/api/save")
    assert _act(w, SAVE, SAVED_200)["verified"] == "yes"
    assert app.count("/api/save") == before + 1


def test_a_websocket_can_be_dropped(world):
    w, app = world, world["app"]
    before = app.sockets
    fault = _fault(w, {"match": {"urlContains": "/ws", "resourceType": "websocket"}, "abort": True})
    out = _act(w, {"target": {"role": "button", "name": "Connect"}, "action": "click"},
               {"kind": "text", "contains": "Live: pong"})
    assert out["verified"] == "no" and fault["faultId"] in out["because"], out
    assert app.sockets == before
    w["mcp"].ok("reticle_fault", {"clear": True, "sessionId": w["sid"]})
    out = _act(w, {"target": {"role": "button", "name": "Connect"}, "action": "click"},
               {"kind": "text", "contains": "Live: pong"})
    assert out["verified"] == "yes", out
    assert app.sockets == before + 1


def test_bad_fault_arguments_are_refused_by_name(world):
    w = world
    for args, words in (({"match": {"urlContains": "/api/save"}}, "respond"),
                        ({"match": {"urlContains": "/x"}, "respond": {"status": 500}, "abort": True}, "not both"),
                        ({"list": True, "clear": True}, "exactly one"),
                        ({"match": {"urlContains": "/ws", "resourceType": "websocket"}, "respond": {"status": 500}},
                         "dropped")):
        data, is_error = w["mcp"].call("reticle_fault", dict(args, sessionId=w["sid"]))
        assert is_error and words in data["error"], (args, data)
    with pytest.raises(Exception, match="unknown field 'verb'. Accepted fields: urlContains, method, resourceType"):
        w["mcp"].call("reticle_fault", {"match": {"urlContains": "/x", "verb": "POST"}, "abort": True,
                                        "sessionId": w["sid"]})
    if w["kind"] == "tag":
        data, is_error = w["mcp"].call("reticle_fault", {"match": {"urlContains": "/form", "resourceType": "document"},
                                                         "abort": True, "sessionId": w["sid"]})
        assert is_error and "reticle_open" in data["recovery"], data
    assert w["mcp"].ok("reticle_sessions")["sessions"]


def test_a_form_post_faulted_in_a_device_never_reaches_the_server(device_world):
    w, app = device_world, device_world["app"]
    w["mcp"].ok("reticle_navigate", {"url": w["server"].url + "/", "sessionId": w["sid"]})
    before = app.count("/form")
    fault = _fault(w, {"match": {"urlContains": "/form", "method": "POST", "resourceType": "document"},
                       "respond": {"status": 500, "body": "<h1>Server error</h1>",
                                   "headers": {"Content-Type": "text/html"}}})
    out = _act(w, {"target": {"role": "button", "name": "Post the form"}, "action": "click"},
               {"kind": "net", "method": "POST", "urlContains": "/form", "ok": True})
    assert out["verified"] == "no" and fault["faultId"] in out["because"], out
    assert app.count("/form") == before
    w["mcp"].ok("reticle_fault", {"clear": True, "sessionId": w["sid"]})
    w["mcp"].ok("reticle_navigate", {"url": w["server"].url + "/", "sessionId": w["sid"]})
    out = _act(w, {"target": {"role": "button", "name": "Post the form"}, "action": "click"},
               {"kind": "net", "method": "POST", "urlContains": "/form"})
    assert out["verified"] == "yes", out
    assert app.count("/form") == before + 1


# -- flows: replay under faults, `expect: "no"`, the save warning, `reticle verify --teeth` -----------

QUIET = {"target": {"role": "button", "name": "Save quietly"}, "action": "click"}
QUIET_200 = {"kind": "net", "method": "POST", "urlContains": "/api/quiet", "status": 200}
# a flow whose only check is text the page always shows: still yes when the write behind it fails
TOOTHLESS = [dict(QUIET), {"assert": {"kind": "text", "contains": "Notes"}}]
# the same journey checking the write's own status
TOOTHED = [dict(QUIET, until=QUIET_200)]


def _flow(name, start, steps):
    return {"format": 1, "name": name, "startUrl": start, "steps": steps}


@contextlib.contextmanager
def _verify_project(tmp_path, flows):
    """A project whose .reticle/flows holds `flows` ({name: steps}, each starting at the FaultApp's page),
    that app served with no script tag (verify's devices inject the SDK), and a runner of `reticle verify`
    in the project with the environment of a daemon it starts on a free port: (app, verify)."""
    import json
    import subprocess
    from _harness import RETICLE_PY, daemon_env, free_port
    project = tmp_path / "project"
    folder = project / ".reticle" / "flows"
    folder.mkdir(parents=True)
    port = free_port()
    app = FaultApp("http://127.0.0.1:%d" % port, tag=False)
    server = AppServer(app.routes())
    try:
        for name, steps in flows.items():
            (folder / (name + ".json")).write_text(json.dumps(_flow(name, server.url + "/", steps)))
        env = daemon_env(tmp_path / "state", RETICLE_PORT=str(port))

        def verify(*argv, timeout=240):
            return subprocess.run([sys.executable, RETICLE_PY, "verify"] + list(argv), cwd=str(project), env=env,
                                  capture_output=True, text=True, timeout=timeout)
        yield app, verify
    finally:
        server.close()


def test_a_flow_replays_under_faults_and_expect_no_makes_the_failure_its_check(device_world):
    w, app = device_world, device_world["app"]
    start = w["server"].url + "/"
    flow = _flow("save", start, [dict(SAVE, until=SAVED_200)])
    before = app.count("/api/save")
    out = w["mcp"].ok("reticle_flow_replay", {"flow": flow, "faults": [FAULT_500], "sessionId": w["sid"]}, timeout=60)
    assert out["verified"] == "no" and out["faults"][0]["hits"] == 1, out
    assert "faulted on purpose" in out["steps"][0]["because"], out
    assert app.count("/api/save") == before
    assert w["mcp"].ok("reticle_fault", {"list": True, "sessionId": w["sid"]})["faults"] == []  # held for one replay
    # "save fails" as a check of its own: the app must show the error
    fails = _flow("save-fails", start, [dict(SAVE, until={"kind": "text", "contains": "Save failed"}),
                                        dict(SAVE, until=SAVED_200, expect="no")])
    out = w["mcp"].ok("reticle_flow_replay", {"flow": fails, "faults": [FAULT_500], "sessionId": w["sid"]}, timeout=60)
    assert out["verified"] == "yes", out
    assert out["steps"][1]["verified"] == "no" and out["steps"][1]["met"] is True, out["steps"]
    # without the fault, the step that expects no is yes, and the flow fails
    fails["steps"] = fails["steps"][1:]
    out = w["mcp"].ok("reticle_flow_replay", {"flow": fails, "sessionId": w["sid"]}, timeout=60)
    assert out["verified"] == "no" and "expects no" in out["because"], out
    assert app.count("/api/save") == before + 1


def test_flow_save_warns_at_once_about_a_presence_only_check_over_a_write(device_world):
    w = device_world
    w["mcp"].ok("reticle_navigate", {"url": w["server"].url + "/", "sessionId": w["sid"]})
    # a check of the write's own status: no warning (first: a write the page made a moment before an act
    # would count as the page's own background traffic)
    out = w["mcp"].ok("reticle_act_and_wait", dict(QUIET, until=QUIET_200, sessionId=w["sid"]))
    assert out["verified"] == "yes", out
    saved = w["mcp"].ok("reticle_flow_save", {"name": "quiet-toothed", "since": out["since"], "sessionId": w["sid"]})
    assert "warnings" not in saved, saved
    # a plain act, then text the page always shows: warned at once, naming the write
    first = w["mcp"].ok("reticle_act", dict(QUIET, sessionId=w["sid"]))
    assert w["mcp"].ok("reticle_assert", {"predicate": {"kind": "text", "contains": "Notes"}, "timeout_ms": 1000,
                                          "sessionId": w["sid"]})["verified"] == "yes"
    saved = w["mcp"].ok("reticle_flow_save", {"name": "quiet-toothless", "since": first["since"],
                                              "sessionId": w["sid"]})
    assert len(saved["warnings"]) == 1 and "POST /api/quiet" in saved["warnings"][0], saved
    assert "--teeth" in saved["warnings"][0] and saved["warnings"][0].startswith("step 1 ")


def test_verify_teeth_calls_a_text_only_flow_toothless_and_a_status_check_not(tmp_path):
    import json as _json
    import xml.etree.ElementTree as ET
    with _verify_project(tmp_path, {"text-only": TOOTHLESS, "status": TOOTHED}) as (app, verify):
        junit, report = tmp_path / "junit.xml", tmp_path / "report.html"
        plain = verify()
        assert plain.returncode == 0, plain.stdout + plain.stderr
        writes = app.count("/api/quiet")
        run = verify("--teeth", "--junit", str(junit), "--report", str(report))
        assert run.returncode == 4, run.stdout + run.stderr
        table = run.stdout
        # the status check has teeth for a failed write, none for the lie (the write answered 200 as before,
        # never sent): a status is no proof the write was kept
        assert "TOOTHLESS for POST /api/quiet, POST /api/quiet (lie)" in table, table
        status_row = next(line for line in table.splitlines() if line.startswith("status"))
        assert status_row.rstrip().endswith("TOOTHLESS for POST /api/quiet (lie)"), table
        # both flows replayed three times (plain, the write faulted, the lie): neither fault reached the server
        assert app.count("/api/quiet") == writes + 2
        cases = ET.parse(str(junit)).getroot().findall(".//testcase")
        toothless = [c for c in cases if c.find("failure") is not None]
        assert len(toothless) == 3 and {t.find("failure").get("type") for t in toothless} == {"toothless"}, \
            junit.read_text()
        assert [t.get("classname") for t in toothless] == ["reticle.flows.status"] + ["reticle.flows.text-only"] * 2
        assert "POST /api/quiet" in toothless[0].find("failure").get("message")
        assert "never checks that the write was kept" in toothless[0].find("failure").get("message")
        html = report.read_text()
        assert "TOOTHLESS for POST /api/quiet" in html and html.count('class="teeth"') == 4, html[:2000]
        data = _json.loads(verify("--teeth", "--json", "text-only").stdout)
        assert data["exitCode"] == 4, data
        assert data["flows"][0]["toothless"] == ["POST /api/quiet", "POST /api/quiet (lie)"], data


def test_verify_teeth_fails_a_write_answered_after_its_plain_act_returned(tmp_path):
    """A plain act (no `until`) returns before its write is answered (here 1.5 s later; on a busy machine any
    write can be): the write, answered while the next step ran, is still the act's, named in its step and failed
    on purpose by --teeth, so a flow whose only check is text the page always shows is TOOTHLESS for it."""
    import json as _json
    slow = {"target": {"role": "button", "name": "Save slowly"}, "action": "click"}
    with _verify_project(tmp_path, {"slow-text": [slow, {"assert": {"kind": "text", "contains": "Notes"}}]}) as (
            app, verify):
        plain = _json.loads(verify("--json", "slow-text").stdout)
        assert plain["exitCode"] == 0 and app.count("/api/slow") == 1, plain
        # named once: by the click (quiet machine), or by the assert when the daemon heard of the write only after
        # the assert began (the page's report comes late on a busy one); never by neither
        named = [s.get("writes") for s in plain["flows"][0]["steps"]]
        assert sorted(named, key=str) == sorted([[{"method": "POST", "path": "/api/slow"}], None], key=str), plain
        data = _json.loads(verify("--teeth", "--json", "slow-text").stdout)
        assert data["exitCode"] == 4, data
        assert data["flows"][0]["toothless"] == ["POST /api/slow", "POST /api/slow (lie)"], data
        assert app.count("/api/slow") == 2  # the plain replay of the teeth run; neither fault reached the server


SK_CREATED = [{"target": {"role": "button", "name": "Create note"}, "action": "click", "timeout_ms": 6000,
               "until": {"kind": "text", "contains": "Note created"}}]


def test_verify_teeth_replays_a_sveltekit_write_with_its_frameworks_own_failure(tmp_path):
    """Issue 29 #7: a write whose answer is a SvelteKit action envelope is also replayed failing the way
    SvelteKit fails (HTTP 200, `{"type": "failure", "status": 400, ...}`), never reaching the server.  The
    flow that waits for "Note created" has teeth for it; a write in no such format gets no such replay."""
    import json as _json
    with _verify_project(tmp_path, {"sk": SK_CREATED, "status": TOOTHED}) as (app, verify):
        data = _json.loads(verify("--teeth", "--json").stdout)
        flows_by = {f["name"]: f for f in data["flows"]}
        sk = flows_by["sk"]
        assert sk["verified"] == "yes", sk
        rows = {t["as"]: t for t in sk["teeth"]}
        assert sorted(rows) == ["envelope", "failed", "lie"], sk["teeth"]
        assert rows["envelope"]["verified"] == "no" and not rows["envelope"]["toothless"], rows["envelope"]
        assert "failed on purpose" in rows["envelope"]["because"], rows["envelope"]
        assert sk["toothless"] == ["POST /sk (lie)"], sk
        assert app.count("/sk") == 1  # the plain run only: neither fault reached the server
        assert [t["as"] for t in flows_by["status"]["teeth"]] == ["failed", "lie"], flows_by["status"]


MANY = {"target": {"role": "button", "name": "Store all 30"}, "action": "click", "timeout_ms": 15000,
        "until": {"kind": "allOf", "predicates": [{"kind": "text", "contains": "Stored all"},
                                                  {"kind": "net", "method": "POST", "urlContains": "/api/many/17",
                                                   "status": 200}]}}


def test_verify_teeth_is_bounded_on_a_30_write_page_and_names_what_it_left_untested(tmp_path):
    """Issue 27 item 6: a page that makes 30 writes gets at most 8 teeth replays (the write its check
    looks at first, then the first ones made), and every report names the 22 it left untested."""
    import json as _json
    import xml.etree.ElementTree as ET
    import reticle
    with _verify_project(tmp_path, {"many": [dict(MANY)]}) as (app, verify):
        junit, report = tmp_path / "junit.xml", tmp_path / "report.html"
        run = verify("--teeth", "--json", "--junit", str(junit), "--report", str(report), timeout=400)
        # each tested write had teeth when it failed, none under the lie (answered 200 as before, never sent:
        # text and a status do not check that a write was kept): exit 4; untested ones do not fail
        assert run.returncode == 4, run.stdout + run.stderr
        flow = _json.loads(run.stdout)["flows"][0]
        tested = [t["write"] for t in flow["teeth"] if t["as"] == "failed"]
        assert tested == ["POST /api/many/17"] + ["POST /api/many/%d" % n for n in range(7)], tested
        assert [t["write"] for t in flow["teeth"] if t["as"] == "lie"] == tested
        assert not any(t["toothless"] for t in flow["teeth"] if t["as"] == "failed") and flow["teethMax"] == 8
        assert flow["toothless"] == ["%s (lie)" % w for w in tested], flow["teeth"]
        untested = ["POST /api/many/%d" % n for n in range(7, 30) if n != 17]
        assert flow["teethUntested"] == untested, flow.get("teethUntested")
        # bounded: the page's first write reached the server once per replay (the plain one and the 14 teeth
        # replays that did not fail it or lie to it on purpose), not 30 times
        assert app.count("/api/many/0") == 1 + 14, app.count("/api/many/0")
        assert len([p for p, _ in app.writes if p.startswith("/api/many/")]) <= 30 + 16 * 29
        assert "22 write(s) left untested" in run.stderr, run.stderr
        skipped = [c for c in ET.parse(str(junit)).getroot().iter("testcase") if c.find("skipped") is not None]
        assert [c.get("name") for c in skipped] == ["teeth: %s answered 500" % w for w in untested]
        assert "--teeth-max 8" in skipped[0].find("skipped").get("message")
        html = report.read_text()
        assert html.count('class="untested"') == 22 and "POST /api/many/29" in html
        table = reticle._verify_table([flow]).splitlines()
        assert "TOOTHLESS for 8 replay(s); 22 UNTESTED (over --teeth-max 8)" in table[2], table
        assert table[3].startswith("many: 22 write(s) left untested") and table[3].endswith("POST /api/many/29")


def test_a_devices_faults_end_when_it_closes(device_world):
    w, app = device_world, device_world["app"]
    fault = _fault(w, FAULT_500, sid=w["other_sid"], client=w["other"])
    assert fault["live"]
    w["other"].ok("reticle_close", {"sessionId": w["other_sid"]})
    sid = w["other"].ok("reticle_open", {"url": w["server"].url + "/"})["sessionId"]
    w["other_sid"] = sid
    assert w["other"].ok("reticle_fault", {"list": True, "sessionId": sid})["faults"] == []
    before = app.count("/api/save")
    assert _act(w, SAVE, SAVED_200, sid=sid, client=w["other"])["verified"] == "yes"
    assert app.count("/api/save") == before + 1
