"""Judge.

Judge: a predicate evaluated against an observation, the contradictions that overrule a pass, and
the verdict rules, in order, that turn both into yes, no or unknown.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

from .causes import _caused_by_act, _had_effect, _lost_evidence, _no_effect, _periodic, _unread_write
from .constants import DEVICE_LOST_NOTE, HORIZON_CAP_MS, SERVER_WAIT_CAP_MS, STRANDED_NOTE
from .conventions import (_ABSENCE_BLIND_SPOTS, _BLAMES_USER, _FAILURE_WORDS, _answer_failure_text, _answer_text,
    _error_ui, _is_failure_ui, _ui_label)
from .events import (_UI_EVENTS, _WRITE_METHODS, _call_failed, _call_label, _call_matches, _calls, _frames, _is_dev,
    _is_write, _still_open)
from .frames import _answered
from .observation import _Observation, _ReadFailed, _leaf_key, _leaves
from .predicates import TOLD_NOTE, _PREDICATE_KINDS, _describe_predicate, _frame_body, _frame_label, _frame_value
from .server_judge import (_ID_SEGMENT, _act_server_records, _c_server_exception, _c_server_logged,
    _c_server_rolled_back, _c_server_wrong_row, _commit_advice, _names_table, _server_contradictions, _server_label,
    _server_line, _server_matches, _server_records, _server_rows, _writes_observed, _writes_text)
from .store_judge import (_store_created_nothing, _store_kept_for, _store_silence, _store_summary,
    _store_wrong_rows)
from .tab import _Known
from .util import _dumps, _origin_of, _short
from .wire import _partial_failure, _queued, _wire_meaning


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
        return {"pass": False, "inconclusive": "%s could not answer: %s" % (
            "the store" if kind == "stored" else "the page", read.why)}
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


def _expects_error(p: dict, d: dict) -> bool:
    """The predicate itself asks for this message (a text or element leaf that names it)."""
    text = str(d.get("text", "")).lower()
    for leaf, neg in _leaves(p):
        if neg or leaf.get("absent"):
            continue
        if leaf["kind"] == "text" and leaf.get("contains") and str(leaf["contains"]).lower() in text:
            return True
        if leaf["kind"] == "text" and leaf.get("equals") and " ".join(str(leaf["equals"]).lower().split()) == \
                " ".join(text.split()):
            return True
        if leaf["kind"] == "text" and leaf.get("matches") and re.search(leaf["matches"], str(d.get("text", ""))):
            return True
        if leaf["kind"] == "element":
            q = leaf.get("query", {})
            if q.get("role") in ("alert", "alertdialog") or q.get("value") in ("alert", "alertdialog"):
                return True
            if any(str(q.get(k, "")).lower() in text for k in ("text", "name") if q.get(k)):
                return True
    return False


def _message_failures(window: List[dict]) -> List[dict]:
    """Socket, EventSource and stream messages received in the window that report a failure
    (`"success": false`, an `error` field, a socket.io `["error", ...]` event), on a channel the
    window's own work used: a socket the page sent on, a stream or EventSource after a write or
    a stream request that started in the window.  A background socket's chatter is not the act's."""
    frames = _frames(window)
    spoke = {d.get("url") for d in frames if d.get("direction") == "out"}
    started = {str(e["data"].get("requestId")) for e in window if e["type"] == "net.pending"}
    wrote = any(e["type"] in ("net.request", "net.pending") and _is_write(e["data"]) for e in window)
    out = []
    for d in frames:
        text = d.get("data")
        if d.get("direction") != "in" or not isinstance(text, str):
            continue
        ours = d.get("url") in spoke or (d.get("transport") != "ws" and (wrote or str(d.get("requestId")) in started))
        if not ours:
            continue
        body = _frame_body(text)
        problem = _partial_failure(body)
        if problem is None and body.startswith("["):
            value = _frame_value(body, "0")
            if isinstance(value, str) and _FAILURE_WORDS.search(value):
                problem = "the message is a %r event" % value
        if problem:
            out.append(dict(d, problem=problem))
    return out


_NETWORK_ERROR_WORDS = re.compile(r"failed to fetch|networkerror|network error|load failed|net::err_|"
                                  r"failed to load resource|send failed|sendbeacon|beacon", re.I)


def _foreign_failures(window: List[dict], origin: str) -> Tuple[List[dict], List[dict]]:
    """(calls, console events) of a failed send to another origin (analytics, a CDN): calls to an origin
    that is not the page's that failed, and the console errors that are about them: logged while the page
    handled that call's failure (the SDK's `during`: between its rejection and the next task, whatever
    the wording), naming its URL or origin, or worded as a network failure while every failed call of
    the window went elsewhere.  Not the act's failure: the verdict names them beside it."""
    if not origin:
        return [], []
    calls = [d for d in _calls(window) if not _is_dev(d)]
    failed = [d for d in calls if _call_failed(d)]
    foreign = [d for d in failed if _origin_of(d.get("url")) not in ("", origin)]
    # only beside the app's own work that succeeded: an app whose API lives on another origin has its
    # failures there, and they stay the act's
    own = [d for d in calls if _origin_of(d.get("url")) in ("", origin) and d.get("initiator") != "document"]
    if not foreign or not own or any(_call_failed(d) for d in own):
        return [], []
    only_foreign = len(foreign) == len(failed)
    places = {_origin_of(d.get("url")) for d in foreign} | {str(d.get("url")) for d in foreign}
    handled = {str(d.get("requestId") or d.get("id")) for d in foreign}
    said = []
    for e in window:
        if e["type"] not in ("console.error", "error.uncaught"):
            continue
        text = str(e["data"].get("text") or e["data"].get("message") or "")
        if any(p and p in text for p in places) or (only_foreign and _NETWORK_ERROR_WORDS.search(text)) \
                or (e["data"].get("during") is not None and str(e["data"]["during"]) in handled):
            said.append(e)
    return foreign, said


