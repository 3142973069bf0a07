"""Predicates.

The grammar is data: the parser, its error messages and the
reticle://predicates resource all come from _PREDICATE_KINDS.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

import jsonschema

from .constants import RETRY_GRACE_MS
from .conventions import _is_failure_ui
from .errors import PredicateError
from .events import _call_label, _call_matches, _calls, _event_type, _frames, _is_dev, _is_write, _still_open
from .frames import _answered
from .observation import _Observation, _leaf_key
from .server_judge import _describe_server, _judge_server, _server_records
from .store_judge import _describe_stored, _judge_stored, _read_stored
from .tab import _BrowserSession
from .util import _dumps, _short


_P_SINCE = {"type": "number", "minimum": 0, "description": "only events at or after this cursor"}
_ELEMENT_STATES = ["visible", "hidden", "enabled", "disabled", "checked", "expanded", "focused", "present",
                   "inViewport"]
_FLAGS = {"type": "string", "pattern": "^[imsu]*$", "description": "regular expression flags"}
# A name or text to match: a string (names: exact; text, labels: contains), or how to match it.
_TEXT_MATCH = {"anyOf": [{"type": "string"}, {
    "type": "object", "additionalProperties": False, "minProperties": 1, "maxProperties": 2,
    "properties": {"contains": {"type": "string"}, "equals": {"type": "string"},
                   "matches": {"type": "string", "minLength": 1}, "flags": _FLAGS}}]}
_ELEMENT_QUERY: Dict[str, Any] = {
    "type": "object",
    "properties": {
        "by": {"enum": ["role", "text", "label", "placeholder", "testid", "alt"]},
        "value": _TEXT_MATCH, "role": {"type": "string"}, "name": _TEXT_MATCH,
        "text": _TEXT_MATCH, "label": _TEXT_MATCH, "placeholder": _TEXT_MATCH,
        "testid": {"type": "string"}, "alt": _TEXT_MATCH,
        "scope": {"type": "string"}, "self": {"type": "boolean"},
    },
    "additionalProperties": False, "minProperties": 1,
}
_LOCATOR_FIELDS = ("by", "value", "role", "name", "text", "label", "placeholder", "testid", "alt")


def _value_matches(expected: Any, actual: Any) -> bool:
    if expected == "*":
        return actual is not None
    if isinstance(expected, dict) and expected and any(k.startswith("$") for k in expected):
        for op, arg in expected.items():
            try:
                if op == "$gte" and not actual >= arg:
                    return False
                if op == "$lte" and not actual <= arg:
                    return False
                if op == "$gt" and not actual > arg:
                    return False
                if op == "$lt" and not actual < arg:
                    return False
                if op == "$contains" and arg not in actual:
                    return False
                if op == "$length" and not len(actual) == arg:
                    return False
                if op not in ("$gte", "$lte", "$gt", "$lt", "$contains", "$length"):
                    return False
            except TypeError:
                return False
        return True
    return _deep_equal(expected, actual)


def _deep_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b))
    return a == b


# ---- one judge per kind: (p, observation) -> result; the live kinds read the page first ----

def _judge_net(p: dict, obs: _Observation) -> dict:
    """A completed request matching the filters (see the `net` record); in flight, unreadable or
    answered otherwise each say so."""
    window = obs.events(p)
    done = _calls(window)
    matched = [d for d in done if _call_matches(d, p)]
    if p.get("bodyContains"):
        with_body = [d for d in matched
                     if isinstance(d.get("responseBody"), str) and _body_contains(d["responseBody"], p["bodyContains"])]
        if not with_body and matched:
            return _net_body_missed(p, matched)
        matched = with_body
    pending = [d for d in obs.open_since(window[0]["t"] if window else 0)
               if _call_matches(d, p, pending=True)]
    if "count" in p:
        return _net_count(p, matched, pending)
    if matched:
        return {"pass": True, "evidence": matched[0], "assertion": "net.present"}
    if pending:
        return {"pass": False, "inconclusive": "%s is still in flight; its outcome is not known yet"
                % _call_label(pending[0]), "assertion": "net.present"}
    return _net_unmatched(p, obs, window, done)


_JSON_SPACE_RE = re.compile(r'("(?:[^"\\]|\\.)*"?)|\s+')


def _json_unspaced(text: str) -> str:
    """text with the whitespace outside its JSON strings removed (`"ok": true` -> `"ok":true`)."""
    return _JSON_SPACE_RE.sub(lambda m: m.group(1) or "", text)


def _body_contains(body: str, needle: str) -> bool:
    """Does a response body contain `needle`: in the text as the server sent it, or, for a JSON
    body, in its parsed value written without spacing, against the needle without spacing outside
    its strings (so `"ok": true` and `"ok":true` both find `{"ok":true}` and `{\n  "ok": true\n}`)."""
    if needle in body:
        return True
    if not body.lstrip().startswith(("{", "[")):
        return False
    try:
        value = json.loads(body)
    except ValueError:
        return False
    flat = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return needle in flat or _json_unspaced(needle) in flat


def _body_excerpt(body: str, needle: str, size: int = 240) -> str:
    """Where in body the needle came nearest: the stretch around the longest prefix of the needle
    (at least 3 characters) that the body holds, else the body's start; quoted, cut to size."""
    at = -1
    for n in range(len(needle), 2, -1):
        at = body.find(needle[:n])
        if at >= 0:
            break
    start = max(0, at - size // 3) if at >= 0 else 0
    text = body[start:start + size]
    return "%s%r%s" % ("…" if start else "", text, "…" if start + size < len(body) else "")


def _net_body_missed(p: dict, matched: List[dict]) -> dict:
    """`bodyContains` over requests that matched otherwise: a body not captured cannot be checked;
    a captured one without the text is a miss."""
    unread = [d for d in matched if not isinstance(d.get("responseBody"), str)]
    if unread:
        return {"pass": False, "inconclusive": "the response body of %s was not captured, so its content "
                "cannot be checked (capture is off, or the body was not text)" % _call_label(unread[0]),
                "assertion": "net.body"}
    body = matched[-1]["responseBody"]
    excerpt = _body_excerpt(body, p["bodyContains"])
    return {"pass": False, "assertion": "net.body",
            "expected": "a response body containing %r" % p["bodyContains"],
            "observed": excerpt,
            "failureReason": "the request fired, but its response body (%d characters%s) does not contain %r; "
                             "it was: %s" % (len(body), ", cut by capture" if matched[-1].get("responseBodyTruncated")
                                             else "", p["bodyContains"], excerpt)}


def _net_count(p: dict, matched: List[dict], pending: List[dict]) -> dict:
    """`count`: exactly that many matching requests; more is decided, fewer may still be in flight."""
    if len(matched) == p["count"]:
        return {"pass": True, "evidence": {"count": len(matched), "calls": matched[:5]}, "assertion": "net.count"}
    over = len(matched) > p["count"]
    out = {"pass": False, "assertion": "net.count", "expected": "%d × %s" % (p["count"], _describe_predicate(p)),
           "observed": "%d × (%s)" % (len(matched), ", ".join("%s → %s" % (_call_label(d), d.get("status"))
                                                              for d in matched[:8])),
           "failureReason": "expected exactly %d matching request(s), saw %d" % (p["count"], len(matched)),
           "decided": over}
    if over:
        out["decidedBy"] = "count-exceeded"
    if not over and pending:
        out["pendingRequests"] = [_call_label(d) for d in pending[:3]]
    return out


def _net_unmatched(p: dict, obs: _Observation, window: List[dict], done: List[dict]) -> dict:
    """No request matched and none is in flight: headers or a status that cannot be read say so; a
    write answered otherwise, or traffic a net predicate cannot see, is named; else a plain miss."""
    if p.get("header"):
        headless = [d for d in done if not isinstance(d.get("responseHeaders"), dict)
                    and _call_matches(d, {k: v for k, v in p.items() if k != "header"})]
        if headless:
            return {"pass": False, "assertion": "net.header", "inconclusive": (
                "%s answered, but its response headers were not captured (a document request, or capture is "
                "off), so the header %r cannot be checked" % (_call_label(headless[0]), p["header"]["name"]))}
    hidden = [d for d in done if d.get("statusKnown") is False and _call_matches(d, p, pending=True)]
    if hidden and ("status" in p or "ok" in p):
        return _net_hidden_status(hidden[0], window)
    if "status" in p or "ok" in p:
        answered = _net_answered_otherwise(p, obs, window)
        if answered is not None:
            return answered
    expected = _describe_predicate(p)
    # unseen traffic hides the request only when it could be it: a message on a URL the filter names,
    # on a channel whose request could have had the filter's method (_frame_could_be)
    frames = [d for d in _frames(window) if _frame_could_be(d, p, window)]
    if frames:
        return {"pass": False, "assertion": "net.present", "inconclusive": (
            "no fetch/XHR matched %s, but this window holds %d WebSocket/EventSource message(s) (%s) that a net "
            "predicate cannot see; match them with {kind: \"frame\", ...}" % (
                expected, len(frames), _frame_label(frames[0])))}
    seen = []
    for d in done:
        note = " (%s)" % d["statusNote"] if d.get("httpStatus") else ""
        label = "%s → %s%s" % (_call_label(d), d.get("status"), note)
        if label not in seen:
            seen.append(label)
    out: Dict[str, Any] = {"pass": False, "assertion": "net.present", "expected": expected,
                           "observed": seen[:8] or "no calls at all in this window",
                           "failureReason": "no completed request matched %s" % expected}
    enveloped = [d for d in done if d.get("httpStatus") and _call_matches(d, p, pending=True)]
    if enveloped:
        out["failureReason"] += "; %s: %s" % (_answered(enveloped[-1]), enveloped[-1].get("statusNote"))
    elsewhere = _frames(window)
    if elsewhere:
        out["failureReason"] += ("; the %d WebSocket/EventSource message(s) of this window (%s) are on other URLs "
                                 "or channels that cannot carry that method, so none was it; match messages with "
                                 "{kind: \"frame\", ...}" % (
                                     len(elsewhere), _frame_label(elsewhere[0])))
    return out


def _net_hidden_status(d: dict, window: List[dict]) -> dict:
    """A full-page post (or link) answered by a redirect: the browser gives a page's scripts the status of
    the page the redirect led to, never the request's own, so with the script tag a predicate on it can
    never be decided: unknown at once (not at the timeout), saying what decides it: a device, which reads
    the browser's own network record, or the app's server (its record of the request is named when it came)."""
    marks = {(e.get("doc"), str(e["data"]["serverMark"])) for e in window if e["type"] == "net.pending"
             and e["data"].get("requestId") == d.get("requestId") and e["data"].get("serverMark")}
    said = next((r for r in _server_records(window) if r.get("method") == d.get("method")
                 and (r.get("documentId"), str(r.get("requestId"))) in marks), None)
    return {"pass": False, "assertion": "net.status-hidden", "decided": True, "decidedBy": "unknowable",
            "evidence": d, "inconclusive": (
                "%s happened, but the browser hides the status of a full-page %s answered by a redirect from the "
                "page's scripts (%s), so through the script tag a predicate on its status can never be decided; %s"
                % (_call_label(d), "navigation" if (d.get("method") or "GET").upper() == "GET" else "post",
                   d.get("statusNote") or "a document request",
                   "the app's server says it answered %s (a `server` predicate checks that)" % said.get("status")
                   if said is not None else
                   "a device (reticle_open), which reads the browser's own network record, decides it, as does a "
                   "`server` predicate where the app reports what its server did; or drop status and assert what "
                   "the next page shows"))}


def _net_answered_otherwise(p: dict, obs: _Observation, window: List[dict]) -> Optional[dict]:
    """The awaited write happened and was answered otherwise (not the status or `ok` asked for):
    final once a client retry had its chance (RETRY_GRACE_MS), else None."""
    answered = [e for e in window if e["type"] == "net.request" and _is_write(e["data"])
                and _call_matches(e["data"], p, pending=True)]
    if not answered:
        return None
    last = answered[-1]
    out = {"pass": False, "assertion": "net.answered-otherwise", "expected": _describe_predicate(p),
           "observed": ["%s → %s" % (_call_label(e["data"]), e["data"].get("status") or e["data"].get("error"))
                        for e in answered[-5:]],
           "evidence": last["data"],
           "failureReason": "%s, not as asked%s" % (
               _answered(last["data"]), " (%s)" % last["data"]["statusNote"] if last["data"].get("statusNote") else "")}
    age = obs.now - last["t"]
    if age >= RETRY_GRACE_MS:
        out.update(decided=True, decidedBy="answered-otherwise")
    else:
        out["retryAfterMs"] = round(RETRY_GRACE_MS - age)
    return out


def _frame_method(d: dict, window: List[dict]) -> Optional[str]:
    """The HTTP method of the request that carries message `d`, or None when it is not known: a
    WebSocket opens with a GET upgrade and an EventSource is a GET; a streamed response belongs to
    the fetch of its requestId, whatever method that had."""
    transport = d.get("transport")
    if transport in ("ws", "sse"):
        return "GET"
    rid = d.get("requestId")
    for e in window:
        if e["type"] in ("net.request", "net.pending") and rid and e["data"].get("requestId") == rid:
            method = e["data"].get("method")
            return str(method).upper() if method else None
    return None


def _frame_could_be(d: dict, p: dict, window: List[dict]) -> bool:
    """Could message `d` be the request a missed `net` predicate `p` looks for?  Only on a URL the
    filter names and a channel whose request could have had the filter's method: a socket's messages
    are never a POST or a DELETE, a stream's are only its fetch's method."""
    if p.get("urlContains") and p["urlContains"] not in str(d.get("url", "")):
        return False
    want = str(p.get("method") or "").upper()
    if not want:
        return True
    method = _frame_method(d, window)
    return method is None or method == want


def _judge_console(p: dict, obs: _Observation) -> dict:
    """Judge a console predicate over the window: log, warn and error messages and uncaught errors
    (`level` narrows them; `contains` matches the text).  `absent` fails, decided, on the first hit;
    otherwise a hit passes and none fails, naming the level and text looked for."""
    window = obs.events(p)
    level = p.get("level")
    types: Tuple[str, ...]
    if level is None:
        types = ("console.log", "console.warn", "console.error", "error.uncaught")
    elif level == "error":
        types = ("console.error", "error.uncaught")
    else:
        types = ("console." + level,)
    hits = []
    for e in window:
        if e["type"] not in types:
            continue
        d = e["data"] if isinstance(e.get("data"), dict) else {}
        text = d.get("text") or d.get("message") or ""
        text = text if isinstance(text, str) else _dumps(text)
        if p.get("contains") and p["contains"] not in text:
            continue
        hits.append({"level": "error" if e["type"] == "error.uncaught" else e["type"][8:], "text": _short(text, 300),
                     "uncaught": e["type"] == "error.uncaught", "t": e["t"]})
    if p.get("absent"):
        if hits:
            return {"pass": False, "assertion": "console.absent", "evidence": hits[:5], "decided": True,
                    "decidedBy": "absence-violated",
                    "observed": [h["text"] for h in hits[:5]],
                    "failureReason": "%d console %s message(s) appeared: %s"
                                     % (len(hits), level or "", hits[0]["text"])}
        return {"pass": True, "evidence": {"absent": True, "level": level}, "assertion": "console.absent"}
    if hits:
        return {"pass": True, "evidence": hits[:5], "assertion": "console.present"}
    return {"pass": False, "assertion": "console.present", "failureReason": "no console %s message%s" % (
        level or "", " containing %r" % p["contains"] if p.get("contains") else "")}


def _judge_animation(p: dict, obs: _Observation) -> dict:
    window = obs.events(p)
    want = "anim.end" if p.get("completed") else "anim.start"
    seen = []
    for e in window:
        if e["type"] != want:
            continue
        d = e["data"] if isinstance(e.get("data"), dict) else {}
        seen.append(d.get("name"))
        if p.get("name") and d.get("name") != p["name"]:
            continue
        if p.get("target") and d.get("ref") != p["target"] and d.get("targetRef") != p["target"]:
            continue
        return {"pass": True, "evidence": d, "assertion": "animation"}
    return {"pass": False, "assertion": "animation", "observed": seen[:8] or "no animations in this window",
            "failureReason": "no %s event for %s" % (want, p.get("name") or "any animation")}


def _judge_signal(p: dict, obs: _Observation) -> dict:
    """Judge a signal predicate: the app's reticle.signal(name, data) calls in the window, matched by
    name and `dataMatches`.  With `count` it passes on exactly that many (more is decided: a signal
    cannot un-fire); else one match passes, a named one with other data is a payload near miss, and
    none fails listing the signals that did fire."""
    window = obs.events(p)
    named, matched = [], []
    for e in window:
        if e["type"] != "signal":
            continue
        d = e["data"] if isinstance(e.get("data"), dict) else {}
        if p.get("name") and d.get("name") != p["name"]:
            continue
        named.append(d)
        data = d.get("data")
        dm = p.get("dataMatches")
        if dm and not (isinstance(data, dict) and all(_value_matches(v, data.get(k)) for k, v in dm.items())):
            continue
        matched.append(d)
    if "count" in p:
        if len(matched) == p["count"]:
            return {"pass": True, "evidence": {"count": len(matched), "signals": matched[:5]},
                    "assertion": "signal.count"}
        return {"pass": False, "assertion": "signal.count", "decided": len(matched) > p["count"],
                "decidedBy": "count-exceeded" if len(matched) > p["count"] else None,
                "failureReason": "expected signal %r exactly %d time(s), saw %d"
                                 % (p.get("name"), p["count"], len(matched))}
    if matched:
        return {"pass": True, "evidence": matched[0], "assertion": "signal"}
    if named:
        return {"pass": False, "assertion": "signal.payload",
                "evidence": {"nearMiss": [d.get("data") for d in named[:5]]},
                "failureReason": "signal %r fired, but its data did not match %s"
                                 % (p.get("name"), _dumps(p.get("dataMatches")))}
    fired = sorted({str((e.get("data") or {}).get("name")) for e in window if e["type"] == "signal"})
    return {"pass": False, "assertion": "signal.absent", "observed": fired or "no signals in this window",
            "failureReason": "signal %r did not fire" % p.get("name", "*")}


def _judge_route(p: dict, obs: _Observation) -> dict:
    window = obs.events(p)
    changes = [e for e in window if e["type"] == "route.change" and isinstance(e.get("data"), dict)]
    if changes:
        to = str(changes[-1]["data"].get("to", ""))
        decided_by = "route-change"
    else:
        to = obs.url
        decided_by = "current-route"
    parts = urllib.parse.urlsplit(to)
    path = parts.path or "/"
    full = path + ("?" + parts.query if parts.query else "") + ("#" + parts.fragment if parts.fragment else "")
    evidence = {"to": to, "pathname": path, "decidedBy": decided_by}
    if "pathname" in p and path != p["pathname"]:
        return {"pass": False, "assertion": "route.pathname", "expected": p["pathname"], "observed": path,
                "failureReason": "the route is %r, not %r" % (path, p["pathname"]), "evidence": evidence}
    if "contains" in p and p["contains"] not in full:
        return {"pass": False, "assertion": "route.contains", "expected": p["contains"], "observed": full,
                "failureReason": "the route %r does not contain %r" % (full, p["contains"]), "evidence": evidence}
    return {"pass": True, "evidence": evidence, "assertion": "route"}


def _judge_settled(p: dict, obs: _Observation) -> dict:
    window = obs.events(p)
    quiet_ms = float(p.get("quietMs", 500))
    open_ids = _still_open(window)
    # after an act, quiet counts from the act (a page that did nothing yet has not settled yet)
    last_busy = obs.start(p) if obs.after_act else None
    for e in window:
        if _event_type(e["type"]).busy and not _is_dev(e["data"]):
            last_busy = e["t"]
    if open_ids:
        labels = [_call_label(d) for d in open_ids.values()]
        return {"pass": False, "assertion": "settled.in-flight", "evidence": {"settled": False, "inFlight": labels[:5]},
                "failureReason": "%d request(s) still in flight: %s" % (len(labels), ", ".join(labels[:3]))}
    if last_busy is None:
        return {"pass": True, "evidence": {"settled": True, "quietForMs": None}, "assertion": "settled.quiet"}
    quiet_for = obs.now - last_busy
    if quiet_for >= quiet_ms:
        return {"pass": True, "evidence": {"settled": True, "quietForMs": round(quiet_for)},
                "assertion": "settled.quiet"}
    return {"pass": False, "assertion": "settled.quiet", "retryAfterMs": round(quiet_ms - quiet_for),
            "failureReason": "the page was busy %d ms ago (needs %d ms quiet)" % (quiet_for, quiet_ms)}


def _element_query(p: dict) -> Tuple[dict, Optional[str]]:
    """The page query of an element leaf (its locator as by/value), or why there is none."""
    q = dict(p["query"])
    if "by" not in q:
        for f in ("role", "text", "label", "placeholder", "testid", "alt"):
            if f in q:
                q["by"] = f
                q["value"] = q.pop(f)
                break
    if "by" not in q:
        return q, ("the element query names no locator (by/value, role, text, label, placeholder, testid or alt)")
    if "value" not in q:
        return q, "`by: %s` needs a `value`" % q["by"]
    return q, None


async def _read_element(session: "_BrowserSession", p: dict) -> Any:
    """The page's answer to an element leaf's probe (None when the query cannot be asked)."""
    q, problem = _element_query(p)
    if problem:
        return None
    probe = dict(q, kind="element")
    states = p.get("state") or []
    if states:
        probe["state"] = states[0]  # the page filters by one state; the rest are checked by the judge
    if len(states) > 1:
        probe["limit"] = 200
    return await session.command("eval_probe", probe)


def _element_found(p: dict, res: dict) -> Tuple[dict, int, Optional[str]]:
    """The probe's answer with every asked state checked: (answer, count, why it cannot be told)."""
    count = int(res.get("count", 0))
    states = p.get("state") or []
    if len(states) > 1:
        if count > len(res.get("elements", [])):
            return res, count, ("more than %d elements match; narrow the query to check several states"
                                % len(res.get("elements", [])))
        kept = [e for e in res.get("elements", []) if all(s in e.get("states", []) for s in states[1:])]
        res = dict(res, elements=kept, count=len(kept))
        count = len(kept)
    return res, count, None


async def _near_element(session: "_BrowserSession", p: dict, res: Any) -> Optional[dict]:
    """For an element that was not found: the same query without its state, or the role's
    elements with their names, so the answer can name what is there instead."""
    q, problem = _element_query(p)
    if problem or not isinstance(res, dict) or p.get("absent") or res.get("scopeMissing"):
        return None
    res, count, problem = _element_found(p, res)
    if problem or count > 0:
        return None
    near: Dict[str, Any] = {}
    if p.get("state"):
        near["relaxed"] = await session.command("eval_probe", dict(q, kind="element"))
        if near["relaxed"].get("count"):
            return near
    if q["by"] == "role" and q.get("name") is not None:
        near["peers"] = await session.command("eval_probe", {"kind": "element", "by": "role", "value": q["value"],
                                                             "limit": 20})
    return near


def _judge_element(p: dict, obs: _Observation) -> dict:
    """An element leaf over its live read (and, on a miss, its near misses)."""
    q, problem = _element_query(p)
    if problem:
        return {"pass": False, "inconclusive": problem}
    res, count, problem = _element_found(p, obs.live.get(_leaf_key(p)) or {})
    if problem:
        return {"pass": False, "inconclusive": problem}
    what = "%s %r%s" % (q["by"], q["value"], " named %r" % q["name"] if q.get("name") else "")
    if p.get("absent"):
        if count == 0:
            return {"pass": True, "evidence": {"absent": True, "scopeMissing": bool(res.get("scopeMissing"))},
                    "assertion": "element.absent"}
        return {"pass": False, "assertion": "element.absent", "evidence": res.get("elements", [])[:5],
                "failureReason": "%d element(s) match %s, expected none" % (count, what)}
    if count > 0:
        return {"pass": True, "evidence": res.get("elements", [])[:5], "assertion": "element.present"}
    out: Dict[str, Any] = {"pass": False, "assertion": "element.present", "expected": what,
                           "failureReason": "no element matches %s%s"
                                            % (what, " in state %s" % "/".join(p["state"]) if p.get("state") else "")}
    if res.get("scopeMissing"):
        out["failureReason"] += " (the scope %r matched nothing)" % q.get("scope")
        return out
    near = obs.near.get(_leaf_key(p))
    if near is None:
        return out
    relaxed = near.get("relaxed") or {}
    if relaxed.get("count"):
        out["assertion"] = "element.state"
        out["evidence"] = {"nearMiss": relaxed.get("elements", [])[:5]}
        out["failureReason"] = "%s exists but not in state %s; its states: %s" % (
            what, "/".join(p["state"]),
            ", ".join(",".join(e.get("states", [])) for e in relaxed.get("elements", [])[:3]))
        return out
    if near.get("peers") is not None:
        names = [e.get("name", "") for e in near["peers"].get("elements", [])]
        out["assertion"] = "element.role+name"
        out["failureReason"] = "no %s named %r; saw: %s" % (q["value"], q["name"],
                                                           ", ".join(repr(n) for n in names[:12]) or "none")
        out["observed"] = names[:12]
    elif q["by"] == "testid":
        hint = res.get("hint") or {}
        present = hint.get("presentTestids") or []
        if present:
            out["failureReason"] += "; testids present here: %s" % ", ".join(present[:12])
            out["observed"] = present[:12]
    return out


def _text_wanted(p: dict) -> str:
    """How a text predicate reads in a sentence: containing 'x' / exactly 'x' / matching /x/."""
    if "equals" in p:
        return "exactly %r" % p["equals"]
    if "matches" in p:
        return "matching /%s/" % p["matches"]
    return "containing %r" % p["contains"]


async def _read_text_probe(session: "_BrowserSession", p: dict) -> Any:
    """The page's answer to a text leaf's probe."""
    probe = {"kind": "text"}
    for k in ("contains", "equals", "matches", "flags", "visible", "scope"):
        if k in p:
            probe[k] = p[k]
    return await session.command("eval_probe", probe)


TOLD_NOTE = "the page tells the user"  # a missed text's reason names, after it, what the page tells the user instead


async def _near_text(session: "_BrowserSession", p: dict, res: Any) -> Optional[dict]:
    """For text that was not found: what the page tells the user now (its alerts and status
    messages, errors first), the nearest texts a person would read instead."""
    if p.get("absent") or not isinstance(res, dict) or res.get("found") or not session.sdk_version:
        return None
    reply = await session.command("alerts_read", {}, timeout=2.0)
    alerts: List[Any] = []
    if isinstance(reply, dict) and isinstance(reply.get("alerts"), list):
        alerts = reply["alerts"]
    told = [d for d in alerts if isinstance(d, dict) and str(d.get("text") or "").strip()]
    told.sort(key=lambda d: not _is_failure_ui(d))
    return {"told": [_short(str(d["text"]), 120) for d in told[:5]]}


def _text_names(p: dict, text: str) -> bool:
    """Does a message's text satisfy text leaf `p` (contains, equals, matches, as the page's probe reads)?"""
    flat = " ".join(text.split())
    if "equals" in p:
        return flat == " ".join(str(p["equals"]).split())
    if "matches" in p:
        try:
            return re.search(p["matches"], flat, re.I if "i" in str(p.get("flags", "")) else 0) is not None
        except re.error:
            return False
    return str(p.get("contains", "")) in flat


def _shown_and_gone(p: dict, obs: _Observation) -> Optional[dict]:
    """A message (a toast, a status, an alert) with the text `p` asks for, shown in the judged window and
    no longer shown (ui.gone): it was shown in that window, so the text held; the evidence says when it
    came and when it went.  None when no such message (a `scope`d or `visible`-only check reads the page)."""
    if p.get("scope") or obs.since is None:
        return None
    window = obs.events(p)
    for i, e in enumerate(window):
        if e["type"] not in ("ui.alert", "ui.status") or not _text_names(p, str(e["data"].get("text", ""))):
            continue
        gone = [x for x in window[i + 1:] if x["type"] == "ui.gone" and x["data"].get("text") == e["data"].get("text")]
        if gone:
            came, went = e["t"] - obs.since, gone[0]["t"] - obs.since
            return {"pass": True, "assertion": "text.shown-and-gone",
                    "evidence": {"sample": _short(str(e["data"].get("text", "")), 200), "shownAtMs": round(came),
                                 "goneAtMs": round(went),
                                 "note": "shown at +%d ms, gone at +%d ms (from the start of the window): it is "
                                         "no longer on the page" % (came, went)}}
    return None


def _judge_text(p: dict, obs: _Observation) -> dict:
    res = obs.live.get(_leaf_key(p)) or {}
    found = bool(res.get("found"))
    wanted = _text_wanted(p)
    if p.get("absent"):
        if not found:
            return {"pass": True, "evidence": {"absent": True}, "assertion": "text.absent"}
        return {"pass": False, "assertion": "text.absent", "observed": res.get("sample"),
                "failureReason": "text %s is on the page" % wanted}
    if found:
        evidence = {"sample": res.get("sample"), "count": res.get("count")}
        if res.get("places") is not None:
            evidence["places"] = res["places"]
        return {"pass": True, "evidence": evidence, "assertion": "text.present"}
    went = _shown_and_gone(p, obs)
    if went is not None:
        return went
    out: Dict[str, Any] = {"pass": False, "assertion": "text.present", "expected": wanted,
                           "failureReason": "no%s text %s on the page" % (" visible" if p.get("visible") else "",
                                                                          wanted)}
    told = (obs.near.get(_leaf_key(p)) or {}).get("told")
    if told:  # near misses: what the page tells the user instead
        out["observed"] = told
        out["failureReason"] += "; %s: %s" % (TOLD_NOTE, ", ".join(repr(t) for t in told[:3]))
    return out


# ---- frames: WebSocket, EventSource and streamed-response messages ----

_MISSING = object()
_PACKET_PREFIX = re.compile(r"^\d+(?=[\[{])")  # socket.io / engine.io packet type: 42["update", {...}]


def _frame_body(text: str) -> str:
    """A message's text with a socket.io-style numeric packet prefix read past."""
    return _PACKET_PREFIX.sub("", text, count=1)


def _frame_value(text: str, path: str) -> Any:
    """The value at the dot `path` of a JSON message (see _frame_body); _MISSING when there is none."""
    try:
        value = json.loads(_frame_body(text))
    except ValueError:
        return _MISSING
    for part in path.split(".") if path else []:
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


def _frame_label(d: dict) -> str:
    return "%s %s %s" % (d.get("transport", "ws"), d.get("direction", "?"), d.get("url", "?"))


def _judge_frame(p: dict, obs: _Observation) -> dict:
    """Judge a socket/stream message predicate (url, direction, transport, contains, path/equals,
    count).  A message that cannot be read (binary, capture off, cut at 4 KB) makes a miss
    inconclusive rather than a no; too many matches for `count` is decided."""
    window = obs.events(p)
    candidates = [d for d in _frames(window)
                  if (not p.get("urlContains") or p["urlContains"] in str(d.get("url", "")))
                  and (not p.get("direction") or d.get("direction") == p["direction"])
                  and (not p.get("transport") or d.get("transport") == p["transport"])]
    matched, unreadable = [], []
    for d in candidates:
        text = d.get("data")
        if not isinstance(text, str):
            unreadable.append(d)
            continue
        if p.get("contains") and p["contains"] not in text:
            if d.get("dataTruncated"):
                unreadable.append(d)
            continue
        if "path" in p:
            value = _frame_value(text, p["path"])
            if value is _MISSING or ("equals" in p and not _value_matches(p["equals"], value)):
                if d.get("dataTruncated"):
                    unreadable.append(d)
                continue
        matched.append(d)
    expected = _describe_frame(p)
    if "count" in p:
        if len(matched) == p["count"] and not unreadable:
            return {"pass": True, "evidence": {"count": len(matched), "frames": matched[:5]},
                    "assertion": "frame.count"}
        if len(matched) > p["count"]:
            return {"pass": False, "assertion": "frame.count", "decided": True, "decidedBy": "count-exceeded",
                    "expected": "%d × %s" % (p["count"], expected),
                    "failureReason": "expected exactly %d matching message(s), saw %d" % (p["count"], len(matched))}
    elif matched:
        return {"pass": True, "evidence": matched[0], "assertion": "frame.present"}
    if unreadable:
        return {"pass": False, "assertion": "frame", "inconclusive": (
            "%d message(s) on %s could not be read (binary, body capture off, or cut at 4 KB), so whether one "
            "matched is unknown" % (len(unreadable), _frame_label(unreadable[0])))}
    seen = ["%s: %s" % (_frame_label(d), _short(d.get("data", ""), 80)) for d in candidates[-5:]]
    if "count" in p:
        return {"pass": False, "assertion": "frame.count", "expected": "%d × %s" % (p["count"], expected),
                "observed": seen, "failureReason": "expected exactly %d matching message(s), saw %d" % (
                    p["count"], len(matched))}
    return {"pass": False, "assertion": "frame.present", "expected": expected,
            "observed": seen or ["no socket or stream messages in this window"],
            "failureReason": "no message matched %s" % expected}


async def _read_state(session: "_BrowserSession", p: dict) -> Any:
    """A state leaf's reads: of the named store, or of every registered store at the path."""
    if p.get("store") is not None:
        return {"read": await session.command("state_read", {"store": p["store"], "path": p["path"]})}
    whole = await session.command("state_read", {})
    names = whole.get("storeNames") or list((whole.get("stores") or {}).keys())
    return {"names": names, "reads": [[n, await session.command("state_read", {"store": n, "path": p["path"]})]
                                      for n in names]}


def _judge_state(p: dict, obs: _Observation) -> dict:
    """Judge an app-state predicate from the stores the page registered, read live: with no `store`
    exactly one store may hold the path (none registered or several holding it is inconclusive, not
    a no); a missing store or path fails naming what exists, a value cut by transport caps is
    inconclusive, else the value is compared with `equals`."""
    path = p["path"]
    store = p.get("store")
    facts = obs.live.get(_leaf_key(p)) or {}
    if store is None:
        names = facts.get("names") or []
        if not names:
            return {"pass": False, "inconclusive": "no store is registered (reticle.registerStore / pushStore), "
                    "so state cannot be read"}
        reads = [(n, r) for n, r in facts.get("reads") or []]
        hits = [(n, r) for n, r in reads if r.get("found")]
        if len(hits) > 1:
            return {"pass": False, "inconclusive": "several stores have %r (%s); name one with `store`"
                    % (path, ", ".join(n for n, _ in hits))}
        if not hits:
            return {"pass": False, "assertion": "state.path-missing", "evidence": {"searchedStores": names},
                    "failureReason": "no registered store has %r (stores: %s)" % (path, ", ".join(names))}
        store, read = hits[0]
    else:
        read = facts.get("read") or {}
        if read.get("storeMissing") or (read.get("found") is False and read.get("error")):
            return {"pass": False, "assertion": "state.store-missing",
                    "evidence": {"searchedStores": read.get("storeNames")},
                    "failureReason": "no store named %r (stores: %s)"
                                     % (store, ", ".join(read.get("storeNames") or []))}
        if not read.get("found"):
            return {"pass": False, "assertion": "state.path-missing",
                    "evidence": {"availableKeys": read.get("availableKeys")},
                    "failureReason": "%s has no %r; keys there: %s"
                                     % (store, path, ", ".join(map(str, (read.get("availableKeys") or [])[:20])))}
    value = read.get("value")
    if read.get("truncated"):
        return {"pass": False, "inconclusive": "the value at %s.%s was cut by transport caps" % (store, path)}
    expected = p.get("equals", "*")
    if _value_matches(expected, value):
        return {"pass": True, "evidence": {"store": store, "path": path, "value": value}, "assertion": "state.equals"}
    return {"pass": False, "assertion": "state.equals", "expected": expected,
            "observed": "%s = %s" % (path, _short(value)),
            "failureReason": "%s.%s is %s, expected %s" % (store, path, _short(value), _short(expected))}


async def _read_storage(session: "_BrowserSession", p: dict) -> Any:
    """The page's storage at a storage leaf's key (nothing to read for `changed`: the window says)."""
    if p.get("changed"):
        return None
    args = {"key": p["key"]}
    if p.get("area"):
        args["area"] = p["area"]
    return await session.command("storage_read", args)


def _judge_storage(p: dict, obs: _Observation) -> dict:
    """Judge a web-storage predicate: `changed` looks at the writes in the window (the last one is
    compared with contains/equals); otherwise the live read of the key (present, absent, contains,
    equals), naming the keys there when it is missing."""
    window = obs.events(p)
    if p.get("changed"):
        writes = [e["data"] for e in window if e["type"] == "storage.change" and isinstance(e.get("data"), dict)
                  and e["data"].get("key") == p["key"]
                  and (not p.get("area") or e["data"].get("area") in (p["area"], p["area"].rstrip("s")))]
        if not writes:
            return {"pass": False, "assertion": "storage.changed",
                    "failureReason": "%r was not written in this window" % p["key"]}
        if "contains" in p and p["contains"] not in str(writes[-1].get("to")):
            return {"pass": False, "assertion": "storage.contains", "observed": _short(writes[-1].get("to")),
                    "failureReason": "%r was written as %s, which does not contain %r" % (
                        p["key"], _short(writes[-1].get("to")), p["contains"])}
        if "equals" in p and not _value_matches(p["equals"], writes[-1].get("to")):
            return {"pass": False, "assertion": "storage.equals", "observed": _short(writes[-1].get("to")),
                    "failureReason": "%r was written as %s, expected %s"
                                     % (p["key"], _short(writes[-1].get("to")), _short(p["equals"]))}
        return {"pass": True, "evidence": writes[-1], "assertion": "storage.changed"}
    read = obs.live.get(_leaf_key(p)) or {}
    found = bool(read.get("found"))
    if p.get("absent"):
        if found:
            return {"pass": False, "assertion": "storage.absent", "observed": _short(read.get("value")),
                    "failureReason": "%r is present (%s)" % (p["key"], read.get("area"))}
        return {"pass": True, "evidence": {"absent": True, "key": p["key"]}, "assertion": "storage.absent"}
    if not found:
        return {"pass": False, "assertion": "storage.present", "evidence": {"availableKeys": read.get("availableKeys")},
                "failureReason": "%r is not in %s storage" % (p["key"], p.get("area") or "any")}
    value = read.get("value")
    if "contains" in p and p["contains"] not in (value if isinstance(value, str) else _dumps(value)):
        return {"pass": False, "assertion": "storage.contains", "observed": _short(value),
                "failureReason": "%r is %s, which does not contain %r" % (p["key"], _short(value), p["contains"])}
    if "equals" in p and not _value_matches(p["equals"], value):
        return {"pass": False, "assertion": "storage.equals", "observed": _short(value),
                "failureReason": "%r is %s, expected %s" % (p["key"], _short(value), _short(p["equals"]))}
    return {"pass": True, "evidence": {"area": read.get("area"), "key": p["key"], "value": value},
            "assertion": "storage"}


def _describe_net(p: dict) -> str:
    text = "a %srequest %s" % (p["method"].upper() + " " if p.get("method") else "",
                               "to a URL containing %r" % p["urlContains"] if p.get("urlContains") else "to any URL")
    if "status" in p:
        text += " answering %s" % p["status"]
    elif "ok" in p:
        text += " that %s" % ("succeeded" if p["ok"] else "failed")
    if p.get("bodyContains"):
        text += " whose body contains %r" % p["bodyContains"]
    if p.get("header"):
        h = p["header"]
        text += " with header %s%s" % (h["name"], " = %r" % h["equals"] if "equals" in h else
                                       " containing %r" % h["contains"] if "contains" in h else "")
    return text


def _describe_frame(p: dict) -> str:
    text = "a %s message" % p.get("transport", "socket")
    if p.get("direction"):
        text += " %s" % ("received" if p["direction"] == "in" else "sent")
    if p.get("urlContains"):
        text += " on a URL containing %r" % p["urlContains"]
    if p.get("contains"):
        text += " containing %r" % p["contains"]
    if "path" in p:
        text += " with %s %s" % (p["path"] or "its value",
                                 "= %s" % _short(p["equals"], 60) if "equals" in p else "present")
    return text


def _one_of(p: dict, fields: Tuple[str, ...]) -> List[str]:
    given = [f for f in fields if f in p]
    if len(given) == 1:
        return []
    return ["give exactly one of %s (got %s)" % (", ".join(fields), ", ".join(given) or "none")]


def _regex_ok(p: dict, field: str) -> List[str]:
    if field not in p:
        return []
    try:
        re.compile(p[field])
    except re.error as exc:
        return ["%s is not a regular expression: %s" % (field, exc)]
    return []


def _describe_combinator(p: dict) -> str:
    if p["kind"] == "not":
        return "not %s" % _describe_predicate(p["predicate"])
    return "%s (%s)" % ("all of" if p["kind"] == "allOf" else "any of",
                        ", ".join(_describe_predicate(c) for c in p["predicates"]))


class _Kind:
    """One predicate kind, whole: its fields, its evaluator, how it describes
    itself, what grade of evidence it gives, whether it only checks presence,
    and whether it reads the live page.  The parser, its errors, the
    reticle://predicates resource, the evaluation, the description and the
    grading all read this one record, so adding a kind means adding one."""

    __slots__ = ("name", "doc", "properties", "required", "aliases", "example", "judge", "describe",
                 "grade", "role", "live", "window", "check", "read", "near")

    def __init__(self, name: str, doc: str, properties: dict, example: dict,
                 judge: Optional[Callable[[dict, "_Observation"], dict]] = None,
                 describe: Optional[Callable[[dict], str]] = None, required: Tuple[str, ...] = (),
                 aliases: Optional[dict] = None, grade: Optional[Callable[[dict], Optional[str]]] = None,
                 role: Optional[str] = None, live: bool = False, window: bool = False,
                 check: Optional[Callable[[dict], List[str]]] = None, read: Optional[Callable] = None,
                 near: Optional[Callable] = None) -> None:
        self.name = name
        self.doc = doc
        self.properties = properties
        self.required = list(required)
        self.aliases = aliases or {}
        self.example = example
        self.judge = judge                  # pure (p, observation) -> result; None for combinators
        self.describe = describe or (lambda p: name)
        self.grade = grade or (lambda p: None)  # the evidence grade a positive leaf of this kind gives
        self.role = role                    # "presence" (element, text) | "consequence" | None
        self.live = live                    # reads the live page (so it can already be true before an act)
        self.window = window                # reads the event window (so lost events can hide its evidence)
        self.check = check or (lambda p: [])  # rules across fields that a schema says badly -> issues
        self.read = read                    # async (session, p) -> what the live page says, for `judge`
        self.near = near                    # async (session, p, read) -> near misses of a failed read, or None


_PREDICATE_KINDS: Dict[str, _Kind] = {k.name: k for k in (
    _Kind("element",
          "An element matching `query` exists (in `state`), or with absent: true does not. Live DOM.",
          {"query": _ELEMENT_QUERY,
           "state": {"anyOf": [{"enum": _ELEMENT_STATES}, {"type": "array", "items": {"enum": _ELEMENT_STATES}}]},
           "absent": {"type": "boolean"}},
          {"kind": "element", "query": {"role": "button", "name": "Pay"}, "state": "enabled"},
          _judge_element, required=("query",), role="presence", live=True, read=_read_element, near=_near_element),
    _Kind("text",
          "Text a user can read (never script or style source): some element's text `contains` a substring "
          "(case-insensitive), `equals` a whole text (whitespace-normalised) or `matches` a regular expression; "
          "`visible` to require it shown. Live DOM.",
          {"contains": {"type": "string", "minLength": 1}, "equals": {"type": "string", "minLength": 1},
           "matches": {"type": "string", "minLength": 1}, "flags": _FLAGS, "visible": {"type": "boolean"},
           "absent": {"type": "boolean"}, "scope": {"type": "string"}},
          {"kind": "text", "contains": "Payment received", "visible": True},
          _judge_text, lambda p: "text %s" % _text_wanted(p),
          aliases={"text": "contains", "value": "contains"}, role="presence", live=True, read=_read_text_probe,
          near=_near_text,
          check=lambda p: _one_of(p, ("contains", "equals", "matches")) + _regex_ok(p, "matches")),
    _Kind("net",
          "A completed request (fetch, XHR, document) matching the filters; `count` demands exactly that many; "
          "`bodyContains` reads the response body as the server sent it (for JSON also its parsed value, so "
          "spacing never decides), `header` {name, equals|contains} a response header.",
          {"method": {"type": "string"}, "urlContains": {"type": "string"},
           "status": {"type": "integer"}, "ok": {"type": "boolean"}, "since": _P_SINCE,
           "count": {"type": "integer", "minimum": 0},
           "bodyContains": {"type": "string", "minLength": 1},
           "header": {"type": "object", "required": ["name"], "additionalProperties": False,
                      "properties": {"name": {"type": "string", "minLength": 1}, "equals": {"type": "string"},
                                     "contains": {"type": "string"}}}},
          {"kind": "net", "method": "POST", "urlContains": "/api/pay", "status": 200, "count": 1},
          _judge_net, _describe_net, aliases={"url": "urlContains"},
          grade=lambda p: "net" if p.get("urlContains") else None, role="consequence", window=True),
    _Kind("frame",
          "A WebSocket, EventSource or streamed-response message: `urlContains`, `direction` (in|out), "
          "`transport` (ws|sse|stream), `contains` in its text, or the JSON value at the dot `path` "
          "(`equals` a value matcher); `count` exact.",
          {"urlContains": {"type": "string"}, "direction": {"enum": ["in", "out"]},
           "transport": {"enum": ["ws", "sse", "stream"]}, "contains": {"type": "string", "minLength": 1},
           "path": {"type": "string"}, "equals": {}, "count": {"type": "integer", "minimum": 0}, "since": _P_SINCE},
          {"kind": "frame", "urlContains": "/socket", "direction": "in", "path": "1.status", "equals": "saved"},
          _judge_frame, lambda p: _describe_frame(p), aliases={"url": "urlContains", "data": "contains"},
          grade=lambda p: "net" if p.get("contains") or "path" in p else None, role="consequence", window=True,
          check=lambda p: (["`equals` needs a `path` (the JSON value to compare)"]
                           if "equals" in p and "path" not in p else [])),
    _Kind("server",
          "What the app's server did for the tab's requests (needs Reticle's middleware: reticle.wsgi, "
          "reticle.asgi, reticle.DjangoMiddleware): `method`, `urlContains` (path), `status`, `exception` "
          "(raised), `logged` (an error logged), `writes` {table, op, key, count | min} (committed rows; a "
          "rolled-back write is none; `key`: the primary key value, or values, the write named its rows by), "
          "`committed`; `count` exact matching requests.",
          {"method": {"type": "string"}, "urlContains": {"type": "string"}, "status": {"type": "integer"},
           "exception": {"type": "boolean"}, "logged": {"type": "boolean"},
           "writes": {"type": "object", "additionalProperties": False,
                      "properties": {"table": {"type": "string", "minLength": 1},
                                     "op": {"enum": ["insert", "update", "delete"]},
                                     "key": {"anyOf": [{"type": ["integer", "string"]},
                                                       {"type": "array", "minItems": 1, "maxItems": 20,
                                                        "items": {"type": ["integer", "string"]}}]},
                                     "count": {"type": "integer", "minimum": 0},
                                     "min": {"type": "integer", "minimum": 1}}},
           "committed": {"type": "boolean"}, "count": {"type": "integer", "minimum": 0}, "since": _P_SINCE},
          {"kind": "server", "method": "POST", "urlContains": "/profile",
           "writes": {"table": "profile", "op": "update", "min": 1}, "exception": False},
          _judge_server, _describe_server, aliases={"url": "urlContains", "path": "urlContains"},
          grade=lambda p: "server", role="consequence", window=True,
          check=lambda p: ["writes: give count or min, not both"]
          if "count" in p.get("writes", {}) and "min" in p.get("writes", {}) else []),
    _Kind("stored",
          "What the app's watched store committed during the act (needs a watched store: reticle_watch_db, "
          "--watch-db): a row of `table` (a JSON file's key path) whose columns equal `where`, by `op` "
          "(insert|update|delete), at least `min`; `store` names one of several; `now: true` reads the "
          "store's current rows instead.",
          {"table": {"type": "string", "minLength": 1, "maxLength": 200},
           "where": {"type": "object", "maxProperties": 20,
                     "additionalProperties": {"type": ["string", "number", "boolean", "null"]}},
           "op": {"enum": ["insert", "update", "delete"]}, "min": {"type": "integer", "minimum": 1},
           "store": {"type": "string", "minLength": 1}, "now": {"type": "boolean"}, "since": _P_SINCE},
          {"kind": "stored", "table": "notes", "where": {"title": "Buy milk"}, "op": "insert"},
          _judge_stored, _describe_stored, required=("table",), aliases={"row": "where", "values": "where"},
          grade=lambda p: "server", role="consequence", live=True, window=True, read=_read_stored),
    _Kind("route",
          "The last route change (or else the current URL) has `pathname` exactly, or `contains` in path+search+hash.",
          {"pathname": {"type": "string"}, "contains": {"type": "string"}, "since": _P_SINCE},
          {"kind": "route", "pathname": "/orders/42"},
          _judge_route, lambda p: "a route %r" % (p.get("pathname") or p.get("contains")),
          aliases={"path": "pathname", "urlContains": "contains", "url": "contains"}, live=True, window=True),
    _Kind("console",
          "Console output at `level` (error includes uncaught errors) containing `contains`; "
          "absent: true demands none.",
          {"level": {"enum": ["error", "warn", "log", "info"]},
           "contains": {"type": "string", "minLength": 1}, "absent": {"type": "boolean"}, "since": _P_SINCE},
          {"kind": "console", "level": "error", "absent": True},
          _judge_console, aliases={"textContains": "contains"}, window=True),
    _Kind("animation",
          "An animation or transition started (or, with completed: true, ended), by `name` and target ref.",
          {"name": {"type": "string"}, "target": {"type": "string"}, "completed": {"type": "boolean"},
           "since": _P_SINCE},
          {"kind": "animation", "name": "fade-in", "completed": True},
          _judge_animation, window=True),
    _Kind("signal",
          "The app called reticle.signal(name, data) with data matching `dataMatches` (shallow; \"*\" = "
          "any value; {$gte,$lte,$gt,$lt,$contains,$length} operators); `count` exact.",
          {"name": {"type": "string"}, "dataMatches": {"type": "object"},
           "count": {"type": "integer", "minimum": 0}, "since": _P_SINCE},
          {"kind": "signal", "name": "order:placed", "dataMatches": {"total": {"$gt": 0}}},
          _judge_signal, lambda p: "signal %r" % p.get("name", "*"), aliases={"data": "dataMatches"},
          grade=lambda p: "signal" if p.get("name") else None, role="consequence", window=True),
    _Kind("state",
          "A registered store's value at the dot `path` exists, or `equals` (value matcher). Live read.",
          {"path": {"type": "string", "minLength": 1}, "store": {"type": "string"}, "equals": {}},
          {"kind": "state", "store": "cart", "path": "items.length", "equals": 0},
          _judge_state, lambda p: "state at %r" % p["path"], required=("path",),
          grade=lambda p: "state", role="consequence", live=True, read=_read_state),
    _Kind("storage",
          "localStorage/sessionStorage/cookie `key` exists, `equals` a value, `contains` a substring, is `absent`, "
          "or (changed: true) was written in the window.",
          {"key": {"type": "string", "minLength": 1}, "area": {"enum": ["local", "session", "cookies"]},
           "equals": {}, "contains": {"type": "string", "minLength": 1}, "absent": {"type": "boolean"},
           "changed": {"type": "boolean"}, "since": _P_SINCE},
          {"kind": "storage", "area": "local", "key": "theme", "equals": "dark"},
          _judge_storage, required=("key",), role="consequence", live=True, window=True, read=_read_storage),
    _Kind("settled",
          "No request in flight and no network or structural DOM activity for `quietMs` (default 500).",
          {"quietMs": {"type": "number", "exclusiveMinimum": 0, "maximum": 30000}},
          {"kind": "settled", "quietMs": 500},
          _judge_settled, lambda p: "the page to go idle"),
    _Kind("allOf",
          "Every predicate in `predicates` holds.",
          {"predicates": {"type": "array", "items": {"type": "object"}, "minItems": 1}},
          {"kind": "allOf", "predicates": [{"kind": "net", "urlContains": "/api/pay", "status": 200},
                                           {"kind": "console", "level": "error", "absent": True}]},
          describe=_describe_combinator, required=("predicates",), aliases={"of": "predicates"}),
    _Kind("anyOf",
          "At least one predicate in `predicates` holds.",
          {"predicates": {"type": "array", "items": {"type": "object"}, "minItems": 1}},
          {"kind": "anyOf", "predicates": [{"kind": "text", "contains": "Saved"}, {"kind": "signal", "name": "saved"}]},
          describe=_describe_combinator, required=("predicates",), aliases={"of": "predicates"}),
    _Kind("not",
          "The `predicate` does not hold (an unreadable child stays unknown).",
          {"predicate": {"type": "object"}},
          {"kind": "not", "predicate": {"kind": "text", "contains": "Error"}},
          describe=_describe_combinator, required=("predicate",), aliases={"of": "predicate"}),
)}


def _describe_predicate(p: dict) -> str:
    return _PREDICATE_KINDS[p["kind"]].describe(p)


def _predicate_digest() -> str:
    """Every kind and its fields on one line, for the verdict tools' descriptions, so a model that
    reads only tools/list can write a predicate."""
    def fields(k: _Kind) -> str:
        names = [f for f in k.properties if f != "since"]
        if k.name == "element":
            names[0] = "query:{role,name,text,label,testid}"
        return "%s{%s}" % (k.name, ",".join(names)) if names else k.name
    return "Predicates {kind,...}: %s. text/name: contains|equals|matches. Grammar: reticle://predicates." % (
        " ".join(fields(k) for k in _PREDICATE_KINDS.values()))


_PREDICATE_DIGEST = _predicate_digest()
# reticle_assert's share of the same list: the kinds, their fields once (in reticle_act_and_wait's
# description, read in the same tools/list), so the list stays inside its budget.
_PREDICATE_KINDS_LINE = ("Predicates {kind,...}, fields as in reticle_act_and_wait: %s. Grammar: reticle://predicates."
                         % " ".join("%s{}" % k for k in _PREDICATE_KINDS))


def _kind_schema(kind: str) -> dict:
    spec = _PREDICATE_KINDS[kind]
    props = {"kind": {"const": kind}}
    props.update(spec.properties)
    return {"type": "object", "properties": props, "additionalProperties": False,
            "required": ["kind"] + spec.required}


def _predicate_grammar_doc() -> dict:
    return {
        "description": "A predicate is an object {kind, ...fields}. Unknown fields are errors. Tolerated: "
                       "`type` for `kind`, the per-kind aliases listed, and element locator fields written "
                       "at the top level (moved into `query`).",
        "kinds": {k: {"doc": v.doc, "schema": _kind_schema(k), "aliases": v.aliases, "example": v.example}
                  for k, v in _PREDICATE_KINDS.items()},
        "elementStates": _ELEMENT_STATES,
    }


_KIND_VALIDATORS: Dict[str, Any] = {}


def _predicate_fail(kind: Optional[str], issues: List[str], where: str) -> "PredicateError":
    if kind in _PREDICATE_KINDS:
        spec = _PREDICATE_KINDS[kind]
        accepts = ["kind"] + list(spec.properties)
        extra = ""
        if kind == "element":
            extra = " query accepts: %s." % ", ".join(_ELEMENT_QUERY["properties"])
        msg = ("that predicate did not parse (kind %r at %s): %s. Nothing ran, so no verdict was produced. "
               "%s accepts: %s.%s A valid %s predicate looks like: %s" % (
                   kind, where, "; ".join(issues[:3]), kind, ", ".join(accepts), extra, kind, _dumps(spec.example)))
        return PredicateError(msg, "fix the predicate and call again", accepts=accepts, example=spec.example,
                              noVerdict=True)
    msg = ("that predicate did not parse at %s: %s. Nothing ran, so no verdict was produced. Use one of the "
           "kinds: %s. For example: %s" % (where, "; ".join(issues[:3]), ", ".join(_PREDICATE_KINDS),
                                          _dumps(_PREDICATE_KINDS["text"].example)))
    return PredicateError(msg, "fix the predicate and call again", kinds=list(_PREDICATE_KINDS), noVerdict=True)


def parse_predicate(raw: Any, where: str = "predicate") -> dict:
    """Tolerant rewrites, then strict validation; returns a normalised copy."""
    if not isinstance(raw, dict):
        raise _predicate_fail(None, ["a predicate must be an object {kind, ...}, not %s" % type(raw).__name__], where)
    p = dict(raw)
    if "kind" not in p and isinstance(p.get("type"), str):
        p["kind"] = p.pop("type")
    kind = p.get("kind")
    if kind is None:
        combos = [k for k in ("allOf", "anyOf", "not") if k in p]
        hint = " (write {\"kind\": \"%s\", ...} rather than {\"%s\": ...})" % (combos[0], combos[0]) if combos else ""
        raise _predicate_fail(None, ["it has no `kind`%s" % hint], where)
    if not isinstance(kind, str) or kind not in _PREDICATE_KINDS:
        raise _predicate_fail(None, ["%r is not a predicate kind" % (kind,)], where)
    spec = _PREDICATE_KINDS[kind]
    for alias, canonical in spec.aliases.items():
        if alias in p:
            value = p.pop(alias)
            p.setdefault(canonical, value)
    if kind == "element":
        flat = {k: p.pop(k) for k in _LOCATOR_FIELDS if k in p}
        if "query" not in p and flat:
            p["query"] = flat
    validator = _KIND_VALIDATORS.get(kind)
    if validator is None:
        validator = _KIND_VALIDATORS[kind] = jsonschema.Draft202012Validator(_kind_schema(kind))
    issues: List[str] = []
    for err in sorted(validator.iter_errors(p), key=lambda e: list(e.absolute_path)):
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            loc = "/".join(str(x) for x in err.absolute_path)
            issues.extend("unknown field %s%s" % ("%s." % loc if loc else "", e) for e in extra)
        elif err.validator == "required":
            issues.append(err.message.replace("is a required property", "is required"))
        else:
            issues.append("%s: %s" % ("/".join(str(x) for x in err.absolute_path) or kind, err.message))
    if not issues:
        issues = spec.check(p)
    if issues:
        raise _predicate_fail(kind, issues, where)
    if kind in ("allOf", "anyOf"):
        p["predicates"] = [parse_predicate(c, "%s.predicates[%d]" % (where, i)) for i, c in enumerate(p["predicates"])]
    elif kind == "not":
        p["predicate"] = parse_predicate(p["predicate"], "%s.predicate" % where)
    elif kind == "element" and isinstance(p.get("state"), str):
        p["state"] = [p["state"]]
    return p
