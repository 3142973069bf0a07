"""The verdict rules as pure functions, from tables: one row per clause of
`_decide` (in its documented order) and one per contradiction kind.  No
browser: a window is a list of events, a session's knowledge a `_Known`."""

import json
import re

import pytest

import reticle
from _dialects_app import ASTRO_DATA, ASTRO_DATA_FAILURE, ASTRO_ERROR, DEVALUE
from _events import call
from _events import ev

parse = reticle.parse_predicate


def known(open_requests=(), blind_spots=None, loss=None, origin="", background=(), unreadable=None, polled=()):
    return reticle._Known(list(open_requests), dict(blind_spots or {}), loss, origin, tuple(background),
                          dict(unreadable or {}), polled=tuple(polled))


NET = {"kind": "net", "method": "POST", "urlContains": "/api/save", "status": 200}
SETTLE = {"kind": "settled", "quietMs": 300}
PASS = {"pass": True, "evidence": {"status": 200}}
FAIL = {"pass": False, "failureReason": "no completed request matched"}
MISSED = {"pass": False, "assertion": "text.present", "failureReason": "no text containing 'Paid' on the page"}
FRAMED = known(unreadable={"cross-origin-iframe": (1, "https://pay.example/card")})

def srv(t, **kw):
    """A server record of the middleware (Server truth) for POST /api/save, as the daemon stitches it."""
    data = {"method": "POST", "path": "/api/save", "status": 200, "view": "save", "exception": None, "logged": [],
            "writes": [], "watched": ["sqlalchemy"]}
    data.update(kw)
    return ev(t, "server.request", **data)


def missing(*labels):
    k = known()
    k.server_missing = tuple(labels)
    return k


def untied(*pairs):
    """A form post of the act no server record could be tied to (tying.py): (label, why or "")."""
    k = missing(*(label for label, _ in pairs))
    k.server_untied = tuple(pairs)
    return k


def tables(*names):
    """What a tab's server records have written (the tables its paths may name)."""
    k = known()
    k.server_tables = frozenset(names)
    return k


INSERTED = {"op": "insert", "table": "profile", "rows": 1, "committed": True}
SAVED = {"kind": "text", "contains": "Saved"}