def _failures_shown(window: List[dict], origin: str = "", answers: Optional[List[dict]] = None) -> List[str]:
    """What went wrong in plain sight: an error shown to the user (one the act's `answers` carried onto the
    page included, see _error_ui), a console error or uncaught exception, a write that failed.  Each in a short
    phrase, most telling first.  A failed send to another origin than the page's (`origin`) and the console
    errors about it are not among them (_foreign_failures)."""
    foreign, foreign_said = _foreign_failures(window, origin)
    out = ["the page showed %s" % _ui_label(d) for d in _error_ui(window, answers)]
    out += ["%s said %s" % (_frame_label(d), d["problem"]) for d in _message_failures(window)]
    excused = {id(e) for e in foreign_said}
    for e in window:
        if id(e) in excused:
            continue
        if e["type"] in ("console.error", "error.uncaught"):
            d = e["data"]
            out.append("%s: %s%s" % ("an uncaught error" if e["type"] == "error.uncaught" else "console.error",
                                     _short(str(d.get("text") or d.get("message") or ""), 120),
                                     " (at %s)" % d["at"] if d.get("at") else ""))
    out += ["%s%s" % (_answered(d), " (%s)" % d["statusNote"] if d.get("httpStatus") and d.get("statusNote") else "")
            for d in _calls(window) if (_is_write(d) or d.get("httpStatus")) and _call_failed(d) and not _is_dev(d)
            and not any(d is f for f in foreign)]
    out += [c["counter"] for c in _server_contradictions(window, {"kind": "settled"})]
    return out


def _failed_calls(window: List[dict], p: dict, known: Optional["_Known"] = None) -> List[dict]:
    """The window's failed calls (dev tooling aside) that were not retried with success later in it
    and that the predicate itself does not ask for (a `net` leaf with `ok: false` or a 4xx/5xx), nor a
    failed send to another origin beside the app's own work that succeeded (_foreign_failures)."""
    foreign = _foreign_failures(window, known.origin)[0] if known is not None else []
    calls = [d for d in _calls(window) if not _is_dev(d) and not any(d is f for f in foreign)]
    expected_failures = [leaf for leaf, neg in _leaves(p) if leaf["kind"] in ("net", "server") and not neg
                         and (leaf.get("ok") is False or (leaf.get("status") or 0) >= 400)]
    recovered = {i for i, d in enumerate(calls) if _call_failed(d) and any(
        not _call_failed(later) and _call_label(later) == _call_label(d) for later in calls[i + 1:])}
    return [d for i, d in enumerate(calls) if _call_failed(d) and i not in recovered
            and not any(_call_matches(d, leaf) for leaf in expected_failures)]


def _failure_acknowledged(window: List[dict]) -> bool:
    """The page owned up to a failure: an error shown, a signal or a state change in failure words."""
    return bool(_error_ui(window)) or any(
        e["type"] == "signal" and _FAILURE_WORDS.search(str(e["data"].get("name", ""))) for e in window) or any(
        e["type"] == "state.change" and _FAILURE_WORDS.search(_dumps(e.get("data"))[:2000]) for e in window)


def _happy_signals(window: List[dict]) -> List[dict]:
    return [e["data"] for e in window if e["type"] == "signal"
            and not _FAILURE_WORDS.search(str(e["data"].get("name", "")))]


# ---- contradictions: evidence that a green outcome is false, one record each (_CONTRADICTIONS) ----

def _c_store_wrong_row(window: List[dict], p: dict, action_since: Optional[float],
                       known: Optional["_Known"]) -> List[dict]:
    return _store_wrong_rows(window, p, action_since, known)


def _c_store_created_nothing(window: List[dict], p: dict, action_since: Optional[float],
                             known: Optional["_Known"]) -> List[dict]:
    return _store_created_nothing(window, p, action_since, known)


def _c_error_shown(window: List[dict], p: dict, action_since: Optional[float], known: Optional["_Known"]) -> List[dict]:
    answers = _act_answers(window, action_since, known) if action_since is not None else None
    unexpected = [d for d in _error_ui(window, answers) if not _expects_error(p, d)]
    return [{"claim": "%s held" % _describe_predicate(p), "counter": "the page showed %s" % _ui_label(unexpected[0]),
             "detail": "the user was told something failed"}] if unexpected else []


def _c_message_failure(window: List[dict], p: dict, action_since: Optional[float],
                       known: Optional["_Known"]) -> List[dict]:
    if any(leaf["kind"] == "frame" and not neg for leaf, neg in _leaves(p)):
        return []  # the predicate reads the messages itself
    reported = _message_failures(window)
    return [{"claim": "%s held" % _describe_predicate(p),
             "counter": "%s said %s" % (_frame_label(reported[0]), reported[0]["problem"]),
             "detail": "the server reported a failure over a socket or stream"}] if reported else []


def _c_signal_contradicted(window: List[dict], p: dict, action_since: Optional[float],
                           known: Optional["_Known"]) -> List[dict]:
    failed = _failed_calls(window, p, known)
    happy = _happy_signals(window)
    if not failed or not happy or _failure_acknowledged(window):
        return []
    return [{"claim": "the app signalled %r" % happy[0].get("name"),
             "counter": _answered(failed[0]),
             "detail": "a request failed while the app reported success"}]


def _c_ui_advanced_failed(window: List[dict], p: dict, action_since: Optional[float],
                          known: Optional["_Known"]) -> List[dict]:
    failed = _failed_calls(window, p, known)
    if not failed or _happy_signals(window) or _failure_acknowledged(window) \
            or not any(e["type"] in _UI_EVENTS for e in window):
        return []
    d = failed[0]
    return [{"claim": "the UI moved on as if it worked",
             "counter": _answered(d),
             "detail": "a failed request under a UI that advanced and showed no error"}]


def _c_partial_failure(window: List[dict], p: dict, action_since: Optional[float],
                       known: Optional["_Known"]) -> List[dict]:
    out = []
    for d in _calls(window):
        if _is_dev(d) or _call_failed(d) or not isinstance(d.get("status"), int) or not 200 <= d["status"] < 300:
            continue
        problem = _partial_failure(d.get("responseBody"))
        wire = _wire_meaning(d) if problem is None else None
        if wire and wire[0] == "failure":
            problem = wire[1]
        if problem:
            out.append({"claim": _answered(d), "counter": problem,
                        "detail": "a 2xx response whose body reports failure"})
    return out


