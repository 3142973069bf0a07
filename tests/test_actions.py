"""Every action of the SDK against real elements in headless Chromium: the
page records the DOM events it receives in a store, and reticle_state reads
them back, so each test checks what the page saw, not what the SDK claims."""

import json
import re

import pytest

from _harness import Live, chromium_path

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="needs Chromium (sh tests/bootstrap.sh)")

PAGE = """<!doctype html><html><head><title>Actions</title>
<script src="%(daemon)s/reticle.js"></script></head><body style="height: 3000px">
<button id="btn">Press me</button>
<label>Name <input id="name"></label>
<label>Bio <textarea id="bio"></textarea></label>
<label>Size <select id="size"><option value="s">Small</option><option value="l">Large</option></select></label>
<label><input type="checkbox" id="news" checked> Newsletter</label>
<form id="form"><label>Q <input id="q" name="q"></label><button type="submit">Search</button></form>
<label>Avatar <input type="file" id="file"></label>
<div id="src" draggable="true">Drag source</div>
<div id="dst" style="width:80px;height:40px">Landing zone</div>
<div style="position: relative; width: 200px; height: 40px">
  <button id="hidden-under">Covered</button>
  <div id="veil" style="position: absolute; inset: 0; background: white">Cookie banner</div>
</div>
<button id="far" style="margin-top: 2500px">Far away</button>
<script>
  var log = [];
  function rec(kind) { return function (e) { log.push(kind + ":" + e.type + (e.key ? ":" + e.key : "") +
    (e.ctrlKey ? "+ctrl" : "") + (e.shiftKey ? "+shift" : "")); reticle.pushStore("log", log.slice(-60)); }; }
  var btn = document.getElementById("btn");
  ["pointerdown", "mousedown", "pointerup", "mouseup", "click", "dblclick", "mouseover", "mouseenter", "focus", "blur"].forEach(function (t) { btn.addEventListener(t, rec("btn")); });
  var nameInput = document.getElementById("name");
  // A controlled input, React style: the model only changes through input events.
  var model = {name: ""};
  nameInput.addEventListener("input", function (e) { model.name = e.target.value; reticle.pushStore("model", model); });
  ["keydown", "change"].forEach(function (t) { nameInput.addEventListener(t, rec("name")); });
  document.getElementById("bio").addEventListener("input", rec("bio"));
  document.getElementById("size").addEventListener("change", rec("size"));
  document.getElementById("news").addEventListener("change", rec("news"));
  document.getElementById("form").addEventListener("submit", function (e) { e.preventDefault(); rec("form")(e); });
  document.getElementById("file").addEventListener("change", function (e) {
    var f = e.target.files[0]; log.push("file:" + (f ? f.name + ":" + f.size : "none")); reticle.pushStore("log", log.slice(-60)); });
  ["dragstart", "drop"].forEach(function (t) { document.getElementById(t === "drop" ? "dst" : "src").addEventListener(t, rec("drag")); });
  document.getElementById("dst").addEventListener("dragover", function (e) { e.preventDefault(); });
  reticle.pushStore("log", log);
</script></body></html>
"""



@pytest.fixture(scope="module")
def page(tmp_path_factory):
    live = Live(tmp_path_factory.mktemp("actions"), PAGE)
    yield live.mcp
    live.close()


def log(mcp):
    got = mcp.ok("reticle_state", {"store": "log", "path": "length"})
    n = got["value"]
    return [mcp.ok("reticle_state", {"store": "log", "path": str(i)})["value"] for i in range(max(0, n - 15), n)]


def act(mcp, target, action, **args):
    payload = {"target": target, "action": action}
    if args:
        payload["args"] = args
    return mcp.ok("reticle_act", payload)


def test_click_fires_the_full_pointer_sequence(page):
    act(page, {"role": "button", "name": "Press me"}, "click")
    events = log(page)
    order = [e for e in events if e.split(":")[1] in ("pointerdown", "mousedown", "pointerup", "mouseup", "click")]
    assert order[-5:] == ["btn:pointerdown", "btn:mousedown", "btn:pointerup", "btn:mouseup", "btn:click"]
    assert "btn:focus" in events