# (id, result, window, known, predicate, flags, expected verified, expected reason, a word of `because`)
DECIDE = [
    ("inconclusive", {"pass": False, "inconclusive": "the page could not answer"}, [], known(), NET, {},
     "unknown", "inconclusive", "could not be evaluated"),
    ("observation-lost", {"pass": False, "observationLost": True}, [], known(), NET, {},
     "unknown", "observation_lost", "disconnected"),
    ("assertion-failed", FAIL, [], known(), NET, {}, "no", "assertion_failed", "did not hold"),
    ("presence-beside-a-frame-it-cannot-read", MISSED, [], FRAMED, {"kind": "text", "contains": "Paid"}, {},
     "unknown", "presence_blind_spot", "1 cross-origin frame(s) (https://pay.example/card)"),
    ("a-failed-request-stands-beside-the-frame", FAIL, [], FRAMED, NET, {}, "no", "assertion_failed", "did not hold"),
    ("all-of-a-miss-and-a-failed-request-is-no", {"pass": False, "assertion": "allOf", "failureReason": "x",
     "evidence": [MISSED, dict(FAIL, assertion="net")]}, [], FRAMED,
     {"kind": "allOf", "predicates": [{"kind": "text", "contains": "Paid"}, NET]}, {}, "no", "assertion_failed", "x"),
    ("any-of-a-miss-may-be-in-the-frame", {"pass": False, "assertion": "anyOf", "failureReason": "none held",
     "evidence": [MISSED, dict(FAIL, assertion="net")]}, [], FRAMED,
     {"kind": "anyOf", "predicates": [{"kind": "text", "contains": "Paid"}, NET]}, {}, "unknown",
     "presence_blind_spot", "may be there"),
    ("a-miss-with-the-whole-page-readable", MISSED, [], known(), {"kind": "text", "contains": "Paid"}, {},
     "no", "assertion_failed", "no text"),
    # the act showed an error the page's texts no longer name (the assert came late): the `no` names it
    ("a-miss-names-the-error-the-act-showed", MISSED, [call(1), ev(2, "ui.alert", text="The server refused the change.",
     source="alert")], known(), {"kind": "text", "contains": "Paid"}, {}, "no", "assertion_failed",
     "no text containing 'Paid' on the page; the page showed 'The server refused the change.'"),
    ("contradicted", PASS, [call(1, status=500), ev(2, "dom.added")], known(),
     {"kind": "text", "contains": "Saved"}, {}, "no", "contradicted", "ui-advanced-request-failed"),
    ("evidence-incomplete", PASS, [call(1), call(2)], known(), {"kind": "text", "contains": "Saved"},
     {"action_since": 0.0}, "unknown", "evidence_incomplete", "duplicate-request"),
    ("absence-blind-spot", PASS, [], known(blind_spots={"cross-origin-iframe": 1}),
     {"kind": "text", "contains": "Error", "absent": True}, {}, "unknown", "absence_blind_spot", "cross-origin-iframe"),
    ("already-true", PASS, [call(1)], known(), NET, {"already_true": True}, "unknown", "already_true", "already true"),
    ("transport-overflow", PASS, [call(1), ev(2, "blind-spot", kind="transport-overflow", count=7)], known(), NET, {},
     "unknown", "evidence_lost", "dropped 7"),
    ("evicted", PASS, [call(1)], known(loss={"evicted": 503}), NET, {}, "unknown", "evidence_lost", "503"),
    ("accepted-202", PASS, [call(1, status=202)], known(), NET, {}, "unknown", "outcome_pending", "202"),
    ("body-unread", PASS, [call(1, body=None)], known(), NET, {}, "unknown", "outcome_unread", "not captured"),
    ("write-in-flight", PASS, [call(1)], known(open_requests=[{"method": "PUT", "url": "/api/other", "startedAt": 5.0}]),
     NET, {}, "unknown", "request_in_flight", "PUT /api/other"),
    ("implicit-settle-timed-out", {"pass": False, "timedOut": True}, [ev(1, "dom.added")], known(), SETTLE, {"act": True},
     "unknown", "unsettled", "never settled"),
    ("implicit-settle-with-no-effect", {"pass": True, "evidence": {}}, [], known(), SETTLE, {"act": True},
     "unknown", "no_effect", "no observable effect yet"),
    ("implicit-settle-over-an-error-alert", {"pass": True, "evidence": {}},
     [ev(1, "dom.added"), ev(2, "ui.alert", text="Save failed", source="alert")], known(), SETTLE, {"act": True},
     "no", "failure_observed", "'Save failed' as an alert"),
    ("implicit-settle-over-a-console-error", {"pass": True, "evidence": {}},
     [ev(1, "dom.added"), ev(2, "console.error", text="TypeError: x is undefined")], known(), SETTLE, {"act": True},
     "no", "failure_observed", "TypeError"),
    ("implicit-settle-over-a-failed-write", {"pass": False, "timedOut": True}, [call(1, status=500)], known(), SETTLE,
     {"act": True}, "no", "failure_observed", "POST /api/save answered 500"),
    ("implicit-settle-over-an-invalid-field", {"pass": True, "evidence": {}},
     [ev(1, "ui.alert", text="This field is required.", source="invalid", field="Name")], known(), SETTLE,
     {"act": True}, "no", "failure_observed", "beside the field 'Name'"),
    ("implicit-settle-with-an-effect", {"pass": True, "evidence": {"settled": True}}, [ev(1, "net.ws", direction="in",
     transport="ws", url="ws://x/socket", data="{}")], known(), SETTLE, {"act": True}, "yes", "proved", "settled"),
    ("error-shown-after-a-200", PASS, [call(1), ev(2, "ui.alert", text="Could not save your profile", source="alert")],
     known(), NET, {}, "no", "contradicted", "error-shown"),
    ("an-error-the-predicate-asks-for", PASS, [call(1, status=409), ev(2, "ui.alert", text="Name already taken",
     source="alert")], known(), {"kind": "text", "contains": "already taken"}, {}, "yes", "proved", "held"),
    ("a-success-alert-is-no-error", PASS, [call(1), ev(2, "ui.alert", text="Profile saved", source="alert")],
     known(), NET, {}, "yes", "proved", "no channel disagreeing"),
    ("proved", PASS, [call(1)], known(), NET, {}, "yes", "proved", "no channel disagreeing"),
    # lost evidence makes a failed presence check unknown, never a false no
    ("missing-evidence-may-be-evicted", FAIL, [], known(loss={"evicted": 503}), NET, {},
     "unknown", "evidence_lost", "503 event(s) of this window were evicted"),
    ("a-violation-stands-despite-loss", {"pass": False, "decided": True, "failureReason": "1 console error"},
     [ev(1, "console.error", text="boom")], known(loss={"evicted": 9}), {"kind": "console", "level": "error", "absent": True},
     {}, "no", "assertion_failed", "1 console error"),
    ("a-live-check-stands-despite-loss", FAIL, [], known(loss={"sampled": 40}), {"kind": "text", "contains": "Saved"}, {},
     "no", "assertion_failed", "did not hold"),
    # writes the act did not cause, or that have no body, are never outcome_unread
    ("204-autosave", PASS, [call(1), call(2, method="PUT", url="/api/autosave", status=204, body=None)], known(), NET, {},
     "yes", "proved", "no channel disagreeing"),
    ("periodic-autosave", PASS, [call(1), call(2, method="PUT", url="/api/autosave", body=None)],
     known(background=("PUT /api/autosave",)), NET, {}, "yes", "proved", "held"),
    ("started-before-the-act", PASS, [call(1), call(2, method="PUT", url="/api/draft", body=None, durationMs=900)],
     known(), NET, {}, "yes", "proved", "held"),
    ("another-origin", PASS, [call(1), call(2, url="http://metrics.example/collect", body=None)],
     known(origin="http://127.0.0.1:8000"), NET, {}, "yes", "proved", "held"),
    ("the-acts-own-unread-write", PASS, [call(1), call(2, url="http://127.0.0.1:8000/api/other", body=None)],
     known(origin="http://127.0.0.1:8000"), NET, {}, "unknown", "outcome_unread", "/api/other"),
    ("proved-beside-open-reads", PASS, [call(1), ev(2, "net.pending", method="GET", url="/poll", requestId="p"),
                                        ev(3, "dom.added")],
     known(), NET, {}, "yes", "proved", "noted, and unable to undo it: request-never-settled"),
    ("proved-by-settle", {"pass": True, "evidence": {"settled": True}}, [call(1)], known(),
     {"kind": "settled", "quietMs": 300}, {"act": True}, "yes", "proved", "settled"),
    # Server truth in every verdict: what the server did for the act's requests
    ("server-record-never-came", PASS, [call(1)], missing("POST /api/save"), SAVED, {},
     "unknown", "server_unreported", "the record of POST /api/save had not come"),
    ("server-record-could-not-be-tied", PASS, [call(1)], untied(("POST /journal", "")), SAVED, {},
     "unknown", "server_untied", "no server record could be tied to POST /journal"),
    ("server-record-tied-to-neither-of-two-posts", PASS, [call(1)],
     untied(("POST /journal", "2 requests of POST /journal fit it by time")), SAVED, {},
     "unknown", "server_untied", "(2 requests of POST /journal fit it by time); open the page as a device (reticle_open)"),
    ("server-wrote-nothing", PASS, [call(1), srv(2)], known(), SAVED, {},
     "unknown", "server_wrote_nothing", 'read it back'),
    ("server-wrote-nothing-under-the-settle", {"pass": True, "evidence": {"settled": True}}, [call(1), srv(2)],
     known(), SETTLE, {"act": True}, "unknown", "server_wrote_nothing", "persisted nothing"),
    ("server-wrote-nothing-declared", PASS, [call(1), srv(2)], known(),
     {"kind": "server", "urlContains": "/api/save", "writes": {"count": 0}}, {}, "yes", "proved", "0 writes"),
    ("server-unwatched-writes-are-not-nothing", PASS, [call(1), srv(2, watched=[])], known(), SAVED, {},
     "yes", "proved", "writes not watched"),
    ("server-rolled-back", PASS, [call(1), srv(2, writes=[dict(INSERTED, committed=False, note="rolled back")])],
     known(), SAVED, {}, "no", "contradicted", "rolled it back under POST /api/save → 200"),
    ("server-background-task-raised", PASS, [call(1), srv(2, writes=[INSERTED], exception={
        "type": "RuntimeError", "message": "audit down", "frames": ["main.py:78 audit_task"],
        "after": "a background task"})], known(), SAVED, {}, "no", "contradicted", "main.py:78 audit_task"),
    ("server-named-in-a-yes", PASS, [call(1), srv(2, writes=[INSERTED])], known(), SAVED, {}, "yes", "proved",
     "the server: POST /api/save → 200, view save, 1 write (insert profile ×1)"),
    ("server-named-in-a-no", FAIL, [call(1), srv(2)], known(), NET, {}, "no", "assertion_failed",
     "the server: POST /api/save → 200, view save, 0 writes"),
    # one rule set over every record, whatever its source (issue 36)
    ("a-303-after-a-form-post-that-wrote-nothing", {"pass": True, "evidence": {"settled": True}},
     [call(1, status=303), srv(2, status=303)], known(), SETTLE, {"act": True}, "unknown", "server_wrote_nothing",
     "POST /api/save → 303 but persisted nothing"),
    ("spans-that-wrote-nothing-from-a-service-with-database-spans", PASS,
     [call(1), srv(2, watched=None, source="otel", dbTraced=True, service="shop")], known(), SAVED, {},
     "unknown", "server_wrote_nothing", "its database spans (service shop)"),
    ("spans-of-a-service-without-database-spans-say-nothing-of-writes", PASS,
     [call(1), srv(2, watched=None, source="otel", dbTraced=False)], known(), SAVED, {},
     "yes", "proved", "writes unknown (no database spans)"),
    ("a-write-whose-commit-no-span-shows", PASS,
     [call(1), srv(2, watched=None, source="otel", dbTraced=True, dbScopes=["opentelemetry.instrumentation.sqlalchemy"],
                   writes=[dict(INSERTED, committed=None, note="its commit is not traced")])], known(), SAVED, {},
     "unknown", "server_commit_unknown", "Reticle's Python middleware sees commits"),
    ("a-write-whose-commit-no-span-shows-under-the-settle", {"pass": True, "evidence": {"settled": True}},
     [call(1), srv(2, watched=None, source="otel", dbTraced=True, writes=[dict(INSERTED, committed=None)])],
     known(), SETTLE, {"act": True}, "unknown", "server_commit_unknown", "no BEGIN or COMMIT"),
    ("the-wrong-row", PASS, [call(1), srv(2, path="/contacts/4/rename", writes=[
        {"op": "update", "table": "contacts", "rows": 1, "committed": True, "keys": [5]}])], known(), SAVED, {},
     "no", "contradicted", "POST /contacts/4/rename names row 4 of contacts, but the server updated contacts keyed 5"),
    ("the-named-row", PASS, [call(1), srv(2, path="/contacts/4/rename", writes=[
        {"op": "update", "table": "contacts", "rows": 1, "committed": True, "keys": [4]}])], known(), SAVED, {},
     "yes", "proved", "update contacts ×1 [key 4]"),
    ("a-parents-id-is-not-the-written-row", PASS, [call(1), srv(2, path="/projects/3/tasks/9", writes=[
        {"op": "update", "table": "projects", "rows": 1, "committed": True, "keys": [5]},
        {"op": "update", "table": "tasks", "rows": 1, "committed": True, "keys": [9]}])], known(), SAVED, {},
     "yes", "proved", "2 writes"),
    ("the-wrong-row-declared", PASS, [call(1), srv(2, path="/contacts/4/rename", writes=[
        {"op": "update", "table": "contacts", "rows": 1, "committed": True, "keys": [5]}])], known(),
     {"kind": "server", "writes": {"table": "contacts", "key": 5}}, {}, "yes", "proved", "key 5"),
    ("wrote-only-to-another-table", PASS, [call(1), srv(2, path="/api/contacts", writes=[
        {"op": "insert", "table": "audit", "rows": 1, "committed": True}])], tables("contact", "audit"), SAVED, {},
     "unknown", "server_wrote_elsewhere", "wrote (insert audit ×1), but nothing to contact"),
    ("wrote-to-the-table-its-path-names", PASS, [call(1), srv(2, path="/api/contacts", writes=[
        {"op": "insert", "table": "contact", "rows": 1, "committed": True},
        {"op": "insert", "table": "audit", "rows": 1, "committed": True}])], tables("contact", "audit"), SAVED, {},
     "yes", "proved", "2 writes"),
    ("a-path-naming-no-known-table", PASS, [call(1), srv(2, path="/login", writes=[
        {"op": "insert", "table": "sessions", "rows": 1, "committed": True}])], tables("sessions"), SAVED, {},
     "yes", "proved", "insert sessions"),
    ("a-driver-nothing-watches-is-named", PASS, [call(1), srv(2, unseen=["pymysql"])], known(), SAVED, {},
     "unknown", "server_wrote_nothing", "it may also write through pymysql, which nothing watches"),
]