def _c_misattributed(window: List[dict], p: dict, action_since: Optional[float],
                     known: Optional["_Known"]) -> List[dict]:
    blame = [e["data"].get("name") for e in window if e["type"] == "signal"
             and _BLAMES_USER.search(str(e["data"].get("name", "")))]
    blame += [e["data"].get("path") for e in window if e["type"] == "state.change"
              and _BLAMES_USER.search(_dumps(e["data"].get("to"))[:2000])]
    server_errors = [d for d in _calls(window) if not _is_dev(d) and isinstance(d.get("status"), int)
                     and d["status"] >= 500]
    if not server_errors or not blame:
        return []
    d = server_errors[0]
    return [{"claim": "the app blamed the user (%s)" % _short(blame[0], 60),
             "counter": "%s, a server error" % _answered(d),
             "detail": "a server failure shown to the user as their mistake"}]


def _c_duplicate(window: List[dict], p: dict, action_since: Optional[float], known: Optional["_Known"]) -> List[dict]:
    if action_since is None or any(leaf.get("count") is not None for leaf, _ in _leaves(p) if leaf["kind"] == "net"):
        return []
    writes: Dict[Tuple[str, str], List[float]] = {}
    for e in window:
        if e["type"] == "net.request" and e["t"] >= action_since and _is_write(e["data"]) \
                and not _call_failed(e["data"]) and not _is_dev(e["data"]) \
                and _caused_by_act(e, action_since, known):
            key = (_call_label(e["data"]), _dumps(e["data"].get("requestBody")))
            writes.setdefault(key, []).append(e["t"])
    return [{"claim": "one action", "counter": "%s completed %d times with the same body" % (label, len(times)),
             "detail": "the same write ran more than once for one action; pin it with a net predicate and count: 1"}
            for (label, _), times in writes.items() if len(times) >= 2 and not _periodic(times)]


def _c_never_settled(window: List[dict], p: dict, action_since: Optional[float],
                     known: Optional["_Known"]) -> List[dict]:
    if not any(e["type"] in _UI_EVENTS for e in window):
        return []
    background = known.background if known is not None else ()
    return [{"claim": "the UI advanced", "counter": "%s never answered" % _call_label(d),
             "detail": "the outcome of this request is unknown", "write": _is_write(d)}
            for d in [d for d in _still_open(window).values() if _call_label(d) not in background][:3]]


class _Contradiction:
    """One way the channels can disagree with a passing predicate: its name, its tier
    ("observed": it makes a verdict `no`; "absence": `unknown`) and its pure detector
    (window, predicate, the act's cursor or None, what the session knows) -> findings."""

    __slots__ = ("kind", "tier", "detect")

    def __init__(self, kind: str, tier: str, detect: Callable[..., List[dict]]) -> None:
        self.kind = kind
        self.tier = tier
        self.detect = detect


_CONTRADICTIONS: Tuple[_Contradiction, ...] = (
    _Contradiction("server-exception", "observed", _c_server_exception),    # Server truth: the most specific
    _Contradiction("server-logged-error", "observed", _c_server_logged),
    _Contradiction("server-rolled-back", "observed", _c_server_rolled_back),
    _Contradiction("server-wrong-row", "observed", _c_server_wrong_row),
    _Contradiction("store-wrong-row", "observed", _c_store_wrong_row),   # Storage truth
    _Contradiction("store-created-nothing", "observed", _c_store_created_nothing),
    _Contradiction("error-shown", "observed", _c_error_shown),
    _Contradiction("message-reported-failure", "observed", _c_message_failure),
    _Contradiction("signal-contradicted", "observed", _c_signal_contradicted),
    _Contradiction("ui-advanced-request-failed", "observed", _c_ui_advanced_failed),
    _Contradiction("partial-failure-in-ok-response", "observed", _c_partial_failure),
    _Contradiction("failure-misattributed", "observed", _c_misattributed),
    _Contradiction("duplicate-request", "absence", _c_duplicate),
    _Contradiction("request-never-settled", "absence", _c_never_settled),
)


def _contradictions(window: List[dict], p: dict, action_since: Optional[float],
                    known: Optional["_Known"] = None) -> List[dict]:
    """Channels that disagree with a passing predicate, in two tiers, in the order of
    _CONTRADICTIONS.

    observed (they make a verdict `no`): a request of the window that raised on the server, before
    its answer or after it in work run for it (server-exception), logged an error there
    (server-logged-error) or rolled back a write it began (server-rolled-back), as the app's
    middleware reported it, or an update or delete a watched store committed to another row than the one
    the act's request path names (store-wrong-row), or a 201 Created of the act while no watched store
    committed anything (store-created-nothing); an error shown to the user while the predicate held
    (error-shown), a socket or stream message of the act's own channel reporting a failure
    (message-reported-failure), a failed request (not retried with success later in the window)
    under a success signal (signal-contradicted) or else under a UI that moved on without showing
    an error (ui-advanced-request-failed), a 2xx whose body reports failure
    (partial-failure-in-ok-response), a server error shown as the user's mistake
    (failure-misattributed).  absence (they make it `unknown`): one write succeeded twice with the
    same body for one action (a retry after a failure is none), the page's own background writes
    aside (duplicate-request), a request the advanced UI never saw answered
    (request-never-settled).  A failure the predicate itself expects (a `net` leaf asking for it)
    is no contradiction."""
    return [dict({"kind": c.kind, "tier": c.tier}, **finding) for c in _CONTRADICTIONS
            for finding in c.detect(window, p, action_since, known)]


def _server_summary(window: List[dict]) -> Optional[List[str]]:
    """The act's requests as the server saw them, for every verdict's evidence (None without middleware)."""
    records = _server_records(window)
    return [_server_line(r) for r in records[-6:]] if records else None


_UNREADABLE_NAMES = {"cross-origin-iframe": "cross-origin frame(s)", "closed-shadow-root": "closed shadow root(s)"}


