"""Faults and teeth as pure functions (issue 21), no browser: what a fault matches, which records it
marks (and that a page cannot mark its own), the sentence `because` gains, what a step's `expect`
means, which checks are presence-only, and how `reticle verify --teeth` reports and exits."""

import os
import xml.etree.ElementTree as ET

import pytest

import reticle


def _fault(fid="f00000001", **spec):
    spec.setdefault("match", {"urlContains": "/api/save", "method": "POST"})
    spec.setdefault("respond", {"status": 500})
    return reticle._Fault(fid, "me", "s1", spec, 0.0)


@pytest.mark.parametrize("text, pattern", [("/api/save", "*/api/save*"), ("a*b?c", r"*a\*b\?c*"),
                                           ("x\\y", r"*x\\y*")])
def test_a_cdp_pattern_matches_any_url_containing_the_text(text, pattern):
    assert reticle._cdp_pattern(text) == pattern


@pytest.mark.parametrize("match, method, url, rtype, fits", [
    ({"urlContains": "/api/save", "method": "POST"}, "POST", "http://h/api/save", "fetch", True),
    ({"urlContains": "/api/save", "method": "POST"}, "post", "http://h/api/save?x=1", None, True),
    ({"urlContains": "/api/save", "method": "POST"}, "GET", "http://h/api/save", "fetch", False),
    ({"urlContains": "/api/save"}, "PUT", "http://h/api/other", "fetch", False),
    ({"urlContains": "/api", "resourceType": "fetch"}, "GET", "http://h/api", "xhr", True),  # one family
    ({"urlContains": "/api", "resourceType": "document"}, "GET", "http://h/api", "xhr", False),
    ({"urlContains": "/ws", "resourceType": "websocket"}, "GET", "ws://h/ws", "websocket", True),
])
def test_what_a_fault_matches(match, method, url, rtype, fits):
    assert _fault(match=match).fits(method, url, rtype) is fits


def test_a_fault_ends_with_its_times_its_ttl_and_a_clear():
    f = _fault(times=2, ttlMs=1000)
    assert f.live(10.0)
    f.hits = 2
    assert not f.live(10.0)
    f = _fault(ttlMs=1000)
    assert f.live(999.0) and not f.live(1000.0)
    f.cleared = True
    assert not f.live(10.0)
    assert _fault(abort=True, respond=None, delayMs=200).what() == "aborted after 200 ms"
    assert _fault(respond=None, delayMs=300).what() == "delayed 300 ms"


@pytest.mark.parametrize("args, words", [
    ({"match": {"urlContains": "/x"}}, "needs `respond"),
    ({"match": {"urlContains": "/x"}, "respond": {"status": 500}, "abort": True}, "not both"),
    ({"clear": True, "list": True}, "exactly one"),
    ({}, "none of them"),
    ({"list": True, "times": 2}, "takes no times"),
    ({"match": {"urlContains": "/ws", "resourceType": "websocket"}, "abort": True, "delayMs": 5}, "dropped"),
    ({"match": {"urlContains": "/x"}, "delayMs": 5}, None),
    ({"clear": "f00000001"}, None),
])
def test_fault_arguments_the_schema_lets_through(args, words):
    problem = reticle._fault_spec_problem(args)
    assert (problem is None) if words is None else (words in problem), problem


@pytest.fixture
def hub(tmp_path):
    return reticle.Hub(state_dir=str(tmp_path / "state"), port=4999)


def _tab(hub, sid="s1"):
    session = reticle._BrowserSession(hub.bridge, None, {"sessionId": sid, "url": "http://127.0.0.1:9/"})
    hub.bridge.sessions[sid] = session
    return session


def _request(faultId=None, method="POST", url="http://127.0.0.1:9/api/save", status=500, **extra):
    data = dict({"requestId": "n1", "method": method, "url": url, "status": status, "ok": False}, **extra)
    if faultId is not None:
        data["faultId"] = faultId
    return {"type": "net.request", "data": data}


def _last(session):
    return session.store.query(0)[-1]["data"]


