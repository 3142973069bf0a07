"""Tool registry.

Every tool as one record (_ToolSpec: name, handler, schema, title, annotations, output schema), and
the registry tools/list, argument checking and the usage resource all read.  The handlers are above
(Tools, and the flow tools in Flows), except the device tools, which start from a saved login
(Flows) and so come here, first.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import time
import urllib.parse
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

from .auth import _auth_expired, _load_auth_state
from .browser import _jpeg_size, _png_size
from .calls import _CallContext, _WithContent, _progress_note
from .constants import ATTACHED_NOTE, FLOW_MAX_STEPS
from .daemon import _Daemon
from .devices import (DEVICE_IDLE_S, SCREENSHOT_INLINE_MAX_HEIGHT, SCREENSHOT_INLINE_MAX_WIDTH, SCREENSHOT_MAX_HEIGHT,
    _device_of)
from .errors import ToolError
from .flow_files import _flow_name, _project_dir
from .flows import _tool_flow_list, _tool_flow_replay, _tool_flow_save
from .observe import _confirm_answering
from .predicates import _PREDICATE_DIGEST, _PREDICATE_KINDS_LINE, _TEXT_MATCH
from .tab import _BrowserSession
from .toolbox import (_ACTIONS, _ACT_ARGS, _CURSOR, _DETAIL, _PREDICATE, _SESSION_ID, _STEP, _TARGET, _Tool,
    _ToolRegistry, _obj)
from .tools import (_FAULT_SCHEMA, _await_hydration, _tool_act, _tool_act_and_wait, _tool_act_sequence, _tool_assert,
    _tool_capabilities, _tool_console, _tool_fault, _tool_inspect, _tool_navigate, _tool_network, _tool_observe,
    _tool_query, _tool_sessions, _tool_snapshot, _tool_state, _tool_wait_for, _tool_watch_db)
from .util import _file_uri, _write_private


# ---- the device tools: open a browser of Reticle's own, close it, take its screenshots -------------

# what peers call a browser's CDP endpoint: accepted by the schema only to be refused in words (endpoints.py)
_ENDPOINT_ARGS = ("cdpEndpoint", "wsEndpoint", "browserUrl", "endpoint")


async def _tool_open(hub: _Daemon, session: Optional["_BrowserSession"], args: dict,
                     ctx: "_CallContext") -> dict:
    """reticle_open: a device of the caller's own on `url` (started, reused or adopted from the spare, or on
    a browser of the user's CDP endpoint; `attach`: the user's own tab there), answered once its page is
    connected and, for a framework the SDK recognises, hydrated."""
    named = [k for k in _ENDPOINT_ARGS if k in args]
    if named:
        raise ToolError("a tool call cannot name a browser's CDP endpoint (%s): an endpoint is full control of a "
                        "browser, so only the user names one" % named[0],
                        "the user starts the daemon with `reticle serve --cdp-endpoint URL` or sets "
                        "RETICLE_CDP_ENDPOINT; then reticle_open {url} opens there", code="endpoint_refused")
    url = args["url"]
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ToolError("reticle_open opens http: and https: pages only, not %r" % url[:200],
                        'pass a full URL such as "http://localhost:5173/"', code="bad_argument")
    vp = args.get("viewport")
    started = time.monotonic()
    _progress_note("opening %s in a device (browser start, SDK injection, page load)" % url[:120])
    auth = None
    if args.get("auth"):
        auth = _load_auth_state(_project_dir(hub), _flow_name(args["auth"]))
        if auth is None:
            raise ToolError("no saved auth state %r in the project" % args["auth"],
                            "replay its setup flow (a flow with \"setup\": true) in a device first",
                            code="auth_not_found")
    device, started_now = await hub.devices.open(ctx.session_key, url, bool(args.get("headed")),
                                                 (vp["width"], vp["height"]) if vp else None, bool(args.get("fresh")),
                                                 auth, bool(args.get("attach")))
    if auth is not None and _auth_expired(auth):
        _progress_note("the auth state %s has expired cookies: replay its setup flow" % args["auth"])
    out = {"sessionId": device.session_id, "deviceId": device.id, "url": device.url,
           "started": started_now, "fresh": started_now or bool(args.get("fresh")),
           "auth": args.get("auth"), "headed": device.headed,
           "viewport": {"width": device.viewport[0], "height": device.viewport[1]},
           "note": "acts in this session are real input (input: cdp); reticle_close ends the device"}
    if device.endpoint is not None:
        out["browser"] = {"endpoint": device.endpoint.shown, "product": device.endpoint.browser or None}
        out["note"] = (ATTACHED_NOTE if device.attached else "a browser context of its own in the browser at %s "
                       "(no cookies or storage of the user's); acts are real input; reticle_close disposes of it"
                       % device.endpoint.shown) + ("; `headed` has no effect there: that browser shows what it "
                                                   "shows" if args.get("headed") else "")
    tab = hub.bridge.get(device.session_id)
    if tab is not None:
        await _await_hydration(tab, out)
    out["ms"] = round((time.monotonic() - started) * 1000)
    return out


async def _tool_close(hub: _Daemon, session: Optional["_BrowserSession"], args: dict,
                      ctx: "_CallContext") -> dict:
    sid = args.get("sessionId")
    device = hub.devices.for_session(sid) if sid else hub.devices.owned_by(ctx.session_key)
    if device is None:
        live = ", ".join(d.session_id for d in hub.devices.devices.values()) or "none"
        raise ToolError("no device %s; open devices: %s" % ("has session %r" % sid if sid else "belongs to this caller",
                                                            live), "pass the sessionId that reticle_open answered",
                        code="device_not_found")
    if device.owner != ctx.session_key:
        raise ToolError("the device of session %s belongs to another client; only the client that opened it "
                        "may close it (it closes by itself after %d s of that client's silence)"
                        % (device.session_id, DEVICE_IDLE_S), "close your own device: reticle_close with no sessionId",
                        code="device_not_yours")
    await hub.devices.close(device, "reticle_close")
    if device.attached:  # the user's tab stays open where it is; only Reticle's hold on it ends
        return {"closed": False, "detached": True, "sessionId": device.session_id, "deviceId": device.id,
                "note": "the tab stays open at %s; Reticle's scripts leave it at its next load (the SDK in the "
                        "page it shows now stays silent: it cannot reach the daemon)" % device.url[:200]}
    return {"closed": True, "sessionId": device.session_id, "deviceId": device.id}


async def _tool_screenshot(hub: _Daemon, session: Optional["_BrowserSession"], args: dict,
                           ctx: "_CallContext") -> dict:
    """reticle_screenshot: a PNG of a device's viewport, one element (`ref`) or the full page (capped
    at SCREENSHOT_MAX_HEIGHT, and said so), written privately to the state directory and linked; with
    `inline`, a scaled JPEG strip too.  A person's tab cannot be captured: the SDK sees no pixels."""
    session = await hub.resolve_tab(args, ctx)
    device = _device_of(session)
    if device is None or device.closed:
        raise ToolError("session %s is a tab a person opened, and only a device Reticle started can take a "
                        "screenshot: the in-page SDK reads the program, not pixels." % session.id,
                        "open the app in a device with reticle_open {url}, then take the screenshot there",
                        code="device_required")
    await _confirm_answering(session)  # the browser would wait for a busy page's main thread
    if session.not_answering() is not None:  # a capture waits for the page's main thread
        raise ToolError("no screenshot: the tab does not answer (%s)." % session.not_answering(),
                        "reticle_navigate {reload: true} reloads it (its running script is ended first)",
                        code="not_answering")
    metrics = await device.layout()
    view = metrics.get("cssVisualViewport") or {}
    page_x, page_y = float(view.get("pageX", 0)), float(view.get("pageY", 0))
    area = {"x": page_x, "y": page_y, "width": float(view.get("clientWidth", device.viewport[0])),
            "height": float(view.get("clientHeight", device.viewport[1]))}
    clip = None
    if args.get("ref"):
        box = (await session.command("inspect", {"ref": args["ref"]}) or {}).get("box") or {}
        if not box.get("width") or not box.get("height"):
            raise ToolError("the element %s has no box to capture (hidden or empty)." % args["ref"],
                            "reticle_inspect shows its box; take a viewport screenshot instead", code="target_unboxed")
        clip = area = {"x": page_x + box["x"], "y": page_y + box["y"], "width": box["width"],
                       "height": box["height"]}
    elif args.get("fullPage"):
        size = metrics.get("cssContentSize") or metrics.get("contentSize") or {}
        clip = area = {"x": 0, "y": 0, "width": min(float(size.get("width", area["width"])), 4096.0),
                       "height": min(float(size.get("height", area["height"])), float(SCREENSHOT_MAX_HEIGHT))}
        cut = float(size.get("height", 0) or 0) > SCREENSHOT_MAX_HEIGHT
    png = await device.capture("png", clip=dict(clip, scale=1) if clip else None)
    width, height = _png_size(png)
    name = "%s-%s-%s.png" % (device.id, time.strftime("%Y%m%d-%H%M%S"), secrets.token_hex(2))
    path = os.path.join(hub.state.ensure(), "screenshots", name)
    await asyncio.get_running_loop().run_in_executor(None, _write_private, path, png)
    out = {"path": path, "bytes": len(png), "width": width, "height": height, "sessionId": session.id,
           "url": device.url}
    if args.get("fullPage") and not args.get("ref") and cut:
        out["truncated"] = {"pageHeight": round(float(size.get("height", 0))), "capturedHeight": SCREENSHOT_MAX_HEIGHT,
                            "note": "the page is taller than %d px; the capture stops there" % SCREENSHOT_MAX_HEIGHT}
    link = {"type": "resource_link", "uri": _file_uri(path), "name": name, "mimeType": "image/png",
            "size": len(png), "description": "%dx%d screenshot of %s" % (width, height, device.url[:200])}
    if not args.get("inline"):
        return _WithContent(out, [link])
    scale = min(1.0, SCREENSHOT_INLINE_MAX_WIDTH / max(1.0, area["width"]))
    # a readable strip, not 32,000 px
    area = dict(area, height=min(area["height"], SCREENSHOT_INLINE_MAX_HEIGHT / scale))
    jpeg = await device.capture("jpeg", clip=dict(area, scale=scale), quality=80)
    jw, jh = _jpeg_size(jpeg)
    out["inline"] = {"mimeType": "image/jpeg", "bytes": len(jpeg), "width": jw, "height": jh}
    return _WithContent(out, [link, {"type": "image", "data": base64.b64encode(jpeg).decode("ascii"),
                                     "mimeType": "image/jpeg"}])