def _may_be_unreadable(res: dict) -> bool:
    """Could this failed result be a miss of something in a part of the page no SDK reads?
    Only a presence check of text or elements can; in allOf every failed part must be one
    (a failed request stands on its own), in anyOf one is enough."""
    assertion = res.get("assertion")
    if assertion in ("text.present", "element.present", "element.role+name"):
        return True
    children = res["evidence"] if isinstance(res.get("evidence"), list) else []
    failed = [c for c in children if isinstance(c, dict) and not c.get("pass")]
    if assertion == "allOf":
        return bool(failed) and all(_may_be_unreadable(c) for c in failed)
    if assertion == "anyOf":
        return any(_may_be_unreadable(c) for c in failed)
    return False


# ---- the rules: one small function each, applied in the order of _VERDICT_RULES ----

class _Case:
    """What the verdict rules read (see _decide): the judged result, the contradictions, the window and
    what the session knows, plus the facts several rules share, worked out once."""

    def __init__(self, res: dict, contradictions: List[dict], window: List[dict], known: "_Known", floor: float,
                 p: dict, already_true: bool, act: bool, effect: Any, shown: Optional[List[dict]],
                 pending: Optional[List[Tuple[str, bool]]]) -> None:
        self.res = res
        self.contradictions = contradictions
        self.window = window
        self.known = known
        self.floor = floor
        self.p = p
        self.already_true = already_true
        self.effect = effect
        self.shown = shown
        self.pending = pending
        self.declared = p["kind"] != "settled"
        self.implicit = not self.declared and act  # act_and_wait with no `until`: did the act work?
        self._lost: Optional[str] = None

    @property
    def lost(self) -> str:
        """Why the window is incomplete (_lost_evidence), or '' when nothing was lost."""
        if self._lost is None:
            self._lost = _lost_evidence(self.window, self.known)
        return self._lost

    def standing(self) -> List[dict]:
        """The errors the page still shows to the user that the predicate does not ask for."""
        return [d for d in self.shown or () if _is_failure_ui(d) and not _expects_error(self.p, d)]

    def stale(self) -> List[dict]:
        """The standing errors that are transient leftovers (see _stale_message): named, never a `no`."""
        return [d for d in self.standing() if _stale_message(d, self.window, self.floor, self.known)]


_Ruling = Optional[Tuple[str, str, str]]


def _r_inconclusive(c: _Case) -> _Ruling:
    if c.res.get("inconclusive"):
        return "unknown", "inconclusive", "the assertion could not be evaluated: %s" % c.res["inconclusive"]
    return None


def _r_observation_lost(c: _Case) -> _Ruling:
    if c.res.get("observationLost"):
        why = c.res.get("failureReason") or ""
        if STRANDED_NOTE in why or why.startswith(DEVICE_LOST_NOTE):  # a page without the tag; a browser gone
            return "unknown", "observation_lost", why
        return "unknown", "observation_lost", ("the tab disconnected or reloaded during the observation; check "
                                               "reticle_sessions and repeat if it is safe")
    return None


def _r_not_answering(c: _Case) -> _Ruling:
    if c.known.stuck:
        return "unknown", "not_answering", ("the tab does not answer: %s; what it holds now is not known, and "
                                            "nothing it said before can prove it" % c.known.stuck)
    return None


def _r_act_failed(c: _Case) -> _Ruling:
    if not c.implicit:
        return None
    failures = _failures_shown(c.window, c.known.origin, _act_answers(c.window, c.floor, c.known))
    if failures:
        return "no", "failure_observed", "after the act %s" % "; ".join(failures[:2])
    if not c.res["pass"]:
        return "unknown", "unsettled", "the page never settled within the timeout, and nothing failed in sight"
    return None


def _r_failed_for_lost_evidence(c: _Case) -> _Ruling:
    if c.res["pass"] or c.res.get("decided") or not c.lost:
        return None
    reads_window = any(_PREDICATE_KINDS[leaf["kind"]].window and not neg and not leaf.get("absent")
                       for leaf, neg in _leaves(c.p))
    if reads_window:
        return "unknown", "evidence_lost", ("the check failed, but %s, so the evidence it looked for may have been "
                                            "among them; narrow the window or reduce the page's event volume"
                                            % c.lost)
    return None


def _r_presence_blind_spot(c: _Case) -> _Ruling:
    res, known = c.res, c.known
    if not res["pass"] and known.unreadable and not res.get("decided") and _may_be_unreadable(res):
        parts = "; ".join("%d %s%s" % (n, _UNREADABLE_NAMES.get(k, k), " (%s)" % detail if detail else "")
                          for k, (n, detail) in sorted(known.unreadable.items()))
        return "unknown", "presence_blind_spot", (
            "%s, but part of the page cannot be read (%s), and it may be there; assert what the app does "
            "(net, signal, state) or what it shows outside that part" % (
                res.get("failureReason") or "the check did not find it", parts))
    return None


def _r_assertion_failed(c: _Case) -> _Ruling:
    if not c.res["pass"]:
        why = c.res.get("failureReason") or _describe_predicate(c.p)
        shown = [x["counter"] for x in c.contradictions if x["kind"] == "error-shown"]
        if shown and not c.res.get("decided") and TOLD_NOTE not in why:
            why += "; %s" % shown[0]  # the failure the act showed, when the page's near texts did not name it
        return "no", "assertion_failed", "the declared consequence did not hold: %s" % why
    return None


def _r_contradicted(c: _Case) -> _Ruling:
    observed = [x for x in c.contradictions if x["tier"] == "observed"]
    if observed:
        x = observed[0]
        return "no", "contradicted", "the assertion held, but channels disagree (%s): %s, yet %s" % (
            x["kind"], x["claim"], x["counter"])
    return None


def _r_evidence_incomplete(c: _Case) -> _Ruling:
    absence = [x for x in c.contradictions if x["tier"] == "absence"]
    if c.declared and all(x["kind"] == "request-never-settled" and not x.get("write") for x in absence):
        # A declared consequence held and only reads are still open (a poll, an image
        # feed): they cannot undo it.  Open writes stay unknown below.
        return None
    if absence:
        x = absence[0]
        return "unknown", "evidence_incomplete", ("the assertion held, but the window closed before the app "
                                                  "finished (%s: %s); re-check once it lands, raise timeout_ms, or "
                                                  "assert the request itself" % (x["kind"], x["counter"]))
    return None


