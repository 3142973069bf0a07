"""Server control.

Running the daemon: binding (loopback unless told otherwise, TLS when given), signals and an
orderly stop, and the client side that `reticle mcp` and the CLI use to reach a running daemon.
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import ipaddress
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from cryptography.hazmat.primitives import hashes as _c_hashes
import tornado.httpclient
import tornado.httpserver
import tornado.iostream
import tornado.netutil

from .app import make_app
from .calls import _CallContext, _PROGRESS, _Progress, _tool_result
from .constants import (BODY_TIMEOUT_S, DEFAULT_HOST, HEADER_TIMEOUT_S, LATEST_PROTOCOL, MAX_BODY_BYTES,
    MAX_HTTP_CONNECTIONS, MIN_TOKEN_CHARS, __version__, _emit, _log)
from .endpoints import CDP_ENDPOINT_ENV, _parse_endpoints
from .errors import ConfigError, RpcError, _StoreError, ToolError
from .hub import Hub
from .mcp import _McpDispatcher, _rpc_error
from .registry import _build_registry
from .util import _StateDir, _dumps, _env_int, _is_loopback_host, _loads, _pid_alive, _wall_iso


def _tls_context(state: _StateDir, certfile: Optional[str], keyfile: Optional[str]) -> Tuple[Any, str]:
    """An SSL context and the certificate's SHA-256 fingerprint."""
    import ssl
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    if not certfile:
        tls_dir = os.path.join(state.ensure(), "tls")
        os.makedirs(tls_dir, mode=0o700, exist_ok=True)
        certfile = os.path.join(tls_dir, "cert.pem")
        keyfile = os.path.join(tls_dir, "key.pem")
        if not (os.path.exists(certfile) and os.path.exists(keyfile)):
            key = ec.generate_private_key(ec.SECP256R1())
            name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "reticle localhost")])
            now = datetime.datetime.now(datetime.timezone.utc)
            cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                    .public_key(key.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(now - datetime.timedelta(minutes=5))
                    .not_valid_after(now + datetime.timedelta(days=825))
                    .add_extension(x509.SubjectAlternativeName([
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("::1"))]), critical=False)
                    .sign(key, _c_hashes.SHA256()))
            fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
            with open(certfile, "wb") as fh:
                fh.write(cert.public_bytes(serialization.Encoding.PEM))
    elif not keyfile:
        raise ConfigError("--certfile needs --keyfile too")
    with open(certfile, "rb") as fh:
        cert = x509.load_pem_x509_certificate(fh.read())
    fingerprint = cert.fingerprint(_c_hashes.SHA256()).hex(":").upper()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certfile, keyfile)
    return ctx, fingerprint


def _port_owner_sentence(port: int, probe: dict) -> str:
    if probe.get("state") == "daemon":
        return ("port %d is held by a Reticle daemon (pid %s, version %s); use it, or run `reticle stop "
                "--port %d` first." % (port, probe.get("pid"), probe.get("version"), port))
    return ("port %d is held by another process that is not a Reticle daemon; stop it, or run Reticle on "
            "another port with --port or RETICLE_PORT." % port)


