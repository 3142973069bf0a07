"""Tools.

The tools an agent calls, one handler each: sessions, snapshots and queries, acts and navigation,
observing, network and console, faults, waiting and asserting, and act_and_wait.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import re
import secrets
import time
import urllib.parse
from typing import Any, Dict, List, Literal, Optional, Tuple, overload

from .answer import (_answer, _with_buffer, _with_health)
from .bridge import _act_command, _summarise
from .browser import _device_log
from .calls import _CALL_DEADLINE, _CallContext, _WithContent, _progress_note
from .constants import (HYDRATE_ACT_MS, HYDRATE_WAIT_MS,
    OBSERVE_MAX_BYTES, __version__, _emit)
from .daemon import _Daemon
from .devices import _device_of
from .errors import _StoreError, _CdpError, _TabGone, ToolError
from .events import _CONSOLE_TYPES, _FRAME_TYPES, _call_matches, _event_type, _is_dev, _request_key
from .faults import _FAULT_CDP_TYPES, _FAULT_DEVICE_COVERS, _FAULT_SDK_COVERS, _FAULT_SDK_MISSES, _FAULT_SDK_TYPES
from .journal import _journal, _journey_anchor, _no_plain_secret
from .judge import _judge, _judge_final
from .observation import _leaves
from .observe import _locate_in, _observe, _observe_now
from .predicates import _PREDICATE_KINDS, _deep_equal, _describe_predicate, _predicate_fail, parse_predicate
from .stores import _watched_stores
from .tab import _BrowserSession
from .timeline import _timeline, _timeline_svg
from .util import _dumps, _file_uri, _is_loopback_host, _redact, _short, _write_private


def _cost(obj: Any) -> dict:
    size = len(_dumps(obj).encode("utf-8"))
    return {"bytes": size, "tokens": (size + 3) // 4}


async def _tool_sessions(hub: _Daemon, session: Optional["_BrowserSession"], args: dict,
                         ctx: "_CallContext") -> dict:
    """reticle_sessions: the connected tabs (a device marked yours or another client's); with none,
    why, naming what the daemon refused recently (a script load, a socket) and what to do."""
    sessions = [_describe_session(s) for s in hub.bridge.live()]
    for tab in sessions if ctx is not None and ctx.transport != "resource" else ():
        device = hub.devices.for_session(tab["sessionId"]) if "device" in tab else None
        if device is not None and device.owner != ctx.session_key and not device.owner.startswith("cli:"):
            tab["device"]["yours"] = False  # listed, but every call on it is refused (Hub.resolve_tab)
            tab["device"]["note"] = "another MCP client's device: open your own with reticle_open"
    out: Dict[str, Any] = {"sessions": sessions}
    unattributed = hub.otel.sources.unattributed(hub.clock())
    if unattributed:  # spans reach the daemon and land in no tab: why, and the fix for that stack
        out["unattributedSpans"] = unattributed
    if not sessions:
        out["why"] = hub.bridge.why()
        reason = ("no tab is connected now (%d connected since the daemon started, all gone)"
                  % hub.bridge.ever_connected if hub.bridge.ever_connected else
                  "no tab has loaded %s/reticle.js yet" % hub.public_origin())
        if hub.refusals:
            # a page did try: the script tag is there, what stopped it is what to fix
            out["refused"] = list(hub.refusals)[::-1]
            last = hub.refusals[-1]
            reason = "the daemon refused a page's %s (%s): %s" % (
                "script load" if last["what"] == "script" else "bridge socket", last["reason"], last["fix"])
        out["next_action"] = {
            "action": "open_app",
            "reason": reason,
            "snippet": '<script src="%s/reticle.js"></script>' % hub.public_origin(),
            "or": {"tool": "reticle_open", "args": {"url": "<the app's URL>"},
                   "reason": "a browser of Reticle's own, with the SDK injected into the app"},
        }
    return out


async def _tool_snapshot(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    mode = args.get("mode", "full")
    cmd = {"mode": mode}
    if args.get("scope"):
        cmd["scope"] = args["scope"]
    result = await session.command("snapshot", cmd)
    if not isinstance(result, dict):
        raise ToolError("the page answered snapshot with %r" % type(result).__name__, code="page_unexpected")
    prev, now = session.snapshots.remember(args.get("scope"), mode, result)
    diffed = _snapshot_answer(dict(result), prev, now)
    if args.get("diff"):
        result = diffed
    result["cost"] = _cost(result)
    return result


def _query_args(args: dict) -> dict:
    out = {k: v for k, v in args.items() if k in ("by", "value", "name", "scope", "self", "attrs",
                                                 "limit", "count_only")}
    if "by" not in out:
        for alias in ("testid", "label", "placeholder", "alt", "text", "role"):
            if alias in args:
                out["by"] = alias
                out["value"] = args[alias]
                break
    if "by" not in out:
        raise ToolError("reticle_query needs what to search by: `by` + `value`, or one of testid, "
                        "label, placeholder, alt, text, role.",
                        'for example {"by": "role", "value": "button", "name": "Pay"}', code="bad_argument")
    if "value" not in out:
        raise ToolError("reticle_query by %s needs a `value`." % out["by"],
                        'for example {"by": "%s", "value": "..."}' % out["by"], code="bad_argument")
    if out.get("self") and not out.get("scope"):
        raise ToolError("`self: true` needs a `scope` (the element to return).", "add scope", code="bad_argument")
    return out


async def _tool_query(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    result = await session.command("query", _query_args(args))
    if isinstance(result, dict):
        result["cost"] = _cost(result)
    return result


async def _tool_inspect(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    return await session.command("inspect", {"ref": args["ref"]})


async def _tool_state(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    cmd = {k: args[k] for k in ("store", "path", "depth") if k in args}
    return await session.command("state_read", cmd)


async def _tool_capabilities(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    result = await session.command("capabilities", {})
    if isinstance(result, dict):
        result.setdefault("source", "live")
    return result


async def _act_across_documents(session: "_BrowserSession", cmd: dict) -> Any:
    """Send one act.  A page that unloads before it answers (a form post, a link) took the
    act's reply with it: that is the act's effect, not a failure, and the evidence is in
    the next document, which the verdict tools follow."""
    deadline = _CALL_DEADLINE.get()  # the page's wait for hydration leaves the act time within the call
    wait = HYDRATE_ACT_MS if deadline is None else max(0.0, min(HYDRATE_ACT_MS, deadline - session.now() - 1500))
    try:
        return await session.command("act", dict(cmd, hydrateMs=round(wait)))
    except _TabGone as exc:
        return {"dispatched": None, "pageUnloaded": True,
                "note": "the page unloaded before it answered (%s); what the act did is in the next "
                        "document's evidence" % exc.error}


async def _tool_act(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    return await _act_once(session, args)


async def _act_once(session: "_BrowserSession", args: dict, replayed: bool = False) -> dict:
    """One act, no verdict (reticle_act, a flow's act without `until`): its effect, journaled (marked
    `replayed` when a flow's replay made it)."""
    session.refuse_if_throttled(args.get("refuseWhenThrottled"))
    cmd = _act_command(args)
    pre = await _journey_anchor(session, args)
    stores = _watched_stores(session)
    if stores is not None:  # what the store committed before the act is not the act's
        await stores.before_act(session)
    since = session.mark_act(args["action"])
    result = await _act_across_documents(session, cmd)
    session.note_act_page_time(since, result)
    if stores is not None:
        stores.bare_act(session)
    dispatched = result.get("dispatched", True) if isinstance(result, dict) else True
    out = {"since": since, "dispatched": dispatched if dispatched is None else bool(dispatched),
           "settled": result.get("settled") if isinstance(result, dict) else None,
           "input": result.get("input", "synthetic") if isinstance(result, dict) else "synthetic",
           "result": result}
    _journal(session, "act", args, out, pre, replayed)
    return _with_health(session, out)


async def _tool_act_sequence(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_act_sequence: several acts sent to the page as one command, stopping at the first that fails;
    each step journaled, and a watched store read before it (what it committed before is not the acts')."""
    steps = []
    for i, step in enumerate(args["steps"]):
        try:
            steps.append(_act_command(step))
        except ToolError as exc:
            raise ToolError("step %d: %s" % (i, exc.error), exc.recovery, code=exc.code) from exc
    per_step = args.get("timeout_ms", 8000) / 1000.0
    stores = _watched_stores(session)
    if stores is not None:
        await stores.before_act(session)
    since = session.mark_act(None)
    if stores is not None:
        stores.bare_act(session)
    result = await session.command("act_sequence", {"steps": steps}, timeout=per_step * len(steps) + 1)
    out: Dict[str, Any] = {"since": since, "input": "cdp" if session.device is not None else "synthetic"}
    if isinstance(result, dict):
        out.update(result)
    done = out.get("completed") if isinstance(out.get("completed"), int) else len(steps)
    results: List[Any] = out["steps"] if isinstance(out.get("steps"), list) else []
    for i, step in enumerate(args["steps"][:done]):  # the journey keeps each step; one by ref has no anchor
        said = results[i] if i < len(results) and isinstance(results[i], dict) else {}
        secret = bool(said.get("password")) or _no_plain_secret(dict(step)).get("secret") is not None
        _journal(session, "act", step, {"since": since},
                 {"target": step.get("target"), "url": session.url, "secret": secret})
    return _with_health(session, out)


async def _unstick_device(session: "_BrowserSession", args: dict) -> bool:
    """A device's tab that does not answer is reloaded (or navigated) by the browser itself: the page's
    running script is ended first when its main thread does not answer CDP either (Runtime.terminateExecution,
    only then: with nothing running it would end the next document's first script).  True when done."""
    device = _device_of(session)
    if device is None or device.page is None or session.not_answering() is None:
        return False
    page = device.page
    try:
        await device.cdp.call("Runtime.evaluate", {"expression": "1", "returnByValue": True}, page, timeout=0.5)
    except _CdpError:
        try:
            await device.cdp.call("Runtime.terminateExecution", {}, page, timeout=2.0)
        except _CdpError:
            pass
    try:
        if args.get("url"):
            await device.cdp.call("Page.navigate", {"url": urllib.parse.urljoin(session.url, args["url"])}, page,
                                  timeout=5.0)
        else:
            await device.cdp.call("Page.reload", {"ignoreCache": bool(args.get("hard"))}, page, timeout=5.0)
    except _CdpError as exc:
        raise ToolError("the stuck tab could not be reloaded: %s" % exc,
                        "reticle_close it and reticle_open again", code="navigation_failed") from exc
    _emit(_device_log, logging.INFO, "device_unstuck", deviceId=device.id,
          reason=_short(session.not_answering() or "", 120))
    return True


async def _tool_navigate(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_navigate: load `url` in the tab, or reload it (`hard` bypasses the cache), and wait up
    to 5 s for it to connect again; `since` is the navigation's mark, so events before it no longer
    count.  Only http(s) URLs or paths are accepted."""
    if not args.get("url") and not args.get("reload"):
        raise ToolError("reticle_navigate needs `url` or `reload: true`.",
                        'for example {"url": "http://localhost:5173/"} or {"reload": true}', code="bad_argument")
    if args.get("hard") and not args.get("reload"):
        raise ToolError("`hard` goes with `reload: true` only.", "drop hard, or add reload", code="bad_argument")
    if args.get("url"):
        parsed = urllib.parse.urlsplit(args["url"])
        if parsed.scheme not in ("http", "https", ""):
            raise ToolError("reticle_navigate opens http: and https: pages only, not %s:" % parsed.scheme,
                            "pass an http(s) URL or a path", code="bad_argument")
    since = session.mark_navigation()
    generation = session.generation
    name, cmd = ("refresh", {"hard": bool(args.get("hard"))}) if args.get("reload") else (
        "navigate", {"url": args["url"]})
    if not await _unstick_device(session, args):
        await session.command(name, cmd)
    _progress_note("waiting for tab %s to connect again after the %s" % (session.id, name))
    confirmed = await hub.bridge.wait_reconnect(session.id, generation, 5.0)
    live = hub.bridge.get(session.id)
    out = {"ok": True, "confirmed": confirmed, "since": since, "sessionId": session.id}
    if live is not None:
        out["url"] = live.url
    if not confirmed:
        out["note"] = ("the page did not reconnect within 5 s; check reticle_sessions (the app may "
                       "have navigated off a page that loads reticle.js)")
    else:
        out["note"] = "events before the navigation no longer count for assert and wait_for"
        if live is not None:
            await _await_hydration(live, out)
    return out


async def _await_hydration(session: "_BrowserSession", out: dict) -> None:
    """A page whose framework renders on the server (the SDK's HYDRATION table: Next.js, React Router,
    SvelteKit, Nuxt, Astro) is answered for once that framework has hydrated it, up to HYDRATE_WAIT_MS:
    `out` gets `hydration` ({framework, hydrated, waitedMs}) when one was recognised, and a note when
    it had not hydrated by then (an act then may reach no handler)."""
    if not session.sdk_version:
        return
    _progress_note("waiting for the page's framework to hydrate it")
    try:
        said = await session.command("hydrated", {"ms": HYDRATE_WAIT_MS}, timeout=HYDRATE_WAIT_MS / 1000.0 + 2)
    except ToolError:
        return  # an older SDK, or a page that does not answer: nothing to say of hydration
    if not isinstance(said, dict) or not isinstance(said.get("framework"), str):
        return
    hydration = {"framework": _short(said["framework"], 40), "hydrated": said.get("hydrated") is True,
                 "waitedMs": said.get("waitedMs") if isinstance(said.get("waitedMs"), int) else None}
    out["hydration"] = hydration
    if not hydration["hydrated"]:
        note = ("the page (%s) had not hydrated after %d ms: an act may reach no handler, and values filled "
                "now may be reset" % (hydration["framework"], HYDRATE_WAIT_MS))
        out["note"] = "%s; %s" % (out["note"], note) if out.get("note") else note


def _window(session: "_BrowserSession", args: dict, default_since: float) -> Tuple[float, Optional[float]]:
    since = args.get("since")
    since = default_since if since is None else float(since)
    until = args.get("until")
    return since, (None if until is None else float(until))


async def _tool_observe(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_observe: the tab's events in a window (default the last 2 s), filtered by action and
    event filters, newest kept when `max_events` cuts, each shown in its public form, with a summary
    and cost.  An answer stops at OBSERVE_MAX_BYTES and says where to continue (`next.since`)."""
    now = hub.clock()
    default = now - args.get("window_ms", 2000)
    since, until = _window(session, args, default)
    events = session.store.query(since, until)
    if args.get("actionId"):
        events = [e for e in events if e.get("actionId") == args["actionId"]]
    if args.get("filters"):
        events = [e for e in events if _event_matches_filters(e["type"], args["filters"])]
    summary = _summarise(events)
    budget = args.get("max_events")
    dropped = 0
    if budget and len(events) > budget:
        dropped = len(events) - budget
        events = events[-budget:]
    shown: List[dict] = []
    used = 0
    for e in events:
        item = _public_event(e)
        size = len(_dumps(item).encode("utf-8"))
        if shown and used + size > OBSERVE_MAX_BYTES:
            break
        shown.append(item)
        used += size
    out: Dict[str, Any] = {"window_ms": round((until or now) - since), "since": since,
                           "events": shown, "summary": summary}
    if len(shown) < len(events):
        rest = events[len(shown)]
        out["next"] = {"since": rest["t"], "remaining": len(events) - len(shown),
                       "note": "this answer stops at %d KiB; call again with since=%s for the rest"
                               % (OBSERVE_MAX_BYTES >> 10, rest["t"])}
    cost = _cost(shown)
    cost["events"] = len(shown)
    if dropped:
        cost["droppedOldest"] = dropped
    out["cost"] = cost
    return _with_buffer(session, out, since)


def _event_matches_filters(etype: str, filters: List[str]) -> bool:
    """An event type passes reticle_observe's filters when one names it or its bucket (its record's)."""
    return etype in filters or _event_type(etype).bucket in filters


def _value_change(before: Any, after: Any) -> dict:
    """A stored value's change, small: the keys that changed when both sides are JSON objects,
    else the old value cut short and the new one."""
    def parsed(v: Any) -> Any:
        if isinstance(v, str) and v[:1] in ("{", "["):
            try:
                return json.loads(v)
            except ValueError:
                return v
        return v
    a, b = parsed(before), parsed(after)
    if isinstance(a, dict) and isinstance(b, dict):
        changed = {k: _short(b[k], 80) for k in b if k not in a or not _deep_equal(a[k], b[k])}
        removed = [k for k in a if k not in b]
        out: Dict[str, Any] = {"changedKeys": dict(list(changed.items())[:20])}
        if removed:
            out["removedKeys"] = removed[:20]
        return out
    def small(v: Any, limit: int) -> Any:
        return v if v is None or len(_dumps(v)) <= limit else _short(v, limit)
    return {"from": small(before, 80), "to": small(after, 200)}


def _public_event(e: dict) -> dict:
    data = e.get("data")
    if e["type"] in ("storage.change", "state.change") and isinstance(data, dict):
        # stores and storage repeat their whole value on every write: answer the change
        data = dict({k: data[k] for k in ("area", "key", "store", "path") if k in data},
                    **_value_change(data.get("from"), data.get("to")))
    out = {"t": e["t"], "type": e["type"], "data": data}
    if e.get("actionId"):
        out["actionId"] = e["actionId"]
    return out


def _net_calls(session: "_BrowserSession", since: float, until: Optional[float]) -> List[dict]:
    """Completed calls plus requests still pending, in start order."""
    events = session.store.query(since, until, prefix="net.")
    done = {}
    order = []
    for e in events:
        d = e["data"]
        rid = _request_key(e)
        if e["type"] == "net.pending":
            if rid not in done:
                done[rid] = dict(d, status="pending", pending=True, t=e["t"])
                order.append(rid)
        elif e["type"] == "net.request":
            if rid not in done:
                order.append(rid)
            done[rid] = dict(d, t=e["t"])
    # pending ones whose start fell before the window but are still open count too
    for d in session.open_since(0.0):
        rid = d["_key"]
        if rid not in done:
            done[rid] = dict(d, status="pending", pending=True)
            order.append(rid)
    return [done[r] for r in order]


def _sockets(session: "_BrowserSession", since: float, until: Optional[float]) -> List[dict]:
    """WebSocket, EventSource and streamed-response traffic, one row per connection: its
    message counts and its last messages."""
    rows: Dict[Tuple[str, str], dict] = {}
    for e in session.store.query(since, until):
        if e["type"] not in _FRAME_TYPES or _is_dev(e["data"]):
            continue
        d = e["data"]
        key = (str(d.get("transport", e["type"][4:])), str(d.get("url", "?")))
        row = rows.setdefault(key, {"transport": key[0], "url": key[1], "messagesIn": 0, "messagesOut": 0,
                                    "last": []})
        direction = d.get("direction")
        if direction in ("in", "out"):
            row["messagesIn" if direction == "in" else "messagesOut"] += 1
            row["last"] = (row["last"] + [{"direction": direction, "t": e["t"],
                                           "data": _short(d.get("data", "(binary)"), 200)}])[-3:]
        elif direction in ("open", "close", "error"):
            row[{"open": "openedAt", "close": "closedAt", "error": "errorAt"}[direction]] = e["t"]
    return list(rows.values())


async def _tool_network(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_network: the requests (and socket messages) in a window, filtered like a net predicate,
    the newest `limit` shaped compactly (bodies cut to 200 characters unless detail is full).  An
    empty answer says whether nothing happened or the filter missed (with the calls present), and a
    write whose body was not captured is flagged."""
    since, until = _window(session, args, session.floor())
    calls = _net_calls(session, since, until)
    all_calls = calls
    calls = [c for c in calls if _call_matches(c, args)]
    limit = args.get("limit", 200)
    total = len(calls)
    calls = calls[-limit:]
    await _locate_in(session, [{"type": "net.request", "data": c} for c in calls], every_call=True)
    bodies = args.get("bodies", True)
    shaped = []
    for c in calls:
        item = {k: c[k] for k in ("method", "url", "status", "statusText", "ok", "contentType", "ms",
                                  "pending", "error", "initiator", "responseSize", "bodyTruncated",
                                  "bodyCaptured", "streamed", "messageCount", "finalStatus", "statusNote",
                                  "faulted", "faultId", "at")
                if k in c and (k != "at" or c[k])}
        if args.get("detail") == "full" and "responseHeaders" in c:
            item["responseHeaders"] = c["responseHeaders"]
        if bodies:
            for k in ("requestBody", "responseBody"):
                if k in c:
                    item[k] = c[k] if args.get("detail") == "full" or not isinstance(c[k], str) else _short(c[k], 200)
        shaped.append(item)
    out: Dict[str, Any] = {"since": since, "calls": shaped}
    sockets = _sockets(session, since, until)
    if sockets:
        out["sockets"] = sockets
    if total > len(shaped):
        out["total"] = total
        out["truncated"] = True
    if not shaped and all_calls:
        out["hint"] = {"totalInWindow": len(all_calls),
                       "present": [{"method": c.get("method"), "url": c.get("url"), "status": c.get("status")}
                                   for c in all_calls[-5:]]}
    elif not all_calls and not sockets:
        out["observed"] = True
        out["note"] = "the observation ran and found no network calls or socket messages in this window"
    if any(c.get("bodyCaptured") is False and str(c.get("method", "")).upper() in ("POST", "PUT", "PATCH")
           for c in shaped):
        out["bodiesNotCaptured"] = True
    out["cost"] = _cost(shaped)
    return _with_buffer(session, out, since)


# ---- reticle_fault: make a request fail on purpose (the Faults record lives beside the Devices) ----

_FAULT_SCHEMA = {
    "match": {"type": "object", "additionalProperties": False, "required": ["urlContains"],
              "description": "{urlContains, method?, resourceType?}",
              "properties": {"urlContains": {"type": "string", "minLength": 1, "maxLength": 2048},
                             "method": {"type": "string", "pattern": "^[A-Za-z]{1,16}$"},
                             "resourceType": {"enum": sorted(_FAULT_CDP_TYPES)}}},
    "respond": {"type": "object", "additionalProperties": False, "required": ["status"],
                "description": "{status, body?, headers?}",
                "properties": {"status": {"type": "integer", "minimum": 200, "maximum": 599},
                               "body": {"type": "string", "maxLength": 65536},
                               "headers": {"type": "object", "maxProperties": 20,
                                           "additionalProperties": {"type": "string", "maxLength": 1024}}}},
    "delayMs": {"type": "integer", "minimum": 1, "maximum": 60000},
    "abort": {"type": "boolean", "const": True},
    "times": {"type": "integer", "minimum": 1, "maximum": 1000},
    "ttlMs": {"type": "integer", "minimum": 100, "maximum": 3600000},
    "clear": {"anyOf": [{"type": "boolean", "const": True}, {"type": "string", "pattern": "^f[0-9a-f]{8}$"}],
              "description": "true (all of yours on the tab) or a faultId"},
    "list": {"type": "boolean", "const": True},
}


def _fault_spec_problem(args: dict) -> Optional[str]:
    """What is wrong with a reticle_fault call the schema let through, or None."""
    modes = [k for k in ("match", "clear", "list") if k in args]
    if len(modes) != 1:
        return "pass exactly one of `match` (set a fault), `clear` (remove) or `list`; got %s" % (
            ", ".join(modes) or "none of them")
    if modes[0] != "match":
        extra = [k for k in ("respond", "delayMs", "abort", "times", "ttlMs") if k in args]
        return "`%s` takes no %s" % (modes[0], ", ".join(extra)) if extra else None
    if "respond" in args and args.get("abort"):
        return "a fault either answers (`respond`) or aborts (`abort`), not both"
    if not ("respond" in args or args.get("abort") or args.get("delayMs")):
        return "a fault needs `respond: {status}`, `abort: true` or `delayMs` (or several: delayMs with either)"
    rtype = args["match"].get("resourceType")
    if rtype == "websocket" and ("respond" in args or args.get("delayMs")):
        return "a WebSocket can only be dropped (`abort: true`), not answered or delayed"
    return None


async def _tool_fault(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """Set, list or clear this client's faults on one tab (see _Faults)."""
    problem = _fault_spec_problem(args)
    if problem:
        raise ToolError("reticle_fault: %s." % problem,
                        'for example {"match": {"urlContains": "/api/save", "method": "POST"}, '
                        '"respond": {"status": 500}}', code="bad_argument")
    faults = hub.faults
    now = hub.clock()
    if args.get("list"):
        mine = [f.public(now) for f in faults.live(session.id) if f.owner == ctx.session_key]
        return {"sessionId": session.id, "faults": mine}
    if "clear" in args:
        gone = faults.clear(session.id, ctx.session_key, args["clear"])
        if args["clear"] is not True and not gone:
            raise ToolError("no fault %s of yours on tab %s" % (args["clear"], session.id),
                            "reticle_fault {list: true} shows yours", code="fault_not_found")
        await faults.sync(session.id)
        return {"sessionId": session.id, "cleared": gone,
                "faults": [f.public(now) for f in faults.live(session.id) if f.owner == ctx.session_key]}
    device = hub.devices.for_session(session.id)  # another client's device never gets here (Hub.resolve_tab)
    rtype = args["match"].get("resourceType")
    if device is None and rtype and rtype not in _FAULT_SDK_TYPES:
        raise ToolError("tab %s has the script tag, where faults act in the SDK's fetch and XHR wrappers only; "
                        "a %s request cannot be faulted there" % (session.id, rtype),
                        "open the app with reticle_open (a device faults documents, form posts and WebSocket "
                        "handshakes in the browser's network layer)", code="fault_unsupported")
    fault = faults.add(session, ctx.session_key, args)
    try:
        await faults.sync(session.id)
    except ToolError:
        faults.clear(session.id, ctx.session_key, fault.id)
        raise
    out = dict(fault.public(now), ttlMs=fault.ttl_ms)
    covers = _FAULT_DEVICE_COVERS if device is not None else _FAULT_SDK_COVERS
    if rtype:
        covers = [{"document": "documents and form posts", "fetch": "fetch and XHR", "xhr": "fetch and XHR",
                   "websocket": "WebSocket handshakes"}.get(rtype, rtype)]
    out["covers"] = covers
    if rtype == "websocket":
        out["in"] = "sdk"
        out["note"] = ("the SDK's WebSocket wrapper drops a matching socket before its handshake reaches the "
                       "server; the page sees an error and a close (1006)")
    elif device is not None:
        out["in"] = "device"
        out["note"] = "the browser answers for the server: a matching request never reaches it%s" % (
            " until the delay is over" if fault.delay_ms and not (fault.abort or fault.respond) else "")
    else:
        out["in"] = "sdk"
        out["notCovered"] = _FAULT_SDK_MISSES
        out["note"] = ("the SDK's fetch, XHR and WebSocket wrappers answer for the server in this tab; documents "
                       "and form posts need a device (reticle_open)")
    return out


# A secret a page prints as code: a framework's debugger page (Werkzeug's `SECRET = "..."`, a
# Django settings dump), an inlined config.  Its value is redacted like a token's.
_PAGE_SECRET_RE = re.compile(r"""(?i)\b((?:[A-Z0-9_]*_)?(?:secret(?:_key)?|password|passwd|api[_-]?key|"""
                             r"""access[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?token)\b"""
                             r"""["']?\s*[:=]\s*)(["'])([^"'\n]{4,})\2""")


def _redact_page_text(text: str) -> str:
    """Page text (a console line, a stack) with secrets that look like code redacted, and tokens."""
    return _redact(_PAGE_SECRET_RE.sub(lambda m: m.group(1) + m.group(2) + "[redacted]" + m.group(2), text))


async def _tool_console(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_console: the console output and uncaught errors in the window (from the last act or
    navigation, like the verdicts), their text and stacks redacted, filtered by `level` (info takes
    debug too), the newest `limit`.  An empty answer says whether the filter missed (counts by level)
    or nothing was logged."""
    since, until = _window(session, args, session.floor())  # like the verdicts: from the last act or navigation
    events = [e for e in session.store.query(since, until) if e["type"] in _CONSOLE_TYPES]
    await _locate_in(session, events[-200:])
    logs = []
    for e in events:
        d = e.get("data") or {}
        level = "error" if e["type"] == "error.uncaught" else e["type"].split(".", 1)[1]
        item = {"level": level, "text": _redact_page_text(str(d.get("text") or d.get("message") or "")), "t": e["t"]}
        if e["type"] == "error.uncaught":
            item["uncaught"] = True
            if d.get("kind"):
                item["kind"] = d["kind"]
        if d.get("stack"):
            item["stack"] = _redact_page_text("\n".join(str(d["stack"]).splitlines()[:5]))
        if d.get("source"):
            item["source"] = d["source"]
        if d.get("at"):
            item["at"] = d["at"]
        logs.append(item)
    everything = logs
    level = args.get("level")
    if level:
        logs = [x for x in logs if x["level"] == level or (level == "info" and x["level"] == "debug")]
    limit = args.get("limit", 200)
    total = len(logs)
    logs = logs[-limit:]
    out: Dict[str, Any] = {"logs": logs}
    if total > len(logs):
        out["total"] = total
        out["truncated"] = True
    if not logs and everything:
        by = collections.Counter(x["level"] for x in everything)
        out["hint"] = {"totalInWindow": len(everything), "byLevel": dict(by)}
    elif not everything:
        out["observed"] = True
        out["note"] = "the observation ran and found no console output in this window"
    out["cost"] = _cost(logs)
    return _with_buffer(session, out, since)


# ---- the verdict tools: they ask the page and wait; the rules above decide ----

@overload
def _predicate_arg(args: dict, required: Literal[True]) -> dict: ...


@overload
def _predicate_arg(args: dict, required: bool) -> Optional[dict]: ...


def _predicate_arg(args: dict, required: bool) -> Optional[dict]:
    raw = args.get("until") if "until" in args else args.get("predicate")
    if "until" in args and "predicate" in args:
        raw = args["until"]
    if raw is None:
        if required:
            raise _predicate_fail(None, ["no predicate given: pass `predicate` (or `until`)"], "predicate")
        return None
    return parse_predicate(raw, "until" if "until" in args else "predicate")


async def _tool_wait_for(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    p = _predicate_arg(args, True)
    floor = float(args["since"]) if args.get("since") is not None else session.floor()
    res = _judge_final(p, await _observe(session, p, floor, args.get("timeout_ms", 4000)))
    res["since"] = floor
    return _with_buffer(session, res, floor)


async def _tool_assert(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    return await _assert_verdict(session, args, _predicate_arg(args, True))


async def _assert_verdict(session: "_BrowserSession", args: dict, p: dict, replayed: bool = False) -> dict:
    """The verdict core of an assert (reticle_assert, a flow's assert step: `replayed`): Observe the
    window from `since` (else the last act or navigation), after the horizon of an act inside it; then
    Answer."""
    floor = float(args["since"]) if args.get("since") is not None else session.floor()
    act_at = session.last_act if (session.last_act or -1) >= floor else None
    obs = await _observe(session, p, floor, args.get("timeout_ms", 0), act_at=act_at)
    obs.act_at = act_at
    return _answer(session, "assert", args, p, obs, replayed=replayed)


async def _tool_act_and_wait(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    out = await _act_and_wait_verdict(session, args, _until_arg(args))
    return await _timeline_link(hub, session, args, out) if args.get("timeline") else out


TIMELINES_KEPT = 200  # timeline files kept in the state folder: the oldest go first


def _write_kept(path: str, data: bytes, keep: int) -> None:
    """_write_private, then the folder's oldest files removed past `keep` (on a worker thread)."""
    _write_private(path, data)
    folder = os.path.dirname(path)
    try:
        names = sorted(os.listdir(folder), key=lambda n: os.path.getmtime(os.path.join(folder, n)))
        for n in names[:max(0, len(names) - keep)]:
            os.unlink(os.path.join(folder, n))
    except OSError:
        pass  # another daemon's prune raced this one: what is left is still capped next time


def _step_label(step: dict) -> str:
    if "assert" in step:
        return "assert %s" % _describe_predicate_safe(step["assert"])
    target = step.get("target") or {}
    what = ", ".join("%s=%s" % (k, _dumps(v) if not isinstance(v, str) else v) for k, v in target.items())
    return "%s %s" % (step["action"], what)


def _describe_predicate_safe(p: Any) -> str:
    try:
        return _describe_predicate(parse_predicate(p, "assert"))
    except Exception:
        return _short(_dumps(p), 120)


async def _timeline_from(session: "_BrowserSession", since: float, verdict: str, label: str) -> dict:
    """The timeline (_timeline) of what began at `since` (an act, or a flow step's start), from the act
    made since then if one was, every sender and renderer named (_locate)."""
    window = session.window(since)
    await _locate_in(session, window, every_call=True)
    act = session.last_act if session.last_act is not None and session.last_act >= since else since
    return _timeline(window, act, session.now(), verdict, label)


async def _timeline_link(hub: _Daemon, session: "_BrowserSession", args: dict, out: dict) -> dict:
    """`timeline: true`: the act's timeline (_timeline) drawn as SVG into the state folder's timelines/,
    a resource link beside the answer (so a client that shows pictures can show it) and its path in it."""
    label = _step_label(dict(args, target=args.get("target") or ({"ref": args["ref"]} if args.get("ref") else {})))
    act = session.last_act if session.last_act is not None else session.floor()
    svg = _timeline_svg(await _timeline_from(session, act, str(out.get("verified")), label)).encode("utf-8")
    name = "%s-%s-%s.svg" % (re.sub(r"[^A-Za-z0-9_-]", "", session.id)[:40] or "tab",
                             time.strftime("%Y%m%d-%H%M%S"), secrets.token_hex(2))
    path = os.path.join(hub.state.ensure(), "timelines", name)
    await asyncio.get_running_loop().run_in_executor(None, _write_kept, path, svg, TIMELINES_KEPT)
    out = dict(out, timeline={"path": path, "bytes": len(svg)})
    return _WithContent(out, [{"type": "resource_link", "uri": _file_uri(path), "name": name, "size": len(svg),
                               "mimeType": "image/svg+xml", "description": "what happened when: %s" % label[:200]}])


def _until_arg(args: dict) -> dict:
    """The predicate an act is judged on: `until` (or `predicate`), else the page settling."""
    return _predicate_arg(args, False) or {"kind": "settled", "quietMs": 300}


def _act_budget(timeout_ms: float, started: float, now: float) -> Tuple[float, float]:
    """What an act's Observe gets of its `timeout_ms`, all on the daemon's clock (ms): (the wait left
    at `now` of the act that started at `started`, the end of its budget: Observe's `settle_until`).
    With a timeout, an act that used it all still gets 0.001 ms, so it is judged once and times out;
    without one (0) the wait is 0: one look."""
    remaining = max(0.001, timeout_ms - (now - started)) if timeout_ms > 0 else 0
    return remaining, started + timeout_ms


async def _act_and_wait_verdict(session: "_BrowserSession", args: dict, p: dict, replayed: bool = False) -> dict:
    """The verdict core of an act (reticle_act_and_wait, a flow's act with `until`: `replayed`): whether
    `p` was already true, the act, then Observe until `p` holds, is decided or the budget runs out;
    Answer."""
    session.refuse_if_throttled(args.get("refuseWhenThrottled"))
    cmd = _act_command(args)
    timeout = args.get("timeout_ms", 4000)
    already_true = False
    if any(_PREDICATE_KINDS[leaf["kind"]].live for leaf, _ in _leaves(p)):
        already_true = bool(_judge(p, await _observe_now(session, p, session.now(), after_act=True))["pass"])
    anchor = await _journey_anchor(session, args)
    stores = _watched_stores(session)
    if stores is not None:  # what the store committed before the act is not the act's
        await stores.before_act(session)
    since = session.mark_act(args["action"])
    started = session.now()
    try:
        effect = await _act_across_documents(session, cmd)
        session.note_act_page_time(since, effect)
        remaining, settle_until = _act_budget(timeout, started, session.now())
        obs = await _observe(session, p, since, remaining, after_act=True, effect=effect, already_true=already_true,
                             settle_until=settle_until)
    finally:
        if stores is not None:
            stores.end_act(session)
    obs.action, obs.act_at = args["action"], since
    return _answer(session, "act_and_wait", args, p, obs, anchor, replayed)


async def _tool_watch_db(hub: _Daemon, session: Optional["_BrowserSession"], args: dict,
                         ctx: "_CallContext") -> dict:
    """reticle_watch_db: watch the app's store read-only (Storage truth), once the agent has read the app's
    configuration; -> what it watches and how, or why it cannot.  `unwatch: true` stops watching it.  A
    PostgreSQL server off this machine is watched only when the user named it (--watch-db, RETICLE_WATCH_DB):
    a tool call may not aim the daemon at another host."""
    url = args["url"]
    if args.get("unwatch"):
        watch = hub.stores.find(url)
        await hub.stores.unwatch(watch.reader.name)
        return {"unwatched": watch.reader.name, "stores": hub.stores.describe()}
    host = urllib.parse.urlsplit(url).hostname if url.lower().startswith("postgres") else None
    if host and not _is_loopback_host(host):
        raise _StoreError("reticle_watch_db watches a PostgreSQL server on this machine only, not %s" % host,
                         "a store on another host must be named by the user: reticle serve --watch-db URL or "
                         "RETICLE_WATCH_DB", code="store_invalid")
    out = await hub.stores.watch(url, "reticle_watch_db")
    return {"watching": out, "stores": hub.stores.describe(),
            "note": "what the store commits while a tab acts now joins that act's evidence; check rows with "
                    "{kind: \"stored\", table, where}"}


def _describe_session(session: "_BrowserSession") -> dict:
    """The tab as reticle_sessions shows it: identity, liveness, attachment, buffer, its device and
    any version skew, and whether it answers commands, with what to do when it does not or when
    it is throttled."""
    now = session.now()
    out = {"sessionId": session.id, "url": session.url, "adapters": session.adapters,
           "hasCapabilities": session.has_capabilities, "lastSeenMs": session.last_seen_ms(),
           "hidden": session.health.hidden, "focused": session.health.focused, "throttled": session.throttled(),
           "attachment": {"connectedSinceMs": int(now - session.connected_at), "reconnects": session.reconnects},
           "sdkVersion": session.sdk_version, "buffer": session.store.stats()}
    if session.title:
        out["title"] = session.title
    if session.server_seen:
        out["serverRecords"] = session.server_seen  # the app's middleware reports this tab's requests
    device = _device_of(session)
    if device is not None:
        out["device"] = {"deviceId": device.id, "input": "cdp", "headed": device.headed}
        if device.endpoint is not None:  # a browser the user runs: where, and whether this is their own tab
            out["device"].update(endpoint=device.endpoint.shown, attached=device.attached)
    if session.sdk_version and session.sdk_version != __version__:
        out["versionSkew"] = {"sdk": session.sdk_version, "daemon": __version__}
    stuck = session.not_answering()
    out["answering"] = stuck is None
    if stuck is not None:
        out["notAnswering"] = stuck
        out["recommendation"] = ("close the dialog in the browser (only the person can)" if session.health.dialog_open
                                 else "reticle_navigate {reload: true} (in a device it stops the page's "
                                      "script first)" if session.device is not None else
                                 "reload the page in the browser, or end what blocks it")
    elif session.throttled():
        out["recommendation"] = ("the tab is hidden or silent; browsers throttle background tabs, so "
                                 "bring it to the front or pass refuseWhenThrottled")
    return out


def _snapshot_answer(result: dict, prev: Optional[Tuple[str, List[str]]], now: Tuple[str, List[str]]) -> dict:
    """A snapshot as the caller reads it with `diff`: full | unchanged | delta against the last snapshot
    of its (scope, mode) on the same route (`prev` and `now` are (route, lines), _SnapshotCache).

    Lines are compared without focus; a line whose ref survives with other content is `changed`,
    not a removal plus an addition."""
    route, lines = now
    if prev is None or prev[0] != route:
        result["mode"] = "full"
        result["reason"] = "first snapshot for this route" if prev is None else "route changed"
        return result

    def by_ref(seq: List[str]) -> Dict[str, str]:
        out = {}
        for ln in seq:
            m = re.search(r"\(ref=(e\d+)\)", ln)
            if m:
                out[m.group(1)] = ln
        return out

    old_refs, new_refs = by_ref(prev[1]), by_ref(lines)
    changed = [{"ref": r, "from": old_refs[r].strip(), "to": new_refs[r].strip()}
               for r in new_refs if r in old_refs and old_refs[r] != new_refs[r]]
    skip = {old_refs[c["ref"]] for c in changed} | {new_refs[c["ref"]] for c in changed}
    strip = lambda ln: re.sub(r" \(ref=e\d+\)", "", ln)  # noqa: E731
    old = collections.Counter(strip(ln) for ln in prev[1] if ln not in skip)
    new = collections.Counter(strip(ln) for ln in lines if ln not in skip)
    added = list((new - old).elements())
    removed = list((old - new).elements())
    if not added and not removed and not changed:
        return {"mode": "unchanged", "status": result.get("status"), "truncated": result.get("truncated", False)}
    out = {"mode": "delta", "status": result.get("status"),
           "delta": {"added": added[:200], "removed": removed[:200],
                     "addedCount": len(added), "removedCount": len(removed)}}
    if changed:
        out["changed"] = changed[:200]
        out["changedCount"] = len(changed)
    return out
