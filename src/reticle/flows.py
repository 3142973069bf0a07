"""Flows.

A flow is a journey the agent verified, saved as `.reticle/flows/<name>.json`
in the app's repository and replayed with no model.  The tools that act or
judge append to a small per-tab journey log (_Journeys); reticle_flow_save
turns a slice of it into steps anchored on testid, role+name, label or
text (never refs), with the predicates that proved it.  Replay re-resolves
every target and judges every step with the verdict core the tools use.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import secrets
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from .auth import _auth_expired, _keep_auth, _load_auth_state
from .calls import _CallContext, _progress_note
from .causes import _write_label, _write_shown, _writes_in
from .constants import HORIZON_CAP_MS, NAV_WAIT_S
from .daemon import _Daemon
from .devices import _device_of
from .errors import _TabGone, ToolError
from .flow_files import (FLOW_FORMAT, REPLAY_WAIT_MS, _SECRET_NAME, _SECRET_REF, _flow_name, _flow_path,
    _flow_problems, _flows_dir, _list_flows, _project_dir, _read_flow)
from .journal import _no_plain_secret
from .observation import _leaves
from .observe import _await_horizon
from .predicates import parse_predicate
from .tab import _BrowserSession
from .tools import (_act_and_wait_verdict, _act_once, _assert_verdict, _describe_predicate_safe, _fault_spec_problem,
    _predicate_arg, _step_label, _timeline_from, _tool_navigate, _until_arg)
from .util import _dumps, _origin_of, _quietly, _short


def _one_origin(journey: List[dict], origin: Optional[str]) -> List[dict]:
    """The journey's steps on one app: all of them when they share an origin; else those on `origin`
    (flow_save's `origin`, or its `startUrl`'s), and with none given a ToolError naming the origins."""
    origins: List[str] = []
    for s in journey:
        o = _origin_of(s.get("url"))
        if o and o not in origins:
            origins.append(o)
    if len(origins) <= 1:
        return journey
    if not origin:
        raise ToolError("the journey spans %d origins (%s), so it is not one app's flow" % (
            len(origins), ", ".join(origins)), "pass `origin` (one of them) to save that app's steps, or `since` "
            "from the first step on one app", origins=origins, code="journey_unsavable")
    mine = [s for s in journey if _origin_of(s.get("url")) == origin]
    if not mine:
        raise ToolError("no step of the journey is on %s; its origins are %s" % (origin, ", ".join(origins)),
                        "pass one of them as `origin`", origins=origins, code="journey_unsavable")
    return mine


def _steps_from_journey(journey: List[dict]) -> Tuple[List[dict], Optional[str]]:
    """Journey log entries -> flow steps (and the first URL)."""
    steps = []
    for entry in journey:
        step = {k: v for k, v in entry.items() if k not in ("t", "url", "writes", "replayed")}
        steps.append(step)
    return steps, (journey[0].get("url") if journey else None)


_TOOTHED_KINDS = ("frame", "state", "signal", "storage", "server")


def _blind_to_writes(raw: Any) -> bool:
    """Does this check look only at what the page shows (text, elements, a route, quiet), so that it
    holds whether or not a write behind it worked?  A `net` leaf counts as a check of the write
    only when it asks for a status or `ok`."""
    try:
        p = parse_predicate(raw, "until")
    except Exception:
        return False
    for leaf, neg in _leaves(p):
        if neg:
            continue
        if leaf["kind"] in _TOOTHED_KINDS or (leaf["kind"] == "net" and ("status" in leaf or "ok" in leaf)):
            return False
    return True


def _toothless_warnings(journey: List[dict]) -> List[str]:
    """flow_save's warning: every step whose check is presence-only over a write its act made."""
    out = []
    for i, entry in enumerate(journey):
        check = entry.get("until") if "action" in entry else entry.get("assert")
        writes = entry.get("writes") or []
        if check is None or not writes or not _blind_to_writes(check):
            continue
        acts = [e for e in journey[:i] if "action" in e]
        if "assert" in entry and acts and acts[-1].get("until") is not None and not _blind_to_writes(acts[-1]["until"]):
            continue  # the act before it already checked what its write answered
        w = writes[0]
        out.append("step %d (%s) checks only what the page shows (%s) over the write %s %s it caused: a replay "
                   "stays yes if that write fails. Add {\"kind\": \"net\", \"method\": \"%s\", \"urlContains\": "
                   "\"%s\", \"ok\": true} to the check, or run `reticle verify --teeth`."
                   % (i, _step_label(entry), _describe_predicate_safe(check), w["method"], w["path"], w["method"],
                      w["path"]))
    return out


