###############################################################################
# Verdict rules ###############################################################
###############################################################################

_SAVEPOINT_NOTE = "rolled back to a savepoint (its transaction went on)"


# Pure functions of what was observed: a window of events, the predicate's
# result, and what the session knows (_Known).  Asking the page and waiting
# stay with the callers in the tools; these can be tested from a table.

_ABSENCE_BLIND_SPOTS = ("closed-shadow-root", "cross-origin-iframe", "uninstrumented-frame", "sampled",
                        "rate-limited", "virtualized-unmounted")


# ---- messages: how apps tell the user a failure (one table), and which messages an act owns ----

class _FailureUi:
    """One way real apps tell the user something failed: a CSS selector for the element that
    carries the message, and whether the convention itself says failure (level "error") or the
    element is a message surface whose text decides (None: a failure phrase with no negation).
    The SDK looks for every row (in this order, error rows above the ARIA ones) and reports what
    it finds as `ui.alert` events with `source` = the row's name; alerts_read lists what is shown
    now.  tests/test_failure_ui.py has a row per record, both ways."""

    __slots__ = ("name", "selector", "level", "example", "success")

    def __init__(self, name: str, selector: str, level: Optional[str], example: str, success: str) -> None:
        self.name = name
        self.selector = selector
        self.level = level
        self.example = example      # HTML that must read as a failure
        self.success = success      # HTML beside it that must not


_FAILURE_UI: Tuple[_FailureUi, ...] = (
    _FailureUi("django-messages", "ul.messages li.error,.messages .alert-error,.messages .error", "error",
               '<ul class="messages" role="status"><li class="error">Please correct the errors below.</li></ul>',
               '<ul class="messages" role="status"><li class="success">The record was added successfully.</li></ul>'),
    _FailureUi("django-errorlist", "ul.errorlist,p.errornote", "error",
               '<ul class="errorlist"><li>This field is required.</li></ul>',
               '<p class="help">Required. 150 characters or fewer.</p>'),
    _FailureUi("flask-flash", ".flash.error,.flash-error,.flashes .error,.flashes .danger", "error",
               '<ul class="flashes"><li class="error">Could not save the note.</li></ul>',
               '<ul class="flashes"><li class="message">Note saved.</li></ul>'),
    # Rails' flash: `alert` the failure, `notice` its success twin (the default layout's <p class="alert">, the
    # guides' and Devise's markup); a bare alert class with no alert-* beside it, Bootstrap's success kept apart
    _FailureUi("rails-flash", "#flash_alert,.flash.alert,.flash-alert,p.alert:not([class*=\"alert-\"])", "error",
               '<p class="alert">Could not save the note.</p>',
               '<p class="notice">Note was successfully created.</p>'),
    _FailureUi("rails-errors", "#error_explanation", "error",
               '<div id="error_explanation"><h2>1 error prohibited this note from being saved:</h2>'
               '<ul><li>Title can\'t be blank</li></ul></div>',
               '<div id="notice">Note was successfully updated.</div>'),
    _FailureUi("bootstrap", ".alert-danger,.invalid-feedback,.toast.text-bg-danger,.toast.bg-danger", "error",
               '<div class="alert alert-danger">Payment declined.</div>',
               '<div class="alert alert-success">Payment received.</div>'),
    _FailureUi("bulma", ".notification.is-danger,.message.is-danger,.help.is-danger", "error",
               '<div class="notification is-danger">Upload rejected.</div>',
               '<div class="notification is-success">Upload complete.</div>'),
    _FailureUi("foundation", ".callout.alert,.form-error.is-visible", "error",
               '<div class="callout alert">There are errors in your form.</div>',
               '<div class="callout success">Your form was sent.</div>'),
    _FailureUi("mui", ".MuiAlert-standardError,.MuiAlert-filledError,.MuiAlert-outlinedError,"
               ".MuiAlert-colorError,.MuiFormHelperText-root.Mui-error", "error",
               '<div class="MuiPaper-root MuiAlert-root MuiAlert-standardError">Something went wrong.</div>',
               '<div class="MuiPaper-root MuiAlert-root MuiAlert-standardSuccess">All changes saved.</div>'),
    _FailureUi("ant-design", ".ant-message-error,.ant-alert-error,.ant-notification-notice-error,"
               ".ant-form-item-explain-error", "error",
               '<div class="ant-message-custom-content ant-message-error"><span>Save failed</span></div>',
               '<div class="ant-message-custom-content ant-message-success"><span>Saved</span></div>'),
    _FailureUi("chakra", ".chakra-alert[data-status=error],.chakra-form__error-message", "error",
               '<div class="chakra-alert" data-status="error">Your session expired.</div>',
               '<div class="chakra-alert" data-status="success">Profile updated.</div>'),
    _FailureUi("mantine", ".mantine-Alert-root[data-color=red],.mantine-Notification-root[data-color=red],"
               ".mantine-InputWrapper-error", "error",
               '<div class="mantine-Notification-root" data-color="red">Not saved.</div>',
               '<div class="mantine-Notification-root" data-color="teal">Saved.</div>'),
    _FailureUi("sonner", "[data-sonner-toast][data-type=error]", "error",
               '<li data-sonner-toast data-type="error">Event has not been created</li>',
               '<li data-sonner-toast data-type="success">Event has been created</li>'),
    _FailureUi("toastify", ".Toastify__toast--error", "error",
               '<div class="Toastify__toast Toastify__toast--error">Request timed out</div>',
               '<div class="Toastify__toast Toastify__toast--success">Request sent</div>'),
    _FailureUi("quasar", ".q-notification.bg-negative,.q-banner.bg-negative,.q-field--error .q-field__messages",
               "error",
               '<div class="q-notification bg-negative">Server unreachable</div>',
               '<div class="q-notification bg-positive">Server reached</div>'),
    _FailureUi("streamlit", "[data-testid=stException],[data-testid=stAlertContentError],"
               "[data-testid=stNotificationContentError]", "error",
               '<div data-testid="stException">ValueError: amount must be positive</div>',
               '<div data-testid="stAlertContentSuccess">Amount recorded</div>'),
    _FailureUi("gradio", ".toast-body.error", "error",
               '<div class="toast-body error">Error: the model is not loaded</div>',
               '<div class="toast-body info">Model loaded</div>'),
    _FailureUi("shiny", ".shiny-output-error,.shiny-notification-error", "error",
               '<div class="shiny-notification shiny-notification-error">Could not read the file</div>',
               '<div class="shiny-notification shiny-notification-message">File read</div>'),
    # every toast of the libraries above, whatever its type: a success toast shown and gone before an assert
    # still counts as shown in the act's window (ui.gone); its text decides whether it tells a failure
    _FailureUi("sonner-any", "[data-sonner-toast]", None,
               '<li data-sonner-toast data-type="default">Could not create the todo</li>',
               '<li data-sonner-toast data-type="success">Saved</li>'),
    _FailureUi("toastify-any", ".Toastify__toast", None,
               '<div class="Toastify__toast Toastify__toast--default">Upload failed</div>',
               '<div class="Toastify__toast Toastify__toast--success">Upload complete</div>'),
    _FailureUi("vue-toastification", ".Vue-Toastification__toast", None,
               '<div class="Vue-Toastification__toast Vue-Toastification__toast--error">Could not save</div>',
               '<div class="Vue-Toastification__toast Vue-Toastification__toast--success">Saved</div>'),
    _FailureUi("react-hot-toast", "div[role=status][aria-live=polite]", None,
               '<div role="status" aria-live="polite">Could not save the todo</div>',
               '<div role="status" aria-live="polite">Todo saved</div>'),
    _FailureUi("aria-status", "[role=status],output[aria-live=polite]", None,
               '<div role="status">Upload failed: the file is too large</div>',
               '<div role="status">0 errors found</div>'),
)


