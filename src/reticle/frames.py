"""Stack frames and source maps.

Where in the app's code a request was sent from: the stack frames the page reports, parsed in
the formats of Chromium, Firefox and Safari, and mapped through the scripts' source maps, which are
fetched only from the page's true origin and kept within fixed memory bounds.
"""

from __future__ import annotations

import array
import asyncio
import base64
import bisect
import collections
import concurrent.futures
import json
import logging
import os
import re
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

import tornado.httpclient

from .constants import _emit, _log
from .events import _call_failed, _call_label
from .util import _origin_of


# ---- where the page called from: the app's own frame of a stack, mapped through the page's source map ----
# A request, a console error or an uncaught error the SDK records carries the stack of the call that made it
# (Chromium's lines: "    at saveProfile (http://127.0.0.1:5173/src/lib/api.ts?t=17:42:9)").  Its first frame
# of the app's own code names the sender or the logger: frames of installed packages, a dev server's own
# client, framework runtimes and Reticle are skipped.  The frame is mapped to the original file and line
# through the source map its script points to (Source Map revision 3, ECMA-426: `mappings` in Base64 VLQ),
# fetched from the page's own origin only; a map that cannot be fetched or read leaves the generated frame.

_STACK_FRAME = re.compile(r"^\s*at (?:async )?(?:(?P<fn>[^()]+?) \()?(?P<url>[a-z][a-z0-9+.-]*://\S+?)"
                          r":(?P<line>\d+):(?P<col>\d+)\)?\s*$", re.I)
# SpiderMonkey's (Firefox) and JavaScriptCore's (Safari) lines: "saveProfile@http://127.0.0.1:5173/src/api.ts:42:9",
# "async*onSave/<@...", "@..." for an anonymous function, "global code@..." for a script's top level
_STACK_FRAME_AT = re.compile(r"^\s*(?:async\*)?(?P<fn>[^@]*)@(?P<url>[a-z][a-z0-9+.-]*://\S+?)"
                             r":(?P<line>\d+):(?P<col>\d+)\s*$", re.I)
_LIBRARY_FRAME = re.compile(r"/node_modules/|/\.vite/deps/|/@vite/|/@react-refresh|/@fs/|/reticle\.js|/_next/"
                            r"static/chunks/(?:main|webpack|framework|polyfills|react-refresh|pages/_app)", re.I)
_FRAME_OWNERS = ("net.request", "console.error", "error.uncaught")


def _app_frame(stack: Any) -> Optional[dict]:
    """The first frame of the app's own code in a stack, {fn, url, line, col} (generated position), or None."""
    for raw in str(stack or "").split("\n")[:30]:
        m = _STACK_FRAME.match(raw) or _STACK_FRAME_AT.match(raw)
        if m and not _LIBRARY_FRAME.search(m.group("url")):
            fn = (m.group("fn") or "").strip().split("/<")[0]  # Firefox names an inner function outer/<
            fn = fn.split(" [as ")[0].rsplit(".", 1)[-1] if fn and fn not in ("<anonymous>", "global code") else ""
            return {"fn": fn[:80], "url": m.group("url")[:2000], "line": int(m.group("line")),
                    "col": int(m.group("col"))}
    return None


def _frame_file(name: str) -> str:
    """A frame's file as a person finds it in the project: a URL's path, a map's source without its
    scheme, leading ./ and ../, or query (webpack://app/./src/api.ts -> src/api.ts)."""
    name = re.sub(r"^[a-z][a-z0-9+.-]*://(?:[^/]*/)?", "", name.split("?", 1)[0].split("#", 1)[0], flags=re.I)
    name = re.sub(r"^\([^)]*\)/", "", name)  # webpack-internal:///(app-pages-browser)/./app/page.js
    while name.startswith(("./", "../", "/")):
        name = name[3:] if name.startswith("../") else name[2:] if name.startswith("./") else name[1:]
    return name[:300] or "/"  # a script in the page itself, at its root


def _frame_text(frame: dict, root: str = "") -> str:
    """"saveProfile at src/lib/api.ts:42": a frame as an answer names it (a file under the project's
    folder `root`, as an absolute path in a map or a component's mark, named from there)."""
    where = "%s:%d" % (_in_project(_frame_file(frame.get("file") or frame["url"]), root), frame["line"])
    return "%s at %s" % (frame["fn"], where) if frame.get("fn") else where


