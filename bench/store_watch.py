#!/usr/bin/env python3
"""What watching the app's store costs a healthy act's verdict (Storage truth), in one run.

The plain PHP notes app of tests/_store_apps.py on PDO SQLite, in headless Chromium with the script tag;
`--acts` `reticle_act_and_wait` clicks of its fetch form's Add button, each `until` its POST answering 201,
first with no store watched (the baseline), then with the app's SQLite file watched, in rounds that
alternate the two (`--rounds`), so both see the same machine.  Before the run the table gets `--rows`
rows (the comparison reads every row of a changed table: the bigger the table, the dearer a commit).
Prints the median and p90 wall time of each and the ratio (target: at most 1.20 at the median), and
how many reads of the store the watched acts made.  Asserts nothing.

    python bench/store_watch.py [--acts 15] [--rounds 2] [--rows 1000]
"""

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Chromium, Daemon, RawMcp, close_all  # noqa: E402  (puts tests/ on sys.path)
import _harness  # noqa: E402
from _store_apps import PhpStore  # noqa: E402


def acts(mcp, sid, n, label):
    """The wall times (ms) of n healthy saves through the fetch form."""
    times = []
    for i in range(n):
        mcp.ok("reticle_act", {"sessionId": sid, "action": "fill", "target": {"label": "Title"},
                               "args": {"value": "%s %d" % (label, i)}})
        out, spent = mcp.ok("reticle_act_and_wait", {
            "sessionId": sid, "action": "click", "target": {"role": "button", "name": "Add"}, "timeout_ms": 6000,
            "until": {"kind": "net", "method": "POST", "urlContains": "/api/notes", "status": 201}})
        if out["verified"] != "yes":
            print("  (an act was %s: %s)" % (out["verified"], out["because"][:200]))
        times.append(spent)
    return times


def quantiles(times):
    return statistics.median(times), sorted(times)[max(0, int(len(times) * 0.9) - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--acts", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rows", type=int, default=1000)
    args = ap.parse_args()
    daemon = Daemon("reticle-bench-store-")
    tmp = tempfile.TemporaryDirectory(prefix="reticle-bench-store-app-")
    app = browser = mcp = None
    try:
        app = PhpStore(tmp.name, daemon)
        conn = sqlite3.connect(app.db_path)
        conn.executemany("INSERT INTO notes (title, api_token) VALUES (?, ?)",
                         [("seed %d" % i, "tok_seed") for i in range(args.rows)])
        conn.commit()
        conn.close()
        mcp = RawMcp(daemon.port)
        browser = Chromium(app.url + "/app")
        sid = _harness.wait_until(lambda: next((s["sessionId"] for s in mcp.ok("reticle_sessions", {})[0]["sessions"]
                                                if s["url"].startswith(app.url)), None), 20, what="the tab")
        acts(mcp, sid, 3, "warm")
        plain, watched = [], []
        for r in range(args.rounds):
            plain += acts(mcp, sid, args.acts, "plain %d" % r)
            mcp.ok("reticle_watch_db", {"url": app.watch_url})
            watched += acts(mcp, sid, args.acts, "watched %d" % r)
            reads = daemon.status()["serverTruth"]["stores"][0]["reads"]
            mcp.ok("reticle_watch_db", {"url": app.watch_url, "unwatch": True})
        pm, pp = quantiles(plain)
        wm, wp = quantiles(watched)
        print("a healthy act's verdict (act_and_wait, until its POST → 201), %d acts each, a table of %d rows (ms):"
              % (len(plain), args.rows))
        print("  no store watched        %8.1f   (p90 %.1f)" % (pm, pp))
        print("  its SQLite file watched %8.1f   (p90 %.1f)   ratio %.2f at the median" % (wm, wp, wm / pm))
        print("  the last round's watched acts read the store %d times" % reads)
    finally:
        close_all(browser, mcp, app, daemon)
        tmp.cleanup()


if __name__ == "__main__":
    main()
