###############################################################################
# Predicates ##################################################################
###############################################################################
# The grammar is data: the parser, its error messages and the
# reticle://predicates resource all come from _PREDICATE_KINDS.

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

def _leaves(p: dict, under_not: bool = False) -> List[Tuple[dict, bool]]:
    """The leaf predicates of `p`, each with whether a `not` is above it."""
    if p["kind"] in ("allOf", "anyOf"):
        return [leaf for c in p["predicates"] for leaf in _leaves(c, under_not)]
    if p["kind"] == "not":
        return _leaves(p["predicate"], True)
    return [(p, under_not)]


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


_FAILURE_WORDS = re.compile(r"error|fail|invalid|reject|denied|unable|could not|couldn't", re.I)
# what a message the user is shown says when something failed: the words above, and the phrases
# of form validation and refusals ("Enter a valid email address.", "Title can't be blank")
_FAILURE_TEXT = re.compile(
    r"error|fail|invalid|reject|denied|unable|could not|couldn't|can(no|')t be blank|(is|are) required|"
    r"must (be|not|have|contain)|enter a valid|please (correct|enter|fix|try again|provide|select|choose)|"
    r"\bnot (valid|allowed|permitted|saved|found)\b|try again|already (exists|taken|in use|registered)|"
    r"too (short|long|large|many)|forbidden|unauthori[sz]ed|expired|went wrong|nothing was (saved|changed)|"
    r"(was|were)n't saved|did not save|refused|declined", re.I)
_NO_FAILURE = re.compile(r"\b(no|without|0|zero)\s+(errors?|failures?|problems?|issues?)\b", re.I)
_BLAMES_USER = re.compile(r"denied|invalid|unauthor|forbidden|incorrect|wrong |not allowed|not permitted", re.I)


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
        return {"pass": False, "assertion": "net.present", "inconclusive": (
            "%s happened, but the browser does not expose its status (%s), so a predicate on its status "
            "cannot be decided; drop status, or assert what the next page shows" % (
                _call_label(hidden[0]), hidden[0].get("statusNote") or "a document request")), "evidence": hidden[0]}
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
        out["failureReason"] += "; the page tells the user: %s" % ", ".join(repr(t) for t in told[:3])
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


# ---- how each kind describes itself ----


# ---- the server kind: a pure judge over the window's server records (Server truth section) ----

def _server_records(window: List[dict]) -> List[dict]:
    return [e["data"] for e in window if e["type"] == "server.request"]


def _server_label(r: dict) -> str:
    return "%s %s" % (r.get("method") or "?", r.get("path") or "/")


def _writes_text(writes: List[dict]) -> str:
    """" (insert notes ×1 [key 5], update tags ×≥1)": what writes did, for a server line."""
    return " (%s)" % ", ".join(
        "%s %s ×%s%s" % (w["op"], w["table"], "≥1" if w.get("rows") is None else w["rows"],
                         " [key %s]" % ", ".join(str(k) for k in w["keys"][:5]) if w.get("keys") else "")
        for w in writes[:3]) if writes else ""


def _server_line(r: dict) -> str:
    """One request as the server saw it: "POST /profile → 200, view save_profile, 0 writes, no exception"."""
    writes = [w for w in r.get("writes") or [] if w.get("committed")]
    rolled = [w for w in r.get("writes") or [] if w.get("committed") is False]
    unsure = [w for w in r.get("writes") or [] if w.get("committed") is None]
    parts = ["%s → %s" % (_server_label(r), r.get("status"))]
    if r.get("view"):
        parts.append("view %s" % r["view"])
    if r.get("dbTraced") is False:  # spans without database instrumentation: not "0 writes"
        parts.append("writes unknown (no database spans)")
    elif _server_unwatched(r):
        parts.append("writes not watched")
    else:
        parts.append("%d write%s%s%s" % (len(writes), "" if len(writes) == 1 else "s", _writes_text(writes),
                                         " seen (not watched: %s)" % ", ".join(r["unseen"]) if r.get("unseen") else ""))
    if unsure:
        parts.append("%d write%s of unknown commit%s" % (len(unsure), "" if len(unsure) == 1 else "s",
                                                          _writes_text(unsure)))
    if rolled:
        parts.append("%d rolled back" % len(rolled))
    exc = r.get("exception")
    if exc:
        parts.append("raised %s: %s%s%s" % (exc.get("type"), _short(exc.get("message") or "", 80),
                                            " at %s" % exc["frames"][0] if exc.get("frames") else "",
                                            " after its answer, in %s" % exc["after"] if exc.get("after") else ""))
    else:
        parts.append("no exception")
    logged = [e for e in r.get("logged") or [] if not (exc and e.get("exception"))]
    if logged:
        parts.append("logged %s %s: %s" % (logged[0].get("level"), logged[0].get("logger"),
                                           _short(logged[0].get("message") or "", 80)))
    if r.get("source") == "otel":  # where the facts came from (the middleware's records say nothing more)
        parts.append("from OpenTelemetry spans")
    return ", ".join(parts)


