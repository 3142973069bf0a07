"""Browsers and DevTools.

The browsers Reticle can start (found on this machine, started with a profile of their own) and the
Chrome DevTools Protocol client it drives them with.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

import tornado.httpclient
import tornado.web
import tornado.websocket

from .constants import _emit
from .errors import _CdpError, ToolError
from .events import _net_key_url
from .util import _dumps


_device_log = logging.getLogger("reticle.devices")


DEVICE_START_TIMEOUT_S = 20.0              # browser launch until its DevTools endpoint answers


CDP_MAX_MESSAGE_BYTES = 256 << 20          # full-page screenshots arrive as one base64 frame


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


# ---- a page's report of a request, held against the browser's own record of it ----

def _confirm_key(url: Any) -> str:
    """The key a device's page report and the browser's record are matched on: the URL as
    _net_key_url says it, or for a URL with no host (data:, blob:) its scheme alone; "" for
    none (a relative URL, garbage), which matches nothing."""
    key = _net_key_url(url)
    if key or not isinstance(url, str):
        return key
    try:
        scheme = urllib.parse.urlsplit(url).scheme.lower()
    except ValueError:
        return ""
    return scheme + ":" if scheme else ""


def _initiator_stack(initiator: Any) -> Optional[str]:
    """The script stack the browser recorded as a request's initiator (CDP's, async parents included), as
    Chromium prints an Error's stack so _app_frame reads it; frames of scripts with no URL (what the
    daemon injected) left out; None when the browser recorded none (a parser's or a navigation's load)."""
    stack = initiator.get("stack") if isinstance(initiator, dict) else None
    lines: List[str] = []
    while isinstance(stack, dict) and len(lines) < 30:
        for f in stack.get("callFrames") or []:
            url = f.get("url") if isinstance(f, dict) else None
            if not isinstance(url, str) or not url or len(lines) >= 30:
                continue
            line, col = f.get("lineNumber"), f.get("columnNumber")
            if not isinstance(line, int) or not isinstance(col, int):
                continue
            fn = str(f.get("functionName") or "")[:80]
            where = "%s:%d:%d" % (url[:2000], line + 1, col + 1)  # the browser counts from 0, a stack from 1
            lines.append("    at %s (%s)" % (fn, where) if fn else "    at " + where)
        stack = stack.get("parent")
    return "Error\n" + "\n".join(lines) if lines else None


def _browser_values(data: dict, chain: dict, url: str) -> str:
    """A page's report of a request (`data` of a net.request) made to say what the browser's record
    of it (`chain`, _NetRecord) saw: the URL as the daemon resolved it, the final status (0 when it
    failed, with the browser's error), `ok` from that status, and whether it was redirected.  ->
    what the page said that the browser contradicts ("" for nothing).  The 304 of a revalidation
    is the 200 a page sees.  A call whose answer never reached the page (a beacon, an opaque
    answer) keeps the status it reported (0) and contradicts nothing; it is not ok when the
    browser's record says it failed or was answered 400 or more."""
    said, status, failed = data.get("status"), chain["status"] or 0, chain["error"] is not None
    codes = chain.get("codes") or []
    if data.get("initiator") != "document":  # who sent it: the browser's own stack, never the page's word
        data["stack"], data["stackFrom"] = chain.get("stack"), "browser"
    if data.get("initiator") == "document" and codes and codes[0] and not failed:
        # a load redirected: the browser saw the status the page cannot (a form post's 303), and where it led
        then_method, then_url = chain["hops"][-1]
        data.update(url=url, status=codes[0], statusKnown=True, statusFrom="browser", ok=200 <= status < 400,
                    redirected=True, finalStatus=status, finalUrl=then_url,
                    statusNote="answered %d, then %s %s %d" % (codes[0], then_method,
                                                                urllib.parse.urlsplit(then_url).path or "/", status))
        return ""
    if data.get("initiator") == "document" and (chain["redirects"] or data.get("redirected") or said is None):
        data["url"] = url  # a load redirected: its status stays hidden (_TabIntake._observe), as the page saw
        return ""
    if status == 304 and said == 200:
        status = 200
    ok = not failed and 200 <= status < 400
    unseen = not said and (data.get("oneWay") or data.get("opaque"))  # no status reached the page
    wrong = ""
    if isinstance(said, int) and said > 0 and said != status:
        wrong = "status %d, where the browser's record says %s" % (said, chain["error"] or status)
    elif data.get("ok") is True and not ok and not unseen:
        wrong = "ok: true, where the browser's record says %s" % (chain["error"] or status)
    if unseen:  # it stays a call the page saw no answer to, failed when the browser says so
        data.update(url=url, ok=data.get("ok") if ok else False)
    else:
        data.update(url=url, status=status, ok=ok)
    if chain["redirects"]:
        data["redirected"] = True
    if failed and not data.get("error"):
        data["error"] = chain["error"]
    return wrong


# ---- the browser: found, started with a fresh profile, spoken to over CDP ----

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
                        "fix RETICLE_BROWSER, then retry", code="browser_missing")
    for name in _BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    for raw in _BROWSER_PATHS.get(sys.platform, ()):
        path = os.path.expandvars(raw)
        if os.path.isfile(path):
            return path
    raise ToolError("No Chromium-family browser was found to start a device: %s, or set RETICLE_BROWSER to "
                    "the path of one." % _browser_install_hint(), "install a browser, then retry",
                    code="browser_missing")


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
        """Open the DevTools socket.  A connect that is cancelled (a spare closed while it starts) or
        outlived by close() closes the socket once it is made: none is left open behind the client."""
        made = asyncio.ensure_future(tornado.websocket.websocket_connect(
            tornado.httpclient.HTTPRequest(url, connect_timeout=timeout, request_timeout=timeout),
            max_message_size=CDP_MAX_MESSAGE_BYTES, ping_interval=None))
        try:
            ws = await asyncio.shield(made)
        except asyncio.CancelledError:
            made.add_done_callback(lambda f: f.result().close() if not f.cancelled() and f.exception() is None
                                   else None)
            raise
        if self.closed:
            ws.close()
            raise _CdpError("the DevTools connection was closed while it was being made")
        self._ws = ws
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
                                "check that the browser starts by hand with --headless", code="browser_failed")
            try:
                line = await asyncio.wait_for(self.proc.stderr.readline(), left)
            except asyncio.TimeoutError:
                continue
            if not line:
                raise ToolError("the browser %s exited while starting; its last output: %s" % (
                    self.exe, " | ".join(self.stderr_tail) or "(none)"),
                    "check that the browser starts by hand with --headless; set RETICLE_BROWSER to another one",
                                code="browser_failed")
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


def _remove_profile(path: str) -> None:
    """Remove a temporary profile; the browser's helpers may write for a moment after it exits."""
    for _ in range(10):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            return
        time.sleep(0.1)
