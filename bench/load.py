#!/usr/bin/env python3
"""Load: many MCP clients over both HTTP transports while browser tabs stream events.

Starts its own daemon (tests/_harness via bench/_common), an app server whose page emits a
``reticle.signal`` and a DOM change every 10 ms, and headless Chromium with ``--tabs`` tabs of it
(background timers unthrottled).  Then ``--clients`` MCP clients, half over Streamable HTTP
(POST /mcp, one keep-alive connection each, with the Mcp-Session-Id it was given) and half over
HTTP+SSE (GET /mcp/sse held open, POST /mcp/message, the reply read off the stream), each call
read tools in turn (tools/list, reticle_sessions, reticle_console, reticle_network and, one call in
eight, reticle_snapshot, which goes through a tab) for ``--seconds``, one request at a time.

Prints throughput, latency p50/p99 per transport and overall, errors by kind (HTTP status,
JSON-RPC error code, tool isError, exception class), and the daemon's RSS at start (tabs
connected, no clients), at its peak (sampled every 100 ms, and VmHWM) and after ``--idle``
seconds with no clients.  Exits 1 when any call failed.

``--soak MINUTES`` repeats the run for that long and checks that the RSS after idling returns to
its plateau: every round's idle RSS within 10 % (and at least 8 MB) of the lowest of the first two
rounds'.  Exits 1 when it does not.

    python bench/load.py [--clients 50] [--tabs 4] [--seconds 20] [--idle 5] [--soak MINUTES] [--json]
"""

import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Chromium, Daemon, RawMcp, RpcFailed, SseMcp, close_all, proc_mem_mb  # noqa: E402  (puts tests/ on sys.path)
import _harness  # noqa: E402

UNTHROTTLED = ("--disable-background-timer-throttling", "--disable-renderer-backgrounding",
               "--disable-backgrounding-occluded-windows")
PAGE = """<!doctype html>
<html><head><title>load bench</title><script src="%(daemon)s/reticle.js"></script></head>
<body><main><h1>Load bench</h1><p id="n" role="status">0</p><button id="b">press</button></main>
<script>
  var n = 0, out = document.getElementById("n");
  setInterval(function () {
    n++;
    reticle.signal("load.tick", {n: n});
    out.textContent = String(n);
    if (n %% 50 === 0) console.log("tick " + n);
  }, 10);
</script></body></html>
"""


def absorbed(st):
    """Events the daemon has taken from every tab so far (stored + sampled away)."""
    return sum(s["buffer"]["total"] + s["buffer"]["sampled"] for s in st["sessions"])


def status(url):
    with urllib.request.urlopen(url + "/status", timeout=30) as resp:
        return json.load(resp)


def error_kind(exc):
    if isinstance(exc, RpcFailed):
        return "json-rpc %s" % exc.code
    text = str(exc)
    if " answered " in text:
        return "http %s" % text.split(" answered ", 1)[1].split(":")[0].strip()
    return type(exc).__name__


