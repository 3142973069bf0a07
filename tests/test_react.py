"""A real React 18 app (the UMD builds from npm, installed by tests/bootstrap.sh)
in headless Chromium: fill and type reach a controlled input's React state,
and a verdict proves the value went out in the request."""

import json
import os

import pytest
import tornado.web

from _harness import Live, ScriptFiles, chromium_path, react_umd

UMD = react_umd("development")

pytestmark = [
    pytest.mark.skipif(chromium_path() is None, reason="needs Chromium (sh tests/bootstrap.sh)"),
    pytest.mark.skipif(not all(os.path.exists(p) for p in UMD.values()),
                       reason="needs React's UMD builds (sh tests/bootstrap.sh installs them with npm)"),
]

PAGE = """<!doctype html><html><head><title>React form</title>
<script src="/umd/react.js"></script><script src="/umd/react-dom.js"></script>
<script src="%(daemon)s/reticle.js"></script></head>
<body><div id="root"></div>
<script>
  var e = React.createElement;
  function App() {
    var emailState = React.useState(""), email = emailState[0], setEmail = emailState[1];
    var savedState = React.useState(null), saved = savedState[0], setSaved = savedState[1];
    function submit(ev) {
      ev.preventDefault();
      fetch("/api/save", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({email: email})})
        .then(function (r) { return r.json(); })
        .then(function (j) { setSaved(j.email); reticle.signal("profile:saved", {email: j.email}); });
    }
    return e("form", {onSubmit: submit},
      e("label", null, "Email ", e("input", {value: email, onChange: function (ev) { setEmail(ev.target.value); }})),
      e("p", {"data-testid": "mirror"}, "Typed: " + email),
      e("button", {type: "submit"}, "Save"),
      saved ? e("p", {role: "status"}, "Saved " + saved) : null);
  }
  ReactDOM.createRoot(document.getElementById("root")).render(e(App));
</script></body></html>
"""


class _Save(tornado.web.RequestHandler):
    def post(self):
        self.write({"ok": True, "email": json.loads(self.request.body)["email"]})


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    live = Live(tmp_path_factory.mktemp("react"), PAGE,
                routes=[(r"/umd/(react\.js|react-dom\.js)", ScriptFiles, {"files": UMD}), (r"/api/save", _Save)])
    yield live.mcp
    live.close()


def mirror(mcp):
    return mcp.ok("reticle_query", {"testid": "mirror"})["elements"][0]


def test_fill_and_type_reach_react_state(app):
    app.ok("reticle_act", {"target": {"label": "Email"}, "action": "fill", "args": {"value": "ada@example.com"}})
    shown = mirror(app)
    assert "Typed: ada@example.com" in (shown.get("text") or shown.get("name"))
    app.ok("reticle_act", {"target": {"label": "Email"}, "action": "type", "args": {"text": ".uk"}})
    shown = mirror(app)
    assert "Typed: ada@example.com.uk" in (shown.get("text") or shown.get("name"))


def test_the_value_went_out_in_the_request(app):
    app.ok("reticle_act", {"target": {"label": "Email"}, "action": "fill", "args": {"value": "grace@example.com"}})
    r = app.ok("reticle_act_and_wait", {"target": {"role": "button", "name": "Save"}, "action": "click", "detail": "full", "until": {
        "kind": "allOf", "predicates": [
            {"kind": "net", "method": "POST", "urlContains": "/api/save", "status": 200,
             "bodyContains": "grace@example.com", "count": 1},
            {"kind": "signal", "name": "profile:saved", "dataMatches": {"email": "grace@example.com"}},
            {"kind": "text", "contains": "Saved grace@example.com"}]}})
    assert r["verified"] == "yes", r
    assert r["honesty"]["grade"] == "signal"
