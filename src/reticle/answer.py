"""Answer.

Answer: the compact answer a tool returns for a verdict, with its evidence trimmed, its grade, the
advice for an unknown, and the writes an act made.
"""

from __future__ import annotations

import collections
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from .causes import _BODYLESS, _caused_by_act, _had_effect
from .events import _call_label, _is_dev, _is_write
from .judge import _contradictions, _decide, _judge_final, _server_summary, _trim_evidence
from .observation import _Observation, _leaves
from .predicates import _PREDICATE_KINDS, _describe_predicate
from .tab import _BrowserSession, _Known
from .util import _dumps, _short
from .wire import _framework_failure


def _compact(out: dict, v: dict) -> dict:
    """A verdict as the model reads it by default: the verdict, why, what decided it (trimmed),
    what disagreed, the near misses of a `no`, and any field that differs from its usual value.
    `v` is the predicate's result (the answer itself for an assert, its `verdict` for an act).
    `detail: "full"` answers everything."""
    c = {"verified": out["verified"], "verifiedReason": out["verifiedReason"], "because": out["because"]}
    if v.get("decidedBy"):
        c["decidedBy"] = v["decidedBy"]
    if out["verified"] == "yes" and v.get("evidence") is not None:
        c["evidence"] = _trim_evidence(v["evidence"])
    if out["verified"] != "yes":
        for k in ("expected", "observed"):
            if v.get(k) not in (None, [], ""):
                c[k] = [_short(x, 120) for x in v[k][:5]] if isinstance(v[k], list) else _short(v[k], 200)
    if out.get("contradictions"):
        c["contradictions"] = [{"kind": x["kind"], "counter": _short(x["counter"], 160)} for x in out["contradictions"]]
    for k in ("advice", "alreadyTrue", "coverage", "warning", "server", "serverWait"):
        if out.get(k):
            c[k] = out[k]
    issues = ((out.get("honesty") or {}).get("integrity") or {}).get("issues")
    if issues:
        c["integrity"] = issues
    if isinstance(out.get("unsettled"), dict) and out["unsettled"].get("note"):
        c["unsettled"] = out["unsettled"]["note"]
    effect = out["effect"] if isinstance(out.get("effect"), dict) else {}
    odd = {k: effect[k] for k in ("dispatched", "pageUnloaded", "input") if k in effect
           and effect[k] not in (True, "synthetic")}
    inner = effect["effect"] if isinstance(effect.get("effect"), dict) else {}
    if inner.get("occluded"):
        odd["occludedBy"] = inner.get("occludedBy")
    if inner.get("resetFields"):
        odd["resetFields"] = inner["resetFields"]
    if isinstance(inner.get("hydration"), dict) and inner["hydration"].get("hydrated") is False:
        odd["hydration"] = inner["hydration"]
    if odd:
        c["effect"] = odd
    c["since"] = out.get("since")
    return c


def _faulted_note(because: str, window: List[dict], res: Optional[dict] = None) -> str:
    """`because` with one sentence more when a request of the window was answered by a fault
    (reticle_fault), so no one reads a fault's answer as the server's: "The deciding evidence was
    faulted" when the verdict's own evidence is such a request, else "A request of this window was"."""
    hit = [e["data"] for e in window if e["type"] in ("net.request", "net.ws") and e["data"].get("faulted")]
    if not hit:
        return because
    text = _dumps([(res or {}).get("evidence"), (res or {}).get("observed")])
    deciding = [d for d in hit if str(d.get("faultId")) in text or ("method" in d and _call_label(d) in text)]
    first = (deciding or hit)[0]
    more = " (and %d more)" % (len(hit) - 1) if len(hit) > 1 else ""
    because = because.rstrip()
    return "%s%s %s faulted on purpose: %s%s was answered by fault %s, not by the server." % (
        because, "" if because.endswith((".", "!", "?")) else ".",
        "The deciding evidence was" if deciding else "A request of this window was",
        _call_label(first) if "method" in first else "the WebSocket %s" % first.get("url"), more, first.get("faultId"))


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


def _unsettled_report(known: "_Known", window: List[dict], since: float, p: dict) -> dict:
    """What kept the page busy: requests still open, and what fired over and over."""
    still = [_call_label(d) for d in known.open_requests if d.get("startedAt", 0) >= since]
    counts: collections.Counter = collections.Counter()
    for e in window:
        if e["type"] == "net.request":
            counts[_call_label(e["data"])] += 1
        elif e["type"].startswith(("dom.", "anim.")):
            counts[e["type"]] += 1
    repeated = ["%s ×%d" % kv for kv in counts.most_common(5) if kv[1] > 3]
    report = {"waitedFor": _describe_predicate(p), "stillInFlight": still[:5], "repeated": repeated}
    if still:
        report["note"] = ("%d request(s) started in this window had not come back: %s; re-check once they land, "
                          "raise timeout_ms, or assert the request itself" % (len(still), ", ".join(still[:3])))
    elif repeated:
        report["note"] = ("what kept the page busy was its own churn (%s); assert the consequence instead of "
                          "waiting for idle" % ", ".join(repeated))
    return report


