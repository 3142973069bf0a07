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

    python bench/otel.py [--batch 50] [--db 3] [--requests 200] [--runs 5]
"""

import argparse
import http.client
import json
import os
import secrets
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Daemon, close_all  # noqa: E402  (puts tests/ on sys.path)


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--db", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
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


if __name__ == "__main__":
    main()