def test_the_script_tag_marks_only_its_tabs_own_faults(hub):
    tab, other = _tab(hub), _tab(hub, "s2")
    f = _fault()
    hub.faults.tabs["s1"] = {f.id: f}
    tab.ingest([_request(f.id)], 100)
    assert _last(tab)["faulted"] is True and _last(tab)["faultId"] == f.id and f.hits == 1
    # a page naming a fault it was never given, or another tab's, or claiming faulted itself: no mark
    tab.ingest([_request("f99999999", faulted=True)], 100)
    assert "faulted" not in _last(tab) and "faultId" not in _last(tab)
    other.ingest([_request(f.id, faulted=True)], 100)
    assert "faulted" not in _last(other) and f.hits == 1


def test_in_a_device_the_daemon_marks_what_its_network_layer_answered(hub):
    tab = _tab(hub)
    tab.device = object()  # the SDK's own claim is not believed in a device: the CDP hit is
    f = _fault()
    hub.faults.tabs["s1"] = {f.id: f}
    tab.ingest([_request(f.id)], 100)
    assert "faulted" not in _last(tab)
    assert hub.faults.take("s1", "POST", "http://127.0.0.1:9/api/save", "fetch") is f
    assert hub.faults.take("s1", "GET", "http://127.0.0.1:9/api/save", "fetch") is None
    tab.ingest([_request(method="GET", status=200)], 100)
    assert "faulted" not in _last(tab)  # another method: not the request the fault answered
    tab.ingest([_request()], 100)
    assert _last(tab)["faultId"] == f.id
    tab.ingest([_request()], 100)
    assert "faulted" not in _last(tab)  # one hit marks one record


def test_faults_of_a_tab_that_is_gone_are_dropped(hub):
    _tab(hub)
    hub.faults.tabs["s1"] = {"f00000001": _fault()}
    assert len(hub.faults.live("s1")) == 1
    del hub.bridge.sessions["s1"]
    assert hub.faults.live("s1") == [] and "s1" not in hub.faults.tabs


def _window(*calls):
    return [{"t": float(i), "type": "net.request", "data": d} for i, d in enumerate(calls)]


def test_because_says_when_the_deciding_evidence_was_faulted():
    faulted = {"method": "POST", "url": "http://h/api/save", "status": 500, "faulted": True, "faultId": "f1"}
    real = {"method": "GET", "url": "http://h/api/list", "status": 200}
    assert reticle._faulted_note("held.", _window(real), {"evidence": real}) == "held."
    out = reticle._faulted_note("POST http://h/api/save answered 500, not as asked", _window(real, faulted),
                                {"observed": ["POST http://h/api/save → 500"]})
    assert out == ("POST http://h/api/save answered 500, not as asked. The deciding evidence was faulted on purpose: "
                   "POST http://h/api/save was answered by fault f1, not by the server.")
    out = reticle._faulted_note("the page settled.", _window(real, faulted), {"evidence": {"settled": True}})
    assert "A request of this window was faulted on purpose" in out and "fault f1" in out


@pytest.mark.parametrize("expect, verified, reason, met", [
    (None, "yes", "proved", True), (None, "no", "assertion_failed", False), ("no", "no", "assertion_failed", True),
    ("no", "no", "contradicted", True), ("no", "yes", "proved", False), ("no", "unknown", "request_in_flight", False),
    ("no", "no", "target_missing", False), ("no", "no", "not_dispatched", False),
])
def test_a_steps_expectation(expect, verified, reason, met):
    step = {"action": "click", "target": {"text": "Save"}}
    if expect:
        step["expect"] = expect
    row = {"verified": verified, "verifiedReason": reason, "because": "b"}
    assert reticle._expectation(step, row) is met
    if expect == "no" and verified == "yes":
        assert "expects no" in row["because"]