def _in_project(name: str, root: str) -> str:
    """`name` (a path without its leading /) relative to the project's folder when it lies under it."""
    base = root.strip("/").replace(os.sep, "/")
    return name[len(base) + 1:] if base and name.startswith(base + "/") else name


def _renderer_frame(d: dict) -> Optional[dict]:
    """The app frame of a message's component's creation stack (React's _debugStack), named by the
    component, or None."""
    frame = _app_frame(d["componentStack"]) if isinstance(d.get("componentStack"), str) else None
    if frame is not None and isinstance(d.get("component"), str) and d["component"]:
        frame["fn"] = d["component"][:80]
    return frame


def _renderer_text(d: dict, frame: Optional[dict], root: str = "") -> Optional[str]:
    """"ProfileForm at src/components/ProfileForm.vue": the component the SDK found marked as a message's
    renderer: its creation stack's app frame (`frame`, _renderer_frame), else its name and its file or
    file:line; None when it has none."""
    if frame is not None:
        return _frame_text(frame, root)
    name = d["component"][:80] if isinstance(d.get("component"), str) and d["component"] else ""
    file = _in_project(_frame_file(d["componentAt"]), root) if isinstance(d.get("componentAt"), str) else ""
    return " at ".join(x for x in (name, file) if x) or None


def _sender_note(d: dict) -> str:
    """", sent by saveProfile at src/lib/api.ts:42" for a request whose sender is known, else "": in a
    device from the browser's own initiator stack; with the script tag from the stack the page gave,
    which the answer says (a page can make its stacks say anything)."""
    if not d.get("at"):
        return ""
    return ", sent by %s%s" % (d["at"], "" if d.get("stackFrom") == "browser" else " (the page's stack)")


def _answered(d: dict) -> str:
    """"POST /api/save answered 500, sent by saveProfile at src/lib/api.ts:42"."""
    return "%s answered %s%s" % (_call_label(d), d.get("status") or d.get("error"), _sender_note(d))


_VLQ_DIGITS = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _vlq(segment: str) -> List[int]:
    """The Base64 VLQ values of one `mappings` segment; ValueError for a character or an end out of place."""
    out: List[int] = []
    value = shift = 0
    for ch in segment:
        digit = _VLQ_DIGITS.get(ch)
        if digit is None or shift > 60:
            raise ValueError("not a Base64 VLQ digit or a value too long: %r" % ch)
        value += (digit & 31) << shift
        if digit & 32:
            shift += 5
            continue
        out.append(-(value >> 1) if value & 1 else value >> 1)
        value = shift = 0
    if shift:
        raise ValueError("a VLQ value that does not end")
    return out


class _SourceMap:
    """One source map (revision 3), read into per-line segments for lookups by binary search: a line's
    generated columns in one array and (source, line, name) in another, four machine ints a segment;
    ValueError for what it cannot read (an index map with `sections`, a broken `mappings`) or a map of
    more than FRAME_MAP_SEGMENTS segments."""

    def __init__(self, doc: Any, base: str = "") -> None:
        """Read map `doc` (its JSON), its sources resolved against `base`, the map's own URL."""
        if not isinstance(doc, dict) or doc.get("version") != 3 or not isinstance(doc.get("mappings"), str):
            raise ValueError("not a revision 3 source map with `mappings`")
        root: str = doc["sourceRoot"] if isinstance(doc.get("sourceRoot"), str) else ""
        # a source is resolved against the map's own URL (a relative "api.ts" beside it)
        self.sources = [urllib.parse.urljoin(base, root + s) if isinstance(s, str) else "?"
                        for s in doc.get("sources") or []]
        self.names = [n if isinstance(n, str) else "" for n in doc.get("names") or []]
        self.cols: List["array.array[int]"] = []     # per generated line: the segments' columns, ascending
        self.places: List["array.array[int]"] = []   # per generated line: source, line, name of each segment
        self.segments = 0
        src = src_line = name = 0
        for text in doc["mappings"].split(";"):
            row: List[Tuple[int, int, int, int]] = []
            col = 0
            for seg in text.split(","):
                if not seg:
                    continue
                v = _vlq(seg)
                col += v[0]
                if len(v) >= 4:
                    src, src_line = src + v[1], src_line + v[2]
                    if len(v) >= 5:
                        name += v[4]
                    row.append((col, src, src_line, name if len(v) >= 5 else -1))
            self.segments += len(row)
            if self.segments > FRAME_MAP_SEGMENTS:
                raise ValueError("a source map of more than %d segments" % FRAME_MAP_SEGMENTS)
            row.sort()
            self.cols.append(array.array("q", (r[0] for r in row)))
            self.places.append(array.array("q", (x for r in row for x in r[1:])))

    def lookup(self, line: int, col: int) -> Optional[Tuple[str, int, str]]:
        """(source, original line, name) of a generated position (line and column 1-based), or None."""
        if not 0 < line <= len(self.cols):
            return None
        cols, places = self.cols[line - 1], self.places[line - 1]
        at = bisect.bisect_right(cols, col - 1) - 1   # the last segment starting at or before the column
        if at < 0:
            return None
        src, src_line, name = places[3 * at], places[3 * at + 1], places[3 * at + 2]
        if not 0 <= src < len(self.sources):
            return None
        return self.sources[src], src_line + 1, self.names[name] if 0 <= name < len(self.names) else ""


