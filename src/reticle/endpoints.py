"""Browsers Reticle did not start: CDP endpoints.

A CDP endpoint is full control of a browser, so only the user names one: `reticle serve --cdp-endpoint
URL` (or `verify --cdp-endpoint`) and RETICLE_CDP_ENDPOINT, never a page or a tool call.  An
`http(s)://host:port` endpoint is asked `/json/version` for its browser's DevTools WebSocket; a `ws(s)://`
URL is used as given, query string included, and nothing else is asked of it (a container's or a
hosted browser's proxy may serve no `/json` routes).  A device on an endpoint is a browser context of
its own there, made so that it is disposed when Reticle's connection ends, or the user's own tab,
attached and later detached: the daemon never closes the browser, nor a window or tab it did not open.

A query string often carries the endpoint's token: an endpoint is shown (in logs, answers, errors and
/status) with its query and user info cut out.
"""

from __future__ import annotations

import json
import socket
import urllib.parse
from typing import Any, List, Optional, Tuple

import tornado.httpclient
import tornado.websocket

from .browser import _CdpClient
from .errors import ConfigError, ToolError
from .util import _is_loopback_host, _short


CDP_ENDPOINT_ENV = "RETICLE_CDP_ENDPOINT"   # endpoints separated by whitespace, as --cdp-endpoint names them
ENDPOINT_TIMEOUT_S = 10.0                 # discovery, the socket's opening and its first answer
_WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]")
_CHROME_HINT = ("start Chrome or Chromium with --remote-debugging-port=9222 (and a --user-data-dir of its own; "
                "in a container also --remote-debugging-address=0.0.0.0 and the port published), then retry")


