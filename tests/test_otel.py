"""Server truth from OpenTelemetry: the daemon's OTLP/HTTP receiver (JSON and protobuf, gzip, the
pairing token, clean refusals, the hand-written protobuf reader fuzzed against messages encoded by
the official opentelemetry-proto package), spans mapped to the middleware's records, `reticle init`'s
Node notes, and real Express and Next.js apps with stock OpenTelemetry instrumentation and a traced
PostgreSQL, driven in headless Chromium."""

import gzip
import json
import re
import os
import urllib.error
import urllib.request

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import reticle
from _harness import Daemon

pb_trace = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
pb_logs = pytest.importorskip("opentelemetry.proto.collector.logs.v1.logs_service_pb2")
from google.protobuf import json_format  # noqa: E402  (comes with opentelemetry-proto)
from opentelemetry.proto.common.v1 import common_pb2  # noqa: E402
from opentelemetry.proto.trace.v1 import trace_pb2  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path / "state")
    yield d
    d.close()


def kv(key, value):
    v = common_pb2.AnyValue()
    if isinstance(value, bool):
        v.bool_value = value
    elif isinstance(value, int):
        v.int_value = value
    elif isinstance(value, float):
        v.double_value = value
    elif isinstance(value, list):
        v.array_value.values.extend(kv("x", x).value for x in value)
    else:
        v.string_value = value
    return common_pb2.KeyValue(key=key, value=v)


def traces_request(trace=TRACE, status=200, exception=None, db=(), db_scope="@opentelemetry/instrumentation-pg",
                   service="shop", port=3000):
    """An ExportTraceServiceRequest as the official package encodes it: one SERVER span (of `service`, answering
    127.0.0.1:`port`), an exception event on it when asked, and a CLIENT span per database statement (under the
    scope of the instrumentation that made it: Node's pg by default)."""
    req = pb_trace.ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(kv("service.name", service))
    ss = rs.scope_spans.add()
    ss.scope.name = "@opentelemetry/instrumentation-http"
    server = ss.spans.add(trace_id=bytes.fromhex(trace), span_id=bytes.fromhex("00f067aa0ba902b7"),
                          parent_span_id=bytes.fromhex("b7ad6b7169203331"), name="POST /api/save",
                          kind=trace_pb2.Span.SPAN_KIND_SERVER, start_time_unix_nano=1_700_000_000_000_000_000,
                          end_time_unix_nano=1_700_000_000_012_500_000)
    server.attributes.extend([kv("http.request.method", "POST"), kv("url.path", "/api/save"),
                              kv("http.route", "/api/save"), kv("http.response.status_code", status),
                              kv("server.address", "127.0.0.1"), kv("server.port", port)])
    if exception:
        ev = server.events.add(name="exception", time_unix_nano=1_700_000_000_010_000_000)
        ev.attributes.extend([kv("exception.type", exception[0]), kv("exception.message", exception[1]),
                              kv("exception.stacktrace", exception[2])])
    if db:
        ss = rs.scope_spans.add()
        ss.scope.name = db_scope
    for i, sql in enumerate(db):
        sp = ss.spans.add(trace_id=bytes.fromhex(trace), span_id=(i + 1).to_bytes(8, "big"),
                          parent_span_id=bytes.fromhex("00f067aa0ba902b7"), name="pg.query",
                          kind=trace_pb2.Span.SPAN_KIND_CLIENT,
                          start_time_unix_nano=1_700_000_000_001_000_000 + i, end_time_unix_nano=1_700_000_000_002_000_000)
        sp.attributes.extend([kv("db.system", "postgresql"), kv("db.statement", sql)])
    return req


def as_json(msg):
    """The message in OTLP's JSON mapping: protobuf's JSON with the ids as hex (OTLP's rule), not base64."""
    doc = json_format.MessageToDict(msg)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in sp:
                        import base64
                        sp[k] = base64.b64decode(sp[k]).hex()
    return doc


def post(daemon, path, body, media="application/json", token=True, encoding=None):
    headers = {"Content-Type": media} if media else {}
    if token:
        headers["Authorization"] = "Bearer " + (daemon.token() if token is True else token)
    if encoding:
        headers["Content-Encoding"] = encoding
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(daemon.url + path, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read()


# -- the protobuf reader ----------------------------------------------------------------------------

def test_protobuf_and_json_bodies_read_alike():
    stack = "Error: nope\n    at save (/srv/shop/app.js:23:11)\n    at Layer.handle (/srv/shop/node_modules/x.js:1:1)"
    msg = traces_request(exception=("Error", "nope", stack), db=["INSERT INTO profile (name) VALUES ($1)"])
    from_pb = reticle._otel_spans(reticle._pb_message(memoryview(msg.SerializeToString()), "TracesRequest"))
    from_json = reticle._otel_spans(as_json(msg))
    assert from_pb == from_json
    spans, bad = from_pb
    assert bad == [] and len(spans) == 2
    server = spans[0]
    assert server["traceId"] == TRACE and server["kind"] == 2 and server["parentSpanId"] == "b7ad6b7169203331"
    assert server["attrs"]["http.response.status_code"] == 200 and server["service"] == "shop"
    rec = reticle._otel_record(server, spans, [])
    assert rec["status"] == 200 and rec["method"] == "POST" and rec["view"] == "/api/save"
    assert reticle._otel_record(dict(server, attrs={"http.target": "/api/save?token=s3cret"}), spans, [])["path"] \
        == "/api/save"  # the query (it may hold secrets) is left out, as the middleware leaves it out
    assert rec["host"] == "127.0.0.1:3000" and rec["ms"] == 12.5
    assert rec["exception"] == {"type": "Error", "message": "nope", "frames": ["app.js:23 save"]}
    assert [(w["op"], w["table"], w["committed"]) for w in rec["writes"]] == [("insert", "profile", True)]


def test_logs_in_protobuf_keep_only_errors_with_a_trace():
    req = pb_logs.ExportLogsServiceRequest()
    sl = req.resource_logs.add().scope_logs.add()
    sl.scope.name = "shop.views"
    sl.log_records.add(severity_number=17, severity_text="ERROR", trace_id=bytes.fromhex(TRACE),
                       body=common_pb2.AnyValue(string_value="could not save password=hunter2"))
    sl.log_records.add(severity_number=9, trace_id=bytes.fromhex(TRACE), body=common_pb2.AnyValue(string_value="ok"))
    sl.log_records.add(severity_number=21, body=common_pb2.AnyValue(string_value="no trace"))
    logs = reticle._otel_logs(reticle._pb_message(memoryview(req.SerializeToString()), "LogsRequest"))
    assert logs == [{"traceId": TRACE, "logger": "shop.views", "level": "ERROR",
                     "message": "could not save password=[redacted]"}]


@pytest.mark.parametrize("sql, op, table, committed", [
    (["BEGIN", "UPDATE items SET done = $1 WHERE id = $2", "ROLLBACK"], "update", "items", False),
    (["BEGIN", "DELETE FROM items WHERE id = $1", "COMMIT"], "delete", "items", True),
    (["BEGIN", "INSERT INTO \"items\" (a) VALUES ($1)"], "insert", "items", False),
    (["INSERT INTO items (a) VALUES (1)"], "insert", "items", True),
])
def test_database_spans_become_writes_with_commit_or_rollback(sql, op, table, committed):
    spans, _ = reticle._otel_spans(as_json(traces_request(db=sql)))
    rec = reticle._otel_record(spans[0], spans, [])
    assert [(w["op"], w["table"], w["committed"]) for w in rec["writes"]] == [(op, table, committed)]
    assert rec["statements"] == len(sql)


@pytest.mark.parametrize("scope", ["opentelemetry.instrumentation.sqlalchemy", "opentelemetry.instrumentation.sqlite3"])
def test_a_write_of_an_instrumentation_that_traces_no_transaction_has_an_unknown_commit(scope):
    """Python's SQLAlchemy and sqlite3 instrumentations emit no BEGIN, COMMIT or ROLLBACK spans: a write they
    show may have been rolled back, so its commit is unknown (None), not done; once the service has shown a
    transaction statement, a write outside one was autocommitted."""
    spans, _ = reticle._otel_spans(as_json(traces_request(db=["INSERT INTO notes (t) VALUES (?)"], db_scope=scope)))
    rec = reticle._otel_record(spans[0], spans, [])
    assert [(w["op"], w["table"], w["committed"]) for w in rec["writes"]] == [("insert", "notes", None)]
    assert "unknown commit" in reticle._server_line(dict(rec, watched=None, dbTraced=True))
    rec = reticle._otel_record(spans[0], spans, [], tx_traced=True)
    assert [w["committed"] for w in rec["writes"]] == [True]


def test_the_operation_and_collection_attributes_name_a_write_without_its_text():
    spans, _ = reticle._otel_spans(as_json(traces_request(db=["x"])))
    spans[1]["attrs"] = {"db.system.name": "mongodb", "db.operation.name": "update", "db.collection.name": "carts"}
    assert [(w["op"], w["table"]) for w in reticle._otel_record(spans[0], spans, [])["writes"]] == [("update", "carts")]


@pytest.mark.parametrize("stack, frames", [
    ("TypeError: x\n    at Object.<anonymous> (/app/server.js:5:3)\n    at node:internal/main:1:1",
     ["server.js:5 <anonymous>"]),
    ('Traceback (most recent call last):\n  File "/app/views.py", line 9, in save\n    x()\n'
     '  File "/app/lib.py", line 3, in x\n    raise ValueError\nValueError', ["lib.py:3 x", "views.py:9 save"]),
    ("java.lang.IllegalStateException: no\n\tat com.shop.Cart.save(Cart.java:42)\n", ["Cart.java:42 save"]),
])
def test_stack_frames_of_node_python_and_java_name_the_apps_own(stack, frames):
    assert reticle._stack_frames(stack) == frames


VALID = [traces_request().SerializeToString(),
         traces_request(exception=("E", "m", "at f (/a.js:1:1)"), db=["BEGIN", "UPDATE t SET a=1", "COMMIT"])
         .SerializeToString()]


def read_or_refuse(data):
    """The reader and the mapping over arbitrary bytes: a result, or a clean _PbError, never anything else."""
    try:
        payload = reticle._pb_message(memoryview(data), "TracesRequest")
    except reticle._PbError:
        return
    spans, _ = reticle._otel_spans(payload)
    for sp in spans:
        reticle._otel_record(sp, spans, [])


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_are_read_or_cleanly_refused(data):
    read_or_refuse(data)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
       st.integers(0, 10_000))