def _r_absence_blind_spot(c: _Case) -> _Ruling:
    absences = [leaf for leaf, neg in _leaves(c.p) if leaf.get("absent") or neg]
    spots = {k: v for k, v in c.known.blind_spots.items() if k in _ABSENCE_BLIND_SPOTS}
    if absences and spots:
        return "unknown", "absence_blind_spot", ("the predicate asserts an absence, but part of the page is "
                                                 "unobservable (%s), so a passing check cannot prove it" %
                                                 ", ".join("%s ×%d" % kv for kv in spots.items()))
    return None


def _r_already_true(c: _Case) -> _Ruling:
    if c.already_true:
        return "unknown", "already_true", ("the predicate was already true before this action, so it proves "
                                           "nothing about the action; assert something the action CHANGES")
    return None


def _r_evidence_lost(c: _Case) -> _Ruling:
    if c.lost:
        return "unknown", "evidence_lost", ("%s, so this window is incomplete and a pass cannot be trusted; narrow "
                                            "the window or reduce the page's event volume" % c.lost)
    return None


def _r_outcome_pending(c: _Case) -> _Ruling:
    accepted = [d for d in _calls(c.window) if d.get("status") == 202 and not _is_dev(d) and _queued(d, c.window)]
    if accepted:
        return "unknown", "outcome_pending", ("%s returned 202 Accepted: the work was queued, not done; re-check "
                                              "once it reconciles" % _call_label(accepted[0]))
    return None


def _r_outcome_unread(c: _Case) -> _Ruling:
    unread = [e["data"] for e in c.window if e["type"] == "net.request" and _unread_write(e, c.floor, c.known)]
    if unread:
        return "unknown", "outcome_unread", ("the response body of %s was not captured, so whether the write "
                                             "succeeded cannot be proven; turn body capture on" %
                                             ", ".join(_call_label(d) for d in unread[:3]))
    return None


def _r_request_in_flight(c: _Case) -> _Ruling:
    in_flight = [d for d in c.known.open_requests if _is_write(d) and d.get("startedAt", 0) >= c.floor
                 and _call_label(d) not in c.known.background]
    if in_flight:
        return "unknown", "request_in_flight", ("%s is still in flight, so the outcome of this action is not "
                                                "known yet" % _call_label(in_flight[0]))
    return None


def _r_horizon_pending(c: _Case) -> _Ruling:
    decisive = [what for what, counts in c.pending or () if counts]
    if decisive:
        return "unknown", "horizon_pending", ("the act's work had not finished within %d ms (%s), so what it "
                                              "leads to is not known yet; re-check once it lands" %
                                              (HORIZON_CAP_MS, "; ".join(decisive[:3])))
    return None


def _r_server_unreported(c: _Case) -> _Ruling:
    if c.known.server_untied:
        label, why = c.known.server_untied[0]
        return "unknown", "server_untied", (
            "no server record could be tied to %s, so whether the server failed (an error logged, a rollback, a "
            "save that wrote nothing) is not known: it reached the server with no mark a tab holds (through the "
            "script tag a form post or link carries Reticle's mark only in a cookie, which OpenTelemetry does not "
            "read), and a record is tied to such a request by method, path and time only when exactly one fits "
            "(%s); open the page as a device (reticle_open), which sends it as a marked request"
            % (label, why or "none did within %d ms of its answer" % SERVER_WAIT_CAP_MS))
    if c.known.server_missing:
        return "unknown", "server_unreported", (
            "the app reports what its server did, but the record of %s had not come within %d ms of its answer, "
            "so whether the server failed (an error logged, a rollback, a background task that raised) is not "
            "known; re-check once it lands" % (", ".join(c.known.server_missing[:3]), SERVER_WAIT_CAP_MS))
    return None


def _act_saves(c: _Case) -> List[dict]:
    """The act's write requests (POST, PUT, PATCH, DELETE) the server answered as a success, 2xx or
    3xx (a 303 after a form post is the usual one), whose writes are observed (_writes_observed),
    unless a watched store committed to the table its path names during the act (a job it queued wrote it
    after the answer: Storage truth), or the predicate declares what they wrote (a positive `server` leaf
    with `writes` or `committed` naming them)."""
    declared = [leaf for leaf, neg in _leaves(c.p) if leaf["kind"] == "server" and not neg
                and ("writes" in leaf or "committed" in leaf)]
    return [r for r in _act_server_records(c.window, c.known)
            if (r.get("method") or "").upper() in _WRITE_METHODS and 200 <= (r.get("status") or 0) < 400
            and _writes_observed(r) and not _store_kept_for(c.window, c.floor, c.known, r.get("path") or "/")
            and not any(_server_matches(r, {k: leaf[k] for k in ("method", "urlContains") if k in leaf})
                        for leaf in declared)]


def _observed_by(r: dict) -> str:
    if r.get("source") == "otel":
        return "its database spans (service %s)" % (r.get("service") or "unnamed")
    return "its watched database (%s)%s" % (", ".join(r.get("watched") or []), "; it may also write through %s, "
                                            "which nothing watches" % ", ".join(r["unseen"]) if r.get("unseen") else "")


# What an unknown over a write request that wrote nothing (or elsewhere) advises: how to see the write, never a
# predicate under which the act's own failure would pass (declaring "0 writes" made every failed save a yes)
_SEE_THE_WRITE = ("to prove the save, check the saved data itself (read it back: a text or element check after "
                  "reticle_navigate {reload: true}), and if a background job or another process writes it, let that "
                  "process report too (Reticle's middleware, or its OpenTelemetry spans with its database "
                  "instrumentation), or watch the database itself (reticle_watch_db with its URL) and check with a "
                  "stored predicate that the row the save should have written is there")


def _r_server_wrote_nothing(c: _Case) -> _Ruling:
    quiet = [r for r in _act_saves(c) if not any(_server_rows(r, {}, state) for state in (True, False, None))]
    if quiet:
        r = quiet[0]
        return "unknown", "server_wrote_nothing", (
            "the server answered %s → %s but persisted nothing, as %s shows, so the save this asserts may not "
            "have happened; %s" % (_server_label(r), r.get("status"), _observed_by(r), _SEE_THE_WRITE))
    return None


