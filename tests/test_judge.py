"""Each predicate kind's `judge` from a table: a hand-built observation (a window of events, the
requests open, the live page's read and its near misses) in, one row per outcome out.  No browser:
Judge is pure, and Observe (the only part that waits and reads the page) is tested elsewhere."""

import pytest

import reticle
from _events import call
from _events import ev

parse = reticle.parse_predicate


def pending(t, method="POST", url="/api/save"):
    return ev(t, "net.pending", method=method, url=url, requestId="r%d" % t, startedAt=float(t))


def frame(t, data, direction="in", url="ws://x/socket", transport="ws", **extra):
    return ev(t, "net.ws" if transport == "ws" else "net.sse", direction=direction, url=url, transport=transport,
              data=data, **extra)


def obs(window=(), now=None, live=None, near=None, open_requests=(), url="http://x/", since=0.0, after_act=False,
        upto=None):
    window = list(window)
    now = now if now is not None else (window[-1]["t"] + 1 if window else 1.0)
    return reticle._Observation(window, now=now, since=since, open_requests=list(open_requests), url=url,
                                after_act=after_act, upto=upto, live=live or {}, near=near or {})


def read(p, value):
    """A live read of the (parsed) leaf `p` keyed as Observe keys it."""
    return {reticle._leaf_key(p): value}


def element(p_raw, reply, near=None):
    p = parse(p_raw)
    return p, obs(live=read(p, reply), near=read(p, near) if near is not None else None)