def test_mutated_valid_messages_are_read_or_cleanly_refused(base, flips, cut):
    data = bytearray(base)
    for at, byte in flips:
        data[at % len(data)] = byte
    read_or_refuse(bytes(data[:max(1, cut % (len(data) + 1))]))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                               st.sampled_from(["resourceSpans", "scopeSpans", "spans", "traceId", "spanId", "kind",
                                                "attributes", "key", "value", "intValue", "events", "status", "code",
                                                "arrayValue", "values", "kvlistValue", "stringValue"]),
                               inner, max_size=5), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(json_values)
@example({"resourceSpans": True})  # a list's place held by a scalar (found by this test)
@example({"resourceSpans": [{"scopeSpans": 7}]})
def test_any_json_shape_maps_without_raising(doc):
    if isinstance(doc, dict):
        spans, _ = reticle._otel_spans(doc)
        for sp in spans:
            reticle._otel_record(sp, spans, [])
        reticle._otel_logs({"resourceLogs": [doc]})


# -- hostile numbers: a span no clock or server could make is refused, the rest of its batch kept ----

def hostile_request(status=None, start=1_700_000_000_000_000_000, end=1_700_000_000_012_500_000, trace=TRACE):
    """traces_request with its SERVER span's status and times replaced by what protobuf lets a sender write
    (a double NaN or infinity for the status code, times past 64 bits or an end before the start)."""
    req = traces_request(trace=trace)
    sp = req.resource_spans[0].scope_spans[0].spans[0]
    sp.start_time_unix_nano, sp.end_time_unix_nano = start, end
    if status is not None:
        for a in sp.attributes:
            if a.key == "http.response.status_code":
                a.value.Clear()
                if isinstance(status, float):
                    a.value.double_value = status
                else:
                    a.value.int_value = status
    return req


HOSTILE = [({"status": float("nan")}, "HTTP status code"), ({"status": float("inf")}, "HTTP status code"),
           ({"status": float("-inf")}, "HTTP status code"), ({"status": 1e308}, "HTTP status code"),
           ({"status": 2 ** 63 - 1}, "HTTP status code"), ({"status": -200}, "HTTP status code"),
           ({"status": 99}, "HTTP status code"), ({"status": 600}, "HTTP status code"),
           ({"start": 1_700_000_000_012_500_000, "end": 1_700_000_000_000_000_000}, "end before its start")]


@pytest.mark.parametrize("kwargs, reason", HOSTILE)
def test_a_span_with_a_hostile_number_is_refused_and_its_batch_kept(kwargs, reason):
    """int(nan) raised in the record's conversion (a 500, the rest of the batch not filed); now the span
    is refused with its reason and a good span beside it is read, and converts."""
    bad = hostile_request(**kwargs)
    good = traces_request(trace="0af7651916cd43dd8448eb211c80319c")
    bad.resource_spans.extend(good.resource_spans)
    spans, refused = reticle._otel_spans(reticle._pb_message(memoryview(bad.SerializeToString()), "TracesRequest"))
    assert [s["traceId"] for s in spans] == ["0af7651916cd43dd8448eb211c80319c"]
    assert len(refused) == 1 and reason in refused[0], refused
    assert reticle._otel_record(spans[0], spans, [])["status"] == 200


def test_a_negative_or_overflowing_time_of_json_is_refused():
    doc = as_json(traces_request())
    for value in ("-5", str(2 ** 64), "1e9", 1.5):
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"] = value
        spans, refused = reticle._otel_spans(doc)
        assert spans == [] and "time" in refused[0], (value, refused)


@settings(max_examples=300, deadline=None)
@given(status=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2 ** 63, 2 ** 63 - 1)),
       start=st.integers(0, 2 ** 64 - 1), end=st.integers(0, 2 ** 64 - 1),
       rows=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2 ** 63, 2 ** 63 - 1)))
def test_any_numbers_protobuf_carries_convert_or_refuse_the_span(status, start, end, rows):
    req = hostile_request(status=status, start=start, end=end)
    db = req.resource_spans[0].scope_spans[0].spans.add(
        trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex("00000000000000aa"),
        parent_span_id=bytes.fromhex("00f067aa0ba902b7"), kind=trace_pb2.Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=start, end_time_unix_nano=end)
    db.attributes.extend([kv("db.system", "postgresql"), kv("db.statement", "INSERT INTO t VALUES (1)"),
                          kv("db.response.affected_rows", rows)])
    spans, refused = reticle._otel_spans(reticle._pb_message(memoryview(req.SerializeToString()), "TracesRequest"))
    assert len(spans) + len(refused) == 2
    for sp in spans:
        if sp["kind"] == 2:
            rec = reticle._otel_record(sp, spans, [])
            assert rec["status"] is None or 100 <= rec["status"] <= 599
            assert rec["ms"] is None or rec["ms"] >= 0
            json.dumps(rec, allow_nan=False)  # nothing that JSON cannot carry reaches a record


# -- the receiver on a real daemon -------------------------------------------------------------------

def test_the_receiver_takes_json_protobuf_and_gzip_with_the_token(daemon):
    msg = traces_request()
    status, media, body = post(daemon, "/v1/traces", as_json(msg))
    assert (status, media, json.loads(body)) == (200, "application/json", {})
    status, media, body = post(daemon, "/v1/traces", msg.SerializeToString(), "application/x-protobuf")
    assert (status, media, body) == (200, "application/x-protobuf", b"")
    status, _, body = post(daemon, "/v1/traces", gzip.compress(msg.SerializeToString()), "application/x-protobuf",
                           encoding="gzip")
    assert (status, body) == (200, b"")
    status, _, body = post(daemon, "/v1/logs", {"resourceLogs": []})
    assert (status, json.loads(body)) == (200, {})
    # spans without valid ids: OTLP's partial success, in the request's own encoding
    bad = as_json(msg)
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "zz"
    status, _, body = post(daemon, "/v1/traces", bad)
    assert status == 200 and json.loads(body)["partialSuccess"]["rejectedSpans"] == "1", body
    msg.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\0" * 16
    status, _, body = post(daemon, "/v1/traces", msg.SerializeToString(), "application/x-protobuf")
    answer = pb_trace.ExportTraceServiceResponse.FromString(body)
    assert status == 200 and answer.partial_success.rejected_spans == 1, body
    assert "traceId" in answer.partial_success.error_message


@pytest.mark.parametrize("kwargs, code, fragment", [
    ({"token": False}, 403, "pairing token"),
    ({"token": "not-the-token"}, 403, "pairing token"),
    ({"media": "text/plain"}, 415, "application/x-protobuf"),
    ({"media": None}, 415, "application/x-protobuf"),
    ({"body": b"{not json"}, 400, "not JSON"),
    ({"body": b"\x0a\xff\xff", "media": "application/x-protobuf"}, 400, "ExportTraceServiceRequest"),
    ({"body": b"\x0b\x01", "media": "application/x-protobuf"}, 400, "wire type 3"),
    ({"body": [1, 2]}, 400, "resourceSpans"),
    ({"body": b"\x1f\x8b not gzip", "encoding": "gzip"}, 400, "gzip"),
    ({"body": gzip.compress(b"{}")[:-6], "encoding": "gzip"}, 400, "truncated"),
    ({"body": gzip.compress(b" " * (17 * 1024 * 1024)), "encoding": "gzip"}, 413, "inflates past"),
    ({"encoding": "br"}, 415, "gzip"),
])
def test_the_receiver_refuses_with_clear_errors_and_keeps_serving(daemon, kwargs, code, fragment):
    body = kwargs.pop("body", {"resourceSpans": []})
    status, _, answer = post(daemon, "/v1/traces", body, **kwargs)
    refusal = json.loads(answer)
    assert status == code and fragment in refusal["detail"], (status, refusal)
    assert post(daemon, "/v1/traces", {"resourceSpans": []})[0] == 200
    assert daemon.status()["running"] is True


def test_the_openapi_document_lists_the_otlp_routes(daemon):
    with urllib.request.urlopen(daemon.url + "/openapi.json", timeout=10) as resp:
        doc = json.loads(resp.read())
    for path in ("/v1/traces", "/v1/logs"):
        assert "post" in doc["paths"][path] and "403" in doc["paths"][path]["post"]["responses"]


# -- a real Express app with stock OpenTelemetry instrumentation, in headless Chromium ---------------

import glob  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

from _harness import AppProcess, free_port, wait_until  # noqa: E402
from _harness import chromium_path  # noqa: E402, F401  (a browser test module: conftest marks it `browser`)
from test_server import WRITE, act, open_tab, saved  # noqa: E402

