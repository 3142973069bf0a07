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

Sections: Constants & logging | Errors | Utilities | Session signing |
Tool registry & schemas | MCP protocol | Browser bridge | HTTP handlers |
WebSocket handler | Application factory | Server control | CLI |
Embedded assets | __main__ guard.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = [
    "Hub",
    "McpDispatcher",
    "ReticleError",
    "SessionSigner",
    "ToolError",
    "ToolRegistry",
    "main",
    "make_app",
]

import argparse
import asyncio
import base64
import collections
import datetime
import errno
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from typing import Any
from typing import Awaitable
from typing import Callable
from typing import Dict
from typing import List
from typing import Optional
from typing import Tuple

import tornado.httpclient
import tornado.httpserver
import tornado.ioloop
import tornado.iostream
import tornado.netutil
import tornado.routing
import tornado.web
import tornado.websocket
import jsonschema
from cryptography.hazmat.primitives import hashes as _c_hashes
from cryptography.hazmat.primitives import hmac as _c_hmac


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
COMMAND_TIMEOUT_S = 8.0
EVENT_CAP_COUNT = 2000
EVENT_CAP_AGE_MS = 60_000
EVENT_CAP_BYTES = 8 * 1024 * 1024
EVENTS_PER_SECOND_DEFAULT = 20_000         # per browser session, then sampling
THROTTLED_AFTER_MS = 12_000
MAX_STRING_ARG = 64 * 1024

# Event types that are churn: evicted first when a buffer is full, sampled
# first when a page floods the bridge.
CHURN_PREFIXES = ("dom.", "anim.", "page.health", "focus.", "perf.", "net.ws", "net.sse")

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
        return json.dumps(line, default=str, separators=(",", ":"))


def _emit(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"fields": fields})


def _setup_logging(level: int = logging.INFO) -> None:
    """Send reticle's and tornado's logs to stderr as JSON lines (CLI only)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter())
    for name, lvl in (("reticle", level), ("tornado", logging.WARNING)):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(lvl)
        logger.propagate = False


###############################################################################
# Errors ######################################################################
###############################################################################


class ReticleError(Exception):
    """Base class of every error reticle raises on purpose."""


class ToolError(ReticleError):
    """A tool ran and failed: becomes ``isError: true`` with {error, recovery}."""

    def __init__(self, error: str, recovery: str = "", **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.recovery = recovery
        self.extra = extra

    def payload(self) -> dict:
        out = {"error": self.error}
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


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


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
        parts.port  # raises on a bad port
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
        raise ConfigError("%s=%r is not a whole number; unset it or give one like %d." % (name, raw, default))


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


class StateDir:
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
            )
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


class SessionSigner:
    """Streamable HTTP session ids: ``v1.<payload>.<mac>`` (DESIGN section 4).

    payload = base64url(16 random bytes + 8-byte issued-at seconds); mac =
    HMAC-SHA256 over ``v1.<payload>`` with the per-machine key.  Verifying
    needs only the key, so ids stay valid across daemon restarts.
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
            if (time.time() if now is None else now) - issued > self.max_age_s:
                return False
        return True


###############################################################################
# Tool registry & schemas #####################################################
###############################################################################

_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_SESSION_ID = {"type": "string", "minLength": 1, "maxLength": 128,
               "description": "Browser session to use; omit it when one tab is connected."}
_CURSOR = {"type": "number", "minimum": 0,
           "description": "A cursor (ms on the daemon's clock) from an earlier result."}
_PREDICATE = {"type": "object",
              "description": "A predicate {kind, ...}; the grammar is the reticle://predicates resource."}
_ACTIONS = ["click", "dblclick", "hover", "focus", "blur", "fill", "type", "clear", "select",
            "check", "uncheck", "submit", "press", "scrollIntoView", "upload", "drag"]
