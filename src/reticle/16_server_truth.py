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


# ---- the script tag, added by the middleware to the app's HTML pages (inject) ----

SERVER_INJECT_MAX_BYTES = 2 << 20  # an HTML body read whole to add the script tag; a larger one passes untouched


def _sdk_tag() -> bytes:
    """The script tag of the daemon the middleware reports to (found as the reporter finds it)."""
    host, port = _daemon_address()
    return ('<script src="http://%s:%d/reticle.js"></script>' % ("[%s]" % host if ":" in host else host,
                                                                 port)).encode("ascii")


def _injectable(status: int, headers: Dict[str, str], length_known: bool) -> bool:
    """Whether a response may get the script tag: an HTML page (text/html or XHTML, in an
    ASCII-compatible charset) whose whole body is known and small (a Content-Length up to
    SERVER_INJECT_MAX_BYTES, or a body the app already made), not compressed, not a download,
    not 204/304.  Everything else (streams, gzip, JSON, files) passes as it is.  `headers` have
    lower-case names."""
    if status in (204, 304) or status < 200:
        return False
    ctype = headers.get("content-type", "")
    if ctype.split(";", 1)[0].strip().lower() not in ("text/html", "application/xhtml+xml"):
        return False
    charset = re.search(r"charset\s*=\s*\"?([\w-]+)", ctype, re.I)
    if charset and charset.group(1).lower().startswith(("utf-16", "utf-32", "ucs")):
        return False
    if headers.get("content-encoding", "identity").strip().lower() != "identity":
        return False
    if "attachment" in headers.get("content-disposition", "").lower():
        return False
    length = headers.get("content-length")
    if length is None:
        return length_known
    return length.strip().isdigit() and int(length) <= SERVER_INJECT_MAX_BYTES


def _with_sdk_tag(body: bytes) -> Optional[bytes]:
    """`body` with the script tag before its </head>, or None: it loads reticle.js already, or has no </head>."""
    if len(body) > SERVER_INJECT_MAX_BYTES or b"/reticle.js" in body:
        return None
    m = re.search(rb"</head\s*>", body, re.I)
    if m is None:
        return None
    return body[:m.start()] + _sdk_tag() + body[m.start():]


def _django_inject(response: Any) -> Any:
    """DjangoMiddleware's injection: the tag into a whole HTML response, Content-Length kept true."""
    if getattr(response, "streaming", False):
        return response
    headers = {k.lower(): v for k, v in response.items()}
    if not _injectable(response.status_code, headers, True):
        return response
    body = _with_sdk_tag(response.content)
    if body is not None:
        response.content = body
        if response.has_header("Content-Length"):
            response["Content-Length"] = str(len(body))
    return response


def _wsgi_injecting(app: Callable) -> Callable:
    """A WSGI app that adds the script tag to `app`'s HTML pages (wsgi(inject=True)).  A page is
    held only when its whole body is known and small (_injectable): its start_response is
    delayed until the body is read and changed; anything else, and an app that writes through
    start_response's `write` or starts late (from its iterable), passes straight through."""

    def reticle_inject(environ: dict, start_response: Callable) -> Any:
        """One request: hold an injectable page's start until its body is read, then answer it whole."""
        held: List[Any] = []
        writer: List[Callable] = []
        deciding = [True]

        def start(status: str, headers: list, exc_info: Any = None) -> Any:
            named = {str(k).lower(): str(v) for k, v in headers}
            try:
                code = int(str(status).split(" ", 1)[0])
            except ValueError:
                code = 0
            if exc_info is not None or not deciding[0] or not _injectable(code, named, True):
                held.clear()
                return start_response(status, headers, exc_info) if exc_info is not None else \
                    start_response(status, headers)
            held[:] = [status, headers]

            def write(data: bytes) -> None:  # the app writes before it returns: pass through, untouched
                if not writer:
                    writer.append(start_response(*held))
                    held.clear()
                writer[0](data)
            return write
        result = app(environ, start)
        deciding[0] = False
        if len(held) != 2:
            return result  # passed through (or written through `write`)
        status, headers = held
        named = {str(k).lower(): str(v) for k, v in headers}
        if "content-length" not in named and not isinstance(result, (list, tuple)):
            start_response(status, headers)
            return result  # an iterable of unknown length: a stream, left alone
        try:
            body = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        new = _with_sdk_tag(body)
        if new is not None:
            headers = [(k, str(len(new)) if str(k).lower() == "content-length" else v) for k, v in headers]
            body = new
        start_response(status, headers)
        return [body]

    return reticle_inject


