"""The SDK on the three app shapes of APP-SHAPES.md (tests/_shapes_app.py), in headless
Chromium through a real MCP client, with the truth checked on the server: what the user
is told (ui.alert), streamed responses (net.stream), response headers, socket frames."""

import json
import os

import pytest

import reticle
from _dialects_app import (ASTRO4_INPUT_ERROR, ASTRO_ANSWERS, ASTRO_DATA, HTMX_JS, REFUSED, DialectsApp,
                           DialectsServer)
from _events import call, ev
from _harness import observe_all, Live, chromium_path, wait_until
from _shapes_app import BIG_FEED_BYTES, FEED_ROWS, NOT_FOUND, Shapes

pytestmark = [pytest.mark.skipif(chromium_path() is None, reason="needs Chromium (sh tests/bootstrap.sh)"),
              pytest.mark.browser]

SHAPES = Shapes()


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    lv = Live(tmp_path_factory.mktemp("shapes"), NOT_FOUND, path="/fragments/", routes=SHAPES.routes)
    yield lv
    lv.close()


def open_page(live, path):
    """Reset the server, open `path` in the tab; -> the time after which events are this test's."""
    SHAPES.reset()
    since = latest(live)
    nav = live.mcp.ok("reticle_navigate", {"url": live.app.url + path})
    assert nav["confirmed"] is True, nav
    return since


def latest(live):
    """Just after the newest event: request ids restart with each document, so a window must
    not reach back into the last one (the daemon joins a pending id to a completed one)."""
    events = live.mcp.ok("reticle_observe", {"since": 0, "max_events": 1})["events"]
    return events[-1]["t"] + 0.001 if events else 0


def events(live, since, *types):
    return observe_all(live.mcp, since, types)


def alerts(live, since):
    return [e["data"] for e in events(live, since, "ui.alert")]


def wait_text(live, text, timeout_ms=10000):
    out = live.mcp.ok("reticle_wait_for", {"predicate": {"kind": "text", "contains": text}, "timeout_ms": timeout_ms})
    assert out["pass"] is True, out


def click(live, name):
    live.mcp.ok("reticle_act", {"target": {"role": "button", "name": name}, "action": "click"})


def fill(live, label, value):
    live.mcp.ok("reticle_act", {"target": {"label": label}, "action": "fill", "args": {"value": value}})


def request_of(live, since, url_part, method=None, timeout=10):
    """The completed net.request of the one call whose URL contains url_part."""
    def done():
        return [e["data"] for e in events(live, since, "net.request")
                if url_part in e["data"]["url"] and (method is None or e["data"]["method"] == method)]
    return wait_until(done, timeout, what="the completed call to " + url_part)[-1]


def save_with_fault(live, page, name):
    """Open `page`, switch the server's fault on, and save the profile `name`.  -> the cursor."""
    since = open_page(live, page)
    SHAPES.fault = True
    fill(live, "Name", name)
    click(live, "Save profile")
    return since


# -- fragments (htmx style) ---------------------------------------------------------------------

def test_an_error_fragment_answered_200_is_reported_as_an_alert(live):
    since = save_with_fault(live, "/fragments/", "Ann")
    shown = wait_until(lambda: alerts(live, since), what="a ui.alert")
    assert shown == [{"text": "Could not save your profile", "source": "alert", "level": None,
                      "ref": shown[0]["ref"]}]
    assert shown[0]["ref"].startswith("e")
    call = request_of(live, since, "/profile", "POST")
    assert call["status"] == 200 and call["initiator"] == "xhr"
    assert SHAPES.saved() == []


def test_a_success_fragment_is_no_alert_and_the_headers_are_recorded(live):
    since = open_page(live, "/fragments/")
    fill(live, "Name", "Bob")
    click(live, "Save profile")
    call = request_of(live, since, "/profile", "POST")
    headers = call["responseHeaders"]
    assert headers["x-request-id"] == "profile-0"
    assert headers["x-session-token"] == "[redacted]"
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert all(k == k.lower() for k in headers)
    wait_until(lambda: SHAPES.saved() == [{"name": "Bob", "via": "fragments"}], what="the save on the server")
    wait_text(live, "Profile saved")
    assert alerts(live, since) == []


