"""What an act caused.

Which of a window's events the act could have caused: the calls it made (not the page's own
background traffic), whether anything happened at all, what evidence was lost, and the writes it made
(what a journey step and a flow's report keep of them).
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Dict, List, Optional

from .constants import ARRIVAL_WAIT_MS
from .events import _call_label, _event_type, _is_dev, _is_write
from .tab import _Known
from .wire import _framework_failure


# ---- what the act did: its effect, its failed calls, the signals of success ----

def _had_effect(effect: Any, window: List[dict], floor: float = 0.0, known: Optional["_Known"] = None) -> bool:
    """Anything observable happened after the act: a mutation in its own frame, an event of
    consequence (DOM, request, route, signal, state, storage, socket message), or a new document.
    The page's own timed requests (polling, autosave) are not the act's doing; a repeat of a
    request the page made once before (the same save, clicked again) is."""
    if isinstance(effect, dict):
        probes = effect["effect"] if isinstance(effect.get("effect"), dict) else {}
        if probes.get("domMutatedWithin") or effect.get("pageUnloaded"):
            return True
        act_doc = effect.get("documentId")
        if act_doc and any(e.get("doc") and e["doc"] != act_doc for e in window):
            return True
    for e in window:
        # a request the person made before too (the same POST, clicked again) is still the act's; only
        # what the page sends on a timer (twice or more before the act) is not
        if e["type"] == "net.request" and not _caused_by_act(e, floor, known, repeats=True):
            continue
        if e["type"] == "net.pending" and known is not None and _call_label(e["data"]) in known.polled:
            continue
        if _event_type(e["type"]).effect:
            return True
    return False


def _periodic(times: List[float]) -> bool:
    """Three or more completions at a steady pace (no gap under 150 ms, none twice another):
    a timer's traffic (autosave, polling), not one action's writes."""
    if len(times) < 3:
        return False
    gaps = [b - a for a, b in zip(times, times[1:])]
    return min(gaps) >= 150 and max(gaps) <= 2 * min(gaps)


def _lost_evidence(window: List[dict], known: "_Known") -> str:
    """Why the window is incomplete, in words, or '' when nothing was lost."""
    overflow = [e for e in window if e["type"] == "blind-spot"
                and (e["data"].get("kind") == "transport-overflow"
                     or e["data"].get("reason") == "offline-queue-overflow")]
    if overflow:
        return ("the page dropped %s event(s) while the daemon was unreachable"
                % overflow[0]["data"].get("count", "some"))
    if any(e["type"] == "blind-spot" and e["data"].get("kind") == "arrival-unseen" for e in window):
        return ("the new page connected but did not report the request that brought it within %d ms"
                % ARRIVAL_WAIT_MS)
    loss = known.loss or {}
    if loss.get("evicted") or loss.get("sampled"):
        parts = []
        if loss.get("evicted"):
            parts.append("%d event(s) of this window were evicted from the buffer" % loss["evicted"])
        if loss.get("sampled"):
            parts.append("%d event(s) were sampled away under a flood" % loss["sampled"])
        return " and ".join(parts)
    return ""


_BODYLESS = (204, 205, 304)


def _unread_write(e: dict, floor: float, known: "_Known") -> bool:
    """A completed 2xx write that the act could have caused and whose body was not read."""
    d = e["data"]
    status = d.get("status")
    if not _is_write(d) or _is_dev(d) or not isinstance(status, int) or not 200 <= status < 300:
        return False
    if status in _BODYLESS or isinstance(d.get("responseBody"), str) or d.get("responseSize", 1) == 0:
        return False
    if d.get("initiator") == "document":
        return False  # the page that arrived is the answer, and the verdict reads it
    return _caused_by_act(e, floor, known)


def _call_began(e: dict) -> Optional[float]:
    """When a completed call began (its end less its duration), or None when it says no duration."""
    took = e["data"].get("durationMs", e["data"].get("ms"))
    return e["t"] - float(took) if isinstance(took, (int, float)) and not isinstance(took, bool) else None


def _caused_by_act(e: dict, floor: float, known: Optional["_Known"], repeats: bool = False) -> bool:
    """Could the act at `floor` have caused this completed call?  Not when it started before the
    act, went to another origin (analytics, a CDN), or is a write the page also made on its own
    before the act (autosave, polling); with `repeats`, only what it made twice or more is its own."""
    d = e["data"]
    began = _call_began(e)
    if began is not None and began < floor - 50:
        return False
    if known is None:
        return True
    url = str(d.get("url", ""))
    if known.origin and "://" in url and not url.startswith(known.origin + "/") and url != known.origin:
        return False
    return _call_label(d) not in (known.polled if repeats else known.background)


def _writes_in(window: List[dict], floor: Optional[float] = None, answers: bool = False,
               until: Optional[float] = None) -> List[dict]:
    """The writes a window holds (POST, PUT, PATCH, DELETE and form posts) that started after the
    act at `floor` (and before `until`, the next act, when given), once each by method and path: what
    `reticle verify --teeth` fails on purpose, one at a time.  (A write the page repeats on its own is
    not told apart here: failing it too only asks more of the flow.)  answers=True: each with the
    `answer` its first call got, where one can be replayed (_replayable_answer), for --teeth's lie."""
    out: List[dict] = []
    for e in window:
        d = e["data"]
        if e["type"] != "net.request" or not _is_write(d) or _is_dev(d):
            continue
        if floor is not None and not _caused_by_act(e, floor, None):
            continue
        began = _call_began(e)
        if until is not None and (e["t"] if began is None else began) >= until:
            continue
        parts = urllib.parse.urlsplit(str(d.get("url") or ""))
        item: Dict[str, Any] = {"method": str(d.get("method")).upper(), "path": parts.path or "/"}
        if d.get("initiator") == "document":
            item["form"] = True
        if any(_write_label(w) == _write_label(item) for w in out):
            continue
        answer = _replayable_answer(d) if answers else None
        if answer is not None:
            item["answer"] = answer
            failure = _framework_failure(d, answer)
            if failure is not None:
                item["failure"] = failure
        out.append(item)
    return out