def _server_unwatched(r: dict) -> bool:
    """Did nothing watch the database writes of the app that served r (no Django middleware,
    watch_sqlalchemy or watch_sqlite3 in its process)?  Its "0 writes" would be no evidence."""
    return r.get("watched") == []


def _writes_observed(r: dict) -> bool:
    """Are the database writes of the app that served r observed, whatever the source: the middleware
    watched its database (Django's ORM, SQLAlchemy, sqlite3), or the service's OpenTelemetry spans have
    shown database statements (dbTraced)?  Only then is "0 writes" evidence of writing nothing."""
    if r.get("source") == "otel":
        return bool(r.get("dbTraced"))
    return bool(r.get("watched"))


_SERVER_WATCH = ("watch them: Django's ORM through reticle.DjangoMiddleware, SQLAlchemy with "
                 "reticle.watch_sqlalchemy(engine), a raw sqlite3 connection with "
                 "reticle.watch_sqlite3(conn)")


def _server_rows(r: dict, spec: dict, committed: Optional[bool] = True) -> int:
    """Rows the request wrote that match spec {table?, op?}: committed writes only (or, with
    committed False, only those rolled back; None, only those whose commit is unknown); a statement
    that changed 0 rows wrote nothing, and one whose driver gives no row count counts 1."""
    n = 0
    for w in r.get("writes") or []:
        if w.get("committed") is not committed:
            continue
        if spec.get("op") and w.get("op") != spec["op"]:
            continue
        if spec.get("table") and w.get("table", "").lower().split(".")[-1] != spec["table"].lower().split(".")[-1]:
            continue
        if "key" in spec and not _server_keys_hold(w, spec["key"]):
            continue
        n += 1 if w.get("rows") is None else w["rows"]
    return n


def _server_key_set(key: Any) -> set:
    return {str(k) for k in (key if isinstance(key, list) else [key])}


def _server_keys_hold(w: dict, key: Any) -> bool:
    """Did write w name its rows by exactly these primary key values (compared as text: 3 is "3")?"""
    return isinstance(w.get("keys"), list) and _server_key_set(w["keys"]) == _server_key_set(key)


def _server_match(r: dict, p: dict) -> Optional[bool]:
    """Does record r satisfy `server` leaf p, whatever what cannot be seen did?  True or False; None
    when that decides it: a write whose commit is unknown (kept, the leaf holds; rolled back, it does
    not, or the other way round), or a database connection the app may have written through unseen
    (the record's `unseen`) when the leaf counts writes."""
    if not ("writes" in p or "committed" in p):
        return _server_matches(r, p)
    if not _server_matches(r, {k: v for k, v in p.items() if k not in ("writes", "committed")}):
        return False
    writes = r.get("writes") or []
    if any(w.get("committed") is None for w in writes):
        kept = _server_matches(dict(r, writes=[dict(w, committed=True) if w.get("committed") is None else w
                                               for w in writes]), p)
        lost = _server_matches(dict(r, writes=[dict(w, committed=False) if w.get("committed") is None else w
                                               for w in writes]), p)
        if kept != lost:
            return None
    found = _server_matches(r, p)
    if r.get("unseen") and "writes" in p and (not found or "count" in p["writes"]):
        spec = p["writes"]
        if not found and "count" in spec and _server_rows(r, spec, p.get("committed") is not False) > spec["count"]:
            return False   # more than asked was seen: nothing unseen undoes that
        return None
    return found