# ---- the MCP conventions of each tool ----
# Each tool's title, annotations (hints clients auto-approve and group by), and the outputSchema of an
# answer whose shape is stable.  Read-only tools say only readOnlyHint and openWorldHint (the other two
# hints mean nothing for them); a tool that acts says all four, since MCP's defaults (destructive, open
# world) would claim more than is true.  openWorldHint is true where the tool loads a URL the caller
# names; every other tool works inside the app under test.
_READS = {"readOnlyHint": True, "openWorldHint": False}


def _acts(destructive: bool, idempotent: bool, open_world: bool = False) -> dict:
    return {"readOnlyHint": False, "destructiveHint": destructive, "idempotentHint": idempotent,
            "openWorldHint": open_world}


def _shape(required: Tuple[str, ...], **props: dict) -> dict:
    """An outputSchema: the fields every answer has (and the types of a few); others may appear."""
    out: Dict[str, Any] = {"type": "object", "required": list(required)}
    if props:
        out["properties"] = props
    return out


_VERIFIED = {"enum": ["yes", "no", "unknown"]}
_TOOL_CONVENTIONS: Dict[str, Tuple[str, dict, Optional[dict]]] = {
    "reticle_sessions": ("Sessions", _READS, _shape(("sessions",), sessions={"type": "array"})),
    "reticle_navigate": ("Navigate", _acts(False, True, True), _shape(("confirmed", "since", "sessionId"))),
    "reticle_snapshot": ("Snapshot", _READS, None),
    "reticle_query": ("Query", _READS, None),
    "reticle_inspect": ("Inspect", _READS, None),
    "reticle_act": ("Act", _acts(True, False), None),
    "reticle_act_sequence": ("Act sequence", _acts(True, False), _shape(("since",))),
    "reticle_act_and_wait": ("Act and wait", _acts(True, False),
                             _shape(("verified", "verifiedReason", "because"), verified=_VERIFIED)),
    "reticle_observe": ("Observe", _READS, _shape(("events",), events={"type": "array"})),
    "reticle_network": ("Network", _READS, None),
    "reticle_console": ("Console", _READS, None),
    "reticle_wait_for": ("Wait for", _READS, _shape(("pass",), **{"pass": {"type": "boolean"}})),
    "reticle_assert": ("Assert", _READS, _shape(("verified", "verifiedReason", "because"), verified=_VERIFIED)),
    "reticle_state": ("State", _READS, None),
    "reticle_fault": ("Fault requests", _acts(False, False), _shape(("sessionId",))),
    "reticle_capabilities": ("Capabilities", _READS, None),
    "reticle_flow_save": ("Save flow", _acts(True, True), _shape(("saved", "name", "steps"))),
    "reticle_flow_list": ("Flows", _READS, _shape(("dir", "flows"), flows={"type": "array"})),
    "reticle_flow_replay": ("Replay flow", _acts(True, False, True),
                            _shape(("verified", "steps", "because"), verified=_VERIFIED)),
    "reticle_open": ("Open device", _acts(False, True, True), _shape(("sessionId", "deviceId", "url"))),
    "reticle_close": ("Close device", _acts(True, True), _shape(("closed", "sessionId"))),
    "reticle_screenshot": ("Screenshot", _acts(False, False), _shape(("path", "bytes", "width", "height"))),
    "reticle_watch_db": ("Watch a store", _acts(False, True), _shape(("stores",), stores={"type": "array"})),
}