# (id, predicate, observation, expected fields, a word the failure or inconclusive reason holds)
def rows():
    net = {"kind": "net", "method": "POST", "urlContains": "/api/save", "status": 200}
    yield "net.present", net, obs([call(10)]), {"pass": True, "assertion": "net.present"}, None
    yield "net.miss", net, obs([call(10, url="/api/other")]), {"pass": False, "assertion": "net.present"}, \
        "no completed request matched"
    yield "net.in-flight", net, obs([pending(10)], open_requests=[pending(10)["data"]]), {"pass": False}, \
        "still in flight"
    body = dict(net, bodyContains="saved")
    yield "net.body", body, obs([call(10, body='{"saved": 1}')]), {"pass": True, "assertion": "net.present"}, None
    yield "net.body-other", body, obs([call(10, body='{"ok": 1}')]), {"pass": False, "assertion": "net.body"}, \
        "does not contain"
    yield "net.body-unread", body, obs([call(10, body=None)]), {"pass": False, "assertion": "net.body"}, \
        "not captured"
    # bodies as the server sent them: for JSON, spacing never decides
    spaced = dict(net, bodyContains='"ok": true')
    yield "net.body-json-spacing", spaced, obs([call(10, body='{"ok":true}')]), {"pass": True}, None
    yield "net.body-json-pretty", dict(net, bodyContains='"ok":true'), \
        obs([call(10, body='{\n  "ok": true\n}\n')]), {"pass": True}, None
    yield "net.body-json-not-in-strings", dict(net, bodyContains='"name": "a b"'), \
        obs([call(10, body='{"name": "a  b"}')]), {"pass": False, "assertion": "net.body"}, "'{\"name\": \"a  b\"}'"
    yield "net.body-excerpt", spaced, obs([call(10, body='{"error": "quota", "ok": false}')]), \
        {"pass": False, "assertion": "net.body"}, 'it was: \'{"error": "quota", "ok": false}\''
    header = dict(net, header={"name": "x-saved", "equals": "1"})
    yield "net.header", header, obs([call(10, responseHeaders={"x-saved": "1"})]), {"pass": True}, None
    yield "net.header-uncaptured", header, obs([call(10)]), {"pass": False, "assertion": "net.header"}, \
        "headers were not captured"
    yield "net.header-other", header, obs([call(10, responseHeaders={"x-saved": "0"})]), \
        {"pass": False, "assertion": "net.answered-otherwise"}, "answered 200, not as asked"
    hidden = ev(10, "net.request", method="POST", url="/api/save", initiator="document", statusKnown=False)
    yield "net.status-hidden", net, obs([hidden]), {"pass": False, "assertion": "net.status-hidden", "decided": True,
                                                    "decidedBy": "unknowable"}, \
        "the browser hides the status of a full-page post answered by a redirect"
    yield "net.answered-otherwise-grace", net, obs([call(10, status=500)], now=100), \
        {"pass": False, "assertion": "net.answered-otherwise", "retryAfterMs": 160}, "answered 500"
    yield "net.answered-otherwise-final", net, obs([call(10, status=500)], now=400), \
        {"pass": False, "decided": True, "decidedBy": "answered-otherwise"}, "answered 500"
    yield "net.frames-could-be-it", dict(net, method="GET"), \
        obs([frame(10, "hi", direction="out", url="ws://x/api/save/live")]), {"pass": False}, "WebSocket/EventSource"
    yield "net.frames-no-method-could-be-it", {"kind": "net", "urlContains": "/api/save"}, \
        obs([frame(10, "hi", url="http://x/api/save/events", transport="sse")]), {"pass": False}, \
        "WebSocket/EventSource"
    # a socket opens with a GET and an EventSource is one: neither carries a POST or a DELETE
    yield "net.frames-socket-cannot-be-a-post", net, \
        obs([frame(10, "hi", direction="out", url="ws://x/api/save/live")]), {"pass": False, "assertion": "net.present"}, \
        "cannot carry that method"
    yield "net.frames-sse-cannot-be-a-delete", dict(net, method="DELETE"), \
        obs([frame(10, "hi", url="http://x/api/save/events", transport="sse")]), \
        {"pass": False, "assertion": "net.present"}, "cannot carry that method"
    # a streamed answer is its fetch's: a POST stream could be the POST, a GET stream could not
    post_stream = [ev(9, "net.pending", method="POST", url="/api/save/stream", requestId="s1"),
                   frame(10, "part", url="http://x/api/save/stream", transport="stream", requestId="s1")]
    yield "net.frames-post-stream-could-be-it", net, obs(post_stream), {"pass": False}, "WebSocket/EventSource"
    get_stream = [ev(9, "net.pending", method="GET", url="/api/save/stream", requestId="s1"),
                  frame(10, "part", url="http://x/api/save/stream", transport="stream", requestId="s1")]
    yield "net.frames-get-stream-cannot-be-a-post", net, obs(get_stream), {"pass": False, "assertion": "net.present"}, \
        "cannot carry that method"
    yield "net.frames-unknown-stream-could-be-it", net, \
        obs([frame(10, "part", url="http://x/api/save/stream", transport="stream", requestId="s9")]), \
        {"pass": False}, "WebSocket/EventSource"
    yield "net.frames-elsewhere", net, obs([frame(10, "hi", direction="out", url="ws://x/api/kernels/1")]), \
        {"pass": False, "assertion": "net.present"}, "no completed request matched"
    count = dict(net, count=1)
    yield "net.count", count, obs([call(10)]), {"pass": True, "assertion": "net.count"}, None
    yield "net.count-exceeded", count, obs([call(10), call(20)]), \
        {"pass": False, "decided": True, "decidedBy": "count-exceeded"}, "saw 2"
    yield "net.count-short", dict(net, count=2), obs([call(10), pending(20)], open_requests=[pending(20)["data"]]), \
        {"pass": False, "decided": False, "pendingRequests": ["POST /api/save"]}, "saw 1"
    yield "net.since", dict(net, since=50), obs([call(10)]), \
        {"pass": False, "assertion": "net.present", "observed": "no calls at all in this window"}, None

    yield "console.present", {"kind": "console", "level": "error"}, obs([ev(10, "error.uncaught", message="boom")]), \
        {"pass": True, "assertion": "console.present"}, None
    yield "console.miss", {"kind": "console", "level": "error", "contains": "boom"}, \
        obs([ev(10, "console.error", text="other")]), {"pass": False, "assertion": "console.present"}, "containing"
    yield "console.absent", {"kind": "console", "level": "error", "absent": True}, \
        obs([ev(10, "console.log", text="x")]), {"pass": True, "assertion": "console.absent"}, None
    yield "console.absent-violated", {"kind": "console", "level": "error", "absent": True}, \
        obs([ev(10, "console.error", text="bad")]), {"pass": False, "decided": True, "decidedBy": "absence-violated"}, \
        "bad"
    yield "console.any-level-skips-info", {"kind": "console"}, obs([ev(10, "console.info", text="x")]), \
        {"pass": False}, "no console"

    yield "animation.started", {"kind": "animation", "name": "fade"}, obs([ev(10, "anim.start", name="fade")]), \
        {"pass": True}, None
    yield "animation.not-completed", {"kind": "animation", "name": "fade", "completed": True}, \
        obs([ev(10, "anim.start", name="fade")]), {"pass": False}, "anim.end"

    sig = {"kind": "signal", "name": "saved", "dataMatches": {"id": {"$gt": 0}}}
    yield "signal.match", sig, obs([ev(10, "signal", name="saved", data={"id": 3})]), \
        {"pass": True, "assertion": "signal"}, None
    yield "signal.payload", sig, obs([ev(10, "signal", name="saved", data={"id": 0})]), \
        {"pass": False, "assertion": "signal.payload"}, "did not match"
    yield "signal.absent", sig, obs([ev(10, "signal", name="other")]), {"pass": False, "assertion": "signal.absent"}, \
        "did not fire"
    yield "signal.count-exceeded", {"kind": "signal", "name": "saved", "count": 1}, \
        obs([ev(10, "signal", name="saved"), ev(20, "signal", name="saved")]), \
        {"pass": False, "decided": True, "decidedBy": "count-exceeded"}, "saw 2"

    yield "route.change", {"kind": "route", "pathname": "/done"}, obs([ev(10, "route.change", to="http://x/done")]), \
        {"pass": True, "assertion": "route"}, None
    yield "route.current", {"kind": "route", "pathname": "/here"}, obs(url="http://x/here?q=1"), \
        {"pass": True, "evidence": {"to": "http://x/here?q=1", "pathname": "/here", "decidedBy": "current-route"}}, None
    yield "route.pathname", {"kind": "route", "pathname": "/done"}, obs(url="http://x/form"), \
        {"pass": False, "assertion": "route.pathname"}, "not '/done'"
    yield "route.contains", {"kind": "route", "contains": "ok=1"}, obs(url="http://x/form?ok=0"), \
        {"pass": False, "assertion": "route.contains"}, "does not contain"

    settled = {"kind": "settled", "quietMs": 300}
    yield "settled.in-flight", settled, obs([pending(10)]), {"pass": False, "assertion": "settled.in-flight"}, \
        "still in flight"
    yield "settled.nothing", settled, obs([]), {"pass": True, "evidence": {"settled": True, "quietForMs": None}}, None
    yield "settled.quiet", settled, obs([ev(10, "dom.added")], now=400), \
        {"pass": True, "evidence": {"settled": True, "quietForMs": 390}}, None
    yield "settled.busy", settled, obs([ev(10, "dom.added")], now=110), \
        {"pass": False, "assertion": "settled.quiet", "retryAfterMs": 200}, "busy 100 ms ago"
    yield "settled.after-act", settled, obs([], since=100, now=200, after_act=True), \
        {"pass": False, "retryAfterMs": 200}, "busy 100 ms ago"
    yield "settled.dom-text-is-not-busy", settled, obs([ev(10, "dom.text")], now=400), \
        {"pass": True, "evidence": {"settled": True, "quietForMs": None}}, None

    fr = {"kind": "frame", "direction": "in", "contains": "saved"}
    yield "frame.present", fr, obs([frame(10, "saved ok")]), {"pass": True, "assertion": "frame.present"}, None
    yield "frame.path", {"kind": "frame", "path": "1.status", "equals": "ok"}, \
        obs([frame(10, '42["r",{"status":"ok"}]')]), {"pass": True}, None
    yield "frame.binary", fr, obs([frame(10, None)]), {"pass": False, "assertion": "frame"}, "could not be read"
    yield "frame.miss", fr, obs([frame(10, "other")]), {"pass": False, "assertion": "frame.present"}, "no message"
    yield "frame.count-exceeded", dict(fr, count=1), obs([frame(10, "saved"), frame(20, "saved")]), \
        {"pass": False, "decided": True, "decidedBy": "count-exceeded"}, "saw 2"


