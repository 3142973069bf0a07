"""Server middleware.

Runs inside the user's app, never in the daemon: the WSGI, ASGI and Django middlewares, the
database watches, the reporter thread that sends records to the daemon, and the SDK tag injected
into HTML.  It imports nothing of the daemon's and no web framework at module import.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import secrets
import sys
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .app_inject import _daemon_address, _daemon_token, _django_inject, _asgi_injecting, _wsgi_injecting
from .constants import SERVER_MARK_COOKIE
from .util import _StateDir, _dumps, _redact


_SAVEPOINT_NOTE = "rolled back to a savepoint (its transaction went on)"
# What a write's op may stand for where its span does not say which of the three it was (the writes that
# OpenTelemetry's ORM and command spans name, otel_writes.py): a save or an upsert inserts or updates, a
# bulk write may do any of them.  The middleware's own writes are always one of the three.
_OP_MAY_BE: Dict[str, Tuple[str, ...]] = {"upsert": ("insert", "update"), "write": ("insert", "update", "delete")}
SERVER_WRITE_OPS = ("insert", "update", "delete") + tuple(_OP_MAY_BE)


SERVER_QUEUE_CAP = 1000          # records waiting for the reporter thread; past it they are dropped, counted
SERVER_BATCH = 100               # records per POST to the daemon
SERVER_AWAY_S = 1.0              # after a failed POST, wait this long before the next try
SERVER_SQL_CAP = 200             # characters of SQL text kept per write
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


# ---- the app's side: what a marked request did (the middleware, in the app's process) ----

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


# One token of SQL text: a quoted identifier (kept), a placeholder (kept), a word (kept), a string
# literal with its optional prefix (E'', X'', B'', N''; an unclosed one runs to the end) or a number.
_SQL_TOKEN_RE = re.compile(
    r"(\"(?:[^\"]|\"\")*\"?|`[^`]*`?|\[[^\]]*\]?)|(\$\d+|%\(\w+\)s|%s|:\w+|\?)"
    r"|((?<![\w$])[EeXxBbNn]?'(?:[^']|'')*'?)|([A-Za-z_][\w$]*)"
    r"|((?<![\w$.])(?:0[xX][0-9A-Fa-f]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))")


def _sql_without_literals(sql: str, keep: bool = False) -> str:
    """`sql` with its string and number literals replaced by `?` (identifiers, keywords and
    placeholders kept): what a write looks like when its values are not to be recorded.  With
    keep, literals stay, except those going to a secret-looking column (an INSERT's column list,
    `col = …`), which become `[redacted]`."""
    m = _INSERT_COLUMNS_RE.match(sql)
    cols = _column_list(m.group(1)) if m else []
    out: List[str] = []
    pos = depth = idx = 0
    in_values = False
    column = ""
    for tok in _SQL_TOKEN_RE.finditer(sql):
        gap = sql[pos:tok.start()]
        for ch in gap:
            if ch == "(":
                depth += 1
                idx = 0 if depth == 1 else idx
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 1:
                idx += 1
        out.append(gap)
        text = tok.group(0)
        if tok.group(4) is not None or tok.group(1) is not None:
            in_values = in_values or text.upper() == "VALUES"
            column = text.strip("`\"[]")
        elif tok.group(3) is not None or tok.group(5) is not None:
            name = cols[idx] if in_values and idx < len(cols) else column if "=" in gap else ""
            text = ("[redacted]" if name and _SECRET_PARAM_RE.search(name) else text) if keep else "?"
        out.append(text)
        pos = tok.end()
    out.append(sql[pos:])
    return "".join(out)


_SQL_WHERE_RE = re.compile(r"\bWHERE\b(.*?)(?:\bRETURNING\b.*)?;?\s*$", re.I | re.S)
_SQL_KEY_TERM_RE = re.compile(
    r"^\s*\(?\s*(?:[`\"\[]?\w+[`\"\]]?\.)?[`\"\[]?(?:id|pk)[`\"\]]?\s*(?:=\s*(\S+?)|\bIN\s*\(([^()]*)\))\s*\)?\s*$",
    re.I | re.S)
_SQL_PLACEHOLDER_RE = re.compile(r"\?|%s|\$\d+|%\(\w+\)s|(?<![:\w]):\w+")


def _sql_keys(sql: str, params: Any) -> Optional[List[Any]]:
    """The primary key values an UPDATE or DELETE names its rows by (`WHERE id = ?`, `WHERE
    "app_contact"."id" IN (%s, %s)`, an `AND` of such a term with others), taken from the statement's
    literals or its parameters; None when it names its rows otherwise.  Only the key values are kept."""
    if not re.match(r"\s*(?:UPDATE|DELETE)\b", sql, re.I):
        return None
    literals: List[str] = []

    def mask(t: "re.Match[str]") -> str:   # each string literal becomes '<its index>': no quote or ? inside
        if t.group(3) is None:
            return t.group(0)
        literals.append(t.group(0))
        return "'%d'" % (len(literals) - 1)
    masked = _SQL_TOKEN_RE.sub(mask, sql)
    m = _SQL_WHERE_RE.search(masked)
    if m is None or re.search(r"\bOR\b|\bSELECT\b", m.group(1), re.I):
        return None
    offset = m.start(1)
    for term in re.split(r"(\bAND\b)", m.group(1), flags=re.I):
        k = _SQL_KEY_TERM_RE.match(term)
        if k is not None:
            operands = [k.group(1)] if k.group(1) is not None else [v.strip() for v in k.group(2).split(",")]
            return _sql_key_values(operands, len(_SQL_PLACEHOLDER_RE.findall(masked[:offset])), literals, params)
        offset += len(term)
    return None


def _sql_key_values(operands: List[str], before: int, literals: List[str], params: Any) -> Optional[List[Any]]:
    """Each operand of a key term as a value: a number or string literal ('<index>' into literals)
    as itself, a placeholder as its parameter (positional ones counted from `before`)."""
    out: List[Any] = []
    index = before
    for operand in operands:
        named = re.match(r"^(?::(\w+)|%\((\w+)\)s|\$(\d+)|'(\d+)')$", operand)
        value: Any = None
        if operand in ("?", "%s"):
            value = params[index] if isinstance(params, (list, tuple)) and index < len(params) else None
            index += 1
        elif named and named.group(4):
            lit = literals[int(named.group(4))]
            value = lit[1:-1].replace("''", "'") if lit.startswith("'") and lit.endswith("'") else None
        elif named and named.group(3):
            n = int(named.group(3)) - 1
            value = params[n] if isinstance(params, (list, tuple)) and 0 <= n < len(params) else None
        elif named:
            value = params.get(named.group(1) or named.group(2)) if isinstance(params, dict) else None
        elif re.match(r"^-?\d+$", operand):
            value = int(operand)
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return None
        out.append(value if isinstance(value, int) else value[:64])
    return out or None


def _sql_write(sql: Any, literals: bool = False) -> Optional[dict]:
    """{op, table, sql} of a statement that writes (INSERT, UPDATE, DELETE, REPLACE), else None.
    Its literal values are replaced by `?` in `sql` unless literals is True (parameter
    recording on); either way secrets are scrubbed."""
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
    text = _sql_without_literals(_scrub_server(sql[:SERVER_SQL_CAP * 4]), literals)
    return {"op": "insert" if op == "replace" else op, "table": table,
            "sql": text[:SERVER_SQL_CAP] + ("…" if len(text) > SERVER_SQL_CAP else "")}


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


_PROOF_CHALLENGE_RE = re.compile(r"^[0-9a-f]{32,128}$")


# ---- the reporter thread: records to the daemon, never in the request's way ----

def _daemon_proof(token: str, host: str, port: int, challenge: str) -> str:
    """What only a daemon that knows `token` answers to `challenge` on the listening address host:port
    (HMAC-SHA256).  The reporter asks before it sends the token, on the connection it will send it
    on, and checks the answer against the address it is connected to: a squatter on the port cannot
    answer, nor borrow the answer of a daemon on another address or port."""
    message = ("reticle-daemon-proof/1|%s|%d|%s" % (host, port, challenge)).encode("utf-8")
    return hmac.new(token.encode("utf-8"), message, "sha256").hexdigest()


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
        self.unproven = 0       # records dropped because the listener did not prove it is the daemon
        self.last_error = ""
        self.last_status = 0
        self._failing = False
        self._warned = False
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        _REPORTERS[:] = [self]   # a job's record goes where the records of the requests that start jobs go

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

    def _proven(self, conn: Any, host_header: str, token: str) -> bool:
        """Whether the listener on `conn` is the daemon that knows `token`: it answers a fresh
        challenge with _daemon_proof for the address this connection reached, and keeps the
        connection open for the POST that follows.  The token is never sent before this holds."""
        challenge = secrets.token_hex(16)
        conn.request("GET", "/server-records?challenge=" + challenge, headers={"Host": host_header})
        resp = conn.getresponse()
        raw = resp.read(4096)
        self.last_status = resp.status
        try:
            proof = json.loads(raw.decode("utf-8", "replace")).get("proof") if resp.status == 200 else None
        except (ValueError, AttributeError):
            proof = None
        sock = conn.sock
        if not isinstance(proof, str) or sock is None:
            return False
        peer = sock.getpeername()
        return hmac.compare_digest(proof.encode("ascii", "replace"),
                                   _daemon_proof(token, peer[0], peer[1], challenge).encode("ascii"))

    def _unproven(self, host: str, port: int, n: int) -> None:
        self.unproven += n
        self.last_error = ("the listener on %s:%d did not prove it is the Reticle daemon of this state directory "
                           "(answered %d); the pairing token was not sent" % (host, port, self.last_status))
        if not self._warned:
            self._warned = True
            _server_log.warning("reticle: the process listening on %s:%d is not the Reticle daemon of %s (it could "
                                "not answer a challenge with the pairing token): server records are dropped "
                                "(counted) and the token is never sent to it. Start the daemon (`reticle serve`) "
                                "or point RETICLE_PORT at it.", host, port, _StateDir().path)

    def _post(self, batch: List[dict]) -> bool:
        """POST one batch (with the count dropped since the last success) to the daemon found as the
        CLI finds it, with the pairing token, once the listener proved it is that daemon (_proven);
        True when the daemon took it."""
        import http.client
        host, port = _daemon_address()
        token = _daemon_token()
        if not token:
            self.last_error = "no pairing token (RETICLE_TOKEN, or the state directory's token file)"
            return False
        body = _dumps({"records": batch, "dropped": self.dropped, "pid": os.getpid()}).encode("utf-8")
        conn = http.client.HTTPConnection(host, port, timeout=2.0)
        host_header = "%s:%d" % (host if ":" not in host else "[%s]" % host, port)
        try:
            if not self._proven(conn, host_header, token):
                if self.last_status == 429:  # the daemon, busy: tried again after a pause
                    self.last_error = "the daemon at %s:%d is rate limiting" % (host, port)
                else:
                    self._unproven(host, port, len(batch))
                return False
            conn.request("POST", "/server-records", body, {
                "Content-Type": "application/json", "Authorization": "Bearer %s" % token, "Host": host_header})
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


# ---- one record: begun when a marked request comes in, filled by the database hooks ----

def _sent_by(site: Optional[str], origin: Optional[str], referer: Optional[str]) -> dict:
    """Who sent the request, as the browser tells it (a page can set none of these headers): its
    Sec-Fetch-Site, and the origin of its Origin header, else of its Referer."""
    sender = origin or None
    if sender is None and referer:
        parts = urllib.parse.urlsplit(referer)
        sender = "%s://%s" % (parts.scheme, parts.netloc) if parts.netloc else None
    return {"site": site[:20] if site else None, "from": sender[:300] if sender else None}


def _sent_by_its_origin(rec: dict) -> bool:
    """Whether the browser says a page of the request's own origin (or the user) sent it, or says
    nothing: Sec-Fetch-Site `same-origin`/`none`, else an Origin/Referer on the request's own host."""
    site, sender = rec.get("site"), rec.get("from")
    if site:
        return site in SERVER_TICKET_SITES
    return not sender or urllib.parse.urlsplit(sender).netloc.lower() == rec["host"].lower()


