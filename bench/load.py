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

``--floods`` instead measures fairness (issue 19): one probe client calls tools/list and
reticle_sessions one at a time, first alone (its baseline), then while each flood runs: two clients
sending refused 80,000-message batches (a new session each time), 1,014 held-open SSE streams, four
sessionless clients hammering /status, four tabs sending 200-event frames as fast as they can, and
16 sockets that never say hello.  It prints the probe's p50/p99 under each beside the baseline and
the ratio, and exits 1 when a flood takes the probe's p50 beyond 3x its baseline (or a real tab
cannot connect while the handshakes are held).  The daemon runs with its default limits.

    python bench/load.py [--clients 50] [--tabs 4] [--seconds 20] [--idle 5] [--soak MINUTES] [--json]
    python bench/load.py --floods [--seconds 5] [--json]
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


# -- floods: another client's latency under each (issue 19) -----------------------------------

def probe(port, seconds):
    """One client's latencies (ms) over `seconds`: tools/list and reticle_sessions, one at a time,
    at most 50 a second (its own rate limit is 100/s)."""
    client = RawMcp(port)
    out = []
    deadline = time.monotonic() + seconds
    try:
        i = 0
        while time.monotonic() < deadline:
            i += 1
            started = time.perf_counter()
            if i % 2:
                client.rpc("tools/list", {})
            else:
                client.rpc("tools/call", {"name": "reticle_sessions", "arguments": {}})
            took = time.perf_counter() - started
            out.append(took * 1000.0)
            time.sleep(max(0.0, 0.02 - took))  # 50 calls/s: within its own rate limit
    finally:
        client.close()
    return out


def _post(port, body, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/mcp", body, dict({"Content-Type": "application/json"}, **(headers or {})))
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.getheader("Mcp-Session-Id")
    finally:
        conn.close()


def flood_batches(port, stop):
    """A new session, then a refused 80,000-message batch on it, again and again."""
    batch = ("[" + ",".join('{"jsonrpc":"2.0","id":%d,"method":"tools/list"}' % i for i in range(80000)) + "]").encode()
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}})
    while not stop.is_set():
        try:
            _, _, sid = _post(port, init)
            _post(port, batch, {"Mcp-Session-Id": sid} if sid else {})
        except OSError:
            time.sleep(0.01)