def _server_matches(r: dict, p: dict) -> bool:
    """Does record r satisfy the `server` leaf p's filters (method, urlContains, status, exception,
    logged, writes, committed)?  A record whose writes nobody watched satisfies no writes filter."""
    if p.get("method") and (r.get("method") or "").upper() != p["method"].upper():
        return False
    if p.get("urlContains") and p["urlContains"] not in (r.get("path") or ""):
        return False
    if "status" in p and r.get("status") != p["status"]:
        return False
    if "exception" in p and bool(r.get("exception")) != p["exception"]:
        return False
    if "logged" in p and bool(r.get("logged")) != p["logged"]:
        return False
    if ("writes" in p or "committed" in p) and _server_unwatched(r):
        return False    # what an unwatched app wrote is not known (see _judge_server)
    if "writes" in p:
        spec = p["writes"]
        n = _server_rows(r, spec, p.get("committed") is not False)
        if "count" in spec and n != spec["count"]:
            return False
        if "count" not in spec and n < spec.get("min", 1):
            return False
    elif "committed" in p:
        if p["committed"] and not _server_rows(r, {}, True):
            return False
        if not p["committed"] and not _server_rows(r, {}, False):
            return False
    return True


def _server_unreported(now: float, window: List[dict],
                       grace_ms: Optional[float] = None) -> Tuple[List[dict], List[dict]]:
    """The tab's marked requests in the window that no server record answers yet, as (awaiting,
    unreported): awaiting = still open, or answered less than grace_ms (SERVER_GRACE_MS; OTEL_GRACE_MS
    for a tab whose records come from batched spans) ago (the record may be on its way); unreported =
    answered longer ago than that.  A record answers the request the SDK put its mark on
    (net.pending's serverMark: the id the daemon issued with the mark).  A request a fault answered or
    aborted (reticle_fault, verify --teeth; not one it only delayed) never reached the server: no
    record is owed for it."""
    grace = SERVER_GRACE_MS if grace_ms is None else grace_ms
    reported = {(r.get("documentId"), r.get("requestId")) for r in _server_records(window)}
    done = {}
    faulted = set()
    for e in window:
        if e["type"] == "net.request" and e["data"].get("requestId"):
            done[str(e["data"]["requestId"])] = e["t"]
            if e["data"].get("faultAnswered"):
                faulted.add(str(e["data"]["requestId"]))
    awaiting: List[dict] = []
    unreported: List[dict] = []
    for e in window:
        d = e["data"]
        if e["type"] != "net.pending" or not d.get("serverMarked") or not d.get("requestId"):
            continue
        if (e.get("doc"), str(d.get("serverMark"))) in reported or str(d["requestId"]) in faulted:
            continue
        t = done.get(str(d["requestId"]))
        (awaiting if t is None or now - t < grace else unreported).append(d)
    return awaiting, unreported


def _server_cookie_only(unreported: List[dict], known: "_Known") -> str:
    """Why a navigation's record may never come once spans feed this daemon, or "": with
    the script tag a form post or link carries its mark only in a cookie (no page can set a
    navigation's headers), and OpenTelemetry reads trace context from headers alone."""
    doc = next((d for d in unreported if d.get("initiator") == "document" and d.get("serverMark")), None)
    if doc is None or known.server_grace <= SERVER_GRACE_MS:
        return ""
    return ("%s is a navigation: with the script tag its mark reaches the server only in a cookie, which "
            "OpenTelemetry does not read (no page can set a navigation's headers), so its spans cannot be "
            "attributed to this tab; open the page as a device (reticle_open), which adds the navigation's "
            "trace context" % _call_label(doc))


def _describe_server(p: dict) -> str:
    bits = ["server %s%s" % (p.get("method", "").upper() + " " if p.get("method") else "",
                             p.get("urlContains") or "request")]
    if "status" in p:
        bits.append("→ %d" % p["status"])
    if "exception" in p:
        bits.append("raising" if p["exception"] else "without an exception")
    if "logged" in p:
        bits.append("logging an error" if p["logged"] else "logging no error")
    if "writes" in p:
        w = p["writes"]
        n = "%d" % w["count"] if "count" in w else "at least %d" % w.get("min", 1)
        bits.append("writing %s row(s)%s%s%s" % (n, " by %s" % w["op"] if w.get("op") else "",
                                                 " to %s" % w["table"] if w.get("table") else "",
                                                 " keyed %s" % ", ".join(sorted(_server_key_set(w["key"])))
                                                 if "key" in w else ""))
    if "committed" in p:
        bits.append("committed" if p["committed"] else "rolled back")
    return " ".join(bits)