def live_rows():
    """Rows of the kinds that read the live page: the read (and near misses) are in the observation."""
    yield ("element.present",) + element({"kind": "element", "query": {"role": "button", "name": "Pay"}},
                                         {"count": 1, "elements": [{"ref": "e1"}]}) + ({"pass": True}, None)
    yield ("element.absent",) + element({"kind": "element", "query": {"role": "alert"}, "absent": True},
                                        {"count": 0}) + ({"pass": True, "assertion": "element.absent"}, None)
    yield ("element.absent-violated",) + element({"kind": "element", "query": {"role": "alert"}, "absent": True},
                                                 {"count": 2, "elements": [{}, {}]}) + \
        ({"pass": False, "assertion": "element.absent"}, "2 element(s)")
    yield ("element.miss",) + element({"kind": "element", "query": {"testid": "pay"}}, {"count": 0}) + \
        ({"pass": False, "assertion": "element.present"}, "no element matches testid 'pay'")
    yield ("element.scope-missing",) + element({"kind": "element", "query": {"testid": "pay", "scope": "#f"}},
                                               {"count": 0, "scopeMissing": True}, {}) + \
        ({"pass": False}, "the scope '#f' matched nothing")
    yield ("element.near-state",) + element(
        {"kind": "element", "query": {"role": "button", "name": "Pay"}, "state": "enabled"}, {"count": 0},
        {"relaxed": {"count": 1, "elements": [{"states": ["disabled"]}]}}) + \
        ({"pass": False, "assertion": "element.state"}, "exists but not in state enabled; its states: disabled")
    yield ("element.near-role-name",) + element(
        {"kind": "element", "query": {"role": "button", "name": "Pay"}}, {"count": 0},
        {"peers": {"elements": [{"name": "Buy"}, {"name": "Cancel"}]}}) + \
        ({"pass": False, "assertion": "element.role+name", "observed": ["Buy", "Cancel"]}, "saw: 'Buy', 'Cancel'")
    yield ("element.near-testids",) + element(
        {"kind": "element", "query": {"testid": "pay"}}, {"count": 0, "hint": {"presentTestids": ["buy"]}}, {}) + \
        ({"pass": False, "observed": ["buy"]}, "testids present here: buy")
    yield ("element.states",) + element(
        {"kind": "element", "query": {"role": "checkbox"}, "state": ["visible", "checked"]},
        {"count": 2, "elements": [{"states": ["visible"]}, {"states": ["visible", "checked"]}]}) + \
        ({"pass": True, "evidence": [{"states": ["visible", "checked"]}]}, None)
    yield ("element.states-too-many",) + element(
        {"kind": "element", "query": {"role": "checkbox"}, "state": ["visible", "checked"]},
        {"count": 300, "elements": [{}] * 200}) + ({"pass": False}, "more than 200 elements match")
    p = parse({"kind": "element", "query": {"by": "role"}})
    yield "element.no-value", p, obs(), {"pass": False}, "needs a `value`"
    p = parse({"kind": "text", "contains": "Saved"})
    yield "text.present", p, obs(live=read(p, {"found": True, "sample": "Saved!", "count": 1, "places": 1})), \
        {"pass": True, "evidence": {"sample": "Saved!", "count": 1, "places": 1}}, None
    yield "text.miss", p, obs(live=read(p, {"found": False})), {"pass": False, "assertion": "text.present"}, \
        "no text containing 'Saved'"
    yield "text.read-failed", p, obs(live=read(p, reticle._ReadFailed("command 'eval_probe' timed out"))), \
        {"pass": False}, "the page could not answer: command 'eval_probe' timed out"
    p = parse({"kind": "text", "contains": "Error", "absent": True})
    yield "text.absent-violated", p, obs(live=read(p, {"found": True, "sample": "Error!"})), \
        {"pass": False, "assertion": "text.absent"}, "is on the page"
    p = parse({"kind": "state", "store": "cart", "path": "items.length", "equals": 2})
    yield "state.equals", p, obs(live=read(p, {"read": {"found": True, "value": 2}})), \
        {"pass": True, "assertion": "state.equals"}, None
    yield "state.other", p, obs(live=read(p, {"read": {"found": True, "value": 1}})), \
        {"pass": False, "assertion": "state.equals"}, "is 1, expected 2"
    yield "state.store-missing", p, obs(live=read(p, {"read": {"storeMissing": True, "storeNames": ["user"]}})), \
        {"pass": False, "assertion": "state.store-missing"}, "no store named 'cart'"
    yield "state.path-missing", p, obs(live=read(p, {"read": {"found": False, "availableKeys": ["total"]}})), \
        {"pass": False, "assertion": "state.path-missing"}, "keys there: total"
    yield "state.truncated", p, obs(live=read(p, {"read": {"found": True, "value": 2, "truncated": True}})), \
        {"pass": False}, "cut by transport caps"
    p = parse({"kind": "state", "path": "user.id"})
    yield "state.no-store", p, obs(live=read(p, {"names": [], "reads": []})), {"pass": False}, "no store is registered"
    yield "state.several-stores", p, obs(live=read(p, {"names": ["a", "b"], "reads": [
        ["a", {"found": True, "value": 1}], ["b", {"found": True, "value": 2}]]})), {"pass": False}, "name one"
    yield "state.one-of-several", p, obs(live=read(p, {"names": ["a", "b"], "reads": [
        ["a", {"found": False}], ["b", {"found": True, "value": 2}]]})), \
        {"pass": True, "evidence": {"store": "b", "path": "user.id", "value": 2}}, None
    p = parse({"kind": "storage", "key": "theme", "equals": "dark"})
    yield "storage.equals", p, obs(live=read(p, {"found": True, "value": "dark", "area": "local"})), \
        {"pass": True, "assertion": "storage"}, None
    yield "storage.other", p, obs(live=read(p, {"found": True, "value": "light"})), \
        {"pass": False, "assertion": "storage.equals"}, "expected dark"
    yield "storage.missing", p, obs(live=read(p, {"found": False})), {"pass": False, "assertion": "storage.present"}, \
        "is not in any storage"
    p = parse({"kind": "storage", "key": "theme", "absent": True})
    yield "storage.absent-violated", p, obs(live=read(p, {"found": True, "value": "x", "area": "local"})), \
        {"pass": False, "assertion": "storage.absent"}, "is present"
    changed = {"kind": "storage", "key": "theme", "changed": True, "contains": "dark"}
    yield "storage.changed", changed, obs([ev(10, "storage.change", key="theme", area="local", to="dark")]), \
        {"pass": True, "assertion": "storage.changed"}, None
    yield "storage.changed-other", changed, obs([ev(10, "storage.change", key="theme", area="local", to="light")]), \
        {"pass": False, "assertion": "storage.contains"}, "does not contain 'dark'"
    yield "storage.not-changed", changed, obs([]), {"pass": False, "assertion": "storage.changed"}, "not written"