NODE_MODULES = os.path.join(HERE, ".otel", "node_modules")
PG_BIN = max(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), default="")


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL cluster (Debian's package) on a free port, trust auth, user `app`; as
    root, run by the `postgres` user in a folder it can reach (pytest's own is private to root)."""
    if not os.path.isfile(os.path.join(PG_BIN, "initdb")):
        pytest.skip("PostgreSQL is not installed (tests/bootstrap.sh installs Debian's postgresql)")
    import pathlib
    import tempfile
    root = pathlib.Path(tempfile.mkdtemp(prefix="reticle-pg-"))
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(str(root), "postgres")
    data, port = str(root / "data"), free_port()
    subprocess.run(as_user + [PG_BIN + "/initdb", "-D", data, "-A", "trust", "-U", "app", "--no-sync"],
                   check=True, capture_output=True, cwd="/tmp")
    subprocess.run(as_user + [PG_BIN + "/pg_ctl", "-D", data, "-l", str(root / "log"), "-w", "-o",
                              "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off" % (port, root), "start"],
                   check=True, capture_output=True, cwd="/tmp")
    yield port
    subprocess.run(as_user + [PG_BIN + "/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True,
                   cwd="/tmp")
    shutil.rmtree(str(root), ignore_errors=True)


class ExpressApp(AppProcess):
    """tests/_otel_app.js as a child process, its exporter pointed at the daemon by the standard
    OTEL_* variables only, as a user's app would be."""

    def __init__(self, tmp, daemon, pg_port, protocol="json", db_traced=True, register=False, delay_ms=200):
        if not shutil.which("node") or not os.path.isdir(os.path.join(NODE_MODULES, "@opentelemetry")):
            pytest.skip("node or tests/.otel (tests/bootstrap.sh installs it) is missing")
        super().__init__(tmp, "express")
        self.pg_port = pg_port
        env = dict(os.environ, NODE_PATH=NODE_MODULES, OTEL_EXPORTER_OTLP_ENDPOINT=daemon.url,
                   OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20" + daemon.token(),
                   OTEL_BSP_SCHEDULE_DELAY=str(delay_ms), OTEL_SERVICE_NAME="shop", OTEL_TEST_PROTOCOL=protocol,
                   OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none")
        if not db_traced:
            env["OTEL_TEST_NO_DB"] = "1"
        if register:  # the zero-code route `reticle init` prints for Node: the exporter's protocol is its default
            # --require: this CommonJS app finds its packages through NODE_PATH, which ES-module resolution
            # (--import) does not read; an app with its own node_modules takes the --import init prints
            env.update(NODE_OPTIONS="--require @opentelemetry/auto-instrumentations-node/register",
                       OTEL_TRACES_EXPORTER="otlp", OTEL_TEST_REGISTER="1")
        self.start(["node", os.path.join(HERE, "_otel_app.js"), str(self.port), daemon.url, str(pg_port)], env, HERE)

    def rows(self):
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "app", "-d", "postgres",
                              "-tAc", "SELECT COUNT(*) FROM profile"], capture_output=True, check=True)
        return int(out.stdout.strip())


class _TracedSaves:
    """A page with the script tag whose button fetches POST /api/save; the app keeps the traceparent
    of each request it was sent (the trace ids the daemon issued to the tab)."""

    def __init__(self, daemon):
        import tornado.web
        from _harness import AppServer
        self.traceparents = []
        seen = self.traceparents
        page = ('<!doctype html><title>saves</title><script src="%s/reticle.js"></script>'
                '<button onclick="fetch(\'/api/save\', {method: \'POST\', body: \'{}\'})">Save</button>' % daemon.url)

        class Page(tornado.web.RequestHandler):
            def get(self):
                self.write(page)

        class Save(tornado.web.RequestHandler):
            def post(self):
                seen.append(self.request.headers.get("traceparent", ""))
                self.write({"ok": True})

        self.server = AppServer([(r"/", Page), (r"/api/save", Save)])
        self.url = self.server.url


def test_a_hostile_span_under_an_issued_trace_is_refused_and_its_batch_filed(daemon, mcp):
    """A protobuf span under a trace id the daemon issued to a real tab, whose status code is a double NaN,
    was a 500 from /v1/traces (int(nan) in the record's conversion) and the rest of its batch went unfiled;
    now that span is refused with its reason and the good span beside it lands in the tab."""
    from _harness import Browser
    app = _TracedSaves(daemon)
    browser = Browser(app.url + "/")
    try:
        sid = wait_until(lambda: [s["sessionId"] for s in mcp.ok("reticle_sessions")["sessions"]
                                  if s["url"].startswith(app.url)], 20, what="the tab")[0]
        for _ in range(2):
            act(mcp, sid, "Save", {"kind": "net", "urlContains": "/api/save", "status": 200})
        traces = [tp.split("-")[1] for tp in app.traceparents]
        assert len(traces) == 2 and all(len(t) == 32 for t in traces), app.traceparents
        batch = hostile_request(status=float("nan"), trace=traces[0])
        batch.resource_spans.extend(traces_request(trace=traces[1]).resource_spans)
        status, _, body = post(daemon, "/v1/traces", batch.SerializeToString(), "application/x-protobuf")
        assert status == 200, body
        answer = pb_trace.ExportTraceServiceResponse.FromString(body)
        assert answer.partial_success.rejected_spans == 1
        assert "HTTP status code that is not a whole number" in answer.partial_success.error_message
        otel = wait_until(lambda: daemon.status()["serverTruth"]["openTelemetry"]["stitched"] >= 1 and
                          daemon.status()["serverTruth"]["openTelemetry"], 10, what="the good span's record")
        assert otel["stitched"] == 1, otel
        records = [e for e in server_events(mcp, sid) if e.get("source") == "otel"]
        assert [(r["method"], r["path"], r["status"]) for r in records] == [("POST", "/api/save", 200)], records
    finally:
        browser.close()
        app.server.close()


TIED_BY = "method, path and time"
TIED_LINE = "matched by method, path and time, the request carried no mark"


def server_events(mcp, sid):
    return [e["data"] for e in mcp.ok("reticle_observe", {"since": 0, "filters": ["server"], "max_events": 2000,
                                                          "sessionId": sid})["events"]]


def test_a_real_express_app_with_opentelemetry_in_chromium(tmp_path, daemon, mcp, postgres):
    app = ExpressApp(tmp_path, daemon, postgres)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        before = app.rows()
        # a healthy save: yes, from the spans (the record says its source)
        out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "yes", (out, app.log())
        assert app.rows() == before + 1
        assert any("POST /api/save → 200" in s and "view /api/save" in s and "1 write (insert profile ×≥1)" in s
                   and s.endswith("from OpenTelemetry spans") for s in out["server"]), out["server"]
        assert [r["source"] for r in server_events(mcp, sid)] == ["otel"]
        # answers 200 {ok: true} and writes nothing: never yes
        out = act(mcp, sid, "Save (no-op)", dict(WRITE, urlContains="/api/noop"))
        assert out["verified"] == "no" and "0 writes" in out["because"], out
        # the insert rolled back (BEGIN ... ROLLBACK traced by the pg instrumentation): not a write
        out = act(mcp, sid, "Save (rollback)", dict(WRITE, urlContains="/api/rollback"))
        assert out["verified"] == "no", out
        assert app.rows() == before + 1
        # an exception the app's error handler turned into a 200: no, naming the app's own frame
        out = act(mcp, sid, "Save (swallowed)", saved("/api/swallow"))
        assert out["verified"] == "no" and out["verifiedReason"] == "contradicted", (out, server_events(mcp, sid))
        assert "server-exception" in out["because"] and "profile store unavailable" in out["because"], out["because"]
        assert "_otel_app.js:" in out["because"] and "loadProfileStore" in out["because"], out["because"]
        # an error the app logged (OpenTelemetry logs, /v1/logs) under its 200: no, naming the logger
        out = act(mcp, sid, "Save (logged)", saved("/api/logged"))
        assert out["verified"] == "no" and "server-logged-error" in out["because"], out
        assert "shop.views" in out["because"] and "could not save profile" in out["because"], out["because"]
        # an XHR carries the trace context too
        out = act(mcp, sid, "Save (xhr)", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "yes", out
        # the app's own traceparent is left alone: its spans cannot be attributed, so unknown, saying why
        out = act(mcp, sid, "Save (own trace)", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "unknown" and "own traceparent" in out["because"], out
        # a request made outside the tab, under a trace id the daemon never issued: exported, never lands
        n = len(server_events(mcp, sid))
        req = urllib.request.Request(app.url + "/api/save", data=b'{"name":"eve"}', method="POST", headers={
            "Content-Type": "application/json", "traceparent": "00-%s-b7ad6b7169203331-01" % TRACE})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
        time.sleep(1.5)  # well past the exporter's 200 ms batch delay
        assert len(server_events(mcp, sid)) == n
    finally:
        if browser is not None:
            browser.close()
        app.close()
    assert "Traceback" not in daemon.log()


def spans_heard(daemon):
    return daemon.status()["serverTruth"]["openTelemetry"]["spans"]


def add_profile(mcp, sid, button, until):
    mcp.ok("reticle_act", {"target": {"label": "Name"}, "action": "fill", "args": {"value": "ada"}, "sessionId": sid})
    return act(mcp, sid, button, until, timeout_ms=8000)


def test_a_form_post_in_a_device_carries_the_trace_context_a_page_cannot_set(tmp_path, daemon, mcp, postgres):
    """A plain HTML form post, then its 303: no script can set a document request's headers.  In a
    device the daemon adds the traceparent of the SDK's navigation mark (a trace id it issued to the
    tab), so the spans judge the post; a trace id the page put in the cookie itself lands nothing.  With
    the script tag the mark rides only in a cookie, which OpenTelemetry does not read: the post's span is
    tied to it by method, path and time (the one request that fits), and the answer says so."""
    app = ExpressApp(tmp_path, daemon, postgres)
    browser = None
    try:
        assert spans_heard(daemon) == 0
        urllib.request.urlopen(app.url + "/form", timeout=10).read()  # made outside any tab: heard, never filed
        wait_until(lambda: spans_heard(daemon) > 0, 10, what="the daemon to hear the app's first spans")
        sid = open_tab(mcp, app, device=True, path="/form")[0]
        before = app.rows()
        out = add_profile(mcp, sid, "Add", dict(WRITE, urlContains="/form/save"))
        assert out["verified"] == "yes", (out, app.log())
        assert app.rows() == before + 1
        posts = [r for r in server_events(mcp, sid) if r["method"] == "POST"]
        assert [(r["source"], r["path"], r["status"]) for r in posts] == [("otel", "/form/save", 303)], posts
        # answers 303 like the save, writes nothing: no
        out = add_profile(mcp, sid, "Add (no-op)", dict(WRITE, urlContains="/form/noop"))
        assert out["verified"] == "no" and "0 writes" in out["because"], out
        assert app.rows() == before + 1
        # the page puts a trace id it was never issued first in the mark cookie: it gets no traceparent and that
        # trace id lands nothing; the post's span is tied to it by method, path and time, and says so
        out = add_profile(mcp, sid, "Add (forged)", dict(WRITE, urlContains="/form/save"))
        assert out["verified"] == "yes" and out["because"].endswith(TIED_LINE), out
        assert app.rows() == before + 2
        posts = [r for r in server_events(mcp, sid) if r.get("method") == "POST"]
        assert [r.get("matchedBy") for r in posts] == [None, None, TIED_BY], posts
        # a fault on the post shares the browser's interception with the trace context, and gives it back
        fault = mcp.ok("reticle_fault", {"match": {"urlContains": "/form/save", "method": "POST",
                                                   "resourceType": "document"}, "respond": {"status": 500},
                                         "sessionId": sid})
        out = add_profile(mcp, sid, "Add", {"kind": "net", "method": "POST", "urlContains": "/form/save", "ok": True})
        assert out["verified"] == "no" and fault["faultId"] in out["because"], out
        assert app.rows() == before + 2
        mcp.ok("reticle_fault", {"clear": True, "sessionId": sid})
        mcp.ok("reticle_navigate", {"url": app.url + "/form", "sessionId": sid})
        out = add_profile(mcp, sid, "Add", dict(WRITE, urlContains="/form/save"))
        assert out["verified"] == "yes", out
        assert app.rows() == before + 3
        # the same post from a script-tag tab: its mark is a cookie only, its span tied to it by method, path and time
        tag, browser = open_tab(mcp, app, path="/form")
        out = add_profile(mcp, tag, "Add", dict(WRITE, urlContains="/form/save"))
        assert out["verified"] == "yes" and out["because"].endswith(TIED_LINE), out
        assert app.rows() == before + 4
    finally:
        if browser is not None:
            browser.close()
        app.close()
    assert "Traceback" not in daemon.log()


def test_the_protobuf_exporter_feeds_the_same_verdicts(tmp_path, daemon, mcp, postgres):
    app = ExpressApp(tmp_path, daemon, postgres, protocol="proto")
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        out = act(mcp, sid, "Save (xhr)", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "yes", (out, app.log())
        out = act(mcp, sid, "Save (no-op)", dict(WRITE, urlContains="/api/noop"))
        assert out["verified"] == "no" and "0 writes" in out["because"], out
        assert [r["source"] for r in server_events(mcp, sid)] == ["otel", "otel"]
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_without_database_instrumentation_writes_are_unknown_not_zero(tmp_path, daemon, mcp, postgres):
    app = ExpressApp(tmp_path, daemon, postgres, db_traced=False)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        before = app.rows()
        for button, path in (("Save", "/api/save"), ("Save (no-op)", "/api/noop")):
            out = act(mcp, sid, button, dict(WRITE, urlContains=path))
            assert out["verified"] == "unknown", out
            assert "no database statement" in out["because"] and "instrumentation" in out["because"], out["because"]
        assert app.rows() == before + 1  # the save did write: a `no` would have been wrong
        # what needs no database is still judged
        out = act(mcp, sid, "Save (swallowed)", saved("/api/swallow"))
        assert out["verified"] == "no" and "server-exception" in out["because"], out
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_an_express_save_that_wrote_nothing_is_never_yes_under_a_text_check(tmp_path, daemon, mcp, postgres):
    """After healthy saves of the same service showed INSERT spans, a 200 {ok: true} that ran no statement
    is not yes under `until text` (it was: the wrote-nothing rule read only the middleware's records); the
    traced rollback is no, the healthy save yes.  Three times each."""
    app = ExpressApp(tmp_path, daemon, postgres)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(3):
            out = act(mcp, sid, "Save", saved("/api/save"))
            assert out["verified"] == "yes", (n, out["because"], out.get("server"))
            out = act(mcp, sid, "Save (no-op)", saved("/api/noop"))
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_wrote_nothing"), (n, out)
            assert "its database spans (service shop)" in out["because"], out["because"]
            out = act(mcp, sid, "Save (rollback)", saved("/api/rollback"))
            assert out["verified"] == "no" and "server-rolled-back" in out["because"], (n, out)
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_an_unknown_known_when_its_record_lands_answers_then(tmp_path, daemon, mcp, postgres):
    """A `writes` predicate on a service without database spans is unknown as soon as the record is there,
    not after the whole timeout (8 s here)."""
    app = ExpressApp(tmp_path, daemon, postgres, db_traced=False)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(3):
            t0 = time.monotonic()
            out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"), timeout_ms=8000)
            took = time.monotonic() - t0
            assert out["verified"] == "unknown" and "no database statement" in out["because"], out
            assert took < 4.0, (n, took)
    finally:
        if browser is not None:
            browser.close()
        app.close()


class PythonOtelApp(AppProcess):
    """tests/_server_apps.py's Flask app (SQLAlchemy on SQLite) without Reticle's middleware, traced only by
    stock Python OpenTelemetry: `opentelemetry-instrument` (flask, sqlalchemy, sqlite3 instrumentations),
    its OTLP/HTTP exporter pointed at the daemon by the standard OTEL_* variables."""

    def __init__(self, tmp, daemon, middleware=False, logs=False, env_extra=None):
        exe = shutil.which("opentelemetry-instrument")
        if exe is None:
            pytest.skip("opentelemetry-instrument is not installed (tests/requirements.txt)")
        super().__init__(tmp, "py-otel")
        self.db = os.path.join(str(tmp), "py-otel-%d.sqlite3" % self.port)
        env = dict(os.environ, OTEL_SERVICE_NAME="shop-py", OTEL_TRACES_EXPORTER="otlp",
                   OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_EXPORTER_OTLP_ENDPOINT=daemon.url,
                   OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20" + daemon.token(),
                   OTEL_BSP_SCHEDULE_DELAY="200", OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
                   RETICLE_PORT=str(daemon.port), RETICLE_STATE_DIR=daemon.state_dir)
        if not middleware:
            env["SHOP_PLAIN"] = "1"
        if logs:  # the app's ERROR records go out as OTLP logs, under the request's trace
            env.update(OTEL_LOGS_EXPORTER="otlp", OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED="true",
                       OTEL_BLRP_SCHEDULE_DELAY="200", SHOP_LOGGED_WRITES="1")
        env.update(env_extra or {})
        self.start([exe, sys.executable, os.path.join(HERE, "_server_apps.py"), "flask", str(self.port), self.db,
                    daemon.url], env, HERE)

    def rows(self):
        import sqlite3
        with sqlite3.connect(self.db) as conn:
            return conn.execute("SELECT COUNT(*) FROM profile").fetchone()[0]


def test_a_flask_app_under_stock_python_opentelemetry(tmp_path, daemon, mcp):
    """Flask + SQLAlchemy on SQLite, traced only by `opentelemetry-instrument`: Python's SQLAlchemy and sqlite3
    instrumentations show no BEGIN or COMMIT, so a write's commit is unknown: the save, the rollback (which
    read "1 write" and was yes) and a `writes` check are unknown saying why, never yes; a save that wrote
    nothing is unknown (wrote nothing), never yes; nothing is written twice though two instrumentations see
    each statement.  With Reticle's middleware beside the tracing, the save is yes and the rollback no."""
    app = PythonOtelApp(tmp_path, daemon)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(3):
            before = app.rows()
            out = act(mcp, sid, "Save", saved("/api/save"), timeout_ms=8000)
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_commit_unknown"), (n, out, app.log())
            assert "Reticle's Python middleware sees commits" in out["because"], out["because"]
            assert any("1 write of unknown commit (insert profile" in line and "from OpenTelemetry spans" in line
                       for line in out["server"]), out["server"]
            assert app.rows() == before + 1
            out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"), timeout_ms=8000)
            assert out["verified"] == "unknown" and "kept or rolled back" in out["because"], (n, out)
            out = act(mcp, sid, "Save (no-op)", saved("/api/noop"), timeout_ms=8000)
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_wrote_nothing"), (n, out)
            out = act(mcp, sid, "Save (rollback)", saved("/api/rollback"), timeout_ms=8000)
            assert out["verified"] == "unknown", (n, out)
            assert app.rows() == before + 2
    finally:
        if browser is not None:
            browser.close()
        app.close()
    both = PythonOtelApp(tmp_path, daemon, middleware=True)
    browser = None
    try:
        sid, browser = open_tab(mcp, both)
        out = act(mcp, sid, "Save", saved("/api/save"), timeout_ms=8000)
        assert out["verified"] == "yes", (out, both.log())
        out = act(mcp, sid, "Save (rollback)", saved("/api/rollback"), timeout_ms=8000)
        assert out["verified"] == "no" and "server-rolled-back" in out["because"], out
    finally:
        if browser is not None:
            browser.close()
        both.close()


def test_a_tabs_unknown_names_the_traced_service_that_answers_its_origin_not_another_apps(tmp_path, daemon, mcp):
    """Issue 46: another app ("billing", on another port) sends the daemon spans no tab can take, and so does the
    tab's own Flask app under stock Python OpenTelemetry that reads no `traceparent` (OTEL_PROPAGATORS=baggage):
    the tab's `server` check is unknown naming its own service, the one whose SERVER spans answered its origin,
    never the other app that happens to send spans to the same daemon (heard first).  Twice."""
    for trace in ("b1" * 16, "b2" * 16):
        status, _, _ = post(daemon, "/v1/traces", traces_request(trace=trace, service="billing", port=4000,
                                                                 db=["SELECT 1"]).SerializeToString(),
                            media="application/x-protobuf")
        assert status == 200, status
    app = PythonOtelApp(tmp_path, daemon, env_extra={"OTEL_PROPAGATORS": "baggage"})
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        wait_until(lambda: any(s["service"] == "shop-py" for s in daemon.status()["serverTruth"]["openTelemetry"]
                               .get("unattributed") or ()), 15, what="the app's spans, unattributed")
        for n in range(2):
            out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"), timeout_ms=8000)
            assert out["verified"] == "unknown", (n, out)
            assert "service shop-py (it answers this page's origin): none of its" in out["because"], (n, out["because"])
            assert "billing" not in out["because"], (n, out["because"])
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_an_error_logged_under_a_save_decides_it_where_the_spans_cannot_show_its_commit(tmp_path, daemon, mcp):
    """Flask under stock Python OpenTelemetry, its logs exported too: a save that writes its row and then logs
    ERROR under the request is `no` for its `server` predicate as for the act's other predicates, though the
    spans cannot say whether the write was kept; the healthy save beside it stays unknown (commit unknown)."""
    app = PythonOtelApp(tmp_path, daemon, logs=True)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(2):
            before = app.rows()
            out = act(mcp, sid, "Save (logged)", dict(WRITE, urlContains="/api/logged"), timeout_ms=8000)
            assert out["verified"] == "no", (n, out, app.log())
            assert "logged ERROR from shop.views (could not save the profile)" in out["because"], (n, out)
            assert app.rows() == before + 1  # the truth: a half-done save, its row written, its failure logged
            out = act(mcp, sid, "Save (logged)", {"kind": "net", "urlContains": "/api/logged", "status": 200},
                      timeout_ms=8000)
            assert out["verified"] == "no" and "server-logged-error" in out["because"], (n, out)  # its sibling
            out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"), timeout_ms=8000)
            assert out["verified"] == "unknown" and "kept or rolled back" in out["because"], (n, out)
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_an_error_log_exported_a_second_after_its_spans_still_decides_the_save(tmp_path, daemon, mcp):
    """The same Flask app with its log processor at OpenTelemetry's default delay (1 s) and its spans at 200 ms:
    the ERROR log under a save comes in a batch of its own after the request's spans.  A service that exports
    its logs has its records judged only once a late log could have joined them, so the save that logged ERROR
    is `no` for every predicate, never an unknown (or a yes) read before its log came."""
    app = PythonOtelApp(tmp_path, daemon, logs=True, env_extra={"OTEL_BLRP_SCHEDULE_DELAY": "1000"})
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        for n in range(2):
            before = app.rows()
            out = act(mcp, sid, "Save (logged)", {"kind": "net", "urlContains": "/api/logged", "status": 200},
                      timeout_ms=8000)
            assert out["verified"] == "no" and "server-logged-error" in out["because"], (n, out)
            assert "could not save the profile" in out["because"], (n, out)
            assert app.rows() == before + 1
    finally:
        if browser is not None:
            browser.close()
        app.close()


class RR7App(ExpressApp):
    """tests/_otel_rr7 (React Router 7 in framework mode, PostgreSQL through pg) under `react-router dev`
    (Vite), traced by the recipe `reticle init` prints for it: its NODE_OPTIONS and OTEL_* variables,
    nothing in the app's code.  `instrumentations` narrows what the auto-instrumentations load
    (OTEL_NODE_ENABLED_INSTRUMENTATIONS): "pg" alone is the recipe broken on purpose, no HTTP SERVER span."""

    group = True  # vite's own processes end with it

    def __init__(self, tmp, daemon, pg_port, instrumentations=None, tag=False):
        bin_ = os.path.join(NODE_MODULES, "@react-router", "dev", "bin.js")
        if not os.path.isfile(bin_):
            pytest.skip("@react-router/dev is not installed in tests/.otel (tests/bootstrap.sh)")
        AppProcess.__init__(self, tmp, "rr7")
        self.pg_port = pg_port
        root = os.path.join(str(tmp), "rr7-app-%d" % self.port)
        shutil.copytree(os.path.join(HERE, "_otel_rr7"), root)
        os.symlink(NODE_MODULES, os.path.join(root, "node_modules"))
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(pg_port), "-U", "app", "-d", "postgres", "-qc",
                        "CREATE TABLE IF NOT EXISTS notes (id serial PRIMARY KEY, title text)"], check=True)
        (tmp / "rr7-pkg").mkdir(exist_ok=True)
        (tmp / "rr7-pkg" / "package.json").write_text(json.dumps({"name": "rr7", "devDependencies": {
            "@react-router/dev": "7", "react-router": "7", "pg": "8"}}))
        note = next(n for n in reticle._init_plan(str(tmp / "rr7-pkg"), str(tmp / "home"), daemon.port,
                                                  ["reticle", "mcp"])["notes"] if "OpenTelemetry" in n)
        self.recipe = re.search(r'NODE_OPTIONS="([^"]+)"', note).group(1)
        env = dict(os.environ, NODE_PATH=NODE_MODULES, PG_PORT=str(pg_port), NODE_OPTIONS=self.recipe,
                   OTEL_EXPORTER_OTLP_ENDPOINT=daemon.url, OTEL_TRACES_EXPORTER="otlp",
                   OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20" + daemon.token(), OTEL_BSP_SCHEDULE_DELAY="200",
                   OTEL_SERVICE_NAME="notes-rr7", OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none")
        if instrumentations:
            env["OTEL_NODE_ENABLED_INSTRUMENTATIONS"] = instrumentations
        if tag:
            env["VITE_RETICLE_JS"] = daemon.url + "/reticle.js"
        self.start(["node", bin_, "dev", "--port", str(self.port), "--host", "127.0.0.1", "--strictPort"], env, root,
                   wait=60, what="react-router dev",
                   then=lambda: urllib.request.urlopen(self.url + "/", timeout=120).read())  # compiled, its spans sent

    def rows(self):
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "app", "-d", "postgres",
                              "-tAc", "SELECT COUNT(*) FROM notes"], capture_output=True, check=True)
        return int(out.stdout.strip())


def note_until(intent):
    return {"kind": "text", "contains": "Saved " + intent}


@pytest.mark.parametrize("tag", [False, True], ids=["device", "tag"])
def test_a_react_router_7_dev_server_traced_by_inits_recipe(tmp_path, daemon, mcp, postgres, tag):
    """React Router 7 framework mode under `react-router dev` (Vite: its server code is ES modules), traced
    only by the NODE_OPTIONS `reticle init` prints: a save is yes from the spans, a save that wrote nothing is
    never yes, a rolled-back one is no; each three times, checked against the table."""
    app = RR7App(tmp_path, daemon, postgres, tag=tag)
    browser = None
    try:
        assert app.recipe == ("--experimental-loader=@opentelemetry/instrumentation/hook.mjs --import "
                              "@opentelemetry/auto-instrumentations-node/register"), app.recipe
        wait_until(lambda: spans_heard(daemon), 15, what="the dev server's first spans")
        sid, browser = open_tab(mcp, app, device=not tag)
        for n in range(3):
            before = app.rows()
            out = act(mcp, sid, "Save", note_until("save"), timeout_ms=10000)
            assert out["verified"] == "yes", (n, out, app.log()[-2000:])
            assert any("1 write (insert notes" in line and "from OpenTelemetry spans" in line for line in out["server"])
            assert app.rows() == before + 1
            out = act(mcp, sid, "Save (no-op)", note_until("noop"), timeout_ms=10000)
            assert out["verified"] != "yes" and out["verifiedReason"] == "server_wrote_nothing", (n, out)
            out = act(mcp, sid, "Save (rollback)", note_until("rollback"), timeout_ms=10000)
            assert out["verified"] == "no" and "server-rolled-back" in out["because"], (n, out)
            assert app.rows() == before + 1
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_a_broken_recipe_is_named_with_its_cause_and_answers_early(tmp_path, daemon, mcp, postgres):
    """The recipe broken on purpose (only pg instrumented: spans, but no HTTP SERVER span): `reticle_sessions`,
    `/status` and the `server` check's unknown say why and what to do for a Node stack (not the Python
    middleware), and the unknown comes once the act's request is past its wait, not at the timeout."""
    app = RR7App(tmp_path, daemon, postgres, instrumentations="pg")
    try:
        sid, _ = open_tab(mcp, app, device=True)
        act(mcp, sid, "Save", note_until("save"), timeout_ms=10000)  # pg spans, under no SERVER span
        wait_until(lambda: daemon.status()["serverTruth"]["openTelemetry"].get("unattributed"), 15,
                   what="the unattributed spans named")
        [why] = daemon.status()["serverTruth"]["openTelemetry"]["unattributed"]
        assert why["service"] == "notes-rr7" and "no HTTP SERVER span" in why["cause"], why
        assert "--experimental-loader=@opentelemetry/instrumentation/hook.mjs" in why["fix"], why
        assert mcp.ok("reticle_sessions")["unattributedSpans"] == [why]
        for n in range(2):
            t0 = time.monotonic()
            out = act(mcp, sid, "Save", dict(WRITE, urlContains="/", writes={"table": "notes"}), timeout_ms=10000)
            took = time.monotonic() - t0
            assert out["verified"] == "unknown" and "no HTTP SERVER span" in out["because"], (n, out)
            assert "reticle.DjangoMiddleware" not in out["because"], out["because"]
            assert took < 6.0, (n, took)
    finally:
        app.close()


# -- `reticle init` for Node projects -----------------------------------------------------------------

@pytest.mark.parametrize("deps, kind, loads", [
    ({"express": "^4"}, "Express", "NODE_OPTIONS=\"--experimental-loader=@opentelemetry/instrumentation/hook.mjs "
                                   "--import @opentelemetry/auto-instrumentations-node/register\""),
    ({"@react-router/dev": "7", "react-router": "7"}, "React Router 7", "@opentelemetry/instrumentation/hook.mjs"),
    ({"@remix-run/dev": "2"}, "Remix", "@opentelemetry/instrumentation/hook.mjs"),
    ({"next": "15"}, "Next.js", "instrumentation.ts"),
    ({"nuxt": "3"}, "Nuxt", "NODE_OPTIONS="),
    ({"@sveltejs/kit": "2", "vite": "5"}, "SvelteKit", "NODE_OPTIONS="),
    ({}, "Node", "NODE_OPTIONS="),
])
def test_init_prints_how_a_node_project_traces_to_the_daemon(tmp_path, deps, kind, loads):
    (tmp_path / "package.json").write_text(json.dumps({"name": "shop", "dependencies": deps}))
    plan = reticle._init_plan(str(tmp_path), str(tmp_path / "home"), 4400, ["reticle", "mcp"])
    notes = [n for n in plan["notes"] if "OpenTelemetry" in n]
    assert len(notes) == 1 and notes[0].startswith(kind + " server truth"), plan["notes"]
    for part in (loads, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4400",
                 "OTEL_EXPORTER_OTLP_HEADERS=\"Authorization=Bearer%20$(reticle token)\"", "OTEL_BSP_SCHEDULE_DELAY=200",
                 "npm install --save-dev @opentelemetry/sdk-node", "reticle_observe", "source \"otel\""):
        assert part in notes[0], (part, notes[0])
    assert not any("OpenTelemetry" in c.what for c in plan["changes"])  # printed, never written


def test_init_prints_no_tracing_for_a_python_project(tmp_path):
    (tmp_path / "manage.py").write_text("")
    plan = reticle._init_plan(str(tmp_path), str(tmp_path / "home"), 4400, ["reticle", "mcp"])
    assert not any("OpenTelemetry" in n for n in plan["notes"]), plan["notes"]


def test_the_zero_code_route_init_prints_for_node_feeds_verdicts(tmp_path, daemon, mcp, postgres):
    """The zero-code route (auto-instrumentations-node/register through NODE_OPTIONS, here --require for a
    CommonJS app) and the OTEL_* variables `reticle init` prints, nothing in the app's code: a save is yes,
    a no-op is no."""
    if not os.path.isdir(os.path.join(NODE_MODULES, "@opentelemetry", "auto-instrumentations-node")):
        pytest.skip("@opentelemetry/auto-instrumentations-node is not installed (tests/bootstrap.sh)")
    app = ExpressApp(tmp_path, daemon, postgres, register=True)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"))
        assert out["verified"] == "yes", (out, app.log())
        out = act(mcp, sid, "Save (no-op)", dict(WRITE, urlContains="/api/noop"))
        assert out["verified"] == "no" and "0 writes" in out["because"], out
    finally:
        if browser is not None:
            browser.close()
        app.close()


def test_a_tabs_first_act_waits_for_the_spans_of_a_slower_exporter(tmp_path, daemon, mcp, postgres):
    """A 900 ms batch delay, past the middleware's 400 ms: the tab's very first act, whose page says
    "Saved" at once, waits for its spans (spans already reached the daemon: the page's own document
    request was traced) and sees the exception under the 200: no, not a yes decided before they came."""
    app = ExpressApp(tmp_path, daemon, postgres, delay_ms=900)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        time.sleep(1.5)  # the document request's spans (under no trace id of the tab's) reach the daemon
        out = act(mcp, sid, "Save (swallowed)", saved("/api/swallow"))
        assert out["verified"] == "no" and "server-exception" in out["because"], out
    finally:
        if browser is not None:
            browser.close()
        app.close()


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("otel") / "state", env={"RETICLE_RATE_LIMIT": "1000,1000"})
    yield d
    d.close()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
       st.booleans())
