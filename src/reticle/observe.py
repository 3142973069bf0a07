"""Observe.

Observe: the horizon (how long an act's effects may still arrive), reading the page for a
predicate, waiting until it holds or the horizon passes, and the server records an act is owed.
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from .calls import _progress_note
from .causes import _caused_by_act
from .constants import (ACT_GRACE_MS, HORIZON_CAP_MS, HORIZON_CHURN_MS, HORIZON_QUIET_MS, NAV_WAIT_S, RETRY_GRACE_MS,
    SCAN_WAIT_MS, SERVER_GRACE_MS, SERVER_WAIT_CAP_MS, SOCKET_REPLY_WAIT_MS, STRANDED_MS, STRANDED_NOTE,
    STREAM_QUIET_MS, OTEL_LOG_WAIT_MS)
from .conventions import _answer_failure_text, _error_ui, _is_failure_ui, _ui_label
from .errors import ToolError
from .events import _FRAME_TYPES, _UI_EVENTS, _call_failed, _call_label, _call_matches, _is_dev, _is_write
from .frames import _answered, _localhost_name, _locate
from .judge import _act_answers, _expects_error, _holds_count, _judge, _judge_final, _message_failures, _stale_message
from .observation import _Observation, _ReadFailed, _leaf_key, _leaves
from .predicates import _PREDICATE_KINDS, _describe_predicate, _frame_label
from .server_judge import _jobs_running, _server_unreported
from .store_judge import _store_awaited
from .stores import _watched_stores
from .tab import _BrowserSession, _Known
from .util import _is_loopback_host, _normalise_origin, _short


# ---- the horizon: what the act's causal work still has to do (pure) ----

def _horizon(window: List[dict], known: "_Known", floor: float, now: float,
             scans: bool = True) -> List[Tuple[str, bool]]:
    """What the act at `floor` has started and not finished, at `now`: (what, decisive), where a
    decisive one could still change the answer.  Requests and documents it started (writes and
    documents decisive, reads not) have not answered; a socket message it sent has had no message
    back on that socket for SOCKET_REPLY_WAIT_MS, and the run it started there has not gone quiet (no
    message for SOCKET_REPLY_WAIT_MS after the last one, unless that one ends the run: _SOCKET_RUN_ENDS;
    a first reply may only acknowledge the message); a stream it opened is still sending (a fetch
    stream decisive: a job's result lives in it); a document that arrived has not reported its
    load-time scan of what the user is told (when the page `scans`: the SDK does, a client that only
    speaks the bridge protocol does not; decisive past SCAN_WAIT_MS, when the page is still loading);
    the render after the last of these: less
    than HORIZON_QUIET_MS since it landed, or the DOM still changing within HORIZON_CHURN_MS for a
    second after it.  In a device, a request the page reported that the browser has not confirmed
    yet (held, so not in the window) is pending as a request is.  What the page sends on a timer
    (twice or more before the act) and dev tooling are not the act's; a request it made once before
    (the same save, clicked again) is."""
    out: List[Tuple[str, bool]] = []
    unanswered = [(d, d.get("startedAt", 0), "%s has not answered") for d in known.open_requests] + [
        (d, d.get("heldAt", 0), "the browser's own record of %s") for d in known.unconfirmed]  # (in a device)
    for d, since, what in unanswered:  # a request the page made before too is the act's; a timer's is not
        if since >= floor and not _is_dev(d) and _call_label(d) not in known.polled:
            out.append((what % _call_label(d), _is_write(d) or d.get("initiator") == "document"))
    frames = [e for e in window if e["type"] in _FRAME_TYPES and not _is_dev(e["data"])]
    # the act's own channels (as _message_failures reads them): a socket it sent on, a stream it started
    spoke = {e["data"].get("url") for e in frames if e["data"].get("direction") == "out"}
    started = {str(e["data"].get("requestId")) for e in window if e["type"] == "net.pending"}
    frames = [e for e in frames if e["data"].get("url") in spoke or (
        e["data"].get("transport") in ("stream", "sse") and str(e["data"].get("requestId")) in started)]
    landed: List[Tuple[float, str]] = []
    streams: Dict[str, dict] = {}
    last_in: Dict[str, dict] = {}
    for i, e in enumerate(frames):
        d = e["data"]
        if d.get("direction") == "in":
            landed.append((e["t"], "a message on %s" % d.get("url")))
            if d.get("transport", "ws") == "ws":
                last_in[str(d.get("url"))] = e
        if d.get("transport", "ws") == "ws" and d.get("direction") == "out" and now - e["t"] < SOCKET_REPLY_WAIT_MS:
            if not any(f["data"].get("direction") == "in" and f["data"].get("url") == d.get("url")
                       for f in frames[i + 1:]):
                out.append(("the reply to the message sent on %s" % d.get("url"), False))
        if d.get("transport") in ("stream", "sse"):
            streams[str(d.get("requestId") or d.get("url"))] = dict(d, t=e["t"])
    for url, e in last_in.items():  # a server's run answers in several messages: its first may be an ack
        if now - e["t"] < SOCKET_REPLY_WAIT_MS and not _run_ended(e["data"]):
            out.append(("the run on %s (its last message came %d ms ago)" % (url, now - e["t"]), False))
    for d in streams.values():
        if d.get("direction") != "close" and not d.get("final") and now - d["t"] < STREAM_QUIET_MS:
            out.append(("the stream %s is still sending" % d.get("url"), d.get("transport") == "stream"))
    for e in window:
        if e["type"] == "net.request" and not _is_dev(e["data"]) and _caused_by_act(e, floor, known, repeats=True):
            landed.append((e["t"], "the answer of %s" % _call_label(e["data"])))
            doc = e.get("doc")
            if scans and e["data"].get("initiator") == "document" and doc and not any(
                    x["type"] == "ui.scan" and x.get("doc") == doc for x in window):
                # past SCAN_WAIT_MS the page is still loading (the look comes once it is parsed): what it will
                # show could still change the answer, so at the cap this is unknown, never a clean yes
                late = now - e["t"] >= SCAN_WAIT_MS
                out.append(("the new page's first look at what it tells the user%s"
                            % (" (it has not finished loading after %d ms)" % (now - e["t"]) if late else ""), late))
    if landed:
        last, what = max(landed)
        churn = [e["t"] for e in window if e["t"] > last and (e["type"].startswith("dom.") or e["type"] == "ui.alert")]
        if now - last < HORIZON_QUIET_MS or (churn and now - max(churn) < HORIZON_CHURN_MS and now - last < 1000):
            out.append(("the render after %s" % what, False))
    seen: List[Tuple[str, bool]] = []
    for item in out:
        if item not in seen:
            seen.append(item)
    return seen


# A socket message that ends the run a message sent on it started (as data: protocol, pattern on its text).
_SOCKET_RUN_ENDS: Tuple[Tuple[str, "re.Pattern[str]"], ...] = (
    ("Phoenix LiveView reply", re.compile(r'^\[[^\]]*?"phx_reply"')),
    ("Socket.IO acknowledgement", re.compile(r"^43\d+\[")),
    ("GraphQL over WebSocket complete/error", re.compile(r'^\{.*"type"\s*:\s*"(complete|error)"')),
    ("JSON-RPC response", re.compile(r'^\{(?=.*"jsonrpc")(?=.*"id")(?=.*"(result|error)")')),
    ("Gradio queue completion", re.compile(r'^\{.*"msg"\s*:\s*"process_completed"')),
)


def _run_ended(d: dict) -> bool:
    """Does this incoming socket message end its run (_SOCKET_RUN_ENDS), so the horizon need not wait
    SOCKET_REPLY_WAIT_MS for another?"""
    text = d.get("data")
    return isinstance(text, str) and any(p.search(text[:4096]) for _, p in _SOCKET_RUN_ENDS)


def _failure_in_sight(p: dict, window: List[dict], floor: float, known: "_Known",
                      now: Optional[float] = None) -> Optional[str]:
    """A failure the user was shown, or the act's own channel reported, after the act, that the
    predicate does not ask for: the phrase that names it, or None.  A failed write counts once a
    client retry had its chance (RETRY_GRACE_MS before `now`) and none answered otherwise."""
    answers = _act_answers(window, floor, known)
    shown = [d for d in _error_ui(window, answers) + _answer_failure_text(window, answers) if not _expects_error(p, d)]
    if shown:
        return "the page showed %s" % _ui_label(shown[0])
    reported = _message_failures(window)
    if reported and not any(leaf["kind"] == "frame" and not neg for leaf, neg in _leaves(p)):
        return "%s said %s" % (_frame_label(reported[0]), reported[0]["problem"])
    failed = [e["data"] for e in window if e["type"] == "net.request" and _is_write(e["data"])
              and _call_failed(e["data"]) and not _is_dev(e["data"]) and _caused_by_act(e, floor, known, repeats=True)
              and (now is None or now - e["t"] >= RETRY_GRACE_MS) and not any(
                  x["type"] == "net.request" and x["t"] > e["t"] and not _call_failed(x["data"])
                  and _call_label(x["data"]) == _call_label(e["data"]) for x in window)]
    failed = [d for d in failed if not any(_call_matches(d, leaf) for leaf, neg in _leaves(p)
                                           if leaf["kind"] == "net" and not neg)]
    if failed:
        return _answered(failed[0])
    return None


# ---- Observe: the only async stage; it waits, reads the live page, and returns one observation ----

async def _await_horizon(session: "_BrowserSession", floor: float, deadline: float) -> List[Tuple[str, bool]]:
    """Wait (until `deadline`, on the daemon's clock) for the act at `floor` to finish its causal work
    (see _horizon); -> what was still pending when the deadline came ([] when it finished)."""
    while True:
        now = session.now()
        pending = _horizon(session.window(floor), session.known(floor), floor, now, bool(session.sdk_version))
        left = deadline - now
        if not pending or left <= 0:
            return pending
        await session.wait_change(min(50.0, left) / 1000.0)


async def _read_leaf(session: "_BrowserSession", leaf: dict) -> Any:
    read = _PREDICATE_KINDS[leaf["kind"]].read
    assert read is not None
    try:
        return await read(session, leaf)
    except ToolError as exc:
        return _ReadFailed(exc.error)


async def _observe_now(session: "_BrowserSession", p: dict, floor: float, after_act: bool = False,
                       explain: bool = False, effect: Any = None) -> _Observation:
    """One look: every live leaf's read of the page (and, when `explain`, the near misses of a
    failed one), then the window from `floor` and what the session knows, at this instant."""
    leaves = {_leaf_key(leaf): leaf for leaf, _ in _leaves(p) if _PREDICATE_KINDS[leaf["kind"]].read}
    keys = list(leaves)
    live: Dict[str, Any] = dict(zip(keys, await asyncio.gather(*(_read_leaf(session, leaves[k]) for k in keys))))
    near: Dict[str, Any] = {}
    for k in keys if explain else ():
        spec = _PREDICATE_KINDS[leaves[k]["kind"]]
        if spec.near is None or isinstance(live[k], _ReadFailed):
            continue
        try:
            near[k] = await spec.near(session, leaves[k], live[k])
        except ToolError as exc:
            live[k] = _ReadFailed(exc.error)
    known = session.known(floor)
    return _Observation(session.window(floor), known, now=session.now(), since=floor, upto=session.store.seq,
                        url=session.url, after_act=after_act, effect=effect, live=live, near=near)


async def _read_shown(session: "_BrowserSession", effect: Any) -> Optional[List[dict]]:
    """The messages the page shows now, each marked `related` when it sits in what the act (its
    target's ref, from `effect`) touched; None when the page cannot say."""
    if not session.sdk_version:
        return None  # not the SDK (a client that speaks the bridge protocol without it): it cannot say
    ref = effect.get("ref") if isinstance(effect, dict) and isinstance(effect.get("ref"), str) else None
    try:
        reply = await session.command("alerts_read", {"ref": ref} if ref else {}, timeout=2.0)
    except ToolError:
        return None
    alerts = reply.get("alerts") if isinstance(reply, dict) else None
    if not isinstance(alerts, list) or reply.get("unavailable"):
        return None
    return [{"text": _short(str(d.get("text") or ""), 300), "source": str(d.get("source") or "")[:40],
             "level": d.get("level") if d.get("level") == "error" else None, "related": d.get("related") is not False,
             "own": d.get("own") is True, "unscoped": d.get("scoped") is False,
             "field": str(d["field"])[:120] if d.get("field") is not None else None,
             **{k: str(d[k])[:2000] for k in ("component", "componentAt", "componentStack") if d.get(k)}}
            for d in alerts[:50] if isinstance(d, dict)]


def _lost_why(session: "_BrowserSession") -> str:
    stranded = session.documents.stranded()
    if stranded is not None:
        return ("tab %s left for %s, %s (no SDK connected from it within %.1f s), so nothing on it can be read; "
                "a device (reticle_open) verifies a page without the tag, and the tab comes back with the "
                "browser's Back or by loading a page that has the tag"
                % (session.id, stranded, STRANDED_NOTE, STRANDED_MS / 1000.0))
    lost = getattr(session.device, "lost", None)  # a device whose browser connection went (endpoints.py)
    if lost:
        return lost
    return ("the tab closed or crashed" if session.handler is None else
            "the tab left its page and its next document did not connect in time")


async def _await_server_records(session: "_BrowserSession", since: float, budget_end: float) -> bool:
    """With the app's middleware in use (a record arrived for this tab, or spans reach this daemon),
    wait for the record of each marked request the act made, up to SERVER_WAIT_CAP_MS past its
    answer (work the framework runs for a request after answering it, such as a background task,
    ends before its record is sent; an exporter batches its spans), and for each record tied to one by
    method, path and time to settle (a rival that comes by then withdraws it: tying.py, _Ties.filed), and
    for each record of a service that exports its logs to be OTEL_LOG_WAIT_MS old (an ERROR log joins it late),
    never past `budget_end` on the daemon's clock.  True when any arrived (or may have grown: logs)."""
    if not session.server_seen and session.server_grace() == SERVER_GRACE_MS:
        return False
    before, logs = session.server_seen, False
    while session.now() < budget_end:
        window = session.window(since)
        awaiting, _ = _server_unreported(session.now(), window, max(SERVER_WAIT_CAP_MS, session.server_grace()))
        young = [e["t"] for e in window if e["type"] == "server.request" and (
                 e["data"].get("matchedBy") and not e.get("settled")
                 or e["data"].get("logsExported") and session.now() - e["t"] < OTEL_LOG_WAIT_MS)]
        if not awaiting and not young and not _jobs_running(window):  # a job a request started: its record too
            break
        logs = logs or any(e["type"] == "server.request" and e["data"].get("logsExported") for e in window)
        await session.wait_change(min(50.0, budget_end - session.now()) / 1000.0)
    return session.server_seen != before or logs


async def _stores_caught_up(session: "_BrowserSession") -> bool:
    """Storage truth: every watched store read now, so a verdict judges what it committed up to here (a commit
    is on disk before the answer that follows it reaches the page).  -> whether a commit joined."""
    stores = _watched_stores(session)
    if stores is None:
        return False
    return bool(await stores.catch_up())


async def _await_store_write(session: "_BrowserSession", floor: float, until: float) -> None:
    """After an act whose write requests were answered while no watched store committed to the table their path
    names (a save a job runs after the answer, on another thread or in a queue), keep reading the stores until such
    a commit lands or `until` (the end of the act's budget, on the daemon's clock) passes."""
    if not session.known(floor).stores or not _store_awaited(session.window(floor), floor, session.known(floor)):
        return
    _progress_note("waiting for the store to commit what the request's job writes")
    while session.now() < until and _store_awaited(session.window(floor), floor, session.known(floor)):
        await session.wait_change(min(100.0, until - session.now()) / 1000.0)  # the stores' poll wakes it
    await _stores_caught_up(session)


def _server_untied(window: List[dict], known: "_Known", links: bool, spans: bool) -> Tuple[Tuple[str, str], ...]:
    """The act's answered document requests (a form post, a link: with the script tag their mark rides only
    in a cookie) that no server record answers and none could be tied to, each with why (tying.py): those
    the tab was told several records or requests fitted (its server.untied events), and, where spans
    come from the tab's origin (`spans`: none fitted), the rest; the writes among them, and once records
    come for the tab (`links`) every one; but for what the page sends on its own."""
    awaiting, unreported = _server_unreported(0.0, window, 0.0)
    answered = {str(e["data"].get("requestId")) for e in window if e["type"] == "net.request"}
    why = {str(e["data"].get("requestId")): str(e["data"].get("why") or "") for e in window
           if e["type"] == "server.untied"}
    unsettled = {(e["data"].get("documentId"), str(e["data"].get("requestId"))) for e in window
                 if e["type"] == "server.request" and e["data"].get("matchedBy") and not e.get("settled")}
    for e in window:  # a record tied whose time to settle had not come when the act's budget ran out
        if e["type"] == "net.pending" and (e.get("doc"), str(e["data"].get("serverMark"))) in unsettled:
            awaiting.append(e["data"])
            why[str(e["data"]["serverMark"])] = ("a record fits it by method, path and time, but the act's time ran "
                                                 "out before a post another tab made at the same moment could be "
                                                 "ruled out")
    return tuple((_call_label(d), why.get(str(d.get("serverMark")), "")) for d in awaiting + unreported
                 if d.get("initiator") == "document" and str(d.get("requestId")) in answered
                 and (spans or str(d.get("serverMark")) in why) and (links or _is_write(d))
                 and _call_label(d) not in known.polled)[:5]


def _server_missing(window: List[dict], known: "_Known") -> Tuple[str, ...]:
    """The act's marked requests that answered and have no server record (see _await_server_records),
    but for what the page sends on its own."""
    awaiting, unreported = _server_unreported(0.0, window, 0.0)
    answered = {str(e["data"].get("requestId")) for e in window if e["type"] == "net.request"}
    return (tuple(_call_label(d) for d in awaiting + unreported if str(d.get("requestId")) in answered
                  and _call_label(d) not in known.polled) + tuple(_jobs_running(window)))[:5]


async def _observe(session: "_BrowserSession", p: dict, floor: float, timeout_ms: float, after_act: bool = False,
                   effect: Any = None, already_true: bool = False, settle_until: Optional[float] = None,
                   act_at: Optional[float] = None) -> _Observation:
    """Observe: wait until `p` holds over the events from `floor`, is decided, or `timeout_ms`
    runs out (re-judging on every event and every 150 ms; a tab between documents is awaited),
    and return the observation it was judged on.  With no timeout it looks once (after waiting
    for a document on its way).

    The horizon: an assert that follows an act (`act_at`) first waits for the act's causal work
    (see _horizon, at most HORIZON_CAP_MS), whichever way it would judge.  After an act
    (`settle_until`, the end of its budget on the daemon's clock) a pass waits for that work too, for the UI
    after a write, and for the server records of the act's marked requests (Server truth), then is
    judged again as the page is then (a `settled` leaf keeps its first judgement unless server
    records joined late or an absence is asked); what is still going at the cap is kept in `pending`."""
    pending: List[Tuple[str, bool]] = []
    if act_at is not None and settle_until is None:
        grace = ACT_GRACE_MS - (session.now() - act_at)
        if grace > 0:
            await asyncio.sleep(grace / 1000.0)
        _progress_note("waiting for the act's work to land before judging")
        pending = await _await_horizon(session, act_at, session.now() + HORIZON_CAP_MS)
        await _await_server_records(session, act_at, session.now() + SERVER_WAIT_CAP_MS)
        await _stores_caught_up(session)
    session.documents.expire_arrival()  # a new document overdue is said in the window before the tab is asked about
    if timeout_ms > 0:
        obs = await _wait_for_predicate(session, p, floor, timeout_ms, after_act, effect,
                                        act_at if act_at is not None else floor if after_act else None)
    elif session.documents.between_documents() and not await session.documents.next_document(NAV_WAIT_S):
        obs = _Observation(session.window(floor), session.known(floor), now=session.now(), since=floor,
                           url=session.url, lost=_lost_why(session))
    else:
        obs = await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
    if settle_until is not None and not obs.lost and _judge_final(p, obs)["pass"]:
        _progress_note("waiting for the requests the act started to finish")
        pending = await _await_horizon(session, floor, session.now() + HORIZON_CAP_MS)
        while session.now() < settle_until and session.open_since(floor):
            await session.wait_change(0.05)
        window = session.window(floor)
        wrote = any(e["type"] == "net.request" and _is_write(e["data"]) for e in window)
        if wrote and not any(e["type"] in _UI_EVENTS for e in window):
            end = min(settle_until, session.now() + 300)
            while session.now() < end and not any(e["type"] in _UI_EVENTS for e in session.window(floor)):
                await session.wait_change((end - session.now()) / 1000.0)
        arrived = await _await_server_records(session, floor, settle_until)
        arrived = await _stores_caught_up(session) or arrived
        seen = session.store.seq
        await _await_store_write(session, floor, settle_until)
        arrived = arrived or session.store.seq != seen
        quiet_leaf = any(leaf["kind"] == "settled" for leaf, _ in _leaves(p))
        if arrived or not quiet_leaf or any(neg or leaf.get("absent") for leaf, neg in _leaves(p)):
            # judged again once the act's work (server records that joined late included) is done,
            # whichever way it now judges
            obs = await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
        else:  # quiet was judged when it came; the rules read the window as it is now
            obs.window, obs.known = session.window(floor), session.known(floor)
    obs.pending = pending
    if session.server_seen and (settle_until is not None or act_at is not None):
        obs.known.server_missing = _server_missing(obs.window, obs.known)
    if settle_until is not None or act_at is not None:
        obs.known.server_untied = _server_untied(obs.window, obs.known, bool(session.server_seen),
                                                 session.server_grace() > SERVER_GRACE_MS)
    if not obs.lost and not obs.known.stuck and _judge_final(p, obs)["pass"]:
        await _confirm_answering(session)
        obs.known.stuck = session.not_answering() or ""
    obs.already_true = already_true
    if not obs.lost and (settle_until is not None or act_at is not None):  # what is shown after an act
        obs.shown = await _read_shown(session, effect)
    await _locate_in(session, obs.window + [{"type": "ui.alert", "data": d} for d in obs.shown or ()])
    return obs


async def _locate_in(session: "_BrowserSession", window: List[dict], every_call: bool = False) -> None:
    """_locate for a tab's events: where each was sent or logged from, through its page's source maps,
    read from the origin its socket was opened from (the browser's Origin header), never the URL the
    page reports (a page can report any URL, and so aim the daemon's fetches at another service)."""
    hub = getattr(getattr(session, "bridge", None), "hub", None)
    await _locate(getattr(hub, "frames", None), _mappable_origin(getattr(session, "origin", ""), hub), window,
                  every_call)


def _mappable_origin(origin: str, hub: Any) -> str:
    """The page's origin when the daemon may read its scripts for their source maps: a loopback host
    (a dev server; a *.localhost name too, which browsers resolve to loopback and the fetch then
    reaches on 127.0.0.1) or an origin the daemon was told to admit (RETICLE_ALLOWED_ORIGINS); else "",
    and frames keep their generated place."""
    host = urllib.parse.urlsplit(origin).hostname if origin else None
    if origin and (_is_loopback_host(host) or _localhost_name(host)
                   or _normalise_origin(origin) in getattr(hub, "allowed_origins", ())):
        return origin
    return ""


async def _confirm_answering(session: "_BrowserSession") -> None:
    """Before a pass is judged: a page not heard from for a second is asked to answer (a cheap `ping`),
    so that one stuck since (a dialog, a busy main thread) cannot pass on what it said before."""
    if session.handler is None or session.not_answering() is not None or session.last_seen_ms() <= 1000:
        return
    try:
        await session.command("ping", {}, timeout=1.5)
    except ToolError:
        pass  # session.not_answering() says why


async def _wait_for_predicate(session: "_BrowserSession", p: dict, floor: float, timeout_ms: float,
                              after_act: bool, effect: Any, act_at: Optional[float] = None) -> _Observation:
    """The wait of `_observe`: look again on every event (and every 150 ms) until `p` holds, is
    decided, or time runs out; a pinned count is confirmed 300 ms after it first holds.  After an
    act (`act_at`), a failure in sight (see _failure_in_sight) with the act's work done decides
    at once (early no): nothing the act started could still make `p` hold."""
    deadline = session.now() + timeout_ms  # on the daemon's clock, like every time below
    holds_count = _holds_count(p)
    shown_at: Optional[float] = None  # when the messages shown were last read (for an early no on one still shown)
    while True:
        _progress_note("waiting for %s" % _describe_predicate(p))
        documents = session.documents
        documents.expire_arrival()
        left_s = max(deadline - session.now(), 500) / 1000
        if getattr(session.device, "lost", None) or (  # a device whose browser went: nothing more will come
                documents.between_documents() and not await documents.next_document(left_s)):
            return _Observation(session.window(floor), session.known(floor), now=session.now(), since=floor,
                                url=session.url, after_act=after_act, effect=effect, lost=_lost_why(session))
        obs = await _observe_now(session, p, floor, after_act, effect=effect)
        res = _judge(p, obs)
        if res.get("inconclusive"):
            session.documents.expire_arrival()
            if session.documents.between_documents():
                continue  # the page went away while it was being asked: ask the next document
        remaining = deadline - session.now()
        if res["pass"]:
            if holds_count and remaining > 300:
                await asyncio.sleep(0.3)
                return await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
            if holds_count:
                break
            return obs
        if res.get("decided"):
            return await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
        # (not while the predicate's own retry grace runs: a client that retries may still get its yes)
        if act_at is not None and p["kind"] != "settled" and not res.get("inconclusive") \
                and not res.get("retryAfterMs") \
                and not _horizon(obs.window, obs.known, act_at, obs.now, bool(session.sdk_version)):
            failure = _failure_in_sight(p, obs.window, act_at, obs.known, obs.now)
            # an error shown from before decides only once the act's work is visibly done: something it
            # started has answered, or a second has passed (a request it starts later may yet clear it)
            answered = any(e["type"] == "net.request" and e["t"] >= act_at for e in obs.window)
            if not failure and (answered or obs.now - act_at >= 1000) and (
                    shown_at is None or session.now() - shown_at >= 500):
                shown_at = session.now()
                still = [d for d in await _read_shown(session, effect) or ()
                         if d["related"] and _is_failure_ui(d) and not _expects_error(p, d)
                         and not _stale_message(d, obs.window, act_at, obs.known)]
                if still:
                    await _locate_in(session, [{"type": "ui.alert", "data": still[0]}])
                failure = "the page still shows %s" % _ui_label(still[0]) if still else None
            elif failure:  # said again once the failure's sender or renderer is placed (_locate)
                await _locate_in(session, obs.window)
                failure = _failure_in_sight(p, obs.window, act_at, obs.known, obs.now) or failure
            if failure:
                final = await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
                final.failure_decided = failure
                return final
        if remaining <= 0:
            break
        step = min(150.0, remaining)
        if res.get("retryAfterMs"):
            step = min(step, max(25.0, res["retryAfterMs"]))
        await session.wait_change(step / 1000.0)
    final = await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
    final.timed_out = timeout_ms
    return final