def _server_check_suggestions(journey: List[dict]) -> List[str]:
    """flow_save's suggestion when the app reports server records: for each step whose act made a write
    and whose check asks nothing of the server, the `server` predicate that would prove the write kept."""
    out = []
    for i, entry in enumerate(journey):
        check = entry.get("until") if "action" in entry else entry.get("assert")
        writes = entry.get("writes") or []
        if not writes or (check is not None and any(leaf["kind"] == "server" for leaf, _ in _leaves(check))):
            continue
        for w in writes[:3]:
            out.append("step %d (%s) made the write %s %s and the app reports what its server did: add "
                       "{\"kind\": \"server\", \"method\": \"%s\", \"urlContains\": \"%s\", \"writes\": "
                       "{\"min\": 1}} to its check, so that a replay proves the server kept the write"
                       % (i, _step_label(entry), w["method"], w["path"], w["method"], w["path"]))
    return out


def _secret_refs(value: Any) -> List[str]:
    """The ${NAME} references in a step's args, in order (each once)."""
    out: List[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            out.extend(m.group(1) for m in _SECRET_REF.finditer(item) if m.group(1) not in out)
    return out


def _fill_secrets(value: Any, given: Optional[Dict[str, str]] = None) -> Any:
    """Replace every ${RETICLE_SECRET_*} in a step's args with its value: from `given` (the
    values the replaying process read from its own environment), else this process's
    environment.  Any other ${NAME} (${HOME}, ${GITHUB_TOKEN}) is a setup error: a flow from
    someone else's repository must not be able to type this machine's environment into a page."""
    if isinstance(value, dict):
        return {k: _fill_secrets(v, given) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_secrets(v, given) for v in value]
    if isinstance(value, str):
        def sub(m: "re.Match[str]") -> str:
            name = m.group(1)
            if not _SECRET_NAME.fullmatch(name):
                raise ToolError("the flow refers to ${%s}; a flow may read only RETICLE_SECRET_* variables "
                                "(RETICLE_SECRET_ and A-Z 0-9 _), never %s" % (name, name),
                                "rename the reference to ${RETICLE_SECRET_...} in the flow file, or type the "
                                "literal text", setup=True, variable=name, code="secret_refused")
            got = (given or {}).get(name)
            if got is None:
                got = os.environ.get(name)
            if got is None:
                raise ToolError("the flow needs the environment variable %s (a secret it does not store)"
                                % name, "set %s in the environment of the process that replays (the daemon "
                                "for reticle_flow_replay, the shell for reticle verify) and replay" % name,
                                setup=True, variable=name, code="secret_missing")
            return got
        return _SECRET_REF.sub(sub, value)
    return value


def _secret_origin(step: dict, flow: dict, start: Optional[str]) -> str:
    """The one origin a step's secret may be typed into: the origin the flow recorded it on
    (secretOrigin, else the flow's startUrl); a replay from another origin (`url`) moves the
    flow's start origin to it, and only that one."""
    recorded = _origin_of(step.get("secretOrigin") or flow.get("startUrl"))
    saved_start, replay_start = _origin_of(flow.get("startUrl")), _origin_of(start)
    if replay_start and (not recorded or recorded == saved_start):
        return replay_start
    return recorded


def _check_secret_origin(session: "_BrowserSession", step: dict, names: List[str], allowed: str) -> None:
    """Refuse (a setup error) to type a secret into a page of any origin but `allowed`.  In a
    device the page's URL is the browser's own record (CDP), not what the page says."""
    device = _device_of(session)
    here = _origin_of(device.url if device is not None and device.url else session.url)
    if not allowed or here != allowed:
        raise ToolError("the flow would type %s into %s, but types a secret only into the origin it was "
                        "recorded on (%s); nothing was typed" % (", ".join(names), here or "a page with no origin",
                                                                  allowed or "none recorded"),
                        "check the flow's steps and startUrl: a step before this one left the app's origin",
                        setup=True, origin=here, allowed=allowed, code="secret_refused")


def _remask_journey(hub: _Daemon, session_id: str, step: dict, values: Dict[str, str]) -> None:
    """After a replayed act typed secrets, the journey log holds them in plain text: put their
    ${NAME} back, so the next reticle_flow_save stores the reference, never the value."""
    if not values:
        return
    for entry in hub.journeys.since(session_id, -1e18)[-4:]:
        act_args = entry.get("args")
        if not isinstance(act_args, dict):
            continue
        masked = {}
        for key, v in act_args.items():
            for name, secret in values.items():
                if isinstance(v, str) and secret and secret in v:
                    v = v.replace(secret, "${%s}" % name)
                    entry["secret"] = name
            masked[key] = v
        entry["args"] = masked
        if entry.get("secret") and step.get("secretOrigin"):
            entry["secretOrigin"] = step["secretOrigin"]


def _start_url(flow: dict, url: Optional[str]) -> Optional[str]:
    """Where a replay starts: `url` as given; an origin alone (no path) keeps the flow's own
    path and query; without `url`, the flow's startUrl."""
    start = flow.get("startUrl")
    if not url:
        return start
    parts = urllib.parse.urlsplit(url)
    if parts.path in ("", "/") and not parts.query and start:
        saved = urllib.parse.urlsplit(start)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, saved.path or "/", saved.query, ""))
    return url