def test_fuzzed_bodies_over_http_get_ok_or_a_clean_400(shared_daemon, base, flips, zipped):
    data = bytearray(base)
    for at, byte in flips:
        data[at % len(data)] = byte
    body = gzip.compress(bytes(data)) if zipped else bytes(data)
    status, media, answer = post(shared_daemon, "/v1/traces", body, "application/x-protobuf",
                                 encoding="gzip" if zipped else None)
    assert status in (200, 400), (status, answer)
    if status == 400:
        assert "ExportTraceServiceRequest" in json.loads(answer)["detail"]
    assert shared_daemon.status()["running"] is True


# -- a real Next.js app, traced through its instrumentation hook ---------------------------------------

class NextApp(ExpressApp):
    """tests/_otel_next (app router, instrumentation.js starting the NodeSDK with the http and pg
    instrumentations) copied to a temporary folder beside tests/.otel's node_modules, under `next dev`."""

    group = True  # next dev's own worker processes end with it

    def __init__(self, tmp, daemon, pg_port):
        if not os.path.isfile(os.path.join(NODE_MODULES, "next", "dist", "bin", "next")):
            pytest.skip("next is not installed in tests/.otel (tests/bootstrap.sh)")
        AppProcess.__init__(self, tmp, "next")
        self.pg_port = pg_port
        root = os.path.join(str(tmp), "next-app")
        shutil.copytree(os.path.join(HERE, "_otel_next"), root)
        os.symlink(NODE_MODULES, os.path.join(root, "node_modules"))
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(pg_port), "-U", "app", "-d", "postgres", "-qc",
                        "CREATE TABLE IF NOT EXISTS profile (id serial PRIMARY KEY, name text)"], check=True)
        env = dict(os.environ, NEXT_TELEMETRY_DISABLED="1", RETICLE_DAEMON_URL=daemon.url, PG_PORT=str(pg_port),
                   OTEL_EXPORTER_OTLP_ENDPOINT=daemon.url, OTEL_BSP_SCHEDULE_DELAY="200",
                   OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20" + daemon.token(), OTEL_SERVICE_NAME="shop-next",
                   OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none")
        self.start(["node", os.path.join(NODE_MODULES, "next", "dist", "bin", "next"), "dev", "-H", "127.0.0.1", "-p",
                    str(self.port)], env, root, wait=60, what="next dev", then=self._compile)

    def _compile(self):
        for path, method in (("/", "GET"), ("/api/save", "GET"), ("/api/noop", "GET")):  # compile them first
            try:
                urllib.request.urlopen(urllib.request.Request(self.url + path, method=method), timeout=120).read()
            except urllib.error.HTTPError:
                pass  # a route handler without GET answers 405, compiled


def test_a_real_nextjs_app_traced_by_its_instrumentation_hook(tmp_path, daemon, mcp, postgres):
    app = NextApp(tmp_path, daemon, postgres)
    browser = None
    try:
        sid, browser = open_tab(mcp, app)
        # a click before React hydrates the page reaches no handler (next dev hydrates late under load):
        # the navigation is answered once Next.js has hydrated it (its route announcer is there)
        nav = mcp.ok("reticle_navigate", {"url": app.url + "/", "sessionId": sid}, timeout=60)
        assert nav["hydration"]["framework"] == "Next.js" and nav["hydration"]["hydrated"] is True, nav
        before = app.rows()
        out = act(mcp, sid, "Save", dict(WRITE, urlContains="/api/save"), timeout_ms=15000)
        assert out["verified"] == "yes", (out, app.log()[-3000:])
        assert app.rows() == before + 1
        out = act(mcp, sid, "Save (no-op)", dict(WRITE, urlContains="/api/noop"), timeout_ms=15000)
        assert out["verified"] == "no" and "0 writes" in out["because"], out
        assert {r["source"] for r in server_events(mcp, sid)} == {"otel"}
        # the sender, mapped by next dev's own frame mapper (webpack's eval'd modules have no map URL)
        with open(os.path.join(HERE, "_otel_next", "app", "page.js")) as fh:
            line = next(n for n, text in enumerate(fh.read().splitlines(), 1) if "fetch(path" in text)
        net = mcp.ok("reticle_network", {"urlContains": "/api/noop", "sessionId": sid})
        assert net["calls"][-1]["at"] == "go at app/page.js:%d" % line, net["calls"][-1]
    finally:
        if browser is not None:
            browser.close()
        app.close()


class TypeormApp(ExpressApp):
    """tests/_otel_typeorm_app.js: Express and TypeORM 1.1 on PostgreSQL, traced by the http, express, pg and
    @opentelemetry/instrumentation-typeorm instrumentations, its exporter pointed at the daemon by the standard
    OTEL_* variables; `alone` sets TypeORM's suppressInternalInstrumentation (no pg span under its operations)."""

    def __init__(self, tmp, daemon, pg_port, alone=False):
        if not shutil.which("node") or not os.path.isfile(
                os.path.join(NODE_MODULES, "@opentelemetry", "instrumentation-typeorm", "package.json")):
            pytest.skip("node or TypeORM's instrumentation in tests/.otel (tests/bootstrap.sh installs it) is missing")
        AppProcess.__init__(self, tmp, "typeorm")
        self.pg_port = pg_port
        env = dict(os.environ, NODE_PATH=NODE_MODULES, OTEL_EXPORTER_OTLP_ENDPOINT=daemon.url,
                   OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20" + daemon.token(),
                   OTEL_BSP_SCHEDULE_DELAY="200", OTEL_SERVICE_NAME="contacts", OTEL_METRICS_EXPORTER="none",
                   OTEL_LOGS_EXPORTER="none")
        if alone:
            env["OTEL_TEST_TYPEORM_ALONE"] = "1"
        self.start(["node", os.path.join(HERE, "_otel_typeorm_app.js"), str(self.port), daemon.url, str(pg_port)],
                   env, HERE)
        try:  # the port listens a moment before the app prints what it seeded (a loaded machine shows the gap)
            seeded = wait_until(lambda: re.search(r"contacts (\d+) (\d+)", self.log()), 20,
                                what="the app to say which contacts it seeded")
        except BaseException:
            self.close()
            raise
        self.seeded = [int(n) for n in seeded.groups()]

    def rows(self):
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "app", "-d", "postgres",
                              "-tAc", "SELECT id, name FROM contact ORDER BY id"], capture_output=True, check=True)
        return dict(line.split("|", 1) for line in out.stdout.decode().splitlines() if line)  # id -> name