@pytest.mark.parametrize("row", DECIDE, ids=[r[0] for r in DECIDE])
def test_decide(row):
    _, res, window, k, p, flags, verified, reason, word = row
    p = parse(p)
    action_since = flags.get("action_since")
    contradictions = reticle._contradictions(window, p, action_since)
    got = reticle._decide(dict(res), contradictions, window, k, 0.0, p,
                          already_true=flags.get("already_true", False), act=flags.get("act", False),
                          effect={"effect": {}})
    assert got[:2] == (verified, reason), got
    assert word in got[2], got[2]


@pytest.mark.parametrize("row", [r for r in DECIDE if r[7] in ("server_wrote_nothing", "server_wrote_elsewhere")],
                         ids=lambda r: r[0])
def test_advice_over_a_write_that_did_not_land_suggests_no_check_it_would_pass(row):
    """The answer over a save whose write did not land never suggests a predicate (a `{kind: ...}` to
    declare "0 writes" or the table it did write): following it made every failed save a yes."""
    _, res, window, k, p, flags, verified, reason, word = row
    got = reticle._decide(dict(res), reticle._contradictions(window, parse(p), flags.get("action_since")), window,
                          k, 0.0, parse(p), already_true=flags.get("already_true", False), act=flags.get("act", False),
                          effect={"effect": {}})
    assert got[1] == reason and "{kind" not in got[2] and "count: 0" not in got[2], got[2]
    assert "read it back" in got[2], got[2]


def test_decide_rules_apply_in_their_documented_order():
    """A failed predicate is `no` even when the window also holds a 202 and an open write;
    a contradiction outranks every `unknown` below it."""
    window = [call(1, status=202), call(2, status=500), ev(3, "dom.added")]
    k = known(open_requests=[{"method": "POST", "url": "/x", "startedAt": 1.0}])
    p = parse({"kind": "text", "contains": "Saved"})
    cs = reticle._contradictions(window, p, None)
    assert reticle._decide(dict(FAIL), cs, window, k, 0.0, p)[1] == "assertion_failed"
    assert reticle._decide(dict(PASS), cs, window, k, 0.0, p)[1] == "contradicted"
    doc = reticle._decide.__doc__
    order = ["inconclusive", "observation_lost", "failure_observed", "unsettled", "evidence_lost",
             "presence_blind_spot", "assertion_failed", "contradicted", "evidence_incomplete",
             "absence_blind_spot", "already_true", "outcome_pending", "outcome_unread",
             "request_in_flight", "server_untied", "server_unreported", "server_wrote_nothing", "server_commit_unknown",
             "server_wrote_elsewhere", "no_effect", "proved"]
    positions = [doc.index(name) for name in order]
    assert positions == sorted(positions), "the docstring lists the rules out of order"


def test_the_rule_table_applies_the_rules_as_the_docstring_numbers_them():
    """_decide applies _VERDICT_RULES in turn: the table holds every numbered rule of the docstring, in
    the docstring's order, and the last one always answers."""
    numbered = re.findall(r"^\s*(\d+[a-z]?)\. ", reticle._decide.__doc__, re.M)
    assert [n for n, _ in reticle._VERDICT_RULES] == numbered
    assert len(numbered) == len(set(numbered)) >= 19


def test_open_reads_do_not_undo_a_declared_consequence_but_open_writes_do():
    p = parse({"kind": "text", "contains": "Saved"})
    read = [ev(1, "net.pending", method="GET", url="/poll", requestId="a"), ev(2, "dom.added")]
    write = [ev(1, "net.pending", method="POST", url="/save", requestId="b"), ev(2, "dom.added")]
    for window, expected in ((read, "proved"), (write, "evidence_incomplete")):
        cs = reticle._contradictions(window, p, None)
        assert [c["kind"] for c in cs] == ["request-never-settled"]
        assert reticle._decide(dict(PASS), cs, window, known(), 0.0, p)[1] == expected


# (id, window, predicate, action_since, expected kinds)
CONTRADICTIONS = [
    ("ui-advanced-request-failed", [call(1, status=500), ev(2, "dom.text")], {"kind": "text", "contains": "Saved"}, None,
     ["ui-advanced-request-failed"]),
    ("signal-contradicted", [call(1, status=500), ev(2, "signal", name="saved")], {"kind": "signal", "name": "saved"},
     None, ["signal-contradicted"]),
    ("failure-acknowledged", [call(1, status=500), ev(2, "signal", name="save:failed"), ev(3, "dom.added")],
     {"kind": "signal", "name": "save:failed"}, None, []),
    ("failure-expected-by-the-predicate", [call(1, status=500), ev(2, "dom.added")],
     {"kind": "net", "urlContains": "/api/save", "status": 500}, None, []),
    ("partial-failure-in-ok-response", [call(1, body='{"results": [{"ok": true}, {"ok": false}]}')], NET, None,
     ["partial-failure-in-ok-response"]),
    ("failure-misattributed", [call(1, status=503), ev(2, "signal", name="invalid input")],
     {"kind": "signal", "name": "invalid input"}, None, ["failure-misattributed"]),
    ("duplicate-request", [call(5), call(6)], {"kind": "text", "contains": "Saved"}, 0.0, ["duplicate-request"]),
    ("duplicate-pinned-by-count", [call(5), call(6)], dict(NET, count=2), 0.0, []),
    ("request-never-settled", [ev(1, "net.pending", method="POST", url="/s", requestId="x"), ev(2, "dom.added")],
     {"kind": "text", "contains": "Saved"}, None, ["request-never-settled"]),
    ("dev-tooling-ignored", [call(1, method="GET", url="/@vite/client", status=500), ev(2, "dom.added")],
     {"kind": "text", "contains": "Saved"}, None, []),
    ("clean", [call(1), ev(2, "dom.added")], NET, 0.0, []),
    ("two-posts-with-different-bodies", [call(5, requestBody='{"fn_index": 1}'), call(6, requestBody='{"fn_index": 2}')],
     {"kind": "text", "contains": "Saved"}, 0.0, []),
    ("error-shown", [call(1), ev(2, "ui.alert", text="Could not save", source="alert")], NET, None, ["error-shown"]),
    ("server-rolled-back", [call(1), srv(2, writes=[dict(INSERTED, committed=False)])], SAVED, None,
     ["server-rolled-back"]),
    ("server-rollback-asked-for", [call(1), srv(2, writes=[dict(INSERTED, committed=False)])],
     {"kind": "server", "committed": False}, None, []),
    ("server-background-exception", [call(1), srv(2, exception={"type": "E", "message": "", "frames": [],
                                                                 "after": "a background task"})], SAVED, None,
     ["server-exception"]),
    ("a-failure-the-ui-admitted", [call(1, status=500), ev(2, "dom.added"),
                                   ev(3, "ui.alert", text="Saving failed, try again", source="alert")],
     {"kind": "text", "contains": "try again"}, None, []),
]


