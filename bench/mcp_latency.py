#!/usr/bin/env python3
"""MCP round-trip latency of the daemon over HTTP+SSE and Streamable HTTP, and its idle RSS.

Starts ``python -m reticle serve`` (tests/_harness.Daemon) on a free port with a temporary state dir and
RETICLE_RATE_LIMIT raised (so the bench measures the daemon, not the limiter),
reads VmRSS from /proc/<pid>/status right after start, then times
``tools/list`` and ``tools/call reticle_sessions``:

* Streamable HTTP: POST /mcp on one keep-alive ``http.client`` connection, the
  JSON reply read from the response.
* HTTP+SSE: POST /mcp/message on one keep-alive connection (202), the reply read
  off the held-open GET /mcp/sse stream; the time is from sending the POST to the
  reply, matched by id, read and parsed off the stream.

Both clients are bench/_common's (RawMcp, SseMcp), the ones bench/load.py drives.

Raw HTTP measures the daemon; a second table goes through the ``mcp`` SDK's
clients (when installed) to show what an agent sees.  Prints medians and p99s
beside the targets (median < 2 ms, idle RSS < 40 MB); asserts nothing.

    python bench/mcp_latency.py [-n 500] [--warmup 100] [--runs 3] [--no-sdk]
"""

import argparse
import asyncio
import math
import os
import platform
import statistics
import subprocess
import sys
import time

from _common import Daemon, RawMcp, SseMcp, proc_mem_mb  # noqa: E402  (puts tests/ on sys.path)
import _harness  # noqa: E402

TARGET_MEDIAN_MS = 2.0
TARGET_RSS_MB = 40.0
CALLS = (
    ("tools/list", {}),
    ("tools/call reticle_sessions", {"name": "reticle_sessions", "arguments": {}}),
)


def start_daemon():
    """-> (the daemon, seconds from its start to its first /status answer)."""
    # Run it the way an installed `reticle serve` runs: imported as a module from
    # cached bytecode.  (`python reticle.py` compiles the whole file at every
    # start, and some machines set PYTHONDONTWRITEBYTECODE; both inflate RSS.)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "import reticle"], cwd=_harness.ROOT, env=env, check=True)
    t0 = time.perf_counter()
    daemon = Daemon("reticle-bench-", command=[sys.executable, "-m", "reticle"], cwd=_harness.ROOT, timeout=15,
                    env={"RETICLE_RATE_LIMIT": "1000000,2000000", "PYTHONDONTWRITEBYTECODE": None})
    return daemon, time.perf_counter() - t0


def summary(samples_ms):
    ordered = sorted(samples_ms)
    p99 = ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]
    return statistics.median(ordered), p99


class _Timed:
    """call(label, params) -> seconds for one JSON-RPC request; the label's first word is the method."""

    def call(self, method, params):
        t0 = time.perf_counter()
        self.rpc(method.split()[0], params)
        return time.perf_counter() - t0


class StreamableHttp(_Timed, RawMcp):
    name = "streamable-http"


class HttpSse(_Timed, SseMcp):
    name = "http+sse"


def bench_raw(port, n, warmup, runs):
    rows = []
    for cls in (HttpSse, StreamableHttp):
        client = cls(port)
        try:
            for label, params in CALLS:
                for _ in range(warmup):
                    client.call(label, params)
                for run in range(1, runs + 1):
                    samples = [client.call(label, params) * 1000.0 for _ in range(n)]
                    rows.append((client.name, label, run) + summary(samples))
        finally:
            client.close()
    return rows


def bench_sdk(port, n, warmup):
    try:
        import mcp
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client
    except ImportError:
        return None

    async def measure(name, read, write, rows):
        async with mcp.ClientSession(read, write) as session:
            await session.initialize()
            for label, call in (("tools/list", lambda: session.list_tools()),
                                ("tools/call reticle_sessions",
                                 lambda: session.call_tool("reticle_sessions", {}))):
                for _ in range(warmup):
                    await call()
                samples = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    await call()
                    samples.append((time.perf_counter() - t0) * 1000.0)
                rows.append(("sdk " + name, label, 1) + summary(samples))

    async def main():
        rows = []
        async with sse_client("http://127.0.0.1:%d/mcp/sse" % port) as (read, write):
            await measure("http+sse", read, write, rows)
        async with streamable_http_client("http://127.0.0.1:%d/mcp" % port) as streams:
            await measure("streamable-http", streams[0], streams[1], rows)
        return rows

    return asyncio.run(main())


def print_rows(title, rows):
    print()
    print(title)
    print("  %-22s %-29s %4s %10s %9s   %s" % ("transport", "call", "run", "median ms", "p99 ms", "target"))
    for transport, label, run, median, p99 in rows:
        verdict = "ok" if median < TARGET_MEDIAN_MS else "OVER"
        print("  %-22s %-29s %4d %10.3f %9.3f   median < %g ms: %s"
              % (transport, label, run, median, p99, TARGET_MEDIAN_MS, verdict))


_DEPS_ONLY = ("import sys, asyncio, tornado.web, tornado.websocket, tornado.httpserver, tornado.httpclient, "
              "jsonschema, cryptography.hazmat.primitives.hmac; sys.stdout.write('ready\\n'); sys.stdout.flush(); "
              "sys.stdin.read()")


def baseline_rss_mb(code):
    """RSS of a plain interpreter running `code` (which prints ready, then waits on stdin)."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        proc.stdout.readline()
        return proc_mem_mb(proc.pid)[0]
    finally:
        proc.stdin.close()
        proc.wait(5)
        proc.stdout.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=500, help="timed calls per run (default 500)")
    parser.add_argument("--warmup", type=int, default=100, help="untimed calls first (default 100)")
    parser.add_argument("--runs", type=int, default=3, help="runs per transport and call (default 3)")
    parser.add_argument("--no-sdk", action="store_true", help="skip the mcp SDK table")
    args = parser.parse_args(argv)

    daemon, startup_s = start_daemon()
    proc, port = daemon.proc, daemon.port
    try:
        rss_idle = proc_mem_mb(proc.pid)[0]
        print("reticle daemon pid %d on port %d; CPython %s on %s, %d CPUs"
              % (proc.pid, port, platform.python_version(), platform.machine(), os.cpu_count() or 0))
        print("start to first /status: %.0f ms" % (startup_s * 1000.0))
        print("idle RSS right after start: %.1f MB   (target < %g MB: %s)"
              % (rss_idle, TARGET_RSS_MB, "ok" if rss_idle < TARGET_RSS_MB else "OVER"))
        bare = baseline_rss_mb("import sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()")
        deps = baseline_rss_mb(_DEPS_ONLY)
        print("baseline, same run: bare CPython %.1f MB; CPython importing tornado+jsonschema+cryptography "
              "and nothing else %.1f MB; daemon / deps-only = %.2f" % (bare, deps, rss_idle / deps))
        rows = bench_raw(port, args.n, args.warmup, args.runs)
        print_rows("raw HTTP (http.client keep-alive; the SSE reply read by a thread), N=%d after %d warmup"
                   % (args.n, args.warmup), rows)
        if not args.no_sdk:
            sdk_rows = bench_sdk(port, min(args.n, 200), min(args.warmup, 20))
            if sdk_rows is None:
                print("\n(mcp SDK not installed: no SDK table)")
            else:
                print_rows("through the mcp SDK (client overhead included), N=%d" % min(args.n, 200), sdk_rows)
        print()
        print("RSS after the bench: %.1f MB" % proc_mem_mb(proc.pid)[0])
    finally:
        daemon.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