_SERVER_INSTALL = (
    "add Reticle's server middleware: Django: MIDDLEWARE += [\"reticle.DjangoMiddleware\"] (under DEBUG); "
    "Flask/any WSGI app: app.wsgi_app = reticle.wsgi(app.wsgi_app); FastAPI/Starlette/any ASGI app: "
    "app = reticle.asgi(app); SQLAlchemy writes: reticle.watch_sqlalchemy(engine); raw sqlite3 writes: "
    "reticle.watch_sqlite3(conn); "
    "`reticle init` adds or prints it; any other stack: its OpenTelemetry exporter pointed at the daemon "
    "(`reticle init` prints how)")


def _server_blind(p: dict, records: List[dict]) -> Optional[dict]:
    """A `writes` or `committed` leaf over records that cannot say what was written, known as soon as
    the record is there (decided: no later event changes it): a service without database spans, an
    app whose database nothing watches, a write whose rows have no primary key to compare."""
    traced = [r for r in records if r.get("dbTraced") is False and _server_matches(
        r, {k: p[k] for k in ("method", "urlContains", "status") if k in p})]
    if traced and ("writes" in p or "committed" in p):
        return {"pass": False, "assertion": "server.writes-unknown", "decided": True, "decidedBy": "unknowable",
                "inconclusive": "the OpenTelemetry spans of %s carry no database statement, and that service has "
                                "sent no database span yet: without database instrumentation its writes are "
                                "unknown, not 0 (add the instrumentation of its database client)"
                                % _server_label(traced[0])}
    blind = [r for r in records if _server_unwatched(r) and ("writes" in p or "committed" in p) and _server_matches(
        r, {k: v for k, v in p.items() if k not in ("writes", "committed", "count")})]
    if blind:
        return {"pass": False, "assertion": "server.unwatched", "decided": True, "decidedBy": "unknowable",
                "inconclusive": "the server answered %s → %s, but nothing watches the app's database writes, so "
                                "what it wrote cannot be known; %s" % (_server_label(blind[0]), blind[0].get("status"),
                                                                       _SERVER_WATCH)}
    keyless = [w for r in records if "key" in p.get("writes", {}) and _server_matches(
        r, dict(p, writes={k: v for k, v in p["writes"].items() if k not in ("key", "count", "min")}))
        for w in r.get("writes") or [] if w.get("committed") and w.get("keys") is None
        and w["op"] == p["writes"].get("op", w["op"])]
    if keyless:
        return {"pass": False, "assertion": "server.keys", "decided": True, "decidedBy": "unknowable", "inconclusive": (
            "the server's %s of %s does not name its rows by primary key (%s), so which rows it wrote cannot "
            "be known; assert the rows read back instead" % (keyless[0]["op"], keyless[0]["table"],
                                                             keyless[0].get("sql") or "its SQL was not recorded"))}
    return None


