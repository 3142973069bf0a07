"""Answer.

Answer: the compact answer a tool returns for a verdict, with its evidence trimmed, its grade, the
advice for an unknown, and the writes an act made.
"""

from __future__ import annotations

import collections
from typing import Any, Dict, List, Optional

from .bridge import _summarise
from .constants import ATTACHED_NOTE, EVENT_CAP_AGE_MS, EVENT_CAP_BYTES, EVENT_CAP_COUNT
from .events import _call_label
from .journal import _journal
from .judge import _server_summary, _trim_evidence, _verdict
from .store_judge import _change_text
from .observation import _Observation, _leaves
from .predicates import _PREDICATE_KINDS, _describe_predicate
from .tab import _BrowserSession, _Known
from .util import _dumps, _short


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
    for k in ("advice", "alreadyTrue", "coverage", "warning", "server", "serverWait", "stored", "attached"):
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


# ---- Answer: the one place a verdict becomes what the caller reads ----

_VERDICT_FIELDS = ("pass", "evidence", "failureReason", "observed", "expected", "assertion", "inconclusive",
                   "decided", "decidedBy", "observationLost", "timedOut")


def _server_parts(session: "_BrowserSession", window: List[dict], out: dict) -> None:
    """What the server did for the window's requests (`server`), and, when the verdict waited for no span
    though spans reach the daemon (none has come from this tab's origin: another app's tracing must not
    slow this one; a record that comes anyway joins the next verdict), `serverWait` saying so."""
    stored = [_change_text(ch) for e in window if e["type"] == "store.commit" and not e["data"].get("shared")
              for ch in e["data"].get("changes") or ()]
    if stored:  # what a watched store committed in the window (Storage truth), each change named
        out["stored"] = stored[:8] + (["... and %d more" % (len(stored) - 8)] if len(stored) > 8 else [])
    summary = _server_summary(window)
    if summary:
        out["server"] = summary
    otel = getattr(getattr(session.bridge, "hub", None), "otel", None)
    if otel is not None and otel.stats["spans"] and not session.server_seen and not otel.serves(session.url):
        out["serverWait"] = "none: OpenTelemetry spans reach the daemon, but none from this page's origin yet"


def _answer(session: "_BrowserSession", tool: str, args: dict, p: dict, obs: _Observation,
            anchor: Optional[dict] = None, replayed: bool = False) -> dict:
    """Every verdict answer (reticle_assert, reticle_act_and_wait, and so each flow step that
    replays them): judge the observation, then shape it.  `verified`, `verifiedReason` and
    `because` are always at the top level; an assert carries its result's fields beside them,
    an act_and_wait nests them under `verdict` beside the act's effect, honesty and trace.  The
    step is journaled (marked `replayed` for a flow's replay), health and buffer loss are spliced in,
    and the answer is compact unless `detail: "full"`."""
    res, contradictions, (verified, reason, because) = _verdict(p, obs)
    window, known, since = obs.window, obs.known, obs.since
    because = _faulted_note(because, window, res)  # a fault's answer is never read as the server's
    out: Dict[str, Any] = {"verified": verified, "verifiedReason": reason, "because": because}
    if tool == "assert":
        out.update(res)
        out["since"] = since
        _server_parts(session, window, out)
        verdict = out
        if contradictions:
            out["contradictions"] = [{k: v for k, v in c.items() if k != "write"} for c in contradictions]
        _coverage(known, out)
        advice = _advice(p, res) if verified == "yes" else None
        if advice:
            out["advice"] = advice
        _journal(session, "assert", args, out, replayed=replayed)
        out = _with_health(session, _with_buffer(session, out, since))
        return out if args.get("detail") == "full" else _compact(out, out)
    verdict = {k: res[k] for k in _VERDICT_FIELDS if res.get(k) is not None}
    loss = known.loss
    issues = []
    if loss and loss.get("evicted"):
        issues.append("capture truncated: %d event(s) evicted" % loss["evicted"])
    if loss and loss.get("sampled"):
        issues.append("blind spot: %d event(s) sampled away under a flood" % loss["sampled"])
    issues.extend(_unmade_issues(known))
    spots = known.blind_spots
    out.update({"since": since, "effect": obs.effect, "verdict": verdict,
                "honesty": {"grade": _grade(p), "attribution": "window",
                            "coverage": {"partial": bool(spots)} if spots else {"partial": False, "pct": 100},
                            "integrity": {"clean": not issues, "issues": issues}},
                "trace": {"window_ms": round(session.now() - since), "summary": _summarise(window)}})
    if obs.already_true:
        out["alreadyTrue"] = True
    _server_parts(session, window, out)
    advice = _advice(p, res) if verified in ("yes", "unknown") else None
    if advice:
        out["advice"] = advice
    if contradictions:
        out["contradictions"] = [{k: v for k, v in c.items() if k != "write"} for c in contradictions]
    if res.get("timedOut") or reason in ("request_in_flight", "evidence_incomplete", "unsettled", "no_effect"):
        out["unsettled"] = _unsettled_report(known, window, since, p)
    _journal(session, "act_and_wait", args, out, anchor, replayed)
    out = _with_health(session, out)
    return out if args.get("detail") == "full" else _compact(out, verdict)