def _r_server_wrote_elsewhere(c: _Case) -> _Ruling:
    for r in _act_saves(c):
        segments = [s for s in (r.get("path") or "").split("?", 1)[0].split("/") if s and not _ID_SEGMENT.match(s)]
        named = next(((s, t) for s in reversed(segments) for t in sorted(c.known.server_tables)
                      if _names_table(s, t)), None)
        written = [w for w in r.get("writes") or [] if w.get("committed") is not False]
        if named is None or not written or any(_names_table(named[0], w.get("table") or "") for w in written):
            continue
        return "unknown", "server_wrote_elsewhere", (
            "the server answered %s → %s and wrote%s, but nothing to %s, the table its path names, so the save "
            "this asserts may not have happened; %s" % (
                _server_label(r), r.get("status"), _writes_text(written), named[1], _SEE_THE_WRITE))
    return None


def _r_server_commit_unknown(c: _Case) -> _Ruling:
    unsure = [r for r in _act_saves(c) if _server_rows(r, {}, None) and not _server_rows(r, {}, True)]
    if unsure:
        r = unsure[0]
        w = next(w for w in r["writes"] if w.get("committed") is None)
        return "unknown", "server_commit_unknown", (
            "the server answered %s → %s and ran %s %s, but its OpenTelemetry spans show no BEGIN or COMMIT, "
            "so whether the write was kept or rolled back is not known; %s" % (
                _server_label(r), r.get("status"), w["op"], w["table"], _commit_advice(r)))
    return None


def _r_store_silent(c: _Case) -> _Ruling:
    silent = _store_silence(c.window, c.floor, c.known, c.p)
    return ("unknown", silent[0], silent[1]) if silent is not None else None


def _r_no_effect(c: _Case) -> _Ruling:
    if c.implicit and not _had_effect(c.effect, c.window, c.floor, c.known):
        return "unknown", "no_effect", ("no observable effect yet: no DOM change, request, message, route, signal, "
                                        "state or storage event followed the act; declare the consequence you "
                                        "expect with `until`")
    return None


def _stale_message(d: dict, window: List[dict], floor: float, known: Optional["_Known"]) -> bool:
    """An error shown now that is a leftover, not the act's: it was on screen before the act (no
    ui.alert of its text in the act's window), the act's answers did not carry it (a fragment that
    re-rendered it into the element it was in), it sits in no form, dialog or landmark at all (a toast
    in a portal: `unscoped`), it is no field marked invalid, and the act's own requests all succeeded
    (at least one)."""
    if d.get("own") or not d.get("unscoped") or d.get("source") == "invalid":
        return False
    text = d.get("text")
    if any(e["type"] in ("ui.alert", "ui.status") and e["data"].get("text") == text for e in window):
        return False
    mine = _act_answers(window, floor, known)
    flat = " ".join(str(text).split())
    if flat and any(flat in _answer_text(x.get("responseBody")) for x in mine):
        return False  # the act's own answer (re)rendered it: an htmx fragment swapped into the same element
    return bool(mine) and not any(_call_failed(x) for x in mine)


def _act_answers(window: List[dict], floor: float, known: Optional["_Known"]) -> List[dict]:
    """The completed calls of the window the act at `floor` could have caused (a retry of the same save is the
    act's; the page's own timer traffic, dev tooling and other origins are not): the act's own answers."""
    return [e["data"] for e in window if e["type"] == "net.request" and not _is_dev(e["data"])
            and _caused_by_act(e, floor, known, repeats=True)]


def _r_failure_still_shown(c: _Case) -> _Ruling:
    stale = c.stale()
    touched = [d for d in c.standing() if d.get("related") and d not in stale]
    if touched:
        return "no", "failure_still_shown", ("after the act the page still shows %s%s; an error still shown is not "
                                             "fixed" % (_ui_label(touched[0]), " (and %d more)" % (len(touched) - 1)
                                                        if len(touched) > 1 else ""))
    return None


def _r_failure_text_answer(c: _Case) -> _Ruling:
    if not c.implicit:
        return None
    said = [d for d in _answer_failure_text(c.window, _act_answers(c.window, c.floor, c.known))
            if not _expects_error(c.p, d)]
    if said:
        how = ("only put back the same text in place of itself (a list or region re-rendered whole)"
               if said[0].get("again") else "came in an answer that is not the act's own")
        return "unknown", "failure_text_shown", (
            "an answer put text that reads as a failure on the page (%r), outside the act's form; it %s, so "
            "whether the act worked is not known; declare the consequence you expect with `until`" %
            (_short(str(said[0].get("text", "")), 120), how))
    return None


def _r_form_came_back(c: _Case) -> _Ruling:
    """A posted form that came back with no redirect, marking no error and saying no success (the SDK's
    ui.returned): not a success, unless server truth was asked for and decides."""
    if c.p and any(leaf["kind"] == "server" and not neg for leaf, neg in _leaves(c.p)):
        return None
    back = [e["data"] for e in c.window if e["type"] == "ui.returned"]
    if back:
        return "unknown", "form_came_back", (
            "the form came back without a redirect: the answer to its post (%s) holds the same form again, marking "
            "no error and saying no success; a server-rendered form that saved redirects (post/redirect/get) and "
            "one that failed renders itself again, so whether it worked is not known; check what it saved (a "
            "`server` predicate, or the record read back)" % _short(str(back[-1].get("action") or "?"), 200))
    return None


def _reset_fields(effect: Any) -> List[dict]:
    """The fields an earlier act filled whose value the page reset before this act (the SDK's
    fillsReset: a framework re-rendering them on hydration, a form library's reset)."""
    inner = effect.get("effect") if isinstance(effect, dict) else None
    got = inner.get("resetFields") if isinstance(inner, dict) else None
    return [d for d in got[:10] if isinstance(d, dict)] if isinstance(got, list) else []