@pytest.mark.parametrize("row", CONTRADICTIONS, ids=[r[0] for r in CONTRADICTIONS])
def test_contradictions(row):
    _, window, p, action_since, kinds = row
    got = reticle._contradictions(window, parse(p), action_since)
    assert [c["kind"] for c in got] == kinds, got
    for c in got:
        assert c["tier"] in ("observed", "absence") and c["claim"] and c["counter"]


def test_no_effect_stands_for_a_click_that_changed_nothing():
    assert reticle._no_effect("click", {"effect": {}}, [ev(1, "console.log", text="x")])["kind"] == "action-had-no-effect"
    assert reticle._no_effect("click", {"effect": {"domMutatedWithin": True}}, []) is None
    assert reticle._no_effect("click", {"effect": {}}, [call(1)]) is None
    assert reticle._no_effect("fill", {"effect": {}}, []) is None


@pytest.mark.parametrize("filters,d,expected", [
    ({"method": "post"}, {"method": "POST", "url": "/a", "status": 200}, True),
    ({"urlContains": "/b"}, {"method": "POST", "url": "/a", "status": 200}, False),
    ({"status": 200}, {"method": "GET", "url": "/a", "status": "pending", "pending": True}, False),
    ({"ok": False}, {"method": "GET", "url": "/a", "status": 503}, True),
    ({"ok": True}, {"method": "GET", "url": "/a", "status": 503}, False),
    ({"ok": False}, {"method": "GET", "url": "/a", "status": 0, "error": "network"}, True),
    ({"ok": True}, {"method": "GET", "url": "/a", "status": 200, "ok": True}, True),
])
def test_one_call_matcher(filters, d, expected):
    assert reticle._call_matches(d, filters) is expected


def test_a_pending_call_may_still_match_a_status():
    d = {"method": "POST", "url": "/api/save", "pending": True, "status": "pending"}
    assert reticle._call_matches(d, NET, pending=True)
    assert not reticle._call_matches(d, NET)


def test_a_new_document_is_an_effect():
    window = [dict(ev(1, "console.log", text="hello"), doc="d2")]
    assert reticle._no_effect("click", {"effect": {}, "documentId": "d1"}, window) is None
    assert reticle._no_effect("click", {"effect": {}, "documentId": "d2"}, window)["kind"] == "action-had-no-effect"
    assert reticle._no_effect("submit", {"pageUnloaded": True}, []) is None


def test_advice_for_presence_only_and_loose_text():
    text = parse({"kind": "text", "contains": "2"})
    advice = reticle._advice(text, {"pass": True, "evidence": {"count": 1}})
    assert "only checks element/text presence" in advice and "is very short" in advice and "`equals`" in advice
    common = parse({"kind": "text", "contains": "Saved profile"})
    assert "matched 3 places" in reticle._advice(common, {"pass": True, "evidence": {"count": 3}})
    exact = parse({"kind": "allOf", "predicates": [{"kind": "text", "equals": "2"}, NET]})
    assert reticle._advice(exact, {"pass": True, "evidence": []}) is None


def test_background_writes_are_no_duplicates():
    window = [call(5, method="PUT", url="/api/autosave", body=None), call(6, method="PUT", url="/api/autosave", body=None)]
    p = parse({"kind": "text", "contains": "Saved"})
    assert [c["kind"] for c in reticle._contradictions(window, p, 0.0)] == ["duplicate-request"]
    assert reticle._contradictions(window, p, 0.0, known(background=("PUT /api/autosave",))) == []


def test_background_requests_are_not_an_acts_effect():
    p = parse({"kind": "settled", "quietMs": 300})
    poll = [call(5, method="GET", url="/api/poll", body="[]")]
    k = known(background=("GET /api/poll",), polled=("GET /api/poll",))
    got = reticle._decide({"pass": True, "evidence": {}}, [], poll, k, 0.0, p, act=True, effect={"effect": {}})
    assert got[:2] == ("unknown", "no_effect"), got
    assert reticle._no_effect("click", {"effect": {}}, poll, 0.0, k)["kind"] == "action-had-no-effect"
    assert reticle._no_effect("click", {"effect": {}}, poll, 0.0, known()) is None


def test_a_request_repeated_by_a_second_click_is_the_acts_effect():
    """The same POST as the first click's (so a write seen before the act) is still a request the act
    caused: never "nothing changed" when the server received it again.  A timer's is not."""
    again = [call(5, method="POST", url="/api/save")]
    once_before = known(background=("POST /api/save",))
    assert reticle._no_effect("click", {"effect": {}}, again, 0.0, once_before) is None
    p = parse({"kind": "settled", "quietMs": 300})
    got = reticle._decide({"pass": True, "evidence": {}}, [], again, once_before, 0.0, p, act=True,
                          effect={"effect": {}})
    assert got[:2] == ("yes", "proved"), got
    timer = known(background=("POST /api/save",), polled=("POST /api/save",))
    assert reticle._no_effect("click", {"effect": {}}, again, 0.0, timer)["kind"] == "action-had-no-effect"


def test_a_timers_writes_are_no_duplicates():
    p = parse({"kind": "text", "contains": "Saved"})
    steady = [call(t, method="PUT", url="/api/autosave", body=None) for t in (250, 500, 750, 1000)]
    assert reticle._contradictions(steady, p, 0.0) == []
    burst = [call(t, method="PUT", url="/api/save", body=None) for t in (250, 260, 900)]
    assert [c["kind"] for c in reticle._contradictions(burst, p, 0.0)] == ["duplicate-request"]


def test_a_message_that_reports_failure_contradicts_a_passing_check():
    p = parse({"kind": "text", "contains": "Profile saved"})
    stream = ev(3, "net.stream", direction="in", transport="stream", url="/jobs/1/stream",
                data='{"msg": "process_completed", "success": false, "output": {"error": "Could not save"}}')
    got = reticle._contradictions([call(1), stream], p, None)
    assert [c["kind"] for c in got] == ["message-reported-failure"] and "success: false" in got[0]["counter"]
    sent = ev(3, "net.ws", direction="out", transport="ws", url="/ws", data='{"op":"save"}')
    socket = ev(4, "net.ws", direction="in", transport="ws", url="/ws", data='42["error",{"text":"Save failed"}]')
    assert [c["kind"] for c in reticle._contradictions([sent, socket], p, None)] == ["message-reported-failure"]
    # a socket the act never spoke on: its chatter is background, not the act's failure
    assert reticle._contradictions([socket], p, None) == []
    asked = parse({"kind": "frame", "direction": "in", "contains": "process_completed"})
    assert reticle._contradictions([call(1), stream], asked, None) == []
    fine = ev(5, "net.ws", direction="in", transport="ws", url="/ws", data='42["update",{"text":"Saved"}]')
    assert reticle._contradictions([fine], p, None) == []