def test_a_field_made_invalid_is_reported_with_its_name_and_error(live):
    since = open_page(live, "/fragments/")
    click(live, "Save profile")  # an empty name: the server re-renders the field as invalid
    shown = wait_until(lambda: alerts(live, since), what="a ui.alert")
    assert len(shown) == 1, shown
    assert shown[0]["source"] == "invalid" and shown[0]["level"] == "error"
    assert shown[0]["field"] == "Name" and shown[0]["text"] == "Name is required"
    call = request_of(live, since, "/profile", "POST")
    assert call["responseHeaders"]["hx-retarget"] == "#name-field"
    assert SHAPES.saved() == []


def test_a_chained_event_posts_twice_with_different_bodies(live):
    since = open_page(live, "/fragments/")
    fill(live, "Name", "Cy")
    click(live, "Run chain")
    wait_until(lambda: len(SHAPES.joins()) == 2, what="two joins on the server")
    assert [j["fn_index"] for j in SHAPES.joins()] == [1, 2]
    calls = wait_until(lambda: [e["data"] for e in events(live, since, "net.request")
                                if "/queue/join" in e["data"]["url"]][1:], what="both joins in the page")
    calls = [e["data"] for e in events(live, since, "net.request") if "/queue/join" in e["data"]["url"]]
    assert [json.loads(c["requestBody"])["fn_index"] for c in calls] == [1, 2]
    headers = calls[0]["responseHeaders"]
    assert len(headers) == 30 and calls[0]["responseHeadersTruncated"] is True  # the server sent 40
    assert headers["x-long"] == "v" * 256 + "\u2026"  # cut at 256, marked
    assert all(c["status"] == 200 and c["responseHeaders"]["content-type"].startswith("application/json")
               for c in calls)


# -- queue + stream -----------------------------------------------------------------------------

def stream_messages(live, since):
    return [e["data"] for e in events(live, since, "net.stream") if e["data"]["direction"] == "in"]


def test_a_failed_job_streams_its_failure_and_the_declared_toast_is_an_error(live):
    since = save_with_fault(live, "/jobs/", "Dee")
    shown = wait_until(lambda: alerts(live, since), what="the error toast")
    assert shown[0]["source"] == "toast" and shown[0]["level"] == "error"
    assert shown[0]["text"] == "Save failed: Could not save profile"
    # issue 19: the status view names the declared toast too
    status = live.mcp.ok("reticle_snapshot", {"mode": "status"})["status"]
    assert [a["text"] for a in status.get("alerts", []) if a.get("toast")] == ["Save failed: Could not save profile"]
    assert events(live, since, "error.uncaught", "console.error") == []
    done = request_of(live, since, "/stream")
    assert done["streamed"] is True and done["status"] == 200
    assert done["messageCount"] == 5
    pending = [e["data"] for e in events(live, since, "net.pending") if "/stream" in e["data"]["url"]]
    assert len(pending) == 1 and pending[0]["requestId"] == done["requestId"]
    msgs = stream_messages(live, since)
    assert [m["requestId"] for m in msgs] == [done["requestId"]] * 5
    assert all(m["transport"] == "stream" and m["event"] == "message" for m in msgs)
    last = json.loads(msgs[-1]["data"])
    assert last == {"msg": "process_completed", "success": False, "output": {"error": "Could not save profile"}}
    assert msgs[-1]["frameBytes"] == len(json.dumps(last)) and msgs[-1]["index"] == 5  # as the server wrote it
    assert "tok-9f8e7d6c5b4a39281706" not in msgs[0]["data"]
    assert json.loads(msgs[0]["data"]) == {"msg": "process_starts", "session_token": "[redacted]"}
    job = SHAPES.jobs()
    assert [j["status"] for j in job.values()] == ["failed"] and SHAPES.saved() == []
    post = request_of(live, since, "/jobs", "POST")
    assert post["status"] == 200 and post["responseHeaders"]["content-type"].startswith("application/json")
    assert "streamed" not in post


def test_without_a_toast_only_the_stream_tells_of_the_failure(live):
    since = save_with_fault(live, "/jobs/?toast=0", "Eve")
    done = request_of(live, since, "/stream")
    assert done["streamed"] is True
    last = json.loads(stream_messages(live, since)[-1]["data"])
    assert last["msg"] == "process_completed" and last["success"] is False
    wait_text(live, "Profile saved")
    assert alerts(live, since) == []
    assert SHAPES.saved() == []