# ---- the registry: every tool is one _ToolSpec record, registered the same way ----

class _ToolSpec(NamedTuple):
    """One tool as data: its name, description, argument properties, handler, example and required
    fields; `own_tab` when the handler resolves the tab itself (a device, a journey to save) rather
    than being given the tab of `sessionId`; `quiet`, accepted spellings tools/list does not show."""

    name: str
    description: str
    props: dict
    handler: Callable
    example: Optional[dict] = None
    required: Tuple[str, ...] = ()
    own_tab: bool = False
    quiet: Tuple[str, ...] = ()


# DESIGN section 7, in the order tools/list shows them
_TOOL_SPECS: Tuple[_ToolSpec, ...] = (
    _ToolSpec("reticle_sessions",
        "The connected tabs and devices (id, url, health); an empty list says why and how to connect one.",
        {}, _tool_sessions, {}),
    _ToolSpec("reticle_navigate",
        "Go to `url` or `reload: true`, and wait for the page to reconnect; later asserts count from here.",
        {"url": {"type": "string", "minLength": 1, "maxLength": 4096}, "reload": {"type": "boolean"},
         "hard": {"type": "boolean"}, "sessionId": _SESSION_ID},
        _tool_navigate, {"url": "http://localhost:5173/checkout"}),
    _ToolSpec("reticle_snapshot",
        "The page as an accessibility tree with stable refs (e7); `scope` a selector or ref, `diff: true` for "
        "what changed since the last snapshot.",
        {"scope": {"type": "string", "minLength": 1}, "mode": {"enum": ["full", "interactive", "status"]},
         "diff": {"type": "boolean"}, "sessionId": _SESSION_ID},
        _tool_snapshot, {"mode": "interactive"}),
    _ToolSpec("reticle_query",
        "Find elements by role (+name), text, label, placeholder, testid or alt: counts and refs, near "
        "misses when nothing matches.",
        {"by": {"enum": ["role", "text", "label", "placeholder", "testid", "alt"]},
         "value": _TEXT_MATCH, "name": _TEXT_MATCH,
         "role": {"type": "string"}, "text": _TEXT_MATCH, "label": _TEXT_MATCH,
         "placeholder": _TEXT_MATCH, "testid": {"type": "string"}, "alt": _TEXT_MATCH,
         "scope": {"type": "string", "minLength": 1}, "self": {"type": "boolean"},
         "attrs": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
         "limit": {"type": "integer", "minimum": 0, "maximum": 200}, "count_only": {"type": "boolean"},
         "sessionId": _SESSION_ID},
        _tool_query, {"by": "role", "value": "button", "name": "Pay"}),
    _ToolSpec("reticle_inspect",
        "One element by ref: role, name, states, box, styles, occlusion.",
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "sessionId": _SESSION_ID},
        _tool_inspect, {"ref": "e7"}, required=("ref",)),
    _ToolSpec("reticle_act",
        "Act on one element (`ref` or `target`) and return its effect; proves nothing. Destructive "
        "controls need args.confirmDangerous.",
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "target": _TARGET,
         "action": {"enum": _ACTIONS}, "args": _ACT_ARGS, "refuseWhenThrottled": {"type": "boolean"},
         "sessionId": _SESSION_ID},
        _tool_act, {"ref": "e7", "action": "click"}, required=("action",)),
    _ToolSpec("reticle_act_sequence",
        "Several acts in order, stopping at the first failure.",
        {"steps": {"type": "array", "items": _STEP, "minItems": 1, "maxItems": 50},
         "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 60000}, "sessionId": _SESSION_ID},
        _tool_act_sequence,
        {"steps": [{"ref": "e3", "action": "fill", "args": {"value": "a@b.c"}}, {"ref": "e4", "action": "click"}]},
        required=("steps",)),
    _ToolSpec("reticle_act_and_wait",
        "Act, then wait for `until` (default: the page settles) and return a verdict, verified "
        "yes|no|unknown; only yes passes. " + _PREDICATE_DIGEST,
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "target": _TARGET,
         "action": {"enum": _ACTIONS}, "args": _ACT_ARGS, "until": _PREDICATE, "predicate": _PREDICATE,
         "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000},
         "refuseWhenThrottled": {"type": "boolean"}, "timeline": {"type": "boolean"}, "sessionId": _SESSION_ID},
        _tool_act_and_wait,
        {"target": {"role": "button", "name": "Pay"}, "action": "click",
         "until": {"kind": "net", "urlContains": "/api/pay", "status": 200}},
        required=("action",), quiet=("predicate",)),
    _ToolSpec("reticle_observe",
        "Raw events of a window (default the last 2 s) with a summary.",
        {"window_ms": {"type": "integer", "minimum": 1, "maximum": 600000}, "since": _CURSOR,
         "until": _CURSOR, "actionId": {"type": "string"},
         "filters": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
         "max_events": {"type": "integer", "minimum": 1, "maximum": 2000}, "sessionId": _SESSION_ID},
        _tool_observe, {"window_ms": 2000, "filters": ["net", "console"]}),
    _ToolSpec("reticle_network",
        "Requests (fetch, XHR, documents) and socket messages since the last act: status, timing, bodies.",
        {"since": _CURSOR, "until": _CURSOR, "actionId": {"type": "string"},
         "method": {"type": "string"}, "urlContains": {"type": "string"},
         "status": {"type": "integer", "minimum": 0, "maximum": 999}, "ok": {"type": "boolean"},
         "limit": {"type": "integer", "minimum": 1, "maximum": 2000}, "bodies": {"type": "boolean"},
         "sessionId": _SESSION_ID},
        _tool_network, {"urlContains": "/api/", "status": 500}),
    _ToolSpec("reticle_console",
        "Console messages and uncaught errors since the last act.",
        {"level": {"enum": ["debug", "log", "info", "warn", "error"]}, "since": _CURSOR, "until": _CURSOR,
         "actionId": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 2000},
         "sessionId": _SESSION_ID},
        _tool_console, {"level": "error"}),
    _ToolSpec("reticle_wait_for",
        "Wait until `predicate` holds; pass and evidence, no verdict.",
        {"predicate": _PREDICATE, "until": _PREDICATE,
         "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000}, "since": _CURSOR,
         "sessionId": _SESSION_ID},
        _tool_wait_for, {"predicate": {"kind": "text", "contains": "Saved"}}, quiet=("until",)),
    _ToolSpec("reticle_assert",
        "Check `predicate` over the events since the last act and the live page: a verdict, verified "
        "yes|no|unknown. " + _PREDICATE_KINDS_LINE,
        {"predicate": _PREDICATE, "until": _PREDICATE,
         "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000}, "since": _CURSOR,
         "sessionId": _SESSION_ID},
        _tool_assert, {"predicate": {"kind": "console", "level": "error", "absent": True}}, quiet=("until",)),
    _ToolSpec("reticle_state",
        "App state from registered stores: all at depth 1, or one `store` at a dot `path`.",
        {"store": {"type": "string"}, "path": {"type": "string"},
         "depth": {"type": "integer", "minimum": 0, "maximum": 10}, "sessionId": _SESSION_ID},
        _tool_state, {"store": "cart", "path": "items.length"}),
    _ToolSpec("reticle_capabilities",
        "What the app declared with reticle.describe, and the testids on the page.",
        {"sessionId": _SESSION_ID}, _tool_capabilities, {}),
    _ToolSpec("reticle_fault",
        "Make this tab's matching requests fail on purpose (respond {status}, abort, delayMs) to prove the app "
        "tells the user; clear, list. Marked faulted: true.",
        dict(_FAULT_SCHEMA, sessionId=_SESSION_ID), _tool_fault,
        {"match": {"urlContains": "/api/save", "method": "POST"}, "respond": {"status": 500}}),
    _ToolSpec("reticle_flow_save",
        "Save what this tab just verified (or `steps`) as .reticle/flows/<name>.json, targets anchored "
        "by role, name, label or testid, secrets as variables.",
        {"name": {"type": "string", "minLength": 1, "maxLength": 64}, "since": _CURSOR,
         "steps": {"type": "array", "items": {"type": "object", "description": "a step of a flow file"},
                   "minItems": 1, "maxItems": FLOW_MAX_STEPS},
         "startUrl": {"type": "string", "maxLength": 4096}, "sessionId": _SESSION_ID,
         "origin": {"type": "string", "maxLength": 2048,
                    "description": "a journey over two apps: save the steps on this origin"},
         "setup": {"type": "boolean", "description": "a login: replayed yes, it saves the browser state"},
         "auth": {"type": "string", "maxLength": 64, "description": "start from this setup flow's state"},
         "replayed": {"type": "boolean", "description": "save the steps a flow's replay took too (never by default)"}},
        _tool_flow_save, {"name": "add-record"}, required=("name",), own_tab=True),
    _ToolSpec("reticle_flow_list", "List the saved flows of the project (.reticle/flows).",
        {}, _tool_flow_list, {}),
    _ToolSpec("reticle_flow_replay",
        "Replay a saved flow from `url`, finding every target again: a verdict per step, yes only if all are. "
        "`fresh`: no cookies or storage.",
        {"name": {"type": "string", "minLength": 1, "maxLength": 64}, "flow": {"type": "object"},
         "url": {"type": "string", "minLength": 1, "maxLength": 4096}, "fresh": {"type": "boolean"},
         "secrets": {"type": "object", "maxProperties": 64, "additionalProperties": {"type": "string"}},
         "faults": {"type": "array", "maxItems": 8, "description": "reticle_fault specs held during this replay",
                    "items": {"type": "object", "additionalProperties": False, "required": ["match"],
                              "properties": {k: v for k, v in _FAULT_SCHEMA.items() if k not in ("clear", "list")}}},
         "setupFlow": {"type": "object", "description": "the setup flow that makes the flow's auth state"},
         "sessionId": _SESSION_ID},
        _tool_flow_replay, {"name": "add-record"}),
    _ToolSpec("reticle_open",
        "Open `url` in a device (a browser Reticle drives): SDK injected, real input; answers its id. "
        "`fresh`: no old cookies or storage; `attach`: the user's tab.",
        {"url": {"type": "string", "minLength": 1, "maxLength": 4096}, "headed": {"type": "boolean"},
         "attach": {"type": "boolean"},
         **{k: {"type": "string", "maxLength": 4096} for k in _ENDPOINT_ARGS},
         "viewport": {"type": "object", "additionalProperties": False, "required": ["width", "height"],
                      "properties": {"width": {"type": "integer", "minimum": 200, "maximum": 3840},
                                     "height": {"type": "integer", "minimum": 200, "maximum": 2160}}},
         "fresh": {"type": "boolean"},
         "auth": {"type": "string", "maxLength": 64, "description": "start logged in: a setup flow's saved state"}},
        _tool_open, {"url": "http://localhost:5173/"}, required=("url",), own_tab=True, quiet=_ENDPOINT_ARGS),
    _ToolSpec("reticle_close", "Close a device (by sessionId, else your own).",
        {"sessionId": _SESSION_ID}, _tool_close, {}, own_tab=True),
    _ToolSpec("reticle_screenshot",
        "A device's viewport, `fullPage` or one `ref` as a PNG file; `inline` adds a JPEG image.",
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "fullPage": {"type": "boolean"},
         "inline": {"type": "boolean"}, "sessionId": _SESSION_ID},
        _tool_screenshot, {"inline": True}, own_tab=True),
    _ToolSpec("reticle_watch_db",
        "Watch the app's database read-only by its URL (sqlite:////abs.db, postgresql://..., file:///abs.json): "
        "its commits join verdicts.",
        {"url": {"type": "string", "minLength": 1, "maxLength": 4096}, "unwatch": {"type": "boolean"}},
        _tool_watch_db, {"url": "sqlite:////home/me/app/db.sqlite3"}, required=("url",), own_tab=True),
)


def _build_registry() -> _ToolRegistry:
    """Every tool of DESIGN section 7 that works (_TOOL_SPECS), with its final schema: a tool given
    the tab of `sessionId` also takes `detail`; each gets its MCP conventions (_TOOL_CONVENTIONS)."""
    reg = _ToolRegistry()
    for spec in _TOOL_SPECS:
        given_tab = "sessionId" in spec.props and not spec.own_tab
        props = dict(spec.props, detail=_DETAIL) if given_tab else dict(spec.props)
        tool = reg.add(_Tool(spec.name, spec.description, _obj(props, spec.required), spec.handler, spec.example,
                             session=given_tab, quiet=spec.quiet))
        if tool.name in _TOOL_CONVENTIONS:
            tool.convene(*_TOOL_CONVENTIONS[tool.name])
    return reg