def _judge_server(p: dict, obs: _Observation) -> dict:
    """What the server did for the tab's requests (the app's middleware reports them).  Rules, in
    order: a count that is exceeded fails at once; a match passes (a count once no marked request is
    still awaited); a marked request whose record may still arrive keeps it open; no record ever for
    this tab means the middleware is absent (unknown, saying how to install it); a marked request
    never reported makes a miss unknown; else it fails, decided once every request is answered."""
    window = obs.events(p)
    records = _server_records(window)
    states = [(r, _server_match(r, p)) for r in records]
    matched = [r for r, state in states if state]
    unsure = [r for r, state in states if state is None]
    awaiting, unreported = _server_unreported(obs.now, window, obs.known.server_grace)
    expected = _describe_server(p)
    if "count" in p and len(matched) > p["count"]:
        return {"pass": False, "assertion": "server.count", "expected": "%d × %s" % (p["count"], expected),
                "observed": [_server_line(r) for r in matched[:8]], "decided": True, "decidedBy": "count-exceeded",
                "failureReason": "expected exactly %d matching server request(s), saw %d" % (p["count"], len(matched))}
    if matched and ("count" not in p or (len(matched) == p["count"] and not awaiting and not unsure)):
        return {"pass": True, "assertion": "server.present",
                "evidence": {"server": [_server_line(r) for r in matched[:5]]}}
    if awaiting:
        return {"pass": False, "assertion": "server.awaiting", "retryAfterMs": obs.known.server_grace,
                "inconclusive": "the server's record of %s has not arrived yet" % _call_label(awaiting[0])}
    cookie_only = _server_cookie_only(unreported, obs.known)
    # known before the timeout: a navigation's record can never come through spans with the script tag, nor
    # a request's from a service whose spans land in no tab (a record that is only late may still come: waits)
    hint = obs.known.server_hint
    final = {"decided": True, "decidedBy": "unknowable"} if (cookie_only or (hint and unreported)) \
        and not obs.open else {}
    if not obs.known.server_seen:
        return dict(final, **{"pass": False, "assertion": "server.absent", "inconclusive": (
            "no server record ever arrived for this tab, so what the server did cannot be known; %s"
            % (cookie_only or hint or _SERVER_INSTALL))})
    if unreported:
        hint = ("; it carried the app's own traceparent, so its OpenTelemetry spans are under a trace id the "
                "daemon did not issue and cannot be attributed to this tab" if unreported[0].get("ownTrace")
                else "; " + cookie_only if cookie_only else "")
        known_now = not obs.open and (hint or not unreported[0].get("serverMark"))  # nothing could still bring it
        return {"pass": False, "assertion": "server.unreported", "inconclusive": (
            "%s was marked for the server, but no record of it arrived (the middleware does not cover that "
            "route, or dropped it while the daemon was away, or the browser said another page sent it)%s"
            % (_call_label(unreported[0]), hint) if unreported[0].get("serverMark") else
            "%s went to the server without a mark (the tab had none left from the daemon), so what the "
            "server did for it cannot be known" % _call_label(unreported[0])),
            **({"decided": True, "decidedBy": "unknowable"} if known_now else {})}
    blind = _server_blind(p, records)
    if blind is not None:
        return blind
    if unsure:
        return {"pass": False, "assertion": "server.unseen", "decided": True, "decidedBy": "unknowable",
                "inconclusive": _server_unsure_why(unsure[0], p)}
    observed = [_server_line(r) for r in records[-8:]]
    near = [e["t"] for e in window if e["type"] == "server.request"
            and _server_matches(e["data"], {k: p[k] for k in ("method", "urlContains") if k in p})]
    made = _server_made(window, p)
    if made and not near:
        # the tab made that request (a redirect's document request included) and its record has not landed:
        # only a record that arrived and differs, or a request never made, is a `no`; this one may still come
        return {"pass": False, "assertion": "server.awaiting", "retryAfterMs": obs.known.server_grace,
                "expected": expected, "observed": observed or "no server request in this window",
                "inconclusive": "the tab made %s, but the server's record of it never arrived (the middleware or "
                                "the spans do not cover that route, or the record is still on its way)%s"
                                % (made, "; the server did: %s" % "; ".join(observed[-3:]) if observed else "")}
    out = {"pass": False, "assertion": "server.count" if "count" in p else "server.present", "expected": expected,
           "observed": observed or "no server request in this window",
           "failureReason": "no server request matched %s%s" % (
               expected, "; the server did: %s" % "; ".join(observed[-3:]) if observed else "")}
    if near and not obs.open_since(window[0]["t"] if window else 0):
        # the request happened and the server did otherwise: final once a follow-up request had its chance
        age = obs.now - near[-1]
        if age >= RETRY_GRACE_MS:
            out.update(decided=True, decidedBy="answered-otherwise")
        else:
            out["retryAfterMs"] = round(RETRY_GRACE_MS - age)
    return out


def _server_made(window: List[dict], p: dict) -> str:
    """The label of a request the tab made in the window that `server` leaf p's method and urlContains name,
    or "": a fetch, XHR or document it reported, and the request a redirect made (a document or fetch that
    arrived at another URL: after a 301, 302 or 303 the browser follows a POST with a GET, after a 307 or
    308 with the same method, and which one it was the page cannot tell)."""
    want = (p.get("method") or "").upper()
    for e in window:
        if e["type"] not in ("net.request", "net.pending"):
            continue
        d = e["data"]
        tried = [((d.get("method") or "").upper(), {(d.get("method") or "").upper()}, d.get("url"))]
        if d.get("redirected") and d.get("finalUrl"):
            tried.append(("GET", {"GET", (d.get("method") or "").upper()}, d.get("finalUrl")))
        for label, methods, url in tried:
            if not isinstance(url, str) or (want and want not in methods):
                continue
            parts = urllib.parse.urlsplit(url)
            path = parts.path + ("?" + parts.query if parts.query else "")
            if not p.get("urlContains") or p["urlContains"] in path:
                return "%s %s" % (want or label, path)
    return ""