def test_an_open_stream_is_pending_until_it_ends(live):
    since = open_page(live, "/jobs/")
    SHAPES.hold_streams = True
    fill(live, "Name", "Fay")
    click(live, "Save profile")
    wait_until(lambda: stream_messages(live, since), what="the first streamed message")
    calls = live.mcp.ok("reticle_network", {"urlContains": "/stream", "since": since})["calls"]
    assert len(calls) == 1 and calls[0].get("pending") is True, calls
    assert SHAPES.saved() == []
    SHAPES.hold_streams = False
    done = request_of(live, since, "/stream")
    assert done["streamed"] is True and done["messageCount"] == 5
    last = json.loads(stream_messages(live, since)[-1]["data"])
    assert last["success"] is True and last["output"] == {"saved": "Fay"}
    calls = live.mcp.ok("reticle_network", {"urlContains": "/stream", "since": since})["calls"]
    assert len(calls) == 1 and calls[0].get("pending") is None and calls[0]["status"] == 200, calls
    assert SHAPES.saved() == [{"name": "Fay", "via": "jobs"}]
    info = wait_until(lambda: alerts(live, since), what="the info toast")
    assert [(a["text"], a["source"], a["level"]) for a in info] == [("Profile stored", "toast", None)]


# -- server-driven UI over a WebSocket ------------------------------------------------------------

def frames(live, since, direction):
    return [e["data"] for e in events(live, since, "net.ws") if e["data"]["direction"] == direction]


def test_socket_frames_go_up_and_come_down(live):
    since = open_page(live, "/socket/")
    wait_text(live, "Connected")
    fill(live, "Name", "Gus")
    click(live, "Save profile")
    down = wait_until(lambda: frames(live, since, "in"), what="the pushed update")
    assert down[-1]["data"] == '42["update", {"id": "status", "text": "Saved profile"}]'
    up = frames(live, since, "out")
    assert up[-1]["data"] == '42["save",{"name":"Gus"}]' and up[-1]["transport"] == "ws"
    assert SHAPES.socket_messages() == ['42["save",{"name":"Gus"}]']
    assert SHAPES.saved() == [{"name": "Gus", "via": "socket"}]
    assert alerts(live, since) == []


def test_a_failure_pushed_down_the_socket_is_an_alert(live):
    since = open_page(live, "/socket/")
    wait_text(live, "Connected")
    SHAPES.fault = True
    click(live, "Save profile")
    shown = wait_until(lambda: alerts(live, since), what="the alert")
    assert [(a["text"], a["source"]) for a in shown] == [("Save failed", "alert")]
    assert frames(live, since, "in")[-1]["data"] == '42["error", {"text": "Save failed"}]'
    assert SHAPES.saved() == []


# -- arrival ----------------------------------------------------------------------------------------

def test_an_error_already_on_the_page_is_reported_on_arrival(live):
    since = open_page(live, "/arrival/")
    shown = wait_until(lambda: alerts(live, since), what="the alert on arrival")
    assert [(a["text"], a["source"], a.get("initial")) for a in shown] == [
        ("Your session expired, please sign in again", "alert", True)]
    status = live.mcp.ok("reticle_snapshot", {"mode": "status"})["status"]
    assert [a["text"] for a in status["alerts"]] == ["Your session expired, please sign in again"], status
    assert status["route"] == "/arrival/" and status["title"], status
    click(live, "Check email")
    invalid = wait_until(lambda: alerts(live, since)[1:], what="the invalid field")
    assert invalid == [{"text": "Enter a valid email address", "source": "invalid", "level": "error",
                        "field": "Email", "ref": invalid[0]["ref"]}]


