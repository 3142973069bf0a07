#!/usr/bin/env python3
"""How long a device takes to start on a browser the user already runs (a CDP endpoint), beside one
that Reticle launches.

Measures, in one run, with the `mcp` SDK's Streamable HTTP client (tests/_harness.Mcp), one client
per daemon:
  launched, no spare  `reticle_open {url}` on a daemon run with RETICLE_SPARE_DEVICES=0: every open
                      launches a browser of its own (the baseline)
  launched, spare     the same on a daemon with the default spare, each open once the spare the last
                      open left behind is warm (for reference: the best a launching daemon does)
  endpoint            the same on a daemon run with `--cdp-endpoint http://127.0.0.1:PORT`, PORT a
                      headless Chromium this script starts with --remote-debugging-port: each open
                      is a browser context of its own in that browser, a tab in it, the SDK
                      registered, the page loaded
  ratio               endpoint over launched (no spare), their medians

Each open is timed from the tools/call to its answer (which comes once the opened page's SDK has
said hello), then `reticle_close` (timed too); the three kinds take turns, in an order rotated each
run, after one untimed open of each.  The answer's own `ms` (the daemon's clock) is printed beside
it (reticle_open answers no phases of its own), and each start's phases from the daemon's
`device_started` log lines, as medians: for a launch `launchMs`, `attachedMs`, `injectedMs`,
`navigatedMs`, `askedMs` from the launch, `connectedMs` from the start of the open; for an adopted
spare the spare's own `launchMs` and `warmMs` (before the open), then `spareNavigatedMs` and
`connectedMs` from the open; for an endpoint `connectMs` (the DevTools connection, /json/version
asked first), `injectedMs` from there (a browser context, a tab, the SDK registered) and
`connectedMs` from the start of the open.

Prints numbers; asserts nothing.  Starts and removes its own daemons, app server and Chromium.

    python bench/device_endpoint.py [--runs 7]
"""

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Chromium, Daemon, close_all  # noqa: E402  (puts tests/ on sys.path)
import _harness  # noqa: E402

PAGE = """<!doctype html><title>endpoint bench</title><button id="b">Go</button>
<script>document.getElementById('b').onclick = function () { fetch('/api'); };</script>"""
# Enough starts for every run, and no throttling of the bench's own calls.
ENV = {"RETICLE_DEVICE_BUDGET": "1000/600", "RETICLE_RATE_LIMIT": "10000,20000"}
KINDS = ("launched, no spare", "launched, spare", "endpoint")
PHASES = ("each from the launch; connected from the start of the open",
          "launch and warm: the spare's own start, before the open; spareNavigated and connected from the open",
          "connect: to the endpoint; injected: from there, a context, a tab, the SDK registered; connected: "
          "from the start of the open")