def _server_unsure_why(r: dict, p: dict) -> str:
    """Why record r can neither satisfy nor fail `server` leaf p (see _server_match)."""
    unsure = [w for w in r.get("writes") or [] if w.get("committed") is None]
    if unsure:
        return ("the server answered %s → %s and ran %s %s, but its OpenTelemetry spans show no BEGIN or COMMIT, "
                "so whether that write was kept or rolled back cannot be known; %s" % (
                    _server_label(r), r.get("status"), unsure[0]["op"], unsure[0]["table"], _commit_advice(r)))
    return ("the server answered %s → %s, but the app may also write through %s, which nothing watches, so what it "
            "wrote cannot be known from what was seen (%s)" % (_server_label(r), r.get("status"),
                                                               ", ".join(r.get("unseen") or []), _server_line(r)))


def _commit_advice(r: dict) -> str:
    """How to make a write's commit known, for the stack that served r."""
    if any(s.startswith("opentelemetry.instrumentation.") for s in r.get("dbScopes") or ()):  # Python's names
        return ("Reticle's Python middleware sees commits (reticle.wsgi, reticle.asgi or reticle.DjangoMiddleware, "
                "beside the tracing or instead of it)")
    return ("Reticle's Python middleware sees commits in a Python app (reticle.wsgi, reticle.asgi, "
            "reticle.DjangoMiddleware); in another stack, trace the transaction statements (a driver "
            "instrumentation that records BEGIN and COMMIT, such as pg's or mysql2's)")


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


class PredicateError(ToolError):
    """A predicate that does not parse: no verdict is produced."""

    code = "predicate_invalid"


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


# ---- Judge: a predicate over an observation, its combinators walked in one place ----

def _judge(p: dict, obs: _Observation) -> dict:
    """Judge `p` over `obs`: a leaf by its kind's pure `judge` (inconclusive when its live read
    failed); allOf, anyOf and not walk their children, and a child that could not be read keeps
    the whole inconclusive."""
    kind = p["kind"]
    if kind == "not":
        child = _judge(p["predicate"], obs)
        if child.get("inconclusive"):
            return {"pass": False, "inconclusive": child["inconclusive"], "evidence": {"saw": child},
                    **_unknowable(child)}
        if child["pass"]:
            settled_for_good = all(_PREDICATE_KINDS[leaf["kind"]].window and not neg and not leaf.get("absent")
                                   for leaf, neg in _leaves(p["predicate"]))
            return {"pass": False,
                    "failureReason": "the negated predicate held: %s" % _describe_predicate(p["predicate"]),
                    "assertion": "not", "decided": settled_for_good,
                    "decidedBy": "absence-violated" if settled_for_good else None,
                    "evidence": {"negated": p["predicate"], "held": True, "saw": child}}
        return {"pass": True, "evidence": {"negated": p["predicate"], "held": False, "saw": child}}
    if kind in ("allOf", "anyOf"):
        children = [_judge(c, obs) for c in p["predicates"]]
        if kind == "allOf":
            failed = [c for c in children if not c["pass"] and not c.get("inconclusive")]
            if failed:
                final = [c for c in failed if c.get("decided")]
                return {"pass": False, "failureReason": (final or failed)[0].get("failureReason"), "assertion": "allOf",
                        "decided": bool(final), "decidedBy": final[0].get("decidedBy") if final else None,
                        "evidence": children}
            unread = [c for c in children if c.get("inconclusive")]
            if unread:  # one that can never be known keeps the whole from ever holding
                final = [c for c in unread if c.get("decided")]
                return {"pass": False, "inconclusive": (final or unread)[0]["inconclusive"], "evidence": children,
                        **_unknowable(final[0] if final else {})}
            return {"pass": True, "evidence": [c.get("evidence") for c in children]}
        for c in children:
            if c["pass"]:
                return {"pass": True, "evidence": c.get("evidence")}
        unread = [c for c in children if c.get("inconclusive")]
        if unread:  # decided only once no child can still hold
            return {"pass": False, "inconclusive": unread[0]["inconclusive"], "evidence": children,
                    **_unknowable(unread[0] if all(c.get("decided") for c in children) else {})}
        return {"pass": False, "failureReason": "no predicate of anyOf held", "assertion": "anyOf",
                "evidence": children}
    read = obs.live.get(_leaf_key(p))
    if isinstance(read, _ReadFailed):
        return {"pass": False, "inconclusive": "the page could not answer: %s" % read.why}
    judge = _PREDICATE_KINDS[kind].judge
    assert judge is not None
    return judge(p, obs)


