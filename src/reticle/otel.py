"""OpenTelemetry.

The daemon's OTLP/HTTP receiver: protobuf and JSON payloads read without a dependency, spans turned
into server records, and traces stitched into the tab that made them.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import math
import os
import re
import time
import urllib.parse
from typing import Any, Awaitable, Dict, Iterator, List, Optional, Protocol, Set, Tuple

from .bridge import _Bridge
from .constants import MAX_BODY_BYTES
from .devices import _DeviceManager
from .errors import _HttpRefusal, _PbError, _SpanRefused
from .faults import _Faults
from .middleware import _scrub_server
from .otel_writes import _db_kind, _db_label, _db_learned, _db_span, _otel_writes
from .server_records import _clean_server_record, _clean_writes
from .stitching import _server_sender_refused
from .tab import _BrowserSession
from .tying import TIED_BY, _fact, _origin_key, _Ties, _url_origin
from .util import _loads, _short


class _OtelHost(Protocol):
    """What the OpenTelemetry receiver asks of the daemon (the Hub): its tabs (live and departed), its
    devices and their faults (a device's documents get trace context once spans arrive), the ties of
    records that carry no mark to the tabs' document requests (tying.py), its clock and tasks it holds."""

    @property
    def bridge(self) -> _Bridge: ...

    @property
    def devices(self) -> _DeviceManager: ...

    @property
    def faults(self) -> _Faults: ...

    @property
    def ties(self) -> _Ties: ...

    def clock(self) -> float: ...

    def spawn(self, coro: Awaitable) -> "asyncio.Task": ...


# ---- OpenTelemetry: server records from any stack's spans (OTLP/HTTP, W3C trace context) ----
# The SDK's one-use server mark is 32 hex digits, the size of a W3C trace id: each marked same-origin
# fetch/XHR also carries `traceparent: 00-<mark>-<random parent>-01`, which stock OpenTelemetry server
# instrumentation continues.  The exporter posts the spans to /v1/traces (and error logs to /v1/logs)
# with the pairing token; a trace id lands in a tab only when the daemon issued it to that tab as a
# mark, once, and its SERVER span becomes the record the Python middleware would have made.
# The protobuf reader is hand-written: OTLP needs a few fields of some twenty messages, and a protobuf
# library would be a fourth runtime dependency.

OTEL_MEDIA = ("application/json", "application/x-protobuf")
OTEL_INFLATED_CAP = 4 * MAX_BODY_BYTES   # a gzip body may inflate to this much; past it, 413
OTEL_HELD_SPANS = 5000           # spans of issued traces waiting for their SERVER span, at most
OTEL_DONE_KEPT = 512             # recently stitched traces still open to late child spans and logs
OTEL_KEPT_SPANS = 400            # spans of each such trace kept to read its writes again
OTEL_MAX_DEPTH = 16              # nesting of AnyValue arrays/maps accepted
OTEL_LOOSE_SPANS = 2000          # spans of traces no tab was issued, held for their SERVER span (tying.py), at most


# message -> {field number: (JSON-mapping name, kind, repeated)}; kind is a message name or a scalar:
# str, hex (bytes as hex, ids), b64 (bytes), int (varint), i64 (varint int64, as a string), bool,
# u64 (fixed64, as a string), double (fixed64)
_PB_MESSAGES: Dict[str, Dict[int, Tuple[str, str, bool]]] = {
    "TracesRequest": {1: ("resourceSpans", "ResourceSpans", True)},
    "LogsRequest": {1: ("resourceLogs", "ResourceLogs", True)},
    "ResourceSpans": {1: ("resource", "Resource", False), 2: ("scopeSpans", "ScopeSpans", True)},
    "ResourceLogs": {1: ("resource", "Resource", False), 2: ("scopeLogs", "ScopeLogs", True)},
    "Resource": {1: ("attributes", "KeyValue", True)},
    "ScopeSpans": {1: ("scope", "Scope", False), 2: ("spans", "Span", True)},
    "ScopeLogs": {1: ("scope", "Scope", False), 2: ("logRecords", "LogRecord", True)},
    "Scope": {1: ("name", "str", False), 2: ("version", "str", False)},
    "Span": {1: ("traceId", "hex", False), 2: ("spanId", "hex", False), 4: ("parentSpanId", "hex", False),
             5: ("name", "str", False), 6: ("kind", "int", False), 7: ("startTimeUnixNano", "u64", False),
             8: ("endTimeUnixNano", "u64", False), 9: ("attributes", "KeyValue", True),
             11: ("events", "Event", True), 15: ("status", "Status", False)},
    "Event": {1: ("timeUnixNano", "u64", False), 2: ("name", "str", False), 3: ("attributes", "KeyValue", True)},
    "Status": {2: ("message", "str", False), 3: ("code", "int", False)},
    "LogRecord": {1: ("timeUnixNano", "u64", False), 2: ("severityNumber", "int", False),
                  3: ("severityText", "str", False), 5: ("body", "AnyValue", False),
                  6: ("attributes", "KeyValue", True), 9: ("traceId", "hex", False), 10: ("spanId", "hex", False)},
    "KeyValue": {1: ("key", "str", False), 2: ("value", "AnyValue", False)},
    "AnyValue": {1: ("stringValue", "str", False), 2: ("boolValue", "bool", False), 3: ("intValue", "i64", False),
                 4: ("doubleValue", "double", False), 5: ("arrayValue", "ArrayValue", False),
                 6: ("kvlistValue", "KeyValueList", False), 7: ("bytesValue", "b64", False)},
    "ArrayValue": {1: ("values", "AnyValue", True)},
    "KeyValueList": {1: ("values", "KeyValue", True)},
}
_PB_WIRE = {"int": 0, "i64": 0, "bool": 0, "u64": 1, "double": 1}  # every other kind is length-delimited (2)


def _pb_varint(buf: memoryview, i: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf):
            raise _PbError("a varint runs past the end of its message")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7
        if shift >= 70:
            raise _PbError("a varint longer than 10 bytes")


def _pb_fields(buf: memoryview) -> Iterator[Tuple[int, int, Any]]:
    """(field number, wire type, value) of each field of one message: an int for varint, fixed64 and
    fixed32 fields, a memoryview for length-delimited ones.  Groups (wire types 3, 4) are refused."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _pb_varint(buf, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise _PbError("field number 0 at byte %d" % i)
        if wire == 0:
            value, i = _pb_varint(buf, i)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if i + size > n:
                raise _PbError("a fixed%d field runs past the end of its message" % (size * 8))
            value = int.from_bytes(buf[i:i + size], "little")
            i += size
        elif wire == 2:
            size, i = _pb_varint(buf, i)
            if i + size > n:
                raise _PbError("field %d says %d bytes; fewer are left" % (field, size))
            value = buf[i:i + size]  # type: ignore[assignment]  # length-delimited: the bytes themselves
            i += size
        else:
            raise _PbError("wire type %d (field %d) is not used by OTLP" % (wire, field))
        yield field, wire, value


def _pb_scalar(kind: str, value: Any) -> Any:
    if kind == "str":
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise _PbError("a string field is not UTF-8") from None
    if kind == "hex":
        return bytes(value).hex()
    if kind == "b64":
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "i64":
        value &= (1 << 64) - 1
        return str(value - (1 << 64) if value >= 1 << 63 else value)
    if kind == "u64":
        return str(value)
    if kind == "double":
        import struct
        return struct.unpack("<d", value.to_bytes(8, "little"))[0]
    if kind == "bool":
        return bool(value)
    return value  # int (an enum, a count)


def _pb_message(buf: memoryview, name: str, depth: int = 0) -> dict:
    """One OTLP message decoded into OTLP's JSON mapping (camelCase names, ids as hex, 64-bit integers
    as strings); fields Reticle does not read are skipped.  Raises _PbError naming what is wrong."""
    if depth > OTEL_MAX_DEPTH + 8:
        raise _PbError("values nested deeper than %d" % OTEL_MAX_DEPTH)
    schema = _PB_MESSAGES[name]
    out: Dict[str, Any] = {}
    for field, wire, value in _pb_fields(buf):
        spec = schema.get(field)
        if spec is None:
            continue
        key, kind, repeated = spec
        want = _PB_WIRE.get(kind, 2)
        if wire != want:
            raise _PbError("%s field %d (%s) has wire type %d, not %d" % (name, field, key, wire, want))
        got = _pb_message(value, kind, depth + 1) if kind in _PB_MESSAGES else _pb_scalar(kind, value)
        if repeated:
            out.setdefault(key, []).append(got)
        else:
            out[key] = got
    return out


def _otlp_payload(body: bytes, media: str, encoding: str, what: str) -> dict:
    """The request body of POST /v1/traces or /v1/logs as OTLP's JSON mapping: gzip inflated (to at
    most OTEL_INFLATED_CAP bytes), then JSON or protobuf.  Refusals say what was wrong and what is accepted."""
    enc = encoding.strip().lower()
    if enc == "gzip":
        import zlib
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            body = inflater.decompress(body, OTEL_INFLATED_CAP + 1)
        except zlib.error as exc:
            raise _HttpRefusal(400, "bad request", "the gzip body does not inflate: %s" % exc) from None
        if len(body) > OTEL_INFLATED_CAP or inflater.unconsumed_tail:
            raise _HttpRefusal(413, "payload too large", "the gzip body inflates past %d bytes" % OTEL_INFLATED_CAP)
        if not inflater.eof:
            raise _HttpRefusal(400, "bad request", "the gzip body is truncated")
    elif enc not in ("", "identity"):
        raise _HttpRefusal(415, "unsupported media type", "Content-Encoding %s is not accepted (gzip or none)"
                           % _short(encoding, 40))
    if media == "application/x-protobuf":
        try:
            return _pb_message(memoryview(body), "TracesRequest" if what == "traces" else "LogsRequest")
        except _PbError as exc:
            raise _HttpRefusal(400, "bad request", "the protobuf body is not an OTLP Export%sServiceRequest: %s"
                               % ("Trace" if what == "traces" else "Logs", exc)) from None
    try:
        payload = _loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _HttpRefusal(400, "bad request", "the body is not JSON: %s" % exc) from None
    top = "resourceSpans" if what == "traces" else "resourceLogs"
    if not isinstance(payload, dict) or not isinstance(payload.get(top, []), list):
        raise _HttpRefusal(400, "bad request", "expected OTLP JSON {%s: [...]}" % top)
    return payload


def _otel_value(v: Any, depth: int = 0) -> Any:
    """An AnyValue of OTLP's JSON mapping as a plain value (int64 strings as ints)."""
    if not isinstance(v, dict) or depth > OTEL_MAX_DEPTH:
        return None
    if "stringValue" in v:
        return v["stringValue"] if isinstance(v["stringValue"], str) else None
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return None
    if "boolValue" in v:
        return v["boolValue"] is True
    if "doubleValue" in v:  # protobuf carries NaN and the infinities, which are no value a rule can read
        d = v["doubleValue"]
        return d if isinstance(d, (int, float)) and not isinstance(d, bool) and math.isfinite(d) else None
    if isinstance(v.get("arrayValue"), dict):
        values = v["arrayValue"].get("values")
        return [_otel_value(x, depth + 1) for x in values[:100]] if isinstance(values, list) else []
    if isinstance(v.get("kvlistValue"), dict):
        return _otel_attrs(v["kvlistValue"].get("values"), depth + 1)
    return None


