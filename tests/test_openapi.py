"""schemathesis, with every one of its checks, against /openapi.json of a real daemon.

The document must describe the daemon well enough that schema-valid requests
are accepted, schema-violating ones refused, every status, content type, header
and body the daemon answers is documented, and every undocumented method is a
405 with Allow.  The run is bounded (a fixed seed; the coverage phase's boundary
cases for every operation, then MAX_EXAMPLES random ones per operation) to take
seconds: 30 random examples cost half of what 60 did, and the boundary cases,
which find the documentation's gaps, do not depend on the number.

Two operations are not run: GET /reticle is a WebSocket upgrade and GET
/mcp/sse a stream that never ends, and schemathesis speaks neither (it waits
for a complete body).  test_bridge.py and test_http.py::HttpSseTransportTest
cover both.  DELETE /mcp is documented to answer 405, always (the seed), which
the config below tells schemathesis's positive-data check."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("schemathesis")

MAX_EXAMPLES = 30
SKIPPED = ("bridge", "mcpSse")
CONFIG = """\
[[operations]]
include-operation-id = "mcpDelete"
checks.positive_data_acceptance.expected-statuses = ["405"]
"""
RUN = "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())"


def test_schemathesis_passes_every_check_on_every_operation(daemon, tmp_path):
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    cmd = [sys.executable, "-c", RUN, "--config-file", str(config), "run", daemon.url + "/openapi.json",
           "--checks", "all", "--max-examples", str(MAX_EXAMPLES), "--seed", "13", "--request-timeout", "10",
           "--generation-database", "none", "--no-color"]
    for op_id in SKIPPED:
        cmd += ["--exclude-operation-id", op_id]
    env = dict(os.environ, NO_COLOR="1", COLUMNS="120")
    proc = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, timeout=240)
    out = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, out[-6000:]
    assert "Tested: 13" in out, out[-3000:]  # POST /server-records 10, its GET (the proof) 11, /v1/traces and /v1/logs 13
    daemon.stop()
    errors = [line for line in daemon.log().splitlines() if '"level":"error"' in line or "Traceback" in line]
    assert errors == [], errors[:5]