def contact_saved(path):
    return {"kind": "text", "contains": "Saved contact %s." % path}   # the full stop: /contacts is not /contacts/noop


@pytest.mark.parametrize("alone", [False, True], ids=["over-pg", "typeorm-alone"])
def test_a_typeorm_app_under_its_instrumentation_in_a_device_and_with_the_tag(tmp_path, daemon, mcp, postgres, alone):
    """Issue 49: TypeORM's save spans were statements but no write (`statements: 1, writes: []`), so every
    healthy create was unknown "persisted nothing", and a rename could not be compared with the row its path
    names.  With the real instrumentation, over pg's spans and alone: a create is yes, one that saves nothing
    never yes, a rename of the wrong row no (the right one yes); twice each, in a device and with the tag."""
    app = TypeormApp(tmp_path, daemon, postgres, alone=alone)
    browser = None
    first, second = app.seeded
    insert = {"kind": "server", "method": "POST", "urlContains": "/contacts", "writes": {"table": "contact",
                                                                                          "op": "insert"}}
    try:
        device = open_tab(mcp, app, device=True)[0]
        tag, browser = open_tab(mcp, app)
        for where, sid in (("device", device), ("tag", tag)):
            for n in range(2):
                before = len(app.rows())
                out = act(mcp, sid, "Add contact", contact_saved("/contacts"))
                assert out["verified"] == "yes", (where, n, out["because"], out.get("server"), app.log()[-2000:])
                assert len(app.rows()) == before + 1
                wrote = "1 write (upsert contact ×≥1)" if alone else "1 write (insert contact ×≥1)"
                assert any("POST /contacts → 201" in s and wrote in s for s in out["server"]), out["server"]
                out = act(mcp, sid, "Add contact (no-op)", contact_saved("/contacts/noop"))
                assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_wrote_nothing"), (where, n, out)
                out = act(mcp, sid, "Add contact (no-op)", dict(insert, urlContains="/contacts/noop"))
                assert out["verified"] == "no" and "0 writes" in out["because"], (where, n, out)
                # the save alone says insert or update: asking which is unknown, never a guess
                out = act(mcp, sid, "Add contact", insert)
                assert out["verified"] == ("unknown" if alone else "yes"), (where, n, out)
                if alone:
                    assert "may be insert or update" in out["because"], out["because"]
                out = act(mcp, sid, "Rename contact", contact_saved("/contacts/%d/rename" % first))
                assert out["verified"] == "yes", (where, n, out["because"], out.get("server"))
                names = app.rows()
                out = act(mcp, sid, "Rename contact (wrong row)", contact_saved("/contacts/%d/rename-wrong" % first))
                assert (out["verified"], out["verifiedReason"]) == ("no", "contradicted"), (where, n, out)
                assert "POST /contacts/%d/rename-wrong names row %d of contact, but the server %s contact keyed %d" % (
                    first, first, "saved" if alone else "updated", second) in out["because"], out["because"]
                assert app.rows()[str(second)] != names[str(second)]   # it did rename the other row
        assert {r["source"] for r in server_events(mcp, tag)} == {"otel"}
    finally:
        if browser is not None:
            browser.close()
        app.close()
    assert "Traceback" not in daemon.log()


