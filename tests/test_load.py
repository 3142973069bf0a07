"""bench/load.py, short: MCP clients over both HTTP transports against a daemon whose tabs
stream events every 10 ms, from a clean checkout, with zero errors."""

import json
import os
import subprocess
import sys

import pytest

import _harness

LOAD = os.path.join(_harness.ROOT, "bench", "load.py")

# Load runs are slow by nature: they run with the browser tests, out of the fast loop.
pytestmark = pytest.mark.browser


@pytest.mark.skipif(_harness.chromium_path() is None, reason="Chromium is not installed")
def test_a_short_load_run_has_zero_errors():
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETICLE_")}
    proc = subprocess.run([sys.executable, LOAD, "--clients", "8", "--tabs", "2", "--seconds", "3", "--idle", "1",
                           "--json"], capture_output=True, timeout=180, env=env)
    out = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, out + proc.stderr.decode("utf-8", "replace")[-3000:]
    result = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    assert result["errors"] == 0 and result["errors_by_kind"] == {}
    assert result["by_transport"]["sse"]["calls"] > 0 and result["by_transport"]["streamable"]["calls"] > 0
    assert result["events"] > 0  # the tabs were streaming while the clients called
    for key in ("throughput", "p50_ms", "p99_ms", "rss_start_mb", "rss_peak_mb", "rss_after_idle_mb"):
        assert result[key] > 0, key


def test_every_flood_leaves_another_client_served():
    """Issue 19 #8 and the fairness caps: bench/load.py --floods, with the daemon's default limits.  Under
    every flood another client's calls keep being answered and a real tab still connects; the latency
    ratios (target: p50 within 3x the baseline) are the bench's to print, not a timed assertion here."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETICLE_")}
    proc = subprocess.run([sys.executable, LOAD, "--floods", "--seconds", "3", "--json"], capture_output=True,
                          timeout=300, env=env)
    out = proc.stdout.decode("utf-8", "replace")
    result = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    floods = {r["flood"]: r for r in result["floods"]}
    assert len(floods) == 6 and all(r["calls"] > 20 for r in floods.values()), out
    assert not any("could not connect" in r.get("note", "") for r in floods.values()), out
    assert all(r.get("ratio_p50") is not None for name, r in floods.items() if name != "none (baseline)"), out