def _otel_attrs(kvs: Any, depth: int = 0) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for kv in kvs[:256] if isinstance(kvs, list) else []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"][:200]] = _otel_value(kv.get("value"), depth)
    return out


def _otel_id(v: Any, size: int) -> Optional[str]:
    """A trace (size 32) or span (16) id of the JSON mapping as lowercase hex, or None (missing, or all zero)."""
    if not isinstance(v, str) or len(v) != size:
        return None
    v = v.lower()
    return v if re.fullmatch(r"[0-9a-f]+", v) and v.strip("0") else None


_SPAN_IDS = "without a valid traceId (32 hex) and spanId (16 hex)"


def _otel_spans(payload: dict) -> Tuple[List[dict], List[str]]:
    """Every span of a traces payload, flattened: {traceId, spanId, parentSpanId, name, kind, start,
    end (ns), attrs, events, error, scope, service}, and why each span refused was refused (no valid
    trace or span id, or a number no span can have: _otel_span)."""
    out: List[dict] = []
    bad: List[str] = []
    spans = payload.get("resourceSpans")
    for rs in spans if isinstance(spans, list) else []:  # a body of another shape has no spans
        if not isinstance(rs, dict):
            continue
        resource = _otel_attrs(rs["resource"].get("attributes") if isinstance(rs.get("resource"), dict) else None)
        for ss in rs.get("scopeSpans") or [] if isinstance(rs.get("scopeSpans"), list) else []:
            if not isinstance(ss, dict) or not isinstance(ss.get("spans"), list):
                continue
            scope: dict = ss["scope"] if isinstance(ss.get("scope"), dict) else {}
            for sp in ss["spans"]:
                tid = _otel_id(sp.get("traceId"), 32) if isinstance(sp, dict) else None
                sid = _otel_id(sp.get("spanId"), 16) if isinstance(sp, dict) else None
                if tid is None or sid is None:
                    bad.append(_SPAN_IDS)
                    continue
                try:
                    out.append(_otel_span(sp, tid, sid, scope, resource))
                except _SpanRefused as exc:
                    bad.append(str(exc))
    return out, bad