_LIE_HEADERS = ("content-type", "location", "cache-control")


def _replayable_answer(d: dict) -> Optional[dict]:
    """The answer a completed write got, as a fault can give it again without the server (--teeth's
    lie): {status, headers, body}, the headers a page reads (content-type, location, htmx's `hx-*`
    and the app's own `x-*`; never cookies), or None when it cannot be replayed as it was: a form
    post (the page that arrived is the answer), a faulted or failed call, a body not captured or cut."""
    status = d.get("status")
    if d.get("initiator") == "document" or d.get("faulted") or d.get("faultId") or d.get("error") is not None:
        return None
    if not isinstance(status, int) or not 200 <= status <= 599:
        return None
    body = d.get("responseBody")
    if status in _BODYLESS:
        body = ""
    if not isinstance(body, str) or d.get("responseBodyTruncated") or len(body) > 65536:
        return None
    given = d["responseHeaders"] if isinstance(d.get("responseHeaders"), dict) else {}
    headers = {str(k): str(v)[:1024] for k, v in given.items()
               if str(k).lower() in _LIE_HEADERS or str(k).lower().startswith(("hx-", "x-"))}
    if "content-type" not in {k.lower() for k in headers} and d.get("contentType"):
        headers["content-type"] = str(d["contentType"])[:1024]
    return {"status": status, "headers": dict(list(headers.items())[:20]), "body": body}


def _write_shown(w: dict) -> dict:
    """A write of _writes_in as results and reports show it: without the answers kept for --teeth."""
    return {k: v for k, v in w.items() if k not in ("answer", "failure")}


def _write_label(w: dict) -> str:
    """How a write is named in every teeth report: `POST /api/save`, `(form post)` for a document's."""
    return "%s %s%s" % (w["method"], w["path"], " (form post)" if w.get("form") else "")


def _no_effect(action: str, effect: Any, window: List[dict], floor: float = 0.0,
               known: Optional["_Known"] = None) -> Optional[dict]:
    """A click or submit after which nothing at all happened (see _had_effect): whatever
    held, the action did not make it so."""
    if action not in ("click", "dblclick", "submit") or not isinstance(effect, dict):
        return None
    if _had_effect(effect, window, floor, known):
        return None
    return {"kind": "action-had-no-effect", "tier": "absence", "claim": "the %s was dispatched" % action,
            "counter": "nothing changed: no DOM mutation, request, route, signal, state or storage event",
            "detail": "a handler that is not wired up looks exactly like this; whatever held, the action "
                      "did not make it so"}