def combinator_rows():
    net = {"kind": "net", "urlContains": "/api/save"}
    absent = {"kind": "console", "level": "error", "absent": True}
    yield "allOf.decided", {"kind": "allOf", "predicates": [net, absent]}, \
        obs([call(10), ev(20, "console.error", text="x")]), \
        {"pass": False, "assertion": "allOf", "decided": True, "decidedBy": "absence-violated"}, "console"
    yield "allOf.pass", {"kind": "allOf", "predicates": [net, absent]}, obs([call(10)]), {"pass": True}, None
    yield "anyOf.pass", {"kind": "anyOf", "predicates": [{"kind": "signal", "name": "x"}, net]}, obs([call(10)]), \
        {"pass": True}, None
    yield "anyOf.miss", {"kind": "anyOf", "predicates": [{"kind": "signal", "name": "x"}, net]}, obs([]), \
        {"pass": False, "assertion": "anyOf"}, "no predicate of anyOf held"
    yield "not.held", {"kind": "not", "predicate": net}, obs([call(10)]), \
        {"pass": False, "assertion": "not", "decided": True, "decidedBy": "absence-violated"}, "negated predicate held"
    yield "not.pass", {"kind": "not", "predicate": net}, obs([]), {"pass": True}, None
    yield "upto-clips-the-judged-instant", net, obs([call(10), call(20, url="/api/save")], upto=5), \
        {"pass": False, "observed": "no calls at all in this window"}, None