def _nearest(error: str) -> List[str]:
    """The candidates the page named in a target miss ("nearest: a, b; testids present: ...")."""
    out: List[str] = []
    for part in error.split("; "):
        for prefix in ("nearest: ", "testids present: "):
            if part.startswith(prefix):
                out.extend(x.strip() for x in part[len(prefix):].split(", ") if x.strip())
        if re.match(r"^\w+s present: ", part):
            out.extend(x.strip() for x in part.split(": ", 1)[1].split(", ") if x.strip())
    return out[:8]


async def _await_target(session: "_BrowserSession", target: dict, timeout_ms: float) -> None:
    """Wait (up to timeout_ms) until `target` matches at least one element: the SDK connects
    before the document is parsed, so a step right after a navigation may come too early.
    Whatever the page shows at the end, the act itself decides (and never acts on a miss)."""
    query: Dict[str, Any] = {"count_only": True}
    for key in ("testid", "label", "placeholder", "text", "role"):
        if key in target:
            query["by"], query["value"] = key, target[key]
            break
    if "by" not in query:
        return
    if "name" in target:
        query["name"] = target["name"]
    deadline = session.now() + timeout_ms
    while True:
        try:
            found = await session.command("query", query, timeout=2.0)
        except ToolError:
            found = None
        if isinstance(found, dict) and (found.get("count") or 0) > 0:
            return
        if session.now() >= deadline:
            return
        await session.wait_change(0.05)