def client_loop(kind, port, tab_ids, deadline, results, errors, lock, index):
    calls = [("tools/list", {}), ("tools/call", {"name": "reticle_sessions", "arguments": {}})]
    for sid in tab_ids:
        calls.append(("tools/call", {"name": "reticle_console", "arguments": {"sessionId": sid, "limit": 20}}))
        calls.append(("tools/call", {"name": "reticle_network", "arguments": {"sessionId": sid}}))
    snapshot = [("tools/call", {"name": "reticle_snapshot", "arguments": {"sessionId": sid}}) for sid in tab_ids]
    try:
        client = SseMcp(port, "load") if kind == "sse" else RawMcp(port)
    except Exception as exc:
        with lock:
            errors["connect " + error_kind(exc)] = errors.get("connect " + error_kind(exc), 0) + 1
        return
    i = index
    try:
        while time.monotonic() < deadline:
            i += 1
            method, params = snapshot[i % len(snapshot)] if i % 8 == 0 and snapshot else calls[i % len(calls)]
            started = time.perf_counter()
            try:
                result = client.rpc(method, params)
                if isinstance(result, dict) and result.get("isError"):
                    raise RuntimeError("tool %s isError: %s" % (params.get("name"), result.get("structuredContent")))
            except Exception as exc:
                kind_ = error_kind(exc) if not str(exc).startswith("tool ") else "tool isError (%s)" % params.get("name")
                with lock:
                    errors[kind_] = errors.get(kind_, 0) + 1
                    if errors[kind_] == 1:
                        sys.stderr.write("load: first %s: %s\n" % (kind_, str(exc)[:300]))
                if isinstance(exc, (OSError, EOFError, http.client.HTTPException)):
                    return  # the connection is gone
                continue
            with lock:
                results[kind].append((time.perf_counter() - started) * 1000.0)
    finally:
        client.close()


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def one_round(daemon, tab_ids, args):
    """Run the clients once.  -> dict of the round's numbers."""
    results = {"streamable": [], "sse": []}
    errors = {}
    lock = threading.Lock()
    pid = daemon.proc.pid
    rss_start, _ = proc_mem_mb(pid)
    events_before = absorbed(status(daemon.url))
    peak = [rss_start]
    sampling = threading.Event()

    def sample():
        while not sampling.wait(0.1):
            peak[0] = max(peak[0], proc_mem_mb(pid)[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    deadline = time.monotonic() + args.seconds
    threads = [threading.Thread(target=client_loop, args=("sse" if n % 2 else "streamable", daemon.port, tab_ids,
                                                          deadline, results, errors, lock, n), daemon=True)
               for n in range(args.clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.seconds + 120)
    elapsed = time.monotonic() - started
    sampling.set()
    sampler.join()
    _, hwm = proc_mem_mb(pid)
    events = absorbed(status(daemon.url)) - events_before
    time.sleep(args.idle)
    rss_idle, _ = proc_mem_mb(pid)
    every = results["streamable"] + results["sse"]
    return {"clients": args.clients, "tabs": len(tab_ids), "seconds": round(elapsed, 2), "calls": len(every),
            "throughput": round(len(every) / elapsed, 1),
            "p50_ms": round(pct(every, 0.5), 2), "p99_ms": round(pct(every, 0.99), 2),
            "by_transport": {k: {"calls": len(v), "p50_ms": round(pct(v, 0.5), 2), "p99_ms": round(pct(v, 0.99), 2)}
                             for k, v in results.items()},
            "errors": sum(errors.values()), "errors_by_kind": errors, "events": events, "idle_s": args.idle,
            "rss_start_mb": round(rss_start, 1), "rss_peak_mb": round(max(peak[0], rss_start), 1),
            "vm_hwm_mb": round(hwm, 1), "rss_after_idle_mb": round(rss_idle, 1)}


def report(r, label=""):
    print("%sclients %d over %d tabs for %.1f s: %d calls, %.1f calls/s, p50 %.2f ms, p99 %.2f ms"
          % (label, r["clients"], r["tabs"], r["seconds"], r["calls"], r["throughput"], r["p50_ms"], r["p99_ms"]))
    for name, t in sorted(r["by_transport"].items()):
        print("  %-10s %6d calls  p50 %7.2f ms  p99 %7.2f ms" % (name, t["calls"], t["p50_ms"], t["p99_ms"]))
    print("  errors: %d %s" % (r["errors"], json.dumps(r["errors_by_kind"], sort_keys=True) if r["errors"] else ""))
    print("  tab events absorbed by the daemon: %d (%.0f/s)" % (r["events"], r["events"] / r["seconds"]))
    print("  daemon RSS: start %.1f MB, peak %.1f MB (VmHWM %.1f), after %.0f s idle %.1f MB"
          % (r["rss_start_mb"], r["rss_peak_mb"], r["vm_hwm_mb"], r["idle_s"], r["rss_after_idle_mb"]))
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--tabs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--idle", type=float, default=5.0, help="seconds without clients before the last RSS")
    parser.add_argument("--soak", type=float, default=0.0, metavar="MINUTES")
    parser.add_argument("--json", action="store_true", help="also print each round as one JSON line")
    args = parser.parse_args(argv)

    daemon = app = browser = None
    try:
        # the limiter's 100 calls/s per client is not what this measures: the daemon's capacity is
        daemon = Daemon("reticle-load-", env={"RETICLE_RATE_LIMIT": "100000,100000"})
        app = _harness.AppServer([(r"/.*", _harness.TemplatePage, {"template": PAGE, "daemon": daemon.url})])
        browser = Chromium(["%s/?tab=%d" % (app.url, n) for n in range(args.tabs)], UNTHROTTLED)
        sessions = _harness.wait_until(lambda: len(status(daemon.url)["sessions"]) >= args.tabs and
                                       status(daemon.url)["sessions"], 60, 0.2, "%d tabs to connect" % args.tabs)
        tab_ids = [s["sessionId"] for s in sessions]
        time.sleep(1.0)  # the tabs' first events in, buffers filling
        rounds = []
        soak_end = time.monotonic() + args.soak * 60.0
        while True:
            r = one_round(daemon, tab_ids, args)
            rounds.append(r)
            report(r, "round %d: " % len(rounds) if args.soak else "")
            if args.json:
                print(json.dumps(r, sort_keys=True))
            if not args.soak or time.monotonic() >= soak_end:
                break
        failed = sum(r["errors"] for r in rounds)
        if args.soak:
            plateau = min(r["rss_after_idle_mb"] for r in rounds[:2])
            bound = plateau + max(8.0, plateau * 0.10)
            worst = max(r["rss_after_idle_mb"] for r in rounds)
            ok = worst <= bound
            print("soak: %d rounds over %.1f min; RSS after idling: plateau %.1f MB, highest %.1f MB, bound %.1f MB: %s"
                  % (len(rounds), args.soak, plateau, worst, bound, "returns to its plateau" if ok else "GROWS"))
            if not ok:
                return 1
        return 1 if failed else 0
    finally:
        close_all(browser, app, daemon)


if __name__ == "__main__":
    sys.exit(main())
