#!/usr/bin/env python3
"""How long a device takes to start, and what four of them cost in memory.

Measures, in one run:
  reticle_open      wall time of the tools/call from the request to its answer, which comes once the
                    injected SDK of the opened page has said hello (a connected session); each run
                    is a new client's first open (reticle_close after each), on an uninstrumented
                    page, once the daemon's spare browser is warm (issue 22: the daemon keeps one
                    started once a device was asked for)
  cold open         the same, with no spare to adopt (the very first open, and a daemon run with
                    RETICLE_SPARE_DEVICES=0): a launch of its own
  bare Chromium     the same executable and the same flags (reticle's own _browser_args), from the
                    process start until its first CDP answer (Browser.getVersion over the DevTools
                    WebSocket): the floor a daemon that starts a browser cannot go under
  daemon's share    the difference of the two medians
  memory            the daemon's RSS with 4 devices open, and the browsers' memory reported apart
                    (PSS summed over each device's process group, so shared pages count once)

The daemon's log gives each start's phases (launch until the DevTools line, attached to the tab,
SDK injected, navigated, session connected); their medians are printed too.

Target (issue 22): reticle_open over the bare launch at or under 1.0, both measured in this run
(printed as `ratio`).  Prints numbers; asserts nothing.  Starts and removes its own daemons, app
server and browsers.

    python bench/device_start.py [--n 7]
"""

import argparse
import asyncio
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from _common import Daemon, RawMcp, close_all  # noqa: E402  (puts tests/ on sys.path)
import _harness  # noqa: E402
import reticle  # noqa: E402

import tornado.websocket  # noqa: E402

TARGET_RATIO = 1.0
PAGE = """<!doctype html><title>device bench</title><button id="b">Go</button>
<script>document.getElementById('b').onclick = function () { fetch('/api'); };</script>"""


def bare_chromium_ms(exe):
    """Process start until the first CDP answer, same flags as a device."""
    profile = tempfile.mkdtemp(prefix="reticle-bench-")
    args, _ = reticle._browser_args(profile, False, reticle.DEVICE_VIEWPORT)
    start = time.perf_counter()
    proc = subprocess.Popen([exe] + args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        url = None
        for raw in proc.stderr:
            m = re.search(rb"DevTools listening on (ws://\S+)", raw)
            if m:
                url = m.group(1).decode()
                break
        if url is None:
            raise RuntimeError("Chromium printed no DevTools endpoint")

        async def first_answer():
            ws = await tornado.websocket.websocket_connect(url)
            ws.write_message('{"id": 1, "method": "Browser.getVersion"}')
            await ws.read_message()
            ws.close()

        asyncio.run(first_answer())
        return (time.perf_counter() - start) * 1000.0
    finally:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait()
        proc.stderr.close()
        time.sleep(0.2)
        shutil.rmtree(profile, ignore_errors=True)


def wait_for_log(daemon, needle, count, timeout=30.0):
    deadline = time.monotonic() + timeout
    while daemon.log().count(needle) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the daemon logged %s fewer than %d times" % (needle, count))
        time.sleep(0.05)


def cold_opens(url, n):
    """reticle_open with no spare (RETICLE_SPARE_DEVICES=0), n new clients in a row."""
    daemon = Daemon("reticle-bench-cold-", env={"RETICLE_DEVICE_BUDGET": "1000/600", "RETICLE_SPARE_DEVICES": "0",
                                                 "RETICLE_RATE_LIMIT": "10000,20000"})
    walls, clients = [], []
    try:
        for _ in range(n):
            client = RawMcp(daemon.port)
            clients.append(client)
            walls.append(client.ok("reticle_open", {"url": url})[1])
            client.ok("reticle_close", {})
    finally:
        close_all(*reversed(clients))
        close_all(daemon)
    return walls


def kb(pid, field, name="status"):
    try:
        with open("/proc/%d/%s" % (pid, name)) as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def group_pss_kb(pgid):
    """PSS of every process in a process group (the browser and its helpers)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) != pgid:
                continue
        except OSError:
            continue
        total += kb(int(entry), "Pss", "smaps_rollup") or kb(int(entry), "VmRSS")
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=7, help="starts of each kind (default 7)")
    opts = parser.parse_args()
    exe = reticle._find_browser()
    daemon = app = None
    clients = []
    try:
        daemon = Daemon("reticle-bench-devices-", env={"RETICLE_DEVICE_BUDGET": "1000/600",
                                                        "RETICLE_RATE_LIMIT": "10000,20000"})
        app = _harness.AppServer([(r"/.*", _harness.TemplatePage, {"template": PAGE, "daemon": ""})])
        url = app.url + "/"
        bare = [bare_chromium_ms(exe) for _ in range(opts.n)]
        opens, reported = [], []
        for i in range(opts.n + 1):
            if i:  # a new client arrives once the spare the last open left behind is warm
                wait_for_log(daemon, '"event":"device_spare_ready"', i)
            client = RawMcp(daemon.port)
            clients.append(client)
            res, wall = client.ok("reticle_open", {"url": url})
            if i:
                opens.append(wall)
                reported.append(res["ms"])
            else:
                first_cold = wall
            client.ok("reticle_close", {})
        cold = [first_cold] + cold_opens(url, opts.n - 1)
        for _ in range(4):
            c = RawMcp(daemon.port)
            clients.append(c)
            c.ok("reticle_open", {"url": url})
        time.sleep(1.0)
        devices = daemon.status()["devices"]
        daemon_rss = kb(daemon.proc.pid, "VmRSS")
        browsers = [group_pss_kb(d["pid"]) for d in devices]
        med_open, med_bare = statistics.median(opens), statistics.median(bare)
        print("browser: %s (%d runs of each)" % (exe, opts.n))
        print("reticle_open of a new client (spare adopted) until the session is connected: median %.0f ms  "
              "(min %.0f, max %.0f; the daemon's own clock: median %.0f ms)"
              % (med_open, min(opens), max(opens), statistics.median(reported)))
        print("bare Chromium, same flags, until its first CDP answer: median %.0f ms  (min %.0f, max %.0f)"
              % (med_bare, min(bare), max(bare)))
        print("ratio reticle_open / bare launch: %.2f  (target <= %.1f)" % (med_open / med_bare, TARGET_RATIO))
        print("cold reticle_open (no spare: a launch of its own): median %.0f ms, %.2f x the bare launch"
              % (statistics.median(cold), statistics.median(cold) / med_bare))
        phases = collections.defaultdict(list)
        for line in daemon.log().splitlines():
            if '"event":"device_started"' in line:
                for key, value in json.loads(line).items():
                    if key.endswith("Ms"):
                        phases[key].append(value)
        print("phases of a start on the daemon's clock, medians from the launch (device_started log lines): %s"
              % ", ".join("%s %d ms" % (k[:-2], statistics.median(v)) for k, v in phases.items()))
        print("memory with %d devices open: daemon RSS %.1f MiB; browsers %.1f MiB PSS in all (%s)"
              % (len(devices), daemon_rss / 1024.0, sum(browsers) / 1024.0,
                 ", ".join("%.0f" % (b / 1024.0) for b in browsers)))
    finally:
        close_all(*reversed(clients))
        close_all(app, daemon)


if __name__ == "__main__":
    main()