# Route announcers: the visually hidden live regions a client-side router fills with the new page's
# title after a navigation, for screen readers.  They are never what the page tells the user about
# an act (a text miss must not quote "untitled page" as the page's message); the SDK skips them.
_ROUTE_ANNOUNCERS: Tuple[Tuple[str, str], ...] = (
    ("sveltekit", "#svelte-announcer"),
    ("next.js", "next-route-announcer,#__next-route-announcer__"),
    ("nuxt", ".nuxt-route-announcer,#nuxt-route-announcer"),
    ("gatsby", "#gatsby-announcer"),
    ("astro", ".astro-route-announcer"),
    ("remix", "#remix-route-announcer"),
)


def _route_announcers_config() -> str:
    """The announcers' selectors as one JavaScript string literal, for the SDK's alert scan, on a line of
    its own (as a formatter wraps it)."""
    sel = ",".join(s for _, s in _ROUTE_ANNOUNCERS)
    assert "'" not in sel and "\\" not in sel, sel
    return "\n    '%s'" % sel


def _failure_ui_config() -> str:
    """The conventions as the SDK reads them, a JavaScript array of [source, selector, level]
    rows, one literal a line (as a formatter wraps it)."""
    def lit(v: Optional[str]) -> str:
        if v is None:
            return "null"
        assert "'" not in v and "\\" not in v and "\n" not in v, v
        return "'%s'" % v
    rows = ["    [\n      %s,\n      %s,\n      %s\n    ]" % (lit(r.name), lit(r.selector), lit(r.level))
            for r in _FAILURE_UI]
    return "[\n" + ",\n".join(rows) + "\n  ]"


# Plain failure text: new text after an act, in the act's form or in what its answer
# updated, that reads as a failure: any pattern of the first list and none of the second.  The SDK
# reads the same table (so both say the same) and reports such a text as a ui.alert of source
# "text" with its scope ("form" or "answer").  JavaScript-compatible regular expressions, case-blind.
_PLAIN_FAILURE: Tuple[Tuple[str, ...], Tuple[str, ...]] = (
    (r"\brequired\b", r"\bnot (a )?valid\b", r"\binvalid\b", r"\b(could not|couldn't|cannot|can't|unable to)\b",
     r"\bfail(ed|s|ure)?\b", r"\balready (taken|exists|in use|registered|been taken)\b",
     r"\bmust (be|not|have|contain|match|include)\b", r"\berrors?\b", r"\btoo (short|long|large|many|big)\b",
     r"\b(denied|rejected|declined|refused|forbidden)\b", r"\b(does|do) not match\b|\bdon't match\b",
     r"\bplease (correct|enter|fix|provide|select|choose)\b", r"\bnot (allowed|permitted|saved)\b",
     r"\bwent wrong\b", r"\btry again\b"),
    (r"\b(no|without|0|zero)\s+(errors?|failures?|problems?|issues?)\b", r"\brequired fields? (are|is) marked\b",
     r"\bmarked (with )?(an )?(\*|asterisk)", r"^\W*(\*\s*)?(\(?required\)?|optional)\W*$", r"\bnot required\b",
     r"\berrors? (rate|log|reporting|budget)\b"),
)
_PLAIN_FAILURE_RES = ([re.compile(s, re.I) for s in _PLAIN_FAILURE[0]],
                      [re.compile(s, re.I) for s in _PLAIN_FAILURE[1]])


def _plain_failure(text: str) -> bool:
    """Does a plain text read as a failure (_PLAIN_FAILURE: a pattern, and no negative)?"""
    yes, no = _PLAIN_FAILURE_RES
    return any(r.search(text) for r in yes) and not any(r.search(text) for r in no)


def _plain_failure_config() -> str:
    """_PLAIN_FAILURE as the SDK reads it: a JavaScript array of two arrays of regex sources, one
    literal a line (as a formatter wraps it)."""
    lists = ["    [\n%s\n    ]" % ",\n".join("      %s" % json.dumps(s) for s in part) for part in _PLAIN_FAILURE]
    return "[\n" + ",\n".join(lists) + "\n  ]"


def _is_failure_ui(d: dict) -> bool:
    """A message the user is shown tells a failure: its convention says so (a field marked invalid,
    a declared error toast, an error row of _FAILURE_UI), or its text is a failure phrase with no
    negation ("0 errors found" is a success)."""
    text = str(d.get("text", ""))
    if d.get("source") == "text":  # plain text: a failure only in the act's own form (see _failure_text)
        return d.get("scope") == "form" and _plain_failure(text)
    worded = _FAILURE_TEXT.search(text) and not _NO_FAILURE.search(text)
    return d.get("level") == "error" or d.get("source") == "invalid" or bool(worded)