FRAME_SCRIPT_MAX = 4 << 20     # a script read for its source map reference, at most
FRAME_MAP_MAX = 8 << 20        # a source map, at most
FRAME_FETCH_S = 2.0            # one fetch of a script or a map, at most
FRAME_MAPS_KEPT = 128          # scripts whose map (or its absence) is remembered, and maps being read at once
FRAME_MAP_SEGMENTS = 500_000    # a source map of more segments is not read (its frames stay generated)
FRAME_SEGMENTS_KEPT = 1_500_000  # segments of all the maps kept together (about 33 bytes each): oldest go first
FRAME_WAIT_S = 1.5             # what a verdict waits, in all, for its frames to be mapped
# What the daemon fetches for a map: a script file by its extension, never a page (a GET of a page's URL,
# say /logout or a confirm link, could do something; a script in the page itself keeps its generated line),
# and the map it names by a .map file with no query; a path with `;` (servlet containers route /logout;.js
# to /logout) or an encoded separator is neither.
_SCRIPT_PATH = re.compile(r"\.(?:[mc]?js|jsx|tsx?|[mc]ts|vue|svelte|astro)$", re.I)
_MAP_PATH = re.compile(r"\.map$", re.I)
_SIDE_PATH = re.compile(r";|%(?:2f|3b|5c|00)|\\", re.I)