async def _probe_port(port: int, timeout: float = 1.0) -> dict:
    """{"state": "free" | "daemon" | "foreign", ...status} for 127.0.0.1:port."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        writer.close()
    except (OSError, asyncio.TimeoutError):
        return {"state": "free"}
    for scheme in ("http", "https"):
        try:
            resp = await _http("GET", port, "/status", timeout=timeout, scheme=scheme)
            data = json.loads(resp.body)
            if resp.code == 429 and isinstance(data, dict) and data.get("error") == "rate limited":
                # a Reticle daemon under load: wait as it says, once, then call it a busy daemon
                await asyncio.sleep(min(1.0, float(resp.headers.get("Retry-After", "1") or 1)))
                resp = await _http("GET", port, "/status", timeout=timeout, scheme=scheme)
                data = json.loads(resp.body)
                if resp.code == 429:
                    return {"state": "daemon", "scheme": scheme, "running": True, "busy": True}
            if isinstance(data, dict) and data.get("running") is True and "version" in data:
                data["state"] = "daemon"
                data["scheme"] = scheme
                return data
        except Exception:
            continue
    return {"state": "foreign"}


async def _http(method: str, port: int, path: str, body: Optional[bytes] = None,
                headers: Optional[dict] = None, timeout: float = 10.0,
                scheme: str = "http", streaming: Optional[Callable[[bytes], None]] = None
                ) -> tornado.httpclient.HTTPResponse:
    client = tornado.httpclient.AsyncHTTPClient(force_instance=True)
    try:
        return await client.fetch(
            "%s://127.0.0.1:%d%s" % (scheme, port, path), method=method, body=body, headers=headers,
            request_timeout=timeout, connect_timeout=min(timeout, 2.0), raise_error=False,
            validate_cert=False, allow_nonstandard_methods=True, streaming_callback=streaming)
    finally:
        client.close()


def _daemon_record(state: _StateDir, port: int) -> Optional[dict]:
    try:
        with open(state.file("daemon-%d.json" % port)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _connection_cap() -> int:
    """MAX_HTTP_CONNECTIONS, after raising the soft descriptor limit toward the hard one; never
    more than half the descriptors this process may open (browsers, CDP and logs need the rest)."""
    try:
        import resource  # POSIX only
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 65536
        if soft != resource.RLIM_INFINITY and soft < min(want, 65536):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, 65536), hard))
            soft = min(want, 65536)
    except (ImportError, ValueError, OSError):
        return MAX_HTTP_CONNECTIONS
    return MAX_HTTP_CONNECTIONS if soft == resource.RLIM_INFINITY else max(32, min(MAX_HTTP_CONNECTIONS, soft // 2))


class _CappedHTTPServer(tornado.httpserver.HTTPServer):
    """An HTTPServer that closes a new connection at once when _connection_cap() are open, so
    that a flood of connections cannot take every descriptor (and the accept loop with them)."""

    cap = MAX_HTTP_CONNECTIONS
    _refused = 0

    def handle_stream(self, stream: tornado.iostream.IOStream, address: Tuple) -> None:
        if len(getattr(self, "_connections", ())) >= self.cap:
            self._refused += 1
            if self._refused in (1, 10, 100) or self._refused % 1000 == 0:
                _emit(_log, logging.WARNING, "http_connection_refused", open=self.cap, refused=self._refused)
            stream.close()
            return
        super().handle_stream(stream, address)


def _refuse_open_bind(host: str) -> None:
    """ConfigError when `host` reaches beyond this machine and RETICLE_TOKEN is not long enough."""
    env_token = os.environ.get("RETICLE_TOKEN", "").strip()
    if not _is_loopback_host(host) and len(env_token) < MIN_TOKEN_CHARS:
        raise ConfigError("binding to %s reaches beyond this machine, so Reticle needs a pairing token of at "
                          "least %d characters%s: set RETICLE_TOKEN to a long random string (for example "
                          "`export RETICLE_TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(24))')`) "
                          "and start again." % (host, MIN_TOKEN_CHARS, " (RETICLE_TOKEN has %d)" % len(env_token)
                                                if env_token else ""))


async def _bind(hub: Hub, host: str, port: int) -> Optional[list]:
    """The listening sockets (127.0.0.1 by default with ::1 beside it when there is one), hub.port set
    to the bound port; None when the port is taken or refused, with a sentence naming its owner on
    stderr; ConfigError for any other reason it cannot listen."""
    try:
        sockets = tornado.netutil.bind_sockets(port, host)
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES) or getattr(exc, "winerror", None) == 10048:
            probe = await _probe_port(port)
            sentence = _port_owner_sentence(port, probe) if exc.errno == errno.EADDRINUSE else (
                "port %d on %s cannot be bound (%s)." % (port, host, exc.strerror))
            sys.stderr.write("reticle: %s\n" % sentence)
            _emit(_log, logging.ERROR, "reticle_daemon_start_failed", port=port, reason=sentence)
            return None
        raise ConfigError("cannot listen on %s:%d (%s)" % (host, port, exc.strerror or exc)) from exc
    hub.port = sockets[0].getsockname()[1]
    if host == DEFAULT_HOST and not os.environ.get("RETICLE_HOST"):
        try:
            sockets += tornado.netutil.bind_sockets(hub.port, "::1")
        except (OSError, ValueError):
            pass  # no IPv6 loopback here; 127.0.0.1 still serves
    return sockets


def _stop_on_signals(hub: Hub) -> None:
    """SIGINT and SIGTERM ask the hub to stop (from the loop; a plain handler where the loop cannot)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, hub.request_stop, "signal %s" % sig.name)
        except (NotImplementedError, RuntimeError, ValueError):
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(hub.request_stop, "signal"))


