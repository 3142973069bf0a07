#!/usr/bin/env python3
"""How big reticle_snapshot's answer is for a page of realistic size, in bytes and ~tokens
(bytes / 4), for the modes full, interactive and status, against the page's own
``document.documentElement.outerHTML`` as the baseline.

The bench page has a nav of 8 links, a sign-up form (text, email, password, select, radios,
checkbox, textarea, submit), a table of 50 orders (6 columns, a button per row) and an open
dialog.  Each mode is asked for through a raw POST /mcp (``tools/call`` reticle_snapshot) several
times; sizes are the median (they should not vary), with the wall time of the call beside them.
Three sizes per mode: the tool's ``structuredContent`` as compact JSON (what the daemon's own
``cost`` field counts), the ``content[0].text`` an MCP client hands the model, and the whole
JSON-RPC response body on the wire.

Issue 3 asks for the number; it sets no target.  Prints numbers; asserts nothing.  Starts and
removes its own daemon, app server and Chromium.

    python bench/snapshot_size.py [--runs 5]
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Chromium, Daemon, RawMcp, close_all  # noqa: E402  (puts tests/ on sys.path)
import _harness  # noqa: E402

import tornado.web  # noqa: E402

ROWS = 50

PAGE_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Orders - Acme admin</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 0; }
  nav ul { display: flex; gap: 12px; list-style: none; padding: 8px 16px; background: #eee; margin: 0; }
  main { padding: 16px; }
  table { border-collapse: collapse; width: 100%%; }
  td, th { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; }
  .badge { padding: 1px 6px; border-radius: 8px; background: #def; }
  dialog { border: 1px solid #999; border-radius: 6px; }
</style>
<script src="%(daemon)s/reticle.js"></script></head>
<body>
<header>
  <nav aria-label="Main">
    <ul>
      <li><a href="/">Dashboard</a></li>
      <li><a href="/orders" aria-current="page">Orders</a></li>
      <li><a href="/customers">Customers</a></li>
      <li><a href="/products">Products</a></li>
      <li><a href="/invoices">Invoices</a></li>
      <li><a href="/reports">Reports</a></li>
      <li><a href="/settings">Settings</a></li>
      <li><a href="/logout">Sign out</a></li>
    </ul>
  </nav>
</header>
<main>
  <h1>Orders</h1>
  <section aria-labelledby="new-customer">
    <h2 id="new-customer">New customer</h2>
    <form id="signup" action="/api/customers" method="post">
      <p><label for="name">Full name</label> <input id="name" name="name" required autocomplete="name"></p>
      <p><label for="email">Email</label> <input id="email" name="email" type="email" required placeholder="you@example.com"></p>
      <p><label for="password">Password</label> <input id="password" name="password" type="password" minlength="8"></p>
      <p><label for="plan">Plan</label>
        <select id="plan" name="plan">
          <option value="free">Free</option><option value="team" selected>Team</option>
          <option value="business">Business</option><option value="enterprise">Enterprise</option>
        </select></p>
      <fieldset><legend>Billing</legend>
        <label><input type="radio" name="billing" value="monthly" checked> Monthly</label>
        <label><input type="radio" name="billing" value="yearly"> Yearly</label>
      </fieldset>
      <p><label><input type="checkbox" name="terms" id="terms"> I accept the terms</label></p>
      <p><label for="notes">Notes</label> <textarea id="notes" name="notes" rows="3"></textarea></p>
      <p><button type="submit">Create customer</button> <button type="reset">Clear</button></p>
    </form>
  </section>
  <section aria-labelledby="recent">
    <h2 id="recent">Recent orders</h2>
    <table>
      <caption>The last %(rows)d orders</caption>
      <thead><tr><th>Order</th><th>Customer</th><th>Date</th><th>Total</th><th>Status</th><th>Actions</th></tr></thead>
      <tbody>
"""

PAGE_ROW = ("        <tr><td>#%(n)05d</td><td>%(customer)s</td><td>2026-11-%(day)02d</td><td>$%(total)d.%(cents)02d</td>"
            "<td><span class=\"badge\">%(status)s</span></td><td><button type=\"button\">View #%(n)05d</button></td></tr>\n")