def _fetchable(url: str, origin: str, kind: "re.Pattern[str]", query: bool = True) -> bool:
    """Whether the daemon may GET `url` for a frame: on `origin`, its path a file of `kind` with no side
    path (`;`, an encoded separator), and a query only where `query` allows one (a script's cache buster)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return False
    return bool(origin) and _origin_of(url) == origin and bool(kind.search(parts.path)) \
        and not _SIDE_PATH.search(parts.path) and (query or not parts.query) and not parts.username


def _localhost_name(host: Optional[str]) -> bool:
    """A name under .localhost (staging.localhost), which browsers resolve to loopback themselves."""
    return bool(host) and str(host).lower().rstrip(".").endswith(".localhost")
_MAP_REFERENCE = re.compile(r"[#@]\s*sourceMappingURL=(\S+)\s*(?:\*/)?\s*$")


async def _fetch_text(url: str, cap: int, body: Optional[str] = None) -> Tuple[str, Any]:
    """GET `url` (POST `body` as JSON when given; no redirect, no credential, at most `cap` bytes and
    FRAME_FETCH_S): (text, headers); OSError for anything but a 200."""
    host = urllib.parse.urlsplit(url).hostname
    # a *.localhost name is reached on loopback, as the browser reaches it, never through DNS
    mapping = {host: "127.0.0.1"} if _localhost_name(host) else None
    client = tornado.httpclient.AsyncHTTPClient(force_instance=True, max_body_size=cap, hostname_mapping=mapping)
    try:
        resp = await client.fetch(tornado.httpclient.HTTPRequest(
            url, method="GET" if body is None else "POST", body=body, request_timeout=FRAME_FETCH_S,
            connect_timeout=FRAME_FETCH_S, follow_redirects=False,
            headers={"Accept": "*/*"} if body is None else {"Accept": "*/*", "Content-Type": "application/json"}),
            raise_error=False)
    finally:
        client.close()
    if resp.code != 200 or resp.body is None:
        raise OSError("%s answered %s" % (url[:200], resp.code))
    return resp.body.decode("utf-8", "replace"), resp.headers


class _Frames:
    """The source maps of the pages' scripts, each read once (kept for FRAME_MAPS_KEPT scripts), and the
    frames mapped through them.  Only a script of the page's own origin is read, and its map only there
    or inline (a data: URL); what cannot be fetched or read leaves the generated frame."""

    def __init__(self, root: str = "") -> None:
        self.root = root  # the project's folder: files under it are named from there
        self.maps: "collections.OrderedDict[str, Optional[_SourceMap]]" = collections.OrderedDict()
        self.loading: Dict[str, "asyncio.Future[Optional[_SourceMap]]"] = {}
        self.places: "collections.OrderedDict[str, Optional[dict]]" = collections.OrderedDict()  # Next.js dev's
        self.parser: Optional[concurrent.futures.ThreadPoolExecutor] = None

    async def place(self, origin: str, frame: dict) -> str:
        """The frame as an answer names it ("saveProfile at src/lib/api.ts:42"), mapped where it can be."""
        url = frame["url"].split("#", 1)[0]
        if url.startswith("webpack-internal:") and origin:
            return _frame_text(await self._next(origin, frame), self.root)
        sm = await self._map(url, origin) if _fetchable(url, origin, _SCRIPT_PATH) else None
        hit = sm.lookup(frame["line"], frame["col"]) if sm is not None else None
        if hit is not None:
            frame = dict(frame, file=hit[0], line=hit[1], fn=frame["fn"] or hit[2])
        return _frame_text(frame, self.root)

    async def _next(self, origin: str, frame: dict) -> dict:
        """A frame of webpack's eval'd modules (Next.js dev: its maps are inside the eval'd code, which
        no URL serves) mapped by the dev server's own frame mapper, the one its error overlay asks:
        GET /__nextjs_original-stack-frame (Next.js 15.1 and before), else POST .../frames (15.2 on)."""
        key = "%s %s:%s:%s" % (origin, frame["url"], frame["line"], frame["col"])
        if key not in self.places:
            self.places[key] = await self._ask_next(origin, frame)
            while len(self.places) > FRAME_MAPS_KEPT:
                self.places.popitem(last=False)
        got = self.places[key]
        return dict(frame, **got) if got is not None else frame

    async def _ask_next(self, origin: str, frame: dict) -> Optional[dict]:
        asked = {"file": frame["url"], "methodName": frame["fn"], "lineNumber": frame["line"], "column": frame["col"]}
        try:
            try:
                text, _ = await _fetch_text(origin + "/__nextjs_original-stack-frame?" + urllib.parse.urlencode(dict(
                    asked, isServer="false", isEdgeServer="false", isAppDirectory="true", errorMessage="")), 1 << 20)
                place = json.loads(text).get("originalStackFrame")
            except OSError:
                text, _ = await _fetch_text(origin + "/__nextjs_original-stack-frames", 1 << 20, json.dumps(
                    {"frames": [dict(asked, arguments=[])], "isServer": False, "isEdgeServer": False,
                     "isAppDirectory": True}))
                place = (json.loads(text)[0].get("value") or {}).get("originalStackFrame")
        except Exception as exc:  # noqa: BLE001 - a dev server that cannot say leaves the generated frame
            _emit(_log, logging.DEBUG, "next_frame_unmapped", url=frame["url"][:200], why=repr(exc)[:200])
            return None
        if isinstance(place, dict) and isinstance(place.get("file"), str) and isinstance(place.get("lineNumber"), int) \
                and place["file"] != frame["url"]:  # the frame given back as it came: nothing mapped it
            return {"file": place["file"][:300], "line": place["lineNumber"]}
        return None

    async def _map(self, url: str, origin: str) -> Optional[_SourceMap]:
        """The script's map, read once: a read is filed when it ends, whether or not a verdict still waits
        for it (one that outlives FRAME_WAIT_S is kept for the next), and counted against the caps while it
        runs; past FRAME_MAPS_KEPT reads at once, a frame stays generated rather than start another."""
        if url in self.maps:
            self.maps.move_to_end(url)
            return self.maps[url]
        fut = self.loading.get(url)
        if fut is None:
            if len(self.loading) >= FRAME_MAPS_KEPT:
                return None
            fut = self.loading[url] = asyncio.ensure_future(self._load(url, origin))
            fut.add_done_callback(lambda done: self._file(url, done))
        return await asyncio.shield(fut)

    def _file(self, url: str, done: "asyncio.Future[Optional[_SourceMap]]") -> None:
        """Keep a finished read (its map, or None) in the cache, oldest out past either cap."""
        self.loading.pop(url, None)
        sm = None if done.cancelled() or done.exception() is not None else done.result()
        self.maps[url] = sm
        self.maps.move_to_end(url)
        while len(self.maps) > FRAME_MAPS_KEPT or (len(self.maps) > 1 and self.kept_segments() > FRAME_SEGMENTS_KEPT):
            self.maps.popitem(last=False)

    def kept_segments(self) -> int:
        """Segments of every map kept (the memory the cache holds, about 32 bytes each)."""
        return sum(sm.segments for sm in self.maps.values() if sm is not None)

    async def _load(self, url: str, origin: str) -> Optional[_SourceMap]:
        try:
            body, headers = await _fetch_text(url, FRAME_SCRIPT_MAX)
            tail = [m.group(1) for m in map(_MAP_REFERENCE.search, body[-200_000:].splitlines()[-20:]) if m]
            ref = headers.get("SourceMap") or headers.get("X-SourceMap") or (tail[-1] if tail else "")
            if not ref:
                return None
            where = url
            if ref.startswith("data:"):
                meta, _, data = ref.partition(",")
                text = (base64.b64decode(data).decode("utf-8") if meta.endswith(";base64")
                        else urllib.parse.unquote(data))
            else:
                where = urllib.parse.urljoin(url, ref)
                if not _fetchable(where, origin, _MAP_PATH, query=False):
                    return None
                text, _ = await _fetch_text(where, FRAME_MAP_MAX)
            if self.parser is None:  # one map parsed at a time, off the loop: CPU and memory stay bounded
                self.parser = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="reticle-maps")
            return await asyncio.get_running_loop().run_in_executor(self.parser,
                                                                    lambda: _SourceMap(json.loads(text), where))
        except Exception as exc:  # noqa: BLE001 - any map Reticle cannot fetch or read leaves the generated frame
            _emit(_log, logging.DEBUG, "source_map_unread", url=url[:200], why=repr(exc)[:200])
            return None


async def _locate(frames: Optional[_Frames], origin: str, window: List[dict], every_call: bool = False) -> None:
    """Name where each failed request, console error and uncaught error of the window was sent or
    logged from, and which component rendered each message (`at`): its stack's app frame mapped
    through the page's source map, within FRAME_WAIT_S in all; what is not mapped by then keeps its
    generated frame (`every_call`: every request's sender).  The Observe stage calls it, so Judge reads `at`;
    an `at` the page sent is replaced."""
    todo: List[Tuple[dict, dict]] = []
    root = frames.root if frames is not None else ""
    for e in window:
        d = e["data"]
        if not isinstance(d, dict) or e["type"] not in _FRAME_OWNERS + ("ui.alert", "ui.status") or (
                e["type"] == "net.request" and not (every_call or _call_failed(d))):
            continue
        d.pop("at", None)  # never the page's own word: made here, from its stack, each time
        if e["type"] in _FRAME_OWNERS and isinstance(d.get("stack"), str):
            frame = _app_frame(d["stack"])
            d["at"] = _frame_text(frame, root) if frame is not None else None
        elif e["type"] in ("ui.alert", "ui.status") and (d.get("component") or d.get("componentAt")
                                                          or d.get("componentStack")):
            frame = _renderer_frame(d)
            d["at"] = _renderer_text(d, frame, root)
        else:
            continue
        if frame is not None and frames is not None and len(todo) < 20:
            todo.append((d, frame))
    if not todo or frames is None:
        return

    async def one(d: dict, frame: dict) -> None:
        d["at"] = await frames.place(origin, frame)
    try:
        await asyncio.wait_for(asyncio.gather(*(one(d, f) for d, f in todo)), FRAME_WAIT_S)
    except asyncio.TimeoutError:
        pass