def server(t, path="/api/save", status=200, writes=(), doc="d1", rid=None, **extra):
    """A server.request event as the daemon stitches it from the app's middleware (Server truth)."""
    return ev(t, "server.request", method=extra.pop("method", "POST"), path=path, status=status, view="v",
              exception=extra.pop("exception", None), logged=extra.pop("logged", []), writes=list(writes),
              documentId=doc, requestId=rid or "r%d" % t, **extra)


def marked(t, method="POST", url="/api/save", mark=True):
    """A request the SDK marked for the server: serverMark is the id the daemon issued with its mark
    (the record of it lands under that id); mark=False: it went unmarked, the tab had no mark left."""
    e = pending(t, method, url)
    e["doc"] = "d1"
    e["data"]["serverMarked"] = True
    if mark:
        e["data"]["serverMark"] = "r%d" % t
    return e


def server_obs(window=(), now=None, seen=1, open_requests=()):
    o = obs(window, now=now, open_requests=open_requests)
    o.known = reticle._Known(list(open_requests), {}, None, server_seen=seen)
    return o


def server_rows():
    wrote = {"op": "insert", "table": "profile", "rows": 1, "committed": True}
    p = {"kind": "server", "method": "POST", "urlContains": "/api/save", "writes": {"table": "profile"}}
    yield "server.present", p, server_obs([server(10, writes=[wrote])]), \
        {"pass": True, "assertion": "server.present"}, None
    yield "server.rolled-back", p, server_obs([server(10, writes=[dict(wrote, committed=False)])], now=100), \
        {"pass": False, "assertion": "server.present", "retryAfterMs": 160}, "1 rolled back"
    yield "server.answered-otherwise", p, server_obs([server(10)], now=400), \
        {"pass": False, "decided": True, "decidedBy": "answered-otherwise"}, "0 writes"
    yield "server.awaiting", p, server_obs([marked(10)], now=11), \
        {"pass": False, "assertion": "server.awaiting"}, "has not arrived yet"
    yield "server.awaiting-grace", p, server_obs([marked(10), call(10)], now=200), \
        {"pass": False, "assertion": "server.awaiting"}, "has not arrived yet"
    yield "server.unreported", p, server_obs([marked(10), call(10)], now=1000), \
        {"pass": False, "assertion": "server.unreported"}, "no record of it arrived"
    yield "server.unreported-no-mark-left", p, server_obs([marked(10, mark=False), call(10)], now=1000), \
        {"pass": False, "assertion": "server.unreported"}, "without a mark"
    yield "server.no-middleware", p, server_obs([call(10)], seen=0), \
        {"pass": False, "assertion": "server.absent"}, "reticle.DjangoMiddleware"
    reported = [marked(10), call(10), server(12, rid="r10", writes=[wrote])]
    yield "server.reported-links-its-request", p, server_obs(reported, now=1000), {"pass": True}, None
    count = dict(p, count=1)
    yield "server.count-exceeded", count, server_obs([server(10, writes=[wrote]), server(20, writes=[wrote])]), \
        {"pass": False, "decided": True, "decidedBy": "count-exceeded"}, "saw 2"
    yield "server.exception", {"kind": "server", "exception": True}, \
        server_obs([server(10, status=500, exception={"type": "ValueError", "message": "m", "frames": []})]), \
        {"pass": True}, None
    yield "server.not-exception", {"kind": "not", "predicate": {"kind": "server", "exception": True}}, \
        server_obs([server(10)], now=400), {"pass": True}, None
    # writes nobody watched are not "0 writes"; a key asked of a write that names no key is not known
    yield "server.unwatched", p, server_obs([server(10, watched=[])], now=1000), \
        {"pass": False, "assertion": "server.unwatched"}, "reticle.watch_sqlite3(conn)"
    yield "server.unwatched-count-0", dict(p, writes={"count": 0}), server_obs([server(10, watched=[])], now=1000), \
        {"pass": False, "assertion": "server.unwatched"}, "nothing watches"
    yield "server.not-unwatched", {"kind": "not", "predicate": p}, server_obs([server(10, watched=[])], now=1000), \
        {"pass": False}, "nothing watches"
    keyed = dict(p, writes={"table": "profile", "op": "update", "key": 3})
    updated = dict(wrote, op="update")
    yield "server.key-held", keyed, server_obs([server(10, writes=[dict(updated, keys=[3])])]), {"pass": True}, None
    yield "server.key-other-row", keyed, server_obs([server(10, writes=[dict(updated, keys=[2])])], now=1000), \
        {"pass": False, "assertion": "server.present"}, "[key 2]"
    yield "server.key-not-named", keyed, server_obs([server(10, writes=[updated])], now=1000), \
        {"pass": False, "assertion": "server.keys", "decided": True}, "does not name its rows by primary key"
    # known as soon as the record is there (decided: no later event changes it), never at the timeout
    spans = {"source": "otel", "dbTraced": True, "dbScopes": ["opentelemetry.instrumentation.sqlalchemy"]}
    unsure = dict(wrote, committed=None, note="its commit is not traced (no BEGIN/COMMIT spans)")
    yield "server.commit-unknown", p, server_obs([server(10, writes=[unsure], **spans)], now=500), \
        {"pass": False, "assertion": "server.unseen", "decided": True}, "whether that write was kept or rolled back"
    # (spans' logs come in batches of their own: within the grace an ERROR may still join the record)
    yield "server.commit-unknown-waits-for-its-logs", p, server_obs([server(10, writes=[unsure], **spans)], now=20), \
        {"pass": False, "assertion": "server.unseen", "decided": False, "retryAfterMs": 390}, "kept or rolled back"
    yield "server.commit-unknown-rolled-back-asked", dict(p, committed=False), \
        server_obs([server(10, writes=[unsure], **spans)], now=500), {"pass": False, "decided": True}, \
        "Reticle's Python middleware sees commits"
    yield "server.commit-unknown-other-table-still-fails", dict(p, writes={"table": "audit"}), \
        server_obs([server(10, writes=[unsure], **spans)], now=1000), {"pass": False, "assertion": "server.present"}, \
        "no server request matched"
    # a failure the server reported decides before an unknown: the save that logged ERROR (or raised) is `no`
    # though its write's commit is unknown; one that logged nothing stays unknown; a leaf asking for the
    # error is not failed by it
    logged = [{"level": "ERROR", "logger": "notes", "message": "saving note failed"}]
    yield "server.commit-unknown-but-logged-error", p, \
        server_obs([server(10, writes=[unsure], logged=logged, **spans)], now=20), \
        {"pass": False, "assertion": "server.failed", "decided": True, "decidedBy": "server-failed"}, \
        "the server logged ERROR from notes (saving note failed) under POST /api/save"
    yield "server.unwatched-but-raised", p, server_obs([server(10, watched=[], status=500, exception={
        "type": "IntegrityError", "message": "NOT NULL", "frames": []})], now=20), \
        {"pass": False, "assertion": "server.failed", "decided": True}, "the server raised IntegrityError"
    yield "server.commit-unknown-error-on-another-route", p, server_obs([
        server(10, writes=[unsure], **spans), server(11, path="/api/poll", logged=logged)], now=500), \
        {"pass": False, "assertion": "server.unseen", "decided": True}, "kept or rolled back"
    yield "server.commit-unknown-logged-asked", dict(p, logged=True), \
        server_obs([server(10, writes=[unsure], logged=logged, **spans)], now=20), \
        {"pass": False, "assertion": "server.unseen"}, "kept or rolled back"
    yield "server.writes-without-database-spans", p, \
        server_obs([server(10, source="otel", dbTraced=False)], now=500), \
        {"pass": False, "assertion": "server.writes-unknown", "decided": True}, "without database instrumentation"
    yield "server.unwatched-decided", p, server_obs([server(10, watched=[])], now=20), \
        {"pass": False, "decided": True}, "nothing watches"
    yield "server.all-of-an-unknowable-is-decided", {"kind": "allOf", "predicates": [p, {"kind": "server"}]}, \
        server_obs([server(10, watched=[])], now=20), {"pass": False, "decided": True}, "nothing watches"
    yield "server.a-driver-nothing-watches", p, server_obs([server(10, unseen=["pymysql"])], now=20), \
        {"pass": False, "assertion": "server.unseen", "decided": True}, "pymysql, which nothing watches"
    # a redirect's document request (POST /form -> 303 -> GET /done) whose record has not landed is never a no:
    # it waits for the record, and is unknown at the timeout; the record that lands decides
    posted = [marked(10, url="/form"), server(12, path="/form", status=303, rid="r10"),
              call(14, method="POST", url="http://x/form", status=200, initiator="document", redirected=True,
                   finalUrl="http://x/done", body=None)]
    done = {"kind": "server", "method": "GET", "urlContains": "/done", "status": 200}
    yield "server.redirect-record-not-landed", done, server_obs(posted, now=1000), \
        {"pass": False, "assertion": "server.awaiting", "decided": None}, "the tab made GET /done"
    yield "server.redirect-record-landed", done, \
        server_obs(posted + [server(16, method="GET", path="/done", rid="r16")], now=1000), {"pass": True}, None
    yield "server.redirect-record-landed-otherwise", done, \
        server_obs(posted + [server(16, method="GET", path="/done", status=500, rid="r16")], now=1000), \
        {"pass": False, "decided": True, "decidedBy": "answered-otherwise"}, "no server request matched"
    yield "server.a-request-never-made", dict(done, urlContains="/elsewhere"), server_obs(posted, now=1000), \
        {"pass": False, "assertion": "server.present"}, "no server request matched"
    yield "server.fetch-record-not-landed", {"kind": "server", "method": "PUT", "urlContains": "/api/item"}, \
        server_obs([server(8, path="/api/list", method="GET"), call(10, method="PUT", url="/api/item/3")], now=1000), \
        {"pass": False, "assertion": "server.awaiting"}, "the tab made PUT /api/item/3"
    yield "server.a-driver-nothing-watches-beside-a-seen-write", p, \
        server_obs([server(10, writes=[wrote], unseen=["pymysql"])], now=20), {"pass": True}, None


