#!/usr/bin/env python3
"""What a page's source maps cost the daemon: parse time, memory kept and lookup time of one map of
N segments (the daemon reads a map on a worker thread, keeps each segment as four machine ints, looks a
frame up by binary search), median of --runs runs, beside a linear scan of the same line measured in the
same run (the lookup before), and the cache's bound: how many segments the daemon keeps in all.

    python3 bench/source_maps.py [--runs 5] [--sizes 100000,500000,1000000]

A map over FRAME_MAP_SEGMENTS is refused (its frames stay generated): the last size shows that refusal
and what it cost to reach it.  Prints numbers; asserts nothing."""

import argparse
import os
import statistics
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import reticle  # noqa: E402


def _map(segments, per_line=2000):
    """A minified bundle's map: `segments` segments, per_line to a generated line, columns 8 apart."""
    line = ",".join(["AAAA"] + ["QACA"] * (per_line - 1))
    lines = [line] * (segments // per_line)
    return {"version": 3, "sources": ["src/app.ts"], "names": [], "mappings": ";".join(lines)}


def _linear(sm, line, col):
    """The old lookup: a scan of the line's segments."""
    cols = sm.cols[line - 1]
    hit = None
    for i, c in enumerate(cols):
        if c > col - 1:
            break
        hit = i
    return hit


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="100000,500000,1000000,1500000")
    args = parser.parse_args()
    print("FRAME_MAP_SEGMENTS %d, FRAME_SEGMENTS_KEPT %d (all maps kept together)"
          % (reticle.FRAME_MAP_SEGMENTS, reticle.FRAME_SEGMENTS_KEPT))
    for size in [int(x) for x in args.sizes.split(",")]:
        doc = _map(size)
        parse, kept, peak, lookup, scan, refused = [], [], [], [], [], False
        for _ in range(args.runs):
            t0 = time.perf_counter()
            try:
                reticle._SourceMap(doc, "http://127.0.0.1:5173/app.js.map")
            except ValueError:
                refused = True
            parse.append((time.perf_counter() - t0) * 1000)  # without tracemalloc, which slows it
            tracemalloc.start()
            try:
                sm = reticle._SourceMap(doc, "http://127.0.0.1:5173/app.js.map")
            except ValueError:
                sm = None
            current, high = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            kept.append(current / 1e6)
            peak.append(high / 1e6)
            if sm is None:
                continue
            t0 = time.perf_counter()
            for _ in range(200):
                sm.lookup(1, 15000)
            lookup.append((time.perf_counter() - t0) / 200 * 1e6)
            t0 = time.perf_counter()
            for _ in range(20):
                _linear(sm, 1, 15000)
            scan.append((time.perf_counter() - t0) / 20 * 1e6)
            del sm
        row = "%9d segments: parse %7.0f ms, kept %6.1f MB, peak %6.1f MB" % (
            size, statistics.median(parse), statistics.median(kept), statistics.median(peak))
        if refused:
            row += "  (refused: over the cap, frames stay generated)"
        else:
            row += ", lookup %.1f us (a linear scan of the line: %.1f us, %.0fx)" % (
                statistics.median(lookup), statistics.median(scan), statistics.median(scan) / statistics.median(lookup))
        print(row, flush=True)


if __name__ == "__main__":
    main()