@pytest.mark.parametrize("header,expected", [
    ({"name": "X-Request-Id", "equals": "r-1"}, True),
    ({"name": "x-request-id", "contains": "r-"}, True),
    ({"name": "X-Request-Id", "equals": "r-2"}, False),
    ({"name": "X-Missing"}, False),
])
def test_the_matcher_reads_response_headers(header, expected):
    d = {"method": "POST", "url": "/api/save", "status": 200, "responseHeaders": {"x-request-id": "r-1"}}
    assert reticle._call_matches(d, {"header": header}) is expected


def test_a_failure_retried_with_success_is_no_contradiction():
    p = parse({"kind": "text", "contains": "Saved"})
    retried = [call(1, status=500), call(2), ev(3, "dom.text")]
    assert reticle._contradictions(retried, p, None) == []
    not_retried = [call(1), call(2, status=500), ev(3, "dom.text")]
    assert [c["kind"] for c in reticle._contradictions(not_retried, p, None)] == ["ui-advanced-request-failed"]


def test_the_pages_own_writes_still_open_do_not_make_it_unknown():
    p = parse({"kind": "text", "contains": "Saved"})
    window = [ev(1, "net.pending", method="PUT", url="/api/autosave", requestId="a"), ev(2, "dom.added")]
    k = known(background=("PUT /api/autosave",),
              open_requests=[{"method": "PUT", "url": "/api/autosave", "startedAt": 1.0}])
    cs = reticle._contradictions(window, p, None, k)
    assert cs == []
    assert reticle._decide(dict(PASS), cs, window, k, 0.0, p)[:2] == ("yes", "proved")
    assert [c["kind"] for c in reticle._contradictions(window, p, None, known())] == ["request-never-settled"]


def test_an_alert_that_reports_no_errors_is_no_error():
    p = parse(NET)
    clean = [call(1), ev(2, "ui.alert", text="Imported 12 rows with no errors", source="alert")]
    assert reticle._contradictions(clean, p, None) == []
    bad = [call(1), ev(2, "ui.alert", text="Import failed: 3 errors", source="alert")]
    assert [c["kind"] for c in reticle._contradictions(bad, p, None)] == ["error-shown"]


def test_an_alert_whose_source_is_not_a_string_is_still_an_error_shown():
    """A page is untrusted: a ui.alert whose `source` is a list or an object is labelled like any
    other alert, not a TypeError in the verdict (the label looked the source up in a dict)."""
    p = parse(NET)
    for source in (["toast"], {"kind": "toast"}, 3, None):
        bad = [call(1), ev(2, "ui.alert", text="Import failed: 3 errors", source=source)]
        cs = reticle._contradictions(bad, p, None)
        assert [c["kind"] for c in cs] == ["error-shown"], source
        assert "'Import failed: 3 errors' as an alert" in reticle._dumps(cs), (source, cs)



@pytest.mark.parametrize("source, named", [
    ("rails-errors", "in a Rails validation-errors box"),   # the scaffold's list of a model's errors: no flash
    ("rails-flash", "in a rails-flash message"),
    ("ant-design", "in an ant-design message"),
])
def test_an_error_shown_is_named_for_the_convention_that_shows_it(source, named):
    """Issue 46: Rails' #error_explanation (its own row, rails-errors) is named for what it is, a box listing
    the validation errors, never a flash message; the other rows as "a(n) <row> message"."""
    bad = [call(1), ev(2, "ui.alert", text="Title can't be blank", source=source)]
    counter = reticle._contradictions(bad, parse(NET), None)[0]["counter"]
    assert counter == "the page showed \"Title can't be blank\" %s" % named, counter
    assert source == "rails-flash" or "flash" not in counter, counter

# -- wire formats as data: one record each, both ways -------------------------------------------------

SINGLE_FETCH = '[{"_1":2},"root",{"_3":4},"redirect","/notes","status",302,"revalidate",true]'
# SvelteKit 2 answers, as the wire carries them (form action envelopes, their `data` devalue-encoded)
SK_FAILURE = '{"type":"failure","status":422,"data":"[{\\"title\\":1,\\"message\\":2},\\"\\",\\"Title is required\\"]"}'
SK_ERROR = '{"type":"error","error":{"message":"Internal Error"}}'
SK_REDIRECT = '{"type":"redirect","status":303,"location":"/notes/9"}'
SK_SUCCESS = '{"type":"success","status":200,"data":"[{\\"id\\":1},9]"}'
SK_DATA_ERROR = ('{"type":"data","nodes":[{"type":"data","data":[{"user":1},null],"uses":{}},'
                 '{"type":"error","error":{"message":"Not Found"},"status":404}]}')
SK_DATA_OK = ('{"type":"data","nodes":[{"type":"data","data":[{"user":1},null],"uses":{}},'
              '{"type":"data","data":[{"note":1},{"id":2,"title":3},9,"A"],"uses":{"params":["id"]}}]}')
TURBO_STREAM = ('<turbo-stream action="append" target="messages"><template><div id="message_9">Hello</div>'
                '</template></turbo-stream>')
WIRE = [
    ("single-fetch-redirect", call(5, url="/notes/new.data", status=202, body=SINGLE_FETCH), "redirect",
     call(5, url="/notes/new.data", status=202, body='[{"_1":2},"data",{"queued":true}]')),
    ("server-action", call(5, url="/notes", body='0:{"a":"$@1","f":"","b":"dev"}\n'
                                               '1:{"ok":false,"message":"Title taken"}',
                           responseHeaders={"content-type": "text/x-component"}), "failure",
     call(5, url="/notes", body='0:{"a":"$@1","f":"","b":"dev"}\n1:{"ok":true,"id":7}',
          responseHeaders={"content-type": "text/x-component"})),
    ("dash-callback", call(5, url="/_dash-update-component",
                           body='{"multi":true,"response":{"out":{"children":'
                                '"Error: the row is locked. Nothing was saved."}}}'),
     "failure", call(5, url="/_dash-update-component",
                     body='{"multi":true,"response":{"out":{"children":"Error rate: 0 errors today"}}}')),
    ("json-callback", call(5, url="/api/callback", body='{"props":{"children":"Error: the row is locked. Nothing was '
                                                         'saved."}}'),
     "failure", call(5, url="/api/callback", body='{"props":{"children":"Error rate: 0 errors today"}}')),
    ("sveltekit-action-failure", call(5, url="/notes?/create", body=SK_FAILURE), "failure",
     call(5, url="/notes?/create", body='{"type":"comment","status":200,"text":"fail(422) explained"}')),
    ("sveltekit-data-error", call(5, method="GET", url="/notes/9/__data.json?x-sveltekit-invalidated=01",
                                  body=SK_DATA_ERROR), "failure",
     call(5, method="GET", url="/notes/9/__data.json?x-sveltekit-invalidated=01", body=SK_DATA_OK)),
    ("sveltekit-action-redirect", call(5, url="/notes?/create", body=SK_REDIRECT), "redirect",
     call(5, method="GET", url="/notes", body=SK_REDIRECT)),
    ("sveltekit-action-success", call(5, url="/notes?/create", body=SK_SUCCESS), "answer",
     call(5, url="/notes?/create", body='{"type":"success","status":200,"data":"x","user":{"id":1}}')),
    # Astro's actions (tests/_dialects_app.py has the bodies as Astro writes them)
    ("astro-action-error", call(5, url="/_actions/notes.create", body=ASTRO_ERROR,
                                responseHeaders={"content-type": "application/json"}), "failure",
     call(5, url="/_actions/notes.create", body='{"type":"AstroActionWarning","code":"CONFLICT"}',
          responseHeaders={"content-type": "application/json"})),
    ("astro-action-data-failure", call(5, url="/_actions/notes.create", body=ASTRO_DATA_FAILURE,
                                       responseHeaders={"content-type": DEVALUE}), "failure",
     call(5, url="/api/notes", body=ASTRO_DATA_FAILURE, responseHeaders={"content-type": DEVALUE})),
    ("astro-action-data", call(5, url="/_actions/notes.create", body=ASTRO_DATA,
                               responseHeaders={"content-type": DEVALUE}), "answer",
     call(5, url="/_actions/notes.create", body=ASTRO_DATA, responseHeaders={"content-type": "application/json"})),
    ("turbo-stream", call(5, url="/messages", body=TURBO_STREAM,
                          responseHeaders={"content-type": "text/vnd.turbo-stream.html; charset=utf-8"}), "answer",
     call(5, url="/messages", body='<div id="messages">Hello</div>', responseHeaders={"content-type": "text/html"})),
]