class _Endpoint:
    """One CDP endpoint the user named: where it is, how it is shown, the browser it answered as."""

    def __init__(self, raw: str, by: str) -> None:
        self.raw = raw.strip()
        self.by = by                               # "--cdp-endpoint" or the variable's name
        parts = urllib.parse.urlsplit(self.raw)
        self.scheme = parts.scheme.lower()
        self.host = (parts.hostname or "").lower()
        self.port = parts.port or {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(self.scheme, 0)
        self.discover = self.scheme in ("http", "https")
        shown_host = "[%s]" % self.host if ":" in self.host else self.host
        self.shown = "%s://%s:%d%s%s" % (self.scheme, shown_host, self.port, parts.path if not self.discover else "",
                                          "?..." if parts.query else "")
        self.browser = ""                          # what Browser.getVersion said, once a device connected

    @property
    def loopback(self) -> bool:
        return _is_loopback_host(self.host)

    def describe(self, devices: int) -> dict:
        """As /status shows it, with how many `devices` it holds now (the device manager counts them)."""
        return {"endpoint": self.shown, "by": self.by, "devices": devices, "browser": self.browser or None}


def _parse_endpoint(raw: str, by: str) -> _Endpoint:
    """An endpoint as the user wrote it -> _Endpoint (ConfigError saying what is accepted otherwise)."""
    accepted = ("accepted: http://HOST:PORT (a browser started with --remote-debugging-port=PORT, asked "
                "/json/version) or ws://HOST:PORT/devtools/browser/ID, wss://..., query string kept")
    try:
        parts = urllib.parse.urlsplit(raw.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError("%s: %r is not a URL (%s); %s" % (by, _short(raw, 120), exc, accepted)) from None
    if parts.scheme.lower() not in ("http", "https", "ws", "wss") or not parts.hostname:
        raise ConfigError("%s: %r is not a CDP endpoint; %s" % (by, _short(raw, 120), accepted))
    if parts.scheme.lower() in ("http", "https") and (parts.query or parts.path.strip("/")):
        raise ConfigError("%s: an http endpoint is the browser's address alone (http://HOST:PORT); for a URL with "
                          "a path or a token, give the WebSocket URL (ws://... or wss://...)" % by)
    if port is None and parts.scheme.lower() in ("http", "ws"):
        raise ConfigError("%s: %r names no port; Chrome's DevTools listen on the port of "
                          "--remote-debugging-port (9222 by custom)" % (by, _short(raw, 120)))
    return _Endpoint(raw, by)


def _parse_endpoints(given: List[str], env_value: str) -> List[_Endpoint]:
    """The endpoints of the command line, then of RETICLE_CDP_ENDPOINT (whitespace-separated), without repeats."""
    seen: List[_Endpoint] = []
    for raw, by in [(g, "--cdp-endpoint") for g in given] + [(e, CDP_ENDPOINT_ENV) for e in env_value.split()]:
        ep = _parse_endpoint(raw, by)
        if all(x.raw != ep.raw for x in seen):
            seen.append(ep)
    return seen


def _endpoint_failure(ep: _Endpoint, what: str, recovery: str = _CHROME_HINT) -> ToolError:
    return ToolError("the CDP endpoint %s (%s) %s" % (ep.shown, ep.by, what), recovery, code="endpoint_unreachable")


def _refused_connection(exc: BaseException) -> bool:
    return isinstance(exc, (ConnectionRefusedError, socket.gaierror)) or "refused" in str(exc).lower()


async def _discover(ep: _Endpoint) -> str:
    """An http endpoint's browser WebSocket URL, from /json/version.  A URL there on loopback or a wildcard
    address (what Chrome names when reached through a port mapping or a proxy) is reached through the host
    and port the user named; one on any other host was not named by the user and is refused."""
    url = "%s://%s:%d/json/version" % (ep.scheme, "[%s]" % ep.host if ":" in ep.host else ep.host, ep.port)
    client = tornado.httpclient.AsyncHTTPClient()
    try:
        resp = await client.fetch(url, connect_timeout=ENDPOINT_TIMEOUT_S, request_timeout=ENDPOINT_TIMEOUT_S,
                                  raise_error=False, follow_redirects=False)
    except Exception as exc:  # refused, unresolvable, timed out: the browser is not there
        if _refused_connection(exc):
            raise _endpoint_failure(ep, "refused the connection: nothing listens there (%s)"
                                    % _short(str(exc), 120)) from None
        raise _endpoint_failure(ep, "did not answer /json/version within %g s (%s)" % (
            ENDPOINT_TIMEOUT_S, _short(str(exc), 120))) from None
    body = (resp.body or b"")[:4096].decode("utf-8", "replace")
    if resp.code == 599:
        raise _endpoint_failure(ep, "could not be reached (%s)" % _short(str(resp.error), 160))
    if "Host header is specified and is not an IP address or localhost" in body:
        raise _endpoint_failure(ep, "refused the request: Chrome answers DevTools requests whose Host is an IP "
                                "address or localhost only", "name the endpoint by its IP address "
                                "(http://172.17.0.2:9222, not a host name), or give its ws:// URL")
    try:
        found = json.loads(body) if resp.code == 200 else None
    except ValueError:
        found = None
    ws = found.get("webSocketDebuggerUrl") if isinstance(found, dict) else None
    if not isinstance(ws, str) or not ws.startswith(("ws://", "wss://")):
        raise _endpoint_failure(ep, "answered /json/version with HTTP %d and %s, not a DevTools endpoint's "
                                "description (another program listens on that port?)"
                                % (resp.code, repr(_short(body, 80)) if body else "no body"),
                                "check the port: Chrome's is the one of --remote-debugging-port; " + _CHROME_HINT)
    ep.browser = str(found.get("Browser", ""))[:80] if isinstance(found, dict) else ""
    return _named_host(ep, ws)


def _named_host(ep: _Endpoint, ws: str) -> str:
    parts = urllib.parse.urlsplit(ws)
    host = (parts.hostname or "").lower()
    if host == ep.host or _is_loopback_host(host) or host in _WILDCARD_HOSTS:
        netloc = "%s:%d" % ("[%s]" % ep.host if ":" in ep.host else ep.host, ep.port)
        scheme = "wss" if ep.scheme == "https" else "ws"
        return urllib.parse.urlunsplit((scheme, netloc, parts.path, parts.query, ""))
    raise ToolError("the CDP endpoint %s handed out a DevTools URL on another host (%s), which nobody named; "
                    "a CDP endpoint is full control of a browser, so Reticle connects only where the user "
                    "points it" % (ep.shown, host), "name that URL itself with --cdp-endpoint ws://%s:PORT/... "
                    "or RETICLE_CDP_ENDPOINT" % host, code="endpoint_refused")


async def _connect_endpoint(ep: _Endpoint, cdp: _CdpClient) -> None:
    """Open `cdp` to the endpoint's browser (asking /json/version first for an http endpoint) and check that
    it speaks CDP (Browser.getVersion); every failure a ToolError naming the endpoint and the fix."""
    ws = await _discover(ep) if ep.discover else ep.raw
    try:
        await cdp.connect(ws, timeout=ENDPOINT_TIMEOUT_S)
    except tornado.httpclient.HTTPClientError as exc:
        if exc.code in (401, 403):
            raise _endpoint_failure(ep, "refused the DevTools connection (HTTP %d)" % exc.code,
                                    "check the token in the endpoint's URL; a Chrome that checks origins takes "
                                    "--remote-allow-origins=*") from None
        if exc.code == 404:
            raise _endpoint_failure(ep, "has no DevTools socket at that path (HTTP 404): the browser it named "
                                    "has gone, or the URL is not a browser's", "give the current ws:// URL, or "
                                    "the browser's http://HOST:PORT") from None
        raise _endpoint_failure(ep, "did not open a WebSocket (HTTP %d): it speaks another protocol" % exc.code,
                                "check that the URL is a DevTools endpoint; " + _CHROME_HINT) from None
    except Exception as exc:  # refused, reset, timed out
        if _refused_connection(exc):
            raise _endpoint_failure(ep, "refused the connection: nothing listens there") from None
        raise _endpoint_failure(ep, "could not be reached within %g s (%s)" % (
            ENDPOINT_TIMEOUT_S, _short(str(exc) or type(exc).__name__, 120))) from None
    try:
        version = await cdp.call("Browser.getVersion", timeout=ENDPOINT_TIMEOUT_S)
    except ToolError as exc:
        cdp.close()
        raise _endpoint_failure(ep, "opened a WebSocket but did not answer as a DevTools endpoint (%s): it "
                                "speaks another protocol" % _short(exc.error, 120),
                                "check that the URL is a browser's DevTools endpoint; " + _CHROME_HINT) from None
    ep.browser = str(version.get("product", ep.browser))[:80]


def _link_addresses(cdp: _CdpClient) -> Tuple[Optional[str], Optional[str]]:
    """(this machine's address, the endpoint's) on the connection to an endpoint: where that browser's host
    reaches this daemon back, and where its pages' sockets come from; None where the socket does not say."""
    ws: Any = getattr(cdp, "_ws", None)
    stream = getattr(getattr(ws, "protocol", None), "stream", None) or getattr(ws, "stream", None)
    sock = getattr(stream, "socket", None)
    try:
        return (str(sock.getsockname()[0]), str(sock.getpeername()[0])) if sock is not None else (None, None)
    except OSError:
        return None, None


def _pick_endpoint(endpoints: List[_Endpoint], in_use: List[Optional[_Endpoint]]) -> Optional[_Endpoint]:
    """The endpoint the next device goes to: the one the live devices (`in_use`, each device's endpoint) use
    least, the first named on a tie."""
    return min(endpoints, key=in_use.count) if endpoints else None


def _match_tab(targets: List[dict], url: str) -> Tuple[Optional[dict], List[str]]:
    """The user's tab to attach to for `url`: a page target showing exactly that URL, else one whose URL
    starts with it, else one on the same origin and path (query and fragment aside); the most recently
    listed of several (Chrome lists the newest first).  -> (target or None, the URLs of the pages seen)."""
    pages = [t for t in targets if isinstance(t, dict) and t.get("type") == "page"
             and not str(t.get("url", "")).startswith(("devtools://", "chrome://", "chrome-extension://"))]
    seen = [_short(str(t.get("url", "")), 120) for t in pages]
    want = urllib.parse.urlsplit(url)

    def same_page(t: dict) -> bool:
        got = urllib.parse.urlsplit(str(t.get("url", "")))
        return (got.scheme, got.netloc.lower(), got.path or "/") == (want.scheme, want.netloc.lower(), want.path or "/")

    for fits in (lambda t: t.get("url") == url, lambda t: str(t.get("url", "")).startswith(url), same_page):
        found = [t for t in pages if fits(t)]
        if found:
            return found[0], seen
    return None, seen