def test_a_burst_stream_is_capped_says_so_and_keeps_its_last_message(live):
    since = open_page(live, "/jobs/")
    click(live, "Load feed")
    wait_text(live, "%d rows, last %d" % (FEED_ROWS, FEED_ROWS))  # the page read its own copy whole
    done = request_of(live, since, "/feed")
    assert done["streamed"] is True and done["messageCount"] == FEED_ROWS
    msgs = stream_messages(live, since)
    assert 0 < len(msgs) < FEED_ROWS and done["messagesDropped"] == FEED_ROWS - len(msgs)
    assert json.loads(msgs[0]["data"]) == {"row": 1} and msgs[0]["index"] == 1
    assert json.loads(msgs[-1]["data"]) == {"row": FEED_ROWS} and msgs[-1]["final"] is True
    assert msgs[-1]["index"] == FEED_ROWS
    told = wait_until(lambda: [e["data"] for e in events(live, since, "truncated")
                               if e["data"].get("what") == "net.stream"], what="the truncated report")
    assert sum(t["dropped"] for t in told) == done["messagesDropped"]
    assert told[0]["requestId"] == done["requestId"]


def test_an_assertive_region_a_shown_alert_and_a_repeated_one(live):
    since = open_page(live, "/arrival/")
    wait_until(lambda: alerts(live, since), what="the alert on arrival")
    click(live, "Go offline")
    click(live, "Show notice")
    click(live, "Warn twice")
    wait_until(lambda: len(alerts(live, since)) >= 4, what="three more alerts")
    shown = [(a["text"], a["source"], a["level"]) for a in alerts(live, since)[1:]]
    assert shown == [("Connection lost", "assertive", None), ("Your card expires this month", "alert", None),
                     ("Disk almost full", "alert", None)]  # the two "Disk almost full" coalesced


# -- verdicts over these shapes ---------------------------------------------------------------------



def act(live, name, until=None, timeout_ms=3000):
    args = {"target": {"role": "button", "name": name}, "action": "click", "timeout_ms": timeout_ms}
    if until is not None:
        args["until"] = until
    return live.mcp.ok("reticle_act_and_wait", args)


STREAM_DONE = {"kind": "frame", "transport": "stream", "path": "success", "equals": True}
SOCKET_SAVED = {"kind": "frame", "direction": "in", "path": "1.text", "equals": "Saved profile"}


@pytest.mark.parametrize("page,fault,name,until,verified,saved", [
    ("/jobs/", False, "Hal", STREAM_DONE, "yes", [{"name": "Hal", "via": "jobs"}]),
    ("/jobs/?toast=0", True, "Ida", STREAM_DONE, "no", []),
    ("/socket/", False, "Jo", SOCKET_SAVED, "yes", [{"name": "Jo", "via": "socket"}]),
], ids=["a-streamed-success-is-yes", "a-streamed-failure-is-no", "a-socket-success-is-yes"])
def test_verdict_over_stream_and_socket_messages(live, page, fault, name, until, verified, saved):
    open_page(live, page)
    if page == "/socket/":
        wait_text(live, "Connected")
    SHAPES.fault = fault
    fill(live, "Name", name)
    out = act(live, "Save profile", until)
    assert out["verified"] == verified, out
    assert SHAPES.saved() == saved
    if verified == "yes":
        assert out["evidence"]["direction"] == "in", out  # the message itself is the evidence


# the same save, its answer shown in the page, or inside a web component's closed shadow root
@pytest.mark.parametrize("page", ["/fragments/", "/components/"])
def test_verdict_an_error_fragment_after_a_200_is_no_and_the_next_save_is_yes(live, page):
    open_page(live, page)
    since = latest(live)  # this document's alerts only, not a late toast of the page before
    SHAPES.fault = True
    fill(live, "Name", "Kim")
    out = act(live, "Save profile", {"kind": "net", "method": "POST", "urlContains": "/profile", "status": 200})
    assert SHAPES.saved() == []
    assert (out["verified"], out["verifiedReason"]) == ("no", "contradicted"), out
    assert "Could not save your profile" in json.dumps(out)
    shown = wait_until(lambda: alerts(live, since), what="the alert the user was shown")
    assert [(a["text"], a["source"]) for a in shown] == [("Could not save your profile", "alert")], shown
    SHAPES.fault = False
    out = act(live, "Save profile", {"kind": "net", "method": "POST", "urlContains": "/profile", "status": 200})
    assert [x["name"] for x in SHAPES.saved()] == ["Kim"], SHAPES.saved()
    assert out["verified"] == "yes", out