@pytest.mark.parametrize("language,committed", [("nodejs", True), ("go", True), ("java", True), ("dotnet", True),
                                                ("ruby", True), ("python", None), ("", None)])
def test_a_write_outside_a_traced_transaction_is_committed_where_the_languages_drivers_autocommit(language,
                                                                                                 committed):
    """A service's own span around an INSERT (no BEGIN or COMMIT, no driver instrumentation): Node's, Go's,
    Java's, .NET's and Ruby's drivers commit such a statement themselves, so it was kept; Python's DB-API
    opens a transaction that must be committed, so there (and where the language is not said) the commit
    stays unknown."""
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "notes"}}] + (
        [{"key": "telemetry.sdk.language", "value": {"stringValue": language}}] if language else [])}
    payload = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "notes-own-code"}, "spans": [
        {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "insert note", "kind": 3,
         "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000001000000",
         "attributes": [{"key": "db.system", "value": {"stringValue": "sqlite"}},
                        {"key": "db.statement", "value": {"stringValue": "INSERT INTO notes (title) VALUES (?)"}}]}]}]}]}
    spans, refused = reticle._otel_spans(payload)
    assert refused == [] and len(spans) == 1
    writes, statements, unread = reticle._otel_writes(spans)
    assert statements == 1 and unread == [] and [(w["op"], w["table"], w["committed"]) for w in writes] == [
        ("insert", "notes", committed)], writes


# -- a form post that carries no mark OpenTelemetry reads: tied by method, path and time (tying.py) ----------

ORIGIN = "http://127.0.0.1:5000"


def tab_on(hub, sid, doc):
    """A tab of the hub on ORIGIN's /journal, its document `doc` begun 5 s ago (its first event)."""
    tab = reticle._BrowserSession(hub.bridge, None, {"sessionId": sid, "url": ORIGIN + "/journal"})
    hub.bridge.sessions[sid] = tab
    tab.store.add({"t": hub.clock() - 5000, "type": "net.request", "doc": doc, "data": {
        "requestId": "d-" + doc, "initiator": "document", "url": ORIGIN + "/journal", "status": 200}}, 64)
    return tab


