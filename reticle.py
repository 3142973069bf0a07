#!/usr/bin/env python3
# MIT License
#
# Copyright (c) 2026 The Reticle for Python authors
#
# Permission is hereby granted, free of charge, to any person obtaining a copy
# of this software and associated documentation files (the "Software"), to deal
# in the Software without restriction, including without limitation the rights
# to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
# copies of the Software, and to permit persons to whom the Software is
# furnished to do so, subject to the following conditions:
#
# The above copyright notice and this permission notice shall be included in
# all copies or substantial portions of the Software.
#
# THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
# IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
# FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
# AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
# LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
# OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
# SOFTWARE.
"""Reticle: a verification layer that lets an AI coding agent prove its change
works in the real, running web app.

An in-page SDK (embedded at the end of this file, served at ``/reticle.js``)
reads program truth -- network, console, errors, routes, DOM, storage, app
state, custom signals -- and streams it over a localhost WebSocket to this
daemon.  The agent talks MCP to the daemon (stdio, HTTP+SSE or Streamable
HTTP), drives the app and asks for a verdict: ``verified: yes | no | unknown``.
``unknown`` is never a pass.

Run it as any of::

    reticle serve                  # installed console script
    python -m reticle serve        # the module
    python reticle.pyz serve       # the single-file zipapp

Vendoring: copy this one file into your package (``host/_vendor/reticle.py``)
and keep this header.  It needs ``tornado``, ``jsonschema`` and
``cryptography`` and nothing else; ``make_app(Hub())`` gives a Tornado
application you can serve yourself.

Sections, in the order data flows (``grep -n '^# .*####' reticle.py``):
Constants & logging | Errors | Utilities | Session signing | MCP protocol |
Browser bridge | Devices | Predicates | Verdict rules | Tools | Flows |
Server truth | HTTP handlers | WebSocket handler | Application factory |
Server control | Init | CLI | pytest plugin | Embedded assets | __main__ guard.

In your Python app, in development (Server truth): ``app.wsgi_app =
reticle.wsgi(app.wsgi_app)`` (Flask, any WSGI app), ``app = reticle.asgi(app)``
(FastAPI, any ASGI app), or ``"reticle.DjangoMiddleware"`` in ``MIDDLEWARE``.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DjangoMiddleware",
    "Hub",
    "PredicateError",
    "ReticleError",
    "RpcError",
    "ToolError",
    "__version__",
    "asgi",
    "main",
    "make_app",
    "parse_predicate",
    "watch_sqlalchemy",
    "wsgi",
]

import argparse
import asyncio
import base64
import collections
import contextvars
import datetime
import errno
import hashlib
import hmac
import html
import itertools
import ipaddress
import json
import logging
import operator
import os
import re
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from typing import Any
from typing import Awaitable
from typing import Callable
from typing import Dict
from typing import FrozenSet
from typing import List
from typing import NamedTuple
from typing import Literal
from typing import Optional
from typing import Set
from typing import Tuple
from typing import overload
from typing import TYPE_CHECKING


# `python reticle.py serve` compiles this whole file from source (a script keeps no bytecode cache),
# and the compiler's garbage, freed before the imports below fill the holes it leaves, keeps the daemon
# some 25 MB above its dependencies for as long as it runs.  So before importing anything more, the
# daemon hands the code object it runs to a fresh interpreter (an anonymous in-memory file, then exec
# in the same process: same pid, same descriptors), which starts from that bytecode with a clean heap.
# Linux only (memfd); RETICLE_SERVE_REEXEC=0 turns it off.  Only this block runs before the imports.
_REEXEC_STUB = ("import marshal, os, sys\n"
                "with os.fdopen(int(sys.argv[1]), 'rb') as fh: code = marshal.loads(fh.read())\n"
                "del sys.argv[:2]; sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))\n"
                "import __main__; vars(__main__).update(__file__=sys.argv[0], __reticle_bytecode__=True)\n"
                "del fh; exec(code, vars(__main__))\n")


def _serve_from_bytecode(code: Any) -> None:
    """Exec a fresh interpreter that runs `code` (this module's) as __main__ with the same arguments."""
    import marshal  # stdlib; the daemon start is its one user
    try:
        fd = os.memfd_create("reticle-bytecode")
        data = memoryview(marshal.dumps(code))
        while data:
            data = data[os.write(fd, data):]
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)
        flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]  # -W, -X, -O ...
        os.execv(sys.executable, [sys.executable] + flags + ["-c", _REEXEC_STUB, str(fd)] + sys.argv)
    except (OSError, ValueError, AttributeError):
        return  # cannot: run on from the compiled source as before


if (__name__ == "__main__" and sys.argv[1:2] == ["serve"] and hasattr(os, "memfd_create")
        and not globals().get("__reticle_bytecode__") and os.environ.get("RETICLE_SERVE_REEXEC", "1") != "0"
        and sys.executable and os.path.isfile(sys.argv[0])):
    _serve_from_bytecode(sys._getframe(0).f_code)

# The third-party imports come after the re-exec block on purpose: `reticle serve` re-execs itself from
# bytecode before paying for tornado, jsonschema and cryptography, so they are not at the top (E402).
import tornado.http1connection  # noqa: E402
import tornado.httpclient  # noqa: E402
import tornado.httpserver  # noqa: E402
import tornado.ioloop  # noqa: E402
import tornado.iostream  # noqa: E402
import tornado.netutil  # noqa: E402
import tornado.routing  # noqa: E402
import tornado.web  # noqa: E402
import tornado.websocket  # noqa: E402
import jsonschema  # noqa: E402
from cryptography.hazmat.primitives import hashes as _c_hashes  # noqa: E402
from cryptography.hazmat.primitives import hmac as _c_hmac  # noqa: E402


###############################################################################
# Constants & logging #########################################################
###############################################################################

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4400
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_PROTOCOL = PROTOCOL_VERSIONS[-1]
BRIDGE_PROTOCOL = 1

MAX_BODY_BYTES = 4 * 1024 * 1024          # 413 above this (DESIGN section 4)
BODY_TIMEOUT_S = 10.0                      # 408 when a body takes longer
SSE_KEEPALIVE_S = 25.0                     # SSE comment keepalive
RATE_DEFAULT = (100.0, 200.0)              # requests/s and burst, per session key
# The largest frame the SDK sends: it batches events into frames of at most
# this size and chunks anything larger, so a bigger frame is hostile (1009).
WS_MAX_MESSAGE_BYTES = 1 << 20
WS_PING_INTERVAL_S = 20
HELLO_TIMEOUT_S = 5.0
MAX_SESSIONS = 32
MAX_PENDING_HANDSHAKES = 16
MAX_DEPARTED = 8                           # closed tabs kept for a reload to resume (each keeps its buffer)
DEPARTED_KEEP_MS = 60_000
COMMAND_TIMEOUT_S = 8.0
RETRY_GRACE_MS = 250                       # a write answered otherwise is final after this (a client may retry)
OBSERVE_MAX_BYTES = 32 * 1024             # one reticle_observe answer; `next` pages on
NAV_WAIT_S = 10.0                          # how long a verdict waits for a tab's next document
ARRIVAL_WAIT_MS = 2000.0                   # how long a new document's hello waits for its first events
_PAGE_BLIND_SPOTS = ("cross-origin-iframe", "closed-shadow-root")  # page parts no SDK can read (levels)
BACKGROUND_MS = 60_000                     # a write seen this long before an act is the page's own traffic
# The horizon: a verdict after an act waits for the act's own consequences (README "The horizon")
HORIZON_CAP_MS = 3000                      # at most this long beyond the first look; past it, what was pending is named
HORIZON_QUIET_MS = 200                     # after the last answer, message or document the act caused, the render
HORIZON_CHURN_MS = 100                     # ... and the DOM quiet this long (checked for 1 s after that answer)
SOCKET_REPLY_WAIT_MS = 2000                # a socket message the act sent waits this long for the next message in
STREAM_QUIET_MS = 300                      # a stream the act opened has ended, or sent nothing for this long
SCAN_WAIT_MS = 1500                        # a new page's report of what it shows (ui.scan) is awaited this long
ACT_GRACE_MS = 100                         # an assert right after an act waits this long for the act's first requests
EVENT_CAP_COUNT = 2000
EVENT_CAP_AGE_MS = 60_000
EVENT_CAP_BYTES = 8 * 1024 * 1024
PLAIN_EVENT_BYTES = 1024  # a frame of events averaging more is sized event by event (_BrowserSession._ingest_plain)
EVENTS_PER_SECOND_DEFAULT = 20_000         # per browser session, then sampling
THROTTLED_AFTER_MS = 12_000
MAX_STRING_ARG = 64 * 1024
FLOW_MAX_STEPS = 100                       # steps in a flow file, and in reticle_flow_save's `steps`
# Hardening limits (SECURITY.md lists them all, with the tests that pin them).
MAX_BATCH = 64                             # messages in one JSON-RPC batch; a longer one is -32600
FRAME_BYTES_PER_TAB_S = 1 << 20            # frame bytes one tab may have parsed per second (RETICLE_TAB_BYTES_PER_S)
FRAME_BYTES_ALL_TABS_S = 4 << 20           # the same for all tabs together (RETICLE_ALL_TABS_BYTES_PER_S)
SESSIONLESS_SCALE = 5.0                    # all clients without a session share 5 x RETICLE_RATE_LIMIT
SESSIONLESS_TARPIT_S = 0.25                # ... and a 429 of that shared bucket is answered this late
BULK_BODY_AFTER = 64 << 10                 # body bytes a request may send before they count as bulk
BULK_BODY_BYTES_S = 4 << 20                # bulk body bytes read per second, all clients together
MAX_SSE_STREAMS = 64                       # held-open event streams (GET /mcp/sse and GET /mcp) at once
MAX_HTTP_CONNECTIONS = 1024                # open client connections; more are closed at once (fewer if fds are few)
MAX_BATCH_REPLY_BYTES = 8 * 1024 * 1024    # a batch's replies together; the rest are -32600 beyond it
MAX_JSON_DEPTH = 64                        # nesting of an MCP message; deeper is a -32700 parse error
HEADER_TIMEOUT_S = 10.0                    # request headers (and an idle keep-alive) must arrive in this
SESSION_MAX_AGE_S = 30 * 86400             # a Streamable HTTP session id older than this answers 404
MIN_TOKEN_CHARS = 32                       # the shortest RETICLE_TOKEN accepted off loopback
AUTH_FAIL_RATE = (1.0, 10.0)               # wrong tokens per peer address: burst 10, then 1/s; 429 beyond


_log = logging.getLogger("reticle")
_bridge_log = logging.getLogger("reticle.bridge")


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: {"t", "level", "event", ...fields}."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "t": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return _redact(_dumps(line, ascii=True))


def _emit(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"fields": fields})


def _setup_logging(level: int = logging.INFO) -> None:
    """Send reticle's and tornado's logs to stderr as JSON lines (CLI only)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter())
    handler.addFilter(_RepeatFilter())
    for name, lvl in (("reticle", level), ("tornado", logging.WARNING), ("asyncio", logging.WARNING)):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(lvl)
        logger.propagate = False


class _RepeatFilter(logging.Filter):
    """At most 5 lines a minute of one repeated warning or error from outside reticle (an accept
    loop failing with `Too many open files` would otherwise write it thousands of times a second);
    the next line after a pause says how many were left out."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: Dict[str, List[float]] = {}  # message -> [window start, lines in it, left out]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "reticle" or record.name.startswith("reticle.") or record.levelno < logging.WARNING:
            return True
        key = "%s:%s" % (record.name, str(record.msg)[:200])
        now = time.monotonic()
        seen = self._seen.get(key)
        if seen is None or now - seen[0] > 60.0:
            if len(self._seen) > 1000:
                self._seen.clear()
            left_out = seen[2] if seen else 0
            self._seen[key] = [now, 1, 0]
            if left_out:
                record.msg = "%s (and %d more like it in the last minute, left out)" % (record.msg, left_out)
            return True
        seen[1] += 1
        if seen[1] > 5:
            seen[2] += 1
            return False
        return True


###############################################################################
# Errors ######################################################################
###############################################################################


class ReticleError(Exception):
    """Base class of every error reticle raises on purpose."""


class ToolError(ReticleError):
    """A tool ran and failed: becomes ``isError: true`` with {error, recovery, code}.  `code` is
    machine-readable (callers branch on it, never on the prose); each subclass has its own."""

    code = "tool_failed"

    def __init__(self, error: str, recovery: str = "", code: Optional[str] = None, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.recovery = recovery
        if code is not None:
            self.code = code
        self.extra = extra

    def payload(self) -> dict:
        out = {"error": self.error, "code": self.code}
        if self.recovery:
            out["recovery"] = self.recovery
        out.update(self.extra)
        return out


class RpcError(ReticleError):
    """A JSON-RPC error answered to the client (code, message, data)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def payload(self) -> dict:
        err = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class _HttpRefusal(ReticleError):
    """An HTTP refusal answered as JSON {error, detail} with a status code."""

    def __init__(self, status: int, error: str, detail: str, headers: Optional[dict] = None) -> None:
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail
        self.headers = headers or {}


class ConfigError(ReticleError):
    """Bad configuration: the daemon refuses to start with one sentence."""


###############################################################################
# Utilities (JSON, ids, time) #################################################
###############################################################################


_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_SURROGATE_HINT_RE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
# A secret's value after `token=` (a URI), `"token": "` (JSON) or `Bearer ` (a header), and a
# device's capability after `device=` (its bridge URL).
_SECRET_RE = re.compile(r"""(?i)(token(?:=|%3D|\\?["']?\s*[:=]\s*\\?["']?)|\bdevice(?:=|%3D)|\bbearer\s+)"""
                        r"""([^\s&"'\\,;)}\]]+)""")


def _dumps(obj: Any, ascii: bool = False) -> str:
    """Compact JSON that every parser accepts: never NaN or Infinity (null, as
    JSON.stringify writes them) and never a lone surrogate (U+FFFD instead)."""
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=ascii, default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), separators=(",", ":"), ensure_ascii=ascii, default=str, allow_nan=False)
    if ascii:
        if "\\ud" in text:  # a non-BMP character, or a lone surrogate: repair the latter
            text = json.dumps(json.loads(_dumps(obj)), separators=(",", ":"), allow_nan=False)
    elif _SURROGATE_RE.search(text):
        text = _SURROGATE_RE.sub("\ufffd", text)
    return text


def _finite(obj: Any) -> Any:
    """obj with every non-finite float replaced by None."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _redact(text: str) -> str:
    """text with every value that looks like a pairing token replaced (log lines)."""
    return _SECRET_RE.sub(lambda m: m.group(1) + "[redacted]", text)


def _reject_constant(name: str) -> Any:
    raise ValueError("%s is not a JSON number" % name)


_INF, _NEG_INF = float("inf"), float("-inf")


def _parse_float(text: str) -> float:
    value = float(text)
    if value == _INF or value == _NEG_INF:  # a number too large overflows to an infinity
        raise ValueError("the number %s is too large for a double" % text[:40])
    return value


def _loads_frame(data: str) -> Any:
    """json.loads for the frames a page sends, the bridge's hot path: NaN and Infinity refused, nesting
    that would exhaust the stack too, but no walk for depth or lone surrogates, and a number too large
    for a double kept as an infinity instead of refused, so that no number costs a call (a parse_float
    hook is a tenth of the parse).  It is the page's own value, as 1e308 would be, and every answer
    writes a non-finite number as null (_dumps)."""
    try:
        return _FRAME_DECODER.decode(data)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


# _loads_frame's decoder, made once: json.loads(..., parse_constant=) would make a decoder and its scanner
# for every frame
_FRAME_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _loads(data: Any) -> Any:
    """json.loads for what clients send: ValueError for anything that is not
    plain JSON (NaN, Infinity, numbers that overflow, nesting that would
    exhaust the stack, nesting deeper than MAX_JSON_DEPTH, strings holding
    a lone surrogate, which is not Unicode text and could not be written
    back out).  A page's frames have their own (_loads_frame)."""
    try:
        value = json.loads(data, parse_constant=_reject_constant, parse_float=_parse_float)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply (at most %d levels)" % MAX_JSON_DEPTH) from None
    if isinstance(value, list) and len(value) > MAX_BATCH:
        return value  # refused whole (-32600) before any of it is read: checking it would only cost time
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    deep = raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH
    if deep or _SURROGATE_HINT_RE.search(raw):
        problem = _json_problem(value)
        if problem:
            raise ValueError(problem)
    return value


def _batch_over_limit(raw: bytes) -> str:
    """Without parsing: '' unless `raw` is a JSON array naming "jsonrpc" more than 4 x MAX_BATCH
    times, which no batch of MAX_BATCH messages does unless its strings are full of the word;
    then how many it names."""
    if not raw[:64].lstrip().startswith(b"["):
        return ""
    n = raw.count(b'"jsonrpc"')
    return "%d messages name jsonrpc" % n if n > 4 * MAX_BATCH else ""


def _json_problem(value: Any) -> Optional[str]:
    """Why a parsed value is refused (too deep, a lone surrogate), or None."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            if _SURROGATE_RE.search(v):
                return "a string holds a lone surrogate, which is not Unicode text"
        elif isinstance(v, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                return "the JSON is nested deeper than %d levels" % MAX_JSON_DEPTH
            if isinstance(v, dict):
                stack.extend((k, depth) for k in v)
                stack.extend((x, depth + 1) for x in v.values())
            else:
                stack.extend((x, depth + 1) for x in v)
    return None


def _short(value: Any, limit: int = 140) -> str:
    text = value if isinstance(value, str) else _dumps(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


# One clock inside the daemon: milliseconds since it started, read from time.monotonic() (never the wall
# clock, which jumps); Hub.clock reads it.  Every event's `t`, every cursor an answer gives (`since`, `until`)
# and every time the bridge keeps of a tab (when it was last heard, its act marks, when it left, a held report's
# deadline, when a new document's first events are due) is on it, and so is every deadline of a verdict (Observe's
# waits, the horizon's cap, the end of an act's budget: _act_budget), so a session, its parts and Observe compare
# times without converting.  Seconds appear only at the edges, as durations: asyncio's sleeps and timeouts (the
# seconds are worked out at the call), and a command's timeout, cut to the tool call's own deadline (_CALL_DEADLINE,
# on this clock too: _command_budget).  A flow's replay, its steps' `ms` and the MCP clients Hub heard are on it
# too.  The devices' timers, the HTTP layer's rate limits, the log filter and the CLI (another process) still read
# time.monotonic() seconds; what they hand a session is a timeout in seconds, never a reading of their clock.
# The page's own clock (an event's `pt`, ms since its document began) is kept beside `t` and compared only
# with itself (_ActMarks).
def _clock_ms(t0: float) -> float:
    """Now on the daemon's clock whose zero is the monotonic `t0` (Hub.clock), in ms to the microsecond."""
    return round((time.monotonic() - t0) * 1000.0, 3)


def _wall_iso(ts: Optional[float] = None) -> str:
    ts = time.time() if ts is None else ts
    return (
        datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    pad = "=" * (-len(text) % 4)
    return base64.urlsafe_b64decode(text + pad)


def _is_loopback_host(host: Optional[str]) -> bool:
    """True for localhost, ::1 and 127.d.d.d written out in full.

    Lookalikes (``127.0.0.1.evil.com``), a trailing dot and IPv4 shorthands
    such as ``127.1`` are refused: a browser never sends them for a real
    loopback page, and refusing is the safe side.
    """
    if not host:
        return False
    h = host.strip().lower()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    if h == "localhost":
        return True
    if h.startswith("::ffff:") and "." in h:
        h = h[len("::ffff:"):]
    try:
        addr = ipaddress.ip_address(h)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv4Address):
        return h.count(".") == 3 and addr.is_loopback
    return addr.is_loopback


def _split_host_header(value: Optional[str]) -> Optional[str]:
    """The hostname of a Host header (port dropped), or None if malformed."""
    if not value:
        return None
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        rest = value[end + 1:]
        if rest and not re.fullmatch(r":\d{1,5}", rest):
            return None
        return value[: end + 1]
    if value.count(":") > 1:
        return None
    host, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    if not host or not re.fullmatch(r"[A-Za-z0-9._-]+", host):
        return None
    return host


def _origin_host(value: Optional[str]) -> Optional[str]:
    """The hostname of an Origin or Referer value, or None when opaque/unparseable."""
    if not value or value.strip().lower() == "null":
        return None
    try:
        parts = urllib.parse.urlsplit(value.strip())
        host = parts.hostname
        _ = parts.port  # raises on a bad port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https", "ws", "wss") or not host:
        return None
    return host


def _normalise_origin(value: str) -> Optional[str]:
    """scheme://host[:port] for an origin string; opaque origins verbatim."""
    value = value.strip()
    if not value:
        return None
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme in ("http", "https") and parts.hostname:
        host = parts.hostname
        if ":" in host:
            host = "[%s]" % host
        return "%s://%s%s" % (parts.scheme, host, ":%d" % port if port else "")
    return value


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError("%s=%r is not a whole number; unset it or give one like %d." % (name, raw, default)) from None


def _env_byte_rate(name: str, default: int) -> int:
    """A bytes-per-second cap from the environment (RETICLE_TAB_BYTES_PER_S ...): a whole number above 0."""
    value = _env_int(name, default)
    if value <= 0:
        raise ConfigError("%s=%d is not a cap; give a whole number of bytes per second above 0 (the default is "
                          "%d), or unset it." % (name, value, default))
    return value


def _parse_rate(raw: Optional[str]) -> Tuple[float, float]:
    """RETICLE_RATE_LIMIT: "RATE" or "RATE,BURST" requests per second."""
    if not raw or not raw.strip():
        return RATE_DEFAULT
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:,\s*(\d+(?:\.\d+)?)\s*)?", raw)
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(
            "RETICLE_RATE_LIMIT=%r is not understood; use RATE or RATE,BURST in requests per "
            "second, for example 100,200." % raw
        )
    rate = float(m.group(1))
    burst = float(m.group(2)) if m.group(2) else rate * 2
    return rate, max(burst, 1.0)


class _StateDir:
    """The state directory (DESIGN section 9): mode 0700, files 0600."""

    def __init__(self, path: Optional[str] = None) -> None:
        raw = path or os.environ.get("RETICLE_STATE_DIR", "").strip()
        self.path = os.path.abspath(os.path.expanduser(raw or "~/.reticle"))

    def ensure(self) -> str:
        try:
            os.makedirs(self.path, mode=0o700, exist_ok=True)
            if os.name == "posix":
                os.chmod(self.path, 0o700)
        except OSError as exc:
            raise ConfigError(
                "the state directory %s cannot be created (%s); set RETICLE_STATE_DIR to a "
                "writable directory." % (self.path, exc.strerror or exc)
            ) from exc
        return self.path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def read_or_create(self, name: str, make: Callable[[], bytes]) -> bytes:
        """Read a secret file, creating it 0600 with make() when absent or empty."""
        self.ensure()
        path = self.file(name)
        for _ in range(3):
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
                if data.strip():
                    if os.name == "posix" and os.stat(path).st_mode & 0o077:
                        os.chmod(path, 0o600)
                    return data
                os.unlink(path)
            except FileNotFoundError:
                pass
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            data = make()
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            return data
        raise ConfigError("could not read or create %s" % path)

    def write(self, name: str, data: bytes) -> None:
        self.ensure()
        path = self.file(name)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)

    def machine_key(self) -> bytes:
        key = self.read_or_create("machine.key", lambda: secrets.token_bytes(32))
        if len(key) < 32:
            raise ConfigError("%s is shorter than 32 bytes; delete it and restart." % self.file("machine.key"))
        return key

    def token(self) -> str:
        env = os.environ.get("RETICLE_TOKEN", "").strip()
        if env:
            return env
        raw = self.read_or_create("token", lambda: (secrets.token_hex(24) + "\n").encode())
        return raw.decode("ascii", "replace").strip()

    def rotate_token(self) -> str:
        token = secrets.token_hex(24)
        self.write("token", (token + "\n").encode())
        return token


###############################################################################
# Session signing #############################################################
###############################################################################


class _SessionSigner:
    """Streamable HTTP session ids: ``v1.<payload>.<mac>`` (DESIGN section 4).

    payload = base64url(16 random bytes + 8-byte issued-at seconds); mac =
    HMAC-SHA256 over ``v1.<payload>`` with the per-machine key.  Verifying
    needs only the key, so ids stay valid across daemon restarts; the daemon
    gives them a maximum age (SESSION_MAX_AGE_S, 30 days), after which they
    answer 404 like an unknown id and the client initializes again.
    """

    VERSION = "v1"

    def __init__(self, key: bytes, max_age_s: Optional[float] = None) -> None:
        if len(key) < 32:
            raise ValueError("the session signing key must be at least 32 bytes")
        self._key = bytes(key)
        self.max_age_s = max_age_s

    def _mac(self, signed: bytes) -> bytes:
        h = _c_hmac.HMAC(self._key, _c_hashes.SHA256())
        h.update(signed)
        return h.finalize()

    def mint(self, now: Optional[float] = None) -> str:
        issued = int(time.time() if now is None else now)
        payload = _b64url(secrets.token_bytes(16) + issued.to_bytes(8, "big"))
        signed = ("%s.%s" % (self.VERSION, payload)).encode("ascii")
        return "%s.%s" % (signed.decode("ascii"), _b64url(self._mac(signed)))

    def verify(self, session_id: Optional[str], now: Optional[float] = None) -> bool:
        if not session_id or len(session_id) > 256:
            return False
        parts = session_id.split(".")
        if len(parts) != 3 or parts[0] != self.VERSION:
            return False
        try:
            payload = _b64url_decode(parts[1])
            mac = _b64url_decode(parts[2])
        except (ValueError, TypeError):
            return False
        if len(payload) != 24 or len(mac) != 32:
            return False
        if _b64url(payload) != parts[1] or _b64url(mac) != parts[2]:
            return False  # reject non-canonical encodings of the same bytes
        if not hmac.compare_digest(self._mac(("%s.%s" % (parts[0], parts[1])).encode("ascii")), mac):
            return False
        if self.max_age_s is not None:
            issued = int.from_bytes(payload[16:], "big")
            age = (time.time() if now is None else now) - issued
            if age > self.max_age_s or age < -86400:  # too old, or from a clock a day ahead
                return False
        return True


###############################################################################
# MCP protocol (JSON-RPC dispatch) ############################################
###############################################################################

INSTRUCTIONS = (
    "Reticle reads the running web app's program truth (network, console, errors, routes, DOM, "
    "storage, app state, signals) and returns verdicts. Loop: reticle_sessions (is a tab "
    "connected? if not, reticle_open {url} opens the app in a browser of Reticle's own) -> "
    "reticle_snapshot or reticle_query (find refs) -> reticle_act_and_wait with an "
    "`until` predicate, or reticle_assert after acting. Only reticle_act_and_wait and "
    "reticle_assert produce a verdict; every other tool proves nothing. Only verified: \"yes\" is "
    "a pass: \"unknown\" means Reticle could not tell, so report it as unknown and never weaken a "
    "check to make it pass. Omit sessionId when one tab is connected. The predicate grammar is "
    "the reticle://predicates resource."
)

CHEATSHEET = """# Reticle cheat sheet

1. `reticle_sessions`: is a tab connected? If not, `reticle_open {url}` opens the app in a
   browser of Reticle's own (no script tag needed), or add
   `<script src="http://127.0.0.1:4400/reticle.js"></script>` to the app's dev HTML and load it.
2. `reticle_snapshot {mode: "interactive"}` or `reticle_query {by, value}`: find refs (e7).
3. `reticle_act_and_wait {ref, action, until: <predicate>}`: act and get a verdict.
4. `reticle_assert {predicate}`: check what happened since the last act.
5. `reticle_fault {match: {urlContains, method}, respond: {status: 500}}`: make a write fail on
   purpose, then prove the app tells the user; `{clear: true}` ends it.

_Verdicts: `verified: "yes"` is the only pass. `"no"` names the failing evidence;
`"unknown"` means Reticle could not tell (tab lost, request in flight, body not captured,
evidence evicted): report it as unknown and never weaken the check.

Bug-catching predicates: `{kind: "net", urlContains, status, count}`,
`{kind: "net", bodyContains}`, `{kind: "console", level: "error", absent: true}`,
`{kind: "element", query: {...}, absent: true}`, `{kind: "state", path, equals}`.
"""


class _CallContext:
    """Who is calling: the transport and the session key (for limits), and `notify`, how a message
    the server starts (a progress notification) reaches this caller, where the transport can."""

    __slots__ = ("transport", "session_key", "client", "notify")

    def __init__(self, transport: str, session_key: str, client: Optional[dict] = None,
                 notify: Optional[Callable[[dict], Awaitable[None]]] = None) -> None:
        self.transport = transport
        self.session_key = session_key
        self.client = client
        self.notify = notify


PROGRESS_EVERY_S = 0.5  # a call that carries _meta.progressToken hears from the daemon this often


class _Progress:
    """The progress of one tools/call that asked for it (params._meta.progressToken): what it waits
    for now (`note`, set by the waiting code through _progress_note) and the notifications/progress
    the dispatcher's ticker sends while the call runs."""

    def __init__(self, token: Any, notify: Callable[[dict], Awaitable[None]], tool: str) -> None:
        self.token = token
        self.notify = notify
        self.note = "running %s" % tool
        self.count = 0

    async def send(self, message: Optional[str] = None, progress: Optional[float] = None) -> None:
        """One notifications/progress; progress only ever grows, as MCP requires."""
        self.count = max(self.count + 1, int(progress or 0))
        params = {"progressToken": self.token, "progress": self.count, "message": message or self.note}
        try:
            await self.notify({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        except Exception as exc:  # a client gone mid-call loses its progress, not its answer
            _emit(_log, logging.DEBUG, "mcp_progress_dropped", error=repr(exc))

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            await self.send()


_PROGRESS: "contextvars.ContextVar[Optional[_Progress]]" = contextvars.ContextVar("reticle_progress", default=None)
# when the tool call being served must answer by (on the daemon's clock, ms: Hub.clock), from its `timeout_ms`:
# no command to the page waits past it (issue 19 #5)
_CALL_DEADLINE: "contextvars.ContextVar[Optional[float]]" = contextvars.ContextVar("reticle_deadline", default=None)
COMMAND_FLOOR_S = 0.25      # a command sent once the call's budget is spent still gets this long
DIALOG_SILENT_MS = 5_500    # a tab that did not answer and was not heard from for this long is busy
STUCK_COMMAND_S = 2.0       # what a command waits, at most, for a tab that did not answer the last one


def _command_budget(timeout: float, now: float) -> float:
    """How long (s) a command to the page may wait: its own `timeout` (s), cut to what is left at `now`
    (the daemon's clock, ms) of the tool call's `timeout_ms` (never below COMMAND_FLOOR_S)."""
    deadline = _CALL_DEADLINE.get()
    if deadline is None:
        return timeout
    return min(timeout, max(COMMAND_FLOOR_S, (deadline - now) / 1000.0))


def _progress_note(text: str) -> None:
    """Say what the running tool call waits for (the next progress notification carries it); a no-op
    for a call that asked for no progress.  The waiting code calls it once where it starts waiting."""
    progress = _PROGRESS.get()
    if progress is not None:
        progress.note = text[:200]


def _progress_token(params: dict) -> Any:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def _wants_progress(payload: Any) -> bool:
    """A single tools/call that asked for progress (the Streamable HTTP answer then becomes an SSE stream)."""
    return (isinstance(payload, dict) and payload.get("method") == "tools/call" and "id" in payload
            and isinstance(payload.get("params"), dict) and _progress_token(payload["params"]) is not None)


def _negotiate(requested: Any) -> str:
    return requested if requested in PROTOCOL_VERSIONS else LATEST_PROTOCOL


def _usage_markdown(registry: _ToolRegistry) -> str:
    lines = ["# Reticle tools", "", INSTRUCTIONS, ""]
    for tool in registry.listed():
        lines.append("## %s" % tool.name)
        lines.append("")
        lines.append(tool.description)
        lines.append("")
        required = set(tool.schema.get("required", ()))
        for field, spec in tool.schema["properties"].items():
            kind = spec.get("type") or ("one of " + ", ".join(map(str, spec["enum"])) if "enum" in spec else "any")
            if isinstance(kind, list):
                kind = " or ".join(kind)
            lines.append("- `%s` (%s%s)%s" % (field, kind, ", required" if field in required else "",
                                               ": " + spec["description"] if spec.get("description") else ""))
        if not tool.schema["properties"]:
            lines.append("- no arguments")
        lines.append("")
        lines.append("Example: `%s`" % _dumps(tool.example))
        lines.append("")
    return "\n".join(lines)


class _McpDispatcher:
    """JSON-RPC for MCP, independent of any transport.

    ``call_tool(name, args, ctx)`` runs a validated tool and
    ``read_live(uri)`` answers live resources; the daemon wires them to the
    hub, the stdio proxy to its daemon forwarder.
    """

    def __init__(self, registry: _ToolRegistry,
                 call_tool: Callable[[str, dict, _CallContext], Awaitable[dict]],
                 read_live: Callable[[str], Awaitable[Any]],
                 origin: Callable[[], str] = lambda: "http://127.0.0.1:%d" % DEFAULT_PORT,
                 tick: bool = True) -> None:
        self.registry = registry
        self._call_tool = call_tool
        self._read_live = read_live
        self.ticks = tick  # False in the stdio proxy: it relays the daemon's progress instead of its own
        self.check_output = os.environ.get("RETICLE_CHECK_OUTPUT") == "1"
        self.running: Dict[Tuple[str, str], "asyncio.Task[Any]"] = {}  # (session key, request id) -> call
        self.static_resources = {
            "reticle://docs/usage": ("Reticle tool surface", "text/markdown", lambda: _usage_markdown(registry)),
            "reticle://docs/cheatsheet": ("Reticle cheat sheet", "text/markdown",
                                          lambda: CHEATSHEET.replace("http://127.0.0.1:4400", origin())),
            "reticle://predicates": ("Predicate grammar", "application/json",
                                     lambda: _dumps(_predicate_grammar_doc())),
        }

    def resources(self) -> List[dict]:
        out = [{"uri": uri, "name": name, "mimeType": mime} for uri, (name, mime, _) in self.static_resources.items()]
        out.append({"uri": "reticle://sessions", "name": "Connected browser sessions (live)",
                    "mimeType": "application/json"})
        return out

    async def handle_payload(self, payload: Any, ctx: _CallContext) -> Tuple[Any, bool]:
        """One message or a batch -> (response or list of responses or None, was_batch)."""
        if isinstance(payload, list):
            if not payload:
                return _rpc_error(None, -32600, "Invalid Request: empty batch"), False
            if len(payload) > MAX_BATCH:
                return _rpc_error(None, -32600, "Invalid Request: a batch holds at most %d messages; this one "
                                                "holds %d, so none ran" % (MAX_BATCH, len(payload))), False
            replies = await asyncio.gather(*(self.handle(m, ctx) for m in payload))
            return _bound_batch([r for r in replies if r is not None]), True
        return await self.handle(payload, ctx), False

    async def handle(self, msg: Any, ctx: _CallContext) -> Optional[dict]:
        """Answer one JSON-RPC message: a result or error reply for a request, None for a notification, a
        client's response or a cancelled tools/call.  Malformed messages get the JSON-RPC error code that
        names what is wrong (-32600 shape, -32602 params); an unexpected crash is -32603 and the dispatcher
        keeps serving."""
        if not isinstance(msg, dict):
            return _rpc_error(None, -32600, "Invalid Request: a JSON-RPC message must be an object")
        mid = msg.get("id")
        has_id = "id" in msg
        if has_id and not (isinstance(mid, (str, int, float)) and not isinstance(mid, bool)):
            # MCP forbids a null id: it would make the request indistinguishable from an error reply.
            return _rpc_error(None, -32600, "Invalid Request: id must be a string or a number%s"
                              % (", not null" if mid is None else ""))
        method = msg.get("method")
        if msg.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if method is None and ("result" in msg or "error" in msg) and msg.get("jsonrpc") == "2.0":
                return None  # a response from the client; we never ask, so nothing to match
            return _rpc_error(mid, -32600, 'Invalid Request: needs "jsonrpc": "2.0" and a string "method"')
        if not has_id:
            if method == "notifications/cancelled":
                self.cancel(msg.get("params"), ctx)
            return None  # notifications: initialized, anything else is ignored
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _rpc_error(mid, -32602, "params must be an object")
        try:
            if method == "tools/call":
                result = await self._tracked(mid, params, ctx)
                if result is None:
                    return None  # cancelled by the client: MCP sends no answer
            else:
                result = await self._method(method, params, ctx)
        except RpcError as exc:
            return {"jsonrpc": "2.0", "id": mid, "error": exc.payload()}
        except Exception as exc:  # a bug must not take the transport down
            _emit(_log, logging.ERROR, "mcp_internal_error", method=method, error=repr(exc))
            return _rpc_error(mid, -32603, "Internal error: %s" % exc)
        return {"jsonrpc": "2.0", "id": mid, "result": result}

    def cancel(self, params: Any, ctx: _CallContext) -> None:
        """notifications/cancelled: stop the caller's own call of that requestId (another caller's
        ids are not reachable: the key holds the session); an unknown or finished id is ignored."""
        rid = params.get("requestId") if isinstance(params, dict) else None
        task = self.running.get((ctx.session_key, _dumps(rid)))
        if task is not None and not task.done():
            _emit(_log, logging.INFO, "mcp_call_cancelled", transport=ctx.transport, reason="notifications/cancelled",
                  requestId=rid)
            task.cancel()

    async def _tracked(self, mid: Any, params: dict, ctx: _CallContext) -> Optional[dict]:
        """A tools/call as a task that notifications/cancelled can stop, with a progress ticker beside it
        when the call carries _meta.progressToken and the transport can carry notifications.
        -> the result, or None when the client cancelled it."""
        key = (ctx.session_key, _dumps(mid))
        token = _progress_token(params)
        progress = _Progress(token, ctx.notify, str(params.get("name"))) if (
            token is not None and ctx.notify is not None) else None
        run = contextvars.copy_context()
        run.run(_PROGRESS.set, progress)
        work = run.run(asyncio.ensure_future, self._method("tools/call", params, ctx))  # the task copies `run`
        ticker = asyncio.ensure_future(progress.tick()) if progress is not None and self.ticks else None
        if key not in self.running:
            self.running[key] = work
        try:
            try:
                await asyncio.wait({work})
            except asyncio.CancelledError:
                work.cancel()  # the transport dropped the caller: stop the call too
                raise
        finally:
            if ticker is not None:
                ticker.cancel()
            if self.running.get(key) is work:
                del self.running[key]
        if work.cancelled():
            return None
        return work.result()

    async def _method(self, method: str, params: dict, ctx: _CallContext) -> Any:
        """The result of one MCP method (initialize, ping, tools/list|call, resources/list|read, ...), or an
        RpcError naming the method or argument that was wrong.  tools/call validates the arguments
        against the tool's schema before the tool runs."""
        if method == "initialize":
            ctx.client = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else None
            return {
                "protocolVersion": _negotiate(params.get("protocolVersion")),
                "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": "reticle", "version": __version__},
                "instructions": INSTRUCTIONS,
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [t.describe() for t in self.registry.listed()]}
        if method == "tools/call":
            name = params.get("name")
            tool = self.registry.get(name) if isinstance(name, str) else None
            if tool is None:
                raise RpcError(-32602, "Unknown tool %r. Available tools: %s" % (
                    name, ", ".join(self.registry.names())), {"available": self.registry.names()})
            args = params.get("arguments")
            args = {} if args is None else args
            tool.check(args)
            result = await self._call_tool(tool.name, args, ctx)
            problem = tool.output_problem(result) if self.check_output else None
            if problem:  # check mode (the test suite): an answer that breaks its declared shape is a bug
                _emit(_log, logging.ERROR, "mcp_internal_error", method=method, error=problem)
            return result
        if method == "resources/list":
            return {"resources": self.resources()}
        if method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str):
                raise RpcError(-32602, "resources/read needs params.uri, a string such as reticle://sessions")
            if uri in self.static_resources:
                _, mime, make = self.static_resources[uri]
                return {"contents": [{"uri": uri, "mimeType": mime, "text": make()}]}
            if uri == "reticle://sessions":
                live = await self._read_live(uri)
                return {"contents": [{"uri": uri, "mimeType": "application/json", "text": _dumps(live)}]}
            raise RpcError(-32002, "Resource not found: %r. Available: %s" % (
                uri, ", ".join(r["uri"] for r in self.resources())), {"uri": uri})
        raise RpcError(-32601, "Method not found: %s. Methods: initialize, ping, tools/list, tools/call, "
                               "resources/list, resources/read" % method)


def _rpc_error(mid: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": message}}


def _bound_batch(replies: List[dict]) -> Optional[List[dict]]:
    """A batch's replies, each beyond MAX_BATCH_REPLY_BYTES in total replaced
    by a -32600 error naming the limit (the work ran; its answer is too big to
    send in one batch)."""
    total = 0
    out = []
    for reply in replies:
        total += len(_dumps(reply).encode("utf-8"))
        if total > MAX_BATCH_REPLY_BYTES:
            reply = _rpc_error(reply.get("id"), -32600, "Invalid Request: the batch's replies exceed %d bytes; "
                               "send this request again on its own or in a smaller batch" % MAX_BATCH_REPLY_BYTES)
            total += 200
        out.append(reply)
    return out or None


class _WithContent(dict):
    """A tool's result object plus further MCP content blocks (an image) kept out of it."""

    def __init__(self, obj: dict, blocks: List[dict]) -> None:
        super().__init__(obj)
        self.blocks = blocks


def _tool_result(obj: Any, is_error: bool = False) -> dict:
    if not isinstance(obj, dict):
        obj = {"result": obj}
    blocks = getattr(obj, "blocks", [])
    obj = dict(obj)
    out = {"content": [{"type": "text", "text": _dumps(obj)}] + blocks, "structuredContent": obj}
    if is_error:
        out["isError"] = True
    return out


###############################################################################
# Events and requests #########################################################
###############################################################################
# What each event type the SDK sends is, as one table of records, and what a
# request is and whether it matches: the bridge, the predicates, the verdict
# rules and the tools all ask here.


class _EventType:
    """One event type (or a family of them, `dom.*`), whole: every question the code asks of a
    type is a flag of its record."""

    __slots__ = ("name", "churn", "high_value", "ui", "effect", "busy", "frame", "bucket", "console")

    def __init__(self, name: str, bucket: Optional[str], churn: bool = False, high_value: bool = False,
                 ui: bool = False, effect: bool = False, busy: bool = False, frame: bool = False,
                 console: Optional[str] = None) -> None:
        self.name = name
        self.bucket = bucket          # the reticle_observe filter that names it ("dom", "net", ...)
        self.churn = churn            # evicted first when a buffer is full, sampled first under a flood
        self.high_value = high_value  # has a rate reserve of its own (requests, errors, routes, signals)
        self.ui = ui                  # the UI moved (for "the UI advanced under a failed request")
        self.effect = effect          # a consequence of an act (for "the act had no effect")
        self.busy = busy              # keeps the page from being settled
        self.frame = frame            # a WebSocket, EventSource or streamed-response message (or open/close)
        self.console = console        # the console level it stands for (uncaught errors are "error")


_EVENT_TYPES: Dict[str, _EventType] = {t.name: t for t in (
    _EventType("net.request", "net", high_value=True, effect=True, busy=True),
    _EventType("net.pending", "net", high_value=True, effect=True),
    _EventType("net.ws", "net", churn=True, effect=True, busy=True, frame=True),
    _EventType("net.sse", "net", churn=True, effect=True, busy=True, frame=True),
    _EventType("net.stream", "net", effect=True, busy=True, frame=True),
    _EventType("dom.added", "dom", churn=True, ui=True, effect=True, busy=True),
    _EventType("dom.removed", "dom", churn=True, ui=True, effect=True, busy=True),
    _EventType("dom.attr", "dom", churn=True, ui=True, effect=True, busy=True),
    _EventType("dom.text", "dom", churn=True, ui=True, effect=True),
    _EventType("dom.*", "dom", churn=True),
    _EventType("anim.start", "animation", churn=True, effect=True),
    _EventType("anim.*", "animation", churn=True),
    _EventType("route.change", "route", high_value=True, ui=True, effect=True),
    _EventType("route.*", "route"),
    _EventType("state.change", "state", high_value=True, ui=True, effect=True),
    _EventType("state.*", "state"),
    _EventType("storage.change", "storage", high_value=True, effect=True),
    _EventType("storage.*", "storage"),
    _EventType("signal", "signal", high_value=True, effect=True),
    _EventType("ui.alert", "ui", high_value=True, effect=True),
    _EventType("ui.status", "ui", high_value=True, effect=True),  # a status message (its text decides)
    _EventType("ui.scan", "ui", high_value=True),  # a new document looked for what it tells the user
    _EventType("ui.*", "ui"),
    _EventType("console.error", "console", high_value=True, console="error"),
    _EventType("console.warn", None, high_value=True, console="warn"),
    _EventType("console.log", None, console="log"),
    _EventType("console.info", None, console="info"),
    _EventType("console.debug", None, console="debug"),
    _EventType("error.uncaught", "console", high_value=True, console="error"),
    _EventType("error.*", "console"),
    _EventType("page.health", "perf", churn=True),
    _EventType("perf.*", "perf", churn=True),
    _EventType("focus.*", None, churn=True),
    _EventType("server.request", "server", high_value=True),  # from the app's middleware, never the page
    _EventType("server.*", "server"),
    _EventType("truncated", None, high_value=True),
    _EventType("blind-spot", None, high_value=True),
)}
_OTHER_EVENT = _EventType("?", None)


def _event_type(etype: str) -> _EventType:
    """The record of an event type: its own, else its family's (`dom.*`), else a plain one.
    A page may send any type; one the table does not know is kept, counted and never churn."""
    rec = _EVENT_TYPES.get(etype)
    if rec is None:
        family, dot, _ = etype.partition(".")
        rec = _EVENT_TYPES.get(family + ".*", _OTHER_EVENT) if dot else _OTHER_EVENT
    return rec


def _event_types(flag: str) -> FrozenSet[str]:
    """The (exact) event types whose record has `flag` set."""
    return frozenset(name for name, rec in _EVENT_TYPES.items() if "*" not in name and getattr(rec, flag))


_FRAME_TYPES = _event_types("frame")
_UI_EVENTS = _event_types("ui")
_CONSOLE_TYPES = _event_types("console")


# -- calls: the one place that says what a request is and whether it matches --------------------

_WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
_DEV_URL = re.compile(r"/(@vite|__vite|_next/webpack-hmr|__webpack_hmr|sockjs-node|@react-refresh)|hot-update")


def _is_write(d: dict) -> bool:
    return str(d.get("method", "")).upper() in _WRITE_METHODS


def _is_dev(d: dict) -> bool:
    """Dev tooling traffic (HMR sockets, hot updates) that no verdict counts."""
    return bool(_DEV_URL.search(str(d.get("url", ""))))


def _calls(window: List[dict]) -> List[dict]:
    """The completed calls of a window, in order."""
    return [e["data"] for e in window if e["type"] == "net.request"]


def _request_key(e: dict) -> str:
    """Which request an event belongs to.  Pages number their requests afresh in each document,
    so an id is only unique with its document; a document request is the exception: its
    arrival, in the next document, carries the id its leaving announced."""
    d = e["data"]
    rid = d.get("requestId")
    if rid is None:
        return "#%s" % e.get("seq", e["t"])
    if d.get("initiator") == "document":
        return "doc:%s" % rid
    return "%s:%s" % (e.get("doc", ""), rid)


def _still_open(window: List[dict]) -> Dict[str, dict]:
    """Requests started in the window (dev tooling aside) with no completion in it."""
    open_ids: Dict[str, dict] = {}
    for e in window:
        d = e["data"]
        if e["type"] == "net.pending" and not _is_dev(d):
            open_ids[_request_key(e)] = d
        elif e["type"] == "net.request":
            open_ids.pop(_request_key(e), None)
    return open_ids


def _call_failed(d: dict) -> bool:
    """A completed call failed: the page said not ok, it answered 400 or more, or it errored."""
    if d.get("ok") is False:
        return True
    status = d.get("status")
    return isinstance(status, int) and status >= 400 or (d.get("error") is not None and d.get("ok") is not True)


def _call_matches(d: dict, f: dict, pending: bool = False) -> bool:
    """Does call `d` match the filters `f` (method, urlContains, status, ok, header)?

    The network tool, the `net` kind and the contradictions all ask this one
    function.  A call still pending has no status yet: with `pending=True` it
    matches on method and URL alone (it may yet answer as asked); otherwise a
    pending call never matches a status or `ok` filter."""
    if f.get("method") and str(d.get("method", "")).upper() != f["method"].upper():
        return False
    if f.get("urlContains") and f["urlContains"] not in str(d.get("url", "")):
        return False
    if pending:
        return True
    if d.get("pending") and ("status" in f or "ok" in f):
        return False
    if "status" in f and d.get("status") != f["status"]:
        return False
    if "ok" in f and (not _call_failed(d)) != f["ok"]:
        return False
    if f.get("header"):
        headers = d["responseHeaders"] if isinstance(d.get("responseHeaders"), dict) else {}
        value = headers.get(str(f["header"].get("name", "")).lower())
        if value is None:
            return False
        if "equals" in f["header"] and value != f["header"]["equals"]:
            return False
        if "contains" in f["header"] and f["header"]["contains"] not in value:
            return False
    return True


def _frames(window: List[dict]) -> List[dict]:
    """The messages of a window (not the opens and closes), dev tooling aside."""
    return [e["data"] for e in window if e["type"] in _FRAME_TYPES
            and e["data"].get("direction") in ("in", "out") and not _is_dev(e["data"])]


def _call_label(d: dict) -> str:
    method = d.get("method") or ("LOAD" if d.get("initiator") == "document" else "GET")
    return "%s %s" % (str(method).upper(), d.get("url") or "?")


###############################################################################
# Browser bridge (connection hub, pending calls) ##############################
###############################################################################


_CHURN_TYPES: Dict[str, bool] = {}  # event type -> churn?  (a page sends few types: a small memo)
_HIGH_VALUE_SET = _event_types("high_value")
# the frame path's common case (_BrowserSession._ingest_plain): the fields it reads of every event at once
_GET_TYPE, _GET_DATA, _GET_T, _GET_DOC = map(operator.itemgetter, ("type", "data", "t", "documentId"))
_DICT_ONLY = frozenset((dict,))
_NUMBER_CLASSES = frozenset((int, float))
# The event types _BrowserSession._observe learns from (requests, dialogs, health, routes, blind spots); it
# runs for any other only while a dialog is open.  A type _observe comes to read must be added here.
_OBSERVED_TYPES = frozenset(("page.dialog", "net.request", "net.pending", "net.ws", "page.health", "route.change",
                             "blind-spot"))


class _PlainFrame(NamedTuple):
    """What _plain_frame reads of a plain frame, field by field over all its events."""
    types: List[str]
    datas: List[dict]
    pts: List[float]
    doc: str                  # the frame's one documentId, cut to 64 characters
    counts: Dict[str, int]    # events of each type
    high: int                 # high-value events (the events-per-second cap has a share of its own for them)
    observed: bool            # some event is of a type _BrowserSession._observe learns from


def _plain_frame(events: List[Any], frame_bytes: int) -> Optional[_PlainFrame]:
    """A frame of events the frame path can take whole, read, or None: every event an object with a type
    (a string of at most 64 characters, not server.*, not page.dialog), object data, a number `t` and
    the frame's one documentId (a string), none with an actionId, and on average at most
    PLAIN_EVENT_BYTES of the frame an event.  Each check is a pass over the frame in C (map, set,
    Counter), not Python code run for every event."""
    if frame_bytes > len(events) * PLAIN_EVENT_BYTES:
        return None
    try:
        types = list(map(_GET_TYPE, events))
        datas = list(map(_GET_DATA, events))
        pts = list(map(_GET_T, events))
        docs = set(map(_GET_DOC, events))
        counts = collections.Counter(types)
    except (KeyError, TypeError):  # an event that is no object, lacks a field, or has an unhashable one
        return None
    if len(docs) != 1:
        return None
    doc = docs.pop()
    if doc.__class__ is not str or set(map(type, datas)) != _DICT_ONLY or not _NUMBER_CLASSES.issuperset(
            map(type, pts)) or any(map(dict.__contains__, events, itertools.repeat("actionId"))):
        return None
    high = 0
    for etype, count in counts.items():
        if etype.__class__ is not str or len(etype) > 64 or etype.startswith("server.") or etype == "page.dialog":
            return None
        high += count if etype in _HIGH_VALUE_SET else 0
    return _PlainFrame(types, datas, pts, doc[:64], counts, high, not _OBSERVED_TYPES.isdisjoint(counts))


def _churn_memo(etype: str) -> bool:
    churn = _CHURN_TYPES.get(etype)
    if churn is None:
        churn = _event_type(etype).churn
        if len(_CHURN_TYPES) < 512:
            _CHURN_TYPES[etype] = churn
    return churn


class _EventStore:
    """One browser session's ring buffer: at most EVENT_CAP_COUNT events,
    EVENT_CAP_AGE_MS old and EVENT_CAP_BYTES big.  Churn (DOM, animation,
    health) is evicted before anything else, and every eviction is counted
    with the newest cursor it removed, so a result whose window reaches back
    past it can say its evidence was lost."""

    def __init__(self, clock: Callable[[], float], cap_count: int = EVENT_CAP_COUNT,
                 cap_age_ms: float = EVENT_CAP_AGE_MS, cap_bytes: int = EVENT_CAP_BYTES) -> None:
        self._clock = clock
        self.cap_count = cap_count
        self.cap_age_ms = cap_age_ms
        self.cap_bytes = cap_bytes
        # the events, and beside them their sizes (a deque each, not one of pairs: a pair would be one more
        # object per event to allocate, free and have the garbage collector walk)
        self._churn: collections.deque = collections.deque()
        self._kept: collections.deque = collections.deque()
        self._sizes: Dict[str, collections.deque] = {"churn": collections.deque(), "other": collections.deque()}
        self.bytes = 0
        self.seq = 0
        self.total = 0
        self.evicted = {"churn": 0, "other": 0}
        self.evicted_upto = {"churn": -1.0, "other": -1.0}
        self.sampled = 0
        self.sampled_upto = -1.0
        self._blind_spots: collections.Counter = collections.Counter()
        self._page_spots: Dict[str, Tuple[int, str]] = {}   # reason -> (count now, detail) on this document

    def __len__(self) -> int:
        return len(self._churn) + len(self._kept)

    def add_batch(self, items: List[Tuple[dict, int]]) -> None:
        """Store (event, size) pairs; the caller applies the caps once after (add_frame)."""
        self.add_frame([item[0] for item in items], [item[1] for item in items])

    def add_frame(self, events: List[dict], sizes: List[int]) -> None:
        """Store a frame's events, each with its size; the caller applies the caps once after: the frame
        path's add."""
        seq = self.seq
        churn_append, kept_append = self._churn.append, self._kept.append
        churn_size, kept_size = self._sizes["churn"].append, self._sizes["other"].append
        memo = _CHURN_TYPES
        for event, size in zip(events, sizes):
            seq += 1
            event["seq"] = seq
            churn = memo.get(event["type"])
            if churn is None:
                churn = _churn_memo(event["type"])
            if churn:
                churn_append(event)
                churn_size(size)
            else:
                kept_append(event)
                kept_size(size)
        self.total += seq - self.seq
        self.bytes += sum(sizes)
        self.seq = seq

    def cursors(self, n: int) -> range:
        """The next `n` cursors (seq), taken: for events the caller numbers as it builds them (add_run)."""
        self.seq += n
        return range(self.seq - n + 1, self.seq + 1)

    def add_run(self, events: List[dict], types: List[str], counts: Dict[str, int], estimate: int) -> None:
        """Store a frame's events, numbered (cursors), of `types` (counted in `counts`), with `estimate`,
        about what they take in memory together, in place of a size each: the events of each class
        (churn, other) share all of it.  A class is evicted oldest first and a frame's events of one
        class sit side by side, so at most one frame of each is ever part gone, and evicting one class
        first never frees what the other still holds: the byte cap holds as with a size each, and nothing
        walks every event."""
        self.total += len(events)
        flags = {etype: _churn_memo(etype) for etype in counts}
        n_churn = sum(count for etype, count in counts.items() if flags[etype])
        if n_churn == len(events) or not n_churn:
            parts = [(self._churn if n_churn else self._kept, "churn" if n_churn else "other", events)]
        else:
            others = {etype: not churn for etype, churn in flags.items()}
            parts = [(self._churn, "churn", list(itertools.compress(events, map(flags.__getitem__, types)))),
                     (self._kept, "other", list(itertools.compress(events, map(others.__getitem__, types))))]
        for dq, which, part in parts:
            share = max(1, estimate // len(part))
            dq.extend(part)
            self._sizes[which].extend(itertools.repeat(share, len(part)))
            self.bytes += share * len(part)

    def add(self, event: dict, size: int, trim: bool = True) -> None:
        """Store one event; `trim=False` leaves the caps to one `trim(now)` per frame."""
        self.add_frame([event], [size])
        if trim:
            self.trim(event["t"])

    def note_blind_spot(self, reason: str, count: int = 1, detail: str = "") -> None:
        """Count something the page could not observe (a malformed frame, a dropped event...).
        A part of the page that cannot be read (a cross-origin frame, a closed shadow root) is
        a level, not a tally: the page reports how many it has now."""
        reason, count = reason[:64], max(0, count)  # a count never takes away what was seen
        if reason in _PAGE_BLIND_SPOTS:
            self._page_spots[reason] = (count, detail[:300])
        else:
            self._blind_spots[reason] += count

    def new_document(self) -> None:
        """The page's unreadable parts were the old document's; the new one reports its own."""
        self._page_spots.clear()

    def page_blind_spots(self) -> Dict[str, Tuple[int, str]]:
        return {k: v for k, v in self._page_spots.items() if v[0]}

    def blind_spot_counts(self) -> Dict[str, int]:
        out = {k: v for k, v in self._blind_spots.items() if v}
        out.update({k: v[0] for k, v in self._page_spots.items() if v[0]})
        return out

    def note_sampled(self, count: int, t: float) -> None:
        self.sampled += count
        self.sampled_upto = max(self.sampled_upto, t)

    def _evict(self, dq: collections.deque, which: str) -> None:
        event = dq.popleft()
        self.bytes -= self._sizes[which].popleft()
        self.evicted[which] += 1
        self.evicted_upto[which] = max(self.evicted_upto[which], event["t"])

    def _evict_many(self, dq: collections.deque, which: str, count: int) -> None:
        """_evict `count` times over (count <= len(dq)), in one loop: a full buffer evicts a frame's worth."""
        popleft, size = dq.popleft, self._sizes[which].popleft
        freed = 0
        newest = self.evicted_upto[which]
        for _ in range(count):
            t = popleft()["t"]
            freed += size()
            if t > newest:
                newest = t
        self.bytes -= freed
        self.evicted[which] += count
        self.evicted_upto[which] = newest

    def trim(self, now: float) -> None:
        """Apply the age, count and byte caps: churn goes first, oldest first."""
        horizon = now - self.cap_age_ms
        churn, kept = self._churn, self._kept
        for dq, which in ((churn, "churn"), (kept, "other")):
            while dq and dq[0]["t"] < horizon:
                self._evict(dq, which)
        over = len(churn) + len(kept) - self.cap_count
        if over > 0 and churn:  # the count cap in bulk, churn first: what the loop below does one by one
            first = min(over, len(churn))
            self._evict_many(churn, "churn", first)
            over -= first
        if over > 0 and kept:
            first = min(over, len(kept))
            self._evict_many(kept, "other", first)
            over -= first
        while over > 0 or self.bytes > self.cap_bytes:
            if churn:
                self._evict(churn, "churn")
            elif kept:
                self._evict(kept, "other")
            else:
                break
            over -= 1

    def query(self, since: float = 0.0, until: Optional[float] = None,
              prefix: Optional[str] = None) -> List[dict]:
        out = []
        for dq in (self._kept, self._churn):
            for event in dq:
                t = event["t"]
                if t < since or (until is not None and t > until):
                    continue
                if prefix is not None and not event["type"].startswith(prefix):
                    continue
                out.append(event)
        out.sort(key=lambda e: e["seq"])
        return out

    def loss_since(self, since: float) -> Optional[dict]:
        """What this store lost that a window starting at `since` would have held."""
        loss = {}
        if self.evicted_upto["other"] >= since:
            loss["evicted"] = self.evicted["other"]
        if self.evicted_upto["churn"] >= since:
            loss["evictedChurn"] = self.evicted["churn"]
        if self.sampled_upto >= since:
            loss["sampled"] = self.sampled
        return loss or None

    def stats(self) -> dict:
        return {"events": len(self), "bytes": self.bytes, "total": self.total,
                "evicted": dict(self.evicted), "sampled": self.sampled}


_SCALAR_CLASSES = frozenset((int, float, bool, type(None)))


def _event_bytes(data: Any) -> int:
    """About what an event's data takes in memory once parsed (its strings, plus some 100 bytes a
    value): a frame's bytes shared evenly would count a 900 KB body in a frame of 200 events as
    4.5 KB, and the per-tab byte cap would not hold.  The frame path's sum: what _event_bytes_walk
    gives, in one pass over an object of scalars and objects of scalars (most events) of at most 400
    values in all, where the walk's order cannot change the sum; anything else is walked."""
    if data.__class__ is not dict:
        return _event_bytes_walk(data)
    seen = 1 + 2 * len(data)
    if seen > 400:
        return _event_bytes_walk(data)
    try:  # 512, the object's 100 + 40 a key, and each key's length + 64 (a parsed object's keys are strings)
        total = 612 + 104 * len(data) + sum(map(len, data))
    except TypeError:  # a key that is no string: not parsed JSON
        return _event_bytes_walk(data)
    scalars = _SCALAR_CLASSES
    for value in data.values():
        cls = value.__class__
        if cls is str:
            total += len(value) + 64
        elif cls in scalars:
            total += 32
        elif cls is dict:
            seen += 2 * len(value)
            if seen > 400:
                return _event_bytes_walk(data)
            try:
                total += 100 + 104 * len(value) + sum(map(len, value))
            except TypeError:
                return _event_bytes_walk(data)
            for inner in value.values():
                cls = inner.__class__
                if cls is str:
                    total += len(inner) + 64
                elif cls in scalars:
                    total += 32
                else:
                    return _event_bytes_walk(data)
        else:
            return _event_bytes_walk(data)
    return total if seen <= 400 else _event_bytes_walk(data)


def _event_bytes_walk(data: Any) -> int:
    """_event_bytes of any value: a walk of at most 400 values."""
    total, stack, seen = 512, [data], 0
    while stack and seen < 400:
        v = stack.pop()
        seen += 1
        if isinstance(v, str):
            total += len(v) + 64
        elif isinstance(v, dict):
            total += 100 + 40 * len(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            total += 60 + 8 * len(v)
            stack.extend(v)
        else:
            total += 32
    return total


class _Known:
    """What a session knows beside its window, for the verdict rules: the
    requests still open, the blind-spot counts and what the buffer lost
    since the window's start."""

    __slots__ = ("open_requests", "blind_spots", "loss", "origin", "background", "unreadable", "server_seen",
                 "polled", "stuck")

    def __init__(self, open_requests: List[dict], blind_spots: Dict[str, int], loss: Optional[dict],
                 origin: str = "", background: Tuple[str, ...] = (),
                 unreadable: Optional[Dict[str, Tuple[int, str]]] = None, server_seen: int = 0,
                 polled: Tuple[str, ...] = ()) -> None:
        self.open_requests = open_requests
        self.server_seen = server_seen      # records the app's middleware reported for this tab (Server truth)
        self.stuck = ""                     # why the page does not answer commands (a dialog, a busy thread)
        self.blind_spots = blind_spots
        self.unreadable = unreadable or {}  # parts of the page now that cannot be read: reason -> (count, detail)
        self.loss = loss
        self.origin = origin                # the page's scheme://host:port
        self.background = background        # what the page sends on its own: writes before the window, and
                                            # requests it repeated before it (autosave, polling)
        self.polled = polled                # of those, the ones it made twice or more (a timer, not a person)


# the codes a page may give a refused command (anything else it says is "page_refused")
_PAGE_ERROR_CODES = ("target_missing", "target_ambiguous")


class _TabGone(ToolError):
    """The tab went away (unloaded, replaced or closed) after a command was sent to it,
    so whether the command ran is not known."""

    code = "tab_gone"


def _command_result(reply: dict) -> Any:
    """A page's reply to a command -> its result; a refusal is a ToolError with the page's code when it is
    a known one (_PAGE_ERROR_CODES), else "page_refused"."""
    if not reply.get("ok"):
        error = str(reply.get("error") or "the page refused the command")[:4096]
        code = reply.get("code") if reply.get("code") in _PAGE_ERROR_CODES else "page_refused"
        raise ToolError(error, str(reply.get("recovery") or ""), code=code)
    return reply.get("result")


# -- the parts of a tab: each keeps one kind of state, on the daemon's clock (_clock_ms) ------------

class _TabHealth:
    """How a tab is doing as far as the daemon can tell: hidden or focused (its page.health events),
    a dialog open in a person's tab, the dialogs a device answered, and the last command the page
    did not answer.  Whether it answers is a question of these and of how long it has been silent,
    which the tab passes in (`silent_ms`)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.hidden = False
        self.focused = True
        self.dialogs: collections.deque = collections.deque(maxlen=16)  # (t, record) of dialogs a device answered
        self.dialog_open: Optional[dict] = None  # a dialog the SDK saw open in a person's tab (no device answers it)
        self.unanswered: Optional[Tuple[float, str]] = None  # (when, command) the page last failed to answer

    def throttled(self, silent_ms: int) -> bool:
        return (self.hidden or silent_ms > THROTTLED_AFTER_MS) and self.not_answering(silent_ms) is None

    def not_answering(self, silent_ms: int) -> Optional[str]:
        """Why the page does not answer commands (a dialog open, the main thread busy), or None while
        it answers (as far as anyone knows: the last command was answered)."""
        if self.dialog_open is not None:
            d = self.dialog_open
            return ("a %s dialog (%s) is open in the tab; the page is blocked until the person closes it"
                    % (d["dialogType"], _short(d.get("message") or "", 80) or "no text"))
        if self.unanswered is None:
            return None
        when, name = self.unanswered
        if not self.hidden and silent_ms > DIALOG_SILENT_MS:
            return ("the page's main thread is busy or blocked: '%s' got no answer %d ms ago and nothing was heard "
                    "from the page for %d ms" % (name, self._clock() - when, silent_ms))
        return "the page did not answer '%s' (%d ms ago)" % (name, self._clock() - when)

    def new_document(self) -> None:
        """A new document answers for itself: no command it failed, no dialog open in it."""
        self.unanswered = self.dialog_open = None

    def page_dialog(self, data: dict, t: float) -> Optional[str]:
        """The SDK saw the page open (or close) alert/confirm/prompt or a beforeunload prompt in a
        person's tab -> the type of a dialog that just opened (commands waiting on the page then
        fail: it cannot answer), else None."""
        kind = str(data.get("dialogType") or "")
        if kind not in ("alert", "confirm", "prompt", "beforeunload"):
            return None
        if data.get("phase") == "closed":
            self.dialog_open = None
            return None
        record = {"dialogType": kind, "message": _short(str(data.get("message") or ""), 300),
                  "handled": "left open for the person (Reticle cannot close a dialog in your tab)"}
        self.dialog_open = record
        self.dialogs.append((t, record))
        return kind

    def dialogs_since(self, since: Any) -> List[dict]:
        """The dialogs seen from the cursor `since` on (none when `since` is not a cursor)."""
        return [d for t, d in self.dialogs if isinstance(since, (int, float)) and t >= since]


class _OpenRequests:
    """The requests a tab's page has open (a net.pending its net.request has not answered yet), among
    them the documents on their way to the tab (a form post or link the page announced, a load its
    device's browser started): at most 1000, each with `startedAt` on the daemon's clock."""

    def __init__(self) -> None:
        self._open: Dict[str, dict] = {}

    def all(self) -> List[dict]:
        return list(self._open.values())

    def since(self, t: float) -> List[dict]:
        """Requests still open that started at or after `t` (each with `startedAt`)."""
        return [d for d in self._open.values() if d.get("startedAt", 0) >= t]

    def document_since(self, t: float) -> bool:
        """Is a document request that started at or after `t` still open (a page on its way)?"""
        return any(d.get("initiator") == "document" and d.get("startedAt", 0) >= t for d in self._open.values())

    def started(self, event: dict, data: dict) -> None:
        """A net.pending: the request is open until its net.request answers it."""
        if len(self._open) < 1000:
            key = _request_key(event)
            self._open[key] = dict(data, startedAt=event["t"], _key=key)

    def answered(self, event: dict) -> None:
        self._open.pop(_request_key(event), None)

    def document_on_its_way(self, rid: str, method: str, url: str, now: float) -> bool:
        """A device's browser started loading a document (its navigation `rid`): open as the SDK records a
        form submission it announces.  False when 1000 are open already (it is not recorded)."""
        if len(self._open) >= 1000:
            return False
        key = "browser:" + rid
        self._open[key] = {"requestId": key, "method": method, "methodKnown": True, "url": url, "urlKnown": True,
                           "initiator": "document", "cause": "browser", "startedAt": now, "_key": key}
        return True

    def document_not_coming(self, rid: Optional[str]) -> None:
        """The browser's navigation `rid` (every one, with None) brought no document after all (a
        download, a 204, a failure).  Once the browser loads no document in the tab, the page's own
        announcements of one (a form post answered by a download) are over too: none will arrive."""
        for key in [k for k, d in self._open.items() if d.get("cause") == "browser" and (
                rid is None or k == "browser:" + rid)]:
            self._open.pop(key, None)
        if not any(d.get("cause") == "browser" for d in self._open.values()):
            for key in [k for k, d in self._open.items() if d.get("initiator") == "document"]:
                self._open.pop(key, None)

    def clear(self) -> None:
        """A new document: the old one's requests can no longer answer."""
        self._open.clear()


class _ActMarks:
    """The cursors a tab's windows start from: its last act and its last navigation (the floor), and,
    per act, when it ran on the page's own clock.  Events are stamped when they reach the daemon;
    under a backlog an event the page produced before the act can arrive after the act's cursor, and
    a window that starts at an act drops such events by their page time (`pt`, compared only with
    the page's own clock, on the same document)."""

    def __init__(self) -> None:
        self.last_act: Optional[float] = None
        self.last_act_action: Optional[str] = None
        self.last_nav: Optional[float] = None
        self._page: Dict[float, Tuple[str, float]] = {}  # act cursor -> (documentId, page time it ran at)

    def act(self, now: float, action: Optional[str]) -> float:
        self.last_act = now
        self.last_act_action = action
        return now

    def navigation(self, now: float) -> float:
        self.last_nav = now
        return now

    def floor(self) -> float:
        """Events count from the last act or navigation on."""
        marks = [m for m in (self.last_act, self.last_nav) if m is not None]
        return max(marks) if marks else 0.0

    def note_page_time(self, since: float, result: Any) -> None:
        """Remember when, on the page's own clock, the act at `since` ran (the `pt` and `documentId`
        of its command's result)."""
        if isinstance(result, dict) and isinstance(result.get("pt"), (int, float)) and result.get("documentId"):
            self._page[since] = (str(result["documentId"]), float(result["pt"]))
            # kept as long as known() looks back (BACKGROUND_MS): an act's request whose mark was
            # dropped would read as unprompted, a repeated save as a timer's poll (outside the horizon)
            while len(self._page) > 32 and (len(self._page) > 4096 or
                                            next(iter(self._page)) < since - BACKGROUND_MS - 2000):
                del self._page[next(iter(self._page))]

    def page_time(self, since: float) -> Optional[Tuple[str, float]]:
        """(documentId, page time) of the act at cursor `since`, or None when `since` is no act's."""
        return self._page.get(since)

    def acts(self) -> List[float]:
        """The cursors of the acts remembered, oldest first."""
        return sorted(self._page)


class _PendingCommands:
    """The commands sent to a tab that still wait for its answer: a future each, under the id the
    page's reply echoes (c1, c2, ...)."""

    def __init__(self) -> None:
        self._futures: Dict[str, asyncio.Future] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._futures)

    def open(self) -> Tuple[str, asyncio.Future]:
        """A new command id and the future its reply resolves."""
        self._next += 1
        cid = "c%d" % self._next
        fut = asyncio.get_running_loop().create_future()
        self._futures[cid] = fut
        return cid, fut

    def close(self, cid: str) -> None:
        self._futures.pop(cid, None)

    def resolve(self, msg: dict) -> None:
        """The page's reply to a command: its future gets the message (a late or unknown id is ignored)."""
        fut = self._futures.get(str(msg.get("id")))
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def fail(self, error: Callable[[], Exception]) -> None:
        """Every command still waiting fails with an `error()` of its own, and none waits any more."""
        for fut in list(self._futures.values()):
            if not fut.done():
                fut.set_exception(error())
        self._futures.clear()


class _HeldReports:
    """In a device, the requests the page reported that the browser has not confirmed yet (see
    _BrowserSession._must_confirm), in the page's order, each with its deadline on the daemon's clock
    (NET_CONFIRM_S after it came).  One the browser confirms is admitted (`admit`, which stores it);
    one it never confirms is refused: kept as `net.unmade` and counted as the blind spot
    `request-not-made`, which the verdict names under integrity."""

    def __init__(self, clock: Callable[[], float], store: _EventStore, tab_id: str,
                 made: Callable[[dict], bool], admit: Callable[[dict, int], None], wake: Callable[[], None]) -> None:
        self._clock = clock
        self._store = store
        self._tab_id = tab_id
        self._made = made          # did the browser make the request this report's data names?
        self._admit = admit
        self._wake = wake
        self.items: List[Tuple[float, dict, int]] = []  # (deadline, event, size)
        self._timer: Any = None

    def __len__(self) -> int:
        return len(self.items)

    def hold(self, event: dict, size: int) -> None:
        if len(self.items) >= 2000:
            self._refuse(self.items.pop(0))
        self.items.append((self._clock() + NET_CONFIRM_S * 1000.0, event, size))
        if self._timer is None:
            self._timer = tornado.ioloop.IOLoop.current().call_later(NET_CONFIRM_S, self._due)

    def _due(self) -> None:
        self._timer = None
        self.release(confirmed_only=False)
        if self.items:
            self._timer = tornado.ioloop.IOLoop.current().call_later(
                max(0.01, (self.items[0][0] - self._clock()) / 1000.0), self._due)

    def release(self, confirmed_only: bool) -> None:
        """Let held reports through in the page's order: each the browser confirms now is admitted; one
        past its deadline that it never confirmed is refused (unless `confirmed_only`).  A report
        still waiting stops the ones after it.  Whoever waits for the tab's events is woken."""
        now = self._clock()
        while self.items:
            deadline, event, size = self.items[0]
            if self._made(event["data"]):
                self.items.pop(0)
                self._admit(event, size)
            elif not confirmed_only and now >= deadline:
                self._refuse(self.items.pop(0))
            else:
                break
        self._wake()

    def _refuse(self, item: Tuple[float, dict, int]) -> None:
        """A report the browser never confirmed: kept as `net.unmade` (no net predicate reads it) and
        counted as the blind spot `request-not-made`."""
        _, event, size = item
        data = event["data"]
        event["type"] = "net.unmade"
        event["t"] = self._clock()
        self._store.add(event, size)
        label = "%s %s → %s" % (data.get("method") or "GET", _net_key_url(data.get("url")), data.get("status"))
        self._store.add({"t": self._clock(), "type": "blind-spot", "data": {
            "reason": "request-not-made", "count": 1,
            "detail": "the page reported %s, which the browser never made" % _short(label, 200)}}, 64)
        self._store.note_blind_spot("request-not-made", 1, label)
        _emit(_bridge_log, logging.WARNING, "request_not_made", sessionId=self._tab_id, request=_short(label, 200))


class _SnapshotCache:
    """The last snapshot of each (scope, mode) of a tab, as lines without focus and with the route it
    was taken on, for the next one's diff (_snapshot_answer); a navigation forgets them all."""

    def __init__(self) -> None:
        self._last: Dict[Tuple[Optional[str], str], Tuple[str, List[str]]] = {}

    def remember(self, scope: Optional[str], mode: str,
                 result: dict) -> Tuple[Optional[Tuple[str, List[str]]], Tuple[str, List[str]]]:
        """Keep the page's snapshot `result` as the last of its (scope, mode) -> (the one it replaces, or
        None, and this one), each as (route, lines)."""
        tree = str(result.get("tree", ""))
        route = str((result.get("status") or {}).get("route", ""))
        lines = [re.sub(r" \[focused\]|,focused|focused,", "", ln) for ln in tree.splitlines()]
        key = (scope, mode)
        prev = self._last.get(key)
        self._last[key] = (route, lines)
        return prev, (route, lines)

    def clear(self) -> None:
        self._last.clear()


class _TabState:
    """What the daemon knows of one tab, whichever socket carries it: its identity, the document it is
    on and one on its way, its health, act marks, open requests and snapshots (each a part of its
    own, above), and what the verdict rules read of it (now, window, known, floor).  _BrowserSession
    is the tab itself: this state plus its traffic (the frames it sends, the commands it is sent)."""

    def __init__(self, bridge: "_Bridge", handler: "_BridgeHandler", hello: dict) -> None:
        """A tab as the daemon knows it, from its hello: the socket, the event store and the parts,
        the sampling windows of its frames, and the document it is on."""
        self.bridge = bridge
        self.clock: Callable[[], float] = bridge.clock  # the daemon's one clock (_clock_ms)
        self.handler: Optional[_BridgeHandler] = handler
        self.id = hello["sessionId"]
        self.generation = 0
        self.connected_at = self.clock()
        self.first_connected_at = self.connected_at
        self.reconnects = 0
        self.store = _EventStore(self.clock)
        self.pending = _PendingCommands()
        self.marks = _ActMarks()
        self.requests = _OpenRequests()
        self.health = _TabHealth(self.clock)
        self.snapshots = _SnapshotCache()
        self.left_at: Optional[float] = None       # when the last socket went away (the daemon's clock)
        # the frame path's sampling and pacing (_BrowserSession.ingest, frame_pause), on the daemon's clock
        self._window_start = 0.0
        self._window_count = 0
        self._window_high = 0
        self._window_sampled = 0
        self.frame_window = [0.0, 0]  # [start (clock ms), frame bytes read in it] for this tab
        self.paused_ms = 0.0          # how long the bridge stopped reading this tab (_Bridge.frame_pause)
        self._changed: Optional[asyncio.Future] = None
        self.device: Optional[_Device] = None  # set when a device the daemon started owns this tab
        self.document_id = str(hello.get("documentId") or "")[:64]
        # (documentId, until): a hello whose events are still on the way
        self.arriving: Optional[Tuple[str, float]] = None
        self.server_tickets = _ServerTickets()   # the one-use marks the SDK puts on its requests (Server truth)
        self.server_seen = 0                      # records the app's middleware reported for this tab
        self.update_identity(hello)

    def update_identity(self, hello: dict) -> None:
        self.url = str(hello.get("url", ""))[:4096]
        self.title = str(hello.get("title", ""))[:512]
        adapters = hello["adapters"] if isinstance(hello.get("adapters"), list) else []
        self.adapters = [str(a)[:128] for a in adapters[:32]]
        self.sdk_version = str(hello.get("sdkVersion", ""))[:64]
        self.has_capabilities = bool(hello.get("hasCapabilities"))
        self.last_seen = self.clock()

    # -- health -------------------------------------------------------------
    def last_seen_ms(self) -> int:
        return int(self.clock() - self.last_seen)

    def throttled(self) -> bool:
        return self.health.throttled(self.last_seen_ms())

    def not_answering(self) -> Optional[str]:
        """Why the page does not answer commands, or None (_TabHealth.not_answering)."""
        return self.health.not_answering(self.last_seen_ms())

    def refuse_if_throttled(self, refuse: Optional[bool]) -> None:
        if refuse and self.throttled():
            raise ToolError("the tab is throttled (hidden, or silent for %d ms); nothing was driven."
                            % self.last_seen_ms(), "bring the tab to the front and retry")

    def note_dialog(self, record: dict) -> None:
        """A dialog the device answered: kept for the answers (_with_health) and as an event."""
        now = self.clock()
        self.health.dialogs.append((now, record))
        self.store.add({"t": now, "type": "dialog", "data": dict(record)}, 256)
        self._wake()

    def _page_dialog(self, data: dict, t: float) -> None:
        """The SDK saw a dialog open or close in a person's tab (_TabHealth.page_dialog): while it is open,
        commands fail fast and waiting ones are failed (the page cannot answer).  In a device the
        device answers dialogs itself (_answer_device_dialog), so these are only kept."""
        if self.device is not None:
            return
        kind = self.health.page_dialog(data, t)
        if kind is None:
            return
        _emit(_bridge_log, logging.INFO, "tab_dialog_open", sessionId=self.id, dialogType=kind)
        why = self.not_answering() or "a dialog is open"
        self.pending.fail(lambda: ToolError(why + "; whether the command finished is not known",
                                            "ask the person to close the dialog in the browser, then check",
                                            code="dialog_open"))

    # -- documents ------------------------------------------------------------
    def now(self) -> float:
        return self.clock()

    def open_since(self, t: float) -> List[dict]:
        """Requests still open that started at or after `t` (each with `startedAt`)."""
        return self.requests.since(t)

    def navigating(self) -> bool:
        """The page is leaving its document: it reported a navigation (a form post, a link) whose
        next document has not connected yet.  Judging the page now would judge the one going away."""
        return self.requests.document_since(self.now() - NAV_WAIT_S * 1000.0)

    def arrived(self, hello: dict) -> None:
        """A hello on a live session.  From a new document, its first events (the request that
        brought it, with its status) travel in the frames after the hello: until one lands, or
        ARRIVAL_WAIT_MS pass, the tab is still between documents."""
        doc = str(hello.get("documentId") or "")[:64]
        if doc and doc != self.document_id:
            self.arriving = (doc, self.now() + ARRIVAL_WAIT_MS)
            self.store.new_document()
        self.document_id = doc or self.document_id

    def between_documents(self) -> bool:
        """Is the tab between two documents: gone from its socket, a new document's first events still
        on their way, or a navigation on its way?  A question only: call expire_arrival() first."""
        return self.handler is None or self.arriving is not None or self.navigating()

    def expire_arrival(self) -> None:
        """A new document whose first events did not come within ARRIVAL_WAIT_MS is no longer waited
        for, and the window says so (a blind spot), so a verdict that needed the request that brought
        it is unknown, not a false no."""
        if self.arriving is not None and self.now() >= self.arriving[1]:
            self.store.add({"t": self.now(), "type": "blind-spot", "data": {
                "kind": "arrival-unseen", "reason": "arrival-unseen", "count": 1, "documentId": self.arriving[0],
                "detail": "the new page said hello but sent nothing within %d ms" % ARRIVAL_WAIT_MS}}, 128)
            self.arriving = None

    async def next_document(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the tab's next document to connect.
        False when the tab closed, crashed, or its next document never came."""
        _progress_note("waiting for the next document of tab %s to connect" % self.id)
        until = self.now() + timeout * 1000.0
        while True:
            self.expire_arrival()
            if not self.between_documents():
                return True
            left = (until - self.now()) / 1000.0
            if left <= 0:
                return False
            if self.handler is None:
                if not await self.bridge.wait_back(self, left):
                    return False
            else:
                await self.wait_change(min(0.05, left))

    def document_on_its_way(self, rid: str, method: str, url: str) -> None:
        """A device's browser started loading a new document in this tab (_NetRecord._on_document):
        recorded as the SDK records a form submission it announces, an open document request, so
        the tab is between documents (navigating) until the next document connects."""
        if self.requests.document_on_its_way(rid, method, url, self.now()):
            self._wake()

    def document_not_coming(self, rid: Optional[str]) -> None:
        """The browser's navigation `rid` (every one, with None) brought no document after all
        (_OpenRequests.document_not_coming)."""
        self.requests.document_not_coming(rid)
        self._wake()

    # -- what the verdict rules read -----------------------------------------
    def known(self, floor: float) -> "_Known":
        parts = urllib.parse.urlsplit(self.url)
        origin = "%s://%s" % (parts.scheme, parts.netloc) if parts.scheme and parts.netloc else ""
        before = self.store.query(max(0.0, floor - BACKGROUND_MS), floor, prefix="net.request")
        seen = collections.Counter(_call_label(e["data"]) for e in before)
        writes = {_call_label(e["data"]) for e in before if _is_write(e["data"])}
        background = tuple(sorted(label for label, n in seen.items() if n >= 2 or label in writes))
        # a timer's requests: made twice or more before, each on its own (not within 2 s after an act)
        acts = self.marks.acts()
        unprompted = collections.Counter(_call_label(e["data"]) for e in before if not any(
            0 <= e["t"] - a <= 2000 for a in acts))
        known = _Known(self.requests.all(), self.store.blind_spot_counts(), self.store.loss_since(floor),
                       origin, background, self.store.page_blind_spots(), self.server_seen,
                       polled=tuple(sorted(label for label, n in unprompted.items() if n >= 2)))
        known.stuck = self.not_answering() or ""
        return known

    # -- cursors --------------------------------------------------------------
    @property
    def last_act(self) -> Optional[float]:
        """The cursor of the tab's last act, or None (_ActMarks)."""
        return self.marks.last_act

    def mark_act(self, action: Optional[str]) -> float:
        return self.marks.act(self.clock(), action)

    def note_act_page_time(self, since: float, result: Any) -> None:
        self.marks.note_page_time(since, result)

    def window(self, since: float, until: Optional[float] = None, prefix: Optional[str] = None) -> List[dict]:
        """Events from `since` on; when `since` is an act, none the page made before it."""
        events = self.store.query(since, until, prefix)
        mark = self.marks.page_time(since)
        if mark is None:
            return events
        doc, pt = mark
        return [e for e in events if e.get("doc") != doc or "pt" not in e or e["pt"] >= pt]

    def mark_navigation(self) -> float:
        self.snapshots.clear()
        return self.marks.navigation(self.clock())

    def floor(self) -> float:
        """Events count from the last act or navigation on."""
        return self.marks.floor()

    # -- what the page answers ------------------------------------------------
    def resolve_command(self, msg: dict) -> None:
        self.health.unanswered = None  # the page answers again
        self.pending.resolve(msg)

    def fail_pending(self, why: str) -> None:
        self.pending.fail(lambda: _TabGone(why, "call reticle_sessions and retry on the live tab"))

    def add_server_record(self, rec: dict) -> None:
        """What the app's server did for one of this tab's requests (Server truth section)."""
        self.server_seen += 1
        self.store.add({"t": self.clock(), "type": "server.request", "data": rec}, 256 + len(_dumps(rec)))
        self._wake()

    # -- waking ---------------------------------------------------------------
    def _wake(self) -> None:
        """Wake whoever waits for this tab's next event (wait_change)."""
        changed = self._changed
        if changed is not None and not changed.done():
            changed.set_result(None)

    async def wait_change(self, timeout: float) -> None:
        """Sleep until the next event arrives or `timeout` seconds pass."""
        if timeout <= 0:
            return
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._changed), timeout)
        except asyncio.TimeoutError:
            pass


class _BrowserSession(_TabState):
    """One connected tab: the state _TabState keeps, and its traffic: the frames of events its page
    sends (ingest; in a device, the reports the browser must confirm; what each kept event teaches
    the tab) and the commands the daemon sends it (command; the page's replies resolve them)."""

    def __init__(self, bridge: "_Bridge", handler: "_BridgeHandler", hello: dict) -> None:
        super().__init__(bridge, handler, hello)
        self.held = _HeldReports(self.clock, self.store, self.id, self._browser_made, self._admit, self._wake)

    # -- events ---------------------------------------------------------------
    def ingest(self, events: List[Any], frame_bytes: int) -> None:
        """Take one frame's events from the page (untrusted) into the store.  Malformed events and forged
        server.* ones become blind spots; past `events_per_second` events are dropped (high-value ones
        have a cap of their own, so churn cannot crowd them out) and a blind spot counts the drops.
        Each kept event gets the daemon's clock (one cursor each) and its document; a report the
        browser must confirm is held until it does.  This is the bridge's hot path: most frames are
        taken whole (_ingest_plain), the rest event by event (_ingest_each), where what holds for the
        whole frame (the device, the caps, the document) is looked up once, not per event."""
        now = self.bridge.clock()
        self.last_seen = now
        if not events:
            return
        size = max(1, frame_bytes // len(events))
        cap = self.bridge.events_per_second
        if now - self._window_start >= 1000.0:
            self._next_sampling_window(now, cap)
        if not self._ingest_plain(events, now, frame_bytes, cap):
            self._ingest_each(events, now, size, cap)
        self.store.trim(now)
        self._wake()

    def _ingest_each(self, events: List[Any], now: float, size: int, cap: int) -> None:
        """ingest's loop, event by event: for any frame _ingest_plain does not take."""
        dropped = 0
        kept: List[dict] = []
        sizes: List[int] = []
        keep, keep_size, observed, high_set = kept.append, sizes.append, _OBSERVED_TYPES, _HIGH_VALUE_SET
        confirm, health = isinstance(self.device, _Device), self.health  # a device's reports wait for the browser
        n_high, n_other = self._window_high, self._window_count
        last_doc: Any = None  # a frame's events mostly share their document: its checks run once
        doc = ""
        for index, raw in enumerate(events):
            etype = raw.get("type") if raw.__class__ is dict or isinstance(raw, dict) else None
            if etype.__class__ is not str and not isinstance(etype, str):
                self.store.note_blind_spot("malformed-event")
                continue
            if len(etype) > 64:
                etype = etype[:64]
            if etype.startswith("server."):  # only the app's authenticated middleware reports these
                self.store.note_blind_spot("forged-server-event")
                continue
            # Ordinary events share `cap` per second; high-value ones (requests, errors, signals...) have their own.
            if etype in high_set:
                n_high += 1
                over = n_high > cap
            else:
                n_other += 1
                over = n_other > cap
            if over:
                dropped += 1
                continue
            data = raw.get("data")
            if data.__class__ is not dict and not isinstance(data, dict):
                data = {} if data is None else {"value": data}  # downstream code reads fields: an object each
            value = raw.get("documentId")
            has_doc = value is not None and value == last_doc  # only ever a string, so only a string equals it
            if not has_doc and value is not None and isinstance(value, str):
                last_doc, doc, has_doc = value, value[:64], True
                if self.arriving is not None and doc == self.arriving[0]:
                    self.arriving = None
            pt, action = raw.get("t"), raw.get("actionId")
            has_pt = pt.__class__ is float or isinstance(pt, (int, float))
            # a microsecond apart: every event has its own cursor, so an answer can stop between two
            if has_pt and has_doc and action is None:  # most events: built whole, `seq` (the store's) last
                event = {"t": now + index * 0.001, "type": etype, "data": data, "pt": pt, "doc": doc, "seq": 0}
            else:
                event = {"t": now + index * 0.001, "type": etype, "data": data}
                if has_pt:
                    event["pt"] = pt
                if action is not None and isinstance(action, str):
                    event["actionId"] = action[:32]
                if has_doc:
                    event["doc"] = doc
            if confirm and self._must_confirm(event):
                self._hold(event, size)
                continue
            if etype in observed or health.dialog_open is not None:  # from any other, _observe learns nothing
                self._observe(event)
            value = _event_bytes(data)
            keep(event)
            keep_size(value if value >= size else size)
        self._window_high, self._window_count = n_high, n_other
        self.store.add_frame(kept, sizes)
        if dropped:
            self._window_sampled += dropped
            self.store.note_sampled(dropped, now)

    def _ingest_plain(self, events: List[Any], now: float, frame_bytes: int, cap: int) -> bool:
        """The frame path's common case, the frame taken whole in a few passes instead of a loop of checks
        per event: a plain frame (_plain_frame) with none of its events over the caps, none a device
        must confirm, and no dialog open.  It stores what _ingest_each would, sized as one run
        (_EventStore.add_run) rather than event by event; False, having changed nothing, otherwise."""
        plain = _plain_frame(events, frame_bytes)
        n = len(events)
        if plain is None or self.health.dialog_open is not None or self._window_high + plain.high > cap or \
                self._window_count + n - plain.high > cap:
            return False
        if "net.request" in plain.counts and self.device is not None:  # a device confirms what its page reports
            return False
        self._window_high += plain.high
        self._window_count += n - plain.high
        if self.arriving is not None and plain.doc == self.arriving[0]:
            self.arriving = None
        doc = plain.doc
        built = [{"t": now + index * 0.001, "type": etype, "data": data, "pt": pt, "doc": doc, "seq": seq}
                 for index, seq, etype, data, pt in zip(range(n), self.store.cursors(n), plain.types, plain.datas,
                                                        plain.pts)]
        for event in built if plain.observed else ():
            if event["type"] in _OBSERVED_TYPES:
                self._observe(event)
        self.store.add_run(built, plain.types, plain.counts, 3 * frame_bytes + 512 * n)
        return True

    def _next_sampling_window(self, now: float, cap: int) -> None:
        """A new second of the events-per-second cap: the last one's drops become one blind spot."""
        if self._window_sampled:
            self.store.add({"t": now, "type": "blind-spot", "data": {
                "reason": "sampled", "count": self._window_sampled,
                "detail": "the page sent more than %d events/s; churn events were dropped" % cap}}, 64)
        self._window_start = now
        self._window_count = 0
        self._window_high = 0
        self._window_sampled = 0

    # -- a device's page reports, checked against the browser's own record -----------------
    def _must_confirm(self, event: dict) -> bool:
        """In a device, a request the page reports (fetch, XHR, beacon) counts only once the
        browser's network record shows it: a page script can forge an event into its SDK's
        socket, but not make the browser have made the request."""
        if not isinstance(self.device, _Device) or event["type"] != "net.request" or \
                event["data"].get("initiator") == "document":
            return False
        if not _net_key_url(event["data"].get("url")).startswith("http"):
            return False
        return not self.device.made_request(event["data"]) or bool(self.held)  # keep the page's order

    def _hold(self, event: dict, size: int) -> None:
        self.held.hold(event, size)

    def admit_held(self, confirmed_only: bool) -> None:
        """Let held reports through in the page's order (_HeldReports.release)."""
        self.held.release(confirmed_only)

    # -- what a kept event teaches the tab ------------------------------------
    def _browser_made(self, data: dict) -> bool:
        """Did the tab's device's browser make the request a page report names?"""
        return isinstance(self.device, _Device) and self.device.made_request(data)

    def _admit(self, event: dict, size: int) -> None:
        """A held report the browser confirmed joins the store as of now (_HeldReports.release)."""
        event["t"] = self.clock()
        self._observe(event)
        self.store.add(event, size)

    def _observe(self, event: dict) -> None:
        """What the session learns from one kept event beyond storing it: open requests (pending until
        answered), a document request's status hidden behind redirects, the tab's visibility and focus,
        its URL after a route change, and the page's own blind spots."""
        etype = event["type"]
        data = event["data"] if isinstance(event["data"], dict) else {}
        health = self.health
        if etype == "page.dialog":
            self._page_dialog(data, event["t"])
        elif health.dialog_open is not None:
            health.dialog_open = None  # the page runs again, so its dialog closed
        if etype in ("net.request", "net.pending", "net.ws"):
            self.bridge.hub.faults.mark(self, event)  # faulted: true only for a fault of this tab
        if etype == "net.pending" and data.get("requestId"):
            self.requests.started(event, data)
        elif etype == "net.request" and data.get("requestId"):
            self.requests.answered(event)
            _take_wire_status(data)
            if data.get("initiator") == "document" and data.get("redirected") and data.get("statusKnown") is not False:
                # Navigation Timing gives the status of the page the redirects led to, not of the
                # request (a form POST answered 302): that one is hidden from the page.
                data["finalStatus"] = data.get("status")
                data["status"] = None
                data["statusKnown"] = False
                data["statusNote"] = ("it was answered with a redirect (3xx; the browser does not say which) to %s, "
                                      "which answered %s"
                                      % (data.get("finalUrl") or "another page", data["finalStatus"]))
        elif etype == "page.health":
            health.hidden = bool(data.get("hidden"))
            health.focused = bool(data.get("focused", True))
        elif etype == "route.change" and isinstance(data.get("to"), str):
            self.url = data["to"][:4096]
        elif etype == "blind-spot":
            try:
                count = int(data["count"]) if data.get("count") is not None else 1
            except (TypeError, ValueError, OverflowError):  # OverflowError: an infinity (_loads_frame)
                count = 1
            self.store.note_blind_spot(str(data.get("reason", "unknown")), count, str(data.get("detail") or ""))

    # -- commands -------------------------------------------------------------
    async def command(self, name: str, args: dict, timeout: float = COMMAND_TIMEOUT_S) -> Any:
        """Send one command to the page and return its result, waiting at most `timeout` and never past
        the tool call's `timeout_ms`; a person's tab blocked by an open dialog fails at once.  ToolError
        when the tab is gone, does not answer (saying whether it is still heard from) or refuses (with
        the page's code when it is a known one)."""
        handler = self.handler
        if handler is None:
            raise ToolError("the tab %s disconnected before %s could run." % (self.id, name),
                            "call reticle_sessions and retry on the live tab")
        if self.health.dialog_open is not None and self.device is None:
            raise ToolError("command '%s' was not sent: %s." % (name, self.not_answering()),
                            "ask the person to close the dialog in the browser, then retry", code="dialog_open")
        timeout = _command_budget(min(timeout, STUCK_COMMAND_S) if self.health.unanswered is not None else timeout,
                                  self.clock())
        cid, fut = self.pending.open()
        device = self.device if name in ("act", "act_sequence") else None
        if device is not None:  # in a device the SDK asks the daemon for real input (Devices section)
            args = dict(args, input="cdp")
            device.acting += 1
            device.dialog_policy = _dialog_policy(args)
        handler.send_json({"kind": "command", "id": cid, "sessionId": self.id, "name": name, "args": args})
        try:
            reply = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            self.health.unanswered = (self.clock(), name)
            note = ""
            if self.last_seen_ms() <= 2000:
                note = " The page is alive (heard %d ms ago) but did not answer this command." % self.last_seen_ms()
            raise ToolError("command '%s' timed out after %d ms.%s" % (name, timeout * 1000, note),
                            "reticle_sessions shows the tab's health; reload the page if it is stuck (in a device: "
                            "reticle_navigate {reload: true})", code="not_answering") from None
        finally:
            self.pending.close(cid)
            if device is not None:
                device.acting -= 1
                if not device.acting:
                    device.dialog_policy = None
        return _command_result(reply)


async def _poll(check: Callable[[], bool], timeout: float, step: float, clock: Callable[[], float]) -> bool:
    """Check every `step` s until `check()` holds (True) or `timeout` s pass on `clock` (the daemon's, ms)
    (False)."""
    deadline = clock() + timeout * 1000.0
    while not check():
        left = (deadline - clock()) / 1000.0
        if left <= 0:
            return False
        await asyncio.sleep(min(step, left))
    return True


class _Bridge:
    """All browser sessions of one daemon, keyed by the id the page chose."""

    def __init__(self, hub: "Hub") -> None:
        self.hub = hub
        self.clock = hub.clock
        self.sessions: Dict[str, _BrowserSession] = {}
        self.pending_handshakes = 0
        self.pending: "collections.OrderedDict[Any, None]" = collections.OrderedDict()  # sockets before hello
        self.refusals: collections.deque = collections.deque(maxlen=5)
        self.ever_connected = 0
        self.events_per_second = EVENTS_PER_SECOND_DEFAULT
        self.frame_window = [0.0, 0]  # [start (clock ms), frame bytes read in it], all tabs together
        # the fairness caps on event frames (frame_pause); make_app(tab_byte_rate=, total_byte_rate=) sets them too
        self.tab_byte_rate = _env_byte_rate("RETICLE_TAB_BYTES_PER_S", FRAME_BYTES_PER_TAB_S)
        self.total_byte_rate = _env_byte_rate("RETICLE_ALL_TABS_BYTES_PER_S", FRAME_BYTES_ALL_TABS_S)
        # Tabs that went away recently, kept so that a reload (same id, new
        # socket) keeps its buffer and cursors instead of starting blind.
        self.departed: Dict[str, Tuple[_BrowserSession, float]] = {}

    def live(self) -> List[_BrowserSession]:
        return list(self.sessions.values())

    def frame_pause(self, session: "_BrowserSession", size: int) -> float:
        """After a frame of events from `session`: 0.0, or the seconds until that tab may send again,
        once it has sent `tab_byte_rate` this second (or all tabs together `total_byte_rate`).  The
        bridge then stops reading its socket that long: a tab that floods is slowed by its own
        socket (its SDK's queue fills and says so), and other tabs and clients keep their share."""
        now = self.clock()
        mine, shared = session.frame_window, self.frame_window
        for window in (mine, shared):
            if now - window[0] >= 1000.0:
                window[0], window[1] = now, 0
            window[1] += size
        over = [w for w, cap in ((mine, self.tab_byte_rate), (shared, self.total_byte_rate)) if w[1] > cap]
        if not over:
            return 0.0
        wait_ms = 1000.0 - (now - max(w[0] for w in over))
        session.paused_ms += wait_ms
        return max(0.0, wait_ms / 1000.0)

    def get(self, session_id: str) -> Optional[_BrowserSession]:
        return self.sessions.get(session_id)

    def note_refusal(self, reason: str) -> None:
        self.refusals.append({"at": _wall_iso(), "reason": reason})
        _emit(_bridge_log, logging.WARNING, "bridge_refused", reason=reason)

    def why(self) -> str:
        origin = self.hub.public_origin()
        text = ("no browser session is connected. Load the app in a browser with "
                '<script src="%s/reticle.js"></script> in its dev HTML (the page must be on '
                "localhost or 127.0.0.1, or allow-listed with RETICLE_ALLOWED_ORIGINS and given the "
                "token), then call reticle_sessions again; or let Reticle open the app itself: "
                "reticle_open {url} starts a browser with the SDK injected." % origin)
        if self.ever_connected:
            text = "every tab that connected has gone (%d seen since start). " % self.ever_connected + text
        if self.refusals:
            last = self.refusals[-1]
            text = "NOTE: the bridge refused a connection recently (%s: %s). " % (last["at"], last["reason"]) + text
        return text

    def resolve(self, session_id: Optional[str]) -> _BrowserSession:
        if session_id:
            s = self.sessions.get(session_id)
            if s is None:
                live = ", ".join("%s (%s)" % (x.id, x.url) for x in self.sessions.values()) or "none"
                raise ToolError("unknown sessionId %r; connected sessions: %s" % (session_id, live),
                                "pass one of the connected ids, or omit sessionId when one tab is connected")
            return s
        if not self.sessions:
            raise ToolError(self.why(), "connect a tab (see reticle_sessions), then retry")
        if len(self.sessions) == 1:
            return next(iter(self.sessions.values()))
        # Several tabs: never guess between live ones.  A lone tab that is
        # not hidden or silent among throttled ones is the only implicit pick.
        awake = [s for s in self.sessions.values() if not s.throttled()]
        if len(awake) == 1:
            return awake[0]
        raise ToolError("multiple sessions connected — pass sessionId: %s" % ", ".join(
            "%s (%s)" % (s.id, s.url) for s in self.sessions.values()), "pass sessionId")

    def attach(self, handler: "_BridgeHandler",
               hello: dict) -> Tuple[Optional[_BrowserSession], Optional[Tuple[int, str]]]:
        """Bind a hello to its session: a known or just-departed id is taken over (its pending commands
        fail, an older socket is closed as replaced), a new one is created; (None, close code) when the
        daemon already holds MAX_SESSIONS tabs."""
        sid = hello["sessionId"]
        self._reap_departed()
        old = self.sessions.get(sid)
        if old is None and sid in self.departed:
            old = self.departed.pop(sid)[0]
            self.sessions[sid] = old
        if old is None and len(self.sessions) >= MAX_SESSIONS:
            self.note_refusal("session limit reached (%d tabs)" % MAX_SESSIONS)
            return None, (1013, "session limit reached")
        if old is not None:
            session = old
            old_handler = old.handler
            old.fail_pending("the tab %s was replaced by a newer connection before the command answered" % sid)
            session.handler = handler
            session.generation += 1
            session.reconnects += 1
            session.connected_at = self.clock()
            session.requests.clear()      # a new document: the old one's requests can no longer answer
            session.health.new_document()  # a new document answers for itself
            session.arrived(hello)
            session.update_identity(hello)
            if old_handler is not None and old_handler is not handler:
                old_handler.replaced = True
                reason = ("session replaced by a newer connection claiming the same id (%s)" % sid)[:120]
                old_handler.close(1008, reason)
            _emit(_bridge_log, logging.INFO, "session_replaced", sessionId=sid, url=session.url)
        else:
            session = _BrowserSession(self, handler, hello)
            self.sessions[sid] = session
            _emit(_bridge_log, logging.INFO, "session_connected", sessionId=sid, url=session.url)
        self.ever_connected += 1
        return session, None

    def detach(self, handler: "_BridgeHandler") -> None:
        session = handler.session
        if session is None or session.handler is not handler:
            return
        session.handler = None
        session.left_at = self.clock()
        session.fail_pending("the tab %s disconnected before the command answered" % session.id)
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
            self.departed[session.id] = (session, self.clock())
            self._reap_departed()
            while len(self.departed) > MAX_DEPARTED:  # oldest first: dicts keep insertion order
                del self.departed[next(iter(self.departed))]
        _emit(_bridge_log, logging.INFO, "session_disconnected", sessionId=session.id)
        # the buffer of a tab that does not come back is freed when its keep ends, not at the next connect
        keep = DEPARTED_KEEP_MS
        tornado.ioloop.IOLoop.current().call_later(keep / 1000.0 + 0.05, lambda: self._reap_departed(keep))

    def _reap_departed(self, keep_ms: float = DEPARTED_KEEP_MS) -> None:
        now = self.clock()
        for sid, (_, gone_at) in list(self.departed.items()):
            if now - gone_at > keep_ms:
                del self.departed[sid]

    async def wait_back(self, session: _TabState, timeout: float) -> bool:
        """Wait up to `timeout` s for `session` (the same tab) to connect again."""
        return await _poll(lambda: session.handler is not None and self.sessions.get(session.id) is session,
                           timeout, 0.025, self.clock)

    def _returning(self, session_id: Optional[str]) -> Optional[_BrowserSession]:
        """A tab that left less than NAV_WAIT_S ago and may be loading its next document."""
        now = self.clock()
        recent = [s for s, _ in self.departed.values()
                  if s.left_at is not None and now - s.left_at < NAV_WAIT_S * 1000.0]
        if session_id:
            return next((s for s in recent if s.id == session_id), None)
        return recent[-1] if len(recent) == 1 and not self.sessions else None

    async def resolve_soon(self, session_id: Optional[str]) -> _BrowserSession:
        """resolve(), but a tab between two documents is waited for (up to NAV_WAIT_S) instead
        of being reported gone: a form post or a link replaces the page, not the tab."""
        try:
            return self.resolve(session_id)
        except ToolError:
            back = self._returning(session_id)
            if back is None or back.left_at is None or not await self.wait_back(
                    back, NAV_WAIT_S - (self.clock() - back.left_at) / 1000.0):
                raise
            return back

    async def wait_reconnect(self, session_id: str, generation: int, timeout: float) -> bool:
        """Wait up to `timeout` s for a newer connection (a later generation) of the tab."""
        def back() -> bool:
            s = self.sessions.get(session_id)
            return s is not None and s.generation > generation and s.handler is not None
        return await _poll(back, timeout, 0.05, self.clock)

    def close_all(self) -> None:
        for s in list(self.sessions.values()):
            if s.handler is not None:
                s.handler.close(1001, "reticle daemon stopping")


def _dialog_policy(cmd: dict) -> Optional[dict]:
    """How an act's dialogs are answered: {"accept", "promptText"} from its args' `dialog`
    ("accept" | "dismiss"), or None (dismiss)."""
    raw = cmd.get("steps")
    steps: List[Any] = raw if isinstance(raw, list) else [cmd]
    for step in steps:
        act_args: Dict[str, Any] = {}
        if isinstance(step, dict) and isinstance(step.get("args"), dict):
            act_args = step["args"]
        choice = act_args.get("dialog")
        if choice in ("accept", "dismiss"):
            return {"accept": choice == "accept", "promptText": str(act_args.get("promptText", ""))}
    return None


def _act_command(args: dict) -> dict:
    if not args.get("ref") and not args.get("target"):
        raise ToolError("%s needs a `ref` (from snapshot/query) or a `target` such as "
                        '{"role": "button", "name": "Save"}.' % args.get("action", "the action"),
                        "take a reticle_snapshot first, or pass target")
    cmd = {"action": args["action"], "args": args.get("args", {})}
    if args.get("ref"):
        cmd["ref"] = args["ref"]
    else:
        cmd["target"] = args["target"]
    return cmd


def _summarise(events: List[dict]) -> dict:
    c = collections.Counter(e["type"] for e in events)
    messages = sum(1 for e in events if e["type"] in _FRAME_TYPES and e["data"].get("direction") in ("in", "out"))
    return {
        "total": len(events),
        "network": c["net.request"] + messages,
        "messages": messages,
        "domAdded": c["dom.added"], "domRemoved": c["dom.removed"],
        "domChanged": c["dom.attr"] + c["dom.text"],
        "routeChanges": c["route.change"],
        "consoleErrors": c["console.error"] + c["error.uncaught"],
        "animations": sum(v for k, v in c.items() if k.startswith("anim.")),
        "signals": c["signal"],
    }


###############################################################################
# Devices (CDP) ###############################################################
###############################################################################
# A device is a browser the daemon starts and owns (DESIGN section 8).  The
# daemon speaks the Chrome DevTools Protocol to it over tornado.websocket,
# injects the SDK into every document before any page script, and turns the
# SDK's act requests into real input (Input.*, event.isTrusted true).

_device_log = logging.getLogger("reticle.devices")

DEVICE_BUDGET_DEFAULT = (5, 600.0)         # starts per session key per window (RETICLE_DEVICE_BUDGET)
MAX_DEVICES_DEFAULT = 4                    # alive at once (RETICLE_MAX_DEVICES)
DEVICE_IDLE_S = 600.0                      # a device closes when its session key is idle this long
DEVICE_EVICT_IDLE_S = 120                  # ... or, when all are taken and another client needs one, this long
DEVICE_BUDGET_ALL_SCALE = 4                # all session keys together: 4 x RETICLE_DEVICE_BUDGET
DEVICE_START_TIMEOUT_S = 20.0              # browser launch until its DevTools endpoint answers
DEVICE_CONNECT_TIMEOUT_S = 15.0            # navigation until the injected SDK's hello
DEVICE_VIEWPORT = (1280, 800)
SPARE_DEVICES_DEFAULT = 1                  # spare browsers kept started once a device was asked for
CDP_MAX_MESSAGE_BYTES = 256 << 20          # full-page screenshots arrive as one base64 frame
SCREENSHOT_INLINE_MAX_WIDTH = 1280
SCREENSHOT_MAX_HEIGHT = 16384              # a full-page capture stops here: a taller PNG overruns CDP's read buffer
SCREENSHOT_INLINE_MAX_HEIGHT = 4096        # the inline JPEG shows at most this many pixels of height
RELAY_WORLD = "reticle-relay"              # the isolated world that alone holds a device's bridge tickets
RELAY_BINDING = "__reticleRelayTicket"     # the CDP binding, installed in that world only, that asks for one
TICKET_UNUSED_S = 30.0                     # a ticket no socket used within this long is void
TICKETS_PER_DOCUMENT = 8                   # unused tickets one document may hold at once
NET_CONFIRM_S = 1.5                        # a page-reported request the browser's record must show within
NET_RECORD_MAX = 4000                      # requests of the browser's own record (CDP Network) kept per device

# The device's bridge relay.  It runs in an isolated world of each top-level document, where no
# page script can reach it: it asks the daemon for a one-use ticket over a CDP binding that only
# this world can call, opens the bridge socket with it, and hands the SDK (in the page's world) a
# MessagePort that carries frames to and from that socket.  The ticket never enters the page's
# world, so a page script cannot read it, replay it or open a socket of its own with it.
_RELAY_JS = r"""(function () {
  if (window.top !== window || !/^https?:$/.test(location.protocol)) return;
  var BASE = %(base)s, NONCE = %(nonce)s, ask = globalThis[%(binding)s];
  if (typeof ask !== 'function') return;
  var channel = new MessageChannel(), port = channel.port1, socks = {}, waiting = [];
  function post(m) { try { port.postMessage(m); } catch (e) { /* the page went away */ } }
  function watch(id, ws) {
    if (ws.bufferedAmount > 0) setTimeout(function () { watch(id, ws); }, 25);
    post({op: 'buffered', id: id, n: ws.bufferedAmount});
  }
  globalThis.__reticleRelayOpen = function (ticket) {
    var id = waiting.shift(), ws;
    if (id == null) return;
    try { ws = new WebSocket(BASE + encodeURIComponent(ticket)); } catch (e) {
      post({op: 'close', id: id, code: 1006, reason: ''});
      return;
    }
    socks[id] = ws;
    ws.onopen = function () { post({op: 'open', id: id}); };
    ws.onmessage = function (m) { post({op: 'message', id: id, data: m.data}); };
    ws.onclose = function (e) { delete socks[id]; post({op: 'close', id: id, code: e.code, reason: e.reason}); };
  };
  port.onmessage = function (e) {
    var m = e.data || {}, ws = socks[m.id];
    if (m.op === 'open' && typeof m.id === 'number' && waiting.length < 8) {
      var id = m.id;
      waiting.push(id);
      ask(String(id));
      setTimeout(function () {  // no ticket came (the daemon went away): the SDK retries as after a failure
        var at = waiting.indexOf(id);
        if (at >= 0) {
          waiting.splice(at, 1);
          post({op: 'close', id: id, code: 1006, reason: ''});
        }
      }, 5000);
    } else if (m.op === 'send' && ws && ws.readyState === 1) {
      ws.send(String(m.data));
      if (ws.bufferedAmount > 0) watch(m.id, ws);
    } else if (m.op === 'close' && ws) {
      try { ws.close(m.code === 1000 ? 1000 : undefined); } catch (x) { ws.close(); }
    }
  };
  window.postMessage({reticleRelay: NONCE}, '*', [channel.port2]);
})();
"""

_BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "microsoft-edge")
_BROWSER_PATHS = {
    "darwin": ("/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
               "/Applications/Chromium.app/Contents/MacOS/Chromium",
               "/Applications/Microsoft Edge.app/Contents/MacOS/Microsoft Edge"),
    "win32": (r"%PROGRAMFILES%\Google\Chrome\Application\chrome.exe",
              r"%PROGRAMFILES(X86)%\Google\Chrome\Application\chrome.exe",
              r"%LOCALAPPDATA%\Google\Chrome\Application\chrome.exe",
              r"%PROGRAMFILES(X86)%\Microsoft\Edge\Application\msedge.exe",
              r"%PROGRAMFILES%\Microsoft\Edge\Application\msedge.exe"),
}
# The flags of DESIGN section 8; --no-sandbox is added only as root, and
# --disable-quic because a closed network makes QUIC probes stall.
_BROWSER_FLAGS = ("--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                  "--disable-default-apps", "--no-default-browser-check", "--mute-audio",
                  "--password-store=basic", "--use-mock-keychain", "--remote-debugging-port=0")


def _net_key_url(url: Any) -> str:
    """A request's URL as both records can say it: scheme, host and path, no query or fragment
    (the SDK redacts secrets in the query)."""
    try:
        parts = urllib.parse.urlsplit(str(url or ""))
        port = parts.port
    except ValueError:
        return ""
    if not parts.hostname:
        return ""
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    host = parts.hostname.lower() if ":" not in parts.hostname else "[%s]" % parts.hostname.lower()
    return "%s://%s%s%s" % (parts.scheme.lower(), host, "" if port in (None, default) else ":%d" % port,
                            parts.path or "/")


def _browser_install_hint() -> str:
    if sys.platform == "darwin":
        return "install Google Chrome (https://www.google.com/chrome/) or `brew install --cask chromium`"
    if sys.platform == "win32":
        return "install Google Chrome or Microsoft Edge"
    return "install Chromium (for example `sudo apt-get install chromium` or `sudo dnf install chromium`)"


def _find_browser() -> str:
    """RETICLE_BROWSER, then the usual names on PATH, then the standard install paths."""
    env = os.environ.get("RETICLE_BROWSER", "").strip()
    if env:
        found = shutil.which(env) or (env if os.path.isfile(env) and os.access(env, os.X_OK) else None)
        if found:
            return found
        raise ToolError("RETICLE_BROWSER=%r is not an executable browser; point it at Chromium, Chrome or "
                        "Edge, or unset it and %s." % (env, _browser_install_hint()),
                        "fix RETICLE_BROWSER, then retry")
    for name in _BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    for raw in _BROWSER_PATHS.get(sys.platform, ()):
        path = os.path.expandvars(raw)
        if os.path.isfile(path):
            return path
    raise ToolError("No Chromium-family browser was found to start a device: %s, or set RETICLE_BROWSER to "
                    "the path of one." % _browser_install_hint(), "install a browser, then retry")


def _browser_args(profile: str, headed: bool, viewport: Tuple[int, int]) -> Tuple[List[str], Optional[str]]:
    """The command-line flags and, when --no-sandbox is added, why."""
    args = list(_BROWSER_FLAGS)
    args.append("--user-data-dir=" + profile)
    args.append("--window-size=%d,%d" % viewport)
    if not headed:
        args.insert(0, "--headless")
    why = None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")
        why = "running as root, where Chromium refuses to start its sandbox"
    # A document a fault answers (a faulted form post) has no IP address space, and Chromium's
    # local-network-access checks would then refuse its SDK the socket to the daemon on loopback.
    args.append("--disable-features=LocalNetworkAccessChecks")
    extra = os.environ.get("RETICLE_BROWSER_ARGS", "").strip()
    if extra:
        args.extend(shlex.split(extra))
    args.append("about:blank")
    return args, why


def _png_size(data: bytes) -> Tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _jpeg_size(data: bytes) -> Tuple[int, int]:
    """(width, height) from a JPEG's first start-of-frame marker."""
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    raise ValueError("not a JPEG with a frame header")


class _CdpError(ToolError):
    """A CDP call answered an error, or the connection went away: a tool that meets it fails
    with isError, not as a crash."""

    def __init__(self, error: str) -> None:
        super().__init__(error, "the device's browser may have gone; reticle_close it and open it again")


class _CdpClient:
    """One DevTools WebSocket to a browser, with flat sessions.

    call() matches answers by id; events go to the listeners.  The reader is
    one task; nothing awaits a message on the socket except that task."""

    def __init__(self) -> None:
        self._ws: Any = None
        self._next = 0
        self._pending: Dict[int, asyncio.Future] = {}
        self.reader: Optional[asyncio.Task] = None
        self.listeners: List[Callable[[str, dict, Optional[str]], None]] = []
        self.closed = False

    async def connect(self, url: str, timeout: float = 10.0) -> None:
        self._ws = await tornado.websocket.websocket_connect(
            tornado.httpclient.HTTPRequest(url, connect_timeout=timeout, request_timeout=timeout),
            max_message_size=CDP_MAX_MESSAGE_BYTES, ping_interval=None)
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            raw = await self._ws.read_message()
            if raw is None:
                break
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if "id" in msg:
                fut = self._pending.pop(msg["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
            elif isinstance(msg.get("method"), str):
                for listener in list(self.listeners):
                    try:
                        listener(msg["method"], msg.get("params") or {}, msg.get("sessionId"))
                    except Exception as exc:  # a listener bug must not stop the reader
                        _emit(_device_log, logging.ERROR, "cdp_listener_failed", error=repr(exc))
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(_CdpError("the browser's DevTools connection closed"))
        self._pending.clear()

    async def call(self, method: str, params: Optional[dict] = None, session: Optional[str] = None,
                   timeout: float = 15.0) -> dict:
        if self.closed or self._ws is None:
            raise _CdpError("the browser's DevTools connection is closed")
        self._next += 1
        mid = self._next
        msg: Dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut = asyncio.get_running_loop().create_future()
        self._pending[mid] = fut
        try:
            await self._ws.write_message(_dumps(msg))
            reply = await asyncio.wait_for(fut, timeout)
        except tornado.websocket.WebSocketClosedError:
            raise _CdpError("the browser's DevTools connection closed") from None
        except asyncio.TimeoutError:
            raise _CdpError("%s got no answer within %g s" % (method, timeout)) from None
        finally:
            self._pending.pop(mid, None)
        if "error" in reply:
            err = reply["error"]
            raise _CdpError("%s: %s" % (method, err.get("message") if isinstance(err, dict) else err))
        return reply.get("result") or {}

    def close(self) -> None:
        self.closed = True
        if self._ws is not None:
            self._ws.close()
        if self.reader is not None:
            self.reader.cancel()


# CDP key definitions: key -> (windowsVirtualKeyCode, code, text typed)
_CDP_KEYS = {"Enter": (13, "Enter", "\r"), "Tab": (9, "Tab", ""), "Escape": (27, "Escape", ""),
             "Backspace": (8, "Backspace", ""), "Delete": (46, "Delete", ""), " ": (32, "Space", " "),
             "ArrowLeft": (37, "ArrowLeft", ""), "ArrowUp": (38, "ArrowUp", ""),
             "ArrowRight": (39, "ArrowRight", ""), "ArrowDown": (40, "ArrowDown", ""),
             "Home": (36, "Home", ""), "End": (35, "End", ""), "PageUp": (33, "PageUp", ""),
             "PageDown": (34, "PageDown", "")}
_CDP_MODIFIERS = {"Alt": 1, "Control": 2, "Meta": 4, "Shift": 8}


def _cdp_key(key: str) -> Tuple[int, str, str]:
    if key in _CDP_KEYS:
        return _CDP_KEYS[key]
    if len(key) == 1:
        up = key.upper()
        if up.isalpha() and up.isascii():
            return ord(up), "Key" + up, key
        if key.isdigit():
            return ord(key), "Digit" + key, key
        return 0, "", key
    return 0, key, ""


class _BrowserProcess:
    """A device's browser process: its temporary profile, its stderr (read for the DevTools
    endpoint, then drained into a short tail for error messages) and its end, the whole process
    group with it."""

    def __init__(self, device_id: str) -> None:
        self.device_id = device_id
        self.exe = ""
        self.profile = ""
        self.proc: Any = None
        self.stderr_tail: collections.deque = collections.deque(maxlen=20)
        self.drain: Optional[asyncio.Task] = None

    async def spawn(self, exe: str, headed: bool, viewport: Tuple[int, int]) -> None:
        """Start `exe` in a new temporary profile (its own process group on POSIX)."""
        self.exe = exe
        self.profile = tempfile.mkdtemp(prefix="reticle-device-")
        args, why = _browser_args(self.profile, headed, viewport)
        if why:
            _emit(_device_log, logging.INFO, "device_no_sandbox", deviceId=self.device_id, why=why)
        kwargs: Dict[str, Any] = {}
        if os.name == "posix":
            kwargs["start_new_session"] = True   # its own process group: close() ends the helpers too
        self.proc = await asyncio.create_subprocess_exec(
            exe, *args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)

    async def devtools_url(self) -> str:
        """Read stderr until Chromium prints its DevTools endpoint; the rest of stderr is drained."""
        deadline = time.monotonic() + DEVICE_START_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ToolError("the browser %s did not open its DevTools endpoint within %d s; its last output: %s"
                                % (self.exe, DEVICE_START_TIMEOUT_S, " | ".join(self.stderr_tail) or "(none)"),
                                "check that the browser starts by hand with --headless")
            try:
                line = await asyncio.wait_for(self.proc.stderr.readline(), left)
            except asyncio.TimeoutError:
                continue
            if not line:
                raise ToolError("the browser %s exited while starting; its last output: %s" % (
                    self.exe, " | ".join(self.stderr_tail) or "(none)"),
                    "check that the browser starts by hand with --headless; set RETICLE_BROWSER to another one")
            text = line.decode("utf-8", "replace").strip()
            m = re.search(r"DevTools listening on (ws://\S+)", text)
            if m:
                self.drain = asyncio.ensure_future(self._drain_stderr())
                return m.group(1)
            self.stderr_tail.append(text[:300])

    async def _drain_stderr(self) -> None:
        while True:
            line = await self.proc.stderr.readline()
            if not line:
                return
            self.stderr_tail.append(line.decode("utf-8", "replace").strip()[:300])

    def kill(self) -> None:
        """End the browser's whole process group at once (no waiting)."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        try:
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except (ProcessLookupError, PermissionError, OSError):
            pass

    async def end(self) -> None:
        """After Browser.close: wait for the exit, kill what is left of the group, let stderr's reader
        finish and remove the profile.  Every wait is bounded."""
        if self.proc is not None:
            try:
                await asyncio.wait_for(self.proc.wait(), 2.0)
            except asyncio.TimeoutError:
                pass
            self.kill()  # the rest of the process group, and the browser if Browser.close did not work
            try:
                await asyncio.wait_for(self.proc.wait(), 2.0)
            except asyncio.TimeoutError:
                pass
        if self.drain is not None:
            try:  # stderr's end lets asyncio close the process transport (helpers hold the pipe too)
                await asyncio.wait_for(self.drain, 2.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        if self.profile:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, _remove_profile, self.profile)


class _RelayTickets:
    """A device's bridge relay (_RELAY_JS, in the isolated world RELAY_WORLD) and its tickets.

    A ticket is 32 random bytes minted for one document's relay when that relay asks over its CDP
    binding, good for one socket, void once another document of the device asks (a navigation
    rotates it) or after TICKET_UNUSED_S unused, and gone with the device."""

    def __init__(self, device: "_Device") -> None:
        self.device = device
        self.nonce = secrets.token_urlsafe(16)  # pairs the SDK with its relay's port; grants nothing
        self.tickets: Dict[str, dict] = {}      # ticket -> {"context", "page", "minted", "used"}

    def source(self) -> str:
        """The relay of _RELAY_JS for this device, run in the isolated world RELAY_WORLD."""
        return _RELAY_JS % {"base": _dumps(self.device.bridge_base() + "?device="), "nonce": _dumps(self.nonce),
                            "binding": _dumps(RELAY_BINDING)}

    def mint(self, context: Any = None, page: Optional[str] = None) -> str:
        """A one-use bridge ticket for the document whose relay runs in `context`.

        A ticket asked for by another document voids every unused one of the documents before
        it: the device's bridge credential rotates with each navigation."""
        now = time.monotonic()
        for t, info in list(self.tickets.items()):
            stale = info["context"] != context or info["page"] != page or now - info["minted"] > TICKET_UNUSED_S
            if info["used"] or stale:
                del self.tickets[t]
        if len(self.tickets) >= TICKETS_PER_DOCUMENT:
            del self.tickets[min(self.tickets, key=lambda t: self.tickets[t]["minted"])]
        ticket = secrets.token_urlsafe(32)
        self.tickets[ticket] = {"context": context, "page": page, "minted": now, "used": False}
        return ticket

    def redeem(self, ticket: str) -> str:
        """'ok' (and the ticket is spent), 'used' (a socket already opened with it) or 'void'."""
        for t, info in list(self.tickets.items()):
            if hmac.compare_digest(t.encode(), ticket.encode("utf-8", "replace")):
                if info["used"]:
                    return "used"
                if time.monotonic() - info["minted"] > TICKET_UNUSED_S:
                    del self.tickets[t]
                    return "void"
                info["used"] = True
                return "ok"
        return "void"

    def holds(self, ticket: str) -> bool:
        return any(hmac.compare_digest(t.encode(), ticket.encode("utf-8", "replace")) for t in self.tickets)

    async def answer(self, context: Any, page: Optional[str]) -> None:
        """Hand the relay that asked (in `context`) a new ticket, into its isolated world only."""
        ticket = self.mint(context, page)
        try:
            await self.device.cdp.call("Runtime.evaluate", {
                "expression": "globalThis.__reticleRelayOpen(%s)" % _dumps(ticket), "contextId": context}, page)
        except _CdpError as exc:  # the document went away before its ticket arrived
            self.tickets.pop(ticket, None)
            _emit(_device_log, logging.INFO, "device_ticket_undelivered", deviceId=self.device.id, why=str(exc))


class _NetRecord:
    """The browser's own record (CDP Network) of the requests a device's page made, against which
    the page's reports are checked, and the main frame's document loads it tells the tab of."""

    def __init__(self, device: "_Device") -> None:
        self.device = device
        self.seen: collections.deque = collections.deque(maxlen=NET_RECORD_MAX)  # (METHOD, url, status)
        self._methods: "collections.OrderedDict[str, str]" = collections.OrderedDict()

    def _session(self) -> Optional["_BrowserSession"]:
        return self.device.manager.hub.bridge.sessions.get(self.device.session_id)

    def on_event(self, method: str, params: dict) -> None:
        """Keep the browser's record of each request its page made, then let the tab's held
        reports that it now confirms through."""
        rid = str(params.get("requestId", ""))
        if params.get("type") == "Document" and params.get("frameId") == self.device.target:
            self._on_document(method, rid, params)
        if method == "Network.requestWillBeSent":
            request = params.get("request") or {}
            redirect = params.get("redirectResponse")
            if isinstance(redirect, dict):
                self.seen.append((self._methods.get(rid, "GET"), _net_key_url(redirect.get("url")),
                                  redirect.get("status")))
            self._methods[rid] = str(request.get("method") or "GET").upper()
            while len(self._methods) > NET_RECORD_MAX:
                self._methods.popitem(last=False)
            return
        if method == "Network.responseReceived":
            response = params.get("response") or {}
            self.seen.append((self._methods.get(rid, "GET"), _net_key_url(response.get("url")),
                              response.get("status")))
        elif method == "Network.loadingFailed":
            self.seen.append((self._methods.get(rid, "GET"), "", 0))
        else:
            return
        session = self._session()
        if session is not None and session.held:
            session.admit_held(confirmed_only=True)

    def made_request(self, data: dict) -> bool:
        """Did this browser make the request its page reports (method, URL without query, status)?"""
        method = str(data.get("method") or "GET").upper()
        url = _net_key_url(data.get("url"))
        status = data.get("status")
        for seen_method, seen_url, seen_status in reversed(self.seen):
            if seen_method != method:
                continue
            if seen_url == "" and not status:
                return True  # a failed request reported as failed
            if seen_url != url:
                continue
            if not isinstance(status, int) or status <= 0 or status == seen_status or (
                    status == 200 and seen_status == 304):
                return True
        return False

    def _on_document(self, method: str, rid: str, params: dict) -> None:
        """The browser's own word that the tab's main frame is loading a new document (a form post
        whose page script announced nothing included): the tab's session is between documents at
        once, as the SDK's announcement of a form submission makes it, until the next document
        connects.  A navigation that brings no document (failed, cancelled, a download, a 204)
        ends it."""
        session = self._session()
        if session is None:
            return
        if method == "Network.requestWillBeSent" and not params.get("redirectResponse"):
            request = params.get("request") or {}
            session.document_on_its_way(rid, str(request.get("method") or "GET").upper(),
                                        _short(str(request.get("url") or ""), 2048))
        elif method == "Network.loadingFailed" or (method == "Network.responseReceived" and (
                (params.get("response") or {}).get("status") in (204, 205))):
            session.document_not_coming(rid)


class _DeviceInput:
    """Real input for a device's page (Input.*, event.isTrusted true), as its SDK asks during an act."""

    def __init__(self, device: "_Device") -> None:
        self.device = device

    async def dispatch(self, req: dict) -> None:
        """Dispatch one action as real input (Input.*), as the SDK asked."""
        action = req.get("action")
        x, y = float(req.get("x", 0)), float(req.get("y", 0))
        call = self.device.cdp.call
        page = self.device.page

        def mouse(kind: str, px: float, py: float, **extra: Any) -> Awaitable[dict]:
            params = {"type": kind, "x": px, "y": py, "modifiers": 0}
            params.update(extra)
            return call("Input.dispatchMouseEvent", params, page)

        hold = min(30.0, max(0.0, float(req.get("holdMs") or 0) / 1000.0))
        if action in ("click", "dblclick", "hover"):
            await mouse("mouseMoved", x, y)
            if action == "hover":
                await asyncio.sleep(hold)
                return
            for count in ((1, 2) if action == "dblclick" else (1,)):
                await mouse("mousePressed", x, y, button="left", buttons=1, clickCount=count)
                if action == "click":
                    await asyncio.sleep(hold)
                await mouse("mouseReleased", x, y, button="left", buttons=0, clickCount=count)
        elif action == "drag":
            tx, ty = float(req.get("toX", x)), float(req.get("toY", y))
            await mouse("mouseMoved", x, y)
            await mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
            for step in range(1, 6):
                await mouse("mouseMoved", x + (tx - x) * step / 5, y + (ty - y) * step / 5, button="left", buttons=1)
            await mouse("mouseReleased", tx, ty, button="left", buttons=0, clickCount=1)
        elif action == "type":
            text = str(req.get("text", ""))
            if len(text) > 200:
                await call("Input.insertText", {"text": text}, page)
                return
            for ch in text:
                await self._key("Enter" if ch == "\n" else ch, 0)
        elif action == "press":
            mods = 0
            for m in req.get("modifiers") or ():
                mods |= _CDP_MODIFIERS.get(str(m), 0)
            await self._key(str(req.get("key") or "Enter"), mods)
        else:
            raise ToolError("the device cannot dispatch %r as real input" % action)

    async def _key(self, key: str, mods: int) -> None:
        vk, code, text = _cdp_key(key)
        if mods & (2 | 4):
            text = ""  # a shortcut types nothing
        down = {"type": "keyDown" if text else "rawKeyDown", "key": key, "code": code,
                "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk, "modifiers": mods}
        if text:
            down["text"] = text
            down["unmodifiedText"] = text
        call, page = self.device.cdp.call, self.device.page
        await call("Input.dispatchKeyEvent", down, page)
        await call("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk,
                                              "nativeVirtualKeyCode": vk, "modifiers": mods}, page)


async def _answer_device_dialog(device: "_Device", params: dict) -> None:
    """An alert, confirm, prompt or beforeunload blocks a device's page (and every command) until
    it is answered: answer it at once.  Dismissed, unless the act that raised it asked for
    `dialog: "accept"`; a beforeunload during a load the daemon itself started is accepted
    (the agent asked to leave).  The tab's answers name it (_with_health)."""
    kind = str(params.get("type") or "alert")
    policy = device.dialog_policy
    if policy is not None:
        accept = bool(policy.get("accept"))
    else:
        accept = kind == "beforeunload" and device.loading is not None and device.loading.locked()
    answer: Dict[str, Any] = {"accept": accept}
    if accept and kind == "prompt":
        answer["promptText"] = str((policy or {}).get("promptText", params.get("defaultPrompt") or ""))
    record = {"dialogType": kind, "message": _short(str(params.get("message") or ""), 300),
              "url": _short(str(params.get("url") or ""), 300), "handled": "accepted" if accept else "dismissed"}
    _emit(_device_log, logging.INFO, "device_dialog", deviceId=device.id, dialogType=kind, handled=record["handled"])
    try:
        await device.cdp.call("Page.handleJavaScriptDialog", answer, device.page, timeout=5.0)
    except _CdpError as exc:
        record["handled"] = "failed: %s" % _short(str(exc), 120)
    session = device.manager.hub.bridge.sessions.get(device.session_id)
    if session is not None:
        session.note_dialog(record)


class _Device:
    """One browser the daemon started: its process (_BrowserProcess), CDP connection, the page it
    drives, and the parts that answer that page: its relay and tickets (_RelayTickets), the
    browser's record of its requests (_NetRecord), real input (_DeviceInput) and dialogs.

    Its bridge socket opens with a ticket: 32 random bytes minted for one
    document's relay (the isolated world of _RELAY_JS) when that relay asks
    over its CDP binding, good for one socket, void once another document of
    the device asks (a navigation rotates it), and gone with the device.  No
    page script sees one; the bridge accepts it from this device's session id
    alone, and it is never the pairing token."""

    def __init__(self, manager: "_DeviceManager", owner: str, headed: bool, viewport: Tuple[int, int]) -> None:
        """A browser Reticle starts and drives over CDP for one MCP client (`owner`): its process,
        profile, CDP client and page target, its relay tickets, and the browser's own record of the
        requests its page made (to check the page's reports against)."""
        self.manager = manager
        self.id = "d" + secrets.token_hex(4)
        self.session_id = "device-" + self.id
        self.relay = _RelayTickets(self)
        self.net = _NetRecord(self)
        self.inputs = _DeviceInput(self)
        self.process = _BrowserProcess(self.id)
        self.dialog_policy: Optional[dict] = None     # during an act: {"accept": bool, "promptText": str}
        self.owner = owner
        self.headed = headed
        self.viewport = viewport
        self.cdp = _CdpClient()
        self.page: Optional[str] = None          # the flat CDP session of the page target
        self.target: Optional[str] = None
        self.context: Optional[str] = None       # a browser context of its own, after a fresh open
        self.loading: Optional[asyncio.Lock] = None  # one load (navigation, fresh context) at a time
        self.started_at = time.time()
        self.auth_pending: Optional[dict] = None  # a setup flow's saved state, restored by the next navigate
        self.url = ""
        self.closed = False
        self.closing: Optional["asyncio.Future[None]"] = None  # the one close in progress, every caller awaits it
        self.ready = False                       # started and its page connected
        self.acting = 0                          # act commands in flight: input is honoured only then
        self.phases: Dict[str, int] = {}
        self.scripts: Optional[Tuple[str, str]] = None  # (the SDK, the relay) until the page has them
        self._start_t0: Optional[float] = None   # a start of its own (no spare): its phases count from the launch

    @property
    def proc(self) -> Any:
        return self.process.proc

    @property
    def profile(self) -> str:
        return self.process.profile

    @property
    def tickets(self) -> Dict[str, dict]:
        return self.relay.tickets

    def mint_ticket(self, context: Any = None, page: Optional[str] = None) -> str:
        return self.relay.mint(context, page)

    def made_request(self, data: dict) -> bool:
        """Did this browser make the request its page reports (method, URL without query, status)?"""
        return self.net.made_request(data)

    def describe(self) -> dict:
        return {"deviceId": self.id, "sessionId": self.session_id, "url": self.url,
                "pid": self.proc.pid if self.proc is not None else None, "headed": self.headed,
                "viewport": {"width": self.viewport[0], "height": self.viewport[1]},
                "startedAt": _wall_iso(self.started_at)}

    def bridge_base(self) -> str:
        hub = self.manager.hub
        return "%s://127.0.0.1:%d/reticle" % ("wss" if hub.scheme == "https" else "ws", hub.port)

    def _scripts(self) -> Tuple[str, str]:
        """The two scripts of every document (injected_source, _RelayTickets.source), built once per set-up."""
        if self.scripts is None:
            self.scripts = (self.injected_source(), self.relay.source())
        return self.scripts

    def injected_source(self) -> str:
        """The SDK with this device's config, run in top-level http(s) documents only.  It carries
        no credential: its bridge socket is the relay's (_RelayTickets.source)."""
        config = {"version": __version__, "protocolVersion": BRIDGE_PROTOCOL,
                  "maxMessageBytes": WS_MAX_MESSAGE_BYTES, "device": True, "bridge": self.bridge_base(),
                  "relay": self.relay.nonce, "sessionId": self.session_id}
        sdk = (_SDK_JS.replace("__RETICLE_VERSION__", __version__)
               .replace("/*__RETICLE_CONFIG__*/null", _dumps(config)))
        return ("(function () {\nif (window.top !== window || !/^https?:$/.test(location.protocol)) return;\n"
                + sdk + "\n})();")

    async def start(self, exe: str, url: str) -> None:
        """Launch, attach to the start-up tab, inject, then load `url`.

        The set-up calls go out together and are all answered before the
        navigation starts: Page.navigate is handled in the browser process and
        may overtake them, and a renderer swap would then lose them."""
        t0 = await self.launch(exe)
        self._start_t0 = t0
        targets = (await self.cdp.call("Target.getTargets")).get("targetInfos", [])
        pages = [t for t in targets if t.get("type") == "page"]
        if pages:
            self.target = pages[0]["targetId"]  # the start-up tab: one renderer fewer than a new one
        else:
            self.target = (await self.cdp.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        self.page = (await self.cdp.call("Target.attachToTarget", {"targetId": self.target, "flatten": True}))[
            "sessionId"]
        self.phases["attachedMs"] = round((time.monotonic() - t0) * 1000)
        self.cdp.listeners.append(self._on_event)
        await self._prepare_page()
        self.phases["injectedMs"] = round((time.monotonic() - t0) * 1000)
        await self.navigate(url)
        self.phases["navigatedMs"] = round((time.monotonic() - t0) * 1000)

    async def warm(self, exe: str) -> None:
        """A spare: everything of a start but the load.  The browser is launched, and its page is a
        new tab in a new browser context of its own (nobody's cookies or storage, not even the empty
        start-up tab's), attached, with this device's SDK registered for every document."""
        t0 = await self.launch(exe)
        self.context = (await self.cdp.call("Target.createBrowserContext", {}))["browserContextId"]
        self.target = (await self.cdp.call("Target.createTarget", {"url": "about:blank",
                                                                   "browserContextId": self.context}))["targetId"]
        self.page = (await self.cdp.call("Target.attachToTarget", {"targetId": self.target, "flatten": True}))[
            "sessionId"]
        self.cdp.listeners.append(self._on_event)
        await self._prepare_page()
        self.phases["warmMs"] = round((time.monotonic() - t0) * 1000)

    async def adopt(self, url: str, viewport: Tuple[int, int]) -> None:
        """A warmed spare becomes this caller's device: its viewport, then the load of `url`."""
        t0 = time.monotonic()
        if viewport != self.viewport:
            self.viewport = viewport
            await self.cdp.call("Emulation.setDeviceMetricsOverride", {"width": viewport[0], "height": viewport[1],
                                                                       "deviceScaleFactor": 1, "mobile": False},
                                self.page)
        await self.navigate(url)
        self.phases["spareNavigatedMs"] = round((time.monotonic() - t0) * 1000)

    async def launch(self, exe: str) -> float:
        """Start the browser process and connect to its DevTools endpoint -> the monotonic start time."""
        await self.process.spawn(exe, self.headed, self.viewport)
        t0 = time.monotonic()
        self.manager.records.write(self)
        self._scripts()  # while the browser boots: nothing of the start waits for these two strings then
        ws_url = await self.process.devtools_url()
        self.phases["launchMs"] = round((time.monotonic() - t0) * 1000)
        await self.cdp.connect(ws_url)
        # A browser that exits (a headed window closed by hand, a crash) takes its device with it.
        reader = self.cdp.reader
        assert reader is not None  # connect() started it
        reader.add_done_callback(lambda _: None if self.closed else self.manager.hub.spawn(
            self.manager.close(self, "the browser went away")))
        return t0

    async def _prepare_page(self) -> None:
        width, height = self.viewport
        sdk, relay = self._scripts()
        await asyncio.gather(
            self.cdp.call("Runtime.addBinding", {"name": RELAY_BINDING, "executionContextName": RELAY_WORLD},
                          self.page),
            self.cdp.call("Page.addScriptToEvaluateOnNewDocument", {"source": sdk}, self.page),
            self.cdp.call("Page.addScriptToEvaluateOnNewDocument", {"source": relay, "worldName": RELAY_WORLD},
                          self.page),
            self.cdp.call("Runtime.enable", {}, self.page),  # Runtime.bindingCalled is sent only then
            # the browser's own record of the page's requests, against which the page's reports are checked
            self.cdp.call("Network.enable", {"maxTotalBufferSize": 0, "maxResourceBufferSize": 0}, self.page),
            self.cdp.call("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, self.page),
            self.cdp.call("Emulation.setFocusEmulationEnabled", {"enabled": True}, self.page),
            self.cdp.call("Page.enable", {}, self.page))
        self.scripts = None  # 240 KB a device need not keep: a fresh context builds them again

    async def fresh_context(self) -> None:
        """Move the device's page into a new, empty browser context: no cookies, storage, cache,
        service workers or session storage from before.  The old tab and its context go; the
        session id stays, so the new tab's SDK reconnects as the same session."""
        context = (await self.cdp.call("Target.createBrowserContext", {}))["browserContextId"]
        target = (await self.cdp.call("Target.createTarget", {"url": "about:blank", "browserContextId": context}))[
            "targetId"]
        page = (await self.cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        old_target, old_context = self.target, self.context
        self.target, self.page, self.context = target, page, context

        async def close_old() -> None:
            try:
                await self.cdp.call("Target.closeTarget", {"targetId": old_target})
            except _CdpError as exc:  # already gone: nothing of it is left to leak
                _emit(_device_log, logging.INFO, "device_old_tab_gone", deviceId=self.id, why=str(exc))

        await asyncio.gather(self._prepare_page(), close_old())
        await self.manager.hub.faults.sync_device(self)  # the tab's faults follow it into the new context
        if old_context:  # its renderer winds down on its own time; the next page need not wait for it
            self.manager.hub.spawn(self._dispose(old_context))

    async def _dispose(self, context: str) -> None:
        try:
            await self.cdp.call("Target.disposeBrowserContext", {"browserContextId": context})
        except _CdpError as exc:
            _emit(_device_log, logging.INFO, "device_context_kept", deviceId=self.id, why=str(exc))

    def _on_event(self, method: str, params: dict, session: Optional[str]) -> None:
        if session == self.page and method == "Runtime.bindingCalled" and params.get("name") == RELAY_BINDING:
            # only the relay's isolated world has this binding: the page's own scripts cannot call it
            if self._start_t0 is not None and "askedMs" not in self.phases:  # the first page's SDK runs
                self.phases["askedMs"] = round((time.monotonic() - self._start_t0) * 1000)
            self.manager.hub.spawn(self.relay.answer(params.get("executionContextId"), session))
        elif session == self.page and method.startswith("Network."):
            self.net.on_event(method, params)
        elif session == self.page and method == "Page.downloadWillBegin" and params.get("frameId") == self.target:
            tab = self.manager.hub.bridge.sessions.get(self.session_id)
            if tab is not None:
                tab.document_not_coming(None)
        elif session == self.page and method == "Page.javascriptDialogOpening":
            self.manager.hub.spawn(_answer_device_dialog(self, params))
        elif session == self.page and method == "Page.frameNavigated":
            frame = params.get("frame") or {}
            if not frame.get("parentId"):
                self.url = str(frame.get("url", ""))[:4096]
        elif method == "Target.detachedFromTarget" and params.get("sessionId") == self.page:
            self.manager.hub.spawn(self.manager.close(self, "the page was closed"))

    async def navigate(self, url: str) -> None:
        if self.auth_pending is not None:  # a logged-in start: its cookies and storage before the first load
            state, self.auth_pending = self.auth_pending, None
            await _device_restore_state(self, state)
        result = await self.cdp.call("Page.navigate", {"url": url}, self.page)
        if result.get("errorText"):
            raise ToolError("the device could not load %s: %s" % (url, result["errorText"]),
                            "check that the app is running and the URL is right")
        self.url = url

    async def capture(self, fmt: str, clip: Optional[dict] = None, full_page: bool = False,
                      quality: Optional[int] = None) -> bytes:
        params: Dict[str, Any] = {"format": fmt, "captureBeyondViewport": bool(full_page or clip)}
        if clip is not None:
            params["clip"] = clip
        if quality is not None:
            params["quality"] = quality
        result = await self.cdp.call("Page.captureScreenshot", params, self.page, timeout=30.0)
        return base64.b64decode(result.get("data", ""))

    async def layout(self) -> dict:
        return await self.cdp.call("Page.getLayoutMetrics", {}, self.page)


# -- a logged-in start: a setup flow's browser state, read from and restored into a device over CDP --
# The state is the context's cookies and the page origin's localStorage and sessionStorage.  It is
# read in an isolated world and restored by a script in one (the page's own scripts see neither), and
# it never enters a log, an answer or an error message.

AUTH_WORLD = "reticle-auth"                # the isolated world that reads and restores a saved state
_AUTH_MARK = "__reticle_auth_restored"     # sessionStorage key: this tab's origin got its saved storage
_AUTH_COOKIE_KEYS = ("name", "value", "domain", "path", "secure", "httpOnly", "sameSite", "expires")
_AUTH_READ_JS = """(function () {
  function all(s) { var o = []; for (var i = 0; i < s.length; i++) { var k = s.key(i);
    if (k !== %s) o.push([k, s.getItem(k)]); } return o; }
  return {origin: location.origin, localStorage: all(localStorage), sessionStorage: all(sessionStorage)};
})()"""
_AUTH_RESTORE_JS = """(function (origins, mark) {
  try {
    if (sessionStorage.getItem(mark)) return;
    for (var i = 0; i < origins.length; i++) {
      var o = origins[i];
      if (o.origin !== location.origin) continue;
      (o.localStorage || []).forEach(function (kv) { localStorage.setItem(kv[0], kv[1]); });
      (o.sessionStorage || []).forEach(function (kv) { sessionStorage.setItem(kv[0], kv[1]); });
      sessionStorage.setItem(mark, "1");
    }
  } catch (e) {}
})(/*__ORIGINS__*/[], /*__MARK__*/"")"""


async def _device_read_state(device: "_Device") -> dict:
    """A device's browser state: every cookie of its browser context, and the localStorage and
    sessionStorage of its page's origin (read in an isolated world of the top document)."""
    context = {"browserContextId": device.context} if device.context else {}
    cookies = (await device.cdp.call("Storage.getCookies", context)).get("cookies") or []
    kept = [{k: c[k] for k in _AUTH_COOKIE_KEYS if k in c and not (k == "expires" and c.get("session"))}
            for c in cookies if isinstance(c, dict)]
    world = await device.cdp.call("Page.createIsolatedWorld", {"frameId": device.target, "worldName": AUTH_WORLD},
                                  device.page)
    got = await device.cdp.call("Runtime.evaluate", {"expression": _AUTH_READ_JS % _dumps(_AUTH_MARK),
                                                     "contextId": world.get("executionContextId"),
                                                     "returnByValue": True}, device.page)
    value = (got.get("result") or {}).get("value")
    origins = [value] if isinstance(value, dict) and str(value.get("origin", "")).startswith("http") else []
    return {"format": 1, "cookies": kept, "origins": origins}


async def _device_restore_state(device: "_Device", state: dict) -> None:
    """Before a load: set the saved cookies in the device's context, and register a script (in an
    isolated world) that writes an origin's saved storage on that origin's first document of the tab."""
    cookies = [{k: c[k] for k in _AUTH_COOKIE_KEYS if k in c} for c in state.get("cookies") or []
               if isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("value"), str)]
    if cookies:
        params: Dict[str, Any] = {"cookies": cookies}
        if device.context:
            params["browserContextId"] = device.context
        await device.cdp.call("Storage.setCookies", params)
    origins = [o for o in state.get("origins") or [] if isinstance(o, dict) and isinstance(o.get("origin"), str)]
    if origins:
        source = (_AUTH_RESTORE_JS.replace("/*__ORIGINS__*/[]", _dumps(origins))
                  .replace('/*__MARK__*/""', _dumps(_AUTH_MARK)))
        await device.cdp.call("Page.addScriptToEvaluateOnNewDocument", {"source": source, "worldName": AUTH_WORLD},
                              device.page)


class _StartBudget:
    """How many devices one session key may start per window (RETICLE_DEVICE_BUDGET), and all keys
    together (DEVICE_BUDGET_ALL_SCALE x it): a new session for every start is no way around it."""

    def __init__(self, raw: Optional[str]) -> None:
        self.budget = self.parse(raw)
        self.starts: Dict[str, collections.deque] = {}

    @staticmethod
    def parse(raw: Optional[str]) -> Tuple[int, float]:
        if not raw or not raw.strip():
            return DEVICE_BUDGET_DEFAULT
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)\s*", raw)
        if not m or int(m.group(1)) < 1:
            raise ConfigError("RETICLE_DEVICE_BUDGET=%r is not understood; use STARTS/SECONDS, for example 5/600."
                              % raw)
        return int(m.group(1)), float(m.group(2))

    def check(self, key: str) -> None:
        """Refuse a start the budget of `key`, or of all keys together, has no room for."""
        count, window = self.budget
        now = time.time()
        for who, limit in ((key, count), ("*", count * DEVICE_BUDGET_ALL_SCALE)):
            starts = self.starts.setdefault(who, collections.deque())
            while starts and starts[0] <= now - window:
                starts.popleft()
            if len(starts) >= limit:
                next_at = starts[0] + window
                raise ToolError("device-start budget spent: %d starts per %g s for %s (RETICLE_DEVICE_BUDGET%s); "
                                "the next start is allowed at %s, in %d s."
                                % (limit, window, "this session key" if who == key else "all clients together",
                                   "" if who == key else " x %d" % DEVICE_BUDGET_ALL_SCALE, _wall_iso(next_at),
                                   max(1, int(next_at - now + 0.999))),
                                "reuse the open device (reticle_open reuses the caller's own) or wait",
                                nextStartAt=_wall_iso(next_at), retryAfterS=max(1, int(next_at - now + 0.999)))

    def spend(self, key: str) -> None:
        """Count a start of `key` (after check(), which made its record)."""
        self.starts[key].append(time.time())
        self.starts["*"].append(time.time())

    def forget_old(self) -> None:
        horizon = time.time() - self.budget[1]
        for key in [k for k, starts in self.starts.items() if not starts or starts[-1] <= horizon]:
            del self.starts[key]


class _DeviceRecords:
    """The state directory's devices/: one record (pid, profile, daemon pid) per live device, so
    that the next daemon can end the browsers and remove the profiles of one killed with SIGKILL."""

    def __init__(self, hub: "Hub") -> None:
        self.hub = hub

    def _dir(self) -> str:
        path = os.path.join(self.hub.state.ensure(), "devices")
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def write(self, device: "_Device") -> None:
        record = {"pid": device.proc.pid, "profile": device.profile, "daemonPid": os.getpid(),
                  "port": self.hub.port, "startedAt": _wall_iso(device.started_at)}
        path = os.path.join(self._dir(), device.id + ".json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(_dumps(record))

    def drop(self, device: "_Device") -> None:
        try:
            os.unlink(os.path.join(self._dir(), device.id + ".json"))
        except OSError:
            pass

    def reap_orphans(self) -> int:
        """End the browsers and remove the profiles of devices whose daemon is gone.

        Blocking (it waits up to 2 s for a killed group): run it off the loop."""
        folder = os.path.join(self.hub.state.path, "devices")  # made by the first device, not here
        try:
            names = os.listdir(folder)
        except OSError:
            return 0
        reaped = 0
        for name in names:
            path = os.path.join(folder, name)
            try:
                with open(path) as fh:
                    record = json.load(fh)
                pid, profile, owner = int(record["pid"]), str(record["profile"]), int(record["daemonPid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if owner != os.getpid() and _pid_alive(owner):
                continue  # another live daemon's device
            if _pid_alive(pid) and _is_device_process(pid, profile):
                _end_orphan(pid)
            if os.path.basename(profile).startswith("reticle-device-"):
                shutil.rmtree(profile, ignore_errors=True)
            try:
                os.unlink(path)
            except OSError:
                pass
            reaped += 1
            _emit(_device_log, logging.INFO, "device_orphan_reaped", pid=pid, profile=profile, daemonPid=owner)
        return reaped


def _end_orphan(pid: int) -> None:
    """Kill an orphaned browser's process group and wait (up to 2 s) for it to go."""
    try:
        if os.name == "posix":
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    deadline = time.monotonic() + 2.0
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


class _SparePool:
    """Spare browsers (warmed: launched, a page in a context of its own, SDK registered) that the
    next reticle_open adopts instead of launching one; they count in the manager's max_devices."""

    def __init__(self, manager: "_DeviceManager") -> None:
        self.manager = manager
        self.want = max(0, _env_int("RETICLE_SPARE_DEVICES", SPARE_DEVICES_DEFAULT))
        self.spares: List[_Device] = []
        self.tasks: Dict[str, "asyncio.Task[Any]"] = {}  # device id -> its warm-up

    def top_up(self) -> None:
        """Start spares in the background until `want` are kept, within max_devices."""
        manager = self.manager
        while (len(self.spares) < self.want and not manager.hub.stop_reason
               and len(manager.devices) + len(self.spares) < manager.max_devices):
            try:
                exe = _find_browser()
            except ToolError:
                return
            spare = _Device(manager, "", False, DEVICE_VIEWPORT)
            self.spares.append(spare)
            self.tasks[spare.id] = manager.hub.spawn(self._warm(spare, exe))

    async def _warm(self, spare: _Device, exe: str) -> None:
        try:
            await spare.warm(exe)
        except BaseException as exc:
            _emit(_device_log, logging.INFO, "device_spare_failed", deviceId=spare.id, why=str(exc)[:300])
            await self.manager.close(spare, "the spare did not start: %s" % exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        spare.ready = True
        _emit(_device_log, logging.INFO, "device_spare_ready", deviceId=spare.id, pid=spare.proc.pid, **spare.phases)

    async def take(self) -> Optional[_Device]:
        """The oldest spare, once warm (one still starting is waited for: it is further along than a new
        launch), or None when it failed; the caller starts a browser of its own then."""
        while self.spares:
            spare = self.spares.pop(0)
            task = self.tasks.pop(spare.id, None)
            if task is not None and not task.done():
                await asyncio.wait({task})
            if spare.ready and not spare.closed and not spare.cdp.closed:
                spare.ready = False  # ready again once its page connected for its new owner
                return spare
            await self.manager.close(spare, "the spare was not usable")
        return None

    async def give_up_one(self) -> bool:
        """Close the newest spare to make room for a device -> whether there was one."""
        if not self.spares:
            return False
        spare = self.spares[-1]
        task = self.tasks.pop(spare.id, None)
        if task is not None and not task.done():
            task.cancel()
        await self.manager.close(spare, "a device needed its place")
        return True

    async def close_all(self, why: str) -> None:
        spares, self.spares = list(self.spares), []
        for spare in spares:
            task = self.tasks.pop(spare.id, None)
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(*(self.manager.close(s, why) for s in spares))


class _DeviceManager:
    """The devices of one daemon: start budget per session key (_StartBudget), a cap on how many
    live at once, idle close, spare browsers (_SparePool), reaping of a killed daemon's orphans.

    Each device leaves a record (pid, profile, daemon pid) in the state
    directory's devices/ while it lives (_DeviceRecords), so that the next daemon can end the
    browsers and remove the profiles of one that was killed with SIGKILL."""

    def __init__(self, hub: "Hub") -> None:
        self.hub = hub
        self.devices: Dict[str, _Device] = {}
        self.last_used: Dict[str, float] = {}
        self.budget = _StartBudget(os.environ.get("RETICLE_DEVICE_BUDGET"))
        self.records = _DeviceRecords(hub)
        self.max_devices = _env_int("RETICLE_MAX_DEVICES", MAX_DEVICES_DEFAULT)
        self.idle_s = DEVICE_IDLE_S
        self._idle_timer: Any = None
        self.pool = _SparePool(self)
        self.asked_at: Optional[float] = None  # when a device was last asked for (spares idle out after)

    @property
    def spares(self) -> List[_Device]:
        return self.pool.spares

    @property
    def spare_tasks(self) -> Dict[str, "asyncio.Task[Any]"]:
        return self.pool.tasks

    def top_up(self) -> None:
        self.pool.top_up()

    def reap_orphans(self) -> int:
        """End the browsers and remove the profiles of devices whose daemon is gone (blocking)."""
        return self.records.reap_orphans()

    # -- lookups --------------------------------------------------------------
    def for_ticket(self, ticket: Optional[str]) -> Tuple[Optional[_Device], str]:
        """(the device whose relay was given `ticket`, 'ok' | 'used' | 'void'); an 'ok' spends it."""
        if not ticket:
            return None, "void"
        for device in self.devices.values():
            if device.relay.holds(ticket):
                return device, device.relay.redeem(ticket)
        return None, "void"

    def for_session(self, session_id: Optional[str]) -> Optional[_Device]:
        for device in self.devices.values():
            if device.session_id == session_id:
                return device
        return None

    def owned_by(self, key: str) -> Optional[_Device]:
        for device in self.devices.values():
            if device.owner == key:
                return device
        return None

    def describe(self) -> List[dict]:
        return [d.describe() for d in self.devices.values()]

    def touch(self, key: str) -> None:
        self.last_used[key] = time.monotonic()

    # -- open and close -----------------------------------------------------------
    async def _make_room(self) -> None:
        """At the cap, close the device whose client has been silent longest, if that is more than
        DEVICE_EVICT_IDLE_S (a client that crashed, or one holding devices it does not use); else refuse.
        A spare browser counts too, and gives its place up first."""
        if len(self.devices) + len(self.spares) < self.max_devices:
            return
        if await self.pool.give_up_one():
            return
        now = time.monotonic()
        idle = [(now - self.last_used.get(d.owner, now), d) for d in self.devices.values() if d.ready]
        idle.sort(key=lambda x: -x[0])
        if idle and idle[0][0] > DEVICE_EVICT_IDLE_S:
            silent, device = idle[0]
            _emit(_device_log, logging.WARNING, "device_evicted", deviceId=device.id, silentS=round(silent))
            await self.close(device, "its client was silent for %d s and another client needed a device" % silent)
            return
        raise ToolError("at most %d devices may be open at once (RETICLE_MAX_DEVICES); %d are open, and every "
                        "one was used in the last %d s." % (self.max_devices, len(self.devices), DEVICE_EVICT_IDLE_S),
                        "close one with reticle_close, wait, or raise RETICLE_MAX_DEVICES")

    async def open(self, key: str, url: str, headed: bool = False, viewport: Optional[Tuple[int, int]] = None,
                   fresh: bool = False, auth: Optional[dict] = None) -> Tuple[_Device, bool]:
        """The caller's device on `url` (reused when it has one; in a new, empty browser context
        when `fresh`; starting from a setup flow's saved state `auth`) -> (device, started)."""
        viewport = viewport or DEVICE_VIEWPORT
        own = self.owned_by(key)
        if own is not None and not own.ready:
            raise ToolError("this caller's device is still starting.", "wait for the reticle_open that started it")
        if own is not None and own.headed == headed and own.viewport == viewport and not own.cdp.closed:
            await self.load(own, url, fresh, auth)
            self.touch(key)
            return own, False
        if own is not None:
            await self.close(own, "replaced by a device with other settings")
        self.asked_at = time.monotonic()
        spare_fits = bool(self.spares) and not headed  # an adopted spare takes no new place
        self.budget.check(key)
        if not spare_fits:
            await self._make_room()  # a device counts from the moment it starts, a spare from its launch
        exe = _find_browser()
        self.budget.spend(key)
        device = (await self.pool.take()) if spare_fits else None
        spare = device is not None
        if device is None:
            device = _Device(self, key, headed, viewport)
        device.owner = key
        device.auth_pending = auth
        self.devices[device.id] = device
        self.touch(key)
        try:
            t0 = time.monotonic()
            if spare:
                await device.adopt(url, viewport)
            else:
                await device.start(exe, url)
            await self.wait_connected(device, -1)
            device.phases["connectedMs"] = round((time.monotonic() - t0) * 1000)
        except BaseException as exc:
            await self.close(device, "start failed: %s" % exc)
            if isinstance(exc, _CdpError):
                raise ToolError("the device failed while starting: %s" % exc, "retry; check the daemon log") from exc
            raise
        device.ready = True
        self._ensure_idle_timer()
        self.touch(key)
        _emit(_device_log, logging.INFO, "device_started", deviceId=device.id, pid=device.proc.pid,
              sessionId=device.session_id, headed=headed, browser=exe, spare=spare, **device.phases)
        if not key.startswith("cli:"):  # `reticle drive`/`demo` open one device and end: no spare for them
            self.pool.top_up()
        return device, True

    async def load(self, device: _Device, url: str, fresh: bool = False,
                   auth: Optional[dict] = None) -> _BrowserSession:
        """Load `url` in a running device (first in a new, empty browser context when `fresh` or
        when it starts from a setup flow's saved state `auth`) and wait for its page to connect."""
        if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
            # every load of a device, not only reticle_open's: a flow's startUrl may say file:, data:,
            # chrome: or view-source:, and a fresh replay must not open it
            raise ToolError("a device opens http: and https: pages only, not %r" % url[:200],
                            'use a full URL such as "http://localhost:5173/"', setup=True)
        if device.loading is None:
            device.loading = asyncio.Lock()
        async with device.loading:  # two loads at once would each close the tab the other made
            session = self.hub.bridge.get(device.session_id)
            generation = session.generation if session is not None else -1
            try:
                if fresh or auth is not None:
                    await device.fresh_context()
                device.auth_pending = auth
                await device.navigate(url)
            except _CdpError as exc:
                raise ToolError("the device's browser did not answer (%s)." % exc,
                                "reticle_close it, then open again") from exc
            return await self.wait_connected(device, generation)

    async def wait_connected(self, device: _Device, generation: int) -> _BrowserSession:
        deadline = time.monotonic() + DEVICE_CONNECT_TIMEOUT_S
        while time.monotonic() < deadline:
            session = self.hub.bridge.get(device.session_id)
            if session is not None and session.handler is not None and session.generation > generation:
                return session
            if device.closed or device.cdp.closed:
                break
            await asyncio.sleep(0.005)
        raise ToolError("the device loaded %s but its page did not connect to the bridge within %d s (a page "
                        "that is not http(s), or one whose Content-Security-Policy blocks the socket?)"
                        % (device.url, DEVICE_CONNECT_TIMEOUT_S), "check the URL; reticle_sessions shows the tabs")

    async def close(self, device: _Device, why: str) -> None:
        """Close a device for good (idempotent): Browser.close, then the process group is killed if need
        be, its profile removed, its record and faults dropped and its tab's socket closed.  Every wait
        is bounded, so a hung browser cannot hold the caller.  A second caller awaits the first one's
        close rather than returning before the browser is gone (a spare's cancelled warm-up and the
        daemon's stop both close it: the stop must not finish first), and cancelling a caller does not
        stop the close."""
        if device.closing is None:
            device.closing = asyncio.ensure_future(self._close(device, why))
        await asyncio.shield(device.closing)

    async def _close(self, device: _Device, why: str) -> None:
        device.closed = True
        self.devices.pop(device.id, None)
        if device in self.spares:
            self.spares.remove(device)
        try:
            if not device.cdp.closed:
                await asyncio.wait_for(device.cdp.call("Browser.close", timeout=2.0), 2.5)
        except (_CdpError, asyncio.TimeoutError):
            pass
        device.cdp.close()
        await device.process.end()
        self.records.drop(device)
        self.hub.faults.drop_tab(device.session_id)
        session = self.hub.bridge.get(device.session_id)
        if session is not None and session.handler is not None:
            session.handler.close(1001, "the device closed")
        _emit(_device_log, logging.INFO, "device_closed", deviceId=device.id, why=why)

    async def close_all(self, why: str) -> None:
        await asyncio.gather(self.pool.close_all(why), *(self.close(d, why) for d in list(self.devices.values())))
        if self._idle_timer is not None:
            self._idle_timer.stop()
            self._idle_timer = None

    def _ensure_idle_timer(self) -> None:
        if self._idle_timer is None:
            self._idle_timer = tornado.ioloop.PeriodicCallback(self._close_idle, 15000)
            self._idle_timer.start()

    def _close_idle(self) -> None:
        now = time.monotonic()
        owners = {d.owner for d in self.devices.values()}
        for key in [k for k, t in self.last_used.items() if now - t > self.idle_s and k not in owners]:
            del self.last_used[key]
        self.budget.forget_old()
        for device in list(self.devices.values()):
            if device.owner.startswith("cli:"):
                continue  # `reticle drive` and `reticle demo` keep theirs until they end
            if now - self.last_used.get(device.owner, now) > self.idle_s:
                self.hub.spawn(self.close(device, "its session key was idle for %d s" % self.idle_s))
        if self.spares and (self.asked_at is None or now - self.asked_at > self.idle_s):
            self.hub.spawn(self.pool.close_all("no device was asked for in %d s" % self.idle_s))

    # -- trusted input ------------------------------------------------------------
    def on_input(self, session: _BrowserSession, msg: dict) -> None:
        """The SDK of a device asks for real input during an act; answer on its socket."""
        device = self.for_session(session.id)
        rid = msg.get("id")

        async def run() -> None:
            reply: Dict[str, Any] = {"kind": "input_result", "id": rid, "ok": True}
            try:
                if device is None or device.closed or not device.acting:
                    raise ToolError("real input is only dispatched in a device while an act runs")
                await device.inputs.dispatch(msg)
            except (ToolError, ValueError, TypeError) as exc:  # _CdpError is a ToolError; bad numbers too
                reply = {"kind": "input_result", "id": rid, "ok": False, "error": str(exc)[:500]}
            handler = session.handler
            if handler is not None:
                handler.send_json(reply)

        self.hub.spawn(run())


def _is_device_process(pid: int, profile: str) -> bool:
    """Is `pid` still the browser that used `profile` (not a recycled pid)?"""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return profile.encode() in fh.read()
    except FileNotFoundError:
        return os.path.isdir("/proc/self") is False  # no /proc (macOS): trust the record
    except OSError:
        return False


def _remove_profile(path: str) -> None:
    """Remove a temporary profile; the browser's helpers may write for a moment after it exits."""
    for _ in range(10):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            return
        time.sleep(0.1)


# -- faults on purpose (reticle_fault) --------------------------------------------------------------
# A fault makes one tab's matching requests fail (or wait) so that an agent can prove the app tells
# the user.  In a device it acts in the browser's network layer (CDP Fetch: the request never
# reaches the server unless it is only delayed); in a tab with the script tag it acts in the SDK's
# fetch and XHR wrappers.  Every request a fault touched is marked on the page's own record of it
# (`faulted: true`, `faultId`), so no verdict mistakes a fault's answer for the server's.

FAULT_TTL_MS_DEFAULT = 600000        # a fault expires this long after it was set, unless ttlMs says
FAULT_MAX_PER_TAB = 32
FAULT_HIT_KEEP_MS = 120000           # a request a device fault touched is matched to the page's record within this
_FAULT_CDP_TYPES = {"document": "Document", "fetch": "Fetch", "xhr": "XHR", "websocket": "WebSocket",
                    "eventsource": "EventSource", "script": "Script", "stylesheet": "Stylesheet", "image": "Image",
                    "font": "Font", "media": "Media", "other": "Other"}
_FAULT_SDK_TYPES = ("fetch", "xhr", "websocket")
_FAULT_DEVICE_COVERS = ["documents", "form posts", "fetch", "XHR", "WebSocket handshakes", "EventSource",
                        "scripts, styles, images and fonts"]
_FAULT_SDK_COVERS = ["fetch", "XHR", "WebSocket handshakes"]
_FAULT_SDK_MISSES = ["documents and form posts", "EventSource", "scripts, styles and images",
                     "requests made by workers"]


class _Fault:
    """One fault: what it matches, what it answers, how often and until when, and whose it is."""

    def __init__(self, fid: str, owner: str, session_id: str, spec: dict, now_ms: float) -> None:
        match = spec["match"]
        self.id = fid
        self.owner = owner
        self.session_id = session_id
        self.url_contains = str(match["urlContains"])
        self.method = str(match["method"]).upper() if match.get("method") else None
        self.resource_type = str(match["resourceType"]).lower() if match.get("resourceType") else None
        self.respond = dict(spec["respond"]) if spec.get("respond") else None
        self.delay_ms = int(spec.get("delayMs") or 0)
        self.abort = bool(spec.get("abort"))
        self.times = spec.get("times")
        self.ttl_ms = int(spec.get("ttlMs") or FAULT_TTL_MS_DEFAULT)
        self.created = now_ms
        self.expires = now_ms + self.ttl_ms
        self.expires_wall = time.time() + self.ttl_ms / 1000.0
        self.hits = 0
        self.cleared = False

    def live(self, now_ms: float) -> bool:
        return not self.cleared and now_ms < self.expires and (self.times is None or self.hits < self.times)

    def fits(self, method: Any, url: Any, rtype: Optional[str] = None) -> bool:
        if self.method and str(method or "GET").upper() != self.method:
            return False
        if self.url_contains not in str(url or ""):
            return False
        if self.resource_type in ("fetch", "xhr") and rtype in ("fetch", "xhr"):
            return True  # the browser's network layer does not always tell fetch from XHR
        return not (self.resource_type and rtype and rtype != self.resource_type)

    def what(self) -> str:
        if self.abort:
            return "aborted" + (" after %d ms" % self.delay_ms if self.delay_ms else "")
        if self.respond:
            late = " after %d ms" % self.delay_ms if self.delay_ms else ""
            return "answered %s%s" % (self.respond.get("status"), late)
        return "delayed %d ms" % self.delay_ms

    def public(self, now_ms: float) -> dict:
        match: Dict[str, Any] = {"urlContains": self.url_contains}
        if self.method:
            match["method"] = self.method
        if self.resource_type:
            match["resourceType"] = self.resource_type
        out: Dict[str, Any] = {"faultId": self.id, "sessionId": self.session_id, "match": match, "does": self.what(),
                               "hits": self.hits, "live": self.live(now_ms), "expiresAt": _wall_iso(self.expires_wall)}
        if self.times is not None:
            out["times"] = self.times
            out["remaining"] = max(0, self.times - self.hits)
        return out

    def for_sdk(self, now_ms: float) -> dict:
        """What the SDK's wrappers need (no owner, no session)."""
        out: Dict[str, Any] = {"id": self.id, "urlContains": self.url_contains, "method": self.method,
                               "resourceType": self.resource_type, "delayMs": self.delay_ms, "abort": self.abort,
                               "expiresInMs": max(0, round(self.expires - now_ms))}
        if self.respond:
            out["respond"] = self.respond
        if self.times is not None:
            out["remaining"] = max(0, self.times - self.hits)
        return out


async def _quietly(job: Awaitable) -> None:
    """Run a background job whose failure (a tab gone, a browser gone) only needs a log line."""
    try:
        await job
    except ToolError as exc:
        _emit(_log, logging.INFO, "background_job_failed", why=exc.error[:300])


def _cdp_pattern(text: str) -> str:
    """A CDP Fetch urlPattern matching any URL that contains `text` (`*`, `?` and `\\` escaped)."""
    return "*" + re.sub(r"([*?\\])", r"\\\1", text) + "*"


class _Faults:
    """Every fault of one daemon, per tab.  A fault acts on the tab it was set on and on no other;
    only the client that set it lists or clears it; it ends with its ttl, its `times`, a clear, or
    the tab (a closed device, a tab that went away and did not come back)."""

    def __init__(self, hub: "Hub") -> None:
        self.hub = hub
        self.tabs: Dict[str, Dict[str, _Fault]] = {}
        self.hits: Dict[str, collections.deque] = {}       # session id -> [fault id, method, url, t, used]
        self.device_patterns: Dict[str, Tuple[str, ...]] = {}  # CDP page session -> patterns enabled
        self.listening: set = set()
        self.timers: Dict[str, Any] = {}

    # -- bookkeeping ------------------------------------------------------------------------------
    def _tab_alive(self, sid: str) -> bool:
        bridge = self.hub.bridge
        return sid in bridge.sessions or sid in bridge.departed or self.hub.devices.for_session(sid) is not None

    def live(self, sid: str) -> List[_Fault]:
        if sid in self.tabs and not self._tab_alive(sid):
            self.drop_tab(sid)
        now = self.hub.clock()
        return [f for f in self.tabs.get(sid, {}).values() if f.live(now)]

    def known(self, sid: str, fid: Any) -> Optional[_Fault]:
        return self.tabs.get(sid, {}).get(fid) if isinstance(fid, str) else None

    def drop_tab(self, sid: str) -> None:
        for fid in self.tabs.pop(sid, {}):
            timer = self.timers.pop(fid, None)
            if timer is not None:
                timer.cancel()
        self.hits.pop(sid, None)

    def add(self, session: "_BrowserSession", owner: str, spec: dict) -> _Fault:
        tab = self.tabs.setdefault(session.id, {})
        for fid in [k for k, f in tab.items() if not f.live(self.hub.clock())]:
            del tab[fid]
        if len(tab) >= FAULT_MAX_PER_TAB:
            raise ToolError("tab %s already has %d faults (at most %d)" % (session.id, len(tab), FAULT_MAX_PER_TAB),
                            "clear some with reticle_fault {clear: true}")
        fault = _Fault("f" + secrets.token_hex(4), owner, session.id, spec, self.hub.clock())
        tab[fault.id] = fault
        loop = asyncio.get_running_loop()
        self.timers[fault.id] = loop.call_later(fault.ttl_ms / 1000.0, lambda: self.hub.spawn(self.sync(session.id)))
        return fault

    def clear(self, sid: str, owner: str, which: Any) -> List[str]:
        tab = self.tabs.get(sid, {})
        gone = [f for f in tab.values() if f.owner == owner and (which is True or f.id == which)]
        for f in gone:
            f.cleared = True
            del tab[f.id]
            timer = self.timers.pop(f.id, None)
            if timer is not None:
                timer.cancel()
        return [f.id for f in gone]

    def take(self, sid: str, method: Any, url: Any, rtype: Optional[str]) -> Optional[_Fault]:
        """The first live fault of tab `sid` that fits this request, its hit counted and noted."""
        for fault in self.live(sid):
            if fault.fits(method, url, rtype):
                fault.hits += 1
                hits = self.hits.setdefault(sid, collections.deque(maxlen=500))
                hits.append([fault.id, str(method or "GET").upper(), str(url or ""), self.hub.clock(), False])
                return fault
        return None

    # -- the page's records: a request a fault touched says so ---------------------------------------
    def mark(self, session: "_BrowserSession", event: dict) -> None:
        """Set `faulted`/`faultId` on a completed request's record when a fault of this tab touched it,
        and take them off when none did (a page cannot claim a fault it never met)."""
        data = event["data"]
        claimed = data.pop("faultId", None)
        data.pop("faulted", None)
        fault = self.known(session.id, claimed)
        if fault is not None and (session.device is None or fault.resource_type == "websocket"):
            # the SDK's wrappers applied it (fetch and XHR with the script tag; WebSockets everywhere)
            if event["type"] == "net.request" or data.get("direction") == "open":
                fault.hits += 1
            data["faulted"] = True
            data["faultId"] = fault.id
            return
        if session.device is None or event["type"] != "net.request":
            return
        horizon = self.hub.clock() - FAULT_HIT_KEEP_MS
        method = str(data.get("method") or "GET").upper()
        for hit in self.hits.get(session.id, ()):
            fault = self.known(session.id, hit[0])
            if hit[4] or hit[3] < horizon or hit[1] != method or fault is None:
                continue
            if fault.fits(method, data.get("url")) or data.get("url") == hit[2]:
                hit[4] = True
                data["faulted"] = True
                data["faultId"] = fault.id
                return

    # -- putting faults in force -----------------------------------------------------------------------
    async def sync(self, sid: str) -> None:
        """Put tab `sid`'s live faults in force: Fetch patterns in a device, the SDK's list with the
        script tag."""
        device = self.hub.devices.for_session(sid)
        if device is not None:
            await self.sync_device(device)
        session = self.hub.bridge.get(sid)
        if session is None or session.handler is None:
            return
        now = self.hub.clock()
        # the SDK applies the faults of a script-tag tab, and a device's WebSocket faults (the
        # browser's network layer does not hold WebSocket handshakes)
        faults = [f.for_sdk(now) for f in self.live(sid) if device is None or f.resource_type == "websocket"]
        await session.command("fault_set", {"faults": faults})

    async def sync_device(self, device: "_Device") -> None:
        """Make a device's CDP Fetch interception match the tab's live faults (WebSocket faults are the
        SDK's); Fetch.enable/disable is sent only when the patterns changed."""
        page = device.page
        if page is None or device.closed or device.cdp.closed:
            return
        if device.id not in self.listening:
            self.listening.add(device.id)
            device.cdp.listeners.append(lambda method, params, s: self._on_cdp(device, method, params, s))
        patterns = []
        for fault in self.live(device.session_id):
            if fault.resource_type == "websocket":
                continue  # the SDK's WebSocket wrapper drops those (sync)
            pattern: Dict[str, Any] = {"urlPattern": _cdp_pattern(fault.url_contains), "requestStage": "Request"}
            if fault.resource_type in ("fetch", "xhr"):
                patterns.append(dict(pattern, resourceType="Fetch"))
                pattern["resourceType"] = "XHR"
            elif fault.resource_type:
                pattern["resourceType"] = _FAULT_CDP_TYPES[fault.resource_type]
            patterns.append(pattern)
        key = tuple(sorted(_dumps(p) for p in patterns))
        if self.device_patterns.get(page, ()) == key:
            return
        if patterns:
            await device.cdp.call("Fetch.enable", {"patterns": patterns, "handleAuthRequests": False}, page)
            self.device_patterns[page] = key
        else:
            await device.cdp.call("Fetch.disable", {}, page)
            self.device_patterns.pop(page, None)

    def _on_cdp(self, device: "_Device", method: str, params: dict, session: Optional[str]) -> None:
        if method == "Fetch.requestPaused" and session is not None:
            self.hub.spawn(self._paused(device, params, session))

    async def _paused(self, device: "_Device", params: dict, page: str) -> None:
        """A request the browser holds for us: answer it as the fault says, or let it go."""
        req = params.get("request") or {}
        rid = params.get("requestId")
        rtype = str(params.get("resourceType") or "other").lower()
        fault = self.take(device.session_id, req.get("method"), req.get("url"), rtype) if page == device.page else None
        call = device.cdp.call
        try:
            if fault is None:
                await call("Fetch.continueRequest", {"requestId": rid}, page)
                if not self.live(device.session_id):
                    self.hub.spawn(self.sync_device(device))
                return
            _emit(_device_log, logging.INFO, "fault_hit", faultId=fault.id, sessionId=device.session_id,
                  method=req.get("method"), resourceType=rtype, does=fault.what())
            if fault.delay_ms:
                await asyncio.sleep(fault.delay_ms / 1000.0)
            if fault.abort:
                await call("Fetch.failRequest", {"requestId": rid, "errorReason": "Failed"}, page)
            elif fault.respond:
                r = fault.respond
                headers = [{"name": str(k), "value": str(v)} for k, v in (r.get("headers") or {}).items()]
                if not any(h["name"].lower() == "content-type" for h in headers):
                    headers.append({"name": "Content-Type", "value": "text/plain; charset=utf-8"})
                body = str(r.get("body") if r.get("body") is not None else "Reticle fault %s" % fault.id)
                await call("Fetch.fulfillRequest", {"requestId": rid, "responseCode": int(r["status"]),
                                                    "responseHeaders": headers,
                                                    "body": base64.b64encode(body.encode("utf-8")).decode("ascii")},
                           page)
            else:
                await call("Fetch.continueRequest", {"requestId": rid}, page)
            if fault.times is not None and fault.hits >= fault.times:
                self.hub.spawn(self.sync_device(device))
        except _CdpError as exc:  # the page navigated away or the browser went: nothing is left to answer
            _emit(_device_log, logging.INFO, "fault_unanswered", sessionId=device.session_id, why=str(exc))


###############################################################################
# Predicates ##################################################################
###############################################################################
# The grammar is data: the parser, its error messages and the
# reticle://predicates resource all come from _PREDICATE_KINDS.

_P_SINCE = {"type": "number", "minimum": 0, "description": "only events at or after this cursor"}
_ELEMENT_STATES = ["visible", "hidden", "enabled", "disabled", "checked", "expanded", "focused", "present",
                   "inViewport"]
_FLAGS = {"type": "string", "pattern": "^[imsu]*$", "description": "regular expression flags"}
# A name or text to match: a string (names: exact; text, labels: contains), or how to match it.
_TEXT_MATCH = {"anyOf": [{"type": "string"}, {
    "type": "object", "additionalProperties": False, "minProperties": 1, "maxProperties": 2,
    "properties": {"contains": {"type": "string"}, "equals": {"type": "string"},
                   "matches": {"type": "string", "minLength": 1}, "flags": _FLAGS}}]}
_ELEMENT_QUERY: Dict[str, Any] = {
    "type": "object",
    "properties": {
        "by": {"enum": ["role", "text", "label", "placeholder", "testid", "alt"]},
        "value": _TEXT_MATCH, "role": {"type": "string"}, "name": _TEXT_MATCH,
        "text": _TEXT_MATCH, "label": _TEXT_MATCH, "placeholder": _TEXT_MATCH,
        "testid": {"type": "string"}, "alt": _TEXT_MATCH,
        "scope": {"type": "string"}, "self": {"type": "boolean"},
    },
    "additionalProperties": False, "minProperties": 1,
}
_LOCATOR_FIELDS = ("by", "value", "role", "name", "text", "label", "placeholder", "testid", "alt")

def _leaves(p: dict, under_not: bool = False) -> List[Tuple[dict, bool]]:
    """The leaf predicates of `p`, each with whether a `not` is above it."""
    if p["kind"] in ("allOf", "anyOf"):
        return [leaf for c in p["predicates"] for leaf in _leaves(c, under_not)]
    if p["kind"] == "not":
        return _leaves(p["predicate"], True)
    return [(p, under_not)]


def _value_matches(expected: Any, actual: Any) -> bool:
    if expected == "*":
        return actual is not None
    if isinstance(expected, dict) and expected and any(k.startswith("$") for k in expected):
        for op, arg in expected.items():
            try:
                if op == "$gte" and not actual >= arg:
                    return False
                if op == "$lte" and not actual <= arg:
                    return False
                if op == "$gt" and not actual > arg:
                    return False
                if op == "$lt" and not actual < arg:
                    return False
                if op == "$contains" and arg not in actual:
                    return False
                if op == "$length" and not len(actual) == arg:
                    return False
                if op not in ("$gte", "$lte", "$gt", "$lt", "$contains", "$length"):
                    return False
            except TypeError:
                return False
        return True
    return _deep_equal(expected, actual)


def _deep_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b))
    return a == b


_FAILURE_WORDS = re.compile(r"error|fail|invalid|reject|denied|unable|could not|couldn't", re.I)
# what a message the user is shown says when something failed: the words above, and the phrases
# of form validation and refusals ("Enter a valid email address.", "Title can't be blank")
_FAILURE_TEXT = re.compile(
    r"error|fail|invalid|reject|denied|unable|could not|couldn't|can(no|')t be blank|(is|are) required|"
    r"must (be|not|have|contain)|enter a valid|please (correct|enter|fix|try again|provide|select|choose)|"
    r"\bnot (valid|allowed|permitted|saved|found)\b|try again|already (exists|taken|in use|registered)|"
    r"too (short|long|large|many)|forbidden|unauthori[sz]ed|expired|went wrong|nothing was (saved|changed)|"
    r"(was|were)n't saved|did not save|refused|declined", re.I)
_NO_FAILURE = re.compile(r"\b(no|without|0|zero)\s+(errors?|failures?|problems?|issues?)\b", re.I)
_BLAMES_USER = re.compile(r"denied|invalid|unauthor|forbidden|incorrect|wrong |not allowed|not permitted", re.I)


# -- the observation: what Observe saw, and what every kind's `judge` reads ----------------------

class _ReadFailed:
    """A live read the page could not answer (the tab went away, a command timed out)."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class _Observation:
    """Everything a verdict is judged on, gathered by Observe (the only async stage) and read by
    the pure `judge` of each kind and by the verdict rules.

    `window` holds the events from `since` on, up to the end of the observation, and `known` what
    the session knew then; the predicate was judged at the instant `now`, over the events up to
    the sequence number `upto` (None: all of them) with the requests `open` then still in flight.
    `live` holds each live leaf's read of the page and `near` its near misses (keyed by
    `_leaf_key`).  `after_act`: the window starts at an act (quiet counts from it); `effect` is
    what the act reported; `lost`: the tab went away; `timed_out`: the wait ran out (its ms);
    `action` the act's action when the observation follows one (act_and_wait), and `act_at` the
    cursor of the last act inside the window (the act itself, or one an assert follows); `shown`
    the messages the page shows at the end (each with `related`: in what the act touched)."""

    __slots__ = ("window", "known", "now", "since", "upto", "open", "url", "after_act", "effect", "live", "near",
                 "already_true", "lost", "timed_out", "action", "act_at", "shown", "pending", "failure_decided")

    def __init__(self, window: List[dict], known: Optional["_Known"] = None, now: float = 0.0, since: float = 0.0,
                 upto: Optional[int] = None, open_requests: Optional[List[dict]] = None, url: str = "",
                 after_act: bool = False, effect: Any = None, live: Optional[Dict[str, Any]] = None,
                 near: Optional[Dict[str, Any]] = None, already_true: bool = False, lost: Optional[str] = None,
                 timed_out: Optional[float] = None, action: Optional[str] = None,
                 act_at: Optional[float] = None, shown: Optional[List[dict]] = None) -> None:
        self.window = window
        self.known = known if known is not None else _Known([], {}, None)
        self.now = now
        self.since = since
        self.upto = upto
        self.open = open_requests if open_requests is not None else list(self.known.open_requests)
        self.url = url
        self.after_act = after_act
        self.effect = effect
        self.live = live or {}
        self.near = near or {}
        self.already_true = already_true
        self.lost = lost
        self.timed_out = timed_out
        self.action = action                # the act this observation follows (act_and_wait), else None
        self.act_at = act_at                # the cursor of the last act inside the window, if any
        self.shown = shown                  # the messages the page shows now (alerts_read), None: not read
        self.pending: List[Tuple[str, bool]] = []  # the act's work still going at the horizon's cap: (what, decisive)
        self.failure_decided: Optional[str] = None  # a failure shown with the act's work done: decided early

    def start(self, p: dict) -> float:
        """Where leaf `p`'s window starts: the observation's, or the leaf's own later `since`."""
        return float(p["since"]) if p.get("since") is not None and float(p["since"]) > self.since else self.since

    def events(self, p: dict) -> List[dict]:
        """The events leaf `p` is judged on."""
        start = self.start(p)
        return [e for e in self.window if e["t"] >= start and (self.upto is None or e.get("seq", 0) <= self.upto)]

    def open_since(self, t: float) -> List[dict]:
        """Requests in flight at the judged instant that started at or after `t`."""
        return [d for d in self.open if d.get("startedAt", 0) >= t]


def _leaf_key(p: dict) -> str:
    """The key of a leaf's live read in an observation."""
    return _dumps(p)


# -- one judge per kind: (p, observation) -> result; the live kinds read the page first -----------

def _judge_net(p: dict, obs: _Observation) -> dict:
    """A completed request matching the filters (see the `net` record); in flight, unreadable or
    answered otherwise each say so."""
    window = obs.events(p)
    done = _calls(window)
    matched = [d for d in done if _call_matches(d, p)]
    if p.get("bodyContains"):
        with_body = [d for d in matched
                     if isinstance(d.get("responseBody"), str) and p["bodyContains"] in d["responseBody"]]
        if not with_body and matched:
            return _net_body_missed(p, matched)
        matched = with_body
    pending = [d for d in obs.open_since(window[0]["t"] if window else 0)
               if _call_matches(d, p, pending=True)]
    if "count" in p:
        return _net_count(p, matched, pending)
    if matched:
        return {"pass": True, "evidence": matched[0], "assertion": "net.present"}
    if pending:
        return {"pass": False, "inconclusive": "%s is still in flight; its outcome is not known yet"
                % _call_label(pending[0]), "assertion": "net.present"}
    return _net_unmatched(p, obs, window, done)


def _net_body_missed(p: dict, matched: List[dict]) -> dict:
    """`bodyContains` over requests that matched otherwise: a body not captured cannot be checked;
    a captured one without the text is a miss."""
    unread = [d for d in matched if not isinstance(d.get("responseBody"), str)]
    if unread:
        return {"pass": False, "inconclusive": "the response body of %s was not captured, so its content "
                "cannot be checked (capture is off, or the body was not text)" % _call_label(unread[0]),
                "assertion": "net.body"}
    return {"pass": False, "assertion": "net.body",
            "expected": "a response body containing %r" % p["bodyContains"],
            "observed": _short(matched[-1].get("responseBody"), 200),
            "failureReason": "the request fired, but its response body does not contain %r" % p["bodyContains"]}


def _net_count(p: dict, matched: List[dict], pending: List[dict]) -> dict:
    """`count`: exactly that many matching requests; more is decided, fewer may still be in flight."""
    if len(matched) == p["count"]:
        return {"pass": True, "evidence": {"count": len(matched), "calls": matched[:5]}, "assertion": "net.count"}
    over = len(matched) > p["count"]
    out = {"pass": False, "assertion": "net.count", "expected": "%d × %s" % (p["count"], _describe_predicate(p)),
           "observed": "%d × (%s)" % (len(matched), ", ".join("%s → %s" % (_call_label(d), d.get("status"))
                                                              for d in matched[:8])),
           "failureReason": "expected exactly %d matching request(s), saw %d" % (p["count"], len(matched)),
           "decided": over}
    if over:
        out["decidedBy"] = "count-exceeded"
    if not over and pending:
        out["pendingRequests"] = [_call_label(d) for d in pending[:3]]
    return out


def _net_unmatched(p: dict, obs: _Observation, window: List[dict], done: List[dict]) -> dict:
    """No request matched and none is in flight: headers or a status that cannot be read say so; a
    write answered otherwise, or traffic a net predicate cannot see, is named; else a plain miss."""
    if p.get("header"):
        headless = [d for d in done if not isinstance(d.get("responseHeaders"), dict)
                    and _call_matches(d, {k: v for k, v in p.items() if k != "header"})]
        if headless:
            return {"pass": False, "assertion": "net.header", "inconclusive": (
                "%s answered, but its response headers were not captured (a document request, or capture is "
                "off), so the header %r cannot be checked" % (_call_label(headless[0]), p["header"]["name"]))}
    hidden = [d for d in done if d.get("statusKnown") is False and _call_matches(d, p, pending=True)]
    if hidden and ("status" in p or "ok" in p):
        return {"pass": False, "assertion": "net.present", "inconclusive": (
            "%s happened, but the browser does not expose its status (%s), so a predicate on its status "
            "cannot be decided; drop status, or assert what the next page shows" % (
                _call_label(hidden[0]), hidden[0].get("statusNote") or "a document request")), "evidence": hidden[0]}
    if "status" in p or "ok" in p:
        answered = _net_answered_otherwise(p, obs, window)
        if answered is not None:
            return answered
    expected = _describe_predicate(p)
    # unseen traffic hides the request only when it could be it: a message on a URL the filter names,
    # on a channel whose request could have had the filter's method (_frame_could_be)
    frames = [d for d in _frames(window) if _frame_could_be(d, p, window)]
    if frames:
        return {"pass": False, "assertion": "net.present", "inconclusive": (
            "no fetch/XHR matched %s, but this window holds %d WebSocket/EventSource message(s) (%s) that a net "
            "predicate cannot see; match them with {kind: \"frame\", ...}" % (
                expected, len(frames), _frame_label(frames[0])))}
    seen = []
    for d in done:
        note = " (%s)" % d["statusNote"] if d.get("httpStatus") else ""
        label = "%s → %s%s" % (_call_label(d), d.get("status"), note)
        if label not in seen:
            seen.append(label)
    out: Dict[str, Any] = {"pass": False, "assertion": "net.present", "expected": expected,
                           "observed": seen[:8] or "no calls at all in this window",
                           "failureReason": "no completed request matched %s" % expected}
    enveloped = [d for d in done if d.get("httpStatus") and _call_matches(d, p, pending=True)]
    if enveloped:
        out["failureReason"] += "; %s answered %s: %s" % (_call_label(enveloped[-1]), enveloped[-1].get("status"),
                                                          enveloped[-1].get("statusNote"))
    elsewhere = _frames(window)
    if elsewhere:
        out["failureReason"] += ("; the %d WebSocket/EventSource message(s) of this window (%s) are on other URLs "
                                 "or channels that cannot carry that method, so none was it; match messages with "
                                 "{kind: \"frame\", ...}" % (
                                     len(elsewhere), _frame_label(elsewhere[0])))
    return out


def _net_answered_otherwise(p: dict, obs: _Observation, window: List[dict]) -> Optional[dict]:
    """The awaited write happened and was answered otherwise (not the status or `ok` asked for):
    final once a client retry had its chance (RETRY_GRACE_MS), else None."""
    answered = [e for e in window if e["type"] == "net.request" and _is_write(e["data"])
                and _call_matches(e["data"], p, pending=True)]
    if not answered:
        return None
    last = answered[-1]
    out = {"pass": False, "assertion": "net.answered-otherwise", "expected": _describe_predicate(p),
           "observed": ["%s → %s" % (_call_label(e["data"]), e["data"].get("status") or e["data"].get("error"))
                        for e in answered[-5:]],
           "evidence": last["data"],
           "failureReason": "%s answered %s, not as asked%s" % (
               _call_label(last["data"]), last["data"].get("status") or last["data"].get("error"),
               " (%s)" % last["data"]["statusNote"] if last["data"].get("httpStatus") else "")}
    age = obs.now - last["t"]
    if age >= RETRY_GRACE_MS:
        out.update(decided=True, decidedBy="answered-otherwise")
    else:
        out["retryAfterMs"] = round(RETRY_GRACE_MS - age)
    return out


def _frame_method(d: dict, window: List[dict]) -> Optional[str]:
    """The HTTP method of the request that carries message `d`, or None when it is not known: a
    WebSocket opens with a GET upgrade and an EventSource is a GET; a streamed response belongs to
    the fetch of its requestId, whatever method that had."""
    transport = d.get("transport")
    if transport in ("ws", "sse"):
        return "GET"
    rid = d.get("requestId")
    for e in window:
        if e["type"] in ("net.request", "net.pending") and rid and e["data"].get("requestId") == rid:
            method = e["data"].get("method")
            return str(method).upper() if method else None
    return None


def _frame_could_be(d: dict, p: dict, window: List[dict]) -> bool:
    """Could message `d` be the request a missed `net` predicate `p` looks for?  Only on a URL the
    filter names and a channel whose request could have had the filter's method: a socket's messages
    are never a POST or a DELETE, a stream's are only its fetch's method."""
    if p.get("urlContains") and p["urlContains"] not in str(d.get("url", "")):
        return False
    want = str(p.get("method") or "").upper()
    if not want:
        return True
    method = _frame_method(d, window)
    return method is None or method == want


def _judge_console(p: dict, obs: _Observation) -> dict:
    """Judge a console predicate over the window: log, warn and error messages and uncaught errors
    (`level` narrows them; `contains` matches the text).  `absent` fails, decided, on the first hit;
    otherwise a hit passes and none fails, naming the level and text looked for."""
    window = obs.events(p)
    level = p.get("level")
    types: Tuple[str, ...]
    if level is None:
        types = ("console.log", "console.warn", "console.error", "error.uncaught")
    elif level == "error":
        types = ("console.error", "error.uncaught")
    else:
        types = ("console." + level,)
    hits = []
    for e in window:
        if e["type"] not in types:
            continue
        d = e["data"] if isinstance(e.get("data"), dict) else {}
        text = d.get("text") or d.get("message") or ""
        text = text if isinstance(text, str) else _dumps(text)
        if p.get("contains") and p["contains"] not in text:
            continue
        hits.append({"level": "error" if e["type"] == "error.uncaught" else e["type"][8:], "text": _short(text, 300),
                     "uncaught": e["type"] == "error.uncaught", "t": e["t"]})
    if p.get("absent"):
        if hits:
            return {"pass": False, "assertion": "console.absent", "evidence": hits[:5], "decided": True,
                    "decidedBy": "absence-violated",
                    "observed": [h["text"] for h in hits[:5]],
                    "failureReason": "%d console %s message(s) appeared: %s"
                                     % (len(hits), level or "", hits[0]["text"])}
        return {"pass": True, "evidence": {"absent": True, "level": level}, "assertion": "console.absent"}
    if hits:
        return {"pass": True, "evidence": hits[:5], "assertion": "console.present"}
    return {"pass": False, "assertion": "console.present", "failureReason": "no console %s message%s" % (
        level or "", " containing %r" % p["contains"] if p.get("contains") else "")}


def _judge_animation(p: dict, obs: _Observation) -> dict:
    window = obs.events(p)
    want = "anim.end" if p.get("completed") else "anim.start"
    seen = []
    for e in window:
        if e["type"] != want:
            continue
        d = e["data"] if isinstance(e.get("data"), dict) else {}
        seen.append(d.get("name"))
        if p.get("name") and d.get("name") != p["name"]:
            continue
        if p.get("target") and d.get("ref") != p["target"] and d.get("targetRef") != p["target"]:
            continue
        return {"pass": True, "evidence": d, "assertion": "animation"}
    return {"pass": False, "assertion": "animation", "observed": seen[:8] or "no animations in this window",
            "failureReason": "no %s event for %s" % (want, p.get("name") or "any animation")}


def _judge_signal(p: dict, obs: _Observation) -> dict:
    """Judge a signal predicate: the app's reticle.signal(name, data) calls in the window, matched by
    name and `dataMatches`.  With `count` it passes on exactly that many (more is decided: a signal
    cannot un-fire); else one match passes, a named one with other data is a payload near miss, and
    none fails listing the signals that did fire."""
    window = obs.events(p)
    named, matched = [], []
    for e in window:
        if e["type"] != "signal":
            continue
        d = e["data"] if isinstance(e.get("data"), dict) else {}
        if p.get("name") and d.get("name") != p["name"]:
            continue
        named.append(d)
        data = d.get("data")
        dm = p.get("dataMatches")
        if dm and not (isinstance(data, dict) and all(_value_matches(v, data.get(k)) for k, v in dm.items())):
            continue
        matched.append(d)
    if "count" in p:
        if len(matched) == p["count"]:
            return {"pass": True, "evidence": {"count": len(matched), "signals": matched[:5]},
                    "assertion": "signal.count"}
        return {"pass": False, "assertion": "signal.count", "decided": len(matched) > p["count"],
                "decidedBy": "count-exceeded" if len(matched) > p["count"] else None,
                "failureReason": "expected signal %r exactly %d time(s), saw %d"
                                 % (p.get("name"), p["count"], len(matched))}
    if matched:
        return {"pass": True, "evidence": matched[0], "assertion": "signal"}
    if named:
        return {"pass": False, "assertion": "signal.payload",
                "evidence": {"nearMiss": [d.get("data") for d in named[:5]]},
                "failureReason": "signal %r fired, but its data did not match %s"
                                 % (p.get("name"), _dumps(p.get("dataMatches")))}
    fired = sorted({str((e.get("data") or {}).get("name")) for e in window if e["type"] == "signal"})
    return {"pass": False, "assertion": "signal.absent", "observed": fired or "no signals in this window",
            "failureReason": "signal %r did not fire" % p.get("name", "*")}


def _judge_route(p: dict, obs: _Observation) -> dict:
    window = obs.events(p)
    changes = [e for e in window if e["type"] == "route.change" and isinstance(e.get("data"), dict)]
    if changes:
        to = str(changes[-1]["data"].get("to", ""))
        decided_by = "route-change"
    else:
        to = obs.url
        decided_by = "current-route"
    parts = urllib.parse.urlsplit(to)
    path = parts.path or "/"
    full = path + ("?" + parts.query if parts.query else "") + ("#" + parts.fragment if parts.fragment else "")
    evidence = {"to": to, "pathname": path, "decidedBy": decided_by}
    if "pathname" in p and path != p["pathname"]:
        return {"pass": False, "assertion": "route.pathname", "expected": p["pathname"], "observed": path,
                "failureReason": "the route is %r, not %r" % (path, p["pathname"]), "evidence": evidence}
    if "contains" in p and p["contains"] not in full:
        return {"pass": False, "assertion": "route.contains", "expected": p["contains"], "observed": full,
                "failureReason": "the route %r does not contain %r" % (full, p["contains"]), "evidence": evidence}
    return {"pass": True, "evidence": evidence, "assertion": "route"}


def _judge_settled(p: dict, obs: _Observation) -> dict:
    window = obs.events(p)
    quiet_ms = float(p.get("quietMs", 500))
    open_ids = _still_open(window)
    # after an act, quiet counts from the act (a page that did nothing yet has not settled yet)
    last_busy = obs.start(p) if obs.after_act else None
    for e in window:
        if _event_type(e["type"]).busy and not _is_dev(e["data"]):
            last_busy = e["t"]
    if open_ids:
        labels = [_call_label(d) for d in open_ids.values()]
        return {"pass": False, "assertion": "settled.in-flight", "evidence": {"settled": False, "inFlight": labels[:5]},
                "failureReason": "%d request(s) still in flight: %s" % (len(labels), ", ".join(labels[:3]))}
    if last_busy is None:
        return {"pass": True, "evidence": {"settled": True, "quietForMs": None}, "assertion": "settled.quiet"}
    quiet_for = obs.now - last_busy
    if quiet_for >= quiet_ms:
        return {"pass": True, "evidence": {"settled": True, "quietForMs": round(quiet_for)},
                "assertion": "settled.quiet"}
    return {"pass": False, "assertion": "settled.quiet", "retryAfterMs": round(quiet_ms - quiet_for),
            "failureReason": "the page was busy %d ms ago (needs %d ms quiet)" % (quiet_for, quiet_ms)}


def _element_query(p: dict) -> Tuple[dict, Optional[str]]:
    """The page query of an element leaf (its locator as by/value), or why there is none."""
    q = dict(p["query"])
    if "by" not in q:
        for f in ("role", "text", "label", "placeholder", "testid", "alt"):
            if f in q:
                q["by"] = f
                q["value"] = q.pop(f)
                break
    if "by" not in q:
        return q, ("the element query names no locator (by/value, role, text, label, placeholder, testid or alt)")
    if "value" not in q:
        return q, "`by: %s` needs a `value`" % q["by"]
    return q, None


async def _read_element(session: "_BrowserSession", p: dict) -> Any:
    """The page's answer to an element leaf's probe (None when the query cannot be asked)."""
    q, problem = _element_query(p)
    if problem:
        return None
    probe = dict(q, kind="element")
    states = p.get("state") or []
    if states:
        probe["state"] = states[0]  # the page filters by one state; the rest are checked by the judge
    if len(states) > 1:
        probe["limit"] = 200
    return await session.command("eval_probe", probe)


def _element_found(p: dict, res: dict) -> Tuple[dict, int, Optional[str]]:
    """The probe's answer with every asked state checked: (answer, count, why it cannot be told)."""
    count = int(res.get("count", 0))
    states = p.get("state") or []
    if len(states) > 1:
        if count > len(res.get("elements", [])):
            return res, count, ("more than %d elements match; narrow the query to check several states"
                                % len(res.get("elements", [])))
        kept = [e for e in res.get("elements", []) if all(s in e.get("states", []) for s in states[1:])]
        res = dict(res, elements=kept, count=len(kept))
        count = len(kept)
    return res, count, None


async def _near_element(session: "_BrowserSession", p: dict, res: Any) -> Optional[dict]:
    """For an element that was not found: the same query without its state, or the role's
    elements with their names, so the answer can name what is there instead."""
    q, problem = _element_query(p)
    if problem or not isinstance(res, dict) or p.get("absent") or res.get("scopeMissing"):
        return None
    res, count, problem = _element_found(p, res)
    if problem or count > 0:
        return None
    near: Dict[str, Any] = {}
    if p.get("state"):
        near["relaxed"] = await session.command("eval_probe", dict(q, kind="element"))
        if near["relaxed"].get("count"):
            return near
    if q["by"] == "role" and q.get("name") is not None:
        near["peers"] = await session.command("eval_probe", {"kind": "element", "by": "role", "value": q["value"],
                                                             "limit": 20})
    return near


def _judge_element(p: dict, obs: _Observation) -> dict:
    """An element leaf over its live read (and, on a miss, its near misses)."""
    q, problem = _element_query(p)
    if problem:
        return {"pass": False, "inconclusive": problem}
    res, count, problem = _element_found(p, obs.live.get(_leaf_key(p)) or {})
    if problem:
        return {"pass": False, "inconclusive": problem}
    what = "%s %r%s" % (q["by"], q["value"], " named %r" % q["name"] if q.get("name") else "")
    if p.get("absent"):
        if count == 0:
            return {"pass": True, "evidence": {"absent": True, "scopeMissing": bool(res.get("scopeMissing"))},
                    "assertion": "element.absent"}
        return {"pass": False, "assertion": "element.absent", "evidence": res.get("elements", [])[:5],
                "failureReason": "%d element(s) match %s, expected none" % (count, what)}
    if count > 0:
        return {"pass": True, "evidence": res.get("elements", [])[:5], "assertion": "element.present"}
    out: Dict[str, Any] = {"pass": False, "assertion": "element.present", "expected": what,
                           "failureReason": "no element matches %s%s"
                                            % (what, " in state %s" % "/".join(p["state"]) if p.get("state") else "")}
    if res.get("scopeMissing"):
        out["failureReason"] += " (the scope %r matched nothing)" % q.get("scope")
        return out
    near = obs.near.get(_leaf_key(p))
    if near is None:
        return out
    relaxed = near.get("relaxed") or {}
    if relaxed.get("count"):
        out["assertion"] = "element.state"
        out["evidence"] = {"nearMiss": relaxed.get("elements", [])[:5]}
        out["failureReason"] = "%s exists but not in state %s; its states: %s" % (
            what, "/".join(p["state"]),
            ", ".join(",".join(e.get("states", [])) for e in relaxed.get("elements", [])[:3]))
        return out
    if near.get("peers") is not None:
        names = [e.get("name", "") for e in near["peers"].get("elements", [])]
        out["assertion"] = "element.role+name"
        out["failureReason"] = "no %s named %r; saw: %s" % (q["value"], q["name"],
                                                           ", ".join(repr(n) for n in names[:12]) or "none")
        out["observed"] = names[:12]
    elif q["by"] == "testid":
        hint = res.get("hint") or {}
        present = hint.get("presentTestids") or []
        if present:
            out["failureReason"] += "; testids present here: %s" % ", ".join(present[:12])
            out["observed"] = present[:12]
    return out


def _text_wanted(p: dict) -> str:
    """How a text predicate reads in a sentence: containing 'x' / exactly 'x' / matching /x/."""
    if "equals" in p:
        return "exactly %r" % p["equals"]
    if "matches" in p:
        return "matching /%s/" % p["matches"]
    return "containing %r" % p["contains"]


async def _read_text_probe(session: "_BrowserSession", p: dict) -> Any:
    """The page's answer to a text leaf's probe."""
    probe = {"kind": "text"}
    for k in ("contains", "equals", "matches", "flags", "visible", "scope"):
        if k in p:
            probe[k] = p[k]
    return await session.command("eval_probe", probe)


async def _near_text(session: "_BrowserSession", p: dict, res: Any) -> Optional[dict]:
    """For text that was not found: what the page tells the user now (its alerts and status
    messages, errors first), the nearest texts a person would read instead."""
    if p.get("absent") or not isinstance(res, dict) or res.get("found") or not session.sdk_version:
        return None
    reply = await session.command("alerts_read", {}, timeout=2.0)
    alerts: List[Any] = []
    if isinstance(reply, dict) and isinstance(reply.get("alerts"), list):
        alerts = reply["alerts"]
    told = [d for d in alerts if isinstance(d, dict) and str(d.get("text") or "").strip()]
    told.sort(key=lambda d: not _is_failure_ui(d))
    return {"told": [_short(str(d["text"]), 120) for d in told[:5]]}


def _judge_text(p: dict, obs: _Observation) -> dict:
    res = obs.live.get(_leaf_key(p)) or {}
    found = bool(res.get("found"))
    wanted = _text_wanted(p)
    if p.get("absent"):
        if not found:
            return {"pass": True, "evidence": {"absent": True}, "assertion": "text.absent"}
        return {"pass": False, "assertion": "text.absent", "observed": res.get("sample"),
                "failureReason": "text %s is on the page" % wanted}
    if found:
        evidence = {"sample": res.get("sample"), "count": res.get("count")}
        if res.get("places") is not None:
            evidence["places"] = res["places"]
        return {"pass": True, "evidence": evidence, "assertion": "text.present"}
    out: Dict[str, Any] = {"pass": False, "assertion": "text.present", "expected": wanted,
                           "failureReason": "no%s text %s on the page" % (" visible" if p.get("visible") else "",
                                                                          wanted)}
    told = (obs.near.get(_leaf_key(p)) or {}).get("told")
    if told:  # near misses: what the page tells the user instead
        out["observed"] = told
        out["failureReason"] += "; the page tells the user: %s" % ", ".join(repr(t) for t in told[:3])
    return out


# -- frames: WebSocket, EventSource and streamed-response messages ----------------------------------

_MISSING = object()
_PACKET_PREFIX = re.compile(r"^\d+(?=[\[{])")  # socket.io / engine.io packet type: 42["update", {...}]


def _frame_body(text: str) -> str:
    """A message's text with a socket.io-style numeric packet prefix read past."""
    return _PACKET_PREFIX.sub("", text, count=1)


def _frame_value(text: str, path: str) -> Any:
    """The value at the dot `path` of a JSON message (see _frame_body); _MISSING when there is none."""
    try:
        value = json.loads(_frame_body(text))
    except ValueError:
        return _MISSING
    for part in path.split(".") if path else []:
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


def _frame_label(d: dict) -> str:
    return "%s %s %s" % (d.get("transport", "ws"), d.get("direction", "?"), d.get("url", "?"))


def _judge_frame(p: dict, obs: _Observation) -> dict:
    """Judge a socket/stream message predicate (url, direction, transport, contains, path/equals,
    count).  A message that cannot be read (binary, capture off, cut at 4 KB) makes a miss
    inconclusive rather than a no; too many matches for `count` is decided."""
    window = obs.events(p)
    candidates = [d for d in _frames(window)
                  if (not p.get("urlContains") or p["urlContains"] in str(d.get("url", "")))
                  and (not p.get("direction") or d.get("direction") == p["direction"])
                  and (not p.get("transport") or d.get("transport") == p["transport"])]
    matched, unreadable = [], []
    for d in candidates:
        text = d.get("data")
        if not isinstance(text, str):
            unreadable.append(d)
            continue
        if p.get("contains") and p["contains"] not in text:
            if d.get("dataTruncated"):
                unreadable.append(d)
            continue
        if "path" in p:
            value = _frame_value(text, p["path"])
            if value is _MISSING or ("equals" in p and not _value_matches(p["equals"], value)):
                if d.get("dataTruncated"):
                    unreadable.append(d)
                continue
        matched.append(d)
    expected = _describe_frame(p)
    if "count" in p:
        if len(matched) == p["count"] and not unreadable:
            return {"pass": True, "evidence": {"count": len(matched), "frames": matched[:5]},
                    "assertion": "frame.count"}
        if len(matched) > p["count"]:
            return {"pass": False, "assertion": "frame.count", "decided": True, "decidedBy": "count-exceeded",
                    "expected": "%d × %s" % (p["count"], expected),
                    "failureReason": "expected exactly %d matching message(s), saw %d" % (p["count"], len(matched))}
    elif matched:
        return {"pass": True, "evidence": matched[0], "assertion": "frame.present"}
    if unreadable:
        return {"pass": False, "assertion": "frame", "inconclusive": (
            "%d message(s) on %s could not be read (binary, body capture off, or cut at 4 KB), so whether one "
            "matched is unknown" % (len(unreadable), _frame_label(unreadable[0])))}
    seen = ["%s: %s" % (_frame_label(d), _short(d.get("data", ""), 80)) for d in candidates[-5:]]
    if "count" in p:
        return {"pass": False, "assertion": "frame.count", "expected": "%d × %s" % (p["count"], expected),
                "observed": seen, "failureReason": "expected exactly %d matching message(s), saw %d" % (
                    p["count"], len(matched))}
    return {"pass": False, "assertion": "frame.present", "expected": expected,
            "observed": seen or ["no socket or stream messages in this window"],
            "failureReason": "no message matched %s" % expected}


async def _read_state(session: "_BrowserSession", p: dict) -> Any:
    """A state leaf's reads: of the named store, or of every registered store at the path."""
    if p.get("store") is not None:
        return {"read": await session.command("state_read", {"store": p["store"], "path": p["path"]})}
    whole = await session.command("state_read", {})
    names = whole.get("storeNames") or list((whole.get("stores") or {}).keys())
    return {"names": names, "reads": [[n, await session.command("state_read", {"store": n, "path": p["path"]})]
                                      for n in names]}


def _judge_state(p: dict, obs: _Observation) -> dict:
    """Judge an app-state predicate from the stores the page registered, read live: with no `store`
    exactly one store may hold the path (none registered or several holding it is inconclusive, not
    a no); a missing store or path fails naming what exists, a value cut by transport caps is
    inconclusive, else the value is compared with `equals`."""
    path = p["path"]
    store = p.get("store")
    facts = obs.live.get(_leaf_key(p)) or {}
    if store is None:
        names = facts.get("names") or []
        if not names:
            return {"pass": False, "inconclusive": "no store is registered (reticle.registerStore / pushStore), "
                    "so state cannot be read"}
        reads = [(n, r) for n, r in facts.get("reads") or []]
        hits = [(n, r) for n, r in reads if r.get("found")]
        if len(hits) > 1:
            return {"pass": False, "inconclusive": "several stores have %r (%s); name one with `store`"
                    % (path, ", ".join(n for n, _ in hits))}
        if not hits:
            return {"pass": False, "assertion": "state.path-missing", "evidence": {"searchedStores": names},
                    "failureReason": "no registered store has %r (stores: %s)" % (path, ", ".join(names))}
        store, read = hits[0]
    else:
        read = facts.get("read") or {}
        if read.get("storeMissing") or (read.get("found") is False and read.get("error")):
            return {"pass": False, "assertion": "state.store-missing",
                    "evidence": {"searchedStores": read.get("storeNames")},
                    "failureReason": "no store named %r (stores: %s)"
                                     % (store, ", ".join(read.get("storeNames") or []))}
        if not read.get("found"):
            return {"pass": False, "assertion": "state.path-missing",
                    "evidence": {"availableKeys": read.get("availableKeys")},
                    "failureReason": "%s has no %r; keys there: %s"
                                     % (store, path, ", ".join(map(str, (read.get("availableKeys") or [])[:20])))}
    value = read.get("value")
    if read.get("truncated"):
        return {"pass": False, "inconclusive": "the value at %s.%s was cut by transport caps" % (store, path)}
    expected = p.get("equals", "*")
    if _value_matches(expected, value):
        return {"pass": True, "evidence": {"store": store, "path": path, "value": value}, "assertion": "state.equals"}
    return {"pass": False, "assertion": "state.equals", "expected": expected,
            "observed": "%s = %s" % (path, _short(value)),
            "failureReason": "%s.%s is %s, expected %s" % (store, path, _short(value), _short(expected))}


async def _read_storage(session: "_BrowserSession", p: dict) -> Any:
    """The page's storage at a storage leaf's key (nothing to read for `changed`: the window says)."""
    if p.get("changed"):
        return None
    args = {"key": p["key"]}
    if p.get("area"):
        args["area"] = p["area"]
    return await session.command("storage_read", args)


def _judge_storage(p: dict, obs: _Observation) -> dict:
    """Judge a web-storage predicate: `changed` looks at the writes in the window (the last one is
    compared with contains/equals); otherwise the live read of the key (present, absent, contains,
    equals), naming the keys there when it is missing."""
    window = obs.events(p)
    if p.get("changed"):
        writes = [e["data"] for e in window if e["type"] == "storage.change" and isinstance(e.get("data"), dict)
                  and e["data"].get("key") == p["key"]
                  and (not p.get("area") or e["data"].get("area") in (p["area"], p["area"].rstrip("s")))]
        if not writes:
            return {"pass": False, "assertion": "storage.changed",
                    "failureReason": "%r was not written in this window" % p["key"]}
        if "contains" in p and p["contains"] not in str(writes[-1].get("to")):
            return {"pass": False, "assertion": "storage.contains", "observed": _short(writes[-1].get("to")),
                    "failureReason": "%r was written as %s, which does not contain %r" % (
                        p["key"], _short(writes[-1].get("to")), p["contains"])}
        if "equals" in p and not _value_matches(p["equals"], writes[-1].get("to")):
            return {"pass": False, "assertion": "storage.equals", "observed": _short(writes[-1].get("to")),
                    "failureReason": "%r was written as %s, expected %s"
                                     % (p["key"], _short(writes[-1].get("to")), _short(p["equals"]))}
        return {"pass": True, "evidence": writes[-1], "assertion": "storage.changed"}
    read = obs.live.get(_leaf_key(p)) or {}
    found = bool(read.get("found"))
    if p.get("absent"):
        if found:
            return {"pass": False, "assertion": "storage.absent", "observed": _short(read.get("value")),
                    "failureReason": "%r is present (%s)" % (p["key"], read.get("area"))}
        return {"pass": True, "evidence": {"absent": True, "key": p["key"]}, "assertion": "storage.absent"}
    if not found:
        return {"pass": False, "assertion": "storage.present", "evidence": {"availableKeys": read.get("availableKeys")},
                "failureReason": "%r is not in %s storage" % (p["key"], p.get("area") or "any")}
    value = read.get("value")
    if "contains" in p and p["contains"] not in (value if isinstance(value, str) else _dumps(value)):
        return {"pass": False, "assertion": "storage.contains", "observed": _short(value),
                "failureReason": "%r is %s, which does not contain %r" % (p["key"], _short(value), p["contains"])}
    if "equals" in p and not _value_matches(p["equals"], value):
        return {"pass": False, "assertion": "storage.equals", "observed": _short(value),
                "failureReason": "%r is %s, expected %s" % (p["key"], _short(value), _short(p["equals"]))}
    return {"pass": True, "evidence": {"area": read.get("area"), "key": p["key"], "value": value},
            "assertion": "storage"}


# -- how each kind describes itself ----------------------------------------------------------------

# -- the server kind: a pure judge over the window's server records (Server truth section) ---------

def _server_records(window: List[dict]) -> List[dict]:
    return [e["data"] for e in window if e["type"] == "server.request"]


def _server_label(r: dict) -> str:
    return "%s %s" % (r.get("method") or "?", r.get("path") or "/")


def _server_line(r: dict) -> str:
    """One request as the server saw it: "POST /profile → 200, view save_profile, 0 writes, no exception"."""
    writes = [w for w in r.get("writes") or [] if w.get("committed")]
    rolled = [w for w in r.get("writes") or [] if w.get("committed") is False]
    parts = ["%s → %s" % (_server_label(r), r.get("status"))]
    if r.get("view"):
        parts.append("view %s" % r["view"])
    parts.append("%d write%s%s" % (len(writes), "" if len(writes) == 1 else "s", " (%s)" % ", ".join(
        "%s %s%s" % (w["op"], w["table"], "" if w.get("rows") is None else " ×%d" % w["rows"]) for w in writes[:3])
        if writes else ""))
    if rolled:
        parts.append("%d rolled back" % len(rolled))
    exc = r.get("exception")
    if exc:
        parts.append("raised %s: %s%s" % (exc.get("type"), _short(exc.get("message") or "", 80),
                                          " at %s" % exc["frames"][0] if exc.get("frames") else ""))
    else:
        parts.append("no exception")
    logged = [e for e in r.get("logged") or [] if not (exc and e.get("exception"))]
    if logged:
        parts.append("logged %s %s: %s" % (logged[0].get("level"), logged[0].get("logger"),
                                           _short(logged[0].get("message") or "", 80)))
    return ", ".join(parts)


def _server_rows(r: dict, spec: dict, committed: bool = True) -> int:
    """Rows the request wrote that match spec {table?, op?}: committed writes only (or, with
    committed False, only those rolled back); a statement that changed 0 rows wrote nothing, and
    one whose driver gives no row count counts 1."""
    n = 0
    for w in r.get("writes") or []:
        if (w.get("committed") is True) != committed:
            continue
        if spec.get("op") and w.get("op") != spec["op"]:
            continue
        if spec.get("table") and w.get("table", "").lower().split(".")[-1] != spec["table"].lower().split(".")[-1]:
            continue
        n += 1 if w.get("rows") is None else w["rows"]
    return n


def _server_matches(r: dict, p: dict) -> bool:
    if p.get("method") and (r.get("method") or "").upper() != p["method"].upper():
        return False
    if p.get("urlContains") and p["urlContains"] not in (r.get("path") or ""):
        return False
    if "status" in p and r.get("status") != p["status"]:
        return False
    if "exception" in p and bool(r.get("exception")) != p["exception"]:
        return False
    if "logged" in p and bool(r.get("logged")) != p["logged"]:
        return False
    if "writes" in p:
        spec = p["writes"]
        n = _server_rows(r, spec, p.get("committed") is not False)
        if "count" in spec and n != spec["count"]:
            return False
        if "count" not in spec and n < spec.get("min", 1):
            return False
    elif "committed" in p:
        if p["committed"] and not _server_rows(r, {}, True):
            return False
        if not p["committed"] and not _server_rows(r, {}, False):
            return False
    return True


def _server_unreported(now: float, window: List[dict]) -> Tuple[List[dict], List[dict]]:
    """The tab's marked requests in the window that no server record answers yet, as (awaiting,
    unreported): awaiting = still open, or answered less than SERVER_GRACE_MS ago (the record may
    be on its way); unreported = answered longer ago than that.  A record answers the request the
    SDK put its mark on (net.pending's serverMark: the id the daemon issued with the mark)."""
    reported = {(r.get("documentId"), r.get("requestId")) for r in _server_records(window)}
    done = {}
    for e in window:
        if e["type"] == "net.request" and e["data"].get("requestId"):
            done[str(e["data"]["requestId"])] = e["t"]
    awaiting: List[dict] = []
    unreported: List[dict] = []
    for e in window:
        d = e["data"]
        if e["type"] != "net.pending" or not d.get("serverMarked") or not d.get("requestId"):
            continue
        if (e.get("doc"), str(d.get("serverMark"))) in reported:
            continue
        t = done.get(str(d["requestId"]))
        (awaiting if t is None or now - t < SERVER_GRACE_MS else unreported).append(d)
    return awaiting, unreported


def _describe_server(p: dict) -> str:
    bits = ["server %s%s" % (p.get("method", "").upper() + " " if p.get("method") else "",
                             p.get("urlContains") or "request")]
    if "status" in p:
        bits.append("→ %d" % p["status"])
    if "exception" in p:
        bits.append("raising" if p["exception"] else "without an exception")
    if "logged" in p:
        bits.append("logging an error" if p["logged"] else "logging no error")
    if "writes" in p:
        w = p["writes"]
        n = "%d" % w["count"] if "count" in w else "at least %d" % w.get("min", 1)
        bits.append("writing %s row(s)%s%s" % (n, " by %s" % w["op"] if w.get("op") else "",
                                               " to %s" % w["table"] if w.get("table") else ""))
    if "committed" in p:
        bits.append("committed" if p["committed"] else "rolled back")
    return " ".join(bits)


def _judge_server(p: dict, obs: _Observation) -> dict:
    """What the server did for the tab's requests (the app's middleware reports them).  Rules, in
    order: a count that is exceeded fails at once; a match passes (a count once no marked request is
    still awaited); a marked request whose record may still arrive keeps it open; no record ever for
    this tab means the middleware is absent (unknown, saying how to install it); a marked request
    never reported makes a miss unknown; else it fails, decided once every request is answered."""
    window = obs.events(p)
    records = _server_records(window)
    matched = [r for r in records if _server_matches(r, p)]
    awaiting, unreported = _server_unreported(obs.now, window)
    expected = _describe_server(p)
    if "count" in p and len(matched) > p["count"]:
        return {"pass": False, "assertion": "server.count", "expected": "%d × %s" % (p["count"], expected),
                "observed": [_server_line(r) for r in matched[:8]], "decided": True, "decidedBy": "count-exceeded",
                "failureReason": "expected exactly %d matching server request(s), saw %d" % (p["count"], len(matched))}
    if matched and ("count" not in p or (len(matched) == p["count"] and not awaiting)):
        return {"pass": True, "assertion": "server.present",
                "evidence": {"server": [_server_line(r) for r in matched[:5]]}}
    if awaiting:
        return {"pass": False, "assertion": "server.awaiting", "retryAfterMs": SERVER_GRACE_MS,
                "inconclusive": "the server's record of %s has not arrived yet" % _call_label(awaiting[0])}
    if not obs.known.server_seen:
        return {"pass": False, "assertion": "server.absent", "inconclusive": (
            "no server record ever arrived for this tab, so what the server did cannot be known; %s"
            % _SERVER_INSTALL)}
    if unreported:
        return {"pass": False, "assertion": "server.unreported", "inconclusive": (
            "%s was marked for the server, but no record of it arrived (the middleware does not cover that "
            "route, or dropped it while the daemon was away, or the browser said another page sent it)"
            % _call_label(unreported[0]) if unreported[0].get("serverMark") else
            "%s went to the server without a mark (the tab had none left from the daemon), so what the "
            "server did for it cannot be known" % _call_label(unreported[0]))}
    observed = [_server_line(r) for r in records[-8:]]
    near = [e["t"] for e in window if e["type"] == "server.request"
            and _server_matches(e["data"], {k: p[k] for k in ("method", "urlContains") if k in p})]
    out = {"pass": False, "assertion": "server.count" if "count" in p else "server.present", "expected": expected,
           "observed": observed or "no server request in this window",
           "failureReason": "no server request matched %s%s" % (
               expected, "; the server did: %s" % "; ".join(observed[-3:]) if observed else "")}
    if near and not obs.open_since(window[0]["t"] if window else 0):
        # the request happened and the server did otherwise: final once a follow-up request had its chance
        age = obs.now - near[-1]
        if age >= RETRY_GRACE_MS:
            out.update(decided=True, decidedBy="answered-otherwise")
        else:
            out["retryAfterMs"] = round(RETRY_GRACE_MS - age)
    return out


def _describe_net(p: dict) -> str:
    text = "a %srequest %s" % (p["method"].upper() + " " if p.get("method") else "",
                               "to a URL containing %r" % p["urlContains"] if p.get("urlContains") else "to any URL")
    if "status" in p:
        text += " answering %s" % p["status"]
    elif "ok" in p:
        text += " that %s" % ("succeeded" if p["ok"] else "failed")
    if p.get("bodyContains"):
        text += " whose body contains %r" % p["bodyContains"]
    if p.get("header"):
        h = p["header"]
        text += " with header %s%s" % (h["name"], " = %r" % h["equals"] if "equals" in h else
                                       " containing %r" % h["contains"] if "contains" in h else "")
    return text


def _describe_frame(p: dict) -> str:
    text = "a %s message" % p.get("transport", "socket")
    if p.get("direction"):
        text += " %s" % ("received" if p["direction"] == "in" else "sent")
    if p.get("urlContains"):
        text += " on a URL containing %r" % p["urlContains"]
    if p.get("contains"):
        text += " containing %r" % p["contains"]
    if "path" in p:
        text += " with %s %s" % (p["path"] or "its value",
                                 "= %s" % _short(p["equals"], 60) if "equals" in p else "present")
    return text


def _one_of(p: dict, fields: Tuple[str, ...]) -> List[str]:
    given = [f for f in fields if f in p]
    if len(given) == 1:
        return []
    return ["give exactly one of %s (got %s)" % (", ".join(fields), ", ".join(given) or "none")]


def _regex_ok(p: dict, field: str) -> List[str]:
    if field not in p:
        return []
    try:
        re.compile(p[field])
    except re.error as exc:
        return ["%s is not a regular expression: %s" % (field, exc)]
    return []


def _describe_combinator(p: dict) -> str:
    if p["kind"] == "not":
        return "not %s" % _describe_predicate(p["predicate"])
    return "%s (%s)" % ("all of" if p["kind"] == "allOf" else "any of",
                        ", ".join(_describe_predicate(c) for c in p["predicates"]))


class _Kind:
    """One predicate kind, whole: its fields, its evaluator, how it describes
    itself, what grade of evidence it gives, whether it only checks presence,
    and whether it reads the live page.  The parser, its errors, the
    reticle://predicates resource, the evaluation, the description and the
    grading all read this one record, so adding a kind means adding one."""

    __slots__ = ("name", "doc", "properties", "required", "aliases", "example", "judge", "describe",
                 "grade", "role", "live", "window", "check", "read", "near")

    def __init__(self, name: str, doc: str, properties: dict, example: dict,
                 judge: Optional[Callable[[dict, "_Observation"], dict]] = None,
                 describe: Optional[Callable[[dict], str]] = None, required: Tuple[str, ...] = (),
                 aliases: Optional[dict] = None, grade: Optional[Callable[[dict], Optional[str]]] = None,
                 role: Optional[str] = None, live: bool = False, window: bool = False,
                 check: Optional[Callable[[dict], List[str]]] = None, read: Optional[Callable] = None,
                 near: Optional[Callable] = None) -> None:
        self.name = name
        self.doc = doc
        self.properties = properties
        self.required = list(required)
        self.aliases = aliases or {}
        self.example = example
        self.judge = judge                  # pure (p, observation) -> result; None for combinators
        self.describe = describe or (lambda p: name)
        self.grade = grade or (lambda p: None)  # the evidence grade a positive leaf of this kind gives
        self.role = role                    # "presence" (element, text) | "consequence" | None
        self.live = live                    # reads the live page (so it can already be true before an act)
        self.window = window                # reads the event window (so lost events can hide its evidence)
        self.check = check or (lambda p: [])  # rules across fields that a schema says badly -> issues
        self.read = read                    # async (session, p) -> what the live page says, for `judge`
        self.near = near                    # async (session, p, read) -> near misses of a failed read, or None


_PREDICATE_KINDS: Dict[str, _Kind] = {k.name: k for k in (
    _Kind("element",
          "An element matching `query` exists (in `state`), or with absent: true does not. Live DOM.",
          {"query": _ELEMENT_QUERY,
           "state": {"anyOf": [{"enum": _ELEMENT_STATES}, {"type": "array", "items": {"enum": _ELEMENT_STATES}}]},
           "absent": {"type": "boolean"}},
          {"kind": "element", "query": {"role": "button", "name": "Pay"}, "state": "enabled"},
          _judge_element, required=("query",), role="presence", live=True, read=_read_element, near=_near_element),
    _Kind("text",
          "Text a user can read (never script or style source): some element's text `contains` a substring "
          "(case-insensitive), `equals` a whole text (whitespace-normalised) or `matches` a regular expression; "
          "`visible` to require it shown. Live DOM.",
          {"contains": {"type": "string", "minLength": 1}, "equals": {"type": "string", "minLength": 1},
           "matches": {"type": "string", "minLength": 1}, "flags": _FLAGS, "visible": {"type": "boolean"},
           "absent": {"type": "boolean"}, "scope": {"type": "string"}},
          {"kind": "text", "contains": "Payment received", "visible": True},
          _judge_text, lambda p: "text %s" % _text_wanted(p),
          aliases={"text": "contains", "value": "contains"}, role="presence", live=True, read=_read_text_probe,
          near=_near_text,
          check=lambda p: _one_of(p, ("contains", "equals", "matches")) + _regex_ok(p, "matches")),
    _Kind("net",
          "A completed request (fetch, XHR, document) matching the filters; `count` demands exactly that many; "
          "`bodyContains` reads the response body, `header` {name, equals|contains} a response header.",
          {"method": {"type": "string"}, "urlContains": {"type": "string"},
           "status": {"type": "integer"}, "ok": {"type": "boolean"}, "since": _P_SINCE,
           "count": {"type": "integer", "minimum": 0},
           "bodyContains": {"type": "string", "minLength": 1},
           "header": {"type": "object", "required": ["name"], "additionalProperties": False,
                      "properties": {"name": {"type": "string", "minLength": 1}, "equals": {"type": "string"},
                                     "contains": {"type": "string"}}}},
          {"kind": "net", "method": "POST", "urlContains": "/api/pay", "status": 200, "count": 1},
          _judge_net, _describe_net, aliases={"url": "urlContains"},
          grade=lambda p: "net" if p.get("urlContains") else None, role="consequence", window=True),
    _Kind("frame",
          "A WebSocket, EventSource or streamed-response message: `urlContains`, `direction` (in|out), "
          "`transport` (ws|sse|stream), `contains` in its text, or the JSON value at the dot `path` "
          "(`equals` a value matcher); `count` exact.",
          {"urlContains": {"type": "string"}, "direction": {"enum": ["in", "out"]},
           "transport": {"enum": ["ws", "sse", "stream"]}, "contains": {"type": "string", "minLength": 1},
           "path": {"type": "string"}, "equals": {}, "count": {"type": "integer", "minimum": 0}, "since": _P_SINCE},
          {"kind": "frame", "urlContains": "/socket", "direction": "in", "path": "1.status", "equals": "saved"},
          _judge_frame, lambda p: _describe_frame(p), aliases={"url": "urlContains", "data": "contains"},
          grade=lambda p: "net" if p.get("contains") or "path" in p else None, role="consequence", window=True,
          check=lambda p: (["`equals` needs a `path` (the JSON value to compare)"]
                           if "equals" in p and "path" not in p else [])),
    _Kind("server",
          "What the app's server did for the tab's requests (needs Reticle's middleware: reticle.wsgi, "
          "reticle.asgi, reticle.DjangoMiddleware): `method`, `urlContains` (path), `status`, `exception` "
          "(raised), `logged` (an error logged), `writes` {table, op, count | min} (committed rows; a rolled-back "
          "write is none), `committed`; `count` exact matching requests.",
          {"method": {"type": "string"}, "urlContains": {"type": "string"}, "status": {"type": "integer"},
           "exception": {"type": "boolean"}, "logged": {"type": "boolean"},
           "writes": {"type": "object", "additionalProperties": False,
                      "properties": {"table": {"type": "string", "minLength": 1},
                                     "op": {"enum": ["insert", "update", "delete"]},
                                     "count": {"type": "integer", "minimum": 0},
                                     "min": {"type": "integer", "minimum": 1}}},
           "committed": {"type": "boolean"}, "count": {"type": "integer", "minimum": 0}, "since": _P_SINCE},
          {"kind": "server", "method": "POST", "urlContains": "/profile",
           "writes": {"table": "profile", "op": "update", "min": 1}, "exception": False},
          _judge_server, _describe_server, aliases={"url": "urlContains", "path": "urlContains"},
          grade=lambda p: "server", role="consequence", window=True,
          check=lambda p: ["writes: give count or min, not both"]
          if "count" in p.get("writes", {}) and "min" in p.get("writes", {}) else []),
    _Kind("route",
          "The last route change (or else the current URL) has `pathname` exactly, or `contains` in path+search+hash.",
          {"pathname": {"type": "string"}, "contains": {"type": "string"}, "since": _P_SINCE},
          {"kind": "route", "pathname": "/orders/42"},
          _judge_route, lambda p: "a route %r" % (p.get("pathname") or p.get("contains")),
          aliases={"path": "pathname", "urlContains": "contains", "url": "contains"}, live=True, window=True),
    _Kind("console",
          "Console output at `level` (error includes uncaught errors) containing `contains`; "
          "absent: true demands none.",
          {"level": {"enum": ["error", "warn", "log", "info"]},
           "contains": {"type": "string", "minLength": 1}, "absent": {"type": "boolean"}, "since": _P_SINCE},
          {"kind": "console", "level": "error", "absent": True},
          _judge_console, aliases={"textContains": "contains"}, window=True),
    _Kind("animation",
          "An animation or transition started (or, with completed: true, ended), by `name` and target ref.",
          {"name": {"type": "string"}, "target": {"type": "string"}, "completed": {"type": "boolean"},
           "since": _P_SINCE},
          {"kind": "animation", "name": "fade-in", "completed": True},
          _judge_animation, window=True),
    _Kind("signal",
          "The app called reticle.signal(name, data) with data matching `dataMatches` (shallow; \"*\" = "
          "any value; {$gte,$lte,$gt,$lt,$contains,$length} operators); `count` exact.",
          {"name": {"type": "string"}, "dataMatches": {"type": "object"},
           "count": {"type": "integer", "minimum": 0}, "since": _P_SINCE},
          {"kind": "signal", "name": "order:placed", "dataMatches": {"total": {"$gt": 0}}},
          _judge_signal, lambda p: "signal %r" % p.get("name", "*"), aliases={"data": "dataMatches"},
          grade=lambda p: "signal" if p.get("name") else None, role="consequence", window=True),
    _Kind("state",
          "A registered store's value at the dot `path` exists, or `equals` (value matcher). Live read.",
          {"path": {"type": "string", "minLength": 1}, "store": {"type": "string"}, "equals": {}},
          {"kind": "state", "store": "cart", "path": "items.length", "equals": 0},
          _judge_state, lambda p: "state at %r" % p["path"], required=("path",),
          grade=lambda p: "state", role="consequence", live=True, read=_read_state),
    _Kind("storage",
          "localStorage/sessionStorage/cookie `key` exists, `equals` a value, `contains` a substring, is `absent`, "
          "or (changed: true) was written in the window.",
          {"key": {"type": "string", "minLength": 1}, "area": {"enum": ["local", "session", "cookies"]},
           "equals": {}, "contains": {"type": "string", "minLength": 1}, "absent": {"type": "boolean"},
           "changed": {"type": "boolean"}, "since": _P_SINCE},
          {"kind": "storage", "area": "local", "key": "theme", "equals": "dark"},
          _judge_storage, required=("key",), role="consequence", live=True, window=True, read=_read_storage),
    _Kind("settled",
          "No request in flight and no network or structural DOM activity for `quietMs` (default 500).",
          {"quietMs": {"type": "number", "exclusiveMinimum": 0, "maximum": 30000}},
          {"kind": "settled", "quietMs": 500},
          _judge_settled, lambda p: "the page to go idle"),
    _Kind("allOf",
          "Every predicate in `predicates` holds.",
          {"predicates": {"type": "array", "items": {"type": "object"}, "minItems": 1}},
          {"kind": "allOf", "predicates": [{"kind": "net", "urlContains": "/api/pay", "status": 200},
                                           {"kind": "console", "level": "error", "absent": True}]},
          describe=_describe_combinator, required=("predicates",), aliases={"of": "predicates"}),
    _Kind("anyOf",
          "At least one predicate in `predicates` holds.",
          {"predicates": {"type": "array", "items": {"type": "object"}, "minItems": 1}},
          {"kind": "anyOf", "predicates": [{"kind": "text", "contains": "Saved"}, {"kind": "signal", "name": "saved"}]},
          describe=_describe_combinator, required=("predicates",), aliases={"of": "predicates"}),
    _Kind("not",
          "The `predicate` does not hold (an unreadable child stays unknown).",
          {"predicate": {"type": "object"}},
          {"kind": "not", "predicate": {"kind": "text", "contains": "Error"}},
          describe=_describe_combinator, required=("predicate",), aliases={"of": "predicate"}),
)}


def _describe_predicate(p: dict) -> str:
    return _PREDICATE_KINDS[p["kind"]].describe(p)


def _predicate_digest() -> str:
    """Every kind and its fields on one line, for the verdict tools' descriptions, so a model that
    reads only tools/list can write a predicate."""
    def fields(k: _Kind) -> str:
        names = [f for f in k.properties if f != "since"]
        if k.name == "element":
            names[0] = "query:{role,name,text,label,testid}"
        return "%s{%s}" % (k.name, ",".join(names)) if names else k.name
    return "Predicates {kind,...}: %s. text/name: contains|equals|matches. Grammar: reticle://predicates." % (
        " ".join(fields(k) for k in _PREDICATE_KINDS.values()))


_PREDICATE_DIGEST = _predicate_digest()
# reticle_assert's share of the same list: the kinds, their fields once (in reticle_act_and_wait's
# description, read in the same tools/list), so the list stays inside its budget.
_PREDICATE_KINDS_LINE = ("Predicates {kind,...}, fields as in reticle_act_and_wait: %s. Grammar: reticle://predicates."
                         % " ".join("%s{}" % k for k in _PREDICATE_KINDS))


def _kind_schema(kind: str) -> dict:
    spec = _PREDICATE_KINDS[kind]
    props = {"kind": {"const": kind}}
    props.update(spec.properties)
    return {"type": "object", "properties": props, "additionalProperties": False,
            "required": ["kind"] + spec.required}


def _predicate_grammar_doc() -> dict:
    return {
        "description": "A predicate is an object {kind, ...fields}. Unknown fields are errors. Tolerated: "
                       "`type` for `kind`, the per-kind aliases listed, and element locator fields written "
                       "at the top level (moved into `query`).",
        "kinds": {k: {"doc": v.doc, "schema": _kind_schema(k), "aliases": v.aliases, "example": v.example}
                  for k, v in _PREDICATE_KINDS.items()},
        "elementStates": _ELEMENT_STATES,
    }


_KIND_VALIDATORS: Dict[str, Any] = {}


class PredicateError(ToolError):
    """A predicate that does not parse: no verdict is produced."""

    code = "predicate_invalid"


def _predicate_fail(kind: Optional[str], issues: List[str], where: str) -> "PredicateError":
    if kind in _PREDICATE_KINDS:
        spec = _PREDICATE_KINDS[kind]
        accepts = ["kind"] + list(spec.properties)
        extra = ""
        if kind == "element":
            extra = " query accepts: %s." % ", ".join(_ELEMENT_QUERY["properties"])
        msg = ("that predicate did not parse (kind %r at %s): %s. Nothing ran, so no verdict was produced. "
               "%s accepts: %s.%s A valid %s predicate looks like: %s" % (
                   kind, where, "; ".join(issues[:3]), kind, ", ".join(accepts), extra, kind, _dumps(spec.example)))
        return PredicateError(msg, "fix the predicate and call again", accepts=accepts, example=spec.example,
                              noVerdict=True)
    msg = ("that predicate did not parse at %s: %s. Nothing ran, so no verdict was produced. Use one of the "
           "kinds: %s. For example: %s" % (where, "; ".join(issues[:3]), ", ".join(_PREDICATE_KINDS),
                                          _dumps(_PREDICATE_KINDS["text"].example)))
    return PredicateError(msg, "fix the predicate and call again", kinds=list(_PREDICATE_KINDS), noVerdict=True)


def parse_predicate(raw: Any, where: str = "predicate") -> dict:
    """Tolerant rewrites, then strict validation; returns a normalised copy."""
    if not isinstance(raw, dict):
        raise _predicate_fail(None, ["a predicate must be an object {kind, ...}, not %s" % type(raw).__name__], where)
    p = dict(raw)
    if "kind" not in p and isinstance(p.get("type"), str):
        p["kind"] = p.pop("type")
    kind = p.get("kind")
    if kind is None:
        combos = [k for k in ("allOf", "anyOf", "not") if k in p]
        hint = " (write {\"kind\": \"%s\", ...} rather than {\"%s\": ...})" % (combos[0], combos[0]) if combos else ""
        raise _predicate_fail(None, ["it has no `kind`%s" % hint], where)
    if not isinstance(kind, str) or kind not in _PREDICATE_KINDS:
        raise _predicate_fail(None, ["%r is not a predicate kind" % (kind,)], where)
    spec = _PREDICATE_KINDS[kind]
    for alias, canonical in spec.aliases.items():
        if alias in p:
            value = p.pop(alias)
            p.setdefault(canonical, value)
    if kind == "element":
        flat = {k: p.pop(k) for k in _LOCATOR_FIELDS if k in p}
        if "query" not in p and flat:
            p["query"] = flat
    validator = _KIND_VALIDATORS.get(kind)
    if validator is None:
        validator = _KIND_VALIDATORS[kind] = jsonschema.Draft202012Validator(_kind_schema(kind))
    issues: List[str] = []
    for err in sorted(validator.iter_errors(p), key=lambda e: list(e.absolute_path)):
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            loc = "/".join(str(x) for x in err.absolute_path)
            issues.extend("unknown field %s%s" % ("%s." % loc if loc else "", e) for e in extra)
        elif err.validator == "required":
            issues.append(err.message.replace("is a required property", "is required"))
        else:
            issues.append("%s: %s" % ("/".join(str(x) for x in err.absolute_path) or kind, err.message))
    if not issues:
        issues = spec.check(p)
    if issues:
        raise _predicate_fail(kind, issues, where)
    if kind in ("allOf", "anyOf"):
        p["predicates"] = [parse_predicate(c, "%s.predicates[%d]" % (where, i)) for i, c in enumerate(p["predicates"])]
    elif kind == "not":
        p["predicate"] = parse_predicate(p["predicate"], "%s.predicate" % where)
    elif kind == "element" and isinstance(p.get("state"), str):
        p["state"] = [p["state"]]
    return p


# -- Judge: a predicate over an observation, its combinators walked in one place -------------------

def _judge(p: dict, obs: _Observation) -> dict:
    """Judge `p` over `obs`: a leaf by its kind's pure `judge` (inconclusive when its live read
    failed); allOf, anyOf and not walk their children, and a child that could not be read keeps
    the whole inconclusive."""
    kind = p["kind"]
    if kind == "not":
        child = _judge(p["predicate"], obs)
        if child.get("inconclusive"):
            return {"pass": False, "inconclusive": child["inconclusive"], "evidence": {"saw": child}}
        if child["pass"]:
            settled_for_good = all(_PREDICATE_KINDS[leaf["kind"]].window and not neg and not leaf.get("absent")
                                   for leaf, neg in _leaves(p["predicate"]))
            return {"pass": False,
                    "failureReason": "the negated predicate held: %s" % _describe_predicate(p["predicate"]),
                    "assertion": "not", "decided": settled_for_good,
                    "decidedBy": "absence-violated" if settled_for_good else None,
                    "evidence": {"negated": p["predicate"], "held": True, "saw": child}}
        return {"pass": True, "evidence": {"negated": p["predicate"], "held": False, "saw": child}}
    if kind in ("allOf", "anyOf"):
        children = [_judge(c, obs) for c in p["predicates"]]
        if kind == "allOf":
            failed = [c for c in children if not c["pass"] and not c.get("inconclusive")]
            if failed:
                final = [c for c in failed if c.get("decided")]
                return {"pass": False, "failureReason": (final or failed)[0].get("failureReason"), "assertion": "allOf",
                        "decided": bool(final), "decidedBy": final[0].get("decidedBy") if final else None,
                        "evidence": children}
            unread = [c for c in children if c.get("inconclusive")]
            if unread:
                return {"pass": False, "inconclusive": unread[0]["inconclusive"], "evidence": children}
            return {"pass": True, "evidence": [c.get("evidence") for c in children]}
        for c in children:
            if c["pass"]:
                return {"pass": True, "evidence": c.get("evidence")}
        unread = [c for c in children if c.get("inconclusive")]
        if unread:
            return {"pass": False, "inconclusive": unread[0]["inconclusive"], "evidence": children}
        return {"pass": False, "failureReason": "no predicate of anyOf held", "assertion": "anyOf",
                "evidence": children}
    read = obs.live.get(_leaf_key(p))
    if isinstance(read, _ReadFailed):
        return {"pass": False, "inconclusive": "the page could not answer: %s" % read.why}
    judge = _PREDICATE_KINDS[kind].judge
    assert judge is not None
    return judge(p, obs)


def _holds_count(p: dict) -> bool:
    """A `net` leaf pins a count: a pass is confirmed after a short wait (another may follow)."""
    return any(leaf["kind"] == "net" and "count" in leaf for leaf, _ in _leaves(p))


def _judge_final(p: dict, obs: _Observation) -> dict:
    """The result a verdict is given on: the tab lost, or `p` judged over `obs`; a failure that
    decided early says so, and when the wait ran out a result that did not hold (or a count never
    confirmed) says it timed out."""
    if obs.lost:
        return {"pass": False, "observationLost": True, "failureReason": obs.lost + " during the observation"}
    res = _judge(p, obs)
    if obs.failure_decided and not res["pass"] and not res.get("inconclusive"):
        res.update(decided=True, decidedBy="failure-shown", failureReason="%s; %s, and the act's work is done" % (
            res.get("failureReason") or "the predicate did not hold", obs.failure_decided))
        return res
    if obs.timed_out is None or (res["pass"] and not _holds_count(p)):
        return res
    res["pass"] = False
    if not res.get("failureReason"):
        res["failureReason"] = "timed out after %d ms waiting for %s" % (obs.timed_out, _describe_predicate(p))
    res["timedOut"] = True
    return res


# -- the horizon: what the act's causal work still has to do (pure) --------------------------------

def _horizon(window: List[dict], known: "_Known", floor: float, now: float,
             scans: bool = True) -> List[Tuple[str, bool]]:
    """What the act at `floor` has started and not finished, at `now`: (what, decisive), where a
    decisive one could still change the answer.  Requests and documents it started (writes and
    documents decisive, reads not) have not answered; a socket message it sent has had no message
    back on that socket for SOCKET_REPLY_WAIT_MS; a stream it opened is still sending (a fetch
    stream decisive: a job's result lives in it); a document that arrived has not reported its
    load-time scan of what the user is told (for SCAN_WAIT_MS, when the page `scans`: the SDK
    does, a client that only speaks the bridge protocol does not); the render after the last of these: less
    than HORIZON_QUIET_MS since it landed, or the DOM still changing within HORIZON_CHURN_MS for a
    second after it.  What the page sends on a timer (twice or more before the act) and dev tooling
    are not the act's; a request it made once before (the same save, clicked again) is."""
    out: List[Tuple[str, bool]] = []
    for d in known.open_requests:  # a request the page made before too is the act's; a timer's is not
        if d.get("startedAt", 0) >= floor and not _is_dev(d) and _call_label(d) not in known.polled:
            out.append(("%s has not answered" % _call_label(d), _is_write(d) or d.get("initiator") == "document"))
    frames = [e for e in window if e["type"] in _FRAME_TYPES and not _is_dev(e["data"])]
    # the act's own channels (as _message_failures reads them): a socket it sent on, a stream it started
    spoke = {e["data"].get("url") for e in frames if e["data"].get("direction") == "out"}
    started = {str(e["data"].get("requestId")) for e in window if e["type"] == "net.pending"}
    frames = [e for e in frames if e["data"].get("url") in spoke or (
        e["data"].get("transport") in ("stream", "sse") and str(e["data"].get("requestId")) in started)]
    landed: List[Tuple[float, str]] = []
    streams: Dict[str, dict] = {}
    for i, e in enumerate(frames):
        d = e["data"]
        if d.get("direction") == "in":
            landed.append((e["t"], "a message on %s" % d.get("url")))
        if d.get("transport", "ws") == "ws" and d.get("direction") == "out" and now - e["t"] < SOCKET_REPLY_WAIT_MS:
            if not any(f["data"].get("direction") == "in" and f["data"].get("url") == d.get("url")
                       for f in frames[i + 1:]):
                out.append(("the reply to the message sent on %s" % d.get("url"), False))
        if d.get("transport") in ("stream", "sse"):
            streams[str(d.get("requestId") or d.get("url"))] = dict(d, t=e["t"])
    for d in streams.values():
        if d.get("direction") != "close" and not d.get("final") and now - d["t"] < STREAM_QUIET_MS:
            out.append(("the stream %s is still sending" % d.get("url"), d.get("transport") == "stream"))
    for e in window:
        if e["type"] == "net.request" and not _is_dev(e["data"]) and _caused_by_act(e, floor, known, repeats=True):
            landed.append((e["t"], "the answer of %s" % _call_label(e["data"])))
            doc = e.get("doc")
            if scans and e["data"].get("initiator") == "document" and doc and now - e["t"] < SCAN_WAIT_MS and not any(
                    x["type"] == "ui.scan" and x.get("doc") == doc for x in window):
                out.append(("the new page's first look at what it tells the user", False))
    if landed:
        last, what = max(landed)
        churn = [e["t"] for e in window if e["t"] > last and (e["type"].startswith("dom.") or e["type"] == "ui.alert")]
        if now - last < HORIZON_QUIET_MS or (churn and now - max(churn) < HORIZON_CHURN_MS and now - last < 1000):
            out.append(("the render after %s" % what, False))
    seen: List[Tuple[str, bool]] = []
    for item in out:
        if item not in seen:
            seen.append(item)
    return seen


def _failure_in_sight(p: dict, window: List[dict], floor: float, known: "_Known",
                      now: Optional[float] = None) -> Optional[str]:
    """A failure the user was shown, or the act's own channel reported, after the act, that the
    predicate does not ask for: the phrase that names it, or None.  A failed write counts once a
    client retry had its chance (RETRY_GRACE_MS before `now`) and none answered otherwise."""
    shown = [d for d in _error_ui(window) if not _expects_error(p, d)]
    if shown:
        return "the page showed %s" % _ui_label(shown[0])
    reported = _message_failures(window)
    if reported and not any(leaf["kind"] == "frame" and not neg for leaf, neg in _leaves(p)):
        return "%s said %s" % (_frame_label(reported[0]), reported[0]["problem"])
    failed = [e["data"] for e in window if e["type"] == "net.request" and _is_write(e["data"])
              and _call_failed(e["data"]) and not _is_dev(e["data"]) and _caused_by_act(e, floor, known, repeats=True)
              and (now is None or now - e["t"] >= RETRY_GRACE_MS) and not any(
                  x["type"] == "net.request" and x["t"] > e["t"] and not _call_failed(x["data"])
                  and _call_label(x["data"]) == _call_label(e["data"]) for x in window)]
    failed = [d for d in failed if not any(_call_matches(d, leaf) for leaf, neg in _leaves(p)
                                           if leaf["kind"] == "net" and not neg)]
    if failed:
        return "%s answered %s" % (_call_label(failed[0]), failed[0].get("status") or failed[0].get("error"))
    return None


# -- Observe: the only async stage; it waits, reads the live page, and returns one observation -----

async def _await_horizon(session: "_BrowserSession", floor: float, deadline: float) -> List[Tuple[str, bool]]:
    """Wait (until `deadline`, on the daemon's clock) for the act at `floor` to finish its causal work
    (see _horizon); -> what was still pending when the deadline came ([] when it finished)."""
    while True:
        now = session.now()
        pending = _horizon(session.window(floor), session.known(floor), floor, now, bool(session.sdk_version))
        left = deadline - now
        if not pending or left <= 0:
            return pending
        await session.wait_change(min(50.0, left) / 1000.0)


async def _read_leaf(session: "_BrowserSession", leaf: dict) -> Any:
    read = _PREDICATE_KINDS[leaf["kind"]].read
    assert read is not None
    try:
        return await read(session, leaf)
    except ToolError as exc:
        return _ReadFailed(exc.error)


async def _observe_now(session: "_BrowserSession", p: dict, floor: float, after_act: bool = False,
                       explain: bool = False, effect: Any = None) -> _Observation:
    """One look: every live leaf's read of the page (and, when `explain`, the near misses of a
    failed one), then the window from `floor` and what the session knows, at this instant."""
    leaves = {_leaf_key(leaf): leaf for leaf, _ in _leaves(p) if _PREDICATE_KINDS[leaf["kind"]].read}
    keys = list(leaves)
    live: Dict[str, Any] = dict(zip(keys, await asyncio.gather(*(_read_leaf(session, leaves[k]) for k in keys))))
    near: Dict[str, Any] = {}
    for k in keys if explain else ():
        spec = _PREDICATE_KINDS[leaves[k]["kind"]]
        if spec.near is None or isinstance(live[k], _ReadFailed):
            continue
        try:
            near[k] = await spec.near(session, leaves[k], live[k])
        except ToolError as exc:
            live[k] = _ReadFailed(exc.error)
    known = session.known(floor)
    return _Observation(session.window(floor), known, now=session.now(), since=floor, upto=session.store.seq,
                        url=session.url, after_act=after_act, effect=effect, live=live, near=near)


async def _read_shown(session: "_BrowserSession", effect: Any) -> Optional[List[dict]]:
    """The messages the page shows now, each marked `related` when it sits in what the act (its
    target's ref, from `effect`) touched; None when the page cannot say."""
    if not session.sdk_version:
        return None  # not the SDK (a client that speaks the bridge protocol without it): it cannot say
    ref = effect.get("ref") if isinstance(effect, dict) and isinstance(effect.get("ref"), str) else None
    try:
        reply = await session.command("alerts_read", {"ref": ref} if ref else {}, timeout=2.0)
    except ToolError:
        return None
    alerts = reply.get("alerts") if isinstance(reply, dict) else None
    if not isinstance(alerts, list) or reply.get("unavailable"):
        return None
    return [{"text": _short(str(d.get("text") or ""), 300), "source": str(d.get("source") or "")[:40],
             "level": d.get("level") if d.get("level") == "error" else None, "related": d.get("related") is not False,
             "field": str(d["field"])[:120] if d.get("field") is not None else None}
            for d in alerts[:50] if isinstance(d, dict)]


def _lost_why(session: "_BrowserSession") -> str:
    return ("the tab closed or crashed" if session.handler is None else
            "the tab left its page and its next document did not connect in time")


async def _await_server_records(session: "_BrowserSession", since: float, budget_end: float) -> bool:
    """With the app's middleware in use (a record arrived for this tab), give the records of the
    act's marked requests their grace to arrive before judging (until `budget_end`, on the daemon's
    clock).  True when any arrived."""
    if not session.server_seen:
        return False
    before = session.server_seen
    while session.now() < budget_end:
        awaiting, _ = _server_unreported(session.now(), session.window(since))
        if not awaiting:
            break
        await session.wait_change(min(50.0, budget_end - session.now()) / 1000.0)
    return session.server_seen != before


async def _observe(session: "_BrowserSession", p: dict, floor: float, timeout_ms: float, after_act: bool = False,
                   effect: Any = None, already_true: bool = False, settle_until: Optional[float] = None,
                   act_at: Optional[float] = None) -> _Observation:
    """Observe: wait until `p` holds over the events from `floor`, is decided, or `timeout_ms`
    runs out (re-judging on every event and every 150 ms; a tab between documents is awaited),
    and return the observation it was judged on.  With no timeout it looks once (after waiting
    for a document on its way).

    The horizon: an assert that follows an act (`act_at`) first waits for the act's causal work
    (see _horizon, at most HORIZON_CAP_MS), whichever way it would judge.  After an act
    (`settle_until`, the end of its budget on the daemon's clock) a pass waits for that work too, for the UI
    after a write, and for the server records of the act's marked requests (Server truth), then is
    judged again as the page is then (a `settled` leaf keeps its first judgement unless server
    records joined late or an absence is asked); what is still going at the cap is kept in `pending`."""
    pending: List[Tuple[str, bool]] = []
    if act_at is not None and settle_until is None:
        grace = ACT_GRACE_MS - (session.now() - act_at)
        if grace > 0:
            await asyncio.sleep(grace / 1000.0)
        _progress_note("waiting for the act's work to land before judging")
        pending = await _await_horizon(session, act_at, session.now() + HORIZON_CAP_MS)
    session.expire_arrival()  # a new document overdue is said in the window before the tab is asked about
    if timeout_ms > 0:
        obs = await _wait_for_predicate(session, p, floor, timeout_ms, after_act, effect,
                                        act_at if act_at is not None else floor if after_act else None)
    elif session.between_documents() and not await session.next_document(NAV_WAIT_S):
        obs = _Observation(session.window(floor), session.known(floor), now=session.now(), since=floor,
                           url=session.url, lost=_lost_why(session))
    else:
        obs = await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
    if settle_until is not None and not obs.lost and _judge_final(p, obs)["pass"]:
        _progress_note("waiting for the requests the act started to finish")
        pending = await _await_horizon(session, floor, session.now() + HORIZON_CAP_MS)
        while session.now() < settle_until and session.open_since(floor):
            await session.wait_change(0.05)
        window = session.window(floor)
        wrote = any(e["type"] == "net.request" and _is_write(e["data"]) for e in window)
        if wrote and not any(e["type"] in _UI_EVENTS for e in window):
            end = min(settle_until, session.now() + 300)
            while session.now() < end and not any(e["type"] in _UI_EVENTS for e in session.window(floor)):
                await session.wait_change((end - session.now()) / 1000.0)
        arrived = await _await_server_records(session, floor, settle_until)
        quiet_leaf = any(leaf["kind"] == "settled" for leaf, _ in _leaves(p))
        if arrived or not quiet_leaf or any(neg or leaf.get("absent") for leaf, neg in _leaves(p)):
            # judged again once the act's work (server records that joined late included) is done,
            # whichever way it now judges
            obs = await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
        else:  # quiet was judged when it came; the rules read the window as it is now
            obs.window, obs.known = session.window(floor), session.known(floor)
    obs.pending = pending
    if not obs.lost and not obs.known.stuck and _judge_final(p, obs)["pass"]:
        await _confirm_answering(session)
        obs.known.stuck = session.not_answering() or ""
    obs.already_true = already_true
    if not obs.lost and (settle_until is not None or act_at is not None):  # what is shown after an act
        obs.shown = await _read_shown(session, effect)
    return obs


async def _confirm_answering(session: "_BrowserSession") -> None:
    """Before a pass is judged: a page not heard from for a second is asked to answer (a cheap `ping`),
    so that one stuck since (a dialog, a busy main thread) cannot pass on what it said before."""
    if session.handler is None or session.not_answering() is not None or session.last_seen_ms() <= 1000:
        return
    try:
        await session.command("ping", {}, timeout=1.5)
    except ToolError:
        pass  # session.not_answering() says why


async def _wait_for_predicate(session: "_BrowserSession", p: dict, floor: float, timeout_ms: float,
                              after_act: bool, effect: Any, act_at: Optional[float] = None) -> _Observation:
    """The wait of `_observe`: look again on every event (and every 150 ms) until `p` holds, is
    decided, or time runs out; a pinned count is confirmed 300 ms after it first holds.  After an
    act (`act_at`), a failure in sight (see _failure_in_sight) with the act's work done decides
    at once (early no): nothing the act started could still make `p` hold."""
    deadline = session.now() + timeout_ms  # on the daemon's clock, like every time below
    holds_count = _holds_count(p)
    shown_at: Optional[float] = None  # when the messages shown were last read (for an early no on one still shown)
    while True:
        _progress_note("waiting for %s" % _describe_predicate(p))
        session.expire_arrival()
        if session.between_documents() and not await session.next_document(max(deadline - session.now(), 500) / 1000):
            return _Observation(session.window(floor), session.known(floor), now=session.now(), since=floor,
                                url=session.url, after_act=after_act, effect=effect, lost=_lost_why(session))
        obs = await _observe_now(session, p, floor, after_act, effect=effect)
        res = _judge(p, obs)
        if res.get("inconclusive"):
            session.expire_arrival()
            if session.between_documents():
                continue  # the page went away while it was being asked: ask the next document
        remaining = deadline - session.now()
        if res["pass"]:
            if holds_count and remaining > 300:
                await asyncio.sleep(0.3)
                return await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
            if holds_count:
                break
            return obs
        if res.get("decided"):
            return await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
        # (not while the predicate's own retry grace runs: a client that retries may still get its yes)
        if act_at is not None and p["kind"] != "settled" and not res.get("inconclusive") \
                and not res.get("retryAfterMs") \
                and not _horizon(obs.window, obs.known, act_at, obs.now, bool(session.sdk_version)):
            failure = _failure_in_sight(p, obs.window, act_at, obs.known, obs.now)
            # an error shown from before decides only once the act's work is visibly done: something it
            # started has answered, or a second has passed (a request it starts later may yet clear it)
            answered = any(e["type"] == "net.request" and e["t"] >= act_at for e in obs.window)
            if not failure and (answered or obs.now - act_at >= 1000) and (
                    shown_at is None or session.now() - shown_at >= 500):
                shown_at = session.now()
                still = [d for d in await _read_shown(session, effect) or ()
                         if d["related"] and _is_failure_ui(d) and not _expects_error(p, d)]
                failure = "the page still shows %s" % _ui_label(still[0]) if still else None
            if failure:
                final = await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
                final.failure_decided = failure
                return final
        if remaining <= 0:
            break
        step = min(150.0, remaining)
        if res.get("retryAfterMs"):
            step = min(step, max(25.0, res["retryAfterMs"]))
        await session.wait_change(step / 1000.0)
    final = await _observe_now(session, p, floor, after_act, explain=True, effect=effect)
    final.timed_out = timeout_ms
    return final


###############################################################################
# Verdict rules ###############################################################
###############################################################################
# Pure functions of what was observed: a window of events, the predicate's
# result, and what the session knows (_Known).  Asking the page and waiting
# stay with the callers in the tools; these can be tested from a table.

_ABSENCE_BLIND_SPOTS = ("closed-shadow-root", "cross-origin-iframe", "uninstrumented-frame", "sampled",
                        "rate-limited", "virtualized-unmounted")


class _FailureUi:
    """One way real apps tell the user something failed: a CSS selector for the element that
    carries the message, and whether the convention itself says failure (level "error") or the
    element is a message surface whose text decides (None: a failure phrase with no negation).
    The SDK looks for every row (in this order, error rows above the ARIA ones) and reports what
    it finds as `ui.alert` events with `source` = the row's name; alerts_read lists what is shown
    now.  tests/test_failure_ui.py has a row per record, both ways."""

    __slots__ = ("name", "selector", "level", "example", "success")

    def __init__(self, name: str, selector: str, level: Optional[str], example: str, success: str) -> None:
        self.name = name
        self.selector = selector
        self.level = level
        self.example = example      # HTML that must read as a failure
        self.success = success      # HTML beside it that must not


_FAILURE_UI: Tuple[_FailureUi, ...] = (
    _FailureUi("django-messages", "ul.messages li.error,.messages .alert-error,.messages .error", "error",
               '<ul class="messages" role="status"><li class="error">Please correct the errors below.</li></ul>',
               '<ul class="messages" role="status"><li class="success">The record was added successfully.</li></ul>'),
    _FailureUi("django-errorlist", "ul.errorlist,p.errornote", "error",
               '<ul class="errorlist"><li>This field is required.</li></ul>',
               '<p class="help">Required. 150 characters or fewer.</p>'),
    _FailureUi("flask-flash", ".flash.error,.flash-error,.flashes .error,.flashes .danger", "error",
               '<ul class="flashes"><li class="error">Could not save the note.</li></ul>',
               '<ul class="flashes"><li class="message">Note saved.</li></ul>'),
    _FailureUi("rails-flash", "#flash_alert,.flash.alert,.flash-alert,#error_explanation", "error",
               '<div id="flash_alert">Title can\'t be blank</div>',
               '<div id="flash_notice">Post was successfully created.</div>'),
    _FailureUi("bootstrap", ".alert-danger,.invalid-feedback,.toast.text-bg-danger,.toast.bg-danger", "error",
               '<div class="alert alert-danger">Payment declined.</div>',
               '<div class="alert alert-success">Payment received.</div>'),
    _FailureUi("bulma", ".notification.is-danger,.message.is-danger,.help.is-danger", "error",
               '<div class="notification is-danger">Upload rejected.</div>',
               '<div class="notification is-success">Upload complete.</div>'),
    _FailureUi("foundation", ".callout.alert,.form-error.is-visible", "error",
               '<div class="callout alert">There are errors in your form.</div>',
               '<div class="callout success">Your form was sent.</div>'),
    _FailureUi("mui", ".MuiAlert-standardError,.MuiAlert-filledError,.MuiAlert-outlinedError,"
               ".MuiAlert-colorError,.MuiFormHelperText-root.Mui-error", "error",
               '<div class="MuiPaper-root MuiAlert-root MuiAlert-standardError">Something went wrong.</div>',
               '<div class="MuiPaper-root MuiAlert-root MuiAlert-standardSuccess">All changes saved.</div>'),
    _FailureUi("ant-design", ".ant-message-error,.ant-alert-error,.ant-notification-notice-error,"
               ".ant-form-item-explain-error", "error",
               '<div class="ant-message-custom-content ant-message-error"><span>Save failed</span></div>',
               '<div class="ant-message-custom-content ant-message-success"><span>Saved</span></div>'),
    _FailureUi("chakra", ".chakra-alert[data-status=error],.chakra-form__error-message", "error",
               '<div class="chakra-alert" data-status="error">Your session expired.</div>',
               '<div class="chakra-alert" data-status="success">Profile updated.</div>'),
    _FailureUi("mantine", ".mantine-Alert-root[data-color=red],.mantine-Notification-root[data-color=red],"
               ".mantine-InputWrapper-error", "error",
               '<div class="mantine-Notification-root" data-color="red">Not saved.</div>',
               '<div class="mantine-Notification-root" data-color="teal">Saved.</div>'),
    _FailureUi("sonner", "[data-sonner-toast][data-type=error]", "error",
               '<li data-sonner-toast data-type="error">Event has not been created</li>',
               '<li data-sonner-toast data-type="success">Event has been created</li>'),
    _FailureUi("toastify", ".Toastify__toast--error", "error",
               '<div class="Toastify__toast Toastify__toast--error">Request timed out</div>',
               '<div class="Toastify__toast Toastify__toast--success">Request sent</div>'),
    _FailureUi("quasar", ".q-notification.bg-negative,.q-banner.bg-negative,.q-field--error .q-field__messages",
               "error",
               '<div class="q-notification bg-negative">Server unreachable</div>',
               '<div class="q-notification bg-positive">Server reached</div>'),
    _FailureUi("streamlit", "[data-testid=stException],[data-testid=stAlertContentError],"
               "[data-testid=stNotificationContentError]", "error",
               '<div data-testid="stException">ValueError: amount must be positive</div>',
               '<div data-testid="stAlertContentSuccess">Amount recorded</div>'),
    _FailureUi("gradio", ".toast-body.error", "error",
               '<div class="toast-body error">Error: the model is not loaded</div>',
               '<div class="toast-body info">Model loaded</div>'),
    _FailureUi("shiny", ".shiny-output-error,.shiny-notification-error", "error",
               '<div class="shiny-notification shiny-notification-error">Could not read the file</div>',
               '<div class="shiny-notification shiny-notification-message">File read</div>'),
    _FailureUi("react-hot-toast", "div[role=status][aria-live=polite]", None,
               '<div role="status" aria-live="polite">Could not save the todo</div>',
               '<div role="status" aria-live="polite">Todo saved</div>'),
    _FailureUi("aria-status", "[role=status],output[aria-live=polite]", None,
               '<div role="status">Upload failed: the file is too large</div>',
               '<div role="status">0 errors found</div>'),
)


# Route announcers: the visually hidden live regions a client-side router fills with the new page's
# title after a navigation, for screen readers.  They are never what the page tells the user about
# an act (a text miss must not quote "untitled page" as the page's message); the SDK skips them.
_ROUTE_ANNOUNCERS: Tuple[Tuple[str, str], ...] = (
    ("sveltekit", "#svelte-announcer"),
    ("next.js", "next-route-announcer,#__next-route-announcer__"),
    ("nuxt", ".nuxt-route-announcer,#nuxt-route-announcer"),
    ("gatsby", "#gatsby-announcer"),
    ("astro", ".astro-route-announcer"),
    ("remix", "#remix-route-announcer"),
)


def _route_announcers_config() -> str:
    """The announcers' selectors as one JavaScript string literal, for the SDK's alert scan."""
    sel = ",".join(s for _, s in _ROUTE_ANNOUNCERS)
    assert "'" not in sel and "\\" not in sel, sel
    return "'%s'" % sel


def _failure_ui_config() -> str:
    """The conventions as the SDK reads them, a JavaScript array of [source, selector, level]
    rows, one literal a line (as a formatter wraps it)."""
    def lit(v: Optional[str]) -> str:
        if v is None:
            return "null"
        assert "'" not in v and "\\" not in v and "\n" not in v, v
        return "'%s'" % v
    rows = ["    [\n      %s,\n      %s,\n      %s\n    ]" % (lit(r.name), lit(r.selector), lit(r.level))
            for r in _FAILURE_UI]
    return "[\n" + ",\n".join(rows) + "\n  ]"


def _is_failure_ui(d: dict) -> bool:
    """A message the user is shown tells a failure: its convention says so (a field marked invalid,
    a declared error toast, an error row of _FAILURE_UI), or its text is a failure phrase with no
    negation ("0 errors found" is a success)."""
    text = str(d.get("text", ""))
    worded = _FAILURE_TEXT.search(text) and not _NO_FAILURE.search(text)
    return d.get("level") == "error" or d.get("source") == "invalid" or bool(worded)


def _error_ui(window: List[dict]) -> List[dict]:
    """Errors the user was shown in the window (ui.alert events, see _is_failure_ui)."""
    return [e["data"] for e in window if e["type"] in ("ui.alert", "ui.status") and _is_failure_ui(e["data"])]


def _ui_label(d: dict) -> str:
    source = d["source"] if isinstance(d.get("source"), str) else ""  # the page's: it may send any JSON there
    where = {"invalid": "beside the field %r" % d.get("field", "?"), "toast": "in a toast",
             "alertdialog": "in a dialog", "assertive": "in an assertive live region", "alert": "as an alert"}.get(
        source, "in a %s message" % source if source else "as an alert")
    return "%r %s" % (_short(str(d.get("text", "")), 120), where)


def _expects_error(p: dict, d: dict) -> bool:
    """The predicate itself asks for this message (a text or element leaf that names it)."""
    text = str(d.get("text", "")).lower()
    for leaf, neg in _leaves(p):
        if neg or leaf.get("absent"):
            continue
        if leaf["kind"] == "text" and leaf.get("contains") and str(leaf["contains"]).lower() in text:
            return True
        if leaf["kind"] == "text" and leaf.get("equals") and " ".join(str(leaf["equals"]).lower().split()) == \
                " ".join(text.split()):
            return True
        if leaf["kind"] == "text" and leaf.get("matches") and re.search(leaf["matches"], str(d.get("text", ""))):
            return True
        if leaf["kind"] == "element":
            q = leaf.get("query", {})
            if q.get("role") in ("alert", "alertdialog") or q.get("value") in ("alert", "alertdialog"):
                return True
            if any(str(q.get(k, "")).lower() in text for k in ("text", "name") if q.get(k)):
                return True
    return False


def _message_failures(window: List[dict]) -> List[dict]:
    """Socket, EventSource and stream messages received in the window that report a failure
    (`"success": false`, an `error` field, a socket.io `["error", ...]` event), on a channel the
    window's own work used: a socket the page sent on, a stream or EventSource after a write or
    a stream request that started in the window.  A background socket's chatter is not the act's."""
    frames = _frames(window)
    spoke = {d.get("url") for d in frames if d.get("direction") == "out"}
    started = {str(e["data"].get("requestId")) for e in window if e["type"] == "net.pending"}
    wrote = any(e["type"] in ("net.request", "net.pending") and _is_write(e["data"]) for e in window)
    out = []
    for d in frames:
        text = d.get("data")
        if d.get("direction") != "in" or not isinstance(text, str):
            continue
        ours = d.get("url") in spoke or (d.get("transport") != "ws" and (wrote or str(d.get("requestId")) in started))
        if not ours:
            continue
        body = _frame_body(text)
        problem = _partial_failure(body)
        if problem is None and body.startswith("["):
            value = _frame_value(body, "0")
            if isinstance(value, str) and _FAILURE_WORDS.search(value):
                problem = "the message is a %r event" % value
        if problem:
            out.append(dict(d, problem=problem))
    return out


def _failures_shown(window: List[dict]) -> List[str]:
    """What went wrong in plain sight: an error shown to the user, a console error or uncaught
    exception, a write that failed.  Each in a short phrase, most telling first."""
    out = ["the page showed %s" % _ui_label(d) for d in _error_ui(window)]
    out += ["%s said %s" % (_frame_label(d), d["problem"]) for d in _message_failures(window)]
    for e in window:
        if e["type"] in ("console.error", "error.uncaught"):
            d = e["data"]
            out.append("%s: %s" % ("an uncaught error" if e["type"] == "error.uncaught" else "console.error",
                                   _short(str(d.get("text") or d.get("message") or ""), 120)))
    out += ["%s answered %s%s" % (_call_label(d), d.get("status") or d.get("error"),
                                  " (%s)" % d["statusNote"] if d.get("httpStatus") and d.get("statusNote") else "")
            for d in _calls(window) if (_is_write(d) or d.get("httpStatus")) and _call_failed(d) and not _is_dev(d)]
    out += [c["counter"] for c in _server_contradictions(window, {"kind": "settled"})]
    return out


def _had_effect(effect: Any, window: List[dict], floor: float = 0.0, known: Optional["_Known"] = None) -> bool:
    """Anything observable happened after the act: a mutation in its own frame, an event of
    consequence (DOM, request, route, signal, state, storage, socket message), or a new document.
    The page's own timed requests (polling, autosave) are not the act's doing; a repeat of a
    request the page made once before (the same save, clicked again) is."""
    if isinstance(effect, dict):
        probes = effect["effect"] if isinstance(effect.get("effect"), dict) else {}
        if probes.get("domMutatedWithin") or effect.get("pageUnloaded"):
            return True
        act_doc = effect.get("documentId")
        if act_doc and any(e.get("doc") and e["doc"] != act_doc for e in window):
            return True
    for e in window:
        # a request the person made before too (the same POST, clicked again) is still the act's; only
        # what the page sends on a timer (twice or more before the act) is not
        if e["type"] == "net.request" and not _caused_by_act(e, floor, known, repeats=True):
            continue
        if e["type"] == "net.pending" and known is not None and _call_label(e["data"]) in known.polled:
            continue
        if _event_type(e["type"]).effect:
            return True
    return False


def _periodic(times: List[float]) -> bool:
    """Three or more completions at a steady pace (no gap under 150 ms, none twice another):
    a timer's traffic (autosave, polling), not one action's writes."""
    if len(times) < 3:
        return False
    gaps = [b - a for a, b in zip(times, times[1:])]
    return min(gaps) >= 150 and max(gaps) <= 2 * min(gaps)


def _failed_calls(window: List[dict], p: dict) -> List[dict]:
    """The window's failed calls (dev tooling aside) that were not retried with success later in it
    and that the predicate itself does not ask for (a `net` leaf with `ok: false` or a 4xx/5xx)."""
    calls = [d for d in _calls(window) if not _is_dev(d)]
    expected_failures = [leaf for leaf, neg in _leaves(p) if leaf["kind"] in ("net", "server") and not neg
                         and (leaf.get("ok") is False or (leaf.get("status") or 0) >= 400)]
    recovered = {i for i, d in enumerate(calls) if _call_failed(d) and any(
        not _call_failed(later) and _call_label(later) == _call_label(d) for later in calls[i + 1:])}
    return [d for i, d in enumerate(calls) if _call_failed(d) and i not in recovered
            and not any(_call_matches(d, leaf) for leaf in expected_failures)]


def _failure_acknowledged(window: List[dict]) -> bool:
    """The page owned up to a failure: an error shown, a signal or a state change in failure words."""
    return bool(_error_ui(window)) or any(
        e["type"] == "signal" and _FAILURE_WORDS.search(str(e["data"].get("name", ""))) for e in window) or any(
        e["type"] == "state.change" and _FAILURE_WORDS.search(_dumps(e.get("data"))[:2000]) for e in window)


def _happy_signals(window: List[dict]) -> List[dict]:
    return [e["data"] for e in window if e["type"] == "signal"
            and not _FAILURE_WORDS.search(str(e["data"].get("name", "")))]


def _c_error_shown(window: List[dict], p: dict, action_since: Optional[float], known: Optional["_Known"]) -> List[dict]:
    unexpected = [d for d in _error_ui(window) if not _expects_error(p, d)]
    return [{"claim": "%s held" % _describe_predicate(p), "counter": "the page showed %s" % _ui_label(unexpected[0]),
             "detail": "the user was told something failed"}] if unexpected else []


def _c_message_failure(window: List[dict], p: dict, action_since: Optional[float],
                       known: Optional["_Known"]) -> List[dict]:
    if any(leaf["kind"] == "frame" and not neg for leaf, neg in _leaves(p)):
        return []  # the predicate reads the messages itself
    reported = _message_failures(window)
    return [{"claim": "%s held" % _describe_predicate(p),
             "counter": "%s said %s" % (_frame_label(reported[0]), reported[0]["problem"]),
             "detail": "the server reported a failure over a socket or stream"}] if reported else []


def _c_signal_contradicted(window: List[dict], p: dict, action_since: Optional[float],
                           known: Optional["_Known"]) -> List[dict]:
    failed = _failed_calls(window, p)
    happy = _happy_signals(window)
    if not failed or not happy or _failure_acknowledged(window):
        return []
    return [{"claim": "the app signalled %r" % happy[0].get("name"),
             "counter": "%s answered %s" % (_call_label(failed[0]), failed[0].get("status")),
             "detail": "a request failed while the app reported success"}]


def _c_ui_advanced_failed(window: List[dict], p: dict, action_since: Optional[float],
                          known: Optional["_Known"]) -> List[dict]:
    failed = _failed_calls(window, p)
    if not failed or _happy_signals(window) or _failure_acknowledged(window) \
            or not any(e["type"] in _UI_EVENTS for e in window):
        return []
    d = failed[0]
    return [{"claim": "the UI moved on as if it worked",
             "counter": "%s answered %s" % (_call_label(d), d.get("status") or d.get("error")),
             "detail": "a failed request under a UI that advanced and showed no error"}]


def _c_partial_failure(window: List[dict], p: dict, action_since: Optional[float],
                       known: Optional["_Known"]) -> List[dict]:
    out = []
    for d in _calls(window):
        if _is_dev(d) or _call_failed(d) or not isinstance(d.get("status"), int) or not 200 <= d["status"] < 300:
            continue
        problem = _partial_failure(d.get("responseBody"))
        wire = _wire_meaning(d) if problem is None else None
        if wire and wire[0] == "failure":
            problem = wire[1]
        if problem:
            out.append({"claim": "%s answered %s" % (_call_label(d), d["status"]), "counter": problem,
                        "detail": "a 2xx response whose body reports failure"})
    return out


def _c_misattributed(window: List[dict], p: dict, action_since: Optional[float],
                     known: Optional["_Known"]) -> List[dict]:
    blame = [e["data"].get("name") for e in window if e["type"] == "signal"
             and _BLAMES_USER.search(str(e["data"].get("name", "")))]
    blame += [e["data"].get("path") for e in window if e["type"] == "state.change"
              and _BLAMES_USER.search(_dumps(e["data"].get("to"))[:2000])]
    server_errors = [d for d in _calls(window) if not _is_dev(d) and isinstance(d.get("status"), int)
                     and d["status"] >= 500]
    if not server_errors or not blame:
        return []
    d = server_errors[0]
    return [{"claim": "the app blamed the user (%s)" % _short(blame[0], 60),
             "counter": "%s answered %s, a server error" % (_call_label(d), d["status"]),
             "detail": "a server failure shown to the user as their mistake"}]


def _c_duplicate(window: List[dict], p: dict, action_since: Optional[float], known: Optional["_Known"]) -> List[dict]:
    if action_since is None or any(leaf.get("count") is not None for leaf, _ in _leaves(p) if leaf["kind"] == "net"):
        return []
    writes: Dict[Tuple[str, str], List[float]] = {}
    for e in window:
        if e["type"] == "net.request" and e["t"] >= action_since and _is_write(e["data"]) \
                and not _call_failed(e["data"]) and not _is_dev(e["data"]) \
                and _caused_by_act(e, action_since, known):
            key = (_call_label(e["data"]), _dumps(e["data"].get("requestBody")))
            writes.setdefault(key, []).append(e["t"])
    return [{"claim": "one action", "counter": "%s completed %d times with the same body" % (label, len(times)),
             "detail": "the same write ran more than once for one action; pin it with a net predicate and count: 1"}
            for (label, _), times in writes.items() if len(times) >= 2 and not _periodic(times)]


def _c_never_settled(window: List[dict], p: dict, action_since: Optional[float],
                     known: Optional["_Known"]) -> List[dict]:
    if not any(e["type"] in _UI_EVENTS for e in window):
        return []
    background = known.background if known is not None else ()
    return [{"claim": "the UI advanced", "counter": "%s never answered" % _call_label(d),
             "detail": "the outcome of this request is unknown", "write": _is_write(d)}
            for d in [d for d in _still_open(window).values() if _call_label(d) not in background][:3]]


def _server_failures(window: List[dict], p: Optional[dict] = None, known: Optional["_Known"] = None) -> List[dict]:
    """Server records in the window that raised or logged an error, unless the predicate itself
    asks for that (a positive `server` leaf with exception: true, logged: true or a 5xx status),
    or the request is one the page makes on its own (polling, autosave: known.background)."""
    wants = [leaf if leaf["kind"] == "server" else {k: leaf[k] for k in ("method", "urlContains") if k in leaf}
             for leaf, neg in (_leaves(p) if p is not None else []) if not neg and (
                 (leaf["kind"] == "server" and (leaf.get("exception") or leaf.get("logged")))
                 or (leaf["kind"] in ("server", "net") and (leaf.get("status") or 0) >= 500)
                 or (leaf["kind"] == "net" and leaf.get("ok") is False))]
    background = known.background if known is not None else ()
    labels: Dict[Tuple[Any, str], str] = {(e.get("doc"), str(e["data"].get("serverMark"))): _call_label(e["data"])
              for e in window if e["type"] == "net.pending" and e["data"].get("serverMark")} if background else {}
    return [r for r in _server_records(window) if (r.get("exception") or r.get("logged"))
            and not any(_server_matches(r, leaf) for leaf in wants)
            and labels.get((r.get("documentId"), str(r.get("requestId"))), "") not in background]


def _server_contradictions(window: List[dict], p: dict, known: Optional["_Known"] = None) -> List[dict]:
    """A request the act caused that raised on the server, or logged an error, disagrees with a
    passing predicate (observed tier: `no`), whatever status the browser saw: findings with their
    kind (server-exception, server-logged-error) and tier."""
    out = []
    for r in _server_failures(window, p, known)[:3]:
        exc = r.get("exception")
        if exc:
            counter = "the server raised %s (%s)%s under %s → %s" % (
                exc.get("type"), _short(exc.get("message") or "", 100),
                " at %s" % exc["frames"][0] if exc.get("frames") else "", _server_label(r), r.get("status"))
        else:
            e = r["logged"][0]
            counter = "the server logged %s from %s (%s) under %s → %s" % (
                e.get("level"), e.get("logger"), _short(e.get("message") or "", 100), _server_label(r), r.get("status"))
        out.append({"kind": "server-exception" if exc else "server-logged-error", "tier": "observed",
                    "claim": "the assertion held", "counter": counter, "server": _server_line(r)})
    return out


def _c_server_exception(window: List[dict], p: dict, action_since: Optional[float],
                        known: Optional["_Known"]) -> List[dict]:
    return [{k: v for k, v in c.items() if k not in ("kind", "tier")}
            for c in _server_contradictions(window, p, known) if c["kind"] == "server-exception"]


def _c_server_logged(window: List[dict], p: dict, action_since: Optional[float],
                     known: Optional["_Known"]) -> List[dict]:
    return [{k: v for k, v in c.items() if k not in ("kind", "tier")}
            for c in _server_contradictions(window, p, known) if c["kind"] == "server-logged-error"]


class _Contradiction:
    """One way the channels can disagree with a passing predicate: its name, its tier
    ("observed": it makes a verdict `no`; "absence": `unknown`) and its pure detector
    (window, predicate, the act's cursor or None, what the session knows) -> findings."""

    __slots__ = ("kind", "tier", "detect")

    def __init__(self, kind: str, tier: str, detect: Callable[..., List[dict]]) -> None:
        self.kind = kind
        self.tier = tier
        self.detect = detect


_CONTRADICTIONS: Tuple[_Contradiction, ...] = (
    _Contradiction("server-exception", "observed", _c_server_exception),    # Server truth: the most specific
    _Contradiction("server-logged-error", "observed", _c_server_logged),
    _Contradiction("error-shown", "observed", _c_error_shown),
    _Contradiction("message-reported-failure", "observed", _c_message_failure),
    _Contradiction("signal-contradicted", "observed", _c_signal_contradicted),
    _Contradiction("ui-advanced-request-failed", "observed", _c_ui_advanced_failed),
    _Contradiction("partial-failure-in-ok-response", "observed", _c_partial_failure),
    _Contradiction("failure-misattributed", "observed", _c_misattributed),
    _Contradiction("duplicate-request", "absence", _c_duplicate),
    _Contradiction("request-never-settled", "absence", _c_never_settled),
)


def _contradictions(window: List[dict], p: dict, action_since: Optional[float],
                    known: Optional["_Known"] = None) -> List[dict]:
    """Channels that disagree with a passing predicate, in two tiers, in the order of
    _CONTRADICTIONS.

    observed (they make a verdict `no`): a request of the window that raised on the server
    (server-exception) or logged an error there (server-logged-error), as the app's middleware
    reported it; an error shown to the user while the predicate held
    (error-shown), a socket or stream message of the act's own channel reporting a failure
    (message-reported-failure), a failed request (not retried with success later in the window)
    under a success signal (signal-contradicted) or else under a UI that moved on without showing
    an error (ui-advanced-request-failed), a 2xx whose body reports failure
    (partial-failure-in-ok-response), a server error shown as the user's mistake
    (failure-misattributed).  absence (they make it `unknown`): one write succeeded twice with the
    same body for one action (a retry after a failure is none), the page's own background writes
    aside (duplicate-request), a request the advanced UI never saw answered
    (request-never-settled).  A failure the predicate itself expects (a `net` leaf asking for it)
    is no contradiction."""
    return [dict({"kind": c.kind, "tier": c.tier}, **finding) for c in _CONTRADICTIONS
            for finding in c.detect(window, p, action_since, known)]


def _server_summary(window: List[dict]) -> Optional[List[str]]:
    """The act's requests as the server saw them, for every verdict's evidence (None without middleware)."""
    records = _server_records(window)
    return [_server_line(r) for r in records[-6:]] if records else None


_UNREADABLE_NAMES = {"cross-origin-iframe": "cross-origin frame(s)", "closed-shadow-root": "closed shadow root(s)"}


def _may_be_unreadable(res: dict) -> bool:
    """Could this failed result be a miss of something in a part of the page no SDK reads?
    Only a presence check of text or elements can; in allOf every failed part must be one
    (a failed request stands on its own), in anyOf one is enough."""
    assertion = res.get("assertion")
    if assertion in ("text.present", "element.present", "element.role+name"):
        return True
    children = res["evidence"] if isinstance(res.get("evidence"), list) else []
    failed = [c for c in children if isinstance(c, dict) and not c.get("pass")]
    if assertion == "allOf":
        return bool(failed) and all(_may_be_unreadable(c) for c in failed)
    if assertion == "anyOf":
        return any(_may_be_unreadable(c) for c in failed)
    return False


class _Case:
    """What the verdict rules read (see _decide): the judged result, the contradictions, the window and
    what the session knows, plus the facts several rules share, worked out once."""

    def __init__(self, res: dict, contradictions: List[dict], window: List[dict], known: "_Known", floor: float,
                 p: dict, already_true: bool, act: bool, effect: Any, shown: Optional[List[dict]],
                 pending: Optional[List[Tuple[str, bool]]]) -> None:
        self.res = res
        self.contradictions = contradictions
        self.window = window
        self.known = known
        self.floor = floor
        self.p = p
        self.already_true = already_true
        self.effect = effect
        self.shown = shown
        self.pending = pending
        self.declared = p["kind"] != "settled"
        self.implicit = not self.declared and act  # act_and_wait with no `until`: did the act work?
        self._lost: Optional[str] = None

    @property
    def lost(self) -> str:
        """Why the window is incomplete (_lost_evidence), or '' when nothing was lost."""
        if self._lost is None:
            self._lost = _lost_evidence(self.window, self.known)
        return self._lost

    def standing(self) -> List[dict]:
        """The errors the page still shows to the user that the predicate does not ask for."""
        return [d for d in self.shown or () if _is_failure_ui(d) and not _expects_error(self.p, d)]


_Ruling = Optional[Tuple[str, str, str]]


def _r_inconclusive(c: _Case) -> _Ruling:
    if c.res.get("inconclusive"):
        return "unknown", "inconclusive", "the assertion could not be evaluated: %s" % c.res["inconclusive"]
    return None


def _r_observation_lost(c: _Case) -> _Ruling:
    if c.res.get("observationLost"):
        return "unknown", "observation_lost", ("the tab disconnected or reloaded during the observation; check "
                                               "reticle_sessions and repeat if it is safe")
    return None


def _r_not_answering(c: _Case) -> _Ruling:
    if c.known.stuck:
        return "unknown", "not_answering", ("the tab does not answer: %s; what it holds now is not known, and "
                                            "nothing it said before can prove it" % c.known.stuck)
    return None


def _r_act_failed(c: _Case) -> _Ruling:
    if not c.implicit:
        return None
    failures = _failures_shown(c.window)
    if failures:
        return "no", "failure_observed", "after the act %s" % "; ".join(failures[:2])
    if not c.res["pass"]:
        return "unknown", "unsettled", "the page never settled within the timeout, and nothing failed in sight"
    return None


def _r_failed_for_lost_evidence(c: _Case) -> _Ruling:
    if c.res["pass"] or c.res.get("decided") or not c.lost:
        return None
    reads_window = any(_PREDICATE_KINDS[leaf["kind"]].window and not neg and not leaf.get("absent")
                       for leaf, neg in _leaves(c.p))
    if reads_window:
        return "unknown", "evidence_lost", ("the check failed, but %s, so the evidence it looked for may have been "
                                            "among them; narrow the window or reduce the page's event volume"
                                            % c.lost)
    return None


def _r_presence_blind_spot(c: _Case) -> _Ruling:
    res, known = c.res, c.known
    if not res["pass"] and known.unreadable and not res.get("decided") and _may_be_unreadable(res):
        parts = "; ".join("%d %s%s" % (n, _UNREADABLE_NAMES.get(k, k), " (%s)" % detail if detail else "")
                          for k, (n, detail) in sorted(known.unreadable.items()))
        return "unknown", "presence_blind_spot", (
            "%s, but part of the page cannot be read (%s), and it may be there; assert what the app does "
            "(net, signal, state) or what it shows outside that part" % (
                res.get("failureReason") or "the check did not find it", parts))
    return None


def _r_assertion_failed(c: _Case) -> _Ruling:
    if not c.res["pass"]:
        return "no", "assertion_failed", "the declared consequence did not hold: %s" % (
            c.res.get("failureReason") or _describe_predicate(c.p))
    return None


def _r_contradicted(c: _Case) -> _Ruling:
    observed = [x for x in c.contradictions if x["tier"] == "observed"]
    if observed:
        x = observed[0]
        return "no", "contradicted", "the assertion held, but channels disagree (%s): %s, yet %s" % (
            x["kind"], x["claim"], x["counter"])
    return None


def _r_evidence_incomplete(c: _Case) -> _Ruling:
    absence = [x for x in c.contradictions if x["tier"] == "absence"]
    if c.declared and all(x["kind"] == "request-never-settled" and not x.get("write") for x in absence):
        # A declared consequence held and only reads are still open (a poll, an image
        # feed): they cannot undo it.  Open writes stay unknown below.
        return None
    if absence:
        x = absence[0]
        return "unknown", "evidence_incomplete", ("the assertion held, but the window closed before the app "
                                                  "finished (%s: %s); re-check once it lands, raise timeout_ms, or "
                                                  "assert the request itself" % (x["kind"], x["counter"]))
    return None


def _r_absence_blind_spot(c: _Case) -> _Ruling:
    absences = [leaf for leaf, neg in _leaves(c.p) if leaf.get("absent") or neg]
    spots = {k: v for k, v in c.known.blind_spots.items() if k in _ABSENCE_BLIND_SPOTS}
    if absences and spots:
        return "unknown", "absence_blind_spot", ("the predicate asserts an absence, but part of the page is "
                                                 "unobservable (%s), so a passing check cannot prove it" %
                                                 ", ".join("%s ×%d" % kv for kv in spots.items()))
    return None


def _r_already_true(c: _Case) -> _Ruling:
    if c.already_true:
        return "unknown", "already_true", ("the predicate was already true before this action, so it proves "
                                           "nothing about the action; assert something the action CHANGES")
    return None


def _r_evidence_lost(c: _Case) -> _Ruling:
    if c.lost:
        return "unknown", "evidence_lost", ("%s, so this window is incomplete and a pass cannot be trusted; narrow "
                                            "the window or reduce the page's event volume" % c.lost)
    return None


def _r_outcome_pending(c: _Case) -> _Ruling:
    accepted = [d for d in _calls(c.window) if d.get("status") == 202 and not _is_dev(d) and _queued(d, c.window)]
    if accepted:
        return "unknown", "outcome_pending", ("%s returned 202 Accepted: the work was queued, not done; re-check "
                                              "once it reconciles" % _call_label(accepted[0]))
    return None


def _r_outcome_unread(c: _Case) -> _Ruling:
    unread = [e["data"] for e in c.window if e["type"] == "net.request" and _unread_write(e, c.floor, c.known)]
    if unread:
        return "unknown", "outcome_unread", ("the response body of %s was not captured, so whether the write "
                                             "succeeded cannot be proven; turn body capture on" %
                                             ", ".join(_call_label(d) for d in unread[:3]))
    return None


def _r_request_in_flight(c: _Case) -> _Ruling:
    in_flight = [d for d in c.known.open_requests if _is_write(d) and d.get("startedAt", 0) >= c.floor
                 and _call_label(d) not in c.known.background]
    if in_flight:
        return "unknown", "request_in_flight", ("%s is still in flight, so the outcome of this action is not "
                                                "known yet" % _call_label(in_flight[0]))
    return None


def _r_horizon_pending(c: _Case) -> _Ruling:
    decisive = [what for what, counts in c.pending or () if counts]
    if decisive:
        return "unknown", "horizon_pending", ("the act's work had not finished within %d ms (%s), so what it "
                                              "leads to is not known yet; re-check once it lands" %
                                              (HORIZON_CAP_MS, "; ".join(decisive[:3])))
    return None


def _r_no_effect(c: _Case) -> _Ruling:
    if c.implicit and not _had_effect(c.effect, c.window, c.floor, c.known):
        return "unknown", "no_effect", ("no observable effect yet: no DOM change, request, message, route, signal, "
                                        "state or storage event followed the act; declare the consequence you "
                                        "expect with `until`")
    return None


def _r_failure_still_shown(c: _Case) -> _Ruling:
    touched = [d for d in c.standing() if d.get("related")]
    if touched:
        return "no", "failure_still_shown", ("after the act the page still shows %s%s; an error still shown is not "
                                             "fixed" % (_ui_label(touched[0]), " (and %d more)" % (len(touched) - 1)
                                                        if len(touched) > 1 else ""))
    return None


def _r_proved(c: _Case) -> _Ruling:
    evidence = c.res.get("evidence")
    summary = _brief(evidence) if evidence is not None else "the predicate"
    noted = ""
    if c.contradictions:
        noted = "; noted, and unable to undo it: %s" % ", ".join(
            "%s (%s)" % (x["kind"], x["counter"]) for x in c.contradictions[:3])
    standing = c.standing()
    if standing:
        noted += "; a message elsewhere on the page is still shown: %s" % _ui_label(standing[0])
    if c.pending:
        noted += "; still going at the horizon's cap: %s" % "; ".join(what for what, _ in c.pending[:3])
    if c.declared:
        return "yes", "proved", "%s held (%s)%s" % (
            _describe_predicate(c.p), summary, noted or " with no channel disagreeing")
    return "yes", "proved", "the page settled with nothing failing%s (%s)" % (noted or " or disagreeing", summary)


# The rules of _decide as data, numbered as its docstring lists them, in the order they apply.
_VERDICT_RULES: Tuple[Tuple[str, Callable[[_Case], _Ruling]], ...] = (
    ("1", _r_inconclusive), ("2", _r_observation_lost), ("2b", _r_not_answering), ("2a", _r_act_failed),
    ("3", _r_failed_for_lost_evidence), ("3a", _r_presence_blind_spot), ("4", _r_assertion_failed),
    ("5", _r_contradicted), ("6", _r_evidence_incomplete), ("7", _r_absence_blind_spot), ("8", _r_already_true),
    ("9", _r_evidence_lost), ("10", _r_outcome_pending), ("11", _r_outcome_unread), ("12", _r_request_in_flight),
    ("12a", _r_horizon_pending), ("13", _r_no_effect), ("13a", _r_failure_still_shown), ("14", _r_proved),
)


def _decide(res: dict, contradictions: List[dict], window: List[dict], known: "_Known", floor: float, p: dict,
            already_true: bool = False, act: bool = False, effect: Any = None,
            shown: Optional[List[dict]] = None,
            pending: Optional[List[Tuple[str, bool]]] = None) -> Tuple[str, str, str]:
    """The verdict: (verified, verifiedReason, because).  The first rule that applies wins (one
    function each in _VERDICT_RULES, in this order):

    1. the predicate could not be evaluated -> unknown, inconclusive
    2. the tab went away during the observation -> unknown, observation_lost
    2b. the tab does not answer commands (a dialog open, its main thread busy) -> unknown, not_answering
    2a. act_and_wait with no predicate (did the act work?): a failure in sight (an error shown to the
        user, a console error, a failed write) -> no, failure_observed; a page that never settled ->
        unknown, unsettled
    3. the predicate failed for want of evidence that events lost from the window could have held
       (evicted, sampled, or dropped by the page while the daemon was unreachable) -> unknown,
       evidence_lost; a violation that is there (decided), or a check of the live page, stands
    3a. a presence check of the page's text or elements failed while part of the page cannot be
       read (a cross-origin frame, a closed shadow root): what it looked for may be there ->
       unknown, presence_blind_spot
    4. the predicate failed -> no, assertion_failed
    5. an observed contradiction -> no, contradicted
    6. an absence-tier contradiction -> unknown, evidence_incomplete (requests still open that are
       only reads do not undo a declared consequence that held)
    7. an absence asserted while part of the page is unobservable -> unknown, absence_blind_spot
    8. the predicate was already true before the act -> unknown, already_true
    9. events of the window were lost (as in 3) -> unknown, evidence_lost
    10. a 202 Accepted in the window that nothing says otherwise of (see _queued: a single-fetch
        redirect, a failure, a route change or new document after it) -> unknown, outcome_pending
    11. a 2xx write the act could have caused whose response body was not captured -> unknown,
        outcome_unread (204, 205 and 304 have no body; a write to another origin, one that started
        before the window, or one the page also made on its own before it is not the act's)
    12. a write started in the window is still in flight -> unknown, request_in_flight
    12a. the act's causal work was still going at the horizon's cap in a way that could change the
         answer (a write or document unanswered, a fetch stream still sending) -> unknown,
         horizon_pending; what could not (a read, the DOM still changing) is named in a `yes`
    13. act_and_wait with no predicate, and the act had no observable effect -> unknown, no_effect
    13a. what would be a `yes` after an act, while the page still shows an error the user is told
         (see _is_failure_ui) in what the act touched (its form or region, a toast, a message outside
         the page's header, nav, footer and asides), one the predicate does not ask for: shown before
         the act or not, re-rendered or not, it is not fixed -> no, failure_still_shown; one elsewhere
         is named in the `yes`
    14. otherwise -> yes, proved; contradictions that could not undo it are named in `because`
    """
    case = _Case(res, contradictions, window, known, floor, p, already_true, act, effect, shown, pending)
    return next(ruling for ruling in (rule(case) for _, rule in _VERDICT_RULES) if ruling is not None)


def _trim_call(d: dict) -> dict:
    """A call as evidence: method, path, status, duration, and at most 200 characters of each body."""
    url = str(d.get("url") or "")
    parts = urllib.parse.urlsplit(url)
    out = {"method": d.get("method"), "url": (parts.path or "/") + ("?" + parts.query if parts.query else "")
           if parts.scheme else url, "status": d.get("status")}
    for k in ("ms", "initiator", "error", "httpStatus", "statusNote", "faulted", "faultId"):
        if d.get(k) is not None and not (k == "initiator" and d[k] in ("fetch", "xhr")):
            out[k] = d[k]
    for k in ("requestBody", "responseBody"):
        if isinstance(d.get(k), str) and d[k]:
            out[k] = _short(d[k], 200)
    return out


def _trim_evidence(ev: Any) -> Any:
    """Evidence cut to what decides: calls trimmed, lists of children trimmed, the rest short."""
    if isinstance(ev, list):
        return [_trim_evidence(x) for x in ev[:5]]
    if isinstance(ev, dict):
        if "method" in ev and "url" in ev:
            return _trim_call(ev)
        if "calls" in ev and isinstance(ev["calls"], list):
            return dict(ev, calls=[_trim_call(c) for c in ev["calls"][:3]])
        return {k: (_trim_evidence(v) if isinstance(v, (dict, list)) else _short(v, 200) if isinstance(v, str) else v)
                for k, v in list(ev.items())[:8] if k not in ("saw",)}
    return ev


def _brief(ev: Any) -> str:
    """Evidence in a few words, for `because`: "POST /api/save → 200 (12 ms)"."""
    if isinstance(ev, list):
        return "; ".join(_brief(x) for x in ev[:3] if x is not None) or "the predicate"
    if isinstance(ev, dict) and "method" in ev and "url" in ev:
        t = _trim_call(ev)
        return "%s %s → %s%s" % (t["method"] or "LOAD", t["url"], t["status"] if t["status"] is not None else "?",
                                 " (%s ms)" % t["ms"] if t.get("ms") is not None else "")
    return _short(ev, 120)


def _compact(out: dict, v: dict) -> dict:
    """A verdict as the model reads it by default: the verdict, why, what decided it (trimmed),
    what disagreed, the near misses of a `no`, and any field that differs from its usual value.
    `v` is the predicate's result (the answer itself for an assert, its `verdict` for an act).
    `detail: "full"` answers everything."""
    c = {"verified": out["verified"], "verifiedReason": out["verifiedReason"], "because": out["because"]}
    if v.get("decidedBy"):
        c["decidedBy"] = v["decidedBy"]
    if out["verified"] == "yes" and v.get("evidence") is not None:
        c["evidence"] = _trim_evidence(v["evidence"])
    if out["verified"] != "yes":
        for k in ("expected", "observed"):
            if v.get(k) not in (None, [], ""):
                c[k] = [_short(x, 120) for x in v[k][:5]] if isinstance(v[k], list) else _short(v[k], 200)
    if out.get("contradictions"):
        c["contradictions"] = [{"kind": x["kind"], "counter": _short(x["counter"], 160)} for x in out["contradictions"]]
    for k in ("advice", "alreadyTrue", "coverage", "warning", "server"):
        if out.get(k):
            c[k] = out[k]
    issues = ((out.get("honesty") or {}).get("integrity") or {}).get("issues")
    if issues:
        c["integrity"] = issues
    if isinstance(out.get("unsettled"), dict) and out["unsettled"].get("note"):
        c["unsettled"] = out["unsettled"]["note"]
    effect = out["effect"] if isinstance(out.get("effect"), dict) else {}
    odd = {k: effect[k] for k in ("dispatched", "pageUnloaded", "input") if k in effect
           and effect[k] not in (True, "synthetic")}
    inner = effect["effect"] if isinstance(effect.get("effect"), dict) else {}
    if inner.get("occluded"):
        odd["occludedBy"] = inner.get("occludedBy")
    if odd:
        c["effect"] = odd
    c["since"] = out.get("since")
    return c


def _faulted_note(because: str, window: List[dict], res: Optional[dict] = None) -> str:
    """`because` with one sentence more when a request of the window was answered by a fault
    (reticle_fault), so no one reads a fault's answer as the server's: "The deciding evidence was
    faulted" when the verdict's own evidence is such a request, else "A request of this window was"."""
    hit = [e["data"] for e in window if e["type"] in ("net.request", "net.ws") and e["data"].get("faulted")]
    if not hit:
        return because
    text = _dumps([(res or {}).get("evidence"), (res or {}).get("observed")])
    deciding = [d for d in hit if str(d.get("faultId")) in text or ("method" in d and _call_label(d) in text)]
    first = (deciding or hit)[0]
    more = " (and %d more)" % (len(hit) - 1) if len(hit) > 1 else ""
    because = because.rstrip()
    return "%s%s %s faulted on purpose: %s%s was answered by fault %s, not by the server." % (
        because, "" if because.endswith((".", "!", "?")) else ".",
        "The deciding evidence was" if deciding else "A request of this window was",
        _call_label(first) if "method" in first else "the WebSocket %s" % first.get("url"), more, first.get("faultId"))


def _lost_evidence(window: List[dict], known: "_Known") -> str:
    """Why the window is incomplete, in words, or '' when nothing was lost."""
    overflow = [e for e in window if e["type"] == "blind-spot"
                and (e["data"].get("kind") == "transport-overflow"
                     or e["data"].get("reason") == "offline-queue-overflow")]
    if overflow:
        return ("the page dropped %s event(s) while the daemon was unreachable"
                % overflow[0]["data"].get("count", "some"))
    if any(e["type"] == "blind-spot" and e["data"].get("kind") == "arrival-unseen" for e in window):
        return ("the new page connected but did not report the request that brought it within %d ms"
                % ARRIVAL_WAIT_MS)
    loss = known.loss or {}
    if loss.get("evicted") or loss.get("sampled"):
        parts = []
        if loss.get("evicted"):
            parts.append("%d event(s) of this window were evicted from the buffer" % loss["evicted"])
        if loss.get("sampled"):
            parts.append("%d event(s) were sampled away under a flood" % loss["sampled"])
        return " and ".join(parts)
    return ""


_BODYLESS = (204, 205, 304)


def _unread_write(e: dict, floor: float, known: "_Known") -> bool:
    """A completed 2xx write that the act could have caused and whose body was not read."""
    d = e["data"]
    status = d.get("status")
    if not _is_write(d) or _is_dev(d) or not isinstance(status, int) or not 200 <= status < 300:
        return False
    if status in _BODYLESS or isinstance(d.get("responseBody"), str) or d.get("responseSize", 1) == 0:
        return False
    if d.get("initiator") == "document":
        return False  # the page that arrived is the answer, and the verdict reads it
    return _caused_by_act(e, floor, known)


def _caused_by_act(e: dict, floor: float, known: Optional["_Known"], repeats: bool = False) -> bool:
    """Could the act at `floor` have caused this completed call?  Not when it started before the
    act, went to another origin (analytics, a CDN), or is a write the page also made on its own
    before the act (autosave, polling); with `repeats`, only what it made twice or more is its own."""
    d = e["data"]
    took = d.get("durationMs", d.get("ms"))
    if isinstance(took, (int, float)) and e["t"] - float(took) < floor - 50:
        return False
    if known is None:
        return True
    url = str(d.get("url", ""))
    if known.origin and "://" in url and not url.startswith(known.origin + "/") and url != known.origin:
        return False
    return _call_label(d) not in (known.polled if repeats else known.background)


def _no_effect(action: str, effect: Any, window: List[dict], floor: float = 0.0,
               known: Optional["_Known"] = None) -> Optional[dict]:
    """A click or submit after which nothing at all happened (see _had_effect): whatever
    held, the action did not make it so."""
    if action not in ("click", "dblclick", "submit") or not isinstance(effect, dict):
        return None
    if _had_effect(effect, window, floor, known):
        return None
    return {"kind": "action-had-no-effect", "tier": "absence", "claim": "the %s was dispatched" % action,
            "counter": "nothing changed: no DOM mutation, request, route, signal, state or storage event",
            "detail": "a handler that is not wired up looks exactly like this; whatever held, the action "
                      "did not make it so"}


def _unsettled_report(known: "_Known", window: List[dict], since: float, p: dict) -> dict:
    """What kept the page busy: requests still open, and what fired over and over."""
    still = [_call_label(d) for d in known.open_requests if d.get("startedAt", 0) >= since]
    counts: collections.Counter = collections.Counter()
    for e in window:
        if e["type"] == "net.request":
            counts[_call_label(e["data"])] += 1
        elif e["type"].startswith(("dom.", "anim.")):
            counts[e["type"]] += 1
    repeated = ["%s ×%d" % kv for kv in counts.most_common(5) if kv[1] > 3]
    report = {"waitedFor": _describe_predicate(p), "stillInFlight": still[:5], "repeated": repeated}
    if still:
        report["note"] = ("%d request(s) started in this window had not come back: %s; re-check once they land, "
                          "raise timeout_ms, or assert the request itself" % (len(still), ", ".join(still[:3])))
    elif repeated:
        report["note"] = ("what kept the page busy was its own churn (%s); assert the consequence instead of "
                          "waiting for idle" % ", ".join(repeated))
    return report


_GRADE_ORDER = ("presence", "state", "net", "signal", "server")


def _grade(p: dict) -> str:
    """The strongest evidence grade among the positive leaves: server > signal > net > state > presence."""
    best = "presence"
    for leaf, neg in _leaves(p):
        grade = None if neg else _PREDICATE_KINDS[leaf["kind"]].grade(leaf)
        if grade and _GRADE_ORDER.index(grade) > _GRADE_ORDER.index(best):
            best = grade
    return best


def _presence_only(p: dict) -> bool:
    """Only element/text presence is checked, with no observable consequence beside it."""
    roles = [(_PREDICATE_KINDS[leaf["kind"]].role, neg) for leaf, neg in _leaves(p)]
    has_presence = any(role == "presence" and not neg for role, neg in roles)
    has_consequence = any(role == "consequence" for role, _ in roles)
    return has_presence and not has_consequence


def _advice(p: dict, res: dict) -> Optional[str]:
    """What would make a passing check stronger, for both verdict tools: a presence-only check,
    or a text `contains` so short or so common that it may be matching something else."""
    notes = []
    if _presence_only(p):
        notes.append("this predicate only checks element/text presence, not an observable consequence; a stale "
                     "render can satisfy it while the feature is broken. Prefer a net, signal, frame or state "
                     "predicate, or allOf it with one.")
    evidence = res["evidence"] if isinstance(res.get("evidence"), dict) else {}
    for leaf, neg in _leaves(p):
        if neg or leaf["kind"] != "text" or "contains" not in leaf:
            continue
        places = evidence.get("places", evidence.get("count")) if p is leaf else None
        if len(leaf["contains"].strip()) < 4 or (isinstance(places, int) and places > 1):
            notes.append("text contains %r %s; a substring can match a status bar or a counter, so pin it with "
                         "`equals` (the whole text) or `matches` (a regular expression), or a `scope`." % (
                             leaf["contains"], "matched %d places" % places if isinstance(places, int) and places > 1
                             else "is very short"))
    return " ".join(notes) or None


# -- wire formats as data: what popular frameworks' answers mean, beside the failure dialects ---------

_SINGLE_FETCH_REDIRECT = re.compile(r'"redirect"\s*,\s*"([^"]*)"\s*,\s*"status"\s*,\s*(30[1-8])')
_COMPONENT_LINE = re.compile(r"^[0-9a-f]{1,8}:(?=[\[{])", re.M)
_RENDERED_ERROR = re.compile(r"^\s*(error\b|failed\b|failure\b|could not\b|couldn't\b|unable to\b)", re.I)


def _header(d: dict, name: str) -> str:
    headers = d["responseHeaders"] if isinstance(d.get("responseHeaders"), dict) else {}
    return str(headers.get(name, ""))


def _read_single_fetch(d: dict) -> Optional[str]:
    """React Router / Remix "single fetch": a form action's answer (often 202, a turbo-stream body)
    that carries `"redirect", "/path", "status", 302` is a redirect, not queued work."""
    body = d.get("responseBody")
    m = _SINGLE_FETCH_REDIRECT.search(body) if isinstance(body, str) else None
    return "it redirects to %s (%s)" % (m.group(1), m.group(2)) if m else None


def _read_server_action(d: dict) -> Optional[str]:
    """React server actions: a `text/x-component` stream of `id:JSON` rows; a row whose object says
    `ok: false`, `success: false` or carries an error is a failure inside a 200."""
    body = d.get("responseBody")
    if not isinstance(body, str) or not ("x-component" in _header(d, "content-type") or _COMPONENT_LINE.search(body)):
        return None
    for line in body.splitlines():
        m = _COMPONENT_LINE.match(line)
        if m is None:
            continue
        problem = _partial_failure(line[m.end():])
        if problem:
            said = problem[len("the body says "):] if problem.startswith("the body says ") else problem
            return "the server action's answer (row %s) says %s%s" % (line[:m.end() - 1], said,
                                                                       _row_message(line[m.end():]))
    return None


def _row_message(row: str) -> str:
    """The words a failed row gives the user (its `message`), as a suffix, or ''."""
    try:
        data = json.loads(row)
    except ValueError:
        return ""
    text = data.get("message") if isinstance(data, dict) else None
    return ", message %r" % _short(text, 120) if isinstance(text, str) and text.strip() else ""


def _read_dash_callback(d: dict) -> Optional[str]:
    """Plotly Dash: a callback (POST …/_dash-update-component) always answers 200 with the new props;
    one whose rendered text begins as an error does ("Error: … Nothing was saved.")."""
    if "_dash-update-component" not in str(d.get("url", "")) or not isinstance(d.get("responseBody"), str):
        return None
    try:
        data = json.loads(d["responseBody"])
    except ValueError:
        return None
    stack = [data.get("response")] if isinstance(data, dict) else []
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str) and _RENDERED_ERROR.search(v) and not _NO_FAILURE.search(v):
            return "the callback rendered %r" % _short(v, 100)
    return None


# stricter than _RENDERED_ERROR for an endpoint of any name: an error stated ("Error: …", "Failed to …")
_CALLBACK_ERROR = re.compile(r"^\s*((errors?|fail(ed|ures?))\s*[:!\u2013\u2014-](?!\s*(none|nil|0|zero)\b)|failed to\b|"
                             r"could not\b|couldn't\b|unable to\b)", re.I)
_RENDERED_KEYS = frozenset(("children", "text", "message", "content", "html", "innerHTML", "label", "notice"))


def _read_json_callback(d: dict) -> Optional[str]:
    """A dashboard's JSON callback under the app's own endpoint name: a write answered 2xx with the
    new props, one of whose rendered texts (`children`, `text`, `message`, ...) states an error with
    no negation ("Error: the row is locked. Nothing was saved.", "Failed to save"; "Error rate: 0
    errors" and "Error reporting enabled" are not)."""
    body = d.get("responseBody")
    if not _is_write(d) or not isinstance(body, str) or not body.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    stack: List[Tuple[str, Any]] = [("", data)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((key, x) for x in v)
        elif key in _RENDERED_KEYS and isinstance(v, str) and _CALLBACK_ERROR.search(v) and not _NO_FAILURE.search(v):
            return "the callback's answer renders %r" % _short(v, 100)
    return None


def _sveltekit_envelope(d: dict) -> Optional[dict]:
    """The JSON object of a SvelteKit answer: a form action's (a POST answered `{"type": "failure" |
    "error" | "redirect" | "success", "status": …}`) or a `__data.json` load (`{"type": "data", "nodes":
    […]}`), or None for any other call."""
    body = d.get("responseBody")
    if not isinstance(body, str) or not body.lstrip().startswith("{") or '"type"' not in body[:200]:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    kind = data.get("type")
    if _sveltekit_data_url(d):
        return data if kind in ("data", "redirect") else None
    if not _is_write(d):
        return None
    if kind == "failure" and isinstance(data.get("status"), int) and isinstance(data.get("data"), (str, type(None))):
        return data
    if kind == "error" and isinstance(data.get("error"), dict):
        return data
    if kind == "redirect" and isinstance(data.get("location"), str) and isinstance(data.get("status"), int):
        return data
    if kind == "success" and isinstance(data.get("status"), int) and set(data) <= {"type", "status", "data"}:
        return data
    return None


def _sveltekit_data_url(d: dict) -> bool:
    return urllib.parse.urlsplit(str(d.get("url", ""))).path.endswith("/__data.json")


def _devalue_words(encoded: Any) -> str:
    """The message a devalue-encoded action `data` carries (`[{"message": 1}, "Title is required"]`:
    index 0 the object, its values indices into the array), as a suffix, or ''."""
    try:
        flat = json.loads(encoded) if isinstance(encoded, str) else None
    except ValueError:
        return ""
    if not isinstance(flat, list) or not flat or not isinstance(flat[0], dict):
        return ""
    for key in ("message", "error", "errors", "reason"):
        at = flat[0].get(key)
        said = flat[at] if isinstance(at, int) and not isinstance(at, bool) and 0 < at < len(flat) else None
        if isinstance(said, str) and said.strip():
            return ", message %r" % _short(said, 120)
    return ""


def _sveltekit_failure(d: dict) -> Optional[Tuple[int, str]]:
    """(status, phrase) of a SvelteKit answer that is a failure whatever its HTTP status: an action's
    `failure` (fail(422, …)) or `error` envelope, or a `__data.json` whose nodes hold an `error` node
    (the page renders +error.svelte); None otherwise."""
    data = _sveltekit_envelope(d)
    if data is None:
        return None
    http: int = d["status"] if isinstance(d.get("status"), int) else 200
    if data.get("type") == "failure":
        return int(data["status"]), "a SvelteKit action `failure` envelope with status %s%s" % (
            data["status"], _devalue_words(data.get("data")))
    if data.get("type") == "error":
        status: int = data["status"] if isinstance(data.get("status"), int) else http if http >= 400 else 500
        return status, "a SvelteKit action `error` envelope (%r)" % _short(data["error"].get("message") or "", 120)
    nodes: List[Any] = data["nodes"] if data.get("type") == "data" and isinstance(data.get("nodes"), list) else []
    for node in nodes:
        if isinstance(node, dict) and node.get("type") == "error":
            status = node["status"] if isinstance(node.get("status"), int) else 500
            err = node["error"] if isinstance(node.get("error"), dict) else {}
            return status, "a SvelteKit `__data.json` `error` node with status %s (%r): the page renders its " \
                "error page" % (status, _short(err.get("message") or "", 120))
    return None


def _read_sveltekit_action(d: dict) -> Optional[str]:
    data = _sveltekit_envelope(d)
    if data is None or _sveltekit_data_url(d):
        return None
    failed = _sveltekit_failure(d)
    if failed:
        return "its answer is %s" % failed[1]
    return None


def _read_sveltekit_data(d: dict) -> Optional[str]:
    failed = _sveltekit_failure(d) if _sveltekit_data_url(d) else None
    return "its answer is %s" % failed[1] if failed else None


def _read_sveltekit_redirect(d: dict) -> Optional[str]:
    data = _sveltekit_envelope(d)
    if data is None or data.get("type") != "redirect":
        return None
    return "it redirects to %s (a SvelteKit `redirect` envelope%s)" % (
        data.get("location"), ", %s" % data["status"] if isinstance(data.get("status"), int) else "")


def _read_sveltekit_success(d: dict) -> Optional[str]:
    data = _sveltekit_envelope(d)
    if data is None or data.get("type") != "success":
        return None
    return "a SvelteKit action `success` envelope with status %s" % data["status"]


_TURBO_STREAM = re.compile(r'<turbo-stream\b[^>]*\baction="([a-z_-]+)"[^>]*?(?:\btargets?="([^"]*)")?', re.I)


def _read_turbo_stream(d: dict) -> Optional[str]:
    """Hotwire Turbo: a form's answer as `text/vnd.turbo-stream.html`, `<turbo-stream action=…
    target=…>` elements the page applies: an ordinary answer (its status says how it went)."""
    body = d.get("responseBody")
    if "turbo-stream" not in _header(d, "content-type") and not (
            isinstance(body, str) and body.lstrip().startswith("<turbo-stream")):
        return None
    steps = ["%s #%s" % (m.group(1), m.group(2)) if m.group(2) else m.group(1)
             for m in _TURBO_STREAM.finditer(body if isinstance(body, str) else "")]
    return "a Turbo Stream answer%s" % (" (%s)" % ", ".join(steps[:4]) if steps else "")


class _WireFormat:
    """One framework's answer read for what it means: `meaning` is "redirect" (not queued work, not a
    failure), "failure" (a failure inside a 2xx) or "answer" (the framework's ordinary answer: no
    failure, not queued work); `read(call)` says so in a phrase, or None.  A failure whose answer carries
    a status of its own (a SvelteKit envelope) is a failed request with that status for every verdict
    rule: the bridge reads it into the call as it arrives (_take_wire_status)."""

    __slots__ = ("name", "meaning", "read")

    def __init__(self, name: str, meaning: str, read: Callable[[dict], Optional[str]]) -> None:
        self.name = name
        self.meaning = meaning
        self.read = read


_WIRE_FORMATS: Tuple[_WireFormat, ...] = (
    _WireFormat("single-fetch-redirect", "redirect", _read_single_fetch),
    _WireFormat("server-action", "failure", _read_server_action),
    _WireFormat("dash-callback", "failure", _read_dash_callback),
    _WireFormat("json-callback", "failure", _read_json_callback),
    _WireFormat("sveltekit-action-failure", "failure", _read_sveltekit_action),
    _WireFormat("sveltekit-data-error", "failure", _read_sveltekit_data),
    _WireFormat("sveltekit-action-redirect", "redirect", _read_sveltekit_redirect),
    _WireFormat("sveltekit-action-success", "answer", _read_sveltekit_success),
    _WireFormat("turbo-stream", "answer", _read_turbo_stream),
)


def _take_wire_status(d: dict) -> None:
    """A completed call whose 2xx answer is a framework's failure with a status of its own (see
    _sveltekit_failure) becomes that failed request: `status` is the envelope's, `httpStatus` the
    wire's, `ok` false, and `statusNote` says why, so `net status: 200` does not hold over it and every
    rule reads it as failed."""
    status = d.get("status")
    if not isinstance(status, int) or not 200 <= status < 300 or d.get("httpStatus") is not None:
        return
    failed = _sveltekit_failure(d)
    if failed is None:
        return
    d["httpStatus"] = status
    d["status"] = failed[0]
    d["ok"] = False
    d["statusNote"] = "HTTP %s carrying %s" % (status, failed[1])


def _wire_meaning(d: dict) -> Optional[Tuple[str, str]]:
    """(meaning, phrase) of the first wire format that reads call `d`, or None."""
    for w in _WIRE_FORMATS:
        said = w.read(d)
        if said:
            return w.meaning, said
    return None


def _queued(d: dict, window: List[dict]) -> bool:
    """A 202 is queued work only when nothing says otherwise: its answer (a single-fetch redirect, a
    failure) or the page's next steps (a route change or a new document after it)."""
    if _wire_meaning(d) is not None:
        return False
    after = [e for e in window if e["type"] == "net.request" and e["data"] is d]
    t = after[0]["t"] if after else 0.0
    return not any(e["t"] > t and (e["type"] == "route.change" or (e["type"] == "net.request" and e["data"].get(
        "initiator") == "document")) for e in window)


def _partial_failure(body: Any) -> Optional[str]:
    """The failure a 2xx JSON body owns up to, as a phrase, else None: a top-level ok/success false or a
    non-empty error field, or items of a results-like list flagged so ("3 of 10 results FAILED").
    A body that is not a JSON object or array says nothing."""
    if not isinstance(body, str) or not body.strip().startswith(("{", "[")):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None

    def flagged(obj: Any) -> Optional[str]:
        if not isinstance(obj, dict):
            return None
        for k in ("ok", "success", "succeeded"):
            if obj.get(k) is False:
                return "%s: false" % k
        for k in ("error", "errors", "errorMessage", "failureReason"):
            v = obj.get(k)
            if v not in (None, "", [], {}, False):
                return "%s: %s" % (k, _short(v, 80))
        return None

    top = flagged(data)
    if top:
        return "the body says %s" % top
    if isinstance(data, dict):
        for k in ("results", "items", "data", "records", "responses"):
            arr = data.get(k)
            if isinstance(arr, list) and arr:
                bad = [flagged(x) for x in arr]
                bad = [b for b in bad if b]
                if bad:
                    return "%d of %d %s FAILED (%s)" % (len(bad), len(arr), k, bad[0])
                break
    return None




###############################################################################
# Tools (schemas, registry, handlers) #########################################
###############################################################################

_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_SESSION_ID = {"type": "string", "minLength": 1, "maxLength": 128,
               "description": "Browser session to use; omit it when one tab is connected."}
_DETAIL = {"enum": ["full"]}  # every field instead of the compact default
_CURSOR = {"type": "number", "minimum": 0,
           "description": "A cursor (ms on the daemon's clock) from an earlier result."}
_PREDICATE = {"type": "object", "description": "{kind, ...}"}
_ACTIONS = ["click", "dblclick", "hover", "focus", "blur", "fill", "type", "clear", "select",
            "check", "uncheck", "submit", "press", "scrollIntoView", "upload", "drag"]
_TARGET = {
    "type": "object",
    "description": "{testid|text|role,name|label|placeholder}",
    "properties": {
        "testid": {"type": "string", "minLength": 1},
        "text": _TEXT_MATCH,
        "role": {"type": "string", "minLength": 1},
        "name": _TEXT_MATCH,
        "label": _TEXT_MATCH,
        "placeholder": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
    "minProperties": 1,
}
_ACT_ARGS = {
    "type": "object",
    "description": "{value|text|key,modifiers|toRef|name,content,type|confirmDangerous|dialog}",
    "properties": {
        "value": {"type": ["string", "array"], "items": {"type": "string"}},
        "text": {"type": "string"},
        "key": {"type": "string"},
        "modifiers": {"type": "array", "items": {"enum": ["Meta", "Control", "Shift", "Alt"]}},
        "toRef": {"type": "string"},
        "name": {"type": "string"},
        "content": {"type": "string"},
        "type": {"type": "string"},
        "holdMs": {"type": "integer", "minimum": 0, "maximum": 30000},
        "confirmDangerous": {"type": "boolean"},
        "dialog": {"enum": ["accept", "dismiss"]}, "promptText": {"type": "string"},
    },
    "additionalProperties": False,
}
_STEP = {
    "type": "object",
    "properties": {"ref": {"type": "string"}, "target": _TARGET, "action": {"enum": _ACTIONS},
                   "args": _ACT_ARGS},
    "required": ["action"],
    "additionalProperties": False,
}


def _lean(schema: dict, top: bool = True) -> dict:
    """A schema as clients are shown it: types, enums and the required fields of the arguments;
    a nested shape in a few words (its description) instead of in full.  tools/list stays small
    (every model reads it on every turn), while validation keeps the strict schema."""
    out: Dict[str, Any] = {}
    types = schema.get("type")
    if "anyOf" in schema:
        types = [b.get("type") for b in schema["anyOf"] if b.get("type")]
    if types:
        out["type"] = types
    if "enum" in schema:
        out["enum"] = schema["enum"]
    if top:
        out["properties"] = {k: _lean(v, False) for k, v in schema.get("properties", {}).items()}
        if schema.get("required"):
            out["required"] = schema["required"]
    elif schema.get("description") and (types in ("object", "array") or "anyOf" in schema or "enum" in schema):
        out["description"] = schema["description"]
    return out


def _obj(props: dict, required: Tuple[str, ...] = ()) -> dict:
    schema = {"$schema": _SCHEMA_DIALECT, "type": "object", "properties": props,
              "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


# The schemas a process has seen pass the JSON Schema meta-schema check, as canonical JSON.  Every Hub
# builds its registry, and checking two dozen schemas costs 0.1-0.3 s on a small machine; a schema is
# data, so one that passed once passes again.  One that fails is checked, and fails, every time.
_SCHEMAS_CHECKED: Set[str] = set()


def _check_schema(schema: dict) -> None:
    """Raise jsonschema's SchemaError unless `schema` is a valid draft 2020-12 schema (once per process
    for each schema that passes)."""
    key = json.dumps(schema, sort_keys=True, default=repr)
    if key not in _SCHEMAS_CHECKED:
        jsonschema.Draft202012Validator.check_schema(schema)
        _SCHEMAS_CHECKED.add(key)


class _Tool:
    """One tool: name, one-paragraph description, schema, async handler."""

    def __init__(self, name: str, description: str, schema: dict, handler: Callable,
                 example: Optional[dict] = None, listed: bool = True, session: bool = False,
                 quiet: Tuple[str, ...] = ()) -> None:
        _check_schema(schema)
        self.name = name
        self.description = description
        self.schema = schema
        self.handler = handler
        self.example = example if example is not None else {}
        self.listed = listed
        self.needs_session = session  # the handler gets the resolved tab: (hub, session, args, ctx)
        self.quiet = quiet            # accepted spellings tools/list does not show (until|predicate)
        self.validator = jsonschema.Draft202012Validator(schema)
        self.title: Optional[str] = None          # set from _TOOL_CONVENTIONS by _build_registry
        self.annotations: Optional[dict] = None
        self.output_schema: Optional[dict] = None
        self.output_validator: Optional[Any] = None

    def convene(self, title: str, annotations: dict, output: Optional[dict]) -> None:
        """The MCP conventions clients act on: a display title, behaviour hints, and the shape of the
        answer's structuredContent (checked once here, validated per answer in check mode)."""
        self.title = title
        self.annotations = annotations
        if output is not None:
            _check_schema(output)
            self.output_schema = output
            self.output_validator = jsonschema.Draft202012Validator(output)

    def describe(self) -> dict:
        """The tool as tools/list shows it: the schema a model needs to write a call (_lean);
        the strict schema behind it still checks every call and names what it accepts."""
        shown = dict(self.schema, properties={k: v for k, v in self.schema["properties"].items()
                                              if k not in self.quiet})
        out = {"name": self.name, "description": self.description, "inputSchema": _lean(shown)}
        if self.title is not None:
            out["title"] = self.title
        if self.annotations is not None:
            out["annotations"] = self.annotations
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        return out

    def output_problem(self, result: Any) -> Optional[str]:
        """Where a successful answer's structuredContent breaks outputSchema, or None when it holds
        (an isError answer carries the error object, which no output schema describes)."""
        if self.output_validator is None or not isinstance(result, dict) or result.get("isError"):
            return None
        err = jsonschema.exceptions.best_match(self.output_validator.iter_errors(result.get("structuredContent")))
        if err is None:
            return None
        return "%s answered structuredContent that breaks its outputSchema at /%s: %s" % (
            self.name, "/".join(str(p) for p in err.absolute_path), err.message)

    def check(self, args: Any) -> None:
        """Raise RpcError(-32602) naming the failing path and accepted fields."""
        if not isinstance(args, dict):
            raise RpcError(-32602, "%s: arguments must be a JSON object, got %s" % (
                self.name, type(args).__name__), {"accepted": sorted(self.schema["properties"]),
                                                  "example": self.example})
        for key, value in _walk_strings(args):
            if len(value) > MAX_STRING_ARG:
                raise RpcError(-32602, "%s: the string at %s is %d characters; at most %d are accepted. "
                               "Nothing ran." % (self.name, key, len(value), MAX_STRING_ARG))
        err = jsonschema.exceptions.best_match(self.validator.iter_errors(args))
        if err is None:
            return
        path = "/" + "/".join(str(p) for p in err.absolute_path)
        props = _accepted_fields(self.schema, list(err.absolute_path), err)
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            what = "unknown field%s %s" % ("s" if len(extra) > 1 else "", ", ".join(repr(e) for e in extra))
        else:
            what = err.message
        msg = "%s: invalid arguments at %s: %s. Accepted fields: %s. Example: %s" % (
            self.name, path, what, ", ".join(props) or "(none)", _dumps(self.example))
        raise RpcError(-32602, msg, {"tool": self.name, "path": path, "accepted": props,
                                     "example": self.example})


def _walk_strings(value: Any, path: str = "") -> List[Tuple[str, str]]:
    out = []
    if isinstance(value, str):
        out.append((path or "/", value))
    elif isinstance(value, dict):
        for k, v in value.items():
            out.extend(_walk_strings(v, "%s/%s" % (path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_walk_strings(v, "%s/%d" % (path, i)))
    return out


def _accepted_fields(schema: dict, path: list, err: Any) -> List[str]:
    """The fields accepted by the object that holds the failing value."""
    if err.validator in ("additionalProperties", "required") and "properties" in err.schema:
        return list(err.schema["properties"])
    node = schema
    for part in path[:-1]:
        if isinstance(part, int):
            node = node.get("items", {})
        else:
            node = node.get("properties", {}).get(part, {})
    return list(node.get("properties", {}))


class _ToolRegistry:
    """Name -> _Tool.  tools/list, validation, the usage resource and the
    README's tool table all read from here."""

    def __init__(self) -> None:
        self._tools: Dict[str, _Tool] = {}

    def add(self, tool: _Tool) -> _Tool:
        if tool.name in self._tools:
            raise ValueError("tool %s registered twice" % tool.name)
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Optional[_Tool]:
        return self._tools.get(name)

    def listed(self) -> List[_Tool]:
        return [t for t in self._tools.values() if t.listed]

    def names(self) -> List[str]:
        return [t.name for t in self.listed()]


def _cost(obj: Any) -> dict:
    size = len(_dumps(obj).encode("utf-8"))
    return {"bytes": size, "tokens": (size + 3) // 4}


async def _tool_sessions(hub: "Hub", session: Optional["_BrowserSession"], args: dict,
                         ctx: "_CallContext") -> dict:
    sessions = [_describe_session(s) for s in hub.bridge.live()]
    out: Dict[str, Any] = {"sessions": sessions}
    if not sessions:
        out["why"] = hub.bridge.why()
        out["next_action"] = {
            "action": "open_app",
            "reason": ("no tab is connected now (%d connected since the daemon started, all gone)"
                       % hub.bridge.ever_connected if hub.bridge.ever_connected else
                       "no tab has loaded %s/reticle.js yet" % hub.public_origin()),
            "snippet": '<script src="%s/reticle.js"></script>' % hub.public_origin(),
            "or": {"tool": "reticle_open", "args": {"url": "<the app's URL>"},
                   "reason": "a browser of Reticle's own, with the SDK injected into the app"},
        }
    return out


async def _tool_snapshot(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    mode = args.get("mode", "full")
    cmd = {"mode": mode}
    if args.get("scope"):
        cmd["scope"] = args["scope"]
    result = await session.command("snapshot", cmd)
    if not isinstance(result, dict):
        raise ToolError("the page answered snapshot with %r" % type(result).__name__)
    prev, now = session.snapshots.remember(args.get("scope"), mode, result)
    diffed = _snapshot_answer(dict(result), prev, now)
    if args.get("diff"):
        result = diffed
    result["cost"] = _cost(result)
    return result


def _query_args(args: dict) -> dict:
    out = {k: v for k, v in args.items() if k in ("by", "value", "name", "scope", "self", "attrs",
                                                 "limit", "count_only")}
    if "by" not in out:
        for alias in ("testid", "label", "placeholder", "alt", "text", "role"):
            if alias in args:
                out["by"] = alias
                out["value"] = args[alias]
                break
    if "by" not in out:
        raise ToolError("reticle_query needs what to search by: `by` + `value`, or one of testid, "
                        "label, placeholder, alt, text, role.",
                        'for example {"by": "role", "value": "button", "name": "Pay"}')
    if "value" not in out:
        raise ToolError("reticle_query by %s needs a `value`." % out["by"],
                        'for example {"by": "%s", "value": "..."}' % out["by"])
    if out.get("self") and not out.get("scope"):
        raise ToolError("`self: true` needs a `scope` (the element to return).", "add scope")
    return out


async def _tool_query(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    result = await session.command("query", _query_args(args))
    if isinstance(result, dict):
        result["cost"] = _cost(result)
    return result


async def _tool_inspect(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    return await session.command("inspect", {"ref": args["ref"]})


async def _tool_state(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    cmd = {k: args[k] for k in ("store", "path", "depth") if k in args}
    return await session.command("state_read", cmd)


async def _tool_capabilities(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    result = await session.command("capabilities", {})
    if isinstance(result, dict):
        result.setdefault("source", "live")
    return result


async def _act_across_documents(session: "_BrowserSession", cmd: dict) -> Any:
    """Send one act.  A page that unloads before it answers (a form post, a link) took the
    act's reply with it: that is the act's effect, not a failure, and the evidence is in
    the next document, which the verdict tools follow."""
    try:
        return await session.command("act", cmd)
    except _TabGone as exc:
        return {"dispatched": None, "pageUnloaded": True,
                "note": "the page unloaded before it answered (%s); what the act did is in the next "
                        "document's evidence" % exc.error}


async def _tool_act(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    return await _act_once(session, args)


async def _act_once(session: "_BrowserSession", args: dict) -> dict:
    """One act, no verdict (reticle_act, a flow's act without `until`): its effect, journaled."""
    session.refuse_if_throttled(args.get("refuseWhenThrottled"))
    cmd = _act_command(args)
    pre = await _journey_anchor(session, args)
    since = session.mark_act(args["action"])
    result = await _act_across_documents(session, cmd)
    session.note_act_page_time(since, result)
    dispatched = result.get("dispatched", True) if isinstance(result, dict) else True
    out = {"since": since, "dispatched": dispatched if dispatched is None else bool(dispatched),
           "settled": result.get("settled") if isinstance(result, dict) else None,
           "input": result.get("input", "synthetic") if isinstance(result, dict) else "synthetic",
           "result": result}
    _journal(session, "act", args, out, pre)
    return _with_health(session, out)


async def _tool_act_sequence(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    steps = []
    for i, step in enumerate(args["steps"]):
        try:
            steps.append(_act_command(step))
        except ToolError as exc:
            raise ToolError("step %d: %s" % (i, exc.error), exc.recovery) from exc
    per_step = args.get("timeout_ms", 8000) / 1000.0
    since = session.mark_act(None)
    result = await session.command("act_sequence", {"steps": steps}, timeout=per_step * len(steps) + 1)
    out: Dict[str, Any] = {"since": since, "input": "cdp" if session.device is not None else "synthetic"}
    if isinstance(result, dict):
        out.update(result)
    done = out.get("completed") if isinstance(out.get("completed"), int) else len(steps)
    results: List[Any] = out["steps"] if isinstance(out.get("steps"), list) else []
    for i, step in enumerate(args["steps"][:done]):  # the journey keeps each step; one by ref has no anchor
        said = results[i] if i < len(results) and isinstance(results[i], dict) else {}
        secret = bool(said.get("password")) or _no_plain_secret(dict(step)).get("secret") is not None
        _journal(session, "act", step, {"since": since},
                 {"target": step.get("target"), "url": session.url, "secret": secret})
    return _with_health(session, out)


async def _unstick_device(session: "_BrowserSession", args: dict) -> bool:
    """A device's tab that does not answer is reloaded (or navigated) by the browser itself: the page's
    running script is ended first when its main thread does not answer CDP either (Runtime.terminateExecution,
    only then: with nothing running it would end the next document's first script).  True when done."""
    device = session.device
    if device is None or device.page is None or session.not_answering() is None:
        return False
    page = device.page
    try:
        await device.cdp.call("Runtime.evaluate", {"expression": "1", "returnByValue": True}, page, timeout=0.5)
    except _CdpError:
        try:
            await device.cdp.call("Runtime.terminateExecution", {}, page, timeout=2.0)
        except _CdpError:
            pass
    try:
        if args.get("url"):
            await device.cdp.call("Page.navigate", {"url": urllib.parse.urljoin(session.url, args["url"])}, page,
                                  timeout=5.0)
        else:
            await device.cdp.call("Page.reload", {"ignoreCache": bool(args.get("hard"))}, page, timeout=5.0)
    except _CdpError as exc:
        raise ToolError("the stuck tab could not be reloaded: %s" % exc,
                        "reticle_close it and reticle_open again") from exc
    _emit(_device_log, logging.INFO, "device_unstuck", deviceId=device.id,
          reason=_short(session.not_answering() or "", 120))
    return True


async def _tool_navigate(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_navigate: load `url` in the tab, or reload it (`hard` bypasses the cache), and wait up
    to 5 s for it to connect again; `since` is the navigation's mark, so events before it no longer
    count.  Only http(s) URLs or paths are accepted."""
    if not args.get("url") and not args.get("reload"):
        raise ToolError("reticle_navigate needs `url` or `reload: true`.",
                        'for example {"url": "http://localhost:5173/"} or {"reload": true}')
    if args.get("hard") and not args.get("reload"):
        raise ToolError("`hard` goes with `reload: true` only.", "drop hard, or add reload")
    if args.get("url"):
        parsed = urllib.parse.urlsplit(args["url"])
        if parsed.scheme not in ("http", "https", ""):
            raise ToolError("reticle_navigate opens http: and https: pages only, not %s:" % parsed.scheme,
                            "pass an http(s) URL or a path")
    since = session.mark_navigation()
    generation = session.generation
    name, cmd = ("refresh", {"hard": bool(args.get("hard"))}) if args.get("reload") else (
        "navigate", {"url": args["url"]})
    if not await _unstick_device(session, args):
        await session.command(name, cmd)
    _progress_note("waiting for tab %s to connect again after the %s" % (session.id, name))
    confirmed = await hub.bridge.wait_reconnect(session.id, generation, 5.0)
    live = hub.bridge.get(session.id)
    out = {"ok": True, "confirmed": confirmed, "since": since, "sessionId": session.id}
    if live is not None:
        out["url"] = live.url
    if not confirmed:
        out["note"] = ("the page did not reconnect within 5 s; check reticle_sessions (the app may "
                       "have navigated off a page that loads reticle.js)")
    else:
        out["note"] = "events before the navigation no longer count for assert and wait_for"
    return out


def _window(session: "_BrowserSession", args: dict, default_since: float) -> Tuple[float, Optional[float]]:
    since = args.get("since")
    since = default_since if since is None else float(since)
    until = args.get("until")
    return since, (None if until is None else float(until))


async def _tool_observe(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_observe: the tab's events in a window (default the last 2 s), filtered by action and
    event filters, newest kept when `max_events` cuts, each shown in its public form, with a summary
    and cost.  An answer stops at OBSERVE_MAX_BYTES and says where to continue (`next.since`)."""
    now = hub.clock()
    default = now - args.get("window_ms", 2000)
    since, until = _window(session, args, default)
    events = session.store.query(since, until)
    if args.get("actionId"):
        events = [e for e in events if e.get("actionId") == args["actionId"]]
    if args.get("filters"):
        events = [e for e in events if _event_matches_filters(e["type"], args["filters"])]
    summary = _summarise(events)
    budget = args.get("max_events")
    dropped = 0
    if budget and len(events) > budget:
        dropped = len(events) - budget
        events = events[-budget:]
    shown: List[dict] = []
    used = 0
    for e in events:
        item = _public_event(e)
        size = len(_dumps(item).encode("utf-8"))
        if shown and used + size > OBSERVE_MAX_BYTES:
            break
        shown.append(item)
        used += size
    out: Dict[str, Any] = {"window_ms": round((until or now) - since), "since": since,
                           "events": shown, "summary": summary}
    if len(shown) < len(events):
        rest = events[len(shown)]
        out["next"] = {"since": rest["t"], "remaining": len(events) - len(shown),
                       "note": "this answer stops at %d KiB; call again with since=%s for the rest"
                               % (OBSERVE_MAX_BYTES >> 10, rest["t"])}
    cost = _cost(shown)
    cost["events"] = len(shown)
    if dropped:
        cost["droppedOldest"] = dropped
    out["cost"] = cost
    return _with_buffer(session, out, since)


def _event_matches_filters(etype: str, filters: List[str]) -> bool:
    """An event type passes reticle_observe's filters when one names it or its bucket (its record's)."""
    return etype in filters or _event_type(etype).bucket in filters


def _value_change(before: Any, after: Any) -> dict:
    """A stored value's change, small: the keys that changed when both sides are JSON objects,
    else the old value cut short and the new one."""
    def parsed(v: Any) -> Any:
        if isinstance(v, str) and v[:1] in ("{", "["):
            try:
                return json.loads(v)
            except ValueError:
                return v
        return v
    a, b = parsed(before), parsed(after)
    if isinstance(a, dict) and isinstance(b, dict):
        changed = {k: _short(b[k], 80) for k in b if k not in a or not _deep_equal(a[k], b[k])}
        removed = [k for k in a if k not in b]
        out: Dict[str, Any] = {"changedKeys": dict(list(changed.items())[:20])}
        if removed:
            out["removedKeys"] = removed[:20]
        return out
    def small(v: Any, limit: int) -> Any:
        return v if v is None or len(_dumps(v)) <= limit else _short(v, limit)
    return {"from": small(before, 80), "to": small(after, 200)}


def _public_event(e: dict) -> dict:
    data = e.get("data")
    if e["type"] in ("storage.change", "state.change") and isinstance(data, dict):
        # stores and storage repeat their whole value on every write: answer the change
        data = dict({k: data[k] for k in ("area", "key", "store", "path") if k in data},
                    **_value_change(data.get("from"), data.get("to")))
    out = {"t": e["t"], "type": e["type"], "data": data}
    if e.get("actionId"):
        out["actionId"] = e["actionId"]
    return out


def _net_calls(session: "_BrowserSession", since: float, until: Optional[float]) -> List[dict]:
    """Completed calls plus requests still pending, in start order."""
    events = session.store.query(since, until, prefix="net.")
    done = {}
    order = []
    for e in events:
        d = e["data"]
        rid = _request_key(e)
        if e["type"] == "net.pending":
            if rid not in done:
                done[rid] = dict(d, status="pending", pending=True, t=e["t"])
                order.append(rid)
        elif e["type"] == "net.request":
            if rid not in done:
                order.append(rid)
            done[rid] = dict(d, t=e["t"])
    # pending ones whose start fell before the window but are still open count too
    for d in session.open_since(0.0):
        rid = d["_key"]
        if rid not in done:
            done[rid] = dict(d, status="pending", pending=True)
            order.append(rid)
    return [done[r] for r in order]


def _sockets(session: "_BrowserSession", since: float, until: Optional[float]) -> List[dict]:
    """WebSocket, EventSource and streamed-response traffic, one row per connection: its
    message counts and its last messages."""
    rows: Dict[Tuple[str, str], dict] = {}
    for e in session.store.query(since, until):
        if e["type"] not in _FRAME_TYPES or _is_dev(e["data"]):
            continue
        d = e["data"]
        key = (str(d.get("transport", e["type"][4:])), str(d.get("url", "?")))
        row = rows.setdefault(key, {"transport": key[0], "url": key[1], "messagesIn": 0, "messagesOut": 0,
                                    "last": []})
        direction = d.get("direction")
        if direction in ("in", "out"):
            row["messagesIn" if direction == "in" else "messagesOut"] += 1
            row["last"] = (row["last"] + [{"direction": direction, "t": e["t"],
                                           "data": _short(d.get("data", "(binary)"), 200)}])[-3:]
        elif direction in ("open", "close", "error"):
            row[{"open": "openedAt", "close": "closedAt", "error": "errorAt"}[direction]] = e["t"]
    return list(rows.values())


async def _tool_network(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_network: the requests (and socket messages) in a window, filtered like a net predicate,
    the newest `limit` shaped compactly (bodies cut to 200 characters unless detail is full).  An
    empty answer says whether nothing happened or the filter missed (with the calls present), and a
    write whose body was not captured is flagged."""
    since, until = _window(session, args, session.floor())
    calls = _net_calls(session, since, until)
    all_calls = calls
    calls = [c for c in calls if _call_matches(c, args)]
    limit = args.get("limit", 200)
    total = len(calls)
    calls = calls[-limit:]
    bodies = args.get("bodies", True)
    shaped = []
    for c in calls:
        item = {k: c[k] for k in ("method", "url", "status", "statusText", "ok", "contentType", "ms",
                                  "pending", "error", "initiator", "responseSize", "bodyTruncated",
                                  "bodyCaptured", "streamed", "messageCount", "finalStatus", "statusNote",
                                  "faulted", "faultId")
                if k in c}
        if args.get("detail") == "full" and "responseHeaders" in c:
            item["responseHeaders"] = c["responseHeaders"]
        if bodies:
            for k in ("requestBody", "responseBody"):
                if k in c:
                    item[k] = c[k] if args.get("detail") == "full" or not isinstance(c[k], str) else _short(c[k], 200)
        shaped.append(item)
    out: Dict[str, Any] = {"since": since, "calls": shaped}
    sockets = _sockets(session, since, until)
    if sockets:
        out["sockets"] = sockets
    if total > len(shaped):
        out["total"] = total
        out["truncated"] = True
    if not shaped and all_calls:
        out["hint"] = {"totalInWindow": len(all_calls),
                       "present": [{"method": c.get("method"), "url": c.get("url"), "status": c.get("status")}
                                   for c in all_calls[-5:]]}
    elif not all_calls and not sockets:
        out["observed"] = True
        out["note"] = "the observation ran and found no network calls or socket messages in this window"
    if any(c.get("bodyCaptured") is False and str(c.get("method", "")).upper() in ("POST", "PUT", "PATCH")
           for c in shaped):
        out["bodiesNotCaptured"] = True
    out["cost"] = _cost(shaped)
    return _with_buffer(session, out, since)


# -- reticle_fault: make a request fail on purpose (the Faults record lives beside the Devices) ----

_FAULT_SCHEMA = {
    "match": {"type": "object", "additionalProperties": False, "required": ["urlContains"],
              "description": "{urlContains, method?, resourceType?}",
              "properties": {"urlContains": {"type": "string", "minLength": 1, "maxLength": 2048},
                             "method": {"type": "string", "pattern": "^[A-Za-z]{1,16}$"},
                             "resourceType": {"enum": sorted(_FAULT_CDP_TYPES)}}},
    "respond": {"type": "object", "additionalProperties": False, "required": ["status"],
                "description": "{status, body?, headers?}",
                "properties": {"status": {"type": "integer", "minimum": 200, "maximum": 599},
                               "body": {"type": "string", "maxLength": 65536},
                               "headers": {"type": "object", "maxProperties": 20,
                                           "additionalProperties": {"type": "string", "maxLength": 1024}}}},
    "delayMs": {"type": "integer", "minimum": 1, "maximum": 60000},
    "abort": {"type": "boolean", "const": True},
    "times": {"type": "integer", "minimum": 1, "maximum": 1000},
    "ttlMs": {"type": "integer", "minimum": 100, "maximum": 3600000},
    "clear": {"anyOf": [{"type": "boolean", "const": True}, {"type": "string", "pattern": "^f[0-9a-f]{8}$"}],
              "description": "true (all of yours on the tab) or a faultId"},
    "list": {"type": "boolean", "const": True},
}


def _fault_spec_problem(args: dict) -> Optional[str]:
    """What is wrong with a reticle_fault call the schema let through, or None."""
    modes = [k for k in ("match", "clear", "list") if k in args]
    if len(modes) != 1:
        return "pass exactly one of `match` (set a fault), `clear` (remove) or `list`; got %s" % (
            ", ".join(modes) or "none of them")
    if modes[0] != "match":
        extra = [k for k in ("respond", "delayMs", "abort", "times", "ttlMs") if k in args]
        return "`%s` takes no %s" % (modes[0], ", ".join(extra)) if extra else None
    if "respond" in args and args.get("abort"):
        return "a fault either answers (`respond`) or aborts (`abort`), not both"
    if not ("respond" in args or args.get("abort") or args.get("delayMs")):
        return "a fault needs `respond: {status}`, `abort: true` or `delayMs` (or several: delayMs with either)"
    rtype = args["match"].get("resourceType")
    if rtype == "websocket" and ("respond" in args or args.get("delayMs")):
        return "a WebSocket can only be dropped (`abort: true`), not answered or delayed"
    return None


async def _tool_fault(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """Set, list or clear this client's faults on one tab (see _Faults)."""
    problem = _fault_spec_problem(args)
    if problem:
        raise ToolError("reticle_fault: %s." % problem,
                        'for example {"match": {"urlContains": "/api/save", "method": "POST"}, '
                        '"respond": {"status": 500}}')
    faults = hub.faults
    now = hub.clock()
    if args.get("list"):
        mine = [f.public(now) for f in faults.live(session.id) if f.owner == ctx.session_key]
        return {"sessionId": session.id, "faults": mine}
    if "clear" in args:
        gone = faults.clear(session.id, ctx.session_key, args["clear"])
        if args["clear"] is not True and not gone:
            raise ToolError("no fault %s of yours on tab %s" % (args["clear"], session.id),
                            "reticle_fault {list: true} shows yours")
        await faults.sync(session.id)
        return {"sessionId": session.id, "cleared": gone,
                "faults": [f.public(now) for f in faults.live(session.id) if f.owner == ctx.session_key]}
    device = hub.devices.for_session(session.id)
    if device is not None and device.owner != ctx.session_key:
        raise ToolError("tab %s is a device another client opened; its faults are its own" % session.id,
                        "open your own device with reticle_open")
    rtype = args["match"].get("resourceType")
    if device is None and rtype and rtype not in _FAULT_SDK_TYPES:
        raise ToolError("tab %s has the script tag, where faults act in the SDK's fetch and XHR wrappers only; "
                        "a %s request cannot be faulted there" % (session.id, rtype),
                        "open the app with reticle_open (a device faults documents, form posts and WebSocket "
                        "handshakes in the browser's network layer)")
    fault = faults.add(session, ctx.session_key, args)
    try:
        await faults.sync(session.id)
    except ToolError:
        faults.clear(session.id, ctx.session_key, fault.id)
        raise
    out = dict(fault.public(now), ttlMs=fault.ttl_ms)
    covers = _FAULT_DEVICE_COVERS if device is not None else _FAULT_SDK_COVERS
    if rtype:
        covers = [{"document": "documents and form posts", "fetch": "fetch and XHR", "xhr": "fetch and XHR",
                   "websocket": "WebSocket handshakes"}.get(rtype, rtype)]
    out["covers"] = covers
    if rtype == "websocket":
        out["in"] = "sdk"
        out["note"] = ("the SDK's WebSocket wrapper drops a matching socket before its handshake reaches the "
                       "server; the page sees an error and a close (1006)")
    elif device is not None:
        out["in"] = "device"
        out["note"] = "the browser answers for the server: a matching request never reaches it%s" % (
            " until the delay is over" if fault.delay_ms and not (fault.abort or fault.respond) else "")
    else:
        out["in"] = "sdk"
        out["notCovered"] = _FAULT_SDK_MISSES
        out["note"] = ("the SDK's fetch, XHR and WebSocket wrappers answer for the server in this tab; documents "
                       "and form posts need a device (reticle_open)")
    return out


# A secret a page prints as code: a framework's debugger page (Werkzeug's `SECRET = "..."`, a
# Django settings dump), an inlined config.  Its value is redacted like a token's.
_PAGE_SECRET_RE = re.compile(r"""(?i)\b((?:[A-Z0-9_]*_)?(?:secret(?:_key)?|password|passwd|api[_-]?key|"""
                             r"""access[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?token)\b"""
                             r"""["']?\s*[:=]\s*)(["'])([^"'\n]{4,})\2""")


def _redact_page_text(text: str) -> str:
    """Page text (a console line, a stack) with secrets that look like code redacted, and tokens."""
    return _redact(_PAGE_SECRET_RE.sub(lambda m: m.group(1) + m.group(2) + "[redacted]" + m.group(2), text))


async def _tool_console(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_console: the console output and uncaught errors in the window (from the last act or
    navigation, like the verdicts), their text and stacks redacted, filtered by `level` (info takes
    debug too), the newest `limit`.  An empty answer says whether the filter missed (counts by level)
    or nothing was logged."""
    since, until = _window(session, args, session.floor())  # like the verdicts: from the last act or navigation
    events = [e for e in session.store.query(since, until) if e["type"] in _CONSOLE_TYPES]
    logs = []
    for e in events:
        d = e.get("data") or {}
        level = "error" if e["type"] == "error.uncaught" else e["type"].split(".", 1)[1]
        item = {"level": level, "text": _redact_page_text(str(d.get("text") or d.get("message") or "")), "t": e["t"]}
        if e["type"] == "error.uncaught":
            item["uncaught"] = True
            if d.get("kind"):
                item["kind"] = d["kind"]
        if d.get("stack"):
            item["stack"] = _redact_page_text("\n".join(str(d["stack"]).splitlines()[:5]))
        if d.get("source"):
            item["source"] = d["source"]
        logs.append(item)
    everything = logs
    level = args.get("level")
    if level:
        logs = [x for x in logs if x["level"] == level or (level == "info" and x["level"] == "debug")]
    limit = args.get("limit", 200)
    total = len(logs)
    logs = logs[-limit:]
    out: Dict[str, Any] = {"logs": logs}
    if total > len(logs):
        out["total"] = total
        out["truncated"] = True
    if not logs and everything:
        by = collections.Counter(x["level"] for x in everything)
        out["hint"] = {"totalInWindow": len(everything), "byLevel": dict(by)}
    elif not everything:
        out["observed"] = True
        out["note"] = "the observation ran and found no console output in this window"
    out["cost"] = _cost(logs)
    return _with_buffer(session, out, since)


# -- the verdict tools: they ask the page and wait; the rules above decide ------------------------

@overload
def _predicate_arg(args: dict, required: Literal[True]) -> dict: ...


@overload
def _predicate_arg(args: dict, required: bool) -> Optional[dict]: ...


def _predicate_arg(args: dict, required: bool) -> Optional[dict]:
    raw = args.get("until") if "until" in args else args.get("predicate")
    if "until" in args and "predicate" in args:
        raw = args["until"]
    if raw is None:
        if required:
            raise _predicate_fail(None, ["no predicate given: pass `predicate` (or `until`)"], "predicate")
        return None
    return parse_predicate(raw, "until" if "until" in args else "predicate")


def _unmade_issues(known: "_Known") -> List[str]:
    """Integrity: requests the page reported that the device's browser never made (forged into
    the SDK's socket by a page script); none of them can make a verdict."""
    n = known.blind_spots.get("request-not-made")
    return ["forged: the page reported %d request(s) the browser never made; they were not counted" % n] if n else []


def _coverage(known: "_Known", out: dict) -> dict:
    issues = _unmade_issues(known)
    if issues:
        out["honesty"] = dict(out.get("honesty") or {}, integrity={"clean": False, "issues": issues})
    if known.blind_spots:
        out["coverage"] = "partial — %s" % ", ".join("%s ×%d" % kv for kv in known.blind_spots.items())
        out["coverage_spots"] = [{"kind": k, "count": v} for k, v in known.blind_spots.items()]
    return out


async def _tool_wait_for(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    p = _predicate_arg(args, True)
    floor = float(args["since"]) if args.get("since") is not None else session.floor()
    res = _judge_final(p, await _observe(session, p, floor, args.get("timeout_ms", 4000)))
    res["since"] = floor
    return _with_buffer(session, res, floor)


async def _tool_assert(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    return await _assert_verdict(session, args, _predicate_arg(args, True))


async def _assert_verdict(session: "_BrowserSession", args: dict, p: dict) -> dict:
    """The verdict core of an assert (reticle_assert, a flow's assert step): Observe the window from
    `since` (else the last act or navigation), after the horizon of an act inside it; then Answer."""
    floor = float(args["since"]) if args.get("since") is not None else session.floor()
    act_at = session.last_act if (session.last_act or -1) >= floor else None
    obs = await _observe(session, p, floor, args.get("timeout_ms", 0), act_at=act_at)
    obs.act_at = act_at
    return _answer(session, "assert", args, p, obs)


async def _tool_act_and_wait(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    return await _act_and_wait_verdict(session, args, _until_arg(args))


def _until_arg(args: dict) -> dict:
    """The predicate an act is judged on: `until` (or `predicate`), else the page settling."""
    return _predicate_arg(args, False) or {"kind": "settled", "quietMs": 300}


def _act_budget(timeout_ms: float, started: float, now: float) -> Tuple[float, float]:
    """What an act's Observe gets of its `timeout_ms`, all on the daemon's clock (ms): (the wait left
    at `now` of the act that started at `started`, the end of its budget: Observe's `settle_until`).
    With a timeout, an act that used it all still gets 0.001 ms, so it is judged once and times out;
    without one (0) the wait is 0: one look."""
    remaining = max(0.001, timeout_ms - (now - started)) if timeout_ms > 0 else 0
    return remaining, started + timeout_ms


async def _act_and_wait_verdict(session: "_BrowserSession", args: dict, p: dict) -> dict:
    """The verdict core of an act (reticle_act_and_wait, a flow's act with `until`): whether `p` was
    already true, the act, then Observe until `p` holds, is decided or the budget runs out; Answer."""
    session.refuse_if_throttled(args.get("refuseWhenThrottled"))
    cmd = _act_command(args)
    timeout = args.get("timeout_ms", 4000)
    already_true = False
    if any(_PREDICATE_KINDS[leaf["kind"]].live for leaf, _ in _leaves(p)):
        already_true = bool(_judge(p, await _observe_now(session, p, session.now(), after_act=True))["pass"])
    anchor = await _journey_anchor(session, args)
    since = session.mark_act(args["action"])
    started = session.now()
    effect = await _act_across_documents(session, cmd)
    session.note_act_page_time(since, effect)
    remaining, settle_until = _act_budget(timeout, started, session.now())
    obs = await _observe(session, p, since, remaining, after_act=True, effect=effect, already_true=already_true,
                         settle_until=settle_until)
    obs.action, obs.act_at = args["action"], since
    return _answer(session, "act_and_wait", args, p, obs, anchor)


# -- Judge, whole: the result, the contradictions and the verdict of one observation ---------------

def _verdict(p: dict, obs: _Observation) -> Tuple[dict, List[dict], Tuple[str, str, str]]:
    """Judge `p` over `obs`: (its result, the contradictions, (verified, verifiedReason, because)).
    Pure.  After an act, an act that had no effect explains everything else and stands alone."""
    res = _judge_final(p, obs)
    contradictions = _contradictions(obs.window, p, obs.act_at, obs.known)
    shown = obs.shown if obs.act_at is not None else None
    if obs.action is None:
        return res, contradictions, _decide(res, contradictions, obs.window, obs.known, obs.since, p, shown=shown,
                                            pending=obs.pending)
    no_effect = _no_effect(obs.action, obs.effect, obs.window, obs.since, obs.known)
    if no_effect:
        contradictions = [no_effect]
    return res, contradictions, _decide(res, contradictions, obs.window, obs.known, obs.since, p,
                                        already_true=obs.already_true, act=True, effect=obs.effect, shown=shown,
                                        pending=obs.pending)


# -- Answer: the one place a verdict becomes what the caller reads ---------------------------------

_VERDICT_FIELDS = ("pass", "evidence", "failureReason", "observed", "expected", "assertion", "inconclusive",
                   "decided", "decidedBy", "observationLost", "timedOut")


def _answer(session: "_BrowserSession", tool: str, args: dict, p: dict, obs: _Observation,
            anchor: Optional[dict] = None) -> dict:
    """Every verdict answer (reticle_assert, reticle_act_and_wait, and so each flow step that
    replays them): judge the observation, then shape it.  `verified`, `verifiedReason` and
    `because` are always at the top level; an assert carries its result's fields beside them,
    an act_and_wait nests them under `verdict` beside the act's effect, honesty and trace.  The
    step is journaled, health and buffer loss are spliced in, and the answer is compact unless
    `detail: "full"`."""
    res, contradictions, (verified, reason, because) = _verdict(p, obs)
    window, known, since = obs.window, obs.known, obs.since
    because = _faulted_note(because, window, res)  # a fault's answer is never read as the server's
    out: Dict[str, Any] = {"verified": verified, "verifiedReason": reason, "because": because}
    if tool == "assert":
        out.update(res)
        out["since"] = since
        if _server_summary(window):
            out["server"] = _server_summary(window)
        verdict = out
        if contradictions:
            out["contradictions"] = [{k: v for k, v in c.items() if k != "write"} for c in contradictions]
        _coverage(known, out)
        advice = _advice(p, res) if verified == "yes" else None
        if advice:
            out["advice"] = advice
        _journal(session, "assert", args, out)
        out = _with_health(session, _with_buffer(session, out, since))
        return out if args.get("detail") == "full" else _compact(out, out)
    verdict = {k: res[k] for k in _VERDICT_FIELDS if res.get(k) is not None}
    loss = known.loss
    issues = []
    if loss and loss.get("evicted"):
        issues.append("capture truncated: %d event(s) evicted" % loss["evicted"])
    if loss and loss.get("sampled"):
        issues.append("blind spot: %d event(s) sampled away under a flood" % loss["sampled"])
    issues.extend(_unmade_issues(known))
    spots = known.blind_spots
    out.update({"since": since, "effect": obs.effect, "verdict": verdict,
                "honesty": {"grade": _grade(p), "attribution": "window",
                            "coverage": {"partial": bool(spots)} if spots else {"partial": False, "pct": 100},
                            "integrity": {"clean": not issues, "issues": issues}},
                "trace": {"window_ms": round(session.now() - since), "summary": _summarise(window)}})
    if obs.already_true:
        out["alreadyTrue"] = True
    if _server_summary(window):
        out["server"] = _server_summary(window)
    advice = _advice(p, res) if verified in ("yes", "unknown") else None
    if advice:
        out["advice"] = advice
    if contradictions:
        out["contradictions"] = [{k: v for k, v in c.items() if k != "write"} for c in contradictions]
    if res.get("timedOut") or reason in ("request_in_flight", "evidence_incomplete", "unsettled", "no_effect"):
        out["unsettled"] = _unsettled_report(known, window, since, p)
    _journal(session, "act_and_wait", args, out, anchor)
    out = _with_health(session, out)
    return out if args.get("detail") == "full" else _compact(out, verdict)


def _describe_session(session: "_BrowserSession") -> dict:
    """The tab as reticle_sessions shows it: identity, liveness, attachment, buffer, its device and
    any version skew, and whether it answers commands, with what to do when it does not or when
    it is throttled."""
    now = session.now()
    out = {"sessionId": session.id, "url": session.url, "adapters": session.adapters,
           "hasCapabilities": session.has_capabilities, "lastSeenMs": session.last_seen_ms(),
           "hidden": session.health.hidden, "focused": session.health.focused, "throttled": session.throttled(),
           "attachment": {"connectedSinceMs": int(now - session.connected_at), "reconnects": session.reconnects},
           "sdkVersion": session.sdk_version, "buffer": session.store.stats()}
    if session.title:
        out["title"] = session.title
    if session.server_seen:
        out["serverRecords"] = session.server_seen  # the app's middleware reports this tab's requests
    if session.device is not None:
        out["device"] = {"deviceId": session.device.id, "input": "cdp", "headed": session.device.headed}
    if session.sdk_version and session.sdk_version != __version__:
        out["versionSkew"] = {"sdk": session.sdk_version, "daemon": __version__}
    stuck = session.not_answering()
    out["answering"] = stuck is None
    if stuck is not None:
        out["notAnswering"] = stuck
        out["recommendation"] = ("close the dialog in the browser (only the person can)" if session.health.dialog_open
                                 else "reticle_navigate {reload: true} (in a device it stops the page's "
                                      "script first)" if session.device is not None else
                                 "reload the page in the browser, or end what blocks it")
    elif session.throttled():
        out["recommendation"] = ("the tab is hidden or silent; browsers throttle background tabs, so "
                                 "bring it to the front or pass refuseWhenThrottled")
    return out


def _with_health(session: "_BrowserSession", out: dict) -> dict:
    """An answer about the tab, with its health spliced in: a tab that does not answer or is throttled
    says so (`session`, `warning`), and the dialogs seen from the answer's `since` are named."""
    stuck = session.not_answering()
    if stuck is not None:
        out["session"] = {"lastSeenMs": session.last_seen_ms(), "answering": False, "notAnswering": stuck}
        out["warning"] = "the tab does not answer: %s" % stuck
    elif session.throttled():
        out["session"] = {"lastSeenMs": session.last_seen_ms(), "throttled": True, "focused": session.health.focused}
        out["warning"] = "the tab is hidden or silent; its timers and animations may be throttled"
    seen = session.health.dialogs_since(out.get("since"))
    if seen:
        out["dialogs"] = seen
        said = "; ".join("a %s dialog (%s) was %s" % (d["dialogType"], _short(d["message"], 80) or "no text",
                                                      d["handled"]) for d in seen[:3])
        out["warning"] = (out["warning"] + "; " if out.get("warning") else "") + said + (
            ' (pass args: {"dialog": "accept"} to accept it)' if any(d["handled"] == "dismissed" for d in seen)
            else "")
    return out


def _with_buffer(session: "_BrowserSession", out: dict, since: float) -> dict:
    """An answer over the window from `since`, with what the tab's buffer lost of it (`buffer`: evicted,
    sampled, and a note that the counts are lower bounds)."""
    loss = session.store.loss_since(since)
    if loss:
        why = []
        if loss.get("evicted") or loss.get("evictedChurn"):
            why.append("the buffer keeps %d events / %d s / %d MiB per tab and evicted older ones"
                       % (EVENT_CAP_COUNT, EVENT_CAP_AGE_MS // 1000, EVENT_CAP_BYTES >> 20))
        if loss.get("sampled"):
            why.append("the page's flood was sampled")
        loss["note"] = "part of this window is gone: %s; counts above are lower bounds" % " and ".join(why)
        out["buffer"] = loss
    return out


def _snapshot_answer(result: dict, prev: Optional[Tuple[str, List[str]]], now: Tuple[str, List[str]]) -> dict:
    """A snapshot as the caller reads it with `diff`: full | unchanged | delta against the last snapshot
    of its (scope, mode) on the same route (`prev` and `now` are (route, lines), _SnapshotCache).

    Lines are compared without focus; a line whose ref survives with other content is `changed`,
    not a removal plus an addition."""
    route, lines = now
    if prev is None or prev[0] != route:
        result["mode"] = "full"
        result["reason"] = "first snapshot for this route" if prev is None else "route changed"
        return result

    def by_ref(seq: List[str]) -> Dict[str, str]:
        out = {}
        for ln in seq:
            m = re.search(r"\(ref=(e\d+)\)", ln)
            if m:
                out[m.group(1)] = ln
        return out

    old_refs, new_refs = by_ref(prev[1]), by_ref(lines)
    changed = [{"ref": r, "from": old_refs[r].strip(), "to": new_refs[r].strip()}
               for r in new_refs if r in old_refs and old_refs[r] != new_refs[r]]
    skip = {old_refs[c["ref"]] for c in changed} | {new_refs[c["ref"]] for c in changed}
    strip = lambda ln: re.sub(r" \(ref=e\d+\)", "", ln)  # noqa: E731
    old = collections.Counter(strip(ln) for ln in prev[1] if ln not in skip)
    new = collections.Counter(strip(ln) for ln in lines if ln not in skip)
    added = list((new - old).elements())
    removed = list((old - new).elements())
    if not added and not removed and not changed:
        return {"mode": "unchanged", "status": result.get("status"), "truncated": result.get("truncated", False)}
    out = {"mode": "delta", "status": result.get("status"),
           "delta": {"added": added[:200], "removed": removed[:200],
                     "addedCount": len(added), "removedCount": len(removed)}}
    if changed:
        out["changed"] = changed[:200]
        out["changedCount"] = len(changed)
    return out


# -- flows: save the journey a tab just went through, list them, replay one (Flows section) --------

async def _tool_flow_save(hub: "Hub", session: Optional["_BrowserSession"], args: dict,
                          ctx: "_CallContext") -> dict:
    """reticle_flow_save: write a flow (given `steps`, or the tab's recorded journey since `since`) to
    the project's flows folder, atomically.  A journey is saved only when every step in it was
    verified and every target survives a reload; a typed secret is kept as a ${NAME} variable (its
    value is never stored) bound to the start origin."""
    name = _flow_name(args["name"])
    root = _project_dir(hub)
    start = args.get("startUrl")
    warnings: List[str] = []
    if args.get("steps"):
        steps = [_no_plain_secret(dict(s)) for s in args["steps"]]
    else:
        session = await hub.bridge.resolve_soon(hub.default_session(args, ctx))
        since = args.get("since")
        if since is None:
            since = hub.journeys.saved_at.get(session.id, 0.0)
        journey = hub.journeys.since(session.id, float(since))
        if not journey:
            raise ToolError("tab %s has no recorded step since %s to save" % (session.id, since),
                            "act with reticle_act_and_wait / reticle_act and check with reticle_assert first, "
                            "or pass `steps`")
        not_yes = [i for i, s in enumerate(journey) if s.get("verified") not in (None, "yes")]
        if not_yes:
            i = not_yes[-1]
            raise ToolError("step %d of the journey (%s) was %s, so this journey is not verified"
                            % (i, _step_label(journey[i]), journey[i]["verified"]),
                            "pass `since` from the result of the first act after it (its `since`), or `steps`",
                            steps=[_step_label(s) for s in journey])
        blind = [i for i, s in enumerate(journey) if "action" in s and not s.get("target") and s["action"] != "press"]
        if blind:
            raise ToolError("step %d (%s) has no target that survives a reload (the ref could not be described)"
                            % (blind[0], journey[blind[0]]["action"]), "act by `target` instead of `ref`")
        steps, first_url = _steps_from_journey(journey)
        warnings = _toothless_warnings(journey)
        start = start or first_url
        hub.journeys.saved_at[session.id] = hub.clock()
    flow: Dict[str, Any] = {"format": FLOW_FORMAT, "name": name,
                            "savedAt": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if start:
        flow["startUrl"] = start
    for key in ("setup", "auth"):
        if args.get(key):
            flow[key] = args[key]
    if _origin_of(start):
        steps = [dict(s, secretOrigin=_origin_of(start)) if s.get("secret") and not s.get("secretOrigin") else s
                 for s in steps]
    flow["steps"] = steps
    if not any("until" in s or "assert" in s for s in steps):
        flow["note"] = "no predicate: a replay shows the steps ran, not that they worked"
    problems = _flow_problems(flow)
    if problems:
        raise ToolError("the flow is not valid: %s" % "; ".join(problems), "fix the steps and save again")
    path = _flow_path(root, name)
    replaced = os.path.exists(path)
    data = (json.dumps(flow, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp-%s" % secrets.token_hex(3)
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    out = {"saved": path, "name": name, "steps": len(steps), "replaced": replaced,
           "verdicts": sum(1 for s in steps if "until" in s or "assert" in s)}
    if warnings:
        out["warnings"] = warnings
    names = sorted({s["secret"] for s in steps if s.get("secret")})
    if names:
        out["secrets"] = names
        out["note"] = "typed secrets are not stored; replay reads them from %s" % ", ".join(names)
    if flow.get("setup") and session is not None and not args.get("steps"):
        out["authSaved"] = await _keep_auth(hub, session, name)  # the login this journey just verified
    return out


async def _tool_flow_list(hub: "Hub", session: Optional["_BrowserSession"], args: dict,
                          ctx: "_CallContext") -> dict:
    root = _project_dir(hub)
    # off the loop: the files are the project's, on whatever disk it is (each read is bounded and never
    # waits on a FIFO, see _read_regular)
    flows = await asyncio.get_running_loop().run_in_executor(None, _list_flows, root)
    return {"dir": _flows_dir(root), "flows": flows}


async def _tool_flow_replay(hub: "Hub", session: "_BrowserSession", args: dict, ctx: "_CallContext") -> dict:
    """reticle_flow_replay: replay a saved flow (by `name`) or a given one on this tab, with secrets
    from the caller.  A bad flow, a missing secret or a bad fault is a setup error before any step
    acts; `faults` hold for this replay only and are cleared after it, whatever happens."""
    if args.get("flow") is not None:
        flow = args["flow"]
        problems = _flow_problems(flow)
        if problems:
            raise ToolError("`flow` is not a Reticle flow: %s" % "; ".join(problems), "pass a saved flow's JSON",
                            setup=True)
    elif args.get("name"):
        flow = await asyncio.get_running_loop().run_in_executor(None, _read_flow, _project_dir(hub), args["name"])
    else:
        raise ToolError("reticle_flow_replay needs `name` (a saved flow) or `flow`.", 'for example {"name": "login"}')
    given = args.get("secrets") or {}
    setup = args.get("setupFlow")
    if setup is not None and _flow_problems(setup):
        raise ToolError("`setupFlow` is not a Reticle flow: %s" % "; ".join(_flow_problems(setup)),
                        "pass the setup flow's JSON, or leave it out to use the saved one", setup=True)
    _fill_secrets([s.get("args") for s in flow["steps"]], given)  # a missing secret: a setup error, before any act
    if not args.get("faults"):
        return await _replay_flow(hub, session, flow, args.get("url"), ctx, bool(args.get("fresh")), given, setup)
    set_ids = []
    try:  # the faults hold for this replay only, on this tab, and are gone after it whatever happens
        for i, spec in enumerate(args["faults"]):
            problem = _fault_spec_problem(spec)
            if problem:
                raise ToolError("faults/%d: %s" % (i, problem), "each fault is a reticle_fault {match, respond | "
                                "abort | delayMs, times?, ttlMs?}", setup=True)
            set_ids.append(hub.faults.add(session, ctx.session_key, spec).id)
        await hub.faults.sync(session.id)
        out = await _replay_flow(hub, session, flow, args.get("url"), ctx, bool(args.get("fresh")), given, setup,
                                 retry=False)
        out["faults"] = [f.public(hub.clock()) for f in hub.faults.tabs.get(session.id, {}).values()
                         if f.id in set_ids]
        return out
    finally:
        for fid in set_ids:
            hub.faults.clear(session.id, ctx.session_key, fid)
        if set_ids:
            await _quietly(hub.faults.sync(session.id))


# -- the MCP conventions of each tool: title, annotations (hints clients auto-approve and group by), and
# the outputSchema of an answer whose shape is stable.  Read-only tools say only readOnlyHint and
# openWorldHint (the other two hints mean nothing for them); a tool that acts says all four, since MCP's
# defaults (destructive, open world) would claim more than is true.  openWorldHint is true where the
# tool loads a URL the caller names; every other tool works inside the app under test.
_READS = {"readOnlyHint": True, "openWorldHint": False}


def _acts(destructive: bool, idempotent: bool, open_world: bool = False) -> dict:
    return {"readOnlyHint": False, "destructiveHint": destructive, "idempotentHint": idempotent,
            "openWorldHint": open_world}


def _shape(required: Tuple[str, ...], **props: dict) -> dict:
    """An outputSchema: the fields every answer has (and the types of a few); others may appear."""
    out: Dict[str, Any] = {"type": "object", "required": list(required)}
    if props:
        out["properties"] = props
    return out


_VERIFIED = {"enum": ["yes", "no", "unknown"]}
_TOOL_CONVENTIONS: Dict[str, Tuple[str, dict, Optional[dict]]] = {
    "reticle_sessions": ("Sessions", _READS, _shape(("sessions",), sessions={"type": "array"})),
    "reticle_navigate": ("Navigate", _acts(False, True, True), _shape(("confirmed", "since", "sessionId"))),
    "reticle_snapshot": ("Snapshot", _READS, None),
    "reticle_query": ("Query", _READS, None),
    "reticle_inspect": ("Inspect", _READS, None),
    "reticle_act": ("Act", _acts(True, False), None),
    "reticle_act_sequence": ("Act sequence", _acts(True, False), _shape(("since",))),
    "reticle_act_and_wait": ("Act and wait", _acts(True, False),
                             _shape(("verified", "verifiedReason", "because"), verified=_VERIFIED)),
    "reticle_observe": ("Observe", _READS, _shape(("events",), events={"type": "array"})),
    "reticle_network": ("Network", _READS, None),
    "reticle_console": ("Console", _READS, None),
    "reticle_wait_for": ("Wait for", _READS, _shape(("pass",), **{"pass": {"type": "boolean"}})),
    "reticle_assert": ("Assert", _READS, _shape(("verified", "verifiedReason", "because"), verified=_VERIFIED)),
    "reticle_state": ("State", _READS, None),
    "reticle_fault": ("Fault requests", _acts(False, False), _shape(("sessionId",))),
    "reticle_capabilities": ("Capabilities", _READS, None),
    "reticle_flow_save": ("Save flow", _acts(True, True), _shape(("saved", "name", "steps"))),
    "reticle_flow_list": ("Flows", _READS, _shape(("dir", "flows"), flows={"type": "array"})),
    "reticle_flow_replay": ("Replay flow", _acts(True, False, True),
                            _shape(("verified", "steps", "because"), verified=_VERIFIED)),
    "reticle_open": ("Open device", _acts(False, True, True), _shape(("sessionId", "deviceId", "url"))),
    "reticle_close": ("Close device", _acts(True, True), _shape(("closed", "sessionId"))),
    "reticle_screenshot": ("Screenshot", _acts(False, False), _shape(("path", "bytes", "width", "height"))),
}


async def _tool_open(hub: "Hub", session: Optional["_BrowserSession"], args: dict,
                     ctx: "_CallContext") -> dict:
    url = args["url"]
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ToolError("reticle_open opens http: and https: pages only, not %r" % url[:200],
                        'pass a full URL such as "http://localhost:5173/"')
    vp = args.get("viewport")
    started = time.monotonic()
    _progress_note("opening %s in a device (browser start, SDK injection, page load)" % url[:120])
    auth = None
    if args.get("auth"):
        auth = _load_auth_state(_project_dir(hub), _flow_name(args["auth"]))
        if auth is None:
            raise ToolError("no saved auth state %r in the project" % args["auth"],
                            "replay its setup flow (a flow with \"setup\": true) in a device first")
    device, started_now = await hub.devices.open(ctx.session_key, url, bool(args.get("headed")),
                                                 (vp["width"], vp["height"]) if vp else None, bool(args.get("fresh")),
                                                 auth)
    if auth is not None and _auth_expired(auth):
        _progress_note("the auth state %s has expired cookies: replay its setup flow" % args["auth"])
    return {"sessionId": device.session_id, "deviceId": device.id, "url": device.url,
            "started": started_now, "fresh": started_now or bool(args.get("fresh")),
            "ms": round((time.monotonic() - started) * 1000), "auth": args.get("auth"),
            "headed": device.headed, "viewport": {"width": device.viewport[0], "height": device.viewport[1]},
            "note": "acts in this session are real input (input: cdp); reticle_close ends the device"}


async def _tool_close(hub: "Hub", session: Optional["_BrowserSession"], args: dict,
                      ctx: "_CallContext") -> dict:
    sid = args.get("sessionId")
    device = hub.devices.for_session(sid) if sid else hub.devices.owned_by(ctx.session_key)
    if device is None:
        live = ", ".join(d.session_id for d in hub.devices.devices.values()) or "none"
        raise ToolError("no device %s; open devices: %s" % ("has session %r" % sid if sid else "belongs to this caller",
                                                            live), "pass the sessionId that reticle_open answered")
    if device.owner != ctx.session_key:
        raise ToolError("the device of session %s belongs to another client; only the client that opened it "
                        "may close it (it closes by itself after %d s of that client's silence)"
                        % (device.session_id, DEVICE_IDLE_S), "close your own device: reticle_close with no sessionId")
    await hub.devices.close(device, "reticle_close")
    return {"closed": True, "sessionId": device.session_id, "deviceId": device.id}


def _write_private(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


async def _tool_screenshot(hub: "Hub", session: Optional["_BrowserSession"], args: dict,
                           ctx: "_CallContext") -> dict:
    """reticle_screenshot: a PNG of a device's viewport, one element (`ref`) or the full page (capped
    at SCREENSHOT_MAX_HEIGHT, and said so), written privately to the state directory and linked; with
    `inline`, a scaled JPEG strip too.  A person's tab cannot be captured: the SDK sees no pixels."""
    sid = args.get("sessionId")
    own = hub.devices.owned_by(ctx.session_key)
    session = await hub.bridge.resolve_soon(sid or (own.session_id if own is not None else None))
    device = session.device
    if device is None or device.closed:
        raise ToolError("session %s is a tab a person opened, and only a device Reticle started can take a "
                        "screenshot: the in-page SDK reads the program, not pixels." % session.id,
                        "open the app in a device with reticle_open {url}, then take the screenshot there")
    await _confirm_answering(session)  # the browser would wait for a busy page's main thread
    if session.not_answering() is not None:  # the browser would wait for the page's main thread (issue 19 #5)
        raise ToolError("no screenshot: the tab does not answer (%s)." % session.not_answering(),
                        "reticle_navigate {reload: true} reloads it (its running script is ended first)",
                        code="not_answering")
    metrics = await device.layout()
    view = metrics.get("cssVisualViewport") or {}
    page_x, page_y = float(view.get("pageX", 0)), float(view.get("pageY", 0))
    area = {"x": page_x, "y": page_y, "width": float(view.get("clientWidth", device.viewport[0])),
            "height": float(view.get("clientHeight", device.viewport[1]))}
    clip = None
    if args.get("ref"):
        box = (await session.command("inspect", {"ref": args["ref"]}) or {}).get("box") or {}
        if not box.get("width") or not box.get("height"):
            raise ToolError("the element %s has no box to capture (hidden or empty)." % args["ref"],
                            "reticle_inspect shows its box; take a viewport screenshot instead")
        clip = area = {"x": page_x + box["x"], "y": page_y + box["y"], "width": box["width"],
                       "height": box["height"]}
    elif args.get("fullPage"):
        size = metrics.get("cssContentSize") or metrics.get("contentSize") or {}
        clip = area = {"x": 0, "y": 0, "width": min(float(size.get("width", area["width"])), 4096.0),
                       "height": min(float(size.get("height", area["height"])), float(SCREENSHOT_MAX_HEIGHT))}
        cut = float(size.get("height", 0) or 0) > SCREENSHOT_MAX_HEIGHT
    png = await device.capture("png", clip=dict(clip, scale=1) if clip else None)
    width, height = _png_size(png)
    name = "%s-%s-%s.png" % (device.id, time.strftime("%Y%m%d-%H%M%S"), secrets.token_hex(2))
    path = os.path.join(hub.state.ensure(), "screenshots", name)
    await asyncio.get_running_loop().run_in_executor(None, _write_private, path, png)
    out = {"path": path, "bytes": len(png), "width": width, "height": height, "sessionId": session.id,
           "url": device.url}
    if args.get("fullPage") and not args.get("ref") and cut:
        out["truncated"] = {"pageHeight": round(float(size.get("height", 0))), "capturedHeight": SCREENSHOT_MAX_HEIGHT,
                            "note": "the page is taller than %d px; the capture stops there" % SCREENSHOT_MAX_HEIGHT}
    link = {"type": "resource_link", "uri": _file_uri(path), "name": name, "mimeType": "image/png",
            "size": len(png), "description": "%dx%d screenshot of %s" % (width, height, device.url[:200])}
    if not args.get("inline"):
        return _WithContent(out, [link])
    scale = min(1.0, SCREENSHOT_INLINE_MAX_WIDTH / max(1.0, area["width"]))
    # a readable strip, not 32,000 px
    area = dict(area, height=min(area["height"], SCREENSHOT_INLINE_MAX_HEIGHT / scale))
    jpeg = await device.capture("jpeg", clip=dict(area, scale=scale), quality=80)
    jw, jh = _jpeg_size(jpeg)
    out["inline"] = {"mimeType": "image/jpeg", "bytes": len(jpeg), "width": jw, "height": jh}
    return _WithContent(out, [link, {"type": "image", "data": base64.b64encode(jpeg).decode("ascii"),
                                     "mimeType": "image/jpeg"}])


def _file_uri(path: str) -> str:
    """A file:// URI of an absolute local path (RFC 8089), without importing pathlib for it."""
    path = os.path.abspath(path).replace(os.sep, "/")
    return "file://" + urllib.parse.quote(path if path.startswith("/") else "/" + path)


# -- the registry: every tool is one _ToolSpec record, registered the same way ----------------------

class _ToolSpec(NamedTuple):
    """One tool as data: its name, description, argument properties, handler, example and required
    fields; `own_tab` when the handler resolves the tab itself (a device, a journey to save) rather
    than being given the tab of `sessionId`; `quiet`, accepted spellings tools/list does not show."""

    name: str
    description: str
    props: dict
    handler: Callable
    example: Optional[dict] = None
    required: Tuple[str, ...] = ()
    own_tab: bool = False
    quiet: Tuple[str, ...] = ()


# DESIGN section 7, in the order tools/list shows them
_TOOL_SPECS: Tuple[_ToolSpec, ...] = (
    _ToolSpec("reticle_sessions",
        "The connected tabs and devices (id, url, health); an empty list says why and how to connect one.",
        {}, _tool_sessions, {}),
    _ToolSpec("reticle_navigate",
        "Go to `url` or `reload: true`, and wait for the page to reconnect; later asserts count from here.",
        {"url": {"type": "string", "minLength": 1, "maxLength": 4096}, "reload": {"type": "boolean"},
         "hard": {"type": "boolean"}, "sessionId": _SESSION_ID},
        _tool_navigate, {"url": "http://localhost:5173/checkout"}),
    _ToolSpec("reticle_snapshot",
        "The page as an accessibility tree with stable refs (e7); `scope` a selector or ref, `diff: true` for "
        "what changed since the last snapshot.",
        {"scope": {"type": "string", "minLength": 1}, "mode": {"enum": ["full", "interactive", "status"]},
         "diff": {"type": "boolean"}, "sessionId": _SESSION_ID},
        _tool_snapshot, {"mode": "interactive"}),
    _ToolSpec("reticle_query",
        "Find elements by role (+name), text, label, placeholder, testid or alt: counts and refs, near "
        "misses when nothing matches.",
        {"by": {"enum": ["role", "text", "label", "placeholder", "testid", "alt"]},
         "value": _TEXT_MATCH, "name": _TEXT_MATCH,
         "role": {"type": "string"}, "text": _TEXT_MATCH, "label": _TEXT_MATCH,
         "placeholder": _TEXT_MATCH, "testid": {"type": "string"}, "alt": _TEXT_MATCH,
         "scope": {"type": "string", "minLength": 1}, "self": {"type": "boolean"},
         "attrs": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
         "limit": {"type": "integer", "minimum": 0, "maximum": 200}, "count_only": {"type": "boolean"},
         "sessionId": _SESSION_ID},
        _tool_query, {"by": "role", "value": "button", "name": "Pay"}),
    _ToolSpec("reticle_inspect",
        "One element by ref: role, name, states, box, styles, occlusion.",
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "sessionId": _SESSION_ID},
        _tool_inspect, {"ref": "e7"}, required=("ref",)),
    _ToolSpec("reticle_act",
        "Act on one element (`ref` or `target`) and return its effect; proves nothing. Destructive "
        "controls need args.confirmDangerous.",
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "target": _TARGET,
         "action": {"enum": _ACTIONS}, "args": _ACT_ARGS, "refuseWhenThrottled": {"type": "boolean"},
         "sessionId": _SESSION_ID},
        _tool_act, {"ref": "e7", "action": "click"}, required=("action",)),
    _ToolSpec("reticle_act_sequence",
        "Several acts in order, stopping at the first failure.",
        {"steps": {"type": "array", "items": _STEP, "minItems": 1, "maxItems": 50},
         "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 60000}, "sessionId": _SESSION_ID},
        _tool_act_sequence,
        {"steps": [{"ref": "e3", "action": "fill", "args": {"value": "a@b.c"}}, {"ref": "e4", "action": "click"}]},
        required=("steps",)),
    _ToolSpec("reticle_act_and_wait",
        "Act, then wait for `until` (default: the page settles) and return a verdict, verified "
        "yes|no|unknown; only yes passes. " + _PREDICATE_DIGEST,
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "target": _TARGET,
         "action": {"enum": _ACTIONS}, "args": _ACT_ARGS, "until": _PREDICATE, "predicate": _PREDICATE,
         "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000},
         "refuseWhenThrottled": {"type": "boolean"}, "sessionId": _SESSION_ID},
        _tool_act_and_wait,
        {"target": {"role": "button", "name": "Pay"}, "action": "click",
         "until": {"kind": "net", "urlContains": "/api/pay", "status": 200}},
        required=("action",), quiet=("predicate",)),
    _ToolSpec("reticle_observe",
        "Raw events of a window (default the last 2 s) with a summary.",
        {"window_ms": {"type": "integer", "minimum": 1, "maximum": 600000}, "since": _CURSOR,
         "until": _CURSOR, "actionId": {"type": "string"},
         "filters": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
         "max_events": {"type": "integer", "minimum": 1, "maximum": 2000}, "sessionId": _SESSION_ID},
        _tool_observe, {"window_ms": 2000, "filters": ["net", "console"]}),
    _ToolSpec("reticle_network",
        "Requests (fetch, XHR, documents) and socket messages since the last act: status, timing, bodies.",
        {"since": _CURSOR, "until": _CURSOR, "actionId": {"type": "string"},
         "method": {"type": "string"}, "urlContains": {"type": "string"},
         "status": {"type": "integer", "minimum": 0, "maximum": 999}, "ok": {"type": "boolean"},
         "limit": {"type": "integer", "minimum": 1, "maximum": 2000}, "bodies": {"type": "boolean"},
         "sessionId": _SESSION_ID},
        _tool_network, {"urlContains": "/api/", "status": 500}),
    _ToolSpec("reticle_console",
        "Console messages and uncaught errors since the last act.",
        {"level": {"enum": ["debug", "log", "info", "warn", "error"]}, "since": _CURSOR, "until": _CURSOR,
         "actionId": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 2000},
         "sessionId": _SESSION_ID},
        _tool_console, {"level": "error"}),
    _ToolSpec("reticle_wait_for",
        "Wait until `predicate` holds; pass and evidence, no verdict.",
        {"predicate": _PREDICATE, "until": _PREDICATE,
         "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000}, "since": _CURSOR,
         "sessionId": _SESSION_ID},
        _tool_wait_for, {"predicate": {"kind": "text", "contains": "Saved"}}, quiet=("until",)),
    _ToolSpec("reticle_assert",
        "Check `predicate` over the events since the last act and the live page: a verdict, verified "
        "yes|no|unknown. " + _PREDICATE_KINDS_LINE,
        {"predicate": _PREDICATE, "until": _PREDICATE,
         "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000}, "since": _CURSOR,
         "sessionId": _SESSION_ID},
        _tool_assert, {"predicate": {"kind": "console", "level": "error", "absent": True}}, quiet=("until",)),
    _ToolSpec("reticle_state",
        "App state from registered stores: all at depth 1, or one `store` at a dot `path`.",
        {"store": {"type": "string"}, "path": {"type": "string"},
         "depth": {"type": "integer", "minimum": 0, "maximum": 10}, "sessionId": _SESSION_ID},
        _tool_state, {"store": "cart", "path": "items.length"}),
    _ToolSpec("reticle_capabilities",
        "What the app declared with reticle.describe, and the testids on the page.",
        {"sessionId": _SESSION_ID}, _tool_capabilities, {}),
    _ToolSpec("reticle_fault",
        "Make this tab's matching requests fail on purpose (respond {status}, abort, delayMs) to prove the app "
        "tells the user; clear, list. Marked faulted: true.",
        dict(_FAULT_SCHEMA, sessionId=_SESSION_ID), _tool_fault,
        {"match": {"urlContains": "/api/save", "method": "POST"}, "respond": {"status": 500}}),
    _ToolSpec("reticle_flow_save",
        "Save what this tab just verified (or `steps`) as .reticle/flows/<name>.json, targets anchored "
        "by role, name, label or testid, secrets as variables.",
        {"name": {"type": "string", "minLength": 1, "maxLength": 64}, "since": _CURSOR,
         "steps": {"type": "array", "items": {"type": "object", "description": "a step of a flow file"},
                   "minItems": 1, "maxItems": FLOW_MAX_STEPS},
         "startUrl": {"type": "string", "maxLength": 4096}, "sessionId": _SESSION_ID,
         "setup": {"type": "boolean", "description": "a login: replayed yes, it saves the browser state"},
         "auth": {"type": "string", "maxLength": 64, "description": "start from this setup flow's state"}},
        _tool_flow_save, {"name": "add-record"}, required=("name",), own_tab=True),
    _ToolSpec("reticle_flow_list", "List the saved flows of the project (.reticle/flows).",
        {}, _tool_flow_list, {}),
    _ToolSpec("reticle_flow_replay",
        "Replay a saved flow from `url`, finding every target again: a verdict per step, yes only if all are. "
        "`fresh`: no cookies or storage.",
        {"name": {"type": "string", "minLength": 1, "maxLength": 64}, "flow": {"type": "object"},
         "url": {"type": "string", "minLength": 1, "maxLength": 4096}, "fresh": {"type": "boolean"},
         "secrets": {"type": "object", "maxProperties": 64, "additionalProperties": {"type": "string"}},
         "faults": {"type": "array", "maxItems": 8, "description": "reticle_fault specs held during this replay",
                    "items": {"type": "object", "additionalProperties": False, "required": ["match"],
                              "properties": {k: v for k, v in _FAULT_SCHEMA.items() if k not in ("clear", "list")}}},
         "setupFlow": {"type": "object", "description": "the setup flow that makes the flow's auth state"},
         "sessionId": _SESSION_ID},
        _tool_flow_replay, {"name": "add-record"}),
    _ToolSpec("reticle_open",
        "Open `url` in a browser Reticle starts (a device), SDK injected, real input; answers its sessionId. "
        "`fresh`: no cookies or storage from before.",
        {"url": {"type": "string", "minLength": 1, "maxLength": 4096}, "headed": {"type": "boolean"},
         "viewport": {"type": "object", "additionalProperties": False, "required": ["width", "height"],
                      "properties": {"width": {"type": "integer", "minimum": 200, "maximum": 3840},
                                     "height": {"type": "integer", "minimum": 200, "maximum": 2160}}},
         "fresh": {"type": "boolean"},
         "auth": {"type": "string", "maxLength": 64, "description": "start logged in: a setup flow's saved state"}},
        _tool_open, {"url": "http://localhost:5173/"}, required=("url",), own_tab=True),
    _ToolSpec("reticle_close", "Close a device (by sessionId, else your own).",
        {"sessionId": _SESSION_ID}, _tool_close, {}, own_tab=True),
    _ToolSpec("reticle_screenshot",
        "A device's viewport, `fullPage` or one `ref` as a PNG file; `inline` adds a JPEG image.",
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "fullPage": {"type": "boolean"},
         "inline": {"type": "boolean"}, "sessionId": _SESSION_ID},
        _tool_screenshot, {"inline": True}, own_tab=True),
)


def _build_registry() -> _ToolRegistry:
    """Every tool of DESIGN section 7 that works (_TOOL_SPECS), with its final schema: a tool given
    the tab of `sessionId` also takes `detail`; each gets its MCP conventions (_TOOL_CONVENTIONS)."""
    reg = _ToolRegistry()
    for spec in _TOOL_SPECS:
        given_tab = "sessionId" in spec.props and not spec.own_tab
        props = dict(spec.props, detail=_DETAIL) if given_tab else dict(spec.props)
        tool = reg.add(_Tool(spec.name, spec.description, _obj(props, spec.required), spec.handler, spec.example,
                             session=given_tab, quiet=spec.quiet))
        if tool.name in _TOOL_CONVENTIONS:
            tool.convene(*_TOOL_CONVENTIONS[tool.name])
    return reg


###############################################################################
# Flows #######################################################################
###############################################################################
# A flow is a journey the agent verified, saved as `.reticle/flows/<name>.json`
# in the app's repository and replayed with no model.  The tools that act or
# judge append to a small per-tab journey log (_Journeys); reticle_flow_save
# turns a slice of it into steps anchored on testid, role+name, label or
# text (never refs), with the predicates that proved it.  Replay re-resolves
# every target and judges every step with the verdict core the tools use.

FLOW_FORMAT = 1                      # the "format" field of a flow file
JOURNEY_MAX_STEPS = 100              # steps a tab's journey log keeps (oldest dropped)
REPLAY_WAIT_MS = 3000                # an assert replayed right after its act waits this long at most
_FLOW_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SECRET_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")   # every ${NAME}; only RETICLE_SECRET_* is read
_SECRET_NAME = re.compile(r"^RETICLE_SECRET_[A-Z0-9_]{1,64}$")

_FLOW_STEP = {
    "type": "object",
    "properties": {
        "action": {"enum": _ACTIONS}, "target": _TARGET, "args": _ACT_ARGS,
        "until": _PREDICATE, "assert": _PREDICATE,
        "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000},
        "verified": {"enum": ["yes", "no", "unknown"]}, "secret": {"type": "string"},
        "secretOrigin": {"type": "string", "maxLength": 4096},
        "expect": {"enum": ["yes", "no"]},
    },
    "additionalProperties": False,
}
_FLOW_FILE = {
    "$schema": _SCHEMA_DIALECT, "type": "object",
    "required": ["format", "name", "steps"],
    "properties": {
        "format": {"const": FLOW_FORMAT}, "name": {"type": "string"}, "savedAt": {"type": "string"},
        "startUrl": {"type": "string"}, "note": {"type": "string"},
        "setup": {"type": "boolean"}, "auth": {"type": "string", "pattern": _FLOW_NAME.pattern},
        "steps": {"type": "array", "items": _FLOW_STEP, "minItems": 1, "maxItems": FLOW_MAX_STEPS},
    },
    "additionalProperties": False,
}


class _Journeys:
    """Per tab, the last JOURNEY_MAX_STEPS steps the agent took: what it did, to which
    anchored target, and for a verdict tool the predicate and the verdict.  Secrets never
    enter it: a value typed into a password field is already replaced by its variable."""

    def __init__(self) -> None:
        self._logs: Dict[str, collections.deque] = {}
        self.saved_at: Dict[str, float] = {}

    def record(self, session_id: str, step: dict) -> None:
        log = self._logs.get(session_id)
        if log is None:
            if len(self._logs) >= 64:  # forget the oldest tab's journey
                self._logs.pop(next(iter(self._logs)))
            log = self._logs[session_id] = collections.deque(maxlen=JOURNEY_MAX_STEPS)
        log.append(step)

    def since(self, session_id: str, t: float) -> List[dict]:
        return [s for s in self._logs.get(session_id, ()) if s["t"] >= t]


def _anchor(info: Any) -> Optional[dict]:
    """A ref-free target for an element the page described: testid, else role and name,
    else text, else label."""
    if not isinstance(info, dict):
        return None
    if info.get("testid"):
        return {"testid": info["testid"]}
    if info.get("role") and info.get("name"):
        return {"role": info["role"], "name": info["name"]}
    if info.get("text"):
        return {"text": info["text"]}
    if info.get("label"):
        return {"label": info["label"]}
    return None


_SECRET_FIELD = re.compile(r"pass(word|wd|code|phrase)?|secret|token|api[ _-]?key|pin\b", re.I)


def _no_plain_secret(step: dict) -> dict:
    """A step given by the caller that types a literal into a field named like a secret keeps a
    variable instead (the page cannot be asked which fields are password fields here)."""
    target: dict = step["target"] if isinstance(step.get("target"), dict) else {}
    words = " ".join(str(v if not isinstance(v, dict) else v.get("equals") or v.get("contains") or "")
                     for k, v in target.items() if k in ("testid", "name", "label", "placeholder"))
    act_args: dict = step["args"] if isinstance(step.get("args"), dict) else {}
    if not _SECRET_FIELD.search(words):
        return step
    name = _secret_name(target)
    for key in ("value", "text"):
        value = act_args.get(key)
        if isinstance(value, str) and not re.fullmatch(r"\$\{[A-Z0-9_]+\}", value):
            step = dict(step, args=dict(act_args, **{key: "${%s}" % name}), secret=name)
    return step


def _secret_name(target: Optional[dict]) -> str:
    words = ""
    for key in ("testid", "name", "label", "placeholder", "text"):
        value = (target or {}).get(key)
        if isinstance(value, dict):
            value = value.get("equals") or value.get("contains")
        if isinstance(value, str) and value:
            words = value
            break
    slug = re.sub(r"[^A-Z0-9]+", "_", words.upper()).strip("_")[:40] or "PASSWORD"
    return "RETICLE_SECRET_%s" % slug


async def _journey_anchor(session: "_BrowserSession", args: dict) -> dict:
    """Before an act: the target to save (the caller's own target, or a ref described by
    the page), whether the element is a password field, and the page's URL."""
    pre: Dict[str, Any] = {"url": session.url, "target": None, "secret": False}
    if args.get("target"):
        pre["target"] = dict(args["target"])
        return pre
    if not args.get("ref"):
        return pre
    try:
        info = await session.command("inspect", {"ref": args["ref"]}, timeout=2.0)
    except ToolError:
        return pre
    pre["target"] = _anchor(info)
    pre["secret"] = isinstance(info, dict) and str((info.get("attributes") or {}).get("type", "")).lower() == "password"
    return pre


def _journal(session: "_BrowserSession", kind: str, args: dict, out: Any, pre: Optional[dict] = None) -> None:
    """Append one step to the tab's journey log (see _Journeys)."""
    try:
        pre = pre or {}
        out = out if isinstance(out, dict) else {}
        # an act is stamped with its own cursor (the `since` it answered); an assert with now,
        # because its `since` is the act before it
        t = session.now() if kind == "assert" else out.get("since", session.now())
        step: Dict[str, Any] = {"t": t, "url": pre.get("url", session.url)}
        if kind == "assert":
            step["assert"] = args.get("until") or args.get("predicate")
        else:
            anchor = pre.get("target")
            step["action"] = args["action"]
            if anchor:
                step["target"] = anchor
            effect = out.get("effect") if kind == "act_and_wait" else out.get("result")
            secret = bool(pre.get("secret")) or (isinstance(effect, dict) and bool(effect.get("password")))
            act_args = dict(args.get("args") or {})
            if secret:
                name = _secret_name(anchor)
                for key in ("value", "text"):
                    if key in act_args:
                        act_args[key] = "${%s}" % name
                step["secret"] = name
                if _origin_of(step["url"]):
                    step["secretOrigin"] = _origin_of(step["url"])
            if act_args:
                step["args"] = act_args
            if kind == "act_and_wait":
                step["until"] = args.get("until") or args.get("predicate") or {"kind": "settled", "quietMs": 300}
        if kind != "act" and "timeout_ms" in args:
            step["timeout_ms"] = args["timeout_ms"]
        if kind != "act":
            step["verified"] = out.get("verified", "unknown")
            if isinstance(out.get("since"), (int, float)):
                floor = float(out["since"])  # for flow_save's warning
                step["writes"] = _writes_in(session.window(floor), floor)
        session.bridge.hub.journeys.record(session.id, step)
    except Exception as exc:  # the journey is a convenience: never fail the act for it
        _emit(_log, logging.DEBUG, "journey_not_recorded", error=repr(exc))


def _project_dir(hub: "Hub") -> str:
    """The app's repository: RETICLE_PROJECT_DIR, else the daemon's working directory."""
    return os.path.abspath(os.environ.get("RETICLE_PROJECT_DIR") or hub.project_dir or os.getcwd())


def _flow_name(name: Any) -> str:
    if not isinstance(name, str) or not _FLOW_NAME.fullmatch(name) or ".." in name:
        raise ToolError("%r is not a flow name: use letters, digits, '-', '_' and '.' (at most 64, no path "
                        "separators, no '..')." % (str(name)[:80],), 'for example "checkout-guest"')
    return name


def _flows_dir(root: str) -> str:
    return os.path.join(root, ".reticle", "flows")


def _flow_path(root: str, name: str) -> str:
    """The file of flow `name`, refused when `.reticle`, `.reticle/flows` or the file itself is a
    symbolic link, or the folder is not inside the project: a flow is read and written there only."""
    name = _flow_name(name)
    folder = _flows_dir(root)
    for part in (os.path.dirname(folder), folder, os.path.join(folder, name + ".json")):
        if os.path.islink(part):
            raise ToolError("%s is a symbolic link; Reticle reads and writes flows only in the project's own "
                            ".reticle/flows" % part, "replace the link with a folder (or file) of the project")
    base = os.path.realpath(folder)
    real_root = os.path.realpath(root)
    path = os.path.join(base, name + ".json")
    if os.path.commonpath([base, real_root]) != real_root or os.path.dirname(os.path.realpath(path)) != base:
        raise ToolError("the flow %r would be written outside %s" % (name, real_root), "choose another name")
    return path


def _flow_problems(flow: Any) -> List[str]:
    validator = jsonschema.Draft202012Validator(_FLOW_FILE)
    problems = []
    for err in validator.iter_errors(flow):
        problems.append("/%s: %s" % ("/".join(str(p) for p in err.absolute_path), err.message[:200]))
    if not problems:
        for i, step in enumerate(flow["steps"]):
            if ("assert" in step) == ("action" in step):
                problems.append("/steps/%d: a step has either `action` (with a `target`) or `assert`" % i)
            elif "action" in step and not step.get("target") and step["action"] != "press":
                problems.append("/steps/%d: an act needs a `target`" % i)
    return problems[:10]


FLOW_MAX_BYTES = 1 << 20             # a flow file larger than this is refused unread
_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _read_regular(path: str, cap: int, follow: bool = False) -> bytes:
    """The bytes of a project file Reticle reads, opened without blocking: O_NONBLOCK (opening a FIFO
    never waits for a writer), O_NOFOLLOW unless `follow` (a path the user typed may be a link; a file
    found in the project may not), then fstat on the open file, so anything but a regular file (a FIFO,
    a device node, a socket) is refused unread, as is one over `cap` bytes.  ValueError naming what the
    file is; FileNotFoundError when there is none."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | (
        0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("it is a symbolic link; Reticle reads only regular files") from None
        raise ValueError("it cannot be opened: %s" % (exc.strerror or exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(info.st_mode)), "not a regular file")
            raise ValueError("it is %s, not a regular file: skipped unread" % kind)
        if info.st_size > cap:
            raise ValueError("the file is %d bytes; at most %d are read" % (info.st_size, cap))
        chunks: List[bytes] = []
        left = cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > cap:
        raise ValueError("the file grew past %d bytes while read" % cap)
    return data


def _load_flow_file(path: str, follow: bool = False) -> Any:
    """A flow file's JSON: a regular file (see _read_regular) of at most FLOW_MAX_BYTES, nested at most
    MAX_JSON_DEPTH levels, strict JSON; ValueError otherwise (never a RecursionError, never minutes of
    parsing, never a wait on a FIFO)."""
    data = _read_regular(path, FLOW_MAX_BYTES, follow)
    try:
        return _loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError("the file is not UTF-8 (%s)" % exc) from exc


def _read_flow(root: str, name: str) -> dict:
    path = _flow_path(root, name)
    try:
        flow = _load_flow_file(path)
    except FileNotFoundError:
        have = [f["name"] for f in _list_flows(root)]
        raise ToolError("no flow %r in %s" % (name, _flows_dir(root)),
                        "saved flows: %s" % (", ".join(have) or "none; save one with reticle_flow_save")) from None
    except ValueError as exc:
        raise ToolError("the flow file %s is not readable as JSON: %s" % (path, exc),
                        "fix or delete the file (a flow is a regular .json file)") from exc
    problems = _flow_problems(flow)
    if problems:
        raise ToolError("the flow file %s is not a Reticle flow: %s" % (path, "; ".join(problems)),
                        "fix the file, or save the flow again")
    return flow


def _list_flows(root: str) -> List[dict]:
    folder = _flows_dir(root)
    out: List[dict] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return out
    for fname in names:
        if not fname.endswith(".json") or not _FLOW_NAME.fullmatch(fname[:-5]):
            continue
        item: Dict[str, Any] = {"name": fname[:-5]}
        try:
            if os.path.islink(os.path.join(folder, fname)):
                raise ValueError("a symbolic link")
            flow = _load_flow_file(os.path.join(folder, fname))
            item["steps"] = len(flow.get("steps", []))
            item["startUrl"] = flow.get("startUrl")
            item["savedAt"] = flow.get("savedAt")
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            item["problem"] = "not readable as a flow: %s" % _short(str(exc), 160)
        out.append(item)
    return out


# -- logged-in starts: a setup flow's saved state (.reticle/auth/<name>.json) ----------------------
# A flow marked `"setup": true` that ends yes in a device saves the browser context's cookies and its
# origin's storage under its own name; a flow with `"auth": NAME` (and reticle_open {auth}) starts from
# it.  The file is the project's secret: mode 0600, its folder git-ignored, its contents never in an
# answer, a log line or an error message.

def _auth_path(root: str, name: str) -> str:
    """The saved state of setup flow `name`, refused through symbolic links as a flow's file is."""
    name = _flow_name(name)
    folder = os.path.join(root, ".reticle", "auth")
    for part in (os.path.dirname(folder), folder, os.path.join(folder, name + ".json")):
        if os.path.islink(part):
            raise ToolError("%s is a symbolic link; Reticle keeps saved logins only in the project's own "
                            ".reticle/auth" % part, "replace the link with a folder (or file) of the project",
                            setup=True)
    return os.path.join(folder, name + ".json")


def _save_auth_state(root: str, name: str, state: dict) -> str:
    """Write a setup flow's state atomically, mode 0600, in a folder that git ignores (its own
    .gitignore, written when the folder is made) -> the path."""
    path = _auth_path(root, name)
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    ignore = os.path.join(folder, ".gitignore")
    if not os.path.exists(ignore):
        with open(ignore, "w", encoding="utf-8") as fh:
            fh.write("# saved logins of Reticle's setup flows (cookies, storage): never commit them\n*\n")
    saved = dict(state, name=name, savedAt=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    tmp = path + ".tmp-%s" % secrets.token_hex(3)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(_dumps(saved).encode("utf-8"))
    os.replace(tmp, path)
    return path


def _load_auth_state(root: str, name: str) -> Optional[dict]:
    """A setup flow's saved state, or None when there is none; a file that is not one is a setup
    error (its contents are never quoted)."""
    path = _auth_path(root, name)
    try:
        state = _load_flow_file(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ToolError("the saved auth state %s is not readable (%s)" % (path, type(exc).__name__),
                        "delete it and replay the setup flow %s" % name, setup=True) from None
    if not isinstance(state, dict) or not isinstance(state.get("cookies"), list):
        raise ToolError("the saved auth state %s is not one Reticle wrote" % path,
                        "delete it and replay the setup flow %s" % name, setup=True)
    return state


def _auth_expired(state: dict, now: Optional[float] = None) -> int:
    """How many of a saved state's cookies have expired (a session cookie never does here)."""
    now = time.time() if now is None else now
    return sum(1 for c in state["cookies"] if isinstance(c, dict) and isinstance(c.get("expires"), (int, float))
               and 0 < c["expires"] < now)


async def _keep_auth(hub: "Hub", session: "_BrowserSession", name: str) -> dict:
    """Save the state of the device behind `session` as setup flow `name`'s -> what an answer may say
    of it (the name, the file, how many cookies and which origins; never a value)."""
    device = hub.devices.for_session(session.id)
    if device is None:
        return {"name": name, "saved": False,
                "note": "a setup flow's state is saved from a device only: open the app with reticle_open"}
    try:
        state = await _device_read_state(device)
    except _CdpError as exc:
        return {"name": name, "saved": False, "note": "the device's state could not be read (%s)" % exc}
    path = _save_auth_state(_project_dir(hub), name, state)
    return {"name": name, "saved": True, "path": path, "cookies": len(state["cookies"]),
            "origins": [o["origin"] for o in state["origins"]]}


def _steps_from_journey(journey: List[dict]) -> Tuple[List[dict], Optional[str]]:
    """Journey log entries -> flow steps (and the first URL)."""
    steps = []
    for entry in journey:
        step = {k: v for k, v in entry.items() if k not in ("t", "url", "writes")}
        steps.append(step)
    return steps, (journey[0].get("url") if journey else None)


_TOOTHED_KINDS = ("frame", "state", "signal", "storage", "server")


def _blind_to_writes(raw: Any) -> bool:
    """Does this check look only at what the page shows (text, elements, a route, quiet), so that it
    holds whether or not a write behind it worked?  A `net` leaf counts as a check of the write
    only when it asks for a status or `ok`."""
    try:
        p = parse_predicate(raw, "until")
    except Exception:
        return False
    for leaf, neg in _leaves(p):
        if neg:
            continue
        if leaf["kind"] in _TOOTHED_KINDS or (leaf["kind"] == "net" and ("status" in leaf or "ok" in leaf)):
            return False
    return True


def _toothless_warnings(journey: List[dict]) -> List[str]:
    """flow_save's warning: every step whose check is presence-only over a write its act made."""
    out = []
    for i, entry in enumerate(journey):
        check = entry.get("until") if "action" in entry else entry.get("assert")
        writes = entry.get("writes") or []
        if check is None or not writes or not _blind_to_writes(check):
            continue
        acts = [e for e in journey[:i] if "action" in e]
        if "assert" in entry and acts and acts[-1].get("until") is not None and not _blind_to_writes(acts[-1]["until"]):
            continue  # the act before it already checked what its write answered
        w = writes[0]
        out.append("step %d (%s) checks only what the page shows (%s) over the write %s %s it caused: a replay "
                   "stays yes if that write fails. Add {\"kind\": \"net\", \"method\": \"%s\", \"urlContains\": "
                   "\"%s\", \"ok\": true} to the check, or run `reticle verify --teeth`."
                   % (i, _step_label(entry), _describe_predicate_safe(check), w["method"], w["path"], w["method"],
                      w["path"]))
    return out


def _secret_refs(value: Any) -> List[str]:
    """The ${NAME} references in a step's args, in order (each once)."""
    out: List[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            out.extend(m.group(1) for m in _SECRET_REF.finditer(item) if m.group(1) not in out)
    return out


def _fill_secrets(value: Any, given: Optional[Dict[str, str]] = None) -> Any:
    """Replace every ${RETICLE_SECRET_*} in a step's args with its value: from `given` (the
    values the replaying process read from its own environment), else this process's
    environment.  Any other ${NAME} (${HOME}, ${GITHUB_TOKEN}) is a setup error: a flow from
    someone else's repository must not be able to type this machine's environment into a page."""
    if isinstance(value, dict):
        return {k: _fill_secrets(v, given) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_secrets(v, given) for v in value]
    if isinstance(value, str):
        def sub(m: "re.Match[str]") -> str:
            name = m.group(1)
            if not _SECRET_NAME.fullmatch(name):
                raise ToolError("the flow refers to ${%s}; a flow may read only RETICLE_SECRET_* variables "
                                "(RETICLE_SECRET_ and A-Z 0-9 _), never %s" % (name, name),
                                "rename the reference to ${RETICLE_SECRET_...} in the flow file, or type the "
                                "literal text", setup=True, variable=name)
            got = (given or {}).get(name)
            if got is None:
                got = os.environ.get(name)
            if got is None:
                raise ToolError("the flow needs the environment variable %s (a secret it does not store)"
                                % name, "set %s in the environment of the process that replays (the daemon "
                                "for reticle_flow_replay, the shell for reticle verify) and replay" % name,
                                setup=True, variable=name)
            return got
        return _SECRET_REF.sub(sub, value)
    return value


def _origin_of(url: Any) -> str:
    """scheme://host[:port] of a URL, lower-cased; '' for one that has none."""
    try:
        parts = urllib.parse.urlsplit(str(url or ""))
    except ValueError:
        return ""
    if not parts.scheme or not parts.netloc:
        return ""
    return "%s://%s" % (parts.scheme.lower(), parts.netloc.lower())


def _secret_origin(step: dict, flow: dict, start: Optional[str]) -> str:
    """The one origin a step's secret may be typed into: the origin the flow recorded it on
    (secretOrigin, else the flow's startUrl); a replay from another origin (`url`) moves the
    flow's start origin to it, and only that one."""
    recorded = _origin_of(step.get("secretOrigin") or flow.get("startUrl"))
    saved_start, replay_start = _origin_of(flow.get("startUrl")), _origin_of(start)
    if replay_start and (not recorded or recorded == saved_start):
        return replay_start
    return recorded


def _check_secret_origin(session: "_BrowserSession", step: dict, names: List[str], allowed: str) -> None:
    """Refuse (a setup error) to type a secret into a page of any origin but `allowed`.  In a
    device the page's URL is the browser's own record (CDP), not what the page says."""
    device = session.device
    here = _origin_of(device.url if device is not None and device.url else session.url)
    if not allowed or here != allowed:
        raise ToolError("the flow would type %s into %s, but types a secret only into the origin it was "
                        "recorded on (%s); nothing was typed" % (", ".join(names), here or "a page with no origin",
                                                                  allowed or "none recorded"),
                        "check the flow's steps and startUrl: a step before this one left the app's origin",
                        setup=True, origin=here, allowed=allowed)


def _remask_journey(hub: "Hub", session_id: str, step: dict, values: Dict[str, str]) -> None:
    """After a replayed act typed secrets, the journey log holds them in plain text: put their
    ${NAME} back, so the next reticle_flow_save stores the reference, never the value."""
    if not values:
        return
    for entry in hub.journeys.since(session_id, -1e18)[-4:]:
        act_args = entry.get("args")
        if not isinstance(act_args, dict):
            continue
        masked = {}
        for key, v in act_args.items():
            for name, secret in values.items():
                if isinstance(v, str) and secret and secret in v:
                    v = v.replace(secret, "${%s}" % name)
                    entry["secret"] = name
            masked[key] = v
        entry["args"] = masked
        if entry.get("secret") and step.get("secretOrigin"):
            entry["secretOrigin"] = step["secretOrigin"]


def _start_url(flow: dict, url: Optional[str]) -> Optional[str]:
    """Where a replay starts: `url` as given; an origin alone (no path) keeps the flow's own
    path and query; without `url`, the flow's startUrl."""
    start = flow.get("startUrl")
    if not url:
        return start
    parts = urllib.parse.urlsplit(url)
    if parts.path in ("", "/") and not parts.query and start:
        saved = urllib.parse.urlsplit(start)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, saved.path or "/", saved.query, ""))
    return url


def _nearest(error: str) -> List[str]:
    """The candidates the page named in a target miss ("nearest: a, b; testids present: ...")."""
    out: List[str] = []
    for part in error.split("; "):
        for prefix in ("nearest: ", "testids present: "):
            if part.startswith(prefix):
                out.extend(x.strip() for x in part[len(prefix):].split(", ") if x.strip())
        if re.match(r"^\w+s present: ", part):
            out.extend(x.strip() for x in part.split(": ", 1)[1].split(", ") if x.strip())
    return out[:8]


def _step_label(step: dict) -> str:
    if "assert" in step:
        return "assert %s" % _describe_predicate_safe(step["assert"])
    target = step.get("target") or {}
    what = ", ".join("%s=%s" % (k, _dumps(v) if not isinstance(v, str) else v) for k, v in target.items())
    return "%s %s" % (step["action"], what)


def _describe_predicate_safe(p: Any) -> str:
    try:
        return _describe_predicate(parse_predicate(p, "assert"))
    except Exception:
        return _short(_dumps(p), 120)


async def _await_target(session: "_BrowserSession", target: dict, timeout_ms: float) -> None:
    """Wait (up to timeout_ms) until `target` matches at least one element: the SDK connects
    before the document is parsed, so a step right after a navigation may come too early.
    Whatever the page shows at the end, the act itself decides (and never acts on a miss)."""
    query: Dict[str, Any] = {"count_only": True}
    for key in ("testid", "label", "placeholder", "text", "role"):
        if key in target:
            query["by"], query["value"] = key, target[key]
            break
    if "by" not in query:
        return
    if "name" in target:
        query["name"] = target["name"]
    deadline = session.now() + timeout_ms
    while True:
        try:
            found = await session.command("query", query, timeout=2.0)
        except ToolError:
            found = None
        if isinstance(found, dict) and (found.get("count") or 0) > 0:
            return
        if session.now() >= deadline:
            return
        await session.wait_change(0.05)


async def _replay_step(hub: "Hub", session: "_BrowserSession", step: dict, ctx: "_CallContext",
                       secrets_in: Optional[Dict[str, str]] = None, allowed: str = "") -> dict:
    """One step -> {verified, verifiedReason, because, ...}; a target that does not resolve is
    `no` with the page's nearest candidates, and nothing is acted on.  A step that types a
    secret does so only on the page origin `allowed` (else a setup error, nothing typed)."""
    if "assert" in step:
        args = {"predicate": step["assert"], "timeout_ms": max(step.get("timeout_ms", 0), REPLAY_WAIT_MS)}
        if session.id:
            args["sessionId"] = session.id
        return await _assert_verdict(session, args, _predicate_arg(args, True))
    names = _secret_refs(step.get("args") or {})
    args = {"action": step["action"], "args": _fill_secrets(step.get("args") or {}, secrets_in)}
    typed = {n: _fill_secrets("${%s}" % n, secrets_in) for n in names}
    if step.get("target"):
        args["target"] = step["target"]
        await _await_target(session, step["target"], REPLAY_WAIT_MS)
    if names:
        _check_secret_origin(session, step, names, allowed)
    try:
        if "until" in step:
            args["until"] = step["until"]
            args["timeout_ms"] = max(step.get("timeout_ms", 4000), REPLAY_WAIT_MS)
            try:
                return await _act_and_wait_verdict(session, args, _until_arg(args))
            finally:
                _remask_journey(hub, session.id, step, typed)
        try:
            res = await _act_once(session, args)
        finally:
            _remask_journey(hub, session.id, step, typed)
    except _TabGone:
        raise
    except ToolError as exc:
        if exc.code in ("target_missing", "target_ambiguous"):
            return {"verified": "no", "verifiedReason": exc.code, "because": exc.error, "nearest": _nearest(exc.error),
                    "acted": False}
        raise
    dispatched = res.get("dispatched")
    ok = dispatched is not False
    return {"verified": "yes" if ok else "no", "verifiedReason": "acted" if ok else "not_dispatched",
            "because": "the %s was dispatched%s" % (step["action"], " (the page unloaded: a navigation)"
                                                    if dispatched is None else "") if ok else
            "the %s was not dispatched: %s" % (step["action"], _short(_dumps(res.get("result")), 200))}


def _writes_in(window: List[dict], floor: Optional[float] = None) -> List[dict]:
    """The writes a window holds (POST, PUT, PATCH, DELETE and form posts) that started after the
    act at `floor`, once each by method and path: what `reticle verify --teeth` fails on purpose,
    one at a time.  (A write the page repeats on its own is not told apart here: failing it too
    only asks more of the flow.)"""
    out: List[dict] = []
    for e in window:
        d = e["data"]
        if e["type"] != "net.request" or not _is_write(d) or _is_dev(d):
            continue
        if floor is not None and not _caused_by_act(e, floor, None):
            continue
        parts = urllib.parse.urlsplit(str(d.get("url") or ""))
        item: Dict[str, Any] = {"method": str(d.get("method")).upper(), "path": parts.path or "/"}
        if d.get("initiator") == "document":
            item["form"] = True
        if item not in out:
            out.append(item)
    return out


def _expectation(step: dict, row: dict) -> bool:
    """Did the step turn out as the flow expects?  `yes` by default; with `expect: "no"` the app
    must fail visibly (a `no` verdict), and a target that was not found is never that."""
    if step.get("expect") != "no":
        return row["verified"] == "yes"
    row["expect"] = "no"
    row["met"] = row["verified"] == "no" and row.get("verifiedReason") not in (
        "target_missing", "target_ambiguous", "not_dispatched")
    if not row["met"] and row["verified"] == "yes":
        row["because"] = "the flow expects no (the app must show the failure) but it was yes: %s" % row.get("because")
    return bool(row["met"])


def _step_evidence(res: dict) -> Any:
    """The few fields of a verdict a person needs to see why."""
    out = {}
    for key in ("failureReason", "observed", "expected", "evidence"):
        if res.get(key) not in (None, "", [], {}):
            out[key] = res[key]
    for key in ("nearest", "contradictions"):
        if res.get(key):
            out[key] = res[key]
    text = _dumps(out)
    return out if len(text) <= 2000 else {"summary": _short(text, 2000)}


async def _replay(hub: "Hub", session: "_BrowserSession", flow: dict, url: Optional[str], ctx: "_CallContext",
                  fresh: bool = False, secrets_in: Optional[Dict[str, str]] = None,
                  auth: Optional[dict] = None) -> dict:
    """Replay a flow in `session`: navigate to its start (in a device, in a new, empty browser
    context when `fresh`), then every step in order.  The first step that is not `yes` stops
    the flow; the ones after it are `skipped`."""
    started = hub.clock()
    start = _start_url(flow, url)
    steps_out: List[dict] = []
    if fresh:
        device = hub.devices.for_session(session.id)
        if device is None:
            raise ToolError("`fresh` needs a device: tab %s is not one Reticle started, and a person's browser "
                            "keeps its cookies" % session.id, "open the app with reticle_open, or drop fresh",
                            setup=True)
        if not start:
            raise ToolError("`fresh` needs a start: the flow has no startUrl", "pass url", setup=True)
        session.mark_navigation()
        session = await hub.devices.load(device, start, fresh=True, auth=auth)
    elif start:
        nav = await _tool_navigate(hub, session, {"url": start}, ctx)
        if not nav.get("confirmed"):
            raise ToolError("the page at %s did not connect within 5 s" % start,
                            "check the URL, and that the page loads %s/reticle.js (or use a device)"
                            % hub.public_origin(), setup=True)
        session = hub.bridge.get(session.id) or session
    verdict = "yes"
    failed_at = None
    for i, step in enumerate(flow["steps"]):
        label = _step_label(step)
        if failed_at is not None:
            steps_out.append({"index": i, "step": label, "verified": "skipped"})
            continue
        t0 = hub.clock()
        _progress_note("replaying step %d of %d: %s" % (i + 1, len(flow["steps"]), label))
        cursor = session.now()
        res = await _replay_step(hub, session, step, ctx, secrets_in, _secret_origin(step, flow, start))
        session = hub.bridge.get(session.id) or session
        row = {"index": i, "step": label, "verified": res.get("verified", "unknown"),
               "verifiedReason": res.get("verifiedReason"), "because": res.get("because"),
               "ms": round(hub.clock() - t0)}
        if "until" in step or "assert" in step:
            row["predicate"] = step.get("until") or step.get("assert")
        made = _writes_in(session.window(cursor), cursor)
        if made:
            row["writes"] = made
        met = _expectation(step, row)
        if not met or row["verified"] != "yes":
            row["evidence"] = _step_evidence(res)
        if not met:
            failed_at = i
            verdict = "unknown" if row["verified"] == "unknown" else "no"
        steps_out.append(row)
    out = {"name": flow.get("name"), "verified": verdict, "steps": steps_out, "startUrl": start,
           "sessionId": session.id, "ms": round(hub.clock() - started)}
    writes: List[dict] = []
    for row in steps_out:
        writes.extend(w for w in row.get("writes", ()) if w not in writes)
    if writes:
        out["writes"] = writes
    if failed_at is not None:
        failing = steps_out[failed_at]
        out["failedStep"] = failed_at
        out["because"] = "step %d (%s) is %s%s: %s" % (failed_at, failing["step"], failing["verified"],
                                                       " where the flow expects no" if failing.get("expect") else "",
                                                       failing.get("because"))
    else:
        expected_no = sum(1 for r in steps_out if r.get("expect") == "no")
        out["because"] = "all %d steps are yes" % len(steps_out) if not expected_no else (
            "every step met what the flow expects (%d yes, %d no as expected)" % (len(steps_out) - expected_no,
                                                                               expected_no))
    if not any("until" in s or "assert" in s for s in flow["steps"]):
        out["note"] = "this flow has no predicate: it shows the steps ran, not that they worked"
    return out


async def _replay_flow(hub: "Hub", session: "_BrowserSession", flow: dict, url: Optional[str], ctx: "_CallContext",
                       fresh: bool = False, secrets_in: Optional[Dict[str, str]] = None,
                       setup_flow: Optional[dict] = None, retry: bool = True) -> dict:
    """_replay with logged-in starts.  A setup flow that ends yes saves its device's state.  A flow
    with `auth` starts, in a fresh context, from its setup flow's saved state; when there is none or
    its cookies expired, the setup flow (`setup_flow`, else the saved one) makes it first.  A flow
    that fails at its first step from a state made before this replay is retried once after its
    setup flow made the state again (a second failure there: _auth_cause), unless not `retry` (a
    replay under faults, whose first step may fail on purpose)."""
    name = flow.get("auth")
    out = await _replay(hub, session, flow, url, ctx, fresh, secrets_in) if not name else \
        await _replay_auth(hub, session, flow, url, ctx, secrets_in, setup_flow, retry)
    if flow.get("setup") and out["verified"] == "yes":
        out["authSaved"] = await _keep_auth(hub, hub.bridge.get(session.id) or session, str(flow.get("name")))
    return out


async def _replay_auth(hub: "Hub", session: "_BrowserSession", flow: dict, url: Optional[str], ctx: "_CallContext",
                       secrets_in: Optional[Dict[str, str]], setup_flow: Optional[dict], retry: bool) -> dict:
    """_replay_flow for a flow that starts from auth state `flow["auth"]`."""
    name = flow["auth"]
    if hub.devices.for_session(session.id) is None:
        raise ToolError("the flow starts from the auth state %s, which needs a device: tab %s is not one Reticle "
                        "started" % (name, session.id), "open the app with reticle_open", setup=True)
    state = _load_auth_state(_project_dir(hub), name)
    remade = None
    if state is None or _auth_expired(state):
        remade = "there was no saved state" if state is None else "its saved cookies expired"
        state = await _remake_auth(hub, session, name, url, ctx, secrets_in, setup_flow, remade)
    session = hub.bridge.get(session.id) or session
    out = await _replay(hub, session, flow, url, ctx, True, secrets_in, auth=state)
    if out["verified"] != "yes" and out.get("failedStep") == 0 and remade is None and retry:
        remade = "the flow failed at its first step from it (%s)" % _short(str(out.get("because")), 300)
        state = await _remake_auth(hub, session, name, url, ctx, secrets_in, setup_flow, remade)
        session = hub.bridge.get(session.id) or session
        out = await _replay(hub, session, flow, url, ctx, True, secrets_in, auth=state)
        if out["verified"] != "yes" and out.get("failedStep") == 0:
            out["because"] = _auth_cause(hub, out, name, setup_flow)
    if remade is not None:
        out["authRemade"] = {"name": name, "why": remade}
    return out


def _auth_cause(hub: "Hub", out: dict, name: str, setup_flow: Optional[dict]) -> str:
    """Why a flow failed at its first step although its auth state was just made again: on the page
    its setup flow starts at (the login page), the state no longer logs in; anywhere else the failure
    is the flow's own, said with what was tried."""
    device = hub.devices.for_session(out.get("sessionId"))
    try:
        setup = setup_flow if setup_flow is not None else _read_flow(_project_dir(hub), name)
    except ToolError:
        setup = {}
    here = urllib.parse.urlsplit(device.url if device is not None else "")
    login = urllib.parse.urlsplit(str(setup.get("startUrl") or ""))
    if login.path and (here.netloc, here.path) == (login.netloc, login.path):
        return ("auth state %s no longer logs in: made again by its setup flow, the flow still starts on the "
                "setup flow's page %s: %s" % (name, login.path, out.get("because")))
    return ("%s (the auth state %s was made again by its setup flow and the flow retried: the failure is the "
            "flow's own)" % (out.get("because"), name))


async def _remake_auth(hub: "Hub", session: "_BrowserSession", name: str, url: Optional[str], ctx: "_CallContext",
                       secrets_in: Optional[Dict[str, str]], setup_flow: Optional[dict], why: str) -> dict:
    """Replay setup flow `name` in a fresh context and answer the state it saved; a setup error naming
    the state when the setup flow is not yes."""
    setup = setup_flow if setup_flow is not None else _read_flow(_project_dir(hub), name)
    if setup.get("name") != name or not setup.get("setup"):
        raise ToolError("the flow %r is not a setup flow, so it cannot make the auth state %r" % (setup.get("name"),
                        name), 'mark the flow %s with "setup": true (reticle_flow_save {setup: true})' % name,
                        setup=True)
    _progress_note("making the auth state %s with its setup flow (%s)" % (name, why))
    res = await _replay(hub, session, setup, url, ctx, True, secrets_in)
    if res["verified"] != "yes":
        raise ToolError("auth state %s no longer logs in: %s, and its setup flow %s is %s: %s"
                        % (name, why, name, res["verified"], res.get("because")),
                        "replay the setup flow %s and fix what it shows" % name, setup=True)
    kept = await _keep_auth(hub, hub.bridge.get(session.id) or session, name)
    state = _load_auth_state(_project_dir(hub), name) if kept.get("saved") else None
    if state is None:
        raise ToolError("the auth state %s could not be saved: %s" % (name, kept.get("note")),
                        "start flows that use auth in a device (reticle_open)", setup=True)
    return state


# -- reports of `reticle verify`: pure functions of the results (one dict per flow) ---------------
# A result: {name, verified: yes|no|unknown|error, ms, steps: [{index, step, verified, verifiedReason,
# because, predicate?, evidence?, ms?}], because, failedStep?, error?, screenshot? (base64 PNG)}.

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")  # not XML 1.0 characters


def _xml(value: Any) -> str:
    return html.escape(_XML_BAD.sub("?", str(value)), quote=True)


def _verify_exit(results: List[dict]) -> int:
    """0 when every flow is yes; 3 for any setup error, else 1 for any no, else 2 for any unknown,
    else 4 when `--teeth` found a flow toothless for a write."""
    verdicts = {r["verified"] for r in results}
    if not results or "error" in verdicts:
        return 3
    if "no" in verdicts:
        return 1
    if "unknown" in verdicts:
        return 2
    if any(r.get("toothless") for r in results):
        return 4
    return 0


def _step_failed(s: dict) -> bool:
    """A step that did not turn out as its flow expects (see _expectation)."""
    if "met" in s:
        return s["met"] is False
    return s.get("verified") in ("no", "unknown")


TEETH_MAX_DEFAULT = 8                # `verify --teeth` replays a flow at most this many times more (--teeth-max)


def _write_label(w: dict) -> str:
    """How a write is named in every teeth report: `POST /api/save`, `(form post)` for a document's."""
    return "%s %s%s" % (w["method"], w["path"], " (form post)" if w.get("form") else "")


def _checked_writes(flow: dict, writes: List[dict]) -> List[dict]:
    """The writes some check of `flow` looks at: a `net` or `server` leaf (not under a `not`) whose
    method (when it names one) and `urlContains` (when it has one) match the write's."""
    leaves: List[dict] = []
    for step in flow.get("steps", ()):
        for raw in (step.get("until"), step.get("assert")):
            if raw is None:
                continue
            try:
                leaves.extend(leaf for leaf, neg in _leaves(parse_predicate(raw, "until"))
                              if not neg and leaf["kind"] in ("net", "server"))
            except Exception:  # a flow's own check that does not parse fails its replay; here it checks nothing
                continue
    return [w for w in writes if any(
        (not leaf.get("method") or str(leaf["method"]).upper() == w["method"])
        and (not leaf.get("urlContains") or str(leaf["urlContains"]) in w["path"]) for leaf in leaves)]


def _teeth_plan(flow: dict, writes: List[dict], limit: int) -> Tuple[List[dict], List[dict]]:
    """Which writes `--teeth` fails on purpose (at most `limit`, so the page under test does not choose
    how long CI runs) and which it leaves untested.  Deterministic: first the writes the flow's checks
    look at (_checked_writes), then the others, each group in the order the replay first made them."""
    checked = _checked_writes(flow, writes)
    ordered = checked + [w for w in writes if w not in checked]
    return ordered[:max(0, limit)], ordered[max(0, limit):]


def _teeth_cell(r: dict) -> str:
    if "teeth" not in r:
        return "" if r["verified"] == "yes" else "-"
    untested = r.get("teethUntested") or []
    if untested:  # short: the names follow the table (_verify_table), and are in every report
        tested = "TOOTHLESS for %s" % ", ".join(r["toothless"]) if r.get("toothless") else (
            "teeth for %d write(s)" % len(r["teeth"]) if r["teeth"] else "none tested")
        return "%s; %d UNTESTED (over --teeth-max %s)" % (tested, len(untested), r.get("teethMax", "?"))
    if not r["teeth"]:
        return "no writes"
    if r.get("toothless"):
        return "TOOTHLESS for %s" % ", ".join(r["toothless"])
    return "teeth for %s" % ", ".join(t["write"] for t in r["teeth"])


def _failing_step(result: dict) -> Optional[dict]:
    i = result.get("failedStep")
    return result["steps"][i] if isinstance(i, int) and i < len(result.get("steps", [])) else None


def _junit_xml(results: List[dict], suite_name: str = "reticle verify") -> str:
    """JUnit XML: one <testsuite> per flow, one <testcase> per step; `no` and `unknown` steps are
    <failure> (type says which), steps after the failing one <skipped>, a setup error an <error>."""
    def count(r: dict, v: str) -> int:
        if v == "failed":
            return sum(1 for s in r.get("steps", []) if _step_failed(s)) + len(r.get("toothless") or ())
        return sum(1 for s in r.get("steps", []) if s.get("verified") == v)
    def cases(r: dict) -> int:
        return max(1, len(r.get("steps", []))) + len(r.get("teeth") or ()) + len(r.get("teethUntested") or ())
    total = sum(cases(r) for r in results)
    fails = sum(count(r, "failed") for r in results)
    errors = sum(1 for r in results if r["verified"] == "error")
    skipped = sum(count(r, "skipped") + len(r.get("teethUntested") or ()) for r in results)
    secs = sum(r.get("ms", 0) for r in results) / 1000.0
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites name="%s" tests="%d" failures="%d" errors="%d" skipped="%d" time="%.3f">'
           % (_xml(suite_name), total, fails, errors, skipped, secs)]
    for r in results:
        steps = r.get("steps", [])
        classname = "reticle.flows.%s" % r["name"]
        out.append('  <testsuite name="%s" tests="%d" failures="%d" errors="%d" skipped="%d" time="%.3f">'
                   % (_xml(r["name"]), cases(r), count(r, "failed"), 1 if r["verified"] == "error" else 0,
                      count(r, "skipped") + len(r.get("teethUntested") or ()), r.get("ms", 0) / 1000.0))
        if r.get("shard"):
            out.append('    <properties><property name="shard" value="%s"/></properties>' % _xml(r["shard"]))
        if r["verified"] == "error" and not steps:
            out.append('    <testcase name="setup" classname="%s" time="%.3f">'
                       % (_xml(classname), r.get("ms", 0) / 1000.0))
            out.append('      <error message="%s" type="setup"/>' % _xml(r.get("error", "setup error")))
            out.append('    </testcase>')
        for s in steps:
            out.append('    <testcase name="%s" classname="%s" time="%.3f">' % (
                _xml("step %d: %s" % (s["index"], s["step"])), _xml(classname), s.get("ms", 0) / 1000.0))
            if _step_failed(s):
                out.append('      <failure message="%s" type="%s">%s</failure>' % (
                    _xml(s.get("because") or s["verified"]), s["verified"],
                    _xml(_dumps({"verifiedReason": s.get("verifiedReason"), "predicate": s.get("predicate"),
                                 "evidence": s.get("evidence")}))))
            elif s["verified"] == "skipped":
                out.append('      <skipped message="an earlier step of the flow failed"/>')
            out.append('    </testcase>')
        for t in r.get("teeth") or ():
            out.append('    <testcase name="%s" classname="%s" time="%.3f">' % (
                _xml("teeth: %s answered 500" % t["write"]), _xml(classname), t.get("ms", 0) / 1000.0))
            if t["toothless"]:
                out.append('      <failure message="%s" type="toothless">%s</failure>' % (
                    _xml("toothless for %s: the flow is still yes when that write fails" % t["write"]),
                    _xml(_dumps({"write": t["write"], "verified": t["verified"], "because": t.get("because")}))))
            out.append('    </testcase>')
        for w in r.get("teethUntested") or ():
            out.append('    <testcase name="%s" classname="%s" time="0.000">' % (
                _xml("teeth: %s answered 500" % w), _xml(classname)))
            out.append('      <skipped message="%s"/>' % _xml(
                "untested: the flow made more writes than --teeth-max %s" % r.get("teethMax", "")))
            out.append('    </testcase>')
        out.append('  </testsuite>')
    out.append('</testsuites>')
    return "\n".join(out) + "\n"


_REPORT_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
table{border-collapse:collapse;width:100%;margin:.5em 0 1.5em}th,td{border:1px solid #ddd;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f4f4f4}code,pre{font:12px/1.4 ui-monospace,monospace;
white-space:pre-wrap;word-break:break-word;margin:0}.yes{color:#0a7a2f;font-weight:600}.no,.error{color:#b00020;
font-weight:600}.unknown{color:#a15c00;font-weight:600}.skipped{color:#888}img{max-width:100%;
border:1px solid #ccc;margin:.5em 0}section{margin-bottom:2em}"""


def _html_report(results: List[dict], title: str = "Reticle verify") -> str:
    """One self-contained page: a summary table, then each flow's steps with predicate, verdict,
    evidence and timing, and the screenshot of a failing step inline (data: URL)."""
    e = html.escape
    code = _verify_exit(results)
    sharded = any("shard" in r for r in results)  # merged shards: each flow's shard (reticle report merge)
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>%s</title><style>%s</style></head><body>" % (e(title), _REPORT_CSS),
             "<h1>%s</h1>" % e(title),
             "<p>%d flow(s), exit code %d, generated %s by reticle %s.</p>" % (
                 len(results), code, datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ"),
                 e(__version__)),
             "<table><tr><th>flow</th><th>steps</th><th>verdict</th><th>time</th><th>because</th><th>teeth</th>"
             "%s</tr>" % ("<th>shard</th>" if sharded else "")]
    for r in results:
        parts.append('<tr><td><a href="#flow-%s">%s</a></td><td>%d</td><td class="%s">%s</td><td>%.2f s</td>'
                     '<td>%s</td><td class="%s">%s</td>%s</tr>' % (
                         e(r["name"]), e(r["name"]), len(r.get("steps", [])), e(r["verified"]),
                         e(r["verified"]), r.get("ms", 0) / 1000.0, e(r.get("error") or r.get("because") or ""),
                         "no toothless" if r.get("toothless") else "yes", e(_teeth_cell(r)),
                         '<td class="shard">%s</td>' % e(str(r.get("shard", ""))) if sharded else ""))
    parts.append("</table>")
    for r in results:
        parts.append('<section id="flow-%s" class="flow"><h2>%s <span class="%s">%s</span></h2>' % (
            e(r["name"]), e(r["name"]), e(r["verified"]), e(r["verified"])))
        if r.get("startUrl"):
            parts.append("<p>start: <code>%s</code></p>" % e(r["startUrl"]))
        if r.get("shard"):
            parts.append("<p>shard: %s</p>" % e(str(r["shard"])))
        if r.get("error"):
            parts.append('<p class="error">setup error: %s</p>' % e(r["error"]))
        if r.get("steps"):
            parts.append("<table><tr><th>#</th><th>step</th><th>predicate</th><th>verdict</th><th>time</th>"
                         "<th>evidence</th></tr>")
            for s in r["steps"]:
                evidence = s.get("because") or ""
                if s.get("evidence"):
                    evidence += "\n" + json.dumps(s["evidence"], indent=1, ensure_ascii=False)[:4000]
                parts.append('<tr class="step"><td>%d</td><td>%s</td><td><code>%s</code></td><td class="%s">%s%s</td>'
                             "<td>%s</td><td><pre>%s</pre></td></tr>" % (
                                 s["index"], e(s["step"]), e(_dumps(s["predicate"])) if s.get("predicate") else "",
                                 e(s["verified"]), e(s["verified"]),
                                 " (%s)" % e(s["verifiedReason"]) if s.get("verifiedReason") else "",
                                 "%d ms" % s["ms"] if "ms" in s else "", e(evidence.strip())))
            parts.append("</table>")
        if r.get("teeth") or r.get("teethUntested"):
            parts.append("<table><tr><th>write answered 500</th><th>flow verdict</th><th>teeth</th><th>because</th>"
                         "</tr>")
            for t in r.get("teeth") or ():
                parts.append('<tr class="teeth"><td><code>%s</code></td><td class="%s">%s</td><td class="%s">%s</td>'
                             "<td>%s</td></tr>" % (e(t["write"]), e(str(t["verified"])), e(str(t["verified"])),
                                                   "no toothless" if t["toothless"] else "yes",
                                                   "toothless" if t["toothless"] else "teeth",
                                                   e(t.get("note") or t.get("because") or "")))
            for w in r.get("teethUntested") or ():
                parts.append('<tr class="untested"><td><code>%s</code></td><td class="skipped">-</td>'
                             '<td class="skipped">untested</td><td>over --teeth-max %s: not replayed with this '
                             "write failed</td></tr>" % (e(w), e(str(r.get("teethMax", "")))))
            parts.append("</table>")
        if r.get("screenshot"):
            failing = _failing_step(r)
            parts.append('<figure><img alt="screenshot at step %s" src="data:image/png;base64,%s">'
                         "<figcaption>the page when step %s failed</figcaption></figure>" % (
                             e(str(r.get("failedStep"))), r["screenshot"],
                             e("%d (%s)" % (failing["index"], failing["step"]) if failing else "?")))
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# -- shards of `reticle verify` and their merge: pure functions -----------------------------------
# `verify --shard I/N` runs one of N disjoint parts of the selected flows (one CI job each);
# `reticle report merge` joins the parts' `--json` results into one run's reports and exit code.

SHARD_MAX = 256                      # the largest N of --shard I/N
RESULTS_MAX_BYTES = 256 << 20        # a results file (`--json` output, screenshots inline) read by merge/--durations


def _hash64(*parts: str) -> int:
    """A hash that is the same in every process and on every machine (unlike hash())."""
    return int.from_bytes(hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).digest()[:8], "big")


def _shard_plan(names: List[str], n: int, durations: Optional[Dict[str, float]] = None) -> List[int]:
    """The shard (0 .. n-1) of each flow in `names`: a pure function of the multiset of names, `n` and
    `durations`, so every CI job computes the same split whatever the order of the list.
    Without durations (bounded-load rendezvous hashing): each flow ranks the shards by a hash of
    (its name, the shard) and takes the first one not yet full (floor(len/n) flows, or one more
    while fewer than len % n shards hold more), the flows taken in the order of a hash of their
    names.  Shards differ by at most one flow, and adding or removing a flow moves few others (a
    plain hash moves none but leaves shards uneven; a round-robin over a sorted list moves most).
    With durations (milliseconds per name, from a previous run): longest first, each flow to the
    shard with the least time so far, ties to the flow's preferred shard; a flow the file does not
    know counts as the median of the known ones."""
    m = len(names)
    out = [0] * m
    if n <= 1 or not m:
        return out

    def ranks(i: int) -> List[int]:
        return sorted(range(n), key=lambda s: (-_hash64(names[i], str(s)), s))
    order = sorted(range(m), key=lambda i: (_hash64(names[i]), names[i], i))
    known = [float(durations[x]) for x in names if durations and x in durations]
    if not known:
        low, extra = divmod(m, n)  # `extra` shards hold low + 1 flows, the others low
        count = [0] * n
        for i in order:
            big = sum(1 for c in count if c > low)
            out[i] = next(s for s in ranks(i) if count[s] < low or (count[s] == low and big < extra))
            count[out[i]] += 1
        return out
    middle = sorted(known)[len(known) // 2]
    weight = [float(durations[x]) if durations and x in durations else middle for x in names]
    load = [0.0] * n
    for i in sorted(order, key=lambda i: -weight[i]):  # stable: equal weights keep the hash order
        pref = ranks(i)
        out[i] = min(range(n), key=lambda s: (load[s], pref.index(s)))
        load[out[i]] += weight[i]
    return out


def _durations_of(doc: Any) -> Dict[str, float]:
    """Milliseconds per flow name from a previous run's `--json` results (of verify or of a merge);
    ValueError naming what is wrong otherwise."""
    flows = doc.get("flows") if isinstance(doc, dict) else None
    if not isinstance(flows, list):
        raise ValueError("it is not the --json output of `reticle verify` or `reticle report merge` "
                         "(an object with a `flows` list)")
    out: Dict[str, float] = {}
    for r in flows:
        if isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("ms"), (int, float)) \
                and not isinstance(r.get("ms"), bool) and 0 <= r["ms"] < float("inf"):
            out[r["name"]] = float(r["ms"]) + out.get(r["name"], 0.0)
    return out


def _merge_error(name: str, error: str) -> dict:
    return {"name": name, "verified": "error", "steps": [], "ms": 0, "error": error}


def _merge_shards(docs: List[Tuple[str, Any]]) -> List[dict]:
    """The results of one run from its shards' `--json` results ((file, parsed JSON) each), in the
    unsharded order, each flow marked with its `shard` ("i/n").  Anything that would make the merged
    verdict differ from one run's is an error result (exit 3), never dropped: a file that is not
    shard results, shards of different sizes or flow selections, a shard missing or given twice, a
    flow that ran in no shard or in two."""
    problems: List[str] = []
    seen: Dict[int, str] = {}
    totals = set()
    selections: Dict[str, List[str]] = {}
    parts: List[Tuple[str, List[dict]]] = []
    for path, doc in docs:
        info = doc.get("shard") if isinstance(doc, dict) else None
        flows = doc.get("flows") if isinstance(doc, dict) else None
        if not isinstance(flows, list) or not all(isinstance(r, dict) and isinstance(r.get("name"), str)
                                                  and isinstance(r.get("verified"), str) for r in flows):
            problems.append("%s is not `reticle verify --json` output (an object with a `flows` list)" % path)
            continue
        if not isinstance(info, dict) or not isinstance(info.get("index"), int) or not isinstance(
                info.get("total"), int) or not isinstance(info.get("selected"), list):
            if len(docs) > 1:
                problems.append("%s holds no `shard` (was it run with --shard I/N?)" % path)
                continue
            info = {"index": 1, "total": 1, "selected": [r["name"] for r in flows]}
        totals.add(info["total"])
        if info["index"] in seen:
            problems.append("shard %d/%d is given twice: %s and %s" % (info["index"], info["total"],
                                                                      seen[info["index"]], path))
            continue
        seen[info["index"]] = path
        selections[path] = [str(x) for x in info["selected"]]
        parts.append(("%d/%d" % (info["index"], info["total"]), flows))
    if len(totals) > 1:
        problems.append("the files come from different shard counts (%s)" % ", ".join(
            "/%d" % t for t in sorted(totals)))
    elif totals:
        total = totals.pop()
        missing = [str(i) for i in range(1, total + 1) if i not in seen]
        if missing:
            problems.append("shard(s) %s of %d missing: no results file for them" % (", ".join(missing), total))
    if len({tuple(v) for v in selections.values()}) > 1:
        problems.append("the shards were split from different flow selections (%s): run every shard with the "
                        "same FLOWS" % "; ".join("%s: %d flows" % (p, len(v)) for p, v in selections.items()))
    selected = next(iter(selections.values()), [])
    return _merge_flows(parts, selected) + [_merge_error("(merge)", p) for p in problems]


def _merge_flows(parts: List[Tuple[str, List[dict]]], selected: List[str]) -> List[dict]:
    """Each selected flow's one result (marked with its shard), in the selection's order; a flow that
    ran in no shard or in more than one is an error result naming the shards; a result no shard
    selected (a setup error about the run, such as a stranger on the port) is kept, once."""
    by_name: Dict[str, List[dict]] = {}
    extra: List[dict] = []
    want = collections.Counter(selected)
    for label, flows in parts:
        for r in flows:
            r = dict(r, shard=label)
            if r["name"] in want and r.get("setupOnly"):
                continue  # a shard ran it for its own flows; the shard that drew it reports it
            if r["name"] in want:
                by_name.setdefault(r["name"], []).append(r)
            elif not any(x["name"] == r["name"] and x.get("error") == r.get("error") for x in extra):
                extra.append(r)
    out: List[dict] = []
    for name in sorted(want, key=selected.index):
        got = by_name.get(name, [])
        if len(got) == want[name]:
            out.extend(got)
        elif not got:
            out.append(_merge_error(name, "the flow ran in no shard (is a shard's results file missing?)"))
        else:
            out.append(_merge_error(name, "the flow ran %d times, in shards %s, where it was selected %d time(s): "
                                          "the shards were not split alike (the same FLOWS and --durations file "
                                          "in every job)" % (len(got), ", ".join(r["shard"] for r in got),
                                                             want[name])))
    return out + extra


###############################################################################
# Server truth ################################################################
###############################################################################
# What the Python server did for each request a Reticle tab made.  The SDK
# marks its tab's requests (the X-Reticle-Mark header on same-origin
# fetch/XHR, a short-lived cookie for documents); the middleware here reports
# only marked requests, from a daemon thread, to the daemon, which stitches
# each record into the tab whose mark it carries.  Nothing here imports a web
# framework at module import; wsgi/asgi/DjangoMiddleware/watch_sqlalchemy are
# the public entry points.

SERVER_MARK_HEADER = "X-Reticle-Mark"
SERVER_MARK_COOKIE = "__reticle_mark"
SERVER_QUEUE_CAP = 1000          # records waiting for the reporter thread; past it they are dropped, counted
SERVER_BATCH = 100               # records per POST to the daemon
SERVER_AWAY_S = 1.0              # after a failed POST, wait this long before the next try
SERVER_SQL_CAP = 200             # characters of SQL text kept per write
SERVER_GRACE_MS = 400            # a marked request's record may arrive this long after the browser saw it answer
SERVER_MAX_RECORDS = 500         # per POST accepted by the daemon
SERVER_TICKETS = 64              # one-use marks handed to a tab's document at a time (the SDK asks for more)
SERVER_TICKETS_KEPT = 512        # unused marks a tab holds at most: past it the oldest are void
SERVER_TICKET_AFTER_MS = 30000   # a document's unused marks still count this long after its tab moved on
SERVER_REDIRECT_MS = 10000       # a navigation's mark is good once more this long after its request redirected
SERVER_TICKET_SITES = ("same-origin", "none")  # Sec-Fetch-Site of a request the tab's own document made
_MARK_RE = re.compile(r"^([0-9a-f]{32})(?:\.([A-Za-z0-9_:-]{1,64})\.([A-Za-z0-9_-]{1,32}))?$")
_SQL_WRITE_RE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(INSERT|UPDATE|DELETE|REPLACE)\b(?:\s+OR\s+\w+)?(?:\s+INTO|\s+FROM)?\s+"
    r"(?:ONLY\s+)?[`\"\[]?([A-Za-z_][\w$]*(?:[`\"\]]?\.[`\"\[]?[A-Za-z_][\w$]*)?)", re.I | re.S)
_SERVER_INSTALL = (
    "add Reticle's server middleware: Django: MIDDLEWARE += [\"reticle.DjangoMiddleware\"] (under DEBUG); "
    "Flask/any WSGI app: app.wsgi_app = reticle.wsgi(app.wsgi_app); FastAPI/Starlette/any ASGI app: "
    "app = reticle.asgi(app); SQLAlchemy writes: reticle.watch_sqlalchemy(engine); "
    "`reticle init` adds or prints it")
_server_log = logging.getLogger("reticle.server")
_CURRENT_REQUEST: Any = None     # a contextvars.ContextVar, made when the first wrapper is built


# Secrets in what the server says (SQL, log messages, exceptions), redacted as the SDK redacts bodies:
# known key shapes, and the value of a `key=value` / `key: value` pair whose key names a secret.
_SERVER_SECRET_SHAPES = tuple(re.compile(p) for p in (
    r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}",
    r"\b(?:sk|rk|pk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_-]{16,}",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}", r"\bgithub_pat_[A-Za-z0-9_]{20,}", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\bxox[abprs]-[A-Za-z0-9-]{10,}", r"\bya29\.[A-Za-z0-9_-]{20,}", r"\bAIza[0-9A-Za-z_-]{30,}"))
_SERVER_SECRET_PAIR = re.compile(
    r"(?i)((?<![A-Za-z0-9])(?:[\"']?)(pass(?:word|wd|code|phrase)?|pwd|secret|[a-z_]*token|api[-_ ]?key|access[-_]?key|"
    r"private[-_]?key|authorization|auth|cookie|session[-_]?id|sid|jwt|credential|card[-_]?number|cvv|cvc|ssn)"
    r"(?:[\"']?)\s*[:=]\s*)(?!\[redacted\])(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s&,;}\]]+)")


def _scrub_server(text: str) -> str:
    """`text` from the app's server with secrets redacted (tokens, key shapes, secret-named values)."""
    text = _redact(text)
    for shape in _SERVER_SECRET_SHAPES:
        text = shape.sub("[redacted]", text)
    return _SERVER_SECRET_PAIR.sub(lambda m: m.group(1) + "[redacted]", text)


def _current_request() -> Any:
    """The ContextVar that holds the record of the marked request being served (one per process)."""
    global _CURRENT_REQUEST
    if _CURRENT_REQUEST is None:
        import contextvars
        _CURRENT_REQUEST = contextvars.ContextVar("reticle_server_request", default=None)
    return _CURRENT_REQUEST


def _cookie_mark(cookie: Optional[str]) -> Optional[str]:
    if not cookie or SERVER_MARK_COOKIE not in cookie:
        return None
    for part in cookie.split(";"):
        name, _, value = part.strip().partition("=")
        if name == SERVER_MARK_COOKIE and value:
            return value.strip()
    return None


def _sql_write(sql: Any) -> Optional[dict]:
    """{op, table} of a statement that writes (INSERT, UPDATE, DELETE, REPLACE), else None."""
    if not isinstance(sql, str):
        try:
            sql = str(sql)
        except Exception:  # noqa: BLE001 - a statement object we cannot print is no write we can name
            return None
    m = _SQL_WRITE_RE.match(sql)
    if m is None:
        return None
    op = m.group(1).lower()
    table = re.sub(r"[`\"\[\]]", "", m.group(2))
    return {"op": "insert" if op == "replace" else op, "table": table,
            "sql": _scrub_server(sql[:SERVER_SQL_CAP]) + ("…" if len(sql) > SERVER_SQL_CAP else "")}


def _app_frames(tb: Any, limit: int = 3) -> List[str]:
    """The innermost frames of the app's own code (not the standard library, installed packages
    or reticle), innermost first, as `file:line function`; files under the working directory
    are named relative to it."""
    import sysconfig
    import traceback
    skip = [os.path.abspath(p) for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib",
                                                                                "purelib", "platlib")} if p]
    own = os.path.abspath(__file__) if "__file__" in globals() else ""
    cwd = os.getcwd()
    out = []
    for fs in reversed(traceback.extract_tb(tb)):
        path = os.path.abspath(fs.filename)
        if path == own or "site-packages" in path or "dist-packages" in path or fs.filename.startswith("<") \
                or any(path.startswith(s + os.sep) for s in skip):
            continue
        name = os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else os.path.basename(path)
        out.append("%s:%d %s" % (name, fs.lineno or 0, fs.name))
        if len(out) >= limit:
            break
    return out


def _exception_record(exc: BaseException, tb: Any = None) -> dict:
    return {"type": type(exc).__name__, "message": _scrub_server(str(exc)[:300]),
            "frames": _app_frames(tb if tb is not None else exc.__traceback__)}


class _RequestLogHandler(logging.Handler):
    """Root-logger handler, ERROR and above: a record logged while a marked request is served
    is noted in that request's record (the logger's name, level, message, and the exception
    it carried).  Reticle's own loggers are not the app's."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            rec = _current_request().get()
            if rec is None or record.name.startswith("reticle"):
                return
            entry: Dict[str, Any] = {"logger": record.name[:120], "level": record.levelname,
                     "message": _scrub_server(record.getMessage()[:300])}
            if record.exc_info and record.exc_info[1] is not None:
                entry["exception"] = _exception_record(record.exc_info[1], record.exc_info[2])
            if len(rec["logged"]) < 20:
                rec["logged"].append(entry)
        except Exception:  # noqa: BLE001 - logging must never break the app
            pass


_LOG_CAPTURE: List[_RequestLogHandler] = []


def _install_log_capture() -> None:
    if not _LOG_CAPTURE:
        handler = _RequestLogHandler(logging.ERROR)
        _LOG_CAPTURE.append(handler)
        logging.getLogger().addHandler(handler)


def _daemon_address() -> Tuple[str, int]:
    """Where the daemon is, found as the CLI finds it: RETICLE_HOST (a wildcard bind means
    loopback) and RETICLE_PORT."""
    host = os.environ.get("RETICLE_HOST", "").strip() or DEFAULT_HOST
    if host in ("0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    try:
        port = int(os.environ.get("RETICLE_PORT", "").strip() or DEFAULT_PORT)
    except ValueError:
        port = DEFAULT_PORT
    return host.strip("[]"), port


def _daemon_token() -> Optional[str]:
    """The pairing token: RETICLE_TOKEN, else the state directory's `token` file (read, never made)."""
    env = os.environ.get("RETICLE_TOKEN", "").strip()
    if env:
        return env
    try:
        with open(_StateDir().file("token"), "rb") as fh:
            return fh.read().decode("ascii", "replace").strip() or None
    except OSError:
        return None


class _ServerReporter:
    """Sends finished records to the daemon off the request's critical path: a bounded queue
    and one daemon thread, started with the first marked request.  A full queue, a daemon that
    does not answer or refuses the token drops the records, and counts them (`dropped`, sent
    with the next batch that gets through); the app is never slowed or broken by it."""

    def __init__(self, cap: int = SERVER_QUEUE_CAP) -> None:
        import queue
        self.queue: Any = queue.Queue(cap)
        self.dropped = 0        # not yet told to the daemon
        self.dropped_total = 0
        self.sent = 0
        self.refused = 0
        self.last_error = ""
        self.last_status = 0
        self._failing = False
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def put(self, rec: dict) -> None:
        try:
            self.queue.put_nowait(rec)
        except Exception:  # noqa: BLE001 - queue.Full
            self.dropped += 1
            self.dropped_total += 1
            return
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="reticle-server-truth", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        """The reporter thread: take what is queued (up to SERVER_BATCH records), post it, and on a
        failure count the batch as dropped and pause SERVER_AWAY_S; a rate-limited batch is tried
        once more after the pause."""
        while True:
            batch = [self.queue.get()]
            while len(batch) < SERVER_BATCH:
                try:
                    batch.append(self.queue.get_nowait())
                except Exception:  # noqa: BLE001 - queue.Empty
                    break
            ok = self._post(batch)
            if not ok and self.last_status == 429:  # the daemon's rate limit: one more try after a pause
                time.sleep(SERVER_AWAY_S)
                ok = self._post(batch)
            if ok:
                if self._failing:
                    _server_log.info("server records reach the daemon again")
                self._failing = False
                continue
            self.dropped += len(batch)
            self.dropped_total += len(batch)
            if not self._failing:
                _server_log.info("server records are being dropped (counted): %s", self.last_error)
            self._failing = True
            time.sleep(SERVER_AWAY_S)

    def _post(self, batch: List[dict]) -> bool:
        """POST one batch (with the count dropped since the last success) to the daemon found as the
        CLI finds it, with the pairing token; True when the daemon took it."""
        import http.client
        host, port = _daemon_address()
        token = _daemon_token()
        if not token:
            self.last_error = "no pairing token (RETICLE_TOKEN, or the state directory's token file)"
            return False
        body = _dumps({"records": batch, "dropped": self.dropped, "pid": os.getpid()}).encode("utf-8")
        conn = http.client.HTTPConnection(host, port, timeout=2.0)
        try:
            conn.request("POST", "/server-records", body, {
                "Content-Type": "application/json", "Authorization": "Bearer %s" % token,
                "Host": "%s:%d" % (host if ":" not in host else "[%s]" % host, port)})
            resp = conn.getresponse()
            resp.read()
        except (OSError, http.client.HTTPException) as exc:
            self.last_error = "the daemon at %s:%d did not answer (%s)" % (host, port, exc)
            self.last_status = 0
            return False
        finally:
            conn.close()
        self.last_status = resp.status
        if resp.status != 200:
            self.refused += 1
            self.last_error = "the daemon answered %d" % resp.status
            return False
        self.dropped = 0
        self.sent += len(batch)
        return True


def _sent_by(site: Optional[str], origin: Optional[str], referer: Optional[str]) -> dict:
    """Who sent the request, as the browser tells it (a page can set none of these headers): its
    Sec-Fetch-Site, and the origin of its Origin header, else of its Referer."""
    sender = origin or None
    if sender is None and referer:
        parts = urllib.parse.urlsplit(referer)
        sender = "%s://%s" % (parts.scheme, parts.netloc) if parts.netloc else None
    return {"site": site[:20] if site else None, "from": sender[:300] if sender else None}


_COOKIE_PATH_RE = re.compile(r"[^A-Za-z0-9\-._~%!$&'()*+=:@/]")


def _cookie_path(path: str) -> str:
    bad = _COOKIE_PATH_RE.search(path)
    return path if bad is None else path[:path.rfind("/", 0, bad.start()) + 1] or "/"


def _redirect_mark(rec: dict, mark: str, status: Any, location: Optional[str]) -> Optional[str]:
    """The Set-Cookie for the answer to a request marked by cookie (a navigation), or None.  A
    same-origin redirect carries the mark on to where it leads (the daemon takes a mark once more
    after a 3xx) in a cookie set with HttpOnly, readable by no script, living seconds, scoped to
    the redirect's path; any other answer removes the spent mark from the request's path, so that
    no page reads it after, and the SDK's next mark there is not shadowed by an HttpOnly one."""
    if rec["via"] != "cookie":
        return None
    to = urllib.parse.urlsplit(location or "")
    if isinstance(status, int) and 300 <= status < 400 and location and (
            not to.netloc or to.netloc.lower() == rec["host"].lower()):
        path = _cookie_path(urllib.parse.urljoin(rec["path"], to.path or rec["path"]))
        return "%s=%s; Path=%s; Max-Age=10; SameSite=Strict; HttpOnly" % (SERVER_MARK_COOKIE, mark[:200], path[:1024])
    return "%s=; Path=%s; Max-Age=0; SameSite=Strict" % (SERVER_MARK_COOKIE, _cookie_path(rec["path"])[:1024])


def _begin_record(mark: str, method: str, path: str, host: str, via: str, params: bool = False,
                  sent: Optional[dict] = None) -> dict:
    return {"mark": mark[:200], "method": method[:16], "path": path[:2048], "host": host[:300], "via": via,
            **(sent or {}), "status": None, "view": None,
            "ms": None, "exception": None, "logged": [], "writes": [], "statements": 0,
            "_t0": time.perf_counter(), "_pending": {}, "_params": params}


_SECRET_PARAM_RE = re.compile(r"pass|secret|token|key|auth|credential|session|cookie|csrf", re.I)


_INSERT_COLUMNS_RE = re.compile(r"^\s*INSERT\b[^(]*\(([^)]*)\)\s*VALUES", re.I | re.S)
_SET_COLUMN_RE = re.compile(r"[`\"\[]?(\w+)[`\"\]]?\s*(?:=|<>|!=|<=|>=|<|>|\bLIKE\b)\s*(?:%s|\?|:\w+|\$\d+)", re.I)


def _param_names(sql: str, n: int) -> Optional[List[str]]:
    """The column each of a statement's n positional parameters goes to, when the SQL says so
    plainly (an INSERT's column list, `col = ?` pairs), else None."""
    m = _INSERT_COLUMNS_RE.match(sql)
    names = [c.strip().strip("`\"[]") for c in m.group(1).split(",")] if m else _SET_COLUMN_RE.findall(sql)
    return names if len(names) == n else None


def _param_values(params: Any, sql: str = "") -> Optional[str]:
    """A write's parameter values as short text, only when the user asked for them: values under a
    secret-looking name (the parameter's, or the column it goes to) are redacted, every value is
    cut at 80 characters, the whole at 300."""
    if params is None:
        return None
    if isinstance(params, (list, tuple)) and params and not isinstance(params[0], (list, tuple, dict)):
        names = _param_names(sql, len(params))
        if names:
            params = dict(zip(names, params))

    def one(v: Any) -> str:
        return _scrub_server(repr(v)[:80])
    if isinstance(params, dict):
        text = ", ".join("%s=%s" % (k, "[redacted]" if _SECRET_PARAM_RE.search(str(k)) else one(v))
                         for k, v in list(params.items())[:20])
    elif isinstance(params, (list, tuple)):
        text = ", ".join(one(v) for v in list(params)[:20])
    else:
        text = one(params)
    return text[:300]


def _finish_record(rec: dict) -> dict:
    """The record as sent: duration, writes still waiting for a commit counted as not committed,
    and an exception a framework caught and logged under its 5xx promoted to `exception`."""
    rec["ms"] = round((time.perf_counter() - rec.pop("_t0")) * 1000.0, 3)
    rec.pop("_params", None)
    for writes in rec.pop("_pending").values():
        for w in writes:
            if w.get("committed") is None:
                w["committed"] = False
                w["note"] = "never committed (rolled back when the connection was released)"
    if rec["exception"] is None and (rec["status"] or 0) >= 500:
        caught = [e for e in rec["logged"] if e.get("exception")]
        if caught:
            rec["exception"] = dict(caught[-1]["exception"], handledBy=caught[-1]["logger"])
    return rec


def _note_statement(statement: Any, rows: Any, conn_key: Any, committed: Optional[bool],
                    params: Any = None) -> Optional[dict]:
    """A statement ran for the current marked request: count it, and note it when it writes.
    committed None = waiting for its transaction (kept under conn_key until commit/rollback).
    Its parameter values only when the wrapper was asked for them (params=True)."""
    rec = _current_request().get()
    if rec is None:
        return None
    rec["statements"] += 1
    w = _sql_write(statement)
    if w is None:
        return None
    if isinstance(rows, int) and rows >= 0:
        w["rows"] = rows
    if rec.get("_params") and params is not None:
        w["params"] = _param_values(params, str(statement))
    w["committed"] = committed
    if len(rec["writes"]) < 50:
        rec["writes"].append(w)
    if committed is None:
        rec["_pending"].setdefault(conn_key, []).append(w)
    return w


def _end_transaction(conn_key: Any, committed: bool) -> None:
    rec = _current_request().get()
    if rec is None:
        return
    for w in rec["_pending"].pop(conn_key, []):
        w["committed"] = committed
        if not committed:
            w["note"] = "rolled back"


def _flask_view(app: Any, environ: dict) -> Optional[str]:
    url_map = getattr(app, "url_map", None) or getattr(getattr(app, "__self__", None), "url_map", None)
    if url_map is None:
        return None
    try:
        endpoint, _ = url_map.bind_to_environ(environ).match()
        return str(endpoint)
    except Exception:  # noqa: BLE001 - a 404 or a method mismatch names no view
        return None


def wsgi(app: Callable, params: bool = False) -> Callable:
    """Wrap a WSGI app (Flask's `app.wsgi_app`, Django's WSGI handler, Bottle, Pyramid) so that
    each request a Reticle tab marked is reported to the daemon: method, path, status, view,
    duration, an uncaught exception with the app's frames, errors logged, database writes (with
    Django's middleware or watch_sqlalchemy).  An unmarked request costs a header lookup.
    Parameter values of writes are recorded only with params=True (secret-looking names redacted)."""
    reporter = _ServerReporter()
    current = _current_request()
    _install_log_capture()

    def reticle_wsgi(environ: dict, start_response: Callable) -> Any:
        """One request: unmarked (or inside another wrapper) straight through; marked, with its
        record current while the app runs, the status taken from start_response, the record queued
        when the app returns or raises."""
        mark = environ.get("HTTP_X_RETICLE_MARK")
        via = "header"
        if not mark:
            mark, via = _cookie_mark(environ.get("HTTP_COOKIE")), "cookie"
        if not mark or current.get() is not None:
            return app(environ, start_response)
        rec = _begin_record(mark, environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "") or "/",
                            environ.get("HTTP_HOST", ""), via, params, _sent_by(
                                environ.get("HTTP_SEC_FETCH_SITE"), environ.get("HTTP_ORIGIN"),
                                environ.get("HTTP_REFERER")))
        token = current.set(rec)

        def start(status: str, headers: list, exc_info: Any = None) -> Any:
            try:
                rec["status"] = int(str(status).split(" ", 1)[0])
            except ValueError:
                pass
            follow = _redirect_mark(rec, mark, rec["status"], next(
                (v for k, v in headers if str(k).lower() == "location"), None))
            headers = headers + [("Set-Cookie", follow)] if follow else headers
            return start_response(status, headers, exc_info) if exc_info is not None else \
                start_response(status, headers)
        try:
            return app(environ, start)
        except BaseException as exc:
            rec["exception"] = _exception_record(exc)
            rec["status"] = rec["status"] or 500
            raise
        finally:
            current.reset(token)
            rec["view"] = rec["view"] or _flask_view(app, environ)
            reporter.put(_finish_record(rec))

    reticle_wsgi.reticle_reporter = reporter  # type: ignore[attr-defined]
    return reticle_wsgi


def asgi(app: Callable, params: bool = False) -> Callable:
    """Wrap an ASGI app (FastAPI, Starlette, Django's ASGI handler): as wsgi(), for `http`
    scopes; websockets and lifespan pass straight through."""
    reporter = _ServerReporter()
    current = _current_request()
    _install_log_capture()

    async def reticle_asgi(scope: dict, receive: Callable, send: Callable) -> None:
        """One connection: only an `http` scope a tab marked (header, else cookie) is recorded; the
        status comes from http.response.start, the view from the route the router put in the scope."""
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        raw = cookie = None
        headers = scope.get("headers") or ()
        for name, value in headers:
            if name == b"x-reticle-mark":
                raw = value
                break
            if name == b"cookie" and b"__reticle_mark=" in value:
                cookie = value
        if raw is None and cookie is None:
            await app(scope, receive, send)
            return
        mark = raw.decode("latin-1") if raw is not None else _cookie_mark(cookie.decode("latin-1"))  # type: ignore
        if not mark or current.get() is not None:
            await app(scope, receive, send)
            return
        sent = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers
                if k in (b"host", b"sec-fetch-site", b"origin", b"referer")}
        rec = _begin_record(mark, str(scope.get("method", "GET")), str(scope.get("path", "/")), sent.get("host", ""),
                            "header" if raw is not None else "cookie", params,
                            _sent_by(sent.get("sec-fetch-site"), sent.get("origin"), sent.get("referer")))
        token = current.set(rec)

        async def sending(message: dict) -> None:
            if message.get("type") == "http.response.start":
                rec["status"] = message.get("status")
                out = list(message.get("headers") or ())
                follow = _redirect_mark(rec, mark, rec["status"], next(
                    (v.decode("latin-1") for k, v in out if bytes(k).lower() == b"location"), None))
                if follow:
                    message = dict(message, headers=out + [(b"set-cookie", follow.encode("latin-1"))])
            await send(message)
        try:
            await app(scope, receive, sending)
        except BaseException as exc:
            rec["exception"] = _exception_record(exc)
            rec["status"] = rec["status"] or 500
            raise
        finally:
            current.reset(token)
            route = scope.get("route")
            endpoint = scope.get("endpoint")
            rec["view"] = getattr(route, "name", None) or getattr(endpoint, "__name__", None)
            reporter.put(_finish_record(rec))

    reticle_asgi.reticle_reporter = reporter  # type: ignore[attr-defined]
    return reticle_asgi


class DjangoMiddleware:
    """A Django MIDDLEWARE entry ("reticle.DjangoMiddleware"): reports each marked request as
    wsgi() does, names the resolved view, and records the request's database statements through
    `connection.execute_wrapper` on every configured database.  A write inside an atomic block
    counts once its transaction commits (`on_commit`); a rolled-back one is not a write."""

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response
        self.reporter = _ServerReporter()
        self.current = _current_request()
        _install_log_capture()

    def __call__(self, request: Any) -> Any:
        """One request: unmarked straight through; marked, with its record current and every
        database's statements wrapped while the rest of the chain runs."""
        meta = request.META
        mark = meta.get("HTTP_X_RETICLE_MARK")
        via = "header"
        if not mark:
            mark, via = _cookie_mark(meta.get("HTTP_COOKIE")), "cookie"
        if not mark or self.current.get() is not None:
            return self.get_response(request)
        import contextlib
        from django.conf import settings
        from django.db import connections
        rec = _begin_record(mark, request.method or "GET", request.path, meta.get("HTTP_HOST", ""), via,
                            bool(getattr(settings, "RETICLE_SERVER_PARAMS", False)), _sent_by(
                                meta.get("HTTP_SEC_FETCH_SITE"), meta.get("HTTP_ORIGIN"), meta.get("HTTP_REFERER")))
        token = self.current.set(rec)
        try:
            with contextlib.ExitStack() as stack:
                for conn in connections.all():
                    stack.enter_context(conn.execute_wrapper(_django_statement))
                response = self.get_response(request)
            rec["status"] = response.status_code
            follow = _redirect_mark(rec, mark, rec["status"], response.get("Location"))
            if follow:
                response.cookies.load(follow)
            return response
        except BaseException as exc:
            rec["exception"] = rec["exception"] or _exception_record(exc)
            rec["status"] = 500
            raise
        finally:
            self.current.reset(token)
            match = getattr(request, "resolver_match", None)
            rec["view"] = rec["view"] or (getattr(match, "view_name", None) if match is not None else None)
            self.reporter.put(_finish_record(rec))

    def process_view(self, request: Any, view_func: Any, view_args: Any, view_kwargs: Any) -> None:
        rec = self.current.get()
        if rec is not None:
            cls = getattr(view_func, "view_class", None)
            rec["view"] = getattr(cls or view_func, "__name__", None)
        return None

    def process_exception(self, request: Any, exception: BaseException) -> None:
        rec = self.current.get()
        if rec is not None:
            rec["exception"] = _exception_record(exception)
        return None


def _django_statement(execute: Callable, sql: Any, params: Any, many: bool, context: dict) -> Any:
    """execute_wrapper: run the statement, then note it (a write waits for its atomic block's commit)."""
    result = execute(sql, params, many, context)
    try:
        conn: Any = context.get("connection")
        cursor: Any = context.get("cursor")
        rows = getattr(cursor, "rowcount", None)
        pending = bool(getattr(conn, "in_atomic_block", False))
        w = _note_statement(sql, rows, id(conn), None if pending else True, params)
        if w is not None and pending:
            def committed(w: dict = w) -> None:
                w["committed"] = True
            try:
                conn.on_commit(committed)
            except Exception:  # noqa: BLE001 - manual transaction management: whether it commits is unknown
                w["note"] = "in a manually managed transaction"
    except Exception:  # noqa: BLE001 - recording must never break the app's query
        pass
    return result


def watch_sqlalchemy(engine: Any) -> Any:
    """Record the database writes of marked requests made through this SQLAlchemy engine (its
    event API): statement kind, table, rows where the driver says, commit or rollback.  A write
    counts once its transaction commits; one rolled back, or never committed, is not a write."""
    from sqlalchemy import event

    def after(conn: Any, cursor: Any, statement: Any, parameters: Any, context: Any, executemany: bool) -> None:
        try:
            autocommit = False
            try:
                autocommit = conn.get_isolation_level() == "AUTOCOMMIT"
            except Exception:  # noqa: BLE001
                pass
            named = getattr(context, "compiled_parameters", None)  # the binds by name, where SQLAlchemy compiled them
            if named and len(named) == 1 and isinstance(named[0], dict) and not executemany:
                parameters = named[0]
            _note_statement(statement, getattr(cursor, "rowcount", None), id(conn.connection.dbapi_connection),
                            True if autocommit else None, parameters)
        except Exception:  # noqa: BLE001 - recording must never break the app's query
            pass

    def ended(committed: bool) -> Callable:
        def on_end(conn: Any) -> None:
            try:
                _end_transaction(id(conn.connection.dbapi_connection), committed)
            except Exception:  # noqa: BLE001
                pass
        return on_end

    event.listen(engine, "after_cursor_execute", after)
    event.listen(engine, "commit", ended(True))
    event.listen(engine, "rollback", ended(False))
    return engine


# -- the daemon's side: stitch records into the tab whose mark they carry ------------------------

def _clean_server_record(raw: Any) -> Optional[dict]:
    """A record from the middleware, kept to its known fields with their types and caps, or None."""
    if not isinstance(raw, dict) or not isinstance(raw.get("mark"), str):
        return None
    m = _MARK_RE.match(raw["mark"])
    if m is None:
        return None

    def text(v: Any, cap: int) -> Optional[str]:
        return v[:cap] if isinstance(v, str) else None

    def exc(v: Any) -> Optional[dict]:
        if not isinstance(v, dict):
            return None
        frames = [f[:300] for f in v.get("frames") or [] if isinstance(f, str)][:5]
        out = {"type": text(v.get("type"), 120) or "Exception", "message": text(v.get("message"), 300) or "",
               "frames": frames}
        if isinstance(v.get("handledBy"), str):
            out["handledBy"] = v["handledBy"][:120]
        return out
    status = raw.get("status")
    # only the secret counts: the document and request a record lands under are the ones the daemon
    # issued that secret to (_ServerTickets), never what a sender appends to it
    rec: Dict[str, Any] = {"mark": m.group(1), "site": text(raw.get("site"), 20), "from": text(raw.get("from"), 300),
           "method": (text(raw.get("method"), 16) or "").upper(), "path": text(raw.get("path"), 2048) or "/",
           "host": text(raw.get("host"), 300) or "", "via": "cookie" if raw.get("via") == "cookie" else "header",
           "status": status if isinstance(status, int) and not isinstance(status, bool) else None,
           "view": text(raw.get("view"), 200),
           "ms": raw.get("ms") if isinstance(raw.get("ms"), (int, float)) else None,
           "exception": exc(raw.get("exception")),
           "statements": raw.get("statements") if isinstance(raw.get("statements"), int) else 0}
    logged = []
    given = raw.get("logged")
    for e in given[:20] if isinstance(given, list) else []:
        if isinstance(e, dict):
            entry: Dict[str, Any] = {"logger": text(e.get("logger"), 120) or "",
                                     "level": text(e.get("level"), 16) or "ERROR",
                                     "message": text(e.get("message"), 300) or ""}
            if exc(e.get("exception")):
                entry["exception"] = exc(e.get("exception"))
            logged.append(entry)
    rec["logged"] = logged
    writes = []
    given = raw.get("writes")
    for w in given[:50] if isinstance(given, list) else []:
        if isinstance(w, dict) and w.get("op") in ("insert", "update", "delete"):
            writes.append({"op": w["op"], "table": text(w.get("table"), 200) or "",
                           "rows": w.get("rows") if isinstance(w.get("rows"), int) else None,
                           "committed": w.get("committed") if isinstance(w.get("committed"), bool) else None,
                           "sql": text(w.get("sql"), SERVER_SQL_CAP + 1) or "", "note": text(w.get("note"), 120),
                           "params": text(w.get("params"), 300)})
    rec["writes"] = writes
    return rec


class _ServerTickets:
    """The one-use marks the daemon issued one tab: secret -> [document, id, void after (ms) or None].
    The SDK puts one on each request of its document the server may see (a header, or for a
    navigation a cookie that lives seconds); a record carrying it lands under that document and id,
    once.  A document's marks stay good until the tab moves to another document, then for
    SERVER_TICKET_AFTER_MS (its last requests' records are still on their way)."""

    def __init__(self) -> None:
        self.live: "collections.OrderedDict[str, List[Any]]" = collections.OrderedDict()
        self.issued = 0
        self.doc: Optional[str] = None

    def issue(self, doc: str, now: float) -> List[List[str]]:
        """SERVER_TICKETS new [id, secret] pairs for document `doc`; the other documents' marks start to expire."""
        if doc != self.doc:
            for ticket in self.live.values():
                if ticket[0] != doc and ticket[2] is None:
                    ticket[2] = now + SERVER_TICKET_AFTER_MS
            self.doc = doc
        out = []
        for _ in range(SERVER_TICKETS):
            self.issued += 1
            secret, tid = secrets.token_hex(16), "m%d" % self.issued
            self.live[secret] = [doc, tid, None]
            out.append([tid, secret])
        while len(self.live) > SERVER_TICKETS_KEPT:
            self.live.popitem(last=False)
        return out

    def holds(self, secret: str, now: float) -> bool:
        ticket = self.live.get(secret)
        return ticket is not None and (ticket[2] is None or now < ticket[2])

    def take(self, secret: str, again_until: Optional[float] = None) -> Tuple[str, str]:
        """(document, id) of a held mark, which is then spent, or with again_until, good for one
        more request until then (the request its redirect leads to)."""
        doc, tid, _ = self.live.pop(secret)
        if again_until is not None:
            self.live[secret] = [doc, tid, again_until]
        return doc, tid


def _server_sender_refused(rec: dict, owner: "_BrowserSession") -> Optional[str]:
    """Why a record's request is not its tab's own, or None.  The browser says who sent a request
    (Sec-Fetch-Site, Origin, Referer; no page can set them): only the tab's own origin, or the user,
    counts.  A page on another port of the same host can read a navigation's cookie mark (cookies
    ignore ports) and send it along, but its requests are `same-site`, or carry its own origin."""
    tab = urllib.parse.urlsplit(owner.url)
    origin = "%s://%s" % (tab.scheme, tab.netloc)
    site, sender = rec.pop("site"), rec.pop("from")
    if rec["via"] == "cookie" and rec["host"].lower() != tab.netloc.lower():
        return "a cookie mark on a request to another host than the tab's (%s)" % rec["host"]
    if site:
        return None if site in SERVER_TICKET_SITES else "a request sent by a %s page (Sec-Fetch-Site)" % site
    if sender:
        return None if sender.lower() == origin.lower() else "a request sent by %s" % sender
    return "a cookie mark on a request whose sender the browser did not name" if rec["via"] == "cookie" else None


def _stitch_server_records(hub: "Hub", body: Any) -> dict:
    """Put each record into the window of the tab that was issued its mark, under the document and
    id the mark was issued for, once.  A mark no tab holds (a request made outside any Reticle tab,
    a stale tab, a mark already spent) is counted as unmatched; a request the tab's own document did
    not send (another origin replaying a mark) is refused, counted, and spends nothing."""
    if not isinstance(body, dict) or not isinstance(body.get("records"), list):
        raise _HttpRefusal(400, "bad request", "expected a JSON object {records: [...], dropped?: int}")
    records = body["records"]
    if len(records) > SERVER_MAX_RECORDS:
        raise _HttpRefusal(413, "payload too large", "at most %d records per POST" % SERVER_MAX_RECORDS)
    sessions = list(hub.bridge.sessions.values()) + [s for s, _ in hub.bridge.departed.values()]
    stats = hub.server_truth
    dropped = body.get("dropped")
    if isinstance(dropped, int) and not isinstance(dropped, bool) and dropped > 0:
        stats["droppedByApps"] += dropped
        stats["lastDropAt"] = hub.clock()
    stitched = unmatched = invalid = refused = 0
    now = hub.clock()
    for raw in records:
        rec = _clean_server_record(raw)
        if rec is None:
            invalid += 1
            continue
        secret = rec.pop("mark")
        owner = next((s for s in sessions if s.server_tickets.holds(secret, now)), None)
        if owner is None:
            unmatched += 1
            continue
        why = _server_sender_refused(rec, owner)
        if why is not None:
            refused += 1
            stats["lastRefused"] = "%s %s: %s" % (rec["method"], rec["path"][:200], why)
            continue
        redirected = rec["via"] == "cookie" and 300 <= (rec["status"] or 0) < 400
        rec["documentId"], rec["requestId"] = owner.server_tickets.take(
            secret, now + SERVER_REDIRECT_MS if redirected else None)
        owner.add_server_record(rec)
        stitched += 1
    stats["received"] += len(records)
    stats["stitched"] += stitched
    stats["unmatched"] += unmatched
    stats["invalid"] += invalid
    stats["refused"] += refused
    return {"stitched": stitched, "unmatched": unmatched, "invalid": invalid, "refused": refused}


###############################################################################
# HTTP handlers ###############################################################
###############################################################################


class _Guard:
    """The two-tier authorization of DESIGN section 5, for every route."""

    def __init__(self, hub: "Hub") -> None:
        self.hub = hub
        self.failures = _RateLimiter(*AUTH_FAIL_RATE)  # wrong tokens, per peer address

    def presented_token(self, request: Any) -> Optional[str]:
        scheme, _, value = request.headers.get("Authorization", "").strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():  # auth schemes are case-insensitive (RFC 9110)
            return value.strip()
        values = request.query_arguments.get("token")
        if values:
            return values[-1].decode("utf-8", "replace")
        return None

    def token_attempt(self, peer: str, presented: Optional[str]) -> bool:
        """token_ok, with wrong guesses limited per `peer` (_guess_key: the address, and the page of a
        browser) (AUTH_FAIL_RATE).

        Raises a 429 refusal while the peer is over its budget of wrong
        guesses, whatever it presents, so the token cannot be brute-forced."""
        if not presented:
            return False  # nothing guessed: the loopback tier still decides
        wait = self.failures.peek(peer)
        if wait is not None:
            raise _HttpRefusal(429, "too many wrong tokens",
                               "this address presented too many wrong tokens (more than %g, then %g/s); retry "
                               "after %.2f s" % (self.failures.burst, self.failures.rate, wait),
                               {"Retry-After": str(max(1, int(wait + 0.999)))})
        if self.token_ok(presented):
            return True
        self.failures.check(peer)
        return False

    def token_ok(self, presented: Optional[str]) -> bool:
        expected = self.hub.token()
        if not presented or not expected:
            return False
        a = presented.encode("utf-8")
        b = expected.encode("utf-8")
        return len(a) == len(b) and hmac.compare_digest(a, b)

    def loopback_problem(self, request: Any, allowed_origins: Tuple[str, ...] = ()) -> Optional[str]:
        """None when the loopback tier holds, else what failed, in words."""
        peer = request.remote_ip or ""
        if not _is_loopback_host(peer):
            return "the peer address %s is not loopback" % peer
        raw_host = request.headers.get("Host")
        host = _split_host_header(raw_host)
        if not _is_loopback_host(host):
            return ("the Host header %s does not name a loopback host"
                    % (repr(raw_host) if raw_host else "is missing and"))
        for name in ("Origin", "Referer"):
            value = request.headers.get(name)
            if value is None:
                continue
            if allowed_origins and _normalise_origin(value) in allowed_origins:
                continue
            if not _is_loopback_host(_origin_host(value)):
                return "the %s header %r is not a loopback page" % (name, value)
        site = (request.headers.get("Sec-Fetch-Site") or "").strip().lower()
        if site in ("cross-site", "same-site") and request.headers.get("Origin") is None and \
                request.headers.get("Referer") is None:
            # a browser says where a request comes from even when the page withholds Origin and
            # Referer (referrerpolicy="no-referrer"): a page of another site, unnamed, is not a loopback page
            return "a %s browser request with no Origin and no Referer is not from a known loopback page" % site
        return None

    def check_http(self, request: Any, allowed_origins: Tuple[str, ...] = ()) -> None:
        problem = self.loopback_problem(request, allowed_origins)
        if problem is None:
            return
        presented = self.presented_token(request)
        if self.token_attempt(_guess_key(request), presented):
            return
        detail = "%s; requests that are not from a loopback client with loopback Host and Origin " \
                 "need the pairing token (Authorization: Bearer <token> or ?token=)" % problem
        if presented:
            detail = "the presented token is wrong, and " + detail
        raise _HttpRefusal(403, "forbidden", detail)

    def ws_origin_allowed(self, origin: Optional[str]) -> bool:
        if origin is None:
            return True  # no Origin: not a browser page; the hello must carry the token
        if _normalise_origin(origin) in self.hub.allowed_origins:
            return True
        return _is_loopback_host(_origin_host(origin))


def _guess_key(request: Any) -> str:
    """Whose wrong token guesses a request counts as: its peer address and, for a browser, the page
    that sent it (its Origin, else what Sec-Fetch-Site says).  Every local browser is 127.0.0.1:
    a hostile page's wrong guesses must lock out that page, not the right token of everyone else."""
    peer = request.remote_ip or ""
    origin = request.headers.get("Origin")
    if origin is not None:
        return "%s|page %s" % (peer, _short(origin, 200))
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        referer = request.headers.get("Referer")
        return "%s|browser %s %s" % (peer, _short(site, 20), _origin_of(referer) if referer else "")
    return "%s|client" % peer


class _RateLimiter:
    """Token bucket per session key."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: Dict[str, List[float]] = {}

    def check(self, key: str, cost: float = 1.0, scale: float = 1.0) -> Optional[float]:
        """None when `cost` requests are allowed now (and counted), else the
        seconds until they would be (and nothing is counted).  `scale` multiplies
        the rate and the burst (a bucket shared by many clients)."""
        now = time.monotonic()
        rate, burst = self.rate * scale, self.burst * scale
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) > 10000:
                self._buckets.clear()
            bucket = self._buckets[key] = [burst, now]
        tokens = min(burst, bucket[0] + (now - bucket[1]) * rate)
        bucket[1] = now
        need = min(cost, burst)  # a cost above the burst runs into debt rather than never
        if tokens >= need:
            bucket[0] = tokens - cost
            return None
        bucket[0] = tokens
        return (need - tokens) / rate

    def peek(self, key: str) -> Optional[float]:
        """None when one request would be allowed now, else the wait; counts nothing."""
        bucket = self._buckets.get(key)
        if bucket is None:
            return None
        tokens = min(self.burst, bucket[0] + (time.monotonic() - bucket[1]) * self.rate)
        return None if tokens >= 1.0 else (1.0 - tokens) / self.rate


def _log_handler_exception(handler: tornado.web.RequestHandler, typ: Any, value: Any, tb: Any) -> None:
    """One JSON log line naming the path, never the query (it may hold ?token=),
    instead of Tornado's line with the whole URI."""
    if isinstance(value, tornado.web.HTTPError):
        _emit(_log, logging.INFO, "http_error", status=value.status_code, method=handler.request.method,
              path=handler.request.path)
        return
    _log.error("http_uncaught_exception", exc_info=(typ, value, tb),
               extra={"fields": {"method": handler.request.method, "path": handler.request.path,
                                 "peer": handler.request.remote_ip}})


class _AnyMethod(tuple):
    """SUPPORTED_METHODS that lets every method reach prepare(), so that the
    guard and the rate limiter see TRACE and friends before the 405."""

    def __contains__(self, method: object) -> bool:
        return True


_HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


def _implemented_methods(handler: tornado.web.RequestHandler) -> Tuple[str, ...]:
    """The standard methods a handler class defines itself, for Allow."""
    return tuple(m for m in _HTTP_METHODS
                 if getattr(type(handler), m.lower(), None) is not getattr(tornado.web.RequestHandler, m.lower()))


@tornado.web.stream_request_body
class _BaseHandler(tornado.web.RequestHandler):
    """Guard, limits and JSON errors for every HTTP route and every method.

    prepare() runs the guard, then the rate limiter, then answers 405 (with
    Allow) for a method the route does not serve, in that order, so that a
    hostile request is refused the same way whatever its method.  A refusal
    sent before the body was read closes the connection and says so."""

    SUPPORTED_METHODS = _AnyMethod(_HTTP_METHODS)
    allow_listed_origins = False  # /reticle.js also admits RETICLE_ALLOWED_ORIGINS pages
    _body_timer: Any = None
    _work: Optional["asyncio.Task"] = None

    def initialize(self, hub: "Hub") -> None:
        self.hub = hub

    def allowed_methods(self) -> Tuple[str, ...]:
        return _implemented_methods(self)

    def method_refusal(self) -> Optional[_HttpRefusal]:
        """A 405 for a method this route does not serve, else None."""
        if self.request.method in _implemented_methods(self):
            return None
        allow = ", ".join(self.allowed_methods())
        return _HttpRefusal(405, "method not allowed", "%s %s is not served; this route allows %s"
                            % (self.request.method, self.request.path, allow), {"Allow": allow})

    def media_type_refusal(self) -> Optional[_HttpRefusal]:
        """A 415 for a POST/PUT/PATCH whose body is not declared application/json.  A page may send
        text/plain, a form or a typeless Blob to any origin without a CORS preflight; it can send
        application/json only after one, which this daemon never grants."""
        if self.request.method not in ("POST", "PUT", "PATCH"):
            return None
        headers = self.request.headers
        if headers.get("Content-Length", "0").strip() == "0" and "Transfer-Encoding" not in headers:
            return None  # no body at all: nothing a page could smuggle
        declared = self.request.headers.get("Content-Type", "")
        if declared.split(";", 1)[0].strip().lower() == "application/json":
            return None
        return _HttpRefusal(415, "unsupported media type", "%s %s needs Content-Type: application/json (got %s)"
                            % (self.request.method, self.request.path, _short(declared, 80) if declared else "none"))

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.clear_header("Server")

    def verified_session_id(self) -> Optional[str]:
        """The request's Mcp-Session-Id when this machine signed it (checked once per request)."""
        if not hasattr(self, "_verified_sid"):
            sid = self.request.headers.get("Mcp-Session-Id")
            self._verified_sid = sid if sid and self.hub.signer.verify(sid) else None
        return self._verified_sid

    def session_key(self) -> str:
        sid = self.verified_session_id()
        if sid:
            return sid
        sse = self.get_query_argument("sessionId", None)
        if sse and sse in self.hub.sse_streams:
            return "sse:" + sse
        # Without a session, each connection is a client of its own: every local client has the
        # same peer address, and one flooding it must not lock out `reticle status` or a new client.
        address = getattr(getattr(self.request.connection, "context", None), "address", None)
        if isinstance(address, tuple) and len(address) >= 2:
            return "conn:%s:%s" % (address[0], address[1])
        return "addr:%s" % self.request.remote_ip

    async def prepare(self) -> None:
        self._chunks: List[bytes] = []
        self._size = 0
        self._body_timer = None
        try:
            self.hub.guard.check_http(self.request, self.hub.allowed_origins if self.allow_listed_origins else ())
            self.charge(1)
            refusal = self.method_refusal() or self.media_type_refusal()
            if refusal is not None:
                raise refusal
            length = self.request.headers.get("Content-Length")
            if length is not None:
                if not length.isdigit():
                    raise _HttpRefusal(400, "bad request", "Content-Length %r is not a number" % length)
                if int(length) > MAX_BODY_BYTES:
                    raise _HttpRefusal(413, "payload too large", "the body is %s bytes; at most %d are accepted"
                                       % (length, MAX_BODY_BYTES))
        except _HttpRefusal as refusal:
            if getattr(self, "_tarpit", False):
                await asyncio.sleep(SESSIONLESS_TARPIT_S)  # a flood of new connections waits its turn
            self.refuse(refusal, close=True)
            return
        if self.request.method in ("POST", "PUT", "PATCH"):
            self._body_timer = tornado.ioloop.IOLoop.current().call_later(BODY_TIMEOUT_S, self._body_too_slow)

    def charge(self, cost: int) -> None:
        """Count `cost` requests against this session key; a 429 refusal when over."""
        key = self.session_key()
        wait = self.hub.limiter.check(key, cost)
        if wait is None and key.startswith("conn:"):
            # every client without a session also shares SESSIONLESS_SCALE x the rate: new
            # connections are not a way around the limit
            wait = self.hub.limiter.check("sessionless", cost, SESSIONLESS_SCALE)
            if wait is not None:
                self._tarpit = True
        if wait is not None:
            raise _HttpRefusal(429, "rate limited",
                               "more than %g requests/s (burst %g) for this session; a batch counts each of "
                               "its messages; retry after %.2f s" % (self.hub.limiter.rate, self.hub.limiter.burst,
                                                                      wait),
                               {"Retry-After": str(max(1, int(wait + 0.999)))})

    def data_received(self, chunk: bytes) -> Optional[Awaitable[None]]:
        if self._finished:
            return None
        self._size += len(chunk)
        if self._size > MAX_BODY_BYTES:
            self.refuse(_HttpRefusal(413, "payload too large", "the body is over %d bytes" % MAX_BODY_BYTES),
                        close=True)
            return None
        self._chunks.append(chunk)
        if self._size > BULK_BODY_AFTER:
            # Bulk bodies (a 4 MiB batch) share BULK_BODY_BYTES_S: past it, this connection is not
            # read until the second ends, so that a flood of big bodies (a new session for each)
            # cannot take the event loop from the small requests of every other client.
            window, now = self.hub.bulk_window, time.monotonic()
            if now - window[0] >= 1.0:
                window[0], window[1] = now, 0
            window[1] += min(len(chunk), self._size - BULK_BODY_AFTER)
            if window[1] > BULK_BODY_BYTES_S:
                return asyncio.sleep(max(0.0, 1.0 - (now - window[0])))
        return None

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if not self._finished:
            self.refuse(_HttpRefusal(408, "request timeout",
                                     "the request body was not complete within %g s" % BODY_TIMEOUT_S), close=True)

    def body(self) -> bytes:
        if self._body_timer is not None:
            tornado.ioloop.IOLoop.current().remove_timeout(self._body_timer)
            self._body_timer = None
        return b"".join(self._chunks)

    def refuse(self, refusal: _HttpRefusal, close: bool = False) -> None:
        """Answer JSON {error, detail}.  close: refused before the body was read
        (prepare, an oversize or slow body), so the connection cannot be reused:
        say `Connection: close` and close it."""
        if self._finished:
            return
        self.clear()
        self.set_status(refusal.status)
        for k, v in refusal.headers.items():
            self.set_header(k, v)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        if close:
            self.set_header("Connection", "close")
            if isinstance(self.request.connection, tornado.http1connection.HTTP1Connection):
                self.request.connection.no_keep_alive = True
        _emit(_log, logging.INFO, "http_refused", status=refusal.status, method=self.request.method,
              path=self.request.path, peer=self.request.remote_ip, detail=refusal.detail)
        self.finish(_dumps({"error": refusal.error, "detail": refusal.detail}))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "application/json; charset=utf-8")
        detail = self._reason
        if self.settings.get("serve_traceback") and "exc_info" in kwargs:
            import traceback
            detail = "".join(traceback.format_exception(*kwargs["exc_info"]))
        self.finish(_dumps({"error": self._reason.lower(), "detail": detail}))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        _log_handler_exception(self, typ, value, tb)

    async def run_cancellable(self, coro: Awaitable) -> Tuple[bool, Any]:
        """Run coro as a task that on_connection_close cancels, so that a client
        that hangs up does not leave its call running to the end.
        -> (False, None) when it was cancelled so, else (True, its result)."""
        work = self._work = asyncio.ensure_future(coro)
        try:
            await asyncio.wait({work})
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            self._work = None
        if work.cancelled():
            return False, None
        return True, work.result()

    def on_connection_close(self) -> None:
        super().on_connection_close()  # fails a body still arriving, so the handler ends
        if self._work is not None:
            _emit(_log, logging.INFO, "mcp_call_cancelled", path=self.request.path, reason="client disconnected")
            self._work.cancel()

    def on_finish(self) -> None:
        if self._body_timer is not None:
            tornado.ioloop.IOLoop.current().remove_timeout(self._body_timer)
            self._body_timer = None

    def send_json(self, obj: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(_dumps(obj))


class _NotFoundHandler(_BaseHandler):
    """Every unknown path, whatever the method: a JSON 404 (after the guard)."""

    def _not_found(self, *args: Any) -> None:
        self.send_json({"error": "not found", "detail": "no route %s %s; see /openapi.json"
                        % (self.request.method, self.request.path)}, 404)

    def method_refusal(self) -> Optional[_HttpRefusal]:
        if self.request.method in _HTTP_METHODS:
            return None
        return _HttpRefusal(404, "not found", "no route %s %s; see /openapi.json"
                            % (self.request.method, self.request.path))

    get = post = put = delete = patch = head = options = _not_found


class _StatusHandler(_BaseHandler):
    def get(self) -> None:
        self.send_json(self.hub.status())


class _OpenApiHandler(_BaseHandler):
    def get(self) -> None:
        self.send_json(_openapi(self.hub))


class _SdkHandler(_BaseHandler):
    """GET /reticle.js: the in-page SDK (no token inside, ever)."""

    allow_listed_origins = True

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Content-Type-Options", "nosniff")

    def get(self) -> None:
        self.set_header("Content-Type", "application/javascript; charset=utf-8")
        self.write(self.hub.sdk_source())


class _StopHandler(_BaseHandler):
    """POST /stop: a planned stop; needs the token even from loopback."""

    def post(self) -> None:
        guard = self.hub.guard
        try:
            ok = guard.token_attempt(_guess_key(self.request), guard.presented_token(self.request))
        except _HttpRefusal as refusal:
            self.refuse(refusal)
            return
        if not ok:
            self.refuse(_HttpRefusal(403, "forbidden", "stopping the daemon needs the pairing token "
                                     "(Authorization: Bearer <token>); `reticle stop` sends it"))
            return
        self.send_json({"stopping": True, "pid": os.getpid()}, 202)
        self.hub.request_stop("stop requested")


class _ServerRecordsHandler(_BaseHandler):
    """POST /server-records: what the app's middleware saw (Server truth).  Past the guard, the
    pairing token is required even from loopback: records from a process that cannot
    authenticate are refused, so no page or stranger can write server truth into a tab."""

    def post(self) -> None:
        guard = self.hub.guard
        try:
            ok = guard.token_attempt(self.request.remote_ip or "", guard.presented_token(self.request))
            if not ok:
                raise _HttpRefusal(403, "forbidden", "server records need the pairing token (Authorization: Bearer "
                                   "<token>); the middleware reads RETICLE_TOKEN or the state directory's token file")
            try:
                body = _loads(self.body().decode("utf-8", "replace"))
            except ValueError as exc:
                raise _HttpRefusal(400, "bad request", "the body is not JSON: %s" % exc) from None
            self.send_json(_stitch_server_records(self.hub, body))
        except _HttpRefusal as refusal:
            self.refuse(refusal)


if TYPE_CHECKING:
    _SseHost = _BaseHandler  # the mixin is only ever mixed into a _BaseHandler: the handler API it uses
else:
    _SseHost = object


class _SseMixin(_SseHost):
    """Server-Sent Events on a held-open GET."""

    _sse_closed: asyncio.Event
    _sse_shutdown: Optional[str]

    def streams_full(self) -> bool:
        """Refuse (503, Retry-After) a stream beyond MAX_SSE_STREAMS: each one holds a descriptor."""
        held = len(self.hub.sse_streams) + len(self.hub.get_streams)
        if held < MAX_SSE_STREAMS:
            return False
        refusal = _HttpRefusal(503, "too many streams", "%d event streams are open, the most this daemon "
                               "holds; close one or retry later" % held, {"Retry-After": "5"})
        self.refuse(refusal)
        return True

    def sse_open(self) -> None:
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache, no-transform")
        self.set_header("Connection", "keep-alive")
        self.set_header("X-Accel-Buffering", "no")
        self._sse_closed = asyncio.Event()
        self._sse_shutdown = None

    def _sse_gone(self) -> bool:
        """The client's side of the stream is closed (tornado serves a held GET on an HTTP/1 connection)."""
        conn = self.request.connection
        return not isinstance(conn, tornado.http1connection.HTTP1Connection) or conn.stream.closed()

    async def sse_write(self, text: str) -> bool:
        """Write one frame; False (and nothing written) once the stream is gone."""
        if self._finished or self._sse_gone():
            self._sse_closed.set()
            return False
        try:
            self.write(text)
            await self.flush()
            return True
        except tornado.iostream.StreamClosedError:
            self._sse_closed.set()
            return False

    async def sse_hold(self) -> None:
        """Keep the stream open with comment keepalives until closed or stopped."""
        while not self._sse_closed.is_set():
            try:
                await asyncio.wait_for(self._sse_closed.wait(), self.hub.keepalive_s)
            except asyncio.TimeoutError:
                await self.sse_write(": keepalive\n\n")
        if self._sse_shutdown is not None and not self._sse_gone():
            await self.sse_write("event: shutdown\ndata: %s\n\n" % _dumps({"reason": self._sse_shutdown}))
        if not self._finished and not self._sse_gone():
            self.finish()

    def sse_stop(self, reason: str) -> None:
        self._sse_shutdown = reason
        self._sse_closed.set()

    def on_connection_close(self) -> None:
        closed = getattr(self, "_sse_closed", None)
        if closed is not None:
            closed.set()
        super().on_connection_close()


class _SseHandler(_SseMixin, _BaseHandler):
    """GET /mcp/sse: one MCP session per stream (seeds/http-transport.md)."""

    async def get(self) -> None:
        """GET /mcp/sse: the legacy SSE transport.  Refused (503) while MCP is not ready and past
        MAX_SSE_STREAMS; else the endpoint frame, then replies and keepalives until the client hangs up,
        which cancels the session's calls in flight and closes the device it owned."""
        if not self.hub.mcp_ready:
            self.refuse(_HttpRefusal(503, "MCP server not ready",
                                     "the daemon is up but not serving MCP yet (or is stopping); retry"))
            return
        if self.streams_full():
            return
        self.sse_open()
        self.sse_id = str(uuid.uuid4())
        self.ctx = _CallContext("sse", "sse:" + self.sse_id, notify=self.deliver)
        self.calls: set = set()  # this session's calls in flight, cancelled when the stream drops
        self.hub.sse_streams[self.sse_id] = self
        _emit(_log, logging.INFO, "mcp_client_connected", transport="sse", session=self.sse_id)
        try:
            if await self.sse_write("event: endpoint\ndata: /mcp/message?sessionId=%s\n\n" % self.sse_id):
                await self.sse_hold()
        finally:
            self.hub.sse_streams.pop(self.sse_id, None)
            own = self.hub.devices.owned_by(self.ctx.session_key)
            if own is not None:  # an SSE client that hung up is gone for good: so is its device
                self.hub.spawn(self.hub.devices.close(own, "its MCP client's stream closed"))
            for task in list(self.calls):
                task.cancel()
            if self.calls:
                _emit(_log, logging.INFO, "mcp_call_cancelled", transport="sse", session=self.sse_id,
                      calls=len(self.calls), reason="the stream closed")
            _emit(_log, logging.INFO, "mcp_client_disconnected", transport="sse", session=self.sse_id)

    async def deliver(self, message: Any) -> None:
        await self.sse_write("event: message\ndata: %s\n\n" % _dumps(message))


class _SseMessageHandler(_BaseHandler):
    """POST /mcp/message?sessionId=: 202 now, the reply on the stream."""

    async def post(self) -> None:
        """POST /mcp/message?sessionId=...: one JSON-RPC message for an open SSE session, accepted with
        202 and answered on that session's stream.  A missing or unknown session, a stopping daemon or a
        body that is not one JSON object is refused with the status that says which."""
        sid = self.get_query_argument("sessionId", None)
        if not sid:
            self.refuse(_HttpRefusal(400, "missing sessionId",
                                     "POST to the path of the endpoint frame that GET /mcp/sse sent first"))
            return
        stream = self.hub.sse_streams.get(sid)
        if stream is None:
            self.refuse(_HttpRefusal(404, "session not found",
                                     "that SSE session is not open (the stream dropped?); reconnect to "
                                     "/mcp/sse and handshake again"))
            return
        if not self.hub.mcp_ready:
            self.refuse(_HttpRefusal(503, "MCP server not ready", "the daemon is stopping; retry shortly"))
            return
        try:
            message = _loads(self.body())
        except ValueError as exc:
            # Answered twice: 400 here, and the JSON-RPC parse error on the stream, where a
            # client matching replies by id is waiting.
            self.refuse(_HttpRefusal(400, "invalid JSON", "the body is not JSON (%s); send one JSON-RPC "
                                     "message per POST" % exc))
            self._track(stream, stream.deliver(_rpc_error(None, -32700, "Parse error: %s" % exc)))
            return
        if not isinstance(message, dict):
            self.refuse(_HttpRefusal(400, "invalid message", "send one JSON-RPC message (an object) per POST"))
            return
        self.set_status(202)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish("Accepted")
        self._track(stream, self._answer(stream, message))

    def _track(self, stream: _SseHandler, coro: Awaitable) -> None:
        task = self.hub.spawn(coro)
        stream.calls.add(task)
        task.add_done_callback(stream.calls.discard)

    async def _answer(self, stream: _SseHandler, message: dict) -> None:
        reply = await self.hub.dispatcher.handle(message, stream.ctx)
        if reply is not None:
            await stream.deliver(reply)


class _StreamableHandler(_SseMixin, _BaseHandler):
    """POST/GET/DELETE /mcp and POST/GET / (seeds/http-mcp-streamable.md)."""

    def initialize(self, hub: "Hub", root: bool = False) -> None:
        self.hub = hub
        self.root = root

    def _session(self, required: bool) -> Tuple[bool, Optional[str]]:
        sid = self.request.headers.get("Mcp-Session-Id")
        if sid is None:  # present but empty is an id this machine did not issue: 404 below
            if required:
                self.refuse(_HttpRefusal(400, "missing Mcp-Session-Id",
                                         "GET %s needs the Mcp-Session-Id header that initialize returned"
                                         % self.request.path))
                return False, None
            return True, None
        if self.verified_session_id() is None:
            self.refuse(_HttpRefusal(404, "MCP_SESSION_UNKNOWN",
                                     "this machine did not issue that Mcp-Session-Id; initialize again "
                                     "without it"))
            return False, None
        return True, sid

    async def post(self) -> None:
        """POST /mcp: the Streamable HTTP transport.  A message or batch (at most MAX_BATCH; a larger one
        is refused unparsed, and each extra message is charged to the rate limit) is answered as JSON, or
        as an SSE stream of progress then the reply when the client asked for progress and accepts it.
        A successful initialize without a session id gets a new signed one in Mcp-Session-Id."""
        ok, sid = self._session(required=False)
        if not ok:
            return
        body = self.body()
        many = _batch_over_limit(body)
        if many:
            # refused before it is parsed: parsing 4 MiB of messages that will not run would hold
            # the event loop, and every other client, for a third of a second
            try:
                self.charge(MAX_BATCH)
            except _HttpRefusal as refusal:
                self.refuse(refusal)
                return
            self.send_json(_rpc_error(None, -32600, "Invalid Request: a batch holds at most %d messages; this one "
                                                    "holds more (%s), so none ran" % (MAX_BATCH, many)))
            return
        try:
            payload = _loads(body)
        except ValueError as exc:
            self.send_json(_rpc_error(None, -32700, "Parse error: %s" % exc))
            return
        if isinstance(payload, list) and len(payload) > 1:
            try:
                self.charge(min(len(payload), MAX_BATCH + 1) - 1)  # prepare() counted the first
            except _HttpRefusal as refusal:
                self.refuse(refusal)
                return
        ctx = _CallContext("streamable-http", sid or "addr:%s" % self.request.remote_ip)
        if sid:
            self.hub.touch_client(sid)
        streamed = _wants_progress(payload) and "text/event-stream" in self.request.headers.get("Accept", "")
        if streamed:  # the answer becomes an SSE stream: the call's progress, then its reply
            self.sse_open()
            ctx.notify = self.sse_message
        answered, out = await self.run_cancellable(self.hub.dispatcher.handle_payload(payload, ctx))
        if not answered:
            return  # the client hung up and its call was cancelled: nobody to answer
        reply = out[0]
        if streamed:
            if reply is not None:
                await self.sse_message(reply)
            if not self._finished and not self._sse_gone():
                self.finish()
            return
        if reply is None:
            self.set_status(204)
            self.finish()
            return
        if sid is None and _has_initialize_result(payload, reply):
            new_sid = self.hub.signer.mint()
            self.hub.touch_client(new_sid)
            self.set_header("Mcp-Session-Id", new_sid)
        self.send_json(reply)

    async def sse_message(self, message: dict) -> None:
        await self.sse_write("event: message\ndata: %s\n\n" % _dumps(message))

    async def get(self) -> None:
        ok, sid = self._session(required=True)
        if not ok or self.streams_full():
            return
        self.sse_open()
        self.hub.get_streams.add(self)
        try:
            if await self.sse_write(": stream open; reticle sends no server-initiated messages\n\n"):
                await self.sse_hold()
        finally:
            self.hub.get_streams.discard(self)

    def allowed_methods(self) -> Tuple[str, ...]:
        # DELETE /mcp is a documented operation (it answers 405 itself); the root has none.
        return ("GET", "POST") if self.root else ("GET", "POST", "DELETE")

    def method_refusal(self) -> Optional[_HttpRefusal]:
        if self.root and self.request.method == "DELETE":  # no DELETE alias at the root
            return _HttpRefusal(405, "method not allowed", "DELETE / is not served; sessions end by "
                                "not being used", {"Allow": "GET, POST"})
        return super().method_refusal()

    def delete(self) -> None:
        self.set_status(405)
        self.set_header("Allow", "GET, POST")
        self.finish()


def _has_initialize_result(payload: Any, reply: Any) -> bool:
    msgs = payload if isinstance(payload, list) else [payload]
    init_ids = [m.get("id") for m in msgs if isinstance(m, dict) and m.get("method") == "initialize" and "id" in m]
    replies = reply if isinstance(reply, list) else [reply]
    return any(isinstance(r, dict) and "result" in r and r.get("id") in init_ids for r in replies)


###############################################################################
# WebSocket handler ###########################################################
###############################################################################

_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def _ws_reason(reason: str) -> str:
    data = reason.encode("utf-8")[:123]
    return data.decode("utf-8", "ignore")


def _bridge_device(handler: "_BridgeHandler", capability: str, origin: Optional[str]) -> Optional[_Device]:
    """A device's relay at the bridge (prepare): its one-use ticket stands in for the loopback/origin check
    (the page may be a staging host), and binds the socket to that device's session.  -> the device, or
    None once the upgrade is refused: a second socket for a live device, a ticket not issued (or expired,
    rotated, closed; counted as a wrong guess of a secret), or one presented from another machine."""
    request = handler.request
    device, state = handler.hub.devices.for_ticket(capability) if _is_loopback_host(
        request.remote_ip) else (None, "void")
    if state == "used" and device is not None:
        _emit(_bridge_log, logging.WARNING, "device_second_socket", deviceId=device.id,
              sessionId=device.session_id, origin=str(origin)[:200], peer=request.remote_ip)
        handler._refuse(403, "this device ticket already opened the device's bridge socket; a second socket "
                        "for a live device session is refused")
        return None
    if device is None or state != "ok":
        _emit(_bridge_log, logging.WARNING, "device_ticket_refused", origin=str(origin)[:200],
              peer=request.remote_ip)
        try:  # a wrong capability counts as a wrong guess of a secret
            handler.hub.guard.token_attempt(_guess_key(request), capability)
        except _HttpRefusal as refusal:
            handler._refuse(refusal.status, refusal.detail, refusal.error, refusal.headers)
            return None
        handler._refuse(403, "the device ticket is not one this daemon issued, has expired or was rotated by "
                        "a navigation, or its device has closed" if _is_loopback_host(request.remote_ip)
                        else "a device ticket is accepted from this machine only, not from %s" % request.remote_ip)
        return None
    return device


class _BridgeHandler(tornado.websocket.WebSocketHandler):
    """GET /reticle: the browser bridge (hello, event(s), command, command_result; marks: more server marks)."""

    def initialize(self, hub: "Hub") -> None:
        self.hub = hub
        self.session: Optional[_BrowserSession] = None
        self.document: Optional[str] = None  # the document whose server marks this socket hands out
        self.replaced = False
        self.needs_token = True
        self.device: Optional[_Device] = None
        self._hello_timer: Any = None
        self._counted = False
        self._closing = False

    SUPPORTED_METHODS = _AnyMethod(_HTTP_METHODS)  # every method meets the guard, then the 405

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        _log_handler_exception(self, typ, value, tb)

    def _refuse(self, status: int, detail: str, error: str = "forbidden", headers: Optional[dict] = None) -> None:
        self.hub.bridge.note_refusal(detail)
        self.set_status(status)
        for k, v in (headers or {}).items():
            self.set_header(k, v)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Connection", "close")
        if isinstance(self.request.connection, tornado.http1connection.HTTP1Connection):
            self.request.connection.no_keep_alive = True
        self.finish(_dumps({"error": error, "detail": detail}))

    def prepare(self) -> None:
        """Admit a bridge upgrade or refuse it before the handshake, in order: a device's one-use ticket
        (from this machine only) stands in for the origin check; else the origin must be allowed; then
        the token, Host (DNS rebinding) and peer checks; a non-upgrade GET is 400, another method 429 or
        405.  `needs_token` records whether the hello must still bring the pairing token."""
        guard = self.hub.guard
        origin = self.request.headers.get("Origin")
        capability = self.get_query_argument("device", None)
        if capability is not None:
            self.device = _bridge_device(self, capability, origin)
            if self.device is None:
                return
        elif origin is not None and not guard.ws_origin_allowed(origin):
            self._refuse(403, "the origin %r is not allowed at the bridge; pages must be on localhost or "
                              "listed in RETICLE_ALLOWED_ORIGINS" % origin)
            return
        try:
            token_ok = self.device is not None or guard.token_attempt(_guess_key(self.request),
                                                                      guard.presented_token(self.request))
        except _HttpRefusal as refusal:
            self._refuse(refusal.status, refusal.detail, refusal.error, refusal.headers)
            return
        peer_ok = _is_loopback_host(self.request.remote_ip)
        host_ok = _is_loopback_host(_split_host_header(self.request.headers.get("Host")))
        if not host_ok and not token_ok and _is_loopback_host(self.hub.host):
            self._refuse(403, "the Host header %r does not name a loopback host (DNS rebinding?)"
                         % self.request.headers.get("Host"))
            return
        if not peer_ok and not token_ok and not self.hub.allowed_origins:
            self._refuse(403, "the peer %s is not loopback and presented no token" % self.request.remote_ip)
            return
        origin_local = origin is not None and _is_loopback_host(_origin_host(origin))
        self.needs_token = not (origin_local and peer_ok and host_ok) and not token_ok
        if self.request.method == "GET" and self.request.headers.get("Upgrade", "").lower() != "websocket":
            self._refuse(400, "GET /reticle is the WebSocket bridge for the in-page SDK; send a WebSocket "
                              "upgrade (Upgrade: websocket)", "not a WebSocket upgrade")
            return
        if self.request.method != "GET":
            wait = self.hub.limiter.check("addr:%s" % self.request.remote_ip)
            if wait is not None:
                self._refuse(429, "rate limited; retry after %.2f s" % wait, "rate limited",
                             {"Retry-After": str(max(1, int(wait + 0.999)))})
                return
            self._refuse(405, "%s /reticle is not served; the bridge is a WebSocket upgrade (GET)"
                         % self.request.method, "method not allowed", {"Allow": "GET"})

    def check_origin(self, origin: str) -> bool:
        if self.device is not None:
            return True  # prepare() checked this device's capability; its pages may be on any origin
        return self.hub.guard.ws_origin_allowed(origin)

    def get_compression_options(self) -> Optional[dict]:
        return None

    def open(self) -> None:
        bridge = self.hub.bridge
        if bridge.pending_handshakes >= MAX_PENDING_HANDSHAKES:
            # the socket that has waited longest without a hello makes room: sockets that never
            # speak cannot keep a real tab (whose hello comes at once) out; it may try again
            oldest = next(iter(bridge.pending), None)
            if oldest is None:
                bridge.note_refusal("too many pending handshakes (%d)" % MAX_PENDING_HANDSHAKES)
                self.close(1013, "too many pending handshakes")
                return
            bridge.note_refusal("too many pending handshakes (%d): the oldest, silent since it opened, was "
                                "closed" % MAX_PENDING_HANDSHAKES)
            oldest._end_handshake()
            oldest.close(1013, "too many pending handshakes; this socket sent no hello")
        bridge.pending_handshakes += 1
        bridge.pending[self] = None
        self._counted = True
        self.set_nodelay(True)  # commands are small and latency-bound: no Nagle delay
        self._hello_timer = tornado.ioloop.IOLoop.current().call_later(
            self.hub.hello_timeout_s, self._hello_timeout)

    def _hello_timeout(self) -> None:
        self._hello_timer = None
        if self.session is None:
            # 1013, not 1008: a page busy at load (a long script) sends its hello late; its SDK
            # tries again, where 1008 would stop it for good
            self.hub.bridge.note_refusal("a socket sent no hello within %g s" % self.hub.hello_timeout_s)
            self.close(1013, "hello timeout; try again")

    def _end_handshake(self) -> None:
        if self._hello_timer is not None:
            tornado.ioloop.IOLoop.current().remove_timeout(self._hello_timer)
            self._hello_timer = None
        self.hub.bridge.pending.pop(self, None)
        if self._counted:
            self._counted = False
            self.hub.bridge.pending_handshakes -= 1

    def close(self, code: Optional[int] = None, reason: Optional[str] = None) -> None:
        self._closing = True  # frames already in flight are not read after this
        super().close(code, _ws_reason(reason) if reason else reason)

    def on_message(self, message: Any) -> Optional[Awaitable[None]]:
        """Handle one frame from the page (untrusted): the first must be a hello; then events (ingested,
        with a pause before the next frame when the page floods), command results, device input and an
        identity update.  Binary, non-JSON or non-object frames close the socket with 1008; an unknown
        kind becomes a blind-spot event.  Returns the pause to await, if any."""
        if self._closing:
            return None  # refused (1013, 1008, ...): a hello that was in flight must not register a session
        size = len(message)
        if isinstance(message, bytes):
            self.close(1008, "invalid message: binary frames are not accepted")
            return None
        try:
            msg = _loads_frame(message)
        except ValueError:
            self.close(1008, "invalid message: not JSON")
            return None
        if not isinstance(msg, dict):
            self.close(1008, "invalid message: expected a JSON object")
            return None
        kind = msg.get("kind")
        session = self.session
        if session is None:
            if kind != "hello":
                self.close(1008, "invalid message: the first message must be a hello")
                return None
            self._hello(msg)
            return None
        if kind in ("events", "event"):
            events = msg.get("events") if kind == "events" else [msg.get("event")]
            session.ingest(events if isinstance(events, list) else [None], size)
            pause = self.hub.bridge.frame_pause(session, size)
            if pause > 0:
                return asyncio.sleep(pause)  # no next frame is read until then (Tornado awaits it)
        elif kind == "command_result":
            session.last_seen = self.hub.clock()
            session.resolve_command(msg)
        elif kind == "input" and session.device is not None:
            self.hub.devices.on_input(session, msg)
        elif kind == "marks" and self.document is not None:
            self._send_marks(False)  # each batch voids the tab's oldest marks past SERVER_TICKETS_KEPT
        elif kind == "hello":
            if msg.get("sessionId") != session.id:
                self.close(1008, "hello already received")
                return None
            session.update_identity(msg)
        else:
            session.ingest([{"type": "blind-spot", "data": {
                "reason": "unknown-message-kind", "count": 1,
                "detail": "the page sent a message of kind %r, which this daemon ignores" % str(kind)[:40]}}], 0)
        return None

    def _hello(self, msg: dict) -> None:
        """Register the page's session from its hello, or close (1008/1013) saying why: protocol version,
        session id shape, a session claimed by the wrong device capability, a missing or wrong pairing
        token.  A registered session gets its server mark and the tab's live faults."""
        version = msg.get("protocolVersion")
        if version != BRIDGE_PROTOCOL:
            self.hub.bridge.note_refusal("protocol version mismatch (%r)" % version)
            self.close(1008, "protocol version mismatch — the page runs an SDK for protocol %r, this "
                             "daemon speaks %d; reload the page" % (version, BRIDGE_PROTOCOL))
            return
        sid = msg.get("sessionId")
        if not isinstance(sid, str) or not _SESSION_ID_RE.match(sid):
            self.close(1008, "invalid message: hello.sessionId must be 1-128 characters of A-Z a-z 0-9 _ . : -")
            return
        if not isinstance(msg.get("url", ""), str):
            self.close(1008, "invalid message: hello.url must be a string")
            return
        owner = self.hub.devices.for_session(sid)
        if owner is not self.device:
            self.hub.bridge.note_refusal("session %s claimed with %s" % (sid, "another device's capability" if
                                         self.device is not None else "no device capability"))
            self.close(1008, "this device capability belongs to another session" if self.device is not None
                       else "session %s belongs to a device; only its own pages may use it" % sid)
            return
        try:
            token_ok = self.hub.guard.token_attempt(
                _guess_key(self.request), msg.get("token") if isinstance(msg.get("token"), str) else None)
        except _HttpRefusal as refusal:
            self.hub.bridge.note_refusal(refusal.detail)
            self.close(1013, "too many wrong tokens; try again later")
            return
        if self.needs_token and not token_ok:
            self.hub.bridge.note_refusal("authentication failed for %s (a page off loopback, or a client "
                                         "without an Origin, needs the pairing token in its hello)"
                                         % (self.request.headers.get("Origin") or "a client sending no Origin"))
            self.close(1008, "authentication failed")
            return
        self._end_handshake()
        session, closing = self.hub.bridge.attach(self, msg)
        if closing is not None:
            self.close(*closing)
            return
        assert session is not None  # attach() gives a session or a close code, never neither
        session.device = self.device
        self.session = session
        # the SDK marks its requests for the app's middleware with these (Server truth)
        if session is not None and msg.get("serverMark") is True:
            self.document = str(msg.get("documentId") or "")[:64]
            self._send_marks(True)
        if session is not None and self.hub.faults.live(session.id):  # a new document gets the tab's faults
            self.hub.spawn(_quietly(self.hub.faults.sync(session.id)))

    def _send_marks(self, reset: bool) -> None:
        """Hand this socket's document a batch of one-use server marks (reset: they replace the SDK's pool)."""
        assert self.session is not None and self.document is not None
        marks = self.session.server_tickets.issue(self.document, self.hub.clock())
        self.send_json({"kind": "mark", "marks": marks, "reset": reset, "header": SERVER_MARK_HEADER,
                        "cookie": SERVER_MARK_COOKIE})

    def on_close(self) -> None:
        self._end_handshake()
        self.hub.bridge.detach(self)

    def send_json(self, obj: Any) -> None:
        try:
            self.write_message(_dumps(obj))
        except tornado.websocket.WebSocketClosedError:
            _emit(_bridge_log, logging.DEBUG, "send_on_closed_socket")


###############################################################################
# Application factory #########################################################
###############################################################################

_MIDDLEWARE_CODES = {"403": "Host, Origin or Referer not allowed, or the token is missing or wrong",
                     "408": "the request body was not complete within 10 s",
                     "413": "the request body is over 4 MiB",
                     "429": "rate limited for this session key; see Retry-After"}

# path regex, handler, extra kwargs, OpenAPI path, {method: (operationId, summary, {status: text})}
_ROUTES: List[Tuple[str, Any, dict, str, dict]] = [
    (r"/status", _StatusHandler, {}, "/status",
     {"get": ("status", "Daemon status (cheap JSON)", {"200": "status JSON"})}),
    (r"/openapi\.json", _OpenApiHandler, {}, "/openapi.json",
     {"get": ("openapi", "This document", {"200": "OpenAPI 3.1 JSON"})}),
    (r"/reticle\.js", _SdkHandler, {}, "/reticle.js",
     {"get": ("sdk", "The in-page SDK (application/javascript, ETag)",
              {"200": "the SDK", "304": "not modified (If-None-Match)"})}),
    (r"/reticle", _BridgeHandler, {}, "/reticle",
     {"get": ("bridge", "WebSocket upgrade for the in-page SDK",
              {"101": "switching protocols", "400": "not a WebSocket upgrade", "403": "origin or host refused"})}),
    (r"/mcp/sse", _SseHandler, {}, "/mcp/sse",
     {"get": ("mcpSse", "Open an MCP HTTP+SSE session; the first frame is `endpoint`",
              {"200": "text/event-stream", "503": "MCP server not ready"})}),
    (r"/mcp/message", _SseMessageHandler, {}, "/mcp/message",
     {"post": ("mcpMessage", "Send one JSON-RPC message into an SSE session; the reply arrives on the stream",
               {"202": "accepted", "400": "missing sessionId, or not one JSON-RPC message",
                "404": "session not found", "503": "MCP server not ready"})}),
    (r"/mcp", _StreamableHandler, {}, "/mcp",
     {"post": ("mcpPost", "Send MCP JSON-RPC messages (one or a batch)",
               {"200": "response(s); Mcp-Session-Id on initialize; for a tools/call with _meta.progressToken "
                       "from a client that accepts text/event-stream, an SSE stream: its progress "
                       "notifications, then its response", "204": "notifications only",
                "404": "MCP_SESSION_UNKNOWN"}),
      "get": ("mcpGet", "Server-to-client stream of SSE comments",
              {"200": "text/event-stream", "400": "missing Mcp-Session-Id", "404": "MCP_SESSION_UNKNOWN"}),
      "delete": ("mcpDelete", "End a session: not supported", {"405": "always, no body"})}),
    (r"/stop", _StopHandler, {}, "/stop",
     {"post": ("stop", "Planned stop (needs the pairing token)", {"202": "stopping"})}),
    (r"/server-records", _ServerRecordsHandler, {}, "/server-records",
     {"post": ("serverRecords", "What the app's server did for marked requests (middleware; needs the pairing token)",
               {"200": "{stitched, unmatched, invalid, refused}", "400": "not {records: [...]}"})}),
    (r"/", _StreamableHandler, {"root": True}, "/",
     {"post": ("mcpRootPost", "Alias of POST /mcp",
               {"200": "response(s); Mcp-Session-Id on initialize; an SSE stream for a tools/call with "
                       "_meta.progressToken, as POST /mcp", "204": "notifications only",
                "404": "MCP_SESSION_UNKNOWN"}),
      "get": ("mcpRootGet", "Alias of GET /mcp",
              {"200": "text/event-stream", "400": "missing Mcp-Session-Id", "404": "MCP_SESSION_UNKNOWN"})}),
]


_JSON = "application/json"
_VISIBLE_ASCII = {"type": "string", "pattern": "^[!-~]{1,256}$"}
_SSE = "text/event-stream"
# Schemas of what the daemon writes (components/schemas).  They document; nothing validates against them.
_OPENAPI_SCHEMAS: Dict[str, dict] = {
    "Refusal": {"type": "object", "required": ["error", "detail"], "additionalProperties": False,
                "description": "Every refusal by the guard, the limits or a route.",
                "properties": {"error": {"type": "string"}, "detail": {"type": "string"}}},
    "JsonRpcPayload": {
        "description": "One JSON-RPC 2.0 message, or a batch of at most %d. Any JSON is accepted: what "
                       "is not a valid message is answered with a JSON-RPC error (-32700 parse error, "
                       "-32600 invalid request, -32601 method not found, -32602 invalid params), never "
                       "with an HTTP error. Messages are objects {jsonrpc: \"2.0\", id: string|number, "
                       "method, params?}; an id must not be null. NaN, Infinity, nesting deeper than %d "
                       "and lone surrogates are parse errors." % (MAX_BATCH, MAX_JSON_DEPTH)},
    "JsonRpcMessage": {"type": "object", "description": "One JSON-RPC 2.0 message (request or notification)."},
    "JsonRpcResponse": {
        "type": "object", "required": ["jsonrpc", "id"],
        "properties": {"jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "number", "null"]},
                       "result": {},
                       "error": {"type": "object", "required": ["code", "message"],
                                 "properties": {"code": {"type": "integer"}, "message": {"type": "string"},
                                                "data": {}}}}},
    "JsonRpcReply": {"anyOf": [{"$ref": "#/components/schemas/JsonRpcResponse"},
                               {"type": "array", "minItems": 1, "maxItems": MAX_BATCH,
                                "items": {"$ref": "#/components/schemas/JsonRpcResponse"}}]},
    "Status": {"type": "object", "required": ["running", "version", "pid", "port", "startedAt", "sessions",
                                              "mcpClients", "devices"],
               "properties": {"running": {"type": "boolean"}, "version": {"type": "string"},
                              "pid": {"type": "integer"}, "port": {"type": "integer"},
                              "startedAt": {"type": "string"}, "uptimeMs": {"type": "integer"},
                              "sessions": {"type": "array", "items": {"type": "object"}},
                              "mcpClients": {"type": "integer"}, "devices": {"type": "array"},
                              "why": {"type": "string"}}},
    "Stopping": {"type": "object", "required": ["stopping", "pid"],
                 "properties": {"stopping": {"const": True}, "pid": {"type": "integer"}}},
}

# What each operation takes and writes beyond the refusals: parameters, request body, and the
# content of each status that has a body ("-" for none).  Refusal statuses carry Refusal JSON.
_OPENAPI_OPS: Dict[str, dict] = {
    "status": {"content": {"200": (_JSON, "Status")}},
    "openapi": {"content": {"200": (_JSON, None)}},
    "sdk": {"content": {"200": ("application/javascript", "string"), "304": "-"}},
    "bridge": {"content": {"101": "-"}},
    "mcpSse": {"content": {"200": (_SSE, "string")}},
    "mcpMessage": {"params": [{"name": "sessionId", "in": "query", "required": True, "schema": _VISIBLE_ASCII,
                               "description": "The id the endpoint frame of GET /mcp/sse announced."}],
                   "body": ({"$ref": "#/components/schemas/JsonRpcMessage"}, True),
                   "content": {"202": ("text/plain", "string")}},
    "mcpPost": {"body": ({"$ref": "#/components/schemas/JsonRpcPayload"}, False),
                "content": {"200": (_JSON, "JsonRpcReply"), "204": "-"}},
    "mcpRootPost": {"body": ({"$ref": "#/components/schemas/JsonRpcPayload"}, False),
                    "content": {"200": (_JSON, "JsonRpcReply"), "204": "-"}},
    "mcpGet": {"content": {"200": (_SSE, "string")}},
    "mcpRootGet": {"content": {"200": (_SSE, "string")}},
    "mcpDelete": {"content": {"405": "-"}},
    "stop": {"content": {"202": (_JSON, "Stopping")}},
}


def _openapi_content(spec: Any) -> Optional[dict]:
    if spec == "-":
        return None
    mime, schema = spec
    if schema is None:
        body: dict = {"type": "object"}
    elif schema == "string":
        body = {"type": "string"}
    else:
        body = {"$ref": "#/components/schemas/%s" % schema}
    return {mime: {"schema": body}}


def _openapi(hub: "Hub") -> dict:
    """The OpenAPI 3.1 document, generated from _ROUTES and _OPENAPI_OPS.

    Every documented status names its body (Refusal JSON for the guard's,
    the limits' and the routes' refusals) and its headers (Retry-After on
    429, Allow on 405, Mcp-Session-Id on an initialize)."""
    paths: Dict[str, dict] = {}
    for _, _, _, path, methods in _ROUTES:
        item = paths.setdefault(path, {})
        for method, (op_id, summary, codes) in methods.items():
            extra = _OPENAPI_OPS.get(op_id, {})
            responses = {code: {"description": text} for code, text in codes.items()}
            for code, text in _MIDDLEWARE_CODES.items():
                responses.setdefault(code, {"description": text})
            if method in ("post", "put", "patch"):
                responses.setdefault("415", {"description": "a body not declared Content-Type: application/json"})
            for code, response in responses.items():
                spec = extra.get("content", {}).get(code, (_JSON, "Refusal") if code >= "400" else "-")
                content = _openapi_content(spec)
                if content:
                    response["content"] = content
                if code == "429":
                    response["headers"] = {"Retry-After": {"required": True, "schema": {"type": "string"},
                                                           "description": "seconds until a retry is allowed"}}
                if code == "405":
                    response["headers"] = {"Allow": {"required": True, "schema": {"type": "string"}}}
            if op_id in ("mcpPost", "mcpRootPost"):
                responses["200"]["headers"] = {"Mcp-Session-Id": {
                    "required": False, "schema": {"type": "string"},
                    "description": "a new session id, on a successful initialize sent without one"}}
            op: dict = {"operationId": op_id, "summary": summary, "responses": responses}
            params = list(extra.get("params", ()))
            if path in ("/mcp", "/") and method in ("post", "get"):
                params.append({"name": "Mcp-Session-Id", "in": "header", "required": method == "get",
                               "schema": _VISIBLE_ASCII,
                               "description": "A session id this machine issued on initialize (at most %d "
                                              "days old); any other answers 404 MCP_SESSION_UNKNOWN"
                                              % (SESSION_MAX_AGE_S // 86400)})
            if params:
                op["parameters"] = params
            if "body" in extra:
                schema, required = extra["body"]
                op["requestBody"] = {"required": required, "content": {_JSON: {"schema": schema}}}
            item[method] = op
    return {"openapi": "3.1.0",
            "info": {"title": "Reticle daemon", "version": __version__,
                     "description": "Generated from the route table. Documents behaviour; never "
                                    "validates requests. Loopback clients need no token; any other "
                                    "needs the pairing token (Authorization: Bearer, or ?token=)."},
            "servers": [{"url": hub.public_origin()}],
            "paths": paths,
            "components": {"schemas": _OPENAPI_SCHEMAS}}


class Hub:
    """All of one daemon's state.  make_app() serves it; nothing is global."""

    def __init__(self, state_dir: Optional[str] = None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 token: Optional[str] = None, allowed_origins: Optional[List[str]] = None,
                 rate: Optional[Tuple[float, float]] = None, scheme: str = "http") -> None:
        """A daemon's whole state, before it serves: the state directory (token, machine key), the guard
        and rate limiter, the tool registry and MCP dispatcher, the bridge, devices, faults and journeys.
        Nothing listens until `_serve` (or a caller's own server over `make_app`) runs it."""
        self.state = _StateDir(state_dir)
        self.host = host
        self.port = port
        self.scheme = scheme
        self._token = token
        self._token_cache: Tuple[float, str] = (-1.0, "")
        self.signer = _SessionSigner(self.state.machine_key(), SESSION_MAX_AGE_S)
        if allowed_origins is None:
            allowed_origins = [o for o in os.environ.get("RETICLE_ALLOWED_ORIGINS", "").split(",") if o.strip()]
        self.allowed_origins = tuple(filter(None, (_normalise_origin(o) for o in allowed_origins)))
        rate = rate or _parse_rate(os.environ.get("RETICLE_RATE_LIMIT"))
        self.limiter = _RateLimiter(*rate)
        self.keepalive_s = SSE_KEEPALIVE_S
        self.hello_timeout_s = HELLO_TIMEOUT_S
        self._t0 = time.monotonic()
        self.started_at = time.time()
        self.registry = _build_registry()
        self.dispatcher = _McpDispatcher(self.registry, self.call_tool, self.read_live, self.public_origin)
        self.bridge = _Bridge(self)
        self.devices = _DeviceManager(self)
        self.journeys = _Journeys()
        # what the apps' middleware sent (Server truth)
        self.server_truth: Dict[str, Any] = {"received": 0, "stitched": 0, "unmatched": 0, "invalid": 0,
                                             "refused": 0, "lastRefused": None, "droppedByApps": 0,
                                             "lastDropAt": None}
        self.faults = _Faults(self)
        self.project_dir = os.environ.get("RETICLE_PROJECT_DIR") or os.getcwd()
        self.guard = _Guard(self)
        self.sse_streams: Dict[str, _SseHandler] = {}
        self.get_streams: set = set()
        self.bulk_window = [0.0, 0]  # [start (monotonic s), bulk body bytes read in it] (data_received)
        self.clients: Dict[str, float] = {}  # MCP session id -> when last heard (Hub.clock, ms)
        self.mcp_ready = True
        self.tasks: set = set()
        self.stop_event: Optional[asyncio.Event] = None
        self.stop_reason = ""
        self._sdk: Optional[str] = None

    # -- clock and ids --------------------------------------------------------
    def clock(self) -> float:
        """Milliseconds since the daemon started: the cursor clock, the daemon's one clock (_clock_ms)."""
        return _clock_ms(self._t0)

    def token(self) -> str:
        """The pairing token: the one given to the constructor, else RETICLE_TOKEN, else the state
        directory's token file (re-read when the file changes, so a rotated token takes effect)."""
        if self._token:
            return self._token
        env = os.environ.get("RETICLE_TOKEN", "").strip()
        if env:
            return env
        path = self.state.file("token")
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            mtime = -2.0
        if mtime != self._token_cache[0]:
            self._token_cache = (mtime, self.state.token())
        return self._token_cache[1]

    def public_origin(self) -> str:
        """The origin a client on this machine reaches the daemon at (a wildcard bind is named 127.0.0.1)."""
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = "[%s]" % host
        return "%s://%s:%d" % (self.scheme, host, self.port)

    # -- tasks ------------------------------------------------------------------
    def spawn(self, coro: Awaitable) -> "asyncio.Task":
        """Run `coro` as a task the Hub holds until it is done (so it is not garbage-collected mid-way)."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def touch_client(self, session_id: str) -> None:
        """Note that an MCP client with this session id was just heard from; status counts clients heard
        in the last ten minutes (the table is pruned to those when it grows past a thousand)."""
        self.clients[session_id] = self.clock()
        if len(self.clients) > 1000:
            horizon = self.clock() - 600_000
            self.clients = {k: v for k, v in self.clients.items() if v > horizon}

    def default_session(self, args: dict, ctx: _CallContext) -> Optional[str]:
        """The tab a call means: its `sessionId`, else the device this caller opened, else none
        (the bridge then takes the only tab, and never guesses between several)."""
        if args.get("sessionId"):
            return args["sessionId"]
        own = self.devices.owned_by(ctx.session_key)
        return own.session_id if own is not None and own.ready and not own.closed else None

    # -- MCP ----------------------------------------------------------------------
    async def call_tool(self, name: str, args: dict, ctx: _CallContext) -> dict:
        """Run one tool and return its MCP tool result; a ToolError, an unknown name or a crash is an
        `isError` result naming what went wrong, never an exception, so the daemon keeps serving."""
        tool = self.registry.get(name)
        if tool is None:  # the MCP layer checks the name first; a direct caller may not have
            return _tool_result({"error": "unknown tool %r" % name,
                                 "recovery": "call one of: %s" % ", ".join(self.registry.names())}, True)
        self.devices.touch(ctx.session_key)
        try:
            session = await self.bridge.resolve_soon(self.default_session(args, ctx)) if tool.needs_session else None
            budget = args.get("timeout_ms") if isinstance(args, dict) else None
            token = _CALL_DEADLINE.set(self.clock() + budget + 500 if isinstance(budget, int) and
                                       not isinstance(budget, bool) and budget > 0 else None)
            try:
                return _tool_result(await tool.handler(self, session, args, ctx))
            finally:
                _CALL_DEADLINE.reset(token)
        except ToolError as exc:
            return _tool_result(exc.payload(), is_error=True)
        except Exception as exc:
            _emit(_log, logging.ERROR, "tool_crashed", tool=name, error=repr(exc))
            return _tool_result({"error": "internal error in %s: %s" % (name, exc),
                                 "recovery": "this is a Reticle bug; the daemon keeps serving"}, True)

    async def read_live(self, uri: str) -> Any:
        """The live MCP resources' content (today: the sessions list, whatever the uri)."""
        return await _tool_sessions(self, None, {}, _CallContext("resource", "resource"))

    # -- status ---------------------------------------------------------------------
    def status(self) -> dict:
        """What GET /status and `reticle status` show: version, pid, port, uptime, live sessions, MCP
        clients, devices and the server-truth counters."""
        horizon = self.clock() - 600_000  # MCP clients heard in the last ten minutes
        out = {"running": True, "version": __version__, "pid": os.getpid(), "port": self.port,
               "startedAt": _wall_iso(self.started_at), "uptimeMs": int(self.clock()),
               "sessions": [_describe_session(s) for s in self.bridge.live()],
               "mcpClients": len(self.sse_streams) + sum(1 for v in self.clients.values() if v > horizon),
               "devices": self.devices.describe()}
        if not out["sessions"]:
            out["why"] = self.bridge.why()
        return out

    def sdk_source(self) -> str:
        """The in-page SDK as served at /reticle.js: the embedded source with this daemon's version and
        limits filled in (built once)."""
        if self._sdk is None:
            config = {"version": __version__, "protocolVersion": BRIDGE_PROTOCOL,
                      "maxMessageBytes": WS_MAX_MESSAGE_BYTES}
            self._sdk = (_SDK_JS.replace("__RETICLE_VERSION__", __version__)
                         .replace("/*__RETICLE_CONFIG__*/null", _dumps(config)))
        return self._sdk

    # -- stopping -------------------------------------------------------------------
    def request_stop(self, reason: str) -> None:
        """Ask the running daemon to stop (for `reason`, logged); `_serve` shuts down in order."""
        self.stop_reason = reason
        if self.stop_event is not None:
            self.stop_event.set()

    async def shutdown(self, reason: str) -> None:
        """Planned stop: shutdown frame on every stream, close every socket."""
        self.mcp_ready = False
        for stream in list(self.sse_streams.values()) + list(self.get_streams):
            stream.sse_stop(reason)
        await self.devices.close_all("the daemon is stopping")
        self.bridge.close_all()
        for _ in range(20):
            if not self.sse_streams and not self.get_streams:
                break
            await asyncio.sleep(0.01)


class _ReticleApp(tornado.web.Application):
    """The daemon's Tornado application: the one thing it adds is the Hub it serves, as `app.hub`."""

    hub: Hub


def make_app(hub: Optional[Hub] = None, tab_byte_rate: Optional[int] = None, total_byte_rate: Optional[int] = None,
             **settings: Any) -> tornado.web.Application:
    """The one factory: tests, the CLI and host applications all use it.  `tab_byte_rate` and
    `total_byte_rate` replace the bridge's fairness caps (event-frame bytes read per second, per tab and
    for all tabs; by default RETICLE_TAB_BYTES_PER_S, RETICLE_ALL_TABS_BYTES_PER_S, else 1 MiB and 4 MiB);
    the other settings are Tornado's."""
    hub = hub if hub is not None else Hub()
    for name, cap in (("tab_byte_rate", tab_byte_rate), ("total_byte_rate", total_byte_rate)):
        if cap is not None:
            if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
                raise ConfigError("make_app(%s=%r): give a whole number of bytes per second above 0" % (name, cap))
            setattr(hub.bridge, name, cap)
    routes = [tornado.web.url(path, handler, dict(hub=hub, **extra)) for path, handler, extra, _, _ in _ROUTES]
    settings.setdefault("websocket_ping_interval", WS_PING_INTERVAL_S)
    settings.setdefault("websocket_max_message_size", WS_MAX_MESSAGE_BYTES)
    settings.setdefault("default_handler_class", _NotFoundHandler)
    settings.setdefault("default_handler_args", {"hub": hub})
    settings.setdefault("compress_response", False)
    settings.setdefault("log_function", _log_request)
    app = _ReticleApp(routes, **settings)
    app.hub = hub
    return app


def _log_request(handler: tornado.web.RequestHandler) -> None:
    status = handler.get_status()
    level = logging.DEBUG if status < 400 else logging.INFO
    if status >= 500:
        level = logging.WARNING
    _emit(_log, level, "http", method=handler.request.method, path=handler.request.path, status=status,
          ms=round(handler.request.request_time() * 1000, 2))


###############################################################################
# Server control ##############################################################
###############################################################################


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
                 ready: Optional[Callable[[Hub], None]] = None) -> int:
    """Serve the daemon on host:port until it is asked to stop; return the exit code (1 when the port
    is taken, with a sentence naming its owner).

    Beyond loopback it needs a long RETICLE_TOKEN (ConfigError otherwise).  Once listening it writes
    its daemon-<port>.json record and calls `ready(hub)`; a signal, POST /stop or `request_stop` then
    shuts down in order: streams told, devices closed, connections closed, its own record removed."""
    _refuse_open_bind(host)
    hub = Hub(state_dir=state_dir, host=host, port=port, scheme="https" if tls or certfile else "http")
    hub.token()  # create the token file before anyone asks
    ssl_ctx = None
    if tls or certfile:
        ssl_ctx, fingerprint = _tls_context(hub.state, certfile, keyfile)
        _emit(_log, logging.INFO, "tls_enabled", sha256=fingerprint)
        sys.stderr.write("reticle: serving HTTPS/WSS; certificate SHA-256 fingerprint %s\n" % fingerprint)
    sockets = await _bind(hub, host, port)
    if sockets is None:
        return 1
    await asyncio.get_running_loop().run_in_executor(None, hub.devices.reap_orphans)
    app = make_app(hub)
    server = _CappedHTTPServer(app, ssl_options=ssl_ctx, xheaders=False,
                                           max_body_size=MAX_BODY_BYTES + (1 << 20),
                                           body_timeout=BODY_TIMEOUT_S + 5,
                                           # Tornado applies this to the wait for request headers too:
                                           # a client that never finishes them is closed.
                                           idle_connection_timeout=HEADER_TIMEOUT_S)
    server.cap = _connection_cap()
    server.add_sockets(sockets)
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
            raise ToolError(_port_owner_sentence(self.port, probe), "free the port or set RETICLE_PORT")
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
                "run `reticle serve --port %d` in a terminal to see why" % self.port)
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
                "utf-8", "replace")), "retry the call")
        if reader is not None and "text/event-stream" in resp.headers.get("Content-Type", ""):
            if reader.reply is None:
                raise ToolError("the daemon's answer stream ended without a reply", "retry the call")
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
                            "retry the call; a new daemon starts if needed") from exc
        if reply is None:
            raise ToolError("the daemon does not recognise this proxy's session even after a new initialize",
                            "restart `reticle mcp`")
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


###############################################################################
# Init ########################################################################
###############################################################################
# `reticle init`: find the app in the current directory, add the dev-only script
# tag where that is safe (else print the exact snippet), write the MCP client
# configuration of Claude Code (.mcp.json), Cursor (.cursor/mcp.json), VS Code
# (.vscode/mcp.json, "servers") and Codex ($CODEX_HOME/config.toml, default
# ~/.codex: Codex reads MCP servers from the user's config), merging and never
# clobbering another server.  Planning is pure (_init_plan); writing is small.

_SERVER_NAME = "reticle"
_TEMPLATE_DIRS = ("templates",)


class _InitChange:
    """One file init would write: its path, old text (None when new), new text, and why."""

    __slots__ = ("path", "old", "new", "what")

    def __init__(self, path: str, old: Optional[str], new: str, what: str) -> None:
        self.path = path
        self.old = old
        self.new = new
        self.what = what


def _outside_project(root: str, path: str) -> Optional[str]:
    """Why init must not write `path` (a symbolic link on the way from `root`, dangling or not, or a
    real path outside `root`), or None.  init writes into the project and nowhere else."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return "%s is outside the project" % path
    current = os.path.abspath(root)
    for part in rel.split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            return "%s is a symbolic link (to %s)" % (current, os.readlink(current))
    real_root = os.path.realpath(root)
    if os.path.commonpath([os.path.realpath(path), real_root]) != real_root:
        return "%s resolves outside the project" % path
    return None


def _read_file_text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def _package_deps(root: str) -> Dict[str, str]:
    text = _read_file_text(os.path.join(root, "package.json"))
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    deps: Dict[str, str] = {}
    for key in ("dependencies", "devDependencies"):
        if isinstance(data.get(key), dict):
            deps.update(data[key])
    return deps


def _find_template(root: str) -> Optional[str]:
    """The base template of a Django or Flask app: base.html/layout.html first, else the only
    template with a </head>."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in ("node_modules", "venv", ".venv",
                                                                                 "site-packages", "static")]
        if os.path.basename(dirpath) not in _TEMPLATE_DIRS and "/templates/" not in dirpath + "/":
            continue
        for f in sorted(filenames):
            if f.endswith(".html"):
                path = os.path.join(dirpath, f)
                if "</head>" in (_read_file_text(path) or "").lower():
                    found.append(path)
    for preferred in ("base.html", "layout.html", "_base.html"):
        for path in found:
            if os.path.basename(path) == preferred:
                return path
    return found[0] if len(found) == 1 else None


def _detect_app(root: str) -> dict:
    """-> {kind, entry?, why}: the app in `root` and the HTML file the tag goes into."""
    deps = _package_deps(root)
    if "next" in deps:
        return {"kind": "Next.js", "why": "next in package.json"}
    if "react-scripts" in deps:
        entry = os.path.join(root, "public", "index.html")
        return {"kind": "Create React App", "entry": entry if os.path.isfile(entry) else None,
                "why": "react-scripts in package.json"}
    if "vite" in deps or any(os.path.isfile(os.path.join(root, "vite.config." + e))
                             for e in ("js", "ts", "mjs", "mts")):
        entry = os.path.join(root, "index.html")
        return {"kind": "Vite", "entry": entry if os.path.isfile(entry) else None, "why": "vite in package.json"}
    if os.path.isfile(os.path.join(root, "manage.py")):
        return {"kind": "Django", "entry": _find_template(root), "why": "manage.py"}
    for name in ("app.py", "wsgi.py", "application.py", "main.py"):
        text = _read_file_text(os.path.join(root, name)) or ""
        if re.search(r"^\s*(from flask import|import flask)", text, re.M):
            return {"kind": "Flask", "entry": _find_template(root), "why": "flask imported in %s" % name,
                    "module": name}
    for name in ("main.py", "app.py", "asgi.py", os.path.join("app", "main.py")):
        text = _read_file_text(os.path.join(root, name)) or ""
        if re.search(r"^\s*(from fastapi import|import fastapi)", text, re.M):
            return {"kind": "FastAPI", "entry": _find_template(root), "why": "fastapi imported in %s" % name,
                    "module": name}
    if os.path.isfile(os.path.join(root, "index.html")):
        return {"kind": "plain HTML", "entry": os.path.join(root, "index.html"), "why": "index.html"}
    return {"kind": "unknown", "why": "no package.json, manage.py, Flask app or index.html here"}


def _dev_snippet(kind: str, origin: str) -> str:
    """The dev-only tag for each kind of app: it loads the SDK in development only."""
    src = origin + "/reticle.js"
    loader = ("var s=document.createElement('script');s.src=%s;document.head.appendChild(s);" % json.dumps(src))
    if kind == "Vite":
        return '<script type="module">if (import.meta.env.DEV) { %s }</script>' % loader
    if kind == "Create React App":
        return "<script>if ('%%NODE_ENV%%' === 'development') { %s }</script>" % loader
    if kind == "Django":
        return '{%% if debug %%}<script src="%s"></script>{%% endif %%}' % src
    if kind == "Flask":
        return '{%% if config.DEBUG %%}<script src="%s"></script>{%% endif %%}' % src
    if kind == "Next.js":
        return ("{process.env.NODE_ENV === 'development' && <Script src=\"%s\" strategy=\"beforeInteractive\" />}"
                % src)
    return ("<script>if (/^(localhost|127\\.0\\.0\\.1|\\[::1\\])$/.test(location.hostname)) { %s }</script>"
            % loader)


def _csp_allows(sources: List[str], url: str) -> bool:
    """Whether a CSP source list admits `url` (the daemon's http:// or ws:// origin) from a page
    served over http: `*` (not for ws: in older browsers, but CSP3 allows it), a scheme source,
    a host source with or without scheme and port (`:*` too)."""
    parts = urllib.parse.urlsplit(url)
    scheme, host, port = parts.scheme, (parts.hostname or "").lower(), parts.port
    for raw in sources:
        src = raw.strip().lower()
        if src == "*" or src == scheme + ":" or (scheme == "ws" and src in ("ws:", "wss:")):
            return True
        m = re.fullmatch(r"(?:([a-z][a-z0-9+.-]*)://)?(\*\.)?([a-z0-9.\-\[\]:]+?)(?::(\d+|\*))?(/.*)?", src)
        if not m or src.startswith("'"):
            continue
        s_scheme, wild, s_host, s_port = m.group(1), m.group(2), m.group(3), m.group(4)
        if s_scheme and s_scheme != scheme and not (scheme == "ws" and s_scheme in ("http", "wss")) and not (
                scheme == "http" and s_scheme == "https"):
            continue
        if wild:
            if not host.endswith("." + s_host):
                continue
        elif s_host != host:
            continue
        if s_port == "*" or (s_port and port is not None and int(s_port) == port):
            return True
        if s_port is None and port in (None, 80):
            return True
    return False


def _csp_warnings(texts: Dict[str, str], origin: str) -> List[str]:
    """A Content-Security-Policy found in the app's files that would block the script or its
    WebSocket."""
    out = []
    ws = "ws" + origin[4:]
    for path, text in texts.items():
        # a policy quotes its keywords ('self'): the value runs to the quote that opened it
        policies = [m.group(2) for m in re.finditer(
            r'http-equiv=["\']Content-Security-Policy["\'][^>]*?content=(["\'])(.*?)\1', text, re.I | re.S)]
        policies += [m.group(2) for m in re.finditer(
            r'Content-Security-Policy["\']?\s*[:,]\s*(["\'])(.*?)\1', text, re.I | re.S)]
        for policy in policies:
            directives = {}
            for part in policy.split(";"):
                bits = part.split()
                if bits:
                    directives[bits[0].lower()] = bits[1:]
            script = directives.get("script-src-elem", directives.get("script-src", directives.get("default-src")))
            connect = directives.get("connect-src", directives.get("default-src"))
            if script is not None and not _csp_allows(script, origin):
                out.append("%s: its Content-Security-Policy script-src does not allow %s; add it in development"
                           % (path, origin))
            if script is not None and "'unsafe-inline'" not in [x.lower() for x in script]:
                out.append("%s: its Content-Security-Policy script-src has no 'unsafe-inline', so an inline loader "
                           "is blocked: use <script src=\"%s/reticle.js\"></script> in development instead"
                           % (path, origin))
            if connect is not None and not _csp_allows(connect, ws):
                out.append("%s: its Content-Security-Policy connect-src does not allow %s (the SDK's WebSocket); "
                           "add it in development" % (path, ws))
        if not policies and re.search(r"\bCSP_[A-Z_]+\s*=|Content-Security-Policy", text):
            out.append("%s sets a Content-Security-Policy: make sure script-src allows %s and connect-src "
                       "allows %s in development" % (path, origin, ws))
    return out


def _merge_json_server(path: str, key: str, entry: dict) -> Tuple[Optional[_InitChange], str]:
    """The change that adds Reticle's MCP server entry under `key` of one JSON client config, or
    (None, a note saying why not): an unreadable file, one that is not strict JSON (duplicate keys,
    1e999) or not an object is left alone, and an entry already there is kept as it is."""
    old = _read_file_text(path)
    if old is None and os.path.exists(path):
        return None, "%s is not readable; add %s by hand: %s" % (path, key, _dumps({key: {_SERVER_NAME: entry}}))
    def no_duplicates(pairs: List[Tuple[str, Any]]) -> dict:
        seen: Dict[str, Any] = {}
        for k, v in pairs:
            if k in seen:
                raise ValueError("the key %r appears twice" % k)
            seen[k] = v
        return seen
    try:
        # strict: 1e999 would come back as Infinity (not JSON), a duplicate key would lose a block
        data = json.loads(old, object_pairs_hook=no_duplicates, parse_constant=_reject_constant,
                          parse_float=_parse_float) if old and old.strip() else {}
    except (ValueError, RecursionError) as exc:
        return None, "%s is not valid strict JSON (%s); left alone. Add under %r: %s" % (
            path, _short(str(exc), 120), key, _dumps({_SERVER_NAME: entry}))
    if not isinstance(data, dict) or not isinstance(data.get(key, {}), dict):
        return None, "%s has an unexpected shape; left alone" % path
    servers = data.get(key, {})
    if _SERVER_NAME in servers:
        same = servers[_SERVER_NAME] == entry
        return None, "%s: %s already has a %r server%s" % (path, key, _SERVER_NAME, "" if same else " (kept as it is)")
    data[key] = dict(servers, **{_SERVER_NAME: entry})
    new = json.dumps(data, indent=2) + "\n"
    return _InitChange(path, old, new, "added the %r MCP server under %r" % (_SERVER_NAME, key)), ""


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string of printable text is a TOML basic string


def _toml_has_server(text: str) -> Optional[bool]:
    """Whether Codex's TOML already names the server, in any form ([mcp_servers.reticle], a dotted
    `mcp_servers.reticle.command = ...`, or `reticle = {...}` under [mcp_servers]); None when the
    file is not valid TOML (checked where tomllib exists, Python 3.11+)."""
    try:
        import tomllib  # Python 3.11+: where it is missing, the forms below are matched by pattern
    except ImportError:
        tomllib = None  # type: ignore[assignment]  # Python 3.9 and 3.10 have no tomllib
    if tomllib is not None:
        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError):
            return None
        servers = data.get("mcp_servers")
        return isinstance(servers, dict) and _SERVER_NAME in servers
    name = r"[\"']?%s[\"']?" % _SERVER_NAME
    if re.search(r"^\s*\[\s*mcp_servers\s*\.\s*%s\s*[\].]" % name, text, re.M):
        return True
    if re.search(r"^\s*mcp_servers\s*\.\s*%s\s*[.=]" % name, text, re.M):
        return True
    table = re.search(r"^\s*\[\s*mcp_servers\s*\]\s*$(.*?)(?=^\s*\[|\Z)", text, re.M | re.S)
    return bool(table and re.search(r"^\s*%s\s*[.=]" % name, table.group(1), re.M))


def _merge_codex(path: str, command: List[str]) -> Tuple[Optional[_InitChange], str]:
    old = _read_file_text(path)
    text = old or ""
    has = _toml_has_server(text)
    if has is None:
        return None, "%s is not valid TOML; left alone. Add: [mcp_servers.%s] command = %s" % (
            path, _SERVER_NAME, _toml_str(command[0]))
    if has:
        return None, "%s already has [mcp_servers.%s]" % (path, _SERVER_NAME)
    block = "[mcp_servers.%s]\ncommand = %s\nargs = [%s]\n" % (
        _SERVER_NAME, _toml_str(command[0]), ", ".join(_toml_str(a) for a in command[1:]))
    sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    return _InitChange(path, old, text + sep + block, "added [mcp_servers.%s]" % _SERVER_NAME), ""


def _init_plan(root: str, home: str, port: int, command: List[str]) -> dict:
    """Everything `reticle init` would do in `root`, as data: {app, changes, notes, warnings}."""
    origin = "http://127.0.0.1:%d" % port
    app = _detect_app(root)
    changes: List[_InitChange] = []
    notes: List[str] = []
    entry = app.get("entry")
    texts: Dict[str, str] = {}
    if entry and _outside_project(root, entry):
        notes.append("%s: left alone (init edits files of the project only); add the tag by hand: %s"
                     % (_outside_project(root, entry), _dev_snippet(app["kind"], origin)))
        entry = None
        app = dict(app, entry=None)
    elif entry:
        text = _read_file_text(entry) or ""
        texts[os.path.relpath(entry, root)] = text
        snippet = _dev_snippet(app["kind"], origin)
        if "/reticle.js" in text:
            notes.append("%s already loads reticle.js" % os.path.relpath(entry, root))
        else:
            m = re.search(r"</head\s*>", text, re.I)
            if m:
                new = text[:m.start()] + "  " + snippet + "\n" + text[m.start():]
                changes.append(_InitChange(entry, text, new, "added the dev-only script tag before </head>"))
            else:
                notes.append("%s has no </head>; add this where the page's head is: %s"
                             % (os.path.relpath(entry, root), snippet))
    else:
        where = {"Next.js": "app/layout.tsx (or pages/_document.tsx), with `import Script from 'next/script'`"}
        notes.append("%s app (%s): add this to the dev HTML entry%s: %s" % (
            app["kind"], app["why"], " " + where.get(app["kind"], "") if app["kind"] in where else "",
            _dev_snippet(app["kind"], origin)))
    for name in ("vite.config.js", "vite.config.ts", "vite.config.mjs", "next.config.js", "next.config.mjs",
                 "settings.py", "app.py"):
        for path in (os.path.join(root, name), os.path.join(root, os.path.basename(root), name)):
            text = _read_file_text(path) or ""
            if text:
                texts[os.path.relpath(path, root)] = text
    for dirpath in [d for d in (os.path.join(root, x) for x in os.listdir(root)) if os.path.isdir(d)][:50]:
        path = os.path.join(dirpath, "settings.py")
        text = _read_file_text(path) or ""
        if text:
            texts[os.path.relpath(path, root)] = text
    server_changes, server_notes = _server_init(root, app)
    changes += server_changes
    notes += server_notes
    stdio = {"command": command[0], "args": command[1:]}
    for rel, key, entry_obj in ((".mcp.json", "mcpServers", dict(stdio)),
                                (os.path.join(".cursor", "mcp.json"), "mcpServers", dict(stdio)),
                                (os.path.join(".vscode", "mcp.json"), "servers", dict(stdio, type="stdio"))):
        problem = _outside_project(root, os.path.join(root, rel))
        if problem:
            notes.append("%s: left alone (init writes inside the project only)" % problem)
            continue
        change, note = _merge_json_server(os.path.join(root, rel), key, entry_obj)
        if change:
            changes.append(change)
        if note:
            notes.append(note)
    codex_home = os.environ.get("CODEX_HOME") or os.path.join(home, ".codex")
    change, note = _merge_codex(os.path.join(codex_home, "config.toml"), command)
    if change:
        changes.append(change)
    if note:
        notes.append(note)
    change = _gitignore_auth(root)
    changes += [change] if change else []
    return {"app": app, "changes": changes, "notes": notes, "warnings": _csp_warnings(texts, origin)}


def _gitignore_auth(root: str) -> Optional[_InitChange]:
    """The project's .gitignore with `.reticle/auth/` (setup flows' saved logins) added, unless a
    line already ignores it; None when there is nothing to add or no git here."""
    path = os.path.join(root, ".gitignore")
    if _outside_project(root, path) or not (os.path.exists(path) or os.path.isdir(os.path.join(root, ".git"))):
        return None
    old = _read_file_text(path)
    lines = {ln.strip().lstrip("/").rstrip("/") for ln in (old or "").splitlines()}
    if lines & {".reticle", ".reticle/auth", ".reticle/*", ".reticle/auth/*"}:
        return None
    new = (old or "") + ("\n" if old and not old.endswith("\n") else "") + \
        "# Reticle: setup flows' saved logins (cookies, storage)\n.reticle/auth/\n"
    return _InitChange(path, old, new, "git-ignores .reticle/auth/ (saved logins)")


_SERVER_CHECK = ("to check it: run the app, click something in a tab with Reticle, then reticle_observe "
                 "{filters: [\"server\"]} lists what the server did, or reticle_assert {kind: \"server\"}")
_DJANGO_BLOCK = ("\n\nif DEBUG:  # added by `reticle init`: what the server did, inside Reticle's verdicts (dev only)\n"
                 "    MIDDLEWARE = [*MIDDLEWARE, \"reticle.DjangoMiddleware\"]\n")


def _server_init(root: str, app: dict) -> Tuple[List[_InitChange], List[str]]:
    """Reticle's server middleware for the app (Server truth): Django's settings get a
    MIDDLEWARE entry under DEBUG when they define both; Flask and FastAPI get the dev-only line
    to add, printed (a wrap placed wrongly would break the app, so it is never written)."""
    changes: List[_InitChange] = []
    notes: List[str] = []
    kind = app.get("kind")

    def read(path: str) -> str:
        return _read_file_text(path) or ""
    if kind == "Django":
        candidates = [os.path.join(root, "settings.py")] + sorted(
            os.path.join(root, d, "settings.py") for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        settings = [p for p in candidates if os.path.isfile(p)]
        if not settings:
            notes.append("Django: no settings.py found; add under DEBUG: %s" % _DJANGO_BLOCK.strip())
        for path in settings[:1]:
            text = read(path)
            rel = os.path.relpath(path, root)
            if "reticle.DjangoMiddleware" in text:
                notes.append("%s already has reticle.DjangoMiddleware" % rel)
            elif re.search(r"^MIDDLEWARE\s*=", text, re.M) and re.search(r"^DEBUG\s*=", text, re.M):
                changes.append(_InitChange(path, text, text.rstrip("\n") + _DJANGO_BLOCK,
                                           "added reticle.DjangoMiddleware to MIDDLEWARE under DEBUG (server truth)"))
                notes.append("Django server truth: " + _SERVER_CHECK)
            else:
                notes.append("%s: no top-level MIDDLEWARE and DEBUG to extend; add: %s" % (rel, _DJANGO_BLOCK.strip()))
    elif kind == "Flask":
        notes.append("Flask server truth: in %s, after `app = Flask(...)`, add `import reticle` and "
                     "`if app.debug: app.wsgi_app = reticle.wsgi(app.wsgi_app)` (SQLAlchemy: "
                     "`reticle.watch_sqlalchemy(engine)`); %s" % (app.get("module") or "your app module",
                                                                   _SERVER_CHECK))
    elif kind == "FastAPI":
        notes.append("FastAPI server truth: in %s, after the routes, add `import reticle` and, in development only, "
                     "`app = reticle.asgi(app)` (SQLAlchemy: `reticle.watch_sqlalchemy(engine)`); %s"
                     % (app.get("module") or "your app module", _SERVER_CHECK))
    return changes, notes


def _init_command() -> List[str]:
    """How MCP clients start Reticle: `reticle mcp` when it is on PATH, else this interpreter
    and this file."""
    if shutil.which("reticle"):
        return ["reticle", "mcp"]
    return _self_command() + ["mcp"]


def _cli_init(dry_run: bool, yes: bool, port: int) -> int:
    """`reticle init`: print the plan, then write it (unless --dry-run; a terminal asks first
    unless --yes)."""
    root = os.path.abspath(os.getcwd())
    plan = _init_plan(root, os.path.expanduser("~"), port, _init_command())
    out = sys.stdout
    app = plan["app"]
    out.write("app: %s (%s)%s\n" % (app["kind"], app["why"], "; HTML entry %s" % os.path.relpath(app["entry"], root)
                                    if app.get("entry") else ""))
    for w in plan["warnings"]:
        out.write("warning: %s\n" % w)
    for n in plan["notes"]:
        out.write("note: %s\n" % n)
    changes = plan["changes"]
    if not changes:
        out.write("nothing to change\n")
        return 0
    verb = "would change" if dry_run else "changing"
    for c in changes:
        shown = c.path if not c.path.startswith(root + os.sep) else os.path.relpath(c.path, root)
        out.write("%s %s: %s\n" % (verb, shown, c.what))
        if dry_run:
            for line in c.new.splitlines():
                if c.old is None or line not in c.old.splitlines():
                    out.write("  + %s\n" % line)
    if dry_run:
        out.write("dry run: nothing written\n")
        return 0
    if not yes and sys.stdin.isatty():
        out.write("apply these changes? [y/N] ")
        out.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            out.write("nothing written\n")
            return 1
    written = 0
    for c in changes:
        inside = not os.path.relpath(c.path, root).startswith(os.pardir)
        problem = _outside_project(root, c.path) if inside else None
        if problem:  # it changed since the plan was made
            out.write("skipped %s: %s\n" % (c.path, problem))
            continue
        os.makedirs(os.path.dirname(c.path), exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (getattr(os, "O_NOFOLLOW", 0) if inside else 0)
        with os.fdopen(os.open(c.path, flags, 0o644), "w", encoding="utf-8") as fh:
            fh.write(c.new)
        written += 1
    out.write("done: %d file(s) written\n" % written)
    return 0


###############################################################################
# CLI #########################################################################
###############################################################################


def _count_arg(text: str) -> int:
    """An argparse type: a whole number, 0 or more (a usage error naming what was given otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number; give 0 or more" % text) from None
    if value < 0:
        raise argparse.ArgumentTypeError("%d is negative; give 0 or more" % value)
    return value


def _shard_arg(text: str) -> Tuple[int, int]:
    """An argparse type: I/N, 1 <= I <= N <= SHARD_MAX (a usage error naming what was given otherwise)."""
    m = re.fullmatch(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)) <= SHARD_MAX:
        raise argparse.ArgumentTypeError("%r is not a shard: give I/N with 1 <= I <= N <= %d, for example 2/4"
                                         % (text, SHARD_MAX))
    return int(m.group(1)), int(m.group(2))


def _build_parser() -> argparse.ArgumentParser:
    """The `reticle` command line: one subparser per command with its options and help text.
    Parsing only; main() runs the command."""
    parser = argparse.ArgumentParser(
        prog="reticle", description="Reticle: verify an AI agent's change in the real, running web app.")
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def port_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--port", type=int, default=None,
                       help="daemon port (default RETICLE_PORT or %d)" % DEFAULT_PORT)

    p = sub.add_parser("serve", help="run the daemon in the foreground")
    port_arg(p)
    p.add_argument("--host", default=None, help="bind address (default RETICLE_HOST or 127.0.0.1)")
    p.add_argument("--tls", action="store_true", help="serve HTTPS/WSS with a self-signed certificate")
    p.add_argument("--certfile", default=None, help="PEM certificate for --tls")
    p.add_argument("--keyfile", default=None, help="PEM private key for --tls")
    p = sub.add_parser("mcp", help="MCP over stdio; starts a daemon on the first tool call")
    port_arg(p)
    p = sub.add_parser("status", help="is a daemon running? (exit 1 when not)")
    port_arg(p)
    p.add_argument("--json", action="store_true", help="print the raw /status JSON")
    p = sub.add_parser("stop", help="stop the daemon on the port and wait until the port is free")
    port_arg(p)
    p = sub.add_parser("token", help="print the pairing token")
    p.add_argument("--rotate", action="store_true", help="replace the token with a new one")
    p = sub.add_parser("demo", help="verify the built-in demo app in a browser Reticle starts")
    p.add_argument("--headed", action="store_true", help="show the browser window")
    p = sub.add_parser("drive", help="open a device on URL and keep it until Ctrl-C")
    p.add_argument("url", metavar="URL", help="the page to open")
    p.add_argument("--headed", action="store_true", help="show the browser window")
    port_arg(p)
    p = sub.add_parser("init", help="add the dev-only script tag and the MCP client configuration here")
    p.add_argument("--dry-run", action="store_true", help="print the changes without writing them")
    p.add_argument("--yes", action="store_true", help="write without asking")
    port_arg(p)
    p = sub.add_parser("verify", help="replay saved flows on devices (CI): exit 0 only when every flow is yes")
    p.add_argument("flows", nargs="*", metavar="FLOWS", help="saved flow names or .json paths (default: all saved)")
    p.add_argument("--url", default=None, help="where flows start (an origin keeps each flow's path)")
    p.add_argument("--jobs", type=int, default=1, help="flows replayed in parallel, one device each (at most 4)")
    p.add_argument("--junit", default=None, metavar="FILE", help="write JUnit XML to FILE")
    p.add_argument("--report", default=None, metavar="FILE", help="write a self-contained HTML report to FILE")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.add_argument("--teeth", action="store_true",
                   help="replay each yes flow once more per write it made, that write answered 500: a flow still "
                        "yes is toothless (exit 4)")
    p.add_argument("--shard", type=_shard_arg, default=None, metavar="I/N",
                   help="run only part I of N of the selected flows (one CI job each; `reticle report merge` joins "
                        "the parts' --json results)")
    p.add_argument("--durations", default=None, metavar="FILE",
                   help="with --shard: balance the parts by the flows' times in FILE, a previous run's --json output")
    p.add_argument("--teeth-max", type=_count_arg, default=None, metavar="N",
                   help="--teeth replays a flow at most N more times (default %d): the writes its checks look at "
                        "first, then in the order made; the rest are named as untested" % TEETH_MAX_DEFAULT)
    port_arg(p)
    p = sub.add_parser("report", help="reports of `reticle verify` runs: `report merge` joins shards' results")
    report = p.add_subparsers(dest="report_command", metavar="ACTION")
    p = report.add_parser("merge", help="merge the --json results of `verify --shard` jobs into one run's reports "
                                        "and exit code")
    p.add_argument("paths", nargs="+", metavar="PATH", help="shard results files, or folders of them (*.json)")
    p.add_argument("--junit", default=None, metavar="FILE", help="write the merged JUnit XML to FILE")
    p.add_argument("--report", default=None, metavar="FILE", help="write the merged HTML report to FILE")
    p.add_argument("--json", action="store_true", help="print the merged results as JSON instead of a table")
    return parser


def _resolve_port(value: Optional[int]) -> int:
    port = value if value is not None else _env_int("RETICLE_PORT", DEFAULT_PORT)
    if not 0 <= port <= 65535:
        raise ConfigError("port %d is out of range; use 1-65535" % port)
    return port


def _print_status(data: dict) -> None:
    uptime = data.get("uptimeMs", 0) // 1000
    lines = ["reticle %s running: pid %s, port %s, up %dm%02ds" % (
        data.get("version"), data.get("pid"), data.get("port"), uptime // 60, uptime % 60),
        "MCP clients: %s   devices: %d" % (data.get("mcpClients", 0), len(data.get("devices", [])))]
    sessions = data.get("sessions") or []
    lines.append("browser sessions: %d" % len(sessions))
    for s in sessions:
        health = ("  (not answering: %s)" % s["notAnswering"] if s.get("notAnswering") else
                  "  (throttled)" if s.get("throttled") else "")
        lines.append("  %s  %s%s%s" % (s.get("sessionId"), s.get("url"), health,
                                       "  (a device Reticle started)" if s.get("device") else ""))
    if data.get("why"):
        lines.append("why none: %s" % data["why"])
    sys.stdout.write("\n".join(lines) + "\n")


async def _cli_status(port: int, as_json: bool) -> int:
    probe = await _probe_port(port)
    if probe["state"] != "daemon":
        reason = ("nothing listens on port %d" % port if probe["state"] == "free"
                  else _port_owner_sentence(port, probe))
        if as_json:
            sys.stdout.write(_dumps({"running": False, "port": port, "presence": probe["state"],
                                     "reason": reason}) + "\n")
        sys.stderr.write("reticle: no daemon answers: %s. Start one with `reticle serve --port %d` (or let "
                         "`reticle mcp` start it).\n" % (reason, port))
        return 1
    probe.pop("state", None)
    probe.pop("scheme", None)
    if as_json:
        sys.stdout.write(_dumps(probe) + "\n")
    else:
        _print_status(probe)
    return 0


async def _cli_stop(port: int, state: _StateDir) -> int:
    probe = await _probe_port(port)
    if probe["state"] == "free":
        sys.stderr.write("reticle: no daemon runs on port %d; nothing to stop.\n" % port)
        return 0
    if probe["state"] != "daemon":
        sys.stderr.write("reticle: %s\n" % _port_owner_sentence(port, probe))
        return 1
    resp = await _http("POST", port, "/stop", b"{}", {"Authorization": "Bearer %s" % state.token(),
                                                       "Content-Type": "application/json"},
                       scheme=probe.get("scheme", "http"))
    if resp.code != 202:
        sys.stderr.write("reticle: the daemon refused to stop (HTTP %d: %s). Is RETICLE_TOKEN or "
                         "RETICLE_STATE_DIR different from the daemon's?\n" % (
                             resp.code, (resp.body or b"").decode("utf-8", "replace")[:200]))
        return 1
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (await _probe_port(port, timeout=0.3))["state"] == "free":
            sys.stderr.write("reticle: stopped the daemon on port %d (pid %s).\n" % (port, probe.get("pid")))
            return 0
        await asyncio.sleep(0.1)
    sys.stderr.write("reticle: the daemon on port %d (pid %s) did not stop within 10 s.\n" % (port, probe.get("pid")))
    return 1


class _DemoPageHandler(tornado.web.RequestHandler):
    """GET / of the demo app: the embedded page (no script tag)."""

    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.write(_DEMO_HTML)


class _DemoApiHandler(tornado.web.RequestHandler):
    """POST /api/<what> of the demo app; the profile write fails on purpose."""

    def initialize(self, counter: List[int]) -> None:
        self.counter = counter

    def post(self, what: str) -> None:
        self.counter[0] += 1
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            body = {}
        if what == "profile":
            self.set_status(500)
            self.write({"error": "the profile store is read-only"})
        elif what == "notes":
            self.set_status(201)
            self.write({"id": self.counter[0], "text": str(body.get("text", ""))[:200]})
        elif what == "cart":
            self.counter[1] += 1
            self.set_status(201)
            self.write({"items": self.counter[1]})
        else:
            self.set_status(404)
            self.write({"error": "no such endpoint"})


# step, the predicate in words, the tool call, what the demo expects (the bugs are planted: "no"
# is the right answer for three of them)
_DEMO_STEPS = (
    ("add a note", "POST /api/notes 201, and 'Buy milk' shown", "reticle_act_and_wait",
     {"target": {"role": "button", "name": "Add note"}, "action": "click",
      "until": {"kind": "allOf", "predicates": [
          {"kind": "net", "method": "POST", "urlContains": "/api/notes", "status": 201},
          {"kind": "text", "contains": "Buy milk"}]}}, "yes"),
    ("save the profile", "text 'Profile saved' shown", "reticle_act_and_wait",
     {"target": {"role": "button", "name": "Save profile"}, "action": "click",
      "until": {"kind": "text", "contains": "Profile saved"}}, "no"),
    ("add one item to the cart", "exactly one POST /api/cart", "reticle_act_and_wait",
     {"target": {"role": "button", "name": "Add to cart"}, "action": "click",
      "until": {"kind": "net", "method": "POST", "urlContains": "/api/cart", "count": 1}}, "no"),
    ("load the stats", "no console error", "reticle_act_and_wait",
     {"target": {"role": "button", "name": "Load stats"}, "action": "click",
      "until": {"kind": "console", "level": "error", "absent": True}, "timeout_ms": 1500}, "no"),
)


async def _demo_call(hub: Hub, ctx: _CallContext, name: str, args: dict) -> Tuple[dict, bool]:
    """One tools/call through the same dispatcher an MCP client reaches."""
    reply = await hub.dispatcher.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                         "params": {"name": name, "arguments": args}}, ctx)
    if reply is None or "error" in reply:
        raise ToolError("%s: %s" % (name, (reply or {}).get("error")))
    result = reply["result"]
    return result.get("structuredContent") or {}, bool(result.get("isError"))


def _table(rows: List[List[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


async def _cli_demo(headed: bool) -> int:
    """`reticle demo`: the demo app in a device, verified through the tools, as a table."""
    out = sys.stdout
    hub = Hub(host=DEFAULT_HOST, port=0)
    sockets = tornado.netutil.bind_sockets(0, DEFAULT_HOST)
    hub.port = sockets[0].getsockname()[1]
    server = tornado.httpserver.HTTPServer(make_app(hub))
    server.add_sockets(sockets)
    app_sockets = tornado.netutil.bind_sockets(0, DEFAULT_HOST)
    demo = tornado.web.Application([(r"/", _DemoPageHandler), (r"/api/(\w+)", _DemoApiHandler, {"counter": [0, 0]})],
                                   log_function=lambda handler: None)
    app_server = tornado.httpserver.HTTPServer(demo)
    app_server.add_sockets(app_sockets)
    url = "http://127.0.0.1:%d/" % app_sockets[0].getsockname()[1]
    ctx = _CallContext("cli", "cli:demo")
    code = 1
    try:
        await asyncio.get_running_loop().run_in_executor(None, hub.devices.reap_orphans)
        out.write("reticle demo: the demo app (planted bugs) is at %s\n" % url)
        exe = _find_browser()
        out.write("reticle demo: starting %s %s ...\n" % (exe, "headed" if headed else "headless"))
        out.flush()
        started = time.monotonic()
        opened, failed = await _demo_call(hub, ctx, "reticle_open", {"url": url, "headed": headed})
        if failed:
            raise ToolError(opened.get("error", "the device did not open"))
        out.write("reticle demo: browser up and the page connected in %.2f s (session %s, no script tag: "
                  "the SDK was injected)\n" % (time.monotonic() - started, opened["sessionId"]))
        out.write("reticle demo: running %d verified steps through the same tools an agent calls ...\n\n"
                  % len(_DEMO_STEPS))
        out.flush()
        await _demo_call(hub, ctx, "reticle_act", {"target": {"placeholder": "Write a note"}, "action": "fill",
                                                   "args": {"value": "Buy milk"}})
        rows = [["step", "predicate", "verdict", "time", "evidence"]]
        seen = set()
        surprises = []
        for step, described, tool, args, expected in _DEMO_STEPS:
            t0 = time.monotonic()
            res, failed = await _demo_call(hub, ctx, tool, args)
            ms = (time.monotonic() - t0) * 1000
            verdict = "error" if failed else str(res.get("verified"))
            seen.add(verdict)
            if verdict != expected:
                surprises.append("%s: expected %s, got %s" % (step, expected, verdict))
            because = res.get("error") if failed else res.get("because", "")
            rows.append([step, described, verdict, "%d ms" % ms, _short(because, 90)])
        shot, failed = await _demo_call(hub, ctx, "reticle_screenshot", {})
        out.write(_table(rows) + "\n\n")
        if failed:
            out.write("screenshot: failed (%s)\n" % shot.get("error"))
        else:
            out.write("screenshot: %s (%dx%d)\n" % (shot["path"], shot["width"], shot["height"]))
        out.write("The three 'no' verdicts are the planted bugs: a write that failed under a 'saved' message, a "
                  "double submit and a console error. Only 'yes' is a pass.\n")
        if surprises:
            out.write("reticle demo: unexpected verdicts: %s\n" % "; ".join(surprises))
        else:
            code = 0
    except ToolError as exc:
        out.write("reticle demo: %s\n" % exc.error)
    finally:
        await hub.devices.close_all("the demo ended")
        server.stop()
        app_server.stop()
    out.flush()
    return code


async def _cli_drive(url: str, headed: bool, host: str, port: int) -> int:
    """`reticle drive URL`: a daemon in the foreground with one device on URL until Ctrl-C."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        sys.stderr.write("reticle: drive opens http: and https: URLs only, not %r\n" % url)
        return 2
    failed: List[str] = []

    async def open_device(hub: Hub) -> None:
        try:
            device, _ = await hub.devices.open("cli:drive", url, headed)
        except ToolError as exc:
            failed.append(exc.error)
            sys.stderr.write("reticle: %s\n" % exc.error)
            hub.request_stop("the device did not open")
            return
        sys.stdout.write("session %s on %s\nMCP: %s/mcp  (Ctrl-C closes the browser and stops)\n"
                         % (device.session_id, device.url, hub.public_origin()))
        sys.stdout.flush()

    def ready(hub: Hub) -> None:
        hub.spawn(open_device(hub))

    code = await _serve(host, port, ready=ready)
    return 1 if failed else code


def _verify_load(names: List[str], root: str) -> Tuple[List[dict], List[dict]]:
    """FLOWS arguments (saved names or paths to .json files; none = every saved flow) ->
    (flows, setup errors as results)."""
    flows: List[dict] = []
    errors: List[dict] = []
    if not names:
        names = [f["name"] for f in _list_flows(root)]
        if not names:
            errors.append({"name": "(none)", "verified": "error", "steps": [], "ms": 0,
                           "error": "no saved flows in %s; save one with reticle_flow_save" % _flows_dir(root)})
    expanded: List[str] = []
    for item in names:
        if os.path.isdir(item):  # a folder of flows: every .json file in it, in name order
            found = sorted(os.path.join(item, f) for f in os.listdir(item) if f.endswith(".json"))
            if not found:
                errors.append({"name": item, "verified": "error", "steps": [], "ms": 0,
                               "error": "the folder %s holds no .json flow files" % item})
            expanded.extend(found)
        else:
            expanded.append(item)
    for item in expanded:
        try:
            if item.endswith(".json") or os.sep in item:
                flow = _load_flow_file(item, follow=True)  # a path given on the command line may be a link
                problems = _flow_problems(flow)
                if problems:
                    raise ToolError("%s is not a Reticle flow: %s" % (item, "; ".join(problems)))
            else:
                flow = _read_flow(root, item)
            flows.append(flow)
        except (ToolError, OSError, ValueError) as exc:
            errors.append({"name": os.path.basename(item)[:-5] if item.endswith(".json") else item,
                           "verified": "error", "steps": [], "ms": 0,
                           "error": exc.error if isinstance(exc, ToolError) else str(exc)})
    return flows, errors


def _verify_setups(flows: List[dict], root: str) -> Tuple[List[dict], List[dict]]:
    """The selected flows with the setup flows they start from (`auth`) that are not among them,
    loaded from the project (-> (flows, setup errors as results)).  Each runs once in the run."""
    listed = {f.get("name") for f in flows}
    extra: List[dict] = []
    errors: List[dict] = []
    for name in sorted({f["auth"] for f in flows if f.get("auth")} - listed):
        try:
            extra.append(_read_flow(root, name))
        except ToolError as exc:
            errors.append({"name": name, "verified": "error", "steps": [], "ms": 0,
                           "error": "the setup flow of auth state %s: %s" % (name, exc.error)})
    return extra + flows, errors


def _verify_setup_waits(flows: List[dict]) -> Tuple[Dict[str, dict], Dict[str, "asyncio.Future[str]"]]:
    """The setup flows among `flows` by name, and a future per setup flow another flow starts from:
    set to its verdict when this run's one replay of it is over."""
    setups = {f["name"]: f for f in flows if f.get("setup")}
    loop = asyncio.get_running_loop()
    return setups, {n: loop.create_future() for n in setups if any(f.get("auth") == n for f in flows)}


async def _verify_args(flow: dict, setups: Dict[str, dict], made: Dict[str, "asyncio.Future[str]"]) -> dict:
    """reticle_flow_replay's `flow`, `secrets` and `setupFlow` for a flow: the secrets it types (and,
    for one that starts from auth state NAME, its setup flow NAME types too, after this run's one
    replay of it: a setup error when that was not yes), read from this process's environment,
    RETICLE_SECRET_* only."""
    steps = list(flow["steps"])
    name = flow.get("auth")
    if name and not flow.get("setup") and name in made:
        outcome = await asyncio.shield(made[name])
        if outcome != "yes":
            raise ToolError("auth state %s: its setup flow %s is %s in this run" % (name, name, outcome))
        steps += setups[name]["steps"]
    names = sorted({n for s in steps for n in _secret_refs(s.get("args") or {})})
    args: Dict[str, Any] = {"flow": flow}
    if names:
        args["secrets"] = {n: _fill_secrets("${%s}" % n, {}) for n in names}
    if name in setups and not flow.get("setup"):
        args["setupFlow"] = setups[name]
    return args


async def _verify_call(link: "_DaemonLink", name: str, args: dict, timeout: float = 300.0) -> dict:
    """One tools/call through the daemon; a tool error raises ToolError with its message."""
    result = await asyncio.wait_for(link.request("tools/call", {"name": name, "arguments": args}), timeout)
    data = (result or {}).get("structuredContent") or {}
    if (result or {}).get("isError"):
        raise ToolError(str(data.get("error") or data), str(data.get("recovery") or ""))
    return data


async def _verify_teeth(link: "_DaemonLink", args: dict, writes: List[dict],
                        progress: Callable[[str], None], name: str) -> List[dict]:
    """`--teeth`: replay a flow that was `yes` once more per write its steps made, with that write
    answered 500 by a fault.  A flow still `yes` under a failed write is toothless for that write."""
    out = []
    for w in writes:
        label = _write_label(w)
        fault = {"match": {"urlContains": w["path"], "method": w["method"]},
                 "respond": {"status": 500, "body": "reticle verify --teeth: this write failed on purpose"}}
        t0 = time.monotonic()
        try:
            res = await _verify_call(link, "reticle_flow_replay", dict(args, faults=[fault]))
        except (ToolError, RpcError, asyncio.TimeoutError) as exc:
            reason = exc.error if isinstance(exc, ToolError) else str(exc)
            res = {"verified": "error", "because": reason}
        hits = sum(f.get("hits", 0) for f in res.get("faults", []))
        row = {"write": label, "verified": res.get("verified"), "toothless": res.get("verified") == "yes" and hits > 0,
               "ms": round((time.monotonic() - t0) * 1000), "because": res.get("because")}
        if not hits and res.get("verified") != "error":
            row["note"] = "the write was not made again under the fault, so this replay says nothing about it"
        if isinstance(res.get("failedStep"), int):
            row["failedStep"] = res["failedStep"]
        out.append(row)
        verdict = ("TOOTHLESS (still yes with the write failed)" if row["toothless"]
                   else "%s under the failed write" % row["verified"])
        progress("%s: teeth for %s: %s" % (name, label, verdict))
    return out


async def _verify_teeth_of(link: "_DaemonLink", args: dict, flow: dict, res: dict, limit: int,
                           progress: Callable[[str], None]) -> None:
    """`--teeth` for one flow that replayed yes: at most `limit` teeth replays (_teeth_plan), the
    results in res["teeth"] and res["toothless"], the writes over the bound in res["teethUntested"]."""
    chosen, untested = _teeth_plan(flow, res.get("writes") or [], limit)
    res["teeth"] = await _verify_teeth(link, args, chosen, progress, res["name"])
    res["toothless"] = [t["write"] for t in res["teeth"] if t["toothless"]]
    res["teethMax"] = limit
    if untested:
        res["teethUntested"] = [_write_label(w) for w in untested]
        progress("%s: %d write(s) left untested (over --teeth-max %d): %s" % (
            res["name"], len(untested), limit, ", ".join(res["teethUntested"])))


async def _verify_flows(port: int, state: _StateDir, flows: List[dict], url: Optional[str], jobs: int,
                        progress: Callable[[str], None], teeth: Optional[int] = None) -> List[dict]:
    """Replay `flows` on up to `jobs` devices (one MCP session and one device per job, reused
    from flow to flow, each flow in a fresh browser context) and answer one result per flow,
    in the order given; `teeth` is --teeth's bound (None: no teeth check)."""
    results: List[Optional[dict]] = [None] * len(flows)
    queue = sorted(enumerate(flows), key=lambda item: (not item[1].get("setup"), item[0]))  # setup flows first
    total = len(flows)
    done = [0]
    setups, made = _verify_setup_waits(flows)

    async def worker(n: int) -> None:
        """One job: replay flows taken off the shared queue on its own MCP link and device (opened on the
        first flow, a fresh context for each next one), with secrets from RETICLE_SECRET_*, the teeth check
        and a screenshot of a failure; every flow gets a result (an error one on failure), and the device
        is closed when the queue is empty, whatever happened."""
        link = _DaemonLink(port, state)
        session_id: Optional[str] = None
        try:
            while queue:
                i, flow = queue.pop(0)
                name = flow.get("name", "flow-%d" % i)
                t0 = time.monotonic()
                progress("[%d/%d] %s: replaying %d step(s)" % (i + 1, total, name, len(flow["steps"])))
                res: Dict[str, Any]
                try:
                    # the secrets come from this process's environment, RETICLE_SECRET_* only; the daemon
                    # types each one only into the origin the flow recorded it on
                    args = await _verify_args(flow, setups, made)
                    start = _start_url(flow, url)
                    if not start:
                        raise ToolError("the flow %s has no startUrl; pass --url" % name)
                    # every flow starts clean: a job's next flow reuses its browser in a new, empty
                    # context, so no flow sees the cookies or storage another one left
                    if session_id is None:
                        session_id = (await _verify_call(link, "reticle_open", {"url": start}))["sessionId"]
                    else:
                        args["fresh"] = True
                    args["sessionId"] = session_id
                    if url:
                        args["url"] = url
                    res = dict(await _verify_call(link, "reticle_flow_replay", args))
                    res["name"] = name
                    if teeth is not None and res.get("verified") == "yes":
                        await _verify_teeth_of(link, dict(args, fresh=True), flow, res, teeth, progress)
                    if res.get("verified") != "yes":
                        try:
                            shot = await _verify_call(link, "reticle_screenshot", {"sessionId": session_id})
                            with open(shot["path"], "rb") as fh:
                                res["screenshot"] = base64.b64encode(fh.read()).decode("ascii")
                        except (ToolError, RpcError, OSError, KeyError) as exc:
                            res["screenshotError"] = str(exc)
                except (ToolError, RpcError, ConfigError, asyncio.TimeoutError) as exc:
                    reason = exc.error if isinstance(exc, ToolError) else (
                        exc.message if isinstance(exc, RpcError) else str(exc) or "timed out")
                    res = {"name": name, "verified": "error", "steps": [], "error": reason}
                res["ms"] = round((time.monotonic() - t0) * 1000)
                results[i] = res
                if name in made and not made[name].done():  # the flows that start from its state go on
                    made[name].set_result(res["verified"])
                done[0] += 1
                progress("[%d/%d done] %s: %s in %.1f s%s" % (
                    done[0], total, name, res["verified"], res["ms"] / 1000.0,
                    "" if res["verified"] == "yes"
                    else " (%s)" % _short(res.get("error") or res.get("because") or "", 160)))
        finally:
            if session_id is not None:
                try:
                    await _verify_call(link, "reticle_close", {"sessionId": session_id}, 15.0)
                except (ToolError, RpcError, asyncio.TimeoutError):
                    pass

    await asyncio.gather(*(worker(n) for n in range(max(1, min(jobs, len(flows))))))
    return [r for r in results if r is not None]


def _verify_table(results: List[dict]) -> str:
    teeth = any("teeth" in r for r in results)
    rows = [["flow", "steps", "verdict", "time", "failing step / evidence"] + (["teeth"] if teeth else [])]
    for r in results:
        failing = _failing_step(r)
        if r["verified"] == "error":
            why = "setup: %s" % r.get("error", "")
        elif failing is not None:
            why = "step %d %s: %s" % (failing["index"], failing["step"], failing.get("because") or "")
        else:
            why = ""
        rows.append([r["name"], str(len(r.get("steps", []))), r["verified"], "%.1f s" % (r.get("ms", 0) / 1000.0),
                     _short(why.replace("\n", " "), 160)] + ([_short(_teeth_cell(r), 160)] if teeth else []))
    untested = ["%s: %d write(s) left untested by --teeth (over --teeth-max %s): %s" % (
        r["name"], len(r["teethUntested"]), r.get("teethMax", "?"), ", ".join(r["teethUntested"]))
        for r in results if r.get("teethUntested")]
    return "\n".join([_table(rows)] + untested)


async def _cli_verify(args: argparse.Namespace, port: int, state: _StateDir) -> int:
    """`reticle verify`: replay saved flows on devices, print one table, write the reports."""
    t0 = time.monotonic()
    root = os.path.abspath(os.environ.get("RETICLE_PROJECT_DIR") or os.getcwd())
    jobs = max(1, min(args.jobs, _env_int("RETICLE_MAX_DEVICES", MAX_DEVICES_DEFAULT)))

    def progress(line: str) -> None:
        sys.stderr.write("reticle verify: %s\n" % line)
        sys.stderr.flush()

    flows, results = _verify_load(list(args.flows), root)
    shard: Optional[dict] = None
    if args.shard:
        try:
            flows, results, shard = _verify_shard(args.shard, args.durations, flows, results, progress)
        except ValueError as exc:
            sys.stderr.write("reticle verify: --durations %s: %s\n" % (args.durations, exc))
            return 3
    elif args.durations:
        sys.stderr.write("reticle verify: --durations balances shards; give it with --shard I/N\n")
        return 2
    if args.teeth_max is not None and not args.teeth:
        sys.stderr.write("reticle verify: --teeth-max bounds the replays of --teeth; give it with --teeth\n")
        return 2
    chosen = {x.get("name") for x in flows + results}
    flows, missing = _verify_setups(flows, root)
    results += missing
    started_here = False
    if flows:
        probe = await _probe_port(port)
        if probe["state"] == "foreign":
            results.append({"name": "(daemon)", "verified": "error", "steps": [], "ms": 0,
                            "error": _port_owner_sentence(port, probe)})
            flows = []
        started_here = probe["state"] == "free"
        if started_here:
            progress("no daemon on port %d: starting one" % port)
    if flows:
        progress("%d flow(s), %d job(s), project %s" % (len(flows), min(jobs, len(flows)), root))
        results = await _verify_flows(port, state, flows, args.url, jobs, progress,
                                      (TEETH_MAX_DEFAULT if args.teeth_max is None else args.teeth_max)
                                      if args.teeth else None) + results
    for r in results:  # a setup flow run only for the flows that start from it: the merge keeps its own run
        if r.get("name") not in chosen:
            r["setupOnly"] = True
    if started_here:
        await _cli_stop(port, state)
    # a shard that drew no flow (fewer flows than shards) has nothing to fail: the merge judges the run
    code = 0 if shard is not None and not results else _verify_exit(results)
    return _verify_output(args, results, code, t0, progress, shard)


def _verify_shard(shard: Tuple[int, int], durations_file: Optional[str], flows: List[dict], errors: List[dict],
                  progress: Callable[[str], None]) -> Tuple[List[dict], List[dict], dict]:
    """`--shard I/N`: the flows (and the setup errors of flows that did not load) of part I, split by
    _shard_plan over every selected name; ValueError for a --durations file that is not results."""
    index, total = shard
    durations: Optional[Dict[str, float]] = None
    if durations_file:
        try:
            durations = _durations_of(_loads(_read_regular(durations_file, RESULTS_MAX_BYTES, True).decode("utf-8")))
        except FileNotFoundError:  # the first run of a pipeline has no previous results: split by name
            progress("--durations %s: no such file; the shards are split by name alone" % durations_file)
        except UnicodeDecodeError as exc:
            raise ValueError("the file is not UTF-8 (%s)" % exc) from None
    items = [("flow", f) for f in flows] + [("error", e) for e in errors if e["name"] != "(none)"]
    names = [str(x.get("name", "")) for _, x in items]
    plan = _shard_plan(names, total, durations)
    mine = [item for item, s in zip(items, plan) if s == index - 1]
    progress("shard %d/%d: %d of %d flow(s)%s" % (index, total, len(mine), len(items),
                                                  " balanced by the times in %s" % durations_file if durations else ""))
    info = {"index": index, "total": total, "selected": names, "byDurations": bool(durations)}
    return ([x for k, x in mine if k == "flow"], [x for k, x in mine if k == "error"]
            + [e for e in errors if e["name"] == "(none)"], info)


def _verify_output(args: argparse.Namespace, results: List[dict], code: int, t0: float,
                   progress: Callable[[str], None], shard: Optional[dict] = None) -> int:
    """The reports of a run (or of merged shards): --junit, --report, then --json or the table."""
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as fh:
            fh.write(_junit_xml(results))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            fh.write(_html_report(results))
    if args.json:
        # a shard's results keep the screenshots, so the merged report shows them
        shown = results if shard else [{k: v for k, v in r.items() if k != "screenshot"} for r in results]
        doc: Dict[str, Any] = {"exitCode": code, "ms": round((time.monotonic() - t0) * 1000), "flows": shown}
        if shard:
            doc["shard"] = shard
        sys.stdout.write(_dumps(doc) + "\n")
    else:
        sys.stdout.write(_verify_table(results) + "\n")
        counts = collections.Counter(r["verified"] for r in results)
        sys.stdout.write("%s in %.1f s; exit %d\n" % (", ".join("%d %s" % (n, v) for v, n in sorted(counts.items()))
                                                      or "no flows", time.monotonic() - t0, code))
    for path, what in ((args.junit, "JUnit XML"), (args.report, "HTML report")):
        if path:
            progress("%s written to %s" % (what, path))
    return code


def _cli_report_merge(args: argparse.Namespace) -> int:
    """`reticle report merge PATH...`: the shards' --json results as one run: its JUnit, HTML report,
    table or JSON, and its exit code (_verify_exit; a gap or overlap among the shards is exit 3)."""
    t0 = time.monotonic()

    def progress(line: str) -> None:
        sys.stderr.write("reticle report merge: %s\n" % line)
        sys.stderr.flush()

    files: List[str] = []
    docs: List[Tuple[str, Any]] = []
    unread: List[dict] = []
    for path in args.paths:
        if os.path.isdir(path):
            found = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".json"))
            if not found:
                unread.append(_merge_error("(merge)", "the folder %s holds no .json results files" % path))
            files.extend(found)
        else:
            files.append(path)
    for path in files:
        try:
            docs.append((path, _loads(_read_regular(path, RESULTS_MAX_BYTES, True).decode("utf-8"))))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            unread.append(_merge_error("(merge)", "%s cannot be read: %s" % (path, exc)))
    results = _merge_shards(docs) + unread
    progress("%d file(s), %d flow(s)" % (len(files), len(results)))
    return _verify_output(args, results, _verify_exit(results), t0, progress)


def main(argv: Optional[List[str]] = None) -> int:
    """The CLI.  Returns the exit code; never calls sys.exit."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --version, --help and usage errors: argparse exits
        return exc.code if isinstance(exc.code, int) else 2
    if not args.command:
        parser.print_usage(sys.stderr)
        sys.stderr.write("reticle: choose a command: serve, mcp, status, stop, token, demo, drive, verify, report or "
                         "init\n")
        return 2
    try:
        state = _StateDir()
        if args.command == "token":
            if os.environ.get("RETICLE_TOKEN", "").strip():
                if args.rotate:
                    sys.stderr.write("reticle: RETICLE_TOKEN is set, so the token comes from the environment; "
                                     "change it there.\n")
                    return 1
                sys.stdout.write(os.environ["RETICLE_TOKEN"].strip() + "\n")
                return 0
            sys.stdout.write((state.rotate_token() if args.rotate else state.token()) + "\n")
            return 0
        port = _resolve_port(getattr(args, "port", None))
        if args.command == "serve":
            _setup_logging()
            host = args.host or os.environ.get("RETICLE_HOST", "").strip() or DEFAULT_HOST
            return asyncio.run(_serve(host, port, tls=args.tls, certfile=args.certfile, keyfile=args.keyfile))
        if args.command == "mcp":
            _setup_logging(logging.WARNING)
            return asyncio.run(_mcp_stdio(port, state))
        if args.command == "status":
            return asyncio.run(_cli_status(port, args.json))
        if args.command == "stop":
            return asyncio.run(_cli_stop(port, state))
        if args.command == "demo":
            _setup_logging(logging.WARNING)
            return asyncio.run(_cli_demo(args.headed))
        if args.command == "init":
            return _cli_init(args.dry_run, args.yes, port)
        if args.command == "verify":
            _setup_logging(logging.WARNING)
            return asyncio.run(_cli_verify(args, port, state))
        if args.command == "report":
            if args.report_command != "merge":
                sys.stderr.write("reticle: choose an action: reticle report merge PATH...\n")
                return 2
            return _cli_report_merge(args)
        if args.command == "drive":
            _setup_logging(logging.WARNING)
            host = os.environ.get("RETICLE_HOST", "").strip() or DEFAULT_HOST
            return asyncio.run(_cli_drive(args.url, args.headed, host, port))
    except ConfigError as exc:
        sys.stderr.write("reticle: %s\n" % exc)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


###############################################################################
# pytest plugin ###############################################################
###############################################################################
# `pytest --reticle-flows` collects the project's flows (.reticle/flows/*.json under pytest's rootdir)
# as test items, setup flows first, and replays each through `reticle verify`'s own code on a daemon
# it starts or reuses, so pytest-xdist (`-n auto`) and pytest's JUnit (`--junitxml`) run flows too.
# setup.cfg registers _PytestPlugin as the `pytest11` entry point.  Nothing here imports pytest until
# pytest calls a hook, and without --reticle-flows every hook returns at once.

def _pytest_failure(res: dict) -> Optional[str]:
    """None when a verify result passes as a test, else the failure's text: `no` and `unknown`
    with the reason and the failing step's evidence, a setup error, or toothless under teeth."""
    verdict = res.get("verified")
    if verdict == "yes" and not res.get("toothless"):
        return None
    if verdict == "yes":
        return ("toothless for %s: the flow is still yes when that write fails (--reticle-teeth)"
                % ", ".join(res["toothless"]))
    if verdict == "error":
        return "setup error: %s" % res.get("error")
    lines = ["verified: %s: %s" % (verdict, res.get("because"))]
    failing = _failing_step(res)
    if failing is not None and failing.get("evidence"):
        lines.append("evidence: %s" % _short(_dumps(failing["evidence"]), 2000))
    return "\n".join(lines)


def _pytest_replay(root: str, path: str, url: Optional[str], teeth: bool) -> dict:
    """One flow file replayed as `reticle verify FILE` replays it (one device, a daemon started when
    none runs, left running for the next item) -> its result."""
    port = _resolve_port(None)

    async def run() -> dict:
        flows, errors = _verify_load([path], root)
        probe = await _probe_port(port)
        if probe["state"] == "foreign":
            return {"name": os.path.basename(path)[:-5], "verified": "error", "steps": [],
                    "error": _port_owner_sentence(port, probe)}
        if errors:
            return errors[0]
        return (await _verify_flows(port, _StateDir(), flows, url, 1, lambda line: None, teeth))[0]
    return asyncio.run(run())


def _pytest_items(session: Any) -> List[Any]:
    """The flows of pytest's rootdir as items (one file node and one item per flow file)."""
    import pytest  # only here: pytest is running and asked for flows
    root = str(session.config.rootpath)
    config = session.config

    class FlowFile(pytest.File):
        def collect(self) -> Any:
            yield FlowItem.from_parent(self, name=self.path.stem)

    class FlowItem(pytest.Item):
        def runtest(self) -> None:
            res = _pytest_replay(root, str(self.path), config.getoption("reticle_url"),
                                 bool(config.getoption("reticle_teeth")))
            self.user_properties.append(("verified", res.get("verified")))
            failure = _pytest_failure(res)
            if failure is not None:
                raise _FlowFailed(failure)

        def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
            if isinstance(excinfo.value, _FlowFailed):
                return "flow %s: %s" % (self.name, excinfo.value)
            return super().repr_failure(excinfo, style)

        def reportinfo(self) -> Any:
            return self.path, None, "reticle flow %s" % self.name

    files = []
    for item in _list_flows(root):
        path = os.path.join(_flows_dir(root), item["name"] + ".json")
        try:
            setup = bool(_load_flow_file(path).get("setup"))
        except (OSError, ValueError, AttributeError):
            setup = False  # its item fails with the file's problem
        files.append((not setup, item["name"], path))
    out = []
    for _, _, path in sorted(files):
        out.extend(FlowFile.from_parent(session, path=session.config.rootpath / os.path.relpath(path, root)).collect())
    return out


class _FlowFailed(Exception):
    """A flow that is not yes as a pytest test (the text says why)."""


class _PytestPlugin:
    """The hooks pytest calls (the `pytest11` entry point `reticle = reticle:_PytestPlugin`)."""

    @staticmethod
    def pytest_addoption(parser: Any) -> None:
        group = parser.getgroup("reticle", "Reticle flows")
        group.addoption("--reticle-flows", action="store_true", default=False,
                        help="collect .reticle/flows/*.json under the rootdir as tests, replayed as `reticle "
                             "verify` replays them: yes passes, no and unknown fail")
        group.addoption("--reticle-teeth", action="store_true", default=False,
                        help="with --reticle-flows: a yes flow still yes with a write it made failed fails "
                             "(reticle verify --teeth)")
        group.addoption("--reticle-url", default=None, metavar="URL",
                        help="with --reticle-flows: where flows start (an origin keeps each flow's path)")

    @staticmethod
    def pytest_collection_modifyitems(session: Any, config: Any, items: List[Any]) -> None:
        if config.getoption("reticle_flows", False):
            items.extend(_pytest_items(session))

    @staticmethod
    def pytest_sessionstart(session: Any) -> None:
        config = session.config
        if config.getoption("reticle_flows", False) and not hasattr(config, "workerinput"):
            # the process that owns the run (not an xdist worker) stops a daemon no one ran before it
            probe = asyncio.run(_probe_port(_resolve_port(None)))
            config._reticle_daemon_was = probe["state"]

    @staticmethod
    def pytest_sessionfinish(session: Any) -> None:
        config = session.config
        if getattr(config, "_reticle_daemon_was", None) == "free":
            port = _resolve_port(None)
            if asyncio.run(_probe_port(port))["state"] == "daemon":
                asyncio.run(_cli_stop(port, _StateDir()))


###############################################################################
# Embedded assets #############################################################
###############################################################################
# _DEMO_HTML: the page `reticle demo` serves (with /api/* answered by
# _DemoApiHandler).  It carries no script tag: the device injects the SDK.
# Planted bugs: "Save profile" shows "Profile saved" although its write
# answers 500; "Add to cart" submits twice; "Load stats" logs an error.

_DEMO_HTML = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Reticle demo shop</title>
<style>
  body { font: 16px/1.4 system-ui, sans-serif; margin: 2rem auto; max-width: 40rem; color: #222; }
  section { border: 1px solid #ccc; border-radius: 6px; padding: 1rem; margin: 1rem 0; }
  button { font: inherit; padding: .3rem .8rem; }
  .ok { color: #176d2c; }
</style>
</head>
<body>
<h1>Demo shop</h1>
<section>
  <h2>Notes</h2>
  <label>Note <input id="note" placeholder="Write a note"></label>
  <button id="add">Add note</button>
  <ul id="notes"></ul>
</section>
<section>
  <h2>Profile</h2>
  <label>Name <input id="name" value="Ada"></label>
  <button id="save">Save profile</button>
  <p id="profile-status" role="status"></p>
</section>
<section>
  <h2>Cart</h2>
  <button id="cart">Add to cart</button>
  <p id="cart-status"></p>
</section>
<section>
  <h2>Stats</h2>
  <button id="stats">Load stats</button>
  <p id="stats-out"></p>
</section>
<script>
  function $(id) { return document.getElementById(id); }
  function post(url, body) {
    return fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                        body: JSON.stringify(body) });
  }
  $('add').addEventListener('click', function () {
    var text = $('note').value;
    post('/api/notes', { text: text }).then(function (r) { return r.json(); }).then(function (note) {
      var li = document.createElement('li');
      li.textContent = note.text;
      $('notes').appendChild(li);
      $('note').value = '';
    });
  });
  // Bug 1: the message says saved whatever the server answered.
  $('save').addEventListener('click', function () {
    post('/api/profile', { name: $('name').value }).then(function (r) { return r.text(); }).then(function () {
      $('profile-status').textContent = 'Profile saved';
      $('profile-status').className = 'ok';
    });
  });
  // Bug 2: a second listener left over from a refactor adds the item again.
  function addToCart() {
    post('/api/cart', { sku: 'tea', qty: 1 }).then(function (r) { return r.json(); }).then(function (c) {
      $('cart-status').textContent = c.items + ' item(s) in the cart';
    });
  }
  $('cart').addEventListener('click', addToCart);
  $('cart').addEventListener('click', function () { addToCart(); });
  // Bug 3: the stats code reads a field of undefined and logs the error.
  $('stats').addEventListener('click', function () {
    try {
      var stats = JSON.parse('{}');
      $('stats-out').textContent = 'Visitors: ' + stats.visitors.total;
    } catch (e) {
      console.error('stats failed: ' + e.message);
      $('stats-out').textContent = 'Visitors: -';
    }
  });
</script>
</body>
</html>
"""


# _SDK_JS: the in-page SDK, served at GET /reticle.js by _SdkHandler.  The
# daemon replaces __RETICLE_VERSION__ and the config token; it never holds
# the pairing token.

_SDK_JS = r"""/*! reticle-sdk __RETICLE_VERSION__ */
/* Reticle in-page SDK. Served by the Reticle daemon at /reticle.js; dev-only, loopback-only by default.
   One IIFE; the only global it creates is window.reticle. It never throws into the host page.
   Named sections, in a fixed order: grep -n '// == Section' lists them (tests/test_sdk_js.py holds the order). */
/* eslint-disable-next-line max-lines-per-function -- this IIFE is the whole SDK; its functions are held to 80 */
(function () {
  'use strict';
  // == Section: config == configuration, caps, and the natives captured before any page script runs
  var CONFIG = /*__RETICLE_CONFIG__*/null;
  if (typeof window === 'undefined' || typeof document === 'undefined') return;
  if (window.reticle && window.reticle.__reticleSdk) return; // loaded twice: keep the first copy

  var SCRIPT_EL = document.currentScript || null;
  var CFG = CONFIG && typeof CONFIG === 'object' ? CONFIG : {};
  var VERSION = String(CFG.version || '0.0.0');
  var PROTOCOL_VERSION = CFG.protocolVersion || 1;
  var MAX_FRAME = Math.max(65536, Number(CFG.maxMessageBytes) || 1048576);
  var BATCH_MAX_EVENTS = 200;
  var BATCH_MAX_BYTES = Math.min(524288, Math.floor(MAX_FRAME / 2));
  var QUEUE_MAX = 500;
  var OPEN_QUEUE_MAX = 20000; // events held while the socket is open but backed up
  var BUFFERED_MAX = 4 << 20; // bytes the browser may buffer on the socket before we hold back
  var RESULT_QUEUE_MAX = 100;
  var BODY_CAP = 8192;
  var BODY_SCAN = 16384;
  var FRAME_DATA_CAP = 4096;
  var STACK_CAP = 4000;
  var ERROR_CAP = 4096;
  var REDACTED = '[redacted]';
  var PREFIX = '[reticle]';

  // ---- native handles, captured before anything is patched ----------------------------------
  var N = {};
  (function () {
    var w = window;
    N.setTimeout = w.setTimeout.bind(w);
    N.clearTimeout = w.clearTimeout.bind(w);
    N.setInterval = w.setInterval.bind(w);
    N.clearInterval = w.clearInterval.bind(w);
    N.raf = w.requestAnimationFrame
      ? w.requestAnimationFrame.bind(w)
      : function (f) {
          return N.setTimeout(f, 16);
        };
    N.now =
      w.performance && w.performance.now
        ? w.performance.now.bind(w.performance)
        : function () {
            return Date.now();
          };
    N.dateNow = Date.now;
    N.warn = w.console && w.console.warn ? w.console.warn.bind(w.console) : function () {};
    N.WebSocket = w.WebSocket;
    N.fetch = w.fetch;
    N.stringify = JSON.stringify;
    N.parse = JSON.parse;
    N.MutationObserver = w.MutationObserver;
    N.Promise = w.Promise;
  })();

  // == Section: relay == a device's bridge: the relay's MessagePort
  // ---- a device's bridge: the relay's MessagePort, never a socket of this world ---------------
  // In a device, the bridge socket lives in the relay's isolated world; this world only holds the
  // port the relay hands over (matched by the nonce), so no page script can read its ticket.
  // Everything it does with the port and its messages goes through natives captured here, before
  // any page script runs: a page that patches MessagePort or MessageEvent never holds the port.
  function relaySockets(nonce) {
    var P = window.MessagePort && MessagePort.prototype,
      E = window.MessageEvent && MessageEvent.prototype,
      apply = Reflect.apply,
      getData = Object.getOwnPropertyDescriptor(E, 'data').get,
      getPorts = Object.getOwnPropertyDescriptor(E, 'ports').get,
      stopNow = Event.prototype.stopImmediatePropagation,
      postPort = P.postMessage,
      setOnMessage = Object.getOwnPropertyDescriptor(P, 'onmessage').set;
    function post(m) {
      apply(postPort, port, [m]);
    }
    var port = null,
      queued = [],
      socks = {},
      nextId = 1;
    function onPort(m) {
      var d = apply(getData, m, []) || {},
        s = socks[d.id];
      if (!s) return;
      if (d.op === 'open' && s.readyState === 0) {
        s.readyState = 1;
        if (s.onopen) s.onopen({});
      } else if (d.op === 'message' && s.readyState === 1) {
        if (s.onmessage) s.onmessage({ data: d.data });
      } else if (d.op === 'buffered') {
        s.bufferedAmount = Number(d.n) || 0;
      } else if (d.op === 'close') {
        delete socks[d.id];
        s.readyState = 3;
        if (s.onclose) s.onclose({ code: d.code, reason: d.reason || '' });
      }
    }
    window.addEventListener(
      'message',
      function (m) {
        var d = apply(getData, m, []);
        if (port || !d || typeof d !== 'object' || d.reticleRelay !== nonce) return;
        var ports = apply(getPorts, m, []);
        if (!ports || !ports.length) return;
        apply(stopNow, m, []);
        port = ports[0];
        apply(setOnMessage, port, [onPort]);
        for (var i = 0; i < queued.length; i++) post({ op: 'open', id: queued[i] });
        queued = [];
      },
      true
    );
    return function (url) {
      var id = nextId++;
      var s = { url: url, readyState: 0, bufferedAmount: 0, onopen: null, onmessage: null, onclose: null };
      s.send = function (data) {
        if (s.readyState !== 1 || !port) throw new Error('not open');
        post({ op: 'send', id: id, data: String(data) });
      };
      s.close = function (code) {
        if (s.readyState >= 2) return;
        s.readyState = 2;
        if (port) post({ op: 'close', id: id, code: code });
      };
      socks[id] = s;
      if (port) post({ op: 'open', id: id });
      else queued.push(id);
      return s;
    };
  }
  if (CFG.device && typeof CFG.relay === 'string') N.BridgeSocket = relaySockets(CFG.relay);

  // == Section: helpers == small helpers, redaction, the sanitizer
  // ---- small helpers -------------------------------------------------------------------------
  function warn(msg) {
    try {
      N.warn(PREFIX + ' ' + msg);
    } catch (e) {
      /* ignore */
    }
  }
  function microtask(fn) {
    N.Promise.resolve().then(fn);
  }
  function hasOwn(o, k) {
    return Object.prototype.hasOwnProperty.call(o, k);
  }
  function isObj(v) {
    return v !== null && typeof v === 'object';
  }
  function clip(s, n) {
    s = String(s == null ? '' : s);
    return s.length > n ? s.slice(0, n) + '\u2026' : s;
  }
  function collapse(s) {
    return String(s == null ? '' : s)
      .replace(/\s+/g, ' ')
      .trim();
  }
  function norm(s) {
    s = collapse(s);
    try {
      s = s.normalize('NFC');
    } catch (e) {
      /* old engines */
    }
    return s;
  }
  function isNativeFn(f) {
    try {
      return (
        typeof f === 'function' &&
        /\[native code\]\s*\}\s*$/.test(Function.prototype.toString.call(f))
      );
    } catch (e) {
      return false;
    }
  }
  function uuid() {
    try {
      if (window.crypto && window.crypto.randomUUID) return window.crypto.randomUUID();
    } catch (e) {
      /* insecure ctx */
    }
    var b = new Uint8Array(16);
    try {
      window.crypto.getRandomValues(b);
    } catch (e) {
      for (var i = 0; i < 16; i++) b[i] = Math.floor(Math.random() * 256);
    }
    b[6] = (b[6] & 15) | 64;
    b[8] = (b[8] & 63) | 128;
    var h = '';
    for (var j = 0; j < 16; j++) {
      h += (b[j] + 256).toString(16).slice(1);
      if (j === 3 || j === 5 || j === 7 || j === 9) h += '-';
    }
    return h;
  }
  function rand36(n) {
    var s = '';
    while (s.length < n) s += Math.random().toString(36).slice(2);
    return s.slice(0, n);
  }
  function ssGet(k) {
    try {
      return window.sessionStorage.getItem(k);
    } catch (e) {
      return null;
    }
  }
  function ssSet(k, v) {
    try {
      STORAGE_MUTE++;
      window.sessionStorage.setItem(k, v);
    } catch (e) {
      /* private mode */
    } finally {
      STORAGE_MUTE--;
    }
  }
  var STORAGE_MUTE = 0;
  // an Error with the machine-readable code the daemon branches on (target_missing, ...)
  function coded(code, message) {
    var e = new Error(message);
    e.code = code;
    return e;
  }
  function errCode(e) {
    try {
      return e && typeof e === 'object' && typeof e.code === 'string' ? e.code : undefined;
    } catch (x) {
      return undefined;
    }
  }
  function errMsg(e) {
    if (e && typeof e === 'object' && 'message' in e) return String(e.message);
    try {
      return String(e);
    } catch (x) {
      return 'unknown error';
    }
  }

  // ---- redaction -----------------------------------------------------------------------------
  var SENSITIVE_KEY = new RegExp(
    '(pass(word|wd|code|phrase)|^pass$|^pwd$|secret|token|api[-_ ]?key|apikey|access[-_]?key|private[-_]?key|' +
      'authorization|^auth$|^cookie$|set-cookie|^cookies$|session[-_]?id|^sid$|^jwt$|credential|credit[-_]?card|' +
      'card[-_]?number|^cvv$|^cvc$|^ssn$|signature$|x-amz-security|x-goog-signature)',
    'i'
  );
  var OWN_KEYS = { sessionId: 1, documentId: 1, requestId: 1 }; // our own identifiers, not secrets
  function isSensitiveKey(k) {
    return typeof k === 'string' && k.length > 0 && !OWN_KEYS[k] && SENSITIVE_KEY.test(k);
  }
  var EXTRA_KEYS = [];
  function keySensitive(k) {
    if (isSensitiveKey(k)) return true;
    for (var i = 0; i < EXTRA_KEYS.length; i++) if (EXTRA_KEYS[i] === k) return true;
    return false;
  }
  var SECRET_PATTERNS = [
    [/\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}/g, REDACTED],
    [/\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+\/=-]{12,}/gi, '$1 ' + REDACTED],
    [/\b(?:sk|rk|pk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_-]{16,}/g, REDACTED],
    [/\bgh[pousr]_[A-Za-z0-9]{20,}/g, REDACTED],
    [/\bgithub_pat_[A-Za-z0-9_]{20,}/g, REDACTED],
    [/\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, REDACTED],
    [/\bxox[abprs]-[A-Za-z0-9-]{10,}/g, REDACTED],
    [/\bya29\.[A-Za-z0-9_-]{20,}/g, REDACTED],
    [/\bAIza[0-9A-Za-z_-]{30,}/g, REDACTED]
  ];
  function scrub(s) {
    if (typeof s !== 'string' || s.length < 8) return s;
    for (var i = 0; i < SECRET_PATTERNS.length; i++)
      s = s.replace(SECRET_PATTERNS[i][0], SECRET_PATTERNS[i][1]);
    return s;
  }
  var KV_PAIR =
    /((?:["']?)([A-Za-z0-9_.-]{2,64})(?:["']?)\s*[:=]\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\s&,;}\]]+)/g;
  function scrubText(s) {
    if (typeof s !== 'string') return s;
    s = scrub(s);
    return s.replace(KV_PAIR, function (all, lead, key, val) {
      if (!keySensitive(key)) return all;
      var q = val.charAt(0) === '"' ? '"' : val.charAt(0) === "'" ? "'" : '';
      return lead + q + REDACTED + q;
    });
  }
  function redactUrl(u) {
    if (typeof u !== 'string') {
      try {
        u = String(u);
      } catch (e) {
        return '';
      }
    }
    var out = u.replace(
      /^([a-z][a-z0-9+.-]*:\/\/)([^\/@?#:]*):([^\/@?#]*)@/i,
      '$1$2:' + REDACTED + '@'
    );
    out = out.replace(/([?&#;])([^=&#;]+)=([^&#;]*)/g, function (all, sep, k, v) {
      var key = k;
      try {
        key = decodeURIComponent(k);
      } catch (e) {
        /* keep raw */
      }
      return keySensitive(key) ? sep + k + '=' + REDACTED : all;
    });
    out = out.replace(
      /(\/(?:reset|verify|confirm|activate|invite|magic|magiclink|magic-link|token|key|oauth|unsubscribe|password)[^\/?#]*\/)([^\/?#]{12,})/gi,
      '$1' + REDACTED
    );
    return scrub(out);
  }

  // ---- sanitizer: JSON-safe, capped, redacted clone ------------------------------------------
  function describeNode(n) {
    try {
      if (n === window) return '[Window]';
      if (n === document) return '[Document]';
      if (n.nodeType === 1) {
        var s = '<' + n.tagName.toLowerCase();
        if (n.id) s += '#' + n.id;
        if (typeof n.className === 'string' && n.className.trim())
          s += '.' + n.className.trim().split(/\s+/).slice(0, 3).join('.');
        return s + '>';
      }
      if (n.nodeType === 3) return '#text "' + clip(collapse(n.data), 40) + '"';
      return '[' + (n.nodeName || 'Node') + ']';
    } catch (e) {
      return '[Node]';
    }
  }
  // A JSON-safe, capped, redacted clone of `value`; opt: depth, items, str, budget, nodes, redact,
  // report (its .cut learns how many things were cut). The san* functions share one ctx record.
  function sanitize(value, opt) {
    opt = opt || {};
    var ctx = {
      opt: opt,
      maxDepth: opt.depth == null ? 8 : opt.depth,
      maxItems: opt.items || 200,
      maxStr: opt.str || 65536,
      budget: opt.budget || 262144,
      nodes: 0,
      maxNodes: opt.nodes || 1000,
      cut: 0,
      stack: []
    };
    var out = sanWalk(ctx, value, 0, null);
    if (opt.report) opt.report.cut = ctx.cut;
    return out;
  }
  var SAN_PLAIN = {}; // sanSpecial's answer for a value that is none of its kinds
  function sanStr(ctx, s, key) {
    var cap = key === 'error' ? ERROR_CAP : ctx.maxStr;
    if (s.length > cap) {
      s = s.slice(0, cap) + '\u2026[TRUNCATED]';
      ctx.cut++;
    }
    if (ctx.opt.redact !== false) s = scrub(s);
    ctx.budget -= s.length;
    return s;
  }
  function sanWalk(ctx, v, depth, key) {
    ctx.nodes++;
    if (v === null) return null;
    var t = typeof v;
    if (t === 'string') return sanStr(ctx, v, key);
    if (t === 'number') return isFinite(v) ? v : null;
    if (t === 'boolean') return v;
    if (t === 'bigint') return String(v);
    if (t === 'undefined' || t === 'function' || t === 'symbol') return undefined;
    if (ctx.budget <= 0 || ctx.nodes > ctx.maxNodes) {
      ctx.cut++;
      return '[TRUNCATED]';
    }
    var special = sanSpecial(ctx, v);
    if (special !== SAN_PLAIN) return special;
    if (ctx.stack.indexOf(v) >= 0) return '[CIRCULAR]';
    if (depth >= ctx.maxDepth) return sanDeep(ctx, v);
    ctx.stack.push(v);
    try {
      if (Array.isArray(v) || (ArrayBuffer.isView && ArrayBuffer.isView(v) && !(v instanceof DataView)))
        return sanArray(ctx, v, depth);
      if (typeof Map !== 'undefined' && v instanceof Map) {
        var mo = {},
          i = 0;
        v.forEach(function (mv, mk) {
          if (i++ < ctx.maxItems) mo[String(mk)] = mv;
        });
        return sanWalk(ctx, mo, depth, key);
      }
      if (typeof Set !== 'undefined' && v instanceof Set) {
        var sa = [];
        v.forEach(function (sv) {
          if (sa.length < ctx.maxItems) sa.push(sv);
        });
        return sanWalk(ctx, sa, depth, key);
      }
      return sanObject(ctx, v, depth);
    } finally {
      ctx.stack.pop();
    }
  }
  // A date, an error, a regex or a DOM node as its short form; SAN_PLAIN for anything else.
  function sanSpecial(ctx, v) {
    try {
      if (v instanceof Date) return isNaN(v.getTime()) ? null : v.toISOString();
      if (v instanceof Error)
        return { name: sanStr(ctx, String(v.name || 'Error')), message: sanStr(ctx, String(v.message || '')) };
      if (v instanceof RegExp) return String(v);
      if (typeof Node !== 'undefined' && (v instanceof Node || v === window)) return describeNode(v);
    } catch (e) {
      return '[UNSERIALIZABLE]';
    }
    return SAN_PLAIN;
  }
  // A container past the depth cap: its size only.
  function sanDeep(ctx, v) {
    ctx.cut++;
    if (Array.isArray(v)) return '[Array(' + v.length + ')]';
    try {
      return '{\u2026' + Object.keys(v).length + ' keys}';
    } catch (e) {
      return '{\u2026}';
    }
  }
  function sanArray(ctx, v, depth) {
    var res = [];
    for (var i = 0; i < v.length; i++) {
      if (i >= ctx.maxItems || ctx.budget <= 0) {
        res.push('[TRUNCATED ' + (v.length - i) + ' more]');
        ctx.cut++;
        break;
      }
      var x = sanWalk(ctx, v[i], depth + 1, null);
      res.push(x === undefined ? null : x);
    }
    return res;
  }
  function sanObject(ctx, v, depth) {
    var res = {};
    var keys;
    try {
      keys = Object.keys(v);
    } catch (e) {
      return '[UNSERIALIZABLE]';
    }
    for (var i = 0; i < keys.length; i++) {
      if (i >= ctx.maxItems || ctx.budget <= 0) {
        res['[TRUNCATED]'] = keys.length - i + ' more keys';
        ctx.cut++;
        break;
      }
      sanKey(ctx, res, v, keys[i], depth);
    }
    return res;
  }
  // One key of an object into res: a sensitive key's scalar redacted, anything else walked.
  function sanKey(ctx, res, v, k, depth) {
    var kk = k.length > 256 ? k.slice(0, 256) : k;
    ctx.budget -= kk.length;
    if (ctx.opt.redact !== false && keySensitive(k)) {
      // a sensitive key holding a scalar is redacted; a container is walked (its own keys decide)
      var raw;
      try {
        raw = v[k];
      } catch (e) {
        raw = null;
      }
      if (!isObj(raw)) {
        if (raw !== undefined && raw !== null && raw !== '') res[kk] = REDACTED;
        else if (raw !== undefined) res[kk] = raw;
        return;
      }
    }
    var val;
    try {
      val = v[k];
    } catch (e) {
      res[kk] = '[UNSERIALIZABLE]';
      return;
    }
    var w = sanWalk(ctx, val, depth + 1, k);
    if (w !== undefined) res[kk] = w;
  }
  function safeStringify(v, cap) {
    try {
      if (typeof v === 'string') return clip(scrub(v), cap || 1000);
      var sv = sanitize(v, { depth: 4, items: 50, str: 1000 });
      if (typeof sv === 'string') return clip(sv, cap || 1000);
      var s = N.stringify(sv);
      return clip(s === undefined ? String(v) : s, cap || 1000);
    } catch (e) {
      try {
        return clip(String(v), cap || 1000);
      } catch (x) {
        return '[unserializable]';
      }
    }
  }

  // == Section: events == the tab's state and the event queue
  // ---- state ---------------------------------------------------------------------------------
  var S = {
    started: false, // connect() ran and passed the guards
    stopped: false, // disconnect() or a 1008 close: no more retries
    opts: {},
    url: null,
    token: null,
    sessionId: null,
    documentId: rand36(8),
    ws: null,
    open: false,
    seq: 0,
    backoff: 1000,
    retryTimer: null,
    failures: 0,
    everOpened: false,
    hintShown: false,
    outbox: [], // pending events: {s: serialized, churn: bool}
    results: [], // pending command_result frames while offline
    dropped: 0, // events dropped from the offline queue since the last report
    busyDropped: 0, // events dropped while open because the socket was backed up
    drainTimer: null,
    droppedChurn: 0,
    flushScheduled: false,
    captureBodies: true,
    teardowns: [],
    internalErrors: 0,
    adapters: [],
    caps: { testids: [], signals: [], stores: [], flows: [] },
    hasCaps: false,
    signalsSeen: {}
  };
  var CHURN = {
    'dom.text': 1,
    'anim.start': 1,
    'anim.end': 1,
    'page.health': 1,
    'scroll.position': 1,
    'render.commit': 1,
    'dom.attr': 1
  };

  function now() {
    return Math.round(N.now() * 10) / 10;
  }

  // report an internal failure without throwing into the app
  function internal(site, e) {
    S.internalErrors++;
    if (S.internalErrors > 50) return;
    try {
      var d = {
        reason: 'sdk-error',
        kind: 'sdk-failed',
        site: site,
        count: 1,
        detail: clip(errMsg(e), 500)
      };
      if (S.internalErrors === 50) d.note = 'further internal errors are not reported';
      emit('blind-spot', d);
    } catch (x) {
      /* nothing else we can do */
    }
  }
  function guard(site, fn) {
    return function () {
      try {
        return fn.apply(this, arguments);
      } catch (e) {
        internal(site, e);
      }
    };
  }

  // ---- events --------------------------------------------------------------------------------
  // emit(type, data, el?) - stamps the envelope and queues it for the next microtask flush.
  function emit(type, data, el) {
    if (!S.started) return;
    try {
      var ev = {
        type: type,
        t: now(),
        seq: S.seq++,
        sessionId: S.sessionId,
        documentId: S.documentId,
        data: null
      };
      if (el && el.nodeType === 1) {
        var r = refFor(el);
        if (r) ev.ref = r;
      } else if (typeof el === 'string') ev.ref = el;
      var s;
      var instead = function (why) {
        // the same event, its data replaced by why it could not travel
        var stub = { type: type, t: ev.t, seq: ev.seq, sessionId: S.sessionId, documentId: S.documentId };
        if (ev.ref) stub.ref = ev.ref;
        stub.data = why;
        return N.stringify(stub);
      };
      try {
        ev.data = sanitize(data || {}, { depth: 10, str: 65536, budget: 400000 });
        s = N.stringify(ev);
      } catch (e) {
        s = instead({ unserializable: true });
      }
      if (s.length > MAX_FRAME - 1024) {
        var size = s.length;
        s = instead({ truncatedEvent: true, originalBytes: size });
        S.outbox.push({ s: s, churn: false });
        var tr = record('truncated', ev.t, {
          what: type,
          count: 1,
          reason: 'event of ' + size + ' bytes exceeds the frame cap; data dropped',
          channel: 'transport',
          dropped: 1
        });
        S.outbox.push({ s: N.stringify(tr), churn: false });
      } else {
        S.outbox.push({ s: s, churn: !!CHURN[type] });
      }
      if (!S.open) S.dropped += trimOutbox(QUEUE_MAX);
      else if (S.outbox.length > OPEN_QUEUE_MAX) S.busyDropped += trimOutbox(OPEN_QUEUE_MAX);
      scheduleFlush();
    } catch (e) {
      /* emit must never throw */
    }
  }
  // Drop down to `limit` queued events, churn first; returns how many went.
  function trimOutbox(limit) {
    var gone = 0;
    while (S.outbox.length > limit) {
      var idx = -1;
      for (var i = 0; i < S.outbox.length; i++) {
        if (S.outbox[i].churn) {
          idx = i;
          break;
        }
      }
      if (idx < 0) idx = 0;
      else S.droppedChurn++;
      S.outbox.splice(idx, 1);
      gone++;
    }
    return gone;
  }
  function busy() {
    return !!(S.ws && S.ws.bufferedAmount > BUFFERED_MAX);
  }
  function scheduleFlush() {
    if (S.flushScheduled || !S.open) return;
    S.flushScheduled = true;
    microtask(flush);
  }
  function rawSend(str) {
    try {
      if (S.ws && S.open) {
        S.ws.send(str);
        return true;
      }
    } catch (e) {
      /* socket died */
    }
    return false;
  }
  // An event made by the transport itself (its losses), stamped like any other.
  function record(type, t, data) {
    return { type: type, t: t, seq: S.seq++, sessionId: S.sessionId, documentId: S.documentId, data: data };
  }
  function flush() {
    S.flushScheduled = false;
    if (!S.open) return;
    try {
      while (S.results.length) {
        if (!rawSend(S.results[0])) return;
        S.results.shift();
      }
      if (S.busyDropped > 0) {
        var lost = record('blind-spot', now(), {
          reason: 'outbox-overflow',
          kind: 'transport-overflow',
          count: S.busyDropped,
          detail:
            S.busyDropped +
            ' event(s) were dropped because the page produced them faster than the socket carried them'
        });
        S.outbox.unshift({ s: N.stringify(lost), churn: false });
        S.busyDropped = 0;
      }
      while (S.outbox.length) {
        if (busy()) {
          if (!S.drainTimer)
            S.drainTimer = N.setTimeout(function () {
              S.drainTimer = null;
              scheduleFlush();
            }, 50);
          return;
        }
        var n = 0,
          bytes = 0,
          parts = [];
        while (n < S.outbox.length && n < BATCH_MAX_EVENTS) {
          var len = S.outbox[n].s.length;
          if (n > 0 && bytes + len > BATCH_MAX_BYTES) break;
          parts.push(S.outbox[n].s);
          bytes += len + 1;
          n++;
        }
        var frame =
          parts.length === 1
            ? '{"kind":"event","event":' + parts[0] + '}'
            : '{"kind":"events","events":[' + parts.join(',') + ']}';
        if (!rawSend(frame)) return;
        S.outbox.splice(0, n);
      }
    } catch (e) {
      internal('transport', e);
    }
  }
  function sendResult(obj) {
    var s;
    try {
      s = N.stringify(obj);
    } catch (e) {
      s = N.stringify({
        kind: 'command_result',
        id: obj.id,
        ok: false,
        error: 'result could not be serialized: ' + clip(errMsg(e), 300)
      });
    }
    if (s.length > MAX_FRAME - 256) {
      var size = s.length;
      s = N.stringify({
        kind: 'command_result',
        id: obj.id,
        ok: false,
        error:
          'result of ' +
          size +
          ' bytes exceeds the ' +
          MAX_FRAME +
          '-byte frame cap; narrow the request (scope, limit, path)'
      });
      emit('truncated', {
        what: 'command_result',
        count: 1,
        reason: 'result exceeded frame cap',
        channel: 'transport',
        dropped: 1
      });
    }
    // events the page made before this answer go first: a verdict that reads the answer must
    // already hold them (a request the handler started, a message it logged)
    if (S.open && !S.results.length && S.outbox.length) flush();
    if (S.open && !S.results.length && !S.outbox.length && rawSend(s)) return;
    S.results.push(s);
    scheduleFlush();
    if (S.results.length > RESULT_QUEUE_MAX) {
      S.results.shift();
      S.dropped++;
    }
  }

  // == Section: transport == the socket, the hello, the server's mark, the command dispatcher
  // ---- hello / socket ------------------------------------------------------------------------
  function helloFrame() {
    var h = {
      kind: 'hello',
      protocolVersion: PROTOCOL_VERSION,
      sessionId: S.sessionId,
      url: clip(redactUrl(location.href), 4000),
      title: clip(document.title || '', 500),
      adapters: S.adapters.slice(0, 32),
      sdkVersion: VERSION,
      hasCapabilities: S.hasCaps,
      documentId: S.documentId,
      serverMark: true
    };
    if (S.token) h.token = S.token;
    if (EXTRA_KEYS.length)
      h.redactKeys = EXTRA_KEYS.filter(function (k) {
        return typeof k === 'string';
      }).slice(0, 64);
    return N.stringify(h);
  }
  function sendHello() {
    if (S.open) rawSend(helloFrame());
  }

  function openSocket() {
    if (S.stopped || !S.started) return;
    if (S.ws) return;
    S.retryTimer = null;
    var ws;
    try {
      ws = N.BridgeSocket ? N.BridgeSocket(S.url) : new N.WebSocket(S.url);
    } catch (e) {
      onFail(null);
      return;
    }
    S.ws = ws;
    ws.onopen = guard('transport', function () {
      if (S.ws !== ws) return;
      var again = S.everOpened;
      S.open = true;
      S.everOpened = true;
      S.failures = 0;
      S.backoff = 1000;
      rawSend(helloFrame());
      if (S.dropped > 0) {
        var ev = record('blind-spot', now(), {
          reason: 'offline-queue-overflow',
          kind: 'transport-overflow',
          count: S.dropped,
          detail:
            S.dropped +
            ' event(s) were dropped while the daemon was unreachable (queue holds ' +
            QUEUE_MAX +
            '; ' +
            S.droppedChurn +
            ' were churn)'
        });
        var ov = record('transport.overflow', ev.t, { dropped: S.dropped });
        S.outbox.unshift({ s: N.stringify(ov), churn: false });
        S.outbox.unshift({ s: N.stringify(ev), churn: false });
        S.dropped = 0;
        S.droppedChurn = 0;
      }
      flush();
      if (again) emitHealth('reconnect');
    });
    ws.onmessage = function (m) {
      try {
        onMessage(m.data);
      } catch (e) {
        internal('command', e);
      }
    };
    ws.onerror = function () {
      try {
        ws.close();
      } catch (e) {
        /* already closing */
      }
    };
    ws.onclose = guard('transport', function (ev) {
      if (S.ws !== ws) return;
      S.ws = null;
      S.open = false;
      if (ev && ev.code === 1008) {
        S.stopped = true;
        warn(
          'the daemon refused this page (1008' +
            (ev.reason ? ': ' + ev.reason : '') +
            '); not retrying. Check the pairing token and the daemon logs.'
        );
        return;
      }
      onFail(ev);
    });
  }
  function onFail() {
    S.ws = null;
    S.open = false;
    if (S.stopped) return;
    S.failures++;
    if (!S.everOpened && S.failures === 3 && !S.hintShown) {
      S.hintShown = true;
      warn(
        'cannot reach the daemon at ' +
          S.url +
          ' (3 attempts). Is it running (reticle status) and on this port? ' +
          'An https page cannot open a ws:// socket. Retrying quietly.'
      );
    }
    var delay = S.backoff;
    S.backoff = Math.min(30000, S.backoff * 2);
    if (S.retryTimer) N.clearTimeout(S.retryTimer);
    S.retryTimer = N.setTimeout(openSocket, delay);
  }
  function retryNow() {
    if (S.stopped || !S.started || S.ws) return;
    S.backoff = 1000;
    if (S.retryTimer) {
      N.clearTimeout(S.retryTimer);
      S.retryTimer = null;
    }
    openSocket();
  }

  // ---- server truth: the marks the app's middleware reports this tab's requests by ------------
  // The daemon hands each document a pool of one-use marks, [id, secret]. A same-origin fetch/XHR
  // carries one secret in a header (no other origin can read a request's headers) and its
  // net.pending names the id, which the daemon files the server's record under. A document
  // request, which cannot carry a header, carries one in a cookie set just before the page
  // leaves, scoped to the destination's path and living seconds; another port's page can read
  // that cookie, so the daemon takes it only from a request the browser says this origin (or the
  // user) sent. Cross-origin requests are never marked.
  var MARK = { pool: [], on: false, asked: false, header: 'X-Reticle-Mark', cookie: '__reticle_mark' };
  var MARK_LOW = 32; // marks left when the SDK asks the daemon for more
  function onServerMark(msg) {
    if (!Array.isArray(msg.marks)) return;
    if (msg.reset) MARK.pool = [];
    msg.marks.forEach(function (m) {
      if (Array.isArray(m) && /^[A-Za-z0-9_-]{1,32}$/.test(m[0]) && /^[0-9a-f]{32}$/.test(m[1]))
        MARK.pool.push([String(m[0]), String(m[1])]);
    });
    MARK.on = true;
    MARK.asked = false;
    if (typeof msg.header === 'string') MARK.header = msg.header;
    if (typeof msg.cookie === 'string') MARK.cookie = msg.cookie;
    if (msg.reset) clearMarkCookie();
  }
  // Through the native accessor: the storage observer's cookie patch must not report our own cookie.
  function rawCookie(value) {
    var desc = Object.getOwnPropertyDescriptor(Document.prototype, 'cookie');
    if (value === undefined) return desc && desc.get ? String(desc.get.call(document)) : String(document.cookie);
    if (desc && desc.set) desc.set.call(document, value);
    else document.cookie = value;
    return '';
  }
  // A cookie path for url's path: up to its last '/', without anything a cookie attribute could misread.
  function markPath(url) {
    var path;
    try {
      path = new URL(url, location.href).pathname;
    } catch (e) {
      return '/';
    }
    var bad = path.search(/[^A-Za-z0-9\-._~%!$&'()*+=:@/]/);
    return bad === -1 ? path : path.slice(0, path.lastIndexOf('/', bad) + 1) || '/';
  }
  function clearMarkCookie() {
    try {
      if (rawCookie().indexOf(MARK.cookie + '=') !== -1) {
        rawCookie(MARK.cookie + '=; path=/; max-age=0; samesite=strict');
        rawCookie(MARK.cookie + '=; path=' + markPath(location.href) + '; max-age=0; samesite=strict');
      }
    } catch (e) {
      /* cookies refused */
    }
  }
  // The next mark for a request to this document's own origin: [id, secret]; false when the pool
  // ran dry (the request goes unmarked and the server's side of it is unknown); asks for more.
  function takeMark() {
    var m = MARK.pool.shift() || false;
    if (MARK.pool.length <= MARK_LOW && !MARK.asked && S.open) {
      MARK.asked = true;
      rawSend(N.stringify({ kind: 'marks' }));
    }
    return m;
  }
  // Is url a request the server of this document may be asked to mark (same origin, marks on)?
  function markable(url) {
    if (!MARK.on) return false;
    try {
      return new URL(url, location.href).origin === location.origin;
    } catch (e) {
      return false;
    }
  }
  function markDocument(mark, url) {
    try {
      var path = url ? markPath(url) : '/';
      rawCookie(MARK.cookie + '=' + mark[1] + '; path=' + path + '; max-age=10; samesite=strict');
    } catch (e) {
      /* cookies refused */
    }
  }

  // ---- commands ------------------------------------------------------------------------------
  var COMMANDS = {};
  function onMessage(raw) {
    if (typeof raw !== 'string') return;
    var msg;
    try {
      msg = N.parse(raw);
    } catch (e) {
      return;
    }
    if (isObj(msg) && msg.kind === 'input_result') return onInputResult(msg);
    if (isObj(msg) && msg.kind === 'mark') return onServerMark(msg);
    if (!isObj(msg) || msg.kind !== 'command') return;
    var id = msg.id;
    if (typeof id !== 'string' && typeof id !== 'number') return;
    function fail(error, code) {
      var r = { kind: 'command_result', id: id, ok: false, error: clip(String(error), ERROR_CAP) };
      if (typeof code === 'string') r.code = code;
      sendResult(r);
    }
    if (typeof msg.name !== 'string') {
      fail('malformed command (no name); version skew, nothing ran');
      return;
    }
    if (msg.sessionId != null && msg.sessionId !== S.sessionId) {
      fail(
        'command addressed to session ' +
          clip(msg.sessionId, 140) +
          ' but this page is session ' +
          S.sessionId +
          '; nothing ran'
      );
      return;
    }
    var h = COMMANDS[msg.name];
    if (!h) {
      fail("unknown command '" + clip(msg.name, 100) + "'");
      return;
    }
    var args = isObj(msg.args) ? msg.args : {};
    var done = false;
    function ok(result) {
      if (done) return;
      done = true;
      var clean;
      try {
        clean = sanitize(result === undefined ? {} : result, {
          depth: 12,
          str: 262144,
          budget: 900000,
          nodes: 20000,
          items: 500
        });
      } catch (e) {
        fail('result could not be serialized: ' + errMsg(e));
        return;
      }
      sendResult({ kind: 'command_result', id: id, ok: true, result: clean });
    }
    function bad(e) {
      if (done) return;
      done = true;
      fail(errMsg(e), errCode(e));
    }
    try {
      var r = h(args, msg);
      if (r && typeof r.then === 'function') r.then(ok, bad);
      else ok(r);
    } catch (e) {
      bad(e);
    }
  }

  // == Section: refs == refs tied to DOM nodes, ignored subtrees
  // ---- refs: e1, e2... tied to DOM nodes -------------------------------------------------------
  var HAS_WEAKREF = typeof WeakRef === 'function';
  var REF_OF = new WeakMap();
  var EL_OF = new Map(); // ref -> WeakRef(element); insertion order = LRU order
  var REF_MAX = 10000;
  var refNext = 0,
    refBlockEnd = 0,
    mints = 0;
  function claimBlock() {
    var base = parseInt(ssGet('__reticle_ref_base') || '0', 10);
    if (!(base >= 0)) base = 0;
    if (base < refNext) base = refNext;
    refNext = base;
    refBlockEnd = base + 100;
    ssSet('__reticle_ref_base', String(refBlockEnd));
  }
  function refFor(el) {
    if (!el || el.nodeType !== 1) return null;
    var r = REF_OF.get(el);
    if (r) {
      var h = EL_OF.get(r);
      if (h) {
        EL_OF.delete(r);
        EL_OF.set(r, h);
        return r;
      }
    }
    if (refNext >= refBlockEnd) claimBlock();
    refNext++;
    r = 'e' + refNext;
    REF_OF.set(el, r);
    EL_OF.set(
      r,
      HAS_WEAKREF
        ? new WeakRef(el)
        : {
            deref: function () {
              return el;
            }
          }
    );
    if (EL_OF.size > REF_MAX) {
      var first = EL_OF.keys().next().value;
      EL_OF.delete(first);
    }
    if (++mints % 1000 === 0) sweepRefs();
    return r;
  }
  function sweepRefs() {
    EL_OF.forEach(function (h, r) {
      var el = h.deref();
      if (!el) EL_OF.delete(r);
    });
  }
  function resolveRef(ref) {
    if (typeof ref !== 'string') return null;
    var h = EL_OF.get(ref);
    if (!h) return null;
    var el = h.deref();
    if (!el || !el.isConnected) {
      EL_OF.delete(ref);
      return null;
    }
    EL_OF.delete(ref);
    EL_OF.set(ref, h);
    return el;
  }
  function staleError(ref) {
    var r = clip(ref, 128);
    return new Error(
      'stale ref ' +
        r +
        ": the element is no longer in the page; take a new snapshot (ref '" +
        r +
        "' no longer resolves to an element)"
    );
  }
  function mustResolve(ref) {
    var el = resolveRef(ref);
    if (!el) throw staleError(ref);
    return el;
  }

  // ---- ignored subtrees ----------------------------------------------------------------------
  var IGNORE_SEL =
    '[data-reticle-overlay],[data-reticle-cursor],[data-reticle-hud],[data-reticle-glow],[data-reticle-mark],[data-reticle-blocker],[data-reticle-ignore],[data-agentation],#__next-build-watcher,nextjs-portal,[data-nextjs-dialog],[data-nextjs-toast],vite-error-overlay';
  function isIgnored(el) {
    try {
      return !!(el && el.closest && el.closest(IGNORE_SEL));
    } catch (e) {
      return false;
    }
  }
  var SKIP_TAGS = {
    SCRIPT: 1,
    STYLE: 1,
    NOSCRIPT: 1,
    TEMPLATE: 1,
    HEAD: 1,
    META: 1,
    LINK: 1,
    TITLE: 1,
    BASE: 1
  };

  // == Section: semantics == role, name, visibility, states
  // ---- semantics: role, name, visibility, states ----------------------------------------------
  var INPUT_ROLES = {
    checkbox: 'checkbox',
    radio: 'radio',
    range: 'slider',
    number: 'spinbutton',
    submit: 'button',
    button: 'button',
    reset: 'button',
    image: 'button',
    search: 'searchbox'
  };
  var TAG_ROLES = {
    BUTTON: 'button',
    TEXTAREA: 'textbox',
    UL: 'list',
    OL: 'list',
    LI: 'listitem',
    NAV: 'navigation',
    MAIN: 'main',
    ASIDE: 'complementary',
    DIALOG: 'dialog',
    IMG: 'img',
    TABLE: 'table',
    FORM: 'form',
    P: 'paragraph',
    H1: 'heading',
    H2: 'heading',
    H3: 'heading',
    H4: 'heading',
    H5: 'heading',
    H6: 'heading',
    OPTION: 'option',
    PROGRESS: 'progressbar',
    METER: 'meter',
    TR: 'row',
    TD: 'cell',
    TH: 'columnheader',
    THEAD: 'rowgroup',
    TBODY: 'rowgroup',
    TFOOT: 'rowgroup',
    FIELDSET: 'group',
    DETAILS: 'group',
    SUMMARY: 'button',
    ARTICLE: 'article',
    OUTPUT: 'status',
    HR: 'separator',
    MENU: 'list',
    DL: 'list',
    DT: 'term',
    DD: 'definition',
    SEARCH: 'search',
    IFRAME: 'iframe'
  };
  function getRole(el) {
    var r = el.getAttribute && el.getAttribute('role');
    if (r && r.trim()) return r.trim().split(/\s+/)[0].toLowerCase();
    var tag = el.tagName;
    if (tag === 'A' || tag === 'AREA') return el.hasAttribute('href') ? 'link' : 'generic';
    if (tag === 'INPUT') {
      var t = (el.getAttribute('type') || 'text').toLowerCase();
      if (t === 'hidden') return 'none';
      if (t === 'file') return 'button';
      if (t === 'search') return 'searchbox';
      if (INPUT_ROLES[t]) return INPUT_ROLES[t];
      if (el.hasAttribute('list')) return 'combobox';
      return 'textbox';
    }
    if (tag === 'SELECT') return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
    if (tag === 'HEADER')
      return el.closest('article,aside,main,nav,section') ? 'generic' : 'banner';
    if (tag === 'FOOTER')
      return el.closest('article,aside,main,nav,section') ? 'generic' : 'contentinfo';
    if (tag === 'SECTION')
      return el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby')
        ? 'region'
        : 'generic';
    if (tag === 'IMG' && el.getAttribute('alt') === '') return 'presentation';
    if (el.isContentEditable && el.getAttribute('contenteditable') !== null) return 'textbox';
    return TAG_ROLES[tag] || 'generic';
  }
  var INTERACTIVE = {
    button: 1,
    link: 1,
    textbox: 1,
    searchbox: 1,
    checkbox: 1,
    radio: 1,
    combobox: 1,
    listbox: 1,
    slider: 1,
    spinbutton: 1,
    switch: 1,
    tab: 1,
    menuitem: 1,
    menuitemcheckbox: 1,
    menuitemradio: 1,
    option: 1,
    treeitem: 1
  };
  var NAME_FROM_CONTENT = {
    button: 1,
    link: 1,
    checkbox: 1,
    radio: 1,
    switch: 1,
    tab: 1,
    option: 1,
    menuitem: 1,
    menuitemcheckbox: 1,
    menuitemradio: 1,
    treeitem: 1,
    cell: 1,
    gridcell: 1,
    row: 1,
    rowheader: 1,
    columnheader: 1,
    heading: 1,
    listitem: 1,
    tooltip: 1,
    status: 1,
    alert: 1,
    term: 1,
    legend: 1
  };
  var CONTAINER_ROLES = {
    list: 1,
    listbox: 1,
    grid: 1,
    table: 1,
    tree: 1,
    treegrid: 1,
    dialog: 1,
    alertdialog: 1,
    navigation: 1,
    main: 1,
    banner: 1,
    form: 1,
    search: 1,
    menu: 1,
    menubar: 1,
    tablist: 1,
    region: 1,
    complementary: 1,
    contentinfo: 1
  };

  // Readable text: collapsed text that skips aria-hidden and never-rendered tags (script, style,
  // template, noscript...). `skip` is an element left out with its subtree (the control a label
  // names); a nested select or textarea counts as its current value, never as all its options.
  function textOf(node, depth, skip) {
    if (depth > 30) return '';
    var out = '';
    for (var c = node.firstChild; c; c = c.nextSibling) {
      if (c.nodeType === 3) out += c.data;
      else if (c.nodeType === 1) {
        if (SKIP_TAGS[c.tagName] || c.getAttribute('aria-hidden') === 'true' || c.hidden) continue;
        if (c === skip) continue;
        if (c.tagName === 'SELECT') {
          var so = c.selectedOptions && c.selectedOptions[0];
          out += ' ' + (so ? so.label || so.textContent : '') + ' ';
          continue;
        }
        if (c.tagName === 'TEXTAREA') continue;
        if (c.tagName === 'IMG') {
          out += ' ' + (c.getAttribute('alt') || '') + ' ';
          continue;
        }
        if (c.tagName === 'INPUT' && /^(submit|button|reset)$/i.test(c.type)) {
          out += ' ' + c.value + ' ';
          continue;
        }
        if (c.tagName === 'BR') {
          out += ' ';
          continue;
        }
        out += ' ' + textOf(c, depth + 1, skip) + ' ';
      }
    }
    return out;
  }
  function ownText(el) {
    var s = '';
    for (var c = el.firstChild; c; c = c.nextSibling) if (c.nodeType === 3) s += c.data;
    if (el.tagName === 'INPUT' && /^(submit|button|reset)$/i.test(el.type)) s += ' ' + el.value;
    return norm(s);
  }
  function labelsText(el) {
    var out = [];
    try {
      if (el.labels && el.labels.length)
        for (var i = 0; i < el.labels.length; i++) out.push(norm(textOf(el.labels[i], 0, el)));
    } catch (e) {
      /* not labelable */
    }
    return out.filter(Boolean);
  }
  function byIdText(el, attr) {
    var ids = (el.getAttribute(attr) || '').trim();
    if (!ids) return '';
    var root = el.getRootNode ? el.getRootNode() : document;
    var parts = ids.split(/\s+/).map(function (id) {
      var n = root.getElementById ? root.getElementById(id) : document.getElementById(id);
      if (!n) return '';
      return n.getAttribute('aria-label') || textOf(n, 0, el);
    });
    return norm(parts.join(' '));
  }
  function getName(el, role) {
    try {
      role = role || getRole(el);
      var n = byIdText(el, 'aria-labelledby');
      if (n) return n;
      n = norm(el.getAttribute('aria-label'));
      if (n) return n;
      var tag = el.tagName;
      if (tag === 'IMG' || tag === 'AREA' || (tag === 'INPUT' && el.type === 'image')) {
        n = norm(el.getAttribute('alt'));
        if (n) return n;
      }
      if (
        tag === 'INPUT' ||
        tag === 'TEXTAREA' ||
        tag === 'SELECT' ||
        tag === 'METER' ||
        tag === 'PROGRESS' ||
        tag === 'OUTPUT'
      ) {
        var lt = labelsText(el);
        if (lt.length) return lt.join(' ');
        if (tag === 'INPUT' && /^(submit|button|reset)$/i.test(el.type)) {
          n = norm(
            el.value || (el.type === 'submit' ? 'Submit' : el.type === 'reset' ? 'Reset' : '')
          );
          if (n) return n;
        }
        if (tag !== 'SELECT') {
          n = norm(el.getAttribute('placeholder'));
          if (n) return n;
        }
      }
      if (tag === 'FIELDSET') {
        var lg = el.querySelector('legend');
        if (lg) {
          n = norm(textOf(lg, 0));
          if (n) return n;
        }
      }
      if (tag === 'TABLE') {
        var cap = el.querySelector('caption');
        if (cap) {
          n = norm(textOf(cap, 0));
          if (n) return n;
        }
      }
      if (tag === 'DIALOG' || role === 'dialog' || role === 'alertdialog') {
        var hd = el.querySelector('h1,h2,h3,h4,h5,h6,[role=heading]');
        if (hd) {
          n = norm(textOf(hd, 0));
          if (n) return clip(n, 120);
        }
      }
      if (NAME_FROM_CONTENT[role]) {
        n = norm(textOf(el, 0));
        if (n) return clip(n, 200);
      }
      n = norm(el.getAttribute('title'));
      return n || '';
    } catch (e) {
      return '';
    }
  }
  function styleOf(el) {
    try {
      return (el.ownerDocument.defaultView || window).getComputedStyle(el);
    } catch (e) {
      return null;
    }
  }
  function makeVisCache() {
    return new Map();
  }
  function isVisible(el, cache) {
    if (!el || !el.isConnected) return false;
    var chain = [];
    var cur = el,
      result = true;
    while (cur && cur.nodeType === 1) {
      if (cache && cache.has(cur)) {
        result = cache.get(cur);
        break;
      }
      chain.push(cur);
      if (cur.getAttribute('aria-hidden') === 'true' || cur.hidden) {
        result = false;
        break;
      }
      var st = styleOf(cur);
      if (
        st &&
        (st.display === 'none' ||
          st.visibility === 'hidden' ||
          st.visibility === 'collapse' ||
          st.opacity === '0')
      ) {
        result = false;
        break;
      }
      var p = cur.parentNode;
      if (p && p.nodeType === 11 && p.host) p = p.host; // shadow root -> host
      if (
        !p &&
        cur.ownerDocument &&
        cur.ownerDocument.defaultView &&
        cur.ownerDocument.defaultView.frameElement
      ) {
        try {
          p = cur.ownerDocument.defaultView.frameElement;
        } catch (e) {
          p = null;
        }
      }
      cur = p;
    }
    if (cache) for (var i = 0; i < chain.length; i++) cache.set(chain[i], result);
    return result;
  }
  function isDisabled(el) {
    try {
      if (el.disabled === true) return true;
      if (el.getAttribute('aria-disabled') === 'true') return true;
      var fs = el.closest && el.closest('fieldset[disabled]');
      if (fs && /^(INPUT|BUTTON|SELECT|TEXTAREA)$/.test(el.tagName)) {
        var lg = fs.querySelector('legend');
        if (!(lg && lg.contains(el))) return true;
      }
    } catch (e) {
      /* ignore */
    }
    return false;
  }
  function isChecked(el) {
    if (el.tagName === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio'))
      return !!el.checked;
    var a =
      el.getAttribute('aria-checked') ||
      el.getAttribute('aria-pressed') ||
      el.getAttribute('aria-selected');
    return a === 'true' || a === 'mixed';
  }
  function isFocused(el) {
    try {
      var root = el.getRootNode ? el.getRootNode() : document;
      return root.activeElement === el;
    } catch (e) {
      return false;
    }
  }
  function isSecretField(el) {
    try {
      if (el.tagName === 'INPUT' && (el.type === 'password' || el.type === 'hidden')) return true;
      var ac = (el.getAttribute('autocomplete') || '').toLowerCase();
      if (/(current-password|new-password|cc-number|cc-csc|one-time-code)/.test(ac)) return true;
      var keys = [
        el.getAttribute('name'),
        el.id,
        el.getAttribute('data-testid'),
        el.getAttribute('aria-label')
      ];
      for (var i = 0; i < keys.length; i++) if (keys[i] && keySensitive(keys[i])) return true;
    } catch (e) {
      /* ignore */
    }
    return false;
  }
  function getValue(el) {
    var tag = el.tagName,
      v = null;
    if (tag === 'INPUT') {
      var t = el.type;
      if (
        t === 'checkbox' ||
        t === 'radio' ||
        t === 'submit' ||
        t === 'button' ||
        t === 'reset' ||
        t === 'image'
      )
        return null;
      if (t === 'file') {
        try {
          v = Array.prototype.map
            .call(el.files || [], function (f) {
              return f.name;
            })
            .join(', ');
        } catch (e) {
          v = '';
        }
      } else v = el.value;
    } else if (tag === 'TEXTAREA') v = el.value;
    else if (tag === 'SELECT') {
      try {
        v = Array.prototype.filter
          .call(el.options, function (o) {
            return o.selected;
          })
          .map(function (o) {
            return norm(o.label || o.text);
          })
          .join(', ');
      } catch (e) {
        v = el.value;
      }
    } else {
      v = el.getAttribute('aria-valuenow');
      if (v == null && el.isContentEditable && el.getAttribute('contenteditable') !== null)
        v = norm(el.textContent);
    }
    if (v == null || v === '') return null;
    if (isSecretField(el)) return REDACTED;
    return clip(scrub(String(v)), 200);
  }
  function statesOf(el, cache) {
    var st = ['present'];
    var vis = isVisible(el, cache);
    st.push(vis ? 'visible' : 'hidden');
    st.push(isDisabled(el) ? 'disabled' : 'enabled');
    if (isChecked(el)) st.push('checked');
    if (el.getAttribute('aria-expanded') === 'true' || (el.tagName === 'DETAILS' && el.open))
      st.push('expanded');
    if (isFocused(el)) st.push('focused');
    return st;
  }
  function describe(el, cache) {
    var role = getRole(el),
      name = getName(el, role);
    var d = {
      ref: refFor(el),
      role: role,
      name: name,
      states: statesOf(el, cache),
      visible: isVisible(el, cache)
    };
    var v = getValue(el);
    if (v != null) d.value = v;
    var text = norm(textOf(el, 0));
    if (text && text !== name) d.text = clip(text, 80);
    var tid = el.getAttribute('data-testid');
    if (tid) d.testid = tid;
    try {
      var src = el.closest('[data-reticle-source]');
      if (src) d.source = src.getAttribute('data-reticle-source').split(':').slice(0, 2).join(':');
    } catch (e) {
      /* ignore */
    }
    return d;
  }
  function label(el) {
    if (!el || el.nodeType !== 1) return null;
    var role = getRole(el),
      name = getName(el, role);
    return role + (name ? ' "' + clip(name, 60) + '"' : '') + ' (' + refFor(el) + ')';
  }
  var LANDMARKS = {
    navigation: 1,
    main: 1,
    banner: 1,
    contentinfo: 1,
    complementary: 1,
    form: 1,
    dialog: 1,
    alertdialog: 1,
    region: 1,
    search: 1
  };
  // The nearest landmark around el (crossing shadow roots) as 'role "name"', or 'page'.
  function landmarkOf(el) {
    var cur = el.parentNode;
    for (var i = 0; cur && i < 200; i++) {
      if (cur.nodeType === 11 && cur.host) cur = cur.host;
      if (!cur || cur.nodeType !== 1) break;
      var r = getRole(cur);
      if (LANDMARKS[r]) {
        var nm = getName(cur, r);
        return r + (nm ? ' "' + clip(nm, 40) + '"' : '');
      }
      cur = cur.parentNode;
    }
    return 'page';
  }
  // One candidate of an ambiguous or near-missed target: ref, role, name and landmark.
  function candidate(el) {
    var role = getRole(el);
    return {
      ref: refFor(el),
      role: role,
      name: clip(getName(el, role), 80),
      landmark: landmarkOf(el)
    };
  }
  function candidateText(c) {
    return c.ref + ' ' + c.role + (c.name ? ' "' + c.name + '"' : '') + ' in ' + c.landmark;
  }
  function wordsOf(s) {
    return norm(s)
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)
      .filter(function (w) {
        return w.length > 1;
      });
  }
  // Up to `max` elements near a query that found nothing: same role, or a name/text that shares a
  // substring or words with what was asked, best first.
  function nearMisses(q, root, max) {
    var want = q.by === 'role' ? q.name : q.value;
    var wantText = isObj(want) ? want.contains || want.equals || want.matches || '' : want;
    wantText = norm(wantText == null ? '' : String(wantText)).toLowerCase();
    var words = wordsOf(wantText);
    var role = q.by === 'role' ? norm(q.value).toLowerCase() : null;
    var scored = [];
    var all = allElements(root || document.body || document.documentElement, 5000);
    for (var i = 0; i < all.length; i++) {
      var el = all[i];
      if (isIgnored(el)) continue;
      var r = getRole(el);
      var nm = getName(el, r);
      var text = nm || ownText(el);
      if (!text && r === 'generic') continue;
      var low = text.toLowerCase(),
        score = 0;
      if (role && r === role) score += 2;
      if (wantText && low && (low.indexOf(wantText) >= 0 || wantText.indexOf(low) >= 0)) score += 3;
      else if (words.length && low) {
        var lw = wordsOf(low);
        for (var w = 0; w < words.length; w++) if (lw.indexOf(words[w]) >= 0) score += 1;
      }
      if (q.by === 'label' || q.by === 'placeholder') {
        if (!/^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName)) continue;
        var ph = norm(el.getAttribute('placeholder') || '').toLowerCase();
        if (ph && wantText && (ph.indexOf(wantText) >= 0 || wantText.indexOf(ph) >= 0)) score += 3;
        score += 1;
      }
      if (score >= (role ? 2 : 1)) scored.push({ el: el, score: score, i: i });
    }
    scored.sort(function (a, b) {
      return b.score - a.score || a.i - b.i;
    });
    return scored.slice(0, max || 5).map(function (x) {
      return candidate(x.el);
    });
  }

  // == Section: snapshot == tree walking and the snapshot
  // ---- tree walking (light DOM + open/captured shadow roots + same-origin iframes) ------------
  var SHADOWS = new WeakMap(); // host -> closed shadow root captured by our attachShadow patch
  var SHADOW_ROOTS = []; // every shadow root seen (open or captured), for observers that search
  var ROOT_WATCHERS = []; // functions told of each new shadow root (the DOM and alert observers)
  var SHADOW_ROOTS_MAX = 2000;
  function noteShadowRoot(root) {
    if (!root || SHADOW_ROOTS.indexOf(root) >= 0) return;
    if (SHADOW_ROOTS.length >= SHADOW_ROOTS_MAX) liveShadowRoots();
    if (SHADOW_ROOTS.length >= SHADOW_ROOTS_MAX) {
      // searching more roots on every change costs frames (bench/shadow_alerts.py); say what is unseen
      if (!noteShadowRoot.overCap) {
        noteShadowRoot.overCap = true;
        emit('blind-spot', {
          reason: 'shadow-roots-over-cap',
          kind: 'shadow-roots-over-cap',
          count: 1,
          detail:
            'more than ' +
            SHADOW_ROOTS_MAX +
            ' shadow roots: alerts, toasts and invalid fields in the others are not seen'
        });
      }
      return;
    }
    SHADOW_ROOTS.push(root);
    for (var i = 0; i < ROOT_WATCHERS.length; i++) {
      try {
        ROOT_WATCHERS[i](root);
      } catch (e) {
        /* one watcher's failure is not another's */
      }
    }
  }
  // The shadow roots whose hosts are still in a document (the others are dropped from the list).
  function liveShadowRoots() {
    SHADOW_ROOTS = SHADOW_ROOTS.filter(function (r) {
      return !!(r.host && r.host.isConnected);
    });
    return SHADOW_ROOTS;
  }
  function shadowOf(el) {
    return el.shadowRoot || SHADOWS.get(el) || null;
  }
  // The rendered children of el: a shadow host's children are its shadow tree (light children
  // are reached once, through the slots they are assigned to), a slot's are its assigned nodes.
  function childrenOf(el) {
    var out = [];
    var sr = shadowOf(el);
    if (sr) {
      for (var c = sr.firstElementChild; c; c = c.nextElementSibling) out.push(c);
      return out;
    }
    if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
      try {
        var d = el.contentDocument;
        if (d && d.body) out.push(d.body);
      } catch (e) {
        /* cross-origin */
      }
      return out;
    }
    if (el.tagName === 'SLOT') {
      try {
        var as = el.assignedElements();
        if (as.length) return out.concat(as);
      } catch (e) {
        /* ignore */
      }
    }
    for (var k = el.firstElementChild; k; k = k.nextElementSibling) out.push(k);
    return out;
  }
  // every element under root (document order, shadow content after host), up to a cap
  function allElements(root, cap) {
    var out = [],
      stack = [root];
    cap = cap || 20000;
    while (stack.length && out.length < cap) {
      var el = stack.pop();
      if (SKIP_TAGS[el.tagName]) continue;
      if (el !== root) out.push(el);
      var kids = childrenOf(el);
      for (var i = kids.length - 1; i >= 0; i--) stack.push(kids[i]);
    }
    return out;
  }
  function resolveScope(scope) {
    if (scope == null || scope === '') return document.body || document.documentElement;
    if (typeof scope !== 'string') return null;
    if (/^e\d+$/.test(scope)) return resolveRef(scope);
    try {
      return document.querySelector(scope);
    } catch (e) {
      return null;
    }
  }
  function routeOf() {
    return location.pathname + location.search + location.hash;
  }
  function pageStatus(cache) {
    var st = { route: redactUrl(routeOf()), title: document.title || '' };
    try {
      var dlg = [];
      var cands = document.querySelectorAll(
        'dialog[open],[role=dialog],[role=alertdialog],[aria-modal=true]'
      );
      for (var i = 0; i < cands.length && dlg.length < 10; i++) {
        if (isVisible(cands[i], cache) && !isIgnored(cands[i]))
          dlg.push(getName(cands[i]) || getRole(cands[i]));
      }
      if (dlg.length) st.visibleDialogs = dlg;
      // what the user is being told: alerts, then statuses and polite live regions
      var told = { alerts: [], statuses: [] };
      var live = document.querySelectorAll(
        '[role=alert],[role=alertdialog],[aria-live=assertive],[role=status],[aria-live=polite],output'
      );
      for (var j = 0; j < live.length && told.alerts.length + told.statuses.length < 20; j++) {
        var el = live[j];
        if (!isVisible(el, cache) || isIgnored(el)) continue;
        var said = clip(norm(textOf(el, 0)), 200);
        if (!said) continue;
        var loud = /^(alert|alertdialog)$/.test(el.getAttribute('role') || '') ||
          el.getAttribute('aria-live') === 'assertive';
        (loud ? told.alerts : told.statuses).push({ ref: refFor(el), text: said });
      }
      // toasts the app declared (reticle.describe({toasts})): error ones are alerts, the others statuses
      var listed = new Set(Array.prototype.slice.call(live));
      [['error', told.alerts], ['info', told.statuses]].forEach(function (kind) {
        (TOASTS[kind[0]] || []).forEach(function (sel) {
          var found;
          try {
            found = document.querySelectorAll(sel);
          } catch (e) {
            return;
          }
          for (var k = 0; k < found.length && told.alerts.length + told.statuses.length < 20; k++) {
            var t = found[k];
            if (listed.has(t) || !isVisible(t, cache) || isIgnored(t)) continue;
            listed.add(t);
            var text = clip(norm(textOf(t, 0)), 200);
            if (text) kind[1].push({ ref: refFor(t), text: text, toast: true });
          }
        });
      });
      if (told.alerts.length) st.alerts = told.alerts;
      if (told.statuses.length) st.statuses = told.statuses;
      var modal = document.querySelector('dialog[open]:modal,[aria-modal=true]');
      if (modal && isVisible(modal, cache) && document.body) {
        var others = Array.prototype.filter.call(document.body.children, function (c) {
          return !c.contains(modal) && !SKIP_TAGS[c.tagName];
        });
        if (
          others.length &&
          others.every(function (c) {
            return c.getAttribute('aria-hidden') === 'true' || c.inert;
          })
        )
          st.overlayHidingPage = true;
      }
    } catch (e) {
      /* :modal unsupported */
    }
    return st;
  }

  // ---- snapshot ------------------------------------------------------------------------------
  var SNAP_NODES = 400,
    SNAP_DEPTH = 20;
  function snapshot(args) {
    var mode = args.mode || 'full';
    if (mode !== 'full' && mode !== 'interactive' && mode !== 'status')
      throw new Error(
        "snapshot mode must be full, interactive or status (got '" + clip(mode, 40) + "')"
      );
    var cache = makeVisCache();
    var status = pageStatus(cache);
    if (mode === 'status') return { tree: '', nodes: 0, truncated: false, status: status };
    var root = resolveScope(args.scope);
    if (!root) return { tree: '', nodes: 0, truncated: false, scopeMissing: true, status: status };
    // one walk: its lines, counts, caps hit, and the refs left unread
    var w = {
      mode: mode,
      lines: [],
      count: 0,
      truncated: false,
      depthHit: false,
      unread: [],
      unreadOverflow: false,
      // Open dialogs go first, so that the node cap can never hide the thing the user
      // is looking at behind a long page; the second pass skips them.
      dialogs: args.scope ? [] : snapDialogs(cache),
      secondPass: false,
      visited: new Set() // an element reachable twice (slots, frames) is printed once
    };
    var includeRoot = !!args.scope && args.includeRoot !== false;
    try {
      for (var dj = 0; dj < w.dialogs.length; dj++) snapVisit(w, w.dialogs[dj], 0, false);
      w.secondPass = true;
      if (includeRoot) snapVisit(w, root, 0, false);
      else {
        var ks = childrenOf(root);
        for (var i = 0; i < ks.length; i++) snapVisit(w, ks[i], 0, false);
      }
    } catch (e) {
      internal('snapshot', e);
    }
    var res = {
      tree: w.lines.join('\n'),
      nodes: w.count,
      truncated: w.truncated || w.depthHit,
      status: status
    };
    if (w.dialogs.length) res.dialogsFirst = w.dialogs.length;
    if (!w.count && !args.scope) snapEmptyNote(res);
    if (w.truncated || w.depthHit) snapCappedNote(w, res);
    return res;
  }
  // The open dialogs a snapshot prints first (at most 5, none inside another).
  function snapDialogs(cache) {
    var dialogs = [];
    try {
      var found = document.querySelectorAll('dialog[open],[role=dialog],[role=alertdialog]');
      for (var di = 0; di < found.length && dialogs.length < 5; di++) {
        if (isVisible(found[di], cache) && !isIgnored(found[di])) dialogs.push(found[di]);
      }
      return dialogs.filter(function (d) {
        return !dialogs.some(function (o) {
          return o !== d && o.contains(d);
        });
      });
    } catch (e) {
      return [];
    }
  }
  function snapAddUnread(w, el) {
    if (w.unread.length < 50) w.unread.push(refFor(el));
    else w.unreadOverflow = true;
  }
  function snapVisit(w, el, level, inLive, pname) {
    if (SKIP_TAGS[el.tagName] || isIgnored(el)) return;
    if (w.secondPass && w.dialogs.indexOf(el) >= 0) return;
    if (w.visited.has(el)) return;
    w.visited.add(el);
    if (el.getAttribute('aria-hidden') === 'true' || el.hidden) return;
    var st = styleOf(el);
    if (st && st.display === 'none') return;
    if (el.tagName === 'INPUT' && el.type === 'hidden') return;
    if (w.count >= SNAP_NODES) {
      w.truncated = true;
      snapAddUnread(w, el);
      return;
    }
    var role = getRole(el);
    var live =
      inLive ||
      role === 'alert' ||
      role === 'status' ||
      role === 'log' ||
      (el.getAttribute('aria-live') && el.getAttribute('aria-live') !== 'off');
    var hiddenStyle = st && (st.visibility === 'hidden' || st.visibility === 'collapse');
    var shown = hiddenStyle ? null : snapLine(w.mode, el, role, live, st, pname);
    var childLevel = level,
      childName = pname;
    if (shown) {
      childName = shown.asText == null && shown.name ? clip(shown.name, 100) : null;
      if (level > SNAP_DEPTH) {
        w.depthHit = true;
        snapAddUnread(w, el);
        return;
      }
      w.lines.push(new Array(level + 1).join('  ') + shown.line);
      w.count++;
      childLevel = level + 1;
    }
    if (el.tagName === 'SELECT' || el.tagName === 'TEXTAREA') return;
    var kids = childrenOf(el);
    for (var i = 0; i < kids.length; i++) snapVisit(w, kids[i], childLevel, live, childName);
  }
  // The line an element prints in this mode ({line, asText, name}), or null when it prints none.
  function snapLine(mode, el, role, live, st, pname) {
    var name = getName(el, role);
    var emitLine = false,
      asText = null;
    if (mode === 'interactive')
      emitLine = !!INTERACTIVE[role] || (live && (role !== 'generic' || !!name || !!ownText(el)));
    else emitLine = (role !== 'generic' && role !== 'none' && role !== 'presentation') || !!name;
    if (!emitLine && (mode === 'full' || live) && !(el.tagName === 'LABEL' && el.control)) {
      var ot = ownText(el);
      if (ot && ot !== pname) {
        emitLine = true;
        asText = ot;
      } // a text that only repeats its parent's name adds nothing
    }
    if (!emitLine) return null;
    if (asText != null) {
      return { line: '- text "' + clip(asText, 80).replace(/"/g, '\\"') + '"', asText: asText, name: name };
    }
    return { line: snapRoleLine(el, role, name, st), asText: null, name: name };
  }
  // "- role "name" (ref=eN): "own text" [value=...] [grid] [flags]" for one element.
  function snapRoleLine(el, role, name, st) {
    var line = '- ' + role;
    var own = name ? null : ownText(el);
    if (name) line += ' "' + clip(name, 100).replace(/"/g, '\\"') + '"';
    if (INTERACTIVE[role] || name || own) line += ' (ref=' + refFor(el) + ')';
    if (own) line += ': "' + clip(own, 80).replace(/"/g, '\\"') + '"';
    var v = getValue(el);
    if (v != null) line += ' [value="' + clip(v, 100).replace(/"/g, '\\"') + '"]';
    if (st && (st.display === 'grid' || st.display === 'inline-grid')) {
      var gc = st.gridTemplateColumns;
      line += gc && gc !== 'none' ? ' [grid-cols:' + clip(gc, 60) + ']' : ' [grid]';
    }
    var flags = [];
    if (isDisabled(el)) flags.push('disabled');
    if (isChecked(el)) flags.push('checked');
    if (el.getAttribute('aria-expanded') === 'true' || (el.tagName === 'DETAILS' && el.open))
      flags.push('expanded');
    if (isFocused(el)) flags.push('focused');
    if (flags.length) line += ' [' + flags.join(',') + ']';
    return line;
  }
  // an empty tree right after a page opened is a page that has not rendered yet, not an empty page
  function snapEmptyNote(res) {
    var body = document.body;
    var content =
      !!body &&
      Array.prototype.some.call(body.children, function (c) {
        return !SKIP_TAGS[c.tagName];
      });
    var rendered = document.readyState === 'complete' && content;
    res.rendered = rendered;
    res.note = rendered
      ? 'nothing on the page is visible yet (an app may still be rendering); snapshot again in a moment'
      : 'the page has not rendered yet (document.readyState is ' +
        document.readyState +
        (content ? '' : ', its body holds no content') +
        '); snapshot again in a moment';
  }
  function snapCappedNote(w, res) {
    res.capped = { nodes: SNAP_NODES, depth: SNAP_DEPTH };
    if (w.truncated) res.nodeCapHit = true;
    if (w.depthHit) res.depthCapHit = true;
    if (w.unread.length) res.unread = w.unread;
    if (w.unreadOverflow) res.unreadOverflow = true;
    res.note =
      'snapshot capped at ' +
      SNAP_NODES +
      ' nodes / depth ' +
      SNAP_DEPTH +
      '; take a snapshot with scope set to a ref in unread[] to read the rest';
  }

  // == Section: query == text matching, queries, inspect
  // ---- text matching: contains, equals, matches -------------------------------------------------
  // A text spec is a string (read as `dflt`: 'contains' or 'equals') or an object with exactly one
  // of {contains}, {equals}, {matches, flags?}. All compare normalised text (whitespace collapsed,
  // trimmed, NFC): contains is case-insensitive, equals is case-sensitive and whole, matches is a
  // JavaScript regular expression tested against the whole normalised text.
  var TEXT_MODES = ['contains', 'equals', 'matches'];
  function textSpec(v, dflt) {
    var mode = dflt,
      val = v,
      flags = '';
    if (isObj(v)) {
      var given = TEXT_MODES.filter(function (m) {
        return v[m] != null;
      });
      if (given.length !== 1)
        throw new Error('a text match needs exactly one of contains, equals or matches');
      mode = given[0];
      val = v[mode];
      flags = v.flags == null ? '' : String(v.flags);
    }
    val = val == null ? '' : String(val);
    var spec = { mode: mode, value: val };
    if (mode === 'matches') {
      var re;
      try {
        re = new RegExp(val, flags.replace(/[gy]/g, ''));
      } catch (e) {
        throw new Error(
          'matches ' +
            JSON.stringify(clip(val, 80)) +
            ' is not a valid regular expression: ' +
            errMsg(e)
        );
      }
      spec.test = function (t) {
        return re.test(norm(t));
      };
    } else if (mode === 'equals') {
      var want = norm(val);
      spec.test = function (t) {
        return norm(t) === want;
      };
    } else {
      var needle = norm(val).toLowerCase();
      spec.test = function (t) {
        return norm(t).toLowerCase().indexOf(needle) >= 0;
      };
    }
    return spec;
  }
  // The innermost elements under root whose whole readable text passes `test`: the places a user
  // would point at. An ancestor that only passes because of a matching descendant is not a place.
  function textPlaces(root, test, cap) {
    var places = [],
      seen = 0;
    cap = cap || 20000;
    function visit(el, depth) {
      if (SKIP_TAGS[el.tagName] || el.getAttribute('aria-hidden') === 'true' || el.hidden)
        return false;
      if (++seen > cap || depth > 60) return false;
      var inner = false;
      var kids = childrenOf(el);
      for (var i = 0; i < kids.length; i++) if (visit(kids[i], depth + 1)) inner = true;
      if (inner) return true;
      if (isIgnored(el)) return false;
      var t =
        el.tagName === 'INPUT' && /^(submit|button|reset)$/i.test(el.type)
          ? el.value
          : textOf(el, 0);
      if (!norm(t) || !test(t)) return false;
      places.push(el);
      return true;
    }
    visit(root, 0);
    return places;
  }

  // ---- query / match -------------------------------------------------------------------------
  var QUERY_BYS = ['role', 'text', 'label', 'placeholder', 'testid', 'alt'];
  function normalizeQuery(q) {
    q = q || {};
    if (q.by != null) {
      if (QUERY_BYS.indexOf(q.by) < 0)
        throw new Error(
          "unknown query 'by': '" + clip(q.by, 40) + "' (use one of " + QUERY_BYS.join(', ') + ')'
        );
      return { by: q.by, value: q.value, name: q.name };
    }
    var order = ['testid', 'label', 'placeholder', 'alt', 'text', 'role'];
    for (var i = 0; i < order.length; i++) {
      if (q[order[i]] != null && q[order[i]] !== '')
        return { by: order[i], value: q[order[i]], name: q.name };
    }
    throw new Error('a query needs by+value or one of testid, label, placeholder, alt, text, role');
  }
  function matchLabel(el, spec) {
    var parts = labelsText(el);
    var a = el.getAttribute('aria-label');
    if (a) parts.push(norm(a));
    var lb = byIdText(el, 'aria-labelledby');
    if (lb) parts.push(lb);
    for (var i = 0; i < parts.length; i++) if (spec.test(parts[i])) return true;
    return false;
  }
  // A query's value is a string (contains, case-insensitive; testid exact) or a text spec object;
  // a role query's name is a string (exactly equal) or a text spec object.
  function matcher(q) {
    var v = isObj(q.value) ? q.value : q.value == null ? '' : String(q.value);
    var spec = q.by === 'testid' || q.by === 'role' ? null : textSpec(v, 'contains');
    switch (q.by) {
      case 'testid':
        return function (el) {
          return el.getAttribute('data-testid') === v;
        };
      case 'placeholder':
        return function (el) {
          var p = el.getAttribute('placeholder');
          return p != null && spec.test(p);
        };
      case 'alt':
        return function (el) {
          var a = el.getAttribute('alt');
          return a != null && /^(IMG|INPUT|AREA)$/.test(el.tagName) && spec.test(a);
        };
      case 'text':
        return function (el) {
          var t = ownText(el);
          return !!t && spec.test(t);
        };
      case 'label':
        return function (el) {
          if (
            !/^(INPUT|TEXTAREA|SELECT|BUTTON|METER|PROGRESS|OUTPUT)$/.test(el.tagName) &&
            !el.hasAttribute('aria-label') &&
            !el.hasAttribute('aria-labelledby')
          )
            return false;
          return matchLabel(el, spec);
        };
      case 'role': {
        var want = norm(v).toLowerCase();
        var nm = q.name == null ? null : textSpec(q.name, 'equals');
        return function (el) {
          var r = getRole(el);
          if (r !== want) return false;
          return nm == null || nm.test(getName(el, r));
        };
      }
    }
    throw new Error('unsupported query');
  }
  function runQuery(args) {
    var q = normalizeQuery(args);
    var root = resolveScope(args.scope);
    if (!root) return { q: q, els: [], scopeMissing: true };
    var test = matcher(q);
    var els = [];
    if (args.self && args.scope) {
      if (test(root)) els.push(root);
      return { q: q, els: els };
    }
    if (q.by === 'text' && isObj(q.value) && q.value.contains == null) {
      // equals / matches compare an element's whole text: the innermost elements that pass
      var spec = textSpec(q.value, 'contains');
      var kids = childrenOf(root);
      for (var j = 0; j < kids.length; j++) els = els.concat(textPlaces(kids[j], spec.test));
      return { q: q, els: els };
    }
    var all = allElements(root, 50000);
    var seen = new Set();
    for (var i = 0; i < all.length; i++) {
      var el = all[i];
      if (seen.has(el)) continue;
      seen.add(el);
      try {
        if (test(el) && !isIgnored(el)) els.push(el);
      } catch (e) {
        /* odd node */
      }
    }
    return { q: q, els: els };
  }
  function filterState(els, state, cache) {
    if (!state) return els;
    return els.filter(function (el) {
      if (state === 'inViewport') {
        if (!isVisible(el, cache)) return false;
        var b = el.getBoundingClientRect();
        return (
          b.width > 0 &&
          b.height > 0 &&
          b.bottom > 0 &&
          b.right > 0 &&
          b.top < innerHeight &&
          b.left < innerWidth
        );
      }
      return statesOf(el, cache).indexOf(state) >= 0;
    });
  }
  function zeroHint() {
    var hint = { route: redactUrl(routeOf()), presentRegions: [], presentTestids: [] };
    try {
      var cache = makeVisCache();
      var all = allElements(document.body || document.documentElement, 5000);
      var tids = {};
      for (var i = 0; i < all.length; i++) {
        var el = all[i];
        var tid = el.getAttribute('data-testid');
        if (tid && hint.presentTestids.length < 12 && !tids[tid]) {
          tids[tid] = 1;
          hint.presentTestids.push(tid);
        }
        if (hint.presentRegions.length < 10) {
          var role = getRole(el);
          if (CONTAINER_ROLES[role] && isVisible(el, cache)) {
            var kids = el.children,
              sample = [];
            for (var j = 0; j < kids.length && sample.length < 3; j++) {
              var kr = getRole(kids[j]),
                kn = getName(kids[j], kr);
              if (kr !== 'generic' || kn) sample.push(kr + (kn ? '[' + clip(kn, 30) + ']' : ''));
            }
            var reg = { role: role, childCount: kids.length, sample: sample, ref: refFor(el) };
            var nm = getName(el, role);
            if (nm) reg.name = clip(nm, 60);
            hint.presentRegions.push(reg);
          }
        }
      }
      var cap = S.caps.testids || [];
      for (var k = 0; k < cap.length; k++)
        if (tids[cap[k]]) {
          hint.knownEmptyState = true;
          break;
        }
    } catch (e) {
      /* hint is best-effort */
    }
    return hint;
  }
  function queryCmd(args) {
    var r = runQuery(args);
    var cache = makeVisCache();
    var els = filterState(r.els, args.state, cache);
    var count = els.length;
    if (r.scopeMissing) return { elements: [], count: 0, scopeMissing: true };
    if (args.count_only || args.countOnly) {
      var co = { count: count };
      if (count === 0) {
        co.hint = zeroHint();
        var nm0 = nearMisses(r.q, resolveScope(args.scope));
        if (nm0.length) co.hint.nearMisses = nm0;
      }
      return co;
    }
    var limit = args.limit == null ? 200 : Math.max(0, Math.min(200, Number(args.limit) || 0));
    var res = { elements: [], count: count };
    for (var i = 0; i < els.length && i < limit; i++) {
      var d = describe(els[i], cache);
      if (args.attrs && args.attrs.length) d.attrs = attrsOf(els[i], args.attrs);
      res.elements.push(d);
    }
    if (count > limit) {
      res.total = count;
      res.truncated = true;
    }
    if (count === 0) {
      res.hint = zeroHint();
      var nm = nearMisses(r.q, resolveScope(args.scope));
      if (nm.length) res.hint.nearMisses = nm;
    }
    return res;
  }
  function attrsOf(el, names) {
    var out = {};
    for (var i = 0; i < names.length && i < 12; i++) {
      var n = String(names[i]);
      var v = el.getAttribute(n);
      if (v == null) continue;
      out[n] = keySensitive(n) ? REDACTED : clip(scrub(v), 512);
    }
    return out;
  }

  // ---- inspect -------------------------------------------------------------------------------
  function occlusion(el) {
    try {
      var b = el.getBoundingClientRect();
      if (!b.width || !b.height) return { occluded: false, occludedBy: null };
      var x = b.left + b.width / 2,
        y = b.top + b.height / 2;
      if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight)
        return { occluded: false, occludedBy: null, offscreen: true };
      var root = el.getRootNode ? el.getRootNode() : document;
      var top =
        (root.elementFromPoint ? root.elementFromPoint(x, y) : null) ||
        document.elementFromPoint(x, y);
      if (!top || isIgnored(top)) return { occluded: false, occludedBy: null };
      if (top === el || el.contains(top) || top.contains(el))
        return { occluded: false, occludedBy: null };
      // a <label> for the element counts as the element
      if (top.tagName === 'LABEL' && top.control === el)
        return { occluded: false, occludedBy: null };
      return { occluded: true, occludedBy: refFor(top), occludedByLabel: label(top) };
    } catch (e) {
      return { occluded: false, occludedBy: null };
    }
  }
  function inspectCmd(args) {
    var el = mustResolve(args.ref);
    var d = describe(el, makeVisCache());
    d.tag = el.tagName.toLowerCase();
    if (el.id) d.id = el.id;
    if (el.href) d.href = redactUrl(String(el.href));
    var form = el.form || (el.closest && el.closest('form'));
    if (form) {
      d.formAction = redactUrl(form.getAttribute('action') || '');
      d.formText = clip(norm(textOf(form, 0)), 200);
    }
    var b = el.getBoundingClientRect();
    d.box = {
      x: Math.round(b.left),
      y: Math.round(b.top),
      width: Math.round(b.width),
      height: Math.round(b.height)
    };
    d.inViewport =
      b.width > 0 &&
      b.height > 0 &&
      b.bottom > 0 &&
      b.right > 0 &&
      b.top < innerHeight &&
      b.left < innerWidth;
    var oc = occlusion(el);
    d.occluded = oc.occluded;
    d.occludedBy = oc.occludedBy;
    if (oc.occludedByLabel) d.occludedByLabel = oc.occludedByLabel;
    var st = styleOf(el);
    if (st) {
      d.styles = {
        color: st.color,
        backgroundColor: st.backgroundColor,
        opacity: st.opacity,
        cursor: st.cursor,
        display: st.display,
        visibility: st.visibility,
        pointerEvents: st.pointerEvents,
        fontSize: st.fontSize,
        position: st.position,
        zIndex: st.zIndex
      };
      d.scroll = {
        scrollTop: el.scrollTop,
        scrollHeight: el.scrollHeight,
        clientHeight: el.clientHeight,
        overflowY: st.overflowY
      };
    }
    var at = {};
    for (var i = 0; i < el.attributes.length && i < 30; i++) {
      var a = el.attributes[i];
      if (a.name === 'style' || a.name === 'value') continue;
      at[a.name] = keySensitive(a.name) ? REDACTED : clip(scrub(a.value), 200);
    }
    d.attributes = at;
    d.childElementCount = el.childElementCount;
    return d;
  }

  // == Section: actions == synthetic and CDP input, act, act_sequence
  // ---- actions -------------------------------------------------------------------------------
  var ACTIONS = [
    'click',
    'dblclick',
    'hover',
    'focus',
    'blur',
    'fill',
    'type',
    'clear',
    'select',
    'check',
    'uncheck',
    'submit',
    'press',
    'scrollIntoView',
    'upload',
    'drag'
  ];
  var DANGER = new RegExp(
    '\\b(delete|remove|destroy|erase|drop|terminate|revoke|reset|logout|log out|sign ?out|close account|' +
      'cancel subscription|purchase|buy|pay|payment|place order|confirm order|send money|send funds|transfer|' +
      'withdraw|refund|deploy|publish|wipe|unsubscribe)\\b',
    'i'
  );
  var DANGER_ACTIONS = { click: 1, dblclick: 1, check: 1, uncheck: 1, drag: 1, submit: 1 };
  function dangerContext(el) {
    var parts = [
      getName(el),
      clip(norm(el.textContent), 300),
      el.getAttribute('title'),
      el.getAttribute('aria-label'),
      el.getAttribute('href')
    ];
    if (el.tagName === 'INPUT' || el.tagName === 'BUTTON') parts.push(el.value);
    var form = el.form || (el.tagName === 'FORM' ? el : null);
    if (form) parts.push(form.getAttribute('action'));
    if (el.tagName === 'FORM') {
      var subs = el.querySelectorAll('button[type=submit],button:not([type]),input[type=submit]');
      for (var i = 0; i < subs.length && i < 5; i++) parts.push(getName(subs[i]));
    }
    return parts
      .filter(function (p) {
        return p;
      })
      .join(' | ')
      .replace(/[_-]/g, ' ');
  }
  function dangerCheck(el, action, args) {
    var gated =
      DANGER_ACTIONS[action] ||
      (action === 'press' && /^enter$/i.test(String(args.key || args.text || 'Enter')));
    if (!gated || args.confirmDangerous === true) return;
    var ctx = dangerContext(el);
    if (action === 'drag' && args.__toEl) ctx += ' | ' + dangerContext(args.__toEl);
    var m = DANGER.exec(ctx);
    if (m) {
      throw new Error(
        'potentially destructive action blocked; retry with args.confirmDangerous=true. The ' +
          action +
          ' target ' +
          label(el) +
          " matches '" +
          m[1].toLowerCase() +
          "' (a destructive word in its name, text, value, href or form action); " +
          'pass args:{confirmDangerous:true} only if the user asked for this.'
      );
    }
  }
  function focusableAncestor(el) {
    for (var c = el; c && c.nodeType === 1; c = c.parentElement) {
      if (
        c.tabIndex >= 0 ||
        /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(c.tagName) ||
        (c.tagName === 'A' && c.hasAttribute('href')) ||
        c.isContentEditable
      )
        return c;
    }
    return null;
  }
  function centre(el) {
    var b = el.getBoundingClientRect();
    return { x: b.left + b.width / 2, y: b.top + b.height / 2, w: b.width, h: b.height };
  }
  function viewOf(el) {
    return (el.ownerDocument && el.ownerDocument.defaultView) || window;
  }
  function mouseInit(el, c, extra) {
    var o = {
      bubbles: true,
      cancelable: true,
      composed: true,
      view: viewOf(el),
      clientX: c.x,
      clientY: c.y,
      screenX: c.x,
      screenY: c.y,
      button: 0,
      buttons: 0,
      detail: 1
    };
    if (extra) for (var k in extra) if (hasOwn(extra, k)) o[k] = extra[k];
    return o;
  }
  function fireMouse(el, type, c, extra) {
    var W = viewOf(el);
    var init = mouseInit(el, c, extra);
    var ev;
    if (/^pointer/.test(type) && W.PointerEvent) {
      init.pointerId = 1;
      init.pointerType = 'mouse';
      init.isPrimary = true;
      init.width = 1;
      init.height = 1;
      init.pressure = init.buttons ? 0.5 : 0;
      ev = new W.PointerEvent(type, init);
    } else {
      ev = new W.MouseEvent(/^pointer/.test(type) ? type.replace('pointer', 'mouse') : type, init);
    }
    el.dispatchEvent(ev);
    return ev;
  }
  function plain(el, type, bubbles, cancelable) {
    var W = viewOf(el);
    var ev = new W.Event(type, {
      bubbles: bubbles !== false,
      cancelable: !!cancelable,
      composed: true
    });
    el.dispatchEvent(ev);
    return ev;
  }
  function sleep(ms) {
    return new N.Promise(function (r) {
      N.setTimeout(r, ms);
    });
  }
  function frame() {
    return new N.Promise(function (r) {
      N.raf(function () {
        r();
      });
    });
  }
  function doClick(el, args) {
    var c = centre(el);
    var prev = document.activeElement;
    var pd = fireMouse(el, 'pointerdown', c, { buttons: 1, relatedTarget: prev });
    var md = fireMouse(el, 'mousedown', c, { buttons: 1 });
    if (!md.defaultPrevented && !pd.defaultPrevented) {
      var f = focusableAncestor(el);
      if (f && f !== document.activeElement) {
        try {
          f.focus({ preventScroll: true });
        } catch (e) {
          /* ignore */
        }
      }
    }
    var finish = function () {
      fireMouse(el, 'pointerup', c, {});
      fireMouse(el, 'mouseup', c, {});
      return fireMouse(el, 'click', c, {});
    };
    var hold = Math.min(30000, Math.max(0, Number(args.holdMs) || 0));
    if (hold > 0) {
      var t0 = N.now();
      return sleep(hold).then(function () {
        var ev = finish();
        return { defaultPrevented: ev.defaultPrevented, heldMs: Math.round(N.now() - t0) };
      });
    }
    return { defaultPrevented: finish().defaultPrevented };
  }
  function nativeSetter(el, prop) {
    var W = viewOf(el);
    var proto =
      el.tagName === 'TEXTAREA'
        ? W.HTMLTextAreaElement.prototype
        : el.tagName === 'SELECT'
          ? W.HTMLSelectElement.prototype
          : W.HTMLInputElement.prototype;
    var d = Object.getOwnPropertyDescriptor(proto, prop);
    return d && d.set;
  }
  function setValue(el, v) {
    var set = nativeSetter(el, 'value');
    if (set) set.call(el, v);
    else el.value = v;
  }
  function fireInput(el, data, inputType) {
    var W = viewOf(el);
    var ev;
    try {
      ev = new W.InputEvent('input', {
        bubbles: true,
        cancelable: false,
        composed: true,
        data: data == null ? null : data,
        inputType: inputType || 'insertText'
      });
    } catch (e) {
      ev = new W.Event('input', { bubbles: true, composed: true });
    }
    el.dispatchEvent(ev);
  }
  function assertEditable(el, action) {
    if (el.isContentEditable) return 'rich';
    if (el.tagName !== 'INPUT' && el.tagName !== 'TEXTAREA')
      throw new Error(
        'cannot ' +
          action +
          ' a <' +
          el.tagName.toLowerCase() +
          '> (' +
          label(el) +
          '); ' +
          action +
          ' works on input, textarea and contenteditable elements' +
          (el.tagName === 'SELECT' ? '; use action "select"' : '')
      );
    if (
      el.tagName === 'INPUT' &&
      /^(checkbox|radio|file|submit|button|reset|image|range|color)$/.test(el.type)
    ) {
      if (el.type === 'range' || el.type === 'color') return 'plain';
      throw new Error(
        'cannot ' +
          action +
          ' an input of type ' +
          el.type +
          (el.type === 'file'
            ? '; use action "upload"'
            : /checkbox|radio/.test(el.type)
              ? '; use check/uncheck'
              : '; use click')
      );
    }
    if (el.disabled) throw new Error('cannot ' + action + ' ' + label(el) + ': it is disabled');
    if (el.readOnly) throw new Error('cannot ' + action + ' ' + label(el) + ': it is read-only');
    return 'plain';
  }
  function richWrite(el, text, replace) {
    el.focus();
    var sel = viewOf(el).getSelection();
    var range = el.ownerDocument.createRange();
    range.selectNodeContents(el);
    if (!replace) range.collapse(false);
    sel.removeAllRanges();
    sel.addRange(range);
    var ok = false;
    try {
      ok = el.ownerDocument.execCommand(text ? 'insertText' : 'delete', false, text);
    } catch (e) {
      ok = false;
    }
    if (!ok) {
      if (replace) el.textContent = text;
      else el.textContent += text;
      fireInput(el, text, 'insertText');
    }
  }
  // Focus an editable element for `action`; a rich editor takes `text` at once (then true).
  function focusToWrite(el, action, text, replace) {
    var kind = assertEditable(el, action);
    if (document.activeElement !== el) {
      try {
        el.focus({ preventScroll: true });
      } catch (e) {
        /* ignore */
      }
    }
    if (kind !== 'rich') return false;
    richWrite(el, text, replace);
    return true;
  }
  function doFill(el, args) {
    var v = args.value != null ? args.value : args.text;
    if (typeof v === 'number') v = String(v);
    if (typeof v !== 'string')
      throw new Error('fill needs a string value: pass args:{value:"\u2026"}');
    if (el.tagName === 'SELECT') return doSelect(el, { value: v });
    if (focusToWrite(el, 'fill', v, true)) return {};
    setValue(el, v);
    fireInput(el, v, 'insertReplacementText');
    plain(el, 'change', true, false);
    return {};
  }
  function keyCode(key) {
    if (/^[a-z]$/i.test(key)) return 'Key' + key.toUpperCase();
    if (/^[0-9]$/.test(key)) return 'Digit' + key;
    if (key === ' ') return 'Space';
    if (
      /^(Enter|Escape|Tab|Backspace|Delete|Home|End|PageUp|PageDown|ArrowUp|ArrowDown|ArrowLeft|ArrowRight|Insert|F\d{1,2})$/.test(
        key
      )
    )
      return key;
    return '';
  }
  var KEYCODES = {
    Enter: 13,
    Escape: 27,
    Tab: 9,
    Backspace: 8,
    Delete: 46,
    ' ': 32,
    ArrowUp: 38,
    ArrowDown: 40,
    ArrowLeft: 37,
    ArrowRight: 39,
    Home: 36,
    End: 35,
    PageUp: 33,
    PageDown: 34
  };
  function keyEvent(el, type, key, code, mods) {
    var W = viewOf(el);
    var kc = KEYCODES[key] || (key.length === 1 ? key.toUpperCase().charCodeAt(0) : 0);
    var ev = new W.KeyboardEvent(type, {
      key: key,
      code: code,
      bubbles: true,
      cancelable: true,
      composed: true,
      view: W,
      ctrlKey: !!mods.ctrl,
      shiftKey: !!mods.shift,
      altKey: !!mods.alt,
      metaKey: !!mods.meta,
      keyCode: kc,
      which: kc,
      charCode: type === 'keypress' ? kc : 0
    });
    el.dispatchEvent(ev);
    return ev;
  }
  function doType(el, args) {
    var text = args.text != null ? args.text : args.value;
    if (typeof text === 'number') text = String(text);
    if (typeof text !== 'string') throw new Error('type needs a string: pass args:{text:"\u2026"}');
    if (focusToWrite(el, 'type', text, false)) return {};
    if (text.length > 500) {
      setValue(el, el.value + text);
      fireInput(el, text, 'insertText');
      plain(el, 'change', true, false);
      return { perKey: false };
    }
    for (var i = 0; i < text.length; i++) {
      var ch = text.charAt(i);
      var kd = keyEvent(el, 'keydown', ch, keyCode(ch), {});
      if (kd.defaultPrevented) {
        keyEvent(el, 'keyup', ch, keyCode(ch), {});
        continue;
      }
      keyEvent(el, 'keypress', ch, keyCode(ch), {});
      var cur = el.value,
        start = cur.length,
        end = cur.length;
      try {
        if (typeof el.selectionStart === 'number' && el.selectionStart != null) {
          start = el.selectionStart;
          end = el.selectionEnd;
        }
      } catch (e) {
        /* type without selection */
      }
      var maxLen = el.maxLength;
      if (maxLen >= 0 && cur.length - (end - start) >= maxLen) {
        keyEvent(el, 'keyup', ch, keyCode(ch), {});
        continue;
      }
      setValue(el, cur.slice(0, start) + ch + cur.slice(end));
      try {
        el.setSelectionRange(start + 1, start + 1);
      } catch (e) {
        /* email/number inputs */
      }
      fireInput(el, ch, 'insertText');
      keyEvent(el, 'keyup', ch, keyCode(ch), {});
    }
    plain(el, 'change', true, false);
    return {};
  }
  function doClear(el) {
    var kind = assertEditable(el, 'clear');
    if (document.activeElement !== el) {
      try {
        el.focus({ preventScroll: true });
      } catch (e) {
        /* ignore */
      }
    }
    if (kind === 'rich') {
      richWrite(el, '', true);
      return {};
    }
    setValue(el, '');
    fireInput(el, null, 'deleteContentBackward');
    plain(el, 'change', true, false);
    return {};
  }
  function doSelect(el, args) {
    if (el.tagName !== 'SELECT')
      throw new Error(
        'select works on a <select>; ' +
          label(el) +
          ' is a <' +
          el.tagName.toLowerCase() +
          '>' +
          (getRole(el) === 'combobox'
            ? ' (a custom combobox: click it, then click the option)'
            : '')
      );
    if (el.disabled) throw new Error('cannot select in ' + label(el) + ': it is disabled');
    var wanted =
      args.values ||
      (Array.isArray(args.value) ? args.value : [args.value != null ? args.value : args.label]);
    if (wanted[0] == null)
      throw new Error('select needs args:{value:"\u2026"} (an option value or its visible label)');
    var opts = Array.prototype.slice.call(el.options);
    var picks = wanted.map(function (w) {
      w = String(w);
      var o =
        opts.filter(function (x) {
          return x.value === w;
        })[0] ||
        opts.filter(function (x) {
          return norm(x.label || x.text) === norm(w);
        })[0] ||
        opts.filter(function (x) {
          return norm(x.label || x.text).toLowerCase() === norm(w).toLowerCase();
        })[0];
      if (!o)
        throw new Error(
          "no option '" +
            clip(w, 80) +
            "' in " +
            label(el) +
            '; options: ' +
            opts
              .slice(0, 20)
              .map(function (x) {
                return (
                  JSON.stringify(x.value) +
                  (norm(x.text) !== x.value ? ' (' + clip(norm(x.text), 40) + ')' : '')
                );
              })
              .join(', ') +
            (opts.length > 20 ? ', \u2026' : '')
        );
      if (o.disabled)
        throw new Error("option '" + clip(w, 80) + "' in " + label(el) + ' is disabled');
      return o;
    });
    if (document.activeElement !== el) {
      try {
        el.focus({ preventScroll: true });
      } catch (e) {
        /* ignore */
      }
    }
    if (el.multiple)
      opts.forEach(function (o) {
        o.selected = picks.indexOf(o) >= 0;
      });
    else setValue(el, picks[0].value);
    if (!el.multiple && el.selectedIndex < 0) el.selectedIndex = opts.indexOf(picks[0]);
    plain(el, 'input', true, false);
    plain(el, 'change', true, false);
    return {};
  }
  function doCheck(el, want, args) {
    if (el.tagName === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) {
      if (el.disabled)
        throw new Error(
          'cannot ' + (want ? 'check ' : 'uncheck ') + label(el) + ': it is disabled'
        );
      if (!want && el.type === 'radio')
        throw new Error('cannot uncheck a radio button; check another option in its group instead');
      if (el.checked === want) return { alreadyAtValue: true, skipped: true };
      return doClick(el, args);
    }
    var role = getRole(el);
    if (
      role === 'checkbox' ||
      role === 'switch' ||
      role === 'radio' ||
      role === 'menuitemcheckbox' ||
      role === 'option'
    ) {
      if (isChecked(el) === want) return { alreadyAtValue: true, skipped: true };
      return doClick(el, args);
    }
    throw new Error(
      'cannot ' +
        (want ? 'check ' : 'uncheck ') +
        label(el) +
        ': it is not a checkbox, radio or switch'
    );
  }
  function parseMods(m) {
    var out = {};
    (Array.isArray(m) ? m : m ? [m] : []).forEach(function (x) {
      x = String(x).toLowerCase();
      if (/^(meta|cmd|command|super|win)$/.test(x)) out.meta = true;
      else if (/^(ctrl|control)$/.test(x)) out.ctrl = true;
      else if (x === 'shift') out.shift = true;
      else if (/^(alt|option|opt)$/.test(x)) out.alt = true;
    });
    return out;
  }
  function doPress(el, args) {
    var key = args.key || args.text || 'Enter';
    key = String(key);
    var lk = key.toLowerCase();
    var alias = {
      enter: 'Enter',
      escape: 'Escape',
      esc: 'Escape',
      tab: 'Tab',
      backspace: 'Backspace',
      delete: 'Delete',
      space: ' ',
      up: 'ArrowUp',
      down: 'ArrowDown',
      left: 'ArrowLeft',
      right: 'ArrowRight',
      arrowup: 'ArrowUp',
      arrowdown: 'ArrowDown',
      arrowleft: 'ArrowLeft',
      arrowright: 'ArrowRight',
      home: 'Home',
      end: 'End',
      pageup: 'PageUp',
      pagedown: 'PageDown'
    };
    if (alias[lk]) key = alias[lk];
    var code = args.code || keyCode(key);
    var mods = parseMods(args.modifiers);
    var kd = keyEvent(el, 'keydown', key, code, mods);
    var extra = {};
    if (!kd.defaultPrevented) {
      if (key.length === 1 || key === 'Enter') keyEvent(el, 'keypress', key, code, mods);
      // default actions a browser would perform for a trusted key
      if (key === 'Enter' && !mods.ctrl && !mods.meta) {
        if (el.tagName === 'INPUT' && el.form && !/^(button|checkbox|radio|file)$/.test(el.type)) {
          try {
            el.form.requestSubmit ? el.form.requestSubmit() : el.form.submit();
            extra.implicitSubmit = true;
          } catch (e) {
            extra.implicitSubmitError = errMsg(e);
          }
        } else if (
          (el.tagName === 'BUTTON' ||
            (el.tagName === 'A' && el.hasAttribute('href')) ||
            getRole(el) === 'button') &&
          el.tagName !== 'TEXTAREA'
        ) {
          el.click();
          extra.activated = true;
        }
      }
    }
    keyEvent(el, 'keyup', key, code, mods);
    if (
      key === ' ' &&
      !kd.defaultPrevented &&
      (el.tagName === 'BUTTON' ||
        (el.tagName === 'INPUT' && /^(checkbox|radio|button|submit)$/.test(el.type)))
    ) {
      el.click();
      extra.activated = true;
    }
    extra.defaultPrevented = kd.defaultPrevented;
    return extra;
  }
  function doHover(el, args) {
    var c = centre(el);
    fireMouse(el, 'pointerover', c, {});
    fireMouse(el, 'mouseover', c, {});
    fireMouse(el, 'pointerenter', c, { bubbles: false });
    fireMouse(el, 'mouseenter', c, { bubbles: false });
    fireMouse(el, 'pointermove', c, {});
    fireMouse(el, 'mousemove', c, {});
    var hold = Math.min(30000, Math.max(0, Number(args.holdMs) || 0));
    if (hold) {
      var t0 = N.now();
      return sleep(hold).then(function () {
        return { heldMs: Math.round(N.now() - t0) };
      });
    }
    return {};
  }
  function doFocus(el) {
    var fired = false;
    var l = function () {
      fired = true;
    };
    el.addEventListener('focusin', l, true);
    try {
      el.focus();
    } finally {
      el.removeEventListener('focusin', l, true);
    }
    if (!fired) {
      plain(el, 'focus', false, false);
      plain(el, 'focusin', true, false);
    }
    return { focused: isFocused(el) };
  }
  function doBlur(el) {
    var was = isFocused(el);
    if (was) el.blur();
    else {
      plain(el, 'blur', false, false);
      plain(el, 'focusout', true, false);
    }
    return {};
  }
  function doSubmit(el) {
    var form = el.tagName === 'FORM' ? el : el.form || el.closest('form');
    if (!form)
      throw new Error(
        'submit: ' + label(el) + ' is not inside a <form>; click its submit button instead'
      );
    var prevented = null;
    var W = viewOf(form);
    var l = function (e) {
      prevented = e.defaultPrevented;
    };
    W.addEventListener('submit', l, false);
    try {
      var submitter =
        (el.tagName === 'BUTTON' || el.tagName === 'INPUT') &&
        el.form === form &&
        /submit|image/.test(el.type)
          ? el
          : undefined;
      if (form.requestSubmit) form.requestSubmit(submitter);
      else if (plain(form, 'submit', true, true).defaultPrevented === false) form.submit();
    } finally {
      W.removeEventListener('submit', l, false);
    }
    return { defaultPrevented: prevented === true };
  }
  function doUpload(el, args) {
    if (el.tagName !== 'INPUT' || el.type !== 'file')
      throw new Error('upload works on <input type=file>; ' + label(el) + ' is not one');
    if (el.disabled) throw new Error('cannot upload to ' + label(el) + ': it is disabled');
    var W = viewOf(el);
    var specs = Array.isArray(args.files) ? args.files : [args];
    var dt = new W.DataTransfer();
    specs.forEach(function (f) {
      dt.items.add(
        new W.File(
          [f.content != null ? String(f.content) : 'reticle test file'],
          f.name || 'file.txt',
          { type: f.type || f.mime || 'text/plain' }
        )
      );
    });
    el.files = dt.files;
    plain(el, 'input', true, false);
    plain(el, 'change', true, false);
    return {
      files: specs.map(function (f) {
        return f.name || 'file.txt';
      })
    };
  }
  function doDrag(el, args) {
    var to = args.__toEl || el;
    var a = centre(el),
      b = centre(to);
    var W = viewOf(el);
    fireMouse(el, 'pointerdown', a, { buttons: 1 });
    fireMouse(el, 'mousedown', a, { buttons: 1 });
    var dt = null;
    try {
      dt = new W.DataTransfer();
      if (args.data)
        dt.setData(
          args.data.mime || 'text/plain',
          String(args.data.value != null ? args.data.value : '')
        );
    } catch (e) {
      dt = null;
    }
    var step = 0;
    function move() {
      step++;
      var p = { x: a.x + ((b.x - a.x) * step) / 5, y: a.y + ((b.y - a.y) * step) / 5 };
      var target = to;
      fireMouse(target, 'pointermove', p, { buttons: 1 });
      fireMouse(target, 'mousemove', p, { buttons: 1 });
      if (step < 5) return frame().then(move);
      fireMouse(to, 'pointerup', b, {});
      fireMouse(to, 'mouseup', b, {});
      var prevented = false;
      if (el.draggable || el.getAttribute('draggable') === 'true' || args.html5) {
        var mk = function (t, tgt, p2) {
          var ev;
          try {
            ev = new W.DragEvent(t, {
              bubbles: true,
              cancelable: true,
              composed: true,
              clientX: p2.x,
              clientY: p2.y,
              dataTransfer: dt
            });
          } catch (e) {
            ev = new W.Event(t, { bubbles: true, cancelable: true });
          }
          tgt.dispatchEvent(ev);
          return ev;
        };
        mk('dragstart', el, a);
        mk('dragenter', to, b);
        mk('dragover', to, b);
        prevented = mk('drop', to, b).defaultPrevented;
        mk('dragend', el, b);
      }
      return { defaultPrevented: prevented, to: refFor(to) };
    }
    return frame().then(move);
  }

  function resolveTarget(t) {
    if (!isObj(t))
      throw new Error(
        'target must be an object like {testid}, {text}, {role,name}, {label} or {placeholder}'
      );
    var q;
    try {
      q = normalizeQuery(t);
    } catch (e) {
      throw new Error('target ' + JSON.stringify(t) + ': ' + errMsg(e));
    }
    var r = runQuery({
      by: q.by,
      value: q.value,
      name: q.name != null ? q.name : t.name,
      scope: t.scope
    });
    var desc =
      q.by +
      ' ' +
      JSON.stringify(q.value) +
      (q.name != null ? ' name ' + JSON.stringify(q.name) : '');
    if (r.scopeMissing)
      throw new Error('target scope ' + JSON.stringify(t.scope) + ' matched nothing');
    var els = r.els;
    if (!els.length) {
      var h = zeroHint();
      var nearby = [];
      var near = nearMisses(q, resolveScope(t.scope));
      if (near.length) nearby.push('nearest: ' + near.map(candidateText).join(', '));
      else if (q.by === 'role') {
        var same = runQuery({ by: 'role', value: q.value, scope: t.scope })
          .els.slice(0, 8)
          .map(function (e) {
            return JSON.stringify(getName(e));
          });
        if (same.length) nearby.push(q.value + 's present: ' + same.join(', '));
      }
      if (h.presentTestids.length) nearby.push('testids present: ' + h.presentTestids.join(', '));
      if (h.presentRegions.length)
        nearby.push(
          'regions: ' +
            h.presentRegions
              .slice(0, 5)
              .map(function (x) {
                return x.role + (x.name ? ' "' + x.name + '"' : '');
              })
              .join(', ')
        );
      throw coded(
        'target_missing',
        'no element matches target ' +
          desc +
          ' on ' +
          h.route +
          (nearby.length ? '; ' + nearby.join('; ') : '; take a snapshot to see what is there')
      );
    }
    if (els.length === 1) return els[0];
    var cache = makeVisCache();
    var vis = els.filter(function (e) {
      return isVisible(e, cache);
    });
    if (vis.length === 1) return vis[0];
    var pool = vis.length ? vis : els;
    var shown = pool.slice(0, 8).map(candidate);
    throw coded(
      'target_ambiguous',
      pool.length +
        ' elements match target ' +
        desc +
        '; pass one of these refs instead' +
        (pool.length > shown.length ? ' (first ' + shown.length + ')' : '') +
        ': ' +
        shown.map(candidateText).join('; ')
    );
  }

  function settle() {
    return N.Promise.resolve().then(function () {
      return new N.Promise(function (resolve) {
        var done = false;
        var t = N.setTimeout(function () {
          if (!done) {
            done = true;
            resolve(false);
          }
        }, 200);
        N.raf(function () {
          if (!done) {
            done = true;
            N.clearTimeout(t);
            resolve(true);
          }
        });
      });
    });
  }

  // ---- real input in a device: the daemon dispatches it through CDP Input.* (isTrusted) ---------
  var CDP_INPUT = { click: 'click', dblclick: 'dblclick', hover: 'mousemove', type: 'keydown', press: 'keydown',
    drag: 'mouseup' };
  var INPUT_WAITS = {};
  var inputSeq = 0;
  function cdpInput(action, el, a) {
    if (action === 'type') assertEditable(el, 'type');
    if ((action === 'type' || action === 'press') && document.activeElement !== el) {
      try {
        el.focus({ preventScroll: true });
      } catch (e) {
        /* ignore */
      }
    }
    var c = centre(el),
      to = centre(a.__toEl || el);
    var req = { kind: 'input', id: 'i' + ++inputSeq, action: action, x: c.x, y: c.y, toX: to.x, toY: to.y };
    req.text = String(a.text != null ? a.text : a.value != null ? a.value : '');
    req.key = a.key || a.text || 'Enter';
    req.modifiers = Array.isArray(a.modifiers) ? a.modifiers : [];
    req.holdMs = Math.min(30000, Math.max(0, Number(a.holdMs) || 0));
    var seen = null;
    var spy = function (e) {
      if (!seen) seen = e;
    };
    window.addEventListener(CDP_INPUT[action], spy, true);
    return new N.Promise(function (resolve, reject) {
      var timer = N.setTimeout(function () {
        finish({ ok: false, error: 'the daemon did not dispatch it in time' });
      }, 5000 + req.holdMs);
      function finish(msg) {
        N.clearTimeout(timer);
        delete INPUT_WAITS[req.id];
        window.removeEventListener(CDP_INPUT[action], spy, true);
        var r = { defaultPrevented: !!(seen && seen.defaultPrevented) };
        if (req.holdMs) r.heldMs = Math.round(N.now() - sent);
        if (msg.ok) resolve(r);
        else reject(new Error('real input failed: ' + clip(String(msg.error || ''), 300)));
      }
      INPUT_WAITS[req.id] = finish;
      var sent = N.now();
      if (!rawSend(N.stringify(req))) finish({ ok: false, error: 'the socket to the daemon is closed' });
    });
  }
  function onInputResult(msg) {
    if (hasOwn(INPUT_WAITS, msg.id)) INPUT_WAITS[msg.id](msg);
  }

  // The synthetic path of each action (a device's tab takes real input instead, see cdpInput).
  var SYNTHETIC_ACTIONS = {
    click: function (el, o) { return doClick(el, o); },
    dblclick: function (el) {
      return N.Promise.resolve(doClick(el, {}))
        .then(function () { return doClick(el, {}); })
        .then(function (r1) {
          var ev = fireMouse(el, 'dblclick', centre(el), { detail: 2 });
          return { defaultPrevented: ev.defaultPrevented || (r1 && r1.defaultPrevented) };
        });
    },
    hover: function (el, o) { return doHover(el, o); },
    focus: function (el) { return doFocus(el); },
    blur: function (el) { return doBlur(el); },
    fill: function (el, o) { return doFill(el, o); },
    type: function (el, o) { return doType(el, o); },
    clear: function (el) { return doClear(el); },
    select: function (el, o) { return doSelect(el, o); },
    check: function (el, o) { return doCheck(el, true, o); },
    uncheck: function (el, o) { return doCheck(el, false, o); },
    submit: function (el) { return doSubmit(el); },
    press: function (el, o) { return doPress(el, o); },
    scrollIntoView: function (el) {
      el.scrollIntoView({ block: 'center', inline: 'nearest' });
      return {};
    },
    upload: function (el, o) { return doUpload(el, o); },
    drag: function (el, o) { return doDrag(el, o); }
  };
  // ---- act: one action, from its element to what it did --------------------------------------------
  // One act: resolve its element, note what holds before, dispatch it (through CDP or synthetic
  // events), let the page settle, then tell what it did. `c` carries the act from step to step.
  function act(args) {
    var action = args.action;
    if (ACTIONS.indexOf(action) < 0)
      throw new Error(
        "unknown action '" + clip(action, 40) + "'; use one of " + ACTIONS.join(', ')
      );
    var a = isObj(args.args) ? args.args : {};
    var el = actElement(args, action);
    var opts = actOptions(a, action);
    dangerCheck(el, action, opts);
    var c = actBefore(el, action, opts);
    c.warning = actPointer(c);
    c.probe = actProbe(opts);
    var run;
    c.t0 = N.now(); // before dispatch: events the handlers emit are at or after it
    c.wall0 = N.dateNow(); // a document request announced from here on is this act's doing
    c.viaCdp = args.input === 'cdp' && hasOwn(CDP_INPUT, action) && viewOf(el) === window;
    if (c.viaCdp) run = cdpInput(action, el, opts);
    if (!c.viaCdp) {
      var synthetic = SYNTHETIC_ACTIONS[action];
      run = synthetic ? synthetic(el, opts) : undefined;
      if (action === 'scrollIntoView') c.effect.scrolledIntoView = true;
    }
    return N.Promise.resolve(run).then(
      function (r) {
        r = r || {};
        return settle().then(function (settled) {
          actProbeEnd(c.probe);
          actEffectAfter(c, r);
          return actAnswer(c, r, settled);
        });
      },
      function (e) {
        try {
          if (c.probe.mo) c.probe.mo.disconnect();
        } catch (x) {
          /* ignore */
        }
        throw e;
      }
    );
  }
  // The element an act is for: its ref, its target, or (for press) the focused element.
  function actElement(args, action) {
    var el;
    if (args.ref) el = mustResolve(args.ref);
    else if (args.target) el = resolveTarget(args.target);
    else if (action === 'press') el = document.activeElement || document.body;
    else throw new Error(action + ' needs a ref or a target');
    if (!(el instanceof viewOf(el).HTMLElement) && !(el instanceof viewOf(el).SVGElement))
      throw new Error('ref ' + args.ref + ' is not an HTML element');
    return el;
  }
  // A copy of the act's arguments; a drag's destination resolved into __toEl.
  function actOptions(a, action) {
    var opts = {};
    for (var k in a) if (hasOwn(a, k)) opts[k] = a[k];
    if (action === 'drag') {
      var toRef = a.toRef || (typeof a.target === 'string' ? a.target : null);
      if (toRef) opts.__toEl = mustResolve(toRef);
      else if (isObj(a.target)) opts.__toEl = resolveTarget(a.target);
    }
    return opts;
  }
  // What holds before the act: the element's ref, role, name, visibility, the focus and value.
  function actBefore(el, action, opts) {
    var cache = makeVisCache();
    var c = { action: action, el: el, opts: opts };
    c.ref = refFor(el);
    c.role = getRole(el);
    c.name = getName(el, c.role);
    c.testid = el.getAttribute('data-testid');
    c.visible = isVisible(el, cache);
    c.enabled = !isDisabled(el);
    c.focusBefore = actFocused();
    c.valueBefore = 'value' in el ? el.value : el.isContentEditable ? el.textContent : undefined;
    c.effect = {
      dispatched: true,
      targetMatched: true,
      visible: c.visible,
      enabled: c.enabled,
      defaultPrevented: false,
      focusMoved: null,
      valueChanged: false,
      domMutatedWithin: 0,
      occluded: false,
      occludedBy: null,
      scrolledIntoView: false
    };
    return c;
  }
  function actFocused() {
    return document.activeElement && document.activeElement !== document.body ? document.activeElement : null;
  }
  // A pointer act scrolls its element into view and looks for what covers it; the warning, if any.
  function actPointer(c) {
    var el = c.el,
      action = c.action,
      effect = c.effect;
    var pointer = { click: 1, dblclick: 1, check: 1, uncheck: 1, hover: 1, drag: 1 }[action];
    if (!pointer) return null;
    var ctr = centre(el);
    if (ctr.w > 0 && ctr.h > 0 && (ctr.x < 0 || ctr.y < 0 || ctr.x > innerWidth || ctr.y > innerHeight)) {
      try {
        el.scrollIntoView({ block: 'center', inline: 'center' });
        effect.scrolledIntoView = true;
      } catch (e) {
        /* ignore */
      }
    }
    var oc = occlusion(el);
    effect.occluded = oc.occluded;
    effect.occludedBy = oc.occludedBy;
    if (oc.occluded)
      return (
        'the element is covered at its centre by ' +
        oc.occludedByLabel +
        '; a real user could not click it. The synthetic event was dispatched to the element anyway.'
      );
    if (!c.visible)
      return (
        'the element is not visible; a real user could not interact with it. ' +
        'The synthetic event was dispatched anyway.'
      );
    if (!c.enabled && action !== 'hover')
      return 'the element is disabled; browsers ignore clicks on disabled controls.';
    return null;
  }
  // The mutation probe of one act: how many records, and the new texts that appeared.
  function actProbe(opts) {
    var p = { records: 0, appeared: [], mo: null, opts: opts };
    try {
      p.mo = new N.MutationObserver(function (rs) {
        actTally(p, rs);
      });
      p.mo.observe(document, {
        subtree: true,
        childList: true,
        attributes: true,
        characterData: true
      });
    } catch (e) {
      p.mo = null;
    }
    return p;
  }
  function actTally(p, rs) {
    var opts = p.opts,
      appeared = p.appeared;
    p.records += rs.length;
    for (var i = 0; i < rs.length && appeared.length < 20; i++) {
      var r = rs[i];
      var nodes = r.type === 'characterData' ? [r.target] : r.addedNodes;
      for (var j = 0; j < (nodes ? nodes.length : 0); j++) {
        var n = nodes[j];
        if (n.nodeType === 1 && isIgnored(n)) continue;
        var tx = norm(n.nodeType === 3 ? n.data : n.nodeType === 1 ? textOf(n, 0) : '');
        if (tx && /\p{L}/u.test(tx) && tx !== opts.value && tx !== opts.text && appeared.indexOf(tx) < 0)
          appeared.push(clip(tx, 80));
      }
    }
  }
  function actProbeEnd(p) {
    try {
      if (p.mo) {
        actTally(p, p.mo.takeRecords());
        p.mo.disconnect();
      }
    } catch (e) {
      /* ignore */
    }
  }
  // The effect after the act settled: what the dispatch answered, the focus, the value, the DOM.
  function actEffectAfter(c, r) {
    var effect = c.effect,
      el = c.el;
    if (r.defaultPrevented) effect.defaultPrevented = true;
    if (r.heldMs != null) effect.heldMs = r.heldMs;
    if (r.alreadyAtValue) {
      effect.alreadyAtValue = true;
      effect.dispatched = false;
    }
    if (r.implicitSubmit) effect.implicitSubmit = true;
    if (r.activated) effect.activated = true;
    effect.targetMatched = el.isConnected;
    var fa = actFocused();
    if (fa !== c.focusBefore)
      effect.focusMoved = (c.focusBefore ? refFor(c.focusBefore) : 'null') + '->' + (fa ? refFor(fa) : 'null');
    if (/^(fill|type|clear|select|upload)$/.test(c.action)) {
      var after = 'value' in el ? el.value : el.isContentEditable ? el.textContent : undefined;
      effect.valueChanged = after !== c.valueBefore;
    }
    effect.domMutatedWithin = c.probe.records;
    if (c.probe.appeared.length) effect.appeared = clip(c.probe.appeared.join(' | '), 200);
  }
  function actAnswer(c, r, settled) {
    var res = {
      ok: true,
      ref: c.ref,
      action: c.action,
      dispatched: c.effect.dispatched,
      settled: settled,
      settleReason: settled ? null : 'timeout',
      effect: c.effect,
      role: c.role,
      name: c.name
    };
    if (c.testid) res.testid = c.testid;
    if (c.el.type === 'password') res.password = true;
    if (r.files) res.files = r.files;
    if (r.to) res.to = r.to;
    if (c.warning) res.warning = c.warning;
    res.input = c.viaCdp ? 'cdp' : 'synthetic';
    res.ms = Math.round(N.now() - c.t0);
    res.pt = Math.floor(c.t0 * 10) / 10; // page time at dispatch: the daemon windows events by it
    res.documentId = S.documentId;
    if (docAnnounced && docAnnounced.at >= c.wall0)
      res.navigation = {
        requestId: docAnnounced.id,
        method: docAnnounced.method,
        url: docAnnounced.url,
        cause: docAnnounced.cause
      };
    return res;
  }
  function actSequence(args) {
    var steps = Array.isArray(args.steps) ? args.steps : null;
    if (!steps || !steps.length)
      throw new Error('act_sequence needs steps:[{ref|target, action, args?}]');
    if (steps.length > 50)
      throw new Error('act_sequence takes at most 50 steps (got ' + steps.length + ')');
    var out = [],
      effects = [],
      i = 0;
    function next() {
      if (i >= steps.length)
        return {
          ok: true,
          count: out.length,
          completed: out.length,
          steps: out,
          effects: effects,
          dispatched: out.length > 0
        };
      var st = steps[i] || {};
      var idx = i++;
      var p;
      try {
        p = act(args.input && isObj(st) ? { ref: st.ref, target: st.target, action: st.action, args: st.args,
          input: args.input } : st);
      } catch (e) {
        p = N.Promise.reject(e);
      }
      return N.Promise.resolve(p).then(
        function (r) {
          var s = {
            ref: r.ref,
            action: r.action,
            dispatched: r.dispatched,
            settled: r.settled,
            settleReason: r.settleReason,
            role: r.role,
            name: r.name
          };
          if (r.testid) s.testid = r.testid;
          if (r.warning) s.warning = r.warning;
          s.input = r.input;
          out.push(s);
          effects.push(r.effect);
          return next();
        },
        function (e) {
          out.push({
            ref: st.ref || null,
            action: st.action,
            dispatched: false,
            error: clip(errMsg(e), 1000)
          });
          return {
            ok: false,
            count: out.length - 1,
            completed: out.length - 1,
            stalled_at: idx,
            failedAt: idx,
            error: clip(errMsg(e), 1000),
            steps: out,
            effects: effects,
            dispatched: out.length > 1
          };
        }
      );
    }
    return next();
  }

  // == Section: observers == what every observer uses: patch, listen, rate caps
  // ---- observers -----------------------------------------------------------------------------
  // patch(obj, key, makeWrapper): installs a wrapper and registers a teardown that restores the
  // original only if the slot still holds our wrapper.
  function patch(obj, key, make) {
    var orig = obj[key];
    if (typeof orig !== 'function' || orig.__reticleWrapped) return null;
    var w = make(orig);
    try {
      Object.defineProperty(w, '__reticleWrapped', { value: true });
    } catch (e) {
      /* frozen fn */
    }
    try {
      Object.defineProperty(w, 'name', { value: orig.name, configurable: true });
    } catch (e) {
      /* ignore */
    }
    obj[key] = w;
    S.teardowns.push(function () {
      if (obj[key] === w) obj[key] = orig;
    });
    return orig;
  }
  function listen(target, type, fn, opts) {
    var g = guard('listener:' + type, fn);
    target.addEventListener(type, g, opts);
    S.teardowns.push(function () {
      target.removeEventListener(type, g, opts);
    });
  }
  // per-channel rate cap; overflow is reported as a truncated event once per window
  function rateCap(channel, perSec) {
    var win = 0,
      n = 0,
      dropped = 0;
    return function () {
      var t = N.now();
      if (t - win > 1000) {
        if (dropped)
          emit('truncated', {
            what: channel,
            count: dropped,
            reason: 'rate cap of ' + perSec + ' events/s',
            channel: channel,
            dropped: dropped
          });
        win = t;
        n = 0;
        dropped = 0;
      }
      if (n++ < perSec) return true;
      dropped++;
      return false;
    };
  }

  // == Section: network == fetch, XHR, beacon, WebSocket, EventSource: bodies, faults, streams
  // -- network: bodies
  var TEXTUAL =
    /^(text\/|application\/(json|[\w.+-]*\+json|xml|[\w.+-]*\+xml|x-www-form-urlencoded|graphql|javascript|ecmascript)|application\/problem)/i;
  var STREAMY = /(event-stream|x-ndjson|application\/stream|multipart\/x-mixed-replace)/i;
  function redactBody(text, contentType) {
    // returns {body, truncated, size}
    var size = text.length;
    var out;
    var looksJson = /json/i.test(contentType || '') || /^\s*[[{]/.test(text);
    if (looksJson && size <= 262144) {
      try {
        var parsed = N.parse(text);
        out = N.stringify(
          sanitize(parsed, { depth: 12, items: 200, str: 4096, budget: BODY_SCAN * 4 })
        );
      } catch (e) {
        out = null;
      }
    }
    if (out == null) out = scrubText(text.length > BODY_SCAN ? text.slice(0, BODY_SCAN) : text);
    var truncated = false;
    if (out.length > BODY_CAP) {
      out = out.slice(0, BODY_CAP);
      truncated = true;
    }
    if (size > BODY_SCAN && !looksJson) truncated = true;
    return { body: out, truncated: truncated, size: size };
  }
  function describeReqBody(b) {
    // returns {body?, type?, truncated?}
    if (b == null) return null;
    try {
      if (typeof b === 'string') {
        var r = redactBody(b, '');
        return { body: r.body, truncated: r.truncated };
      }
      if (typeof URLSearchParams !== 'undefined' && b instanceof URLSearchParams) {
        var r2 = redactBody(b.toString(), 'application/x-www-form-urlencoded');
        return { body: r2.body, truncated: r2.truncated };
      }
      if (typeof FormData !== 'undefined' && b instanceof FormData) {
        var o = {},
          n = 0;
        b.forEach(function (v, k) {
          if (n++ < 50)
            o[k] =
              typeof v === 'string' ? v : '[File ' + (v.name || '') + ' ' + (v.size || 0) + 'B]';
        });
        return { body: N.stringify(sanitize(o, { str: 1000 })), type: 'FormData' };
      }
      if (typeof Blob !== 'undefined' && b instanceof Blob)
        return { type: 'Blob' + (b.type ? ' ' + b.type : '') + ' ' + b.size + 'B' };
      if (b instanceof ArrayBuffer || (ArrayBuffer.isView && ArrayBuffer.isView(b)))
        return { type: 'binary ' + (b.byteLength || 0) + 'B' };
      if (typeof ReadableStream !== 'undefined' && b instanceof ReadableStream)
        return { type: 'ReadableStream' };
      if (typeof Document !== 'undefined' && b instanceof Document) return { type: 'Document' };
    } catch (e) {
      /* ignore */
    }
    return { type: typeof b };
  }
  function withBodyFields(d, req, resp) {
    if (!S.captureBodies) {
      d.bodyCaptured = false;
      return d;
    }
    if (req) {
      if (req.body != null) d.requestBody = req.body;
      if (req.type) d.requestBodyType = req.type;
      if (req.truncated) {
        d.requestBodyTruncated = true;
        d.bodyTruncated = true;
      }
    }
    if (resp) {
      if (resp.body != null) {
        d.responseBody = resp.body;
        d.bodyCaptured = true;
      } else {
        d.bodyCaptured = false;
        if (resp.reason) d.bodyNotCapturedReason = resp.reason;
      }
      if (resp.truncated) {
        d.responseBodyTruncated = true;
        d.bodyTruncated = true;
      }
      if (resp.size != null) d.responseSize = resp.size;
    }
    return d;
  }
  var netCounter = 0;
  function isBridgeUrl(u) {
    try {
      var x = new URL(u, location.href);
      var b = new URL(S.url);
      return x.host === b.host && /^\/reticle(\.js)?$/.test(x.pathname);
    } catch (e) {
      return false;
    }
  }

  // ---- faults on purpose (reticle_fault with the script tag) ------------------------------------
  // The daemon sends this tab's faults (fault_set); the fetch and XHR wrappers answer a matching
  // request themselves (a status, a failure, a delay) and mark its record with the fault's id.
  var FAULTS = [];
  function setFaults(a) {
    var list = Array.isArray(a.faults) ? a.faults : [];
    var now = N.now();
    FAULTS = list.slice(0, 32).filter(isObj).map(function (f) {
      return {
        id: String(f.id || ''),
        urlContains: String(f.urlContains || ''),
        method: f.method ? String(f.method).toUpperCase() : null,
        resourceType: f.resourceType ? String(f.resourceType) : null,
        delayMs: Math.max(0, Math.min(60000, +f.delayMs || 0)),
        abort: !!f.abort,
        respond: isObj(f.respond) ? f.respond : null,
        remaining: typeof f.remaining === 'number' ? f.remaining : null,
        until: now + Math.max(0, +f.expiresInMs || 0)
      };
    });
    return { faults: FAULTS.length };
  }
  function faultFor(method, url, kind) {
    var now = N.now();
    for (var i = 0; i < FAULTS.length; i++) {
      var f = FAULTS[i];
      if (now >= f.until || f.remaining === 0 || !f.urlContains) continue;
      if (f.method && f.method !== method) continue;
      if (f.resourceType && f.resourceType !== kind) continue;
      if (String(url).indexOf(f.urlContains) < 0) continue;
      if (f.remaining !== null) f.remaining--;
      return f;
    }
    return null;
  }
  function faultWait(f) {
    return new N.Promise(function (resolve) {
      if (f.delayMs) N.setTimeout(resolve, f.delayMs);
      else resolve();
    });
  }
  function faultHeaders(f) {
    var h = isObj(f.respond && f.respond.headers) ? f.respond.headers : {};
    var out = [];
    var typed = false;
    for (var k in h) {
      if (hasOwn(h, k)) {
        out.push([String(k), String(h[k])]);
        if (String(k).toLowerCase() === 'content-type') typed = true;
      }
    }
    if (!typed) out.push(['Content-Type', 'text/plain; charset=utf-8']);
    return out;
  }
  function faultBody(f) {
    var b = f.respond && f.respond.body;
    return b == null ? 'Reticle fault ' + f.id : String(b);
  }
  // A fetch the fault answers: a Response of its own, a TypeError as a failed network, or the
  // real request after the delay.
  function faultedFetch(f, orig, self, args) {
    return faultWait(f).then(function () {
      if (f.abort) throw new TypeError('Failed to fetch');
      if (!f.respond) return orig.apply(self, args);
      return new Response(faultBody(f), { status: +f.respond.status || 500, headers: faultHeaders(f) });
    });
  }
  // An XHR the fault answers: its state and answer are set on the instance, then its events fire.
  function faultedXhr(f, xhr, orig, args) {
    faultWait(f).then(
      guard('network_observer', function () {
        if (!f.abort && !f.respond) return orig.apply(xhr, args);
        var status = f.abort ? 0 : +f.respond.status || 500;
        var body = f.abort ? '' : faultBody(f);
        var heads = f.abort ? [] : faultHeaders(f);
        var value = body;
        if (xhr.responseType === 'json') {
          try {
            value = N.parse(body);
          } catch (e) {
            value = null;
          }
        }
        var fixed = { readyState: 4, status: status, statusText: '', responseText: body, response: value };
        Object.keys(fixed).forEach(function (k) {
          Object.defineProperty(xhr, k, { configurable: true, get: function () { return fixed[k]; } });
        });
        xhr.getResponseHeader = function (name) {
          for (var i = 0; i < heads.length; i++)
            if (heads[i][0].toLowerCase() === String(name).toLowerCase()) return heads[i][1];
          return null;
        };
        xhr.getAllResponseHeaders = function () {
          return heads.map(function (h) { return h[0].toLowerCase() + ': ' + h[1]; }).join('\r\n');
        };
        xhr.dispatchEvent(new Event('readystatechange'));
        xhr.dispatchEvent(new ProgressEvent(f.abort ? 'error' : 'load'));
        xhr.dispatchEvent(new ProgressEvent('loadend'));
      })
    );
  }

  function installFetch() {
    if (typeof window.fetch !== 'function') return;
    if (!isNativeFn(window.fetch))
      emit('blind-spot', {
        reason: 'wrapped-network',
        kind: 'wrapped-network',
        count: 1,
        detail:
          'window.fetch was already wrapped by another library before reticle loaded; ' +
          'requests are still observed through the wrapper'
      });
    patch(window, 'fetch', fetchWrapper);
  }
  // window.fetch, wrapped: a net.pending before the call, a net.request (or a stream) after it.
  function fetchWrapper(orig) {
    return function fetch(input, init) {
      var call = { meta: null, args: arguments };
      try {
        fetchStart(call, input, init);
      } catch (e) {
        call.meta = null;
      }
      var meta = call.meta;
      var p = meta && meta.fault ? faultedFetch(meta.fault, orig, this, call.args) : orig.apply(this, call.args);
      if (!meta) return p;
      try {
        fetchRequestBody(meta, input);
      } catch (e) {
        /* ignore */
      }
      p.then(
        guard('network_observer', function (res) {
          onFetchResponse(meta, res);
        }),
        guard('network_observer', function (err) {
          fetchFailed(meta, err);
        })
      );
      return p;
    };
  }
  // The record of a fetch about to start (call.meta; none for the bridge) and its net.pending; a
  // request the server can see is marked with this tab's header (call.args then carry it).
  function fetchStart(call, input, init) {
    var url = typeof input === 'string' ? input : input && input.url ? input.url : String(input);
    var method = (
      (init && init.method) ||
      (input && typeof input === 'object' && input.method) ||
      'GET'
    ).toUpperCase();
    try {
      url = new URL(url, location.href).href;
    } catch (e) {
      /* keep raw */
    }
    if (isBridgeUrl(url)) return;
    var id = 'n' + ++netCounter;
    var meta = { id: id, method: method, url: redactUrl(url), t0: N.now() };
    call.meta = meta;
    if (S.captureBodies && init && init.body != null) meta.req = describeReqBody(init.body);
    meta.fault = faultFor(method, url, 'fetch');
    var pend = {
      id: id,
      requestId: id,
      method: method,
      url: meta.url,
      initiator: 'fetch',
      faultId: meta.fault ? meta.fault.id : undefined
    };
    // marked for the server unless it never reaches it (a fault that answers or aborts it); no-cors
    // admits no custom header (the request would fail)
    var marking =
      !(meta.fault && (meta.fault.abort || meta.fault.respond)) &&
      !((init && init.mode === 'no-cors') || (input && typeof input === 'object' && input.mode === 'no-cors')) &&
      markable(url);
    var mark = marking && takeMark();
    if (marking && !mark) pend.serverMarked = true; // no mark left: what the server did stays unknown
    if (mark) {
      try {
        var hs = new Headers(
          (init && init.headers) || (input && typeof input === 'object' && input.headers) || undefined
        );
        hs.set(MARK.header, mark[1]);
        init = Object.assign({}, init || {}, { headers: hs });
        call.args = [input, init];
        pend.serverMarked = true;
        pend.serverMark = mark[0];
        meta.marked = true;
      } catch (e) {
        /* an exotic init: the request goes unmarked */
      }
    }
    emit('net.pending', pend);
  }
  // a Request object body: read from a clone
  function fetchRequestBody(meta, input) {
    var method = meta.method;
    if (
      S.captureBodies &&
      !meta.req &&
      input &&
      typeof input === 'object' &&
      typeof input.clone === 'function' &&
      method !== 'GET' &&
      method !== 'HEAD'
    ) {
      meta.reqP = input
        .clone()
        .text()
        .then(
          function (t) {
            return t ? describeReqBody(t) : null;
          },
          function () {
            return null;
          }
        );
    }
  }
  function fetchFailed(meta, err) {
    var d = {
      id: meta.id,
      requestId: meta.id,
      method: meta.method,
      url: meta.url,
      status: 0,
      ok: false,
      durationMs: Math.round(N.now() - meta.t0),
      initiator: 'fetch',
      error: clip(err && err.name === 'AbortError' ? 'aborted' : errMsg(err), 500)
    };
    if (meta.fault) d.faultId = meta.fault.id;
    d.ms = d.durationMs;
    emit('net.request', withBodyFields(d, meta.req, null));
  }
  // Response headers as {lowercase-name: value}: at most 30, values capped at 256 characters;
  // credentials (set-cookie, authorization, proxy-authorization, any secret-looking name) redacted.
  var HEADERS_MAX = 30;
  var HEADER_VALUE_CAP = 256;
  function headerMap(pairs) {
    var out = {},
      n = 0,
      more = false;
    for (var i = 0; i < pairs.length; i++) {
      var k = String(pairs[i][0] || '').toLowerCase();
      if (!k || k === '__proto__' || hasOwn(out, k)) continue;
      if (n >= HEADERS_MAX) {
        more = true;
        continue;
      }
      n++;
      var v = String(pairs[i][1] == null ? '' : pairs[i][1]);
      out[k] =
        /^(set-cookie2?|authorization|proxy-authorization|proxy-authenticate)$/.test(k) || keySensitive(k)
          ? REDACTED
          : clip(scrubText(v), HEADER_VALUE_CAP);
    }
    return { headers: out, truncated: more };
  }
  function withHeaders(d, pairs) {
    try {
      var h = headerMap(pairs);
      d.responseHeaders = h.headers;
      if (h.truncated) d.responseHeadersTruncated = true;
    } catch (e) {
      /* headers unreadable: leave them out */
    }
    return d;
  }
  function fetchHeaderPairs(res) {
    var pairs = [];
    if (res.headers && typeof res.headers.forEach === 'function')
      res.headers.forEach(function (v, k) {
        if (pairs.length <= HEADERS_MAX * 2) pairs.push([k, v]);
      });
    return pairs;
  }
  function xhrHeaderPairs(xhr) {
    var raw = xhr.getAllResponseHeaders() || '';
    return raw
      .split(/\r?\n/)
      .slice(0, HEADERS_MAX * 2)
      .map(function (line) {
        var i = line.indexOf(':');
        return i > 0 ? [line.slice(0, i).trim(), line.slice(i + 1).trim()] : null;
      })
      .filter(Boolean);
  }
  // The net.request record of a completed fetch or XHR; `header` reads a response header.
  function callRecord(meta, url, initiator, status, statusText, header) {
    var ms = Math.round(N.now() - meta.t0);
    var ct = '';
    try {
      ct = header('content-type') || '';
    } catch (e) {
      /* opaque, or the request failed */
    }
    return {
      id: meta.id,
      requestId: meta.id,
      method: meta.method,
      url: url,
      status: status,
      ok: status >= 200 && status < 400,
      durationMs: ms,
      ms: ms,
      initiator: initiator,
      statusText: statusText || undefined,
      contentType: ct || undefined,
      faultId: meta.fault ? meta.fault.id : undefined
    };
  }
  // A fetch answered: its net.request once its body (and the request's own) has been read.
  function onFetchResponse(meta, res) {
    var d = fetchResponseRecord(meta, res);
    var ct = d.contentType || '';
    var reqDone = meta.reqP ? meta.reqP : N.Promise.resolve(meta.req);
    if (STREAMY.test(ct) && !res.bodyUsed && watchStream(meta, res, d, ct, reqDone)) return;
    if (!S.captureBodies) {
      emitRequestWhenRead(d, reqDone, null);
      return;
    }
    var reason = fetchNoBodyReason(meta, res, ct);
    var clone = null;
    if (!reason) {
      try {
        clone = res.clone();
      } catch (e) {
        reason = 'clone failed';
      }
    }
    if (!clone) {
      emitRequestWhenRead(d, reqDone, { reason: reason });
      return;
    }
    fetchReadBody(d, clone, ct, reqDone);
  }
  function emitRequestWhenRead(d, reqDone, resp) {
    reqDone.then(function (rq) {
      emit('net.request', withBodyFields(d, rq, resp));
    });
  }
  // The net.request record of a response: status, headers, opaque, redirected, size.
  function fetchResponseRecord(meta, res) {
    var d = callRecord(meta, meta.url, 'fetch', res.status, res.statusText, function (name) {
      return res.headers.get(name);
    });
    withHeaders(d, fetchHeaderPairs(res));
    if (res.type === 'opaque') {
      d.opaque = true;
      d.ok = null;
    }
    if (res.redirected) d.redirected = true;
    var cl = null;
    try {
      cl = res.headers.get('content-length');
    } catch (e) {
      /* ignore */
    }
    if (cl != null && !isNaN(+cl)) d.responseSize = +cl;
    return d;
  }
  // Why the response's body is not read, or null when it is.
  function fetchNoBodyReason(meta, res, ct) {
    if (STREAMY.test(ct)) return 'streaming response';
    if (ct && !TEXTUAL.test(ct)) return 'non-text content-type';
    if (res.type === 'opaque' || res.status === 204 || res.status === 304 || meta.method === 'HEAD')
      return 'no body';
    if (res.bodyUsed) return 'body already used';
    return null;
  }
  // Reads at most 256 KiB of the clone within 2 s; the net.request carries what it read.
  function fetchReadBody(d, clone, ct, reqDone) {
    var finished = false;
    var rd = readCapped(clone, 262144);
    var timer = N.setTimeout(function () {
      if (finished) return;
      finished = true;
      rd.cancel();
      emitRequestWhenRead(d, reqDone, { reason: 'body read timed out (2 s)' });
    }, 2000);
    N.Promise.all([rd.promise, reqDone]).then(
      function (vals) {
        if (finished) return;
        finished = true;
        N.clearTimeout(timer);
        var got = vals[0];
        var r = redactBody(got.text, ct);
        emit(
          'net.request',
          withBodyFields(d, vals[1], {
            body: r.body,
            truncated: r.truncated || !got.complete,
            size: d.responseSize != null ? d.responseSize : got.complete ? r.size : undefined
          })
        );
      },
      function (e) {
        if (finished) return;
        finished = true;
        N.clearTimeout(timer);
        emitRequestWhenRead(d, reqDone, { reason: 'body read failed: ' + clip(errMsg(e), 200) });
      }
    );
  }

  // -- network: streamed fetch responses (event-stream, ndjson, other streams)
  // A clone of the body is read beside the app's copy and split into messages, each a net.stream
  // event shaped like a net.ws frame; the fetch stays pending until the stream ends, and its
  // net.request then carries streamed:true and messageCount.
  var STREAM_MAX_MESSAGES = 500; // messages emitted per stream; the rest are counted and reported
  var STREAM_MAX_PER_SEC = 100; // messages emitted per stream and second
  var STREAM_MESSAGE_SCAN = 65536; // characters of one message kept for redaction; the rest counted
  // bytes read while the page has not read its own copy at all: past this the page's copy would
  // only pile up in memory because of us, so reading stops (streamStopped on the net.request)
  var STREAM_UNREAD_MAX = 8 << 20;
  function streamFormat(ct) {
    if (/event-stream/i.test(ct)) return 'sse';
    if (/(x-ndjson|stream\+json|jsonl|json-seq)/i.test(ct)) return 'ndjson';
    return 'chunks';
  }
  // Calls `fn` once when the page cancels the body it reads (stream.cancel or reader.cancel), so
  // our copy lets go too and the connection closes as it would without us.
  function onPageCancel(stream, fn) {
    function wrapCancel(obj, orig) {
      Object.defineProperty(obj, 'cancel', {
        configurable: true,
        writable: true,
        value: function () {
          try {
            fn();
          } catch (e) {
            /* ignore */
          }
          return orig.apply(obj, arguments);
        }
      });
    }
    try {
      var getReader = stream.getReader;
      wrapCancel(stream, stream.cancel);
      Object.defineProperty(stream, 'getReader', {
        configurable: true,
        writable: true,
        value: function () {
          var r = getReader.apply(stream, arguments);
          try {
            if (r && typeof r.cancel === 'function') wrapCancel(r, r.cancel);
          } catch (e) {
            /* ignore */
          }
          return r;
        }
      });
    } catch (e) {
      /* a frozen stream: our copy then reads to the end */
    }
  }
  // Reads a clone of a streamed fetch response beside the page's copy; false when it cannot.
  // What one stream has seen so far lives in one record, `st`, that the stream* functions share.
  function watchStream(meta, res, d, ct, reqDone) {
    var st = streamOpen(meta, res, d, ct, reqDone);
    if (!st) return false;
    emit('net.stream', {
      direction: 'open',
      transport: 'stream',
      url: meta.url,
      requestId: meta.id,
      status: res.status,
      ok: d.ok,
      contentType: clip(ct, 200),
      format: st.format
    });
    if (res.body) {
      onPageCancel(res.body, function () {
        st.cancelled = true;
        // what the page already read is queued on our copy too: read it first, then let go
        N.setTimeout(function () {
          try {
            if (!st.finished) st.reader.cancel().catch(function () {});
          } catch (e) {
            /* ignore */
          }
        }, 0);
      });
    }
    streamPump(st);
    return true;
  }
  // The record of one stream with its reader on a clone of the body, or null when there is none.
  function streamOpen(meta, res, d, ct, reqDone) {
    var clone, reader, dec;
    try {
      if (typeof TextDecoder === 'undefined') return null;
      clone = res.clone();
      if (!clone.body || typeof clone.body.getReader !== 'function') return null;
      reader = clone.body.getReader();
      dec = new TextDecoder();
    } catch (e) {
      return null;
    }
    return {
      meta: meta,
      res: res,
      d: d,
      reqDone: reqDone,
      reader: reader,
      dec: dec,
      format: streamFormat(ct),
      count: 0,
      emitted: 0,
      dropped: 0,
      unreported: 0,
      reportTimer: null,
      held: null, // the newest message the caps dropped: the stream's last one is always sent
      secStart: 0,
      inSec: 0,
      bytes: 0,
      finished: false,
      cancelled: false,
      buf: '',
      lineCut: false,
      lineOver: 0,
      sse: { parts: [], len: 0, kept: 0, event: '', id: '' }
    };
  }
  function streamReport(st) {
    st.reportTimer = null;
    if (!st.unreported) return;
    emit('truncated', {
      what: 'net.stream',
      channel: 'net.stream',
      count: st.unreported,
      dropped: st.unreported,
      reason:
        'caps of ' + STREAM_MAX_MESSAGES + ' messages per stream and ' + STREAM_MAX_PER_SEC + ' per second',
      url: st.meta.url,
      requestId: st.meta.id
    });
    st.unreported = 0;
  }
  function streamMessage(st, text, fullLen, evName, evId) {
    st.count++;
    var t = N.now();
    if (t - st.secStart > 1000) {
      st.secStart = t;
      st.inSec = 0;
    }
    var capped = st.emitted >= STREAM_MAX_MESSAGES || st.inSec >= STREAM_MAX_PER_SEC;
    if (st.held) {
      // the message held back is not the last one after all: it is dropped
      st.dropped++;
      st.unreported++;
      st.held = null;
      if (!st.reportTimer) {
        st.reportTimer = N.setTimeout(function () {
          streamReport(st);
        }, 1000);
      }
    }
    if (capped) {
      st.held = [text, fullLen, evName, evId, st.count];
      return;
    }
    st.inSec++;
    streamSend(st, text, fullLen, evName, evId, st.count, false);
  }
  function streamSend(st, text, fullLen, evName, evId, index, final) {
    st.emitted++;
    var f = frameData(text);
    if (fullLen > text.length) {
      f.size = fullLen;
      f.frameBytes = fullLen;
      if (S.captureBodies) f.dataTruncated = true;
    }
    f.direction = 'in';
    f.transport = 'stream';
    f.url = st.meta.url;
    f.requestId = st.meta.id;
    f.index = index;
    if (evName) f.event = clip(evName, 100);
    if (evId) f.lastEventId = clip(evId, 100);
    if (final) f.final = true;
    emit('net.stream', f);
  }
  function streamSseDispatch(st) {
    var sse = st.sse;
    if (sse.parts.length) {
      var text = sse.parts.join('\n');
      streamMessage(st, text.slice(0, STREAM_MESSAGE_SCAN), sse.len + sse.parts.length - 1, sse.event, sse.id);
    }
    sse.parts = [];
    sse.len = 0;
    sse.kept = 0;
    sse.event = '';
  }
  // One line of an ndjson or event-stream body; `over` counts its characters past the scan cap.
  function streamLine(st, text, over) {
    if (st.format === 'ndjson') {
      if (text.trim()) streamMessage(st, text, text.length + over);
      return;
    }
    if (text === '') return streamSseDispatch(st);
    if (text.charAt(0) === ':') return;
    var sse = st.sse;
    var i = text.indexOf(':');
    var field = i < 0 ? text : text.slice(0, i);
    var value = i < 0 ? '' : text.slice(i + 1);
    if (value.charAt(0) === ' ') value = value.slice(1);
    if (field === 'data') {
      sse.len += value.length + over;
      if (sse.kept < STREAM_MESSAGE_SCAN) {
        sse.parts.push(value);
        sse.kept += value.length + 1;
      }
    } else if (field === 'event') sse.event = value;
    else if (field === 'id' && value.indexOf('\u0000') < 0) sse.id = value;
  }
  function streamFeed(st, chunk, last) {
    if (st.format === 'chunks') {
      if (chunk) streamMessage(st, chunk.slice(0, STREAM_MESSAGE_SCAN), chunk.length);
      return;
    }
    if (st.lineCut) {
      var nl = chunk.search(/[\r\n]/);
      if (nl < 0) {
        st.lineOver += chunk.length;
        chunk = '';
      } else {
        st.lineOver += nl;
        chunk = chunk.slice(nl);
        st.lineCut = false;
      }
    }
    st.buf += chunk;
    var hold = '';
    if (!last && st.buf.charAt(st.buf.length - 1) === '\r') {
      hold = '\r';
      st.buf = st.buf.slice(0, -1);
    }
    var lines = st.buf.split(/\r\n|\r|\n/);
    st.buf = lines.pop();
    for (var i = 0; i < lines.length; i++) {
      streamLine(st, lines[i], i === 0 ? st.lineOver : 0);
      if (i === 0) st.lineOver = 0;
    }
    if (last) {
      if (st.buf) streamLine(st, st.buf, st.lineOver);
      if (st.format === 'sse') streamSseDispatch(st);
      st.buf = '';
      return;
    }
    if (st.buf.length > STREAM_MESSAGE_SCAN) {
      st.lineOver += st.buf.length - STREAM_MESSAGE_SCAN;
      st.buf = st.buf.slice(0, STREAM_MESSAGE_SCAN);
      st.lineCut = !hold;
    }
    st.buf += hold;
  }
  function streamFinish(st, err) {
    if (st.finished) return;
    st.finished = true;
    var held = st.held;
    if (held && err === 'unread') {
      st.dropped++;
      st.unreported++;
    } else if (held) {
      // the last message past the caps is sent anyway: it is the one that tells how it ended
      streamSend(st, held[0], held[1], held[2], held[3], held[4], true);
    }
    st.held = null;
    if (st.reportTimer) N.clearTimeout(st.reportTimer);
    streamReport(st);
    var d = st.d;
    var end = Math.round(N.now() - st.meta.t0);
    d.streamed = true;
    d.messageCount = st.count;
    if (st.dropped) d.messagesDropped = st.dropped;
    d.streamDurationMs = end;
    if (st.cancelled) d.cancelledByPage = true;
    else if (err === 'unread')
      d.streamStopped = 'the page read none of its copy; reading stopped after ' + st.bytes + ' bytes';
    else if (err) d.streamError = clip(err.name === 'AbortError' ? 'aborted' : errMsg(err), 500);
    st.reqDone.then(function (rq) {
      emit('net.request', withBodyFields(d, rq, { reason: 'streaming response' }));
    });
  }
  // a message the SDK fails to parse is reported; the stream is still read to its end
  function streamSafeFeed(st, chunk, last) {
    try {
      streamFeed(st, last ? st.dec.decode() : st.dec.decode(chunk, { stream: true }), last);
    } catch (e) {
      internal('network_observer', e);
    }
  }
  function streamPump(st) {
    st.reader.read().then(
      function (r) {
        if (r.done) {
          streamSafeFeed(st, null, true);
          streamFinish(st, null);
          return;
        }
        streamSafeFeed(st, r.value, false);
        st.bytes += (r.value && r.value.byteLength) || 0;
        if (st.bytes > STREAM_UNREAD_MAX && !st.res.bodyUsed) {
          streamFinish(st, 'unread');
          st.reader.cancel().catch(function () {}); // the page's copy goes on without ours
          return;
        }
        streamPump(st);
      },
      guard('network_observer', function (e) {
        streamFinish(st, e || new Error('stream read failed'));
      })
    );
  }

  // read at most ~cap characters of a (cloned) response without buffering a huge body
  function readCapped(resp, cap) {
    var reader = null;
    var out = {
      cancel: function () {
        try {
          if (reader) reader.cancel();
        } catch (e) {
          /* ignore */
        }
      }
    };
    if (
      !resp.body ||
      typeof resp.body.getReader !== 'function' ||
      typeof TextDecoder === 'undefined'
    ) {
      out.promise = resp.text().then(function (t) {
        return { text: t, complete: true };
      });
      return out;
    }
    reader = resp.body.getReader();
    var dec = new TextDecoder(),
      text = '';
    function pump() {
      return reader.read().then(function (r) {
        if (r.done) return { text: text + dec.decode(), complete: true };
        text += dec.decode(r.value, { stream: true });
        if (text.length > cap) {
          out.cancel();
          return { text: text, complete: false };
        }
        return pump();
      });
    }
    out.promise = pump();
    return out;
  }

  // XMLHttpRequest open and send, wrapped; META holds each instance's method, URL and record.
  function installXHR() {
    var X = window.XMLHttpRequest;
    if (!X || !X.prototype) return;
    var META = new WeakMap();
    patch(X.prototype, 'open', function (orig) {
      return function (method, url) {
        try {
          var u = String(url);
          try {
            u = new URL(u, location.href).href;
          } catch (e) {
            /* keep */
          }
          META.set(this, { method: String(method || 'GET').toUpperCase(), url: u });
        } catch (e) {
          /* ignore */
        }
        return orig.apply(this, arguments);
      };
    });
    patch(X.prototype, 'send', function (orig) {
      return function (body) {
        var xhr = this;
        try {
          xhrSendStart(META, xhr, body);
        } catch (e) {
          internal('network_observer', e);
        }
        var mf = META.get(xhr);
        if (mf && mf.fault && mf.id) return faultedXhr(mf.fault, xhr, orig, arguments);
        return orig.apply(this, arguments);
      };
    });
  }
  // An XHR about to be sent: its record, its mark for the server, its net.pending, its loadend.
  function xhrSendStart(META, xhr, body) {
    var m = META.get(xhr);
    if (!m || isBridgeUrl(m.url)) return;
    var id = 'n' + ++netCounter;
    m.id = id;
    m.t0 = N.now();
    m.rurl = redactUrl(m.url);
    m.req = S.captureBodies ? describeReqBody(body) : null;
    m.fault = faultFor(m.method, m.url, 'xhr');
    var xpend = {
      id: id,
      requestId: id,
      method: m.method,
      url: m.rurl,
      initiator: 'xhr',
      faultId: m.fault ? m.fault.id : undefined
    };
    if (!(m.fault && (m.fault.abort || m.fault.respond)) && markable(m.url)) {
      var xmark = takeMark();
      try {
        if (xmark) xhr.setRequestHeader(MARK.header, xmark[1]);
        xpend.serverMarked = true;
        if (xmark) xpend.serverMark = xmark[0];
      } catch (e) {
        /* not opened, or already sent: unmarked */
      }
    }
    emit('net.pending', xpend);
    if (!m.listening) {
      m.listening = true;
      xhr.addEventListener(
        'loadend',
        guard('network_observer', function () {
          xhrLoadend(META, xhr);
        })
      );
    }
  }
  // The net.request of a finished XHR (once per send).
  function xhrLoadend(META, xhr) {
    var mm = META.get(xhr);
    if (!mm || !mm.id) return;
    var d = callRecord(mm, mm.rurl, 'xhr', xhr.status, xhr.statusText, function (name) {
      return xhr.getResponseHeader(name);
    });
    if (xhr.status) withHeaders(d, xhrHeaderPairs(xhr));
    var ct = d.contentType || '';
    if (xhr.status === 0) d.error = 'network error, abort or timeout';
    var resp = S.captureBodies ? xhrResponseBody(xhr, ct) : null;
    emit('net.request', withBodyFields(d, mm.req, resp));
    mm.id = null;
  }
  function xhrResponseBody(xhr, ct) {
    try {
      if (xhr.responseType === '' || xhr.responseType === 'text') {
        if (STREAMY.test(ct)) return { reason: 'streaming response' };
        if (ct && !TEXTUAL.test(ct)) return { reason: 'non-text content-type' };
        var r = redactBody(xhr.responseText || '', ct);
        return { body: r.body, truncated: r.truncated, size: r.size };
      }
      if (xhr.responseType === 'json') {
        var r2 = redactBody(N.stringify(xhr.response), 'application/json');
        return { body: r2.body, truncated: r2.truncated, size: r2.size };
      }
      return { reason: 'responseType ' + xhr.responseType };
    } catch (e) {
      return { reason: 'body read failed' };
    }
  }

  function installBeacon() {
    if (!navigator.sendBeacon) return;
    patch(navigator, 'sendBeacon', function (orig) {
      return function (url, data) {
        var queued = orig.apply(this, arguments);
        try {
          var id = 'n' + ++netCounter;
          var u = String(url);
          try {
            u = new URL(u, location.href).href;
          } catch (e) {
            /* keep */
          }
          var d = {
            id: id,
            requestId: id,
            method: 'POST',
            url: redactUrl(u),
            status: 0,
            ok: !!queued,
            queued: !!queued,
            durationMs: 0,
            ms: 0,
            initiator: 'beacon',
            oneWay: true
          };
          emit(
            'net.request',
            withBodyFields(d, S.captureBodies ? describeReqBody(data) : null, null)
          );
        } catch (e) {
          /* ignore */
        }
        return queued;
      };
    });
  }

  function frameData(data) {
    var d = {};
    if (typeof data === 'string') {
      d.size = data.length;
      d.frameBytes = data.length;
      if (S.captureBodies) {
        var r = redactBody(data, '');
        d.data = r.body.length > FRAME_DATA_CAP ? r.body.slice(0, FRAME_DATA_CAP) : r.body;
        if (r.truncated || r.body.length > FRAME_DATA_CAP) d.dataTruncated = true;
      }
    } else {
      d.frameType = 'binary';
      try {
        d.size = data.byteLength != null ? data.byteLength : data.size || 0;
      } catch (e) {
        d.size = 0;
      }
      d.frameBytes = d.size;
    }
    return d;
  }
  function frameEvent(data, direction, transport, url) {
    var d = frameData(data);
    d.direction = direction;
    d.transport = transport;
    d.url = url;
    return d;
  }
  // Put W in the place of window[name] (its Native): the same prototype (instanceof holds) and
  // ready-state constants; put back at teardown unless someone replaced it since.
  function swapConstructor(name, Native, W, constants) {
    W.prototype = Native.prototype;
    constants.forEach(function (k) {
      try {
        Object.defineProperty(W, k, { value: Native[k] });
      } catch (e) {
        /* ignore */
      }
    });
    try {
      Object.defineProperty(W, '__reticleWrapped', { value: true });
    } catch (e) {
      /* ignore */
    }
    window[name] = W;
    S.teardowns.push(function () {
      if (window[name] === W) window[name] = Native;
    });
  }
  function installWebSocket() {
    var Native = N.WebSocket;
    if (!Native) return;
    var allow = rateCap('net.ws', 100);
    var W = function WebSocket(url, protocols) {
      var wf = null;
      try {
        wf = faultFor('GET', new URL(String(url), location.href).href, 'websocket');
      } catch (e) {
        wf = null;
      }
      var ws;
      if (wf && wf.abort) {
        // dropped on purpose (reticle_fault): the handshake goes to a daemon path that refuses it,
        // never to the app's server, and the page sees the failure a real drop gives
        var refuse = new URL(S.url);
        refuse.pathname = '/reticle-fault';
        refuse.search = '';
        ws = new Native(refuse.href);
        var shown = String(url);
        Object.defineProperty(ws, 'url', { configurable: true, get: function () { return shown; } });
      } else ws = arguments.length > 1 ? new Native(url, protocols) : new Native(url);
      try {
        var u = redactUrl(ws.url || String(url));
        emit('net.ws', { direction: 'open', transport: 'ws', url: u, faultId: wf ? wf.id : undefined });
        ws.addEventListener('message', function (e) {
          try {
            if (allow()) {
              var d = frameEvent(e.data, 'in', 'ws', u);
              emit('net.ws', d);
            }
          } catch (x) {
            /* ignore */
          }
        });
        ws.addEventListener('close', function (e) {
          try {
            emit('net.ws', {
              direction: 'close',
              transport: 'ws',
              url: u,
              code: e.code,
              reason: clip(e.reason, 200),
              clean: e.wasClean,
              faultId: wf ? wf.id : undefined
            });
          } catch (x) {
            /* ignore */
          }
        });
        ws.addEventListener('error', function () {
          try {
            emit('net.ws', { direction: 'error', transport: 'ws', url: u, faultId: wf ? wf.id : undefined });
          } catch (x) {
            /* ignore */
          }
        });
        var send = ws.send;
        ws.send = function (data) {
          try {
            if (allow()) {
              var d = frameEvent(data, 'out', 'ws', u);
              emit('net.ws', d);
            }
          } catch (x) {
            /* ignore */
          }
          return send.apply(ws, arguments);
        };
      } catch (e) {
        internal('network_observer', e);
      }
      return ws;
    };
    swapConstructor('WebSocket', Native, W, ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED']);
  }
  function installEventSource() {
    var Native = window.EventSource;
    if (!Native) return;
    var allow = rateCap('net.sse', 100);
    var W = function EventSource(url, init) {
      var es = new Native(url, init);
      try {
        var u = redactUrl(es.url || String(url));
        emit('net.sse', { direction: 'open', transport: 'sse', url: u });
        es.addEventListener('message', function (e) {
          try {
            if (allow()) {
              var d = frameEvent(e.data, 'in', 'sse', u);
              if (e.lastEventId) d.lastEventId = clip(e.lastEventId, 100);
              emit('net.sse', d);
            }
          } catch (x) {
            /* ignore */
          }
        });
        es.addEventListener('error', function () {
          try {
            emit('net.sse', {
              direction: es.readyState === 2 ? 'close' : 'error',
              transport: 'sse',
              url: u,
              readyState: es.readyState
            });
          } catch (x) {
            /* ignore */
          }
        });
        var close = es.close;
        es.close = function () {
          try {
            emit('net.sse', { direction: 'close', transport: 'sse', url: u, byClient: true });
          } catch (x) {
            /* ignore */
          }
          return close.apply(es, arguments);
        };
      } catch (e) {
        internal('network_observer', e);
      }
      return es;
    };
    swapConstructor('EventSource', Native, W, ['CONNECTING', 'OPEN', 'CLOSED']);
  }

  // == Section: alerts == alerts, live regions, invalid fields, toasts
  // -- what the user is told: alerts, assertive live regions, invalid fields, declared toasts
  // ui.alert {text, source, level, ref, initial?, field?} (ui.status for a status surface of the
  // daemon's FAILURE_UI table, whose text decides) when such an element appears, becomes
  // visible, or its text changes to a new non-empty text; one element is reported once per text,
  // the same text from two places within ALERT_SAME_MS once, at most 20 a second.
  var TOASTS = { error: [], info: [] }; // selectors declared through reticle.describe({toasts})
  var ALERT_TEXT_CAP = 300;
  var ALERT_SAME_MS = 1500;
  var ALERT_MAX_CANDIDATES = 200;
  var ALERT_RESCAN = null; // set by installAlerts: rescan now (after describe)
  var ALERT_SOURCES = [
    // [source, selector, level]; earlier rows win when one candidate sits inside another
    ['alertdialog', '[role=alertdialog]', null],
    ['alert', '[role=alert]', null],
    ['assertive', '[aria-live=assertive]', null]
  ];
  // the daemon's table of the ways frameworks tell failure (_FAILURE_UI): [source, selector, level];
  // level 'error' rows rank above the ARIA rows, the rest (status regions: text decides) below them
  var FAILURE_UI = /*__RETICLE_FAILURE_UI__*/ [];
  // the daemon's table of route announcers (_ROUTE_ANNOUNCERS): a router's hidden live region, never a message
  var ROUTE_ANNOUNCERS = /*__RETICLE_ANNOUNCERS__*/ '';
  function isAnnouncer(el) {
    try {
      return !!(ROUTE_ANNOUNCERS && el.closest && el.closest(ROUTE_ANNOUNCERS));
    } catch (e) {
      return false;
    }
  }
  var ALERT_SCOPES =
    'header,[role=banner],nav,[role=navigation],footer,[role=contentinfo],aside,[role=complementary],' +
    'form,[role=form],dialog,[role=dialog],[role=alertdialog]';
  var ALERT_CHROME = 'header,[role=banner],nav,[role=navigation],footer,[role=contentinfo],aside,[role=complementary]';
  var ALERT_NOW = null; // set by installAlerts: what is shown now, for alerts_read
  function declareToasts(t) {
    if (!t || typeof t !== 'object') return;
    ['error', 'info'].forEach(function (level) {
      var v = t[level];
      (Array.isArray(v) ? v : v ? [v] : []).forEach(function (sel) {
        if (typeof sel !== 'string' || !sel || TOASTS[level].indexOf(sel) >= 0) return;
        try {
          document.querySelector(sel);
        } catch (e) {
          warn('describe: toast selector ' + clip(sel, 200) + ' does not parse; ignored');
          return;
        }
        if (TOASTS[level].length < 20) TOASTS[level].push(sel);
      });
    });
    if (ALERT_RESCAN) ALERT_RESCAN();
  }
  // the error text of an invalid field: aria-errormessage, aria-describedby, else an error-looking
  // element next to it (or next to its label or wrapper)
  var ERROR_LOOK = /(^|[\s_-])(error|errors|invalid|danger|feedback|help-block|errorlist)([\s_-]|$)/i;
  function fieldErrorText(el) {
    var t = byIdText(el, 'aria-errormessage') || byIdText(el, 'aria-describedby');
    if (t) return t;
    var cur = el;
    for (var up = 0; up < 3 && cur && cur !== document.body; up++) {
      for (var sib = cur.nextElementSibling, k = 0; sib && k < 3; sib = sib.nextElementSibling, k++) {
        var look = (sib.getAttribute('class') || '') + ' ' + (sib.id || '');
        if (sib.getAttribute('role') === 'alert' || ERROR_LOOK.test(look)) {
          var x = norm(textOf(sib, 0));
          if (x) return x;
        }
      }
      cur = cur.parentElement;
    }
    return '';
  }
  // The selectors an alert scan looks at, best first: [source, selector, level, status?].
  function alertRows() {
    var rows = [];
    TOASTS.error.forEach(function (sel) {
      rows.push(['toast', sel, 'error']);
    });
    TOASTS.info.forEach(function (sel) {
      rows.push(['toast', sel, null]);
    });
    rows.push(['invalid', '[aria-invalid=true]', 'error']);
    return rows.concat(
      FAILURE_UI.filter(function (r) {
        return r[2] === 'error';
      }),
      ALERT_SOURCES,
      FAILURE_UI.filter(function (r) {
        return r[2] !== 'error';
      }).map(function (r) {
        return [r[0], r[1], null, true]; // a status surface: reported as ui.status, its text decides
      })
    );
  }
  // The elements that may tell the user something, each once, at most ALERT_MAX_CANDIDATES.
  function alertCandidates() {
    var rows = alertRows();
    var out = [],
      seen = new Set(),
      roots = [document].concat(liveShadowRoots()); // a design system's toast lives in a shadow tree
    for (var i = 0; i < rows.length && out.length < ALERT_MAX_CANDIDATES; i++) {
      for (var r = 0; r < roots.length && out.length < ALERT_MAX_CANDIDATES; r++) {
        var els;
        try {
          els = roots[r].querySelectorAll(rows[i][1]);
        } catch (e) {
          break;
        }
        for (var j = 0; j < els.length && out.length < ALERT_MAX_CANDIDATES; j++) {
          if (seen.has(els[j])) continue;
          seen.add(els[j]);
          out.push({ el: els[j], source: rows[i][0], level: rows[i][2], status: !!rows[i][3] });
        }
      }
    }
    return out;
  }
  // The candidates shown now, one per message; SHOWN learns the hidden and the nested ones.
  function alertsShown(SHOWN) {
    var cache = makeVisCache();
    var showing = [];
    alertCandidates().forEach(function (c) {
      var el = c.el;
      if (isIgnored(el) || isAnnouncer(el) || !isVisible(el, cache)) {
        SHOWN.set(el, '');
        return;
      }
      if (!alertText(c)) {
        SHOWN.set(el, '');
        return;
      }
      // a candidate inside (or around) one that ranks higher is the same message; a field is
      // not a message, so a dialog around an invalid field still counts
      for (var i = 0; i < showing.length; i++) {
        var o = showing[i].el;
        if (c.source === 'invalid' || showing[i].source === 'invalid') continue;
        if (o.contains(el) || el.contains(o)) {
          SHOWN.set(el, c.key);
          return;
        }
      }
      showing.push(c);
    });
    return showing;
  }
  // Sets the candidate's text and key (an invalid field: its name and error text); false when empty.
  function alertText(c) {
    var el = c.el;
    if (c.source === 'invalid') {
      c.field = clip(getName(el) || el.getAttribute('name') || el.id || '', 120);
      c.text = clip(scrub(fieldErrorText(el)), ALERT_TEXT_CAP);
      c.key = 'invalid\n' + c.field + '\n' + c.text;
      return true;
    }
    // a huge region is read natively (innerText of a rendered element skips script/style)
    var big = (el.textContent || '').length > 20000;
    c.text = clip(scrub(norm(big ? el.innerText || '' : textOf(el, 0))), ALERT_TEXT_CAP);
    c.key = c.text;
    return !!c.text;
  }
  // One scan: a ui.alert (or ui.status) for each message shown with a new text.
  function alertScan(al, initial) {
    al.scheduled = false;
    var showing = alertsShown(al.SHOWN);
    var t = N.now(),
      recent = al.recent;
    showing.forEach(function (c) {
      if (al.SHOWN.get(c.el) === c.key) return;
      al.SHOWN.set(c.el, c.key);
      if (c.text && recent[c.text] && t - recent[c.text] < ALERT_SAME_MS) return;
      if (!al.allow()) return;
      if (c.text) recent[c.text] = t;
      var d = { text: c.text, source: c.source, level: c.level };
      if (c.field != null) d.field = c.field;
      var r = refFor(c.el);
      if (r) d.ref = r;
      if (initial) d.initial = true;
      emit(c.status ? 'ui.status' : 'ui.alert', d, c.el);
    });
    // a new document says it has looked: a verdict after a navigation waits for this
    if (initial) emit('ui.scan', { shown: showing.length });
    for (var k in recent) if (hasOwn(recent, k) && t - recent[k] > ALERT_SAME_MS) delete recent[k];
    checkFrames(); // a frame mounted later (a payment form, a sign-in box) is a part we cannot read
  }
  var ALERT_OBSERVE = {
    subtree: true,
    childList: true,
    characterData: true,
    attributes: true,
    attributeFilter: [
      'role',
      'aria-live',
      'aria-invalid',
      'aria-hidden',
      'aria-describedby',
      'aria-errormessage',
      'hidden',
      'style',
      'class',
      'open'
    ]
  };
  function installAlerts() {
    if (!N.MutationObserver || !document.querySelectorAll) return;
    var al = {
      SHOWN: new WeakMap(), // element -> the text last reported ('' while hidden or empty)
      recent: {}, // text -> when it was last reported
      allow: rateCap('ui.alert', 20),
      scheduled: false,
      loaded: false
    };
    function schedule() {
      if (al.scheduled || !al.loaded) return;
      al.scheduled = true;
      var fired = false;
      var run = function () {
        if (fired) return;
        fired = true;
        safeScan(false);
      };
      N.raf(run);
      N.setTimeout(run, 100); // rAF does not run in background tabs
    }
    var mo = new N.MutationObserver(function () {
      schedule();
    });
    mo.observe(document, ALERT_OBSERVE);
    var watch = function (root) {
      mo.observe(root, ALERT_OBSERVE);
      schedule();
    };
    ROOT_WATCHERS.push(watch);
    function first() {
      if (al.loaded) return;
      al.loaded = true;
      safeScan(true);
    }
    function safeScan(initial) {
      try {
        alertScan(al, initial);
      } catch (e) {
        internal('alert_observer', e);
      }
    }
    if (document.readyState === 'loading') listen(document, 'DOMContentLoaded', first);
    else N.setTimeout(first, 0);
    listen(document, 'transitionend', schedule, true); // a toast that fades in
    listen(document, 'animationend', schedule, true);
    ALERT_RESCAN = schedule;
    ALERT_NOW = function () {
      return alertsShown(al.SHOWN);
    };
    S.teardowns.push(function () {
      mo.disconnect();
      ALERT_RESCAN = null;
      ALERT_NOW = null;
      ROOT_WATCHERS = ROOT_WATCHERS.filter(function (w) {
        return w !== watch;
      });
    });
  }
  // alerts_read {ref?}: every message shown now ({text, source, level, field?, ref, related}); related:
  // it sits in no other region than the element `ref` (the act's target): not in a header, nav,
  // footer, aside, form or dialog that does not hold that element
  function alertsRead(args) {
    if (!ALERT_NOW) return { alerts: [], unavailable: true };
    var target = resolveRef(args && args.ref);
    var out = ALERT_NOW().slice(0, 50).map(function (c) {
      var scope = null;
      try {
        scope = c.el.parentElement ? c.el.parentElement.closest(ALERT_SCOPES) : null;
        if (!scope && c.el.matches(ALERT_SCOPES) && c.source !== 'alertdialog') scope = c.el;
      } catch (e) {
        scope = null;
      }
      var d = { text: c.text, source: c.source, level: c.level, related: !scope };
      // beside the act's target, only its own region; with no target, any region but the page's chrome
      if (scope) d.related = target ? scope.contains(target) : !scope.matches(ALERT_CHROME);
      if (c.field != null) d.field = c.field;
      var r = refFor(c.el);
      if (r) d.ref = r;
      return d;
    });
    return { alerts: out };
  }

  // == Section: console == console calls and uncaught errors
  // -- console and errors
  function formatArgs(args) {
    var parts = [],
      i = 0;
    if (typeof args[0] === 'string' && /%[sdifoOc]/.test(args[0]) && args.length > 1) {
      i = 1;
      var fmt = args[0].replace(/%([sdifoOc%])/g, function (all, f) {
        if (f === '%') return '%';
        if (i >= args.length) return all;
        var a = args[i++];
        if (f === 'c') return '';
        if (f === 'd' || f === 'i') return String(parseInt(a, 10));
        if (f === 'f') return String(parseFloat(a));
        if (f === 's') return typeof a === 'string' ? a : safeStringify(a, 500);
        return safeStringify(a, 1000);
      });
      parts.push(fmt);
    }
    for (; i < args.length; i++) {
      var a = args[i];
      if (typeof a === 'string') parts.push(a);
      else if (a instanceof Error)
        parts.push((a.name && a.name !== 'Error' ? a.name + ': ' : '') + a.message);
      else parts.push(safeStringify(a, 1000));
    }
    return clip(scrub(parts.join(' ')), 4000);
  }
  function argSummary(a) {
    if (a === null) return 'null';
    var t = typeof a;
    if (t === 'string') return clip(scrub(a), 200);
    if (t === 'number' || t === 'boolean' || t === 'undefined' || t === 'bigint') return String(a);
    if (t === 'function') return '[Function ' + (a.name || 'anonymous') + ']';
    if (t === 'symbol') {
      try {
        return a.toString();
      } catch (e) {
        return 'Symbol()';
      }
    }
    if (a instanceof Error) return '[' + (a.name || 'Error') + ': ' + clip(a.message, 150) + ']';
    if (typeof Node !== 'undefined' && a instanceof Node) return describeNode(a);
    if (Array.isArray(a)) return '[Array(' + a.length + ')]';
    try {
      return (
        '{' +
        Object.keys(a).slice(0, 8).join(', ') +
        (Object.keys(a).length > 8 ? ', \u2026' : '') +
        '}'
      );
    } catch (e) {
      return '[object]';
    }
  }
  function cleanStack(s) {
    if (!s) return undefined;
    var lines = String(s)
      .split('\n')
      .filter(function (l) {
        return !/reticle(\.js|-sdk)/.test(l);
      });
    return clip(scrub(lines.join('\n')), STACK_CAP);
  }
  var inConsole = 0;
  function installConsole() {
    var allow = rateCap('console', 500);
    ['log', 'info', 'warn', 'error', 'debug'].forEach(function (level) {
      if (!window.console || typeof window.console[level] !== 'function') return;
      patch(window.console, level, function (orig) {
        return function () {
          if (!inConsole) {
            inConsole++;
            try {
              if (allow()) {
                var args = Array.prototype.slice.call(arguments);
                var text = formatArgs(args);
                var d = { text: text, message: text, args: args.slice(0, 10).map(argSummary) };
                if (args.length > 10) d.argsTruncated = args.length - 10;
                if (level === 'error' || level === 'warn') {
                  var errArg = args.filter(function (a) {
                    return a instanceof Error;
                  })[0];
                  if (errArg) d.stack = cleanStack(errArg.stack);
                  else if (level === 'error') {
                    try {
                      d.stack = cleanStack(new Error().stack.split('\n').slice(2).join('\n'));
                    } catch (e) {
                      /* ignore */
                    }
                  }
                }
                emit('console.' + level, d);
              }
            } catch (e) {
              /* never break the app's console */
            }
            inConsole--;
          }
          return orig.apply(this, arguments);
        };
      });
    });
  }
  function installErrors() {
    listen(
      window,
      'error',
      function (e) {
        // resource load errors have no message
        if (!e || (!(e instanceof ErrorEvent) && !e.error && !e.message)) return;
        if (e.target && e.target !== window && e.target.nodeType === 1) return;
        var err = e.error;
        var d = {
          kind: 'error',
          message: clip(scrub(e.message || (err && err.message) || 'error'), 2000),
          source: redactUrl(e.filename || ''),
          line: e.lineno,
          column: e.colno
        };
        if (err && err.stack) d.stack = cleanStack(err.stack);
        if (err && err.name) d.name = err.name;
        emit('error.uncaught', d);
      },
      true
    );
    listen(window, 'unhandledrejection', function (e) {
      var r = e.reason;
      var d = {
        kind: 'unhandledrejection',
        message: clip(
          scrub(
            r instanceof Error ? r.message : typeof r === 'string' ? r : safeStringify(r, 1000)
          ),
          2000
        )
      };
      if (r && r.stack) d.stack = cleanStack(r.stack);
      if (r && r.name) d.name = r.name;
      emit('error.uncaught', d);
    });
  }

  // == Section: documents == routes, the document request that leaves and the one that arrives
  // -- routing
  var lastHref = location.href;
  function routeChanged(kind) {
    var to = location.href;
    if (to === lastHref) return;
    var from = lastHref;
    lastHref = to;
    emit('route.change', {
      from: redactUrl(from),
      to: redactUrl(to),
      kind: kind,
      pathname: location.pathname,
      search: redactUrl(location.search),
      hash: redactUrl(location.hash),
      title: document.title
    });
  }
  function installRouting() {
    lastHref = location.href;
    ['pushState', 'replaceState'].forEach(function (m) {
      patch(history, m, function (orig) {
        return function () {
          var r = orig.apply(this, arguments);
          try {
            routeChanged(m === 'pushState' ? 'push' : 'replace');
          } catch (e) {
            /* ignore */
          }
          return r;
        };
      });
    });
    listen(window, 'popstate', function () {
      var same = location.href.split('#')[0] === lastHref.split('#')[0];
      routeChanged(
        same &&
          location.hash !==
            (lastHref.indexOf('#') >= 0 ? lastHref.slice(lastHref.indexOf('#')) : '')
          ? 'hash'
          : 'pop'
      );
    });
    listen(window, 'hashchange', function () {
      routeChanged('hash');
    });
  }

  // -- documents: the request that replaces this page, and the arrival of the next one
  // A full-page navigation takes this document (and its socket) away. So the request that
  // leaves it is announced before it starts: a form post as soon as its submit event has run
  // uncancelled (the `formdata` event), anything else at `beforeunload`, as a `net.pending` with
  // initiator "document". The record also goes into sessionStorage, keyed by tab, so that the
  // next document can report the same request id with what only it can read: Navigation Timing's
  // status, redirect count and navigation type.
  var DOC_KEY = '__reticle_doc_pending';
  var DOC_LINK_MS = 120000; // an announced navigation older than this is not linked to an arrival
  var docIntent = null; // the latest hint of where a navigation goes
  var docAnnounced = null; // the document request this page already announced
  var lastSubmit = null; // {ev, form, submitter} of the latest submit event
  var programmaticSubmit = null; // the form whose submit() is running
  var DOC_FIELDS = [
    'action',
    'enctype',
    'fields',
    'form',
    'submitter',
    'link',
    'requestBody',
    'requestBodyTruncated'
  ];
  // Two URLs name the same document: fragments and our hard-reload marker aside.
  function sameDocUrl(a, b) {
    function bare(u) {
      return String(u || '')
        .split('#')[0]
        .replace(/([?&])_reticle_reload=\d+&?/, '$1')
        .replace(/[?&]$/, '');
    }
    return bare(a) === bare(b);
  }
  function samePath(a, b) {
    return String(a || '').split(/[?#]/)[0] === String(b || '').split(/[?#]/)[0];
  }
  // A form's own IDL attribute, never a control named like it (<select name="action">).
  function formProp(form, key) {
    try {
      return Object.getOwnPropertyDescriptor(HTMLFormElement.prototype, key).get.call(form);
    } catch (e) {
      return '';
    }
  }
  // A form submission as the browser will send it: method, action URL, field names and values
  // (redacted as request bodies are: passwords, hidden fields, secret-looking names), the
  // submitter's name and text.
  function formRecord(form, submitter, fd) {
    var sub = submitter && submitter.form === form ? submitter : null;
    var method = String(
      (sub && sub.hasAttribute('formmethod') && sub.formMethod) || formProp(form, 'method') || 'get'
    ).toUpperCase();
    var action =
      (sub && sub.hasAttribute('formaction') && sub.formAction) ||
      formProp(form, 'action') ||
      location.href;
    var target = (sub && sub.getAttribute('formtarget')) || form.getAttribute('target') || '';
    var enctype =
      (sub && sub.hasAttribute('formenctype') && sub.formEnctype) || formProp(form, 'enctype');
    var names = [],
      pairs = [],
      n = 0;
    fd.forEach(function (v, k) {
      if (n++ >= 100) return;
      if (names.indexOf(k) < 0 && names.length < 50) names.push(k);
      var ctl = null;
      try {
        ctl = formProp(form, 'elements').namedItem(k);
        if (ctl && ctl.nodeType !== 1) ctl = ctl[0] || null; // a RadioNodeList
      } catch (e) {
        /* odd name */
      }
      var secret = keySensitive(k) || (!!ctl && isSecretField(ctl));
      var val =
        typeof v === 'string'
          ? secret
            ? REDACTED
            : clip(scrub(v), 500)
          : '[File ' + (v.name || '') + ' ' + (v.size || 0) + 'B]';
      pairs.push([k, val]);
    });
    var body = pairs
      .map(function (p) {
        var v = encodeURIComponent(p[1]).replace(/%5Bredacted%5D/g, REDACTED);
        return encodeURIComponent(p[0]) + '=' + v;
      })
      .join('&');
    var url = action;
    if (method === 'GET') {
      try {
        var u = new URL(action, location.href);
        u.search = pairs
          .map(function (p) {
            return encodeURIComponent(p[0]) + '=' + encodeURIComponent(p[1]);
          })
          .join('&');
        url = u.href;
      } catch (e) {
        /* keep the action */
      }
    }
    var rec = {
      method: method,
      url: redactUrl(url),
      action: redactUrl(action),
      target: target,
      enctype: enctype,
      fields: names,
      form: {
        name: clip(getName(form, 'form') || form.getAttribute('name') || form.id || '', 80)
      }
    };
    if (method !== 'GET') {
      rec.requestBody = clip(body, BODY_CAP);
      if (body.length > BODY_CAP) rec.requestBodyTruncated = true;
    }
    if (sub) {
      rec.submitter = { text: clip(getName(sub), 80) };
      if (sub.name) rec.submitter.name = sub.name;
    }
    return rec;
  }
  function announceDocument(rec) {
    var id = 'd' + rand36(8);
    var d = {
      id: id,
      requestId: id,
      method: rec.method || null,
      methodKnown: !!rec.method,
      url: rec.url || '',
      urlKnown: !!rec.url,
      initiator: 'document',
      cause: rec.cause,
      navigationType: rec.navigationType || 'navigate'
    };
    DOC_FIELDS.forEach(function (k) {
      if (rec[k] != null) d[k] = rec[k];
    });
    if (rec.requestBody != null) d.requestBodyType = rec.enctype;
    if (MARK.on && (!rec.url || markable(rec.url))) {
      var mark = takeMark();
      if (mark) markDocument(mark, rec.url);
      d.serverMarked = true;
      if (mark) d.serverMark = mark[0];
    }
    docAnnounced = { id: id, at: N.dateNow(), method: d.method, url: d.url, cause: d.cause };
    // the record first: the emit below may not leave before the page goes
    var keep = {};
    for (var k in d) if (hasOwn(d, k)) keep[k] = d[k];
    keep.at = N.dateNow();
    keep.from = redactUrl(location.href);
    keep.documentId = S.documentId;
    try {
      ssSet(DOC_KEY, N.stringify(keep));
    } catch (e) {
      /* no storage */
    }
    emit('net.pending', d);
    flush();
  }
  function installDocuments() {
    listen(window, 'submit', docOnSubmit, true);
    // `formdata` fires while the browser builds the entry list of a submission that goes ahead:
    // after an uncancelled submit event has finished dispatching, or inside form.submit(). A
    // `new FormData(form)` in the app's own submit handler fires it too, mid-dispatch: not ours.
    listen(window, 'formdata', docOnFormData, true);
    if (window.HTMLFormElement && HTMLFormElement.prototype.submit)
      patch(HTMLFormElement.prototype, 'submit', docSubmitWrapper);
    listen(window, 'click', docOnClick);
    // The Navigation API (Chromium) names the destination of every navigation this document
    // starts, a location change or a reload included.
    try {
      if (window.navigation && typeof window.navigation.addEventListener === 'function')
        listen(window.navigation, 'navigate', docOnNavigate);
    } catch (e) {
      /* no Navigation API */
    }
    listen(window, 'beforeunload', docLeaving, true);
    listen(
      window,
      'pagehide',
      function (e) {
        if (!e.persisted && !(docAnnounced && N.dateNow() - docAnnounced.at < 10000)) docLeaving();
      },
      true
    );
    docArrival();
  }
  function docOnSubmit(e) {
    if (e.target && e.target.tagName === 'FORM')
      lastSubmit = { ev: e, form: e.target, submitter: e.submitter || null };
  }
  function docOnFormData(e) {
    var form = e.target;
    if (!form || form.tagName !== 'FORM' || !e.formData) return;
    var ls = lastSubmit,
      submitter = null;
    if (programmaticSubmit === form) submitter = null;
    else if (ls && ls.form === form && ls.ev.eventPhase === 0 && !ls.ev.defaultPrevented)
      submitter = ls.submitter;
    else return;
    lastSubmit = null;
    var rec = formRecord(form, submitter, e.formData);
    if (rec.method === 'DIALOG') return;
    if (rec.target && !/^_(self|top|parent)$/i.test(rec.target)) return; // another window
    rec.cause = 'form';
    announceDocument(rec);
  }
  function docSubmitWrapper(orig) {
    return function submit() {
      programmaticSubmit = this;
      try {
        return orig.apply(this, arguments);
      } finally {
        programmaticSubmit = null;
      }
    };
  }
  function docOnClick(e) {
    if (e.defaultPrevented || e.button) return;
    var a = e.target && e.target.closest ? e.target.closest('a[href]') : null;
    if (!a || a.hasAttribute('download')) return;
    var tg = a.getAttribute('target');
    if (tg && !/^_(self|top|parent)$/i.test(tg)) return;
    if (e.ctrlKey || e.metaKey || e.shiftKey) return;
    docIntent = {
      url: a.href,
      method: 'GET',
      cause: 'link',
      at: N.dateNow(),
      text: clip(getName(a), 80)
    };
  }
  function docOnNavigate(e) {
    if (e.hashChange || e.downloadRequest != null) return;
    var dest = e.destination && e.destination.url;
    var prev =
      docIntent && N.dateNow() - docIntent.at < 1000 && sameDocUrl(docIntent.url, dest)
        ? docIntent
        : null;
    docIntent = {
      url: dest,
      method: e.formData ? 'POST' : 'GET',
      cause: prev ? prev.cause : e.navigationType === 'reload' ? 'reload' : 'navigate',
      navigationType: e.navigationType,
      at: N.dateNow(),
      text: prev ? prev.text : undefined
    };
  }
  // This document is going away: announce where to, as far as the latest intent tells.
  function docLeaving() {
    if (docAnnounced && N.dateNow() - docAnnounced.at < 2000) return; // the form post, just now
    var it = docIntent && N.dateNow() - docIntent.at < 5000 ? docIntent : null;
    var rec = it
      ? {
          url: redactUrl(it.url),
          method: it.method,
          cause: it.cause,
          navigationType: it.navigationType
        }
      : { url: '', method: null, cause: 'unknown' };
    if (it && it.text) rec.link = { text: it.text };
    docIntent = null;
    announceDocument(rec);
  }
  // This document's own request, from Navigation Timing, linked to the announced one.
  // This document's own request, from Navigation Timing, linked to the announced one.
  function docArrival() {
    var nav = null;
    try {
      nav = performance.getEntriesByType('navigation')[0] || null;
    } catch (e) {
      nav = null;
    }
    var type = nav && nav.type ? String(nav.type) : 'navigate';
    var here = redactUrl(location.href);
    var redirects = nav && nav.redirectCount > 0 ? nav.redirectCount : 0;
    var status = nav && nav.responseStatus > 0 ? nav.responseStatus : null;
    var prev = docAnnouncedBefore();
    var linked = docLinked(prev, here, type, redirects);
    var id = linked && prev.requestId ? prev.requestId : 'd' + S.documentId;
    var d = {
      id: id,
      requestId: id,
      method: linked && prev.methodKnown ? prev.method : null,
      methodKnown: !!(linked && prev.methodKnown),
      url: linked && prev.urlKnown && !sameDocUrl(prev.url, here) ? prev.url : here,
      finalUrl: here,
      status: status,
      statusKnown: status != null,
      ok: status == null ? null : status >= 200 && status < 400,
      initiator: 'document',
      navigationType: type,
      redirectCount: redirects,
      redirected: redirects > 0,
      linked: linked,
      documentId: S.documentId
    };
    if (linked) {
      d.cause = prev.cause;
      d.sincePendingMs = Math.max(0, N.dateNow() - prev.at);
      if (prev.from) d.from = prev.from;
      if (prev.documentId) d.fromDocumentId = prev.documentId;
      DOC_FIELDS.concat(['requestBodyType']).forEach(function (k) {
        if (prev[k] != null) d[k] = prev[k];
      });
    }
    if (nav) docTiming(d, nav, redirects);
    emit('net.request', d);
    var from =
      linked && prev.from ? prev.from : document.referrer ? redactUrl(document.referrer) : '';
    emit('route.change', {
      from: from,
      to: here,
      kind: 'document',
      reason: 'document',
      navigationType: type,
      requestId: id,
      pathname: location.pathname,
      search: redactUrl(location.search),
      hash: redactUrl(location.hash),
      title: document.title
    });
    lastHref = location.href;
  }
  // The request the previous document announced (taken out of sessionStorage), or null.
  function docAnnouncedBefore() {
    var prev = null;
    try {
      prev = N.parse(ssGet(DOC_KEY) || 'null');
    } catch (e) {
      prev = null;
    }
    if (prev) ssSet(DOC_KEY, '');
    return prev;
  }
  // Whether the announced request is the one that brought this document.
  function docLinked(prev, here, type, redirects) {
    return (
      !!prev &&
      isObj(prev) &&
      N.dateNow() - (prev.at || 0) < DOC_LINK_MS &&
      (sameDocUrl(prev.url, here) ||
        (prev.cause === 'form' && prev.method === 'GET' && samePath(prev.url, here)) ||
        redirects > 0 ||
        !prev.urlKnown ||
        (type === 'reload' && prev.navigationType === 'reload') ||
        (type === 'back_forward' && prev.navigationType === 'traverse'))
    );
  }
  // Navigation Timing's durations, sizes and content type on the document's net.request.
  function docTiming(d, nav, redirects) {
    var end = nav.responseEnd > 0 ? nav.responseEnd : nav.responseStart;
    d.durationMs = Math.round(Math.max(0, end - nav.startTime));
    d.ms = d.durationMs;
    d.ttfbMs = Math.round(Math.max(0, nav.responseStart - (nav.requestStart || nav.startTime)));
    if (redirects) d.redirectMs = Math.round(Math.max(0, nav.redirectEnd - nav.redirectStart));
    if (nav.transferSize != null) d.transferSize = nav.transferSize;
    if (nav.contentType) d.contentType = nav.contentType;
  }

  // == Section: dom == DOM mutations, shadow roots, animations
  // -- DOM mutations, coalesced per animation frame
  var ATTRS = [
    'class',
    'hidden',
    'disabled',
    'open',
    'aria-hidden',
    'aria-expanded',
    'aria-selected',
    'aria-checked',
    'aria-pressed',
    'aria-busy',
    'aria-invalid',
    'data-state',
    'style',
    'src',
    'href',
    'value',
    'checked',
    'role',
    'aria-label'
  ];
  var DOM_CAP = 40;
  // Text inside script, style, template, noscript or head is source, not page text (a CSS-in-JS
  // library writing into a <style> is not a text change a user can read).
  function inSource(el) {
    try {
      return !!el.closest('script,style,template,noscript,head');
    } catch (e) {
      return false;
    }
  }
  var DOM_MEANINGFUL =
    'button,a[href],input,select,textarea,[role],h1,h2,h3,h4,h5,h6,img,li,dialog,form,table';
  // One animation frame's worth of DOM events: counts against DOM_CAP, drops, what was seen.
  function domFrame() {
    return {
      added: 0,
      removed: 0,
      changed: 0,
      drop: { added: 0, removed: 0, changed: 0 },
      seenAttr: new Map(),
      seenText: new Set(),
      cache: makeVisCache()
    };
  }
  // Counts one more event of a kind (added, removed, changed) in the frame; false (and a drop
  // counted) past the cap.
  function domRoom(f, kind) {
    if (f[kind] >= DOM_CAP) {
      f.drop[kind]++;
      return false;
    }
    f[kind]++;
    return true;
  }
  function domRecord(f, r) {
    var tgt = r.target && r.target.nodeType === 1 ? r.target : r.target && r.target.parentElement;
    if (tgt && isIgnored(tgt)) return;
    if (r.type === 'attributes') domAttr(f, r);
    else if (r.type === 'characterData') domCharacterData(f, r);
    else if (r.type === 'childList') domChildList(f, r);
  }
  function domAttr(f, r) {
    var key = r.attributeName;
    var prev = f.seenAttr.get(r.target);
    if (prev && prev[key]) return; // coalesce: first old value wins, current value read now
    if (!prev) {
      prev = {};
      f.seenAttr.set(r.target, prev);
    }
    prev[key] = 1;
    var cur = r.target.getAttribute(key);
    if (cur === r.oldValue) return;
    if (!domRoom(f, 'changed')) return;
    var secret = keySensitive(key) || (key === 'value' && isSecretField(r.target));
    var ad = { attr: key, target: label(r.target) };
    if (cur != null) ad.value = secret ? REDACTED : clip(scrub(cur), 120);
    if (r.oldValue != null) ad.old = secret ? REDACTED : clip(scrub(r.oldValue), 120);
    emit('dom.attr', ad, r.target);
  }
  function domCharacterData(f, r) {
    var pe = r.target.parentElement;
    if (!pe || f.seenText.has(pe) || inSource(pe)) return;
    f.seenText.add(pe);
    if (!domRoom(f, 'changed')) return;
    var td = { text: clip(norm(textOf(pe, 0)), 80), target: label(pe) };
    if (r.oldValue != null) td.old = clip(norm(r.oldValue), 80);
    emit('dom.text', td, pe);
  }
  function domChildList(f, r) {
    var textTouched = false;
    for (var a = 0; a < r.addedNodes.length; a++) if (domAddedNode(f, r.addedNodes[a])) textTouched = true;
    for (var b = 0; b < r.removedNodes.length; b++) if (domRemovedNode(f, r, r.removedNodes[b])) textTouched = true;
    if (textTouched && r.target.nodeType === 1 && !f.seenText.has(r.target) && !inSource(r.target)) {
      f.seenText.add(r.target);
      if (!domRoom(f, 'changed')) return;
      emit('dom.text', { text: clip(norm(textOf(r.target, 0)), 80), target: label(r.target) }, r.target);
    }
  }
  // One added node: a dom.added (and visible.shown for a dialog or alert); true when it touched text.
  function domAddedNode(f, n) {
    if (n.nodeType === 3) return !!n.data.trim();
    if (n.nodeType !== 1 || !n.isConnected || SKIP_TAGS[n.tagName] || isIgnored(n)) return false;
    var role = getRole(n),
      nm = getName(n, role);
    var textTouched = false;
    if ((role === 'generic' || role === 'none' || role === 'presentation') && !nm) {
      // unnamed wrapper: summarise its meaningful descendants count
      var inner = n.querySelectorAll ? n.querySelectorAll(DOM_MEANINGFUL) : [];
      if (!inner.length) {
        if (norm(n.textContent)) textTouched = true;
        else return false;
      }
      if (!domRoom(f, 'added')) return textTouched;
      emit(
        'dom.added',
        {
          role: role,
          tag: n.tagName.toLowerCase(),
          target: describeNode(n),
          descendants: inner.length,
          text: clip(norm(n.textContent), 80) || undefined,
          region: regionOf(n)
        },
        n
      );
      return textTouched;
    }
    if (!domRoom(f, 'added')) return false;
    emit('dom.added', { role: role, name: nm, tag: n.tagName.toLowerCase(), target: label(n), region: regionOf(n) }, n);
    var shows = role === 'dialog' || role === 'alertdialog' || role === 'alert' || role === 'status';
    if ((shows || n.getAttribute('aria-modal') === 'true') && isVisible(n, f.cache)) {
      emit('visible.shown', { role: role, name: nm }, n);
    }
    return false;
  }
  // One removed node of record r: a dom.removed; true when it touched text.
  function domRemovedNode(f, r, m) {
    if (m.nodeType === 3) return !!m.data.trim();
    if (m.nodeType !== 1 || SKIP_TAGS[m.tagName] || isIgnored(m)) return false;
    var rr = getRole(m),
      rn = getName(m, rr);
    if ((rr === 'generic' || rr === 'none') && !rn) {
      var cnt = m.querySelectorAll ? m.querySelectorAll(DOM_MEANINGFUL).length : 0;
      if (!cnt || !domRoom(f, 'removed')) return false;
      emit('dom.removed', {
        role: rr,
        tag: m.tagName.toLowerCase(),
        target: describeNode(m),
        descendants: cnt,
        region: r.target && r.target.nodeType === 1 ? regionOf(r.target) : undefined
      });
      return false;
    }
    if (!domRoom(f, 'removed')) return false;
    var rd = { role: rr, name: rn, tag: m.tagName.toLowerCase(), target: rr + (rn ? ' "' + clip(rn, 60) + '"' : '') };
    var oldRef = REF_OF.get(m);
    if (oldRef) rd.formerRef = oldRef;
    emit('dom.removed', rd);
    return false;
  }
  // The truncated event of a frame that dropped events (or records past the pending cap); true if sent.
  function domTruncated(f, overflowRecords) {
    var drop = f.drop.added + f.drop.removed + f.drop.changed + overflowRecords;
    if (!drop) return false;
    emit('truncated', {
      what: 'dom',
      channel: 'dom',
      count: drop,
      dropped: drop,
      reason: 'per-frame cap of ' + DOM_CAP + ' added/removed/changed events',
      detail: {
        added: f.drop.added,
        removed: f.drop.removed,
        changed: f.drop.changed,
        overflowRecords: overflowRecords
      }
    });
    return true;
  }
  function regionOf(n) {
    try {
      var tid = n.parentElement && n.parentElement.closest('[data-testid]');
      if (tid) return tid.getAttribute('data-testid');
      return n.parentElement ? refFor(n.parentElement) : undefined;
    } catch (e) {
      return undefined;
    }
  }
  var DOM_OBSERVE = {
    subtree: true,
    childList: true,
    characterData: true,
    characterDataOldValue: true,
    attributes: true,
    attributeOldValue: true,
    attributeFilter: ATTRS
  };
  function installDom() {
    if (!N.MutationObserver) return;
    var pending = [];
    var scheduled = false;
    var pendingCap = 20000,
      overflowRecords = 0;
    var mo = new N.MutationObserver(function (rs) {
      if (document.readyState === 'loading') return; // the parser building the initial page is not a change
      if (pending.length + rs.length > pendingCap) {
        overflowRecords += rs.length;
        return;
      }
      for (var i = 0; i < rs.length; i++) pending.push(rs[i]);
      if (!scheduled) {
        scheduled = true;
        var fired = false;
        var run = function () {
          if (fired) return;
          fired = true;
          scheduled = false;
          processDom();
        };
        N.raf(run);
        N.setTimeout(run, 100); // rAF does not run in background tabs
      }
    });
    function processDom() {
      var rs = pending;
      pending = [];
      var f = domFrame();
      try {
        for (var i = 0; i < rs.length; i++) domRecord(f, rs[i]);
      } catch (e) {
        internal('dom_observer', e);
      }
      if (domTruncated(f, overflowRecords)) overflowRecords = 0;
    }
    mo.observe(document, DOM_OBSERVE);
    var watch = function (root) {
      mo.observe(root, DOM_OBSERVE);
    };
    ROOT_WATCHERS.push(watch);
    S.teardowns.push(function () {
      mo.disconnect();
      ROOT_WATCHERS = ROOT_WATCHERS.filter(function (w) {
        return w !== watch;
      });
    });
  }
  function installShadowCapture() {
    var proto = window.Element && window.Element.prototype;
    if (!proto || !proto.attachShadow) return;
    patch(proto, 'attachShadow', function (orig) {
      return function () {
        var root = orig.apply(this, arguments);
        try {
          SHADOWS.set(this, root);
          noteShadowRoot(root);
        } catch (e) {
          /* ignore */
        }
        return root;
      };
    });
    // roots that already exist and are open
    try {
      var all = document.querySelectorAll('*');
      for (var i = 0; i < all.length && i < 20000; i++)
        if (all[i].shadowRoot) noteShadowRoot(all[i].shadowRoot);
    } catch (e) {
      /* ignore */
    }
  }

  // -- animations
  function installAnimations() {
    var allow = rateCap('anim', 200);
    function h(kind) {
      return function (e) {
        var t = e.target;
        if (!t || t.nodeType !== 1 || isIgnored(t) || !allow()) return;
        var isTr = /^transition/.test(e.type);
        var d = {
          name: isTr ? e.propertyName : e.animationName,
          kind: isTr ? 'transition' : 'animation',
          target: label(t),
          elapsedTime: e.elapsedTime
        };
        if (e.type === 'animationcancel' || e.type === 'transitioncancel') d.cancelled = true;
        emit(kind, d, t);
      };
    }
    listen(document, 'animationstart', h('anim.start'), true);
    listen(document, 'animationend', h('anim.end'), true);
    listen(document, 'animationcancel', h('anim.end'), true);
    listen(document, 'transitionstart', h('anim.start'), true);
    listen(document, 'transitionend', h('anim.end'), true);
    listen(document, 'transitioncancel', h('anim.end'), true);
  }

  // == Section: storage == localStorage, sessionStorage, cookies
  // -- storage
  function storageAreaOf(st) {
    try {
      return st === window.sessionStorage ? 'session' : 'local';
    } catch (e) {
      return 'local';
    }
  }
  function storageValue(k, v) {
    return v == null ? undefined : keySensitive(k) ? REDACTED : clip(scrubText(String(v)), 500);
  }
  function storageChanged(area, k, from, to) {
    var d = { area: area, key: clip(k, 200), from: storageValue(k, from), to: storageValue(k, to) };
    d.old = d.from;
    d['new'] = d.to;
    emit('storage.change', d);
  }
  // what key k held before a write we report (null when muted: our own keys, our own writes)
  function storageHeld(store, k, mute) {
    if (mute) return null;
    try {
      return store.getItem(k);
    } catch (e) {
      return null;
    }
  }
  function installStorage() {
    var SP = window.Storage && window.Storage.prototype;
    if (!SP) return;
    patch(SP, 'setItem', function (orig) {
      return function (k, v) {
        var mute = STORAGE_MUTE || /^__reticle/.test(String(k));
        var before = storageHeld(this, k, mute);
        var r = orig.apply(this, arguments);
        if (!mute) {
          try {
            var now2 = this.getItem(k);
            if (now2 !== before) storageChanged(storageAreaOf(this), String(k), before, now2);
          } catch (e) {
            /* ignore */
          }
        }
        return r;
      };
    });
    patch(SP, 'removeItem', function (orig) {
      return function (k) {
        var mute = STORAGE_MUTE || /^__reticle/.test(String(k));
        var before = storageHeld(this, k, mute);
        var r = orig.apply(this, arguments);
        if (!mute && before !== null) storageChanged(storageAreaOf(this), String(k), before, null);
        return r;
      };
    });
    patch(SP, 'clear', storageClearWrapper);
    listen(window, 'storage', function (e) {
      if (!e.key || /^__reticle/.test(e.key)) return;
      var d = {
        area: e.storageArea === window.sessionStorage ? 'session' : 'local',
        key: e.key,
        from: storageValue(e.key, e.oldValue),
        to: storageValue(e.key, e.newValue),
        otherTab: true
      };
      d.old = d.from;
      d['new'] = d.to;
      emit('storage.change', d);
    });
    installCookieWatch();
  }
  // Storage.prototype.clear, wrapped: one storage.change per key it removed (50 at most).
  function storageClearWrapper(orig) {
    return function () {
      var snap = [];
      try {
        for (var i = 0; i < this.length; i++) {
          var k = this.key(i);
          if (!/^__reticle/.test(k)) snap.push([k, this.getItem(k)]);
        }
      } catch (e) {
        /* ignore */
      }
      var r = orig.apply(this, arguments);
      var area = storageAreaOf(this);
      snap.slice(0, 50).forEach(function (kv) {
        storageChanged(area, kv[0], kv[1], null);
      });
      if (snap.length > 50)
        emit('truncated', {
          what: 'storage.change',
          count: snap.length - 50,
          reason: 'clear() removed more than 50 keys',
          channel: 'storage',
          dropped: snap.length - 50
        });
      return r;
    };
  }
  // cookies written through document.cookie
  function installCookieWatch() {
    try {
      var desc = Object.getOwnPropertyDescriptor(Document.prototype, 'cookie');
      if (!desc || !desc.set || !desc.get || !desc.configurable) return;
      var cookieMap = function () {
        var o = {};
        String(desc.get.call(document) || '')
          .split(/;\s*/)
          .forEach(function (p) {
            if (!p) return;
            var i = p.indexOf('=');
            o[i < 0 ? p : p.slice(0, i)] = i < 0 ? '' : p.slice(i + 1);
          });
        return o;
      };
      Object.defineProperty(document, 'cookie', {
        configurable: true,
        enumerable: true,
        get: function () {
          return desc.get.call(this);
        },
        set: function (v) {
          var before = null;
          try {
            before = cookieMap();
          } catch (e) {
            /* ignore */
          }
          desc.set.call(this, v);
          try {
            var k = String(v).split(';')[0];
            var i = k.indexOf('=');
            var key = (i < 0 ? k : k.slice(0, i)).trim();
            var after = cookieMap();
            if (before && before[key] !== after[key]) storageChanged('cookie', key, before[key], after[key]);
          } catch (e) {
            /* ignore */
          }
        }
      });
      S.teardowns.push(function () {
        try {
          delete document.cookie;
        } catch (e) {
          /* ignore */
        }
      });
    } catch (e) {
      /* cookie patch is optional */
    }
  }
  function cookiesObj() {
    var o = {};
    try {
      String(document.cookie || '')
        .split(/;\s*/)
        .forEach(function (p) {
          if (!p) return;
          var i = p.indexOf('=');
          var k = i < 0 ? p : p.slice(0, i);
          var v = i < 0 ? '' : p.slice(i + 1);
          if (k === MARK.cookie) return; // our own (Server truth), not the app's
          try {
            v = decodeURIComponent(v);
          } catch (e) {
            /* keep raw */
          }
          o[k] = keySensitive(k) ? REDACTED : clip(scrubText(v), 2000);
        });
    } catch (e) {
      /* ignore */
    }
    return o;
  }
  function storageObj(st) {
    var o = {};
    try {
      for (var i = 0; i < st.length && i < 500; i++) {
        var k = st.key(i);
        if (/^__reticle/.test(k)) continue;
        var v = st.getItem(k);
        if (keySensitive(k)) {
          o[k] = REDACTED;
          continue;
        }
        var parsed;
        try {
          parsed = N.parse(v);
        } catch (e) {
          parsed = undefined;
        }
        o[k] =
          parsed !== undefined && isObj(parsed)
            ? sanitize(parsed, { depth: 6, str: 2000 })
            : clip(scrubText(v), 4000);
      }
    } catch (e) {
      /* storage blocked */
    }
    return o;
  }
  function storageRead(args) {
    var area = args.area ? String(args.area).toLowerCase() : null;
    if (area === 'cookie') area = 'cookies';
    if (area === 'localstorage') area = 'local';
    if (area === 'sessionstorage') area = 'session';
    if (area && area !== 'local' && area !== 'session' && area !== 'cookies')
      throw new Error(
        "storage area must be local, session or cookies (got '" + clip(args.area, 40) + "')"
      );
    var get = {
      local: function () {
        try {
          return storageObj(window.localStorage);
        } catch (e) {
          return {};
        }
      },
      session: function () {
        try {
          return storageObj(window.sessionStorage);
        } catch (e) {
          return {};
        }
      },
      cookies: cookiesObj
    };
    if (args.key != null) {
      var areas = area ? [area] : ['local', 'session', 'cookies'];
      for (var i = 0; i < areas.length; i++) {
        var m = get[areas[i]]();
        if (hasOwn(m, args.key))
          return { area: areas[i], key: args.key, found: true, value: m[args.key] };
      }
      return {
        area: area,
        key: args.key,
        found: false,
        value: null,
        availableKeys: areas.reduce(function (acc, a) {
          return acc.concat(
            Object.keys(get[a]())
              .slice(0, 50)
              .map(function (k) {
                return a + ':' + k;
              })
          );
        }, [])
      };
    }
    if (area) {
      var r = {};
      r[area] = get[area]();
      r.area = area;
      return r;
    }
    return { local: get.local(), session: get.session(), cookies: get.cookies() };
  }

  // == Section: health == focus, page health, dialogs, cross-origin frames
  // -- focus
  function installFocus() {
    listen(
      document,
      'focusin',
      function (e) {
        var t = e.target;
        if (!t || t.nodeType !== 1 || isIgnored(t)) return;
        var d = { to: label(t), toRef: refFor(t), toBody: false };
        if (e.relatedTarget && e.relatedTarget.nodeType === 1) {
          d.from = label(e.relatedTarget);
          d.fromRef = refFor(e.relatedTarget);
        }
        emit('focus.change', d, t);
      },
      true
    );
    listen(
      document,
      'focusout',
      function (e) {
        if (e.relatedTarget) return;
        var t = e.target;
        if (!t || t.nodeType !== 1 || isIgnored(t)) return;
        emit('focus.change', { from: label(t), fromRef: refFor(t), toBody: true });
      },
      true
    );
  }

  // -- page health
  var longTasks = 0,
    longTaskMs = 0;
  function emitHealth(reason) {
    var d = {
      hidden: document.visibilityState === 'hidden',
      visibilityState: document.visibilityState,
      focused: document.hasFocus ? document.hasFocus() : null,
      url: redactUrl(location.href),
      title: document.title,
      longTasks: longTasks,
      longTaskMs: Math.round(longTaskMs),
      reason: reason,
      runtime: 'web',
      engine: /Firefox\//.test(navigator.userAgent)
        ? 'gecko'
        : /Chrome\/|Chromium\//.test(navigator.userAgent)
          ? 'blink'
          : /AppleWebKit/.test(navigator.userAgent)
            ? 'webkit'
            : 'other',
      queued: S.outbox.length
    };
    try {
      var m = performance.memory;
      if (m)
        d.memory = {
          usedJSHeapSize: m.usedJSHeapSize,
          totalJSHeapSize: m.totalJSHeapSize,
          jsHeapSizeLimit: m.jsHeapSizeLimit
        };
    } catch (e) {
      /* ignore */
    }
    longTasks = 0;
    longTaskMs = 0;
    emit('page.health', d);
  }
  // alert/confirm/prompt and a beforeunload prompt block the page until the person answers them: each is
  // reported (sent now, before it blocks) so the daemon fails its commands fast and the answer names it.
  function dialogSeen(kind, message, phase) {
    var text = clip(String(message == null ? '' : message), 300);
    emit('page.dialog', { dialogType: kind, message: text, phase: phase });
    if (phase === 'open') flush(); // the page stops here: the report cannot wait for the microtask
  }
  function installDialogs() {
    ['alert', 'confirm', 'prompt'].forEach(wrapDialogFunction);
    installBeforeunloadListeners();
    installOnBeforeunload();
  }
  // window.alert, confirm or prompt, wrapped: reported open before it blocks, closed after.
  function wrapDialogFunction(kind) {
    var orig = window[kind];
    if (typeof orig !== 'function') return;
    var wrapped = function (message) {
      try {
        dialogSeen(kind, message, 'open');
      } catch (e) {
        /* never stand in the page's way */
      }
      try {
        return orig.apply(window, arguments);
      } finally {
        try {
          dialogSeen(kind, '', 'closed');
        } catch (e) {
          /* ignore */
        }
      }
    };
    window[kind] = wrapped;
    S.teardowns.push(function () {
      if (window[kind] === wrapped) window[kind] = orig;
    });
  }
  // a beforeunload handler that prevents the unload makes the browser ask the person
  function unloadPrevented(e) {
    var v = e.returnValue;
    return e.defaultPrevented || (typeof v === 'string' && v !== '') || v === false;
  }
  function unloadReported(e) {
    if (e && e.type === 'beforeunload' && unloadPrevented(e)) dialogSeen('beforeunload', '', 'open');
  }
  // window.addEventListener('beforeunload', fn): fn runs inside a wrapper that tells a prompt.
  function installBeforeunloadListeners() {
    var wrappers = typeof WeakMap === 'function' ? new WeakMap() : null;
    var add = window.addEventListener,
      remove = window.removeEventListener;
    if (!wrappers || typeof add !== 'function') return;
    var addWrapped = function (type, fn, opts) {
      if (type === 'beforeunload' && typeof fn === 'function') {
        var w = wrappers.get(fn);
        if (!w) {
          w = function (e) {
            try {
              return fn.apply(this, arguments);
            } finally {
              unloadReported(e);
            }
          };
          wrappers.set(fn, w);
        }
        return add.call(this, type, w, opts);
      }
      return add.apply(this, arguments);
    };
    var removeWrapped = function (type, fn, opts) {
      if (type === 'beforeunload' && typeof fn === 'function' && wrappers.get(fn))
        return remove.call(this, type, wrappers.get(fn), opts);
      return remove.apply(this, arguments);
    };
    window.addEventListener = addWrapped;
    window.removeEventListener = removeWrapped;
    S.teardowns.push(function () {
      if (window.addEventListener === addWrapped) window.addEventListener = add;
      if (window.removeEventListener === removeWrapped) window.removeEventListener = remove;
    });
  }
  // window.onbeforeunload = fn: a string it returns (or a prevented event) is the prompt
  function installOnBeforeunload() {
    var own = Object.getOwnPropertyDescriptor(window, 'onbeforeunload');
    var d = own || Object.getOwnPropertyDescriptor(Window.prototype, 'onbeforeunload');
    if (!d || !d.set || !d.get || d.configurable === false) return;
    var user = window.onbeforeunload;
    var wrapFor = function (fn) {
      return function (e) {
        var r = fn.apply(this, arguments);
        if ((typeof r === 'string' && r !== '') || unloadPrevented(e)) dialogSeen('beforeunload', '', 'open');
        return r;
      };
    };
    Object.defineProperty(window, 'onbeforeunload', {
      configurable: true,
      enumerable: d.enumerable,
      get: function () {
        return user;
      },
      set: function (fn) {
        user = typeof fn === 'function' ? fn : null;
        d.set.call(window, user ? wrapFor(user) : null);
      }
    });
    if (typeof user === 'function') d.set.call(window, wrapFor(user));
    S.teardowns.push(function () {
      if (own) Object.defineProperty(window, 'onbeforeunload', own);
      else delete window.onbeforeunload;
      try {
        window.onbeforeunload = user;
      } catch (e) {
        /* ignore */
      }
    });
  }
  function installHealth() {
    var iv = N.setInterval(
      guard('health_observer', function () {
        emitHealth('heartbeat');
      }),
      5000
    );
    S.teardowns.push(function () {
      N.clearInterval(iv);
    });
    listen(document, 'visibilitychange', function () {
      emitHealth('visibilitychange');
      if (document.visibilityState === 'visible') retryNow();
    });
    listen(window, 'focus', function () {
      emitHealth('focus');
    });
    listen(window, 'blur', function () {
      emitHealth('blur');
    });
    listen(window, 'online', function () {
      retryNow();
    });
    try {
      if (
        window.PerformanceObserver &&
        PerformanceObserver.supportedEntryTypes &&
        PerformanceObserver.supportedEntryTypes.indexOf('longtask') >= 0
      ) {
        var po = new PerformanceObserver(function (list) {
          list.getEntries().forEach(function (en) {
            longTasks++;
            longTaskMs += en.duration;
          });
        });
        po.observe({ type: 'longtask', buffered: true });
        S.teardowns.push(function () {
          po.disconnect();
        });
      }
    } catch (e) {
      /* ignore */
    }
    emitHealth('initial');
  }

  // -- cross-origin frames are a blind spot
  function frameShown(f) {
    try {
      var r = f.getBoundingClientRect();
      if (r.width < 2 || r.height < 2) return false;
      var cs = styleOf(f);
      return !cs || (cs.visibility !== 'hidden' && cs.opacity !== '0');
    } catch (e) {
      return true;
    }
  }
  function checkFrames() {
    try {
      var frames = document.querySelectorAll('iframe,frame'),
        n = 0,
        srcs = [];
      for (var i = 0; i < frames.length; i++) {
        // a frame nobody can see (a payment library's hidden channel, a tracker) hides nothing
        // from the user; it counts once it is shown (the alert observer rechecks on style changes)
        if (!frameShown(frames[i])) continue;
        var ok = false;
        try {
          ok = !!frames[i].contentDocument;
        } catch (e) {
          ok = false;
        }
        // a frame just mounted shows a readable about:blank until its own page arrives
        if (ok && frames[i].src) {
          try {
            var to = new URL(frames[i].src, location.href);
            if (/^https?:$/.test(to.protocol) && to.origin !== location.origin) ok = false;
          } catch (e) {
            /* an odd src: keep what contentDocument said */
          }
        }
        if (!ok && frames[i].src) {
          n++;
          if (srcs.length < 5) srcs.push(redactUrl(frames[i].src));
        }
      }
      if (n !== checkFrames.last) {
        checkFrames.last = n;
        if (n || checkFrames.reported) {
          checkFrames.reported = true;
          emit('blind-spot', {
            reason: 'cross-origin-iframe',
            kind: 'cross-origin-iframe',
            count: n,
            detail: srcs.join(', ')
          });
        }
      }
    } catch (e) {
      /* ignore */
    }
  }

  // == Section: stores == app stores, signals, describe, capabilities
  // ---- stores and signals --------------------------------------------------------------------
  var STORES = {}; // name -> {read(), unsub?, last, kind}
  function shallowDiff(name, prev, next) {
    var changes = [];
    if (!isObj(prev) || !isObj(next) || Array.isArray(prev) !== Array.isArray(next)) {
      if (!Object.is(prev, next)) changes.push({ path: '', from: prev, to: next });
    } else {
      var keys = {},
        k;
      for (k in prev) if (hasOwn(prev, k)) keys[k] = 1;
      for (k in next) if (hasOwn(next, k)) keys[k] = 1;
      for (k in keys) {
        if (typeof prev[k] === 'function' && typeof next[k] === 'function') continue;
        if (!Object.is(prev[k], next[k])) changes.push({ path: k, from: prev[k], to: next[k] });
      }
    }
    var cap = 20;
    for (var i = 0; i < changes.length && i < cap; i++) {
      var c = changes[i];
      var from = sanitize(c.from, { depth: 3, items: 20, str: 500 });
      var to = sanitize(c.to, { depth: 3, items: 20, str: 500 });
      if (keySensitive(c.path)) {
        from = from == null ? from : REDACTED;
        to = to == null ? to : REDACTED;
      }
      emit('state.change', {
        store: name,
        name: name,
        path: c.path,
        from: from,
        to: to,
        value: to,
        old: from
      });
    }
    if (changes.length > cap)
      emit('truncated', {
        what: 'state.change',
        count: changes.length - cap,
        reason: 'more than ' + cap + ' top-level keys changed at once in store ' + name,
        channel: 'state',
        dropped: changes.length - cap
      });
  }
  function readStore(name) {
    var st = STORES[name];
    if (!st) return undefined;
    return st.read();
  }
  function registerStore(name, store, subscribe) {
    try {
      name = String(name);
      if (!name) {
        warn('registerStore needs a name');
        return false;
      }
      if (STORES[name] && STORES[name].unsub) {
        try {
          STORES[name].unsub();
        } catch (e) {
          /* ignore */
        }
      }
      var entry = { kind: 'unknown', last: undefined };
      if (
        store &&
        (typeof store === 'object' || typeof store === 'function') &&
        typeof store.getState === 'function'
      ) {
        storeWithGetState(name, entry, store, subscribe);
      } else if (typeof store === 'function') {
        storeFromGetter(name, entry, store, subscribe);
      } else if (isObj(store)) {
        entry.kind = 'static';
        entry.read = function () {
          return store;
        };
      } else {
        warn(
          "registerStore('" +
            name +
            "'): unsupported store shape; pass a zustand/redux store or {getState, subscribe}"
        );
        return false;
      }
      STORES[name] = entry;
      return true;
    } catch (e) {
      internal('store_adapter', e);
      return false;
    }
  }
  // The listener a store calls on change: it reads the new value and reports what changed.
  function storeListener(name, entry) {
    return function () {
      try {
        var nx = entry.read();
        var pv = entry.last;
        entry.last = nx;
        shallowDiff(name, pv, nx);
      } catch (e) {
        internal('store_adapter', e);
      }
    };
  }
  // A zustand/redux-like store: {getState, subscribe?}.
  function storeWithGetState(name, entry, store, subscribe) {
    entry.kind = typeof store.subscribe === 'function' ? 'subscribable' : 'getter';
    entry.read = function () {
      return store.getState();
    };
    var sub = typeof store.subscribe === 'function' ? store.subscribe : subscribe;
    if (!sub) return;
    entry.last = store.getState();
    var u = sub.call(store, storeListener(name, entry));
    entry.unsub =
      typeof u === 'function'
        ? u
        : u && typeof u.unsubscribe === 'function'
          ? function () {
              u.unsubscribe();
            }
          : null;
  }
  // A bare getter, watched only when a subscribe function comes with it.
  function storeFromGetter(name, entry, store, subscribe) {
    entry.kind = 'getter';
    entry.read = function () {
      return store();
    };
    if (typeof subscribe === 'function') {
      entry.last = store();
      var u2 = subscribe(storeListener(name, entry));
      entry.unsub = typeof u2 === 'function' ? u2 : null;
    } else
      warn(
        "store '" +
          name +
          "' is a bare getter: reads work, but changes are not watched " +
          '(pass a subscribe function or a {getState, subscribe} store)'
      );
  }
  function pushStore(name, value) {
    try {
      name = String(name);
      var st = STORES[name];
      if (!st || st.kind !== 'pushed') {
        if (st && st.unsub) {
          try {
            st.unsub();
          } catch (e) {
            /* ignore */
          }
        }
        st = STORES[name] = { kind: 'pushed', last: undefined, read: null };
        st.read = function () {
          return st.last;
        };
        var first = true;
      }
      var prev = st.last;
      st.last = value;
      if (!first) shallowDiff(name, prev, value);
      else
        emit('state.change', {
          store: name,
          name: name,
          path: '',
          initial: true,
          to: sanitize(value, { depth: 2, items: 20, str: 500 }),
          value: sanitize(value, { depth: 2, items: 20, str: 500 })
        });
    } catch (e) {
      internal('store_adapter', e);
    }
  }
  function canonicalIndex(seg) {
    return /^(0|[1-9]\d*)$/.test(seg);
  }
  function walkPath(root, path) {
    var segs = path === '' || path == null ? [] : String(path).split('.');
    var cur = root;
    for (var i = 0; i < segs.length; i++) {
      var s = segs[i];
      if ((Array.isArray(cur) || typeof cur === 'string') && s === 'length') {
        cur = cur.length;
        continue;
      }
      if (Array.isArray(cur)) {
        if (canonicalIndex(s) && +s < cur.length) {
          cur = cur[+s];
          continue;
        }
        return {
          found: false,
          at: segs.slice(0, i).join('.'),
          keys: cur.length ? ['0..' + (cur.length - 1), 'length'] : ['length']
        };
      }
      if (cur instanceof Map) {
        if (cur.has(s)) {
          cur = cur.get(s);
          continue;
        }
        return {
          found: false,
          at: segs.slice(0, i).join('.'),
          keys: Array.from(cur.keys()).map(String)
        };
      }
      if (isObj(cur) && hasOwn(cur, s)) {
        cur = cur[s];
        continue;
      }
      return {
        found: false,
        at: segs.slice(0, i).join('.'),
        keys: isObj(cur) ? Object.keys(cur) : [],
        typeAt: cur === null ? 'null' : typeof cur
      };
    }
    return { found: true, value: cur };
  }
  // What the registered stores hold: all of them collapsed, or one value by store and path.
  function stateRead(args) {
    var names = Object.keys(STORES);
    if (args.store == null && args.path == null) return stateAll(args, names);
    var storeName = args.store;
    if (storeName == null) {
      // path without store: pick the single store exposing it
      var having = names.filter(function (n) {
        try {
          return walkPath(readStore(n), args.path).found;
        } catch (e) {
          return false;
        }
      });
      if (having.length !== 1) {
        return {
          store: null,
          path: args.path,
          found: false,
          value: null,
          storeNames: names,
          candidates: having,
          error: having.length
            ? 'path exists in several stores; name one with store'
            : 'no registered store has this path'
        };
      }
      storeName = having[0];
    }
    if (!STORES[storeName])
      return {
        store: storeName,
        path: args.path || '',
        found: false,
        value: null,
        storeMissing: true,
        storeNames: names,
        availableKeys: names
      };
    return statePath(args, storeName, names);
  }
  // Every store, collapsed to args.depth (1 unless told).
  function stateAll(args, names) {
    var depth = args.depth == null ? 1 : Math.max(0, Math.min(8, Number(args.depth) || 0));
    var out = {},
      trunc = {};
    names.forEach(function (n) {
      try {
        var rep = {};
        out[n] = sanitize(readStore(n), { depth: depth, items: 200, report: rep });
        if (rep.cut) trunc[n] = { truncatedValues: rep.cut };
      } catch (e) {
        out[n] = '[read failed: ' + clip(errMsg(e), 200) + ']';
      }
    });
    var res = { stores: out, storeNames: names };
    if (Object.keys(trunc).length) {
      res.truncation = trunc;
      res.truncation.note =
        'stores collapsed to depth ' + depth + '; read one with store+path for the full value';
    }
    if (!names.length)
      res.note =
        'no stores registered; call reticle.registerStore(name, store) or reticle.pushStore(name, value) in the app';
    return res;
  }
  // One store's value at args.path, or where the path stopped and the keys found there.
  function statePath(args, storeName, names) {
    var raw;
    try {
      raw = readStore(storeName);
    } catch (e) {
      throw new Error("reading store '" + storeName + "' failed: " + errMsg(e));
    }
    var w = walkPath(raw, args.path);
    var r2 = { store: storeName, path: args.path || '', found: w.found, storeNames: names };
    if (w.found) {
      var rep2 = {};
      var d2 = args.depth == null ? 8 : Math.max(0, Math.min(12, Number(args.depth) || 0));
      r2.value = sanitize(w.value, { depth: d2, items: 200, report: rep2 });
      var segs = String(args.path || '').split('.');
      if (keySensitive(segs[segs.length - 1]) && w.value != null && w.value !== '')
        r2.value = REDACTED;
      if (rep2.cut)
        r2.truncation = {
          truncatedValues: rep2.cut,
          note: 'value capped at depth ' + d2 + ' / 200 items'
        };
    } else {
      r2.value = null;
      r2.stoppedAt = w.at;
      r2.availableKeys = w.keys.slice(0, 50);
      if (w.keys.length > 50) r2.totalKeys = w.keys.length;
      if (w.typeAt) r2.typeAt = w.typeAt;
    }
    return r2;
  }
  function signal(name, data) {
    try {
      name = String(name);
      S.signalsSeen[name] = 1;
      emit('signal', {
        name: name,
        data: data === undefined ? {} : sanitize(data, { depth: 6, items: 100, str: 4000 })
      });
    } catch (e) {
      internal('signal', e);
    }
  }
  function uniqPush(arr, vals) {
    (Array.isArray(vals) ? vals : []).forEach(function (v) {
      if (typeof v === 'string' && arr.indexOf(v) < 0) arr.push(v);
    });
  }
  function describeContract(c) {
    try {
      c = c || {};
      uniqPush(S.caps.testids, c.testids);
      uniqPush(S.caps.signals, c.signals);
      uniqPush(S.caps.stores, c.stores);
      declareToasts(c.toasts);
      (Array.isArray(c.flows) ? c.flows : []).forEach(function (f) {
        if (!f || typeof f.name !== 'string') return;
        var i;
        for (i = 0; i < S.caps.flows.length; i++) if (S.caps.flows[i].name === f.name) break;
        S.caps.flows[i] = {
          name: f.name,
          steps: Array.isArray(f.steps) ? f.steps.slice(0, 100) : []
        };
      });
      S.hasCaps = true;
      sendHello();
    } catch (e) {
      internal('describe', e);
    }
  }
  function capabilities() {
    var found = [];
    try {
      var all = document.querySelectorAll('[data-testid]');
      for (var i = 0; i < all.length && found.length < 500; i++) {
        var t = all[i].getAttribute('data-testid');
        if (t && found.indexOf(t) < 0 && !isIgnored(all[i])) found.push(t);
      }
    } catch (e) {
      /* ignore */
    }
    var testids = S.caps.testids.slice();
    uniqPush(testids, found);
    var signals = S.caps.signals.slice();
    uniqPush(signals, Object.keys(S.signalsSeen));
    var stores = S.caps.stores.slice();
    uniqPush(stores, Object.keys(STORES));
    return {
      testids: testids,
      declaredTestids: S.caps.testids.slice(),
      discoveredTestids: found,
      signals: signals,
      stores: stores,
      flows: S.caps.flows.slice(),
      toasts: { error: TOASTS.error.slice(), info: TOASTS.info.slice() },
      source: 'live'
    };
  }

  // == Section: probes == the probes the daemon's predicates read
  // ---- probes for the daemon's predicate engine ------------------------------------------------
  function evalProbe(args) {
    var kind = args.kind;
    var cache = makeVisCache();
    if (kind === 'element') return probeElement(args, cache);
    if (kind === 'text') return probeText(args, cache);
    if (kind === 'route')
      return {
        path: location.pathname,
        pathname: location.pathname,
        href: redactUrl(location.href),
        hash: redactUrl(location.hash),
        search: redactUrl(location.search),
        title: document.title
      };
    if (kind === 'state') return stateRead(args);
    if (kind === 'storage') return storageRead(args);
    throw new Error(
      "eval_probe kind must be element, text, route, state or storage (got '" +
        clip(kind, 40) +
        "')"
    );
  }
  function probeElement(args, cache) {
    var q = {};
    for (var k in args) if (hasOwn(args, k) && k !== 'kind') q[k] = args[k];
    var r = runQuery(q);
    if (r.scopeMissing)
      return { count: 0, visible: false, visibleCount: 0, elements: [], scopeMissing: true };
    var els = filterState(r.els, args.state, cache);
    var vis = els.filter(function (e) {
      return isVisible(e, cache);
    });
    var lim = Math.min(200, args.limit == null ? 10 : Number(args.limit) || 10);
    var res = {
      count: els.length,
      visible: vis.length > 0,
      visibleCount: vis.length,
      elements: els.slice(0, lim).map(function (e) {
        return describe(e, cache);
      })
    };
    if (els.length > lim) res.described = lim;
    if (!els.length) {
      res.hint = zeroHint();
      var near = nearMisses(r.q, resolveScope(args.scope));
      if (near.length) res.hint.nearMisses = near;
    }
    return res;
  }
  // contains (case-insensitive substring of an element's own text), equals (an element's whole
  // text, whitespace-normalised, case-sensitive) or matches (a RegExp over an element's whole
  // text). Only readable text counts: never script, style, template or noscript source.
  function probeText(args, cache) {
    var spec = probeTextSpec(args);
    var matches = probeTextMatches(spec, args);
    if (!matches) return { found: false, count: 0, places: 0, scopeMissing: true };
    var visM = matches.filter(function (e) {
      return isVisible(e, cache);
    });
    var pool = args.visible ? visM : matches;
    var out = {
      found: pool.length > 0,
      mode: spec.mode,
      count: pool.length,
      places: pool.length,
      visibleCount: visM.length,
      elements: pool.slice(0, 5).map(function (e) {
        return describe(e, cache);
      })
    };
    if (pool.length) out.sample = clip(norm(textOf(pool[0], 0)), 200);
    else if (spec.mode === 'contains') probePageText(out, spec, args);
    if (spec.mode === 'contains' && norm(spec.value).length <= 3) out.short = true;
    return out;
  }
  function probeTextSpec(args) {
    var given = TEXT_MODES.filter(function (m) {
      return args[m] != null && args[m] !== '';
    });
    if (given.length > 1) throw new Error('text probe takes one of contains, equals or matches');
    if (given.length) {
      var so = {};
      so[given[0]] = args[given[0]];
      if (args.flags != null) so.flags = args.flags;
      return textSpec(so, 'contains');
    }
    var needle = args.text != null ? args.text : args.value;
    if (needle == null || needle === '') throw new Error('text probe needs contains, equals or matches');
    return textSpec(needle, 'contains');
  }
  // The elements whose text matches the spec, or null when the scope is missing.
  function probeTextMatches(spec, args) {
    if (spec.mode === 'contains') {
      var rr = runQuery({ by: 'text', value: spec.value, scope: args.scope });
      return rr.scopeMissing ? null : rr.els;
    }
    var troot = resolveScope(args.scope);
    return troot ? textPlaces(troot, spec.test) : null;
  }
  // text split across elements: fall back to the readable page text
  function probePageText(out, spec, args) {
    var root = resolveScope(args.scope);
    var inner = root ? norm(args.visible ? root.innerText : textOf(root, 0)) : '';
    var idx = inner.toLowerCase().indexOf(norm(spec.value).toLowerCase());
    if (idx >= 0) {
      out.found = true;
      out.via = 'page-text';
      out.places = 1;
      out.sample = clip(inner.slice(Math.max(0, idx - 60), idx + spec.value.length + 60), 200);
    }
  }

  // == Section: commands == the bridge commands by name
  // ---- command table -------------------------------------------------------------------------
  COMMANDS.snapshot = snapshot;
  COMMANDS.query = queryCmd;
  COMMANDS.inspect = inspectCmd;
  COMMANDS.act = act;
  COMMANDS.act_sequence = actSequence;
  COMMANDS.state_read = stateRead;
  COMMANDS.storage_read = storageRead;
  COMMANDS.capabilities = capabilities;
  COMMANDS.eval_probe = evalProbe;
  COMMANDS.alerts_read = alertsRead;
  COMMANDS.fault_set = setFaults;
  COMMANDS.ping = function () {
    return { pong: true };
  };
  COMMANDS.navigate = function (a) {
    var u;
    try {
      u = new URL(String(a.url), location.href);
    } catch (e) {
      return { ok: false, reason: 'not a valid URL: ' + clip(a.url, 200) };
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      return { ok: false, reason: 'only http(s) URLs can be opened (got ' + u.protocol + ')' };
    var target = u.href;
    if (!(u.href.split('#')[0] === location.href.split('#')[0] && u.hash)) {
      // announced now, beside this command's answer: a frame sent while the page unloads can be lost
      announceDocument({ url: redactUrl(target), method: 'GET', cause: 'navigate', navigationType: 'navigate' });
    }
    // answer first: the result frame must leave before the page unloads
    N.setTimeout(function () {
      try {
        if (u.href.split('#')[0] === location.href.split('#')[0] && u.hash) location.hash = u.hash;
        else location.assign(target);
      } catch (e) {
        internal('command', e);
      }
    }, 30);
    return { ok: true, url: redactUrl(target), from: redactUrl(location.href) };
  };
  COMMANDS.refresh = function (a) {
    announceDocument({ url: redactUrl(location.href), method: 'GET', cause: 'reload', navigationType: 'reload' });
    N.setTimeout(function () {
      try {
        if (a.hard) {
          var u = new URL(location.href);
          u.searchParams.set('_reticle_reload', String(N.dateNow()));
          location.replace(u.href);
        } else location.reload();
      } catch (e) {
        internal('command', e);
      }
    }, 30);
    return { ok: true, hard: !!a.hard };
  };

  // == Section: connect == connect, disconnect, auto-connect
  // ---- connect / disconnect ------------------------------------------------------------------
  function isLoopback(h) {
    h = String(h || '').toLowerCase();
    if (h === 'localhost' || h === '::1' || h === '[::1]') return true;
    var m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
    return !!(m && +m[1] < 256 && +m[2] < 256 && +m[3] < 256);
  }
  function isLocalPage() {
    var p = location.protocol;
    if (p === 'file:' || p === 'app:' || p === 'tauri:') return true;
    return isLoopback(location.hostname);
  }
  function defaultUrl() {
    try {
      if (CFG.url) return String(CFG.url);
      var src = SCRIPT_EL && SCRIPT_EL.src;
      if (src) {
        var u = new URL(src, location.href);
        return (u.protocol === 'https:' ? 'wss:' : 'ws:') + '//' + u.host + '/reticle';
      }
      if (CFG.port) return 'ws://127.0.0.1:' + CFG.port + '/reticle';
    } catch (e) {
      /* fall through */
    }
    return 'ws://127.0.0.1:4400/reticle';
  }
  function boolOpt(v) {
    return v === true || v === 'true' || v === '' || v === '1' || v === 'yes';
  }
  function connect(options) {
    try {
      if (S.started) return window.reticle;
      var o = options || {};
      var token = o.token != null ? String(o.token) : null;
      var bridge = connectBridge(o, token);
      if (!bridge) return window.reticle;
      S.opts = o;
      S.url = bridge.href;
      S.token = token;
      S.captureBodies = !(
        o.captureBodies === false ||
        o.captureBodies === 'false' ||
        o.captureNetworkBodies === false
      );
      if (Array.isArray(o.redactKeys)) EXTRA_KEYS = o.redactKeys.slice(0, 64);
      else if (o.redact && Array.isArray(o.redact.keys)) EXTRA_KEYS = o.redact.keys.slice(0, 64);
      S.sessionId = connectSessionId(o);
      ssSet('__reticle_session', S.sessionId);
      stripReloadMarker(); // before the route observer installs
      clearMarkCookie(); // the request that brought this document carried it: the page never sees it
      S.started = true;
      S.stopped = false;
      installObservers();
      var fc = function () {
        checkFrames();
      };
      if (document.readyState === 'loading')
        document.addEventListener('DOMContentLoaded', fc, { once: true });
      else N.setTimeout(fc, 0);
      window.addEventListener('load', fc, { once: true });
      openSocket();
    } catch (e) {
      internal('connect', e);
    }
    return window.reticle;
  }
  // The bridge URL this page may connect to, or null (with a console warning that says why not).
  function connectBridge(o, token) {
    var url = o.url || defaultUrl();
    // a device's own bridge URL carries its capability, so the page may be off loopback
    var allowRemote = boolOpt(o.allowNonLocalhost) || !!CFG.device;
    var bridge;
    try {
      bridge = new URL(url, location.href);
    } catch (e) {
      warn('not connecting: bridge URL ' + clip(url, 200) + ' does not parse');
      return null;
    }
    if (bridge.protocol !== 'ws:' && bridge.protocol !== 'wss:') {
      warn('not connecting: bridge URL must be ws: or wss: (got ' + bridge.protocol + ')');
      return null;
    }
    if (token && token.length > 512) {
      warn('not connecting: token longer than 512 characters');
      return null;
    }
    var localPage = isLocalPage(),
      localBridge = isLoopback(bridge.hostname);
    if (!localPage || !localBridge) {
      if (!allowRemote || !(token || CFG.device)) {
        warn(
          'not running on ' +
            (localPage
              ? 'this bridge (' + bridge.host + ')'
              : 'a non-loopback page (' + location.hostname + ')') +
            ': reticle is a local development tool. To opt in, connect with allowNonLocalhost:true and the ' +
            'pairing token (data-allow-non-localhost and data-token on the script tag).'
        );
        return null;
      }
      if (!localBridge && bridge.protocol !== 'wss:') {
        warn('not connecting: a non-loopback bridge must use wss: (start the daemon with --tls)');
        return null;
      }
    }
    try {
      var ne = window.process && window.process.env && window.process.env.NODE_ENV;
      if (ne === 'production' && !boolOpt(o.allowInProduction)) {
        warn('not running: NODE_ENV is production (pass allowInProduction:true to override)');
        return null;
      }
    } catch (e) {
      /* no process */
    }
    return bridge;
  }
  // session id: explicit option > URL parameter > sessionStorage > new
  function connectSessionId(o) {
    var sid = o.sessionId || o.session;
    if (sid === 'auto') sid = null;
    if (!sid) {
      try {
        sid = new URL(location.href).searchParams.get('__reticle_session');
      } catch (e) {
        sid = null;
      }
    }
    if (!sid) sid = ssGet('__reticle_session');
    if (!sid || typeof sid !== 'string' || sid.length > 128) sid = 's' + uuid();
    return sid;
  }
  // strip our hard-reload marker from the address bar
  function stripReloadMarker() {
    try {
      if (/[?&]_reticle_reload=/.test(location.search)) {
        var cu = new URL(location.href);
        cu.searchParams.delete('_reticle_reload');
        history.replaceState(history.state, '', cu.href);
      }
    } catch (e) {
      /* ignore */
    }
  }
  // Every observer, in this order; one that fails is reported and the others still install.
  function installObservers() {
    var installers = [
      ['network_observer', installFetch],
      ['network_observer', installXHR],
      ['network_observer', installBeacon],
      ['network_observer', installWebSocket],
      ['network_observer', installEventSource],
      ['alert_observer', installAlerts],
      ['console_observer', installConsole],
      ['console_observer', installErrors],
      ['router_observer', installRouting],
      ['document_observer', installDocuments],
      ['dom_observer', installDom],
      ['dom_observer', installShadowCapture],
      ['animation_observer', installAnimations],
      ['storage_observer', installStorage],
      ['focus_observer', installFocus],
      ['dialog_observer', installDialogs],
      ['health_observer', installHealth]
    ];
    installers.forEach(function (it) {
      try {
        it[1]();
      } catch (e) {
        internal(it[0], e);
      }
    });
  }
  function disconnect() {
    try {
      S.stopped = true;
      if (S.retryTimer) {
        N.clearTimeout(S.retryTimer);
        S.retryTimer = null;
      }
      flush();
      var ws = S.ws;
      S.ws = null;
      S.open = false;
      if (ws) {
        try {
          ws.close(1000, 'disconnect');
        } catch (e) {
          /* ignore */
        }
      }
      var tds = S.teardowns.splice(0);
      for (var i = tds.length - 1; i >= 0; i--) {
        try {
          tds[i]();
        } catch (e) {
          /* ignore */
        }
      }
      Object.keys(STORES).forEach(function (n) {
        if (STORES[n].unsub) {
          try {
            STORES[n].unsub();
          } catch (e) {
            /* ignore */
          }
        }
      });
      S.started = false;
      S.outbox = [];
      S.results = [];
    } catch (e) {
      /* never throw */
    }
  }

  var api = {
    connect: connect,
    disconnect: disconnect,
    signal: signal,
    registerStore: registerStore,
    pushStore: pushStore,
    describe: describeContract,
    version: VERSION
  };
  Object.defineProperty(api, 'sessionId', {
    get: function () {
      return S.sessionId;
    },
    enumerable: true
  });
  Object.defineProperty(api, 'connected', {
    get: function () {
      return S.open;
    },
    enumerable: true
  });
  Object.defineProperty(api, '__reticleSdk', { value: true });
  try {
    Object.defineProperty(window, 'reticle', {
      value: api,
      configurable: true,
      enumerable: false,
      writable: false
    });
  } catch (e) {
    window.reticle = api;
  }

  // ---- auto-connect from the script tag ------------------------------------------------------
  try {
    var ds = (SCRIPT_EL && SCRIPT_EL.dataset) || {};
    var auto = ds.auto !== 'false' && CFG.autoConnect !== false;
    if (auto) {
      var o = {};
      if (ds.token) o.token = ds.token;
      if (ds.url) o.url = ds.url;
      if (ds.allowNonLocalhost != null) o.allowNonLocalhost = boolOpt(ds.allowNonLocalhost);
      if (ds.captureBodies != null)
        o.captureBodies = !(
          ds.captureBodies === 'false' ||
          ds.captureBodies === '0' ||
          ds.captureBodies === 'no'
        );
      if (ds.sessionId) o.sessionId = ds.sessionId;
      if (ds.allowInProduction != null) o.allowInProduction = boolOpt(ds.allowInProduction);
      if (CFG.device) {
        o.url = CFG.bridge;
        o.sessionId = CFG.sessionId;
      }
      connect(o);
    }
  } catch (e) {
    /* never throw into the page */
  }
})();
"""
_SDK_JS = _SDK_JS.replace("/*__RETICLE_FAILURE_UI__*/ []", _failure_ui_config())  # the conventions, one table
_SDK_JS = _SDK_JS.replace("/*__RETICLE_ANNOUNCERS__*/ ''", _route_announcers_config())  # never the page's message


###############################################################################
# __main__ guard ##############################################################
###############################################################################

if __name__ == "__main__":
    sys.exit(main())
