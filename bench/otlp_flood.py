#!/usr/bin/env python3
"""How long a concurrent client waits while one exporter sends the daemon a large OTLP batch.

The batch is the hostile review's case: one gzip body of about 1.1 MB that inflates to about 15 MiB of
valid OTLP JSON (`--traces` traces of a SERVER span and `--db` database spans each, 33,000 spans by
default), under trace ids no tab holds.  A prober thread asks GET /status every `--every` ms, first
with the daemon idle (the baseline), then while a poster sends the batch `--posts` times back to back
(two posters with `--posters 2`); it prints the median, p99 and longest /status wait of each phase,
their ratios to the baseline, and how long each POST took.  With `--compare PATH` the same runs
against another reticle.py first (say, the module before the batch was read off the event loop:
`git show f9c0100:reticle.py > /tmp/before.py`), in the same run.  Prints numbers; asserts nothing.

    python bench/otlp_flood.py [--traces 8250] [--db 3] [--posts 5] [--posters 1] [--every 10] [--proto]
        [--compare PATH]
"""

import argparse
import gzip
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Daemon  # noqa: E402  (puts tests/ on sys.path)
from otel import otlp_json, otlp_proto  # noqa: E402


def probe(port, stop, every_ms, out):
    """GET /status every `every_ms` until `stop` is set, appending each wall time (ms) to `out`."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while not stop.is_set():
        t0 = time.perf_counter()
        conn.request("GET", "/status")
        conn.getresponse().read()
        out.append((time.perf_counter() - t0) * 1000.0)
        time.sleep(every_ms / 1000.0)
    conn.close()


def poster(port, token, body, posts, times, media):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": media, "Content-Encoding": "gzip", "Authorization": "Bearer " + token}
    for _ in range(posts):
        t0 = time.perf_counter()
        conn.request("POST", "/v1/traces", body, headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError("POST /v1/traces answered %d" % resp.status)
        times.append((time.perf_counter() - t0) * 1000.0)
    conn.close()


def summary(waits):
    waits = sorted(waits)
    return {"n": len(waits), "p50": statistics.median(waits), "p99": waits[min(len(waits) - 1, int(len(waits) * 0.99))],
            "max": waits[-1]}


def measure(label, module, body, args):
    with tempfile.TemporaryDirectory() as tmp:
        daemon = Daemon(os.path.join(tmp, "state"), command=[sys.executable, module])
        try:
            token = daemon.token()
            stop, base = threading.Event(), []
            t = threading.Thread(target=probe, args=(daemon.port, stop, args.every, base))
            t.start()
            time.sleep(2.0)
            stop.set()
            t.join()
            stop, flooded, posts = threading.Event(), [], []
            t = threading.Thread(target=probe, args=(daemon.port, stop, args.every, flooded))
            t.start()
            senders = [threading.Thread(target=poster, args=(daemon.port, token, body, args.posts, posts,
                                                          "application/x-protobuf" if args.proto else "application/json"))
                       for _ in range(args.posters)]
            for s in senders:
                s.start()
            for s in senders:
                s.join()
            stop.set()
            t.join()
        finally:
            daemon.stop()
    b, f = summary(base), summary(flooded)
    print("%s: /status idle p50 %.1f ms p99 %.1f max %.1f (n=%d) | during the batches p50 %.1f ms p99 %.1f "
          "max %.1f (n=%d) | max/idle-p50 %.0fx | POST median %.0f ms, max %.0f ms (%d posts)" % (
              label, b["p50"], b["p99"], b["max"], b["n"], f["p50"], f["p99"], f["max"], f["n"],
              f["max"] / b["p50"], statistics.median(posts), max(posts), len(posts)))
    return f


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=8250)
    parser.add_argument("--db", type=int, default=3)
    parser.add_argument("--posts", type=int, default=5)
    parser.add_argument("--posters", type=int, default=1)
    parser.add_argument("--every", type=float, default=10.0, help="ms between two /status probes")
    parser.add_argument("--compare", help="another reticle.py, measured first in the same run")
    parser.add_argument("--proto", action="store_true", help="send the batch as protobuf (opentelemetry-proto)")
    args = parser.parse_args()
    doc = otlp_json(args.traces, args.db)
    raw = otlp_proto(doc) if args.proto else json.dumps(doc).encode()
    body = gzip.compress(raw, 9)
    print("batch: %d spans, %.1f MiB of OTLP %s, %.2f MB gzip" % (
        args.traces * (1 + args.db), len(raw) / 2 ** 20, "protobuf" if args.proto else "JSON", len(body) / 1e6))
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reticle.py")
    if args.compare:
        before = measure("compare (%s)" % args.compare, args.compare, body, args)
    now = measure("this reticle.py", here, body, args)
    if args.compare:
        print("longest /status wait during the batches: %.0f ms before, %.0f ms now (%.1fx shorter)" % (
            before["max"], now["max"], before["max"] / now["max"]))


if __name__ == "__main__":
    main()