def _r_fill_reset(c: _Case) -> _Ruling:
    reset = _reset_fields(c.effect)
    if not reset:
        return None
    names = ", ".join(repr(_short(str(d.get("field") or d.get("ref") or "a field"), 60)) for d in reset[:3])
    return "unknown", "fill_reset", (
        "the value filled into %s was %s before this act (the page re-rendered the field, as a framework's "
        "hydration does), so the act did not submit what was filled; fill it again and repeat the act"
        % (names, "replaced" if all(d.get("replaced") for d in reset) else "reset"))


def _leftover_notes(c: _Case, stale: List[dict]) -> str:
    """What a `yes` names that is not the act's: an error toast left from before the act (with what the
    act's window told the user instead), and a failed send to another origin (the settle's)."""
    noted = ""
    if stale:
        told = [str(e["data"].get("text", "")) for e in c.window if e["type"] in ("ui.alert", "ui.status")
                and not _is_failure_ui(e["data"]) and e["data"].get("text")]
        noted += ("; an error shown before the act is still on screen, outside what the act touched, while the "
                  "act's own requests succeeded: %s%s" % (_ui_label(stale[0]), "; after the act the page said %s" %
                                                          ", ".join(repr(_short(t, 80)) for t in told[:2])
                                                          if told else ""))
    foreign, _ = _foreign_failures(c.window, c.known.origin) if c.implicit else ([], [])
    if foreign:
        noted += "; a send to another origin failed, not the act's: %s" % _answered(foreign[0])
    return noted


def _r_proved(c: _Case) -> _Ruling:
    evidence = c.res.get("evidence")
    summary = _brief(evidence) if evidence is not None else "the predicate"
    noted = ""
    if c.contradictions:
        noted = "; noted, and unable to undo it: %s" % ", ".join(
            "%s (%s)" % (x["kind"], x["counter"]) for x in c.contradictions[:3])
    stale = c.stale()
    standing = [d for d in c.standing() if d not in stale]
    if standing:
        noted += "; a message elsewhere on the page is still shown: %s" % _ui_label(standing[0])
    noted += _leftover_notes(c, stale)
    if c.pending:
        noted += "; still going at the horizon's cap: %s" % "; ".join(what for what, _ in c.pending[:3])
    if c.declared:
        return "yes", "proved", "%s held (%s)%s" % (
            _describe_predicate(c.p), summary, noted or " with no channel disagreeing")
    return "yes", "proved", "the page settled with nothing failing%s (%s)" % (noted or " or disagreeing", summary)


# The rules of _decide as data, numbered as its docstring lists them, in the order they apply.
_VERDICT_RULES: Tuple[Tuple[str, Callable[[_Case], _Ruling]], ...] = (
    ("1", _r_inconclusive), ("2", _r_observation_lost), ("2b", _r_not_answering), ("2a", _r_act_failed),
    ("3", _r_failed_for_lost_evidence), ("3a", _r_presence_blind_spot), ("4", _r_assertion_failed),
    ("5", _r_contradicted), ("6", _r_evidence_incomplete), ("7", _r_absence_blind_spot), ("8", _r_already_true),
    ("9", _r_evidence_lost), ("10", _r_outcome_pending), ("11", _r_outcome_unread), ("12", _r_request_in_flight),
    ("12a", _r_horizon_pending), ("12b", _r_server_unreported), ("12c", _r_server_wrote_nothing),
    ("12d", _r_server_commit_unknown), ("12e", _r_server_wrote_elsewhere), ("12f", _r_store_silent),
    ("13", _r_no_effect), ("13a", _r_failure_still_shown), ("13b", _r_failure_text_answer), ("13c", _r_fill_reset),
    ("13d", _r_form_came_back),
    ("14", _r_proved),
)