@pytest.mark.parametrize("check, presence_only", [
    ({"kind": "text", "contains": "Saved"}, True),
    ({"kind": "element", "query": {"role": "status"}}, True),
    ({"kind": "net", "method": "POST", "urlContains": "/api/save"}, True),
    ({"kind": "net", "method": "POST", "urlContains": "/api/save", "ok": True}, False),
    ({"kind": "allOf", "predicates": [{"kind": "text", "contains": "Saved"},
                                      {"kind": "net", "urlContains": "/api/save", "status": 200}]}, False),
    ({"kind": "not", "predicate": {"kind": "net", "urlContains": "/x", "status": 500}}, True),
    ({"kind": "signal", "name": "saved"}, False),
])
def test_which_checks_are_presence_only(check, presence_only):
    assert reticle._blind_to_writes(check) is presence_only


def test_flow_save_warns_for_each_presence_only_check_over_a_write():
    write = [{"method": "POST", "path": "/api/save"}]
    journey = [{"action": "click", "target": {"text": "Save"}, "until": {"kind": "text", "contains": "Saved"},
                "writes": write},
               {"action": "click", "target": {"text": "Save"}, "writes": []},
               {"assert": {"kind": "text", "contains": "Saved"}, "writes": write},
               {"action": "click", "target": {"text": "Save"},
                "until": {"kind": "net", "urlContains": "/api/save", "ok": True}, "writes": write},
               {"assert": {"kind": "text", "contains": "Saved"}, "writes": write}]
    warnings = reticle._toothless_warnings(journey)
    assert [w.split(" ")[1] for w in warnings] == ["0", "2"], warnings
    assert "POST /api/save" in warnings[0] and '"ok": true' in warnings[0] and "--teeth" in warnings[0]


def _result(name, verified="yes", teeth=None):
    r = {"name": name, "verified": verified, "ms": 10, "because": "b",
         "steps": [{"index": 0, "step": "click text=Save", "verified": "yes", "ms": 5}]}
    if teeth is not None:
        r["teeth"] = teeth
        r["toothless"] = [t["write"] for t in teeth if t["toothless"]]
    return r


TOOTHLESS = [{"write": "POST /api/save", "verified": "yes", "toothless": True, "ms": 7, "because": "all yes"}]
TOOTHED = [{"write": "POST /api/save", "verified": "no", "toothless": False, "ms": 7, "because": "step 0 is no"}]


def test_verify_exits_4_for_a_toothless_flow_after_every_other_code():
    assert reticle._verify_exit([_result("a", teeth=TOOTHED)]) == 0
    assert reticle._verify_exit([_result("a", teeth=TOOTHLESS), _result("b", teeth=TOOTHED)]) == 4
    assert reticle._verify_exit([_result("a", teeth=TOOTHLESS), _result("b", "unknown")]) == 2
    assert reticle._verify_exit([_result("a", teeth=TOOTHLESS), _result("b", "no")]) == 1
    assert reticle._verify_exit([_result("a", teeth=TOOTHLESS), _result("b", "error")]) == 3


def test_junit_and_the_report_name_the_write_a_flow_is_toothless_for():
    results = [_result("text-only", teeth=TOOTHLESS), _result("status", teeth=TOOTHED), _result("plain")]
    results[2]["steps"].append({"index": 1, "step": "click text=Save", "verified": "no", "expect": "no",
                                "met": True, "ms": 3})
    root = ET.fromstring(reticle._junit_xml(results))
    assert root.get("failures") == "1" and root.get("tests") == "6"
    failures = [(c.get("classname"), c.get("name"), c.find("failure")) for c in root.iter("testcase")
                if c.find("failure") is not None]
    assert [(cls, name, f.get("type")) for cls, name, f in failures] == [
        ("reticle.flows.text-only", "teeth: POST /api/save answered 500", "toothless")]
    assert "POST /api/save" in failures[0][2].get("message")
    html = reticle._html_report(results)
    assert "TOOTHLESS for POST /api/save" in html and "teeth for POST /api/save" in html
    assert html.count('class="teeth"') == 2 and "exit code 4" in html
    table = reticle._verify_table(results)
    assert "TOOTHLESS for POST /api/save" in table.splitlines()[2] and "teeth" in table.splitlines()[0]


