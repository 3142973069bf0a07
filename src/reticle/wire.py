"""Framework wire formats.

What a framework's own answer to a request means when its status does not say it: Remix and React
Router single fetch, Next.js server actions, Dash callbacks, SvelteKit's envelopes, Astro's actions, Turbo
streams.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

from .conventions import _NO_FAILURE
from .events import _is_write
from .util import _short


# ---- wire formats as data: what popular frameworks' answers mean, beside the failure dialects ----

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


# devalue's values that are no index: undefined, a hole in an array, NaN, Infinity, -Infinity, -0
_DEVALUE_SPECIAL: Dict[int, Any] = {-1: None, -2: None, -3: None, -4: None, -5: None, -6: 0}
# devalue's typed entries whose argument is the value itself, not an index (a Date's ISO string, a RegExp's
# source, a BigInt's digits, a boxed primitive, a typed array's or ArrayBuffer's base64)
_DEVALUE_LITERAL = frozenset(("Date", "RegExp", "BigInt", "Object", "ArrayBuffer", "Int8Array", "Uint8Array",
                              "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array",
                              "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array"))


def _devalue_parse(encoded: Any) -> Tuple[bool, Any]:
    """A devalue-encoded value read back (SvelteKit's action `data`, Astro's action answers): devalue writes
    one flat JSON array whose entry 0 is the value, an object's and an array's members being indices into it
    (`[{"ok":1,"id":2},true,7]` is {ok: true, id: 7}), a negative index a special value, a typed entry a
    list that starts with its type (`["Date", iso]`, `["Set", i, ...]`, `["Map", k, v, ...]`, `["null", key, i,
    ...]`, a custom reducer's `["URL", i]`).  -> (True, the value as JSON would hold it: a Date as its ISO
    string, a Set as a list, a Map as an object), or (False, None) when `encoded` is not devalue."""
    try:
        flat = json.loads(encoded) if isinstance(encoded, str) else None
    except ValueError:
        return False, None
    if isinstance(flat, int) and not isinstance(flat, bool) and flat in _DEVALUE_SPECIAL:
        return True, _DEVALUE_SPECIAL[flat]
    if not isinstance(flat, list) or not flat:
        return False, None
    try:
        return True, _devalue_value(flat, 0, {}, 0)
    except (ValueError, TypeError, RecursionError):
        return False, None


def _devalue_value(flat: List[Any], at: Any, done: Dict[int, Any], depth: int) -> Any:
    """Entry `at` of a devalue array, its members read in turn (`done` holds each entry read once, so a cycle
    or a shared value is read once); ValueError for an index out of place."""
    if not isinstance(at, int) or isinstance(at, bool) or depth > 64:
        raise ValueError("not a devalue index: %r" % (at,))
    if at < 0:
        if at not in _DEVALUE_SPECIAL:
            raise ValueError("not a devalue special value: %d" % at)
        return _DEVALUE_SPECIAL[at]
    if at >= len(flat):
        raise ValueError("a devalue index past the end: %d" % at)
    if at in done:
        return done[at]
    v = flat[at]
    if isinstance(v, dict):
        obj: Dict[str, Any] = {}
        done[at] = obj
        for k, i in v.items():
            obj[k] = _devalue_value(flat, i, done, depth + 1)
        return obj
    if isinstance(v, list) and v and isinstance(v[0], str):
        return _devalue_typed(flat, at, v, done, depth)
    if isinstance(v, list):
        items: List[Any] = []
        done[at] = items
        items.extend(_devalue_value(flat, i, done, depth + 1) for i in v)
        return items
    return v


def _devalue_typed(flat: List[Any], at: int, v: List[Any], done: Dict[int, Any], depth: int) -> Any:
    """A typed devalue entry (`["Date", iso]`, `["Set", i, ...]`, ...) as JSON would hold it."""
    kind, args = v[0], v[1:]
    if kind in _DEVALUE_LITERAL:
        return int(args[0]) if kind == "BigInt" else args[0] if args else None
    if kind in ("Map", "null"):
        obj: Dict[str, Any] = {}
        done[at] = obj
        for j in range(0, len(args) - 1, 2):
            key = _devalue_value(flat, args[j], done, depth + 1) if kind == "Map" else args[j]
            obj[str(key)] = _devalue_value(flat, args[j + 1], done, depth + 1)
        return obj
    if kind == "Set":
        items: List[Any] = []
        done[at] = items
        items.extend(_devalue_value(flat, i, done, depth + 1) for i in args)
        return items
    return _devalue_value(flat, args[0], done, depth + 1) if len(args) == 1 else None  # a custom reducer's


def _devalue_words(encoded: Any) -> str:
    """The message a devalue-encoded action `data` carries (`[{"message": 1}, "Title is required"]`:
    index 0 the object, its values indices into the array), as a suffix, or ''."""
    ok, data = _devalue_parse(encoded)
    return _words_of(data) if ok else ""


def _words_of(data: Any) -> str:
    """The message a failure's data gives (its `message`, `error`, `errors` or `reason` text), as a suffix,
    or ''."""
    if not isinstance(data, dict):
        return ""
    for key in ("message", "error", "errors", "reason"):
        said = data.get(key)
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


_ASTRO_ACTION = re.compile(r"/_actions/[^/?#]+/?$")
_ASTRO_ERRORS = ("AstroActionError", "AstroActionInputError")


def _astro_action(d: dict) -> bool:
    """A call of an Astro action as Astro's client makes it: a POST to `/_actions/<name>`."""
    path = urllib.parse.urlsplit(str(d.get("url", ""))).path
    return str(d.get("method", "")).upper() == "POST" and bool(_ASTRO_ACTION.search(path))