_TARGET = {
    "type": "object",
    "description": "Find the element in the same call: {testid}, {text}, {role, name}, {label} or {placeholder}.",
    "properties": {
        "testid": {"type": "string", "minLength": 1},
        "text": {"type": "string", "minLength": 1},
        "role": {"type": "string", "minLength": 1},
        "name": {"type": "string"},
        "label": {"type": "string", "minLength": 1},
        "placeholder": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
    "minProperties": 1,
}
_ACT_ARGS = {
    "type": "object",
    "description": "Action arguments: value (fill/select), text (type), key and modifiers (press), "
                   "toRef (drag), name/content/type (upload), confirmDangerous.",
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


def _obj(props: dict, required: Tuple[str, ...] = ()) -> dict:
    schema = {"$schema": _SCHEMA_DIALECT, "type": "object", "properties": props,
              "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


class Tool:
    """One tool: name, one-paragraph description, schema, async handler."""

    def __init__(self, name: str, description: str, schema: dict, handler: Callable,
                 example: Optional[dict] = None, listed: bool = True) -> None:
        jsonschema.Draft202012Validator.check_schema(schema)
        self.name = name
        self.description = description
        self.schema = schema
        self.handler = handler
        self.example = example if example is not None else {}
        self.listed = listed
        self.validator = jsonschema.Draft202012Validator(schema)

    def describe(self) -> dict:
        return {"name": self.name, "description": self.description, "inputSchema": self.schema}

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


class ToolRegistry:
    """Name -> Tool.  tools/list, validation, the usage resource and the
    README's tool table all read from here."""

    def __init__(self) -> None:
        self._tools: Dict[str, Tool] = {}

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError("tool %s registered twice" % tool.name)
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Optional[Tool]:
        return self._tools.get(name)

    def listed(self) -> List[Tool]:
        return [t for t in self._tools.values() if t.listed]

    def names(self) -> List[str]:
        return [t.name for t in self.listed()]


def _build_registry() -> ToolRegistry:
    """Every tool of DESIGN section 7 that works, with its final schema."""
    reg = ToolRegistry()
    sid = _SESSION_ID

    def add(name, description, props, handler, example=None, required=()):
        props = dict(props)
        reg.add(Tool(name, description, _obj(props, required), handler, example))

    add("reticle_sessions",
        "List the browser tabs connected to this daemon (id, url, title, health). An empty list "
        "carries `why` and the next step to connect one. Reads only; proves nothing.",
        {}, _tool_sessions, {})
    add("reticle_navigate",
        "Navigate the tab to `url`, or `reload: true` it, and wait (up to 5 s) for the page to "
        "reconnect. Later asserts count only events after the navigation. Proves nothing.",
        {"url": {"type": "string", "minLength": 1, "maxLength": 4096}, "reload": {"type": "boolean"},
         "hard": {"type": "boolean"}, "sessionId": sid},
        _tool_navigate, {"url": "http://localhost:5173/checkout"})
    add("reticle_snapshot",
        "Read the page as an accessibility-style tree with stable refs (e7) for controls and named "
        "nodes. `mode` full|interactive|status, `scope` a CSS selector or ref, `diff: true` for only "
        "what changed since the last snapshot of this route. Caps: 400 nodes, depth 20.",
        {"scope": {"type": "string", "minLength": 1}, "mode": {"enum": ["full", "interactive", "status"]},
         "diff": {"type": "boolean"}, "sessionId": sid},
        _tool_snapshot, {"mode": "interactive"})
    add("reticle_query",
        "Find elements the way a user would: by role (+name), text, label, placeholder, testid or alt. "
        "Returns exact counts and refs; an empty result carries a hint of what the page does show.",
        {"by": {"enum": ["role", "text", "label", "placeholder", "testid", "alt"]},
         "value": {"type": "string"}, "name": {"type": "string"},
         "role": {"type": "string"}, "text": {"type": "string"}, "label": {"type": "string"},
         "placeholder": {"type": "string"}, "testid": {"type": "string"}, "alt": {"type": "string"},
         "scope": {"type": "string", "minLength": 1}, "self": {"type": "boolean"},
         "attrs": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
         "limit": {"type": "integer", "minimum": 0, "maximum": 200}, "count_only": {"type": "boolean"},
         "sessionId": sid},
        _tool_query, {"by": "role", "value": "button", "name": "Pay"})
    add("reticle_inspect",
        "Describe one element by ref: role, name, states, box, key styles, occlusion. A stale ref is "
        "an error that says to take a new snapshot.",
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "sessionId": sid},
        _tool_inspect, {"ref": "e7"}, required=("ref",))
    add("reticle_act",
        "Do one thing to an element (by `ref` or `target`): click, dblclick, hover, focus, blur, fill, "
        "type, clear, select, check, uncheck, submit, press, scrollIntoView, upload, drag. Returns the "
        "effect probes. Destructive controls need args.confirmDangerous. Proves nothing; use "
        "reticle_act_and_wait for a verdict.",
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "target": _TARGET,
         "action": {"enum": _ACTIONS}, "args": _ACT_ARGS, "refuseWhenThrottled": {"type": "boolean"},
         "sessionId": sid},
        _tool_act, {"ref": "e7", "action": "click"}, required=("action",))
    add("reticle_act_sequence",
        "Run several actions in order, stopping at the first failure. Proves nothing.",
        {"steps": {"type": "array", "items": _STEP, "minItems": 1, "maxItems": 50},
         "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 60000}, "sessionId": sid},
        _tool_act_sequence,
        {"steps": [{"ref": "e3", "action": "fill", "args": {"value": "a@b.c"}}, {"ref": "e4", "action": "click"}]},
        required=("steps",))
    add("reticle_act_and_wait",
        "Act, then wait until the `until` predicate holds (or, without one, until the page settles) "
        "and return a verdict: verified yes|no|unknown with the deciding evidence. `unknown` is not a "
        "pass. timeout_ms defaults to 4000; 0 evaluates once.",
        {"ref": {"type": "string", "pattern": "^e[0-9]+$"}, "target": _TARGET,
         "action": {"enum": _ACTIONS}, "args": _ACT_ARGS, "until": _PREDICATE, "predicate": _PREDICATE,
         "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000},
         "refuseWhenThrottled": {"type": "boolean"}, "sessionId": sid},
        _tool_act_and_wait,
        {"target": {"role": "button", "name": "Pay"}, "action": "click",
         "until": {"kind": "net", "urlContains": "/api/pay", "status": 200}},
        required=("action",))
    add("reticle_observe",
        "Read the raw events of a window (default the last 2000 ms) with a summary: network, DOM, "
        "routes, console errors, animations, signals. Proves nothing.",
        {"window_ms": {"type": "integer", "minimum": 1, "maximum": 600000}, "since": _CURSOR,
         "until": _CURSOR, "actionId": {"type": "string"},
         "filters": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
         "max_events": {"type": "integer", "minimum": 1, "maximum": 2000}, "sessionId": sid},
        _tool_observe, {"window_ms": 2000, "filters": ["net", "console"]})
    add("reticle_network",
        "List the page's fetch/XHR calls (method, url, status, timing, bodies) including requests "
        "still pending. Filters: method, urlContains, status, ok, since. Proves nothing.",
        {"since": _CURSOR, "until": _CURSOR, "actionId": {"type": "string"},
         "method": {"type": "string"}, "urlContains": {"type": "string"},
         "status": {"type": "integer", "minimum": 0, "maximum": 999}, "ok": {"type": "boolean"},
         "limit": {"type": "integer", "minimum": 1, "maximum": 2000}, "bodies": {"type": "boolean"},
         "sessionId": sid},
        _tool_network, {"urlContains": "/api/", "status": 500})
    add("reticle_console",
        "List console messages and uncaught errors (level log|info|warn|error; error includes "
        "uncaught errors). Proves nothing.",
        {"level": {"enum": ["log", "info", "warn", "error"]}, "since": _CURSOR, "until": _CURSOR,
         "actionId": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 2000},
         "sessionId": sid},
        _tool_console, {"level": "error"})
    add("reticle_wait_for",
        "Wait until a predicate holds (timeout_ms, default 4000). Returns pass and evidence but no "
        "verdict.",
        {"predicate": _PREDICATE, "until": _PREDICATE,
         "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000}, "since": _CURSOR,
         "sessionId": sid},
        _tool_wait_for, {"predicate": {"kind": "text", "contains": "Saved"}})
    add("reticle_assert",
        "Check a predicate over the events since the last act or navigation (or `since`) and the live "
        "page, and return a verdict: verified yes|no|unknown with evidence. timeout_ms 0 (default) "
        "evaluates once.",
        {"predicate": _PREDICATE, "until": _PREDICATE,
         "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 60000}, "since": _CURSOR,
         "sessionId": sid},
        _tool_assert, {"predicate": {"kind": "console", "level": "error", "absent": True}})
    add("reticle_state",
        "Read app state from stores the app registered (reticle.registerStore / pushStore): all "
        "stores collapsed to depth 1, or one `store` at a dot `path`. A wrong path answers found: "
        "false with the available keys.",
        {"store": {"type": "string"}, "path": {"type": "string"},
         "depth": {"type": "integer", "minimum": 0, "maximum": 10}, "sessionId": sid},
        _tool_state, {"store": "cart", "path": "items.length"})
    add("reticle_capabilities",
        "What the app declared through reticle.describe (testids, signals, stores, flows) plus the "
        "test ids present on the page.",
        {"sessionId": sid}, _tool_capabilities, {})
    return reg


def _cost(obj: Any) -> dict:
    size = len(_dumps(obj).encode("utf-8"))
    return {"bytes": size, "tokens": (size + 3) // 4}


async def _tool_sessions(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    sessions = [s.describe() for s in hub.bridge.live()]
    out: Dict[str, Any] = {"sessions": sessions}
    if not sessions:
        out["why"] = hub.bridge.why()
        out["next_action"] = {
            "action": "open_app",
            "reason": "no tab has loaded %s/reticle.js yet" % hub.public_origin(),
            "snippet": '<script src="%s/reticle.js"></script>' % hub.public_origin(),
        }
    return out


async def _tool_snapshot(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    mode = args.get("mode", "full")
    cmd = {"mode": mode}
    if args.get("scope"):
        cmd["scope"] = args["scope"]
    result = await session.command("snapshot", cmd)
    if not isinstance(result, dict):
        raise ToolError("the page answered snapshot with %r" % type(result).__name__)
    if args.get("diff"):
        result = session.snapshot_diff(args.get("scope"), mode, result)
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


async def _tool_query(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    result = await session.command("query", _query_args(args))
    if isinstance(result, dict):
        result["cost"] = _cost(result)
    return result


async def _tool_inspect(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    return await session.command("inspect", {"ref": args["ref"]})


async def _tool_state(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    cmd = {k: args[k] for k in ("store", "path", "depth") if k in args}
    return await session.command("state_read", cmd)


async def _tool_capabilities(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    result = await session.command("capabilities", {})
    if isinstance(result, dict):
        result.setdefault("source", "live")
    return result


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


async def _tool_act(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    session.refuse_if_throttled(args.get("refuseWhenThrottled"))
    cmd = _act_command(args)
    since = session.mark_act(args["action"])
    result = await session.command("act", cmd)
    out = {"since": since, "dispatched": bool(result.get("dispatched", True)) if isinstance(result, dict) else True,
           "settled": result.get("settled") if isinstance(result, dict) else None,
           "inputMode": "synthetic", "result": result}
    return session.splice_health(out)


async def _tool_act_sequence(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    steps = []
    for i, step in enumerate(args["steps"]):
        try:
            steps.append(_act_command(step))
        except ToolError as exc:
            raise ToolError("step %d: %s" % (i, exc.error), exc.recovery)
    per_step = args.get("timeout_ms", 8000) / 1000.0
    since = session.mark_act(None)
    result = await session.command("act_sequence", {"steps": steps}, timeout=per_step * len(steps) + 1)
    out = {"since": since}
    if isinstance(result, dict):
        out.update(result)
    return session.splice_health(out)


async def _tool_navigate(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
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
    await session.command(name, cmd)
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


def _window(session: "BrowserSession", args: dict, default_since: float) -> Tuple[float, Optional[float]]:
    since = args.get("since")
    since = default_since if since is None else float(since)
    until = args.get("until")
    return since, (None if until is None else float(until))


async def _tool_observe(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
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
    out: Dict[str, Any] = {"window_ms": round((until or now) - since), "since": since,
                           "events": [_public_event(e) for e in events], "summary": summary}
    cost = _cost(out["events"])
    cost["events"] = len(events)
    if dropped:
        cost["droppedOldest"] = dropped
    out["cost"] = cost
    return session.splice_buffer(out, since)


_FILTER_BUCKETS = {
    "dom": ("dom.",), "net": ("net.request", "net.pending", "net.ws", "net.sse"), "route": ("route.",),
    "console": ("console.error", "error."), "animation": ("anim.",), "signal": ("signal",),
    "perf": ("perf.", "page.health"), "state": ("state.",), "storage": ("storage.",),
}


def _event_matches_filters(etype: str, filters: List[str]) -> bool:
    for f in filters:
        if etype == f:
            return True
        for prefix in _FILTER_BUCKETS.get(f, ()):
            if etype.startswith(prefix):
                return True
    return False


def _summarise(events: List[dict]) -> dict:
    c = collections.Counter(e["type"] for e in events)
    return {
        "total": len(events),
        "network": c["net.request"],
        "domAdded": c["dom.added"], "domRemoved": c["dom.removed"],
        "domChanged": c["dom.attr"] + c["dom.text"],
        "routeChanges": c["route.change"],
        "consoleErrors": c["console.error"] + c["error.uncaught"],
        "animations": sum(v for k, v in c.items() if k.startswith("anim.")),
        "signals": c["signal"],
    }


def _public_event(e: dict) -> dict:
    out = {"t": e["t"], "type": e["type"], "data": e.get("data")}
    if e.get("actionId"):
        out["actionId"] = e["actionId"]
    return out


def _net_calls(session: "BrowserSession", since: float, until: Optional[float]) -> List[dict]:
    """Completed calls plus requests still pending, in start order."""
    events = session.store.query(since, until, prefix="net.")
    done = {}
    order = []
    for e in events:
        d = e.get("data") or {}
        rid = d.get("requestId") or "t%s" % e["t"]
        if e["type"] == "net.pending":
            if rid not in done:
                done[rid] = dict(d, status="pending", pending=True, t=e["t"])
                order.append(rid)
        elif e["type"] == "net.request":
            if rid not in done:
                order.append(rid)
            done[rid] = dict(d, t=e["t"])
    # pending ones whose start fell before the window but are still open count too
    for rid, d in session.open_requests.items():
        if rid not in done:
            done[rid] = dict(d, status="pending", pending=True)
            order.append(rid)
    return [done[r] for r in order]


async def _tool_network(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    since, until = _window(session, args, 0.0)
    calls = _net_calls(session, since, until)
    all_calls = calls
    if args.get("method"):
        calls = [c for c in calls if str(c.get("method", "")).upper() == args["method"].upper()]
    if args.get("urlContains"):
        calls = [c for c in calls if args["urlContains"] in str(c.get("url", ""))]
    if "status" in args:
        calls = [c for c in calls if c.get("status") == args["status"]]
    if "ok" in args:
        calls = [c for c in calls if not c.get("pending") and bool(c.get("ok")) == args["ok"]]
    limit = args.get("limit", 200)
    total = len(calls)
    calls = calls[-limit:]
    bodies = args.get("bodies", True)
    shaped = []
    for c in calls:
        item = {k: c[k] for k in ("method", "url", "status", "statusText", "ok", "contentType", "ms",
                                  "pending", "error", "initiator", "responseSize", "bodyTruncated",
                                  "bodyCaptured") if k in c}
        if bodies:
            for k in ("requestBody", "responseBody"):
                if k in c:
                    item[k] = c[k]
        shaped.append(item)
    out: Dict[str, Any] = {"calls": shaped}
    if total > len(shaped):
        out["total"] = total
        out["truncated"] = True
    if not shaped and all_calls:
        out["hint"] = {"totalInWindow": len(all_calls),
                       "present": [{"method": c.get("method"), "url": c.get("url"), "status": c.get("status")}
                                   for c in all_calls[-5:]]}
    elif not all_calls:
        out["observed"] = True
        out["note"] = "the observation ran and found no network calls in this window"
    if any(c.get("bodyCaptured") is False and str(c.get("method", "")).upper() in ("POST", "PUT", "PATCH")
           for c in shaped):
        out["bodiesNotCaptured"] = True
    out["cost"] = _cost(shaped)
    return session.splice_buffer(out, since)


_CONSOLE_TYPES = ("console.log", "console.info", "console.warn", "console.error", "console.debug",
                  "error.uncaught")


async def _tool_console(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    since, until = _window(session, args, 0.0)
    events = [e for e in session.store.query(since, until) if e["type"] in _CONSOLE_TYPES]
    logs = []
    for e in events:
        d = e.get("data") or {}
        level = "error" if e["type"] == "error.uncaught" else e["type"].split(".", 1)[1]
        item = {"level": level, "text": d.get("text") or d.get("message") or "", "t": e["t"]}
        if e["type"] == "error.uncaught":
            item["uncaught"] = True
            if d.get("kind"):
                item["kind"] = d["kind"]
        if d.get("stack"):
            item["stack"] = "\n".join(str(d["stack"]).splitlines()[:5])
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
    return session.splice_buffer(out, since)


async def _tool_wait_for(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    return await hub.verdicts.wait_for(session, args)


async def _tool_assert(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    return await hub.verdicts.assert_(session, args)


async def _tool_act_and_wait(hub: "Hub", args: dict, ctx: "CallContext") -> dict:
    session = hub.bridge.resolve(args.get("sessionId"))
    return await hub.verdicts.act_and_wait(session, args)


###############################################################################
# MCP protocol (JSON-RPC dispatch) ############################################
###############################################################################

INSTRUCTIONS = (
    "Reticle reads the running web app's program truth (network, console, errors, routes, DOM, "
    "storage, app state, signals) and returns verdicts. Loop: reticle_sessions (is a tab "
    "connected?) -> reticle_snapshot or reticle_query (find refs) -> reticle_act_and_wait with an "
    "`until` predicate, or reticle_assert after acting. Only reticle_act_and_wait and "
    "reticle_assert produce a verdict; every other tool proves nothing. Only verified: \"yes\" is "
    "a pass: \"unknown\" means Reticle could not tell, so report it as unknown and never weaken a "
    "check to make it pass. Omit sessionId when one tab is connected. The predicate grammar is "
    "the reticle://predicates resource."
)

CHEATSHEET = """# Reticle cheat sheet

1. `reticle_sessions`: is a tab connected? If not, add
   `<script src="http://127.0.0.1:4400/reticle.js"></script>` to the app's dev HTML and load it.
2. `reticle_snapshot {mode: "interactive"}` or `reticle_query {by, value}`: find refs (e7).
3. `reticle_act_and_wait {ref, action, until: <predicate>}`: act and get a verdict.
4. `reticle_assert {predicate}`: check what happened since the last act.

Verdicts: `verified: "yes"` is the only pass. `"no"` names the failing evidence;
`"unknown"` means Reticle could not tell (tab lost, request in flight, body not captured,
evidence evicted): report it as unknown and never weaken the check.

Bug-catching predicates: `{kind: "net", urlContains, status, count}`,
`{kind: "net", bodyContains}`, `{kind: "console", level: "error", absent: true}`,
`{kind: "element", query: {...}, absent: true}`, `{kind: "state", path, equals}`.
"""


class CallContext:
    """Who is calling: the transport and the session key (for limits)."""

    __slots__ = ("transport", "session_key", "client")

    def __init__(self, transport: str, session_key: str, client: Optional[dict] = None) -> None:
        self.transport = transport
        self.session_key = session_key
        self.client = client


def _negotiate(requested: Any) -> str:
    return requested if requested in PROTOCOL_VERSIONS else LATEST_PROTOCOL


def _usage_markdown(registry: ToolRegistry) -> str:
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


class McpDispatcher:
    """JSON-RPC for MCP, independent of any transport.

    ``call_tool(name, args, ctx)`` runs a validated tool and
    ``read_live(uri)`` answers live resources; the daemon wires them to the
    hub, the stdio proxy to its daemon forwarder.
    """

    def __init__(self, registry: ToolRegistry,
                 call_tool: Callable[[str, dict, CallContext], Awaitable[dict]],
                 read_live: Callable[[str], Awaitable[Any]]) -> None:
        self.registry = registry
        self._call_tool = call_tool
        self._read_live = read_live
        self.static_resources = {
            "reticle://docs/usage": ("Reticle tool surface", "text/markdown", lambda: _usage_markdown(registry)),
            "reticle://docs/cheatsheet": ("Reticle cheat sheet", "text/markdown", lambda: CHEATSHEET),
            "reticle://predicates": ("Predicate grammar", "application/json",
                                     lambda: _dumps(_predicate_grammar_doc())),
        }

    def resources(self) -> List[dict]:
        out = [{"uri": uri, "name": name, "mimeType": mime} for uri, (name, mime, _) in self.static_resources.items()]
        out.append({"uri": "reticle://sessions", "name": "Connected browser sessions (live)",
                    "mimeType": "application/json"})
        return out

    async def handle_payload(self, payload: Any, ctx: CallContext) -> Tuple[Any, bool]:
        """One message or a batch -> (response or list of responses or None, was_batch)."""
        if isinstance(payload, list):
            if not payload:
                return _rpc_error(None, -32600, "Invalid Request: empty batch"), False
            replies = await asyncio.gather(*(self.handle(m, ctx) for m in payload))
            replies = [r for r in replies if r is not None]
            return (replies or None), True
        return await self.handle(payload, ctx), False

    async def handle(self, msg: Any, ctx: CallContext) -> Optional[dict]:
        if not isinstance(msg, dict):
            return _rpc_error(None, -32600, "Invalid Request: a JSON-RPC message must be an object")
        mid = msg.get("id")
        has_id = "id" in msg
        if has_id and not (mid is None or isinstance(mid, (str, int, float)) and not isinstance(mid, bool)):
            return _rpc_error(None, -32600, "Invalid Request: id must be a string or a number")
        method = msg.get("method")
        if msg.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if method is None and ("result" in msg or "error" in msg) and msg.get("jsonrpc") == "2.0":
                return None  # a response from the client; we never ask, so nothing to match
            return _rpc_error(mid, -32600, 'Invalid Request: needs "jsonrpc": "2.0" and a string "method"')
        if not has_id:
            return None  # notifications: initialized, cancelled, anything else is ignored
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _rpc_error(mid, -32602, "params must be an object")
        try:
            result = await self._method(method, params, ctx)
        except RpcError as exc:
            return {"jsonrpc": "2.0", "id": mid, "error": exc.payload()}
        except Exception as exc:  # a bug must not take the transport down
            _emit(_log, logging.ERROR, "mcp_internal_error", method=method, error=repr(exc))
            return _rpc_error(mid, -32603, "Internal error: %s" % exc)
        return {"jsonrpc": "2.0", "id": mid, "result": result}

    async def _method(self, method: str, params: dict, ctx: CallContext) -> Any:
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
            return await self._call_tool(tool.name, args, ctx)
        if method == "resources/list":
            return {"resources": self.resources()}
        if method == "resources/read":
            uri = params.get("uri")
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


def _tool_result(obj: Any, is_error: bool = False) -> dict:
    if not isinstance(obj, dict):
        obj = {"result": obj}
    out = {"content": [{"type": "text", "text": _dumps(obj)}], "structuredContent": obj}
    if is_error:
        out["isError"] = True
    return out


###############################################################################
# Browser bridge (connection hub, pending calls) ##############################
###############################################################################

_HIGH_VALUE = ("net.request", "net.pending", "console.error", "console.warn", "error.uncaught",
               "route.change", "signal", "storage.change", "state.change", "truncated", "blind-spot")


def _is_churn(etype: str) -> bool:
    return etype.startswith(CHURN_PREFIXES)


class EventStore:
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
        self._churn: collections.deque = collections.deque()
        self._kept: collections.deque = collections.deque()
        self.bytes = 0
        self.seq = 0
        self.total = 0
        self.evicted = {"churn": 0, "other": 0}
        self.evicted_upto = {"churn": -1.0, "other": -1.0}
        self.sampled = 0
        self.sampled_upto = -1.0
        self.blind_spots: collections.Counter = collections.Counter()

    def __len__(self) -> int:
        return len(self._churn) + len(self._kept)

    def add(self, event: dict, size: int) -> None:
        self.seq += 1
        self.total += 1
        event["seq"] = self.seq
        item = (event, size)
        (self._churn if _is_churn(event["type"]) else self._kept).append(item)
        self.bytes += size
        self._trim(event["t"])

    def note_sampled(self, count: int, t: float) -> None:
        self.sampled += count
        self.sampled_upto = max(self.sampled_upto, t)

    def _evict(self, dq: collections.deque, which: str) -> None:
        event, size = dq.popleft()
        self.bytes -= size
        self.evicted[which] += 1
        self.evicted_upto[which] = max(self.evicted_upto[which], event["t"])

    def _trim(self, now: float) -> None:
        horizon = now - self.cap_age_ms
        for dq, which in ((self._churn, "churn"), (self._kept, "other")):
            while dq and dq[0][0]["t"] < horizon:
                self._evict(dq, which)
        while len(self) > self.cap_count or self.bytes > self.cap_bytes:
            if self._churn:
                self._evict(self._churn, "churn")
            elif self._kept:
                self._evict(self._kept, "other")
            else:
                break

    def query(self, since: float = 0.0, until: Optional[float] = None,
              prefix: Optional[str] = None) -> List[dict]:
        out = []
        for dq in (self._kept, self._churn):
            for event, _ in dq:
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


class BrowserSession:
    """One connected tab: its socket, ring buffer, pending commands, health."""

    def __init__(self, bridge: "Bridge", handler: "BridgeHandler", hello: dict) -> None:
        self.bridge = bridge
        self.handler: Optional[BridgeHandler] = handler
        self.id = hello["sessionId"]
        self.generation = 0
        self.connected_at = bridge.clock()
        self.first_connected_at = self.connected_at
        self.reconnects = 0
        self.store = EventStore(bridge.clock)
        self.pending: Dict[str, asyncio.Future] = {}
        self._next_cmd = 0
        self.last_act: Optional[float] = None
        self.last_act_action: Optional[str] = None
        self.last_nav: Optional[float] = None
        self.open_requests: Dict[str, dict] = {}
        self.hidden = False
        self.focused = True
        self.snapshots: Dict[Tuple[Optional[str], str], Tuple[str, List[str]]] = {}
        self._window_start = 0.0
        self._window_count = 0
        self._window_sampled = 0
        self.update_identity(hello)

    def update_identity(self, hello: dict) -> None:
        self.url = str(hello.get("url", ""))[:4096]
        self.title = str(hello.get("title", ""))[:512]
        adapters = hello.get("adapters") if isinstance(hello.get("adapters"), list) else []
        self.adapters = [str(a)[:128] for a in adapters[:32]]
        self.sdk_version = str(hello.get("sdkVersion", ""))[:64]
        self.has_capabilities = bool(hello.get("hasCapabilities"))
        self.last_seen = self.bridge.clock()

    # -- health -------------------------------------------------------------
    def last_seen_ms(self) -> int:
        return int(self.bridge.clock() - self.last_seen)

    def throttled(self) -> bool:
        return self.hidden or self.last_seen_ms() > THROTTLED_AFTER_MS

    def describe(self) -> dict:
        out = {"sessionId": self.id, "url": self.url, "adapters": self.adapters,
               "hasCapabilities": self.has_capabilities, "lastSeenMs": self.last_seen_ms(),
               "hidden": self.hidden, "focused": self.focused, "throttled": self.throttled(),
               "attachment": {"connectedSinceMs": int(self.bridge.clock() - self.connected_at),
                              "reconnects": self.reconnects},
               "sdkVersion": self.sdk_version, "buffer": self.store.stats()}
        if self.title:
            out["title"] = self.title
        if self.sdk_version and self.sdk_version != __version__:
            out["versionSkew"] = {"sdk": self.sdk_version, "daemon": __version__}
        if self.throttled():
            out["recommendation"] = ("the tab is hidden or silent; browsers throttle background tabs, so "
                                     "bring it to the front or pass refuseWhenThrottled")
        return out

    def refuse_if_throttled(self, refuse: Optional[bool]) -> None:
        if refuse and self.throttled():
            raise ToolError("the tab is throttled (hidden, or silent for %d ms); nothing was driven."
                            % self.last_seen_ms(), "bring the tab to the front and retry")

    def splice_health(self, out: dict) -> dict:
        if self.throttled():
            out["session"] = {"lastSeenMs": self.last_seen_ms(), "throttled": True, "focused": self.focused}
            out["warning"] = "the tab is hidden or silent; its timers and animations may be throttled"
        return out

    def splice_buffer(self, out: dict, since: float) -> dict:
        loss = self.store.loss_since(since)
        if loss:
            loss["note"] = ("part of this window is gone: the buffer keeps %d events / %d s / %d MiB "
                            "per tab, and the page's flood was sampled; counts above are lower bounds"
                            % (EVENT_CAP_COUNT, EVENT_CAP_AGE_MS // 1000, EVENT_CAP_BYTES >> 20))
            out["buffer"] = loss
        return out

    # -- cursors --------------------------------------------------------------
    def mark_act(self, action: Optional[str]) -> float:
        self.last_act = self.bridge.clock()
        self.last_act_action = action
        return self.last_act

    def mark_navigation(self) -> float:
        self.last_nav = self.bridge.clock()
        self.snapshots.clear()
        return self.last_nav

    def floor(self) -> float:
        """Events count from the last act or navigation on."""
        marks = [m for m in (self.last_act, self.last_nav) if m is not None]
        return max(marks) if marks else 0.0

    # -- events ---------------------------------------------------------------
    def ingest(self, events: List[dict], frame_bytes: int) -> None:
        now = self.bridge.clock()
        self.last_seen = now
        if not events:
            return
        size = max(1, frame_bytes // len(events))
        cap = self.bridge.events_per_second
        if now - self._window_start >= 1000.0:
            if self._window_sampled:
                self.store.add({"t": now, "type": "blind-spot", "data": {
                    "reason": "sampled", "count": self._window_sampled,
                    "detail": "the page sent more than %d events/s; churn events were dropped" % cap}}, 64)
            self._window_start = now
            self._window_count = 0
            self._window_sampled = 0
        dropped = 0
        for raw in events:
            if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
                self.store.blind_spots["malformed-event"] += 1
                continue
            etype = raw["type"][:64]
            self._window_count += 1
            if self._window_count > cap and (self._window_count > 2 * cap or etype not in _HIGH_VALUE):
                dropped += 1
                continue
            event = {"t": now, "type": etype, "data": raw.get("data")}
            if isinstance(raw.get("t"), (int, float)):
                event["pt"] = raw["t"]
            if isinstance(raw.get("actionId"), str):
                event["actionId"] = raw["actionId"][:32]
            self._observe(event)
            self.store.add(event, size)
        if dropped:
            self._window_sampled += dropped
            self.store.note_sampled(dropped, now)

    def _observe(self, event: dict) -> None:
        etype = event["type"]
        data = event["data"] if isinstance(event["data"], dict) else {}
        if etype == "net.pending" and data.get("requestId"):
            if len(self.open_requests) < 1000:
                self.open_requests[str(data["requestId"])] = dict(data, startedAt=event["t"])
        elif etype == "net.request" and data.get("requestId"):
            self.open_requests.pop(str(data["requestId"]), None)
        elif etype == "page.health":
            self.hidden = bool(data.get("hidden"))
            self.focused = bool(data.get("focused", True))
        elif etype == "route.change" and isinstance(data.get("to"), str):
            self.url = data["to"][:4096]
        elif etype == "blind-spot":
            self.store.blind_spots[str(data.get("reason", "unknown"))[:64]] += int(data.get("count", 1) or 1)

    # -- commands -------------------------------------------------------------
    async def command(self, name: str, args: dict, timeout: float = COMMAND_TIMEOUT_S) -> Any:
        handler = self.handler
        if handler is None:
            raise ToolError("the tab %s disconnected before %s could run." % (self.id, name),
                            "call reticle_sessions and retry on the live tab")
        self._next_cmd += 1
        cid = "c%d" % self._next_cmd
        fut = asyncio.get_running_loop().create_future()
        self.pending[cid] = fut
        handler.send_json({"kind": "command", "id": cid, "sessionId": self.id, "name": name, "args": args})
        try:
            reply = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            note = ""
            if self.last_seen_ms() <= 2000:
                note = " The page is alive (heard %d ms ago) but did not answer this command." % self.last_seen_ms()
            raise ToolError("command '%s' timed out after %d ms.%s" % (name, timeout * 1000, note),
                            "reticle_sessions shows the tab's health; reload the page if it is stuck")
        finally:
            self.pending.pop(cid, None)
        if not reply.get("ok"):
            error = str(reply.get("error") or "the page refused the command")[:4096]
            raise ToolError(error, str(reply.get("recovery") or ""))
        return reply.get("result")

    def resolve_command(self, msg: dict) -> None:
        fut = self.pending.get(str(msg.get("id")))
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def fail_pending(self, why: str) -> None:
        for fut in list(self.pending.values()):
            if not fut.done():
                fut.set_exception(ToolError(why, "call reticle_sessions and retry on the live tab"))
        self.pending.clear()

    # -- snapshot diff ----------------------------------------------------------
    def snapshot_diff(self, scope: Optional[str], mode: str, result: dict) -> dict:
        tree = str(result.get("tree", ""))
        route = str((result.get("status") or {}).get("route", ""))
        lines = [re.sub(r" \(ref=e\d+\)| \[focused\]|,focused|focused,", "", ln) for ln in tree.splitlines()]
        key = (scope, mode)
        prev = self.snapshots.get(key)
        self.snapshots[key] = (route, lines)
        if prev is None or prev[0] != route:
            result["mode"] = "full"
            result["reason"] = "first snapshot for this route" if prev is None else "route changed"
            return result
        old = collections.Counter(prev[1])
        new = collections.Counter(lines)
        added = list((new - old).elements())
        removed = list((old - new).elements())
        if not added and not removed:
            return {"mode": "unchanged", "status": result.get("status"), "truncated": result.get("truncated", False)}
        return {"mode": "delta", "status": result.get("status"),
                "delta": {"added": added[:200], "removed": removed[:200],
                          "addedCount": len(added), "removedCount": len(removed)}}


class Bridge:
    """All browser sessions of one daemon, keyed by the id the page chose."""

    def __init__(self, hub: "Hub") -> None:
        self.hub = hub
        self.clock = hub.clock
        self.sessions: Dict[str, BrowserSession] = {}
        self.pending_handshakes = 0
        self.refusals: collections.deque = collections.deque(maxlen=5)
        self.ever_connected = 0
        self.events_per_second = EVENTS_PER_SECOND_DEFAULT
        # Tabs that went away recently, kept so that a reload (same id, new
        # socket) keeps its buffer and cursors instead of starting blind.
        self.departed: Dict[str, Tuple[BrowserSession, float]] = {}

    def live(self) -> List[BrowserSession]:
        return list(self.sessions.values())

    def get(self, session_id: str) -> Optional[BrowserSession]:
        return self.sessions.get(session_id)

    def note_refusal(self, reason: str) -> None:
        self.refusals.append({"at": _wall_iso(), "reason": reason})
        _emit(_bridge_log, logging.WARNING, "bridge_refused", reason=reason)

    def why(self) -> str:
        origin = self.hub.public_origin()
        text = ("no browser session is connected. Load the app in a browser with "
                '<script src="%s/reticle.js"></script> in its dev HTML (the page must be on '
                "localhost or 127.0.0.1, or allow-listed with RETICLE_ALLOWED_ORIGINS and given the "
                "token), then call reticle_sessions again." % origin)
        if self.ever_connected:
            text = "every tab that connected has gone (%d seen since start). " % self.ever_connected + text
        if self.refusals:
            last = self.refusals[-1]
            text = "NOTE: the bridge refused a connection recently (%s: %s). " % (last["at"], last["reason"]) + text
        return text

    def resolve(self, session_id: Optional[str]) -> BrowserSession:
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
        ranked = sorted(self.sessions.values(), key=lambda s: (s.throttled(), s.last_seen_ms()))
        best, runner = ranked[0], ranked[1]
        if not best.throttled() and (runner.throttled() or runner.last_seen_ms() - best.last_seen_ms() > 1000):
            return best
        raise ToolError("multiple sessions connected — pass sessionId: %s" % ", ".join(
            "%s (%s)" % (s.id, s.url) for s in ranked), "pass sessionId")

    def attach(self, handler: "BridgeHandler", hello: dict) -> Tuple[Optional[BrowserSession], Optional[Tuple[int, str]]]:
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
            session.open_requests.clear()
            session.update_identity(hello)
            if old_handler is not None and old_handler is not handler:
                old_handler.replaced = True
                reason = ("session replaced by a newer connection claiming the same id (%s)" % sid)[:120]
                old_handler.close(1008, reason)
            _emit(_bridge_log, logging.INFO, "session_replaced", sessionId=sid, url=session.url)
        else:
            session = BrowserSession(self, handler, hello)
            self.sessions[sid] = session
            _emit(_bridge_log, logging.INFO, "session_connected", sessionId=sid, url=session.url)
        self.ever_connected += 1
        return session, None

    def detach(self, handler: "BridgeHandler") -> None:
        session = handler.session
        if session is None or session.handler is not handler:
            return
        session.handler = None
        session.fail_pending("the tab %s disconnected before the command answered" % session.id)
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
            self.departed[session.id] = (session, self.clock())
        _emit(_bridge_log, logging.INFO, "session_disconnected", sessionId=session.id)

    def _reap_departed(self, keep_ms: float = 60_000.0) -> None:
        now = self.clock()
        for sid, (_, gone_at) in list(self.departed.items()):
            if now - gone_at > keep_ms:
                del self.departed[sid]

    async def wait_reconnect(self, session_id: str, generation: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.sessions.get(session_id)
            if s is not None and s.generation > generation and s.handler is not None:
                return True
            await asyncio.sleep(0.05)
        return False

    def close_all(self) -> None:
        for s in list(self.sessions.values()):
            if s.handler is not None:
                s.handler.close(1001, "reticle daemon stopping")


###############################################################################
# Predicates & verdicts #######################################################
###############################################################################
# The grammar is data: the parser, its error messages and the
# reticle://predicates resource all come from _PREDICATE_KINDS.

_PREDICATE_KINDS: Dict[str, dict] = {}


def _predicate_grammar_doc() -> dict:
    return {"kinds": _PREDICATE_KINDS}


class Verdicts:
    """The predicate engine and the verdict rules (DESIGN section 7)."""

    def __init__(self, hub: "Hub") -> None:
        self.hub = hub

    async def wait_for(self, session: BrowserSession, args: dict) -> dict:
        raise ToolError("reticle_wait_for is not available in this build", "use reticle_observe")

    async def assert_(self, session: BrowserSession, args: dict) -> dict:
        raise ToolError("reticle_assert is not available in this build", "use reticle_observe")

    async def act_and_wait(self, session: BrowserSession, args: dict) -> dict:
        raise ToolError("reticle_act_and_wait is not available in this build", "use reticle_act")


###############################################################################
# HTTP handlers ###############################################################
###############################################################################


class _Guard:
    """The two-tier authorization of DESIGN section 5, for every route."""

    def __init__(self, hub: "Hub") -> None:
        self.hub = hub

    def presented_token(self, request: Any) -> Optional[str]:
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return auth[len("Bearer "):].strip()
        values = request.query_arguments.get("token")
        if values:
            return values[-1].decode("utf-8", "replace")
        return None

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
            return "the Host header %s does not name a loopback host" % (repr(raw_host) if raw_host else "is missing and")
        for name in ("Origin", "Referer"):
            value = request.headers.get(name)
            if value is None:
                continue
            if allowed_origins and _normalise_origin(value) in allowed_origins:
                continue
            if not _is_loopback_host(_origin_host(value)):
                return "the %s header %r is not a loopback page" % (name, value)
        return None

    def check_http(self, request: Any, allowed_origins: Tuple[str, ...] = ()) -> None:
        problem = self.loopback_problem(request, allowed_origins)
        if problem is None:
            return
        presented = self.presented_token(request)
        if self.token_ok(presented):
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


class _RateLimiter:
    """Token bucket per session key."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: Dict[str, List[float]] = {}

    def check(self, key: str) -> Optional[float]:
        """None when allowed, else the seconds until the next request is."""
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) > 10000:
                self._buckets.clear()
            bucket = self._buckets[key] = [self.burst, now]
        tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if tokens >= 1.0:
            bucket[0] = tokens - 1.0
            return None
        bucket[0] = tokens
        return (1.0 - tokens) / self.rate


@tornado.web.stream_request_body
class _BaseHandler(tornado.web.RequestHandler):
    """Guard, limits and JSON errors for every HTTP route."""

    allow_listed_origins = False  # /reticle.js also admits RETICLE_ALLOWED_ORIGINS pages

    def initialize(self, hub: "Hub") -> None:
        self.hub = hub

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.clear_header("Server")

    def session_key(self) -> str:
        sid = self.request.headers.get("Mcp-Session-Id")
        if sid and self.hub.signer.verify(sid):
            return sid
        sse = self.get_query_argument("sessionId", None)
        if sse and sse in self.hub.sse_streams:
            return "sse:" + sse
        return "addr:%s" % self.request.remote_ip

    async def prepare(self) -> None:
        self._chunks: List[bytes] = []
        self._size = 0
        self._body_timer = None
        try:
            self.hub.guard.check_http(self.request, self.hub.allowed_origins if self.allow_listed_origins else ())
            wait = self.hub.limiter.check(self.session_key())
            if wait is not None:
                raise _HttpRefusal(429, "rate limited",
                                   "more than %g requests/s (burst %g) for this session; retry after %.2f s"
                                   % (self.hub.limiter.rate, self.hub.limiter.burst, wait),
                                   {"Retry-After": str(max(1, int(wait + 0.999)))})
            length = self.request.headers.get("Content-Length")
            if length is not None:
                if not length.isdigit():
                    raise _HttpRefusal(400, "bad request", "Content-Length %r is not a number" % length)
                if int(length) > MAX_BODY_BYTES:
                    raise _HttpRefusal(413, "payload too large", "the body is %s bytes; at most %d are accepted"
                                       % (length, MAX_BODY_BYTES))
        except _HttpRefusal as refusal:
            self.refuse(refusal)
            return
        if self.request.method in ("POST", "PUT", "PATCH"):
            self._body_timer = tornado.ioloop.IOLoop.current().call_later(BODY_TIMEOUT_S, self._body_too_slow)

    def data_received(self, chunk: bytes) -> None:
        if self._finished:
            return
        self._size += len(chunk)
        if self._size > MAX_BODY_BYTES:
            self.refuse(_HttpRefusal(413, "payload too large", "the body is over %d bytes" % MAX_BODY_BYTES))
            return
        self._chunks.append(chunk)

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if not self._finished:
            self.refuse(_HttpRefusal(408, "request timeout",
                                     "the request body was not complete within %g s" % BODY_TIMEOUT_S))

    def body(self) -> bytes:
        if self._body_timer is not None:
            tornado.ioloop.IOLoop.current().remove_timeout(self._body_timer)
            self._body_timer = None
        return b"".join(self._chunks)

    def refuse(self, refusal: _HttpRefusal) -> None:
        if self._finished:
            return
        self.clear()
        self.set_status(refusal.status)
        for k, v in refusal.headers.items():
            self.set_header(k, v)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        if refusal.status in (408, 413) and self.request.method in ("POST", "PUT", "PATCH"):
            self.set_header("Connection", "close")
            self.request.connection.no_keep_alive = True
        _emit(_log, logging.INFO, "http_refused", status=refusal.status, path=self.request.path,
              peer=self.request.remote_ip, detail=refusal.detail)
        self.finish(_dumps({"error": refusal.error, "detail": refusal.detail}))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "application/json; charset=utf-8")
        detail = self._reason
        if self.settings.get("serve_traceback") and "exc_info" in kwargs:
            import traceback
            detail = "".join(traceback.format_exception(*kwargs["exc_info"]))
        self.finish(_dumps({"error": self._reason.lower(), "detail": detail}))

    def on_finish(self) -> None:
        if self._body_timer is not None:
            tornado.ioloop.IOLoop.current().remove_timeout(self._body_timer)
            self._body_timer = None

    def send_json(self, obj: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(_dumps(obj))


class NotFoundHandler(_BaseHandler):
    """Every unknown path: a JSON 404 (after the guard)."""

    def _not_found(self, *args: Any) -> None:
        self.send_json({"error": "not found", "detail": "no route %s %s; see /openapi.json"
                        % (self.request.method, self.request.path)}, 404)

    get = post = put = delete = patch = head = options = _not_found


class StatusHandler(_BaseHandler):
    def get(self) -> None:
        self.send_json(self.hub.status())


class OpenApiHandler(_BaseHandler):
    def get(self) -> None:
        self.send_json(_openapi(self.hub))


class SdkHandler(_BaseHandler):
    """GET /reticle.js: the in-page SDK (no token inside, ever)."""

    allow_listed_origins = True

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Content-Type-Options", "nosniff")

    def get(self) -> None:
        self.set_header("Content-Type", "application/javascript; charset=utf-8")
        self.write(self.hub.sdk_source())


class StopHandler(_BaseHandler):
    """POST /stop: a planned stop; needs the token even from loopback."""

    def post(self) -> None:
        if not self.hub.guard.token_ok(self.hub.guard.presented_token(self.request)):
            self.refuse(_HttpRefusal(403, "forbidden", "stopping the daemon needs the pairing token "
                                     "(Authorization: Bearer <token>); `reticle stop` sends it"))
            return
        self.send_json({"stopping": True, "pid": os.getpid()}, 202)
        self.hub.request_stop("stop requested")


class _SseMixin:
    """Server-Sent Events on a held-open GET."""

    def sse_open(self) -> None:
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache, no-transform")
        self.set_header("Connection", "keep-alive")
        self.set_header("X-Accel-Buffering", "no")
        self._sse_closed = asyncio.Event()
        self._sse_shutdown: Optional[str] = None

    async def sse_write(self, text: str) -> bool:
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
        if self._sse_shutdown is not None and not self.request.connection.stream.closed():
            await self.sse_write("event: shutdown\ndata: %s\n\n" % _dumps({"reason": self._sse_shutdown}))
        if not self._finished and not self.request.connection.stream.closed():
            self.finish()

    def sse_stop(self, reason: str) -> None:
        self._sse_shutdown = reason
        self._sse_closed.set()

    def on_connection_close(self) -> None:
        closed = getattr(self, "_sse_closed", None)
        if closed is not None:
            closed.set()


class SseHandler(_SseMixin, _BaseHandler):
    """GET /mcp/sse: one MCP session per stream (seeds/http-transport.md)."""

    async def get(self) -> None:
        if not self.hub.mcp_ready:
            self.refuse(_HttpRefusal(503, "MCP server not ready",
                                     "the daemon is up but not serving MCP yet (or is stopping); retry"))
            return
        self.sse_open()
        self.sse_id = str(uuid.uuid4())
        self.ctx = CallContext("sse", "sse:" + self.sse_id)
        self.hub.sse_streams[self.sse_id] = self
        _emit(_log, logging.INFO, "mcp_client_connected", transport="sse", session=self.sse_id)
        try:
            if await self.sse_write("event: endpoint\ndata: /mcp/message?sessionId=%s\n\n" % self.sse_id):
                await self.sse_hold()
        finally:
            self.hub.sse_streams.pop(self.sse_id, None)
            _emit(_log, logging.INFO, "mcp_client_disconnected", transport="sse", session=self.sse_id)

    async def deliver(self, message: Any) -> None:
        await self.sse_write("event: message\ndata: %s\n\n" % _dumps(message))


class SseMessageHandler(_BaseHandler):
    """POST /mcp/message?sessionId=: 202 now, the reply on the stream."""

    async def post(self) -> None:
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
            message = json.loads(self.body())
        except ValueError as exc:
            self.refuse(_HttpRefusal(400, "invalid JSON", "the body is not JSON (%s); send one JSON-RPC "
                                     "message per POST" % exc))
            return
        if not isinstance(message, dict):
            self.refuse(_HttpRefusal(400, "invalid message", "send one JSON-RPC message (an object) per POST"))
            return
        self.set_status(202)
        self.finish("Accepted")
        self.hub.spawn(self._answer(stream, message))

    async def _answer(self, stream: SseHandler, message: dict) -> None:
        reply = await self.hub.dispatcher.handle(message, stream.ctx)
        if reply is not None:
            await stream.deliver(reply)


class StreamableHandler(_SseMixin, _BaseHandler):
    """POST/GET/DELETE /mcp and POST/GET / (seeds/http-mcp-streamable.md)."""

    def initialize(self, hub: "Hub", root: bool = False) -> None:
        self.hub = hub
        self.root = root

    def _session(self, required: bool) -> Tuple[bool, Optional[str]]:
        sid = self.request.headers.get("Mcp-Session-Id")
        if not sid:
            if required:
                self.refuse(_HttpRefusal(400, "missing Mcp-Session-Id",
                                         "GET %s needs the Mcp-Session-Id header that initialize returned"
                                         % self.request.path))
                return False, None
            return True, None
        if not self.hub.signer.verify(sid):
            self.refuse(_HttpRefusal(404, "MCP_SESSION_UNKNOWN",
                                     "this machine did not issue that Mcp-Session-Id; initialize again "
                                     "without it"))
            return False, None
        return True, sid

    async def post(self) -> None:
        ok, sid = self._session(required=False)
        if not ok:
            return
        try:
            payload = json.loads(self.body())
        except ValueError as exc:
            self.send_json(_rpc_error(None, -32700, "Parse error: %s" % exc))
            return
        ctx = CallContext("streamable-http", sid or "addr:%s" % self.request.remote_ip)
        if sid:
            self.hub.touch_client(sid)
        reply, _ = await self.hub.dispatcher.handle_payload(payload, ctx)
        if reply is None:
            self.set_status(204)
            self.finish()
            return
        if sid is None and _has_initialize_result(payload, reply):
            new_sid = self.hub.signer.mint()
            self.hub.touch_client(new_sid)
            self.set_header("Mcp-Session-Id", new_sid)
        self.send_json(reply)

    async def get(self) -> None:
        ok, sid = self._session(required=True)
        if not ok:
            return
        self.sse_open()
        self.hub.get_streams.add(self)
        try:
            if await self.sse_write(": stream open; reticle sends no server-initiated messages\n\n"):
                await self.sse_hold()
        finally:
            self.hub.get_streams.discard(self)

    def delete(self) -> None:
        if self.root:
            raise tornado.web.HTTPError(405)
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


class BridgeHandler(tornado.websocket.WebSocketHandler):
    """GET /reticle: the browser bridge (hello, event(s), command, command_result)."""

    def initialize(self, hub: "Hub") -> None:
        self.hub = hub
        self.session: Optional[BrowserSession] = None
        self.replaced = False
        self.needs_token = True
        self._hello_timer: Any = None
        self._counted = False

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")

    def _refuse(self, status: int, detail: str) -> None:
        self.hub.bridge.note_refusal(detail)
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(_dumps({"error": "forbidden", "detail": detail}))

    def prepare(self) -> None:
        guard = self.hub.guard
        origin = self.request.headers.get("Origin")
        if origin is not None and not guard.ws_origin_allowed(origin):
            self._refuse(403, "the origin %r is not allowed at the bridge; pages must be on localhost or "
                              "listed in RETICLE_ALLOWED_ORIGINS" % origin)
            return
        token_ok = guard.token_ok(guard.presented_token(self.request))
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

    def check_origin(self, origin: str) -> bool:
        return self.hub.guard.ws_origin_allowed(origin)

    def get_compression_options(self) -> Optional[dict]:
        return None

    def open(self) -> None:
        bridge = self.hub.bridge
        if bridge.pending_handshakes >= MAX_PENDING_HANDSHAKES:
            bridge.note_refusal("too many pending handshakes (%d)" % MAX_PENDING_HANDSHAKES)
            self.close(1013, "too many pending handshakes")
            return
        bridge.pending_handshakes += 1
        self._counted = True
        self._hello_timer = tornado.ioloop.IOLoop.current().call_later(
            self.hub.hello_timeout_s, self._hello_timeout)

    def _hello_timeout(self) -> None:
        self._hello_timer = None
        if self.session is None:
            self.hub.bridge.note_refusal("a socket sent no hello within %g s" % self.hub.hello_timeout_s)
            self.close(1008, "hello timeout")

    def _end_handshake(self) -> None:
        if self._hello_timer is not None:
            tornado.ioloop.IOLoop.current().remove_timeout(self._hello_timer)
            self._hello_timer = None
        if self._counted:
            self._counted = False
            self.hub.bridge.pending_handshakes -= 1

    def close(self, code: Optional[int] = None, reason: Optional[str] = None) -> None:
        super().close(code, _ws_reason(reason) if reason else reason)

    def on_message(self, message: Any) -> None:
        size = len(message)
        if isinstance(message, bytes):
            self.close(1008, "invalid message: binary frames are not accepted")
            return
        try:
            msg = json.loads(message)
        except ValueError:
            self.close(1008, "invalid message: not JSON")
            return
        if not isinstance(msg, dict):
            self.close(1008, "invalid message: expected a JSON object")
            return
        kind = msg.get("kind")
        session = self.session
        if session is None:
            if kind != "hello":
                self.close(1008, "invalid message: the first message must be a hello")
                return
            self._hello(msg)
            return
        if kind == "events":
            events = msg.get("events")
            if isinstance(events, list):
                session.ingest(events, size)
            else:
                session.ingest([None], size)
        elif kind == "event":
            session.ingest([msg.get("event")], size)
        elif kind == "command_result":
            session.last_seen = self.hub.clock()
            session.resolve_command(msg)
        elif kind == "hello":
            if msg.get("sessionId") != session.id:
                self.close(1008, "hello already received")
                return
            session.update_identity(msg)
        else:
            session.ingest([{"type": "blind-spot", "data": {
                "reason": "unknown-message-kind", "count": 1,
                "detail": "the page sent a message of kind %r, which this daemon ignores" % str(kind)[:40]}}], 0)

    def _hello(self, msg: dict) -> None:
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
        if self.needs_token and not self.hub.guard.token_ok(msg.get("token") if isinstance(msg.get("token"), str) else None):
            self.hub.bridge.note_refusal("authentication failed for %s (a page off loopback, or a client "
                                         "without an Origin, needs the pairing token in its hello)"
                                         % (self.request.headers.get("Origin") or "a client sending no Origin"))
            self.close(1008, "authentication failed")
            return
        self._end_handshake()
        session, refusal = self.hub.bridge.attach(self, msg)
        if refusal is not None:
            self.close(*refusal)
            return
        self.session = session

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
    (r"/status", StatusHandler, {}, "/status",
     {"get": ("status", "Daemon status (cheap JSON)", {"200": "status JSON"})}),
    (r"/openapi\.json", OpenApiHandler, {}, "/openapi.json",
     {"get": ("openapi", "This document", {"200": "OpenAPI 3.1 JSON"})}),
    (r"/reticle\.js", SdkHandler, {}, "/reticle.js",
     {"get": ("sdk", "The in-page SDK (application/javascript, ETag)",
              {"200": "the SDK", "304": "not modified (If-None-Match)"})}),
    (r"/reticle", BridgeHandler, {}, "/reticle",
     {"get": ("bridge", "WebSocket upgrade for the in-page SDK",
              {"101": "switching protocols", "400": "not a WebSocket upgrade", "403": "origin or host refused"})}),
    (r"/mcp/sse", SseHandler, {}, "/mcp/sse",
     {"get": ("mcpSse", "Open an MCP HTTP+SSE session; the first frame is `endpoint`",
              {"200": "text/event-stream", "503": "MCP server not ready"})}),
    (r"/mcp/message", SseMessageHandler, {}, "/mcp/message",
     {"post": ("mcpMessage", "Send one JSON-RPC message into an SSE session; the reply arrives on the stream",
               {"202": "accepted", "400": "missing sessionId, or not one JSON-RPC message",
                "404": "session not found", "503": "MCP server not ready"})}),
    (r"/mcp", StreamableHandler, {}, "/mcp",
     {"post": ("mcpPost", "Send MCP JSON-RPC messages (one or a batch)",
               {"200": "response(s); Mcp-Session-Id on initialize", "204": "notifications only",
                "404": "MCP_SESSION_UNKNOWN"}),
      "get": ("mcpGet", "Server-to-client stream of SSE comments",
              {"200": "text/event-stream", "400": "missing Mcp-Session-Id", "404": "MCP_SESSION_UNKNOWN"}),
      "delete": ("mcpDelete", "End a session: not supported", {"405": "always, no body"})}),
    (r"/stop", StopHandler, {}, "/stop",
     {"post": ("stop", "Planned stop (needs the pairing token)", {"202": "stopping"})}),
    (r"/", StreamableHandler, {"root": True}, "/",
     {"post": ("mcpRootPost", "Alias of POST /mcp",
               {"200": "response(s); Mcp-Session-Id on initialize", "204": "notifications only",
                "404": "MCP_SESSION_UNKNOWN"}),
      "get": ("mcpRootGet", "Alias of GET /mcp",
              {"200": "text/event-stream", "400": "missing Mcp-Session-Id", "404": "MCP_SESSION_UNKNOWN"})}),
]


def _openapi(hub: "Hub") -> dict:
    paths: Dict[str, dict] = {}
    for _, _, _, path, methods in _ROUTES:
        item = paths.setdefault(path, {})
        for method, (op_id, summary, codes) in methods.items():
            responses = {code: {"description": text} for code, text in codes.items()}
            for code, text in _MIDDLEWARE_CODES.items():
                responses.setdefault(code, {"description": text})
            item[method] = {"operationId": op_id, "summary": summary, "responses": responses}
            if path in ("/mcp", "/") and method in ("post", "get"):
                item[method]["parameters"] = [{"name": "Mcp-Session-Id", "in": "header",
                                               "required": method == "get", "schema": {"type": "string"}}]
    return {"openapi": "3.1.0",
            "info": {"title": "Reticle daemon", "version": __version__,
                     "description": "Generated from the route table. Documents behaviour; never "
                                    "validates requests."},
            "servers": [{"url": hub.public_origin()}],
            "paths": paths}


class Hub:
    """All of one daemon's state.  make_app() serves it; nothing is global."""

    def __init__(self, state_dir: Optional[str] = None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 token: Optional[str] = None, allowed_origins: Optional[List[str]] = None,
                 rate: Optional[Tuple[float, float]] = None, scheme: str = "http") -> None:
        self.state = StateDir(state_dir)
        self.host = host
        self.port = port
        self.scheme = scheme
        self._token = token
        self._token_cache: Tuple[float, str] = (-1.0, "")
        self.signer = SessionSigner(self.state.machine_key())
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
        self.dispatcher = McpDispatcher(self.registry, self.call_tool, self.read_live)
        self.bridge = Bridge(self)
        self.verdicts = Verdicts(self)
        self.guard = _Guard(self)
        self.sse_streams: Dict[str, SseHandler] = {}
        self.get_streams: set = set()
        self.clients: Dict[str, float] = {}
        self.mcp_ready = True
        self.tasks: set = set()
        self.stop_event: Optional[asyncio.Event] = None
        self.stop_reason = ""
        self._sdk: Optional[str] = None

    # -- clock and ids --------------------------------------------------------
    def clock(self) -> float:
        """Milliseconds since the daemon started: the cursor clock."""
        return round((time.monotonic() - self._t0) * 1000.0, 3)

    def token(self) -> str:
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
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = "[%s]" % host
        return "%s://%s:%d" % (self.scheme, host, self.port)

    # -- tasks ------------------------------------------------------------------
    def spawn(self, coro: Awaitable) -> "asyncio.Task":
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def touch_client(self, session_id: str) -> None:
        self.clients[session_id] = time.monotonic()
        if len(self.clients) > 1000:
            horizon = time.monotonic() - 600
            self.clients = {k: v for k, v in self.clients.items() if v > horizon}

    # -- MCP ----------------------------------------------------------------------
    async def call_tool(self, name: str, args: dict, ctx: CallContext) -> dict:
        tool = self.registry.get(name)
        try:
            return _tool_result(await tool.handler(self, args, ctx))
        except ToolError as exc:
            return _tool_result(exc.payload(), is_error=True)
        except Exception as exc:
            _emit(_log, logging.ERROR, "tool_crashed", tool=name, error=repr(exc))
            return _tool_result({"error": "internal error in %s: %s" % (name, exc),
                                 "recovery": "this is a Reticle bug; the daemon keeps serving"}, True)

    async def read_live(self, uri: str) -> Any:
        return await _tool_sessions(self, {}, CallContext("resource", "resource"))

    # -- status ---------------------------------------------------------------------
    def status(self) -> dict:
        horizon = time.monotonic() - 600
        out = {"running": True, "version": __version__, "pid": os.getpid(), "port": self.port,
               "startedAt": _wall_iso(self.started_at), "uptimeMs": int(self.clock()),
               "sessions": [s.describe() for s in self.bridge.live()],
               "mcpClients": len(self.sse_streams) + sum(1 for v in self.clients.values() if v > horizon),
               "devices": []}
        if not out["sessions"]:
            out["why"] = self.bridge.why()
        return out

    def sdk_source(self) -> str:
        if self._sdk is None:
            config = {"version": __version__, "protocolVersion": BRIDGE_PROTOCOL,
                      "maxMessageBytes": WS_MAX_MESSAGE_BYTES}
            self._sdk = (_SDK_JS.replace("__RETICLE_VERSION__", __version__)
                         .replace("/*__RETICLE_CONFIG__*/null", _dumps(config)))
        return self._sdk

    # -- stopping -------------------------------------------------------------------
    def request_stop(self, reason: str) -> None:
        self.stop_reason = reason
        if self.stop_event is not None:
            self.stop_event.set()

    async def shutdown(self, reason: str) -> None:
        """Planned stop: shutdown frame on every stream, close every socket."""
        self.mcp_ready = False
        for stream in list(self.sse_streams.values()) + list(self.get_streams):
            stream.sse_stop(reason)
        self.bridge.close_all()
        for _ in range(20):
            if not self.sse_streams and not self.get_streams:
                break
            await asyncio.sleep(0.01)


def make_app(hub: Optional[Hub] = None, **settings: Any) -> tornado.web.Application:
    """The one factory: tests, the CLI and host applications all use it."""
    hub = hub if hub is not None else Hub()
    routes = [tornado.web.url(path, handler, dict(hub=hub, **extra)) for path, handler, extra, _, _ in _ROUTES]
    settings.setdefault("websocket_ping_interval", WS_PING_INTERVAL_S)
    settings.setdefault("websocket_max_message_size", WS_MAX_MESSAGE_BYTES)
    settings.setdefault("default_handler_class", NotFoundHandler)
    settings.setdefault("default_handler_args", {"hub": hub})
    settings.setdefault("compress_response", False)
    settings.setdefault("log_function", _log_request)
    app = tornado.web.Application(routes, **settings)
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


def _tls_context(state: StateDir, certfile: Optional[str], keyfile: Optional[str]) -> Tuple[Any, str]:
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
            if isinstance(data, dict) and data.get("running") is True and "version" in data:
                data["state"] = "daemon"
                data["scheme"] = scheme
                return data
        except Exception:
            continue
    return {"state": "foreign"}


async def _http(method: str, port: int, path: str, body: Optional[bytes] = None,
                headers: Optional[dict] = None, timeout: float = 10.0,
                scheme: str = "http") -> tornado.httpclient.HTTPResponse:
    client = tornado.httpclient.AsyncHTTPClient(force_instance=True)
    try:
        return await client.fetch(
            "%s://127.0.0.1:%d%s" % (scheme, port, path), method=method, body=body, headers=headers,
            request_timeout=timeout, connect_timeout=min(timeout, 2.0), raise_error=False,
            validate_cert=False, allow_nonstandard_methods=True)
    finally:
        client.close()


def _daemon_record(state: StateDir, port: int) -> Optional[dict]:
    try:
        with open(state.file("daemon-%d.json" % port)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


async def _serve(host: str, port: int, state_dir: Optional[str] = None, tls: bool = False,
                 certfile: Optional[str] = None, keyfile: Optional[str] = None,
                 ready: Optional[Callable[[Hub], None]] = None) -> int:
    if not _is_loopback_host(host) and not os.environ.get("RETICLE_TOKEN", "").strip():
        raise ConfigError("binding to %s reaches beyond this machine, so Reticle needs a pairing token: "
                          "set RETICLE_TOKEN to a long random string (for example `export RETICLE_TOKEN=$(python3 "
                          "-c 'import secrets; print(secrets.token_hex(24))')`) and start again." % host)
    hub = Hub(state_dir=state_dir, host=host, port=port, scheme="https" if tls or certfile else "http")
    hub.token()  # create the token file before anyone asks
    ssl_ctx = None
    if tls or certfile:
        ssl_ctx, fingerprint = _tls_context(hub.state, certfile, keyfile)
        _emit(_log, logging.INFO, "tls_enabled", sha256=fingerprint)
        sys.stderr.write("reticle: serving HTTPS/WSS; certificate SHA-256 fingerprint %s\n" % fingerprint)
    try:
        sockets = tornado.netutil.bind_sockets(port, host)
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES) or getattr(exc, "winerror", None) == 10048:
            probe = await _probe_port(port)
            sentence = _port_owner_sentence(port, probe) if exc.errno == errno.EADDRINUSE else (
                "port %d on %s cannot be bound (%s)." % (port, host, exc.strerror))
            sys.stderr.write("reticle: %s\n" % sentence)
            _emit(_log, logging.ERROR, "reticle_daemon_start_failed", port=port, reason=sentence)
            return 1
        raise ConfigError("cannot listen on %s:%d (%s)" % (host, port, exc.strerror or exc))
    hub.port = sockets[0].getsockname()[1]
    if host == DEFAULT_HOST and not os.environ.get("RETICLE_HOST"):
        try:
            sockets += tornado.netutil.bind_sockets(hub.port, "::1")
        except (OSError, ValueError):
            pass  # no IPv6 loopback here; 127.0.0.1 still serves
    app = make_app(hub)
    server = tornado.httpserver.HTTPServer(app, ssl_options=ssl_ctx, xheaders=False,
                                           max_body_size=MAX_BODY_BYTES + (1 << 20),
                                           body_timeout=BODY_TIMEOUT_S + 5, idle_connection_timeout=3600)
    server.add_sockets(sockets)
    stop = asyncio.Event()
    hub.stop_event = stop
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, hub.request_stop, "signal %s" % sig.name)
        except (NotImplementedError, RuntimeError, ValueError):
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(hub.request_stop, "signal"))
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

    def __init__(self, port: int, state: StateDir) -> None:
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
            if not _pid_alive(holder) or time.time() - os.path.getmtime(lock) > 30:
                os.unlink(lock)
                return await self._spawn_and_wait()
        try:
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

    async def _post(self, message: dict) -> Tuple[Optional[dict], Optional[str]]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        resp = await _http("POST", self.port, "/mcp", _dumps(message).encode(), headers, timeout=120,
                           scheme=self.scheme)
        if resp.code == 599 and resp.error is not None:
            raise resp.error
        if resp.code == 404 and b"MCP_SESSION_UNKNOWN" in (resp.body or b""):
            self.session_id = None
            return None, "session"
        if resp.code != 200:
            raise ToolError("the daemon answered HTTP %d: %s" % (resp.code, (resp.body or b"")[:300].decode(
                "utf-8", "replace")), "retry the call")
        return json.loads(resp.body), resp.headers.get("Mcp-Session-Id")

    async def _initialize(self) -> None:
        self._ids += 1
        reply, sid = await self._post({"jsonrpc": "2.0", "id": "proxy-init-%d" % self._ids, "method": "initialize",
                                       "params": {"protocolVersion": LATEST_PROTOCOL, "capabilities": {},
                                                  "clientInfo": {"name": "reticle-mcp-proxy", "version": __version__}}})
        self.session_id = sid

    async def request(self, method: str, params: dict) -> Any:
        async with self._lock:
            for attempt in range(2):
                try:
                    if self.session_id is None:
                        await self._initialize()
                    break
                except (ConnectionRefusedError, OSError, tornado.iostream.StreamClosedError):
                    if attempt:
                        raise
                    await self.ensure()
        self._ids += 1
        message = {"jsonrpc": "2.0", "id": "proxy-%d" % self._ids, "method": method, "params": params}
        try:
            reply, status = await self._post(message)
        except (ConnectionRefusedError, tornado.iostream.StreamClosedError, OSError) as exc:
            self.session_id = None
            raise ToolError("the daemon connection dropped (%s) before this call was answered; it may not "
                            "have completed" % exc.__class__.__name__, "retry the call; a new daemon starts if needed")
        if reply is None:  # the daemon forgot our session (a new machine key?): start over once
            await self._initialize()
            reply, _ = await self._post(message)
        if "error" in reply:
            err = reply["error"]
            raise RpcError(err.get("code", -32603), err.get("message", "error"), err.get("data"))
        return reply.get("result")

    async def call_tool(self, name: str, args: dict, ctx: CallContext) -> dict:
        try:
            return await self.request("tools/call", {"name": name, "arguments": args})
        except ToolError as exc:
            return _tool_result(exc.payload(), True)

    async def read_live(self, uri: str) -> Any:
        probe = await _probe_port(self.port, timeout=0.5)
        if probe["state"] != "daemon":
            return {"sessions": [], "why": "no Reticle daemon runs on port %d yet; the first tools/call "
                                            "starts one" % self.port}
        self.scheme = probe.get("scheme", "http")
        result = await self.request("resources/read", {"uri": uri})
        return json.loads(result["contents"][0]["text"])


async def _mcp_stdio(port: int, state: StateDir) -> int:
    """`reticle mcp`: newline-delimited JSON-RPC on stdin/stdout."""
    link = _DaemonLink(port, state)
    dispatcher = McpDispatcher(_build_registry(), link.call_tool, link.read_live)
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

    async def answer(line: bytes) -> None:
        try:
            payload = json.loads(line)
        except ValueError as exc:
            reply: Any = _rpc_error(None, -32700, "Parse error: %s" % exc)
        else:
            reply, _ = await dispatcher.handle_payload(payload, CallContext("stdio", "stdio"))
        if reply is not None:
            async with write_lock:
                out.write(_dumps(reply).encode("utf-8") + b"\n")
                out.flush()

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
# CLI #########################################################################
###############################################################################


def _build_parser() -> argparse.ArgumentParser:
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
        lines.append("  %s  %s%s" % (s.get("sessionId"), s.get("url"), "  (throttled)" if s.get("throttled") else ""))
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


async def _cli_stop(port: int, state: StateDir) -> int:
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


def main(argv: Optional[List[str]] = None) -> int:
    """The CLI.  Returns the exit code; never calls sys.exit."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_usage(sys.stderr)
        sys.stderr.write("reticle: choose a command: serve, mcp, status, stop or token\n")
        return 2
    try:
        state = StateDir()
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
        port = _resolve_port(args.port)
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
    except ConfigError as exc:
        sys.stderr.write("reticle: %s\n" % exc)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


###############################################################################
# Embedded assets #############################################################
###############################################################################
# _SDK_JS: the in-page SDK, served at GET /reticle.js by SdkHandler.  The
# daemon replaces __RETICLE_VERSION__ and the config token; it never holds
# the pairing token.

_SDK_JS = r"""/*! reticle-sdk __RETICLE_VERSION__ */
(function () {
  "use strict";
  var CONFIG = /*__RETICLE_CONFIG__*/null;
  if (typeof window === "undefined" || window.reticle) { return; }
  window.reticle = { version: (CONFIG && CONFIG.version) || "dev" };
})();
"""


###############################################################################
# __main__ guard ##############################################################
###############################################################################

if __name__ == "__main__":
    sys.exit(main())
