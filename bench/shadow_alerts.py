#!/usr/bin/env python3
"""What the SDK's alert observer costs a page built of web components: frame times while the page
changes on every frame, with the SDK and, as the baseline in the same run, without it.

The bench page defines a custom element whose constructor attaches an open shadow root holding a
span and a role=status element, mounts `--components` of them, waits 1.5 s, then changes a text
node on each of 120 animation frames.  Every change makes the SDK's alert observer scan again, and
since the SDK searches every shadow root it has seen, that scan covers all the roots.  The page
reports the gaps between its frames (median, p90, max) and the long tasks (over 50 ms) the browser
saw, by a beacon to the app server.  Each variant runs `--runs` times in a fresh headless Chromium;
the medians are printed, with the SDK's ratio to the baseline.  Prints numbers; asserts nothing.

    python bench/shadow_alerts.py [--components 2000] [--runs 3]
"""

import argparse
import json
import os
import statistics
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Chromium, Daemon, close_all  # noqa: E402  (puts tests/ on sys.path)
import _harness  # noqa: E402
import tornado.web  # noqa: E402

FRAMES = 120

PAGE = """<!doctype html><title>components</title>%(tag)s
<div id="host"></div><p id="t">0</p>
<script>
var longTasks = 0;
try {
  new PerformanceObserver(function (list) { longTasks += list.getEntries().length; })
    .observe({type: 'longtask', buffered: true});
} catch (e) {}
customElements.define('x-item', class extends HTMLElement {
  constructor() {
    super();
    this.attachShadow({mode: 'open'}).innerHTML = '<span>item</span><b role="status">ok</b>';
  }
});
var host = document.getElementById('host');
for (var i = 0; i < %(count)d; i++) host.appendChild(document.createElement('x-item'));
setTimeout(function () {
  var n = 0, gaps = [], last = performance.now(), before = longTasks;
  function step() {
    document.getElementById('t').textContent = String(n);
    var now = performance.now();
    gaps.push(now - last);
    last = now;
    if (++n < %(frames)d) { requestAnimationFrame(step); return; }
    gaps.sort(function (a, b) { return a - b; });
    navigator.sendBeacon('/done', JSON.stringify({p50: gaps[Math.floor(gaps.length / 2)],
      p90: gaps[Math.floor(gaps.length * 0.9)], max: gaps[gaps.length - 1], longTasks: longTasks - before}));
  }
  requestAnimationFrame(step);
}, 1500);
</script>"""


class Page(tornado.web.RequestHandler):
    def initialize(self, bench):
        self.bench = bench

    def get(self, variant):
        tag = '<script src="%s/reticle.js"></script>' % self.bench.daemon_url if variant == "sdk" else ""
        self.set_header("Content-Type", "text/html")
        self.write(PAGE % {"tag": tag, "count": self.bench.components, "frames": FRAMES})


class Done(tornado.web.RequestHandler):
    def initialize(self, bench):
        self.bench = bench

    def post(self):
        with self.bench.lock:
            self.bench.results.append(json.loads(self.request.body))


class Bench:
    def __init__(self, components, daemon_url):
        self.components = components
        self.daemon_url = daemon_url
        self.results = []
        self.lock = threading.Lock()

    def run(self, url):
        with self.lock:
            seen = len(self.results)
        browser = Chromium(url)
        try:
            _harness.wait_until(lambda: len(self.results) > seen, 120, what="the page's frame report")
        finally:
            browser.close()
        return self.results[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--components", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    daemon = Daemon("reticle-bench-shadow-")
    app = None
    try:
        bench = Bench(opts.components, daemon.url)
        app = _harness.AppServer([(r"/done", Done, {"bench": bench}),
                                  (r"/(sdk|bare)", Page, {"bench": bench})])
        rows = {}
        for variant in ("bare", "sdk"):
            runs = [bench.run(app.url + "/" + variant) for _ in range(opts.runs)]
            rows[variant] = {k: statistics.median(r[k] for r in runs) for k in ("p50", "p90", "max", "longTasks")}
        print("%d components with a shadow root each, the page changing on each of %d frames; median of %d runs"
              % (opts.components, FRAMES, opts.runs))
        print("%-28s %9s %9s %9s %11s" % ("page", "p50 ms", "p90 ms", "max ms", "long tasks"))
        for variant, label in (("bare", "without the SDK (baseline)"), ("sdk", "with the SDK")):
            r = rows[variant]
            print("%-28s %9.1f %9.1f %9.1f %11.0f" % (label, r["p50"], r["p90"], r["max"], r["longTasks"]))
        print("ratio sdk / baseline: p50 %.2f, p90 %.2f"
              % (rows["sdk"]["p50"] / rows["bare"]["p50"], rows["sdk"]["p90"] / rows["bare"]["p90"]))
    finally:
        close_all(app, daemon)


if __name__ == "__main__":
    main()