async def _shut_down(hub: Hub, server: "_CappedHTTPServer", record_name: str) -> None:
    """The planned stop, in order: streams told and devices closed (hub.shutdown), the listener
    stopped, connections closed (2 s at most), and the daemon record removed if it is still ours."""
    _emit(_log, logging.INFO, "reticle_daemon_stopping", reason=hub.stop_reason or "stop")
    await hub.shutdown(hub.stop_reason or "planned stop")
    server.stop()
    try:
        await asyncio.wait_for(server.close_all_connections(), 2.0)
    except asyncio.TimeoutError:
        pass
    try:
        current = _daemon_record(hub.state, hub.port)
        if current and current.get("pid") == os.getpid():
            os.unlink(hub.state.file(record_name))
    except OSError:
        pass
    _emit(_log, logging.INFO, "reticle_daemon_stopped", port=hub.port)


async def _serve(host: str, port: int, state_dir: Optional[str] = None, tls: bool = False,
                 certfile: Optional[str] = None, keyfile: Optional[str] = None,
                 ready: Optional[Callable[[Hub], None]] = None, watch_db: Optional[List[str]] = None,
                 cdp_endpoints: Optional[List[str]] = None) -> int:
    """Serve the daemon on host:port until it is asked to stop; return the exit code (1 when the port
    is taken, with a sentence naming its owner).  A dead daemon's devices are reaped beside serving.

    Beyond loopback it needs a long RETICLE_TOKEN (ConfigError otherwise).  Once listening it writes
    its daemon-<port>.json record and calls `ready(hub)`; a signal, POST /stop or `request_stop` then
    shuts down in order: streams told, devices closed, connections closed, its own record removed.
    The stores of `watch_db` (--watch-db) and RETICLE_WATCH_DB are watched from the start (_watch_stores);
    devices open in the browsers of `cdp_endpoints` (--cdp-endpoint) and RETICLE_CDP_ENDPOINT when any is named."""
    _refuse_open_bind(host)
    endpoints = _parse_endpoints(cdp_endpoints or [], os.environ.get(CDP_ENDPOINT_ENV, ""))
    hub = Hub(state_dir=state_dir, host=host, port=port, scheme="https" if tls or certfile else "http")
    hub.devices.endpoints = endpoints
    for ep in endpoints:
        sys.stderr.write("reticle: devices open in the browser at %s (%s): a browser context of their own each; "
                         "the browser is never closed\n" % (ep.shown, ep.by))
    hub.token()  # create the token file before anyone asks
    await _watch_stores(hub, watch_db or [])
    ssl_ctx = None
    if tls or certfile:
        ssl_ctx, fingerprint = _tls_context(hub.state, certfile, keyfile)
        _emit(_log, logging.INFO, "tls_enabled", sha256=fingerprint)
        sys.stderr.write("reticle: serving HTTPS/WSS; certificate SHA-256 fingerprint %s\n" % fingerprint)
    sockets = await _bind(hub, host, port)
    if sockets is None:
        return 1
    app = make_app(hub)
    server = _CappedHTTPServer(app, ssl_options=ssl_ctx, xheaders=False,
                                           max_body_size=MAX_BODY_BYTES + (1 << 20),
                                           body_timeout=BODY_TIMEOUT_S + 5,
                                           # Tornado applies this to the wait for request headers too:
                                           # a client that never finishes them is closed.
                                           idle_connection_timeout=HEADER_TIMEOUT_S)
    server.cap = _connection_cap()
    server.add_sockets(sockets)
    # a dead daemon's browsers are ended and their profiles removed beside serving, not before it: a loaded
    # machine may take seconds to kill a browser and remove its profile (only dead daemons' records are read)
    hub.spawn(asyncio.get_running_loop().run_in_executor(None, hub.devices.reap_orphans))
    stop = asyncio.Event()
    hub.stop_event = stop
    _stop_on_signals(hub)
    record = {"pid": os.getpid(), "port": hub.port, "version": __version__, "host": host,
              "scheme": hub.scheme, "startedAt": _wall_iso(hub.started_at)}
    record_name = "daemon-%d.json" % hub.port
    hub.state.write(record_name, _dumps(record).encode())
    _emit(_log, logging.INFO, "reticle_daemon_ready", port=hub.port, pid=os.getpid(), host=host,
          url=hub.public_origin(), version=__version__)
    if ready is not None:
        ready(hub)
    try:
        await stop.wait()
    finally:
        await _shut_down(hub, server, record_name)
    return 0


