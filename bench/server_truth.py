#!/usr/bin/env python3
"""What Reticle's server middleware costs a request: the same WSGI and ASGI apps called bare,
wrapped with an unmarked request, and wrapped with a request a Reticle tab marked, in one run.

The apps are the smallest there are (a 200 with a two-byte body), so the difference is the
middleware alone.  Requests are made in-process with a prepared environ (WSGI) or scope (ASGI),
`--requests` per run, `--runs` runs, and the median time per request of each variant is printed
with the overhead against the bare app.  Marked records go to a real daemon started for the run
(its mark is no tab's, so the daemon counts them as unmatched): requests are timed in batches of
500, and the reporter's queue is let drain between batches, so each marked request pays for
building and queueing its record, never for a drop.  Targets on the 2-core machine: unmarked
under 2 µs, marked under 100 µs.

With `--acts N` (0 to skip) it then measures what waiting for the server's records adds to a
healthy act's verdict (issue 28.6): the FastAPI app of tests/_server_apps.py in headless
Chromium with the script tag, served once without the middleware and once with it, and N
`reticle_act_and_wait` clicks of its Save button with `until` its POST answering 200 on each; the
median wall time of the call on each and the difference (target: under 50 ms added at the
median).  Prints numbers; asserts nothing.

    python bench/server_truth.py [--requests 20000] [--runs 5] [--acts 20]
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Chromium, Daemon, RawMcp, close_all  # noqa: E402  (puts tests/ on sys.path)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import reticle  # noqa: E402

BATCH = 500
MARK = "%032x.bench.n1" % 1


def bare_wsgi(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


async def bare_asgi(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def environ(marked):
    env = {"REQUEST_METHOD": "POST", "PATH_INFO": "/api/save", "HTTP_HOST": "127.0.0.1:8000",
           "HTTP_ACCEPT": "*/*", "HTTP_USER_AGENT": "bench", "HTTP_COOKIE": "sessionid=abc; csrftoken=def",
           "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "2", "SERVER_NAME": "127.0.0.1"}
    if marked:
        env["HTTP_X_RETICLE_MARK"] = MARK
    return env


def scope(marked):
    headers = [(b"host", b"127.0.0.1:8000"), (b"accept", b"*/*"), (b"user-agent", b"bench"),
               (b"cookie", b"sessionid=abc; csrftoken=def"), (b"content-type", b"application/json")]
    if marked:
        headers.append((b"x-reticle-mark", MARK.encode()))
    return {"type": "http", "method": "POST", "path": "/api/save", "headers": headers}


def drain(app):
    reporter = getattr(app, "reticle_reporter", None)
    while reporter is not None and reporter.queue.qsize():
        time.sleep(0.002)


def time_wsgi(app, env, n):
    def start(status, headers, exc_info=None):
        return None
    spent = 0.0
    done = 0
    while done < n:
        k = min(BATCH, n - done)
        drain(app)
        t0 = time.perf_counter()
        for _ in range(k):
            for _chunk in app(env, start):
                pass
        spent += time.perf_counter() - t0
        done += k
    return spent / n * 1e6


def time_asgi(app, sc, n):
    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        return None

    async def run():
        spent = 0.0
        done = 0
        while done < n:
            k = min(BATCH, n - done)
            drain(app)
            t0 = time.perf_counter()
            for _ in range(k):
                await app(sc, receive, send)
            spent += time.perf_counter() - t0
            done += k
        return spent / n * 1e6
    return asyncio.run(run())


def click_times(daemon, url, button, path, acts):
    """The wall times (ms) of `acts` act_and_wait clicks of `button` on the page at `url`, in a
    Chromium tab that loads the SDK by its script tag, each `until` its POST to `path` answers 200
    (after two that warm the app, the page and the daemon up)."""
    import _harness
    mcp = RawMcp(daemon.port)
    browser = None
    try:
        before = {s["sessionId"] for s in mcp.ok("reticle_sessions", {})[0]["sessions"]}
        browser = Chromium(url)
        sid = _harness.wait_until(lambda: next((s["sessionId"] for s in mcp.ok("reticle_sessions", {})[0]["sessions"]
                                                if s["sessionId"] not in before and s["url"].startswith(url)), None),
                                  20, what="the tab to connect")
        times, heard = [], 0
        for i in range(acts + 2):
            out, spent = mcp.ok("reticle_act_and_wait", {
                "action": "click", "target": {"role": "button", "name": button}, "sessionId": sid,
                "until": {"kind": "net", "method": "POST", "urlContains": path, "status": 200},
                "timeout_ms": 6000})
            if out["verified"] != "yes":
                print("  (an act was %s: %s)" % (out["verified"], out["because"]))
            if i >= 2:
                times.append(spent)
                heard += bool(out.get("server"))
        print("  (%s: %d of %d answers carried the server's record)" % (url, heard, acts))
        return times
    finally:
        close_all(browser, mcp)


def act_times(daemon, plain, acts):
    """click_times on the FastAPI test app's Save, served without the middleware (plain) or with it."""
    import _harness
    port = _harness.free_port()
    apps = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "_server_apps.py")
    db = tempfile.NamedTemporaryFile(prefix="reticle-bench-", suffix=".sqlite3", delete=False).name
    env = _harness.daemon_env(daemon.state_dir, RETICLE_PORT=str(daemon.port), **({"SHOP_PLAIN": "1"} if plain else {}))
    app = subprocess.Popen([sys.executable, apps, "fastapi", str(port), db, daemon.url], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _harness.wait_until(lambda: _harness.port_listens(port), 20, what="the app to listen")
        return click_times(daemon, "http://127.0.0.1:%d/" % port, "Save", "/api/save", acts)
    finally:
        app.terminate()
        app.wait(10)
        os.unlink(db)


def quantiles(times):
    """(median, p90) of a list of times."""
    return statistics.median(times), sorted(times)[max(0, int(len(times) * 0.9) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--acts", type=int, default=20)
    args = ap.parse_args()
    daemon = Daemon("reticle-bench-server-")
    try:
        os.environ["RETICLE_PORT"] = str(daemon.port)
        os.environ["RETICLE_STATE_DIR"] = daemon.state_dir
        os.environ.pop("RETICLE_TOKEN", None)
        os.environ.pop("RETICLE_HOST", None)
        wsgi, asgi = reticle.wsgi(bare_wsgi), reticle.asgi(bare_asgi)
        variants = [
            ("WSGI bare", lambda: time_wsgi(bare_wsgi, environ(False), args.requests)),
            ("WSGI wrapped, unmarked", lambda: time_wsgi(wsgi, environ(False), args.requests)),
            ("WSGI wrapped, marked", lambda: time_wsgi(wsgi, environ(True), args.requests)),
            ("ASGI bare", lambda: time_asgi(bare_asgi, scope(False), args.requests)),
            ("ASGI wrapped, unmarked", lambda: time_asgi(asgi, scope(False), args.requests)),
            ("ASGI wrapped, marked", lambda: time_asgi(asgi, scope(True), args.requests)),
        ]
        results = {name: [] for name, _ in variants}
        for _ in range(args.runs):
            for name, run in variants:
                results[name].append(run())
        drain(wsgi)
        drain(asgi)
        time.sleep(0.5)
        med = {name: statistics.median(v) for name, v in results.items()}
        print("per request, median of %d runs of %d requests (µs):" % (args.runs, args.requests))
        for name, _ in variants:
            base = med[name.split(" ")[0] + " bare"]
            extra = "" if name.endswith("bare") else "   overhead %+.2f µs" % (med[name] - base)
            print("  %-24s %8.2f%s" % (name, med[name], extra))
        for label, app in (("WSGI", wsgi), ("ASGI", asgi)):
            r = app.reticle_reporter
            print("  %s reporter: %d records sent, %d dropped%s" % (
                label, r.sent, r.dropped_total, " (last error: %s)" % r.last_error if r.last_error else ""))
        if args.acts > 0:
            plain = act_times(daemon, True, args.acts)
            served = act_times(daemon, False, args.acts)
            print("a healthy act's verdict (act_and_wait, until net), median of %d (ms):" % args.acts)
            print("  without the middleware   %8.1f   (p90 %.1f)" % quantiles(plain))
            print("  with it (records waited) %8.1f   (p90 %.1f)   added %+.1f ms at the median" % (
                quantiles(served) + (statistics.median(served) - statistics.median(plain),)))
    finally:
        close_all(daemon)


if __name__ == "__main__":
    main()
