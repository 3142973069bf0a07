"""What the browser benches share: a raw MCP client over one keep-alive connection, a reticle
daemon in a temporary directory of its own, and headless Chromium with one or more tabs.

The daemon and the browser are the tests' own (tests/_harness.py); importing this module puts
tests/ on sys.path, so that a bench can `import _harness` after it.  The benches run as
``python bench/x.py`` from the repo root, where bench/ is already sys.path[0].
"""

import http.client
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import _harness  # noqa: E402


class RpcFailed(RuntimeError):
    """A JSON-RPC error reply, with its code."""

    def __init__(self, method, error):
        error = error if isinstance(error, dict) else {"message": str(error)}
        super().__init__("%s failed: %s %s" % (method, error.get("code"), error.get("message")))
        self.code = error.get("code")


class RawMcp:
    """POST /mcp over one keep-alive http.client connection: initialize, then every call carries
    the Mcp-Session-Id the daemon handed out."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.session = None
        self.next_id = 0
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "bench", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, body):
        """-> (parsed reply or None, raw body bytes)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        self.conn.request("POST", "/mcp", json.dumps(body), headers)
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.getheader("Mcp-Session-Id"):
            self.session = resp.getheader("Mcp-Session-Id")
        if resp.status >= 300:
            raise RuntimeError("POST /mcp answered %d: %s" % (resp.status, data[:300]))
        return (json.loads(data) if data else None), data

    def request(self, method, params):
        """One JSON-RPC request.  -> (its result, the raw response body); raises on an error reply."""
        self.next_id += 1
        reply, raw = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if "error" in reply:
            raise RpcFailed(method, reply["error"])
        return reply["result"], raw

    def rpc(self, method, params):
        """-> the result of one JSON-RPC request."""
        return self.request(method, params)[0]

    def call(self, name, args):
        """tools/call.  -> (structuredContent, is_error, wall ms of the request)."""
        start = time.perf_counter()
        result = self.rpc("tools/call", {"name": name, "arguments": args})
        wall = (time.perf_counter() - start) * 1000.0
        return result.get("structuredContent"), bool(result.get("isError")), wall

    def ok(self, name, args):
        """tools/call that must succeed.  -> (structuredContent, wall ms); raises if isError."""
        content, is_error, wall = self.call(name, args)
        if is_error:
            raise RuntimeError("%s failed: %s" % (name, content))
        return content, wall

    def close(self):
        self.conn.close()


class SseMcp:
    """HTTP+SSE: GET /mcp/sse held open on one connection, POSTs to the endpoint it announces on
    another; one request at a time, so the reply is the next message frame on the stream."""

    def __init__(self, port, name="bench"):
        self.stream = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.stream.request("GET", "/mcp/sse", headers={"Accept": "text/event-stream"})
        self.events = self.stream.getresponse()
        if self.events.status != 200:
            raise RuntimeError("GET /mcp/sse answered %d" % self.events.status)
        event, data = self._frame()
        if event != "endpoint":
            raise RuntimeError("the first frame is %r, not the endpoint" % event)
        self.endpoint = data
        self.post_conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.next_id = 0
        self.rpc("initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                "clientInfo": {"name": name, "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _frame(self):
        event, data = None, None
        while True:
            line = self.events.readline()
            if not line:
                raise EOFError("the SSE stream closed")
            line = line.decode("utf-8").rstrip("\r\n")
            if not line:
                if data is not None or event is not None:
                    return event or "message", data
                continue
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()

    def post(self, body):
        self.post_conn.request("POST", self.endpoint, json.dumps(body), {"Content-Type": "application/json"})
        resp = self.post_conn.getresponse()
        text = resp.read()
        if resp.status != 202:
            raise RuntimeError("POST /mcp/message answered %d: %s" % (resp.status, text[:200]))

    def rpc(self, method, params):
        """-> the result of one JSON-RPC request, read off the stream; raises RpcFailed on an error."""
        self.next_id += 1
        self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            event, data = self._frame()
            if event == "message":
                reply = json.loads(data)
                if reply.get("id") == self.next_id:
                    break
        if "error" in reply:
            raise RpcFailed(method, reply["error"])
        return reply["result"]

    def close(self):
        self.post_conn.close()
        self.stream.close()


class Daemon(_harness.Daemon):
    """`python reticle.py serve` (tests/_harness.Daemon) in a temporary directory of its own,
    removed at close."""

    def __init__(self, prefix, **options):
        """`options` are tests/_harness.Daemon's: env, args, command, cwd, timeout ...  A bench daemon
        does not check its answers against their output schemas, as the tests' daemons do."""
        options["env"] = dict({"RETICLE_CHECK_OUTPUT": None}, **(options.get("env") or {}))
        self.tmp = tempfile.TemporaryDirectory(prefix=prefix)
        try:
            super().__init__(os.path.join(self.tmp.name, "state"), **options)
        except BaseException:
            self.tmp.cleanup()
            raise

    def close(self):
        try:
            super().close()
        finally:
            self.tmp.cleanup()


class Chromium(_harness.Browser):
    """Headless Chromium with a fresh profile (tests/_harness.Browser) on urls[0]; any further
    urls are opened as tabs through the DevTools HTTP endpoint.  close() ends the whole process
    group, then removes the profile once more after a pause: Chromium's helpers can write into it
    after the browser process has gone."""

    def __init__(self, urls, extra_args=()):
        if isinstance(urls, str):
            urls = [urls]
        super().__init__(urls[0], extra_args)
        try:
            if len(urls) > 1:
                self._open_tabs(urls[1:])
        except BaseException:
            self.close()
            raise

    def _open_tabs(self, urls):
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        _harness.wait_until(lambda: os.path.exists(port_file) and open(port_file).read().strip(),
                            20, 0.05, "Chromium's DevTools port")
        port = int(open(port_file).read().split()[0])
        for url in urls:
            req = urllib.request.Request("http://127.0.0.1:%d/json/new?%s" % (port, urllib.parse.quote(url, safe="")),
                                         method="PUT")
            urllib.request.urlopen(req, timeout=10).read()

    def close(self):
        super().close()
        time.sleep(0.5)
        shutil.rmtree(self.profile, ignore_errors=True)


def proc_mem_mb(pid):
    """(VmRSS, VmHWM) of a process, in MB."""
    out = {}
    with open("/proc/%d/status" % pid) as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0]) / 1024.0
    return out["VmRSS"], out["VmHWM"]


def close_all(*things):
    """Close each of `things` that is not None, in the order given (the last opened first), every
    one even if an earlier close raised; the first error is raised after."""
    error = None
    for thing in things:
        if thing is None:
            continue
        try:
            thing.close()
        except BaseException as exc:
            if error is None:
                error = exc
    if error is not None:
        raise error