class EndpointChromium(Chromium):
    """The user's browser: headless Chromium with tests/_harness.Browser's flags, a profile of its own and
    --remote-debugging-port on a free port of 127.0.0.1, one blank tab.  close() (bench/_common.Chromium)
    ends its process group and removes the profile."""

    def __init__(self):
        exe = _harness.chromium_path()
        if exe is None:
            raise RuntimeError("Chromium is not installed; run sh tests/bootstrap.sh")
        self.port = _harness.free_port()
        self.http = "http://127.0.0.1:%d" % self.port
        self.profile = tempfile.mkdtemp(prefix="reticle-bench-endpoint-chrome-")
        args = [exe, "--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-extensions", "--mute-audio",
                "--user-data-dir=" + self.profile, "--remote-debugging-port=%d" % self.port, "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        try:
            _harness.wait_until(lambda: self.get("/json/version") is not None, 20, 0.05,
                                "the endpoint Chromium's /json/version")
        except BaseException:
            self.close()
            raise

    def close(self):
        """The process group ended and the profile removed (bench/_common.Chromium), then the folder of the
        profile's SingletonSocket, which Chromium makes in the temporary directory and leaves when killed."""
        try:
            singleton = os.path.dirname(os.readlink(os.path.join(self.profile, "SingletonSocket")))
        except OSError:
            singleton = None
        super().close()
        if singleton and os.path.basename(singleton).startswith("org.chromium.Chromium."):
            shutil.rmtree(singleton, ignore_errors=True)

    def get(self, path):
        try:
            with urllib.request.urlopen(self.http + path, timeout=2) as resp:
                return json.load(resp)
        except (OSError, ValueError):
            return None

    def pages(self):
        return [t for t in self.get("/json/list") or [] if t.get("type") == "page"]


def wait_for_log(daemon, needle, count, timeout=30.0):
    _harness.wait_until(lambda: daemon.log().count(needle) >= count, timeout, 0.05,
                        "%s logged %d times" % (needle, count))


def open_close(client, url):
    """reticle_open {url}, then reticle_close -> (the open's answer, its wall ms, the close's wall ms)."""
    start = time.perf_counter()
    opened, failed = client.call("reticle_open", {"url": url}, timeout=60)
    open_ms = (time.perf_counter() - start) * 1000.0
    if failed:
        raise RuntimeError("reticle_open failed: %s" % json.dumps(opened)[:800])
    start = time.perf_counter()
    closed, failed = client.call("reticle_close", {}, timeout=60)
    close_ms = (time.perf_counter() - start) * 1000.0
    if failed:
        raise RuntimeError("reticle_close failed: %s" % json.dumps(closed)[:800])
    return opened, open_ms, close_ms


def started_phases(daemon, spare=None):
    """Each `device_started` log line's phases ({name: ms}), in order; only adopted spares with
    spare=True, only launches of its own with spare=False."""
    out = []
    for line in daemon.log().splitlines():
        if '"event":"device_started"' not in line:
            continue
        rec = json.loads(line)
        if spare is None or bool(rec.get("spare")) == spare:
            out.append({k: v for k, v in rec.items() if k.endswith("Ms") and isinstance(v, (int, float))})
    return out


def medians(records):
    keys = []
    for rec in records:
        keys += [k for k in rec if k not in keys]
    return ", ".join("%s %d" % (k[:-2], statistics.median(r[k] for r in records if k in r)) for k in keys)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed opens of each kind (default 7)")
    opts = parser.parse_args()
    app = chrome = None
    daemons, clients = {}, {}
    try:
        app = _harness.AppServer([(r"/.*", _harness.TemplatePage, {"template": PAGE, "daemon": ""})])
        url = app.url + "/"
        chrome = EndpointChromium()
        tabs_before = len(chrome.pages())
        daemons[KINDS[0]] = Daemon("reticle-bench-endpoint-cold-", env=dict(ENV, RETICLE_SPARE_DEVICES="0"))
        daemons[KINDS[1]] = Daemon("reticle-bench-endpoint-spare-", env=ENV)
        daemons[KINDS[2]] = Daemon("reticle-bench-endpoint-cdp-", env=ENV, args=["--cdp-endpoint", chrome.http])
        for kind in KINDS:
            clients[kind] = _harness.Mcp(daemons[kind].url)
        spare_ready = '"event":"device_spare_ready"'
        first = {}
        for kind in KINDS:  # untimed: the first open of each daemon (the spare daemon's warms its spare after it)
            first[kind] = open_close(clients[kind], url)[1]
        wait_for_log(daemons[KINDS[1]], spare_ready, 1)
        opens, closes, reported = (collections.defaultdict(list) for _ in range(3))
        answer_keys, answer_phases, product = set(), [], None
        for run in range(opts.runs):
            for kind in KINDS[run % 3:] + KINDS[:run % 3]:
                opened, open_ms, close_ms = open_close(clients[kind], url)
                opens[kind].append(open_ms)
                closes[kind].append(close_ms)
                reported[kind].append(opened.get("ms"))
                answer_keys.update(opened)
                if isinstance(opened.get("phases"), dict):
                    answer_phases.append((kind, opened["phases"]))
                if kind == KINDS[2]:
                    product = (opened.get("browser") or {}).get("product")
                if kind == KINDS[1]:  # the next spare warm before anything else is timed
                    wait_for_log(daemons[kind], spare_ready, run + 2)
        tabs_after = len(chrome.pages())
        med = {kind: statistics.median(opens[kind]) for kind in KINDS}
        print("endpoint browser: %s at %s (headless, started by this script); %d timed opens of each kind, "
              "interleaved" % (product or "?", chrome.http, opts.runs))
        print("reticle_open until the page's session is connected, then reticle_close (wall ms; the daemon's "
              "own clock in the answer's `ms`):")
        for kind in KINDS:
            print("  %-18s  open median %6.0f ms (min %.0f, max %.0f; answer's ms %.0f)   close median %5.0f ms"
                  "   first open %.0f ms"
                  % (kind, med[kind], min(opens[kind]), max(opens[kind]),
                     statistics.median(r for r in reported[kind] if r is not None), statistics.median(closes[kind]),
                     first[kind]))
        print("ratio endpoint / launched (no spare): %.2f   (endpoint / launched with the spare warm: %.2f)"
              % (med[KINDS[2]] / med[KINDS[0]], med[KINDS[2]] / med[KINDS[1]]))
        if answer_phases:
            for kind in KINDS:
                got = [p for k, p in answer_phases if k == kind]
                if got:
                    print("phases in reticle_open's answer, %s: %s" % (kind, medians(got)))
        else:
            print("reticle_open's answer carries no phases (its keys: %s); from the device_started log lines:"
                  % ", ".join(sorted(answer_keys)))
        for kind, spare, what in zip(KINDS, (False, True, False), PHASES):
            records = started_phases(daemons[kind], spare)[1 if kind != KINDS[1] else 0:]  # the untimed first left out
            print("  %-18s  medians (ms): %s   (%s)" % (kind, medians(records), what))
        print("tabs of the endpoint browser: %d before, %d after the closes (each device's context disposed)"
              % (tabs_before, tabs_after))
    finally:
        close_all(*[clients.get(k) for k in reversed(KINDS)] + [daemons.get(k) for k in reversed(KINDS)]
                  + [chrome, app])


if __name__ == "__main__":
    main()
