"""The script tag in the app's pages, and where the daemon is.

The app's side, like the middleware that imports it (it imports nothing of the daemon's): where the app
finds the daemon and its token (as the CLI does), and the dev-only script tag the middleware adds before
</head> of each whole HTML page that lacks it (inject=True, Django under DEBUG).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from .constants import DEFAULT_HOST, DEFAULT_PORT
from .util import _StateDir


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