def _answer_failure_text(window: List[dict]) -> List[dict]:
    """Plain text that reads as a failure (_PLAIN_FAILURE) which appeared after the act outside its form
    in what the act's answer updated: the SDK saw it appear after a request answered (scope "answer"),
    and the text is in the body of an answer of the window (an htmx fragment swapped in)."""
    bodies = [" ".join(html.unescape(d["responseBody"]).split()) for d in _calls(window)
              if isinstance(d.get("responseBody"), str)]
    sent = [urllib.parse.unquote_plus(d["requestBody"]) for d in _calls(window)
            if isinstance(d.get("requestBody"), str)]
    out = []
    for e in window:
        d = e["data"]
        if e["type"] != "ui.alert" or d.get("source") != "text" or d.get("scope") != "answer":
            continue
        text = " ".join(str(d.get("text", "")).split())
        if text and _plain_failure(text) and any(text in b for b in bodies) and not any(text in s for s in sent):
            out.append(d)  # (text the request sent, echoed back: a new item the person typed, not a message)
    return out


def _error_ui(window: List[dict]) -> List[dict]:
    """Errors the user was shown in the window (ui.alert events, see _is_failure_ui)."""
    return [e["data"] for e in window if e["type"] in ("ui.alert", "ui.status") and _is_failure_ui(e["data"])]


def _ui_label(d: dict) -> str:
    source = d["source"] if isinstance(d.get("source"), str) else ""  # the page's: it may send any JSON there
    where = {"invalid": "beside the field %r" % d.get("field", "?"), "toast": "in a toast",
             "text": "as plain text %s" % ("in the act's form" if d.get("scope") == "form" else
                                           "where the act's answer went"),
             "alertdialog": "in a dialog", "assertive": "in an assertive live region", "alert": "as an alert"}.get(
        source, "in a %s message" % source if source else "as an alert")
    return "%r %s%s" % (_short(str(d.get("text", "")), 120), where,
                        ", rendered by %s" % d["at"] if isinstance(d.get("at"), str) and d["at"] else "")


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


def _failures_shown(window: List[dict], origin: str = "") -> List[str]:
    """What went wrong in plain sight: an error shown to the user, a console error or uncaught
    exception, a write that failed.  Each in a short phrase, most telling first.  A failed send to
    another origin than the page's (`origin`) and the console errors about it are not among them
    (_foreign_failures)."""
    foreign, foreign_said = _foreign_failures(window, origin)
    out = ["the page showed %s" % _ui_label(d) for d in _error_ui(window)]
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

def _c_error_shown(window: List[dict], p: dict, action_since: Optional[float], known: Optional["_Known"]) -> List[dict]:
    unexpected = [d for d in _error_ui(window) if not _expects_error(p, d)]
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


def _act_server_records(window: List[dict], known: Optional["_Known"] = None) -> List[dict]:
    """The server records of the window, but for the requests the page sends on a timer (polling,
    autosave: known.polled); the same save clicked again is the act's, as in _horizon."""
    background = known.polled if known is not None else ()
    if not background:
        return _server_records(window)
    labels: Dict[Tuple[Any, str], str] = {(e.get("doc"), str(e["data"].get("serverMark"))): _call_label(e["data"])
                                          for e in window if e["type"] == "net.pending" and e["data"].get("serverMark")}
    return [r for r in _server_records(window)
            if labels.get((r.get("documentId"), str(r.get("requestId"))), "") not in background]


def _server_rolled_back(window: List[dict], p: Optional[dict] = None,
                        known: Optional["_Known"] = None) -> List[dict]:
    """Server records of the act's requests with a write the request began and rolled back (or never
    committed), unless the predicate asks for one (a positive `server` leaf with committed: false)."""
    if p is not None and any(leaf["kind"] == "server" and leaf.get("committed") is False and not neg
                             for leaf, neg in _leaves(p)):
        return []
    return [r for r in _act_server_records(window, known)
            if any(_rolled_back_write(w) for w in r.get("writes") or [])]


def _rolled_back_write(w: dict) -> bool:
    """A write whose transaction rolled back (or never committed): one rolled back only to a
    savepoint, in a transaction that went on (get_or_create's IntegrityError, a nested atomic block
    that failed), is not kept but is no rollback of what the request did."""
    return w.get("committed") is False and w.get("note") != _SAVEPOINT_NOTE


def _server_failures(window: List[dict], p: Optional[dict] = None, known: Optional["_Known"] = None) -> List[dict]:
    """Server records in the window that raised or logged an error, unless the predicate itself
    asks for that (a positive `server` leaf with exception: true, logged: true or a 5xx status),
    or the request is one the page sends on a timer (polling, autosave: see _act_server_records)."""
    wants = [leaf if leaf["kind"] == "server" else {k: leaf[k] for k in ("method", "urlContains") if k in leaf}
             for leaf, neg in (_leaves(p) if p is not None else []) if not neg and (
                 (leaf["kind"] == "server" and (leaf.get("exception") or leaf.get("logged")))
                 or (leaf["kind"] in ("server", "net") and (leaf.get("status") or 0) >= 500)
                 or (leaf["kind"] == "net" and leaf.get("ok") is False))]
    return [r for r in _act_server_records(window, known) if (r.get("exception") or r.get("logged"))
            and not any(_server_matches(r, leaf) for leaf in wants)]


def _server_contradictions(window: List[dict], p: dict, known: Optional["_Known"] = None) -> List[dict]:
    """A request the act caused that raised on the server (before its answer or after it, in work
    run for it), logged an error, or rolled back a write it began, disagrees with a passing
    predicate (observed tier: `no`), whatever status the browser saw: findings with their kind
    (server-exception, server-logged-error, server-rolled-back) and tier."""
    out = []
    for r in _server_failures(window, p, known)[:3]:
        exc = r.get("exception")
        if exc:
            counter = "the server raised %s (%s)%s under %s → %s%s" % (
                exc.get("type"), _short(exc.get("message") or "", 100),
                " at %s" % exc["frames"][0] if exc.get("frames") else "", _server_label(r), r.get("status"),
                ", after its answer (in work run for the request: %s)" % exc["after"] if exc.get("after") else "")
        else:
            e = r["logged"][0]
            counter = "the server logged %s from %s (%s) under %s → %s" % (
                e.get("level"), e.get("logger"), _short(e.get("message") or "", 100), _server_label(r), r.get("status"))
        out.append({"kind": "server-exception" if exc else "server-logged-error", "tier": "observed",
                    "claim": "the assertion held", "counter": counter, "server": _server_line(r)})
    for r in _server_rolled_back(window, p, known)[:2]:
        w = next(w for w in r["writes"] if _rolled_back_write(w))
        out.append({"kind": "server-rolled-back", "tier": "observed", "claim": "the assertion held",
                    "counter": "the server began %s %s and %s under %s → %s" % (
                        w["op"], w["table"], "rolled it back" if (w.get("note") or "rolled back") == "rolled back"
                        else "never committed it", _server_label(r), r.get("status")),
                    "server": _server_line(r)})
    return out