def _astro_error(d: dict) -> Optional[dict]:
    """The error an Astro action answered, whatever the HTTP status: Astro (4.14 on) writes a thrown or
    returned ActionError as `{"type": "AstroActionError", "code": "CONFLICT", "status": 409, "message": …}`
    (JSON.stringify of the error spread, then its message) and a failed input check as `{"type":
    "AstroActionInputError", "issues": [zod's issues], "fields": {name: [messages]}}` (Astro 4 spreads the
    whole error: code, status and message too), under the error's status and `application/json`; None for
    any other answer."""
    body = d.get("responseBody")
    if not _astro_action(d) or not isinstance(body, str) or '"type"' not in body[:200]:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("type") not in _ASTRO_ERRORS:
        return None
    if data["type"] == "AstroActionInputError":
        return data if isinstance(data.get("issues"), list) else None
    return data if isinstance(data.get("code"), str) else None


def _astro_failure(d: dict) -> Optional[Tuple[int, str]]:
    """(status, phrase) of an Astro action's error envelope (_astro_error): its own status (an input error
    with none is Astro's BAD_REQUEST, 400; any other INTERNAL_SERVER_ERROR, 500), and what it says."""
    err = _astro_error(d)
    if err is None:
        return None
    status = err.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status < 600:
        status = 400 if err["type"] == "AstroActionInputError" else 500
    if err["type"] == "AstroActionInputError":
        fields = err["fields"] if isinstance(err.get("fields"), dict) else {}
        said = ["%s: %s" % (k, v[0]) for k, v in fields.items() if isinstance(v, list) and v and isinstance(v[0], str)]
        if not said:
            said = [str(i["message"]) for i in err["issues"] if isinstance(i, dict) and i.get("message")]
        return status, "an Astro action input error with status %s (%s)" % (status, _short("; ".join(said[:3]), 160))
    return status, "an Astro action error %s with status %s (%r)" % (
        _short(err["code"], 40), status, _short(str(err.get("message") or ""), 120))


def _astro_data(d: dict) -> Optional[Tuple[bool, Any]]:
    """The data an Astro action answered with: a 2xx to `/_actions/<name>` in `application/json+devalue`
    (devalue, _devalue_parse), as (True, the data); None for any other call."""
    status = d.get("status")
    body = d.get("responseBody")
    if not _astro_action(d) or not isinstance(status, int) or not 200 <= status < 300 or not isinstance(body, str):
        return None
    if "json+devalue" not in (_header(d, "content-type") or str(d.get("contentType") or "")):
        return None
    ok, data = _devalue_parse(body)
    return (True, data) if ok else None


