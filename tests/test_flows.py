"""Flows (DESIGN section 10): save a verified journey, replay it, and `reticle verify` it for CI,
with real Chromium, a real daemon and a real MCP client against the server-rendered forms fixture
(a login and an add form, both full-page posts with post/redirect/get).  The truth is checked on the
server: what was posted, what was stored."""

import base64
import collections
import contextlib
import json
import os
import re
import subprocess
import time
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
    assert out["verified"] == "yes" and out["verifiedReason"] == "all_steps_met", out
    assert [s["verified"] for s in out["steps"]] == ["yes"] * 6, out["steps"]
    assert all(s["verifiedReason"] and s["because"] for s in out["steps"]), out["steps"]
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
    assert out["verifiedReason"] == failing["verifiedReason"] and out["verifiedReason"], out
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
    # a password typed by target is saved as its variable too (the page says the field is a password)
    mcp.ok("reticle_navigate", {"url": world["app"].url + "/login"})
    typed = mcp.ok("reticle_act", {"target": {"label": "Password"}, "action": "fill", "args": {"value": PASSWORD}})
    saved = mcp.ok("reticle_flow_save", {"name": "pw", "since": typed["since"]})
    text = (project / ".reticle" / "flows" / "pw.json").read_text()
    assert saved["secrets"] == [SECRET_ENV] and PASSWORD not in text and "${%s}" % SECRET_ENV in text, text
    # steps given by the caller: a literal typed into a field named like a secret keeps a variable
    given = mcp.ok("reticle_flow_save", {"name": "given", "steps": [
        {"action": "fill", "target": {"label": "Username"}, "args": {"value": "ann"}},
        {"action": "fill", "target": {"label": "Password"}, "args": {"value": PASSWORD}}]})
    text = (project / ".reticle" / "flows" / "given.json").read_text()
    assert PASSWORD not in text and "${%s}" % SECRET_ENV in text and '"ann"' in text, text
    assert SECRET_ENV in json.dumps(given), given
    # a journey with a step that was not yes is not saved as verified
    mcp.ok("reticle_navigate", {"url": world["app"].url + "/login"})
    miss = mcp.ok("reticle_assert", {"predicate": {"kind": "text", "contains": "never on this page"}})
    assert miss["verified"] == "no", miss
    assert "not verified" in _refused(mcp, "reticle_flow_save", {"name": "half"})
    assert not (project / ".reticle" / "flows" / "half.json").exists()
    data, is_error = mcp.call("reticle_flow_replay", {"flow": {"format": 1, "name": "s", "steps": [
        {"action": "fill", "target": {"label": "Name"}, "args": {"value": "${RETICLE_SECRET_NOPE}"}}]}})
    assert is_error and data.get("variable") == "RETICLE_SECRET_NOPE" and data.get("setup") is True, data
    data, is_error = mcp.call("reticle_flow_replay", {"name": "never-saved"})
    assert is_error and "no flow" in data["error"], data
    # a person's own tab cannot be made fresh: its cookies are theirs
    data, is_error = mcp.call("reticle_flow_replay", {"name": "given", "url": world["app"].url + "/login",
                                                      "fresh": True})
    assert is_error and "`fresh` needs a device" in data["error"] and data.get("setup") is True, data


# -- `reticle verify` as CI runs it: a subprocess, exit codes, JUnit XML, the HTML report ----------

def _write_flow(project, name, start, steps):
    folder = project / ".reticle" / "flows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / (name + ".json")).write_text(json.dumps({"format": 1, "name": name, "startUrl": start,
                                                       "steps": steps}, indent=2))


def _verify(project, state, port, *argv, env=None):
    environ = daemon_env(state, RETICLE_PORT=str(port), **(env or {}))
    return subprocess.run([sys.executable, RETICLE_PY, "verify"] + list(argv), cwd=str(project), env=environ,
                          capture_output=True, text=True, timeout=180)


def _exits(run, code):
    if run.returncode != code:
        pytest.fail("reticle verify exited %d, not %d\n--- stdout\n%s\n--- stderr\n%s"
                    % (run.returncode, code, run.stdout, run.stderr), pytrace=False)


def _dump_dom(path, tmp):
    """The report as Chromium renders it (headless --dump-dom)."""
    args = [chromium_path(), "--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--user-data-dir=" + str(tmp / "dump-profile"), "--dump-dom", "file://" + str(path)]
    if os.geteuid() == 0:
        args.insert(1, "--no-sandbox")
    return subprocess.run(args, capture_output=True, text=True, timeout=60).stdout


LOGIN_STEPS = [
    {"action": "fill", "target": {"label": "Username"}, "args": {"value": "vic"}},
    {"action": "fill", "target": {"role": "textbox", "name": "Password"}, "args": {"value": "${%s}" % SECRET_ENV},
     "secret": SECRET_ENV},
    {"action": "click", "target": {"role": "button", "name": "Log in"},
     "until": {"kind": "text", "contains": "Welcome back"}, "timeout_ms": 8000},
]
ADD_STEPS = [
    {"action": "fill", "target": {"label": "Name"}, "args": {"value": "Vic"}},
    {"action": "click", "target": {"role": "button", "name": "Add record"}, "timeout_ms": 8000, "until": {
        "kind": "allOf", "predicates": [{"kind": "net", "method": "POST", "urlContains": "/records", "ok": True},
                                        {"kind": "text", "contains": "Record 'Vic' added"}]}},
    {"assert": {"kind": "text", "contains": "Vic"}},
]