def stored_rows():
    """The `stored` kind (Storage truth) over a window of store commits, and over a live read (now: true)."""
    k = reticle._Known([], {}, None, "http://x")
    k.stores, k.store_tables = ("sqlite app.db",), {"sqlite app.db": ["notes"]}
    note = {"op": "insert", "table": "notes", "key": {"id": 7}, "values": {"id": 7, "title": "Buy milk"}}

    def stored_obs(window, known=k, live=None):
        o = obs(window, live=live, after_act=True)
        o.known = known
        return o
    p = {"kind": "stored", "table": "notes", "where": {"title": "Buy milk"}}
    commit = ev(20, "store.commit", store="sqlite app.db", changes=[note], uncompared=[])
    yield "stored.present", p, stored_obs([call(10), commit]), {"pass": True, "assertion": "stored.present"}, None
    yield "stored.other-row", dict(p, where={"title": "Eggs"}), stored_obs([call(10), commit]), \
        {"pass": False, "assertion": "stored.present"}, "Buy milk"
    yield "stored.shared", p, stored_obs([call(10), dict(commit, data=dict(commit["data"], shared=True))]), \
        {"pass": False, "assertion": "stored.shared"}, "another tab"
    yield "stored.unwatched", p, stored_obs([call(10)], reticle._Known([], {}, None, "http://x")), \
        {"pass": False, "decided": True, "decidedBy": "unknowable"}, "reticle_watch_db"
    now = dict(p, now=True)
    yield "stored.now", now, stored_obs([], live=read(parse(now), {"store": "sqlite app.db", "table": "notes",
                                                                   "rows": [note["values"]], "total": 1})), \
        {"pass": True, "assertion": "stored.now"}, None
    yield "stored.now-none", now, stored_obs([], live=read(parse(now), {"store": "sqlite app.db", "table": "notes",
                                                                        "rows": [], "total": 0})), \
        {"pass": False, "assertion": "stored.now"}, "holds 0 row(s)"