async def _replay_step(hub: _Daemon, session: "_BrowserSession", step: dict, ctx: "_CallContext",
                       secrets_in: Optional[Dict[str, str]] = None, allowed: str = "") -> dict:
    """One step -> {verified, verifiedReason, because, ...}; a target that does not resolve is
    `no` with the page's nearest candidates, and nothing is acted on.  A step that types a
    secret does so only on the page origin `allowed` (else a setup error, nothing typed).  An act
    first waits for the causal work of the act before it (_horizon: a client router's fetch of the
    next view and its render, at most HORIZON_CAP_MS) and, when that act started a navigation (a
    link, a form post), for the new document, so it is not made on the page being left.  What it
    journals is marked `replayed` (a replay is not the agent's own journey)."""
    if "assert" in step:
        args = {"predicate": step["assert"], "timeout_ms": max(step.get("timeout_ms", 0), REPLAY_WAIT_MS)}
        if session.id:
            args["sessionId"] = session.id
        return await _assert_verdict(session, args, _predicate_arg(args, True), replayed=True)
    last = session.last_act
    if last is not None and last >= session.marks.floor():  # what the act before started (a route's data)
        await _await_horizon(session, last, session.now() + HORIZON_CAP_MS)
    session.documents.expire_arrival()
    if session.documents.between_documents() and await session.documents.next_document(NAV_WAIT_S):
        session = hub.bridge.get(session.id) or session  # the step before started a navigation: act on its page
    names = _secret_refs(step.get("args") or {})
    args = {"action": step["action"], "args": _fill_secrets(step.get("args") or {}, secrets_in)}
    typed = {n: _fill_secrets("${%s}" % n, secrets_in) for n in names}
    if step.get("target"):
        args["target"] = step["target"]
        await _await_target(session, step["target"], REPLAY_WAIT_MS)
    if names:
        _check_secret_origin(session, step, names, allowed)
    try:
        if "until" in step:
            args["until"] = step["until"]
            args["timeout_ms"] = max(step.get("timeout_ms", 4000), REPLAY_WAIT_MS)
            try:
                return await _act_and_wait_verdict(session, args, _until_arg(args), replayed=True)
            finally:
                _remask_journey(hub, session.id, step, typed)
        try:
            res = await _act_once(session, args, replayed=True)
        finally:
            _remask_journey(hub, session.id, step, typed)
    except _TabGone:
        raise
    except ToolError as exc:
        if exc.code in ("target_missing", "target_ambiguous"):
            return {"verified": "no", "verifiedReason": exc.code, "because": exc.error, "nearest": _nearest(exc.error),
                    "acted": False}
        raise
    dispatched = res.get("dispatched")
    ok = dispatched is not False
    return {"verified": "yes" if ok else "no", "verifiedReason": "acted" if ok else "not_dispatched",
            "because": "the %s was dispatched%s" % (step["action"], " (the page unloaded: a navigation)"
                                                    if dispatched is None else "") if ok else
            "the %s was not dispatched: %s" % (step["action"], _short(_dumps(res.get("result")), 200))}


def _step_writes(session: "_BrowserSession", row: dict, cursor: float, until: Optional[float],
                 answered: List[dict]) -> None:
    """The writes the step of `row`, begun at `cursor`, started (before `until`, when the next step began)
    and that were answered by now, joined to its row's `writes` and to the flow's (`answered`, for --teeth).
    Asked again once the next step has run: a plain act returns before its request comes back (on a busy
    machine, well before), and a write answered later is still that act's."""
    shown = row.setdefault("writes", [])
    for w in _writes_in(session.window(cursor), cursor, answers=True, until=until):
        if not any(_write_label(x) == _write_label(w) for x in shown):
            shown.append(_write_shown(w))
            answered.append(w)
    if not shown:
        del row["writes"]


def _expectation(step: dict, row: dict) -> bool:
    """Did the step turn out as the flow expects?  `yes` by default; with `expect: "no"` the app
    must fail visibly (a `no` verdict), and a target that was not found is never that."""
    if step.get("expect") != "no":
        return row["verified"] == "yes"
    row["expect"] = "no"
    row["met"] = row["verified"] == "no" and row.get("verifiedReason") not in (
        "target_missing", "target_ambiguous", "not_dispatched")
    if not row["met"] and row["verified"] == "yes":
        row["because"] = "the flow expects no (the app must show the failure) but it was yes: %s" % row.get("because")
    return bool(row["met"])


def _step_evidence(res: dict) -> Any:
    """The few fields of a verdict a person needs to see why."""
    out = {}
    for key in ("failureReason", "observed", "expected", "evidence"):
        if res.get(key) not in (None, "", [], {}):
            out[key] = res[key]
    for key in ("nearest", "contradictions"):
        if res.get(key):
            out[key] = res[key]
    text = _dumps(out)
    return out if len(text) <= 2000 else {"summary": _short(text, 2000)}


def _flow_reason(steps_out: List[dict], failed_at: Optional[int]) -> str:
    """A flow verdict's verifiedReason: its failing step's own (or `expectation_not_met` when that step
    was yes where the flow expects no), else `all_steps_met`."""
    if failed_at is None:
        return "all_steps_met"
    failing = steps_out[failed_at]
    if failing.get("verified") == "yes":
        return "expectation_not_met"
    return str(failing.get("verifiedReason") or "step_%s" % failing.get("verified"))


