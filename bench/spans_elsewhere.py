#!/usr/bin/env python3
"""What another app's OpenTelemetry spans cost a healthy verdict of an app that sends none.

One daemon serves every app on the machine.  The app here is a classic post/redirect/get form with no
server voice (tests/_forms_app.py: no middleware, no tracing); each act fills the name and clicks "Add
record" (`reticle_act_and_wait`, no `until`: the page settling after the 302 and the list it lands on),
in a device and in Chromium with the script tag.  Phase 1 measures `--acts` verdicts with no span ever
heard; then one span of another service (a SERVER span answering 127.0.0.1 on another port) reaches the
daemon (`POST /v1/traces`), and phase 2 measures again.  Prints the median and p90 wall time of each
phase, their ratio, and how many answers said the verdict waited for no span (`serverWait`).  With
`--compare PATH` the same runs against another reticle.py first (the module before the wait became per
origin: `git show f9c0100:reticle.py > /tmp/before.py`).  Prints numbers; asserts nothing.

    python bench/spans_elsewhere.py [--acts 10] [--compare PATH]
"""

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Chromium, Daemon, RawMcp, close_all  # noqa: E402  (puts tests/ on sys.path)

import _harness  # noqa: E402
from _forms_app import FormsApp  # noqa: E402


def foreign_span(daemon):
    """One SERVER span of another service, answering 127.0.0.1 on a port no tab uses."""
    span = {"traceId": secrets.token_hex(16), "spanId": secrets.token_hex(8), "name": "GET /health", "kind": 2,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000001000000",
            "attributes": [{"key": "http.request.method", "value": {"stringValue": "GET"}},
                           {"key": "url.path", "value": {"stringValue": "/health"}},
                           {"key": "server.address", "value": {"stringValue": "127.0.0.1"}},
                           {"key": "server.port", "value": {"intValue": "5999"}},
                           {"key": "http.response.status_code", "value": {"intValue": "200"}}]}
    body = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name",
                                                            "value": {"stringValue": "other-app"}}]},
                               "scopeSpans": [{"scope": {"name": "bench"}, "spans": [span]}]}]}
    req = urllib.request.Request(daemon.url + "/v1/traces", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + daemon.token()})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def verdicts(mcp, sid, acts, tag):
    """`acts` healthy adds: (wall ms of each verdict, answers that said they waited for no span)."""
    times, said = [], 0
    for i in range(acts + 1):
        mcp.ok("reticle_act", {"target": {"label": "Name"}, "action": "fill",
                               "args": {"value": "%s-%s" % (tag, secrets.token_hex(4))}, "sessionId": sid})
        out, spent = mcp.ok("reticle_act_and_wait", {"action": "click", "sessionId": sid, "timeout_ms": 8000,
                                                     "target": {"role": "button", "name": "Add record"}})
        if out["verified"] != "yes":
            print("  (an act was %s: %s)" % (out["verified"], out["because"][:200]))
        if i:  # the first warms the page up
            times.append(spent)
            said += "serverWait" in out
    return times, said


def phases(module, acts, device):
    """Phase 1 and 2 of one module, in a device or with the script tag."""
    with tempfile.TemporaryDirectory() as tmp:
        daemon = Daemon(os.path.join(tmp, "state"), command=[sys.executable, module])
        forms = FormsApp(daemon.url)
        app = _harness.AppServer(forms.routes())
        mcp = RawMcp(daemon.port)
        browser = None
        try:
            url = app.url + "/records"
            if device:
                sid = mcp.ok("reticle_open", {"url": url})[0]["sessionId"]
            else:
                browser = Chromium(url)
                sid = _harness.wait_until(lambda: next((s["sessionId"] for s in mcp.ok("reticle_sessions", {})[0][
                    "sessions"] if s["url"].startswith(app.url)), None), 20, what="the tab")
            quiet = verdicts(mcp, sid, acts, "q")
            foreign_span(daemon)
            heard = verdicts(mcp, sid, acts, "h")
            if device:
                mcp.ok("reticle_close", {"sessionId": sid})
            return quiet, heard
        finally:
            close_all(browser, mcp)
            app.close()
            daemon.stop()


def show(label, quiet, heard):
    (q, _), (h, said) = quiet, heard
    q50, h50 = statistics.median(q), statistics.median(h)
    q90, h90 = sorted(q)[int(len(q) * 0.9) - 1], sorted(h)[int(len(h) * 0.9) - 1]
    print("%s: no span heard: median %.0f ms (p90 %.0f) | spans from another app: median %.0f ms (p90 %.0f) | "
          "%.2fx | %d of %d answers said no span was awaited" % (label, q50, q90, h50, h90, h50 / q50, said, len(h)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--acts", type=int, default=10)
    ap.add_argument("--compare", help="another reticle.py, measured first in the same run")
    args = ap.parse_args()
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reticle.py")
    for device in (True, False):
        where = "device" if device else "script tag"
        if args.compare:
            show("before (%s), %s" % (args.compare, where), *phases(args.compare, args.acts, device))
        show("this reticle.py, %s" % where, *phases(here, args.acts, device))


if __name__ == "__main__":
    main()
