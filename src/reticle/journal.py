"""Journeys.

What each tab has done, step by step (the journey a flow is saved from), with secrets kept out.
"""

from __future__ import annotations

import collections
import logging
import re
from typing import Any, Dict, List, Optional

from .causes import _writes_in
from .constants import _emit, _log
from .errors import ToolError
from .tab import _BrowserSession
from .util import _origin_of


JOURNEY_MAX_STEPS = 100              # steps a tab's journey log keeps (oldest dropped)


class _Journeys:
    """Per tab, the last JOURNEY_MAX_STEPS steps the agent took: what it did, to which
    anchored target, and for a verdict tool the predicate and the verdict.  Secrets never
    enter it: a value typed into a password field is already replaced by its variable."""

    def __init__(self) -> None:
        self._logs: Dict[str, collections.deque] = {}
        self.saved_at: Dict[str, float] = {}

    def record(self, session_id: str, step: dict) -> None:
        log = self._logs.get(session_id)
        if log is None:
            if len(self._logs) >= 64:  # forget the oldest tab's journey
                self._logs.pop(next(iter(self._logs)))
            log = self._logs[session_id] = collections.deque(maxlen=JOURNEY_MAX_STEPS)
        log.append(step)

    def since(self, session_id: str, t: float) -> List[dict]:
        return [s for s in self._logs.get(session_id, ()) if s["t"] >= t]


def _anchor(info: Any) -> Optional[dict]:
    """A ref-free target for an element the page described: testid, else role and name,
    else text, else label."""
    if not isinstance(info, dict):
        return None
    if info.get("testid"):
        return {"testid": info["testid"]}
    if info.get("role") and info.get("name"):
        return {"role": info["role"], "name": info["name"]}
    if info.get("text"):
        return {"text": info["text"]}
    if info.get("label"):
        return {"label": info["label"]}
    return None


_SECRET_FIELD = re.compile(r"pass(word|wd|code|phrase)?|secret|token|api[ _-]?key|pin\b", re.I)


def _no_plain_secret(step: dict) -> dict:
    """A step given by the caller that types a literal into a field named like a secret keeps a
    variable instead (the page cannot be asked which fields are password fields here)."""
    target: dict = step["target"] if isinstance(step.get("target"), dict) else {}
    words = " ".join(str(v if not isinstance(v, dict) else v.get("equals") or v.get("contains") or "")
                     for k, v in target.items() if k in ("testid", "name", "label", "placeholder"))
    act_args: dict = step["args"] if isinstance(step.get("args"), dict) else {}
    if not _SECRET_FIELD.search(words):
        return step
    name = _secret_name(target)
    for key in ("value", "text"):
        value = act_args.get(key)
        if isinstance(value, str) and not re.fullmatch(r"\$\{[A-Z0-9_]+\}", value):
            step = dict(step, args=dict(act_args, **{key: "${%s}" % name}), secret=name)
    return step


def _secret_name(target: Optional[dict]) -> str:
    words = ""
    for key in ("testid", "name", "label", "placeholder", "text"):
        value = (target or {}).get(key)
        if isinstance(value, dict):
            value = value.get("equals") or value.get("contains")
        if isinstance(value, str) and value:
            words = value
            break
    slug = re.sub(r"[^A-Z0-9]+", "_", words.upper()).strip("_")[:40] or "PASSWORD"
    return "RETICLE_SECRET_%s" % slug


async def _journey_anchor(session: "_BrowserSession", args: dict) -> dict:
    """Before an act: the target to save (the caller's own target, or a ref described by
    the page), whether the element is a password field, and the page's URL."""
    pre: Dict[str, Any] = {"url": session.url, "target": None, "secret": False}
    if args.get("target"):
        pre["target"] = dict(args["target"])
        return pre
    if not args.get("ref"):
        return pre
    try:
        info = await session.command("inspect", {"ref": args["ref"]}, timeout=2.0)
    except ToolError:
        return pre
    pre["target"] = _anchor(info)
    pre["secret"] = isinstance(info, dict) and str((info.get("attributes") or {}).get("type", "")).lower() == "password"
    return pre


def _journal(session: "_BrowserSession", kind: str, args: dict, out: Any, pre: Optional[dict] = None,
             replayed: bool = False) -> None:
    """Append one step to the tab's journey log (see _Journeys); a step a flow's replay took is marked
    `replayed` (flow_save saves it only when asked: a replay is not the agent's journey)."""
    try:
        pre = pre or {}
        out = out if isinstance(out, dict) else {}
        # an act is stamped with its own cursor (the `since` it answered); an assert with now,
        # because its `since` is the act before it
        t = session.now() if kind == "assert" else out.get("since", session.now())
        step: Dict[str, Any] = {"t": t, "url": pre.get("url", session.url)}
        if kind == "assert":
            step["assert"] = args.get("until") or args.get("predicate")
        else:
            anchor = pre.get("target")
            step["action"] = args["action"]
            if anchor:
                step["target"] = anchor
            effect = out.get("effect") if kind == "act_and_wait" else out.get("result")
            secret = bool(pre.get("secret")) or (isinstance(effect, dict) and bool(effect.get("password")))
            act_args = dict(args.get("args") or {})
            if secret:
                name = _secret_name(anchor)
                for key in ("value", "text"):
                    if key in act_args:
                        act_args[key] = "${%s}" % name
                step["secret"] = name
                if _origin_of(step["url"]):
                    step["secretOrigin"] = _origin_of(step["url"])
            if act_args:
                step["args"] = act_args
            if kind == "act_and_wait":
                step["until"] = args.get("until") or args.get("predicate") or {"kind": "settled", "quietMs": 300}
        if kind != "act" and "timeout_ms" in args:
            step["timeout_ms"] = args["timeout_ms"]
        if kind != "act":
            step["verified"] = out.get("verified", "unknown")
            if isinstance(out.get("since"), (int, float)):
                floor = float(out["since"])  # for flow_save's warning
                step["writes"] = _writes_in(session.window(floor), floor)
        if replayed:
            step["replayed"] = True
        session.bridge.record_step(session.id, step)
    except Exception as exc:  # the journey is a convenience: never fail the act for it
        _emit(_log, logging.DEBUG, "journey_not_recorded", error=repr(exc))