def form_post(tab, doc, t, answered=None, path="/journal", method="POST"):
    """The SDK's word of a form post its document `doc` sent at `t` (a mark issued to that document, on it as
    a cookie), and of its answer when the next document reported it at `answered` -> the mark's id."""
    mark = tab.server_tickets.issue(doc, t)[0][0]
    data = {"requestId": "d" + mark, "method": method, "methodKnown": True, "url": ORIGIN + path,
            "initiator": "document", "cause": "form", "serverMarked": True, "serverMark": mark}
    tab.store.add({"t": t, "type": "net.pending", "doc": doc, "data": data}, 64)
    if answered is not None:
        tab.store.add({"t": answered, "type": "net.request", "doc": doc + "-next",
                       "data": dict(data, status=None, finalUrl=ORIGIN + "/done", redirected=True)}, 64)
    return mark


def server_span(hub, start, end, trace, path="/journal", method="POST"):
    """A SERVER span (as _otel_spans reads one) under a trace id no tab was issued, served from `start` to
    `end` on the hub's clock (a span says its times on the wall clock, in nanoseconds)."""
    wall = time.time() * 1000.0 - hub.clock()
    return {"traceId": trace, "spanId": trace[:16], "parentSpanId": None, "name": method + " " + path, "kind": 2,
            "start": int((start + wall) * 1e6), "end": int((end + wall) * 1e6), "events": [], "error": False,
            "attrs": {"http.request.method": method, "url.path": path, "http.route": path, "server.address": "127.0.0.1",
                      "server.port": 5000, "http.response.status_code": 303},
            "scope": "opentelemetry.instrumentation.flask", "service": "journal", "language": "python"}


def of_type(tab, etype):
    return [e["data"] for e in tab.store.query() if e["type"] == etype]


def test_a_form_posts_span_is_tied_to_the_one_request_its_method_path_and_time_fit(tmp_path):
    """The span of a form post the script tag sent (its mark rode in a cookie: the trace id is no tab's) lands
    under that post, saying how it was matched; a span of another path, of another method, or of a request
    served before the posting document began (its previous page's) lands nowhere."""
    hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
    tab = tab_on(hub, "s-one", "doc1")
    now = hub.clock()
    for stray in (server_span(hub, now - 5500, now - 5400, "a1" * 16),             # before the document began
                  server_span(hub, now - 450, now - 400, "a2" * 16, path="/journal/noop"),
                  server_span(hub, now - 450, now - 400, "a3" * 16, method="GET")):
        hub.otel.absorb(hub, [stray], [])
    mark = form_post(tab, "doc1", now - 500, answered=now - 100)
    assert of_type(tab, "server.request") == []
    hub.otel.absorb(hub, [server_span(hub, now - 450, now - 300, "b1" * 16)], [])
    records = of_type(tab, "server.request")
    assert [(r["method"], r["path"], r["requestId"], r["documentId"], r["matchedBy"]) for r in records] == [
        ("POST", "/journal", mark, "doc1", "method, path and time")], records
    assert reticle._server_line(records[0]).endswith(
        "from OpenTelemetry spans, matched by method, path and time, the request carried no mark")
    assert hub.otel.stats["tied"] == 1 and hub.ties.stats == {"tied": 1, "untied": 0, "withdrawn": 0}
    assert of_type(tab, "server.untied") == []


def test_a_tied_span_is_weighed_again_when_it_settles_and_withdrawn_if_a_later_post_fits_it(tmp_path):
    """A span tied to the one post it fits is not yet settled, and an act judged then says so; a second tab's
    post heard of half a second after that span began (a loaded machine: its click came late) fits the span
    too, and when the span's time to settle comes (a second past its start) it is withdrawn and both posts are
    told that no record could be tied.  A span that nothing else fits by then stands, settled."""
    import asyncio
    import tornado.ioloop
    hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
    first, second = (tab_on(hub, "s-" + d, d) for d in ("docA", "docB"))
    loop = tornado.ioloop.IOLoop.current()
    now = hub.clock()
    form_post(first, "docA", now - 1500, answered=now - 1250)
    hub.otel.absorb(hub, [server_span(hub, now - 1450, now - 1300, "c1" * 16)], [])
    tied = [e for e in first.store.query(-1e9) if e["type"] == "server.request"]
    assert len(tied) == 1 and tied[0]["data"]["matchedBy"] and not tied[0].get("settled"), tied
    untied = reticle._server_untied(first.store.query(-1e9), first.known(0), True, True)
    assert [why for _, why in untied] == ["a record fits it by method, path and time, but the act's time ran out "
                                          "before a post another tab made at the same moment could be ruled out"]
    form_post(second, "docB", now - 1000, answered=now - 800)  # heard of 450 ms after the first span began
    loop.run_sync(lambda: asyncio.sleep(0.6))
    assert tied[0]["type"] == "server.withdrawn" and "2 requests of POST /journal fit it" in tied[0]["data"][
        "withdrawn"], tied[0]
    assert len(of_type(first, "server.untied")) == len(of_type(second, "server.untied")) == 1
    assert hub.ties.stats == {"tied": 1, "untied": 2, "withdrawn": 1}
    # a post nothing else fits: its span settles and stands
    hub = reticle.Hub(state_dir=str(tmp_path / "state2"), port=0)
    alone = tab_on(hub, "s-docC", "docC")
    now = hub.clock()
    form_post(alone, "docC", now - 1500, answered=now - 1250)
    hub.otel.absorb(hub, [server_span(hub, now - 1450, now - 1300, "c2" * 16)], [])
    kept = [e for e in alone.store.query(-1e9) if e["type"] == "server.request"]
    loop.run_sync(lambda: asyncio.sleep(0.6))
    assert len(kept) == 1 and kept[0]["type"] == "server.request" and kept[0]["settled"] is True, kept
    assert reticle._server_untied(alone.store.query(-1e9), alone.known(0), True, True) == ()
    assert hub.ties.stats == {"tied": 1, "untied": 0, "withdrawn": 0}


def spans_of(hub, service, port, trace):
    """A SERVER span of `service` answering 127.0.0.1:`port` and a database span under it, under a trace id no
    tab was issued, a GET no document request fits: spans that land in no tab."""
    now = hub.clock()
    server = dict(server_span(hub, now - 300, now - 250, trace, path="/" + service, method="GET"), service=service)
    server["attrs"] = dict(server["attrs"], **{"server.port": port})
    child = dict(server, spanId=trace[16:], parentSpanId=server["spanId"], kind=3, name="SELECT")
    return [server, child]


def test_an_unknown_about_unattributed_spans_names_the_service_that_answers_the_tabs_origin(tmp_path):
    """Issue 46: spans reach the daemon from three services, none attributable; a tab on 127.0.0.1:5000 is told
    about the one whose SERVER spans answered that origin, not about the two other apps that happen to send
    spans to the same daemon (heard first); a tab on an origin no service answered is told about the others, as
    before; a tab whose origin's service lands its spans elsewhere is told nothing about the others."""
    hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
    tab = tab_on(hub, "s-one", "doc1")
    elsewhere = reticle._BrowserSession(hub.bridge, None, {"sessionId": "s-two", "url": "http://127.0.0.1:6000/"})
    hub.bridge.sessions["s-two"] = elsewhere
    for service, port, trace in (("billing", 4000, "e1" * 16), ("search", 4100, "e2" * 16),
                                 ("journal", 5000, "e3" * 16)):
        hub.otel.absorb(hub, spans_of(hub, service, port, trace), [])
    hint = tab.known(0.0).server_hint
    assert "service journal (it answers this page's origin): none of its 1 HTTP SERVER span(s)" in hint, hint
    assert "billing" not in hint and "search" not in hint, hint
    hint = elsewhere.known(0.0).server_hint
    assert "service billing:" in hint and "service search:" in hint and "journal" not in hint, hint
    hub.otel.sources.attributed("journal")  # its spans land in tabs after all: the others are not this tab's
    assert tab.known(0.0).server_hint == "", tab.known(0.0).server_hint


def test_two_tabs_posting_one_form_at_once_have_neither_span_tied(tmp_path):
    """Two tabs post the same form within the same moment: each span fits both posts, so neither is tied,
    and each tab is told why, so its verdict is unknown, never a clean yes over the other tab's record."""
    hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
    one, two = tab_on(hub, "s-one", "doc1"), tab_on(hub, "s-two", "doc2")
    now = hub.clock()
    form_post(one, "doc1", now - 600, answered=now - 200)
    form_post(two, "doc2", now - 550, answered=now - 150)
    hub.otel.absorb(hub, [server_span(hub, now - 580, now - 560, "c1" * 16)], [])
    hub.otel.absorb(hub, [server_span(hub, now - 530, now - 510, "c2" * 16)], [])
    for tab in (one, two):
        assert of_type(tab, "server.request") == []
        untied = of_type(tab, "server.untied")
        assert len(untied) == 1 and "2 requests of POST /journal fit it" in untied[0]["why"], untied
    assert hub.ties.stats["tied"] == 0 and hub.otel.stats["tied"] == 0


def test_a_span_tied_before_the_other_tabs_post_was_heard_of_is_withdrawn(tmp_path):
    """A busy daemon files the second tab's word of its post after the first span came: that span fitted
    only the first tab's post and was tied; the second span fits both posts, so the tie is withdrawn and
    both tabs are told (a verdict waits TIE_SETTLE_MS on a record tied by time for this)."""
    hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
    one, two = tab_on(hub, "s-one", "doc1"), tab_on(hub, "s-two", "doc2")
    now = hub.clock()
    form_post(one, "doc1", now - 600)
    hub.otel.absorb(hub, [server_span(hub, now - 590, now - 570, "f1" * 16)], [])
    assert len(of_type(one, "server.request")) == 1
    form_post(two, "doc2", now - 580)
    hub.otel.absorb(hub, [server_span(hub, now - 575, now - 560, "f2" * 16)], [])
    assert of_type(one, "server.request") == of_type(two, "server.request") == []
    assert len(of_type(one, "server.withdrawn")) == 1
    assert [len(of_type(tab, "server.untied")) for tab in (one, two)] == [1, 1]


def test_a_second_span_that_fits_a_tied_post_withdraws_the_first(tmp_path):
    """The tab's post was tied to the one span that fitted it; a second span of the same method and path in
    the same moment (another client's request) arrives in a later batch: which is the tab's cannot be told,
    so the record tied is withdrawn (kept as server.withdrawn, saying why) and the tab told."""
    hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
    tab = tab_on(hub, "s-one", "doc1")
    now = hub.clock()
    form_post(tab, "doc1", now - 600, answered=now - 100)
    hub.otel.absorb(hub, [server_span(hub, now - 580, now - 560, "d1" * 16)], [])
    assert len(of_type(tab, "server.request")) == 1
    hub.otel.absorb(hub, [server_span(hub, now - 570, now - 540, "d2" * 16)], [])
    assert of_type(tab, "server.request") == []
    withdrawn = of_type(tab, "server.withdrawn")
    assert len(withdrawn) == 1 and "2 server records fit it" in withdrawn[0]["withdrawn"], withdrawn
    assert len(of_type(tab, "server.untied")) == 1
    assert hub.ties.stats == {"tied": 1, "untied": 1, "withdrawn": 1}


