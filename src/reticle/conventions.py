"""Failure conventions.

How apps say that something failed, as data: the failure UIs of the common component libraries and
frameworks (toasts, alerts, field errors), route announcers, and the plain words of failure.  The
in-page SDK receives the same tables, so both sides read one convention.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from typing import Any, List, Optional, Tuple

from .events import _calls
from .util import _short


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
    now.  An answer names what it found "in a <name> message", or by the row's `label` where the
    element is no message (a form's list of validation errors).  tests/test_horizon.py has a row
    per record, both ways."""

    __slots__ = ("name", "selector", "level", "example", "success", "label")

    def __init__(self, name: str, selector: str, level: Optional[str], example: str, success: str,
                 label: str = "") -> None:
        self.name = name
        self.selector = selector
        self.level = level
        self.example = example      # HTML that must read as a failure
        self.success = success      # HTML beside it that must not
        self.label = label          # how an answer names it ("in a Rails validation-errors box"), or ""


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
    # the scaffold's box listing a model's validation errors above its form (no flash message)
    _FailureUi("rails-errors", "#error_explanation", "error",
               '<div id="error_explanation"><h2>1 error prohibited this note from being saved:</h2>'
               '<ul><li>Title can\'t be blank</li></ul></div>',
               '<div id="notice">Note was successfully updated.</div>', "in a Rails validation-errors box"),
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


def _sdk_conventions() -> dict:
    """The convention tables as the in-page SDK reads them (its config's `conventions`, filled in by the
    daemon when it serves or injects the SDK): the failure UIs as [source, selector, level] rows, the
    plain failure text as two lists of regex sources (_PLAIN_FAILURE), and the route announcers' selectors
    as one selector list.  Both sides read one table."""
    return {"failureUi": [[r.name, r.selector, r.level] for r in _FAILURE_UI],
            "plainFailure": [list(part) for part in _PLAIN_FAILURE],
            "plainSuccess": list(_PLAIN_SUCCESS),
            "routeAnnouncers": ",".join(s for _, s in _ROUTE_ANNOUNCERS)}


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
# Words of success on the page a posted form's answer brought (a form that came back without a redirect
# and marks no error, but says "Note saved."): the SDK reads them outside the form and the page's chrome.
_PLAIN_SUCCESS: Tuple[str, ...] = (
    r"\b(saved|created|updated|added|deleted|removed|sent|submitted|received|subscribed|registered|published)\b",
    r"\bsuccess(ful(ly)?)?\b", r"\bthank(s| you)\b",
)
_PLAIN_FAILURE_RES = ([re.compile(s, re.I) for s in _PLAIN_FAILURE[0]],
                      [re.compile(s, re.I) for s in _PLAIN_FAILURE[1]])


def _plain_failure(text: str) -> bool:
    """Does a plain text read as a failure (_PLAIN_FAILURE: a pattern, and no negative)?"""
    yes, no = _PLAIN_FAILURE_RES
    return any(r.search(text) for r in yes) and not any(r.search(text) for r in no)


def _is_failure_ui(d: dict) -> bool:
    """A message the user is shown tells a failure: its convention says so (a field marked invalid,
    a declared error toast, an error row of _FAILURE_UI), or its text is a failure phrase with no
    negation ("0 errors found" is a success).  What an answer put on the page outside the act's form
    (scope "answer"), and a mark in the act's form that was there before the act (`again`), tell a
    failure only where the act's own answer carried them (_carried_failures)."""
    text = str(d.get("text", ""))
    if d.get("scope") == "answer" or (d.get("source") == "marker" and d.get("scope") == "form" and d.get("again")):
        return False
    if d.get("source") == "text":  # plain text: a failure only in the act's own form (see _failure_text), or
        # on the page a posted form came back on, unredirected (the SDK's formCameBack)
        return d.get("scope") in ("form", "returned") and _plain_failure(text)
    worded = _FAILURE_TEXT.search(text) and not _NO_FAILURE.search(text)
    return d.get("level") == "error" or d.get("source") == "invalid" or bool(worded)


def _answer_text(body: Any) -> str:
    """An answer's body as the text it renders: tags out, entities read, spaces one."""
    if not isinstance(body, str):
        return ""
    return " ".join(html.unescape(re.sub(r"<[^>]*>", " ", body)).split())