def _decide(res: dict, contradictions: List[dict], window: List[dict], known: "_Known", floor: float, p: dict,
            already_true: bool = False, act: bool = False, effect: Any = None,
            shown: Optional[List[dict]] = None,
            pending: Optional[List[Tuple[str, bool]]] = None) -> Tuple[str, str, str]:
    """The verdict: (verified, verifiedReason, because).  The first rule that applies wins (one
    function each in _VERDICT_RULES, in this order):

    1. the predicate could not be evaluated -> unknown, inconclusive
    2. the tab went away during the observation -> unknown, observation_lost
    2b. the tab does not answer commands (a dialog open, its main thread busy) -> unknown, not_answering
    2a. act_and_wait with no predicate (did the act work?): a failure in sight (an error shown to the
        user, one the act's own answer carried onto the page included, a console error, a failed write;
        a failed send to another origin beside the app's own good requests, and the console error about
        it, are named in the `yes` instead) -> no, failure_observed; a page that never settled -> unknown,
        unsettled
    3. the predicate failed for want of evidence that events lost from the window could have held
       (evicted, sampled, or dropped by the page while the daemon was unreachable) -> unknown,
       evidence_lost; a violation that is there (decided), or a check of the live page, stands
    3a. a presence check of the page's text or elements failed while part of the page cannot be
       read (a cross-origin frame, a closed shadow root): what it looked for may be there ->
       unknown, presence_blind_spot
    4. the predicate failed -> no, assertion_failed
    5. an observed contradiction -> no, contradicted
    6. an absence-tier contradiction -> unknown, evidence_incomplete (requests still open that are
       only reads do not undo a declared consequence that held)
    7. an absence asserted while part of the page is unobservable -> unknown, absence_blind_spot
    8. the predicate was already true before the act -> unknown, already_true
    9. events of the window were lost (as in 3) -> unknown, evidence_lost
    10. a 202 Accepted in the window that nothing says otherwise of (see _queued: a single-fetch
        redirect, a failure, a route change or new document after it) -> unknown, outcome_pending
    11. a 2xx write the act could have caused whose response body was not captured -> unknown,
        outcome_unread (204, 205 and 304 have no body; a write to another origin, one that started
        before the window, or one the page also made on its own before it is not the act's)
    12. a write started in the window is still in flight -> unknown, request_in_flight
    12a. the act's causal work was still going at the horizon's cap in a way that could change the
         answer (a write or document unanswered, a fetch stream still sending) -> unknown,
         horizon_pending; what could not (a read, the DOM still changing) is named in a `yes`
    12b. a document request of the act (a form post or link through the script tag: its mark only in a
         cookie) that no server record could be tied to by method, path and time (tying.py: several
         fitted, or, where spans come from the tab's origin, none did): a write always, a link once
         records came for the tab -> unknown, server_untied; else the app reports server records, and the
         record of a marked request the act made had not come within SERVER_WAIT_CAP_MS of its answer ->
         unknown, server_unreported
    12c. a write request (POST/PUT/PATCH/DELETE) of the act answered 2xx or 3xx, and its writes are
         observed (the middleware's watched database, or a service whose spans have shown database
         statements) and it kept nothing, while the predicate declares no `server` writes for it ->
         unknown, server_wrote_nothing (a positive `server` leaf naming its writes decides it instead; the
         answer advises reading the data back, never declaring "0 writes", which would pass a failed save)
    12d. such a request whose only writes have a commit nobody saw (spans with no BEGIN or COMMIT) ->
         unknown, server_commit_unknown
    12e. such a request whose path names a table the app's records have written (`POST /contacts`), which
         wrote only to other tables (an audit row) -> unknown, server_wrote_elsewhere
    12f. a store is watched, the act's write request answered 2xx/3xx, and no positive `stored` leaf: the
         stores committed nothing then -> unknown, store_saw_nothing (unreadable: store_unread; only beside
         another tab's act: store_shared; only to tables the path does not name: store_wrote_elsewhere;
         beside the page's timed writes: store_background; see _store_silence)
    13. act_and_wait with no predicate, and the act had no observable effect -> unknown, no_effect
    13a. what would be a `yes` after an act, while the page still shows an error the user is told
         (_is_failure_ui) in what the act touched (its form or region, a toast, a message outside the
         page's header, nav, footer and asides) that the predicate does not ask for -> no,
         failure_still_shown; one elsewhere, or a leftover (_stale_message), is named in the `yes`
    13b. act_and_wait with no predicate, and an answer put text that reads as a failure (_PLAIN_FAILURE)
         outside the act's form that is not known to be the act's: it only took the place of the same text
         (a list re-rendered whole), or came in an answer the act did not cause -> unknown,
         failure_text_shown; in the act's form, or carried by the act's own answer wherever it landed (an
         htmx fragment, an out-of-band swap: _carried_failures), it is an error shown (2a: no,
         failure_observed)
    13c. what would be a `yes` after an act, while a value an earlier act filled had been reset by the
         page before it (hydration re-rendering the field) -> unknown, fill_reset
    13d. a posted form came back with no redirect, marking no error and saying no success (the SDK's
         ui.returned), and no `server` leaf was asked -> unknown, form_came_back
    14. otherwise -> yes, proved; contradictions that could not undo it are named in `because`

    Whatever the rule, `because` ends with what the server did for the act's requests, one line,
    when the app reports it (see _server_said), and what a watched store committed (_store_said).
    """
    case = _Case(res, contradictions, window, known, floor, p, already_true, act, effect, shown, pending)
    verified, reason, because = next(ruling for ruling in (rule(case) for _, rule in _VERDICT_RULES)
                                     if ruling is not None)
    return verified, reason, _store_said(_server_said(because, case), case)


def _store_said(because: str, c: _Case) -> str:
    """`because` with what the watched stores committed during the act, named, unless it says it already."""
    said = _store_summary(c.window, c.floor) if c.known.stores else ""
    if not said or said in because:
        return because
    return "%s; the store: %s" % (because, said)


# ---- the evidence an answer shows: trimmed, compact, naming faults and losses ----

def _server_said(because: str, c: _Case) -> str:
    """`because` with what the server did for the act's requests, in one line, unless it already says
    it: its writes first (the act's own POST, not the page its redirect led to), then what else it
    asked, two records at most, in the order they came."""
    records = _act_server_records(c.window, c.known)
    writes = [r for r in records if (r.get("method") or "").upper() in _WRITE_METHODS][-2:]
    records = writes + [r for r in records if r not in writes][-(2 - len(writes)):] if len(writes) < 2 else writes
    if not records:
        return because
    line = "; ".join(_server_line(r) for r in records)
    return because if line in because else "%s; the server: %s" % (because, line)


def _trim_call(d: dict) -> dict:
    """A call as evidence: method, path, status, duration, and at most 200 characters of each body."""
    url = str(d.get("url") or "")
    parts = urllib.parse.urlsplit(url)
    out = {"method": d.get("method"), "url": (parts.path or "/") + ("?" + parts.query if parts.query else "")
           if parts.scheme else url, "status": d.get("status")}
    for k in ("ms", "initiator", "error", "httpStatus", "statusNote", "faulted", "faultId", "at"):
        if d.get(k) is not None and not (k == "initiator" and d[k] in ("fetch", "xhr")):
            out[k] = d[k]
    for k in ("requestBody", "responseBody"):
        if isinstance(d.get(k), str) and d[k]:
            out[k] = _short(d[k], 200)
    return out


def _trim_evidence(ev: Any) -> Any:
    """Evidence cut to what decides: calls trimmed, lists of children trimmed, the rest short."""
    if isinstance(ev, list):
        return [_trim_evidence(x) for x in ev[:5]]
    if isinstance(ev, dict):
        if "method" in ev and "url" in ev:
            return _trim_call(ev)
        if "calls" in ev and isinstance(ev["calls"], list):
            return dict(ev, calls=[_trim_call(c) for c in ev["calls"][:3]])
        return {k: (_trim_evidence(v) if isinstance(v, (dict, list)) else _short(v, 200) if isinstance(v, str) else v)
                for k, v in list(ev.items())[:8] if k not in ("saw", "stack")}
    return ev


def _brief(ev: Any) -> str:
    """Evidence in a few words, for `because`: "POST /api/save → 200 (12 ms)"."""
    if isinstance(ev, list):
        return "; ".join(_brief(x) for x in ev[:3] if x is not None) or "the predicate"
    if isinstance(ev, dict) and "method" in ev and "url" in ev:
        t = _trim_call(ev)
        return "%s %s → %s%s" % (t["method"] or "LOAD", t["url"], t["status"] if t["status"] is not None else "?",
                                 " (%s ms)" % t["ms"] if t.get("ms") is not None else "")
    return _short(ev, 120)


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