def _unmade_issues(known: "_Known") -> List[str]:
    """Integrity: requests the page reported that the device's browser never made (forged into
    the SDK's socket by a page script; none of them can make a verdict), that it reported otherwise
    than the browser saw them (the browser's values counted), or with fields of the wrong type
    (refused at ingest)."""
    spots = known.blind_spots
    issues = []
    if spots.get("request-not-made"):
        issues.append("forged: the page reported %d request(s) the browser never made; they were not counted"
                      % spots["request-not-made"])
    if spots.get("request-misreported"):
        issues.append("misreported: the page reported %d request(s) otherwise than the browser's record (status or "
                      "ok); the browser's values were counted" % spots["request-misreported"])
    if spots.get("malformed-request"):
        issues.append("malformed: the page reported %d request(s) whose status or ok had the wrong type or "
                      "contradicted each other; they were refused" % spots["malformed-request"])
    return issues


def _coverage(known: "_Known", out: dict) -> dict:
    issues = _unmade_issues(known)
    if issues:
        out["honesty"] = dict(out.get("honesty") or {}, integrity={"clean": False, "issues": issues})
    if known.blind_spots:
        out["coverage"] = "partial — %s" % ", ".join("%s ×%d" % kv for kv in known.blind_spots.items())
        out["coverage_spots"] = [{"kind": k, "count": v} for k, v in known.blind_spots.items()]
    return out


def _with_health(session: "_BrowserSession", out: dict) -> dict:
    """An answer about the tab, with its health spliced in: a tab that does not answer or is throttled
    says so (`session`, `warning`), and the dialogs seen from the answer's `since` are named."""
    stuck = session.not_answering()
    if stuck is not None:
        out["session"] = {"lastSeenMs": session.last_seen_ms(), "answering": False, "notAnswering": stuck}
        out["warning"] = "the tab does not answer: %s" % stuck
    elif session.throttled():
        out["session"] = {"lastSeenMs": session.last_seen_ms(), "throttled": True, "focused": session.health.focused}
        out["warning"] = "the tab is hidden or silent; its timers and animations may be throttled"
    if session.device is not None and session.device.attached:  # said wherever the tab is read or driven
        out["attached"] = ATTACHED_NOTE
    seen = session.health.dialogs_since(out.get("since"))
    if seen:
        out["dialogs"] = seen
        said = "; ".join("a %s dialog (%s) was %s" % (d["dialogType"], _short(d["message"], 80) or "no text",
                                                      d["handled"]) for d in seen[:3])
        out["warning"] = (out["warning"] + "; " if out.get("warning") else "") + said + (
            ' (pass args: {"dialog": "accept"} to accept it)' if any(d["handled"] == "dismissed" for d in seen)
            else "")
    return out


def _with_buffer(session: "_BrowserSession", out: dict, since: float) -> dict:
    """An answer over the window from `since`, with what the tab's buffer lost of it (`buffer`: evicted,
    sampled, and a note that the counts are lower bounds)."""
    loss = session.store.loss_since(since)
    if loss:
        why = []
        if loss.get("evicted") or loss.get("evictedChurn"):
            why.append("the buffer keeps %d events / %d s / %d MiB per tab and evicted older ones"
                       % (EVENT_CAP_COUNT, EVENT_CAP_AGE_MS // 1000, EVENT_CAP_BYTES >> 20))
        if loss.get("sampled"):
            why.append("the page's flood was sampled")
        loss["note"] = "part of this window is gone: %s; counts above are lower bounds" % " and ".join(why)
        out["buffer"] = loss
    return out
