#!/usr/bin/env python3
"""How fast the daemon absorbs OpenTelemetry spans (POST /v1/traces, OTLP JSON and protobuf) beside
the Python middleware's records (POST /server-records), in one run against one real daemon.

Each request is a batch as an exporter sends it: `--batch` traces, each a SERVER span and `--db`
database spans (a write among them), under trace ids no tab holds, so both routes take the same path
through the daemon (read, decode, look the id up, count it unmatched); a stitched record costs the
same lookup and one store insert more.  Sent over one keep-alive connection, `--requests` per run,
`--runs` runs; prints the median of spans (and records) per second and per-request time.  The
protobuf bodies are encoded by the official opentelemetry-proto package (tests/requirements.txt).
Prints numbers; asserts nothing.

With `--acts N` (0 to skip) it then measures what waiting for an act's spans adds to a healthy
act's verdict (issue 30.5), beside what waiting for the middleware's records adds, on one fresh
daemon: N `reticle_act_and_wait` clicks with `until` the POST answering 200, in headless Chromium
with the script tag, on the FastAPI app of tests/_server_apps.py without and with the middleware
(bench/server_truth.py), then on the Express app of tests/_otel_app.js without tracing and with
stock OpenTelemetry (http and express instrumentations, the JSON exporter at the batch delay the
README recommends, `--delay`, 200 ms).  Spans feed the daemon only in the last variant: once they
do, every tab waits OTEL_GRACE_MS for a record.  Needs node and tests/.otel (tests/bootstrap.sh).

    python bench/otel.py [--batch 50] [--db 3] [--requests 200] [--runs 5] [--acts 20] [--delay 200]
"""

import argparse
import http.client
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Daemon, close_all  # noqa: E402  (puts tests/ on sys.path)
from server_truth import act_times, click_times, quantiles  # noqa: E402

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
NODE_MODULES = os.path.join(TESTS, ".otel", "node_modules")


def otlp_json(batch, db):
    spans = []
    for _ in range(batch):
        trace, server = secrets.token_hex(16), secrets.token_hex(8)
        spans.append({"traceId": trace, "spanId": server, "parentSpanId": secrets.token_hex(8),
                      "name": "POST /api/save", "kind": 2, "startTimeUnixNano": "1700000000000000000",
                      "endTimeUnixNano": "1700000000012000000", "attributes": [
                          {"key": "http.request.method", "value": {"stringValue": "POST"}},
                          {"key": "url.path", "value": {"stringValue": "/api/save"}},
                          {"key": "http.route", "value": {"stringValue": "/api/save"}},
                          {"key": "http.response.status_code", "value": {"intValue": "200"}}]})
        for i in range(db):
            sql = "INSERT INTO profile (name) VALUES ($1)" if i == 0 else "SELECT * FROM profile WHERE id = $1"
            spans.append({"traceId": trace, "spanId": secrets.token_hex(8), "parentSpanId": server,
                          "name": "pg.query", "kind": 3, "startTimeUnixNano": "1700000000001000000",
                          "endTimeUnixNano": "1700000000002000000", "attributes": [
                              {"key": "db.system", "value": {"stringValue": "postgresql"}},
                              {"key": "db.statement", "value": {"stringValue": sql}}]})
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "shop"}}]},
                               "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}]}


def otlp_proto(doc):
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    import base64
    doc = json.loads(json.dumps(doc))
    for sp in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for k in ("traceId", "spanId", "parentSpanId"):
            sp[k] = base64.b64encode(bytes.fromhex(sp[k])).decode()
    return json_format.ParseDict(doc, trace_service_pb2.ExportTraceServiceRequest()).SerializeToString()


def records(batch, db):
    return {"records": [{"mark": secrets.token_hex(16), "method": "POST", "path": "/api/save", "host": "127.0.0.1",
                         "status": 200, "view": "save_profile", "ms": 12.0, "exception": None, "logged": [],
                         "statements": db, "writes": [{"op": "insert", "table": "profile", "rows": 1,
                                                       "committed": True, "sql": "INSERT INTO profile"}]}
                        for _ in range(batch)]}