def test_verdict_a_job_accepted_with_200_whose_stream_then_fails_is_no(live):
    """The horizon: the POST's 200 is only the job's acceptance; its result streams after it."""
    open_page(live, "/jobs/?toast=0")
    SHAPES.fault = True
    fill(live, "Name", "Mo")
    out = act(live, "Save profile", {"kind": "net", "method": "POST", "urlContains": "/jobs", "status": 200})
    assert SHAPES.saved() == []
    assert out["verified"] == "no", out


def test_verdict_an_optimistic_success_under_a_failed_stream_is_no(live):
    open_page(live, "/jobs/")
    SHAPES.fault = True
    fill(live, "Name", "Lu")
    out = act(live, "Save profile", {"kind": "text", "contains": "Profile saved"})
    wait_until(lambda: [j["status"] for j in SHAPES.jobs().values()] == ["failed"], what="the failed job")
    assert SHAPES.saved() == []
    assert out["verified"] == "no", out



def test_more_shadow_roots_than_the_alert_search_covers_is_a_blind_spot_not_silence(live):
    open_page(live, "/many-components/")
    since = latest(live)
    spots = wait_until(lambda: [e["data"] for e in events(live, 0, "blind-spot")
                                if e["data"].get("kind") == "shadow-roots-over-cap"], what="the over-cap blind spot")
    assert len(spots) == 1 and "2000 shadow roots" in spots[0]["detail"], spots
    out = live.mcp.ok("reticle_assert", {"detail": "full", "since": since, "predicate": {"kind": "text",
                                                                                       "contains": "Catalogue"}})
    assert "shadow-roots-over-cap" in out.get("coverage", ""), out


def test_verdict_a_settle_with_an_alert_on_screen_is_no(live):
    open_page(live, "/socket/")
    wait_text(live, "Connected")
    SHAPES.fault = True
    out = act(live, "Save profile")
    assert SHAPES.saved() == []
    assert out["verified"] == "no", out


def test_verdict_two_chained_posts_with_different_bodies_are_yes(live):
    open_page(live, "/fragments/")
    fill(live, "Name", "Mo")
    out = act(live, "Run chain", {"kind": "net", "method": "POST", "urlContains": "/queue/join", "status": 200,
                                  "count": 2})
    assert [j["fn_index"] for j in SHAPES.joins()] == [1, 2]
    assert out["verified"] == "yes", out



def test_verdict_a_settle_with_no_effect_is_unknown(live):
    open_page(live, "/arrival/")
    wait_until(lambda: alerts(live, 0), what="the page's first alert")
    live.mcp.ok("reticle_act", {"target": {"label": "Email"}, "action": "focus"})
    out = live.mcp.ok("reticle_act_and_wait", {"target": {"label": "Email"}, "action": "hover", "timeout_ms": 1500})
    assert out["verified"] == "unknown", out


def test_a_stream_the_page_never_reads_is_read_only_so_far(live):
    since = open_page(live, "/jobs/")
    click(live, "Peek at the big feed")
    wait_text(live, "big feed 200")
    done = request_of(live, since, "/feed?big=1", timeout=30)
    assert done["streamed"] is True and "streamStopped" in done, done
    assert "final" not in stream_messages(live, since)[-1]
    # 8 MiB of ~1 KiB lines, then it let go at the next chunk, well before the end
    assert 8000 < done["messageCount"] < BIG_FEED_BYTES // 1024


def test_when_the_page_lets_go_of_a_stream_the_connection_closes(live):
    since = open_page(live, "/jobs/")
    click(live, "Read one tick")
    wait_text(live, "tick read: data: tick 1")
    done = request_of(live, since, "/ticker")
    assert done["streamed"] is True and done["cancelledByPage"] is True
    assert stream_messages(live, since)[0]["data"] == "tick 1"
    wait_until(lambda: SHAPES.tickers_open == 0, timeout=10, what="the server to see the stream closed")


def test_event_stream_messages_are_split_as_an_event_source_would(live):
    since = open_page(live, "/jobs/")
    click(live, "Read the awkward stream")
    wait_text(live, "awkward stream read")
    done = request_of(live, since, "/awkward")
    got = [(m.get("event"), m.get("lastEventId"), m["data"]) for m in stream_messages(live, since)]
    assert got == [("progress", "7", '{"step": 1,\n"of": 2}'),  # two data lines across a split CRLF, as sent
                   (None, "7", "first line\nsecond line"),
                   (None, "7", "\nno space"),
                   (None, "7", "the end")]
    assert done["messageCount"] == 4