_UINT64 = 1 << 64


def _otel_nanos(v: Any) -> Optional[int]:
    """A time of the span (fixed64 nanoseconds since the epoch; a decimal string in JSON), None when it
    is missing; _SpanRefused for one no clock gives (negative, past 64 bits, not a whole number)."""
    if v is None or v == "":
        return None
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise _SpanRefused("with a time that is not an integer of nanoseconds")
    try:
        n = int(v)
    except ValueError:
        raise _SpanRefused("with a time that is not an integer of nanoseconds") from None
    if not 0 <= n < _UINT64:
        raise _SpanRefused("with a time out of range (negative, or past 64 bits)")
    return n


_HTTP_STATUS_KEYS = ("http.response.status_code", "http.status_code")


def _otel_status(attrs: dict) -> None:
    """An HTTP status attribute, when the span has one, is a whole number from 100 to 599 (protobuf can
    carry a double NaN or infinity there; JSON a string), made an int in `attrs`; _SpanRefused otherwise."""
    for key in _HTTP_STATUS_KEYS:
        if key not in attrs:  # (present but None: a value _otel_value could not read, such as a NaN)
            continue
        v = attrs[key]
        if isinstance(v, str) and v.strip().isdigit() and len(v.strip()) <= 3:
            v = int(v.strip())
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not 100 <= v <= 599:
            raise _SpanRefused("with an HTTP status code that is not a whole number from 100 to 599")
        attrs[key] = v