def timed(conn, token, path, body, media, n):
    headers = {"Content-Type": media, "Authorization": "Bearer " + token}
    t0 = time.perf_counter()
    for _ in range(n):
        conn.request("POST", path, body, headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise SystemExit("%s answered %d" % (path, resp.status))
    return time.perf_counter() - t0


def express_times(daemon, traced, acts, delay_ms):
    """click_times on tests/_otel_app.js's no-op save (it needs no database), its server traced to
    the daemon by stock OpenTelemetry or not traced at all."""
    import _harness
    port = _harness.free_port()
    token = open(os.path.join(daemon.state_dir, "token")).read().strip()
    env = dict(os.environ, NODE_PATH=NODE_MODULES, OTEL_EXPORTER_OTLP_ENDPOINT=daemon.url,
               OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20" + token, OTEL_BSP_SCHEDULE_DELAY=str(delay_ms),
               OTEL_SERVICE_NAME="shop", OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
               OTEL_TEST_NO_DB="1")
    if not traced:
        env["OTEL_TEST_OFF"] = "1"
    app = subprocess.Popen(["node", os.path.join(TESTS, "_otel_app.js"), str(port), daemon.url], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=TESTS)
    try:
        _harness.wait_until(lambda: _harness.port_listens(port) or app.poll() is not None, 30,
                            what="the Express app to listen")
        if app.poll() is not None:
            raise SystemExit("the Express app exited with %s" % app.returncode)
        return click_times(daemon, "http://127.0.0.1:%d/" % port, "Save (no-op)", "/api/noop", acts)
    finally:
        app.terminate()
        app.wait(10)


def acts_bench(acts, delay_ms):
    """The four variants of a healthy act, in the order that keeps spans out of the first three."""
    if not shutil.which("node") or not os.path.isdir(os.path.join(NODE_MODULES, "@opentelemetry")):
        print("a healthy act's verdict: skipped (node or tests/.otel is missing; sh tests/bootstrap.sh)")
        return
    daemon = Daemon("reticle-bench-otel-acts-")
    try:
        runs = [("FastAPI, no middleware", act_times(daemon, True, acts)),
                ("FastAPI, middleware", act_times(daemon, False, acts)),
                ("Express, no tracing", express_times(daemon, False, acts, delay_ms)),
                ("Express, OpenTelemetry", express_times(daemon, True, acts, delay_ms))]
    finally:
        close_all(daemon)
    print("a healthy act's verdict (act_and_wait, until net POST 200), median of %d, ms:" % acts)
    for i, (name, times) in enumerate(runs):
        base = statistics.median(runs[i - i % 2][1])
        extra = "" if i % 2 == 0 else "   added %+.1f ms at the median" % (statistics.median(times) - base)
        print("  %-24s %8.1f   (p90 %.1f)%s" % ((name,) + quantiles(times) + (extra,)))
    added = [statistics.median(runs[i][1]) - statistics.median(runs[i - 1][1]) for i in (1, 3)]
    print("  OpenTelemetry's added wait against the middleware's: %+.1f ms" % (added[1] - added[0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--db", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--acts", type=int, default=20)
    ap.add_argument("--delay", type=int, default=200, help="the exporter's OTEL_BSP_SCHEDULE_DELAY (ms)")
    args = ap.parse_args()
    # the bench sends faster than a tab would: lift the per-session rate limit for the run
    daemon = Daemon("reticle-bench-otel-", env={"RETICLE_RATE_LIMIT": "100000,100000"})
    try:
        token = open(os.path.join(daemon.state_dir, "token")).read().strip()
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
        doc = otlp_json(args.batch, args.db)
        variants = [("OTLP JSON", "/v1/traces", json.dumps(doc).encode(), "application/json"),
                    ("OTLP protobuf", "/v1/traces", otlp_proto(doc), "application/x-protobuf"),
                    ("middleware records", "/server-records", json.dumps(records(args.batch, args.db)).encode(),
                     "application/json")]
        spent = {name: [] for name, *_ in variants}
        for _ in range(args.runs):
            for name, path, body, media in variants:
                spent[name].append(timed(conn, token, path, body, media, args.requests))
        per_request = args.batch * (1 + args.db)
        print("%d requests per run, median of %d runs; a request = %d traces (%d spans, or %d records)"
              % (args.requests, args.runs, args.batch, per_request, args.batch))
        base = statistics.median(spent["middleware records"])
        for name, path, body, _ in variants:
            s = statistics.median(spent[name])
            unit = args.batch if path == "/server-records" else per_request
            print("  %-20s %7d bytes  %8.0f %s/s  %8.0f traces/s  %.2fx the records' time"
                  % (name, len(body), unit * args.requests / s, "records" if unit == args.batch else "spans",
                     args.batch * args.requests / s, s / base))
    finally:
        close_all(daemon)
    if args.acts > 0:
        acts_bench(args.acts, args.delay)


if __name__ == "__main__":
    main()
