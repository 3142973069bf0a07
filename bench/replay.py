#!/usr/bin/env python3
"""What a replay costs with no model in the loop.

Measures, in one run:
  replay      wall time of one reticle_flow_replay tools/call of a 5-step flow (navigate to its
              start, 2 fills, 2 clicks each judged by a net+text predicate, 1 assert) in a device
              that is already open; the median of --n runs, beside the sum of its steps' own times
  verify      wall time of `reticle verify` (a subprocess, against the running daemon) on 8 such
              flows with --jobs 1 and with --jobs 4: loading the flows, opening the devices (one per
              job), the replays, closing the devices
  --teeth     the same `reticle verify --jobs 1` with --teeth beside it (issue 21): each flow replayed
              once more with its write answered 500, and how many flows have teeth

Target (issue 14): replay under 1 s.  Prints numbers; asserts nothing.  Starts and removes its own
daemon, app server, browsers and project directory.

    python bench/replay.py [--n 7]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import tornado.web

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _common import Daemon, RawMcp, close_all  # noqa: E402  (puts tests/ on sys.path)
import _harness  # noqa: E402

TARGET_REPLAY_MS = 1000.0
PAGE = """<!doctype html><title>replay bench</title>
<label>Item <input id="item"></label> <button id="add">Add</button>
<ul id="list"></ul>
<script>
document.getElementById('add').onclick = function () {
  var v = document.getElementById('item').value;
  fetch('/api/items', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({v: v})})
    .then(function (r) { return r.json(); })
    .then(function () { var li = document.createElement('li'); li.textContent = 'Added ' + v;
                        document.getElementById('list').appendChild(li); });
};
</script>"""


class Items(tornado.web.RequestHandler):
    def post(self):
        self.set_status(201)
        self.write({"ok": True})


def _add(value):
    return [{"action": "fill", "target": {"label": "Item"}, "args": {"value": value}},
            {"action": "click", "target": {"role": "button", "name": "Add"}, "timeout_ms": 4000, "until": {
                "kind": "allOf", "predicates": [{"kind": "net", "method": "POST", "urlContains": "/api/items",
                                                 "status": 201},
                                                {"kind": "text", "contains": "Added " + value}]}}]


STEPS = _add("milk") + _add("eggs") + [{"assert": {"kind": "text", "contains": "Added eggs"}}]


def verify_ms(port, state, project, jobs, *extra):
    env = _harness.daemon_env(state, RETICLE_PORT=str(port))
    start = time.perf_counter()
    run = subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), "reticle.py"), "verify",
                          "--jobs", str(jobs), "--json"] + list(extra), cwd=project, env=env, capture_output=True,
                         text=True, timeout=600)
    wall = (time.perf_counter() - start) * 1000.0
    out = json.loads(run.stdout)
    verdicts = [f["verified"] for f in out["flows"]]
    toothed = sum(1 for f in out["flows"] if f.get("teeth") and not f.get("toothless"))
    return wall, run.returncode, verdicts, toothed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=7, help="replays to take the median of")
    opts = parser.parse_args()
    daemon = app = client = None
    project = tempfile.TemporaryDirectory(prefix="reticle-bench-project-")
    try:
        daemon = Daemon("reticle-bench-replay-", env={"RETICLE_DEVICE_BUDGET": "50/600"})
        app = _harness.AppServer([(r"/api/items", Items),
                                  (r"/.*", _harness.TemplatePage, {"template": PAGE, "daemon": ""})])
        client = RawMcp(daemon.port)
        opened, open_ms = client.ok("reticle_open", {"url": app.url + "/"})
        flow = {"format": 1, "name": "bench", "startUrl": app.url + "/", "steps": STEPS}
        walls, steps_ms = [], []
        for _ in range(opts.n + 1):  # the first one warms up
            out, wall = client.ok("reticle_flow_replay", {"flow": flow, "sessionId": opened["sessionId"]})
            if out["verified"] != "yes":
                raise RuntimeError("the bench flow is not yes: %s" % json.dumps(out)[:800])
            walls.append(wall)
            steps_ms.append(sum(s["ms"] for s in out["steps"]))
        walls, steps_ms = walls[1:], steps_ms[1:]
        client.ok("reticle_close", {})
        median = statistics.median(walls)
        print("replay of a 5-step flow (device open; includes the start navigation), median of %d:" % opts.n)
        print("  reticle_flow_replay  %7.1f ms   (steps alone %.1f ms; min %.1f, max %.1f)   target < %d ms: %s"
              % (median, statistics.median(steps_ms), min(walls), max(walls), TARGET_REPLAY_MS,
                 "met" if median < TARGET_REPLAY_MS else "NOT met"))
        folder = os.path.join(project.name, ".reticle", "flows")
        os.makedirs(folder)
        for i in range(8):
            with open(os.path.join(folder, "flow-%d.json" % i), "w") as fh:
                json.dump(dict(flow, name="flow-%d" % i), fh)
        print("reticle verify on 8 flows (a running daemon; a subprocess; devices opened and closed):")
        for jobs in (1, 4):
            wall, code, verdicts, _ = verify_ms(daemon.port, daemon.state_dir, project.name, jobs)
            print("  --jobs %d  %8.1f ms   exit %d, %d yes of %d" % (jobs, wall, code, verdicts.count("yes"),
                                                                   len(verdicts)))
            if jobs == 1:
                plain = wall
        wall, code, verdicts, toothed = verify_ms(daemon.port, daemon.state_dir, project.name, 1, "--teeth")
        print("  --jobs 1 --teeth  %8.1f ms   exit %d, %d yes of %d, %d with teeth; %.2fx plain verify "
              "(one more replay per write: 1 per flow here)" % (wall, code, verdicts.count("yes"), len(verdicts),
                                                                toothed, wall / plain))
    finally:
        close_all(client, app, daemon)
        project.cleanup()


if __name__ == "__main__":
    main()