async def _watch_stores(hub: Hub, given: List[str]) -> None:
    """Watch the stores named on the command line and in RETICLE_WATCH_DB (URLs separated by whitespace).
    A URL Reticle cannot read as a store refuses the start (ConfigError); a store that cannot be watched
    now (down, refused, a driver missing) is said on stderr and in /status, and the daemon serves."""
    urls = [(u, "--watch-db") for u in given] + [
        (u, "RETICLE_WATCH_DB") for u in os.environ.get("RETICLE_WATCH_DB", "").split()]
    for url, by in urls:
        try:
            found = await hub.stores.watch(url, by)
        except _StoreError as exc:
            if exc.code == "store_invalid":
                raise ConfigError("%s: %s" % (by, exc.error)) from None
            sys.stderr.write("reticle: not watching a store (%s): %s; %s\n" % (by, exc.error, exc.recovery))
            continue
        sys.stderr.write("reticle: watching %s: %s\n" % (found["store"], found["how"]))


def _self_command() -> List[str]:
    """How to start this same reticle again as a child process."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if argv0.endswith(".pyz") and os.path.isfile(argv0):
        return [sys.executable, argv0]
    module_file = globals().get("__file__")
    if module_file and module_file.endswith(".py") and os.path.isfile(module_file):
        return [sys.executable, module_file]
    return [sys.executable, argv0]


class _DaemonLink:
    """The stdio proxy's line to the daemon: starts one when none answers."""

    def __init__(self, port: int, state: _StateDir) -> None:
        self.port = port
        self.state = state
        self.scheme = "http"
        self.session_id: Optional[str] = None
        self._ids = 0
        self._lock = asyncio.Lock()

    async def ensure(self) -> None:
        probe = await _probe_port(self.port)
        if probe["state"] == "daemon":
            self.scheme = probe.get("scheme", "http")
            return
        if probe["state"] == "foreign":
            raise ToolError(_port_owner_sentence(self.port, probe), "free the port or set RETICLE_PORT",
                            code="daemon_unreachable")
        await self._spawn_and_wait()

    async def _spawn_and_wait(self) -> None:
        """Start a detached `reticle serve` on this port and wait until a daemon answers there (ToolError
        naming its log when none does in time).  A lock file makes concurrent proxies start one daemon:
        the loser waits for the winner's, and a stale lock (dead holder, over 30 s old) is taken over."""
        self.state.ensure()
        lock = self.state.file("daemon-%d.lock" % self.port)
        owned = False
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            owned = True
        except FileExistsError:
            try:
                with open(lock) as fh:
                    holder = int(fh.read().strip() or "0")
            except (OSError, ValueError):
                holder = 0
            try:
                stale = not _pid_alive(holder) or time.time() - os.path.getmtime(lock) > 30
                if stale:
                    os.unlink(lock)
            except FileNotFoundError:
                stale = True  # its owner just finished: try again
            if stale:
                return await self._spawn_and_wait()
        try:
            if owned:  # a daemon another proxy started may have come up since this one's first probe
                probe = await _probe_port(self.port, timeout=0.5)
                if probe["state"] == "daemon":
                    self.scheme = probe.get("scheme", "http")
                    return
            if owned:
                log_path = self.state.file("daemon-%d.log" % self.port)
                fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                kwargs: Dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": fd, "stderr": fd, "close_fds": True}
                if os.name == "posix":
                    kwargs["start_new_session"] = True
                else:
                    kwargs["creationflags"] = getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(
                        subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
                cmd = _self_command() + ["serve", "--port", str(self.port)]
                try:
                    proc = subprocess.Popen(cmd, **kwargs)
                finally:
                    os.close(fd)
                _emit(_log, logging.INFO, "reticle_mcp_daemon_started", pid=proc.pid, port=self.port)
            deadline = time.monotonic() + _env_int("RETICLE_DAEMON_READY_TIMEOUT_MS", 10000) / 1000.0
            while time.monotonic() < deadline:
                probe = await _probe_port(self.port, timeout=0.5)
                if probe["state"] == "daemon":
                    self.scheme = probe.get("scheme", "http")
                    return
                if owned and proc.poll() is not None:
                    break
                await asyncio.sleep(0.1)
            raise ToolError("no Reticle daemon came up on port %d; see %s" % (
                self.port, self.state.file("daemon-%d.log" % self.port)),
                "run `reticle serve --port %d` in a terminal to see why" % self.port, code="daemon_unreachable")
        finally:
            if owned:
                try:
                    os.unlink(lock)
                except OSError:
                    pass

    async def _post(self, message: dict, relay: Optional[_Progress] = None) -> Tuple[Optional[dict], Optional[str]]:
        """POST one message; with `relay`, ask for the SSE answer and pass each progress notification
        the daemon sends on to this proxy's client (under the client's own token)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        reader = None
        if relay is not None:
            headers["Accept"] = "application/json, text/event-stream"
            reader = _SseReader(relay)
        resp = await _http("POST", self.port, "/mcp", _dumps(message).encode(), headers, timeout=120,
                           scheme=self.scheme, streaming=reader.feed if reader is not None else None)
        body = resp.body if reader is None else b"".join(reader.raw)
        if reader is not None and reader.sends:  # every relayed progress goes out before the answer does
            await asyncio.gather(*list(reader.sends), return_exceptions=True)
        if resp.code == 599 and resp.error is not None:
            raise resp.error
        if resp.code == 404 and b"MCP_SESSION_UNKNOWN" in (body or b""):
            self.session_id = None
            return None, "session"
        if resp.code != 200:
            raise ToolError("the daemon answered HTTP %d: %s" % (resp.code, (body or b"")[:300].decode(
                "utf-8", "replace")), "retry the call", code="daemon_unreachable")
        if reader is not None and "text/event-stream" in resp.headers.get("Content-Type", ""):
            if reader.reply is None:
                raise ToolError("the daemon's answer stream ended without a reply", "retry the call",
                                code="daemon_unreachable")
            return reader.reply, resp.headers.get("Mcp-Session-Id")
        return json.loads(body), resp.headers.get("Mcp-Session-Id")

    async def _cancel(self, mid: str) -> None:
        """Tell the daemon this proxy's client cancelled request `mid` (its wait stops there too)."""
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": mid}}
        try:
            await self._post(note)
        except Exception as exc:  # the daemon is gone: nothing runs there to stop
            _emit(_log, logging.DEBUG, "mcp_cancel_not_sent", error=repr(exc))

    async def _initialize(self) -> None:
        self._ids += 1
        reply, sid = await self._post({"jsonrpc": "2.0", "id": "proxy-init-%d" % self._ids, "method": "initialize",
                                       "params": {"protocolVersion": LATEST_PROTOCOL, "capabilities": {},
                                                  "clientInfo": {"name": "reticle-mcp-proxy", "version": __version__}}})
        self.session_id = sid

    async def request(self, method: str, params: dict, relay: Optional[_Progress] = None) -> Any:
        """One request to the daemon (started and initialized first when needed) -> its result.
        `relay` forwards the call's progress; a cancelled call is cancelled at the daemon too."""
        async with self._lock:
            if self.session_id is None:
                # Know who holds the port before posting: a stranger that accepts
                # and never answers must be named at once, not waited on.
                await self.ensure()
                await self._initialize()
        self._ids += 1
        mid = "proxy-%d" % self._ids
        message: Dict[str, Any] = {"jsonrpc": "2.0", "id": mid, "method": method, "params": params}
        if relay is not None:
            message["params"] = dict(params, _meta={"progressToken": mid})
        try:
            try:
                reply, status = await self._post(message, relay)
            except asyncio.CancelledError:
                asyncio.ensure_future(self._cancel(mid))
                raise
            except ConnectionRefusedError:
                # Refused: nothing was sent, so the daemon died since the last call.
                # Start one (DESIGN section 2) and send this call once more.
                self.session_id = None
                async with self._lock:
                    await self.ensure()
                    await self._initialize()
                reply, status = await self._post(message, relay)
            if reply is None:  # the daemon forgot our session (a new machine key?): start over once
                await self._initialize()
                reply, _ = await self._post(message, relay)
        except (tornado.iostream.StreamClosedError, tornado.httpclient.HTTPClientError, OSError) as exc:
            self.session_id = None
            raise ToolError("the daemon connection failed (%s: %s) before this call was answered; it may not "
                            "have completed" % (exc.__class__.__name__, exc),
                            "retry the call; a new daemon starts if needed", code="daemon_unreachable") from exc
        if reply is None:
            raise ToolError("the daemon does not recognise this proxy's session even after a new initialize",
                            "restart `reticle mcp`", code="daemon_unreachable")
        if "error" in reply:
            err = reply["error"]
            raise RpcError(err.get("code", -32603), err.get("message", "error"), err.get("data"))
        return reply.get("result")

    async def call_tool(self, name: str, args: dict, ctx: _CallContext) -> dict:
        try:
            return await self.request("tools/call", {"name": name, "arguments": args}, _PROGRESS.get())
        except ToolError as exc:
            return _tool_result(exc.payload(), True)
        except ConfigError as exc:
            return _tool_result({"error": str(exc), "recovery": "fix the setting and retry"}, True)

    async def read_live(self, uri: str) -> Any:
        probe = await _probe_port(self.port, timeout=0.5)
        if probe["state"] != "daemon":
            return {"sessions": [], "why": "no Reticle daemon runs on port %d yet; the first tools/call "
                                            "starts one" % self.port}
        self.scheme = probe.get("scheme", "http")
        try:
            result = await self.request("resources/read", {"uri": uri})
            return json.loads(result["contents"][0]["text"])
        except (ToolError, ConfigError) as exc:
            return {"sessions": [], "why": "the daemon on port %d could not be read: %s" % (
                self.port, exc.error if isinstance(exc, ToolError) else exc)}


class _SseReader:
    """The stdio proxy's reader of a streamed daemon answer: progress notifications are relayed as they
    arrive, the reply (the message with an id) is kept; `raw` keeps every byte for a non-SSE answer."""

    def __init__(self, relay: _Progress) -> None:
        self.relay = relay
        self.raw: List[bytes] = []
        self.reply: Optional[dict] = None
        self._buffer = b""
        self.sends: set = set()

    def feed(self, chunk: bytes) -> None:
        self.raw.append(chunk)
        self._buffer += chunk
        while b"\n\n" in self._buffer:
            frame, self._buffer = self._buffer.split(b"\n\n", 1)
            data = b"\n".join(line[5:].lstrip() for line in frame.split(b"\n") if line.startswith(b"data:"))
            if not data:
                continue
            try:
                message = json.loads(data)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("method") == "notifications/progress":
                params = message.get("params")
                note = params.get("message") if isinstance(params, dict) else None
                send = asyncio.ensure_future(self.relay.send(str(note or "")))
                self.sends.add(send)
                send.add_done_callback(self.sends.discard)
            elif "id" in message:
                self.reply = message


async def _mcp_stdio(port: int, state: _StateDir) -> int:
    """`reticle mcp`: newline-delimited JSON-RPC on stdin/stdout."""
    link = _DaemonLink(port, state)
    dispatcher = _McpDispatcher(_build_registry(), link.call_tool, link.read_live,
                                lambda: "http://127.0.0.1:%d" % port, tick=False)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def pump() -> None:
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            loop.call_soon_threadsafe(queue.put_nowait, line)
            if not line:
                return

    threading.Thread(target=pump, name="reticle-stdin", daemon=True).start()
    out = sys.stdout.buffer
    write_lock = asyncio.Lock()
    inflight: set = set()

    async def write(message: dict) -> None:
        async with write_lock:
            out.write(_dumps(message).encode("utf-8") + b"\n")
            out.flush()

    async def answer(line: bytes) -> None:
        try:
            payload = _loads(line)
        except ValueError as exc:
            reply: Any = _rpc_error(None, -32700, "Parse error: %s" % exc)
        else:
            reply, _ = await dispatcher.handle_payload(payload, _CallContext("stdio", "stdio", notify=write))
        if reply is not None:
            await write(reply)

    while True:
        line = await queue.get()
        if not line:
            break
        if not line.strip():
            continue
        task = asyncio.ensure_future(answer(line))
        inflight.add(task)
        task.add_done_callback(inflight.discard)
    if inflight:
        await asyncio.wait(inflight, timeout=5.0)
    return 0
