"""Utilities.

Small pieces every layer uses: JSON in and out (bounded, no NaN, secrets redacted), clocks,
hosts and origins, the state directory, logging formats and HTML escaping.
"""

from __future__ import annotations

import base64
import datetime
import html
import ipaddress
import json
import logging
import os
import re
import secrets
import sys
import time
import urllib.parse
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from .constants import MAX_BATCH, MAX_JSON_DEPTH, RATE_DEFAULT, _emit, _log
from .errors import ConfigError, ToolError


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


_SCRIPT_SLOT = re.compile(r"/\*__([A-Z][A-Z_]*[A-Z])__\*/(?:null|''|\"\"|\[\])")


def _script_with(source: str, **values: Any) -> str:
    """An in-page script of src/sdk/ with each of its slots, ``/*__NAME__*/`` and a default literal (so
    the file is JavaScript a linter reads), holding ``values[name]`` as JSON."""
    return _SCRIPT_SLOT.sub(lambda m: _dumps(values[m.group(1).lower()]), source)


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


async def _quietly(job: Awaitable) -> None:
    """Run a background job whose failure (a tab gone, a browser gone) only needs a log line."""
    try:
        await job
    except ToolError as exc:
        _emit(_log, logging.INFO, "background_job_failed", why=exc.error[:300])


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


def _origin_of(url: Any) -> str:
    """scheme://host[:port] of a URL, lower-cased; '' for one that has none."""
    try:
        parts = urllib.parse.urlsplit(str(url or ""))
    except ValueError:
        return ""
    if not parts.scheme or not parts.netloc:
        return ""
    return "%s://%s" % (parts.scheme.lower(), parts.netloc.lower())


class _Markup(str):
    """Text that is already HTML (built by _html_of, or a constant of this module): put in as it is."""


# what XML 1.0 cannot hold (C0 controls but tab, newline and return; U+FFFE and U+FFFF; lone surrogates):
# page text with one of them made the image/svg+xml timeline fail to parse
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _html_of(template: str, *values: Any) -> _Markup:
    """`template` (HTML written here, `%s` slots only) with each value put in escaped, unless it is
    _Markup that _html_of built: the one way the HTML report and the timelines' SVG are made, so no
    field of a results file or text of a page, whatever it holds, reaches them as markup; a character
    XML cannot hold becomes U+FFFD, so the SVG stays well-formed."""
    return _Markup(template % tuple(v if isinstance(v, _Markup) else _NOT_XML.sub(
        "\ufffd", html.escape(str(v), quote=True)) for v in values))


def _html_join(pieces: List[_Markup]) -> _Markup:
    return _Markup("".join(pieces))


def _write_private(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _file_uri(path: str) -> str:
    """A file:// URI of an absolute local path (RFC 8089), without importing pathlib for it."""
    path = os.path.abspath(path).replace(os.sep, "/")
    return "file://" + urllib.parse.quote(path if path.startswith("/") else "/" + path)