async def _replay(hub: _Daemon, session: "_BrowserSession", flow: dict, url: Optional[str], ctx: "_CallContext",
                  fresh: bool = False, secrets_in: Optional[Dict[str, str]] = None,
                  auth: Optional[dict] = None) -> dict:
    """Replay a flow in `session`: navigate to its start (in a device, in a new, empty browser
    context when `fresh`), then every step in order.  The first step that is not `yes` stops
    the flow; the ones after it are `skipped`."""
    started = hub.clock()
    start = _start_url(flow, url)
    steps_out: List[dict] = []
    answered: List[dict] = []   # the writes the steps made, with their answers
    if fresh:
        device = hub.devices.for_session(session.id)
        if device is None:
            raise ToolError("`fresh` needs a device: tab %s is not one Reticle started, and a person's browser "
                            "keeps its cookies" % session.id, "open the app with reticle_open, or drop fresh",
                            setup=True, code="device_required")
        if not start:
            raise ToolError("`fresh` needs a start: the flow has no startUrl", "pass url", setup=True,
                            code="flow_invalid")
        session.mark_navigation()
        session = await hub.devices.load(device, start, fresh=True, auth=auth)
    elif start:
        nav = await _tool_navigate(hub, session, {"url": start}, ctx)
        if not nav.get("confirmed"):
            raise ToolError("the page at %s did not connect within 5 s" % start,
                            "check the URL, and that the page loads %s/reticle.js (or use a device)"
                            % hub.public_origin(), setup=True, code="page_not_connected")
        session = hub.bridge.get(session.id) or session
    verdict = "yes"
    failed_at = None
    before: Optional[Tuple[dict, float]] = None  # the step before's row and when it began
    for i, step in enumerate(flow["steps"]):
        label = _step_label(step)
        if failed_at is not None:
            steps_out.append({"index": i, "step": label, "verified": "skipped"})
            continue
        t0 = hub.clock()
        _progress_note("replaying step %d of %d: %s" % (i + 1, len(flow["steps"]), label))
        cursor = session.now()
        res = await _replay_step(hub, session, step, ctx, secrets_in, _secret_origin(step, flow, start))
        session = hub.bridge.get(session.id) or session
        row = {"index": i, "step": label, "verified": res.get("verified", "unknown"),
               "verifiedReason": res.get("verifiedReason"), "because": res.get("because"),
               "ms": round(hub.clock() - t0)}
        if "until" in step or "assert" in step:
            row["predicate"] = step.get("until") or step.get("assert")
        row["timeline"] = await _timeline_from(session, cursor, row["verified"], label)
        if before is not None:  # the step before: its writes answered while this one ran
            _step_writes(session, *before, cursor, answered)
        before = (row, cursor)
        _step_writes(session, row, cursor, None, answered)  # this step's own
        met = _expectation(step, row)
        if not met or row["verified"] != "yes":
            row["evidence"] = _step_evidence(res)
        if not met:
            failed_at = i
            verdict = "unknown" if row["verified"] == "unknown" else "no"
        steps_out.append(row)
    out = {"name": flow.get("name"), "verified": verdict, "verifiedReason": _flow_reason(steps_out, failed_at),
           "steps": steps_out, "startUrl": start, "sessionId": session.id, "ms": round(hub.clock() - started)}
    writes: List[dict] = []
    for w in answered:   # each with the answer it first got (--teeth's lie)
        if not any(_write_label(x) == _write_label(w) for x in writes):
            writes.append(w)
    if writes:
        out["writes"] = writes
    if failed_at is not None:
        failing = steps_out[failed_at]
        out["failedStep"] = failed_at
        out["because"] = "step %d (%s) is %s%s: %s" % (failed_at, failing["step"], failing["verified"],
                                                       " where the flow expects no" if failing.get("expect") else "",
                                                       failing.get("because"))
    else:
        expected_no = sum(1 for r in steps_out if r.get("expect") == "no")
        out["because"] = "all %d steps are yes" % len(steps_out) if not expected_no else (
            "every step met what the flow expects (%d yes, %d no as expected)" % (len(steps_out) - expected_no,
                                                                               expected_no))
    if not any("until" in s or "assert" in s for s in flow["steps"]):
        out["note"] = "this flow has no predicate: it shows the steps ran, not that they worked"
    return out