def test_a_dialog_around_an_invalid_field_is_reported_beside_it(live):
    since = open_page(live, "/arrival/")
    wait_until(lambda: alerts(live, since), what="the alert on arrival")
    click(live, "Ask to confirm")
    wait_until(lambda: len(alerts(live, since)) >= 3, what="the dialog and its field")
    shown = [(a["source"], a.get("field"), a["text"]) for a in alerts(live, since)[1:]]
    assert shown == [("invalid", "Confirmation", "Type DELETE exactly"),
                     ("alertdialog", None, "Type DELETE to confirm Type DELETE exactly")]


# -- the failure dialects of issue 46 #4, on a Flask app (tests/_dialects_app.py): an htmx answer's failure
# wherever it lands, and Astro's action envelopes; with the script tag and in a device -----------------------

DIALECTS = DialectsApp()


@pytest.fixture(scope="module")
def dialects(tmp_path_factory):
    """A daemon, the Flask app, a Chromium tab on it (the script tag) and an MCP client of their own: a tab
    is one session per origin (its id lives in the origin's sessionStorage), so the module's tab stays home."""
    lv = Live(tmp_path_factory.mktemp("dialects"), None, path="/astro/",
              server=lambda daemon: DialectsServer(DIALECTS, daemon))
    yield lv
    lv.close()


@pytest.fixture(scope="module")
def dialects_device(dialects):
    opened = dialects.mcp.ok("reticle_open", {"url": dialects.app.url + "/astro/"})
    yield opened["sessionId"]
    dialects.mcp.call("reticle_close", {"sessionId": opened["sessionId"]})


@pytest.fixture(params=["tag", "device"])
def session(request, dialects):
    """The session of one mode: the dialects' own tab (the script tag) or their device."""
    if request.param == "device":
        return request.getfixturevalue("dialects_device")
    tabs = [t["sessionId"] for t in dialects.mcp.ok("reticle_sessions")["sessions"] if not t.get("device")]
    assert len(tabs) == 1, tabs
    return tabs[0]


def open_dialect(dialects, sid, path):
    DIALECTS.reset()
    nav = dialects.mcp.ok("reticle_navigate", {"url": dialects.app.url + path, "sessionId": sid})
    assert nav["confirmed"] is True, nav


def save_note(dialects, sid, title, **extra):
    """Fill the title and press Save -> the act's verdict (no `until` unless given)."""
    dialects.mcp.ok("reticle_act", {"target": {"label": "Title"}, "action": "fill", "args": {"value": title},
                                "sessionId": sid})
    return dialects.mcp.ok("reticle_act_and_wait", dict({"target": {"role": "button", "name": "Save"},
                                                     "action": "click", "timeout_ms": 4000, "sessionId": sid},
                                                    **extra))


HTMX_POSTED = {"kind": "net", "method": "POST", "urlContains": "/notes", "status": 200}
needs_htmx = pytest.mark.skipif(not os.path.exists(HTMX_JS), reason="needs htmx.org (sh tests/bootstrap.sh)")


@needs_htmx
@pytest.mark.parametrize("how", ["after", "outer", "end", "oob"])
def test_an_htmx_answer_marked_as_an_error_is_no_wherever_it_lands(dialects, session, how):
    """A refusal answered 200 whose fragment is marked as an error (no word of failure in it) lands after
    the form, replaces a box beside it, is appended to a list below it or is swapped out of band into the
    header: `no` every time it is repeated and every way it is asked; the server stored nothing."""
    open_dialect(dialects, session, "/htmx/%s/" % how)
    DIALECTS.refuse = True
    out = save_note(dialects, session, "Groceries", until={"kind": "text", "contains": "title is taken"})
    assert out["verified"] == "yes", out  # the predicate asks for the refusal itself
    for title in ("Groceries", "Groceries again"):
        out = save_note(dialects, session, title)
        assert (out["verified"], out["verifiedReason"]) == ("no", "failure_observed"), out
        assert REFUSED in out["because"] and "act's answer" in out["because"], out
    out = save_note(dialects, session, "Groceries", until=HTMX_POSTED)
    assert out["verified"] == "no" and REFUSED in out["because"], out
    dialects.mcp.ok("reticle_act", {"target": {"role": "button", "name": "Save"}, "action": "click", "sessionId": session})
    out = dialects.mcp.ok("reticle_assert", {"predicate": HTMX_POSTED, "timeout_ms": 3000, "sessionId": session})
    assert out["verified"] == "no" and REFUSED in out["because"], out
    assert DIALECTS.notes() == []