def test_teeth_plan_tests_the_checked_writes_first_and_bounds_the_rest():
    writes = [{"method": "POST", "path": "/api/w/%d" % n} for n in range(12)] + [
        {"method": "PUT", "path": "/api/w/5"}, {"method": "POST", "path": "/form", "form": True}]
    flow = {"steps": [{"action": "click", "target": {"text": "Go"}, "until": {"kind": "allOf", "predicates": [
        {"kind": "text", "contains": "ok"}, {"kind": "net", "method": "PUT", "urlContains": "/api/w/5", "ok": True},
        {"kind": "not", "predicate": {"kind": "net", "urlContains": "/api/w/3"}}]}},
        {"assert": {"kind": "server", "urlContains": "/form", "status": 303}}]}
    chosen, untested = reticle._teeth_plan(flow, writes, 4)
    assert [reticle._write_label(w) for w in chosen] == [
        "PUT /api/w/5", "POST /form (form post)", "POST /api/w/0", "POST /api/w/1"]
    assert [w["path"] for w in untested] == ["/api/w/%d" % n for n in range(2, 12)]
    assert reticle._teeth_plan(flow, writes, 0) == ([], reticle._teeth_plan(flow, writes, 99)[0])
    assert reticle._teeth_plan(flow, writes, 99)[1] == []


def test_teeth_max_takes_a_whole_number(capsys):
    assert reticle.main(["verify", "--teeth", "--teeth-max", "-1"]) == 2
    assert "-1 is negative; give 0 or more" in capsys.readouterr().err
    assert reticle.main(["verify", "--teeth-max", "lots"]) == 2
    assert "'lots' is not a whole number" in capsys.readouterr().err
    assert reticle.main(["verify", "--teeth-max", "3", "no-such-flow"]) == 2  # a bound of nothing
    assert "give it with --teeth" in capsys.readouterr().err


def test_a_flow_as_a_pytest_item_passes_only_when_yes_and_not_toothless():
    assert reticle._pytest_failure(_result("a")) is None
    assert reticle._pytest_failure(_result("a", teeth=TOOTHED)) is None
    unknown = dict(_result("a", "unknown"), because="step 0 (click text=Save) is unknown: no server record",
                   failedStep=0)
    unknown["steps"][0].update(verified="unknown", evidence={"failureReason": "no_server_records"})
    text = reticle._pytest_failure(unknown)
    assert text.startswith("verified: unknown: step 0") and "no_server_records" in text, text
    assert "toothless for POST /api/save" in reticle._pytest_failure(_result("a", teeth=TOOTHLESS))
    assert reticle._pytest_failure({"name": "a", "verified": "error", "error": "no flow 'a'"}) == \
        "setup error: no flow 'a'"


def test_a_saved_login_is_0600_git_ignored_and_expires_with_its_cookies(tmp_path):
    path = reticle._save_auth_state(str(tmp_path), "login", {"format": 1, "origins": [], "cookies": [
        {"name": "sid", "value": "v1", "expires": 2000000000.0}, {"name": "s", "value": "v2"}]})
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert (tmp_path / ".reticle" / "auth" / ".gitignore").read_text().splitlines()[-1] == "*"
    state = reticle._load_auth_state(str(tmp_path), "login")
    assert reticle._auth_expired(state, now=1999999999.0) == 0 and reticle._auth_expired(state, now=2000000001.0) == 1
    assert reticle._load_auth_state(str(tmp_path), "other") is None
    (tmp_path / ".reticle" / "auth" / "bad.json").write_text('{"cookies": "sid=v3"}')
    with pytest.raises(reticle.ToolError) as err:
        reticle._load_auth_state(str(tmp_path), "bad")
    assert "v3" not in err.value.error and "bad.json" in err.value.error
    # `reticle init`'s .gitignore line: added once, in a git project only
    assert reticle._gitignore_auth(str(tmp_path)) is None  # no .git, no .gitignore
    (tmp_path / ".gitignore").write_text("node_modules/")
    change = reticle._gitignore_auth(str(tmp_path))
    assert change.new == "node_modules/\n# Reticle: setup flows' saved logins (cookies, storage)\n.reticle/auth/\n"
    (tmp_path / ".gitignore").write_text(change.new)
    assert reticle._gitignore_auth(str(tmp_path)) is None