async def _replay_flow(hub: _Daemon, session: "_BrowserSession", flow: dict, url: Optional[str], ctx: "_CallContext",
                       fresh: bool = False, secrets_in: Optional[Dict[str, str]] = None,
                       setup_flow: Optional[dict] = None, retry: bool = True) -> dict:
    """_replay with logged-in starts.  A setup flow that ends yes saves its device's state.  A flow
    with `auth` starts, in a fresh context, from its setup flow's saved state; when there is none or
    its cookies expired, the setup flow (`setup_flow`, else the saved one) makes it first.  A flow
    that fails at its first step from a state made before this replay is retried once after its
    setup flow made the state again (a second failure there: _auth_cause), unless not `retry` (a
    replay under faults, whose first step may fail on purpose)."""
    name = flow.get("auth")
    out = await _replay(hub, session, flow, url, ctx, fresh, secrets_in) if not name else \
        await _replay_auth(hub, session, flow, url, ctx, secrets_in, setup_flow, retry)
    if flow.get("setup") and out["verified"] == "yes":
        out["authSaved"] = await _keep_auth(hub, hub.bridge.get(session.id) or session, str(flow.get("name")))
    return out


async def _replay_auth(hub: _Daemon, session: "_BrowserSession", flow: dict, url: Optional[str], ctx: "_CallContext",
                       secrets_in: Optional[Dict[str, str]], setup_flow: Optional[dict], retry: bool) -> dict:
    """_replay_flow for a flow that starts from auth state `flow["auth"]`."""
    name = flow["auth"]
    if hub.devices.for_session(session.id) is None:
        raise ToolError("the flow starts from the auth state %s, which needs a device: tab %s is not one Reticle "
                        "started" % (name, session.id), "open the app with reticle_open", setup=True,
                        code="device_required")
    state = _load_auth_state(_project_dir(hub), name)
    remade = None
    if state is None or _auth_expired(state):
        remade = "there was no saved state" if state is None else "its saved cookies expired"
        state = await _remake_auth(hub, session, name, url, ctx, secrets_in, setup_flow, remade)
    session = hub.bridge.get(session.id) or session
    out = await _replay(hub, session, flow, url, ctx, True, secrets_in, auth=state)
    if out["verified"] != "yes" and out.get("failedStep") == 0 and remade is None and retry:
        remade = "the flow failed at its first step from it (%s)" % _short(str(out.get("because")), 300)
        state = await _remake_auth(hub, session, name, url, ctx, secrets_in, setup_flow, remade)
        session = hub.bridge.get(session.id) or session
        out = await _replay(hub, session, flow, url, ctx, True, secrets_in, auth=state)
        if out["verified"] != "yes" and out.get("failedStep") == 0:
            out["because"] = _auth_cause(hub, out, name, setup_flow)
    if remade is not None:
        out["authRemade"] = {"name": name, "why": remade}
    return out


def _auth_cause(hub: _Daemon, out: dict, name: str, setup_flow: Optional[dict]) -> str:
    """Why a flow failed at its first step although its auth state was just made again: on the page
    its setup flow starts at (the login page), the state no longer logs in; anywhere else the failure
    is the flow's own, said with what was tried."""
    device = hub.devices.for_session(out.get("sessionId"))
    try:
        setup = setup_flow if setup_flow is not None else _read_flow(_project_dir(hub), name)
    except ToolError:
        setup = {}
    here = urllib.parse.urlsplit(device.url if device is not None else "")
    login = urllib.parse.urlsplit(str(setup.get("startUrl") or ""))
    if login.path and (here.netloc, here.path) == (login.netloc, login.path):
        return ("auth state %s no longer logs in: made again by its setup flow, the flow still starts on the "
                "setup flow's page %s: %s" % (name, login.path, out.get("because")))
    return ("%s (the auth state %s was made again by its setup flow and the flow retried: the failure is the "
            "flow's own)" % (out.get("because"), name))