# ---- rows named by the request: its path says which row of which table it acts on ----
# `/contacts/4/rename`: the last resource segment followed by an id names row 4 of the table that segment
# names (contacts, contact; cart_items for items); an update or delete of that table keyed otherwise
# is the wrong row.  Limits: only the last id of the path counts (a parent's id, /projects/3/tasks/9, is
# not the written row), a write whose keys are not known says nothing, and a predicate that declares the
# row it expects (`server` writes with that `key`) is believed.

_ID_SEGMENT = re.compile(r"^(\d{1,19}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")


def _names_table(segment: str, table: str) -> bool:
    """Does a path segment name a table: the same word, singular or plural, or its last part
    (`items` for cart_items)?"""
    a = segment.lower().replace("-", "_")
    b = table.lower().split(".")[-1].strip('`"[]')
    if not a or not b or _ID_SEGMENT.match(a):
        return False
    singular = {a, a[:-1] if a.endswith("s") else a, a[:-2] if a.endswith("es") else a,
                a[:-3] + "y" if a.endswith("ies") else a}
    return b in singular or b in {a + "s", a + "es"} or any(b.endswith("_" + s) for s in singular | {a})


def _path_row(path: str) -> Optional[Tuple[str, str]]:
    """The last (resource segment, id) pair of a request's path: /contacts/4/rename -> ("contacts", "4")."""
    segments = [urllib.parse.unquote(s) for s in path.split("?", 1)[0].split("/") if s]
    pairs = [(segments[i], segments[i + 1]) for i in range(len(segments) - 1)
             if _ID_SEGMENT.match(segments[i + 1]) and not _ID_SEGMENT.match(segments[i])]
    return pairs[-1] if pairs else None


def _c_server_wrong_row(window: List[dict], p: dict, action_since: Optional[float],
                        known: Optional["_Known"]) -> List[dict]:
    declared = [leaf["writes"]["key"] for leaf, neg in _leaves(p) if leaf["kind"] == "server" and not neg
                and "key" in leaf.get("writes", {})]
    out = []
    for r in _act_server_records(window, known):
        named = _path_row(r.get("path") or "") if (r.get("method") or "").upper() in _WRITE_METHODS else None
        if named is None:
            continue
        segment, row = named
        hits = [w for w in r.get("writes") or [] if w["op"] in ("update", "delete") and w.get("committed") is not False
                and _names_table(segment, w.get("table") or "")]
        if not hits or not all(isinstance(w.get("keys"), list) for w in hits) \
                or any(row in _server_key_set(w["keys"]) for w in hits) \
                or any(_server_key_set(key) & _server_key_set(w["keys"]) for key in declared for w in hits):
            continue
        w = hits[0]
        out.append({"claim": "the assertion held", "server": _server_line(r), "counter": (
            "%s names row %s of %s, but the server %sd %s keyed %s" % (
                _server_label(r), row, w["table"], w["op"], w["table"], ", ".join(str(k) for k in w["keys"][:5])))})
    return out[:2]


def _c_server_exception(window: List[dict], p: dict, action_since: Optional[float],
                        known: Optional["_Known"]) -> List[dict]:
    return [{k: v for k, v in c.items() if k not in ("kind", "tier")}
            for c in _server_contradictions(window, p, known) if c["kind"] == "server-exception"]


def _c_server_logged(window: List[dict], p: dict, action_since: Optional[float],
                     known: Optional["_Known"]) -> List[dict]:
    return [{k: v for k, v in c.items() if k not in ("kind", "tier")}
            for c in _server_contradictions(window, p, known) if c["kind"] == "server-logged-error"]


def _c_server_rolled_back(window: List[dict], p: dict, action_since: Optional[float],
                          known: Optional["_Known"]) -> List[dict]:
    return [{k: v for k, v in c.items() if k not in ("kind", "tier")}
            for c in _server_contradictions(window, p, known) if c["kind"] == "server-rolled-back"]


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
    middleware reported it; an error shown to the user while the predicate held
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
    failures = _failures_shown(c.window, c.known.origin)
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
        return "no", "assertion_failed", "the declared consequence did not hold: %s" % (
            c.res.get("failureReason") or _describe_predicate(c.p))
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
    if c.known.server_missing:
        return "unknown", "server_unreported", (
            "the app reports what its server did, but the record of %s had not come within %d ms of its answer, "
            "so whether the server failed (an error logged, a rollback, a background task that raised) is not "
            "known; re-check once it lands" % (", ".join(c.known.server_missing[:3]), SERVER_WAIT_CAP_MS))
    return None


def _act_saves(c: _Case) -> List[dict]:
    """The act's write requests (POST, PUT, PATCH, DELETE) the server answered as a success, 2xx or
    3xx (a 303 after a form post is the usual one), whose writes are observed (_writes_observed),
    unless the predicate declares what they wrote (a positive `server` leaf with `writes` or
    `committed` naming them)."""
    declared = [leaf for leaf, neg in _leaves(c.p) if leaf["kind"] == "server" and not neg
                and ("writes" in leaf or "committed" in leaf)]
    return [r for r in _act_server_records(c.window, c.known)
            if (r.get("method") or "").upper() in _WRITE_METHODS and 200 <= (r.get("status") or 0) < 400
            and _writes_observed(r)
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
                  "instrumentation)")


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
    mine = [e["data"] for e in window if e["type"] == "net.request" and not _is_dev(e["data"])
            and _caused_by_act(e, floor, known, repeats=True)]  # a retry of the same save is the act's
    flat = " ".join(str(text).split())
    if flat and any(flat in _answer_text(x.get("responseBody")) for x in mine):
        return False  # the act's own answer (re)rendered it: an htmx fragment swapped into the same element
    return bool(mine) and not any(_call_failed(x) for x in mine)