PAGE_TAIL = """      </tbody>
    </table>
  </section>
  <dialog open aria-labelledby="dlg-title">
    <h2 id="dlg-title">Export orders</h2>
    <p>Export the %(rows)d orders shown as CSV. Large exports are emailed when ready.</p>
    <label><input type="checkbox" name="include-archived"> Include archived orders</label>
    <p><button type="button">Cancel</button> <button type="button">Export CSV</button></p>
  </dialog>
</main>
<footer><p>Acme admin &middot; <a href="/help">Help</a></p></footer>
<script>
  window.addEventListener("load", function () {
    setTimeout(function () {
      fetch("/html", {method: "POST", body: document.documentElement.outerHTML});
    }, 300);
  });
</script>
</body></html>
"""

CUSTOMERS = ["Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Dijkstra", "Barbara Liskov",
             "Donald Knuth", "Margaret Hamilton", "Ken Thompson", "Frances Allen", "John McCarthy"]
STATUSES = ["Paid", "Pending", "Shipped", "Refunded", "Cancelled"]


def page_html(daemon_url):
    rows = "".join(PAGE_ROW % {"n": 1000 + i, "customer": CUSTOMERS[i % len(CUSTOMERS)], "day": 1 + i % 28,
                               "total": 10 + (i * 37) % 900, "cents": (i * 13) % 100,
                               "status": STATUSES[i % len(STATUSES)]} for i in range(ROWS))
    return PAGE_HEAD % {"daemon": daemon_url, "rows": ROWS} + rows + PAGE_TAIL % {"rows": ROWS}


class _Page(tornado.web.RequestHandler):
    def initialize(self, html):
        self.html = html

    def get(self):
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.write(self.html)


class _Html(tornado.web.RequestHandler):
    def initialize(self, seen):
        self.seen = seen

    def post(self):
        self.seen.append(self.request.body)
        self.write({"ok": True})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()

    daemon = Daemon("reticle-bench-snapshot-")
    seen = []
    app = _harness.AppServer([(r"/html", _Html, {"seen": seen}), (r"/.*", _Page, {"html": page_html(daemon.url)})])
    browser = Chromium(app.url + "/orders")
    mcp = None
    try:
        mcp = RawMcp(daemon.port)
        _harness.wait_until(lambda: daemon.status()["sessions"], 30, 0.1, "the tab to connect")
        _harness.wait_until(lambda: seen, 30, 0.1, "the page to post its outerHTML")
        html_bytes = len(seen[-1])
        served_bytes = len(page_html(daemon.url).encode("utf-8"))
        print("reticle snapshot size bench  (python %s; bench page: nav of 8 links, a form of 9 controls, "
              "a table of %d rows x 6 columns, an open dialog)" % (sys.version.split()[0], ROWS))
        print("baseline: document.documentElement.outerHTML = %d bytes (~%d tokens); the HTML as served = %d bytes"
              % (html_bytes, html_bytes // 4, served_bytes))
        print()
        print("%-12s %10s %8s %10s %10s %8s %9s %10s %10s" % (
            "mode", "bytes", "~tokens", "x outerHTML", "text bytes", "wire", "lines", "truncated", "ms (med)"))
        for mode in ("full", "interactive", "status"):
            sizes, texts, wires, walls = [], [], [], []
            result = None
            for _ in range(opts.runs):
                start = time.perf_counter()
                result, raw = mcp.request("tools/call", {"name": "reticle_snapshot", "arguments": {"mode": mode}})
                walls.append((time.perf_counter() - start) * 1000)
                if result.get("isError"):
                    raise RuntimeError("reticle_snapshot %s failed: %s" % (mode, result.get("structuredContent")))
                sc = result["structuredContent"]
                body = {k: v for k, v in sc.items() if k != "cost"}
                sizes.append(len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")))
                texts.append(sum(len(c.get("text", "").encode("utf-8")) for c in result.get("content", [])))
                wires.append(len(raw))
            sc = result["structuredContent"]
            size = statistics.median(sizes)
            tree = sc.get("tree") or ""
            print("%-12s %10d %8d %10.3f %10d %8d %9d %10s %10.1f" % (
                mode, size, size // 4, size / html_bytes, statistics.median(texts), statistics.median(wires),
                len(tree.splitlines()) if isinstance(tree, str) else 0, json.dumps(sc.get("truncated", False)),
                statistics.median(walls)))
            if sc.get("cost"):
                print("%-12s daemon's own cost field: %s; sizes over %d runs: %s" % (
                    "", json.dumps(sc["cost"]), opts.runs, sorted(set(sizes))))
        print()
        print("(bytes = structuredContent as compact JSON without its cost field; text bytes = content[].text; "
              "wire = the JSON-RPC response body)")
    finally:
        close_all(mcp, browser, app, daemon)


if __name__ == "__main__":
    main()