def _unknowable(res: dict) -> dict:
    """The decided marks of a result that can never be known (a judge said so: decidedBy unknowable)."""
    return {"decided": True, "decidedBy": res.get("decidedBy")} if res.get("decided") else {}


def _holds_count(p: dict) -> bool:
    """A `net` leaf pins a count: a pass is confirmed after a short wait (another may follow)."""
    return any(leaf["kind"] == "net" and "count" in leaf for leaf, _ in _leaves(p))


def _judge_final(p: dict, obs: _Observation) -> dict:
    """The result a verdict is given on: the tab lost, or `p` judged over `obs`; a failure that
    decided early says so, and when the wait ran out a result that did not hold (or a count never
    confirmed) says it timed out."""
    if obs.lost:
        return {"pass": False, "observationLost": True, "failureReason": obs.lost + " during the observation"}
    res = _judge(p, obs)
    if obs.failure_decided and not res["pass"] and not res.get("inconclusive"):
        res.update(decided=True, decidedBy="failure-shown", failureReason="%s; %s, and the act's work is done" % (
            res.get("failureReason") or "the predicate did not hold", obs.failure_decided))
        return res
    if obs.timed_out is None or (res["pass"] and not _holds_count(p)):
        return res
    res["pass"] = False
    if not res.get("failureReason"):
        res["failureReason"] = "timed out after %d ms waiting for %s" % (obs.timed_out, _describe_predicate(p))
    res["timedOut"] = True
    return res


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
    shown = [d for d in _error_ui(window) + _answer_failure_text(window) if not _expects_error(p, d)]
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
    return ("the tab closed or crashed" if session.handler is None else
            "the tab left its page and its next document did not connect in time")


async def _await_server_records(session: "_BrowserSession", since: float, budget_end: float) -> bool:
    """With the app's middleware in use (a record arrived for this tab, or spans reach this daemon),
    wait for the record of each marked request the act made, up to SERVER_WAIT_CAP_MS past its
    answer (work the framework runs for a request after answering it, such as a background task,
    ends before its record is sent; an exporter batches its spans), and never past `budget_end` on
    the daemon's clock.  True when any arrived."""
    if not session.server_seen and session.server_grace() == SERVER_GRACE_MS:
        return False
    before = session.server_seen
    while session.now() < budget_end:
        awaiting, _ = _server_unreported(session.now(), session.window(since), max(SERVER_WAIT_CAP_MS,
                                                                                  session.server_grace()))
        if not awaiting:
            break
        await session.wait_change(min(50.0, budget_end - session.now()) / 1000.0)
    return session.server_seen != before


def _server_missing(window: List[dict], known: "_Known") -> Tuple[str, ...]:
    """The act's marked requests that answered and have no server record (see _await_server_records),
    but for what the page sends on its own."""
    awaiting, unreported = _server_unreported(0.0, window, 0.0)
    answered = {str(e["data"].get("requestId")) for e in window if e["type"] == "net.request"}
    return tuple(_call_label(d) for d in awaiting + unreported if str(d.get("requestId")) in answered
                 and _call_label(d) not in known.polled)[:5]


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
    session.expire_arrival()  # a new document overdue is said in the window before the tab is asked about
    if timeout_ms > 0:
        obs = await _wait_for_predicate(session, p, floor, timeout_ms, after_act, effect,
                                        act_at if act_at is not None else floor if after_act else None)
    elif session.between_documents() and not await session.next_document(NAV_WAIT_S):
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
        session.expire_arrival()
        if session.between_documents() and not await session.next_document(max(deadline - session.now(), 500) / 1000):
            return _Observation(session.window(floor), session.known(floor), now=session.now(), since=floor,
                                url=session.url, after_act=after_act, effect=effect, lost=_lost_why(session))
        obs = await _observe_now(session, p, floor, after_act, effect=effect)
        res = _judge(p, obs)
        if res.get("inconclusive"):
            session.expire_arrival()
            if session.between_documents():
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