def _asgi_injecting(app: Callable) -> Callable:
    """An ASGI app that adds the script tag to `app`'s HTML pages (asgi(inject=True)): the
    response start of a page with a small Content-Length is held until its body has arrived,
    then both are sent with the tag in and the length fixed.  Streams (no Content-Length),
    compressed and non-HTML responses, and websockets pass straight through."""

    async def reticle_inject(scope: dict, receive: Callable, send: Callable) -> None:
        """One connection: hold an injectable page's start and body parts, then send them changed."""
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        held: List[dict] = []
        parts: List[bytes] = []

        async def release(whole: bool) -> None:
            """Send the held start and the body read so far: changed when it is the `whole` page."""
            start, body = held.pop(), b"".join(parts)
            parts.clear()
            new = _with_sdk_tag(body) if whole else None
            if new is not None:
                length = str(len(new)).encode("latin-1")
                start = dict(start, headers=[(k, length if bytes(k).lower() == b"content-length" else v)
                                             for k, v in start.get("headers") or ()])
                body = new
            await send(start)
            if whole or body:
                await send({"type": "http.response.body", "body": body, "more_body": not whole})

        async def sending(message: dict) -> None:
            kind = message.get("type")
            if kind == "http.response.start":
                named = {bytes(k).decode("latin-1").lower(): bytes(v).decode("latin-1")
                         for k, v in message.get("headers") or ()}
                if "content-length" in named and _injectable(int(message.get("status") or 0), named, False):
                    held.append(message)
                    return
            elif held and kind == "http.response.body":
                parts.append(bytes(message.get("body") or b""))
                if not message.get("more_body"):
                    await release(True)
                elif sum(len(p) for p in parts) > SERVER_INJECT_MAX_BYTES:
                    await release(False)  # longer than it said: the rest goes as it comes
                return
            elif held:
                await release(False)  # something else (pathsend, trailers): the page goes as it was
            await send(message)

        await app(scope, receive, sending)

    return reticle_inject


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


# What watches this process's database writes ("django", "sqlalchemy", "sqlite3"), as the watchers
# are installed: a record made while none is names its writes "not watched", not "0 writes".
_WATCHING: Dict[str, bool] = {}