ALL = list(rows()) + list(live_rows()) + list(combinator_rows()) + list(server_rows()) + list(stored_rows())


@pytest.mark.parametrize("rid,p,o,expected,word", ALL, ids=[r[0] for r in ALL])
def test_judge(rid, p, o, expected, word):
    res = reticle._judge(parse(p), o)
    for key, value in expected.items():
        assert res.get(key) == value, (rid, key, res)
    if word is not None:
        text = res.get("inconclusive") or res.get("failureReason") or ""
        assert word in text, (rid, res)


def test_every_kind_has_rows_and_every_leaf_kind_a_judge():
    kinds = {r[0].split(".")[0] for r in ALL}
    assert set(reticle._PREDICATE_KINDS) <= kinds
    for name, spec in reticle._PREDICATE_KINDS.items():
        assert (spec.judge is None) == (name in ("allOf", "anyOf", "not")), name
        assert (spec.read is not None) == (name in ("element", "text", "state", "storage", "stored")), name


def test_judge_final_marks_a_timeout_and_a_lost_tab():
    net = parse({"kind": "net", "urlContains": "/api/save"})
    o = obs([])
    o.timed_out = 4000
    res = reticle._judge_final(net, o)
    assert res["timedOut"] and not res["pass"], res
    o = obs([call(10)])
    o.timed_out = 4000
    assert reticle._judge_final(net, o)["pass"]  # it held at the last look: no timeout to report
    counted = parse({"kind": "net", "urlContains": "/api/save", "count": 1})
    assert not reticle._judge_final(counted, o)["pass"]  # a count never confirmed is not a pass
    o = obs([call(10)])
    o.lost = "the tab closed or crashed"
    res = reticle._judge_final(net, o)
    assert res["observationLost"] and "closed" in res["failureReason"], res