_GRADE_ORDER = ("presence", "state", "net", "signal", "server")


def _grade(p: dict) -> str:
    """The strongest evidence grade among the positive leaves: server > signal > net > state > presence."""
    best = "presence"
    for leaf, neg in _leaves(p):
        grade = None if neg else _PREDICATE_KINDS[leaf["kind"]].grade(leaf)
        if grade and _GRADE_ORDER.index(grade) > _GRADE_ORDER.index(best):
            best = grade
    return best


def _presence_only(p: dict) -> bool:
    """Only element/text presence is checked, with no observable consequence beside it."""
    roles = [(_PREDICATE_KINDS[leaf["kind"]].role, neg) for leaf, neg in _leaves(p)]
    has_presence = any(role == "presence" and not neg for role, neg in roles)
    has_consequence = any(role == "consequence" for role, _ in roles)
    return has_presence and not has_consequence


def _advice(p: dict, res: dict) -> Optional[str]:
    """What would make a passing check stronger, for both verdict tools: a presence-only check,
    or a text `contains` so short or so common that it may be matching something else."""
    notes = []
    if _presence_only(p):
        notes.append("this predicate only checks element/text presence, not an observable consequence; a stale "
                     "render can satisfy it while the feature is broken. Prefer a net, signal, frame or state "
                     "predicate, or allOf it with one.")
    evidence = res["evidence"] if isinstance(res.get("evidence"), dict) else {}
    for leaf, neg in _leaves(p):
        if neg or leaf["kind"] != "text" or "contains" not in leaf:
            continue
        places = evidence.get("places", evidence.get("count")) if p is leaf else None
        if len(leaf["contains"].strip()) < 4 or (isinstance(places, int) and places > 1):
            notes.append("text contains %r %s; a substring can match a status bar or a counter, so pin it with "
                         "`equals` (the whole text) or `matches` (a regular expression), or a `scope`." % (
                             leaf["contains"], "matched %d places" % places if isinstance(places, int) and places > 1
                             else "is very short"))
    return " ".join(notes) or None


# ---- Judge, whole: the result, the contradictions and the verdict of one observation ----

def _verdict(p: dict, obs: _Observation) -> Tuple[dict, List[dict], Tuple[str, str, str]]:
    """Judge `p` over `obs`: (its result, the contradictions, (verified, verifiedReason, because)).
    Pure.  After an act, an act that had no effect explains everything else and stands alone."""
    res = _judge_final(p, obs)
    contradictions = _contradictions(obs.window, p, obs.act_at, obs.known)
    shown = obs.shown if obs.act_at is not None else None
    if obs.action is None:
        return res, contradictions, _decide(res, contradictions, obs.window, obs.known, obs.since, p, shown=shown,
                                            pending=obs.pending)
    no_effect = _no_effect(obs.action, obs.effect, obs.window, obs.since, obs.known)
    if no_effect:
        contradictions = [no_effect]
    return res, contradictions, _decide(res, contradictions, obs.window, obs.known, obs.since, p,
                                        already_true=obs.already_true, act=True, effect=obs.effect, shown=shown,
                                        pending=obs.pending)


# ---- Answer: the one place a verdict becomes what the caller reads ----

_VERDICT_FIELDS = ("pass", "evidence", "failureReason", "observed", "expected", "assertion", "inconclusive",
                   "decided", "decidedBy", "observationLost", "timedOut")


def _server_parts(session: "_BrowserSession", window: List[dict], out: dict) -> None:
    """What the server did for the window's requests (`server`), and, when the verdict waited for no span
    though spans reach the daemon (none has come from this tab's origin: another app's tracing must not
    slow this one; a record that comes anyway joins the next verdict), `serverWait` saying so."""
    summary = _server_summary(window)
    if summary:
        out["server"] = summary
    otel = getattr(getattr(session.bridge, "hub", None), "otel", None)
    if otel is not None and otel.stats["spans"] and not session.server_seen and not otel.serves(session.url):
        out["serverWait"] = "none: OpenTelemetry spans reach the daemon, but none from this page's origin yet"


def _writes_in(window: List[dict], floor: Optional[float] = None, answers: bool = False) -> List[dict]:
    """The writes a window holds (POST, PUT, PATCH, DELETE and form posts) that started after the
    act at `floor`, once each by method and path: what `reticle verify --teeth` fails on purpose,
    one at a time.  (A write the page repeats on its own is not told apart here: failing it too
    only asks more of the flow.)  answers=True: each with the `answer` its first call got, where
    one can be replayed (_replayable_answer), for --teeth's lie."""
    out: List[dict] = []
    for e in window:
        d = e["data"]
        if e["type"] != "net.request" or not _is_write(d) or _is_dev(d):
            continue
        if floor is not None and not _caused_by_act(e, floor, None):
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