def test_reticle_verify_exit_codes_junit_and_report(tmp_path):
    from _harness import free_port
    port = free_port()
    project = tmp_path / "app"
    forms = FormsApp("http://127.0.0.1:%d" % port)
    secret = {SECRET_ENV: PASSWORD}
    with contextlib.ExitStack() as stack:
        app = _keep(stack, AppServer(forms.routes()))
        _write_flow(project, "login", app.url + "/login", LOGIN_STEPS)
        _write_flow(project, "add", app.url + "/records", ADD_STEPS)

        # green, with no daemon running: verify starts one, replays both flows on two devices, stops it
        junit, report = tmp_path / "junit.xml", tmp_path / "report.html"
        run = _verify(project, tmp_path / "state1", port, "--jobs", "2", "--junit", str(junit),
                      "--report", str(report), env=secret)
        _exits(run, 0)
        assert list(forms.records.values()) == ["Vic"]
        assert "login" in run.stdout and "add" in run.stdout and "yes" in run.stdout, run.stdout
        assert "[1/2]" in run.stderr or "[2/2]" in run.stderr, run.stderr  # progress on stderr
        wait_until(lambda: get_port_free(port), 10, what="the daemon verify started to stop")
        root = ET.parse(str(junit)).getroot()
        assert root.tag == "testsuites" and root.get("failures") == "0" and root.get("tests") == "6"
        assert sorted(s.get("name") for s in root.findall("testsuite")) == ["add", "login"]

        # a server-side fault: exit 1, the failing step in the table, JUnit and the report with its screenshot
        daemon = _keep(stack, Daemon(tmp_path / "state2", port=port))
        forms.records.clear()
        forms.fault = True
        try:
            run = _verify(project, tmp_path / "state2", port, "login", "add", "--jobs", "2", "--url", app.url,
                          "--junit", str(junit), "--report", str(report), env=secret)
        finally:
            forms.fault = False
        _exits(run, 1)
        line = [ln for ln in run.stdout.splitlines() if ln.startswith("add ")][0]
        assert " no " in line and "step 1" in line and "Add record" in line, run.stdout
        assert daemon.status()["running"] is True  # a daemon verify did not start keeps running
        root = ET.parse(str(junit)).getroot()
        assert root.tag == "testsuites" and int(root.get("tests")) == 6 and root.get("failures") == "1"
        suites = {s.get("name"): s for s in root.findall("testsuite")}
        add = suites["add"]
        assert (add.get("tests"), add.get("failures"), add.get("skipped")) == ("3", "1", "1")
        cases = add.findall("testcase")
        assert all(c.get("name") and c.get("classname") == "reticle.flows.add" and float(c.get("time")) >= 0
                   for c in cases)
        failure = cases[1].find("failure")
        assert failure is not None and failure.get("message") and failure.get("type") == "no"
        assert "500" in (failure.text or "") + failure.get("message"), failure.text
        assert cases[2].find("skipped") is not None and cases[0].find("failure") is None
        assert suites["login"].get("failures") == "0"
        dom = _dump_dom(report, tmp_path)
        assert 'id="flow-login"' in dom and 'id="flow-add"' in dom, dom[:2000]
        shots = re.findall(r'<img[^>]+src="data:image/png;base64,([A-Za-z0-9+/=]+)"', dom)
        assert len(shots) == 1 and base64.b64decode(shots[0])[:8] == b"\x89PNG\r\n\x1a\n"
        assert "Add record" in dom and "assertion_failed" in dom

        # in a device the browser saw the redirected post's own 302 (issue 29 #2): a status like any other
        forms.records.clear()
        _write_flow(project, "status", app.url + "/records", ADD_STEPS[:1] + [
            {"action": "click", "target": {"role": "button", "name": "Add record"}},
            {"assert": {"kind": "net", "method": "POST", "urlContains": "/records", "status": 302}}])
        run = _verify(project, tmp_path / "state2", port, "status", "--json", env=secret)
        _exits(run, 0)
        # unknown: a document's response headers are not captured -> exit 2
        forms.records.clear()
        _write_flow(project, "header", app.url + "/records", ADD_STEPS[:1] + [
            {"action": "click", "target": {"role": "button", "name": "Add record"}},
            {"assert": {"kind": "net", "method": "POST", "urlContains": "/records", "header": {"name": "location"}}}])
        run = _verify(project, tmp_path / "state2", port, "header", "--json", env=secret)
        _exits(run, 2)
        out = json.loads(run.stdout)
        assert out["exitCode"] == 2 and out["flows"][0]["verified"] == "unknown"
        assert "headers were not captured" in json.dumps(out), out

        # every flow starts clean: the job's next flow reuses the browser but none of the cookies
        _write_flow(project, "signed-in", app.url + "/login", LOGIN_STEPS + [
            {"assert": {"kind": "storage", "area": "cookies", "key": "user", "equals": "vic"}}])
        _write_flow(project, "anonymous", app.url + "/records", [
            {"assert": {"kind": "storage", "area": "cookies", "key": "user", "absent": True}}])
        run = _verify(project, tmp_path / "state2", port, "signed-in", "anonymous", "--jobs", "1", "--json", env=secret)
        _exits(run, 0)
        assert [f["verified"] for f in json.loads(run.stdout)["flows"]] == ["yes", "yes"], run.stdout

        # setup errors -> exit 3 with the reason: a secret the environment lacks, a flow that does not exist
        run = _verify(project, tmp_path / "state2", port, "login")
        assert run.returncode == 3 and SECRET_ENV in run.stdout, (run.stdout, run.stderr)
        run = _verify(project, tmp_path / "state2", port, "nope", env=secret)
        assert run.returncode == 3 and "no flow 'nope'" in run.stdout, (run.stdout, run.stderr)


def get_port_free(port):
    from _harness import port_listens
    return not port_listens(port)


def test_an_act_sequence_is_part_of_the_journey(world):
    mcp, project = world["mcp"], world["project"]
    mcp.ok("reticle_navigate", {"url": world["app"].url + "/login"})
    seq = mcp.ok("reticle_act_sequence", {"steps": [
        {"action": "fill", "target": {"label": "Username"}, "args": {"value": "ann"}},
        {"action": "fill", "target": {"label": "Password"}, "args": {"value": PASSWORD}}]})
    saved = mcp.ok("reticle_flow_save", {"name": "sequence", "since": seq["since"]})
    flow = json.loads((project / ".reticle" / "flows" / "sequence.json").read_text())
    assert [s.get("target") for s in flow["steps"]] == [{"label": "Username"}, {"label": "Password"}], flow
    assert PASSWORD not in json.dumps(flow) and saved["secrets"] == [SECRET_ENV], flow


# -- issue 19: a flow cannot make the replaying process type its environment into any page ---------

PHISH = """<!doctype html><title>sign in again</title>
<label>Password <input id="pw" type="text"></label>
<script>document.getElementById('pw').addEventListener('input', function (e) {
  navigator.sendBeacon('/got', e.target.value); });</script>"""
HOP = """<!doctype html><title>hop</title><a href="%(daemon)s/again">Continue</a>"""
FORM = """<!doctype html><title>form</title><label>Password <input id="pw" type="text"></label>"""


class _Got:
    def __init__(self):
        self.values = []


def _phish_servers():
    import tornado.web

    from _harness import TemplatePage
    got = _Got()

    class Got(tornado.web.RequestHandler):
        def post(self):
            got.values.append(self.request.body.decode("utf-8", "replace"))

    evil = AppServer([(r"/got", Got), (r"/again", TemplatePage, {"template": PHISH, "daemon": ""})])
    good = AppServer([(r"/form", TemplatePage, {"template": FORM, "daemon": ""}),
                      (r"/.*", TemplatePage, {"template": HOP, "daemon": evil.url})])
    return good, evil, got


def test_a_flow_reads_only_reticle_secret_variables(world):
    mcp = world["mcp"]
    for name in ("HOME", "GITHUB_TOKEN", "RETICLE_TOKEN", "reticle_secret_x"):
        data, is_error = mcp.call("reticle_flow_replay", {"flow": {"format": 1, "name": "env", "steps": [
            {"action": "fill", "target": {"label": "Username"}, "args": {"value": "a ${%s} b" % name}}]}})
        assert is_error and data.get("setup") is True and data.get("variable") == name, data
        assert "only RETICLE_SECRET_" in data["error"], data


def test_a_secret_is_typed_only_into_the_origin_it_was_recorded_on(world):
    mcp = world["mcp"]
    good, evil, got = _phish_servers()
    try:
        sid = mcp.ok("reticle_open", {"url": good.url + "/"})["sessionId"]
        # the flow starts on the app, then a click takes it to another origin before the secret is typed
        flow = {"format": 1, "name": "hop", "startUrl": good.url + "/", "steps": [
            {"action": "click", "target": {"role": "link", "name": "Continue"}},
            {"action": "fill", "target": {"label": "Password"}, "args": {"value": "${%s}" % SECRET_ENV},
             "secret": SECRET_ENV}]}
        data, is_error = mcp.call("reticle_flow_replay", {"flow": flow, "sessionId": sid}, timeout=60)
        assert is_error and data.get("setup") is True, data
        assert "only into the origin" in data["error"] and data.get("allowed") == good.url, data
        time.sleep(0.3)
        assert PASSWORD not in "".join(got.values) and not got.values, got.values
        # the same step on the recorded origin types it
        flow = dict(flow, startUrl=good.url + "/form", steps=flow["steps"][1:])
        out = mcp.ok("reticle_flow_replay", {"flow": flow, "sessionId": sid}, timeout=60)
        assert out["verified"] == "yes", out
    finally:
        mcp.call("reticle_close", {})
        good.close()
        evil.close()