def test_a_verdict_from_an_observation_alone():
    """Judge whole (result, contradictions, verdict) is a pure function of the observation."""
    net = parse({"kind": "net", "urlContains": "/api/save"})
    o = obs([call(10, body='{"ok": false}')])
    res, contradictions, (verified, reason, _) = reticle._verdict(net, o)
    assert res["pass"] and verified == "no" and reason == "contradicted", (res, contradictions)
    assert contradictions[0]["kind"] == "partial-failure-in-ok-response"


def test_a_text_miss_names_what_the_page_tells_the_user():
    p = parse({"kind": "text", "contains": "Saved"})
    told = read(p, {"told": ["Nothing was stored", "Ready"]})
    res = reticle._judge(p, obs(live=read(p, {"found": False}), near=told))
    assert res["observed"] == ["Nothing was stored", "Ready"], res
    assert "the page tells the user: 'Nothing was stored', 'Ready'" in res["failureReason"], res


def test_a_message_shown_and_gone_in_the_window_was_shown():
    """Issue 29 #3: a success toast shown after the act and removed before the check held in that window;
    the evidence says when it came and went.  One still to come, or another text, does not."""
    p = parse({"kind": "text", "contains": "Note saved"})
    came = ev(120, "ui.status", text="Note saved", source="aria-status")
    went = ev(720, "ui.gone", text="Note saved", source="aria-status", shownMs=600)
    res = reticle._judge(p, obs([came, went], live=read(p, {"found": False}), since=20.0))
    assert res["pass"] and res["assertion"] == "text.shown-and-gone", res
    assert "shown at +100 ms, gone at +700 ms" in res["evidence"]["note"], res
    assert not reticle._judge(p, obs([came], live=read(p, {"found": False})))["pass"]
    other = parse({"kind": "text", "contains": "Note deleted"})
    assert not reticle._judge(other, obs([came, went], live=read(other, {"found": False})))["pass"]