_COOKIE_PATH_RE = re.compile(r"[^A-Za-z0-9\-._~%!$&'()*+=:@/]")


def _cookie_path(path: str) -> str:
    bad = _COOKIE_PATH_RE.search(path)
    return path if bad is None else path[:path.rfind("/", 0, bad.start()) + 1] or "/"


def _redirect_mark(rec: dict, mark: str, status: Any, location: Optional[str]) -> Optional[str]:
    """The Set-Cookie for the answer to a request marked by cookie (a navigation), or None.  A
    same-origin redirect carries the mark on to where it leads (the daemon takes a mark once more
    after a 3xx) in a cookie set with HttpOnly, readable by no script, living seconds, scoped to
    the redirect's path; any other answer removes the spent mark from the request's path, so that
    no page reads it after, and the SDK's next mark there is not shadowed by an HttpOnly one.  A
    request another page sent (a page on another port can read a mark's cookie and replay it) sets
    and clears nothing: the daemon refuses its record, and its answer must not void the tab's own
    navigation by clearing, or planting, the cookie that navigation's redirect carries."""
    if rec["via"] != "cookie" or not _sent_by_its_origin(rec):
        return None
    to = urllib.parse.urlsplit(location or "")
    if isinstance(status, int) and 300 <= status < 400 and location and (
            not to.netloc or to.netloc.lower() == rec["host"].lower()):
        path = _cookie_path(urllib.parse.urljoin(rec["path"], to.path or rec["path"]))
        return "%s=%s; Path=%s; Max-Age=10; SameSite=Strict; HttpOnly" % (SERVER_MARK_COOKIE, mark[:200], path[:1024])
    return "%s=; Path=%s; Max-Age=0; SameSite=Strict" % (SERVER_MARK_COOKIE, _cookie_path(rec["path"])[:1024])