def test_a_replayed_secret_is_saved_again_as_its_variable(world):
    mcp, project = world["mcp"], world["project"]
    sid = mcp.ok("reticle_open", {"url": world["app"].url + "/login"})["sessionId"]
    try:
        flow = {"format": 1, "name": "user-is-secret", "startUrl": world["app"].url + "/login", "steps": [
            {"action": "fill", "target": {"label": "Username"}, "args": {"value": "${%s}" % SECRET_ENV},
             "secret": SECRET_ENV},
            {"assert": {"kind": "text", "contains": "Log in"}}]}
        out = mcp.ok("reticle_flow_replay", {"flow": flow, "sessionId": sid}, timeout=60)
        assert out["verified"] == "yes", out
        # issue 29 #7: a replay's steps are not the agent's journey: nothing of them is saved unless asked
        refused, is_error = mcp.call("reticle_flow_save", {"name": "again", "sessionId": sid, "since": 0})
        assert is_error and "were a flow's replay" in refused["error"] and "replayed" in refused["recovery"], refused
        assert not (project / ".reticle" / "flows" / "again.json").exists()
        assert PASSWORD not in json.dumps(refused)
        saved = mcp.ok("reticle_flow_save", {"name": "again", "sessionId": sid, "since": 0, "replayed": True})
        text = (project / ".reticle" / "flows" / "again.json").read_text()
        assert PASSWORD not in text and "${%s}" % SECRET_ENV in text, text
        assert saved["secrets"] == [SECRET_ENV], saved
    finally:
        mcp.call("reticle_close", {})


def test_a_journey_over_two_origins_is_not_saved_as_one_flow(world):
    """Issue 29 #7: steps on two apps' origins are an error naming both, unless `origin` picks one."""
    mcp, project = world["mcp"], world["project"]
    one = world["app"].url
    other = one.replace("127.0.0.1", "localhost")
    sid = mcp.ok("reticle_open", {"url": one + "/login"})["sessionId"]
    try:
        assert mcp.ok("reticle_assert", {"predicate": {"kind": "text", "contains": "Log in"},
                                         "sessionId": sid})["verified"] == "yes"
        assert mcp.ok("reticle_navigate", {"url": other + "/login", "sessionId": sid})["confirmed"] is True
        assert mcp.ok("reticle_assert", {"predicate": {"kind": "text", "contains": "Log in"},
                                         "sessionId": sid})["verified"] == "yes"
        refused, is_error = mcp.call("reticle_flow_save", {"name": "mixed", "sessionId": sid, "since": 0})
        said = json.dumps(refused)
        assert is_error and one in said and other in said, refused
        assert not (project / ".reticle" / "flows" / "mixed.json").exists()
        saved = mcp.ok("reticle_flow_save", {"name": "mixed", "sessionId": sid, "since": 0, "origin": other})
        assert saved["steps"] == 1, saved
    finally:
        mcp.call("reticle_close", {})


def test_a_fifo_among_the_flows_stalls_no_client(world, tmp_path):
    """Issue 27 item 9: a FIFO named x.json in .reticle/flows is named, never opened to wait for a
    writer; the daemon serves another client meanwhile, and verify names it as a setup error."""
    import concurrent.futures
    import reticle
    mcp, project = world["mcp"], world["project"]
    folder = project / ".reticle" / "flows"
    folder.mkdir(parents=True, exist_ok=True)
    fifo = folder / "x.json"
    os.mkfifo(str(fifo))
    other = Mcp(world["daemon"].url + "/mcp")
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            t0 = time.monotonic()
            listing = pool.submit(mcp.ok, "reticle_flow_list", {}, 10)
            served = pool.submit(other.ok, "reticle_sessions", {}, 10)
            flows = {f["name"]: f for f in listing.result(12)["flows"]}
            assert "sessions" in served.result(12)
        assert time.monotonic() - t0 < 5
        assert "FIFO" in flows["x"]["problem"] and "skipped unread" in flows["x"]["problem"], flows["x"]
        data, is_error = other.call("reticle_flow_replay", {"name": "x"}, timeout=10)
        assert is_error and "FIFO" in data["error"], data
        got, errors = reticle._verify_load([str(folder / "x.json")], str(project))
        assert got == [] and errors[0]["name"] == "x" and "FIFO" in errors[0]["error"], errors
        # a path typed on verify's command line may still be a link to a flow file (never to a FIFO)
        (tmp_path / "good.json").write_text(json.dumps({"format": 1, "name": "good", "startUrl": "http://x/",
                                                        "steps": [{"assert": {"kind": "text", "contains": "x"}}]}))
        (tmp_path / "typed.json").symlink_to(tmp_path / "good.json")
        (tmp_path / "pipe.json").symlink_to(fifo)
        got, errors = reticle._verify_load([str(tmp_path / "typed.json"), str(tmp_path / "pipe.json")],
                                           str(project))
        assert [f["name"] for f in got] == ["good"] and "FIFO" in errors[0]["error"], errors
    finally:
        other.close()
        with contextlib.suppress(OSError):  # release a daemon that did open it (the code before the fix)
            os.close(os.open(str(fifo), os.O_WRONLY | os.O_NONBLOCK))
        fifo.unlink()


def test_a_flow_name_with_a_trailing_newline_is_refused(world):
    error = _refused(world["mcp"], "reticle_flow_save", {"name": "ok\n", "steps": [
        {"action": "click", "target": {"text": "Go"}}]})
    assert "not a flow name" in error, error
    assert not reticle_flow_files(world["project"], "ok\n")


def reticle_flow_files(project, name):
    folder = project / ".reticle" / "flows"
    return [p for p in folder.iterdir() if p.name.startswith(name)] if folder.exists() else []