def _begin_record(mark: str, method: str, path: str, host: str, via: str, params: bool = False,
                  sent: Optional[dict] = None) -> dict:
    return {"mark": mark[:200], "method": method[:16], "path": path[:2048], "host": host[:300], "via": via,
            **(sent or {}), "status": None, "view": None,
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
    """Watch every SQLAlchemy engine and (Python 3.10+) every sqlite3 connection of the process, once."""
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


# ---- the daemon's side: stitch records into the tab whose mark they carry ----

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
        if isinstance(v.get("after"), str):   # raised after the answer was sent, in this work
            out["after"] = v["after"][:60]
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
    watched = raw.get("watched")
    if isinstance(watched, list):   # what watched the app's writes ([]: nothing did); absent: not said
        rec["watched"] = [w[:40] for w in watched[:8] if isinstance(w, str)]
    unseen = raw.get("unseen")
    if isinstance(unseen, list) and unseen:   # drivers the app may write through that nothing watches
        rec["unseen"] = [u[:40] for u in unseen[:4] if isinstance(u, str)]
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
            keys = w.get("keys")
            if isinstance(keys, list) and keys:
                writes[-1]["keys"] = [k if isinstance(k, int) and not isinstance(k, bool) else str(k)[:64]
                                      for k in keys[:20] if isinstance(k, (int, str))]
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

    def redirect_only(self, secret: str) -> bool:
        """Whether a held mark is good now only for the redirect that led to a record already taken."""
        ticket = self.live.get(secret)
        return ticket is not None and len(ticket) > 3

    def take(self, secret: str, again_until: Optional[float] = None, then_redirect: bool = False) -> Tuple[str, str]:
        """(document, id) of a held mark, which is then spent, or with again_until, good for one
        more request until then: the request its redirect leads to, or with then_redirect (the
        page a navigation ended on reported first), only the redirect that led there."""
        doc, tid = self.live.pop(secret)[:2]
        if again_until is not None:
            self.live[secret] = [doc, tid, again_until] + (["redirect"] if then_redirect else [])
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


def _replaces_spans(hub: "Hub", secret: str, rec: dict, sessions: List[Any]) -> bool:
    """A middleware's record for a request whose mark its OpenTelemetry spans already spent (the exporter
    can be first on a loaded machine): the middleware's record, which sees commits, takes the spans'
    record's place under the same document and id (its late spans no longer join it) -> whether it did."""
    otel: Any = getattr(hub, "otel", None)
    spent = otel.done.get(secret) if otel is not None and rec["via"] == "header" else None
    if otel is None or spent is None or spent[1].get("source") != "otel" or spent[0] not in sessions:
        return False
    owner, old = spent
    if _server_sender_refused(rec, owner) is not None:
        return False
    rec["documentId"], rec["requestId"] = old["documentId"], old["requestId"]
    old.clear()
    old.update(rec)  # the event the tab stored holds this dict: its window now reads the middleware's record
    del otel.done[secret]
    owner.server_otel = max(0, owner.server_otel - 1)
    owner._wake()
    return True


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
        if owner is None and _replaces_spans(hub, secret, rec, sessions):
            stitched += 1
            continue
        if owner is None:
            unmatched += 1
            continue
        why = _server_sender_refused(rec, owner)
        if why is not None:
            refused += 1
            stats["lastRefused"] = "%s %s: %s" % (rec["method"], rec["path"][:200], why)
            continue
        redirected = rec["via"] == "cookie" and 300 <= (rec["status"] or 0) < 400
        tickets = owner.server_tickets
        if tickets.redirect_only(secret):
            if not redirected:
                unmatched += 1
                continue
            rec["documentId"], rec["requestId"] = tickets.take(secret)
        else:
            # a navigation's mark: the redirect's record and that of the page it led to may come in
            # either order (a WSGI record is sent when the server closes the body), so the first of
            # the two leaves the mark good for the other (a non-3xx first: for a 3xx only)
            rec["documentId"], rec["requestId"] = tickets.take(
                secret, now + SERVER_REDIRECT_MS if rec["via"] == "cookie" else None, not redirected)
        owner.add_server_record(rec)
        stitched += 1
    stats["received"] += len(records)
    stats["stitched"] += stitched
    stats["unmatched"] += unmatched
    stats["invalid"] += invalid
    stats["refused"] += refused
    return {"stitched": stitched, "unmatched": unmatched, "invalid": invalid, "refused": refused}


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
OTEL_MAX_DEPTH = 16              # nesting of AnyValue arrays/maps accepted


class _PbError(ValueError):
    """A protobuf body that is not a well-formed OTLP message (said where)."""


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


class _SpanRefused(ValueError):
    """One span of a batch that cannot be read (its message says why); the rest of the batch is kept."""


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


_OTEL_TX = re.compile(r"^\s*(BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK)\b", re.I)
# The instrumentations that trace a transaction's BEGIN, COMMIT and ROLLBACK (their drivers send them as
# statements), so that a write outside a traced transaction was autocommitted.  Others (Python's DB-API,
# sqlite3 and SQLAlchemy instrumentations: the driver begins and commits without a statement) show no
# transaction at all, so whether such a write was kept is unknown; a service whose spans have shown a
# transaction statement is learned to be of the first kind (_OtelTraces.tx_services).
_OTEL_TX_SCOPES = ("@opentelemetry/instrumentation-pg", "@opentelemetry/instrumentation-mysql",
                   "@opentelemetry/instrumentation-mysql2")
_COMMIT_UNTRACED = "its commit is not traced (no BEGIN/COMMIT spans)"
# The languages (OpenTelemetry's telemetry.sdk.language) whose database drivers commit a statement made outside a
# transaction by themselves: Node's pg, mysql2 and SQLite drivers, Go's database/sql, JDBC, ADO.NET, Ruby's.
# Python's DB-API does not (a connection opens a transaction that must be committed), so there it stays unknown.
_AUTOCOMMIT_LANGUAGES = frozenset(("nodejs", "go", "java", "dotnet", "ruby"))


def _otel_db_write(sp: dict) -> Optional[dict]:
    """A database span's write as the middleware notes one ({op, table, sql, committed}), or None:
    the kind and table from db.operation.name/db.operation and db.collection.name/db.sql.table,
    else parsed from the statement (db.query.text/db.statement)."""
    a = sp["attrs"]
    sql = a.get("db.query.text") or a.get("db.statement")
    sql = sql if isinstance(sql, str) else ""
    op = str(a.get("db.operation.name") or a.get("db.operation") or "").strip().lower()
    table = a.get("db.collection.name") or a.get("db.sql.table")
    parsed = _sql_write(sql) if sql else None
    if parsed is None and op in ("insert", "update", "delete", "replace") and table:
        parsed = {"op": "insert" if op == "replace" else op, "table": str(table)[:200],
                  "sql": _scrub_server(sql[:SERVER_SQL_CAP])}
    if parsed is None:
        return None
    if table:
        parsed["table"] = str(table)[:200]
    rows = a.get("db.response.affected_rows", a.get("db.rows_affected"))
    if isinstance(rows, int) and rows >= 0:
        parsed["rows"] = rows
    parsed["committed"] = False if sp["error"] else True
    if sp["error"]:
        parsed["note"] = "the statement failed (its span's status is ERROR)"
    return parsed


def _otel_writes(spans: List[dict], tx_traced: bool = False) -> Tuple[List[dict], int]:
    """The writes of a trace's database spans, in the order they started, with commit or rollback
    where a transaction's statements are traced (BEGIN ... COMMIT/ROLLBACK); and the number of
    database statements seen.  A write outside a traced transaction was autocommitted where the
    instrumentation traces transaction statements (`tx_traced`: the service has shown one, or its
    instrumentation is one of _OTEL_TX_SCOPES), or where the service's language's drivers autocommit
    (_AUTOCOMMIT_LANGUAGES); elsewhere its commit is unknown (committed None)."""
    db = [s for s in spans if s["attrs"].get("db.system") or s["attrs"].get("db.system.name")]
    ids = {s["spanId"] for s in db}
    # one statement seen by two instrumentations (SQLAlchemy's, and the DB-API driver's under it) is one
    db = sorted((s for s in db if s["parentSpanId"] not in ids), key=lambda s: s["start"] or 0)
    writes: List[dict] = []
    pending: Optional[List[dict]] = None
    for sp in db:
        text = sp["attrs"].get("db.query.text") or sp["attrs"].get("db.statement") or sp["name"]
        m = _OTEL_TX.match(text) if isinstance(text, str) else None
        if m:
            word = m.group(1).upper()
            if word.startswith(("BEGIN", "START")):
                pending = []
            elif pending is not None:
                for done in pending:
                    if word == "ROLLBACK":
                        done["committed"], done["note"] = False, "rolled back"
                pending = None
            continue
        w = _otel_db_write(sp)
        if w is None:
            continue
        if pending is None and w["committed"] and not (tx_traced or sp["scope"] in _OTEL_TX_SCOPES
                                                        or sp.get("language") in _AUTOCOMMIT_LANGUAGES):
            w["committed"], w["note"] = None, _COMMIT_UNTRACED
        writes.append(w)
        if pending is not None and w["committed"]:
            pending.append(w)
    for w in pending or []:
        w["committed"], w["note"] = False, "never committed (no COMMIT in the trace)"
    return writes[:50], len(db)


def _otel_tx_statement(sp: dict) -> bool:
    """A database span whose statement begins, commits or rolls back a transaction."""
    text = sp["attrs"].get("db.query.text") or sp["attrs"].get("db.statement") or sp["name"]
    return bool((sp["attrs"].get("db.system") or sp["attrs"].get("db.system.name"))
                and isinstance(text, str) and _OTEL_TX.match(text))


def _otel_record(server: dict, spans: List[dict], logs: List[dict], tx_traced: bool = False) -> dict:
    """The middleware's record (the raw shape _clean_server_record takes) of one SERVER span and the
    rest of its trace: method, path, host, status, route, duration, the first exception event (the
    server span's, else an internal span's: a client call's own failure is not the request's), error
    logs, and the database spans' writes."""
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
    writes, statements = _otel_writes(spans, tx_traced)
    ms = (server["end"] - server["start"]) / 1e6 if server["end"] and server["start"] else None
    return {"mark": server["traceId"], "method": str(a.get("http.request.method") or a.get("http.method") or ""),
            "path": path, "host": str(host), "via": "header",
            "status": status if isinstance(status, int) and not isinstance(status, bool) else None,  # _otel_status
            "view": a.get("http.route") if isinstance(a.get("http.route"), str) else None,
            "ms": round(ms, 3) if ms is not None else None, "exception": exc, "statements": statements,
            "logged": [{k: v for k, v in e.items() if k != "traceId"} for e in logs][:20], "writes": writes}


def _otlp_read(body: bytes, media: str, encoding: str, what: str) -> Tuple[List[dict], List[dict], List[str]]:
    """One OTLP request body, read: (spans, error logs, why each span refused was refused).  Pure, and
    the costly part of an export (inflate, parse, convert), so it runs off the event loop."""
    payload = _otlp_payload(body, media, encoding, what)
    if what == "traces":
        spans, bad = _otel_spans(payload)
        return spans, [], bad
    return [], _otel_logs(payload), []


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
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", "")


def _origin_key(host: Any, port: Any, scheme: Any = "http") -> Optional[str]:
    """"loopback:3000" for a host and port as a span or a page's URL names them (every loopback name
    is one), None without a usable port."""
    host = str(host or "").strip().lower()
    if host.count(":") == 1 and not host.startswith("["):
        host, _, given = host.partition(":")
        port = port or given
    try:
        number = int(port) if port not in (None, "") else {"http": 80, "https": 443}.get(str(scheme).lower())
    except (TypeError, ValueError):
        return None
    if number is None:
        return None
    return "%s:%d" % ("loopback" if host in _LOOPBACK_NAMES else host, number)


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
    HTTP SERVER spans, and SERVER spans under a trace id the daemon issued (attributed).  A service with
    spans but no SERVER span has an HTTP server no instrumentation sees; one whose SERVER spans never
    carry an issued trace id does not continue the tab's `traceparent`."""

    def __init__(self) -> None:
        self.services: "collections.OrderedDict[str, Dict[str, float]]" = collections.OrderedDict()

    def note(self, spans: List[dict], owned: Set[str], now: float) -> None:
        for sp in spans:
            row = self.services.get(sp["service"])
            if row is None:
                row = self.services[sp["service"]] = {"spans": 0, "server": 0, "attributed": 0, "at": now}
                while len(self.services) > 64:
                    self.services.popitem(last=False)
            row["spans"] += 1
            row["at"] = now
            if sp["kind"] == 2:
                row["server"] += 1
                row["attributed"] += sp["traceId"] in owned

    def unattributed(self, now: float, recent_ms: float = 600_000.0) -> List[dict]:
        """The services heard in the last ten minutes none of whose spans could land in a tab: why, and
        the fix for a stack that sends spans (never the Python middleware's)."""
        out = []
        for name, row in self.services.items():
            if now - row["at"] > recent_ms or row["attributed"] or row["spans"] < 2:
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
                        "serverSpans": int(row["server"]), "cause": cause, "fix": fix})
        return out[:5]