@needs_htmx
@pytest.mark.parametrize("how", ["after", "outer", "end", "oob", "words"])
def test_a_healthy_htmx_answer_is_yes_wherever_it_lands(dialects, session, how):
    open_dialect(dialects, session, "/htmx/%s/" % how)
    for title in ("Groceries", "Errands"):
        out = save_note(dialects, session, title)
        assert out["verified"] == "yes", out
    out = save_note(dialects, session, "Books", until=HTMX_POSTED)
    assert out["verified"] == "yes", out
    assert DIALECTS.notes() == ["Groceries", "Errands", "Books"]


@needs_htmx
def test_an_htmx_answer_in_words_of_failure_is_no_then_unknown_when_it_only_repeats_itself(dialects, session):
    """Plain words, no mark: the act's answer saying "Could not save the note." where it lands is `no`; the
    next refusal only puts the same words back in place of themselves (as a list re-rendered whole puts back
    a row that says "failed"), which is not known to be the act's: `unknown` (failure_text_shown)."""
    open_dialect(dialects, session, "/htmx/words/")
    DIALECTS.refuse = True
    out = save_note(dialects, session, "Groceries")
    assert (out["verified"], out["verifiedReason"]) == ("no", "failure_observed"), out
    assert "Could not save the note" in out["because"], out
    out = save_note(dialects, session, "Groceries")
    assert (out["verified"], out["verifiedReason"]) == ("unknown", "failure_text_shown"), out
    assert DIALECTS.notes() == []


# Astro actions: the answers exactly as Astro writes them, read both ways, then in the browser

ASTRO_CALL = {"kind": "net", "method": "POST", "urlContains": "/_actions/notes.create"}


def astro_call(status, ctype, body):
    return call(5, url="/_actions/notes.create", status=status, body=body, responseHeaders={"content-type": ctype})


@pytest.mark.parametrize("kind,meaning", [("data", "answer"), ("error", "failure"), ("error-200", "failure"),
                                          ("input", "failure"), ("data-failure", "failure")])
def test_an_astro_action_answer_is_read_for_what_it_means(kind, meaning):
    d = astro_call(*ASTRO_ANSWERS[kind])["data"]
    got = reticle._wire_meaning(d)
    assert got is not None and got[0] == meaning, got
    if kind != "data":
        said = "String must contain at least 1 character(s)" if kind == "input" else "That title is taken."
        assert said in got[1], got
    # the same bodies elsewhere, or read (GET), are not Astro's
    assert reticle._wire_meaning(call(5, url="/api/notes", status=ASTRO_ANSWERS[kind][0],
                                      body=ASTRO_ANSWERS[kind][2])["data"]) is None
    assert reticle._wire_meaning(call(5, method="GET", url="/_actions/notes.create", body=ASTRO_ANSWERS[kind][2],
                                      status=ASTRO_ANSWERS[kind][0])["data"]) is None


def test_an_astro_error_envelope_under_200_is_a_failed_request_with_its_own_status():
    """As SvelteKit's `failure` envelope is read: the call is a 409 for every rule, its message named; the
    error at its own status stays what it is, and a success stays a 200."""
    under_200 = astro_call(*ASTRO_ANSWERS["error-200"])["data"]
    reticle._take_wire_status(under_200)
    assert (under_200["status"], under_200["httpStatus"], under_200["ok"]) == (409, 200, False), under_200
    assert "CONFLICT" in under_200["statusNote"] and "That title is taken." in under_200["statusNote"], under_200
    assert not reticle._call_matches(under_200, {"status": 200}) and reticle._call_matches(under_200, {"ok": False})
    for kind in ("data", "error", "input", "data-failure"):
        d = astro_call(*ASTRO_ANSWERS[kind])["data"]
        reticle._take_wire_status(d)
        assert d["status"] == ASTRO_ANSWERS[kind][0] and "httpStatus" not in d, d
    old = astro_call(200, "application/json", ASTRO4_INPUT_ERROR)["data"]
    reticle._take_wire_status(old)
    assert (old["status"], old["httpStatus"]) == (400, 200) and "String must contain" in old["statusNote"], old