def _answer_text(body: Any) -> str:
    """An answer's body as the text it renders: tags out, entities read, spaces one."""
    if not isinstance(body, str):
        return ""
    return " ".join(html.unescape(re.sub(r"<[^>]*>", " ", body)).split())


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
    said = [d for d in _answer_failure_text(c.window) if not _expects_error(c.p, d)]
    if said:
        return "unknown", "failure_text_shown", (
            "the act's answer put text that reads as a failure on the page (%r), outside the act's form, so "
            "whether the act worked is not known; declare the consequence you expect with `until`" %
            _short(str(said[0].get("text", "")), 120))
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
    ("12d", _r_server_commit_unknown), ("12e", _r_server_wrote_elsewhere),
    ("13", _r_no_effect), ("13a", _r_failure_still_shown), ("13b", _r_failure_text_answer), ("13c", _r_fill_reset),
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
        user, a console error, a failed write; a failed send to another origin beside the app's own good
        requests, and the console error about it, are named in the `yes` instead) -> no,
        failure_observed; a page that never settled -> unknown, unsettled
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
    12b. the app reports server records, and the record of a marked request the act made had not come
         within SERVER_WAIT_CAP_MS of its answer -> unknown, server_unreported
    12c. a write request (POST/PUT/PATCH/DELETE) of the act answered 2xx or 3xx, and its writes are
         observed (the middleware's watched database, or a service whose spans have shown database
         statements) and it kept nothing, while the predicate declares no `server` writes for it ->
         unknown, server_wrote_nothing (a positive `server` leaf naming its writes decides it instead; the
         answer advises reading the data back, never declaring "0 writes", which would pass a failed save)
    12d. such a request whose only writes have a commit nobody saw (spans with no BEGIN or COMMIT) ->
         unknown, server_commit_unknown
    12e. such a request whose path names a table the app's records have written (`POST /contacts`), which
         wrote only to other tables (an audit row) -> unknown, server_wrote_elsewhere
    13. act_and_wait with no predicate, and the act had no observable effect -> unknown, no_effect
    13a. what would be a `yes` after an act, while the page still shows an error the user is told
         (see _is_failure_ui) in what the act touched (its form or region, a toast, a message outside
         the page's header, nav, footer and asides), one the predicate does not ask for: shown before
         the act or not, re-rendered or not, it is not fixed -> no, failure_still_shown; one elsewhere
         is named in the `yes`, and so is a leftover (_stale_message: an error toast shown before the
         act, outside the act's own form or region, while the act's own requests all succeeded)
    13b. act_and_wait with no predicate, and the act's answer put text that reads as a failure
         (_PLAIN_FAILURE) outside the act's form (an htmx fragment swapped in) -> unknown,
         failure_text_shown; in the act's form it is an error shown (2a: no, failure_observed)
    13c. what would be a `yes` after an act, while a value an earlier act filled had been reset by the
         page before it (hydration re-rendering the field) -> unknown, fill_reset
    14. otherwise -> yes, proved; contradictions that could not undo it are named in `because`

    Whatever the rule, `because` ends with what the server did for the act's requests, one line,
    when the app reports it (see _server_said).
    """
    case = _Case(res, contradictions, window, known, floor, p, already_true, act, effect, shown, pending)
    verified, reason, because = next(ruling for ruling in (rule(case) for _, rule in _VERDICT_RULES)
                                     if ruling is not None)
    return verified, reason, _server_said(because, case)


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


# ---- wire formats as data: what popular frameworks' answers mean, beside the failure dialects ----

_SINGLE_FETCH_REDIRECT = re.compile(r'"redirect"\s*,\s*"([^"]*)"\s*,\s*"status"\s*,\s*(30[1-8])')
_COMPONENT_LINE = re.compile(r"^[0-9a-f]{1,8}:(?=[\[{])", re.M)
_RENDERED_ERROR = re.compile(r"^\s*(error\b|failed\b|failure\b|could not\b|couldn't\b|unable to\b)", re.I)


def _header(d: dict, name: str) -> str:
    headers = d["responseHeaders"] if isinstance(d.get("responseHeaders"), dict) else {}
    return str(headers.get(name, ""))


def _read_single_fetch(d: dict) -> Optional[str]:
    """React Router / Remix "single fetch": a form action's answer (often 202, a turbo-stream body)
    that carries `"redirect", "/path", "status", 302` is a redirect, not queued work."""
    body = d.get("responseBody")
    m = _SINGLE_FETCH_REDIRECT.search(body) if isinstance(body, str) else None
    return "it redirects to %s (%s)" % (m.group(1), m.group(2)) if m else None


def _read_server_action(d: dict) -> Optional[str]:
    """React server actions: a `text/x-component` stream of `id:JSON` rows; a row whose object says
    `ok: false`, `success: false` or carries an error is a failure inside a 200."""
    body = d.get("responseBody")
    if not isinstance(body, str) or not ("x-component" in _header(d, "content-type") or _COMPONENT_LINE.search(body)):
        return None
    for line in body.splitlines():
        m = _COMPONENT_LINE.match(line)
        if m is None:
            continue
        problem = _partial_failure(line[m.end():])
        if problem:
            said = problem[len("the body says "):] if problem.startswith("the body says ") else problem
            return "the server action's answer (row %s) says %s%s" % (line[:m.end() - 1], said,
                                                                       _row_message(line[m.end():]))
    return None


def _row_message(row: str) -> str:
    """The words a failed row gives the user (its `message`), as a suffix, or ''."""
    try:
        data = json.loads(row)
    except ValueError:
        return ""
    text = data.get("message") if isinstance(data, dict) else None
    return ", message %r" % _short(text, 120) if isinstance(text, str) and text.strip() else ""


def _read_dash_callback(d: dict) -> Optional[str]:
    """Plotly Dash: a callback (POST …/_dash-update-component) always answers 200 with the new props;
    one whose rendered text begins as an error does ("Error: … Nothing was saved.")."""
    if "_dash-update-component" not in str(d.get("url", "")) or not isinstance(d.get("responseBody"), str):
        return None
    try:
        data = json.loads(d["responseBody"])
    except ValueError:
        return None
    stack = [data.get("response")] if isinstance(data, dict) else []
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str) and _RENDERED_ERROR.search(v) and not _NO_FAILURE.search(v):
            return "the callback rendered %r" % _short(v, 100)
    return None


# stricter than _RENDERED_ERROR for an endpoint of any name: an error stated ("Error: …", "Failed to …")
_CALLBACK_ERROR = re.compile(r"^\s*((errors?|fail(ed|ures?))\s*[:!\u2013\u2014-](?!\s*(none|nil|0|zero)\b)|failed to\b|"
                             r"could not\b|couldn't\b|unable to\b)", re.I)
_RENDERED_KEYS = frozenset(("children", "text", "message", "content", "html", "innerHTML", "label", "notice"))


def _read_json_callback(d: dict) -> Optional[str]:
    """A dashboard's JSON callback under the app's own endpoint name: a write answered 2xx with the
    new props, one of whose rendered texts (`children`, `text`, `message`, ...) states an error with
    no negation ("Error: the row is locked. Nothing was saved.", "Failed to save"; "Error rate: 0
    errors" and "Error reporting enabled" are not)."""
    body = d.get("responseBody")
    if not _is_write(d) or not isinstance(body, str) or not body.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    stack: List[Tuple[str, Any]] = [("", data)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((key, x) for x in v)
        elif key in _RENDERED_KEYS and isinstance(v, str) and _CALLBACK_ERROR.search(v) and not _NO_FAILURE.search(v):
            return "the callback's answer renders %r" % _short(v, 100)
    return None


def _sveltekit_envelope(d: dict) -> Optional[dict]:
    """The JSON object of a SvelteKit answer: a form action's (a POST answered `{"type": "failure" |
    "error" | "redirect" | "success", "status": …}`) or a `__data.json` load (`{"type": "data", "nodes":
    […]}`), or None for any other call."""
    body = d.get("responseBody")
    if not isinstance(body, str) or not body.lstrip().startswith("{") or '"type"' not in body[:200]:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    kind = data.get("type")
    if _sveltekit_data_url(d):
        return data if kind in ("data", "redirect") else None
    if not _is_write(d):
        return None
    if kind == "failure" and isinstance(data.get("status"), int) and isinstance(data.get("data"), (str, type(None))):
        return data
    if kind == "error" and isinstance(data.get("error"), dict):
        return data
    if kind == "redirect" and isinstance(data.get("location"), str) and isinstance(data.get("status"), int):
        return data
    if kind == "success" and isinstance(data.get("status"), int) and set(data) <= {"type", "status", "data"}:
        return data
    return None


def _sveltekit_data_url(d: dict) -> bool:
    return urllib.parse.urlsplit(str(d.get("url", ""))).path.endswith("/__data.json")


def _devalue_words(encoded: Any) -> str:
    """The message a devalue-encoded action `data` carries (`[{"message": 1}, "Title is required"]`:
    index 0 the object, its values indices into the array), as a suffix, or ''."""
    try:
        flat = json.loads(encoded) if isinstance(encoded, str) else None
    except ValueError:
        return ""
    if not isinstance(flat, list) or not flat or not isinstance(flat[0], dict):
        return ""
    for key in ("message", "error", "errors", "reason"):
        at = flat[0].get(key)
        said = flat[at] if isinstance(at, int) and not isinstance(at, bool) and 0 < at < len(flat) else None
        if isinstance(said, str) and said.strip():
            return ", message %r" % _short(said, 120)
    return ""


def _sveltekit_failure(d: dict) -> Optional[Tuple[int, str]]:
    """(status, phrase) of a SvelteKit answer that is a failure whatever its HTTP status: an action's
    `failure` (fail(422, …)) or `error` envelope, or a `__data.json` whose nodes hold an `error` node
    (the page renders +error.svelte); None otherwise."""
    data = _sveltekit_envelope(d)
    if data is None:
        return None
    http: int = d["status"] if isinstance(d.get("status"), int) else 200
    if data.get("type") == "failure":
        return int(data["status"]), "a SvelteKit action `failure` envelope with status %s%s" % (
            data["status"], _devalue_words(data.get("data")))
    if data.get("type") == "error":
        status: int = data["status"] if isinstance(data.get("status"), int) else http if http >= 400 else 500
        return status, "a SvelteKit action `error` envelope (%r)" % _short(data["error"].get("message") or "", 120)
    nodes: List[Any] = data["nodes"] if data.get("type") == "data" and isinstance(data.get("nodes"), list) else []
    for node in nodes:
        if isinstance(node, dict) and node.get("type") == "error":
            status = node["status"] if isinstance(node.get("status"), int) else 500
            err = node["error"] if isinstance(node.get("error"), dict) else {}
            return status, "a SvelteKit `__data.json` `error` node with status %s (%r): the page renders its " \
                "error page" % (status, _short(err.get("message") or "", 120))
    return None


def _read_sveltekit_action(d: dict) -> Optional[str]:
    data = _sveltekit_envelope(d)
    if data is None or _sveltekit_data_url(d):
        return None
    failed = _sveltekit_failure(d)
    if failed:
        return "its answer is %s" % failed[1]
    return None


def _read_sveltekit_data(d: dict) -> Optional[str]:
    failed = _sveltekit_failure(d) if _sveltekit_data_url(d) else None
    return "its answer is %s" % failed[1] if failed else None


def _read_sveltekit_redirect(d: dict) -> Optional[str]:
    data = _sveltekit_envelope(d)
    if data is None or data.get("type") != "redirect":
        return None
    return "it redirects to %s (a SvelteKit `redirect` envelope%s)" % (
        data.get("location"), ", %s" % data["status"] if isinstance(data.get("status"), int) else "")


def _read_sveltekit_success(d: dict) -> Optional[str]:
    data = _sveltekit_envelope(d)
    if data is None or data.get("type") != "success":
        return None
    return "a SvelteKit action `success` envelope with status %s" % data["status"]


_TURBO_STREAM = re.compile(r'<turbo-stream\b[^>]*\baction="([a-z_-]+)"[^>]*?(?:\btargets?="([^"]*)")?', re.I)


def _read_turbo_stream(d: dict) -> Optional[str]:
    """Hotwire Turbo: a form's answer as `text/vnd.turbo-stream.html`, `<turbo-stream action=…
    target=…>` elements the page applies: an ordinary answer (its status says how it went)."""
    body = d.get("responseBody")
    if "turbo-stream" not in _header(d, "content-type") and not (
            isinstance(body, str) and body.lstrip().startswith("<turbo-stream")):
        return None
    steps = ["%s #%s" % (m.group(1), m.group(2)) if m.group(2) else m.group(1)
             for m in _TURBO_STREAM.finditer(body if isinstance(body, str) else "")]
    return "a Turbo Stream answer%s" % (" (%s)" % ", ".join(steps[:4]) if steps else "")


class _WireFormat:
    """One framework's answer read for what it means: `meaning` is "redirect" (not queued work, not a
    failure), "failure" (a failure inside a 2xx) or "answer" (the framework's ordinary answer: no
    failure, not queued work); `read(call)` says so in a phrase, or None.  A failure whose answer carries
    a status of its own (a SvelteKit envelope) is a failed request with that status for every verdict
    rule: the bridge reads it into the call as it arrives (_take_wire_status).  `fail`, for an ordinary
    answer, is the body the framework itself sends when that write fails (what `verify --teeth` replays
    as the framework's failure, under the same HTTP status and headers)."""

    __slots__ = ("name", "meaning", "read", "fail")

    def __init__(self, name: str, meaning: str, read: Callable[[dict], Optional[str]],
                 fail: Optional[str] = None) -> None:
        self.name = name
        self.meaning = meaning
        self.read = read
        self.fail = fail


# a SvelteKit action's `fail(400, {message})`, its data serialised by devalue as SvelteKit does
_SVELTEKIT_FAILURE = json.dumps({"type": "failure", "status": 400, "data": json.dumps(
    [{"message": 1}, "reticle verify --teeth: this write failed on purpose"], separators=(",", ":"))})


_WIRE_FORMATS: Tuple[_WireFormat, ...] = (
    _WireFormat("single-fetch-redirect", "redirect", _read_single_fetch),
    _WireFormat("server-action", "failure", _read_server_action),
    _WireFormat("dash-callback", "failure", _read_dash_callback),
    _WireFormat("json-callback", "failure", _read_json_callback),
    _WireFormat("sveltekit-action-failure", "failure", _read_sveltekit_action),
    _WireFormat("sveltekit-data-error", "failure", _read_sveltekit_data),
    _WireFormat("sveltekit-action-redirect", "redirect", _read_sveltekit_redirect),
    _WireFormat("sveltekit-action-success", "answer", _read_sveltekit_success, _SVELTEKIT_FAILURE),
    _WireFormat("turbo-stream", "answer", _read_turbo_stream),
)


def _take_wire_status(d: dict) -> None:
    """A completed call whose 2xx answer is a framework's failure with a status of its own (see
    _sveltekit_failure) becomes that failed request: `status` is the envelope's, `httpStatus` the
    wire's, `ok` false, and `statusNote` says why, so `net status: 200` does not hold over it and every
    rule reads it as failed."""
    status = d.get("status")
    if not isinstance(status, int) or not 200 <= status < 300 or d.get("httpStatus") is not None:
        return
    failed = _sveltekit_failure(d)
    if failed is None:
        return
    d["httpStatus"] = status
    d["status"] = failed[0]
    d["ok"] = False
    d["statusNote"] = "HTTP %s carrying %s" % (status, failed[1])


def _framework_failure(d: dict, answer: Optional[dict]) -> Optional[dict]:
    """The answer a completed write `d` would have got had it failed in its framework's own way (a
    wire format's `fail`), as `answer` (_replayable_answer) has the rest: same status and headers, the
    failure's body; None when no wire format reads `d` or has one."""
    if answer is None:
        return None
    for w in _WIRE_FORMATS:
        if w.fail is not None and w.read(d):
            return dict(answer, body=w.fail)
    return None


def _wire_meaning(d: dict) -> Optional[Tuple[str, str]]:
    """(meaning, phrase) of the first wire format that reads call `d`, or None."""
    for w in _WIRE_FORMATS:
        said = w.read(d)
        if said:
            return w.meaning, said
    return None


def _queued(d: dict, window: List[dict]) -> bool:
    """A 202 is queued work only when nothing says otherwise: its answer (a single-fetch redirect, a
    failure) or the page's next steps (a route change or a new document after it)."""
    if _wire_meaning(d) is not None:
        return False
    after = [e for e in window if e["type"] == "net.request" and e["data"] is d]
    t = after[0]["t"] if after else 0.0
    return not any(e["t"] > t and (e["type"] == "route.change" or (e["type"] == "net.request" and e["data"].get(
        "initiator") == "document")) for e in window)


def _partial_failure(body: Any) -> Optional[str]:
    """The failure a 2xx JSON body owns up to, as a phrase, else None: a top-level ok/success false or a
    non-empty error field, or items of a results-like list flagged so ("3 of 10 results FAILED").
    A body that is not a JSON object or array says nothing."""
    if not isinstance(body, str) or not body.strip().startswith(("{", "[")):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None

    def flagged(obj: Any) -> Optional[str]:
        if not isinstance(obj, dict):
            return None
        for k in ("ok", "success", "succeeded"):
            if obj.get(k) is False:
                return "%s: false" % k
        for k in ("error", "errors", "errorMessage", "failureReason"):
            v = obj.get(k)
            if v not in (None, "", [], {}, False):
                return "%s: %s" % (k, _short(v, 80))
        return None

    top = flagged(data)
    if top:
        return "the body says %s" % top
    if isinstance(data, dict):
        for k in ("results", "items", "data", "records", "responses"):
            arr = data.get(k)
            if isinstance(arr, list) and arr:
                bad = [flagged(x) for x in arr]
                bad = [b for b in bad if b]
                if bad:
                    return "%d of %d %s FAILED (%s)" % (len(bad), len(arr), k, bad[0])
                break
    return None


# ---- the timeline of a step: what happened when, as data and as a picture ----
# A step's window drawn on its own clock (0: the act): each request as a bar (its sender named), the
# server's record under the request it answers, messages from shown to gone, console and uncaught errors
# as points, the end where it was judged and the verdict.  The data is compact (kept in verify's results
# file for the report); _timeline_svg draws it as SVG with no script and no external asset.

TIMELINE_ROWS = 40   # rows of one timeline, at most (the rest counted in `more`)


def _timeline(window: List[dict], t0: float, end: float, verdict: str, act: str) -> dict:
    """The timeline of a step whose act was at `t0` (daemon clock, ms) and was judged at `end`."""
    rows: List[dict] = []   # in the window's order; a server record right under its request
    records = {(r.get("documentId"), str(r.get("requestId"))): r for r in _server_records(window)}
    marks = {str(e["data"].get("requestId")): (e.get("doc"), str(e["data"].get("serverMark")))
             for e in window if e["type"] == "net.pending" and e["data"].get("serverMarked")}
    done = {str(e["data"].get("requestId")) for e in window if e["type"] == "net.request"}
    gone = {str(e["data"].get("text")): e["t"] for e in window if e["type"] == "ui.gone"}
    for e in window:
        d, kind, t = e["data"], e["type"], round(e["t"] - t0)
        if kind in ("net.request", "net.pending") and not _is_dev(d):
            if kind == "net.pending" and str(d.get("requestId")) in done:
                continue
            ms = d.get("ms") if isinstance(d.get("ms"), (int, float)) else 0
            path = urllib.parse.urlsplit(str(d.get("url") or "")).path or str(d.get("url") or "?")
            row = {"k": "req", "s": max(0, round(t - ms)) if kind == "net.request" else t,
                   "e": t if kind == "net.request" else None,
                   "t": _short("%s %s %s" % (str(d.get("method") or "GET").upper(), path,
                                             d.get("status") or d.get("error") or "pending"), 120),
                   "fail": kind == "net.request" and _call_failed(d)}
            if d.get("at"):
                row["at"] = _short(str(d["at"]), 160)
            rows.append(row)
            record = records.get(marks.get(str(d.get("requestId")), (None, "")))
            if record is not None:
                rows.append({"k": "srv", "s": row["e"] if row["e"] is not None else t,
                             "t": _short(_server_line(record), 160), "fail": bool(record.get("exception"))})
        elif kind in ("ui.alert", "ui.status"):
            text = str(d.get("text") or "")
            until = gone.get(text)
            rows.append({"k": "msg", "s": t, "e": round(until - t0) if until is not None and until >= e["t"] else None,
                         "t": _short(repr(text), 120), "fail": _is_failure_ui(d)})
            if d.get("at"):
                rows[-1]["at"] = _short(str(d["at"]), 160)
        elif kind in ("console.error", "error.uncaught"):
            rows.append({"k": "err", "s": t, "fail": True, "t": _short("%s: %s" % (
                "uncaught" if kind == "error.uncaught" else "console.error", d.get("text") or d.get("message") or ""),
                120)})
            if d.get("at"):
                rows[-1]["at"] = _short(str(d["at"]), 160)
    groups: List[List[dict]] = []  # drawn by start: a request (and its record), a message, an error
    for row in rows:
        if row["k"] == "srv" and groups:
            groups[-1].append(row)
        else:
            groups.append([row])
    groups.sort(key=lambda g: g[0]["s"])
    rows = [row for g in groups for row in g]
    out = {"act": _short(act, 120), "end": max(0, round(end - t0)), "verdict": verdict, "rows": rows[:TIMELINE_ROWS]}
    if len(rows) > TIMELINE_ROWS:
        out["more"] = len(rows) - TIMELINE_ROWS
    return out


_TIMELINE_COLOURS = {"req": ("#2e7d32", "#c62828"), "srv": ("#5c6bc0", "#c62828"), "msg": ("#6d6d6d", "#c62828"),
                     "err": ("#c62828", "#c62828")}


def _timeline_svg(tl: Any) -> str:
    """A timeline (_timeline's data, or a results file's: read defensively) as one SVG document: a label
    column, bars on the step's own clock, the act and the verdict as lines; every text escaped."""
    tl = tl if isinstance(tl, dict) else {}
    rows = [r for r in tl.get("rows") or [] if isinstance(r, dict)][:TIMELINE_ROWS]
    end: float = float(tl["end"]) if isinstance(tl.get("end"), (int, float)) else 0.0
    times = [float(r[k]) for r in rows for k in ("s", "e") if isinstance(r.get(k), (int, float))]
    span = min(max([end, 1.0] + times), 1e9)
    left, width, line = 330.0, 420.0, 30
    height = 46 + line * len(rows) + 20

    def x(ms: Any) -> float:
        return left + width * min(max(float(ms) if isinstance(ms, (int, float)) else 0.0, 0.0), span) / span
    verdict = str(tl.get("verdict") or "?")
    parts = [_html_of('<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" '
                      'font-family="sans-serif" font-size="11" role="img"><title>%s</title>'
                      '<rect width="100%%" height="100%%" fill="#fff"/>',
                      int(left + width + 20), height, int(left + width + 20), height,
                      "timeline of %s: %s" % (tl.get("act"), verdict)),
             _html_of('<text x="4" y="16" font-weight="bold">act: %s</text>', _short(str(tl.get("act") or ""), 60)),
             _html_of('<line x1="%s" y1="22" x2="%s" y2="%s" stroke="#333"/><text x="%s" y="34">0 ms</text>',
                      left, left, height - 16, left + 2)]
    for i, r in enumerate(rows):
        y = 46 + i * line
        kind = str(r.get("k")) if r.get("k") in _TIMELINE_COLOURS else "msg"
        colour = _TIMELINE_COLOURS[kind][1 if r.get("fail") else 0]
        label = ("↳ " if kind == "srv" else "") + str(r.get("t") or "")
        parts.append(_html_of('<text x="%s" y="%s" fill="%s"><title>%s</title>%s</text>', 4 if kind != "srv" else 16,
                              y + 10, colour, label, _short(label, 52)))  # the whole line as its tooltip
        if r.get("at"):
            parts.append(_html_of('<text x="%s" y="%s" fill="#555" font-size="10">%s %s</text>',
                                  4 if kind != "srv" else 16, y + 22,
                                  {"msg": "rendered by", "req": "sent by"}.get(kind, "at"),
                                  _short(str(r["at"]), 56)))
        x1 = x(r.get("s"))
        if kind in ("err", "srv"):
            parts.append(_html_of('<circle cx="%s" cy="%s" r="5" fill="%s"/>', round(x1, 1), y + 8, colour))
            continue
        x2 = x(r["e"]) if isinstance(r.get("e"), (int, float)) else x(span)
        parts.append(_html_of('<rect x="%s" y="%s" width="%s" height="12" rx="2" fill="%s"%s/>', round(x1, 1), y + 2,
                              round(max(x2 - x1, 3.0), 1), colour,
                              _Markup(' fill-opacity="0.35" stroke-dasharray="3 2" stroke="%s"' % colour)
                              if r.get("e") is None else ""))
    ex, tone = round(x(end), 1), {"yes": "#2e7d32", "no": "#c62828"}.get(verdict, "#b26a00")
    parts.append(_html_of('<line x1="%s" y1="22" x2="%s" y2="%s" stroke="%s" stroke-dasharray="4 3"/><text x="%s" '
                          'y="%s" text-anchor="end" font-weight="bold" fill="%s">judged at %s ms: %s</text>',
                          ex, ex, height - 16, tone, ex, height - 4, tone, round(end), verdict))
    if isinstance(tl.get("more"), int):
        parts.append(_html_of('<text x="4" y="%s" fill="#555">%s more not drawn</text>', height - 4, tl["more"]))
    parts.append(_Markup("</svg>"))
    return str(_html_join(parts))