async def _remake_auth(hub: _Daemon, session: "_BrowserSession", name: str, url: Optional[str], ctx: "_CallContext",
                       secrets_in: Optional[Dict[str, str]], setup_flow: Optional[dict], why: str) -> dict:
    """Replay setup flow `name` in a fresh context and answer the state it saved; a setup error naming
    the state when the setup flow is not yes."""
    setup = setup_flow if setup_flow is not None else _read_flow(_project_dir(hub), name)
    if setup.get("name") != name or not setup.get("setup"):
        raise ToolError("the flow %r is not a setup flow, so it cannot make the auth state %r" % (setup.get("name"),
                        name), 'mark the flow %s with "setup": true (reticle_flow_save {setup: true})' % name,
                        setup=True, code="auth_failed")
    _progress_note("making the auth state %s with its setup flow (%s)" % (name, why))
    res = await _replay(hub, session, setup, url, ctx, True, secrets_in)
    if res["verified"] != "yes":
        raise ToolError("auth state %s no longer logs in: %s, and its setup flow %s is %s: %s"
                        % (name, why, name, res["verified"], res.get("because")),
                        "replay the setup flow %s and fix what it shows" % name, setup=True, code="auth_failed")
    kept = await _keep_auth(hub, hub.bridge.get(session.id) or session, name)
    state = _load_auth_state(_project_dir(hub), name) if kept.get("saved") else None
    if state is None:
        raise ToolError("the auth state %s could not be saved: %s" % (name, kept.get("note")),
                        "start flows that use auth in a device (reticle_open)", setup=True, code="auth_failed")
    return state


# ---- flows: save the journey a tab just went through, list them, replay one (Flows section) ----

def _journey_to_save(hub: _Daemon, tab: str, since: float, replayed: bool) -> List[dict]:
    """The steps of tab's journey since `since` that flow_save saves: the agent's own, and a flow's
    replayed steps only when asked (`replayed`); ToolError when there are none."""
    journey = hub.journeys.since(tab, since)
    left_out = [s for s in journey if s.get("replayed")] if not replayed else []
    journey = [s for s in journey if replayed or not s.get("replayed")]  # a replay is not the agent's journey
    if not journey:
        raise ToolError("tab %s has no recorded step since %s to save%s" % (
            tab, since, " (its %d step(s) since then were a flow's replay, not the agent's own)" % len(left_out)
            if left_out else ""),
            "act with reticle_act_and_wait / reticle_act and check with reticle_assert first, pass `steps`, "
            "or `replayed: true` to save a replay's steps as a flow of their own", code="journey_unsavable")
    return journey