def test_a_json_callback_is_read_only_for_a_write_and_a_rendered_text():
    locked = '{"props":{"children":"Error: the row is locked."}}'
    assert reticle._wire_meaning(call(5, method="GET", url="/api/callback", body=locked)["data"]) is None
    assert reticle._wire_meaning(call(5, url="/api/callback", body='{"log":"Error: retried once"}')["data"]) is None
    assert reticle._wire_meaning(call(5, url="/api/callback", body=locked)["data"])[0] == "failure"
    for fine in ("Error reporting enabled", "Failed login attempts reset", "Errors: none"):
        body = '{"props":{"children":"%s"}}' % fine
        assert reticle._wire_meaning(call(5, url="/api/callback", body=body)["data"]) is None, fine
    failed = '{"props":{"text":"Failed to save the row."}}'
    assert reticle._wire_meaning(call(5, url="/api/callback", body=failed)["data"])[0] == "failure"


@pytest.mark.parametrize("name,fires,meaning,quiet", WIRE, ids=[w[0] for w in WIRE])
def test_a_wire_format_both_ways(name, fires, meaning, quiet):
    assert [w.name for w in reticle._WIRE_FORMATS if w.name == name] == [name]
    got = reticle._wire_meaning(fires["data"])
    assert got is not None and got[0] == meaning, got
    assert reticle._wire_meaning(quiet["data"]) is None


def test_a_single_fetch_redirect_is_not_queued_work():
    p = parse({"kind": "net", "urlContains": "/notes/new.data", "status": 202})
    redirect = call(5, url="/notes/new.data", status=202, body=SINGLE_FETCH)
    got = reticle._decide({"pass": True, "evidence": redirect["data"]}, [], [redirect], known(), 0.0, p)
    assert got[:2] == ("yes", "proved"), got
    queued = call(5, url="/jobs", status=202, body='{"job": 1}')
    got = reticle._decide({"pass": True, "evidence": queued["data"]}, [], [queued], known(), 0.0, p)
    assert got[:2] == ("unknown", "outcome_pending"), got
    moved_on = [queued, ev(9, "route.change", to="http://x/jobs/1")]
    got = reticle._decide({"pass": True, "evidence": queued["data"]}, [], moved_on, known(), 0.0, p)
    assert got[:2] == ("yes", "proved"), got


def test_a_server_action_failure_in_a_200_contradicts():
    p = parse({"kind": "net", "urlContains": "/notes", "status": 200})
    action = WIRE[1][1]
    got = reticle._contradictions([action], p, None)
    assert [c["kind"] for c in got] == ["partial-failure-in-ok-response"], got
    assert "Title taken" in got[0]["counter"] or "ok: false" in got[0]["counter"], got


def _taken(c):
    reticle._take_wire_status(c["data"])
    return c


def test_a_sveltekit_failure_envelope_is_a_failed_request_with_its_status():
    """Issue 29 #1: fail(422) answers HTTP 200 with a `failure` envelope: the call is a 422 for every rule
    (net status 200 does not hold, ok: false and status: 422 do), its message named; a success stays a 200."""
    failed = _taken(call(5, url="/notes?/create", body=SK_FAILURE))["data"]
    assert (failed["status"], failed["httpStatus"], failed["ok"]) == (422, 200, False), failed
    assert "Title is required" in failed["statusNote"], failed
    assert not reticle._call_matches(failed, {"status": 200})
    assert reticle._call_matches(failed, {"status": 422}) and reticle._call_matches(failed, {"ok": False})
    error = _taken(call(5, url="/notes?/create", body=SK_ERROR))["data"]
    assert (error["status"], error["ok"]) == (500, False), error
    for body in (SK_SUCCESS, SK_REDIRECT, '{"type":"failure","status":422,"data":{"x":1}}'):
        fine = _taken(call(5, url="/notes?/create", body=body))["data"]
        assert fine["status"] == 200 and "httpStatus" not in fine, body
    assert _taken(call(5, method="GET", url="/notes", body=SK_FAILURE))["data"]["status"] == 200