# What watches this process's database writes ("django", "sqlalchemy", "sqlite3"), as the watchers
# are installed: a record made while none is names its writes "not watched", not "0 writes".
_WATCHING: Dict[str, bool] = {}


# ---- jobs: work a marked request starts on a thread of its own, reported under that request ----
# A request that starts a thread running the app's own function (threading.Thread, threading.Timer) hands its
# work to it: the thread runs with a record of its own (its writes, what it raised and
# logged), sent when it ends, and the request's record names it (`queued`), so that the daemon adds what the
# job did to the request's record and a verdict waits for it.  A pool's or a server's worker thread (an
# executor's, anyio's, the server's own: _is_job) outlives the request that made it and is no job; nor is a
# worker in another process (Celery, RQ): its own middleware, its OpenTelemetry
# spans or a watch of the store (reticle_watch_db) hear it.

JOBS_PER_REQUEST = 8
_REPORTERS: List[Any] = []


def _watch_threads() -> None:
    """Once per process: threading.Thread.start notes a thread a marked request starts as its job."""
    if _AUTO_WATCH.get("threads"):
        return
    _AUTO_WATCH["threads"] = True
    start = threading.Thread.start

    def reticle_start(thread: threading.Thread) -> None:
        rec = _current_request().get()
        if rec is not None and "job" not in rec and _is_job(thread) \
                and len(rec.setdefault("queued", [])) < JOBS_PER_REQUEST:
            job = {"job": secrets.token_hex(8), "thread": str(thread.name)[:80]}
            rec["queued"].append(job)
            _run_as_job(thread, job)
        start(thread)

    setattr(threading.Thread, "start", reticle_start)  # noqa: B010 - every thread class started from here on


# the modules whose threads are pools' and loops' workers, which outlive the request that happened to start them
_POOL_MODULES = ("concurrent.", "asyncio", "anyio", "asgiref", "multiprocessing", "threading", "socketserver",
                 "queue", "sqlalchemy", "django.", "starlette", "uvicorn", "gunicorn", "werkzeug")


def _is_job(thread: threading.Thread) -> bool:
    """Is this thread a job (a plain Thread or Timer running the app's own function), not a pool's or a
    server's worker (a subclass, or a target from _POOL_MODULES), which outlives the request that started it?"""
    if type(thread) not in (threading.Thread, threading.Timer):
        return False
    target = getattr(thread, "_target", None) or getattr(thread, "function", None)
    return not str(getattr(target, "__module__", "") or "").startswith(_POOL_MODULES)