async def _tool_flow_save(hub: _Daemon, session: Optional["_BrowserSession"], args: dict,
                          ctx: "_CallContext") -> dict:
    """reticle_flow_save: write a flow (given `steps`, or the tab's recorded journey since `since`) to
    the project's flows folder, atomically.  A journey is saved only when every step in it was
    verified and every target survives a reload; a typed secret is kept as a ${NAME} variable (its
    value is never stored) bound to the start origin."""
    name = _flow_name(args["name"])
    root = _project_dir(hub)
    start = args.get("startUrl")
    warnings: List[str] = []
    suggestions: List[str] = []
    if args.get("steps"):
        steps = [_no_plain_secret(dict(s)) for s in args["steps"]]
    else:
        session = await hub.resolve_tab(args, ctx)
        since = args.get("since")
        if since is None:
            since = hub.journeys.saved_at.get(session.id, 0.0)
        journey = _journey_to_save(hub, session.id, float(since), bool(args.get("replayed")))
        journey = _one_origin(journey, _origin_of(args.get("origin")) or _origin_of(start))
        not_yes = [i for i, s in enumerate(journey) if s.get("verified") not in (None, "yes")]
        if not_yes:
            i = not_yes[-1]
            raise ToolError("step %d of the journey (%s) was %s, so this journey is not verified"
                            % (i, _step_label(journey[i]), journey[i]["verified"]),
                            "pass `since` from the result of the first act after it (its `since`), or `steps`",
                            steps=[_step_label(s) for s in journey], code="journey_unsavable")
        blind = [i for i, s in enumerate(journey) if "action" in s and not s.get("target") and s["action"] != "press"]
        if blind:
            raise ToolError("step %d (%s) has no target that survives a reload (the ref could not be described)"
                            % (blind[0], journey[blind[0]]["action"]), "act by `target` instead of `ref`",
                            code="journey_unsavable")
        steps, first_url = _steps_from_journey(journey)
        warnings = _toothless_warnings(journey)
        suggestions = _server_check_suggestions(journey) if session.server_seen else []
        start = start or first_url
        hub.journeys.saved_at[session.id] = hub.clock()
    flow: Dict[str, Any] = {"format": FLOW_FORMAT, "name": name,
                            "savedAt": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if start:
        flow["startUrl"] = start
    for key in ("setup", "auth"):
        if args.get(key):
            flow[key] = args[key]
    if _origin_of(start):
        steps = [dict(s, secretOrigin=_origin_of(start)) if s.get("secret") and not s.get("secretOrigin") else s
                 for s in steps]
    flow["steps"] = steps
    if not any("until" in s or "assert" in s for s in steps):
        flow["note"] = "no predicate: a replay shows the steps ran, not that they worked"
    problems = _flow_problems(flow)
    if problems:
        raise ToolError("the flow is not valid: %s" % "; ".join(problems), "fix the steps and save again",
                        code="flow_invalid")
    path = _flow_path(root, name)
    replaced = os.path.exists(path)
    data = (json.dumps(flow, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp-%s" % secrets.token_hex(3)
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    out = {"saved": path, "name": name, "steps": len(steps), "replaced": replaced,
           "verdicts": sum(1 for s in steps if "until" in s or "assert" in s)}
    if warnings:
        out["warnings"] = warnings
    if suggestions:
        out["suggestions"] = suggestions
    names = sorted({s["secret"] for s in steps if s.get("secret")})
    if names:
        out["secrets"] = names
        out["note"] = "typed secrets are not stored; replay reads them from %s" % ", ".join(names)
    if flow.get("setup") and session is not None and not args.get("steps"):
        out["authSaved"] = await _keep_auth(hub, session, name)  # the login this journey just verified
    return out


async def _tool_flow_list(hub: _Daemon, session: Optional["_BrowserSession"], args: dict,
                          ctx: "_CallContext") -> dict:
    root = _project_dir(hub)
    # off the loop: the files are the project's, on whatever disk it is (each read is bounded and never
    # waits on a FIFO, see _read_regular)
    flows = await asyncio.get_running_loop().run_in_executor(None, _list_flows, root)
    return {"dir": _flows_dir(root), "flows": flows}


async def _tool_flow_replay(hub: _Daemon, session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_flow_replay: replay a saved flow (by `name`) or a given one on this tab, with secrets
    from the caller.  A bad flow, a missing secret or a bad fault is a setup error before any step
    acts; `faults` hold for this replay only and are cleared after it, whatever happens."""
    if args.get("flow") is not None:
        flow = args["flow"]
        problems = _flow_problems(flow)
        if problems:
            raise ToolError("`flow` is not a Reticle flow: %s" % "; ".join(problems), "pass a saved flow's JSON",
                            setup=True, code="flow_invalid")
    elif args.get("name"):
        flow = await asyncio.get_running_loop().run_in_executor(None, _read_flow, _project_dir(hub), args["name"])
    else:
        raise ToolError("reticle_flow_replay needs `name` (a saved flow) or `flow`.", 'for example {"name": "login"}',
                        code="bad_argument")
    given = args.get("secrets") or {}
    setup = args.get("setupFlow")
    if setup is not None and _flow_problems(setup):
        raise ToolError("`setupFlow` is not a Reticle flow: %s" % "; ".join(_flow_problems(setup)),
                        "pass the setup flow's JSON, or leave it out to use the saved one", setup=True,
                        code="flow_invalid")
    _fill_secrets([s.get("args") for s in flow["steps"]], given)  # a missing secret: a setup error, before any act
    if not args.get("faults"):
        return await _replay_flow(hub, session, flow, args.get("url"), ctx, bool(args.get("fresh")), given, setup)
    set_ids = []
    try:  # the faults hold for this replay only, on this tab, and are gone after it whatever happens
        for i, spec in enumerate(args["faults"]):
            problem = _fault_spec_problem(spec)
            if problem:
                raise ToolError("faults/%d: %s" % (i, problem), "each fault is a reticle_fault {match, respond | "
                                "abort | delayMs, times?, ttlMs?}", setup=True, code="bad_argument")
            set_ids.append(hub.faults.add(session, ctx.session_key, spec).id)
        await hub.faults.sync(session.id)
        out = await _replay_flow(hub, session, flow, args.get("url"), ctx, bool(args.get("fresh")), given, setup,
                                 retry=False)
        out["faults"] = [f.public(hub.clock()) for f in hub.faults.tabs.get(session.id, {}).values()
                         if f.id in set_ids]
        return out
    finally:
        for fid in set_ids:
            hub.faults.clear(session.id, ctx.session_key, fid)
        if set_ids:
            await _quietly(hub.faults.sync(session.id))