def test_a_symlinked_flows_folder_is_never_written_through(world, tmp_path):
    mcp, project = world["mcp"], world["project"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.json").write_text('{"keep": true}')
    folder = project / ".reticle" / "flows"
    folder.mkdir(parents=True, exist_ok=True)
    saved = project / ".reticle" / "flows-real"
    folder.rename(saved)
    try:
        folder.symlink_to(outside)
        error = _refused(mcp, "reticle_flow_save", {"name": "victim", "steps": [
            {"action": "click", "target": {"text": "Go"}}]})
        assert "symbolic link" in error, error
        assert json.loads((outside / "victim.json").read_text()) == {"keep": True}
        data, is_error = mcp.call("reticle_flow_replay", {"name": "victim"})
        assert is_error and "symbolic link" in data["error"], data
    finally:
        folder.unlink()
        saved.rename(folder)


def test_a_fresh_replay_opens_http_pages_only(world):
    mcp = world["mcp"]
    sid = mcp.ok("reticle_open", {"url": world["app"].url + "/login"})["sessionId"]
    try:
        for start in ("file:///etc/passwd", "chrome://version", "data:text/html,<p>x", "view-source:http://a/"):
            data, is_error = mcp.call("reticle_flow_replay", {"sessionId": sid, "fresh": True, "flow": {
                "format": 1, "name": "bad-start", "startUrl": start,
                "steps": [{"assert": {"kind": "text", "contains": "x"}}]}})
            assert is_error and "http: and https: pages only" in data["error"], (start, data)
    finally:
        mcp.call("reticle_close", {})


def test_hostile_flow_files_are_setup_errors_not_crashes(tmp_path):
    import reticle

    folder = tmp_path / ".reticle" / "flows"
    folder.mkdir(parents=True)
    (folder / "deep.json").write_text('{"format": 1, "name": "deep", "steps": ' + "[" * 200000 + "]" * 200000 + "}")
    (folder / "huge.json").write_text('{"format": 1, "name": "huge", "note": "' + "x" * (2 << 20) + '", "steps": []}')
    (folder / "surrogate.json").write_text('{"format": 1, "name": "bad\\ud800", "steps": [{"assert": '
                                           '{"kind": "text", "contains": "x"}}]}')
    (folder / "good.json").write_text(json.dumps({"format": 1, "name": "good", "startUrl": "http://x/",
                                                  "steps": [{"assert": {"kind": "text", "contains": "x"}}]}))
    listed = {f["name"]: f for f in reticle._list_flows(str(tmp_path))}
    assert listed["good"]["steps"] == 1 and "problem" not in listed["good"]
    assert all("problem" in listed[n] for n in ("deep", "huge", "surrogate")), listed
    flows, errors = reticle._verify_load([str(folder)], str(tmp_path))  # a folder of flows works
    assert [f["name"] for f in flows] == ["good"]
    assert sorted(e["name"] for e in errors) == ["deep", "huge", "surrogate"], errors
    # the reports of such results are well-formed XML and encodable
    results = errors + [{"name": "good", "verified": "no", "ms": 1, "failedStep": 0, "because": "x",
                         "steps": [{"index": 0, "step": "assert text \ufffe\uffff\x01", "verified": "no",
                                    "because": "page text \ufffe", "ms": 1}]}]
    ET.fromstring(reticle._junit_xml(results).encode("utf-8"))
    reticle._html_report(results).encode("utf-8")


# -- `reticle verify --shard I/N` and `reticle report merge` (issue 31) ----------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_NAMES = st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True), min_size=0, max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=_NAMES, n=st.integers(1, 9), timed=st.booleans(), data=st.data())
def test_shards_are_disjoint_cover_every_flow_and_ignore_the_lists_order(names, n, timed, data):
    import reticle
    durations = None
    if timed and names:
        durations = {x: data.draw(st.integers(1, 60000)) for x in data.draw(st.lists(st.sampled_from(names)))}
    plan = reticle._shard_plan(names, n, durations)
    assert len(plan) == len(names) and all(0 <= s < n for s in plan)  # each flow in exactly one shard
    parts = [[i for i, s in enumerate(plan) if s == k] for k in range(n)]
    assert sorted(i for part in parts for i in part) == list(range(len(names)))
    if not durations:
        sizes = [len(p) for p in parts]
        assert max(sizes) - min(sizes) <= 1, sizes
    # the split is a function of the set of names, not of where a flow is in the list
    shuffled = data.draw(st.permutations(list(range(len(names)))))
    again = reticle._shard_plan([names[i] for i in shuffled], n, durations)
    mine = collections.Counter((names[i], plan[i]) for i in range(len(names)))
    assert collections.Counter((names[i], again[k]) for k, i in enumerate(shuffled)) == mine


def test_adding_a_flow_moves_few_others_and_durations_balance_time():
    import reticle
    names = ["flow-%02d" % i for i in range(40)]
    before = dict(zip(names, reticle._shard_plan(names, 4)))
    after = dict(zip(["aaa-new"] + names, reticle._shard_plan(["aaa-new"] + names, 4)))
    moved = [x for x in names if before[x] != after[x]]
    assert len(moved) <= 5, moved  # a round-robin over a sorted list would move about 30 of 40
    # 16 flows whose times differ 16-fold: the parts' times are within one flow's time of each other
    ms = {"f%02d" % i: 1000 * (i + 1) for i in range(16)}
    plan = reticle._shard_plan(list(ms), 4, ms)
    loads = [sum(t for (x, t), s in zip(ms.items(), plan) if s == k) for k in range(4)]
    assert max(loads) - min(loads) <= max(ms.values()), loads
    plain = reticle._shard_plan(list(ms), 4)
    plain_loads = [sum(t for (x, t), s in zip(ms.items(), plain) if s == k) for k in range(4)]
    assert max(loads) <= max(plain_loads)


def _shard_doc(index, total, selected, flows):
    return {"exitCode": 0, "ms": 1, "flows": flows, "shard": {"index": index, "total": total, "selected": selected}}


def _r(name, verified="yes"):
    return {"name": name, "verified": verified, "ms": 5, "steps": [{"index": 0, "step": "x", "verified": verified}]}


def test_merge_joins_shards_in_the_runs_order_and_names_every_gap_and_overlap():
    import reticle
    sel = ["a", "b", "c", "d"]
    docs = [("s2.json", _shard_doc(2, 2, sel, [_r("b", "no"), _r("d")])),
            ("s1.json", _shard_doc(1, 2, sel, [_r("c"), _r("a")]))]
    merged = reticle._merge_shards(docs)
    assert [(r["name"], r["verified"], r["shard"]) for r in merged] == [
        ("a", "yes", "1/2"), ("b", "no", "2/2"), ("c", "yes", "1/2"), ("d", "yes", "2/2")]
    assert reticle._verify_exit(merged) == 1
    # a shard missing: its flows and the shard are named, exit 3
    merged = reticle._merge_shards(docs[:1])
    errors = {r["name"]: r["error"] for r in merged if r["verified"] == "error"}
    assert "ran in no shard" in errors["a"] and "shard(s) 1 of 2 missing" in errors["(merge)"], errors
    assert reticle._verify_exit(merged) == 3
    # a flow in two shards (split with different --durations files), a shard given twice, another N
    twice = reticle._merge_shards(docs + [("s1b.json", _shard_doc(1, 2, sel, [_r("b")]))])
    errors = {r["name"]: r["error"] for r in twice if r["verified"] == "error"}
    assert "shard 1/2 is given twice" in errors["(merge)"], errors
    over = reticle._merge_shards([docs[0], ("s1.json", _shard_doc(1, 2, sel, [_r("a"), _r("b"), _r("c")]))])
    assert "ran 2 times, in shards 2/2, 1/2" in {r["name"]: r.get("error") for r in over}["b"]
    mixed = reticle._merge_shards([docs[0], ("s1.json", _shard_doc(1, 3, sel, [_r("a"), _r("c")]))])
    assert any("different shard counts" in r.get("error", "") for r in mixed)
    other = reticle._merge_shards([docs[0], ("s1.json", _shard_doc(1, 2, sel + ["e"], [_r("a"), _r("c"), _r("e")]))])
    assert any("different flow selections" in r.get("error", "") for r in other)
    # not results at all; one unsharded run alone merges to itself
    bad = reticle._merge_shards([("x.json", {"hello": 1}), docs[0]])
    assert any("x.json is not `reticle verify --json` output" in r.get("error", "") for r in bad)
    alone = reticle._merge_shards([("run.json", {"exitCode": 0, "flows": [_r("a"), _r("b")]})])
    assert [(r["name"], r["shard"]) for r in alone] == [("a", "1/1"), ("b", "1/1")]
    # a setup flow a shard ran only for its own flows (auth) is not a second run of the selected one
    login = ["login", "a", "b"]
    shards = [("s1.json", _shard_doc(1, 2, login, [_r("login"), _r("a")])),
              ("s2.json", _shard_doc(2, 2, login, [dict(_r("login", "no"), setupOnly=True), _r("b")]))]
    merged = reticle._merge_shards(shards)
    assert [(r["name"], r["verified"], r["shard"]) for r in merged] == [
        ("login", "yes", "1/2"), ("a", "yes", "1/2"), ("b", "yes", "2/2")], merged
    # not selected at all (only ever run as a setup): kept once
    alone = reticle._merge_shards([("s1.json", _shard_doc(1, 2, ["a", "b"], [dict(_r("login"), setupOnly=True), _r("a")])),
                                   ("s2.json", _shard_doc(2, 2, ["a", "b"], [dict(_r("login"), setupOnly=True), _r("b")]))])
    assert [r["name"] for r in alone] == ["a", "b", "login"], alone


def test_a_shard_runs_its_part_of_the_flows_and_of_the_setup_errors(tmp_path):
    import reticle
    flows = [{"name": "f%d" % i} for i in range(7)]
    errors = [reticle._merge_error("broken-%d" % i, "not JSON") for i in range(3)]
    seen = []
    for i in range(1, 4):
        mine, errs, info = reticle._verify_shard((i, 3), None, flows, errors, lambda line: None)
        seen += [f["name"] for f in mine] + [e["name"] for e in errs]
        assert info["selected"] == ["f%d" % i for i in range(7)] + ["broken-%d" % i for i in range(3)]
    assert sorted(seen) == sorted(["f%d" % i for i in range(7)] + ["broken-%d" % i for i in range(3)])
    bad = tmp_path / "d.json"
    bad.write_text('{"not": "results"}')
    with pytest.raises(ValueError, match="--json output"):
        reticle._verify_shard((1, 2), str(bad), flows, [], lambda line: None)
    # the first run of a pipeline has no previous results: split by name, said on stderr
    said = []
    mine, _, info = reticle._verify_shard((1, 2), str(tmp_path / "none.json"), flows, [], said.append)
    assert "no such file" in said[0] and info["byDurations"] is False


def test_sharded_verify_merged_equals_one_run(tmp_path):
    """The README's CI steps as processes: start the app, `verify --shard i/3 --json > shard-i.json`
    in three jobs at once (each its own daemon, as on its own CI machine), `report merge`: the same
    verdicts and exit code as one unsharded run, each flow's shard, and the failure's screenshot."""
    from _harness import free_port
    project = tmp_path / "app"
    forms = FormsApp("http://127.0.0.1:%d" % free_port())
    with contextlib.ExitStack() as stack:
        app = _keep(stack, AppServer(forms.routes()))
        for i in range(5):
            _write_flow(project, "shows-%d" % i, app.url + "/login", [{"assert": {"kind": "text", "contains": "Log in"}}])
        _write_flow(project, "missing-text", app.url + "/login", [{"assert": {"kind": "text", "contains": "Nope"}}])
        one = _verify(project, tmp_path / "state-one", free_port(), "--json")
        _exits(one, 1)
        results = tmp_path / "results"
        results.mkdir()
        jobs = []
        for i in (1, 2, 3):
            environ = daemon_env(tmp_path / ("state-%d" % i), RETICLE_PORT=str(free_port()))
            out = open(str(results / ("shard-%d.json" % i)), "w")
            stack.callback(out.close)
            jobs.append(subprocess.Popen([sys.executable, RETICLE_PY, "verify", "--shard", "%d/3" % i, "--json",
                                          "--junit", str(results / ("junit-%d.xml" % i))], cwd=str(project),
                                         env=environ, stdout=out, stderr=subprocess.PIPE, text=True))
        errs = [job.communicate(timeout=240)[1] for job in jobs]
        codes = [job.returncode for job in jobs]
        assert sorted(codes) == [0, 0, 1], (codes, errs)
        shards = [json.loads((results / ("shard-%d.json" % i)).read_text()) for i in (1, 2, 3)]
        ran = [f["name"] for s in shards for f in s["flows"]]
        assert sorted(ran) == sorted(f["name"] for f in json.loads(one.stdout)["flows"])  # each exactly once
        merged_xml, merged_html = tmp_path / "merged.xml", tmp_path / "merged.html"
        merge = subprocess.run([sys.executable, RETICLE_PY, "report", "merge", str(results), "--json", "--junit",
                                str(merged_xml), "--report", str(merged_html)], capture_output=True, text=True,
                               timeout=60)
        merged = json.loads(merge.stdout)
        unsharded = json.loads(one.stdout)
        assert merge.returncode == one.returncode == merged["exitCode"] == unsharded["exitCode"] == 1, merge.stderr
        assert [(f["name"], f["verified"]) for f in merged["flows"]] == [
            (f["name"], f["verified"]) for f in unsharded["flows"]]
        where = {f["name"]: f["shard"] for f in merged["flows"]}
        assert {s["shard"]["index"] for s in shards} == {1, 2, 3}
        for s in shards:
            assert all(where[f["name"]] == "%d/3" % s["shard"]["index"] for f in s["flows"])
        suites = ET.parse(str(merged_xml)).getroot().findall("testsuite")
        assert sorted(s.get("name") for s in suites) == sorted(where)
        assert {s.get("name"): s.find("properties/property").get("value") for s in suites} == where
        dom = _dump_dom(merged_html, tmp_path)
        assert dom.count('class="shard"') == 6 and where["missing-text"] in dom
        shots = re.findall(r'<img[^>]+src="data:image/png;base64,([A-Za-z0-9+/=]+)"', dom)
        assert len(shots) == 1 and base64.b64decode(shots[0])[:8] == b"\x89PNG\r\n\x1a\n"
        # the table form of the same merge, and a missing shard is exit 3 naming it
        (results / "shard-2.json").unlink()
        gap = subprocess.run([sys.executable, RETICLE_PY, "report", "merge", str(results)], capture_output=True,
                             text=True, timeout=60)
        assert gap.returncode == 3 and "shard(s) 2 of 3 missing" in gap.stdout, gap.stdout + gap.stderr


def test_report_merge_names_a_file_it_cannot_read_and_exits_3(tmp_path, capsys):
    import reticle
    sel = ["a", "b"]
    (tmp_path / "shard-1.json").write_text(json.dumps(_shard_doc(1, 2, sel, [_r("a")])))
    (tmp_path / "shard-2.json").write_text(json.dumps(_shard_doc(2, 2, sel, [_r("b")])))
    assert reticle.main(["report", "merge", str(tmp_path), "--json"]) == 0
    assert [f["shard"] for f in json.loads(capsys.readouterr().out)["flows"]] == ["1/2", "2/2"]
    os.mkfifo(str(tmp_path / "stuck.json"))  # never opened to wait for a writer
    assert reticle.main(["report", "merge", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "stuck.json cannot be read: it is a FIFO" in out, out
    assert reticle.main(["report"]) == 2 and "reticle report merge PATH" in capsys.readouterr().err
    assert reticle.main(["verify", "--durations", str(tmp_path / "shard-1.json"), "nope"]) == 2
    assert "give it with --shard I/N" in capsys.readouterr().err
    assert reticle.main(["verify", "--shard", "0/2"]) == 2 and "1 <= I <= N" in capsys.readouterr().err



# -- a results file is read only once its schema passed (hardening, fourth round) -------------------------

def _full_result(text):
    """A result with every field a results file may hold, each string one being `text`."""
    return {"name": text, "verified": "no", "verifiedReason": text, "because": text, "error": text, "note": text,
            "ms": 12, "failedStep": 0, "startUrl": text, "sessionId": text, "screenshot": text,
            "screenshotError": text, "writes": [{"method": text}], "faults": [{"id": text}],
            "authSaved": {"x": text}, "authRemade": {"why": text},
            "steps": [{"index": 0, "step": text, "verified": "no", "verifiedReason": text, "because": text, "ms": 3,
                       "predicate": {"kind": "text", "contains": text}, "evidence": {"text": text},
                       "writes": [{"path": text}], "expect": "no", "met": False}],
            "teeth": [{"write": text, "as": "lie", "verified": "yes", "toothless": True, "ms": 1, "because": text,
                       "note": text, "failedStep": 0}],
            "toothless": [text], "teethUntested": [text], "teethMax": 1, "setupOnly": False, "shard": "1/1"}


_MARKUP = '"><script>alert(document.domain)</script><img src=x onerror=alert(1) x="'


def test_no_field_of_a_result_reaches_the_html_report_as_markup():
    """Every field, the screenshot among them, goes into the page escaped; a screenshot that is not
    base64 is left out (it went into <img src=...> raw, so a shard's file could run script in whoever
    opened the merged report)."""
    import reticle
    from html.parser import HTMLParser

    class Tags(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags, self.attrs = [], []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            self.attrs += [name for name, _ in attrs]

    page = reticle._html_report([_full_result(_MARKUP), dict(_full_result("ok"), screenshot="iVBORw0KGgo=")])
    parser = Tags()
    parser.feed(page)
    assert "script" not in parser.tags and "onerror" not in parser.attrs, page
    assert set(parser.tags) <= {"html", "head", "meta", "title", "style", "body", "h1", "p", "table", "tr", "th", "td",
                                "a", "section", "h2", "span", "code", "pre", "figure", "img", "figcaption"}
    assert page.count("<img") == 1 and 'src="data:image/png;base64,iVBORw0KGgo="' in page
    assert "the screenshot is left out: it is not base64 data" in page
    assert html_escape(_MARKUP) in page  # shown, as text
    junit = reticle._junit_xml([_full_result(_MARKUP)])
    ET.fromstring(junit.encode("utf-8"))  # well-formed: nothing broke out of an attribute
    assert "<script>" not in junit


def html_escape(text):
    import html
    return html.escape(text, quote=True)


@pytest.mark.parametrize("mangle, field", [
    (lambda d: d["flows"][0].update(verified="bogus"), "flows[0].verified is \"bogus\"; expected one of yes, no"),
    (lambda d: d["flows"][0].update(verified="passed"), "flows[0].verified"),
    (lambda d: d["flows"][0].update(verified="YES"), "flows[0].verified"),
    (lambda d: d["flows"][0].update(verified=""), "flows[0].verified"),
    (lambda d: d["flows"][0]["steps"][0].pop("index"), "flows[0].steps[0] lacks the field index"),
    (lambda d: d["flows"][0]["steps"][0].update(index="0"), "flows[0].steps[0].index is a string; expected integer"),
    (lambda d: d["flows"][0].update(ms="5"), "flows[0].ms is a string; expected number"),
    (lambda d: d["flows"][0].update(steps="all"), "flows[0].steps is a string; expected array"),
    (lambda d: d["flows"][0].update(teeth=[{"write": "POST /x", "toothless": False}]),
     "flows[0].teeth[0] lacks the field verified"),
    (lambda d: d["flows"][0].update(screenshot=_MARKUP), "flows[0].screenshot breaks the rule pattern"),
    (lambda d: d["shard"].update(total=1000000000000), "shard.total breaks the rule maximum: 256"),
    (lambda d: d["shard"].update(index=3), "shard.index is 3, past shard.total 2"),
    (lambda d: d["flows"][0].update(surprise=1), "flows[0] has the unknown field surprise"),
])
def test_report_merge_refuses_a_results_file_off_its_schema_naming_the_file_and_field(tmp_path, capsys,
                                                                                      mangle, field):
    """Each of these passed (exit 0, JUnit with 0 failures), crashed with a traceback or grew a list
    from a claimed total; now the merge is exit 3 with one error naming the file and the field."""
    import reticle
    sel = ["a", "b"]
    one = _shard_doc(1, 2, sel, [_r("a")])
    two = _shard_doc(2, 2, sel, [_r("b")])
    mangle(two)
    (tmp_path / "shard-1.json").write_text(json.dumps(one))
    (tmp_path / "shard-2.json").write_text(json.dumps(two))
    junit = tmp_path / "junit.xml"
    t0 = time.monotonic()
    assert reticle.main(["report", "merge", str(tmp_path / "shard-1.json"), str(tmp_path / "shard-2.json"),
                         "--junit", str(junit), "--json"]) == 3
    assert time.monotonic() - t0 < 5
    captured = capsys.readouterr()
    errors = [f["error"] for f in json.loads(captured.out)["flows"] if f["verified"] == "error"]
    assert any(str(tmp_path / "shard-2.json") + " is not `reticle verify --json` output: " + field in e
               for e in errors), errors
    assert "Traceback" not in captured.out + captured.err
    suites = ET.parse(str(junit)).getroot()
    assert int(suites.get("errors")) >= 1


def test_durations_from_a_file_off_the_schema_is_a_clean_error(tmp_path, capsys):
    import logging
    import reticle
    doc = _shard_doc(1, 1, ["a"], [dict(_r("a"), ms="slow")])
    (tmp_path / "d.json").write_text(json.dumps(doc))
    # `verify` sends reticle's log to this test's stderr: put the loggers back after, or a later test logs to
    # a closed stream
    loggers = [logging.getLogger(n) for n in ("reticle", "tornado", "asyncio")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    try:
        assert reticle.main(["verify", "--shard", "1/2", "--durations", str(tmp_path / "d.json"), "a"]) == 3
    finally:
        for lg, (handlers, level, propagate) in zip(loggers, saved):
            lg.handlers[:], lg.level, lg.propagate = handlers, level, propagate
    assert "flows[0].ms is a string; expected number" in capsys.readouterr().err


def test_every_field_a_results_file_may_hold_passes_its_schema():
    import reticle
    doc = _shard_doc(1, 1, ["x"], [_full_result("x")])
    assert reticle._results_problem(doc) is None
    assert reticle._results_problem(_shard_doc(1, 1, ["a"], [reticle._merge_error("a", "broken")])) is None


# -- logged-in starts (issue 31): a setup flow's saved state -----------------------------------------

class _SessionApp:
    """A login form that makes a server-side session (an HttpOnly `sid` cookie), pages that need it,
    and a welcome page that keeps a preference in localStorage: the truth is how many logins the
    server saw, and `sessions` (clear it to invalidate every session, as a server restart would)."""

    def __init__(self):
        self.sessions = {}
        self.logins = 0
        self.refuse = False

    def routes(self):
        import tornado.web
        app = self

        class Base(tornado.web.RequestHandler):
            def page(self, title, body):
                self.set_header("Content-Type", "text/html; charset=utf-8")
                self.finish("<!doctype html><html><head><title>%s</title></head><body><h1>%s</h1>%s</body></html>"
                            % (title, title, body))

            def user(self):
                user = app.sessions.get(self.get_cookie("sid") or "")
                if user is None:
                    self.redirect("/login")
                return user

        class Login(Base):
            def get(self):
                self.page("Log in", '<form method="post" action="/login"><label for="u">Username</label>'
                          '<input id="u" name="username"><label for="p">Password</label>'
                          '<input id="p" name="password" type="password"><button>Log in</button></form>')

            def post(self):
                if app.refuse or self.get_body_argument("password", "") != PASSWORD:
                    self.page("Log in", '<p role="alert">Wrong password</p>')
                    return
                app.logins += 1
                sid = "sid-%s" % os.urandom(12).hex()
                app.sessions[sid] = self.get_body_argument("username")
                self.set_cookie("sid", sid, httponly=True, expires_days=1)
                self.redirect("/welcome")

        class Welcome(Base):
            def get(self):
                user = self.user()
                if user:
                    self.page("Welcome back", "<p>Hello %s</p><script>localStorage.setItem('pref', 'dark');"
                              "</script>" % user)

        class Account(Base):
            def get(self):
                user = self.user()
                if user:
                    self.page("Account", "<p>Signed in as %s</p>" % user)

        return [(r"/login", Login), (r"/welcome", Welcome), (r"/account", Account), (r"/orders", Account)]


AUTH_LOGIN = [
    {"action": "fill", "target": {"label": "Username"}, "args": {"value": "vic"}},
    {"action": "fill", "target": {"label": "Password"}, "args": {"value": "${%s}" % SECRET_ENV}, "secret": SECRET_ENV},
    {"action": "click", "target": {"role": "button", "name": "Log in"},
     "until": {"kind": "text", "contains": "Hello vic"}, "timeout_ms": 8000},
]
AUTH_USE = [
    {"assert": {"kind": "text", "contains": "Signed in as vic"}},
    {"assert": {"kind": "storage", "area": "local", "key": "pref", "equals": "dark"}},
]


def _write_auth_flows(project, app):
    for name, start, steps, extra in (("login", "/login", AUTH_LOGIN, {"setup": True}),
                                      ("account", "/account", AUTH_USE, {"auth": "login"}),
                                      ("orders", "/orders", AUTH_USE, {"auth": "login"})):
        folder = project / ".reticle" / "flows"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / (name + ".json")).write_text(json.dumps(dict({"format": 1, "name": name, "startUrl": app.url + start,
                                                                "steps": steps}, **extra)))


def _no_cookie_values(sessions, *texts):
    for sid in sessions:
        for text in texts:
            assert sid not in text, "a session cookie's value leaked"


def test_verify_runs_a_setup_flow_once_for_the_flows_that_use_its_state(tmp_path):
    from _harness import free_port
    port = free_port()
    project = tmp_path / "app"
    (project / ".git").mkdir(parents=True)  # init git-ignores .reticle/auth/ in a git project
    site = _SessionApp()
    secret = {SECRET_ENV: PASSWORD}
    with contextlib.ExitStack() as stack:
        app = _keep(stack, AppServer(site.routes()))
        _write_auth_flows(project, app)
        # the setup flow is not listed: verify runs it once, first, and both flows start from its state
        run = _verify(project, tmp_path / "state", port, "account", "orders", "--jobs", "2", "--json", env=secret)
        _exits(run, 0)
        out = json.loads(run.stdout)
        assert {f["name"]: f["verified"] for f in out["flows"]} == {"account": "yes", "orders": "yes", "login": "yes"}
        assert site.logins == 1
        state = project / ".reticle" / "auth" / "login.json"
        assert oct(state.stat().st_mode & 0o777) == "0o600"
        assert (project / ".reticle" / "auth" / ".gitignore").read_text().splitlines()[-1] == "*"
        assert json.loads(state.read_text())["cookies"][0]["value"] in site.sessions
        # listed among the flows, the setup flow is that one run, not a second
        run = _verify(project, tmp_path / "state", port, "login", "account", "orders", "--jobs", "2", env=secret)
        _exits(run, 0)
        assert site.logins == 2
        logs = [p.read_text(errors="replace") for p in tmp_path.glob("**/daemon-*.log")]
        assert logs, "the daemon verify started has a log"
        _no_cookie_values(site.sessions, run.stdout, run.stderr, out and json.dumps(out), *logs)
        # the setup flow fails: the flows that need it are setup errors naming it, and no second login
        site.refuse = True
        run = _verify(project, tmp_path / "state", port, "account", "--json", env=secret)
        _exits(run, 3)
        rows = {f["name"]: f for f in json.loads(run.stdout)["flows"]}
        assert rows["login"]["verified"] == "no" and rows["account"]["verified"] == "error"
        assert "auth state login" in rows["account"]["error"], rows["account"]
        # `reticle init` git-ignores the saved logins
        git = subprocess.run([sys.executable, RETICLE_PY, "init", "--yes"], cwd=str(project), capture_output=True,
                             text=True, env=daemon_env(tmp_path / "state", RETICLE_PORT=str(port), HOME=str(tmp_path)))
        assert ".reticle/auth/" in (project / ".gitignore").read_text(), (git.stdout, git.stderr)


def test_an_expired_auth_state_is_made_again_or_named_as_the_cause(tmp_path):
    project = tmp_path / "app"
    site = _SessionApp()
    answers = []
    with contextlib.ExitStack() as stack:
        project.mkdir()
        daemon = _keep(stack, Daemon(tmp_path / "state", cwd=str(project),
                                     env={SECRET_ENV: PASSWORD, "RETICLE_DEVICE_BUDGET": "40/600"}))
        app = _keep(stack, AppServer(site.routes()))
        _write_auth_flows(project, app)
        mcp = _keep(stack, Mcp(daemon.url + "/mcp"))

        def call(name, args):
            data, is_error = mcp.call(name, args, timeout=120)
            answers.append(json.dumps(data))
            return data, is_error

        opened, _ = call("reticle_open", {"url": app.url + "/login"})
        sid = {"sessionId": opened["sessionId"]}
        login, _ = call("reticle_flow_replay", dict(sid, name="login"))
        assert login["verified"] == "yes" and login["authSaved"]["saved"] is True, login
        assert site.logins == 1
        # saving the journey just verified (a replay's: asked for by name) as a setup flow saves its state too
        saved, err = call("reticle_flow_save", dict(sid, name="login-again", setup=True, replayed=True))
        assert not err and saved["authSaved"]["saved"] is True and saved["authSaved"]["cookies"] == 1, saved
        assert json.loads((project / ".reticle" / "flows" / "login-again.json").read_text())["setup"] is True
        assert oct((project / ".reticle" / "auth" / "login-again.json").stat().st_mode & 0o777) == "0o600"
        # reticle_open {auth} starts logged in, storage and all
        opened, err = call("reticle_open", {"url": app.url + "/account", "auth": "login"})
        assert not err, opened
        shown, _ = call("reticle_assert", dict(sid, predicate={"kind": "allOf",
                                                               "predicates": [s["assert"] for s in AUTH_USE]}))
        assert shown["verified"] == "yes", shown
        # a device of its own (a spare, else a new browser) starts logged in too
        call("reticle_close", sid)
        opened, err = call("reticle_open", {"url": app.url + "/account", "auth": "login"})
        assert not err and opened["started"] is True, opened
        sid = {"sessionId": opened["sessionId"]}
        shown, _ = call("reticle_assert", dict(sid, predicate={"kind": "allOf",
                                                               "predicates": [s["assert"] for s in AUTH_USE]}))
        assert shown["verified"] == "yes", shown
        assert site.logins == 1
        # the server forgets every session: the flow fails at its first step, its setup runs again, the retry is yes
        site.sessions.clear()
        res, _ = call("reticle_flow_replay", dict(sid, name="account"))
        assert res["verified"] == "yes" and res["authRemade"]["name"] == "login", res
        assert site.logins == 2
        # saved cookies that expired: made again before the flow starts
        path = project / ".reticle" / "auth" / "login.json"
        state = json.loads(path.read_text())
        for c in state["cookies"]:
            c["expires"] = time.time() - 60
        path.write_text(json.dumps(state))
        res, _ = call("reticle_flow_replay", dict(sid, name="orders"))
        assert res["verified"] == "yes" and "expired" in res["authRemade"]["why"], res
        assert site.logins == 3
        # a flow whose first step fails on its own: its setup runs again once, and the failure stays the flow's
        (project / ".reticle" / "flows" / "bob.json").write_text(json.dumps({
            "format": 1, "name": "bob", "startUrl": app.url + "/account", "auth": "login",
            "steps": [{"assert": {"kind": "text", "contains": "Signed in as bob"}}]}))
        res, _ = call("reticle_flow_replay", dict(sid, name="bob"))
        assert res["verified"] == "no" and res["authRemade"]["name"] == "login", res
        assert "the failure is the flow's own" in res["because"] and "no longer logs in" not in res["because"], res
        assert site.logins == 4
        # no login works any more: the cause is named
        site.sessions.clear()
        site.refuse = True
        res, err = call("reticle_flow_replay", dict(sid, name="account"))
        assert err and "auth state login no longer logs in" in res["error"], res
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        with open(daemon.log_path, errors="replace") as fh:
            daemon_log = fh.read()
        _no_cookie_values(list(site.sessions) + [c["value"] for c in json.loads(path.read_text())["cookies"]],
                          daemon_log, *answers)


# -- pytest --reticle-flows (issue 31): flows as pytest items -------------------------------------

def _pytest_project(tmp_path, app):
    """A project with a setup flow, a flow that starts from its state, and one that fails, plus a
    site folder whose dist-info registers the plugin as setup.cfg does (the pytest11 entry point)."""
    project = tmp_path / "app"
    _write_auth_flows(project, app)
    folder = project / ".reticle" / "flows"
    (folder / "orders.json").unlink()
    (folder / "broken.json").write_text(json.dumps({"format": 1, "name": "broken", "startUrl": app.url + "/login",
                                                    "steps": [{"assert": {"kind": "text", "contains": "Signed in"}}]}))
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    dist = tmp_path / "site" / "reticle_pytest_entry-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: reticle-pytest-entry\nVersion: 0\n")
    with open(os.path.join(os.path.dirname(RETICLE_PY), "setup.cfg")) as fh:
        entry = re.search(r"pytest11 =\s*\n\s*(reticle = \S+)", fh.read()).group(1)
    (dist / "entry_points.txt").write_text("[pytest11]\n%s\n" % entry)
    return project


def _pytest(project, tmp_path, port, *argv):
    env = daemon_env(tmp_path / "state", RETICLE_PORT=str(port), **{SECRET_ENV: PASSWORD})
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"), os.path.dirname(RETICLE_PY)])
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA"] + list(argv),
                          cwd=str(project), env=env, capture_output=True, text=True, timeout=300)


def _cases(junit):
    out = {}
    for case in ET.parse(str(junit)).getroot().iter("testcase"):
        failure = case.find("failure")
        out[case.get("name")] = None if failure is None else failure.get("message") + (failure.text or "")
    return out


def test_pytest_reticle_flows_runs_the_flows_as_items_with_xdist_too(tmp_path):
    from _harness import free_port
    port = free_port()
    site = _SessionApp()
    with contextlib.ExitStack() as stack:
        app = _keep(stack, AppServer(site.routes()))
        project = _pytest_project(tmp_path, app)
        # without --reticle-flows the plugin does nothing: no flow item, no daemon, no login
        run = _pytest(project, tmp_path, port, "-q")
        assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
        assert "reticle flow" not in run.stdout and site.logins == 0 and get_port_free(port)

        junit = tmp_path / "junit.xml"
        run = _pytest(project, tmp_path, port, "--reticle-flows", "--junitxml", str(junit))
        assert run.returncode == 1, run.stdout + run.stderr
        cases = _cases(junit)
        assert set(cases) == {"test_plain", "login", "account", "broken"}, cases
        assert cases["login"] is None and cases["account"] is None and cases["test_plain"] is None
        assert "verified: no" in cases["broken"] and "Signed in" in cases["broken"], cases["broken"]
        assert "PASSED .reticle/flows/login.json::login" in run.stdout, run.stdout
        assert site.logins == 1  # the setup flow's item, first; the others start from its state
        wait_until(lambda: get_port_free(port), 15, what="the daemon the run started to stop")

        run = _pytest(project, tmp_path, port, "--reticle-flows", "-n", "2", "--junitxml", str(junit))
        assert run.returncode == 1, run.stdout + run.stderr
        assert "gw0" in run.stdout or "gw1" in run.stdout, run.stdout
        cases = _cases(junit)
        assert {k: v is None for k, v in cases.items()} == {"test_plain": True, "login": True, "account": True,
                                                            "broken": False}, cases
        assert site.logins == 2
        wait_until(lambda: get_port_free(port), 15, what="the daemon the run started to stop")
        _no_cookie_values(site.sessions, run.stdout, run.stderr, junit.read_text())


@pytest.mark.parametrize("start", ["/records", "/spa"], ids=["document", "client-routed"])
@pytest.mark.parametrize("where", ["tag", "device"])
def test_a_step_after_a_navigating_act_runs_on_the_page_it_brings(world, where, start):
    """Issue 29 #7: a link whose next view is slow to come leaves the old one in place, and it has the
    same field.  Client-routed, the next step's fill landed on the view being left and was thrown away
    with it: the add posted an empty name (the server's truth).  A step now waits for the act before it
    (its fetch of the view and the render after it) and, for a document navigation, for the new document."""
    mcp, forms, app = world["mcp"], world["forms"], world["app"]
    if where == "device":
        sid = mcp.ok("reticle_open", {"url": app.url + "/records"}, timeout=60)["sessionId"]
    else:
        sid = [t["sessionId"] for t in mcp.ok("reticle_sessions")["sessions"] if not t.get("device")][0]
    name = "Nav %s %s" % (where, start)
    link = "Records admin" if start == "/records" else "New record"
    flow = {"format": 1, "name": "nav-then-fill", "startUrl": app.url + start, "steps": [
        {"action": "click", "target": {"role": "link", "name": link}},
        {"action": "fill", "target": {"label": "Name"}, "args": {"value": name}},
        {"action": "click", "target": {"role": "button", "name": "Add record"}},
        {"assert": {"kind": "text", "contains": "Record '%s' added" % name}}]}
    forms.slow_get = 0.8
    try:
        out = mcp.ok("reticle_flow_replay", {"flow": flow, "sessionId": sid}, timeout=90)
    finally:
        forms.slow_get = 0.0
        if where == "device":
            mcp.ok("reticle_close", {"sessionId": sid})
    assert [fields.get("name") for fields in _posts(forms, "/records")][-1:] == [name], forms.posts[-3:]
    assert out["verified"] == "yes", out
