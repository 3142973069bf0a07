"""What an act caused.

Which of a window's events the act could have caused: the calls it made (not the page's own
background traffic), whether anything happened at all, and what evidence was lost.
"""

from __future__ import annotations

from typing import Any, List, Optional

from .constants import ARRIVAL_WAIT_MS
from .events import _call_label, _event_type, _is_dev, _is_write
from .tab import _Known


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


def _caused_by_act(e: dict, floor: float, known: Optional["_Known"], repeats: bool = False) -> bool:
    """Could the act at `floor` have caused this completed call?  Not when it started before the
    act, went to another origin (analytics, a CDN), or is a write the page also made on its own
    before the act (autosave, polling); with `repeats`, only what it made twice or more is its own."""
    d = e["data"]
    took = d.get("durationMs", d.get("ms"))
    if isinstance(took, (int, float)) and e["t"] - float(took) < floor - 50:
        return False
    if known is None:
        return True
    url = str(d.get("url", ""))
    if known.origin and "://" in url and not url.startswith(known.origin + "/") and url != known.origin:
        return False
    return _call_label(d) not in (known.polled if repeats else known.background)