def flood_status(port, stop):
    """A sessionless client on one keep-alive connection, as fast as it is answered."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.is_set():
        try:
            conn.request("GET", "/status")
            resp = conn.getresponse()
            resp.read()
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.close()


def hold_streams(port, n, held):
    """Open `n` GET /mcp/sse streams and keep them; -> how many the daemon answered 200."""
    ok = 0
    for _ in range(n):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/mcp/sse", headers={"Accept": "text/event-stream"})
            resp = conn.getresponse()
            if resp.status == 200:
                ok += 1
            else:
                resp.read()
            held.append(conn)
        except (OSError, http.client.HTTPException):
            break
    return ok


def tab_frames(port, stop, index, silent=False, connected=None):
    """A fake tab over the bridge: hello, then 200-event frames as fast as the socket takes them
    (or, `silent`, a socket that never says hello)."""
    import asyncio

    import tornado.httpclient
    import tornado.websocket

    async def run():
        req = tornado.httpclient.HTTPRequest("ws://127.0.0.1:%d/reticle" % port,
                                             headers={"Origin": "http://127.0.0.1:5173"})
        ws = await tornado.websocket.websocket_connect(req)
        if silent:
            while not stop.is_set():
                await asyncio.sleep(0.05)
            ws.close()
            return
        ws.write_message(json.dumps({"kind": "hello", "protocolVersion": 1, "sessionId": "flood-%d" % index,
                                     "url": "http://127.0.0.1:5173/", "title": "flood", "adapters": []}))
        if connected is not None:
            connected.append(index)
        events = [{"type": "dom.attr", "t": i, "data": {"sel": "#x%d" % i, "attr": "class", "value": "v" * 40}}
                  for i in range(200)]
        frame = json.dumps({"kind": "events", "events": events})
        while not stop.is_set():
            await ws.write_message(frame)
        ws.close()

    try:
        asyncio.run(run())
    except Exception as exc:  # the daemon refused it: that is its right
        sys.stderr.write("load: flood tab %d: %s\n" % (index, exc))


def floods(args):
    """The fairness run: the probe alone, then under each flood.  -> (rows, ok)."""
    daemon = Daemon("reticle-floods-", env={})
    rows = []
    ok = True
    try:
        base = probe(daemon.port, args.seconds)
        b50, b99 = pct(base, 0.5), pct(base, 0.99)
        rows.append({"flood": "none (baseline)", "p50_ms": round(b50, 2), "p99_ms": round(b99, 2), "calls": len(base)})

        def under(name, starters, note=""):
            stop = threading.Event()
            threads = [threading.Thread(target=f, args=(stop,) + a, daemon=True) for f, a in starters]
            for t in threads:
                t.start()
            time.sleep(0.5)  # the flood under way
            try:
                lat = probe(daemon.port, args.seconds)
            finally:
                stop.set()
                for t in threads:
                    t.join(30)
            row = {"flood": name, "p50_ms": round(pct(lat, 0.5), 2), "p99_ms": round(pct(lat, 0.99), 2),
                   "calls": len(lat), "ratio_p50": round(pct(lat, 0.5) / b50, 2) if b50 else None}
            if note:
                row["note"] = note
            rows.append(row)
            return row

        port = daemon.port
        under("2 clients x refused 80,000-message batches", [
            (lambda stop: flood_batches(port, stop), ()), (lambda stop: flood_batches(port, stop), ())])
        held = []
        opened = hold_streams(port, 1014, held)
        under("1,014 SSE streams held open", [], "%d answered 200, the rest 503" % opened)
        for conn in held:
            conn.close()
        under("4 sessionless clients on /status", [
            (lambda stop: flood_status(port, stop), ()) for _ in range(4)])
        under("4 tabs x 200-event frames", [
            (lambda stop, i=i: tab_frames(port, stop, i), ()) for i in range(4)])
        connected = []
        row = under("16 sockets that never say hello", [
            (lambda stop, i=i: tab_frames(port, stop, 100 + i, silent=True), ()) for i in range(16)] + [
            (lambda stop: (time.sleep(0.2), tab_frames(port, stop, 999, connected=connected)), ())])
        if not connected:
            ok = False
            row["note"] = "a real tab could not connect"
        for r in rows[1:]:
            if r["ratio_p50"] is not None and r["ratio_p50"] > 3.0:
                ok = False
    finally:
        daemon.close()
    return rows, ok


def report_floods(rows):
    base = rows[0]
    print("another client's latency under each flood (baseline p50 %.2f ms, p99 %.2f ms):"
          % (base["p50_ms"], base["p99_ms"]))
    print("  %-46s %9s %9s %9s %9s  %s" % ("flood", "p50 ms", "base p50", "p99 ms", "base p99", "p50 ratio"))
    for r in rows:
        print("  %-46s %9.2f %9.2f %9.2f %9.2f  %s%s" % (
            r["flood"], r["p50_ms"], base["p50_ms"], r["p99_ms"], base["p99_ms"],
            "%.2fx" % r["ratio_p50"] if r.get("ratio_p50") is not None else "-",
            "  (%s)" % r["note"] if r.get("note") else ""))
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--tabs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--idle", type=float, default=5.0, help="seconds without clients before the last RSS")
    parser.add_argument("--soak", type=float, default=0.0, metavar="MINUTES")
    parser.add_argument("--json", action="store_true", help="also print each round as one JSON line")
    parser.add_argument("--floods", action="store_true", help="measure another client's latency under floods")
    args = parser.parse_args(argv)
    if args.floods:
        if args.seconds == 20.0:
            args.seconds = 5.0
        rows, ok = floods(args)
        report_floods(rows)
        if args.json:
            print(json.dumps({"floods": rows, "ok": ok}, sort_keys=True))
        return 0 if ok else 1

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