def test_dblclick_hover_focus_blur(page):
    act(page, {"role": "button", "name": "Press me"}, "dblclick")
    assert "btn:dblclick" in log(page)
    act(page, {"role": "button", "name": "Press me"}, "hover")
    assert "btn:mouseover" in log(page)
    act(page, {"role": "button", "name": "Press me"}, "focus")
    act(page, {"role": "button", "name": "Press me"}, "blur")
    assert log(page)[-1] == "btn:blur"


def test_fill_type_and_clear_update_a_controlled_input(page):
    result = act(page, {"label": "Name"}, "fill", value="Ada")
    assert result["result"]["effect"].get("valueChanged", True) is True
    assert page.ok("reticle_state", {"store": "model", "path": "name"})["value"] == "Ada"
    act(page, {"label": "Name"}, "type", text=" L")
    assert page.ok("reticle_state", {"store": "model", "path": "name"})["value"] == "Ada L"
    act(page, {"label": "Name"}, "clear")
    assert page.ok("reticle_state", {"store": "model", "path": "name"})["value"] == ""
    act(page, {"label": "Bio"}, "fill", value="line one")
    assert "bio:input" in log(page)


def test_press_with_modifiers(page):
    act(page, {"label": "Name"}, "press", key="a", modifiers=["Control", "Shift"])
    assert "name:keydown:a+ctrl+shift" in log(page)


def test_select_check_uncheck_submit(page):
    act(page, {"label": "Size"}, "select", value="l")
    assert "size:change" in log(page)
    size = page.ok("reticle_query", {"by": "label", "value": "Size"})["elements"][0]
    assert size["value"] == "Large", size  # the chosen option, by its label
    act(page, {"label": "Newsletter"}, "uncheck")
    assert "news:change" in log(page)
    box = page.ok("reticle_query", {"by": "role", "value": "checkbox", "name": "Newsletter"})["elements"][0]
    assert "checked" not in box["states"]
    again = act(page, {"label": "Newsletter"}, "uncheck")
    assert again["result"]["effect"].get("alreadyAtValue") is True
    act(page, {"label": "Newsletter"}, "check")
    act(page, {"label": "Q"}, "submit")
    assert "form:submit" in log(page)


def test_scroll_into_view_upload_and_drag(page):
    result = act(page, {"role": "button", "name": "Far away"}, "scrollIntoView")
    assert result["dispatched"] is True
    far = page.ok("reticle_query", {"by": "role", "value": "button", "name": "Far away"})["elements"][0]
    assert far["visible"] is True
    act(page, {"label": "Avatar"}, "upload", name="me.png", content="12345", type="image/png")
    assert "file:me.png:5" in log(page)
    dst = page.ok("reticle_query", {"by": "text", "value": "Landing zone"})["elements"][0]["ref"]
    act(page, {"text": "Drag source"}, "drag", toRef=dst)
    events = log(page)
    assert "drag:dragstart" in events and "drag:drop" in events


def test_effect_probes_report_occlusion_and_focus(page):
    covered = act(page, {"role": "button", "name": "Covered"}, "click")
    effect = covered["result"]["effect"]
    assert effect["occluded"] is True
    veil = page.ok("reticle_inspect", {"ref": effect["occludedBy"]})
    assert "Cookie banner" in json.dumps(veil)
    plain = act(page, {"label": "Name"}, "focus")
    assert "occluded" not in plain["result"]["effect"] or plain["result"]["effect"]["occluded"] is False


def test_bad_targets_are_clear_errors(page):
    data, is_error = page.call("reticle_act", {"target": {"text": "No such thing anywhere"}, "action": "click"})
    assert is_error and "No such thing anywhere" in data["error"]
    data, is_error = page.call("reticle_act", {"target": {"role": "button"}, "action": "click"})
    # several buttons: the error says how many match, asks for a ref and lists the first ones
    assert is_error and re.search(r"\b\d+ elements match target", data["error"]), data
    assert "pass one of these refs instead" in data["error"] and 'button "Press me" in page' in data["error"]
    data, is_error = page.call("reticle_act", {"action": "click"})
    assert is_error and "ref" in data["error"] and "target" in data["error"]