def _swapped_in(window: List[dict], answers: Optional[List[dict]]) -> List[Tuple[dict, bool]]:
    """What answers put on the page that may tell a failure, each with whether one of `answers` (the act's
    calls; every call of the window when None) carried it: the SDK's ui.alert events of an element marked as
    an error (source "marker") or of plain failure text (source "text", _PLAIN_FAILURE) that appeared after
    a response came, outside the act's form (scope "answer": an htmx fragment after the form, appended to a
    list, swapped out of band into the header), or a mark in the act's form that was there before the act
    (`again`).  Carried: its text is in the text an answer's body renders (_answer_text; spaces aside, since a
    tag inside the message, `<b>taken</b>.`, is no space on the page), and not in what a request of the window
    sent (the person's own words echoed back: a new item, not a message)."""
    calls = _calls(window)
    bodies = ["".join(_answer_text(d["responseBody"]).split()) for d in (calls if answers is None else answers)
              if isinstance(d.get("responseBody"), str)]
    sent = [urllib.parse.unquote_plus(d["requestBody"]) for d in calls if isinstance(d.get("requestBody"), str)]
    out = []
    for e in window:
        d = e["data"]
        if e["type"] != "ui.alert" or d.get("source") not in ("text", "marker") or (
                d.get("scope") != "answer" and not (d.get("scope") == "form" and d.get("again"))):
            continue
        text = " ".join(str(d.get("text", "")).split())
        if not text or (d.get("source") == "text" and not _plain_failure(text)) or any(text in s for s in sent):
            continue
        out.append((d, any("".join(text.split()) in b for b in bodies)))
    return out


def _carried_failures(window: List[dict], answers: Optional[List[dict]] = None) -> List[dict]:
    """Failures the act's own answer carried onto the page, wherever they landed (_swapped_in): an element
    marked as an error, or plain failure text that was not only put back in place of the same text (`again`:
    a list re-rendered whole puts back a row that says "failed", see _answer_failure_text)."""
    return [d for d, carried in _swapped_in(window, answers)
            if carried and (d.get("source") == "marker" or not d.get("again"))]


def _answer_failure_text(window: List[dict], answers: Optional[List[dict]] = None) -> List[dict]:
    """Plain failure text an answer put on the page outside the act's form that is not known to be the act's
    failure: it is in the body of an answer of the window, but only took the place of the same text, or came
    in an answer that is not one of the act's `answers` (rule 13b: unknown)."""
    carried = _carried_failures(window, answers)
    in_any = [d for d, found in _swapped_in(window, None) if found and d.get("source") == "text"]
    return [d for d in in_any if not any(d is c for c in carried)]


def _error_ui(window: List[dict], answers: Optional[List[dict]] = None) -> List[dict]:
    """Errors the user was shown in the window (ui.alert events, see _is_failure_ui), and the failures the
    act's answer carried onto the page (_carried_failures; `answers`: the act's calls, or all the window's)."""
    return [e["data"] for e in window if e["type"] in ("ui.alert", "ui.status") and _is_failure_ui(e["data"])] + \
        _carried_failures(window, answers)


_FAILURE_LABELS = {r.name: r.label for r in _FAILURE_UI if r.label}


def _ui_label(d: dict) -> str:
    source = d["source"] if isinstance(d.get("source"), str) else ""  # the page's: it may send any JSON there
    where = {"invalid": "beside the field %r" % d.get("field", "?"), "toast": "in a toast",
             "text": "as plain text %s" % ("in the act's form" if d.get("scope") == "form" else
                                           "on the page the posted form came back on" if d.get("scope") == "returned"
                                           else "where the act's answer went"),
             "marker": "marked as an error %s" % ("where the act's answer put it" if d.get("scope") == "answer" else
                                                  "in the act's form" if d.get("scope") == "form" else
                                                  "on the page the posted form came back on"),
             "alertdialog": "in a dialog", "assertive": "in an assertive live region", "alert": "as an alert"}.get(
        source, _FAILURE_LABELS.get(source) or ("in a%s %s message" % ("n" if source[0] in "aeiou" else "", source)
                                                if source else "as an alert"))
    return "%r %s%s" % (_short(str(d.get("text", "")), 120), where,
                        ", rendered by %s" % d["at"] if isinstance(d.get("at"), str) and d["at"] else "")