def test_a_sveltekit_failure_makes_the_settle_and_net_200_no():
    p = parse(dict(NET, urlContains="?/create"))
    window = [_taken(call(1, url="/notes?/create", body=SK_FAILURE)), ev(2, "dom.added")]
    got = reticle._decide({"pass": True, "evidence": {}}, [], window, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed") and "422" in got[2] and "Title is required" in got[2], got
    o = reticle._Observation(window, now=2000.0, since=0.0, open_requests=[], url="http://x/", after_act=True,
                             upto=None, live={}, near={})
    res, _, verdict = reticle._verdict(p, o)
    assert not res["pass"] and verdict[0] == "no" and "SvelteKit" in res["failureReason"], (res, verdict)
    fine = [_taken(call(1, url="/notes?/create", body=SK_SUCCESS)), ev(2, "dom.added")]
    got = reticle._decide({"pass": True, "evidence": {}}, [], fine, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("yes", "proved"), got


def test_a_sveltekit_data_error_node_is_a_failed_navigation():
    """A redirect after an action to a page whose __data.json holds an `error` node (404): the settle is no."""
    url = "/notes/9/__data.json?x-sveltekit-invalidated=01"
    window = [_taken(call(1, url="/notes?/create", body=SK_REDIRECT)),
              _taken(call(2, method="GET", url=url, body=SK_DATA_ERROR)), ev(3, "route.change", to="http://x/notes/9"),
              ev(4, "dom.added")]
    assert window[1]["data"]["status"] == 404 and window[0]["data"]["status"] == 200
    got = reticle._decide({"pass": True, "evidence": {}}, [], window, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed") and "404" in got[2] and "`error` node" in got[2], got
    fine = [window[0], _taken(call(2, method="GET", url=url, body=SK_DATA_OK)), window[2], window[3]]
    got = reticle._decide({"pass": True, "evidence": {}}, [], fine, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("yes", "proved"), got


def test_a_tab_that_does_not_answer_never_yields_yes():
    """Issue 19 #5: a pass (a cached route, an event from before) over a tab that stopped answering
    is unknown, naming why; so is a failure, which a blocked page cannot be asked to confirm."""
    k = known()
    k.stuck = "a confirm dialog (Keep?) is open in the tab"
    p = parse({"kind": "route", "pathname": "/"})
    for res in (PASS, FAIL):
        verified, reason, because = reticle._decide(dict(res), [], [], k, 0.0, p)
        assert (verified, reason) == ("unknown", "not_answering") and "confirm dialog" in because
    assert reticle._decide(dict(PASS), [], [], known(), 0.0, p)[:2] == ("yes", "proved")


# (id, timeout_ms, act started at, now (all on the daemon's clock, ms), expected (wait left, end of the budget))
ACT_BUDGET = [
    ("the-act-took-half-a-second", 4000, 1000.0, 1500.0, (3500.0, 5000.0)),
    ("the-act-used-it-all-is-still-judged-once", 4000, 1000.0, 6000.0, (0.001, 5000.0)),
    ("no-timeout-is-one-look", 0, 1000.0, 1200.0, (0, 1000.0)),
    ("a-short-budget-in-ms-not-seconds", 250, 10_000.0, 10_100.0, (150.0, 10_250.0)),
]


@pytest.mark.parametrize("timeout,started,now,expected", [r[1:] for r in ACT_BUDGET], ids=[r[0] for r in ACT_BUDGET])
def test_an_acts_budget_is_on_the_daemons_clock(timeout, started, now, expected):
    assert reticle._act_budget(timeout, started, now) == pytest.approx(expected)


# (id, the tool call's deadline (the daemon's clock, ms, or None), now (ms), the command's own timeout (s), expected (s))
COMMAND_BUDGET = [
    ("no-call-deadline-keeps-its-own", None, 4000.0, 10.0, 10.0),
    ("cut-to-what-is-left-of-the-call", 5000.0, 4000.0, 10.0, 1.0),
    ("never-below-the-floor", 5000.0, 4900.0, 10.0, reticle.COMMAND_FLOOR_S),
    ("past-the-deadline-still-the-floor", 5000.0, 9000.0, 10.0, reticle.COMMAND_FLOOR_S),
    ("its-own-shorter-timeout-stands", 5000.0, 1000.0, 0.5, 0.5),
]


@pytest.mark.parametrize("deadline,now,timeout,expected", [r[1:] for r in COMMAND_BUDGET],
                         ids=[r[0] for r in COMMAND_BUDGET])
def test_a_commands_budget_is_cut_to_the_calls_deadline_on_the_daemons_clock(deadline, now, timeout, expected):
    token = reticle._CALL_DEADLINE.set(deadline)
    try:
        assert reticle._command_budget(timeout, now) == pytest.approx(expected)
    finally:
        reticle._CALL_DEADLINE.reset(token)


# -- plain failure text (issue 29 #4): _PLAIN_FAILURE both ways ----------------------------------------

PLAIN_FAILURES = ["Name is required", "That email address is not valid.", "Invalid date", "Could not save the note",
                  "Upload failed", "That username is already taken", "Password must be at least 8 characters",
                  "Title can't be blank", "Passwords do not match"]
PLAIN_FINE = ["0 errors", "No errors found", "Required fields are marked *", "Saved", "Thanks, you're subscribed.",
              "(required)", "Optional", "Welcome back, Ada"]


@pytest.mark.parametrize("text", PLAIN_FAILURES)
def test_plain_text_that_reads_as_a_failure(text):
    assert reticle._plain_failure(text), text
    form = {"text": text, "source": "text", "level": None, "scope": "form"}
    assert reticle._is_failure_ui(form) and not reticle._is_failure_ui(dict(form, scope="answer"))


@pytest.mark.parametrize("text", PLAIN_FINE)
def test_plain_text_that_does_not(text):
    assert not reticle._plain_failure(text), text
    assert not reticle._is_failure_ui({"text": text, "source": "text", "level": None, "scope": "form"})


def test_the_sdk_reads_the_same_plain_failure_table(tmp_path):
    served = reticle.Hub(state_dir=str(tmp_path / "state")).sdk_source()
    config = json.loads(served.split("var CONFIG = ", 1)[1].split(";\n", 1)[0])
    assert config["conventions"]["plainFailure"] == [list(part) for part in reticle._PLAIN_FAILURE]
    assert "@python" not in reticle._SDK_JS and "/*__RETICLE_CONFIG__*/" not in served


def test_plain_failure_text_in_the_acts_form_makes_the_settle_no():
    window = [call(1, body='[{"_1":2},"data",{"_3":4},"fieldError","Name is required"]'), ev(2, "dom.added"),
              ev(3, "ui.alert", text="Name is required", source="text", level=None, scope="form", related=True)]
    got = reticle._decide({"pass": True, "evidence": {}}, [], window, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed") and "Name is required" in got[2], got
    assert "Name is required" in reticle._failure_in_sight(parse({"kind": "text", "contains": "Saved"}), window, 0.0,
                                                            known())
    for said in ("0 errors", "Error reporting enabled"):  # plain text is read by _PLAIN_FAILURE, negatives too
        fine = window[:2] + [ev(3, "ui.alert", text=said, source="text", level=None, scope="form")]
        got = reticle._decide({"pass": True, "evidence": {}}, [], fine, known(), 0.0, parse(SETTLE), act=True)
        assert got[:2] == ("yes", "proved"), got


def test_plain_failure_text_the_acts_answer_carried_makes_the_settle_no():
    """Outside the act's form, text the act's own answer brought (it is in that response's body) that reads
    as a failure: no (issue 46 #4); the same words only put back in place of themselves (`again`: a list
    re-rendered whole), or brought by an answer that is not the act's (the page's own polling), are not known
    to be the act's: unknown; the person's own words echoed back, or words in no answer at all, are no
    failure."""
    said = ev(3, "ui.alert", text="That email address is not valid.", source="text", level=None, scope="answer")
    window = [call(1, body='<p class="err">That email address is not valid.</p>'), ev(2, "dom.added"), said]
    got = reticle._decide({"pass": True, "evidence": {}}, [], window, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed") and "not valid" in got[2] and "act's answer" in got[2], got
    assert "not valid" in reticle._failure_in_sight(parse({"kind": "text", "contains": "subscribed"}), window, 0.0,
                                                     known())
    again = window[:2] + [ev(3, "ui.alert", **dict(said["data"], again=True))]
    got = reticle._decide({"pass": True, "evidence": {}}, [], again, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("unknown", "failure_text_shown") and "in place of itself" in got[2], got
    polled = known(polled=("POST /api/save",))
    got = reticle._decide({"pass": True, "evidence": {}}, [], window, polled, 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("unknown", "failure_text_shown") and "not the act's own" in got[2], got
    echoed = [call(1, body='<li>That email address is not valid.</li>',
                   requestBody="title=That+email+address+is+not+valid."), ev(2, "dom.added"), said]
    got = reticle._decide({"pass": True, "evidence": {}}, [], echoed, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("yes", "proved"), got  # the person's own words echoed back (a new todo) are no message
    elsewhere = [call(1, body='{"ok": true}'), ev(2, "dom.added"), said]
    got = reticle._decide({"pass": True, "evidence": {}}, [], elsewhere, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("yes", "proved"), got


TAKEN = '<p class="error">That title is <b>taken</b>.</p>'


def marked(t=3, **extra):
    """The SDK's report of an element marked as an error in what changed after the act."""
    return ev(t, "ui.alert", **dict({"text": "That title is taken.", "source": "marker", "level": "error",
                                     "scope": "answer", "related": True}, **extra))


def test_a_mark_the_acts_answer_carried_is_a_failure_wherever_it_landed():
    """Issue 46 #4: an htmx answer (200) marked as an error, with no word of failure, swapped in after the act's
    form, out of band into the header or anywhere else: no, every way it is asked, unless the predicate asks for
    it; the same mark in no answer of the act (the page's own script, a poll) is not the act's."""
    window = [call(1, url="/notes", body=TAKEN), ev(2, "dom.added"), marked()]
    got = reticle._decide({"pass": True, "evidence": {}}, [], window, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed"), got
    assert "'That title is taken.' marked as an error where the act's answer put it" in got[2], got
    net = parse({"kind": "net", "method": "POST", "urlContains": "/notes", "status": 200})
    cs = reticle._contradictions(window, net, 0.0, known())
    assert [c["kind"] for c in cs] == ["error-shown"], cs
    asked = parse({"kind": "text", "contains": "title is taken"})
    assert reticle._contradictions(window, asked, 0.0, known()) == []
    assert "taken" in reticle._failure_in_sight(net, window, 0.0, known())
    for not_the_acts in ([call(1, url="/notes", body="<p>Saved.</p>"), ev(2, "dom.added"), marked()],
                         [call(1, url="/notes", body=TAKEN, durationMs=10), ev(2, "dom.added"), marked()]):
        floor = 0.0 if not_the_acts[0]["data"].get("durationMs") is None else 50.0  # the call began before the act
        got = reticle._decide({"pass": True, "evidence": {}}, [], not_the_acts, known(), floor, parse(SETTLE),
                              act=True)
        assert got[:2] == ("yes", "proved"), got
        assert reticle._contradictions(not_the_acts, net, floor, known()) == []
    # a mark put back in place of itself by the act's answer is still the act's (an outerHTML swap re-rendered it)
    again = [call(1, url="/notes", body=TAKEN), ev(2, "dom.added"), marked(again=True)]
    got = reticle._decide({"pass": True, "evidence": {}}, [], again, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed"), got


def test_a_mark_in_the_acts_form_is_an_error_shown_unless_it_was_there_before():
    """New in the act's form: an error shown, whatever the answers say.  There before the act (the form
    re-rendered with the same mark): the act's only where its answer carried it."""
    fresh = [call(1, url="/notes", body='{"ok": true}'), ev(2, "dom.added"), marked(scope="form")]
    got = reticle._decide({"pass": True, "evidence": {}}, [], fresh, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed") and "in the act's form" in got[2], got
    before = [call(1, url="/notes", body='{"ok": true}'), ev(2, "dom.added"), marked(scope="form", again=True)]
    got = reticle._decide({"pass": True, "evidence": {}}, [], before, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("yes", "proved"), got
    carried = [call(1, url="/notes", body='<form>%s</form>' % TAKEN), ev(2, "dom.added"),
               marked(scope="form", again=True)]
    got = reticle._decide({"pass": True, "evidence": {}}, [], carried, known(), 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed"), got


# -- transient messages judged by time (issue 29 #3) -------------------------------------------------

LEFTOVER = {"text": "Could not save the note", "source": "sonner", "level": "error", "related": True, "own": False,
            "unscoped": True, "field": None}


def test_an_error_toast_from_before_the_act_does_not_fail_a_retry_that_worked():
    retry = [call(5, url="/toast/save"), ev(6, "ui.status", text="Note saved", source="aria-status", level=None)]
    got = reticle._decide(dict(PASS), [], retry, known(), 0.0, parse(NET), act=True, shown=[LEFTOVER])
    assert got[:2] == ("yes", "proved") and "shown before the act" in got[2] and "Could not save" in got[2], got
    assert "after the act the page said 'Note saved'" in got[2], got
    # in the act's own form, it still stands
    got = reticle._decide(dict(PASS), [], retry, known(), 0.0, parse(NET), act=True, shown=[dict(LEFTOVER, own=True)])
    assert got[:2] == ("no", "failure_still_shown"), got
    # in a form or region the act's target is not known in (an assert after a plain act), it stands too
    got = reticle._decide(dict(PASS), [], retry, known(), 0.0, parse(NET), shown=[dict(LEFTOVER, unscoped=False)])
    assert got[:2] == ("no", "failure_still_shown"), got
    # shown anew in the act's window, it is the act's
    again = retry + [ev(7, "ui.alert", text="Could not save the note", source="sonner", level="error")]
    assert reticle._stale_message(LEFTOVER, again, 0.0, known()) is False
    # the act's own request failed (or there was none): not a leftover
    assert reticle._stale_message(LEFTOVER, [call(5, url="/toast/save", status=500)], 0.0, known()) is False
    assert reticle._stale_message(LEFTOVER, [ev(5, "dom.added")], 0.0, known()) is False
    # a retry of the save the page made before is the act's own request
    assert reticle._stale_message(LEFTOVER, retry, 0.0, known(background=["POST /toast/save"])) is True


def test_a_failed_send_to_another_origin_is_not_the_acts_failure():
    """Issue 29 #7: a console error about a failed analytics send after a good save does not make the
    settle no; it is named beside the yes.  The app's own failed request, or a console error of its
    own code, still is the act's failure."""
    k = known(origin="http://app.test")
    beacon = call(3, url="https://stats.example/collect", status=0, error="TypeError: Failed to fetch")
    beacon["data"]["ok"] = False  # a fetch that never got an answer
    good = [call(1, url="http://app.test/api/save"), ev(2, "dom.added"), beacon,
            ev(4, "console.error", text="analytics send failed: TypeError: Failed to fetch")]
    got = reticle._decide({"pass": True, "evidence": {}}, [], good, k, 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("yes", "proved") and "another origin" in got[2] and "stats.example" in got[2], got
    named = good[:3] + [ev(4, "console.error", text="POST https://stats.example/collect net::ERR_FAILED")]
    assert reticle._decide({"pass": True, "evidence": {}}, [], named, k, 0.0, parse(SETTLE), act=True)[0] == "yes"
    own = good + [ev(5, "console.error", text="TypeError: cannot read properties of undefined")]
    own[0] = call(1, url="http://app.test/api/save", status=500)
    got = reticle._decide({"pass": True, "evidence": {}}, [], own, k, 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed"), got
    api = [ev(2, "dom.added"), beacon, good[3]]  # the app's API lives on the other origin: its failure is the act's
    assert reticle._decide({"pass": True, "evidence": {}}, [], api, k, 0.0, parse(SETTLE), act=True)[0] == "no"
    mine = good[:3] + [ev(5, "console.error", text="TypeError: cannot read properties of undefined")]
    got = reticle._decide({"pass": True, "evidence": {}}, [], mine, k, 0.0, parse(SETTLE), act=True)
    assert got[:2] == ("no", "failure_observed") and "cannot read" in got[2], got


@pytest.mark.parametrize("text,ends", [
    ('["4","7","lv:phx-F1","phx_reply",{"status":"ok","response":{}}]', True),
    ('431[{"ok":true}]', True),
    ('{"type":"complete","id":"1"}', True),
    ('{"id":"1","type":"error","payload":[]}', True),
    ('{"jsonrpc":"2.0","id":3,"result":{"saved":true}}', True),
    ('{"msg":"process_completed","success":true}', True),
    ('{"type":"ack"}', False),  # an acknowledgement: the run goes on
    ('{"ok": false, "error": "refused"}', False),  # no protocol says this is the last one
    ('["4","7","lv:phx-F1","diff",{}]', False),
    ('{"jsonrpc":"2.0","method":"progress","params":{}}', False),  # a notification, not a response
    ('42["progress",1]', False),
])
def test_a_socket_message_ends_its_run_only_by_its_protocol(text, ends):
    assert reticle._run_ended({"data": text}) is ends