_OTEL_KINDS = {"SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
               "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}


def _otel_span(sp: dict, tid: str, sid: str, scope: dict, resource: dict) -> dict:
    """One span as Reticle's flat record; _SpanRefused for a span whose numbers no real span has (a
    negative or 64-bit-overflowing time, an end before its start, an HTTP status that is no status)."""
    start, end = _otel_nanos(sp.get("startTimeUnixNano")), _otel_nanos(sp.get("endTimeUnixNano"))
    if start is not None and end is not None and end < start:
        raise _SpanRefused("with an end before its start")
    attrs = _otel_attrs(sp.get("attributes"))
    _otel_status(attrs)
    kind = sp.get("kind")
    if isinstance(kind, str):
        kind = _OTEL_KINDS.get(kind, 0)
    kind = kind if isinstance(kind, int) and not isinstance(kind, bool) and 0 <= kind <= 5 else 0
    code = sp["status"].get("code") if isinstance(sp.get("status"), dict) else None
    given = sp["events"][:64] if isinstance(sp.get("events"), list) else []
    events = [{"name": e.get("name") if isinstance(e.get("name"), str) else "",
               "attrs": _otel_attrs(e.get("attributes"))} for e in given if isinstance(e, dict)]
    return {"traceId": tid, "spanId": sid, "parentSpanId": _otel_id(sp.get("parentSpanId"), 16),
            "name": sp.get("name") if isinstance(sp.get("name"), str) else "", "kind": kind,
            "start": start, "end": end, "attrs": attrs, "events": events,
            "error": code in (2, "STATUS_CODE_ERROR"), "scope": str(scope.get("name") or "")[:120],
            "service": str(resource.get("service.name") or "")[:120],
            "language": str(resource.get("telemetry.sdk.language") or "")[:20].lower()}


def _otel_logs(payload: dict) -> List[dict]:
    """The ERROR-or-worse log records (severity number 17 and up, or a severity text saying so) that
    carry a trace id, as {traceId, logger, level, message, exception?}."""
    out = []
    logs = payload.get("resourceLogs")
    for rl in logs if isinstance(logs, list) else []:
        for sl in (rl.get("scopeLogs") or []) if isinstance(rl, dict) and isinstance(rl.get("scopeLogs"), list) else []:
            if not isinstance(sl, dict) or not isinstance(sl.get("logRecords"), list):
                continue
            scope: dict = sl["scope"] if isinstance(sl.get("scope"), dict) else {}
            for lr in sl["logRecords"]:
                tid = _otel_id(lr.get("traceId"), 32) if isinstance(lr, dict) else None
                if tid is None:
                    continue
                number = lr.get("severityNumber")
                text = lr.get("severityText") if isinstance(lr.get("severityText"), str) else ""
                if not ((isinstance(number, int) and number >= 17) or text.upper() in ("ERROR", "FATAL", "CRITICAL")):
                    continue
                attrs = _otel_attrs(lr.get("attributes"))
                body = _otel_value(lr.get("body"))
                entry: Dict[str, Any] = {"traceId": tid, "logger": str(scope.get("name") or "")[:120],
                                         "level": (text or "ERROR").upper()[:16],
                                         "message": _scrub_server(str(body if body is not None else "")[:300])}
                exc = _otel_exception(attrs)
                if exc:
                    entry["exception"] = exc
                out.append(entry)
    return out


_NODE_FRAME = re.compile(r"^\s*at (?:(.+?) \()?(?:file://)?(.+?):(\d+)(?::\d+)?\)?\s*$")
_PY_FRAME = re.compile(r'^\s*File "(.+?)", line (\d+), in (.+?)\s*$')
_JAVA_FRAME = re.compile(r"^\s*at ([\w$.<>]+)\(([\w$.-]+):(\d+)\)\s*$")


def _stack_frames(stack: str, limit: int = 3) -> List[str]:
    """The innermost frames of the app's own code in a stack trace as text (Node, Python or Java
    shape), as `file:line function`: installed packages and the runtime's own frames are skipped."""
    frames: List[Tuple[str, str, str]] = []
    python = False
    for line in stack.splitlines()[:200]:
        m = _PY_FRAME.match(line)
        if m:
            python = True
            frames.append((m.group(1), m.group(2), m.group(3)))
            continue
        m = _NODE_FRAME.match(line)
        if m and "/" in m.group(2) or (m and m.group(2).endswith((".js", ".ts", ".mjs", ".cjs"))):
            frames.append((m.group(2), m.group(3), m.group(1) or "<anonymous>"))
            continue
        m = _JAVA_FRAME.match(line)
        if m:
            frames.append((m.group(2), m.group(3), m.group(1).rsplit(".", 1)[-1]))
    if python:
        frames.reverse()  # a Python traceback lists the innermost frame last
    out = []
    for path, line_no, func in frames:
        if any(s in path for s in ("node_modules", "site-packages", "dist-packages", "node:", "internal/")) \
                or path.startswith("<"):
            continue
        out.append("%s:%s %s" % (os.path.basename(path), line_no, func.split(" [as ")[0].rsplit(".", 1)[-1]))
        if len(out) >= limit:
            break
    return out


def _otel_exception(attrs: dict) -> Optional[dict]:
    """{type, message, frames} from the exception.* attributes of an exception event or log, or None."""
    typ, msg, stack = attrs.get("exception.type"), attrs.get("exception.message"), attrs.get("exception.stacktrace")
    if not (typ or msg or stack):
        return None
    return {"type": str(typ or "Exception")[:120], "message": _scrub_server(str(msg or "")[:300]),
            "frames": _stack_frames(stack) if isinstance(stack, str) else []}


def _otel_record(server: dict, spans: List[dict], logs: List[dict], tx_traced: bool = False) -> dict:
    """The middleware's record (the raw shape _clean_server_record takes) of one SERVER span and the
    rest of its trace: method, path, host, status, route, duration, the first exception event (the
    server span's, else an internal span's: a client call's own failure is not the request's), error
    logs, and the database spans' writes (`dbUnread`: the database spans it could not read, which the
    cleaned record does not keep: _OtelTraces files them beside it)."""
    a = server["attrs"]
    path = a.get("url.path") or a.get("http.target")  # without the query, as the middleware reports it
    if not isinstance(path, str):
        full = a.get("url.full") or a.get("http.url")
        path = urllib.parse.urlsplit(full).path if isinstance(full, str) else "/"
    path = path.split("?", 1)[0] or "/"
    host = a.get("server.address") or a.get("http.host") or a.get("net.host.name") or ""
    port = a.get("server.port") or a.get("net.host.port")
    if host and port and ":" not in str(host):
        host = "%s:%s" % (host, port)
    status = a.get("http.response.status_code", a.get("http.status_code"))
    exc = None
    for sp in [server] + [s for s in spans if s is not server and s["kind"] in (0, 1, 2)]:
        for ev in sp["events"]:
            if ev["name"] == "exception":
                exc = _otel_exception(ev["attrs"])
                if exc:
                    break
        if exc:
            break
    writes, statements, unread = _otel_writes(spans, tx_traced)
    ms = (server["end"] - server["start"]) / 1e6 if server["end"] and server["start"] else None
    return {"mark": server["traceId"], "method": str(a.get("http.request.method") or a.get("http.method") or ""),
            "path": path, "host": str(host), "via": "header",
            "status": status if isinstance(status, int) and not isinstance(status, bool) else None,  # _otel_status
            "view": a.get("http.route") if isinstance(a.get("http.route"), str) else None,
            "ms": round(ms, 3) if ms is not None else None, "exception": exc, "statements": statements,
            "logged": [{k: v for k, v in e.items() if k != "traceId"} for e in logs][:20], "writes": writes,
            "dbUnread": unread}


def _root_server(spans: List[dict]) -> Optional[dict]:
    """The trace's root SERVER span: its parent (the SDK's, or none) is not among the trace's spans."""
    ids = {s["spanId"] for s in spans}
    return next((s for s in spans if s["kind"] == 2 and s["parentSpanId"] not in ids), None)


def _log_services(payload: dict) -> List[str]:
    """The services (`service.name`) whose log records an OTLP logs payload carries, whatever their level."""
    out: List[str] = []
    logs = payload.get("resourceLogs")
    for rl in logs if isinstance(logs, list) else []:
        if not isinstance(rl, dict) or not isinstance(rl.get("resource"), dict):
            continue
        name = _otel_attrs(rl["resource"].get("attributes")).get("service.name")
        if isinstance(name, str) and name[:120] not in out:
            out.append(name[:120])
    return out[:16]


def _otlp_read(body: bytes, media: str, encoding: str,
               what: str) -> Tuple[List[dict], List[dict], List[str], List[str]]:
    """One OTLP request body, read: (spans, error logs, why each span refused was refused, the services whose
    logs it carries).  Pure, and the costly part of an export (inflate, parse, convert), so it runs off the
    event loop."""
    payload = _otlp_payload(body, media, encoding, what)
    if what == "traces":
        spans, bad = _otel_spans(payload)
        return spans, [], bad, []
    return [], _otel_logs(payload), [], _log_services(payload)


def _whole_traces(spans: List[dict], logs: List[dict], size: int) -> Iterator[Tuple[List[dict], List[dict]]]:
    """`spans` and `logs` in slices of about `size` spans that never split a trace."""
    by_trace: Dict[str, Tuple[List[dict], List[dict]]] = {}
    for sp in spans:
        by_trace.setdefault(sp["traceId"], ([], []))[0].append(sp)
    for lg in logs:
        by_trace.setdefault(lg["traceId"], ([], []))[1].append(lg)
    part: Tuple[List[dict], List[dict]] = ([], [])
    for got, logged in by_trace.values():
        part[0].extend(got)
        part[1].extend(logged)
        if len(part[0]) + len(part[1]) >= size:
            yield part
            part = ([], [])
    if part[0] or part[1]:
        yield part


OTEL_SLICE_SPANS = 2000          # spans (whole traces) filed in one turn of the event loop; then others go
OTEL_ORIGINS_KEPT = 256          # the origins traced services were seen to serve, at most (the oldest go first)
OTEL_LOG_SERVICES_KEPT = 256     # the services seen exporting logs, at most (the oldest go first)


def _keep_recent(kept: "collections.OrderedDict[str, None]", names: List[str], cap: int) -> None:
    """Remember `names` as the newest of `kept`, which holds `cap` at most (the oldest go first)."""
    for name in names:
        kept[name] = None
        kept.move_to_end(name)
        if len(kept) > cap:
            kept.popitem(last=False)


def _span_origin(attrs: dict) -> Optional[str]:
    """The origin a SERVER span's service answered on, from its attributes (current and older names)."""
    full = attrs.get("url.full") or attrs.get("http.url")
    if isinstance(full, str) and "://" in full:
        try:
            parts = urllib.parse.urlsplit(full)
            return _origin_key(parts.hostname, parts.port, parts.scheme)
        except ValueError:
            return None
    host = attrs.get("server.address") or attrs.get("http.host") or attrs.get("net.host.name")
    if not host:
        return None
    return _origin_key(host, attrs.get("server.port") or attrs.get("net.host.port"),
                       attrs.get("url.scheme") or attrs.get("http.scheme") or "http")


class _SpanSources:
    """What each service that sends spans has shown, for saying why its spans land in no tab: spans,
    HTTP SERVER spans, and SERVER spans under a trace id the daemon issued (attributed), and the origins
    its SERVER spans answered.  A service with spans but no SERVER span has an HTTP server no
    instrumentation sees; one whose SERVER spans never carry an issued trace id does not continue the
    tab's `traceparent`."""

    def __init__(self) -> None:
        self.services: "collections.OrderedDict[str, Dict[str, Any]]" = collections.OrderedDict()

    def note(self, spans: List[dict], owned: Set[str], now: float) -> None:
        for sp in spans:
            row = self.services.get(sp["service"])
            if row is None:
                row = self.services[sp["service"]] = {"spans": 0, "server": 0, "attributed": 0, "at": now,
                                                      "origins": []}
                while len(self.services) > 64:
                    self.services.popitem(last=False)
            row["spans"] += 1
            row["at"] = now
            if sp["kind"] == 2:
                row["server"] += 1
                row["attributed"] += sp["traceId"] in owned
                origin = _span_origin(sp["attrs"])
                if origin is not None and origin not in row["origins"] and len(row["origins"]) < 8:
                    row["origins"].append(origin)

    def attributed(self, service: str) -> None:
        """A SERVER span of `service` was tied to a tab by method, path and time (tying.py): it landed."""
        row = self.services.get(service)
        if row is not None:
            row["attributed"] += 1

    def unattributed(self, now: float, recent_ms: float = 600_000.0, url: str = "") -> List[dict]:
        """The services heard in the last ten minutes none of whose spans could land in a tab: why, and
        the fix for a stack that sends spans (never the Python middleware's).  For a tab's page (`url`):
        only the services whose SERVER spans answered its origin, when any did (not another app's that
        sends spans to the same daemon)."""
        origin = _url_origin(url) if url else None
        recent = [(name, row) for name, row in self.services.items() if now - row["at"] <= recent_ms]
        here = [(name, row) for name, row in recent if origin is not None and origin in row["origins"]]
        out = []
        for name, row in here or recent:
            if row["attributed"] or row["spans"] < 2:
                continue
            if not row["server"]:
                cause = ("its %d span(s) hold no HTTP SERVER span: its HTTP server is not instrumented" % row["spans"])
                fix = ("instrument the HTTP server as it loads: in Node, NODE_OPTIONS=\"--experimental-loader="
                       "@opentelemetry/instrumentation/hook.mjs --import @opentelemetry/auto-instrumentations-node/"
                       "register\" (without the loader hook, a server that imports node:http as an ES module, as the "
                       "dev servers of Vite, React Router, Nuxt, SvelteKit and Astro do, sends database spans but no "
                       "SERVER span); Next.js, its instrumentation.ts; another stack, its HTTP instrumentation")
            else:
                cause = ("none of its %d HTTP SERVER span(s) continued a trace id Reticle issued to a tab: it does "
                         "not read the request's W3C `traceparent`" % row["server"])
                fix = ("keep W3C trace context on (OTEL_PROPAGATORS unset or including tracecontext), and let no "
                       "proxy in front drop the traceparent header; a form post or link with the script tag carries "
                       "no traceparent (open the page as a device: reticle_open)")
            out.append({"service": name or "(unnamed)", "spans": int(row["spans"]),
                        "serverSpans": int(row["server"]), "cause": cause, "fix": fix,
                        **({"answersOrigin": True} if here else {})})
        return out[:5]


def _kept_spans(spans: List[dict]) -> List[dict]:
    """What a stitched trace keeps of its spans to read its writes again when late ones come: its database
    spans whole, the others only as links between them (an ORM's statements may sit under an engine span)."""
    return [sp if _db_span(sp) else {"spanId": sp["spanId"], "parentSpanId": sp["parentSpanId"], "attrs": {},
                                     "scope": "", "name": "", "start": sp["start"]} for sp in spans[:OTEL_KEPT_SPANS]]


class _OtelTraces:
    """The daemon's side of OpenTelemetry: spans of traces issued to a tab wait here (at most
    OTEL_HELD_SPANS, as long as their trace id is held) until the trace's SERVER span arrives; its
    record is then stitched as a middleware record would be, once.  Error logs, and child spans that
    arrive after it (a batch split), amend the record while it is recent (OTEL_DONE_KEPT).  The spans of
    a trace no tab was issued (a form post through the script tag: its mark rode in a cookie) wait in
    `loose` (at most OTEL_LOOSE_SPANS) for their SERVER span, whose record is tied to a tab's document
    request by method, path and time when exactly one fits (tying.py), and is otherwise dropped."""

    def __init__(self) -> None:
        self.pool: Optional[concurrent.futures.ThreadPoolExecutor] = None  # reads bodies, one at a time
        self.sources = _SpanSources()
        self.held: "collections.OrderedDict[str, dict]" = collections.OrderedDict()
        self.done: "collections.OrderedDict[str, Tuple[Any, dict, List[dict]]]" = collections.OrderedDict()
        self.spans = 0
        self.loose: "collections.OrderedDict[str, dict]" = collections.OrderedDict()
        self.loose_spans = 0
        self.db_services: Set[str] = set()  # services whose spans have shown database statements
        self.tx_services: Set[str] = set()  # ... and a transaction statement (their commits are traced)
        self.log_services: "collections.OrderedDict[str, None]" = collections.OrderedDict()  # export logs too
        # services whose database spans have all been of kinds Reticle cannot read: service -> the first such
        self.unread_services: "collections.OrderedDict[str, str]" = collections.OrderedDict()
        # origins (loopback:3000) whose requests traced services have answered: only a tab on one of them
        # waits for spans (one app's tracing must not slow another app's verdicts)
        self.origins: "collections.OrderedDict[str, None]" = collections.OrderedDict()
        self.stats = {"spans": 0, "logs": 0, "stitched": 0, "tied": 0, "unmatched": 0, "refused": 0, "foreign": 0}

    def _tabs(self, hub: _OtelHost) -> List[_BrowserSession]:
        return hub.bridge.every_tab()

    def _owner(self, hub: _OtelHost, tid: str, now: float) -> Any:
        return next((s for s in self._tabs(hub) if s.server_tickets.holds(tid, now)), None)

    def _hold(self, tid: str) -> dict:
        entry = self.held.get(tid)
        if entry is None:
            entry = self.held[tid] = {"spans": [], "logs": []}
        while self.spans > OTEL_HELD_SPANS and self.held:
            _, old = self.held.popitem(last=False)
            self.spans -= len(old["spans"])
        return entry

    def _learn(self, spans: List[dict]) -> None:
        """From every span, stitched or not: the services whose spans show database statements or operations
        Reticle reads (their "0 writes" is evidence), transaction statements (their commits are traced), and
        those whose database spans it cannot read (their "0 writes" is unknown, naming the instrumentation)."""
        for sp in spans:
            if sp["service"] in self.tx_services or not _db_span(sp):
                continue   # (a service that has shown a transaction statement has shown all it can teach)
            readable, tx = _db_learned(sp)
            if readable:
                self.db_services.add(sp["service"])
                self.unread_services.pop(sp["service"], None)
            elif sp["service"] not in self.db_services and sp["service"] not in self.unread_services:
                self.unread_services[sp["service"]] = _db_label(sp, _db_kind(sp)[1])
                while len(self.unread_services) > 64:
                    self.unread_services.popitem(last=False)
            if tx:
                self.tx_services.add(sp["service"])

    async def take(self, hub: _OtelHost, body: bytes, media: str, encoding: str, what: str) -> List[str]:
        """One export: read on the pool's one thread (_otlp_read), so the event loop goes on serving
        while a large batch inflates and parses (and two batches never read at once), then filed in
        slices of whole traces with the loop free between them.  -> why each refused span was refused;
        _HttpRefusal for a body that is no OTLP."""
        if self.pool is None:
            self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="reticle-otlp")
        loop = asyncio.get_running_loop()
        spans, logs, bad, loggers = await loop.run_in_executor(self.pool, _otlp_read, body, media, encoding, what)
        _keep_recent(self.log_services, loggers, OTEL_LOG_SERVICES_KEPT)
        for part_spans, part_logs in _whole_traces(spans, logs, OTEL_SLICE_SPANS):
            self.absorb(hub, part_spans, part_logs)
            await asyncio.sleep(0)
        return bad

    def serves(self, url: str) -> bool:
        """Has a traced service been seen answering the origin of `url` (a tab's page)?"""
        return _url_origin(url) in self.origins

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False)
            self.pool = None

    def absorb(self, hub: _OtelHost, spans: List[dict], logs: List[dict]) -> None:
        """Group what arrived by trace id; file what belongs to a tab (see the class)."""
        now = hub.clock()
        by_trace: Dict[str, Tuple[List[dict], List[dict]]] = {}
        for sp in spans:
            by_trace.setdefault(sp["traceId"], ([], []))[0].append(sp)
        for lg in logs:
            by_trace.setdefault(lg["traceId"], ([], []))[1].append(lg)
        for sp in spans:
            origin = _span_origin(sp["attrs"]) if sp["kind"] == 2 else None
            _keep_recent(self.origins, [origin] if origin is not None else [], OTEL_ORIGINS_KEPT)
        if spans and not self.stats["spans"]:
            # the first spans: from now on, devices add the trace context of their documents' requests
            for device in list(hub.devices.devices.values()):
                hub.spawn(hub.faults.sync_device(device))
        self.stats["spans"] += len(spans)
        self.stats["logs"] += len(logs)
        self._learn(spans)
        owned = {tid for tid in by_trace if tid in self.done or self._owner(hub, tid, now) is not None}
        self.sources.note(spans, owned, now)
        for tid, (got, logged) in by_trace.items():
            if tid in self.done:
                self._amend(tid, got, logged)
                continue
            owner = self._owner(hub, tid, now)
            if owner is None:
                self.held.pop(tid, None)
                self.stats["unmatched"] += len(got)
                self._loose(hub, tid, got, logged, now)
                continue
            entry = self._hold(tid)
            entry["spans"].extend(got)
            entry["logs"].extend(logged)
            self.spans += len(got)
            self._try_stitch(hub, tid, owner, entry, now)

    def _try_stitch(self, hub: _OtelHost, tid: str, owner: Any, entry: dict, now: float) -> None:
        """Once the trace's root SERVER span (its parent is the SDK's, not among the trace's spans) has
        arrived: its record, stitched into the tab that holds the trace id, under the document and
        request the id was issued for, once; the trace is then kept open for late spans (done)."""
        server = _root_server(entry["spans"])
        if server is None:
            return
        self.held.pop(tid, None)
        self.spans -= len(entry["spans"])
        rec = self._record(server, entry)
        if rec is None:
            return
        why = _server_sender_refused(rec, owner)
        if why is not None:
            self.stats["refused"] += 1
            return
        rec["documentId"], rec["requestId"] = owner.server_tickets.take(tid)
        self._file(tid, owner, rec, entry)
        self.stats["stitched"] += 1

    def _record(self, server: dict, entry: dict) -> Optional[dict]:
        """The record of a trace whose root SERVER span has arrived (_otel_record, cleaned as a middleware
        record is), with where its facts came from: the service, its database instrumentations."""
        if any(_db_span(s) and _db_learned(s)[1] for s in entry["spans"]):
            self.tx_services.add(server["service"])
        raw = _otel_record(server, entry["spans"], entry["logs"], server["service"] in self.tx_services)
        rec = _clean_server_record(raw)
        if rec is None:
            return None
        rec.pop("mark")
        rec["source"] = "otel"
        rec["service"] = server["service"]
        rec["dbScopes"] = sorted({s["scope"] for s in entry["spans"] if _db_span(s)})[:3]
        if rec["statements"]:
            self.db_services.add(server["service"])
        rec["dbTraced"] = server["service"] in self.db_services
        if server["service"] in self.log_services:
            rec["logsExported"] = True  # a verdict over it waits for the logs' own batch (observe.py)
        rec["dbUnread"] = self._unread(server["service"], rec["dbTraced"], raw["dbUnread"])
        return rec

    def _file(self, tid: str, owner: Any, rec: dict, entry: dict) -> dict:
        """File a trace's record into its tab (its documentId and requestId set) -> the tab's event; the
        trace then stays open for late spans and logs (done, at most OTEL_DONE_KEPT)."""
        owner.server_otel += 1
        event = owner.add_server_record(rec)
        self.done[tid] = (owner, rec, _kept_spans(entry["spans"]))
        while len(self.done) > OTEL_DONE_KEPT:
            self.done.popitem(last=False)
        return event

    def _loose(self, hub: _OtelHost, tid: str, spans: List[dict], logs: List[dict], now: float) -> None:
        """Spans and logs of a trace no tab was issued: held (OTEL_LOOSE_SPANS at most, the oldest traces
        go first) until its root SERVER span comes, whose record is then tied to a tab's document request
        by method, path and time (_tie), or dropped.  With no tab at all, nothing is held."""
        if not hub.bridge.sessions and not hub.bridge.departed:
            return
        entry = self.loose.get(tid)
        if entry is None:
            entry = self.loose[tid] = {"spans": [], "logs": []}
        entry["spans"].extend(spans)
        entry["logs"].extend(logs)
        self.loose_spans += len(spans)
        while self.loose_spans > OTEL_LOOSE_SPANS and len(self.loose) > 1:
            _, old = self.loose.popitem(last=False)
            self.loose_spans -= len(old["spans"])
        server = _root_server(entry["spans"])
        if server is None or self.loose.pop(tid, None) is None:
            return
        self.loose_spans -= len(entry["spans"])
        self._tie(hub, tid, server, entry, now)

    def _tie(self, hub: _OtelHost, tid: str, server: dict, entry: dict, now: float) -> None:
        """A SERVER span under a trace id no tab was issued, filed under the one document request of one tab
        its method, path and time fit (tying.py), marked `matchedBy`; or nowhere."""
        if server["start"] is None:
            return
        wall = time.time() * 1000.0 - hub.clock()  # a span's times are the wall clock's, in nanoseconds
        a = server["attrs"]
        target = a.get("url.path") or a.get("http.target") or a.get("url.full") or a.get("http.url")
        if isinstance(a.get("url.path"), str) and isinstance(a.get("url.query"), str) and a["url.query"]:
            target = "%s?%s" % (a["url.path"], a["url.query"])
        fact = _fact("otel:" + tid, _span_origin(a), str(a.get("http.request.method") or a.get("http.method") or ""),
                     target if isinstance(target, str) else "", server["start"] / 1e6 - wall,
                     (server["end"] or server["start"]) / 1e6 - wall, "otel")
        req = hub.ties.tie(self._tabs(hub), fact, now) if fact is not None else None
        rec = self._record(server, entry) if req is not None else None
        if fact is None or req is None or rec is None:
            return
        rec.pop("site", None)
        rec.pop("from", None)
        rec["documentId"], rec["requestId"], rec["matchedBy"] = req["doc"], req["mark"], TIED_BY
        hub.ties.filed(fact, req, self._file(tid, req["tab"], rec, entry), lambda: self._tabs(hub))
        self.sources.attributed(server["service"])
        self.stats["tied"] += 1
        self.stats["unmatched"] -= len(entry["spans"])  # (counted when they came under no tab's trace id)

    def _unread(self, service: str, traced: bool, unread: List[str]) -> List[str]:
        """The database spans a record's writes could not be read from: its trace's, or, for a service none of
        whose database spans Reticle could ever read, the first such span it sent."""
        if unread or traced:
            return unread
        first = self.unread_services.get(service)
        return [first] if first else []

    def _amend(self, tid: str, spans: List[dict], logs: List[dict]) -> None:
        """Late children and logs of a stitched trace: their writes, exception and error logs join its record."""
        owner, rec, kept = self.done[tid]
        for lg in logs:
            if len(rec["logged"]) < 20:
                rec["logged"].append({k: v for k, v in lg.items() if k != "traceId"})
        service = rec.get("service") or ""
        if any(_db_span(s) and _db_learned(s)[1] for s in spans):
            self.tx_services.add(service)
        kept.extend(_kept_spans(spans))
        del kept[OTEL_KEPT_SPANS:]
        if any(_db_span(s) for s in spans):  # read again with the trace's earlier spans: an ORM's span ends last
            writes, statements, unread = _otel_writes(kept, service in self.tx_services)
            rec["writes"] = _clean_writes(writes)
            rec["statements"] = statements
            rec["dbTraced"] = rec["dbTraced"] or statements > 0 or service in self.db_services
            rec["dbUnread"] = self._unread(service, rec["dbTraced"], unread)
        if rec["exception"] is None:
            for sp in spans:
                exc = next((_otel_exception(e["attrs"]) for e in sp["events"] if e["name"] == "exception"
                            and sp["kind"] in (0, 1)), None)
                if exc:
                    rec["exception"] = exc
                    break
        owner._wake()