def _run_as_job(thread: threading.Thread, job: dict) -> None:
    """The thread's run() with a record of its own current: what it writes, raises and logs, sent when it ends."""
    run = thread.run

    def reticle_run() -> None:
        current = _current_request()
        rec = dict(_begin_record("", "", "", "", "job"), job=job["job"], thread=job["thread"])
        token = current.set(rec)
        try:
            run()
        except BaseException as exc:
            rec["exception"] = dict(_exception_record(exc), after="a job on thread %s" % job["thread"])
            raise
        finally:
            current.reset(token)
            if _REPORTERS:
                _REPORTERS[0].put(_finish_record(rec))

    thread.run = reticle_run  # type: ignore[method-assign]


def _begin_record(mark: str, method: str, path: str, host: str, via: str, params: bool = False,
                  sent: Optional[dict] = None) -> dict:
    # `at`: when it began on the wall clock (ms), by which the daemon ties a navigation's record whose mark no
    # tab holds to the tab's document request (tying.py)
    return {"mark": mark[:200], "method": method[:16], "path": path[:2048], "host": host[:300], "via": via,
            **(sent or {}), "at": round(time.time() * 1000.0, 1), "status": None, "view": None,
            "ms": None, "exception": None, "logged": [], "writes": [], "statements": 0, "watched": [],
            "_t0": time.perf_counter(), "_pending": {}, "_params": params, "_recount": []}


_SECRET_PARAM_RE = re.compile(r"pass|secret|token|key|auth|credential|session|cookie|csrf", re.I)


_INSERT_COLUMNS_RE = re.compile(r"^\s*INSERT\b[^(]*\(([^)]*)\)\s*VALUES", re.I | re.S)
_COLUMN_COMPARED = r"[`\"\[]?(\w+)[`\"\]]?\s*(?:=|<>|!=|<=|>=|<|>|\bLIKE\b)\s*"  # `col = ` and its kin
_SET_COLUMN_RE = re.compile(_COLUMN_COMPARED + r"(?:%s|\?|:\w+|\$\d+)", re.I)
_NAMED_BIND = r"(?::(\w+)|%\((\w+)\)s|@(\w+)|\$(\w+))"
_BIND_SET_RE = re.compile(_COLUMN_COMPARED + _NAMED_BIND, re.I)
_VALUES_LIST_RE = re.compile(r"\s*\(([^)]*)\)")


def _column_list(text: str) -> List[str]:
    """The column names of an INSERT's column list, unquoted."""
    return [c.strip().strip("`\"[]") for c in text.split(",")]


def _param_names(sql: str, n: int) -> Optional[List[str]]:
    """The column each of a statement's n positional parameters goes to, when the SQL says so
    plainly (an INSERT's column list, `col = ?` pairs), else None."""
    m = _INSERT_COLUMNS_RE.match(sql)
    names = _column_list(m.group(1)) if m else _SET_COLUMN_RE.findall(sql)
    return names if len(names) == n else None


def _bind_columns(sql: str) -> Dict[str, str]:
    """{bind name: the column it goes to} of a statement's named parameters, where the SQL says it
    plainly (`col = :name`, `col = %(name)s`, an INSERT's columns beside its VALUES)."""
    out: Dict[str, str] = {}
    m = _INSERT_COLUMNS_RE.match(sql or "")
    values = _VALUES_LIST_RE.match(sql, m.end()) if m else None
    if m and values:
        binds = [re.fullmatch(_NAMED_BIND, v.strip()) for v in values.group(1).split(",")]
        for column, bind in zip(_column_list(m.group(1)), binds):
            if bind is not None:
                out[next(g for g in bind.groups() if g)] = column
    for column, *names in _BIND_SET_RE.findall(sql or ""):
        out[next(n for n in names if n)] = column
    return out


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
        columns = _bind_columns(sql)  # a named bind (:pw, %(pw)s) is as secret as the column it goes to
        names = None if columns else _param_names(sql, len(params))  # the SQL compiled to positional `?`
        if names:
            columns = dict(zip(map(str, params), names))
        text = ", ".join("%s=%s" % (k, "[redacted]" if _SECRET_PARAM_RE.search(str(k)) or _SECRET_PARAM_RE.search(
            columns.get(str(k), "")) else one(v)) for k, v in list(params.items())[:20])
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
    rec["watched"] = sorted(_WATCHING)   # at the end: a connection the request opened may have been watched
    if rec["watched"]:
        rec["unseen"] = _unseen_drivers()
    for w, count, exact in rec.pop("_recount", ()):
        if "rows" not in w:
            rows = _rows_known(count, exact)
            if rows is not None:
                w["rows"] = rows
    rec.pop("_savepoints", None)
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


_RETURNING_RE = re.compile(r"\bRETURNING\b", re.I)


def _rows_known(count: Callable[[], Any], exact: bool = False) -> Optional[int]:
    """A row count read late (after the rows were fetched), when it is one: above 0 (or 0 too
    when the count is exact, as a connection's change counter is), else None."""
    try:
        rows = count()
    except Exception:  # noqa: BLE001 - a closed or foreign cursor: the count stays unknown
        return None
    return rows if isinstance(rows, int) and not isinstance(rows, bool) and rows >= (0 if exact else 1) else None