def test_an_astro_error_envelope_makes_the_settle_no_and_its_data_yes():
    window = [astro_call(*ASTRO_ANSWERS["error-200"]), ev(6, "dom.added")]
    reticle._take_wire_status(window[0]["data"])
    settle = reticle.parse_predicate({"kind": "settled", "quietMs": 300})
    k = reticle._Known([], {}, None, "", ())
    got = reticle._decide({"pass": True, "evidence": {}}, [], window, k, 0.0, settle, act=True)
    assert got[:2] == ("no", "failure_observed") and "409" in got[2] and "That title is taken." in got[2], got
    fine = [astro_call(*ASTRO_ANSWERS["data"]), ev(6, "dom.added")]
    got = reticle._decide({"pass": True, "evidence": {}}, [], fine, k, 0.0, settle, act=True)
    assert got[:2] == ("yes", "proved"), got
    net_200 = reticle.parse_predicate(dict(ASTRO_CALL, status=200))
    failed = [astro_call(*ASTRO_ANSWERS["data-failure"])]
    assert [c["kind"] for c in reticle._contradictions(failed, net_200, None)] == ["partial-failure-in-ok-response"]
    assert reticle._contradictions(fine, net_200, None) == []


def test_devalue_is_read_back_as_devalue_writes_it():
    assert reticle._devalue_parse(ASTRO_DATA) == (True, {"ok": True, "note": {
        "id": 7, "title": "Groceries", "created": "2025-03-01T09:30:00.000Z"}})
    # a shared value, undefined (-1), a hole (-2), -0 (-6), a Set, a Map, a BigInt, a null-prototype object
    assert reticle._devalue_parse('[{"a":1,"b":1,"c":-1,"d":2},"x",[3,-2,-6],7]') == (
        True, {"a": "x", "b": "x", "c": None, "d": [7, None, 0]})
    assert reticle._devalue_parse('[["Set",1,2],"a","b"]') == (True, ["a", "b"])
    assert reticle._devalue_parse('[["Map",1,2],"k",3]') == (True, {"k": 3})
    assert reticle._devalue_parse('[["BigInt","12345678901234567890"]]') == (True, 12345678901234567890)
    assert reticle._devalue_parse('[["null","title",1],"A"]') == (True, {"title": "A"})
    assert reticle._devalue_parse('[{"self":0}]')[1]["self"]["self"] is not None  # a cycle is no hang
    for nope in ('{"type":"AstroActionError"}', '[{"a":9}]', "[]", "not json", '[{"a":"1"}]'):
        assert reticle._devalue_parse(nope) == (False, None), nope


# what the answer of each Astro failure names: its own status, or (under 200) what the envelope or data says
ASTRO_SAID = {"error": "answered 409", "input": "answered 400", "error-200": "Astro action error CONFLICT",
              "data-failure": "the Astro action's data (devalue) says ok: false"}


@pytest.mark.parametrize("kind,verdict", [("data", "yes"), ("error", "no"), ("error-200", "no"), ("input", "no"),
                                          ("data-failure", "no")])
def test_an_astro_action_in_the_browser(dialects, session, kind, verdict):
    """The page calls the action as Astro's client does and says "Saved" for any 2xx: the answer alone tells,
    with the act's settle (twice) and with `until` a 200 of the action."""
    open_dialect(dialects, session, "/astro/")
    DIALECTS.astro = kind
    for until in (None, None, dict(ASTRO_CALL, status=200)):
        out = save_note(dialects, session, "Groceries", **({"until": until} if until else {}))
        assert out["verified"] == verdict, out
        assert verdict == "yes" or ASTRO_SAID[kind] in out["because"], out
    assert DIALECTS.notes() == (["Groceries"] * 3 if kind == "data" else [])
