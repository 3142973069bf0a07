#!/usr/bin/env python3
"""What sharding `reticle verify` costs and saves on one machine (issue 31).

Measures, in one run:
  shards      16 flows (replay.py's 5-step flow under 16 names) run as 1, 2 and 4 shards side by
              side: N `reticle verify --shard i/N --json` processes started at once, each with a
              daemon and a device of its own (as N CI jobs would), against one app server; the
              wall time from the first start until the last shard exits, the median of --n runs
  merge       `reticle report merge` of those N results files into one JUnit file and one HTML
              report: the wall time of the process (interpreter start and import included), and
              the in-process cost of _merge_shards + _junit_xml + _html_report alone

On this shared 2-core machine the shards compete for the same cores, so the figures say what the
split costs here, not what N CI machines would gain.  Prints medians; asserts nothing beyond every
flow being yes and every merge equal to the unsharded verdicts.  Starts and removes its own
daemons, app server, browsers and project directory.

    python bench/shards.py [--n 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _common import close_all  # noqa: E402  (puts tests/ on sys.path)
import _harness  # noqa: E402
from replay import PAGE, STEPS, Items  # noqa: E402

RETICLE_PY = os.path.join(os.path.dirname(HERE), "reticle.py")
sys.path.insert(0, os.path.dirname(HERE))
import reticle  # noqa: E402

FLOWS = 16


def run_shards(project, results, n):
    """N shard processes at once; -> (wall ms until the last exits, their exit codes)."""
    procs = []
    start = time.perf_counter()
    for i in range(1, n + 1):
        env = _harness.daemon_env(os.path.join(results, "state-%d" % i), RETICLE_PORT=str(_harness.free_port()),
                                  RETICLE_CHECK_OUTPUT=None)
        out = open(os.path.join(results, "shard-%d.json" % i), "w")
        args = [sys.executable, RETICLE_PY, "verify", "--json"] + (["--shard", "%d/%d" % (i, n)] if n > 1 else [])
        procs.append((subprocess.Popen(args, cwd=project, env=env, stdout=out, stderr=subprocess.DEVNULL), out))
    codes = []
    for proc, out in procs:
        codes.append(proc.wait(900))
        out.close()
    return (time.perf_counter() - start) * 1000.0, codes


def merge(results, n):
    """-> (merge process wall ms, in-process ms, merged JSON)."""
    start = time.perf_counter()
    run = subprocess.run([sys.executable, RETICLE_PY, "report", "merge", "--json",
                          "--junit", os.path.join(results, "junit.xml"), "--report", os.path.join(results, "r.html")]
                         + [os.path.join(results, "shard-%d.json" % i) for i in range(1, n + 1)],
                         capture_output=True, text=True, timeout=120)
    wall = (time.perf_counter() - start) * 1000.0
    docs = []
    for i in range(1, n + 1):
        with open(os.path.join(results, "shard-%d.json" % i)) as fh:
            docs.append(("shard-%d.json" % i, json.load(fh)))
    start = time.perf_counter()
    merged = reticle._merge_shards(docs)
    reticle._junit_xml(merged)
    reticle._html_report(merged)
    inside = (time.perf_counter() - start) * 1000.0
    return wall, inside, json.loads(run.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3, help="runs of each shard count to take the median of")
    opts = parser.parse_args()
    app = None
    project = tempfile.TemporaryDirectory(prefix="reticle-bench-shards-")
    try:
        app = _harness.AppServer([(r"/api/items", Items),
                                  (r"/.*", _harness.TemplatePage, {"template": PAGE, "daemon": ""})])
        folder = os.path.join(project.name, ".reticle", "flows")
        os.makedirs(folder)
        for i in range(FLOWS):
            with open(os.path.join(folder, "flow-%02d.json" % i), "w") as fh:
                json.dump({"format": 1, "name": "flow-%02d" % i, "startUrl": app.url + "/", "steps": STEPS}, fh)
        print("%d flows of 5 steps, N shards side by side on this machine (each its own daemon and device), "
              "median of %d:" % (FLOWS, opts.n))
        for n in (1, 2, 4):
            walls, merges, insides = [], [], []
            for k in range(opts.n):
                results = tempfile.mkdtemp(prefix="shards-%d-%d-" % (n, k), dir=project.name)
                wall, codes = run_shards(project.name, results, n)
                mwall, inside, merged = merge(results, n)
                verdicts = [f["verified"] for f in merged["flows"]]
                if codes != [0] * n or verdicts != ["yes"] * FLOWS or merged["exitCode"] != 0:
                    raise RuntimeError("shards %d: exit codes %s, merged verdicts %s" % (n, codes, verdicts))
                walls.append(wall)
                merges.append(mwall)
                insides.append(inside)
            print("  %d shard(s)  %8.1f ms wall (min %.1f, max %.1f)   merge %6.1f ms as a process, %5.1f ms "
                  "in-process" % (n, statistics.median(walls), min(walls), max(walls), statistics.median(merges),
                                  statistics.median(insides)))
    finally:
        close_all(app)
        project.cleanup()


if __name__ == "__main__":
    main()