def _note_statement(statement: Any, rows: Any, conn_key: Any, committed: Optional[bool],
                    params: Any = None, recount: Optional[Callable[[], Any]] = None,
                    key_params: Any = None) -> Optional[dict]:
    """A statement ran for the current marked request: count it, and note it when it writes.
    committed None = waiting for its transaction (kept under conn_key until commit/rollback).
    rows is the driver's row count: a write with none (-1, None), or with RETURNING whose rows are
    counted only once fetched (sqlite3 says 0 until then), has no `rows` ("≥1, count unknown"),
    unless recount() gives it when the record is finished.  The primary key values it names its
    rows by, always (key_params: the positional parameters, when params are named otherwise).
    Other parameter values only when the wrapper was asked for them (params=True)."""
    rec = _current_request().get()
    if rec is None:
        return None
    if _note_savepoint(rec, statement, conn_key):
        return None
    rec["statements"] += 1
    w = _sql_write(statement, bool(rec.get("_params")))
    if w is None:
        return None
    try:
        keys = _sql_keys(str(statement), params if key_params is None else key_params)
    except Exception:  # noqa: BLE001 - a statement we cannot read names no keys
        keys = None
    if keys:
        w["keys"] = keys
    returning = bool(_RETURNING_RE.search(str(statement)))
    if isinstance(rows, int) and not isinstance(rows, bool) and (rows > 0 or rows == 0 and not returning):
        w["rows"] = rows
    elif recount is not None:
        rec["_recount"].append((w, recount, False))
    if rec.get("_params") and params is not None:
        w["params"] = _param_values(params, str(statement))
    w["committed"] = committed
    if len(rec["writes"]) < 50:
        rec["writes"].append(w)
    if committed is None:
        rec["_pending"].setdefault(conn_key, []).append(w)
    return w


_SAVEPOINT_RE = re.compile(r'^\s*(SAVEPOINT|ROLLBACK\s+(?:TRANSACTION\s+|WORK\s+)?TO\s+(?:SAVEPOINT\s+)?|RELEASE\s+'
                           r'(?:SAVEPOINT\s+)?)\s*([`"\[]?[\w$]+[`"\]]?)\s*;?\s*$', re.I)


def _note_savepoint(rec: dict, statement: Any, conn_key: Any) -> bool:
    """A SAVEPOINT, ROLLBACK TO SAVEPOINT or RELEASE SAVEPOINT statement (Django's nested atomic
    blocks and get_or_create, SQLAlchemy's begin_nested, raw SQL): track where each savepoint
    began among the connection's writes still waiting for their transaction; a rollback to one
    ends the writes made since as not kept (committed False, _SAVEPOINT_NOTE) while the outer
    transaction goes on, so they are not a rollback of the request's transaction.  False when the
    statement is none of these."""
    m = _SAVEPOINT_RE.match(statement) if isinstance(statement, str) else None
    if m is None:
        return False
    verb, name = m.group(1).split(None, 1)[0].upper(), m.group(2).strip('`"[]')
    stack = rec.setdefault("_savepoints", {}).setdefault(conn_key, [])
    pending = rec["_pending"].setdefault(conn_key, [])
    if verb == "SAVEPOINT":
        stack.append((name, len(pending)))
        return True
    at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] == name), None)
    if at is None:
        return True
    if verb == "ROLLBACK":   # the savepoint stays; the ones begun inside it are gone
        for w in pending[stack[at][1]:]:
            w["committed"], w["note"] = False, _SAVEPOINT_NOTE
        del pending[stack[at][1]:]
        del stack[at + 1:]
    else:
        del stack[at:]
    return True


def _end_transaction(conn_key: Any, committed: bool) -> None:
    rec = _current_request().get()
    if rec is None:
        return
    rec.get("_savepoints", {}).pop(conn_key, None)
    for w in rec["_pending"].pop(conn_key, []):
        w["committed"] = committed
        if not committed:
            w["note"] = "rolled back"


# ---- the entry points: wsgi, asgi, DjangoMiddleware, watch_sqlalchemy, watch_sqlite3 ----

def _flask_view(app: Any, environ: dict) -> Optional[str]:
    url_map = getattr(app, "url_map", None) or getattr(getattr(app, "__self__", None), "url_map", None)
    if url_map is None:
        return None
    try:
        endpoint, _ = url_map.bind_to_environ(environ).match()
        return str(endpoint)
    except Exception:  # noqa: BLE001 - a 404 or a method mismatch names no view
        return None


def wsgi(app: Callable, params: bool = False, inject: bool = False) -> Callable:
    """Wrap a WSGI app (Flask's `app.wsgi_app`, Django's WSGI handler, Bottle, Pyramid) so that
    each request a Reticle tab marked is reported to the daemon: method, path, status, view,
    duration, an uncaught exception with the app's frames, errors logged, database writes (with
    Django's middleware or watch_sqlalchemy).  An unmarked request costs a header lookup.
    Parameter values of writes are recorded only with params=True (secret-looking names redacted).
    inject=True (development only) also adds the daemon's script tag before </head> of each HTML
    page that lacks it (whole pages only: streams, compressed and non-HTML answers pass untouched)."""
    reporter = _ServerReporter()
    current = _current_request()
    _install_log_capture()
    _watch_by_default()

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
            body = app(environ, start)
        except BaseException as exc:
            rec["exception"] = _exception_record(exc)
            rec["status"] = rec["status"] or 500
            current.reset(token)
            rec["view"] = rec["view"] or _flask_view(app, environ)
            reporter.put(_finish_record(rec))
            raise
        current.reset(token)
        rec["view"] = rec["view"] or _flask_view(app, environ)
        return _ReportedBody(body, rec, lambda: reporter.put(_finish_record(rec)))

    reticle_wsgi.reticle_reporter = reporter  # type: ignore[attr-defined]
    if inject:
        injecting = _wsgi_injecting(reticle_wsgi)
        injecting.reticle_reporter = reporter  # type: ignore[attr-defined]
        return injecting
    return reticle_wsgi