def test_the_middlewares_record_of_a_tied_post_takes_its_place_and_one_with_an_unheld_mark_is_tied(tmp_path):
    """Python's middleware beside the tracing: its record of the post (the cookie mark the tab holds) stands,
    and the spans' record tied before it by time is withdrawn.  A middleware record whose mark no tab holds
    (the page swapped the cookie) is tied by its method, path and time (`at`, when it began), as spans are,
    once its sender is the tab's own origin."""
    hub = reticle.Hub(state_dir=str(tmp_path / "state"), port=0)
    tab = tab_on(hub, "s-one", "doc1")
    now = hub.clock()
    mark = form_post(tab, "doc1", now - 1000, answered=now - 500)
    hub.otel.absorb(hub, [server_span(hub, now - 980, now - 960, "e1" * 16)], [])
    secret = next(s for s, ticket in tab.server_tickets.live.items() if ticket[1] == mark)
    wall = time.time() * 1000.0 - hub.clock()
    record = {"mark": secret, "method": "POST", "path": "/journal", "host": "127.0.0.1:5000", "via": "cookie",
              "site": "same-origin", "status": 303, "ms": 20.0, "at": now - 980 + wall, "writes": [], "watched": []}
    assert reticle._stitch_server_records(hub, {"records": [record]})["stitched"] == 1
    records = of_type(tab, "server.request")
    assert [(r.get("source"), r.get("matchedBy"), r["requestId"]) for r in records] == [(None, None, mark)], records
    assert "own record" in of_type(tab, "server.withdrawn")[0]["withdrawn"]
    # the page swapped the cookie: the middleware's record carries a mark no tab holds
    later = form_post(tab, "doc1-next", now - 50)
    forged = dict(record, mark="%032x" % 46, at=now - 40 + wall, ms=10.0)
    assert reticle._stitch_server_records(hub, {"records": [dict(forged, site="same-site")]})["tied"] == 0
    assert reticle._stitch_server_records(hub, {"records": [forged]})["tied"] == 1
    tied = of_type(tab, "server.request")[-1]
    assert (tied["requestId"], tied["matchedBy"]) == (later, "method, path and time"), tied
    assert reticle._server_line(tied).endswith("matched by method, path and time, the request's mark was no tab's")
    assert hub.server_truth["tied"] == 1


FORM_SAVED = {"kind": "text", "contains": "Form saved"}


def back_to(mcp, app, sid, path="/journal"):
    mcp.ok("reticle_navigate", {"url": app.url + path, "sessionId": sid})


def test_a_form_post_through_the_tag_is_tied_to_its_span_by_method_path_and_time(tmp_path, daemon, mcp):
    """Flask under stock Python OpenTelemetry, a plain HTML form through the script tag: the post carries its
    mark only in a cookie, which the spans do not carry, so its SERVER span comes under a trace id no tab was
    issued.  It is tied to the post, the one request its method, path and time fit, and the answer says so:
    the healthy save (its BEGIN ... COMMIT traced) is yes, the save that swallowed an exception (logged, and
    recorded on its span) no, the post that wrote nothing never yes; twice each.  Before, each waited 3.1 s
    for a record that never came and said a clean yes.  The SQLAlchemy form's post is tied too; its commit,
    which Python's instrumentations do not trace, stays unknown, as a fetch's does (it goes first: a service
    whose spans have shown a transaction is believed to trace its commits, _OtelTraces.tx_services)."""
    app = PythonOtelApp(tmp_path, daemon)
    browser = None
    try:
        sid, browser = open_tab(mcp, app, path="/notes/new")
        mcp.ok("reticle_act", {"target": {"label": "Title"}, "action": "fill", "args": {"value": "tied"},
                               "sessionId": sid})
        out = act(mcp, sid, "Save note", FORM_SAVED, timeout_ms=8000)
        assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_commit_unknown"), (out, app.log())
        assert "POST /notes/new → 303" in out["because"] and TIED_LINE in out["because"], out["because"]
        back_to(mcp, app, sid)
        for n in range(2):
            before = app.rows()
            out = act(mcp, sid, "Save entry", FORM_SAVED, timeout_ms=8000)
            assert out["verified"] == "yes", (n, out, app.log())
            assert any(line.startswith("POST /journal → 303") and "1 write (insert profile" in line
                       and line.endswith(TIED_LINE) for line in out["server"]), out["server"]
            assert app.rows() == before + 1
            back_to(mcp, app, sid)
            out = act(mcp, sid, "Save entry (logged)", FORM_SAVED, timeout_ms=8000)
            assert (out["verified"], out["verifiedReason"]) == ("no", "contradicted"), (n, out)
            assert "server-exception" in out["because"] and "profile store unavailable" in out["because"], out
            assert TIED_LINE in out["because"], out["because"]
            assert app.rows() == before + 2  # the truth: a half-done save, its row written, its failure swallowed
            back_to(mcp, app, sid)
            out = act(mcp, sid, "Save entry (no-op)", FORM_SAVED, timeout_ms=8000)
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_wrote_nothing"), (n, out)
            assert "POST /journal/noop → 303" in out["because"] and TIED_LINE in out["because"], out["because"]
            assert app.rows() == before + 2
            back_to(mcp, app, sid)
        posts = [r for r in server_events(mcp, sid) if r["method"] == "POST"]
        assert [(r["path"], r["source"], r["matchedBy"]) for r in posts] == [("/notes/new", "otel", TIED_BY)] + [
            (path, "otel", TIED_BY) for path in ("/journal", "/journal/logged", "/journal/noop")] * 2
        assert daemon.status()["serverTruth"]["tiedByTime"]["untied"] == 0
    finally:
        if browser is not None:
            browser.close()
        app.close()
    assert "Traceback" not in daemon.log()


def at_once(mcp, sids, button, stagger=0.0):
    """reticle_act_and_wait on each tab at the same moment (one thread each), each `stagger` seconds after the
    one before -> their answers, in order."""
    import concurrent.futures
    import threading
    start = threading.Barrier(len(sids))

    def one(sid):
        start.wait(10)
        time.sleep(stagger * sids.index(sid))
        return act(mcp, sid, button, FORM_SAVED, timeout_ms=8000)
    with concurrent.futures.ThreadPoolExecutor(len(sids)) as pool:
        return list(pool.map(one, sids))


def test_two_tabs_posting_one_form_at_once_get_no_record_tied(tmp_path, daemon, mcp):
    """Two tabs post the same form at the same moment: each post's span fits both posts by method, path and
    time, so neither is tied (a record of the other tab's post must never answer for this one): each act is
    unknown, saying that no record could be tied and that a device sends a marked request.  Twice: at once,
    then the second tab half a second later (on a loaded machine the first post's span can come and be tied
    before the second tab's click is heard of: the tie must not be judged until a later post could no longer
    fit it, and is then withdrawn)."""
    app = PythonOtelApp(tmp_path, daemon)
    browsers = []
    try:
        sids = []
        for _ in range(2):
            sid, browser = open_tab(mcp, app, path="/journal")
            sids.append(sid)
            browsers.append(browser)
        for n in range(2):
            before = app.rows()
            for out in at_once(mcp, sids, "Save entry", stagger=0.5 * n):
                assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_untied"), (n, out)
                assert "no server record could be tied to POST " in out["because"], out["because"]
                assert re.search(r"\d requests of POST /journal fit it by time|\d server records fit it by method, path "
                                 r"and time \(another client sent POST /journal", out["because"]), out["because"]
                assert "reticle_open" in out["because"], out["because"]
            assert app.rows() == before + 2  # both did write: a `no` would have been wrong, a `yes` a guess
            for sid in sids:  # (a span tied while the other tab's post was not yet heard of is withdrawn)
                assert [r for r in server_events(mcp, sid) if r.get("method") == "POST"
                        and not r.get("withdrawn")] == []
                back_to(mcp, app, sid)
        # (two tabs' navigations to one path within a second of each other are not told apart either)
        untied = [e for sid in sids for e in server_events(mcp, sid) if e.get("why")]
        assert len([e for e in untied if e["label"].startswith("POST ")]) == 4, untied
    finally:
        for browser in browsers:
            browser.close()
        app.close()
    assert "Traceback" not in daemon.log()


def test_a_middleware_record_whose_mark_no_tab_holds_is_tied_the_same_way(tmp_path, daemon, mcp):
    """Reticle's Python middleware, no tracing: a post whose page swapped the SDK's mark cookie for a mark no
    tab holds is reported with that mark; its record is tied to the post by method, path and time as a span
    would be, and says so (yes: its write's commit is seen).  Two tabs doing it at once get none tied:
    unknown, saying why.  The posts that carry their own mark are stitched by it, as before."""
    from test_server import App
    app = App("flask", tmp_path, daemon)
    browsers = []
    try:
        sids = []
        for _ in range(2):
            sid, browser = open_tab(mcp, app, path="/journal")
            sids.append(sid)
            browsers.append(browser)
        one = sids[0]
        for n in range(2):
            before = app.rows()
            out = act(mcp, one, "Save entry", FORM_SAVED)
            assert out["verified"] == "yes" and "matched by" not in out["because"], (n, out)
            back_to(mcp, app, one)
            out = act(mcp, one, "Save entry (forged)", FORM_SAVED)
            assert out["verified"] == "yes", (n, out, app.log())
            assert "POST /journal → 303" in out["because"] and out["because"].endswith(
                "matched by method, path and time, the request's mark was no tab's"), out["because"]
            assert app.rows() == before + 2
            back_to(mcp, app, one)
        for sid in sids[1:]:  # the second tab has had a record of its own (records come for it)
            act(mcp, sid, "Save entry", FORM_SAVED)
            back_to(mcp, app, sid)
        for out in at_once(mcp, sids, "Save entry (forged)"):
            assert (out["verified"], out["verifiedReason"]) == ("unknown", "server_untied"), out
            assert "requests of POST /journal fit it by time" in out["because"], out["because"]
        truth = daemon.status()["serverTruth"]
        # the two forged posts of one tab stand tied; a record of the two at once may have been tied to the
        # first of them for a moment (a loaded machine delivers the rival's report later) and then withdrawn
        assert truth["middleware"]["tied"] - truth["tiedByTime"]["withdrawn"] == 2, truth
    finally:
        for browser in browsers:
            browser.close()
        app.close()
    assert "Traceback" not in daemon.log()