def _read_astro_error(d: dict) -> Optional[str]:
    failed = _astro_failure(d)
    return "its answer is %s" % failed[1] if failed else None


def _read_astro_data_failure(d: dict) -> Optional[str]:
    """An Astro action that returned its failure as data instead of throwing (`return {ok: false, error:
    "…"}`): a 200 whose devalue data owns up to it (_data_failure)."""
    got = _astro_data(d)
    if got is None:
        return None
    problem = _data_failure(got[1])
    if not problem:
        return None
    return "the Astro action's data (devalue) says %s%s" % (
        problem[len("the body says "):] if problem.startswith("the body says ") else problem, _words_of(got[1]))


def _read_astro_data(d: dict) -> Optional[str]:
    return "an Astro action's data (devalue)" if _astro_data(d) else None


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
    rule: the bridge reads it into the call as it arrives (_take_wire_status).  `fail`, for an ordinary
    answer, is the body the framework itself sends when that write fails (what `verify --teeth` replays
    as the framework's failure, under the same HTTP status and headers)."""

    __slots__ = ("name", "meaning", "read", "fail")

    def __init__(self, name: str, meaning: str, read: Callable[[dict], Optional[str]],
                 fail: Optional[str] = None) -> None:
        self.name = name
        self.meaning = meaning
        self.read = read
        self.fail = fail


# a SvelteKit action's `fail(400, {message})`, its data serialised by devalue as SvelteKit does
_SVELTEKIT_FAILURE = json.dumps({"type": "failure", "status": 400, "data": json.dumps(
    [{"message": 1}, "reticle verify --teeth: this write failed on purpose"], separators=(",", ":"))})


_WIRE_FORMATS: Tuple[_WireFormat, ...] = (
    _WireFormat("single-fetch-redirect", "redirect", _read_single_fetch),
    _WireFormat("server-action", "failure", _read_server_action),
    _WireFormat("dash-callback", "failure", _read_dash_callback),
    _WireFormat("json-callback", "failure", _read_json_callback),
    _WireFormat("sveltekit-action-failure", "failure", _read_sveltekit_action),
    _WireFormat("sveltekit-data-error", "failure", _read_sveltekit_data),
    _WireFormat("sveltekit-action-redirect", "redirect", _read_sveltekit_redirect),
    _WireFormat("sveltekit-action-success", "answer", _read_sveltekit_success, _SVELTEKIT_FAILURE),
    _WireFormat("astro-action-error", "failure", _read_astro_error),
    _WireFormat("astro-action-data-failure", "failure", _read_astro_data_failure),
    _WireFormat("astro-action-data", "answer", _read_astro_data),
    _WireFormat("turbo-stream", "answer", _read_turbo_stream),
)


def _take_wire_status(d: dict) -> None:
    """A completed call whose 2xx answer is a framework's failure with a status of its own (see
    _sveltekit_failure, _astro_failure) becomes that failed request: `status` is the envelope's, `httpStatus`
    the wire's, `ok` false, and `statusNote` says why, so `net status: 200` does not hold over it and every
    rule reads it as failed."""
    status = d.get("status")
    if not isinstance(status, int) or not 200 <= status < 300 or d.get("httpStatus") is not None:
        return
    failed = _sveltekit_failure(d) or _astro_failure(d)
    if failed is None:
        return
    d["httpStatus"] = status
    d["status"] = failed[0]
    d["ok"] = False
    d["statusNote"] = "HTTP %s carrying %s" % (status, failed[1])


def _framework_failure(d: dict, answer: Optional[dict]) -> Optional[dict]:
    """The answer a completed write `d` would have got had it failed in its framework's own way (a
    wire format's `fail`), as `answer` (_replayable_answer) has the rest: same status and headers, the
    failure's body; None when no wire format reads `d` or has one."""
    if answer is None:
        return None
    for w in _WIRE_FORMATS:
        if w.fail is not None and w.read(d):
            return dict(answer, body=w.fail)
    return None


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
    return _data_failure(data)


def _data_failure(data: Any) -> Optional[str]:
    """The failure a JSON value owns up to, as a phrase ("the body says ok: false", "3 of 10 results FAILED
    (…)"), else None: see _partial_failure."""

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