class _ReportedBody:
    """A WSGI response body passed through as the server iterates it; its record is sent when the
    server closes it, so that an exception while it streams or in a close callback (Flask's
    call_on_close, work run once the answer is sent) is the request's, with what it logged."""

    def __init__(self, body: Any, rec: dict, done: Callable[[], None]) -> None:
        self.body = body
        self.rec = rec
        self.done = done
        self.closed = False

    def __iter__(self) -> Any:
        current = _current_request()
        it = iter(self.body)
        while True:
            token = current.set(self.rec)
            try:
                chunk = next(it)
            except StopIteration:
                return
            except BaseException as exc:
                self.rec["exception"] = _exception_record(exc)
                raise
            finally:
                current.reset(token)
            yield chunk

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        current = _current_request()
        token = current.set(self.rec)
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        except BaseException as exc:
            self.rec["exception"] = dict(_exception_record(exc), after="a close callback")
            raise
        finally:
            current.reset(token)
            self.done()

    def __del__(self) -> None:
        if not self.closed:  # a server that never closed the body (a WSGI violation): the record still goes
            self.closed = True
            self.done()


def asgi(app: Callable, params: bool = False, inject: bool = False) -> Callable:
    """Wrap an ASGI app (FastAPI, Starlette, Django's ASGI handler): as wsgi(), for `http`
    scopes; websockets and lifespan pass straight through.  inject=True as wsgi()'s (a page
    with a Content-Length gets the tag; a streamed one passes untouched)."""
    reporter = _ServerReporter()
    current = _current_request()
    _install_log_capture()
    _watch_by_default()

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
            if message.get("type") == "http.response.body" and not message.get("more_body"):
                rec["_answered"] = True
        try:
            await app(scope, receive, sending)
        except BaseException as exc:
            rec["exception"] = _exception_record(exc)
            if rec.get("_answered"):    # raised once the answer was sent: Starlette/FastAPI BackgroundTasks
                rec["exception"]["after"] = "a background task"
            rec["status"] = rec["status"] or 500
            raise
        finally:
            current.reset(token)
            route = scope.get("route")
            endpoint = scope.get("endpoint")
            rec["view"] = getattr(route, "name", None) or getattr(endpoint, "__name__", None)
            reporter.put(_finish_record(rec))

    reticle_asgi.reticle_reporter = reporter  # type: ignore[attr-defined]
    if inject:
        injecting = _asgi_injecting(reticle_asgi)
        injecting.reticle_reporter = reporter  # type: ignore[attr-defined]
        return injecting
    return reticle_asgi


class DjangoMiddleware:
    """A Django MIDDLEWARE entry ("reticle.DjangoMiddleware"): reports each marked request as
    wsgi() does, names the resolved view, and records the request's database statements through
    `connection.execute_wrapper` on every configured database.  A write inside an atomic block
    counts once its transaction commits (`on_commit`); a rolled-back one is not a write.  In
    development (settings.DEBUG, or settings.RETICLE_INJECT) it also adds the daemon's script tag
    before </head> of each whole HTML page that lacks it, so this one line gives both the SDK and
    server truth."""

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response
        self.reporter = _ServerReporter()
        self.current = _current_request()
        self.inject: Optional[bool] = None  # read from the settings at the first request
        _install_log_capture()
        _watch_by_default()
        _WATCHING["django"] = True

    def __call__(self, request: Any) -> Any:
        response = self._report(request)
        if self.inject is None:
            from django.conf import settings
            self.inject = bool(getattr(settings, "RETICLE_INJECT", settings.DEBUG))
        return _django_inject(response) if self.inject else response

    def _report(self, request: Any) -> Any:
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
    with _RecordingElsewhere():  # a sqlite3 connection's own trace (watched by default) leaves it to this
        result = execute(sql, params, many, context)
    try:
        conn: Any = context.get("connection")
        cursor: Any = context.get("cursor")
        rows = getattr(cursor, "rowcount", None)
        pending = bool(getattr(conn, "in_atomic_block", False))
        w = _note_statement(sql, rows, id(conn), None if pending else True, params,
                            lambda: getattr(cursor, "rowcount", None))
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


