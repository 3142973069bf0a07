"""Observations.

What a judge reads: one observation of the page (its events, its probe answers, what was lost) and
the leaves of a predicate.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .tab import _Known
from .util import _dumps


def _leaves(p: dict, under_not: bool = False) -> List[Tuple[dict, bool]]:
    """The leaf predicates of `p`, each with whether a `not` is above it."""
    if p["kind"] in ("allOf", "anyOf"):
        return [leaf for c in p["predicates"] for leaf in _leaves(c, under_not)]
    if p["kind"] == "not":
        return _leaves(p["predicate"], True)
    return [(p, under_not)]


# ---- the observation: what Observe saw, and what every kind's `judge` reads ----

class _ReadFailed:
    """A live read the page could not answer (the tab went away, a command timed out)."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class _Observation:
    """Everything a verdict is judged on, gathered by Observe (the only async stage) and read by
    the pure `judge` of each kind and by the verdict rules.

    `window` holds the events from `since` on, up to the end of the observation, and `known` what
    the session knew then; the predicate was judged at the instant `now`, over the events up to
    the sequence number `upto` (None: all of them) with the requests `open` then still in flight.
    `live` holds each live leaf's read of the page and `near` its near misses (keyed by
    `_leaf_key`).  `after_act`: the window starts at an act (quiet counts from it); `effect` is
    what the act reported; `lost`: the tab went away; `timed_out`: the wait ran out (its ms);
    `action` the act's action when the observation follows one (act_and_wait), and `act_at` the
    cursor of the last act inside the window (the act itself, or one an assert follows); `shown`
    the messages the page shows at the end (each with `related`: in what the act touched)."""

    __slots__ = ("window", "known", "now", "since", "upto", "open", "url", "after_act", "effect", "live", "near",
                 "already_true", "lost", "timed_out", "action", "act_at", "shown", "pending", "failure_decided")

    def __init__(self, window: List[dict], known: Optional["_Known"] = None, now: float = 0.0, since: float = 0.0,
                 upto: Optional[int] = None, open_requests: Optional[List[dict]] = None, url: str = "",
                 after_act: bool = False, effect: Any = None, live: Optional[Dict[str, Any]] = None,
                 near: Optional[Dict[str, Any]] = None, already_true: bool = False, lost: Optional[str] = None,
                 timed_out: Optional[float] = None, action: Optional[str] = None,
                 act_at: Optional[float] = None, shown: Optional[List[dict]] = None) -> None:
        self.window = window
        self.known = known if known is not None else _Known([], {}, None)
        self.now = now
        self.since = since
        self.upto = upto
        self.open = open_requests if open_requests is not None else list(self.known.open_requests)
        self.url = url
        self.after_act = after_act
        self.effect = effect
        self.live = live or {}
        self.near = near or {}
        self.already_true = already_true
        self.lost = lost
        self.timed_out = timed_out
        self.action = action                # the act this observation follows (act_and_wait), else None
        self.act_at = act_at                # the cursor of the last act inside the window, if any
        self.shown = shown                  # the messages the page shows now (alerts_read), None: not read
        self.pending: List[Tuple[str, bool]] = []  # the act's work still going at the horizon's cap: (what, decisive)
        self.failure_decided: Optional[str] = None  # a failure shown with the act's work done: decided early

    def start(self, p: dict) -> float:
        """Where leaf `p`'s window starts: the observation's, or the leaf's own later `since`."""
        return float(p["since"]) if p.get("since") is not None and float(p["since"]) > self.since else self.since

    def events(self, p: dict) -> List[dict]:
        """The events leaf `p` is judged on."""
        start = self.start(p)
        return [e for e in self.window if e["t"] >= start and (self.upto is None or e.get("seq", 0) <= self.upto)]

    def open_since(self, t: float) -> List[dict]:
        """Requests in flight at the judged instant that started at or after `t`."""
        return [d for d in self.open if d.get("startedAt", 0) >= t]


def _leaf_key(p: dict) -> str:
    """The key of a leaf's live read in an observation."""
    return _dumps(p)