class _OtelTraces:
    """The daemon's side of OpenTelemetry: spans of traces issued to a tab wait here (at most
    OTEL_HELD_SPANS, as long as their trace id is held) until the trace's SERVER span arrives; its
    record is then stitched as a middleware record would be, once.  Error logs, and child spans that
    arrive after it (a batch split), amend the record while it is recent (OTEL_DONE_KEPT)."""

    def __init__(self) -> None:
        self.pool: Optional[concurrent.futures.ThreadPoolExecutor] = None  # reads bodies, one at a time
        self.sources = _SpanSources()
        self.held: "collections.OrderedDict[str, dict]" = collections.OrderedDict()
        self.done: "collections.OrderedDict[str, Tuple[Any, dict]]" = collections.OrderedDict()
        self.spans = 0
        self.db_services: Set[str] = set()  # services whose spans have shown database statements
        self.tx_services: Set[str] = set()  # ... and a transaction statement (their commits are traced)
        # origins (loopback:3000) whose requests traced services have answered: only a tab on one of them
        # waits for spans (one app's tracing must not slow another app's verdicts)
        self.origins: "collections.OrderedDict[str, None]" = collections.OrderedDict()
        self.stats = {"spans": 0, "logs": 0, "stitched": 0, "unmatched": 0, "refused": 0, "foreign": 0}

    def _owner(self, hub: "Hub", tid: str, now: float) -> Any:
        sessions = list(hub.bridge.sessions.values()) + [s for s, _ in hub.bridge.departed.values()]
        return next((s for s in sessions if s.server_tickets.holds(tid, now)), None)

    def _hold(self, tid: str) -> dict:
        entry = self.held.get(tid)
        if entry is None:
            entry = self.held[tid] = {"spans": [], "logs": []}
        while self.spans > OTEL_HELD_SPANS and self.held:
            _, old = self.held.popitem(last=False)
            self.spans -= len(old["spans"])
        return entry

    def _learn(self, spans: List[dict]) -> None:
        """From every span, stitched or not: the services whose spans show database statements (their
        "0 writes" is evidence) and transaction statements (their commits are traced)."""
        for sp in spans:
            if sp["attrs"].get("db.system") or sp["attrs"].get("db.system.name"):
                self.db_services.add(sp["service"])
                if _otel_tx_statement(sp):
                    self.tx_services.add(sp["service"])

    async def take(self, hub: "Hub", body: bytes, media: str, encoding: str, what: str) -> List[str]:
        """One export: read on the pool's one thread (_otlp_read), so the event loop goes on serving
        while a large batch inflates and parses (and two batches never read at once), then filed in
        slices of whole traces with the loop free between them.  -> why each refused span was refused;
        _HttpRefusal for a body that is no OTLP."""
        if self.pool is None:
            self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="reticle-otlp")
        loop = asyncio.get_running_loop()
        spans, logs, bad = await loop.run_in_executor(self.pool, _otlp_read, body, media, encoding, what)
        for part_spans, part_logs in _whole_traces(spans, logs, OTEL_SLICE_SPANS):
            self.absorb(hub, part_spans, part_logs)
            await asyncio.sleep(0)
        return bad

    def serves(self, url: str) -> bool:
        """Has a traced service been seen answering the origin of `url` (a tab's page)?"""
        try:
            parts = urllib.parse.urlsplit(url)
            return _origin_key(parts.hostname, parts.port, parts.scheme) in self.origins
        except ValueError:
            return False

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False)
            self.pool = None

    def absorb(self, hub: "Hub", spans: List[dict], logs: List[dict]) -> None:
        """Group what arrived by trace id; file what belongs to a tab (see the class)."""
        now = hub.clock()
        by_trace: Dict[str, Tuple[List[dict], List[dict]]] = {}
        for sp in spans:
            by_trace.setdefault(sp["traceId"], ([], []))[0].append(sp)
        for lg in logs:
            by_trace.setdefault(lg["traceId"], ([], []))[1].append(lg)
        for sp in spans:
            origin = _span_origin(sp["attrs"]) if sp["kind"] == 2 else None
            if origin is not None:
                self.origins[origin] = None
                self.origins.move_to_end(origin)
                if len(self.origins) > OTEL_ORIGINS_KEPT:
                    self.origins.popitem(last=False)
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
                continue
            entry = self._hold(tid)
            entry["spans"].extend(got)
            entry["logs"].extend(logged)
            self.spans += len(got)
            self._try_stitch(hub, tid, owner, entry, now)

    def _try_stitch(self, hub: "Hub", tid: str, owner: Any, entry: dict, now: float) -> None:
        """Once the trace's root SERVER span (its parent is the SDK's, not among the trace's spans) has
        arrived: its record, stitched into the tab that holds the trace id, under the document and
        request the id was issued for, once; the trace is then kept open for late spans (done)."""
        ids = {s["spanId"] for s in entry["spans"]}
        server = next((s for s in entry["spans"] if s["kind"] == 2 and s["parentSpanId"] not in ids), None)
        if server is None:
            return
        self.held.pop(tid, None)
        self.spans -= len(entry["spans"])
        if any(_otel_tx_statement(s) for s in entry["spans"]):
            self.tx_services.add(server["service"])
        rec = _clean_server_record(_otel_record(server, entry["spans"], entry["logs"],
                                                server["service"] in self.tx_services))
        if rec is None:
            return
        rec.pop("mark")
        why = _server_sender_refused(rec, owner)
        if why is not None:
            self.stats["refused"] += 1
            return
        rec["source"] = "otel"
        rec["service"] = server["service"]
        rec["dbScopes"] = sorted({s["scope"] for s in entry["spans"] if s["attrs"].get("db.system")
                                  or s["attrs"].get("db.system.name")})[:3]
        if rec["statements"]:
            self.db_services.add(server["service"])
        rec["dbTraced"] = server["service"] in self.db_services
        rec["documentId"], rec["requestId"] = owner.server_tickets.take(tid)
        owner.server_otel += 1
        owner.add_server_record(rec)
        self.stats["stitched"] += 1
        self.done[tid] = (owner, rec)
        while len(self.done) > OTEL_DONE_KEPT:
            self.done.popitem(last=False)

    def _amend(self, tid: str, spans: List[dict], logs: List[dict]) -> None:
        """Late children and logs of a stitched trace: their writes, exception and error logs join its record."""
        owner, rec = self.done[tid]
        for lg in logs:
            if len(rec["logged"]) < 20:
                rec["logged"].append({k: v for k, v in lg.items() if k != "traceId"})
        if any(_otel_tx_statement(s) for s in spans):
            self.tx_services.add(rec.get("service") or "")
        writes, statements = _otel_writes(spans, rec.get("service") in self.tx_services)
        rec["writes"].extend(writes[:max(0, 50 - len(rec["writes"]))])
        rec["statements"] += statements
        rec["dbTraced"] = rec["dbTraced"] or statements > 0
        if rec["exception"] is None:
            for sp in spans:
                exc = next((_otel_exception(e["attrs"]) for e in sp["events"] if e["name"] == "exception"
                            and sp["kind"] in (0, 1)), None)
                if exc:
                    rec["exception"] = exc
                    break
        owner._wake()