def watch_sqlalchemy(engine: Any = None) -> Any:
    """Record the database writes of marked requests made through SQLAlchemy (its event API, on the
    Engine class: every engine of the process, this one included; the middleware does it by
    default): statement kind, table, rows where the driver says, commit or rollback.  A write counts
    once its transaction commits; one rolled back, or never committed, is not a write.  Returns
    `engine` unchanged (kept for the apps that call it on theirs)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if _AUTO_WATCH.get("sqlalchemy"):
        if engine is not None:
            _WATCHING["sqlalchemy"] = True
        return engine

    def before(conn: Any, cursor: Any, statement: Any, parameters: Any, context: Any, executemany: bool) -> None:
        _ELSEWHERE.depth = getattr(_ELSEWHERE, "depth", 0) + 1

    def after(conn: Any, cursor: Any, statement: Any, parameters: Any, context: Any, executemany: bool) -> None:
        _ELSEWHERE.depth = max(0, getattr(_ELSEWHERE, "depth", 1) - 1)
        try:
            positional = parameters
            autocommit = False
            try:
                autocommit = conn.get_isolation_level() == "AUTOCOMMIT"
            except Exception:  # noqa: BLE001
                pass
            named = getattr(context, "compiled_parameters", None)  # the binds by name, where SQLAlchemy compiled them
            if named and len(named) == 1 and isinstance(named[0], dict) and not executemany:
                order = getattr(getattr(context, "compiled", None), "positiontup", None) or ()
                # in the order of the statement's placeholders (a positional dialect's `?`), so each bind
                # can be told the column it goes to
                parameters = dict([(k, named[0][k]) for k in order if k in named[0]]
                                  + [(k, v) for k, v in named[0].items() if k not in order])
            _note_statement(statement, getattr(cursor, "rowcount", None), id(conn.connection.dbapi_connection),
                            True if autocommit else None, parameters, lambda: getattr(cursor, "rowcount", None),
                            None if executemany else positional)
        except Exception:  # noqa: BLE001 - recording must never break the app's query
            pass

    def failed(context: Any) -> None:
        _ELSEWHERE.depth = max(0, getattr(_ELSEWHERE, "depth", 1) - 1)

    def ended(committed: bool) -> Callable:
        def on_end(conn: Any) -> None:
            try:
                _end_transaction(id(conn.connection.dbapi_connection), committed)
            except Exception:  # noqa: BLE001
                pass
        return on_end

    def engaged(conn: Any) -> None:  # an engine of the app connected: SQLAlchemy watches its writes
        _WATCHING["sqlalchemy"] = True
        try:
            _DRIVERS_WATCHED.add(str(conn.engine.dialect.driver).lower())
        except Exception:  # noqa: BLE001
            pass

    event.listen(Engine, "before_cursor_execute", before)
    event.listen(Engine, "after_cursor_execute", after)
    event.listen(Engine, "handle_error", failed)
    event.listen(Engine, "commit", ended(True))
    event.listen(Engine, "rollback", ended(False))
    event.listen(Engine, "engine_connect", engaged)
    _AUTO_WATCH["sqlalchemy"] = True
    if engine is not None:
        _WATCHING["sqlalchemy"] = True
        try:
            _DRIVERS_WATCHED.add(str(engine.dialect.driver).lower())
        except Exception:  # noqa: BLE001
            pass
    return engine


def watch_sqlite3(conn: Any) -> Any:
    """Record the writes of marked requests made on this raw `sqlite3` connection (the Flask
    tutorial's `g.db = reticle.watch_sqlite3(sqlite3.connect(...))`) and return it unchanged:
    through its trace callback (which the app must not replace), each statement as executed,
    its rows from the connection's change counter, and its transaction's COMMIT or ROLLBACK.  On
    Python 3.10 and newer the middleware watches every connection the process opens without the
    call; a statement SQLAlchemy or Django's ORM runs on it is theirs to record."""
    state: Dict[str, Any] = {"w": None, "base": 0}

    def settle() -> None:
        w = state["w"]
        if w is not None and "rows" not in w:
            w["rows"] = conn.total_changes - state["base"]
        state["w"] = None

    def traced(statement: Any) -> None:
        try:
            if _current_request().get() is None or not isinstance(statement, str):
                return
            settle()
            if getattr(_ELSEWHERE, "depth", 0):
                return  # SQLAlchemy or Django's ORM is running it and records it
            head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
            if head in ("COMMIT", "END") or head == "ROLLBACK" and " TO " not in statement.upper():
                _end_transaction(id(conn), head != "ROLLBACK")
                return
            w = _note_statement(statement, None, id(conn), None if conn.in_transaction else True)
            if w is not None:
                base = state["base"] = conn.total_changes
                state["w"] = w
                _current_request().get()["_recount"].append((w, lambda: conn.total_changes - base, True))
        except Exception:  # noqa: BLE001 - recording must never break the app's query
            pass

    conn.set_trace_callback(traced)
    _WATCHING["sqlite3"] = True
    return conn


# ---- watched by default: every SQLAlchemy engine and sqlite3 connection, and what stays unseen ----
# Once a middleware is made (wsgi, asgi, DjangoMiddleware), the app's database writes are watched with
# no call: SQLAlchemy's events on the Engine class (every engine), and on Python 3.10 and newer the
# interpreter's `sqlite3.connect/handle` audit event (every sqlite3 connection, the Flask tutorial's
# raw one too).  A watcher counts as watching the app's writes once it is used (an engine connected,
# a connection opened), so an app that only has SQLAlchemy installed is not said to be watched.  A
# database driver the process loaded that no watcher covers (raw psycopg2 beside SQLAlchemy on
# sqlite, say) is named in each record (`unseen`): the app may write through it, so its "0 writes"
# is no evidence.  Limits: a raw connection of the very driver SQLAlchemy or Django uses is not told
# apart; an app that replaces a sqlite3 connection's trace callback hides that connection.

_AUTO_WATCH: Dict[str, bool] = {}      # the default watchers installed in this process
_DRIVERS_WATCHED: Set[str] = set()     # drivers an engaged watcher covers (SQLAlchemy dialects' drivers)
_ELSEWHERE = threading.local()         # depth > 0 while SQLAlchemy or Django's ORM runs a statement
# DB-API driver modules -> how SQLAlchemy's dialects name them
_DB_DRIVERS = {"psycopg2": "psycopg2", "psycopg": "psycopg", "pymysql": "pymysql", "MySQLdb": "mysqldb",
               "mysql.connector": "mysqlconnector", "asyncpg": "asyncpg", "aiomysql": "aiomysql",
               "aiosqlite": "aiosqlite", "oracledb": "oracledb", "cx_Oracle": "cx_oracle", "pyodbc": "pyodbc",
               "pymssql": "pymssql", "sqlite3": "pysqlite"}
_DJANGO_DRIVERS = {"sqlite": ("pysqlite",), "postgresql": ("psycopg2", "psycopg"), "mysql": ("mysqldb",),
                   "oracle": ("oracledb", "cx_oracle")}


class _RecordingElsewhere:
    """`with _RecordingElsewhere():` around a statement an ORM records itself."""

    def __enter__(self) -> None:
        _ELSEWHERE.depth = getattr(_ELSEWHERE, "depth", 0) + 1

    def __exit__(self, *exc: Any) -> None:
        _ELSEWHERE.depth = max(0, getattr(_ELSEWHERE, "depth", 1) - 1)


_MISSED_SQLITE: List[int] = [0]  # sqlite3 connections opened while a watch could not be put on them


def _sqlite_opened(event: str, args: Tuple[Any, ...]) -> None:
    """The audit hook: every sqlite3 connection the process opens is watched (watch_sqlite3).  The
    event comes while the connection is still being made (it takes no trace callback yet), so the
    watch is put on at the thread's next event once it can be: through sys.monitoring where it exists
    (3.12+: a tool of its own, beside any profiler, coverage tool or debugger), else through the
    thread's profile function, calling a profiler the app set meanwhile and putting it back after.  A
    profiler that is no Python function (cProfile's, set from C) cannot be called or put back from
    Python: then the connection is left unwatched and every record names sqlite3 as unseen."""
    if event != "sqlite3.connect/handle" or not args:
        return
    conn, tries = args[0], [0]

    def watched() -> bool:
        """True once the watch is on, or given up (the connection never got made)."""
        try:
            watch_sqlite3(conn)   # raises until the connection is made
            _DRIVERS_WATCHED.add("pysqlite")
            return True
        except Exception:  # noqa: BLE001 - not made yet, or never: watching must never break the app
            tries[0] += 1
            if tries[0] >= 100:
                _MISSED_SQLITE[0] += 1
                return True
            return False

    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None and _watch_by_monitoring(monitoring, watched):
        return
    previous = sys.getprofile()
    if previous is not None and not callable(previous):
        _MISSED_SQLITE[0] += 1
        return

    def finish(frame: Any, what: Any, arg: Any) -> Any:
        if watched() and sys.getprofile() is finish:
            sys.setprofile(previous)
        return previous(frame, what, arg) if previous is not None else None

    sys.setprofile(finish)


def _watch_by_monitoring(monitoring: Any, watched: Callable[[], bool]) -> bool:
    """Call watched() at this thread's next call, function start or return (a call of the connection's
    own C methods included, as a profile function sees them) until it says done, as a sys.monitoring
    tool of its own (nothing another tool set is touched); False when no tool id is free."""
    tool = next((t for t in range(5, 0, -1) if monitoring.get_tool(t) is None), None)
    if tool is None:
        return False
    thread = threading.get_ident()
    kinds = (monitoring.events.CALL, monitoring.events.PY_START, monitoring.events.PY_RETURN)
    done = [False]

    def step(*_: Any) -> Any:
        if done[0] or threading.get_ident() != thread:
            return None
        if watched():
            done[0] = True
            monitoring.set_events(tool, 0)
            for kind in kinds:
                monitoring.register_callback(tool, kind, None)
            monitoring.free_tool_id(tool)
        return None

    monitoring.use_tool_id(tool, "reticle")
    for kind in kinds:
        monitoring.register_callback(tool, kind, step)
    monitoring.set_events(tool, kinds[0] | kinds[1] | kinds[2])
    return True


def _watch_by_default() -> None:
    """Watch every SQLAlchemy engine and (Python 3.10+) every sqlite3 connection of the process, once, and the
    threads a marked request starts (its jobs: _watch_threads)."""
    _watch_threads()
    if "sqlite3" not in _AUTO_WATCH and sys.version_info >= (3, 10):
        _AUTO_WATCH["sqlite3"] = True
        sys.addaudithook(_sqlite_opened)
    if "sqlalchemy" not in _AUTO_WATCH:
        if "sqlalchemy" in sys.modules:
            _watch_sqlalchemy_now()
        elif not any(isinstance(f, _WatchOnImport) for f in sys.meta_path):
            # merely installed: watched once the app imports it, never imported here (176-409 ms, ~12 MiB)
            sys.meta_path.insert(0, _WatchOnImport())


def _watch_sqlalchemy_now() -> None:
    try:
        watch_sqlalchemy()
    except Exception:  # noqa: BLE001 - an unusable SQLAlchemy watches nothing
        _AUTO_WATCH["sqlalchemy"] = False


class _WatchOnImport:
    """A finder on sys.meta_path that finds nothing itself: when the app imports sqlalchemy, it lets
    the other finders find it and watches SQLAlchemy's engines once the package has run, then leaves."""

    def __init__(self) -> None:
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "sqlalchemy" or self.busy:
            return None
        import importlib.util
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        wrapped: Any = _LoaderThen(spec.loader, _watch_sqlalchemy_now)
        spec.loader = wrapped
        return spec


class _LoaderThen:
    """A module loader that runs `then` after the module it loads has run; everything else is the loader's."""

    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self._loader = loader
        self._then = then

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        module.__loader__ = self._loader  # the package's own loader, as if nothing had come between
        self._then()


def _unseen_drivers() -> List[str]:
    """The database drivers this process loaded that no watcher in use covers (see above)."""
    covered = set(_DRIVERS_WATCHED)
    if _WATCHING.get("django"):
        try:
            from django.db import connections
            for conn in connections.all():
                covered.update(_DJANGO_DRIVERS.get(conn.vendor, ()))
        except Exception:  # noqa: BLE001
            pass
    return [name for name, driver in _DB_DRIVERS.items() if name in sys.modules and (
        driver not in covered and not (name == "sqlite3" and _WATCHING.get("sqlite3"))
        or name == "sqlite3" and _MISSED_SQLITE[0])][:4]   # a connection opened under cProfile: not watched
